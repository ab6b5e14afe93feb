"""A first run that visibly learns: GRPO with TRL against a served environment, on the CPU.

    python examples/learn/learn.py --seed 0 --out learn-runs/seed-0

Nothing is downloaded. A tiny Llama (two layers, a 46-token character vocabulary, both built
here) learns to answer "say digits above five." with digits above five. The environment is a
real openenv server on a free port; TRL's ``GRPOTrainer`` gets its batches from the runtime's
``build_rollout_func``, which plays each episode against that server and asks a model server
for every reply. The model server is a small OpenAI-compatible app in this file that samples
from the very model TRL is training (the same object, so every rollout uses the latest
weights) and reports the token ids and log-probabilities it sampled, as vLLM does.

Writes to ``--out``: ``metrics.jsonl`` (one line per logged step), ``reward.png`` (the reward
curve) and ``summary.json`` (mean reward of the first and last ten steps, wall time).
Needs the ``train`` extra (torch, transformers, trl, datasets; matplotlib for the plot).
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import torch
from datasets import Dataset
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route
from tokenizers import Tokenizer, decoders, models
from transformers import (
    LlamaConfig,
    LlamaForCausalLM,
    PreTrainedTokenizerFast,
    PrinterCallback,
    TrainerCallback,
)
from trl import GRPOConfig, GRPOTrainer

from openenv_runtime import Action, Environment, Observation, State, create_app
from openenv_runtime.rollouts import RolloutFunc, build_rollout_func
from openenv_runtime.testing import running_server

TASK = "say digits above five."
PROMPTS = ["hello.", "your turn.", "go on.", "what do you say?"]
TARGET = set("6789")
SPECIALS = ["<|pad|>", "<|bos|>", "<|im_start|>", "<|im_end|>", "<|unk|>"]
CHARACTERS = "abcdefghijklmnopqrstuvwxyz0123456789 .,?\n"
CHAT_TEMPLATE = (
    "<|bos|>{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


# -- the environment ------------------------------------------------------------------------
class SayAction(Action):
    text: str


class TaskObservation(Observation):
    task: str = ""


class DigitsEnvironment(Environment[SayAction, TaskObservation, State]):
    """One turn: the reward is the fraction of the reply's characters that are digits above 5."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self) -> None:
        self._state = State()

    def reset(
        self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any
    ) -> TaskObservation:
        self._state = State(episode_id=episode_id)
        return TaskObservation(task=TASK)

    def step(self, action: SayAction, **kwargs: Any) -> TaskObservation:
        self._state.step_count += 1
        text = action.text
        reward = sum(c in TARGET for c in text) / len(text) if text else 0.0
        return TaskObservation(reward=reward, done=True)

    @property
    def state(self) -> State:
        return self._state


# -- the model and its tokenizer, built in code ---------------------------------------------
def build_tokenizer() -> PreTrainedTokenizerFast:
    """One token per character of ``CHARACTERS``, plus the chat template's special tokens."""
    vocab = {token: i for i, token in enumerate([*SPECIALS, *CHARACTERS])}
    core = Tokenizer(models.BPE(vocab=vocab, merges=[], unk_token="<|unk|>"))
    core.decoder = decoders.Fuse()
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=core,
        pad_token="<|pad|>",
        bos_token="<|bos|>",
        eos_token="<|im_end|>",
        unk_token="<|unk|>",
        additional_special_tokens=["<|im_start|>"],
        padding_side="left",
    )
    tokenizer.chat_template = CHAT_TEMPLATE
    return tokenizer


def build_model(tokenizer: PreTrainedTokenizerFast, seed: int) -> LlamaForCausalLM:
    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=256,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
    )
    return LlamaForCausalLM(config)


# -- the model server: OpenAI chat completions with the sampled tokens, as vLLM reports them --
def model_server(model: LlamaForCausalLM, tokenizer: PreTrainedTokenizerFast, seed: int) -> Any:
    """An ASGI app answering ``POST /v1/chat/completions`` by sampling from ``model``.

    The answer carries ``prompt_token_ids``, ``choices[0].token_ids`` and each sampled token's
    log-probability (vLLM's fields), which the rollouts hand to TRL unchanged. A request's
    ``seed`` (the rollouts send one per episode) and how often that seed came before pick the
    random stream, so a run is repeatable whatever order the requests arrive in.
    """
    calls: Counter[int] = Counter()

    async def chat(request: Request) -> JSONResponse:
        body = await request.json()
        prompt = tokenizer.apply_chat_template(
            body["messages"], add_generation_prompt=True, tokenize=True, return_dict=False
        )
        request_seed = int(body.get("seed") or 0)
        generator = torch.Generator().manual_seed(
            seed * 1_000_003 + request_seed * 997 + calls[request_seed]
        )
        calls[request_seed] += 1
        ids, logprobs = sample(
            model,
            list(prompt),
            max_tokens=int(body.get("max_tokens") or 16),
            temperature=float(body.get("temperature") or 1.0),
            stop=tokenizer.eos_token_id,
            generator=generator,
        )
        finish = "stop" if ids and ids[-1] == tokenizer.eos_token_id else "length"
        text = tokenizer.decode(ids, skip_special_tokens=True)
        choice = {
            "index": 0,
            "message": {"role": "assistant", "content": text},
            "finish_reason": finish,
            "token_ids": ids,
            "logprobs": {
                "content": [
                    {"token": str(t), "logprob": lp} for t, lp in zip(ids, logprobs, strict=True)
                ]
            },
        }
        return JSONResponse(
            {
                "object": "chat.completion",
                "model": body.get("model"),
                "choices": [choice],
                "prompt_token_ids": list(prompt),
            }
        )

    return Starlette(routes=[Route("/v1/chat/completions", chat, methods=["POST"])])


@torch.no_grad()
def sample(
    model: LlamaForCausalLM,
    prompt: list[int],
    *,
    max_tokens: int,
    temperature: float,
    stop: int,
    generator: torch.Generator,
) -> tuple[list[int], list[float]]:
    """Sample up to ``max_tokens`` tokens after ``prompt`` (ending at ``stop``), with the
    log-probability of each under the distribution it was drawn from."""
    ids: list[int] = []
    logprobs: list[float] = []
    inputs = torch.tensor([prompt])
    past = None
    for _ in range(max_tokens):
        out = model(input_ids=inputs, past_key_values=past, use_cache=True)
        past = out.past_key_values
        logp = torch.log_softmax(out.logits[0, -1].float() / temperature, dim=-1)
        token = int(torch.multinomial(logp.exp(), 1, generator=generator))
        ids.append(token)
        logprobs.append(float(logp[token]))
        if token == stop:
            break
        inputs = torch.tensor([[token]])
    return ids, logprobs


# -- training -------------------------------------------------------------------------------
class MetricsLog(TrainerCallback):
    """Appends each logged step's metrics to a JSON-lines file, with the wall time so far and
    the step's first four replies, and prints a line per step."""

    def __init__(self, path: Path, started: float, rollout_func: RolloutFunc) -> None:
        self.path = path
        self.started = started
        self.rollout_func = rollout_func
        path.write_text("", encoding="utf-8")

    def on_log(
        self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None, **kwargs: Any
    ) -> None:
        if not logs or "reward" not in logs:
            return
        record: dict[str, Any] = {
            "step": state.global_step,
            "seconds": round(time.monotonic() - self.started, 3),
        }
        record.update({k: v for k, v in logs.items() if isinstance(v, int | float)})
        episodes = self.rollout_func.last_episodes[:4]  # the episodes of this step
        record["replies"] = [e.messages[-1]["content"] for e in episodes if e.turns]
        with self.path.open("a", encoding="utf-8") as out:
            out.write(json.dumps(record, sort_keys=True) + "\n")
        replies = "  ".join(json.dumps(r) for r in record["replies"])
        print(
            f"step {state.global_step:4d}  {record['seconds']:6.1f} s  reward {logs['reward']:.3f}  {replies}"
        )


def env_reward(completions: list[Any], env_reward: list[float], **kwargs: Any) -> list[float]:
    """The reward TRL optimises: each episode's total reward, as the environment gave it."""
    return list(env_reward)


def train(seed: int, steps: int, out: Path, learning_rate: float) -> dict[str, Any]:
    """Train for ``steps`` GRPO steps; write the metrics, curve and summary to ``out``."""
    started = time.monotonic()
    out.mkdir(parents=True, exist_ok=True)
    torch.set_num_threads(1)  # a model this small gains nothing from more threads
    tokenizer = build_tokenizer()
    model = build_model(tokenizer, seed)
    metrics = out / "metrics.jsonl"
    env_app = create_app(DigitsEnvironment, SayAction, TaskObservation)
    with (
        running_server(env_app) as env_url,
        running_server(model_server(model, tokenizer, seed)) as llm_url,
        tempfile.TemporaryDirectory() as scratch,
    ):
        rollout_func = build_rollout_func(
            env_url,
            llm=llm_url,
            model="tiny-llama",
            max_turns=1,
            max_tokens=8,
            temperature=1.0,
            seed=seed,
        )
        try:
            trainer = GRPOTrainer(
                model=model,
                reward_funcs=env_reward,
                processing_class=tokenizer,
                rollout_func=rollout_func,
                train_dataset=Dataset.from_dict({"prompt": PROMPTS * 64}),
                args=GRPOConfig(
                    output_dir=scratch,
                    per_device_train_batch_size=16,
                    num_generations=8,
                    max_completion_length=8,
                    max_steps=steps,
                    learning_rate=learning_rate,
                    logging_steps=1,
                    seed=seed,
                    report_to="none",
                    save_strategy="no",
                    use_cpu=True,
                    bf16=False,
                    disable_tqdm=True,
                    gradient_checkpointing=False,  # saves nothing on a model this small
                ),
                callbacks=[MetricsLog(metrics, started, rollout_func)],
            )
            trainer.remove_callback(PrinterCallback)  # MetricsLog prints a shorter line
            trainer.train()
        finally:
            rollout_func.close()
    records = [json.loads(line) for line in metrics.read_text(encoding="utf-8").splitlines()]
    rewards = [r["reward"] for r in records]
    summary = {
        "seed": seed,
        "steps": len(records),
        "learning_rate": learning_rate,
        "first_10_mean": sum(rewards[:10]) / len(rewards[:10]),
        "last_10_mean": sum(rewards[-10:]) / len(rewards[-10:]),
        "wall_seconds": round(time.monotonic() - started, 1),
    }
    summary["gain"] = summary["last_10_mean"] - summary["first_10_mean"]
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    plot(records, out / "reward.png", f"seed {seed}")
    return summary


def plot(records: list[dict[str, Any]], path: Path, label: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.5))
    ax.plot([r["step"] for r in records], [r["reward"] for r in records], label=label)
    ax.set(xlabel="GRPO step", ylabel="mean reward", ylim=(0, 1), title="Reward per step")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--steps", type=int, default=60, help="GRPO steps (16 episodes each)")
    parser.add_argument("--learning-rate", type=float, default=1e-2)
    parser.add_argument("--out", type=Path, help="output folder (default learn-runs/seed-N)")
    args = parser.parse_args()
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")  # rollout_func is experimental in TRL
    summary = train(
        args.seed, args.steps, args.out or Path(f"learn-runs/seed-{args.seed}"), args.learning_rate
    )
    print(json.dumps(summary))


if __name__ == "__main__":
    main()

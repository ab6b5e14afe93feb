"""``openenv collect`` / ``openenv eval`` against real servers: datasets, resume after SIGKILL, Hub."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from openenv_cli.collect.store import read_rows
from openenv_runtime.testing import free_port
from tests.support.servers import REPO, server_process, wait_until

pytestmark = pytest.mark.integration

POLICY = "tests.fixtures.collect_policy:act"
# This checkout first, then the caller's path (a worktree's runtime, say).
PYTHONPATH = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)


@pytest.fixture(scope="module")
def echo_url() -> Any:
    port = free_port()
    with server_process("tests.fixtures.echo_app:app", port, MAX_CONCURRENT_ENVS="64"):
        yield f"http://127.0.0.1:{port}"


def openenv(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "openenv_cli", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        env=env or {**os.environ, "PYTHONPATH": PYTHONPATH},
    )


def by_id(out: Path) -> dict[str, dict[str, Any]]:
    rows = list(read_rows(out))
    ids = [r["episode_id"] for r in rows]
    assert len(ids) == len(set(ids)), "duplicate episodes"
    return {r["episode_id"]: r for r in rows}


def test_collect_writes_a_dataset_that_loads(echo_url: str, tmp_path: Path) -> None:
    datasets = pytest.importorskip("datasets")
    out = tmp_path / "run"
    done = openenv(
        "collect",
        echo_url,
        "--policy",
        "random",
        "-n",
        "12",
        "-c",
        "4",
        "--max-turns",
        "3",
        "--group-size",
        "3",
        "-o",
        str(out),
        "--json",
    )
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["written"] == 12 and summary["errors"] == 0
    loaded = datasets.load_dataset(str(out))["train"]
    assert loaded.num_rows == 12
    assert set(loaded["seed"]) == {0, 1, 2, 3}
    card = (out / "README.md").read_text()
    assert card.startswith("---") and "EchoEnvironment" in card
    provenance = json.loads((out / "run.json").read_text())["provenance"]
    assert provenance["environment"]["name"] == "EchoEnvironment"
    assert provenance["toolkit_version"]


def test_jsonl_format_loads_too(echo_url: str, tmp_path: Path) -> None:
    datasets = pytest.importorskip("datasets")
    out = tmp_path / "run"
    done = openenv(
        "collect", echo_url, "--policy", POLICY, "-n", "5", "--format", "jsonl", "-o", str(out)
    )
    assert done.returncode == 0, done.stderr
    assert datasets.load_dataset(str(out))["train"].num_rows == 5


def test_resume_after_sigkill_has_no_duplicate_and_no_missing(
    echo_url: str, tmp_path: Path
) -> None:
    episodes = 120
    args = [
        "collect",
        echo_url,
        "--policy",
        POLICY,
        "-n",
        str(episodes),
        "-c",
        "4",
        "--max-turns",
        "4",
        "--shard-size",
        "3",
    ]
    reference = tmp_path / "whole"
    assert openenv(*args, "-o", str(reference)).returncode == 0
    out = tmp_path / "killed"
    rng = random.Random(5)
    for attempt in range(3):
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "openenv_cli",
                *args,
                "-o",
                str(out),
                *(["--resume"] if attempt else []),
            ],
            cwd=REPO,
            env={**os.environ, "PYTHONPATH": PYTHONPATH},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wait_until(lambda: (out / "data").is_dir(), timeout=30)
        time.sleep(rng.uniform(0.3, 1.5))
        process.send_signal(signal.SIGKILL)
        process.wait(10)
    finished = openenv(*args, "-o", str(out), "--resume", "--json")
    assert finished.returncode == 0, finished.stderr
    got, want = by_id(out), by_id(reference)
    assert sorted(got) == sorted(want)
    for episode_id, row in want.items():  # same seeds, deterministic policy: same episodes
        assert got[episode_id]["actions"] == row["actions"]
        assert got[episode_id]["rewards"] == row["rewards"]


def test_resume_with_other_options_is_refused(echo_url: str, tmp_path: Path) -> None:
    out = tmp_path / "run"
    assert (
        openenv("collect", echo_url, "--policy", POLICY, "-n", "2", "-o", str(out)).returncode == 0
    )
    again = openenv("collect", echo_url, "--policy", POLICY, "-n", "3", "-o", str(out), "--resume")
    assert again.returncode == 2
    assert "episodes: 2 -> 3" in again.stderr
    plain = openenv("collect", echo_url, "--policy", POLICY, "-n", "2", "-o", str(out))
    assert plain.returncode == 2 and "--resume" in plain.stderr


def test_a_target_that_is_down_says_so(tmp_path: Path) -> None:
    done = openenv(
        "collect",
        f"http://127.0.0.1:{free_port()}",
        "--policy",
        "random",
        "-o",
        str(tmp_path / "o"),
    )
    assert done.returncode == 1
    assert "did not answer" in done.stderr


def test_a_failing_policy_fails_the_run_unless_accepted(echo_url: str, tmp_path: Path) -> None:
    out = tmp_path / "run"
    done = openenv(
        "collect",
        echo_url,
        "--policy",
        "tests.fixtures.collect_policy:broken",
        "-n",
        "3",
        "-o",
        str(out),
    )
    assert done.returncode == 1
    assert "3 of 3 episodes failed" in done.stderr and "policy (3)" in done.stderr
    assert "always fails" in done.stderr and not out.exists()
    accepted = openenv(
        "collect",
        echo_url,
        "--policy",
        "tests.fixtures.collect_policy:broken",
        "-n",
        "3",
        "-o",
        str(out),
        "--max-error-rate",
        "1",
    )
    assert accepted.returncode == 0, accepted.stderr
    rows = by_id(out)
    assert len(rows) == 3
    assert all(r["error_kind"] == "policy" and "always fails" in r["error"] for r in rows.values())


def test_eval_report_is_deterministic_and_complete(echo_url: str, tmp_path: Path) -> None:
    out = tmp_path / "eval"
    done = openenv(
        "eval",
        echo_url,
        "--policy",
        POLICY,
        "-n",
        "8",
        "--k",
        "1,2,4",
        "--max-turns",
        "3",
        "--success-threshold",
        "0.5",
        "-o",
        str(out),
    )
    assert done.returncode == 0, done.stderr
    report = json.loads((out / "report.json").read_text())
    for key in ("mean_reward", "ci95", "success_rate", "pass_at_k", "latency_s", "errors"):
        assert key in report
    assert set(report["pass_at_k"]) == {"1", "2", "4"}
    assert "<img" in (out / "report.html").read_text()
    again = openenv(
        "eval",
        "--from",
        str(out),
        "--k",
        "1,2,4",
        "--success-threshold",
        "0.5",
        "--report",
        "json",
        "--report-dir",
        str(tmp_path / "again"),
    )
    assert again.returncode == 0, again.stderr
    assert (tmp_path / "again" / "report.json").read_bytes() == (out / "report.json").read_bytes()
    compared = openenv("eval", "--compare", str(out), str(tmp_path / "again"), "--json")
    assert json.loads(compared.stdout)["mean_reward"]["difference"] == 0.0


@pytest.mark.hub
def test_push_to_hub_uploads_a_dataset_repo(echo_url: str, tmp_path: Path) -> None:
    from tests.support.hub_server import ALICE_TOKEN, running_hub

    out = tmp_path / "run"
    with running_hub() as hub:
        done = openenv(
            "collect",
            echo_url,
            "--policy",
            POLICY,
            "-n",
            "4",
            "-o",
            str(out),
            "--push-to-hub",
            "alice/echo-episodes",
            "--private",
            env={
                **os.environ,
                "PYTHONPATH": PYTHONPATH,
                "HF_ENDPOINT": hub.url,
                "HF_TOKEN": ALICE_TOKEN,
                "HF_HOME": str(tmp_path / "hf"),
            },
        )
        assert done.returncode == 0, done.stderr
        repo = hub.state.repo("alice/echo-episodes", kind="dataset")
        assert repo.private
        names = set(repo.files)
        assert "README.md" in names and "run.json" in names
        assert any(n.startswith("data/shard-") for n in names)
        assert ALICE_TOKEN not in done.stdout + done.stderr


def test_model_policy_records_the_sampled_tokens(echo_url: str, tmp_path: Path) -> None:
    from openenv_runtime.testing import StubLLM

    stub = StubLLM(record=True)
    out = tmp_path / "run"
    with stub.serve() as llm:
        done = openenv(
            "collect",
            echo_url,
            "--llm",
            llm,
            "--model",
            "stub-model",
            "-n",
            "6",
            "-c",
            "3",
            "--max-turns",
            "3",
            "--tokens",
            "--temperature",
            "0",
            "-o",
            str(out),
            "--json",
        )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["errors"] == 0
    assert stub.sampled is not None
    sampled = {tuple(ids) for ids, _ in stub.sampled.values()}
    for row in by_id(out).values():
        assert row["num_steps"] == 3 and not row["token_drift"]
        mask, ids, logprobs = row["env_mask"], row["completion_ids"], row["logprobs"]
        assert len(mask) == len(ids) == len(logprobs) and sum(mask) > 0
        # Every run of mask-1 tokens is exactly one completion the stand-in sampled.
        runs, current = [], []
        for token, bit in zip(ids, mask, strict=True):
            if bit:
                current.append(token)
            elif current:
                runs.append(tuple(current))
                current = []
        runs += [tuple(current)] if current else []
        assert len(runs) == 3 and all(run in sampled for run in runs)
        assert all(lp == 0.0 for lp, bit in zip(logprobs, mask, strict=True) if not bit)


def test_a_model_server_without_token_ids_stops_the_run(echo_url: str, tmp_path: Path) -> None:
    from openenv_runtime.testing import StubLLM

    out = tmp_path / "run"
    with StubLLM(token_ids=False).serve() as llm:
        done = openenv(
            "collect",
            echo_url,
            "--llm",
            llm,
            "--model",
            "stub-model",
            "-n",
            "2",
            "--tokens",
            "-o",
            str(out),
            "--json",
        )
    assert done.returncode == 1
    assert "model:no_token_ids" in done.stderr and "vLLM" in done.stderr
    assert not out.exists()


def test_a_failing_model_server_marks_episodes_and_the_run_goes_on(
    echo_url: str, tmp_path: Path
) -> None:
    from openenv_runtime.testing import StubLLM

    stub = StubLLM()
    stub.fail_next(6, 503)  # the client retries twice: two calls fail for good
    out = tmp_path / "run"
    with stub.serve() as llm:
        done = openenv(
            "collect",
            echo_url,
            "--llm",
            llm,
            "--model",
            "stub-model",
            "-n",
            "4",
            "-c",
            "1",
            "--max-turns",
            "2",
            "-o",
            str(out),
            "--json",
            "--timeout",
            "10",
        )
    assert done.returncode == 0, done.stderr
    rows = by_id(out)
    assert len(rows) == 4
    failed = [r for r in rows.values() if r["error"]]
    assert failed and all(r["error_kind"] == "model:http_error" for r in failed)
    assert any(not r["error"] and r["num_steps"] == 2 for r in rows.values())


def _model_run(echo_url: str, llm: str, model: str, out: Path, *extra: str) -> Any:
    return openenv(
        "collect",
        echo_url,
        "--llm",
        llm,
        "--model",
        model,
        "-n",
        "6",
        "-c",
        "2",
        "--max-turns",
        "2",
        "-o",
        str(out),
        "--json",
        *extra,
    )


def test_a_model_name_the_server_does_not_serve_fails_and_writes_nothing(
    echo_url: str, tmp_path: Path
) -> None:
    from openenv_runtime.testing import StubLLM

    out = tmp_path / "run"
    with StubLLM(model="served", check_model=True).serve() as llm:
        wrong = _model_run(echo_url, llm, "typo", out)
        assert wrong.returncode == 1
        assert "model:not_found" in wrong.stderr and "`typo` does not exist" in wrong.stderr
        assert "Nothing was written" in wrong.stderr and not out.exists()
        fixed = _model_run(echo_url, llm, "served", out)  # no --resume, no folder to remove
    assert fixed.returncode == 0, fixed.stderr
    assert json.loads(fixed.stdout)["errors"] == 0 and len(by_id(out)) == 6


def test_a_model_server_that_is_down_fails_the_run(echo_url: str, tmp_path: Path) -> None:
    out = tmp_path / "run"
    done = _model_run(echo_url, f"http://127.0.0.1:{free_port()}", "m", out)
    assert done.returncode == 1
    assert "model:unreachable" in done.stderr and "start the server" in done.stderr
    assert not out.exists()


def test_eval_fails_on_a_wrong_model_name_without_a_report(echo_url: str, tmp_path: Path) -> None:
    from openenv_runtime.testing import StubLLM

    out = tmp_path / "eval"
    with StubLLM(model="served", check_model=True).serve() as llm:
        done = openenv("eval", echo_url, "--llm", llm, "--model", "typo", "-n", "4", "-o", str(out))
    assert done.returncode == 1
    assert "model:not_found" in done.stderr and not out.exists()


def test_resume_keeps_the_card_over_every_row(echo_url: str, tmp_path: Path) -> None:
    out = tmp_path / "run"
    args = ["collect", echo_url, "--policy", POLICY, "-n", "4", "-c", "1", "--shard-size", "1"]
    args += ["--max-turns", "3", "-o", str(out), "--format", "jsonl"]
    assert openenv(*args).returncode == 0
    card = (out / "README.md").read_bytes()
    rewards = [r["total_reward"] for r in by_id(out).values()]
    mean = sum(rewards) / len(rewards)
    assert f"4 episodes, mean total reward {mean:.4f}" in card.decode() and mean > 0
    shards = {p.name: p.read_bytes() for p in (out / "data").iterdir()}
    finished = openenv(*args, "--resume")  # nothing left to run: nothing changes
    assert finished.returncode == 0, finished.stderr
    assert (out / "README.md").read_bytes() == card
    assert {p.name: p.read_bytes() for p in (out / "data").iterdir()} == shards
    for name in sorted(shards)[2:]:  # as if the run had died after two episodes
        (out / "data" / name).unlink()
    resumed = openenv(*args, "--resume", "--json")
    assert resumed.returncode == 0, resumed.stderr
    summary = json.loads(resumed.stdout)
    assert summary["written"] == 2 and summary["mean_reward"] == round(mean, 6)
    assert summary["mean_reward_over_episodes"] == 4  # the two resumed and the two kept
    assert (out / "README.md").read_bytes() == card
    for name in sorted(shards)[2:]:
        (out / "data" / name).unlink()
    said = openenv(*args, "--resume").stdout
    assert f"mean reward {mean:.4f} over all 4 episodes in the dataset" in " ".join(said.split())


def test_tasks_and_system_prompt_from_local_files(echo_url: str, tmp_path: Path) -> None:
    from openenv_runtime.testing import StubLLM

    dataset = tmp_path / "tasks" / "data"
    dataset.mkdir(parents=True)
    (dataset / "train.jsonl").write_text('{"task_id": "alpha"}\n{"task_id": "beta"}\n')
    prompt = tmp_path / "system.md"
    prompt.write_text("You are terse.")
    out = tmp_path / "run"
    stub = StubLLM()
    with stub.serve() as llm:
        done = _model_run(
            echo_url,
            llm,
            "stub-model",
            out,
            "--tasks",
            str(tmp_path / "tasks"),
            "--system-prompt",
            str(prompt),
        )
    assert done.returncode == 0, done.stderr
    assert {r["messages"][0]["content"] for r in stub.requests} == {"You are terse."}
    assert all(r["messages"][0]["role"] == "system" for r in stub.requests)
    rows = by_id(out)
    assert [rows[k]["task_id"] for k in sorted(rows)] == ["alpha", "beta"] * 3
    options = json.loads((out / "run.json").read_text())["options"]
    assert options["system_prompt"] == "You are terse."
    assert options["tasks"] == ["alpha", "beta"]

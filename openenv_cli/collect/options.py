"""Options ``openenv collect`` and ``openenv eval`` share, declared once."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from openenv_cli.targets import TARGET_HELP

Targets = Annotated[
    list[str] | None,
    typer.Argument(
        help=TARGET_HELP + " Several servers: several URLs.",
        show_default=False,
        metavar="TARGET...",
    ),
]
Llm = Annotated[
    str | None, typer.Option("--llm", help="OpenAI-compatible base URL of the model server.")
]
Model = Annotated[str | None, typer.Option("--model", help="Model name to ask.")]
PolicyOpt = Annotated[
    str | None,
    typer.Option(
        "--policy",
        help="model (default with --llm), random (valid actions from the schema), or module:function.",
    ),
]
Episodes = Annotated[int, typer.Option("--episodes", "-n", min=1, help="Episodes to run.")]
Concurrency = Annotated[int, typer.Option("--concurrency", "-c", min=1, help="Episodes at once.")]
MaxTurns = Annotated[int, typer.Option("--max-turns", min=1, help="Policy turns per episode.")]
Seed = Annotated[int, typer.Option("--seed", help="Seed of the first group; group g gets seed+g.")]
Out = Annotated[Path, typer.Option("--out", "-o", help="Output folder of the episodes.")]
Temperature = Annotated[float, typer.Option("--temperature", help="Sampling temperature.")]
TopP = Annotated[float, typer.Option("--top-p", help="Nucleus sampling.")]
MaxTokens = Annotated[int, typer.Option("--max-tokens", help="Tokens per model reply at most.")]
StepTimeout = Annotated[
    float, typer.Option("--timeout", help="Seconds allowed for each reset, step or model call.")
]
MaxErrorRate = Annotated[
    float | None,
    typer.Option(
        "--max-error-rate",
        min=0.0,
        max=1.0,
        show_default=False,
        help="Fail (exit 1, the first errors shown by kind) when more than this fraction of "
        "the episodes fail (default: the rollouts' openenv_runtime.failures."
        "DEFAULT_MAX_ERROR_RATE, half). A model server that does not serve --model, refuses "
        "the key, cannot be reached or reports no token ids stops the run at once.",
    ),
]
SystemPrompt = Annotated[
    str | None,
    typer.Option(
        "--system-prompt",
        help="The system message of every model conversation: the text, or a file holding it.",
        show_default=False,
    ),
]
Resume = Annotated[bool, typer.Option("--resume", help="Finish the run in --out.")]
Json = Annotated[bool, typer.Option("--json", help="Print the summary as JSON.")]
Token = Annotated[
    str | None,
    typer.Option(
        "--token",
        help="Bearer token of the servers (default $OPENENV_API_KEY).",
        show_default=False,
    ),
]

"""Run the stand-in model server: ``python -m openenv_runtime.testing.stub_llm --port 8000``.

``--policy module:function`` picks a scripted policy (default: echo the last user message);
``--latency`` and ``--fail-first N --fail-status S`` inject delay and faults.
"""

from __future__ import annotations

import argparse
import importlib

import uvicorn

from .server import StubLLM


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m openenv_runtime.testing.stub_llm")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--model", default="stub-model")
    parser.add_argument("--policy", help="module:function giving replies (default: echo)")
    parser.add_argument("--latency", type=float, default=0.0, help="seconds per completion")
    parser.add_argument("--no-token-ids", action="store_true", help="never report token ids")
    parser.add_argument("--fail-first", type=int, default=0, help="fail the first N completions")
    parser.add_argument("--fail-status", type=int, default=500)
    args = parser.parse_args(argv)
    policy = None
    if args.policy:
        module, _, name = args.policy.partition(":")
        policy = getattr(importlib.import_module(module), name)
    stub = StubLLM(policy, model=args.model, latency=args.latency, token_ids=not args.no_token_ids)
    if args.fail_first:
        stub.fail_next(args.fail_first, args.fail_status)
    uvicorn.run(stub.app, host=args.host, port=args.port, log_level="warning")


if __name__ == "__main__":
    main()

"""A small Harbor task folder for tests: "create /app/hello.txt containing hello"."""

from __future__ import annotations

from pathlib import Path

TOML = """
version = "1.0"
[metadata]
difficulty = "easy"
[verifier]
timeout_sec = 30.0
env = { EXPECTED = "hello", STRICT = true }
[agent]
timeout_sec = 90
[environment]
build_timeout_sec = 120.0
cpus = 1
memory_mb = 512
allow_internet = false
"""
INSTRUCTION = "Create /app/hello.txt containing hello.\n"
# The reward is 1 when /app/hello.txt holds $EXPECTED (from [verifier] env), else 0.
TEST_SH = """#!/bin/bash
if [ "$(cat /app/hello.txt 2>/dev/null)" = "$EXPECTED" ]; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
"""


def make_task(root: Path, toml: str = TOML, base_image: str = "scratch") -> Path:
    """Write the task folder at ``root`` (its Dockerfile starts FROM ``base_image``)."""
    (root / "environment").mkdir(parents=True)
    (root / "tests").mkdir()
    (root / "task.toml").write_text(toml)
    (root / "instruction.md").write_text(INSTRUCTION)
    (root / "environment" / "Dockerfile").write_text(
        f"FROM {base_image}\nRUN mkdir -p /app\nWORKDIR /app\n"
    )
    (root / "tests" / "test.sh").write_text(TEST_SH)
    return root

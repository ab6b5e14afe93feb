"""The local executor's command runner: bounded in time and output, as in a container."""

from __future__ import annotations

from pathlib import Path

from openenv_runtime.adapters.harbor_local import run_local


def test_output_is_kept_up_to_the_limit_and_the_exit_code_reported(tmp_path: Path) -> None:
    ran = run_local(
        ["bash", "-c", "pwd; head -c 5000 /dev/zero | tr '\\0' a >&2; exit 3"],
        limit=1000,
        seconds=30,
        cwd=str(tmp_path),
    )
    assert ran.stdout == f"{tmp_path}\n".encode()
    assert ran.stderr == b"a" * 1000 and ran.truncated
    assert ran.exit_code == 3 and not ran.timed_out


def test_a_slow_command_is_stopped_and_a_background_child_does_not_hold_the_answer(
    tmp_path: Path,
) -> None:
    slow = run_local(["bash", "-c", "sleep 60"], limit=100, seconds=0.5, cwd=str(tmp_path))
    assert slow.timed_out and slow.exit_code == 124
    background = run_local(
        ["bash", "-c", "sleep 3 & echo started"], limit=100, seconds=20, cwd=str(tmp_path)
    )
    assert background.stdout == b"started\n" and background.exit_code == 0


def test_the_verifier_environment_is_passed(tmp_path: Path) -> None:
    ran = run_local(
        ["bash", "-c", 'echo "$EXPECTED"'],
        limit=100,
        seconds=10,
        cwd=str(tmp_path),
        environment={"EXPECTED": "hello"},
    )
    assert ran.stdout == b"hello\n"

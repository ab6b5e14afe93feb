"""Parsing and checking ``openenv bench``'s command-line options (kept out of the command module).

Nothing here imports the load generator or psutil: ``openenv bench --help`` stays fast and
a missing ``bench`` extra is reported by :func:`require_bench_extra`, not by a traceback.
"""

from __future__ import annotations

from openenv_cli.errors import OpenEnvError, UsageError

BENCH_EXTRA_HINT = (
    "Install it with: pip install 'openenv-toolkit[bench]' "
    "(from a checkout: pip install -e '.[bench]')."
)
MODE_NAMES = ("sessions", "throughput")


def require_bench_extra() -> None:
    """``openenv bench`` needs the ``bench`` extra (psutil); say so instead of a traceback."""
    try:
        import psutil  # noqa: F401
    except ImportError:
        raise OpenEnvError(
            "`openenv bench` needs the optional `bench` extra (psutil, to read server CPU and memory).",
            hint=BENCH_EXTRA_HINT,
        ) from None


def int_list(raw: str, flag: str) -> list[int]:
    """``"32,128"`` as ``[32, 128]``; a :class:`UsageError` naming ``flag`` otherwise."""
    try:
        values = [int(part) for part in raw.replace(" ", "").split(",") if part]
    except ValueError:
        raise UsageError(
            f"{flag} takes whole numbers separated by commas, got {raw!r}",
            hint=f"For example: {flag} 32,128,512",
        ) from None
    if not values or min(values) < 1:
        raise UsageError(f"{flag} needs positive numbers, got {raw!r}")
    return values


def float_list(raw: str, flag: str) -> list[float]:
    """``"1.0,5"`` as ``[1.0, 5.0]`` (waits of 0 or more); a :class:`UsageError` otherwise."""
    try:
        values = [float(part) for part in raw.replace(" ", "").split(",") if part]
    except ValueError:
        raise UsageError(
            f"{flag} takes numbers of seconds separated by commas, got {raw!r}",
            hint=f"For example: {flag} 1.0,5.0",
        ) from None
    if not values or min(values) < 0:
        raise UsageError(f"{flag} needs waits of 0 seconds or more, got {raw!r}")
    return values


def waits(wait_grid: str | None, mode: str, wait_field: bool) -> list[float]:
    """The waits of the grid: only an action with a ``wait`` field takes any but 0."""
    if wait_field:
        return float_list(wait_grid or ("1.0,5.0" if mode == "sessions" else "0"), "--wait-grid")
    values = float_list(wait_grid or "0", "--wait-grid")
    if any(values):
        raise UsageError(
            "--wait-grid applies only to an environment whose action has a `wait` field "
            "(the built-in one: --serve); this action has none.",
            hint="Leave out --wait-grid: each step then takes as long as the environment takes.",
        )
    return [0.0]


def check_choices(
    *,
    url: str | None,
    serve: bool,
    mode: str,
    transport: str,
    client: str,
    workers: int,
    sync: bool,
    starts_server: bool = False,
) -> tuple[str, str]:
    """Check the options that pick what to measure; returns (mode, transport).

    ``--mode ws|http`` (the scaling study's wording) means the sessions workload over that transport.
    """
    if serve == (url is not None):
        raise UsageError(
            "Give either --url URL (a running server, or a family target such as "
            "gymnasium:CartPole-v1 to serve) or --serve (start the built-in benchmark environment)."
        )
    if mode in ("ws", "http"):
        mode, transport = "sessions", mode
    if mode not in MODE_NAMES:
        raise UsageError(f"--mode must be sessions, throughput, ws or http, got {mode!r}")
    if transport not in ("ws", "http"):
        raise UsageError(f"--transport must be ws or http, got {transport!r}")
    if client not in ("lean", "websockets"):
        raise UsageError(f"--client must be lean or websockets, got {client!r}")
    if sync and not serve:
        raise UsageError("--sync only applies with --serve.")
    if workers != 1 and not (serve or starts_server):
        raise UsageError("--workers applies with --serve or a family target (--url gymnasium:...).")
    return mode, transport

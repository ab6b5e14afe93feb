"""Code mode: an agent's Python runs with the environment's tools as plain functions.

``MCPEnvironment.execute_code(code)`` runs ``code`` in smolagents' restricted interpreter
(``pip install "openenv-runtime[code]"``), not in ``exec``: the code is walked node by node,
so imports outside a short allow-list, ``open``, dunder attributes and any name that is
neither a tool nor a safe builtin are refused, loops and operations are counted, and a
whole run is cut off after ``CODE_TIMEOUT_S``. Printed output is kept to
``MAX_PRINT_CHARS``. The code sets ``result`` to return a value.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

CODE_TIMEOUT_S = 30
MAX_PRINT_CHARS = 50_000


def _interpreter() -> Any:
    try:
        from smolagents import local_python_executor
    except ModuleNotFoundError:
        raise ModuleNotFoundError(
            "execute_code runs agent code in smolagents' restricted interpreter: "
            'pip install "openenv-runtime[code]"'
        ) from None
    return local_python_executor


def run_code(
    code: str, tools: dict[str, Callable[..., Any]], timeout_s: int = CODE_TIMEOUT_S
) -> dict[str, Any]:
    """Run ``code`` with ``tools`` callable by name; ``{"result": ...}`` or ``{"error": ...}``.

    ``stdout`` holds what the code printed (at most ``MAX_PRINT_CHARS``), when it printed.
    """
    interpreter = _interpreter()
    state: dict[str, Any] = {}
    outcome: dict[str, Any]
    try:
        interpreter.evaluate_python_code(
            code,
            static_tools={**interpreter.BASE_PYTHON_TOOLS, **tools},
            state=state,
            max_print_outputs_length=MAX_PRINT_CHARS,
            timeout_seconds=timeout_s,
        )
        outcome = {"result": state.get("result")}
    except Exception as exc:  # the interpreter wraps syntax, runtime and policy errors alike
        message = str(exc) or type(exc).__name__
        if "SyntaxError" in message:
            message = f"Syntax error: {message}"
        outcome = {"error": message}
    printed = str(state.get("_print_outputs", "") or "")
    if printed:
        outcome["stdout"] = printed[:MAX_PRINT_CHARS]
    return outcome

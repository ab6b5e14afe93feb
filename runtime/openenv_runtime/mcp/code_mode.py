"""Code mode: an agent's Python runs with the environment's tools as plain functions.

``MCPEnvironment.execute_code(code)`` runs ``code`` in smolagents' restricted interpreter
(``pip install "openenv-runtime[code]"``), not in ``exec``: the code is walked node by node,
so imports outside a short allow-list, ``open``, dunder attributes and any name that is
neither a tool nor a safe builtin are refused. The code sets ``result`` to return a value.
No route of the server runs code: an environment offers code mode only by calling
``execute_code`` itself (from its own action, say).

Bounds, enforced here rather than left to the interpreter (whose own time limit only
reports a timeout once the code has finished by itself):

* time: the run happens on a worker thread that the caller watches for at most
  ``timeout_s``; then :class:`CodeLimitExceeded` is raised in that thread (CPython's
  ``PyThreadState_SetAsyncExc``), so a runaway loop stops instead of burning a core, at no
  cost while the code runs;
* printed output: at most ``MAX_PRINT_CHARS`` are kept, and the run is stopped the same
  way once the code has printed over ``PRINT_STOP_CHARS`` (memory stays bounded);
* the ``result`` value: its JSON form may be at most ``MAX_RESULT_CHARS`` long.

Memory the code allocates in one C-level operation (``"a" * 10**10``) is not bounded
in-process: serve environments that offer code mode to untrusted agents in a container
with a memory limit.
"""

from __future__ import annotations

import ctypes
import threading
import time
from collections.abc import Callable
from typing import Any

from pydantic_core import to_json

CODE_TIMEOUT_S = 30
MAX_PRINT_CHARS = 50_000
MAX_RESULT_CHARS = 1_000_000
PRINT_STOP_CHARS = 2 * MAX_PRINT_CHARS
WATCH_INTERVAL_S = 0.02


class CodeLimitExceeded(BaseException):
    """Stops agent code at a limit. A ``BaseException``, so the code's own ``except`` blocks
    (which the interpreter evaluates with ``except Exception``) cannot swallow it."""


def _interpreter() -> Any:
    try:
        from smolagents import local_python_executor
    except ModuleNotFoundError:
        raise ModuleNotFoundError(
            "execute_code runs agent code in smolagents' restricted interpreter: "
            'pip install "openenv-runtime[code]"'
        ) from None
    return local_python_executor


def _printed(state: dict[str, Any]) -> str:
    return str(state.get("_print_outputs", "") or "")


def _interrupt(thread: threading.Thread) -> None:
    """Raise :class:`CodeLimitExceeded` in ``thread`` at its next Python bytecode."""
    ctypes.pythonapi.PyThreadState_SetAsyncExc(
        ctypes.c_ulong(thread.ident or 0), ctypes.py_object(CodeLimitExceeded)
    )


def run_code(
    code: str, tools: dict[str, Callable[..., Any]], timeout_s: float = CODE_TIMEOUT_S
) -> dict[str, Any]:
    """Run ``code`` with ``tools`` callable by name; ``{"result": ...}`` or ``{"error": ...}``.

    ``stdout`` holds what the code printed (at most ``MAX_PRINT_CHARS``), when it printed.
    """
    interpreter = _interpreter()
    state: dict[str, Any] = {}
    outcome: dict[str, Any] = {}
    deadline = time.monotonic() + timeout_s
    stopped: list[str] = []

    def target() -> None:
        try:
            interpreter.evaluate_python_code(
                code,
                static_tools={**interpreter.BASE_PYTHON_TOOLS, **tools},
                state=state,
                max_print_outputs_length=MAX_PRINT_CHARS,
                timeout_seconds=None,  # bounded by this module: see the docstring
            )
            outcome["result"] = state.get("result")
        except CodeLimitExceeded:
            outcome["error"] = stopped[0] if stopped else "Code execution was stopped"
        except Exception as exc:  # the interpreter wraps syntax, runtime and policy errors
            message = str(exc) or type(exc).__name__
            if "SyntaxError" in message:
                message = f"Syntax error: {message}"
            outcome["error"] = message

    worker = threading.Thread(target=target, name="openenv-code-mode", daemon=True)
    worker.start()
    while worker.is_alive():
        worker.join(min(WATCH_INTERVAL_S, max(deadline - time.monotonic(), 0.0)))
        if not worker.is_alive():
            break
        if time.monotonic() >= deadline:
            stopped.append(f"Code execution took over {timeout_s} s and was stopped")
        elif len(_printed(state)) > PRINT_STOP_CHARS:
            stopped.append(f"Code printed over {PRINT_STOP_CHARS} characters and was stopped")
        if stopped:
            _interrupt(worker)
            worker.join(WATCH_INTERVAL_S)
            # still alive: blocked in C or in a tool; it stops when it next runs Python
            outcome = {"error": stopped[0]}
            break
    if "result" in outcome:
        size = len(to_json(outcome["result"], fallback=repr))
        if size > MAX_RESULT_CHARS:
            outcome = {
                "error": f"The code's result is {size} characters as JSON; at most "
                f"{MAX_RESULT_CHARS} are returned"
            }
    printed = _printed(state)
    if printed:
        outcome["stdout"] = printed[:MAX_PRINT_CHARS]
    return outcome

"""Code mode: an agent's Python runs with the environment's tools as plain functions.

``MCPEnvironment.execute_code(code)`` runs ``code`` in smolagents' restricted interpreter
(``pip install "openenv-runtime[code]"``), walked node by node, so imports outside a short
allow-list, ``open``, dunder attributes and any name that is neither a tool nor a safe
builtin are refused. The code sets ``result`` to return a value. No route of the server
runs code: an environment offers code mode only by calling ``execute_code`` itself.

The interpreter is not a security boundary (its own tracker lists escapes), so it runs in
a separate process, :mod:`openenv_runtime.mcp._code_worker`, started with an empty
environment and confined before it reads any agent code: no root, no file access
(Landlock), no new processes or threads, bounded address space, open files and CPU time.
The tools stay here: the worker asks over its stdin/stdout pipe (length-prefixed JSON),
this process runs the tool and answers with the JSON form of its value. Each run gets a
fresh worker; one spare is kept started so that the interpreter's import (about a second)
is not paid on each call.

Bounds:

* time: the worker stops itself at ``timeout_s`` (reporting what was printed) and is
  killed here one second later if it has not; tool calls count against the same deadline;
* printed output: at most ``MAX_PRINT_CHARS`` are kept, and the run is stopped once the
  code has printed over ``PRINT_STOP_CHARS``;
* the ``result`` value: its JSON form may be at most ``MAX_RESULT_CHARS`` long (values
  come back as JSON: tuples as lists, other objects as their ``repr``);
* memory: ``CODE_MEMORY_BYTES`` of address space beyond what the interpreter loaded;
* workers: at most ``MAX_WORKERS`` run at once, shared fairly by sessions and clients
  (:mod:`openenv_runtime.mcp.code_slots`); a run that waits too long for a slot is refused.
"""

from __future__ import annotations

import atexit
import importlib.util
import inspect
import json
import os
import select
import signal
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Hashable
from pathlib import Path
from typing import Any

from pydantic_core import to_jsonable_python

from ..blocking import run_to_completion
from ..protocol import ErrorCode
from .code_slots import CodeSlots

CODE_TIMEOUT_S = 30
MAX_PRINT_CHARS = 50_000
MAX_RESULT_CHARS = 1_000_000
PRINT_STOP_CHARS = 2 * MAX_PRINT_CHARS
CODE_MEMORY_BYTES = 512 * 1024 * 1024
CODE_OPEN_FILES = 16
START_TIMEOUT_S = 120.0  # the worker's import of the interpreter, on a loaded machine
KILL_GRACE_S = 1.0
# Workers running at once (each holds about 50 MB).
MAX_WORKERS = max(4, 2 * (os.cpu_count() or 1))
MAX_FRAME_BYTES = 8 * (MAX_RESULT_CHARS + PRINT_STOP_CHARS)
WORKER = Path(__file__).with_name("_code_worker.py")


class CodeWorkerError(Exception):
    """The worker broke a bound or the protocol and was stopped."""


def _check_interpreter() -> None:
    if sys.platform == "win32":
        raise NotImplementedError(
            "code mode runs agent code in a confined worker process: Linux or macOS only"
        )
    if importlib.util.find_spec("smolagents") is None:
        raise ModuleNotFoundError(
            "execute_code runs agent code in smolagents' restricted interpreter: "
            'pip install "openenv-runtime[code]"'
        )


def _frame(message: dict[str, Any]) -> bytes:
    data = json.dumps(message).encode()
    return struct.pack(">I", len(data)) + data


class _Worker:
    """One started worker process and the two ends of its pipe."""

    def __init__(self) -> None:
        if not sys.executable:
            raise RuntimeError("code mode needs sys.executable to start its worker")
        self.proc = subprocess.Popen(
            [sys.executable, "-I", "-S", str(WORKER)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env={},
            cwd="/",
            close_fds=True,
            start_new_session=True,
        )
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.stdin = self.proc.stdin.fileno()
        self.stdout = self.proc.stdout.fileno()
        os.set_blocking(self.stdin, False)
        self.buffer = b""
        self.send(
            {
                "path": [p for p in sys.path if isinstance(p, str)],
                "memory_bytes": CODE_MEMORY_BYTES,
                "open_files": CODE_OPEN_FILES,
                "max_print": MAX_PRINT_CHARS,
                "print_stop": PRINT_STOP_CHARS,
                "max_result": MAX_RESULT_CHARS,
            },
            time.monotonic() + START_TIMEOUT_S,
        )

    def send(self, message: dict[str, Any], deadline: float) -> None:
        """Write one frame, giving up at ``deadline`` (a worker that stops reading)."""
        payload = _frame(message)
        while payload:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([], [self.stdin], [], left)[1]:
                raise TimeoutError
            payload = payload[os.write(self.stdin, payload) :]

    def receive(self, deadline: float) -> dict[str, Any]:
        """Read one frame; ``TimeoutError`` at ``deadline``, ``EOFError`` when it exited."""
        while True:
            if len(self.buffer) >= 4:
                (size,) = struct.unpack(">I", self.buffer[:4])
                if size > MAX_FRAME_BYTES:
                    raise CodeWorkerError(f"the worker sent a {size}-byte message")
                if len(self.buffer) >= 4 + size:
                    data, self.buffer = self.buffer[4 : 4 + size], self.buffer[4 + size :]
                    message = json.loads(data)
                    if not isinstance(message, dict):
                        raise CodeWorkerError("the worker sent a message that is not an object")
                    return message
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.stdout], [], [], left)[0]:
                raise TimeoutError
            chunk = os.read(self.stdout, 1 << 20)
            if not chunk:
                raise EOFError
            self.buffer += chunk

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()
        for pipe in (self.proc.stdin, self.proc.stdout):
            if pipe is not None:
                pipe.close()


_spare: _Worker | None = None
_spare_lock = threading.Lock()
slots = CodeSlots(MAX_WORKERS)
"""This process's worker slots; the server sets a client's share and the wait bound."""


def _take_worker() -> _Worker:
    """The spare worker if it is still alive (else a new one); a new spare is started."""
    global _spare
    with _spare_lock:
        worker, _spare = _spare, None
        if worker is None or worker.proc.poll() is not None:
            if worker is not None:
                worker.stop()
            worker = _Worker()
        _spare = _Worker()
    return worker


def _forget_after_fork() -> None:
    """A forked server process starts afresh: the spare and the slots are its parent's."""
    global _spare, _spare_lock, slots
    _spare, _spare_lock = None, threading.Lock()
    slots = CodeSlots(MAX_WORKERS, slots.per_client, slots.wait_s)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_after_fork)


@atexit.register
def _stop_spare() -> None:
    global _spare
    with _spare_lock:
        if _spare is not None:
            _spare.stop()
            _spare = None


def _call_tool(tools: dict[str, Callable[..., Any]], message: dict[str, Any]) -> dict[str, Any]:
    """Run the tool a worker asked for; ``{"value": ...}`` or ``{"error": ...}``."""
    name, args, kwargs = message.get("call"), message.get("args", []), message.get("kwargs", {})
    if not isinstance(name, str) or name not in tools:
        return {"error": f"There is no tool named {name!r}"}
    if not isinstance(args, list) or not isinstance(kwargs, dict):
        return {"error": f"{name}: malformed call"}
    try:
        value = tools[name](*args, **kwargs)
        if inspect.isawaitable(value):
            value = _await(value)
        return {"value": to_jsonable_python(value, fallback=repr)}
    except Exception as exc:  # the code sees the tool's error, as it would in-process
        return {"error": f"{type(exc).__name__}: {exc}"}


def _call_tool_within(
    tools: dict[str, Callable[..., Any]], message: dict[str, Any], deadline: float
) -> dict[str, Any]:
    """:func:`_call_tool` on its own thread; ``TimeoutError`` when it is still running at
    ``deadline`` (a hung tool is left to finish by itself, the run ends on time)."""
    box: dict[str, dict[str, Any]] = {}
    thread = threading.Thread(
        target=lambda: box.update(reply=_call_tool(tools, message)),
        name="openenv-code-tool",
        daemon=True,
    )
    thread.start()
    thread.join(max(deadline - time.monotonic(), 0.0))
    if "reply" not in box:
        raise TimeoutError
    return box["reply"]


def _await(awaitable: Any) -> Any:
    async def wait() -> Any:
        return await awaitable

    return run_to_completion(wait())


def _converse(
    worker: _Worker, code: str, tools: dict[str, Callable[..., Any]], timeout_s: float
) -> dict[str, Any]:
    ready = worker.receive(time.monotonic() + START_TIMEOUT_S)
    if not ready.get("ready"):
        raise ModuleNotFoundError(f"code mode could not start: {ready.get('error')}")
    deadline = time.monotonic() + timeout_s
    hard = deadline + KILL_GRACE_S
    worker.send({"code": code, "tools": sorted(tools), "timeout_s": timeout_s}, hard)
    while True:
        message = worker.receive(hard)
        if "call" not in message:
            return message
        reply = _call_tool_within(tools, message, hard)
        try:
            worker.send(reply, hard)
        except (BrokenPipeError, TimeoutError):
            pass  # it stopped itself meanwhile: its last message is still to read


def _outcome(message: dict[str, Any]) -> dict[str, Any]:
    outcome: dict[str, Any] = {}
    if "error" in message:
        outcome["error"] = str(message["error"])
    else:
        outcome["result"] = message.get("result")
    stdout = message.get("stdout")
    if isinstance(stdout, str) and stdout:
        outcome["stdout"] = stdout[:MAX_PRINT_CHARS]
    return outcome


def run_code(
    code: str,
    tools: dict[str, Callable[..., Any]],
    timeout_s: float = CODE_TIMEOUT_S,
    *,
    session: Hashable | None = None,
    client: str | None = None,
) -> dict[str, Any]:
    """Run ``code`` with ``tools`` callable by name; ``{"result": ...}`` or ``{"error": ...}``.

    ``stdout`` holds what the code printed (at most ``MAX_PRINT_CHARS``), when it printed.
    ``session`` and ``client`` say whose run it is, for the fair share of the worker slots
    (no session: the run is a session of its own); a run that found no slot within the
    wait bound gets ``"code": "CAPACITY_REACHED"`` beside its error.
    """
    _check_interpreter()
    held = slots  # the one this run took its slot from, even if a fork replaces it
    ticket = held.acquire(object() if session is None else session, client)
    if ticket is None:
        return {
            "error": f"Code mode is busy: all {held.total} runs at once are taken and none "
            f"came free for this session within {held.wait_s} s (CODE_WAIT_TIMEOUT); try "
            "again, or end runs that loop.",
            "code": ErrorCode.CAPACITY_REACHED.value,
        }
    try:
        return _run(code, tools, timeout_s)
    finally:
        held.release(ticket)


def _run(code: str, tools: dict[str, Callable[..., Any]], timeout_s: float) -> dict[str, Any]:
    worker = _take_worker()
    try:
        return _outcome(_converse(worker, code, tools, timeout_s))
    except TimeoutError:
        return {"error": f"Code execution took over {timeout_s} s and was stopped"}
    except EOFError:
        worker.stop()
        code_ = worker.proc.returncode
        if code_ in (-signal.SIGXCPU, -signal.SIGKILL):
            return {"error": f"Code execution took over {timeout_s} s of CPU and was stopped"}
        return {"error": f"Code execution ended abnormally (exit status {code_})"}
    except (CodeWorkerError, ValueError) as exc:
        return {"error": f"Code execution was stopped: {exc}"}
    finally:
        worker.stop()

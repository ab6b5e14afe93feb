"""Code mode: what agent code can reach, through the interpreter and past it.

Part one runs known tricks against smolagents' restricted interpreter (the escape that read
the server's environment, and tricks from the interpreter's own tracker) through
``MCPEnvironment.execute_code``, with a fake ``HF_TOKEN`` in this (the server's) process.

Part two assumes the interpreter falls completely: the worker is started the production
way (same spawn, same confinement, same pipe) but its interpreter is replaced with plain
``exec``, and full Python then tries to read secrets and files, start processes, take the
server's memory, reach the network and signal the server.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest
from fastmcp import FastMCP

from openenv_runtime import Observation, State
from openenv_runtime.mcp import MCPEnvironment, code_mode
from openenv_runtime.mcp.code_slots import CodeSlots

SECRET = "hf_FAKE_code_mode_secret_0123456789"


class Tools(MCPEnvironment):
    def __init__(self) -> None:
        server = FastMCP("tools")

        @server.tool
        def add(a: int, b: int) -> int:
            return a + b

        super().__init__(server)

    def reset(self, **kwargs: Any) -> Observation:
        return Observation()

    @property
    def state(self) -> State:
        return State()


@pytest.fixture(autouse=True)
def server_secret(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("HF_TOKEN", SECRET)
    code_mode._stop_spare()  # every worker of these tests starts after the secret is set
    yield
    code_mode._stop_spare()
    assert os.environ["HF_TOKEN"] == SECRET  # the server's own environment is untouched


def run(code: str, timeout_s: float = 20) -> dict[str, Any]:
    metadata = Tools().execute_code(code, timeout_s=timeout_s).metadata
    assert SECRET not in json.dumps(metadata, default=repr), metadata
    return metadata


# Each trick is (name, code). The first is the escape that returned every variable of the
# server's environment; the others come from smolagents' tracker (CVE-2025-5120 getattr
# leakage, CVE-2025-9959 class-hierarchy traversal, the ctypes import of issue 2094, the
# dunder-method time bombs of issue 2395, dunder calls of pull request 1551) and variants.
TRICKS = [
    ("format_map", "result = '{x.__globals__[inspect].os.environ}'.format_map({'x': add})"),
    (
        "format_key",
        "result = '{x.__globals__[inspect].os.environ[HF_TOKEN]}'.format_map({'x': add})",
    ),
    ("format_positional", "result = '{0.__globals__[inspect].os.environ}'.format(add)"),
    ("getattr", "result = getattr(add, '__globals__')['inspect'].os.environ"),
    ("subclasses", "result = [c for c in ().__class__.__bases__[0].__subclasses__()]"),
    ("ctypes", "import ctypes\nresult = ctypes.CDLL(None).getenv(b'HF_TOKEN')"),
    ("import_builtin", "__import__('os').environ"),
    ("module_attribute", "import random\nresult = random._os.environ"),
    ("module_chain", "import re\nresult = re.enum.sys.modules['os'].environ"),
    ("generator_frame", "g = (i for i in [1])\nresult = g.gi_frame.f_globals"),
    ("dunder_call", "result = add.__call__.__self__"),
    ("eval", "result = eval(\"__import__('os').environ\")"),
    (
        "time_bomb",
        "class Bomb:\n    def __del__(self):\n        print(os.environ)\nb = Bomb()\nresult = 1",
    ),
    (
        "print_hook",
        "class Hook:\n    def __str__(self):\n        return 'x' * 10\n_print_outputs = Hook()\n"
        "result = 1",
    ),
    ("proc_environ", "result = '{x.__globals__[inspect].os.getppid}'.format_map({'x': add})"),
]


@pytest.mark.parametrize(("name", "code"), TRICKS, ids=[t[0] for t in TRICKS])
def test_interpreter_tricks_never_reach_the_server_environment(name: str, code: str) -> None:
    metadata = run(code)
    if "result" in metadata and "environ" in str(metadata["result"]):
        # the trick got through the interpreter: what it read is the worker's empty one
        assert "HF_TOKEN" not in str(metadata["result"]), metadata


def test_the_worker_environment_is_empty() -> None:
    got = run("result = '{x.__globals__[inspect].os.environ}'.format_map({'x': add})")
    assert got["result"] in ("environ({})", "environ({'LC_CTYPE': 'C.UTF-8'})"), got


# --- Part two: the interpreter replaced by plain exec -------------------------------------

FALLEN_INTERPRETER = """
import sys, types

class PrintContainer:
    def __init__(self):
        self.value = ""

def evaluate_python_code(code, static_tools=None, state=None, **_):
    state["_print_outputs"] = PrintContainer()
    namespace = dict(static_tools or {})
    exec(code, namespace)  # what a complete escape of the restricted interpreter gives
    state["result"] = namespace.get("result")

fake = types.ModuleType("smolagents.local_python_executor")
fake.BASE_BUILTIN_MODULES = ["os", "socket", "subprocess", "signal", "threading", "ctypes"]
fake.BASE_PYTHON_TOOLS = {}
fake.PrintContainer = PrintContainer
fake.evaluate_python_code = evaluate_python_code
package = types.ModuleType("smolagents")
package.local_python_executor = fake
sys.modules["smolagents"] = package
sys.modules["smolagents.local_python_executor"] = fake

import importlib.util
spec = importlib.util.spec_from_file_location("_code_worker", WORKER)
worker = importlib.util.module_from_spec(spec)
spec.loader.exec_module(worker)
worker.main()
"""


@pytest.fixture
def fallen(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The production worker, started the production way, with an interpreter that is plain
    ``exec``; returns a folder holding a server-side secret file."""
    harness = tmp_path / "fallen_worker.py"
    harness.write_text(f"WORKER = {str(code_mode.WORKER)!r}\n" + FALLEN_INTERPRETER)
    harness.chmod(0o644)
    tmp_path.chmod(0o755)
    monkeypatch.setattr(code_mode, "WORKER", harness)
    secret = tmp_path / "server-secret.txt"
    secret.write_text(SECRET)
    return tmp_path


def attempt(body: str) -> str:
    """Agent code that tries ``body`` and sets ``result`` to what happened."""
    return (
        "try:\n"
        + textwrap.indent(body, "    ")
        + "\nexcept BaseException as exc:\n"
        + ("    result = 'refused: ' + type(exc).__name__ + ': ' + str(exc)")
    )


def refused(code: str) -> str:
    metadata = run(code)
    assert str(metadata.get("result", "")).startswith("refused"), metadata
    return str(metadata["result"])


def test_fallen_interpreter_still_runs_code_and_calls_tools(fallen: Path) -> None:
    assert run("result = add(a=2, b=3)") == {"result": 5}


def test_fallen_interpreter_sees_no_secret_variable(fallen: Path) -> None:
    got = run("import os\nresult = sorted(os.environ)")
    assert "HF_TOKEN" not in got["result"], got


def test_fallen_interpreter_cannot_read_the_server_environment_through_proc(
    fallen: Path,
) -> None:
    refused(attempt("import os\nresult = open(f'/proc/{os.getppid()}/environ', 'rb').read()"))
    refused(attempt("result = open('/proc/self/environ', 'rb').read()"))


def test_fallen_interpreter_cannot_open_files(fallen: Path) -> None:
    refused(attempt(f"result = open({str(fallen / 'server-secret.txt')!r}).read()"))
    refused(attempt("result = open('/etc/passwd').read()"))
    refused(attempt("import os\nresult = os.listdir('/')"))
    refused(attempt(f"open({str(fallen / 'planted')!r}, 'w').write('x')\nresult = 'written'"))
    assert not (fallen / "planted").exists()


@pytest.mark.parametrize(
    "body",
    [
        "import os\npid = os.fork()\nif pid == 0:\n    os._exit(0)\nresult = 'forked'",
        "import subprocess\nresult = subprocess.run(['/bin/true']).returncode",
        "import os\nrc = os.system('true')\nassert rc == 0, rc\nresult = 'ran'",
        "import ctypes\nrc = ctypes.CDLL(None).system(b'true')\nassert rc == 0, rc\nresult = 'ran'",
        "import threading\nthreading.Thread(target=print).start()\nresult = 'thread'",
    ],
    ids=["fork", "subprocess", "os.system", "ctypes.system", "thread"],
)
def test_fallen_interpreter_cannot_start_processes(fallen: Path, body: str) -> None:
    refused(attempt(body))


def test_fallen_interpreter_cannot_take_the_servers_memory(fallen: Path) -> None:
    before = psutil.Process().memory_info().rss
    said = refused(attempt("block = bytearray(4 * 1024 ** 3)\nresult = len(block)"))
    assert "MemoryError" in said
    assert psutil.Process().memory_info().rss - before < 256 * 1024**2


def test_fallen_interpreter_cannot_reach_a_local_port_or_signal_the_server(
    fallen: Path,
) -> None:
    with socket.create_server(("127.0.0.1", 0)) as listener:
        port = listener.getsockname()[1]
        refused(
            attempt(
                "import socket\n"
                f"socket.create_connection(('127.0.0.1', {port}), timeout=2)\nresult = 'on'"
            )
        )
    refused(attempt("import os, signal\nos.kill(os.getppid(), signal.SIGTERM)\nresult = 'sent'"))
    assert psutil.pid_exists(os.getpid())


def test_fallen_interpreter_cannot_raise_its_limits(fallen: Path) -> None:
    refused(
        attempt(
            "import resource\n"
            "resource.setrlimit(resource.RLIMIT_NPROC, (100, 100))\nresult = 'raised'"
        )
    )


def test_a_hostile_worker_cannot_make_the_server_allocate(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker that claims a 4 GB reply is stopped at the frame cap, not read into memory."""
    harness = tmp_path / "liar.py"
    harness.write_text(
        "import os, struct, json\n"
        "os.read(0, 1 << 20)\n"
        "ready = json.dumps({'ready': True}).encode()\n"
        "os.write(1, struct.pack('>I', len(ready)) + ready)\n"
        "os.write(1, struct.pack('>I', 0xFFFFFFFF))\n"
        "os.read(0, 1 << 20)\n"
    )
    monkeypatch.setattr(code_mode, "WORKER", harness)
    code_mode._stop_spare()
    metadata = code_mode.run_code("result = 1", {}, timeout_s=10)
    assert "stopped" in metadata["error"] and "byte message" in metadata["error"], metadata


def test_a_worker_cannot_call_what_is_not_a_tool(fallen: Path) -> None:
    got = run(
        attempt(
            "import json, struct, os\n"
            "message = json.dumps({'call': 'execute_code', 'args': [], 'kwargs': {}}).encode()\n"
            "os.write(1, struct.pack('>I', len(message)) + message)\n"
            "size = struct.unpack('>I', os.read(0, 4))[0]\n"
            "result = json.loads(os.read(0, size))"
        )
    )
    assert "no tool named" in str(got["result"]), got


@pytest.mark.skipif(sys.platform != "linux", reason="Landlock and /proc are Linux")
def test_the_worker_reports_its_confinement() -> None:
    worker = code_mode._Worker()
    try:
        ready = worker.receive(time.monotonic() + code_mode.START_TIMEOUT_S)
    finally:
        worker.stop()
    confined = ready["confined"]
    assert confined["landlock_abi"] >= 1, "this kernel has no Landlock: files stay readable"
    assert confined["limits"]["RLIMIT_NPROC"] == 0 and confined["limits"]["RLIMIT_AS"] > 0
    if os.uname().machine in ("x86_64", "aarch64"):
        assert confined["seccomp"] is True
    if os.geteuid() == 0:
        assert confined["uid"] == 65534


def test_runs_at_once_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each worker holds memory: when every slot is taken a run waits, then says so."""
    monkeypatch.setattr(code_mode, "slots", CodeSlots(1, wait_s=0.3))
    held = code_mode.slots.acquire("another session")
    assert held is not None
    try:
        metadata = run("result = 1")
    finally:
        code_mode.slots.release(held)
    assert "busy" in metadata["error"] and "CODE_WAIT_TIMEOUT" in metadata["error"], metadata
    assert metadata["code"] == "CAPACITY_REACHED"
    assert run("result = 1") == {"result": 1}


def test_fallen_interpreter_cannot_open_any_socket(fallen: Path) -> None:
    """No socket at all: no UDP datagram out, no unix socket (a Docker socket would be root)."""
    unix_path = fallen / "s.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as listener:
        listener.bind(str(unix_path))
        listener.listen()
        unix_path.chmod(0o777)
        refused(
            attempt(
                "import socket\ns = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)\n"
                f"s.connect({str(unix_path)!r})\nresult = 'connected'"
            )
        )
    refused(
        attempt(
            "import socket\ns = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
            "s.sendto(b'x', ('127.0.0.1', 9))\nresult = 'sent'"
        )
    )


def test_a_forked_server_process_does_not_share_the_spare_worker() -> None:
    """Two processes on one worker's pipe would read each other's code and tool results."""
    assert run("result = 1") == {"result": 1}
    assert code_mode._spare is not None
    pid = os.fork()
    if pid == 0:  # the child: a fresh spare and fresh slots, its own runs
        ok = code_mode._spare is None and code_mode.run_code("result = 2", {}) == {"result": 2}
        code_mode._stop_spare()
        os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    assert status == 0
    assert run("result = 3") == {"result": 3}


def test_a_long_c_call_holding_the_gil_does_not_freeze_the_server() -> None:
    """One big power runs in C without releasing the GIL: in-process it froze every thread of
    the server until it finished; in the worker it is killed at the time limit."""
    ticks: list[float] = []
    stop = threading.Event()

    def tick() -> None:
        while not stop.is_set():
            ticks.append(time.monotonic())
            time.sleep(0.01)

    ticker = threading.Thread(target=tick)
    ticker.start()
    try:
        metadata = run("result = len(str(7 ** (10 ** 8)))", timeout_s=1)
    finally:
        stop.set()
        ticker.join()
    assert "took over 1 s" in metadata["error"], metadata
    assert len(ticks) > 10  # this process kept running meanwhile

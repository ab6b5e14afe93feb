"""The code-mode worker: runs ONE piece of agent code in its own confined process.

Started by :mod:`openenv_runtime.mcp.code_mode` as ``python -I -S <this file>`` with an
empty environment. It speaks length-prefixed JSON frames (4-byte big-endian length, then
UTF-8 JSON) on stdin/stdout:

1. parent -> worker ``{"path": [...], "memory_bytes": N, "open_files": N, "max_print": N,
   "print_stop": N, "max_result": N}``; the worker imports the interpreter, confines
   itself (below) and answers ``{"ready": true}`` (or ``{"error": ...}``);
2. parent -> worker ``{"code": "...", "tools": [names], "timeout_s": T}``;
3. worker -> parent ``{"call": name, "args": [...], "kwargs": {...}}`` for each tool call,
   answered by parent -> worker ``{"value": ...}`` or ``{"error": "..."}``;
4. worker -> parent ``{"result": ...}`` or ``{"error": "..."}`` (with ``"stdout"`` when the
   code printed), then the worker exits.

Confinement, applied after the imports and before any agent code is read:

* no environment (the parent passes ``env={}``), working folder ``/``;
* started as root: every group dropped, then uid and gid ``nobody``;
* ``PR_SET_NO_NEW_PRIVS``; a seccomp filter (x86_64, aarch64) refusing every socket,
  ``execve``, ``fork``, ``ptrace``, other processes' memory, namespaces, ``bpf``,
  ``io_uring``, ``userfaultfd``, keys and ``perf_event_open``; then a Landlock domain (Linux >= 5.13) that handles every file
  access right with no rule granting any: no file or folder can be opened, created or
  executed, TCP bind/connect is refused (ABI 4+), and signals and abstract unix sockets
  cannot reach processes outside the domain (ABI 6+);
* resource limits, hard and soft: address space (what the imports use plus
  ``memory_bytes``), open files, no new processes or threads (``RLIMIT_NPROC`` 0), no file
  writes (``RLIMIT_FSIZE`` 0), no core dumps, and CPU seconds once the time limit is known.

This file imports nothing from the package (it runs before ``sys.path`` is set) and
holds no secret: the parent runs the tools and keeps everything else.
"""

from __future__ import annotations

import ctypes
import json
import os
import resource
import struct
import sys
import threading
import time
from typing import Any

NOBODY = 65534
PR_SET_NO_NEW_PRIVS = 38
SYS_LANDLOCK_CREATE_RULESET = 444  # the same number on every Linux architecture
SYS_LANDLOCK_RESTRICT_SELF = 446
LANDLOCK_CREATE_RULESET_VERSION = 1
# file access rights known to each Landlock ABI version (1: 13 rights, 2: +REFER,
# 3: +TRUNCATE, 5: +IOCTL_DEV)
FS_RIGHTS_BITS = {1: 13, 2: 14, 3: 15, 4: 15, 5: 16}
WATCH_INTERVAL_S = 0.02
PR_SET_SECCOMP = 22
SECCOMP_MODE_FILTER = 2
SECCOMP_RET_ALLOW = 0x7FFF0000
SECCOMP_RET_EPERM = 0x00050000 | 1
X32_SYSCALL_BIT = 0x40000000
# Syscalls refused with EPERM, by architecture (AUDIT_ARCH_*): every socket (so no UDP or
# unix socket either), starting programs, reading other processes, new namespaces, and
# kernel interfaces that widen the attack surface (bpf, io_uring, userfaultfd, keys, perf).
DENIED_SYSCALLS = {
    0xC000003E: {  # x86_64
        "socket": 41,
        "connect": 42,
        "accept": 43,
        "bind": 49,
        "listen": 50,
        "socketpair": 53,
        "fork": 57,
        "vfork": 58,
        "execve": 59,
        "ptrace": 101,
        "mount": 165,
        "add_key": 248,
        "request_key": 249,
        "keyctl": 250,
        "unshare": 272,
        "accept4": 288,
        "perf_event_open": 298,
        "setns": 308,
        "process_vm_readv": 310,
        "process_vm_writev": 311,
        "bpf": 321,
        "execveat": 322,
        "userfaultfd": 323,
        "io_uring_setup": 425,
    },
    0xC00000B7: {  # aarch64
        "mount": 40,
        "unshare": 97,
        "ptrace": 117,
        "socket": 198,
        "socketpair": 199,
        "bind": 200,
        "listen": 201,
        "accept": 202,
        "connect": 203,
        "add_key": 217,
        "request_key": 218,
        "keyctl": 219,
        "execve": 221,
        "perf_event_open": 241,
        "accept4": 242,
        "setns": 268,
        "process_vm_readv": 270,
        "process_vm_writev": 271,
        "bpf": 280,
        "execveat": 281,
        "userfaultfd": 282,
        "io_uring_setup": 425,
    },
}
MACHINE_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}

_print_container: type | None = None  # the interpreter's class that collects prints
_write_lock = threading.Lock()
_finished = threading.Event()


def _read_exact(n: int) -> bytes:
    chunks = b""
    while len(chunks) < n:
        chunk = os.read(0, n - len(chunks))
        if not chunk:
            raise EOFError
        chunks += chunk
    return chunks


def read_frame() -> Any:
    (size,) = struct.unpack(">I", _read_exact(4))
    return json.loads(_read_exact(size))


def _send(message: dict[str, Any]) -> None:
    data = json.dumps(message, default=repr).encode()
    payload = struct.pack(">I", len(data)) + data
    while payload:
        payload = payload[os.write(1, payload) :]


def finish(message: dict[str, Any]) -> None:
    """Send the run's outcome once (the main thread and the watcher may race) and exit."""
    with _write_lock:
        if not _finished.is_set():
            _finished.set()
            _send(message)
    os._exit(0)


def _landlock() -> int:
    """Deny every file access (and TCP, signals, abstract sockets where known); the ABI."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    abi = int(libc.syscall(SYS_LANDLOCK_CREATE_RULESET, None, 0, LANDLOCK_CREATE_RULESET_VERSION))
    if abi < 1:
        return 0
    fields = [(1 << FS_RIGHTS_BITS.get(abi, 16)) - 1]
    if abi >= 4:
        fields.append(0b11)  # BIND_TCP, CONNECT_TCP
    if abi >= 6:
        fields.append(0b11)  # scoped: ABSTRACT_UNIX_SOCKET, SIGNAL
    attr = struct.pack(f"<{len(fields)}Q", *fields)
    fd = int(libc.syscall(SYS_LANDLOCK_CREATE_RULESET, attr, len(attr), 0))
    if fd < 0:
        return 0
    try:
        if libc.syscall(SYS_LANDLOCK_RESTRICT_SELF, fd, 0) != 0:
            raise OSError(ctypes.get_errno(), "landlock_restrict_self failed")
    finally:
        os.close(fd)
    return abi


def _seccomp(libc: Any) -> bool:
    """Install a seccomp filter refusing ``DENIED_SYSCALLS`` (and every syscall of another
    architecture's ABI); False on an architecture it does not know."""
    arch = MACHINE_ARCH.get(os.uname().machine)
    if arch is None:
        return False
    denied = sorted(DENIED_SYSCALLS[arch].values())

    def op(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
        return struct.pack("HBBI", code, jt, jf, k)

    load, jeq, jge, ret = 0x20, 0x15, 0x35, 0x06
    checks = [op(load, 0)]  # seccomp_data.nr
    if arch == 0xC000003E:
        checks.append(op(jge, X32_SYSCALL_BIT))  # the x32 ABI: jt patched below
    checks += [op(jeq, nr) for nr in denied]
    program = [op(load, 4), op(jeq, arch, 0, 0), *checks, op(ret, SECCOMP_RET_ALLOW)]
    program.append(op(ret, SECCOMP_RET_EPERM))
    deny = len(program) - 1
    for index in range(len(program)):  # point every comparison at the deny instruction
        code, _, _, k = struct.unpack("HBBI", program[index])
        if index == 1:  # the architecture: on to the checks if it matches, else deny
            program[index] = op(code, k, 0, deny - index - 1)
        elif code in (jeq, jge):
            program[index] = op(code, k, deny - index - 1, 0)
    filters = ctypes.create_string_buffer(b"".join(program))

    class Program(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    prog = Program(len(program), ctypes.cast(filters, ctypes.c_void_p))
    if libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(prog), 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "installing the seccomp filter failed")
    return True


def _address_space() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    return 0


def lock_down() -> dict[str, Any]:
    """Drop root, forbid new privileges and deny all file access, for this thread and the
    threads it starts later; what was applied (see the module docstring)."""
    applied: dict[str, Any] = {}
    os.chdir("/")
    if os.geteuid() == 0:
        os.setgroups([])
        os.setgid(NOBODY)
        os.setuid(NOBODY)
        applied["uid"] = NOBODY
    if sys.platform == "linux":
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "PR_SET_NO_NEW_PRIVS failed")
        applied["landlock_abi"] = _landlock()
        applied["seccomp"] = _seccomp(libc)
    return applied


def limit(address_space: int, open_files: int) -> dict[str, int]:
    """Set hard and soft resource limits (no new processes or threads from here on)."""
    limits = {"RLIMIT_NOFILE": open_files, "RLIMIT_NPROC": 0, "RLIMIT_FSIZE": 0, "RLIMIT_CORE": 0}
    if address_space:
        limits["RLIMIT_AS"] = address_space
    for name, value in limits.items():
        resource.setrlimit(getattr(resource, name), (value, value))
    return limits


def confine(memory_bytes: int, open_files: int, watch: Any = None) -> dict[str, Any]:
    """Lock this process down for good; ``watch`` runs on a thread started inside the
    Landlock domain and before ``RLIMIT_NPROC`` forbids new threads."""
    used = _address_space() if sys.platform == "linux" else 0
    applied = lock_down()
    if watch is not None:
        threading.Thread(target=watch, daemon=True).start()
    applied["limits"] = limit(used and used + memory_bytes, open_files)
    return applied


def set_cpu_limit(seconds: float) -> None:
    """CPU seconds for the run: what the start-up (the interpreter's import) already used,
    plus ``seconds``, plus 2."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    whole = int(usage.ru_utime + usage.ru_stime + seconds) + 2
    resource.setrlimit(resource.RLIMIT_CPU, (whole, whole))


def _tool(name: str) -> Any:
    def call(*args: Any, **kwargs: Any) -> Any:
        try:
            data = {"call": name, "args": list(args), "kwargs": kwargs}
            json.dumps(data)
        except (TypeError, ValueError):
            raise TypeError(f"{name}: tool arguments must be JSON values") from None
        with _write_lock:
            if _finished.is_set():
                os._exit(0)
            _send(data)
        reply = read_frame()
        if "error" in reply:
            raise RuntimeError(str(reply["error"]))
        return reply.get("value")

    call.__name__ = call.__qualname__ = name
    return call


def _printed(state: dict[str, Any]) -> str:
    """What the code printed, read without running any method the code could define."""
    container = state.get("_print_outputs")
    if _print_container is None or type(container) is not _print_container:
        return ""
    value = vars(container).get("value", "")
    return value if type(value) is str else ""


def _outcome(
    state: dict[str, Any], settings: dict[str, Any], body: dict[str, Any]
) -> dict[str, Any]:
    printed = _printed(state)
    if printed:
        body["stdout"] = printed[: settings["max_print"]]
    return body


def main() -> None:
    settings = read_frame()
    sys.path[:] = [str(p) for p in settings["path"]]
    sys.stdout = sys.stderr  # stray prints must not reach the protocol pipe
    try:
        from smolagents import local_python_executor as interpreter

        for module in interpreter.BASE_BUILTIN_MODULES:
            __import__(module)
        global _print_container
        _print_container = interpreter.PrintContainer
    except Exception as exc:  # reported to the parent, which raises it there
        _send({"error": f"{type(exc).__name__}: {exc}"})
        return
    state: dict[str, Any] = {}
    job: dict[str, Any] = {}
    started = threading.Event()

    def watch() -> None:
        started.wait()
        deadline = time.monotonic() + float(job["timeout_s"])
        while True:
            time.sleep(WATCH_INTERVAL_S)
            printed = len(_printed(state))
            if time.monotonic() >= deadline:
                error = f"Code execution took over {job['timeout_s']} s and was stopped"
            elif printed > settings["print_stop"]:
                error = f"Code printed over {settings['print_stop']} characters and was stopped"
            else:
                continue
            finish(_outcome(state, settings, {"error": error}))

    applied = confine(int(settings["memory_bytes"]), int(settings["open_files"]), watch)
    _send({"ready": True, "confined": applied})
    job.update(read_frame())
    set_cpu_limit(float(job["timeout_s"]))
    tools = {name: _tool(name) for name in job["tools"]}
    started.set()
    try:
        interpreter.evaluate_python_code(
            job["code"],
            static_tools={**interpreter.BASE_PYTHON_TOOLS, **tools},
            state=state,
            max_print_outputs_length=settings["max_print"],
            timeout_seconds=None,  # the watcher and the parent bound the time
        )
        result = state.get("result")
        size = len(json.dumps(result, default=repr))
        if size > settings["max_result"]:
            body: dict[str, Any] = {
                "error": f"The code's result is {size} characters as JSON; at most "
                f"{settings['max_result']} are returned"
            }
        else:
            body = {"result": result}
    except MemoryError:
        body = {"error": "Code execution ran out of memory"}
    except Exception as exc:  # the interpreter wraps syntax, runtime and policy errors
        message = str(exc) or type(exc).__name__
        if "SyntaxError" in message:
            message = f"Syntax error: {message}"
        body = {"error": message}
    finish(_outcome(state, settings, body))


if __name__ == "__main__":
    try:
        main()
    except EOFError:  # the parent went away
        os._exit(0)

"""Harbor tasks served as environments: ``harbor:/ABS/PATH/TO/TASK[?key=value&...]``.

A Harbor task folder (``task.toml``, ``instruction.md``, ``environment/Dockerfile``,
``tests/test.sh``; see :mod:`openenv_runtime.adapters.harbor_task`) becomes a multi-turn
environment on the local Docker engine. The task's image is built once when the target is
loaded (from ``environment/``, never pulling a base image that is already local; or
``[environment] docker_image`` when task.toml names one, which must be on the engine).

Each ``reset`` gives the session a fresh container of that image (the previous one is
removed), taken from a warm pool of started containers when one is ready; the observation
carries ``instruction.md``. The agent then acts, one of these per step:

* ``command``: a shell command, run with ``bash -c`` in the container; the observation has
  its ``stdout``, ``stderr`` and ``exit_code``, each stream cut at ``max_output`` bytes
  (``truncated``), the command stopped after ``command_timeout`` seconds (``timed_out``);
* ``read_path``: a file's text in ``content`` (same bounds); ``write_path`` + ``content``:
  writes a file (parent folders made);
* ``submit: true``: the task's verifier runs: every process the agent left running is
  killed, ``/tests`` and ``/logs/verifier`` are emptied (nothing the agent planted there
  counts), ``tests/`` is copied to ``/tests``,
  ``bash /tests/test.sh`` runs as root with ``[verifier] env`` and ``[verifier]
  timeout_sec``, and the reward is what it wrote to ``/logs/verifier/reward.txt`` (a number)
  or ``/logs/verifier/reward.json`` (``{"reward": 1.0}``, or one named number). The
  observation has ``done: true``; no reward file is a reward of 0 with ``error`` saying so.

``[agent] timeout_sec`` is the episode's time for commands: each command is cut to what is
left of it, and once it is spent only ``submit`` is taken.

Options: ``warm`` (containers kept started ahead of sessions, default 1), ``command_timeout``
(the longest one command may run, seconds, default 60; an action's ``time_limit`` may ask for
less), ``max_output`` (bytes kept of each output stream, default 65536), ``executor``
(``docker``, the default; ``local`` runs everything in the container the server itself runs
in, for the image of a project ``openenv import harbor:/PATH`` writes: see
:mod:`.harbor_local`).

Containers carry the labels ``org.openenv.harbor.server=<server id>`` (one id per loaded
target, i.e. per server process) and ``org.openenv.harbor.task=<task folder name>``. A
session's container is removed when the session ends; when the server stops (SIGTERM
included) every container with its server id is removed, warm ones too.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import io
import itertools
import json
import math
import os
import posixpath
import re
import tarfile
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from importlib.metadata import version
from typing import Any

from pydantic import ConfigDict, Field, model_validator

from ..environment import Environment
from ..errors import AdapterError
from ..models import Action, Observation, State
from ..providers.base import ProviderError
from ..providers.docker import docker_module, engine_client
from .harbor_exec import KILL_GRACE, TESTS_DIR, VERIFIER_DIR, Executor, Ran
from .harbor_local import LocalExecutor
from .harbor_task import DOCKERFILE, HarborTask, folder_archive, read_task
from .options import convert_option
from .target import AdaptedEnvironment

SERVER_LABEL = "org.openenv.harbor.server"
TASK_LABEL = "org.openenv.harbor.task"
IMAGE_REPOSITORY = "openenv-harbor"
# The reward files are small: more than this is not a reward.
MAX_REWARD_BYTES = 64 * 1024
# Seconds the server's shutdown waits for warm containers still starting.
SHUTDOWN_WAIT = 20.0
# Where commands run: containers on the Docker engine, or (in an imported project's image)
# the container the server runs in.
EXECUTORS = ("docker", "local")


@dataclass(frozen=True)
class HarborOptions:
    """The target's options (see the module docstring)."""

    warm: int = 1
    command_timeout: float = 60.0
    max_output: int = 65536
    executor: str = "docker"


class HarborAction(Action):
    """One thing to do in the task's container: exactly one of ``command``, ``read_path``,
    ``write_path`` (with ``content``) or ``submit``."""

    model_config = ConfigDict(json_schema_extra={"examples": [{"command": "ls -la"}]})

    command: str | None = Field(default=None, description="A shell command (bash -c).")
    read_path: str | None = Field(default=None, description="A file to read (its text).")
    write_path: str | None = Field(default=None, description="A file to write with `content`.")
    content: str = Field(default="", description="The text to write at write_path.")
    submit: bool = Field(default=False, description="End the episode: run the task's tests.")
    time_limit: float | None = Field(
        default=None, gt=0, description="Seconds this command may run (at most the server's)."
    )

    @model_validator(mode="after")
    def _one_kind(self) -> HarborAction:
        given = [
            self.command is not None,
            self.read_path is not None,
            self.write_path is not None,
            self.submit,
        ]
        if sum(given) != 1:
            raise ValueError(
                "give exactly one of command, read_path, write_path (with content) or submit"
            )
        return self


class HarborObservation(Observation):
    """The instruction (on reset), or what the last action did."""

    instruction: str = Field(default="", description="instruction.md, on reset.")
    stdout: str = Field(default="", description="The command's standard output.")
    stderr: str = Field(default="", description="The command's standard error.")
    exit_code: int | None = Field(default=None, description="The command's exit code.")
    timed_out: bool = Field(default=False, description="The command was stopped at its limit.")
    truncated: bool = Field(default=False, description="An output was cut at max_output bytes.")
    content: str | None = Field(default=None, description="The file read (read_path).")
    rewards: dict[str, float] | None = Field(
        default=None, description="What the verifier wrote (on submit)."
    )
    error: str | None = Field(default=None, description="Why the action could not be done.")
    time_left: float = Field(default=0.0, description="Seconds of the agent's time left.")


class HarborState(State):
    """The task, the session's container, and whether the agent has submitted."""

    task: str = ""
    container: str | None = None
    submitted: bool = False


class ContainerPool:
    """Started containers of one image, labelled with this server's id.

    ``take()`` hands out a warm one when it has one (and starts a replacement in the
    background), else starts one now. ``shutdown()`` removes every container carrying the
    server's id, wherever it is.
    """

    def __init__(self, client: Any, image: str, task: HarborTask, warm: int) -> None:
        self.client = client
        self.image = image
        self.warm = warm
        self.server_id = uuid.uuid4().hex[:12]
        self._labels = {SERVER_LABEL: self.server_id, TASK_LABEL: task.name}
        self._options: dict[str, Any] = {
            # PID 1 is `sleep`, which no signal from inside the container ends: the verifier
            # can stop every process the agent left running (kill -9 -1) and keep the container.
            "entrypoint": ["sleep", "infinity"],
            "detach": True,
            "labels": self._labels,
            "network_disabled": not task.allow_internet,
        }
        if task.cpus is not None:
            self._options["nano_cpus"] = int(min(task.cpus, os.cpu_count() or 1) * 1e9)
        if task.memory_mb is not None:
            self._options["mem_limit"] = f"{task.memory_mb}m"
        self._ready: list[Any] = []
        self._starting: list[threading.Thread] = []
        self._count = itertools.count()
        self._lock = threading.Lock()
        self._closed = False

    def fill(self) -> None:
        """Start containers in the background until ``warm`` are ready or starting."""
        with self._lock:
            self._starting = [t for t in self._starting if t.is_alive()]
            missing = 0 if self._closed else self.warm - len(self._ready) - len(self._starting)
            for _ in range(max(missing, 0)):
                thread = threading.Thread(
                    target=self._warm_one, name="openenv-harbor-warm", daemon=True
                )
                self._starting.append(thread)
                thread.start()

    def _warm_one(self) -> None:
        try:
            container = self.start()
        except Exception:  # the next take() starts one itself and reports the error
            return
        with self._lock:
            if not self._closed:
                self._ready.append(container)
                return
        self.remove(container)

    def start(self) -> Any:
        """A new started container (not pooled)."""
        if self._closed:
            raise RuntimeError("the server is shutting down")
        name = f"openenv-harbor-{self.server_id}-{next(self._count)}"
        docker = docker_module()
        try:
            return self.client.containers.run(self.image, name=name, **self._options)
        except docker.errors.APIError as exc:
            raise RuntimeError(
                f"the engine refused to start {self.image}: {exc.explanation or exc}"
            ) from None

    def take(self) -> Any:
        """A started container for a new episode: a warm one if ready, else a new one."""
        with self._lock:
            if self._closed:
                raise RuntimeError("the server is shutting down")
            container = self._ready.pop(0) if self._ready else None
        self.fill()
        if container is not None and self._running(container):
            return container
        if container is not None:  # it ended while it waited (the engine restarted, OOM)
            self.remove(container)
        return self.start()

    def _running(self, container: Any) -> bool:
        docker = docker_module()
        try:
            container.reload()
        except docker.errors.APIError:
            return False
        return bool(container.status == "running")

    def remove(self, container: Any) -> None:
        docker = docker_module()
        # NotFound, or a removal already under way: either way it is going.
        with contextlib.suppress(docker.errors.APIError):
            container.remove(force=True)

    def shutdown(self) -> None:
        """Remove every container of this server (idempotent)."""
        with self._lock:
            self._closed = True
            self._ready = []
            starting = list(self._starting)
        deadline = time.monotonic() + SHUTDOWN_WAIT
        for thread in starting:
            thread.join(max(deadline - time.monotonic(), 0.0))
        docker = docker_module()
        with contextlib.suppress(docker.errors.DockerException, OSError):
            found = self.client.containers.list(
                all=True,
                filters={"label": f"{SERVER_LABEL}={self.server_id}"},
                ignore_removed=True,
            )
            for container in found:
                self.remove(container)


def run_in(
    client: Any,
    container: Any,
    argv: list[str],
    *,
    limit: int,
    seconds: float,
    user: str = "",
    environment: Mapping[str, str] | None = None,
) -> Ran:
    """Run ``argv`` in ``container`` under ``timeout``; keep ``limit`` bytes of each stream.

    The process is sent SIGTERM after ``seconds`` and SIGKILL ``KILL_GRACE`` seconds later;
    the read gives up too once that time has passed (a process that escaped the signal and
    keeps the stream open).
    """
    wrapped = ["timeout", "-k", str(KILL_GRACE), f"{seconds:.3f}", *argv]
    created = client.api.exec_create(
        container.id, wrapped, user=user, environment=dict(environment or {})
    )
    exec_id = created["Id"]
    kept = [bytearray(), bytearray()]
    truncated = gave_up = False
    started = time.monotonic()
    stream = client.api.exec_start(exec_id, stream=True, demux=True)
    try:
        for chunks in stream:
            for index, chunk in enumerate(chunks):
                if not chunk:
                    continue
                room = limit - len(kept[index])
                if len(chunk) > room:
                    truncated = True
                kept[index] += chunk[: max(room, 0)]
            if time.monotonic() - started > seconds + KILL_GRACE + 5:
                gave_up = True
                break
    finally:
        with contextlib.suppress(Exception):
            stream.close()
    code = client.api.exec_inspect(exec_id).get("ExitCode")
    exit_code = -1 if code is None else int(code)
    elapsed = time.monotonic() - started
    timed_out = gave_up or exit_code == 124 or (exit_code == 137 and elapsed >= seconds)
    return Ran(bytes(kept[0]), bytes(kept[1]), exit_code, truncated, timed_out)


def _text(data: bytes) -> str:
    return data.decode("utf-8", "replace")


class ContainerExecutor:
    """An episode's own container, taken from a :class:`ContainerPool` and removed after it."""

    def __init__(self, pool: ContainerPool) -> None:
        self.pool = pool
        self.container = pool.take()

    @property
    def label(self) -> str:
        return str(self.container.short_id)

    def run(
        self,
        argv: list[str],
        seconds: float,
        *,
        limit: int,
        user: str = "",
        environment: Mapping[str, str] | None = None,
    ) -> Ran:
        return run_in(
            self.pool.client,
            self.container,
            argv,
            limit=limit,
            seconds=seconds,
            user=user,
            environment=environment,
        )

    def write(self, path: str, data: bytes) -> str | None:
        if not posixpath.isabs(path):
            workdir = (self.container.attrs.get("Config") or {}).get("WorkingDir") or "/"
            path = posixpath.join(workdir, path)
        inner = posixpath.normpath(path).lstrip("/")
        if not inner or inner == ".":
            return "write_path must name a file, not /."
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w") as tar:
            info = tarfile.TarInfo(inner)
            info.size, info.mode, info.mtime = len(data), 0o644, int(time.time())
            tar.addfile(info, io.BytesIO(data))
        docker = docker_module()
        try:
            self.container.put_archive("/", buffer.getvalue())
        except docker.errors.APIError as exc:
            return f"could not write /{inner}: {exc.explanation or exc}"
        return None

    def put_tests(self, archive: bytes) -> None:
        self.container.put_archive(TESTS_DIR, archive)

    def stop_processes(self) -> None:
        # Every process but PID 1 (`kill -1` spares its caller, so this exec has no
        # `timeout` parent to lose).
        client = self.pool.client
        stop = client.api.exec_create(self.container.id, ["sh", "-c", "kill -9 -1"], user="root")
        client.api.exec_start(stop["Id"])

    def close(self) -> None:
        self.pool.remove(self.container)


def parse_reward(name: str, text: str) -> dict[str, float]:
    """The rewards a verifier wrote to ``reward.txt`` (one number) or ``reward.json``."""
    if name == "reward.txt":
        try:
            value = float(text.strip())
        except ValueError:
            raise ValueError(f"reward.txt holds {text.strip()[:80]!r}, not a number") from None
        return {"reward": value}
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ValueError(f"reward.json is not JSON ({exc})") from None
    if not isinstance(data, dict) or not data:
        raise ValueError("reward.json is not an object of named numbers")
    rewards: dict[str, float] = {}
    for key, value in data.items():
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ValueError(f"reward.json's {key!r} is not a number")
        rewards[str(key)] = float(value)
    return rewards


def main_reward(rewards: Mapping[str, float]) -> float:
    """The episode's reward: ``reward`` when named, else the only one given."""
    if "reward" in rewards:
        return rewards["reward"]
    if len(rewards) == 1:
        return next(iter(rewards.values()))
    raise ValueError(f"reward.json names {sorted(rewards)}: name the main one 'reward'")


class HarborEnvironment(Environment[HarborAction, HarborObservation, HarborState]):
    """One session: a fresh :class:`Executor` per episode, from ``workspace``."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(
        self,
        task: HarborTask,
        workspace: Callable[[], Executor],
        options: HarborOptions,
        tests: bytes,
    ) -> None:
        super().__init__()
        self.task = task
        self.workspace = workspace
        self.options = options
        self.tests = tests
        self._exec: Executor | None = None
        self._deadline = 0.0
        self._done = True
        self._state = HarborState(task=task.name)

    def reset(
        self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any
    ) -> HarborObservation:
        self._release()
        self._exec = self.workspace()
        self._deadline = time.monotonic() + self.task.agent_timeout
        self._done = False
        self._state = HarborState(
            episode_id=episode_id or str(uuid.uuid4()),
            task=self.task.name,
            container=self._exec.label,
        )
        return HarborObservation(
            instruction=self.task.instruction, time_left=self.task.agent_timeout
        )

    def step(self, action: HarborAction, **kwargs: Any) -> HarborObservation:
        if self._exec is None or self._done:
            raise RuntimeError("The episode is over (or never started): call reset() first.")
        self._state.step_count += 1
        if action.submit:
            return self._verify(self._exec)
        left = self._time_left()
        if left <= 0:
            return HarborObservation(
                error=f"The agent's time ({self.task.agent_timeout:g} s, [agent] timeout_sec) "
                "is up: submit.",
            )
        seconds = min(action.time_limit or math.inf, self.options.command_timeout, left)
        if action.write_path is not None:
            return self._write(self._exec, action.write_path, action.content)
        if action.read_path is not None:
            ran = self._run(self._exec, ["cat", "--", action.read_path], seconds)
            return HarborObservation(
                content=_text(ran.stdout) if ran.exit_code == 0 else None,
                stderr=_text(ran.stderr),
                exit_code=ran.exit_code,
                truncated=ran.truncated,
                timed_out=ran.timed_out,
                time_left=self._time_left(),
            )
        assert action.command is not None
        ran = self._run(self._exec, ["bash", "-c", action.command], seconds)
        return HarborObservation(
            stdout=_text(ran.stdout),
            stderr=_text(ran.stderr),
            exit_code=ran.exit_code,
            truncated=ran.truncated,
            timed_out=ran.timed_out,
            time_left=self._time_left(),
        )

    def _time_left(self) -> float:
        return max(self._deadline - time.monotonic(), 0.0)

    def _run(
        self,
        executor: Executor,
        argv: list[str],
        seconds: float,
        *,
        user: str = "",
        environment: Mapping[str, str] | None = None,
        limit: int | None = None,
    ) -> Ran:
        return executor.run(
            argv,
            seconds,
            limit=self.options.max_output if limit is None else limit,
            user=user,
            environment=environment,
        )

    def _write(self, executor: Executor, path: str, content: str) -> HarborObservation:
        if not path.strip() or "\0" in path:
            return HarborObservation(error="write_path must be a file path.", exit_code=1)
        error = executor.write(path, content.encode("utf-8"))
        return HarborObservation(
            error=error, exit_code=1 if error else 0, time_left=self._time_left()
        )

    def _verify(self, executor: Executor) -> HarborObservation:
        self._done = True
        self._state.submitted = True
        # Nothing the agent started may write a reward.
        executor.stop_processes()
        prepare = f"rm -rf {TESTS_DIR} {VERIFIER_DIR} && mkdir -p {TESTS_DIR} {VERIFIER_DIR}"
        self._run(executor, ["sh", "-c", prepare], 60, user="root")
        executor.put_tests(self.tests)
        ran = self._run(
            executor,
            ["bash", f"{TESTS_DIR}/test.sh"],
            self.task.verifier_timeout,
            user="root",
            environment=self.task.verifier_env,
        )
        rewards: dict[str, float] | None = None
        error = None
        for name in ("reward.txt", "reward.json"):
            read = self._run(
                executor, ["cat", f"{VERIFIER_DIR}/{name}"], 60, user="root", limit=MAX_REWARD_BYTES
            )
            if read.exit_code != 0:
                continue
            try:
                rewards = parse_reward(name, _text(read.stdout))
                reward = main_reward(rewards)
            except ValueError as exc:
                error = f"the verifier's {exc}"
            break
        else:
            timed = " (it timed out)" if ran.timed_out else ""
            error = (
                f"tests/test.sh{timed} wrote no {VERIFIER_DIR}/reward.txt or reward.json "
                f"(exit code {ran.exit_code}): reward 0"
            )
        if error is not None:
            reward = 0.0
        return HarborObservation(
            stdout=_text(ran.stdout),
            stderr=_text(ran.stderr),
            exit_code=ran.exit_code,
            truncated=ran.truncated,
            timed_out=ran.timed_out,
            rewards=rewards,
            error=error,
            time_left=self._time_left(),
            reward=reward,
            done=True,
        )

    def _release(self) -> None:
        executor, self._exec = self._exec, None
        if executor is not None:
            executor.close()

    def close(self) -> None:
        self._release()

    @property
    def state(self) -> HarborState:
        return self._state


def parse_options(options: Mapping[str, str]) -> HarborOptions:
    """The target's options, checked."""
    known: dict[str, type] = {
        "warm": int,
        "command_timeout": float,
        "max_output": int,
        "executor": str,
    }
    unknown = sorted(set(options) - set(known))
    if unknown:
        raise AdapterError(
            f"harbor targets take no option {', '.join(unknown)}; their options are: "
            f"{', '.join(sorted(known))}."
        )
    values: dict[str, Any] = {}
    for key, kind in known.items():
        if key == "executor" and key in options:
            if options[key] not in EXECUTORS:
                raise AdapterError(
                    f"Option executor={options[key]!r} must be one of {', '.join(EXECUTORS)}."
                )
            if options[key] == "local" and "warm" in options:
                raise AdapterError("executor=local has no warm pool: leave out the warm option.")
            values[key] = options[key]
        elif key in options:
            value = convert_option(key, options[key], kind)
            if value < 0 or (value == 0 and key != "warm"):
                raise AdapterError(f"Option {key}={options[key]!r} must be positive.")
            values[key] = value
    return HarborOptions(**values)


def image_tag(task: HarborTask, context: bytes) -> str:
    """The tag of the task's built image: the folder's name and the context's digest."""
    slug = re.sub(r"[^a-z0-9._-]+", "-", task.name.lower()).strip("._-") or "task"
    return f"{IMAGE_REPOSITORY}/{slug[:64]}:{hashlib.sha256(context).hexdigest()[:16]}"


def build_image(client: Any, task: HarborTask) -> str:
    """The task's image, built from ``environment/`` unless already built from the same bytes."""
    docker = docker_module()
    context = folder_archive(task.root, "environment")
    tag = image_tag(task, context)
    with contextlib.suppress(docker.errors.ImageNotFound):
        client.images.get(tag)
        return tag
    started = time.monotonic()
    log: list[str] = []
    try:
        for chunk in client.api.build(
            fileobj=io.BytesIO(context),
            custom_context=True,
            tag=tag,
            pull=False,
            rm=True,
            forcerm=True,
            decode=True,
            labels={TASK_LABEL: task.name},
            timeout=int(task.build_timeout) + 30,
        ):
            if "error" in chunk:
                raise AdapterError(
                    f"{task.root / DOCKERFILE} did not build: {chunk['error'].strip()}\n"
                    + "".join(log[-20:])
                )
            if "stream" in chunk:
                log = [*log[-40:], str(chunk["stream"])]
            if time.monotonic() - started > task.build_timeout:
                raise AdapterError(
                    f"{task.root / DOCKERFILE} took over {task.build_timeout:g} s to build "
                    "([environment] build_timeout_sec)."
                )
    except docker.errors.APIError as exc:
        raise AdapterError(f"the engine refused to build {tag}: {exc.explanation or exc}") from None
    return tag


def task_image(client: Any, task: HarborTask) -> str:
    """``[environment] docker_image`` (it must be on the engine), else the built image."""
    if task.docker_image is None:
        return build_image(client, task)
    docker = docker_module()
    try:
        client.images.get(task.docker_image)
    except docker.errors.ImageNotFound:
        raise AdapterError(
            f"task.toml's docker_image {task.docker_image} is not on this engine: "
            f"`docker pull {task.docker_image}` or build it first."
        ) from None
    return task.docker_image


def load(name: str, options: Mapping[str, str]) -> AdaptedEnvironment:
    """The Harbor task folder ``name`` (an absolute path) as an environment."""
    task = read_task(name)
    settings = parse_options(options)
    if settings.executor == "local":
        return load_local(task, settings)
    tests = folder_archive(task.root, "tests")
    longest = max(settings.command_timeout, task.verifier_timeout, 60.0)
    try:
        client = engine_client(timeout=int(longest) + KILL_GRACE + 60)
    except ProviderError as exc:
        raise AdapterError(f"harbor targets run on Docker: {exc}") from None
    image = task_image(client, task)
    pool = ContainerPool(client, image, task, settings.warm)
    pool.fill()
    atexit.register(pool.shutdown)
    return AdaptedEnvironment(
        factory=lambda: HarborEnvironment(task, lambda: ContainerExecutor(pool), settings, tests),
        action_cls=HarborAction,
        observation_cls=HarborObservation,
        state_cls=HarborState,
        name=f"harbor:{task.name}",
        description=f"Harbor task {task.name} ({task.root}), in containers of {image}",
        package="docker",
        package_version=version("docker"),
        shutdown=pool.shutdown,
    )


def load_local(task: HarborTask, settings: HarborOptions) -> AdaptedEnvironment:
    """``task`` served from inside its own image (``executor=local``, see
    :mod:`.harbor_local`): one container, one session at a time."""
    tests = folder_archive(task.root, "tests")
    workdir = os.getcwd()
    return AdaptedEnvironment(
        factory=lambda: HarborEnvironment(task, lambda: LocalExecutor(workdir), settings, tests),
        action_cls=HarborAction,
        observation_cls=HarborObservation,
        state_cls=HarborState,
        name=f"harbor:{task.name}",
        description=f"Harbor task {task.name}, run in the container this server runs in",
        package="openenv-runtime",
        package_version=version("openenv-runtime"),
    )

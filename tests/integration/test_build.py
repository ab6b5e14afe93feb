"""`openenv build` for real: a project made by `openenv init`, built by the CLI on the local
stand-in for python:3.11-slim, then run with `docker run -p` and driven by its own client.

Everything created here carries a unique tag or the label ``LABEL_KEY=<run id>`` and is
removed afterwards (containers by `started_container`, images by the fixtures).
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import textwrap
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import docker
import docker.errors
import pytest
from docker.models.containers import Container

import openenv_runtime
from openenv_runtime.testing import free_port
from tests.support.docker_engine import run_once, started_container

NAME = "build_env"  # classes BuildEnv, BuildAction, BuildObservation, BuildState
RUN_ID = uuid.uuid4().hex[:10]
REPOSITORY = "openenv-test/build-env"
LABEL_KEY = "org.openenv.test-build"
# The variables the CLI reads; a developer's shell must not change what these tests build.
CLI_ENV = (
    "OPENENV_BASE_IMAGE",
    "OPENENV_IMAGE_TAG",
    "HOST",
    "PORT",
    "WORKERS",
    "MAX_CONCURRENT_ENVS",
)


# --- helpers ---------------------------------------------------------------------------------


def cli_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in CLI_ENV}
    # Wide enough that rich never wraps a message: the tests compare whole lines.
    env.update(PYTHONUNBUFFERED="1", COLUMNS="1000", **extra)
    return env


def openenv(
    *args: str, cwd: Path, timeout: float = 600, **env: str
) -> subprocess.CompletedProcess[str]:
    """Run the real CLI in a subprocess (stdout and stderr kept apart)."""
    return subprocess.run(
        [sys.executable, "-m", "openenv_cli.main", *args],
        cwd=cwd,
        env=cli_env(**env),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def get_json(url: str) -> dict:  # type: ignore[type-arg]
    # A new connection per call, so SO_REUSEPORT can hand each one to any worker.
    with urllib.request.urlopen(url, timeout=5) as response:
        return json.loads(response.read())


def wait_for_health(base_url: str, container: Container, timeout: float = 60) -> dict:  # type: ignore[type-arg]
    deadline = time.monotonic() + timeout
    while True:
        try:
            return get_json(f"{base_url}/health")
        except (urllib.error.URLError, ConnectionError, OSError):
            container.reload()
            if container.status not in ("created", "running") or time.monotonic() > deadline:
                logs = container.logs().decode("utf-8", "replace")[-3000:]
                pytest.fail(
                    f"the container did not serve /health (status {container.status}):\n{logs}"
                )
            time.sleep(0.3)


def run_client(project: Path, base_url: str, script: str) -> dict:  # type: ignore[type-arg]
    """Run ``script`` with the generated package importable (its folder's parent on
    PYTHONPATH, as for a user who has not installed it); return the JSON it prints."""
    env = cli_env(
        PYTHONPATH=os.pathsep.join([str(project.parent), os.environ.get("PYTHONPATH", "")])
    )
    code = f"BASE_URL = {base_url!r}\n" + textwrap.dedent(script)
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=project.parent,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


@dataclass(frozen=True)
class Served:
    """A running container of the image and the URL its port 8000 is published at."""

    container: Container
    base_url: str


@contextlib.contextmanager
def serve(client: docker.DockerClient, image: str, **environment: str) -> Iterator[Served]:
    """Run ``image`` with ``-p 127.0.0.1:<free>:8000`` and ``environment``; wait for /health."""
    port = free_port()
    with started_container(
        client,
        image,
        ports={"8000/tcp": ("127.0.0.1", port)},
        environment=environment,
        labels={LABEL_KEY: RUN_ID},
    ) as container:
        served = Served(container, f"http://127.0.0.1:{port}")
        wait_for_health(served.base_url, container)
        yield served


def remove_images(client: docker.DockerClient, *tags: str) -> None:
    """Remove ``tags`` and every image labelled with this run (newest first: children before parents)."""
    for tag in tags:
        with contextlib.suppress(docker.errors.ImageNotFound, docker.errors.APIError):
            client.images.remove(tag, force=True)
    labelled = client.images.list(all=True, filters={"label": f"{LABEL_KEY}={RUN_ID}"})
    for image in sorted(labelled, key=lambda i: i.attrs.get("Created", ""), reverse=True):
        with contextlib.suppress(docker.errors.ImageNotFound, docker.errors.APIError):
            client.images.remove(image.id, force=True)


def runtime_digest_script() -> str:
    """Python that prints a digest of the openenv_runtime package it imports (sources only)."""
    return textwrap.dedent(
        """
        import hashlib, pathlib, openenv_runtime
        root = pathlib.Path(openenv_runtime.__file__).parent
        digest = hashlib.sha256()
        for path in sorted(p for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
            digest.update(path.relative_to(root).as_posix().encode() + b"\\0" + path.read_bytes())
        print(openenv_runtime.__version__, digest.hexdigest())
        """
    )


# --- fixtures --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    parent = tmp_path_factory.mktemp("build")
    done = openenv("init", NAME, cwd=parent)
    assert done.returncode == 0, done.stdout + done.stderr
    return parent / NAME


@pytest.fixture(scope="module")
def built(
    client: docker.DockerClient, base_image: str, project: Path
) -> Iterator[tuple[str, subprocess.CompletedProcess[str]]]:
    """The generated project built by the CLI: (tag, the finished `openenv build` process)."""
    tag = f"{REPOSITORY}:{RUN_ID}"
    started = time.monotonic()
    done = openenv("build", "--base-image", base_image, "-t", tag, cwd=project)
    print(f"openenv build took {time.monotonic() - started:.1f}s", file=sys.stderr)
    try:
        assert done.returncode == 0, f"openenv build failed:\n{done.stdout}\n{done.stderr}"
        yield tag, done
    finally:
        remove_images(client, tag)


@pytest.fixture(scope="module")
def image(built: tuple[str, subprocess.CompletedProcess[str]]) -> str:
    return built[0]


@pytest.fixture(scope="module")
def default_container(client: docker.DockerClient, image: str) -> Iterator[Served]:
    """The image run as is (no environment, its own HEALTHCHECK); shared by the tests below."""
    with serve(client, image) as served:
        yield served


@pytest.fixture()
def scratch_project(tmp_path: Path, project: Path) -> Path:
    """A copy of the generated project's manifest whose Dockerfile a test writes."""
    dest = tmp_path / NAME
    (dest / "server").mkdir(parents=True)
    (dest / "openenv.yaml").write_text((project / "openenv.yaml").read_text())
    (dest / "server" / "Dockerfile").write_text("FROM scratch\n")
    return dest


# --- the built image -------------------------------------------------------------------------------


def test_build_reports_tag_size_and_how_to_run(
    built: tuple[str, subprocess.CompletedProcess[str]],
) -> None:
    tag, done = built
    out = done.stdout
    assert f"Building {tag} from server/Dockerfile" in out
    assert "Step 1/" in out and "RUN pip install /tmp/openenv_runtime" in out  # the log is streamed
    last = out.strip().splitlines()[-1]
    assert last.startswith(f"{tag} (") and " MB). Run it: " in last
    assert last.endswith(f"docker run --rm -p 8000:8000 {tag}")
    assert done.stderr.strip() == ""


def test_image_metadata(
    client: docker.DockerClient, image: str, project: Path, base_image: str
) -> None:
    attrs = client.images.get(image).attrs
    config = attrs["Config"]
    labels = config["Labels"]
    assert labels["org.opencontainers.image.title"] == NAME
    assert labels["org.opencontainers.image.version"] == "0.1.0"
    assert labels["org.opencontainers.image.source"] == project.resolve().as_uri()
    assert labels["org.opencontainers.image.created"].endswith("Z")
    assert labels["org.opencontainers.image.base.name"] == base_image
    assert labels["io.openenv.runtime.version"] == openenv_runtime.__version__
    assert labels["io.openenv.app"] == f"{NAME}.server.app:app"
    assert config["User"] == "user"
    assert "8000/tcp" in config["ExposedPorts"]
    health = config["Healthcheck"]
    assert "/health" in " ".join(health["Test"]) and health["Interval"] == 30 * 10**9
    assert config["Cmd"] == ["python", "-m", "openenv_runtime.serve", f"{NAME}.server.app:app"]
    assert "HOST=0.0.0.0" in config["Env"] and "PORT=8000" in config["Env"]


def test_image_runs_as_non_root(client: docker.DockerClient, image: str) -> None:
    code, out = run_once(
        client, image, ["python", "-c", "import os; print(os.getuid(), os.getgid())"]
    )
    assert code == 0, out
    assert out.split() == ["1000", "1000"]


def test_image_has_exactly_this_checkouts_runtime(client: docker.DockerClient, image: str) -> None:
    code, out = run_once(client, image, ["python", "-c", runtime_digest_script()])
    assert code == 0, out
    here = subprocess.run(
        [sys.executable, "-c", runtime_digest_script()], capture_output=True, text=True, check=True
    )
    assert out.split() == here.stdout.split()
    assert out.split()[0] == openenv_runtime.__version__


def test_generated_client_runs_an_episode_through_the_container(
    default_container: Served, project: Path
) -> None:
    health = get_json(f"{default_container.base_url}/health")
    assert health["status"] in ("ok", "healthy")
    result = run_client(
        project,
        default_container.base_url,
        """
        import json
        from build_env import BuildAction, BuildEnv

        with BuildEnv(base_url=BASE_URL).sync() as env:
            first = env.reset()
            second = env.step(BuildAction(message="Hello"))
            state = env.state()
        print(json.dumps({"reset": first.observation.echoed_message, "echo": second.observation.echoed_message,
                          "reward": second.reward, "done": second.done, "steps": state.step_count}))
    """,
    )
    assert result == {
        "reset": "",
        "echo": "Hello",
        "reward": pytest.approx(0.5),
        "done": False,
        "steps": 1,
    }


def test_max_concurrent_envs_refuses_a_third_session(
    client: docker.DockerClient, image: str, project: Path
) -> None:
    with serve(client, image, MAX_CONCURRENT_ENVS="2") as served:
        result = run_client(
            project,
            served.base_url,
            """
            import json
            from openenv_runtime import EnvError
            from build_env import BuildAction, BuildEnv

            held = [BuildEnv(base_url=BASE_URL).sync() for _ in range(2)]
            for env in held:
                env.reset()
            third = BuildEnv(base_url=BASE_URL).sync()
            try:
                third.reset()
                code = None
            except EnvError as exc:
                code = exc.code
            third.close()
            held[0].close()
            # A slot given back is usable again.
            again = BuildEnv(base_url=BASE_URL).sync()
            for _ in range(50):
                try:
                    again.reset()
                    reused = True
                    break
                except EnvError:
                    import time
                    time.sleep(0.1)
                    again.close()
                    again = BuildEnv(base_url=BASE_URL).sync()
            else:
                reused = False
            for env in (held[1], again):
                env.close()
            print(json.dumps({"third": code, "reused": reused}))
        """,
        )
    assert result == {"third": "CAPACITY_REACHED", "reused": True}


def test_workers_env_runs_two_workers(client: docker.DockerClient, image: str) -> None:
    with serve(client, image, WORKERS="2") as served:
        pids: set[int] = set()
        deadline = time.monotonic() + 30
        while len(pids) < 2 and time.monotonic() < deadline:
            with contextlib.suppress(urllib.error.URLError, ConnectionError, OSError):
                pids.add(get_json(f"{served.base_url}/health")["pid"])
        assert len(pids) == 2, f"only saw worker pids {pids}"
        commands = [row[-1] for row in served.container.top(ps_args="-ef")["Processes"]]
        assert sum("openenv_runtime.serve" in c for c in commands) == 1, commands  # the supervisor
        assert sum("spawn_main" in c for c in commands) == 2, commands  # its two workers


def test_rebuild_reuses_the_runtime_layer(
    client: docker.DockerClient, image: str, base_image: str, project: Path, tmp_path: Path
) -> None:
    """A project change rebuilds only the project's layers; the base image comes from the environment."""
    copy = tmp_path / NAME
    subprocess.run(["cp", "-r", str(project), str(copy)], check=True)
    (copy / "server" / "app.py").write_text(
        (copy / "server" / "app.py").read_text() + "\n# changed\n"
    )
    tag = f"{REPOSITORY}:{RUN_ID}-rebuilt"
    try:
        done = openenv("build", "-t", tag, cwd=copy, OPENENV_BASE_IMAGE=base_image)
        assert done.returncode == 0, done.stdout + done.stderr
        assert f"(base image {base_image}, from OPENENV_BASE_IMAGE)" in " ".join(
            done.stdout.split()
        )
        log = done.stdout.split("\nStep ")
        runtime_step = next(s for s in log if "RUN pip install /tmp/openenv_runtime" in s)
        project_step = next(
            s for s in log if "RUN pip install ." in s and "openenv_runtime" not in s
        )
        assert "(cached)" in runtime_step
        assert "(cached)" not in project_step
    finally:
        remove_images(client, tag)


def test_container_reaches_healthy(client: docker.DockerClient, default_container: Served) -> None:
    """The image's own HEALTHCHECK (first probe 30 s after start) marks the container healthy."""
    container_id = default_container.container.id
    deadline = time.monotonic() + 90
    status = None
    while time.monotonic() < deadline:
        status = client.api.inspect_container(container_id)["State"].get("Health", {}).get("Status")
        if status == "healthy":
            break
        assert status in ("starting", None), client.api.inspect_container(container_id)["State"]
        time.sleep(1)
    assert status == "healthy"


# --- other Dockerfiles and failures -----------------------------------------------------------------


MULTI_STAGE = {
    "literal FROMs": """\
        FROM python:3.11-slim AS builder
        LABEL {label}
        COPY _openenv_runtime/ /src/runtime/
        RUN python -m compileall -q /src/runtime && python -c "import sys; print(sys.version_info[:2])" > /src/python.txt

        FROM python:3.11-slim
        LABEL {label}
        COPY --from=builder /src /opt/src
        RUN useradd --uid 1000 user
        USER user
        CMD ["python", "-c", "print(open('/opt/src/python.txt').read())"]
        """,
    "ARG BASE_IMAGE": """\
        ARG BASE_IMAGE=python:3.11-slim
        FROM ${{BASE_IMAGE}} AS builder
        LABEL {label}
        ARG GREETING=unset
        COPY _openenv_runtime/ /src/runtime/
        RUN python -m compileall -q /src/runtime && python -c "import sys; print(sys.version_info[:2])" > /src/python.txt \\
            && echo "$GREETING" > /src/greeting.txt

        FROM ${{BASE_IMAGE}}
        LABEL {label}
        COPY --from=builder /src /opt/src
        CMD ["python", "-c", "print(open('/opt/src/python.txt').read())"]
        """,
}


@pytest.mark.parametrize("kind", list(MULTI_STAGE))
def test_multi_stage_dockerfile_with_base_image(
    client: docker.DockerClient, base_image: str, scratch_project: Path, kind: str
) -> None:
    dockerfile = textwrap.dedent(MULTI_STAGE[kind]).format(label=f"{LABEL_KEY}={RUN_ID}")
    (scratch_project / "server" / "Dockerfile").write_text(dockerfile)
    tag = f"{REPOSITORY}:{RUN_ID}-multi"
    # The ARG variant also gets a build argument and --no-cache.
    extra = ["--build-arg", "GREETING=hello there", "--no-cache"] if "ARG" in kind else []
    try:
        done = openenv("build", "--base-image", base_image, "-t", tag, *extra, cwd=scratch_project)
        assert done.returncode == 0, done.stdout + done.stderr
        assert "One or more build-args" not in done.stdout
        code, out = run_once(client, tag, None)
        assert (code, out.strip()) == (0, "(3, 11)")
        code, out = run_once(client, tag, ["ls", "/opt/src/runtime/openenv_runtime/serve.py"])
        assert code == 0, out
        if extra:
            assert "(cached)" not in done.stdout
            code, out = run_once(client, tag, ["cat", "/opt/src/greeting.txt"])
            assert (code, out.strip()) == (0, "hello there")
    finally:
        remove_images(client, tag)


def error_lines(done: subprocess.CompletedProcess[str]) -> list[str]:
    assert "Traceback" not in done.stderr
    return [line for line in done.stderr.splitlines() if line.strip()]


def test_failing_run_step_names_the_step(
    client: docker.DockerClient, base_image: str, scratch_project: Path
) -> None:
    (scratch_project / "server" / "Dockerfile").write_text(
        f"ARG BASE_IMAGE=python:3.11-slim\nFROM ${{BASE_IMAGE}}\nLABEL {LABEL_KEY}={RUN_ID}\n"
        "RUN echo 'about to fail' && echo 'boom: no such thing' >&2 && exit 7\n"
    )
    try:
        done = openenv(
            "build",
            "--base-image",
            base_image,
            "-t",
            f"{REPOSITORY}:{RUN_ID}-broken",
            cwd=scratch_project,
        )
    finally:
        remove_images(client)
    assert done.returncode == 1
    lines = error_lines(done)
    assert lines[0].startswith("Error: Step 4/")  # the build's labels are steps too
    assert lines[0].endswith(
        " (RUN echo 'about to fail' && echo 'boom: no such thing' >&2 && exit 7) failed with exit code 7."
    )
    assert "  boom: no such thing" in lines and "  about to fail" in lines
    assert lines[-1].startswith("Hint: Fix that step of server/Dockerfile")


def test_invalid_dockerfile_is_a_one_line_error(scratch_project: Path, base_image: str) -> None:
    (scratch_project / "server" / "Dockerfile").write_text(f"FROM {base_image}\nRUNN echo typo\n")
    done = openenv("build", "-t", f"{REPOSITORY}:{RUN_ID}-invalid", cwd=scratch_project)
    assert done.returncode == 1
    lines = error_lines(done)
    assert lines[0].startswith("Error: server/Dockerfile is not a valid Dockerfile (line 2): ")
    assert "unknown instruction: RUNN" in lines[0]
    assert lines[1:] == ["Hint: Fix server/Dockerfile (line 2) and build again."]


def test_missing_base_image_is_a_clear_error(client: docker.DockerClient, project: Path) -> None:
    missing = f"openenv-test/no-such-image:{RUN_ID}"
    done = openenv(
        "build", "--base-image", missing, "-t", f"{REPOSITORY}:{RUN_ID}-nobase", cwd=project
    )
    assert done.returncode == 1
    lines = error_lines(done)
    assert lines[0].startswith(
        f"Error: The base image {missing} is not on this machine and could not be pulled: "
    )
    assert lines[1].startswith(f"Hint: Pull it first (`docker pull {missing}`)")


def test_no_engine_is_a_one_line_error(project: Path) -> None:
    done = openenv("build", cwd=project, DOCKER_HOST="unix:///nonexistent")
    assert done.returncode == 1
    assert error_lines(done) == [
        "Error: No Docker engine answers at unix:///nonexistent (No such file or directory): start one "
        "(`sudo systemctl start docker`, or `sudo dockerd &`), or set DOCKER_HOST to a running engine."
    ]


def test_nothing_left_behind(client: docker.DockerClient, default_container: Served) -> None:
    """Containers and images of the tests above are gone (the module's own container and image
    are removed last)."""
    containers = client.containers.list(all=True, filters={"label": f"{LABEL_KEY}={RUN_ID}"})
    assert [c.id for c in containers] == [default_container.container.id]
    leftovers = [
        t for i in client.images.list() for t in i.tags if t.startswith(f"{REPOSITORY}:{RUN_ID}-")
    ]
    assert leftovers == []


def test_context_dir_builds_with_a_plain_docker_build(
    client: docker.DockerClient, base_image: str, project: Path, tmp_path: Path
) -> None:
    """`openenv build --context-dir DIR`, then the docker CLI alone (no openenv) builds DIR."""
    context = tmp_path / "context"
    done = openenv("build", "--base-image", base_image, "--context-dir", str(context), cwd=project)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"docker build -t {NAME}:0.1.0 -t {NAME}:latest {context}" in done.stdout
    tag = f"{REPOSITORY}:context-{RUN_ID}"
    try:
        built = subprocess.run(
            ["docker", "build", "-q", "-t", tag, "--label", f"{LABEL_KEY}={RUN_ID}", str(context)],
            capture_output=True,
            text=True,
            timeout=600,
            env={**os.environ, "DOCKER_BUILDKIT": "0"},
        )
        assert built.returncode == 0, built.stdout + built.stderr
        assert client.images.get(tag).attrs["Config"]["Labels"]["io.openenv.app"] == (
            f"{NAME}.server.app:app"
        )
    finally:
        remove_images(client, tag)

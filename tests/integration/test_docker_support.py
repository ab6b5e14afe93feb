"""The Docker test infrastructure itself: engine, base image, builds, networking."""

from __future__ import annotations

import io
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator

import docker
import docker.errors
import pytest

from openenv_runtime.testing import free_port as _free_port
from tests.support.base_image import ensure_base_image
from tests.support.docker_engine import run_once, started_container

# Small, pure-Python and not part of the base image.
PYPI_PACKAGE = "iniconfig==2.0.0"


@pytest.fixture
def built_tags(client: docker.DockerClient) -> Iterator[list[str]]:
    """Tags appended here are removed after the test."""
    tags: list[str] = []
    yield tags
    for tag in tags:
        try:
            client.images.remove(tag, force=True)
        except docker.errors.ImageNotFound:
            pass


def _build(client: docker.DockerClient, dockerfile: str, tag: str) -> str:
    """Build ``dockerfile`` (no context) through the SDK with default (bridge) networking;
    return the build log."""
    try:
        _, chunks = client.images.build(
            fileobj=io.BytesIO(dockerfile.encode()), tag=tag, rm=True, forcerm=True, pull=False
        )
    except docker.errors.BuildError as exc:
        log = "".join(str(c.get("stream") or c.get("error") or "") for c in exc.build_log)
        pytest.fail(f"docker build failed: {exc}\n{log}")
    return "".join(str(c.get("stream", "")) for c in chunks)


def _fetch(url: str, deadline_s: float = 30) -> str:
    """GET ``url``, retrying until the server answers or the deadline passes."""
    deadline = time.monotonic() + deadline_s
    while True:
        try:
            with urllib.request.urlopen(url, timeout=5) as response:
                return response.read().decode()
        except (urllib.error.URLError, ConnectionError, OSError):
            if time.monotonic() > deadline:
                raise
            time.sleep(0.3)


def test_engine_answers(client: docker.DockerClient) -> None:
    assert client.ping() is True
    assert client.version()["ApiVersion"]


def test_base_image_runs_python(client: docker.DockerClient, base_image: str) -> None:
    code, output = run_once(client, base_image, ["python", "-c", "import sys; print(sys.version)"])
    assert code == 0, output
    assert output.startswith("3.11."), output


def test_base_image_has_pip(client: docker.DockerClient, base_image: str) -> None:
    code, output = run_once(client, base_image, ["pip", "--version"])
    assert code == 0, output
    assert "python 3.11" in output


def test_base_image_looks_like_python_slim(client: docker.DockerClient, base_image: str) -> None:
    config = client.images.get(base_image).attrs["Config"]
    assert config["Cmd"] == ["python3"]
    path = next(e for e in config["Env"] if e.startswith("PATH="))
    assert path.startswith("PATH=/usr/local/sbin:/usr/local/bin:")
    script = (
        "set -e; command -v python pip useradd; "
        "! ls /usr/lib/python3*/EXTERNALLY-MANAGED 2>/dev/null; "
        'python -c "import venv, ssl; print(ssl.get_default_verify_paths().openssl_cafile)"'
    )
    code, output = run_once(client, base_image, ["sh", "-c", script])
    assert code == 0, output
    # A second call finds the image and returns at once.
    started = time.monotonic()
    assert ensure_base_image(client=client) == base_image
    assert time.monotonic() - started < 10


def test_build_installs_from_pypi_and_adds_user(
    client: docker.DockerClient, base_image: str, built_tags: list[str]
) -> None:
    tag = f"openenv-test/build-check:{uuid.uuid4().hex[:8]}"
    built_tags.append(tag)
    dockerfile = (
        f"FROM {base_image}\n"
        f"RUN pip install --no-cache-dir {PYPI_PACKAGE}\n"
        "RUN useradd -m app\n"
        "USER app\n"
        'CMD ["python", "-c", "import iniconfig, os; print(iniconfig.__file__, os.getuid())"]\n'
    )
    log = _build(client, dockerfile, tag)
    assert "Successfully installed iniconfig-2.0.0" in log, log
    code, output = run_once(client, tag, None)
    assert code == 0, output
    module_path, uid = output.split()
    assert module_path.startswith("/usr/local/lib/python3.11/dist-packages/iniconfig/")
    assert uid != "0"


def test_build_with_venv_and_upgraded_pip(
    client: docker.DockerClient, base_image: str, built_tags: list[str]
) -> None:
    """A venv whose pip comes from PyPI (certifi/truststore, not Debian's) still trusts the CAs."""
    tag = f"openenv-test/build-check:{uuid.uuid4().hex[:8]}"
    built_tags.append(tag)
    dockerfile = (
        f"FROM {base_image}\n"
        "RUN python -m venv /opt/venv\n"
        "ENV PATH=/opt/venv/bin:$PATH\n"
        "RUN pip install --no-cache-dir --upgrade pip\n"
        f"RUN pip install --no-cache-dir {PYPI_PACKAGE}\n"
    )
    _build(client, dockerfile, tag)
    code, output = run_once(
        client, tag, ["python", "-c", "import iniconfig, sys; print(sys.prefix)"]
    )
    assert code == 0, output
    assert output.strip() == "/opt/venv"


def test_published_port_reaches_container(client: docker.DockerClient, base_image: str) -> None:
    port = _free_port()
    with started_container(
        client,
        base_image,
        ["python3", "-m", "http.server", "8000"],
        ports={"8000/tcp": ("127.0.0.1", port)},
    ) as container:
        body = _fetch(f"http://127.0.0.1:{port}/")
        assert "Directory listing" in body
        container.reload()
        bindings = container.attrs["NetworkSettings"]["Ports"]["8000/tcp"]
        assert {"HostIp": "127.0.0.1", "HostPort": str(port)} in bindings
    with pytest.raises(docker.errors.NotFound):
        client.containers.get(container.id)


def test_host_network_reaches_container(client: docker.DockerClient, base_image: str) -> None:
    port = _free_port()
    with started_container(
        client,
        base_image,
        ["python3", "-m", "http.server", str(port), "--bind", "127.0.0.1"],
        network_mode="host",
    ):
        assert "Directory listing" in _fetch(f"http://127.0.0.1:{port}/")

"""DaytonaProvider without Daytona's service (unreachable here): the Dockerfile and manifest
readers for real, and start/stop with the real SDK's parameter and image objects, the
sandbox played by a scripted stand-in."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import daytona
import pytest

from openenv_runtime.compat.containers.runtime import DaytonaProvider
from openenv_runtime.providers import dockerfile as df


def test_last_cmd_forms() -> None:
    assert df.last_cmd("FROM x\nCMD first\n# CMD no\ncmd second --port 1\n") == "second --port 1"
    assert df.last_cmd('CMD ["uvicorn", "a:app", "--port", "8000"]') == "uvicorn a:app --port 8000"
    assert df.last_cmd("CMD [broken") == "[broken"
    assert df.last_cmd("FROM x\nCMD \n") is None
    assert df.last_cmd("FROM x\nRUN y\n") is None


def test_strip_mounts_keeps_everything_else() -> None:
    text = (
        "FROM python:3.12\n"
        "RUN --mount=type=cache,target=/root/.cache \\\n"
        "    --mount=type=bind,source=a,target=/a \\\n"
        "    pip install -r /a\n"
        "RUN --mount=type=cache,target=/x uv sync\n"
        "RUN echo --mount=kept\n"
        "ENV A=1 \\\n"
        "    B=--mount=also-kept"
    )
    out = df.strip_mounts(text)
    assert "RUN uv sync" in out.splitlines()
    assert "    pip install -r /a" in out.splitlines()
    assert "RUN echo --mount=kept" in out and "B=--mount=also-kept" in out
    assert "type=cache" not in out and "type=bind" not in out
    assert df.strip_mounts("") == ""


def test_missing_copy_sources(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    text = (
        "COPY --chown=app:app src /app/src\nCOPY --from=build /out /out\n"
        "COPY *.toml nothing /app/\nCOPY /abs /x\n"
    )
    assert df.missing_copy_sources(text, tmp_path) == ["*.toml", "nothing"]


def test_app_field() -> None:
    assert df.app_field("app: 'server.app:app'  # the app\n") == "server.app:app"
    assert df.app_field("server:\n  app: nested\n") is None
    assert df.app_field("app: # none\n") is None
    assert df.app_field(": not yaml: [") is None


def test_image_from_dockerfile_registers_what_start_needs(tmp_path: Path) -> None:
    (tmp_path / "server").mkdir()
    dockerfile = tmp_path / "server" / "Dockerfile"
    dockerfile.write_text(
        "FROM python:3.12\nRUN --mount=type=cache,target=/x pip install a\n"
        "COPY server /app/server\nCMD python -m serve\n"
    )
    image = DaytonaProvider.image_from_dockerfile(str(dockerfile))
    entry = DaytonaProvider._dockerfile_registry[str(dockerfile.resolve())]
    assert image == f"dockerfile:{dockerfile.resolve()}"
    assert entry["context_dir"] == str(tmp_path) and entry["server_cmd"] == "python -m serve"
    assert "--mount" not in entry["stripped_content"]
    with pytest.raises(FileNotFoundError):
        DaytonaProvider.image_from_dockerfile(str(tmp_path / "nope"))
    with pytest.raises(ValueError, match="COPY source 'server'"):
        DaytonaProvider.image_from_dockerfile(str(dockerfile), context_dir=str(tmp_path / "server"))


class Sandbox:
    """Answers the provider's shell commands as a sandbox with ``files`` would."""

    def __init__(self, files: dict[str, str], alive: bool = True) -> None:
        self.files = files
        self.alive = alive
        self.commands: list[str] = []
        self.process = self

    def exec(self, command: str, timeout: int = 0) -> Any:
        self.commands.append(command)
        result = ""
        if command.startswith("test -f "):
            result = "found" if command.split()[2] in self.files else ""
        elif command.startswith("find /app"):
            result = next((p for p in self.files if p.endswith("openenv.yaml")), "")
        elif command.startswith("cat "):
            result = self.files.get(command.split()[1], "")
        elif command.startswith("kill -0"):
            result = "RUNNING" if self.alive else "DEAD"
        return daytona.ExecuteResponse(exit_code=0, result=result)

    def create_signed_preview_url(self, port: int, expires_in_seconds: int) -> Any:
        return type("Signed", (), {"url": f"https://{port}-tok.proxy.example"})()


class Recorder:
    def __init__(self, sandbox: Sandbox) -> None:
        self.sandbox = sandbox
        self.created: list[tuple[Any, dict[str, Any]]] = []
        self.deleted: list[Any] = []

    def create(self, params: Any, **kwargs: Any) -> Sandbox:
        self.created.append((params, kwargs))
        return self.sandbox

    def delete(self, sandbox: Any) -> None:
        self.deleted.append(sandbox)


def _provider(sandbox: Sandbox, **options: Any) -> tuple[DaytonaProvider, Recorder]:
    provider = DaytonaProvider(api_key="not-used", **options)
    recorder = Recorder(sandbox)
    provider._daytona = recorder
    return provider, recorder


def test_start_with_real_sdk_params_and_discovered_app() -> None:
    sandbox = Sandbox({"/app/envs/echo/openenv.yaml": "app: server.app:app\n"})
    resources = daytona.Resources(cpu=2, memory=4)
    provider, recorder = _provider(sandbox, resources=resources, public=True)
    with pytest.raises(ValueError, match="only supports port 8000"):
        provider.start_container("echo:latest", port=9000)
    url = provider.start_container("echo:latest", env_vars={"A": "1"})
    params, kwargs = recorder.created[0]
    assert isinstance(params, daytona.CreateSandboxFromImageParams)
    assert (params.image, params.env_vars, params.public) == ("echo:latest", {"A": "1"}, True)
    assert params.resources is resources and kwargs == {"timeout": 300}
    assert url == "https://8000-tok.proxy.example"
    start = next(c for c in sandbox.commands if c.startswith("nohup"))
    assert (
        "cd /app/envs/echo && python -m uvicorn server.app:app --host 0.0.0.0 --port 8000" in start
    )
    provider.stop_container()
    assert recorder.deleted == [sandbox] and provider._sandbox is None


def test_dockerfile_image_uses_the_sdk_image_and_its_cmd(tmp_path: Path) -> None:
    (tmp_path / "server").mkdir()
    dockerfile = tmp_path / "server" / "Dockerfile"
    dockerfile.write_text(
        "FROM python:3.12\nRUN --mount=type=cache,target=/x true\nCMD python -m app\n"
    )
    image = DaytonaProvider.image_from_dockerfile(str(dockerfile))
    provider, recorder = _provider(Sandbox({}))
    provider.start_container(image)
    params, _ = recorder.created[0]
    assert isinstance(params.image, daytona.Image)
    assert "--mount" not in params.image.dockerfile()
    assert any("python -m app" in c for c in provider._sandbox.commands)
    assert list(tmp_path.glob("*.dockerfile")) == []
    snapshot, recorder = _provider(Sandbox({}), cmd="serve")
    snapshot.start_container("snapshot:mine")
    assert isinstance(recorder.created[0][0], daytona.CreateSandboxFromSnapshotParams)


def test_no_way_to_start_deletes_the_sandbox() -> None:
    provider, recorder = _provider(Sandbox({}))
    with pytest.raises(ValueError, match=r"Could not find openenv\.yaml"):
        provider.start_container("bare:latest")
    assert len(recorder.deleted) == 1 and provider._sandbox is None


def test_a_dead_server_is_reported_with_its_log() -> None:
    provider, _ = _provider(
        Sandbox({"/tmp/openenv-server.log": "boom: no module"}, alive=False), cmd="x"
    )
    url = provider.start_container("img:latest")
    # A closed port on this machine stands for the preview URL: no request leaves it.
    with pytest.raises(RuntimeError, match="boom: no module"):
        provider.wait_for_ready("http://127.0.0.1:9", timeout_s=5)
    assert url.startswith("https://")

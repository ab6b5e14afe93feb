"""openenv_cli.hub (space, errors, upload): the parts of push that need no Hub: options, ids, URLs, front matter,
variables, token resolution, redaction, error wording and the local plan."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from openenv_cli.errors import OpenEnvError, UsageError
from openenv_cli.hub.errors import (
    HubContext,
    Redactor,
    find_token,
    http_error,
    redacting,
    resolve_token,
)
from openenv_cli.hub.space import (
    RepoRef,
    parse_repo_id,
    space_front_matter,
    space_hardware,
    space_readme,
    space_subdomain,
    space_urls,
    space_variables,
    split_front_matter,
)
from openenv_cli.hub.upload import prepare_push
from openenv_cli.image.selection import RUNTIME_DIR
from openenv_cli.manifest_schema import Manifest
from openenv_cli.scaffold import render_project


def _manifest(**overrides: object) -> Manifest:
    data: dict = {"name": "my_env", "app": "my_env.server.app:app", **overrides}
    return Manifest.model_validate(data)


# -- options --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "raw,expected",
    [
        ("my_env", RepoRef(None, "my_env")),
        ("alice/my_env", RepoRef("alice", "my_env")),
        ("spaces/alice/my-env", RepoRef("alice", "my-env")),
        ("https://huggingface.co/spaces/alice/my.env/", RepoRef("alice", "my.env")),
        (" openenv-org/Echo-Env ", RepoRef("openenv-org", "Echo-Env")),
    ],
)
def test_parse_repo_id(raw: str, expected: RepoRef) -> None:
    assert parse_repo_id(raw) == expected


@pytest.mark.parametrize(
    "raw", ["", "a/b/c", "-x", "x-", "a--b", "a..b", "al ice/x", "alice/", "x" * 97]
)
def test_parse_repo_id_rejects(raw: str) -> None:
    with pytest.raises(UsageError, match="not a valid Space id"):
        parse_repo_id(raw)


@pytest.mark.parametrize(
    "raw", ["datasets/alice/x", "models/alice/x", "https://huggingface.co/alice/x"]
)
def test_parse_repo_id_refuses_other_repo_types(raw: str) -> None:
    with pytest.raises(UsageError):
        parse_repo_id(raw)


def test_namespace_places_a_bare_name() -> None:
    assert parse_repo_id("my_env", "my-org") == RepoRef("my-org", "my_env")
    assert parse_repo_id("my-org/my_env", "my-org") == RepoRef("my-org", "my_env")
    with pytest.raises(UsageError, match="different namespaces"):
        parse_repo_id("alice/my_env", "my-org")
    with pytest.raises(UsageError, match="not a valid Space id"):
        parse_repo_id("my_env", "bad--org")


def test_space_url_on_any_endpoint() -> None:
    assert parse_repo_id("http://127.0.0.1:8123/spaces/a/b") == RepoRef("a", "b")


def test_space_hardware() -> None:
    assert space_hardware("cpu-upgrade") == "cpu-upgrade"
    with pytest.raises(UsageError, match="not a Space hardware flavor"):
        space_hardware("gpu-please")


def test_repo_ref() -> None:
    assert RepoRef(None, "x").with_user("bob") == "bob/x"
    assert RepoRef("org", "x").with_user("bob") == "org/x"
    assert RepoRef(None, "x").shown() == "<your user>/x"


# -- URLs -----------------------------------------------------------------------------------


def test_space_urls() -> None:
    assert space_subdomain("Alice/My_Env.v2") == "alice-my-env-v2"
    urls = space_urls("alice/my_env", "https://huggingface.co/", 9000)
    assert urls.page == "https://huggingface.co/spaces/alice/my_env"
    assert urls.app == "https://alice-my-env.hf.space"
    assert urls.websocket == "wss://alice-my-env.hf.space/ws"
    assert urls.pip == "pip install git+https://huggingface.co/spaces/alice/my_env"
    assert urls.docker == "docker run -p 9000:9000 registry.hf.space/alice-my-env:latest"
    assert urls.pip_with_runtime == (
        'pip install "openenv-runtime @ git+https://huggingface.co/spaces/alice/my_env#subdirectory=_openenv_runtime"'
        " git+https://huggingface.co/spaces/alice/my_env"
    )


# -- README ---------------------------------------------------------------------------------


def test_split_front_matter() -> None:
    assert split_front_matter("---\na: 1\n---\n\n# T\n") == ({"a": 1}, "# T\n")
    assert split_front_matter("# T\n") == (None, "# T\n")
    assert split_front_matter("---\na: [\n---\nbody\n") == (None, "body\n")
    assert split_front_matter("---\nnever closed\n") == (None, "---\nnever closed\n")


def test_front_matter_from_scratch() -> None:
    front = space_front_matter(_manifest(port=9000), None, interface=True)
    assert list(front) == [
        "title",
        "emoji",
        "colorFrom",
        "colorTo",
        "sdk",
        "app_port",
        "pinned",
        "tags",
        "base_path",
    ]
    assert front["title"] == "My Env"
    assert front["sdk"] == "docker" and front["app_port"] == 9000 and front["pinned"] is False
    assert front["tags"] == ["openenv"] and front["base_path"] == "/web"
    assert front["colorFrom"] in {
        "red",
        "yellow",
        "green",
        "blue",
        "indigo",
        "purple",
        "pink",
        "gray",
    }


def test_front_matter_keeps_valid_user_choices_and_fixes_the_rest() -> None:
    existing = {
        "title": "Mine",
        "emoji": "🐍",
        "colorFrom": "green",
        "colorTo": "chartreuse",
        "sdk": "gradio",
        "sdk_version": "4.0",
        "app_file": "app.py",
        "app_port": 7860,
        "pinned": True,
        "tags": ["rl", "openenv"],
        "license": "mit",
        "base_path": "/elsewhere",
    }
    front = space_front_matter(_manifest(), existing, interface=False)
    assert front["title"] == "Mine" and front["emoji"] == "🐍" and front["colorFrom"] == "green"
    assert front["colorTo"] != "chartreuse"
    assert front["sdk"] == "docker" and front["app_port"] == 8000 and front["pinned"] is True
    assert front["tags"] == ["rl", "openenv"] and front["license"] == "mit"
    assert "base_path" not in front and "sdk_version" not in front and "app_file" not in front
    assert space_front_matter(_manifest(), {"tags": "rl"}, interface=True)["tags"] == [
        "rl",
        "openenv",
    ]


def test_space_readme_keeps_the_body() -> None:
    text, front = space_readme("---\ntitle: X\n---\n# Body\n\ntext\n", _manifest(), interface=True)
    parsed, body = split_front_matter(text)
    assert parsed == front and body == "# Body\n\ntext\n"
    assert text.startswith("---\ntitle: X\n")


def test_space_readme_without_a_readme() -> None:
    text, _ = space_readme(None, _manifest(description="Echoes."), interface=True)
    parsed, body = split_front_matter(text)
    assert parsed is not None and parsed["sdk"] == "docker"
    assert body == "# My Env\n\nEchoes.\n"


def test_template_readme_front_matter_round_trip() -> None:
    readme = render_project("my_env")["README.md"]
    text, front = space_readme(readme, _manifest(), interface=True)
    assert yaml.safe_load(text.split("---\n")[1]) == front
    assert split_front_matter(readme)[1] == split_front_matter(text)[1]


# -- variables ------------------------------------------------------------------------------


def test_space_variables_precedence() -> None:
    manifest = _manifest(
        server={"workers": 2, "max_concurrent_envs": 16, "session_timeout": 30.5},
        push={"variables": {"MODE": "fast", "WORKERS": "3"}},
    )
    assert space_variables(manifest, {"MODE": "slow", "LEVEL": "1"}, no_interface=False) == {
        "WORKERS": "3",
        "MAX_CONCURRENT_ENVS": "16",
        "SESSION_TIMEOUT": "30.5",
        "ENABLE_WEB_INTERFACE": "true",
        "MODE": "slow",
        "LEVEL": "1",
    }


def test_space_variables_interface() -> None:
    assert space_variables(_manifest(), {}, no_interface=True)["ENABLE_WEB_INTERFACE"] == "false"
    assert (
        space_variables(_manifest(server={"web_interface": False}), {}, no_interface=False)[
            "ENABLE_WEB_INTERFACE"
        ]
        == "false"
    )
    forced = _manifest(push={"variables": {"ENABLE_WEB_INTERFACE": "true"}})
    assert space_variables(forced, {}, no_interface=True)["ENABLE_WEB_INTERFACE"] == "false"
    with pytest.raises(UsageError, match="contradicts"):
        space_variables(_manifest(), {"ENABLE_WEB_INTERFACE": "1"}, no_interface=True)


# -- token ----------------------------------------------------------------------------------


def test_token_order(monkeypatch: pytest.MonkeyPatch) -> None:
    import huggingface_hub

    monkeypatch.setattr(huggingface_hub, "get_token", lambda: "stored")
    assert resolve_token("flag", {"HF_TOKEN": "env"}) == ("flag", "--token")
    assert resolve_token(None, {"HF_TOKEN": "env"}) == ("env", "HF_TOKEN")
    assert resolve_token(None, {"HF_TOKEN": "  "}) == ("stored", "the stored login")


def test_not_logged_in(monkeypatch: pytest.MonkeyPatch) -> None:
    import huggingface_hub

    monkeypatch.setattr(huggingface_hub, "get_token", lambda: None)
    with pytest.raises(OpenEnvError) as caught:
        resolve_token(None, {})
    assert "not logged in" in caught.value.message
    assert "hf auth login" in caught.value.hint and "--token" in caught.value.hint


def test_no_token_is_fine_where_none_is_needed(monkeypatch: pytest.MonkeyPatch) -> None:
    import huggingface_hub

    monkeypatch.setattr(huggingface_hub, "get_token", lambda: None)
    assert find_token(None, {}) is None
    assert find_token(None, {"HF_TOKEN": "env"}) == ("env", "HF_TOKEN")


# -- redaction and errors -------------------------------------------------------------------


def test_redactor() -> None:
    redact = Redactor(["hunter2", "", "ab"])
    redact.add(None)
    redact.add("hunter22")
    assert redact("pw hunter22 and hunter2, ab") == "pw *** and ***, ab"


def test_redacting_scrubs_errors_and_drops_their_cause() -> None:
    redact = Redactor(["hunter2"])
    with pytest.raises(OpenEnvError) as caught, redacting(redact):
        try:
            raise ValueError("inner hunter2")
        except ValueError:
            raise OpenEnvError("failed with hunter2", hint="not hunter2") from None
    assert caught.value.message == "failed with ***" and caught.value.hint == "not ***"
    assert "hunter2" not in str(caught.value)
    with pytest.raises(OpenEnvError) as caught, redacting(redact):
        raise RuntimeError("boom hunter2")
    assert "hunter2" not in str(caught.value) and "RuntimeError" in caught.value.message
    assert caught.value.__cause__ is None and caught.value.__suppress_context__


def _http(status: int, message: str | None = None) -> SimpleNamespace:
    headers = {"X-Error-Message": message} if message else {}
    return SimpleNamespace(
        response=SimpleNamespace(status_code=status, headers=headers), server_message=message
    )


@pytest.mark.parametrize(
    "status,words",
    [
        (401, ["rejected the token from HF_TOKEN", "hf auth login"]),
        (403, ["No write access to alice/x for bob", "--repo-id bob/NAME"]),
        (404, ["alice/x was not found"]),
        (409, ["The name alice/x is taken"]),
        (429, ["rate-limited"]),
        (500, ["answered 500"]),
    ],
)
def test_http_errors_are_one_line_each(status: int, words: list[str]) -> None:
    ctx = HubContext(
        endpoint="https://hub.example", token_source="HF_TOKEN", repo_id="alice/x", user="bob"
    )
    error = http_error(_http(status, "server says no"), "creating the Space", ctx)
    text = f"{error.message}\n{error.hint}"
    for word in words:
        assert word in text
    assert "\n" not in error.message


# -- the local plan -------------------------------------------------------------------------


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "my_env"
    for relative, text in render_project("my_env").items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    (root / ".env").write_text("API_KEY=from-dotenv\n")
    return root


def test_prepare_push(project: Path, tmp_path: Path) -> None:
    from openenv_cli.manifest import load_manifest

    manifest = load_manifest(project)
    plan = prepare_push(
        project,
        tmp_path / "staged",
        manifest=manifest,
        base_image="python:3.12-slim",
        variables={"LEVEL": "2"},
        secrets={"API_KEY": "hunter2-value"},
        excludes=["tests/"],
        private=True,
    )
    files = set(plan.staged.files)
    assert {
        "Dockerfile",
        "README.md",
        "server/Dockerfile",
        f"{RUNTIME_DIR}/pyproject.toml",
    } <= files
    assert ".env" not in files
    assert "ARG BASE_IMAGE=python:3.12-slim" in (plan.staged.root / "Dockerfile").read_text()
    front, _ = split_front_matter((plan.staged.root / "README.md").read_text())
    assert front == plan.front_matter and front["base_path"] == "/web"
    assert plan.repo == RepoRef(None, "my_env") and plan.create_private is True
    assert plan.variables["LEVEL"] == "2" and plan.interface
    assert "hunter2-value" not in repr(plan)
    for path in plan.staged.root.rglob("*"):
        if path.is_file():
            assert b"hunter2-value" not in path.read_bytes()


def test_prepare_push_without_readme_and_no_interface(project: Path, tmp_path: Path) -> None:
    from openenv_cli.manifest import load_manifest

    (project / "README.md").unlink()
    plan = prepare_push(
        project,
        tmp_path / "staged",
        manifest=load_manifest(project),
        repo_id="org/space",
        no_interface=True,
    )
    assert "README.md" in plan.staged.files
    assert "base_path" not in plan.front_matter and not plan.interface
    assert plan.variables["ENABLE_WEB_INTERFACE"] == "false"
    assert plan.repo == RepoRef("org", "space")

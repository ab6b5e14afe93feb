"""`openenv push` end to end: the real CLI in a subprocess, the real `huggingface_hub` client,
the local Hub-compatible test server (tests/support/hub_server.py)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

from openenv_cli.image.runtime_bundle import runtime_version
from openenv_cli.image.selection import RUNTIME_DIR
from openenv_cli.scaffold import render_project, write_project
from tests.support.hub_server import (
    ALICE_READ_TOKEN,
    ALICE_TOKEN,
    BOB_TOKEN,
    ORG,
    HubHandle,
    isolated_hub,
    parse_front_matter,
)

NAME = "echo_env"
SECRET = "s3cr3t-Value-0451"
ENV_SECRET = "another-s3cr3t-9913"
CLI = [sys.executable, "-c", "from openenv_cli.main import main; main()"]


@pytest.fixture
def hub(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[HubHandle]:
    with isolated_hub(monkeypatch, tmp_path / "hf_home") as handle:
        yield handle


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A project made by `openenv init`, plus everything that must never be uploaded."""
    root = tmp_path / NAME
    write_project(render_project(NAME), root)
    junk = [
        ".git/HEAD",
        ".git/objects/ab/cdef",
        ".env",
        ".env.production",
        ".venv/pyvenv.cfg",
        ".venv/lib/x.py",
        "localenv/pyvenv.cfg",
        "localenv/bin/python",
        "__pycache__/models.cpython-311.pyc",
        "server/__pycache__/app.pyc",
        ".pytest_cache/v/cache",
        ".mypy_cache/3.11/x.json",
        ".ruff_cache/x",
        "node_modules/x/index.js",
        f"{NAME}.egg-info/PKG-INFO",
        "build/lib/x.py",
        "dist/x.whl",
        "uv.lock",
        "poetry.lock",
        "Pipfile.lock",
        "pdm.lock",
        f"{RUNTIME_DIR}/stale.py",
        "notes.local",
        "data/big.bin",
    ]
    for relative in junk:
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"API_KEY={SECRET}\n" if relative.startswith(".env") else "junk\n")
    with (root / ".gitignore").open("a") as gitignore:
        gitignore.write("*.local\n")
    return root


def _env(hub: HubHandle, tmp_path: Path, token: str | None, **extra: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in {"HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_HUB_OFFLINE", "OPENENV_DEBUG"}
    }
    env.update(hub.client_env(tmp_path / "cli_hf_home", token))
    scratch = tmp_path / "cli_tmp"
    scratch.mkdir(exist_ok=True)
    env.update({"COLUMNS": "200", "TMPDIR": str(scratch), **extra})
    return env


def push(
    hub: HubHandle,
    tmp_path: Path,
    project: Path,
    *args: str,
    token: str | None = ALICE_TOKEN,
    debug: bool = False,
    **env: str,
) -> subprocess.CompletedProcess[str]:
    command = [*CLI, *(["--debug"] if debug else []), "push", str(project), *args]
    return subprocess.run(
        command, env=_env(hub, tmp_path, token, **env), capture_output=True, text=True, timeout=120
    )


def ok(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, (
        f"exit {result.returncode}\nstdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    )
    return result.stdout


def failed(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 1, (
        f"exit {result.returncode}\nstdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    )
    assert "Traceback" not in result.stderr and "Traceback" not in result.stdout
    assert result.stderr.count("Error:") == 1
    return result.stderr


# -- a successful push ----------------------------------------------------------------------


def test_first_push_uploads_exactly_what_the_space_needs(
    hub: HubHandle, tmp_path: Path, project: Path
) -> None:
    out = ok(push(hub, tmp_path, project, "--exclude", "data/"))
    repo = hub.state.repo(f"alice/{NAME}")
    files = set(repo.files)

    shipped = {
        ".gitattributes",
        ".dockerignore",
        "Dockerfile",
        "README.md",
        "__init__.py",
        "_build/quiet_setuptools.py",  # the build backend that pyproject.toml names
        "client.py",
        "models.py",
        "openenv.yaml",
        "pyproject.toml",
        "server/Dockerfile",
        "server/__init__.py",
        "server/app.py",
        f"server/{NAME}_environment.py",
    }
    assert {
        f for f in files if not f.startswith(f"{RUNTIME_DIR}/")
    } == shipped  # .dockerignore drops tests/ and .gitignore
    assert repo.text("Dockerfile") == (project / "server/Dockerfile").read_text()

    runtime = tomllib.loads(repo.text(f"{RUNTIME_DIR}/pyproject.toml"))["project"]
    assert runtime["name"] == "openenv-runtime" and runtime["version"] == runtime_version()
    assert f"{RUNTIME_DIR}/openenv_runtime/__init__.py" in files
    assert f"{RUNTIME_DIR}/stale.py" not in files
    assert not any("__pycache__" in f or f.endswith(".pyc") for f in files)

    front = parse_front_matter(repo.text("README.md"))
    assert front is not None
    assert front["sdk"] == "docker" and front["app_port"] == 8000 and front["pinned"] is False
    assert "openenv" in front["tags"] and front["base_path"] == "/web"
    assert front["title"] and front["emoji"] and front["colorFrom"] and front["colorTo"]
    assert (
        repo.text("README.md").split("---\n", 2)[2]
        == (project / "README.md").read_text().split("---\n", 2)[2]
    )

    assert not repo.private
    assert [c.summary for c in repo.commits] == [
        "initial commit",
        f"Deploy {NAME} 0.1.0 with openenv",
    ]
    assert repo.variable_values()["ENABLE_WEB_INTERFACE"] == "true"

    assert f"Created the Space alice/{NAME} (public)" in out
    assert f"{hub.url}/spaces/alice/{NAME}" in out
    assert "https://alice-echo-env.hf.space" in out
    assert "wss://alice-echo-env.hf.space/ws" in out
    assert f"pip install git+{hub.url}/spaces/alice/{NAME}" in out
    assert "docker run -p 8000:8000 registry.hf.space/alice-echo-env:latest" in out


def test_never_uploaded_even_without_ignore_files(
    hub: HubHandle, tmp_path: Path, project: Path
) -> None:
    (project / ".gitignore").unlink()
    (project / ".dockerignore").unlink()
    ok(push(hub, tmp_path, project))
    files = set(hub.state.repo(f"alice/{NAME}").files)
    for banned in (
        ".git/",
        ".env",
        ".venv/",
        "localenv/",
        "__pycache__/",
        ".pytest_cache/",
        ".mypy_cache/",
        ".ruff_cache/",
        "node_modules/",
        f"{NAME}.egg-info/",
        "build/",
        "dist/",
    ):
        assert not any(f == banned or f.startswith(banned) for f in files), banned
    assert not files & {".env.production", "uv.lock", "poetry.lock", "Pipfile.lock", "pdm.lock"}
    assert {
        "notes.local",
        "data/big.bin",
        "tests/test_echo_env.py",
    } <= files  # only the ignore files kept them out


def test_second_push_without_changes_makes_no_commit(
    hub: HubHandle, tmp_path: Path, project: Path
) -> None:
    ok(push(hub, tmp_path, project))
    commits = len(hub.state.commits(f"alice/{NAME}"))
    before = len(hub.state.calls("POST", "/commit/"))
    out = ok(push(hub, tmp_path, project))
    assert "no new commit" in out and "variables unchanged" in out
    assert len(hub.state.commits(f"alice/{NAME}")) == commits
    assert len(hub.state.calls("POST", "/commit/")) == before
    # WORKERS, SESSION_TIMEOUT and ENABLE_WEB_INTERFACE (the template leaves the capacity to
    # create_app), set by the first push only.
    assert len(hub.state.calls("POST", "/variables")) == 3

    (project / "models.py").write_text((project / "models.py").read_text() + "\n# changed\n")
    (project / "client.py").unlink()
    out = ok(push(hub, tmp_path, project))
    head = hub.state.repo(f"alice/{NAME}").head
    assert head.added == ["models.py"] and head.deleted == ["client.py"]
    # huggingface_hub decided what changed: one file sent in the commit, one deleted.
    assert ", deleted 1 in commit" in out and "client.py (deleted)" in out


def test_bare_name_goes_to_the_user_and_orgs_work(
    hub: HubHandle, tmp_path: Path, project: Path
) -> None:
    ok(push(hub, tmp_path, project, "--repo-id", "my-space"))
    assert hub.state.has_repo("alice/my-space")
    out = ok(push(hub, tmp_path, project, "--repo-id", f"{ORG}/shared"))
    assert hub.state.has_repo(f"{ORG}/shared")
    assert f"https://{ORG}-shared.hf.space" in out


def test_reference_spellings_namespace_directory_repo_id_hardware(
    hub: HubHandle, tmp_path: Path, project: Path
) -> None:
    # `openenv push --namespace my-org --private` and `push -d . -r a/b`, as OpenEnv users type them.
    out = ok(push(hub, tmp_path, project, "--namespace", ORG, "--private", "-H", "cpu-upgrade"))
    repo = hub.state.repo(f"{ORG}/{NAME}")
    assert repo.private and repo.hardware == "cpu-upgrade"
    assert "hardware requested: cpu-upgrade" in out
    assert hub.state.calls("POST", "/hardware")
    done = subprocess.run(
        [*CLI, "push", "-d", ".", "-r", "alice/b"],
        cwd=project,
        env=_env(hub, tmp_path, ALICE_TOKEN),
        capture_output=True,
        text=True,
        timeout=120,
    )
    ok(done)
    assert hub.state.has_repo("alice/b")


def test_repo_id_from_the_manifest(hub: HubHandle, tmp_path: Path, project: Path) -> None:
    manifest = project / "openenv.yaml"
    manifest.write_text(
        manifest.read_text().replace(
            "  # repo_id: your-user/echo_env", f"  repo_id: {ORG}/from-yaml"
        )
    )
    ok(push(hub, tmp_path, project))
    assert hub.state.has_repo(f"{ORG}/from-yaml")


def test_visibility_of_new_and_existing_spaces(
    hub: HubHandle, tmp_path: Path, project: Path
) -> None:
    ok(push(hub, tmp_path, project, "--private"))
    repo = hub.state.repo(f"alice/{NAME}")
    assert repo.private

    out = ok(push(hub, tmp_path, project, "--public"))
    assert not repo.private and "visibility changed to public" in out
    ok(push(hub, tmp_path, project))
    assert not repo.private  # no flag: unchanged

    out = ok(push(hub, tmp_path, project, "--private"))
    assert repo.private and "visibility changed to private" in out
    ok(push(hub, tmp_path, project))
    assert repo.private  # `private: false` in openenv.yaml never makes a Space public
    assert len(hub.state.calls("PUT", "/settings")) == 2


def test_manifest_private_applies_to_new_and_existing_spaces(
    hub: HubHandle, tmp_path: Path, project: Path
) -> None:
    hub.state.create_repo(f"alice/{NAME}")
    manifest = project / "openenv.yaml"
    manifest.write_text(manifest.read_text().replace("  private: false", "  private: true"))
    ok(push(hub, tmp_path, project))
    assert hub.state.repo(f"alice/{NAME}").private
    ok(push(hub, tmp_path, project, "--repo-id", "brand-new"))
    assert hub.state.repo("alice/brand-new").private


def test_variables_and_secrets(hub: HubHandle, tmp_path: Path, project: Path) -> None:
    manifest = project / "openenv.yaml"
    manifest.write_text(
        manifest.read_text().replace(
            "  variables: {}", "  variables:\n    MODE: fast\n    LEVEL: 1"
        )
    )
    result = push(
        hub,
        tmp_path,
        project,
        "-e",
        "LEVEL=3",
        "-e",
        "EXTRA=x=y",
        "--secret",
        f"API_KEY={SECRET}",
        "--secret",
        "FROM_ENV",
        FROM_ENV=ENV_SECRET,
    )
    out = ok(result)
    repo = hub.state.repo(f"alice/{NAME}")
    assert repo.variable_values() == {
        "WORKERS": "1",
        "SESSION_TIMEOUT": "600",
        "ENABLE_WEB_INTERFACE": "true",
        "MODE": "fast",
        "LEVEL": "3",
        "EXTRA": "x=y",
    }
    assert repo.secret_values() == {"API_KEY": SECRET, "FROM_ENV": ENV_SECRET}
    assert "secrets set: API_KEY, FROM_ENV" in out

    # Variables are set again on every push: a change made on the Hub is put back.
    hub.api().add_space_variable(f"alice/{NAME}", "MODE", "changed-on-the-hub")
    ok(push(hub, tmp_path, project))
    assert repo.variable_values()["MODE"] == "fast"

    _assert_secrets_nowhere(hub, tmp_path, project, result)


def _assert_secrets_nowhere(
    hub: HubHandle, tmp_path: Path, project: Path, *results: subprocess.CompletedProcess[str]
) -> None:
    for result in results:
        for text in (result.stdout, result.stderr):
            assert SECRET not in text and ENV_SECRET not in text
    for data in hub.state.repo(f"alice/{NAME}").files.values():
        assert SECRET.encode() not in data and ENV_SECRET.encode() not in data
    assert not any(SECRET in r.query or SECRET in r.path for r in hub.state.requests)
    leftovers = [p for p in (tmp_path / "cli_tmp").rglob("*") if p.is_file()]
    assert not any(
        SECRET.encode() in p.read_bytes() or ENV_SECRET.encode() in p.read_bytes()
        for p in leftovers
    )
    for path in project.rglob("*"):
        if path.is_file() and not path.name.startswith(".env"):
            assert SECRET.encode() not in path.read_bytes()


def test_secrets_stay_out_of_errors_and_debug_output(
    hub: HubHandle, tmp_path: Path, project: Path
) -> None:
    results = [
        push(
            hub,
            tmp_path,
            project,
            "--secret",
            f"API_KEY={SECRET}",
            "--repo-id",
            "alice/x",
            token=BOB_TOKEN,
            debug=True,
        ),
        push(
            hub,
            tmp_path,
            project,
            "--secret",
            f"API_KEY={SECRET}",
            "--token",
            SECRET,
            token=None,
            debug=True,
        ),
        push(hub, tmp_path, project, "--secret", SECRET, debug=True),
        push(
            hub,
            tmp_path,
            project,
            "--dry-run",
            "--secret",
            f"API_KEY={SECRET}",
            "--secret",
            "FROM_ENV",
            FROM_ENV=ENV_SECRET,
        ),
    ]
    assert [r.returncode for r in results] == [1, 1, 2, 0]
    assert "API_KEY=***" in results[3].stdout and "FROM_ENV=***" in results[3].stdout
    for result in results:
        for text in (result.stdout, result.stderr):
            assert SECRET not in text and ENV_SECRET not in text


def test_no_interface(hub: HubHandle, tmp_path: Path, project: Path) -> None:
    ok(push(hub, tmp_path, project, "--no-interface"))
    repo = hub.state.repo(f"alice/{NAME}")
    assert "base_path" not in parse_front_matter(repo.text("README.md"))
    assert repo.variable_values()["ENABLE_WEB_INTERFACE"] == "false"
    ok(push(hub, tmp_path, project))
    assert parse_front_matter(repo.text("README.md"))["base_path"] == "/web"
    assert repo.variable_values()["ENABLE_WEB_INTERFACE"] == "true"


def test_base_image(hub: HubHandle, tmp_path: Path, project: Path) -> None:
    ok(push(hub, tmp_path, project, "--base-image", "python:3.12-slim"))
    dockerfile = hub.state.repo(f"alice/{NAME}").text("Dockerfile")
    assert "ARG BASE_IMAGE=python:3.12-slim\nFROM ${BASE_IMAGE}\n" in dockerfile


def test_existing_non_docker_space_becomes_a_docker_space(
    hub: HubHandle, tmp_path: Path, project: Path
) -> None:
    hub.state.create_repo(f"alice/{NAME}", sdk="gradio")
    out = ok(push(hub, tmp_path, project))
    assert "was a gradio Space" in out
    assert hub.state.repo(f"alice/{NAME}").effective_sdk == "docker"


def test_a_model_of_the_same_name_is_left_alone(
    hub: HubHandle, tmp_path: Path, project: Path
) -> None:
    # On the Hub models and Spaces are separate: alice/echo_env the model does not block the Space.
    model = hub.state.create_repo(f"alice/{NAME}", kind="model")
    ok(push(hub, tmp_path, project))
    assert hub.state.repo(f"alice/{NAME}").effective_sdk == "docker"
    assert list(model.files) == [".gitattributes"] and len(model.commits) == 1


# -- dry run --------------------------------------------------------------------------------


def test_dry_run_makes_no_request_at_all(hub: HubHandle, tmp_path: Path, project: Path) -> None:
    out = ok(
        push(
            hub,
            tmp_path,
            project,
            "--dry-run",
            "--base-image",
            "python:3.12-slim",
            "-e",
            "LEVEL=3",
            "--exclude",
            "data/",
        )
    )
    out_without_token = ok(push(hub, tmp_path, project, "--dry-run", token=None))
    assert hub.state.requests == []
    assert not hub.state.repos
    assert "Dry run" in out and "<your user>/echo_env" in out
    for name in ("Dockerfile", "README.md", "server/app.py", f"{RUNTIME_DIR}/"):
        assert f"  {name} " in out
    files_section = out[out.index("Files") : out.index("Left out")]
    listed = [line.split()[0] for line in files_section.splitlines() if line.startswith("  ")]
    assert "data/big.bin" not in listed and ".env" not in listed and "notes.local" not in listed
    left_out = out[out.index("Left out") : out.index("README.md front matter")]
    assert "  .env  secret: may hold credentials" in left_out
    assert "  notes.local  ignored: excluded by .gitignore" in left_out
    assert "sdk: docker" in out and "app_port: 8000" in out and "base_path: /web" in out
    assert "ARG BASE_IMAGE=python:3.12-slim" in out and "CMD [" in out
    assert "LEVEL=3" in out
    assert "Dry run" in out_without_token


def test_dry_run_with_an_unreachable_hub(tmp_path: Path, project: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "HF_TOKEN"}
    env.update(
        {
            "HF_ENDPOINT": f"http://127.0.0.1:{_closed_port()}",
            "HF_HOME": str(tmp_path / "h"),
            "COLUMNS": "200",
        }
    )
    result = subprocess.run(
        [*CLI, "push", str(project), "--dry-run"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr


# -- errors ---------------------------------------------------------------------------------


def test_not_logged_in(hub: HubHandle, tmp_path: Path, project: Path) -> None:
    err = failed(push(hub, tmp_path, project, token=None))
    assert "not logged in" in err and "hf auth login" in err and "--token" in err
    assert hub.state.requests == []


def test_stored_login_is_used(hub: HubHandle, tmp_path: Path, project: Path) -> None:
    home = tmp_path / "cli_hf_home"
    home.mkdir(parents=True, exist_ok=True)
    (home / "token").write_text(ALICE_TOKEN)
    ok(push(hub, tmp_path, project, token=None))
    assert hub.state.has_repo(f"alice/{NAME}")


def test_token_flag_wins_over_hf_token(hub: HubHandle, tmp_path: Path, project: Path) -> None:
    ok(push(hub, tmp_path, project, "--token", ALICE_TOKEN, token="hf_not_a_real_token"))
    assert hub.state.has_repo(f"alice/{NAME}")


def test_bad_token(hub: HubHandle, tmp_path: Path, project: Path) -> None:
    err = failed(push(hub, tmp_path, project, token="hf_not_a_real_token"))
    assert "rejected the token from HF_TOKEN" in err and "hf auth login" in err
    err = failed(push(hub, tmp_path, project, "--token", "hf_wrong", token=None))
    assert "rejected the token from --token" in err
    assert not hub.state.repos


def test_read_only_token(hub: HubHandle, tmp_path: Path, project: Path) -> None:
    err = failed(push(hub, tmp_path, project, token=ALICE_READ_TOKEN))
    assert "read-only" in err
    assert not hub.state.repos


def test_no_write_access_to_someone_elses_namespace(
    hub: HubHandle, tmp_path: Path, project: Path
) -> None:
    err = failed(push(hub, tmp_path, project, "--repo-id", f"alice/{NAME}", token=BOB_TOKEN))
    assert f"bob cannot push to alice/{NAME}" in err and f"--repo-id bob/{NAME}" in err
    err = failed(push(hub, tmp_path, project, "--repo-id", f"{ORG}/x", token=BOB_TOKEN))
    assert "cannot push" in err
    assert not hub.state.repos


def test_an_existing_space_owned_by_someone_else(
    hub: HubHandle, tmp_path: Path, project: Path
) -> None:
    taken = hub.state.create_repo("bob/taken")
    err = failed(push(hub, tmp_path, project, "--repo-id", "bob/taken"))
    assert "alice cannot push to bob/taken" in err
    assert len(taken.commits) == 1


def test_hub_refusing_writes(hub: HubHandle, tmp_path: Path, project: Path) -> None:
    # A token the Hub accepts but that may not write (e.g. a fine-grained one): the Hub says 403.
    hub.state.add_token("hf_fine_grained", "alice", role="fineGrained")
    err = failed(push(hub, tmp_path, project, token="hf_fine_grained"))
    assert f"No write access to alice/{NAME}" in err
    hub.state.create_repo(f"alice/{NAME}")
    err = failed(push(hub, tmp_path, project, token="hf_fine_grained"))
    assert f"No write access to alice/{NAME}" in err


def test_hub_unreachable(tmp_path: Path, project: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "HF_TOKEN"}
    env.update(
        {
            "HF_ENDPOINT": f"http://127.0.0.1:{_closed_port()}",
            "HF_HOME": str(tmp_path / "h"),
            "HF_TOKEN": ALICE_TOKEN,
            "COLUMNS": "200",
            "NO_PROXY": "127.0.0.1,localhost",
            "no_proxy": "127.0.0.1,localhost",
        }
    )
    result = subprocess.run(
        [*CLI, "push", str(project)], env=env, capture_output=True, text=True, timeout=120
    )
    err = failed(result)
    assert "Cannot reach the Hugging Face Hub at http://127.0.0.1:" in err


def test_usage_errors(hub: HubHandle, tmp_path: Path, project: Path) -> None:
    for args in (
        ["--repo-id", "datasets/alice/x"],
        ["--repo-id", "a/b/c"],
        ["-e", "NOVALUE"],
        ["-e", "1BAD=x"],
    ):
        result = push(hub, tmp_path, project, *args)
        assert result.returncode == 2, (args, result.stderr)
        assert "Traceback" not in result.stderr
    result = push(hub, tmp_path, tmp_path / "missing")
    assert result.returncode == 2
    (tmp_path / "empty").mkdir()
    assert "openenv.yaml" in failed(push(hub, tmp_path, tmp_path / "empty"))
    assert hub.state.requests == []


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]

"""The options of `openenv build` and `openenv push`, the reference's spellings included
(`-d`, `-r`, `-b`, `--namespace`, `--env-var`, `-H`, `-f`, ...), and the reference options that
mean nothing here, refused with a message naming ours. Dry runs only: no engine, no Hub."""

from __future__ import annotations

from pathlib import Path

import pytest

from openenv_cli.main import main
from openenv_cli.scaffold import render_project, write_project

NAME = "flag_env"


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name in ("OPENENV_BASE_IMAGE", "OPENENV_IMAGE_TAG", "HF_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("COLUMNS", "250")
    monkeypatch.setenv("DOCKER_HOST", "tcp://127.0.0.1:9")  # a dry run must not need one
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # nor a Hub
    root = tmp_path / NAME
    write_project(render_project(NAME), root)
    monkeypatch.chdir(tmp_path)
    return root


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    try:
        main(list(args))
        code = 0
    except SystemExit as exit_:
        code = int(exit_.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


# -- push ---------------------------------------------------------------------------------------


def test_push_directory_option(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "push", "-d", str(project), "--dry-run")
    assert code == 0 and f"<your user>/{NAME}" in out
    code, out, _ = run(capsys, "push", "--directory", str(project), "--dry-run")
    assert code == 0
    code, _, err = run(capsys, "push", str(project), "-d", str(project.parent), "--dry-run")
    assert code == 2 and "different folders" in err


def test_push_repo_id_given_as_path_gets_a_hint(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run(capsys, "push", "my-org/my-env", "--dry-run")
    assert code == 2 and "--repo-id my-org/my-env" in err


def test_push_repo_id_short_option(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "push", "-d", str(project), "-r", "a/b", "--dry-run")
    assert code == 0 and "Space: a/b" in out


def test_push_namespace(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(
        capsys, "push", str(project), "--namespace", "my-org", "--private", "--dry-run"
    )
    assert code == 0 and f"Space: my-org/{NAME} (private)" in out
    code, out, _ = run(
        capsys, "push", str(project), "--namespace", "my-org", "-r", "x", "--dry-run"
    )
    assert code == 0 and "Space: my-org/x" in out
    code, _, err = run(capsys, "push", str(project), "--namespace", "my-org", "-r", "bob/x")
    assert code == 2 and "different namespaces" in err


def test_push_base_image_short_option(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "push", str(project), "-b", "python:3.12-slim", "--dry-run")
    assert code == 0 and "ARG BASE_IMAGE=python:3.12-slim" in out


def test_push_env_var_and_interface(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "push", str(project), "--env-var", "LEVEL=4", "--dry-run")
    assert code == 0 and "LEVEL=4" in out and "ENABLE_WEB_INTERFACE=true" in out
    code, out, _ = run(capsys, "push", str(project), "--no-interface", "--dry-run")
    assert code == 0 and "ENABLE_WEB_INTERFACE=false" in out and "base_path" not in out
    code, out, _ = run(capsys, "push", str(project), "--interface", "--dry-run")
    assert code == 0 and "base_path: /web" in out


def test_push_hardware(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "push", str(project), "-H", "t4-small", "--dry-run")
    assert code == 0 and "Hardware: t4-small" in out
    code, _, err = run(capsys, "push", str(project), "--hardware", "gpu-please", "--dry-run")
    assert code == 2 and "not a Space hardware flavor" in err and "cpu-upgrade" in err


def test_push_exclude_file(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ignore = project.parent / ".hfignore"
    ignore.write_text("# comment\ndata/\n")
    (project / "data").mkdir()
    (project / "data/big.bin").write_text("x")
    code, _, err = run(capsys, "push", str(project), "--exclude", ".hfignore", "--dry-run")
    assert code == 2 and "--exclude-from .hfignore" in err
    code, out, _ = run(capsys, "push", str(project), "--exclude-from", str(ignore), "--dry-run")
    assert code == 0 and "data/big.bin" not in out.split("Left out")[0]
    assert "data/  ignored: excluded by --exclude" in out
    (project.parent / ".dockerignore").write_text("x\n")  # read anyway: a plain pattern
    code, out, _ = run(capsys, "push", str(project), "--exclude", ".dockerignore", "--dry-run")
    assert code == 0 and ".dockerignore  ignored: excluded by --exclude" in out


@pytest.mark.parametrize(
    "args,words",
    [
        (["--registry", "docker.io/me"], ["--registry", "openenv build -t docker.io/me/NAME:TAG"]),
        (["--create-pr"], ["--create-pr", "--repo-id NAMESPACE/NAME-staging"]),
        (["--count", "3"], ["--count", "--repo-id NAMESPACE/NAME-1"]),
        (["-n", "2"], ["--count", "--repo-id"]),
    ],
)
def test_push_reference_options_without_meaning_here(
    project: Path, capsys: pytest.CaptureFixture[str], args: list[str], words: list[str]
) -> None:
    code, _, err = run(capsys, "push", str(project), *args, "--dry-run")
    assert code == 2 and err.count("Error:") == 1
    for word in words:
        assert word in err


# -- build --------------------------------------------------------------------------------------


def test_build_dry_run_needs_no_engine(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "build", str(project), "-b", "python:3.12-slim", "--dry-run")
    assert code == 0, err
    assert "base image python:3.12-slim, from --base-image" in out
    assert "server/app.py" in out and "Dry run: nothing was built." in out


def test_build_dockerfile_option(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (project / "docker").mkdir()
    (project / "docker/Dockerfile.dev").write_text("FROM python:3.11-slim\n")
    code, out, _ = run(capsys, "build", str(project), "-f", "docker/Dockerfile.dev", "--dry-run")
    assert code == 0 and "from docker/Dockerfile.dev" in out
    code, _, err = run(capsys, "build", str(project), "--dockerfile", "nope/Dockerfile")
    assert code == 1 and "No Dockerfile" in err and "--dockerfile" in err
    code, _, err = run(capsys, "build", str(project), "-f", "../Dockerfile")
    assert code in (1, 2) and ("outside the project" in err or "No Dockerfile" in err)


def test_build_context_option_is_refused(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "build", str(project), "--context", "server")
    assert code == 2 and "--context is not supported" in err and ".dockerignore" in err
    code, _, err = run(capsys, "build", str(project), "-c", "server")
    assert code == 2


def test_build_include_secret(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (project / "ca.pem").write_text("certificate\n")
    code, out, _ = run(capsys, "build", str(project), "--dry-run")
    assert code == 0 and "ca.pem  secret: may hold credentials" in out
    code, out, _ = run(capsys, "build", str(project), "--dry-run", "--include-secret", "ca.pem")
    assert code == 0 and "  ca.pem\n" in out.split("Context")[1]


def test_build_context_dir_writes_a_context_any_builder_can_build(
    project: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dest = tmp_path / "ctx"
    code, out, err = run(
        capsys, "build", str(project), "--context-dir", str(dest), "-b", "python:3.12-slim"
    )
    assert code == 0, err
    dockerfile = (dest / "Dockerfile").read_text(encoding="utf-8")
    assert "ARG BASE_IMAGE=python:3.12-slim" in dockerfile  # the plan's base image, written in
    assert "COPY _openenv_runtime/" in dockerfile
    assert (dest / "_openenv_runtime" / "pyproject.toml").is_file()
    assert (dest / "server" / "app.py").is_file()
    assert f"docker build -t {NAME}:0.1.0 -t {NAME}:latest {dest}" in out
    # a second run refuses to mix contexts
    code, _, err = run(capsys, "build", str(project), "--context-dir", str(dest))
    assert code == 1 and "not empty" in err


def test_the_generated_files_point_other_builders_at_context_dir(project: Path) -> None:
    dockerfile = (project / "server" / "Dockerfile").read_text(encoding="utf-8")
    before_copy = dockerfile.split("COPY _openenv_runtime/")[0].splitlines()[-3:]
    # a builder's error about the missing folder shows the lines just above the COPY
    assert any("openenv build --context-dir" in line for line in before_copy)
    readme = (project / "README.md").read_text(encoding="utf-8")
    assert "openenv build --context-dir" in readme and "docker build" in readme


def test_a_fresh_init_project_pushes_and_builds_with_no_secret_left_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("COLUMNS", "250")
    code, _, err = run(capsys, "init", "fresh_env", "--license", "MIT")
    assert code == 0, err
    for command in ("push", "build"):
        code, out, err = run(capsys, command, "fresh_env", "--dry-run")
        assert code == 0, err
        assert "secret:" not in out and "link:" not in out and "Secrets shipped" not in out
    assert "server/app.py" in out

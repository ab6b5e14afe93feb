"""openenv_cli.image.plan, .stream and .engine: the pure parts of `openenv build`: plan resolution, tags, build args, labels, the engine's
stream and the errors made from it. No Docker engine needed."""

from __future__ import annotations

import io
import subprocess
import tarfile
from datetime import UTC, datetime
from pathlib import Path

import pytest
from rich.console import Console

from openenv_cli.commands.build import BuildDisplay
from openenv_cli.errors import OpenEnvError, UsageError
from openenv_cli.image.engine import connect, context_archive, human_size
from openenv_cli.image.plan import (
    APP_LABEL,
    RUNTIME_LABEL,
    image_labels,
    image_name,
    is_valid_reference,
    parse_build_args,
    plan_build,
    public_url,
    resolve_tags,
    tag_for_version,
)
from openenv_cli.image.stream import BuildLog, build_failure, engine_unreachable, request_failure
from openenv_cli.manifest import parse_manifest
from openenv_cli.scaffold import render_project, write_project

NOW = datetime(2026, 1, 2, 3, 4, 5, 678, tzinfo=UTC)


def manifest(**extra: object):  # type: ignore[no-untyped-def]
    data = {"name": "my_env", "app": "my_env.server.app:app", "version": "0.1.0", **extra}
    report = parse_manifest(data, Path("my_env"))
    assert report.manifest is not None
    return report.manifest


@pytest.fixture()
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name in ("OPENENV_BASE_IMAGE", "OPENENV_IMAGE_TAG"):
        monkeypatch.delenv(name, raising=False)
    dest = tmp_path / "demo_env"
    write_project(render_project("demo_env", {}), dest, force=False)
    return dest


# --- build arguments ----------------------------------------------------------------------


def test_build_args_pairs_bare_names_and_later_wins() -> None:
    got = parse_build_args(["A=1", "B=x=y", "C=", "TOKEN", "A=2"], {"TOKEN": "from-env"})
    assert got == {"A": "2", "B": "x=y", "C": "", "TOKEN": "from-env"}


@pytest.mark.parametrize("raw", ["=1", "1A=2", "A B=3", ""])
def test_bad_build_arg_is_a_usage_error(raw: str) -> None:
    with pytest.raises(UsageError, match="NAME=VALUE"):
        parse_build_args([raw], {})


def test_bare_build_arg_without_environment_value() -> None:
    with pytest.raises(UsageError, match=r"--build-arg SECRET has no value") as info:
        parse_build_args(["SECRET"], {})
    assert "export SECRET" in (info.value.hint or "")


# --- tags ---------------------------------------------------------------------------------


def test_default_tags_are_version_and_latest() -> None:
    tags, origin = resolve_tags([], manifest(), "0.1.0", {})
    assert (tags, origin) == (["my_env:0.1.0", "my_env:latest"], "default")


def test_default_tag_without_version_is_latest() -> None:
    assert resolve_tags([], manifest(), None, {})[0] == ["my_env:latest"]


def test_tag_precedence_flag_env_manifest() -> None:
    m = manifest(build={"tag": "team/my_env:yaml"})
    env = {"OPENENV_IMAGE_TAG": "my_env:env"}
    assert resolve_tags(["a:1", "b:2", "a:1"], m, "0.1.0", env) == (["a:1", "b:2"], "-t")
    assert resolve_tags([], m, "0.1.0", env) == (["my_env:env"], "OPENENV_IMAGE_TAG")
    assert resolve_tags([], m, "0.1.0", {}) == (["team/my_env:yaml"], "openenv.yaml: build.tag")


@pytest.mark.parametrize("tag", ["My_Env:1", "my env", "my_env:", "-x:1", "my_env:.bad", "a//b"])
def test_invalid_tag_is_a_usage_error(tag: str) -> None:
    with pytest.raises(UsageError, match="not a valid image tag"):
        resolve_tags([tag], manifest(), "0.1.0", {})


@pytest.mark.parametrize(
    "tag",
    [
        "my_env",
        "my_env:0.1.0",
        "registry.example.com:5000/team/my-env:dev_1",
        "localhost/a__b.c:latest",
    ],
)
def test_valid_references(tag: str) -> None:
    assert is_valid_reference(tag)


def test_versions_and_names_made_valid_for_docker() -> None:
    assert tag_for_version("1.0+cpu") == "1.0-cpu"
    assert tag_for_version(".dev") == "dev"
    assert image_name("my___env_") == "my__env"
    assert is_valid_reference(f"{image_name('a___b_')}:{tag_for_version('2!1.0+x')}")


# --- the plan -------------------------------------------------------------------------------


def test_a_port_changed_after_init_is_passed_to_the_container(project: Path) -> None:
    manifest = project / "openenv.yaml"
    manifest.write_text(manifest.read_text().replace("port: 8000", "port: 7860"))
    plan = plan_build(project, environ={}, now=NOW)
    # the Dockerfile still says ENV PORT=8000: without -e the server would listen there
    assert plan.run_command() == "docker run --rm -p 7860:7860 -e PORT=7860 demo_env:0.1.0"


def test_plan_defaults(project: Path) -> None:
    plan = plan_build(project, environ={}, now=NOW)
    assert plan.tags == ("demo_env:0.1.0", "demo_env:latest")
    assert (plan.base_image.value, plan.base_image.source) == ("python:3.11-slim", "manifest")
    assert plan.dockerfile == "server/Dockerfile"
    assert plan.run_command() == "docker run --rm -p 8000:8000 demo_env:0.1.0"
    assert plan.labels["org.opencontainers.image.title"] == "demo_env"
    assert plan.labels["org.opencontainers.image.version"] == "0.1.0"
    assert plan.labels["org.opencontainers.image.created"] == "2026-01-02T03:04:05Z"
    assert plan.labels["org.opencontainers.image.source"] == project.resolve().as_uri()
    import openenv_runtime

    assert plan.labels[RUNTIME_LABEL] == openenv_runtime.__version__
    assert plan.labels[APP_LABEL] == "demo_env.server.app:app"


def test_base_image_precedence(project: Path) -> None:
    env = {"OPENENV_BASE_IMAGE": "from-env:1"}
    assert plan_build(project, base_image="flag:1", environ=env).base_image.value == "flag:1"
    assert plan_build(project, environ=env).base_image.origin == "OPENENV_BASE_IMAGE"
    yaml_path = project / "openenv.yaml"
    yaml_path.write_text(
        yaml_path.read_text().replace("base_image: python:3.11-slim", "base_image: yaml:1")
    )
    plan = plan_build(project, environ={})
    assert (plan.base_image.value, plan.base_image.origin) == (
        "yaml:1",
        "openenv.yaml: build.base_image",
    )
    assert plan.labels["org.opencontainers.image.base.name"] == "yaml:1"


def test_base_image_build_arg_counts_as_the_flag(project: Path) -> None:
    plan = plan_build(
        project, build_args=["BASE_IMAGE=arg:1", "X=1"], environ={"OPENENV_BASE_IMAGE": "env:1"}
    )
    assert plan.base_image.value == "arg:1" and plan.build_args == {"X": "1"}
    with pytest.raises(UsageError, match="disagree"):
        plan_build(project, base_image="flag:1", build_args=["BASE_IMAGE=arg:1"], environ={})


def test_version_from_pyproject_when_the_manifest_has_none(project: Path) -> None:
    yaml_path = project / "openenv.yaml"
    yaml_path.write_text(yaml_path.read_text().replace("version: 0.1.0\n", ""))
    pyproject = project / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace('version = "0.1.0"', 'version = "2.3.4"'))
    assert plan_build(project, environ={}).tags[0] == "demo_env:2.3.4"


def test_missing_dockerfile(project: Path) -> None:
    (project / "server" / "Dockerfile").unlink()
    with pytest.raises(OpenEnvError, match="No Dockerfile at") as info:
        plan_build(project, environ={})
    assert "build.dockerfile" in (info.value.hint or "")


def test_no_manifest(tmp_path: Path) -> None:
    with pytest.raises(OpenEnvError, match=r"openenv\.yaml"):
        plan_build(tmp_path, environ={})


# --- labels and source --------------------------------------------------------------------


def test_labels_drop_empty_values() -> None:
    labels = image_labels(
        manifest(description=""),
        None,
        source=None,
        revision=None,
        base_image="b:1",
        runtime_version="9.9.9",
        created=NOW,
    )
    assert "org.opencontainers.image.description" not in labels
    assert "org.opencontainers.image.version" not in labels
    assert labels[RUNTIME_LABEL] == "9.9.9"


@pytest.mark.parametrize(
    ("remote", "url"),
    [
        ("git@github.com:org/repo.git", "https://github.com/org/repo"),
        ("https://user:secret@github.com/org/repo.git", "https://github.com/org/repo"),
        ("ssh://git@example.com:2222/org/repo", "https://example.com/org/repo"),
        ("http://localhost:3000/org/repo", "http://localhost:3000/org/repo"),
        ("/srv/git/repo.git", None),
        ("file:///srv/git/repo.git", None),
    ],
)
def test_public_url(remote: str, url: str | None) -> None:
    assert public_url(remote) == url


def test_source_and_revision_from_git(project: Path) -> None:
    def git(*args: str) -> None:
        subprocess.run(["git", "-C", str(project), *args], check=True, capture_output=True)

    git("init", "-q")
    git("-c", "user.name=t", "-c", "user.email=t@example.com", "add", "-A")
    git("-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-qm", "init")
    git("remote", "add", "origin", "https://token@github.com/me/demo_env.git")
    labels = plan_build(project, environ={}).labels
    assert labels["org.opencontainers.image.source"] == "https://github.com/me/demo_env"
    assert len(labels["org.opencontainers.image.revision"]) == 40
    (project / "models.py").write_text("# changed\n")
    assert (
        plan_build(project, environ={})
        .labels["org.opencontainers.image.revision"]
        .endswith("-dirty")
    )


def test_source_falls_back_to_the_space(project: Path) -> None:
    yaml_path = project / "openenv.yaml"
    yaml_path.write_text(
        yaml_path.read_text().replace("# repo_id: your-user/demo_env", "repo_id: me/demo_env")
    )
    assert (
        plan_build(project, environ={}).labels["org.opencontainers.image.source"]
        == "https://huggingface.co/spaces/me/demo_env"
    )


# --- the engine's stream --------------------------------------------------------------------


def feed(log: BuildLog, chunks: list[dict]) -> list:  # type: ignore[type-arg]
    events = []
    for chunk in chunks:
        events.extend(log.feed(chunk))
    events.extend(log.flush())
    log.finish()
    return events


SUCCESS = [
    {"stream": "Step 1/3 : FROM python:3.11-slim"},
    {"stream": "\n"},
    {"stream": " ---> 91c6476f5f1b\n"},
    {"stream": "Step 2/3 : RUN pip install ."},
    {"stream": "\n"},
    {"stream": " ---> Using cache\n"},
    {"stream": " ---> c11982e456e5\n"},
    {"stream": "Step 3/3 : RUN echo one && echo two"},
    {"stream": "\n ---> Running in 4b14b116f64b\n"},
    {"stream": "one\ntw"},
    {"stream": "o\n\x1b[91mon stderr\n\x1b[0m"},
    {"status": "Pulling fs layer", "id": "abc"},
    {"stream": "Removing intermediate container 4b14b116f64b\n"},
    {"stream": " ---> 1865ed462eaf\n"},
    {"aux": {"ID": "sha256:1865ed462eaf93669bca801b2ed46d6925ee5663be90a8e0e7565a934f222cab"}},
    {"stream": "[Warning] One or more build-args [UNUSED] were not consumed\n"},
    {"stream": "Successfully built 1865ed462eaf\n"},
    {"stream": "Successfully tagged my_env:0.1.0\n"},
]


def test_stream_of_a_successful_build() -> None:
    log = BuildLog()
    events = feed(log, SUCCESS)
    kinds = [(e.kind, e.text) for e in events]
    assert kinds == [
        ("step", "FROM python:3.11-slim"),
        ("step", "RUN pip install ."),
        ("cached", ""),
        ("step", "RUN echo one && echo two"),
        ("output", "one"),
        ("output", "two"),
        ("output", "on stderr"),
        ("status", "abc: Pulling fs layer"),
        ("warning", "One or more build-args [UNUSED] were not consumed"),
    ]
    assert [s.cached for s in log.steps] == [False, True, False]
    assert all(s.finished is not None for s in log.steps)
    assert log.image_id is not None and log.image_id.startswith("sha256:1865ed")
    assert log.error is None


def test_failing_run_step_names_the_step_and_shows_the_tail() -> None:
    log = BuildLog()
    chunks = [
        {"stream": "Step 1/3 : FROM python:3.11-slim\n"},
        {"stream": "Step 2/3 : RUN echo early\n"},
        {"stream": "early\n"},
        {"stream": "Step 3/3 : RUN pip install nothing-here\n"},
        {"stream": "".join(f"line {i}\n" for i in range(40))},
        {"stream": "\x1b[91mERROR: No matching distribution found for nothing-here\n\x1b[0m"},
        {
            "errorDetail": {
                "code": 1,
                "message": "The command '/bin/sh -c pip install nothing-here' returned a non-zero code: 1",
            },
            "error": "The command '/bin/sh -c pip install nothing-here' returned a non-zero code: 1",
        },
    ]
    feed(log, chunks)
    error = build_failure(log, "server/Dockerfile", "python:3.11-slim")
    first, *rest = error.message.splitlines()
    assert first == "Step 3/3 (RUN pip install nothing-here) failed with exit code 1."
    assert rest[-1] == "  ERROR: No matching distribution found for nothing-here"
    assert "early" not in error.message  # only the failing step's output
    assert len(rest) == 1 + 15
    assert "server/Dockerfile" in (error.hint or "")


def test_unavailable_base_image() -> None:
    log = BuildLog()
    feed(
        log,
        [
            {"stream": "Step 1/9 : ARG BASE_IMAGE=python:3.11-slim\n"},
            {"stream": "Step 2/9 : FROM ${BASE_IMAGE}\n"},
            {
                "errorDetail": {
                    "message": 'Get "https://registry-1.docker.io/v2/": dial tcp: no such host'
                },
                "error": 'Get "https://registry-1.docker.io/v2/": dial tcp: no such host',
            },
        ],
    )
    error = build_failure(log, "server/Dockerfile", "python:3.11-slim")
    assert error.message.startswith(
        "The base image python:3.11-slim is not on this machine and could not be pulled"
    )
    assert "\n" not in error.message
    assert "docker pull python:3.11-slim" in (error.hint or "") and "--base-image" in (
        error.hint or ""
    )


def test_other_stage_image_is_named() -> None:
    log = BuildLog()
    feed(
        log,
        [
            {"stream": "Step 1/4 : FROM --platform=linux/amd64 node:20 AS ui\n"},
            {"error": "pull access denied for node"},
        ],
    )
    assert "The base image node:20 " in build_failure(log, "Dockerfile", "python:3.11-slim").message


def test_invalid_base_image_reference() -> None:
    log = BuildLog()
    feed(
        log,
        [
            {"stream": "Step 1/2 : FROM ${BASE_IMAGE}\n"},
            {"error": "invalid reference format: repository name must be lowercase"},
        ],
    )
    error = build_failure(log, "server/Dockerfile", "Bad/Image")
    assert (
        isinstance(error, UsageError) and "'Bad/Image' is not a valid image name" in error.message
    )


def test_copy_failure_hints_at_ignore_files() -> None:
    log = BuildLog()
    feed(
        log,
        [
            {"stream": "Step 2/2 : COPY data/ /data/\n"},
            {
                "error": "COPY failed: file not found in build context or excluded by .dockerignore: stat data: file does not exist"
            },
        ],
    )
    error = build_failure(log, "server/Dockerfile", "python:3.11-slim")
    assert error.message.startswith(
        "Step 2/2 (COPY data/ /data/) failed: COPY failed: file not found"
    )
    assert ".dockerignore" in (error.hint or "")


def test_dockerfile_parse_error_is_one_line() -> None:
    class FakeAPIError(Exception):
        explanation = "dockerfile parse error line 7: unknown instruction: RUNN"

    error = request_failure(FakeAPIError("400 Client Error"), "server/Dockerfile")
    assert error.message == (
        "server/Dockerfile is not a valid Dockerfile (line 7): dockerfile parse error line 7: unknown instruction: RUNN."
    )
    assert error.hint == "Fix server/Dockerfile (line 7) and build again."


# --- the engine -------------------------------------------------------------------------------


def test_engine_unreachable_is_one_line_with_how_to_start_one() -> None:
    exc = ConnectionError(
        "Error while fetching server API version: ('Connection aborted.', "
        "FileNotFoundError(2, 'No such file or directory'))"
    )
    error = engine_unreachable(exc, {"DOCKER_HOST": "unix:///nonexistent"})
    assert error.message == (
        "No Docker engine answers at unix:///nonexistent (No such file or directory): start one "
        "(`sudo systemctl start docker`, or `sudo dockerd &`), or set DOCKER_HOST to a running engine."
    )
    assert error.hint is None and error.exit_code == 1


def test_engine_permission_denied() -> None:
    exc = PermissionError("('Connection aborted.', PermissionError(13, 'Permission denied'))")
    error = engine_unreachable(exc, {})
    assert "docker group" in error.message and "/var/run/docker.sock" in error.message


def test_connect_without_engine_raises_the_one_line_error() -> None:
    with pytest.raises(
        OpenEnvError, match=r"^No Docker engine answers at unix:///nonexistent/docker.sock"
    ):
        connect({"DOCKER_HOST": "unix:///nonexistent/docker.sock"})


@pytest.mark.parametrize(
    ("size", "text"),
    [
        (0, "0 B"),
        (999, "999 B"),
        (1500, "1.5 kB"),
        (199_400_000, "199 MB"),
        (12_345_678, "12.3 MB"),
        (2_500_000_000, "2.5 GB"),
    ],
)
def test_human_size(size: int, text: str) -> None:
    assert human_size(size) == text


def test_context_archive_is_normalised(tmp_path: Path) -> None:
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "run.sh").write_text("#!/bin/sh\n")
    (tmp_path / "b" / "run.sh").chmod(0o700)
    (tmp_path / "a.txt").write_text("a")
    (tmp_path / "a.txt").chmod(0o600)
    with context_archive(tmp_path) as archive, tarfile.open(fileobj=archive) as tar:
        members = {m.name: m for m in tar.getmembers()}
    assert list(members) == ["b", "a.txt", "b/run.sh"]
    assert (
        members["a.txt"].mode == 0o644
        and members["b/run.sh"].mode == 0o755
        and members["b"].mode == 0o755
    )
    assert {(m.uid, m.gid, m.uname, m.gname) for m in members.values()} == {(0, 0, "", "")}


def test_plain_display_streams_steps_and_output() -> None:
    out = io.StringIO()
    display = BuildDisplay(Console(file=out, width=200, force_terminal=False))
    log = BuildLog()
    with display:
        for chunk in SUCCESS:
            for event in log.feed(chunk):
                display.on_event(event)
    text = out.getvalue()
    assert "Step 1/3 FROM python:3.11-slim" in text
    assert "Step 2/3 RUN pip install .\n  (cached)\n" in text
    assert "  one\n  two\n  on stderr\n" in text
    assert "One or more build-args" in text


def test_live_display_keeps_finished_steps(tmp_path: Path) -> None:
    out = io.StringIO()
    display = BuildDisplay(Console(file=out, width=120, force_terminal=True, color_system=None))
    log = BuildLog()
    with display:
        for chunk in SUCCESS:
            for event in log.feed(chunk):
                display.on_event(event)
    text = out.getvalue()
    assert "✓ Step 2/3 RUN pip install . (cached)" in text
    assert "✓ Step 3/3 RUN echo one && echo two" in text

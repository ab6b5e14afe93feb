"""openenv.yaml: the schema, warnings for unknown keys, errors naming the file and the fix."""

from __future__ import annotations

from pathlib import Path

import pytest

from openenv_cli.errors import OpenEnvError
from openenv_cli.manifest import inspect_manifest, load_manifest, parse_manifest
from openenv_cli.manifest_schema import Manifest

MINIMAL = "name: my_env\napp: my_env.server.app:app\n"


def write(tmp_path: Path, text: str) -> Path:
    (tmp_path / "openenv.yaml").write_text(text, encoding="utf-8")
    return tmp_path


def test_minimal_manifest_gets_defaults(tmp_path: Path) -> None:
    manifest = load_manifest(write(tmp_path, MINIMAL))
    assert manifest.spec_version == 1
    assert manifest.port == 8000
    assert manifest.app_module == "my_env.server.app" and manifest.app_attribute == "app"
    assert manifest.server.workers is None and manifest.server.max_concurrent_envs is None
    assert manifest.build.dockerfile == "server/Dockerfile"
    assert manifest.build.base_image == "python:3.11-slim"
    assert (
        manifest.push.private is False
        and manifest.push.variables == {}
        and manifest.push.exclude == []
    )


def test_full_manifest(tmp_path: Path) -> None:
    text = MINIMAL + (
        "version: 1.0\ndescription: Echo\nport: 9000\nexample_action: {message: hi}\n"
        "server: {workers: 2, max_concurrent_envs: 8, session_timeout: 30, web_interface: false}\n"
        "build: {dockerfile: Dockerfile, base_image: python:3.12-slim, tag: me/env:1}\n"
        "push: {repo_id: me/env, private: true, variables: {A: 1, B: true}, exclude: ['*.ckpt']}\n"
    )
    manifest = load_manifest(write(tmp_path, text))
    assert manifest.version == "1.0"  # YAML's float becomes the string the user wrote
    assert manifest.example_action == {"message": "hi"}
    assert manifest.server.session_timeout == 30 and manifest.server.web_interface is False
    assert manifest.build.tag == "me/env:1"
    assert manifest.push.variables == {"A": "1", "B": "true"}
    assert manifest.push.exclude == ["*.ckpt"]


def test_reference_manifest_loads_without_warnings(tmp_path: Path) -> None:
    text = "spec_version: 1\nname: echo_env\ntype: space\nruntime: fastapi\napp: server.app:app\nport: 8000\n"
    report = inspect_manifest(write(tmp_path, text))
    assert report.errors == [] and report.warnings == []
    assert report.manifest is not None and report.manifest.app == "server.app:app"


def test_unknown_keys_warn_with_did_you_mean(tmp_path: Path) -> None:
    report = inspect_manifest(
        write(tmp_path, MINIMAL + "prot: 1\nserver:\n  wokers: 2\nfrobnicate: yes\n")
    )
    assert report.errors == []
    by_key = {w.key: w for w in report.warnings}
    assert set(by_key) == {"prot", "server.wokers", "frobnicate"}
    assert "port" in by_key["prot"].fix
    assert "server.workers" in by_key["server.wokers"].fix
    assert "openenv.yaml" in by_key["frobnicate"].message


def test_load_manifest_passes_warnings_to_callback(tmp_path: Path) -> None:
    seen = []
    load_manifest(write(tmp_path, MINIMAL + "extra: 1\n"), on_warning=seen.append)
    assert [w.key for w in seen] == ["extra"]


def test_missing_app_is_the_conventional_one(tmp_path: Path) -> None:
    text = "\n".join(line for line in MINIMAL.splitlines() if not line.startswith("app")) + "\n"
    name = load_manifest(write(tmp_path, MINIMAL)).name
    assert load_manifest(write(tmp_path, text)).app == f"{name}.server.app:app"


@pytest.mark.parametrize("missing", ["name"])
def test_missing_required_key_names_file_and_fix(tmp_path: Path, missing: str) -> None:
    text = "\n".join(line for line in MINIMAL.splitlines() if not line.startswith(missing)) + "\n"
    project = tmp_path / "cool_env"
    project.mkdir()
    with pytest.raises(OpenEnvError) as exc:
        load_manifest(write(project, text))
    assert f"missing required key `{missing}`" in exc.value.message
    assert "openenv.yaml" in exc.value.message
    assert f"{missing}: " in (exc.value.hint or "")
    assert "cool_env" in (exc.value.hint or "")  # the fix suggests the folder's name


def test_no_manifest(tmp_path: Path) -> None:
    with pytest.raises(OpenEnvError) as exc:
        load_manifest(tmp_path)
    assert "No openenv.yaml" in exc.value.message and "openenv init" in (exc.value.hint or "")


def test_bad_yaml_reports_line(tmp_path: Path) -> None:
    report = inspect_manifest(write(tmp_path, MINIMAL + "server: [unclosed\n"))
    assert len(report.errors) == 1
    assert "line 3" in report.errors[0].message or "line 4" in report.errors[0].message


@pytest.mark.parametrize(
    "text,needle", [("", "empty"), ("- a\n- b\n", "mapping"), ("just text\n", "mapping")]
)
def test_not_a_mapping(tmp_path: Path, text: str, needle: str) -> None:
    report = inspect_manifest(write(tmp_path, text))
    assert report.manifest is None and needle in report.errors[0].message


@pytest.mark.parametrize(
    "extra,key",
    [
        ("port: abc\n", "port"),
        ("port: 70000\n", "port"),
        ("spec_version: 2\n", "spec_version"),
        ("server: {workers: 0}\n", "server.workers"),
        ("push: {exclude: 3}\n", "push.exclude"),
    ],
)
def test_invalid_values(tmp_path: Path, extra: str, key: str) -> None:
    report = inspect_manifest(write(tmp_path, MINIMAL + extra))
    assert [e.key for e in report.errors] == [key]
    assert f"`{key}`" in report.errors[0].message


@pytest.mark.parametrize(
    "app", ["my_env.server.app", "my env:app", "my_env/server/app.py:app", ":app"]
)
def test_app_must_be_an_import_path(tmp_path: Path, app: str) -> None:
    report = parse_manifest({"name": "x", "app": app}, tmp_path)
    assert report.errors and report.errors[0].key == "app"
    assert "my_env.server.app:app" in report.errors[0].message


def test_several_errors_are_listed_together(tmp_path: Path) -> None:
    with pytest.raises(OpenEnvError) as exc:
        load_manifest(write(tmp_path, "port: x\n"))
    assert "3 problems" in exc.value.message


def test_manifest_model_is_importable_for_other_commands() -> None:
    assert "server" in Manifest.model_fields and "push" in Manifest.model_fields

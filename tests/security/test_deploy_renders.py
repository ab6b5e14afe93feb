"""``openenv deploy`` with a hostile project: links planted in the deploy folder, and
values in ``openenv.yaml`` (or the environment) aimed at the rendered YAML and shell."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from openenv_cli.deploy import plan_deploy, run_deploy
from openenv_cli.errors import OpenEnvError

IMAGE = "registry.example.com/demo:1"


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "demo_env"
    (root / "server").mkdir(parents=True)
    (root / "server" / "app.py").write_text("app = None\n")
    (root / "openenv.yaml").write_text(
        "spec_version: 1\nname: demo_env\napp: demo_env.server.app:app\n"
    )
    monkeypatch.chdir(root)
    return root


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    folder = tmp_path / "home"
    folder.mkdir()
    (folder / "kustomization.yaml").write_text("precious\n")
    return folder


def snapshot(folder: Path) -> dict[str, str]:
    return {p.name: p.read_text() for p in folder.iterdir() if p.is_file()}


def deploy(project: Path, target: str = "kubernetes", force: bool = True) -> None:
    plan = plan_deploy(target, project, image=IMAGE)
    run_deploy(plan, apply=False, force=force, timeout=1)


@pytest.mark.parametrize("force", [True, False])
def test_a_linked_target_folder_is_not_written_through(
    project: Path, outside: Path, force: bool
) -> None:
    before = snapshot(outside)
    (project / "deploy").mkdir()
    (project / "deploy" / "kubernetes").symlink_to(outside, target_is_directory=True)
    with pytest.raises(OpenEnvError, match="never writes through a link"):
        deploy(project, force=force)
    assert snapshot(outside) == before


def test_a_linked_deploy_folder_is_not_written_through(project: Path, outside: Path) -> None:
    (project / "deploy").symlink_to(outside, target_is_directory=True)
    with pytest.raises(OpenEnvError, match="never writes through a link"):
        deploy(project)
    assert sorted(p.name for p in outside.iterdir()) == ["kustomization.yaml"]


def test_a_linked_file_or_subfolder_is_not_written_through(project: Path, outside: Path) -> None:
    target = project / "deploy" / "kubernetes"
    target.mkdir(parents=True)
    (target / "kustomization.yaml").symlink_to(outside / "kustomization.yaml")
    with pytest.raises(OpenEnvError, match=r"kustomization\.yaml"):
        deploy(project)
    (target / "kustomization.yaml").unlink()
    (target / "envoy").symlink_to(outside, target_is_directory=True)
    with pytest.raises(OpenEnvError, match="envoy"):
        deploy(project)
    assert snapshot(outside) == {"kustomization.yaml": "precious\n"}


def test_a_linked_record_is_refused_before_anything_is_written(
    project: Path, outside: Path
) -> None:
    target = project / "deploy" / "kubernetes"
    target.mkdir(parents=True)
    (target / ".openenv-deploy.json").symlink_to(outside / "kustomization.yaml")
    with pytest.raises(OpenEnvError, match=r"\.openenv-deploy\.json"):
        deploy(project)
    assert [p.name for p in target.iterdir()] == [".openenv-deploy.json"]
    assert snapshot(outside) == {"kustomization.yaml": "precious\n"}


def test_a_linked_endpoints_file_is_refused_before_anything_is_written(
    project: Path, outside: Path
) -> None:
    target = project / "deploy" / "kubernetes"
    target.mkdir(parents=True)
    (target / "endpoints.json").symlink_to(outside / "kustomization.yaml")
    with pytest.raises(OpenEnvError, match=r"endpoints\.json"):
        deploy(project)
    assert [p.name for p in target.iterdir()] == ["endpoints.json"]
    assert snapshot(outside) == {"kustomization.yaml": "precious\n"}


@pytest.mark.parametrize(
    ("variable", "value"),
    [("SESSION_TIMEOUT", "inf"), ("DRAIN_TIMEOUT", "nan"), ("WORKERS", "-inf")],
)
def test_non_finite_numbers_are_refused_with_a_clear_error(
    project: Path, monkeypatch: pytest.MonkeyPatch, variable: str, value: str
) -> None:
    monkeypatch.setenv(variable, value)
    with pytest.raises(OpenEnvError, match="finite number"):
        plan_deploy("slurm", project, image=IMAGE)


# What held: each of these values would start a new YAML key or a shell command if it reached
# a template unchecked; each is refused before rendering.
HOSTILE_MANIFESTS = {
    "name with a newline": 'name: "demo\\nkind: Secret"\napp: demo_env.server.app:app\n',
    "app with a command": 'name: demo_env\napp: "demo_env.server.app:app; curl x | sh"\n',
    "app with a substitution": 'name: demo_env\napp: "$(id).app:app"\n',
    "namespace with a newline": (
        'name: demo_env\napp: demo_env.server.app:app\ndeploy:\n  namespace: "a\\nb: c"\n'
    ),
    "cpu with a key": 'name: demo_env\napp: demo_env.server.app:app\ndeploy:\n  cpu: "1\\nx: y"\n',
    "memory with a quote": (
        'name: demo_env\napp: demo_env.server.app:app\ndeploy:\n  memory: "1Gi\'"\n'
    ),
    "image with a command": (
        'name: demo_env\napp: demo_env.server.app:app\ndeploy:\n  image: "x;touch /tmp/p"\n'
    ),
    "envoy image with a newline": (
        'name: demo_env\napp: demo_env.server.app:app\ndeploy:\n  envoy_image: "a\\nb"\n'
    ),
    "base image with a command": (
        'name: demo_env\napp: demo_env.server.app:app\nbuild:\n  base_image: "py;id"\n'
    ),
}


@pytest.mark.parametrize("manifest", HOSTILE_MANIFESTS.values(), ids=list(HOSTILE_MANIFESTS))
@pytest.mark.parametrize("target", ["kubernetes", "swarm", "slurm"])
def test_hostile_manifest_values_never_reach_a_template(
    project: Path, manifest: str, target: str
) -> None:
    (project / "openenv.yaml").write_text("spec_version: 1\n" + manifest)
    with pytest.raises(OpenEnvError):
        plan_deploy(target, project, image=None if "image:" in manifest else IMAGE)


def test_rendered_files_parse_as_yaml_with_the_expected_keys(project: Path) -> None:
    plan = plan_deploy("kubernetes", project, image=IMAGE)
    for name, text in plan.files.items():
        if name.endswith(".yaml"):
            for document in yaml.safe_load_all(text):
                assert document is None or document.get("kind") != "Secret", name

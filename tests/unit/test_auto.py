"""AutoEnv / AutoAction: installed environments found by name, for real (no mocked metadata).

Each test lays out an installed distribution (a ``*.dist-info`` folder beside its package)
in a temporary folder on ``sys.path``, which is all importlib.metadata looks at.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from openenv_runtime.auto import AutoAction, AutoEnv, get_discovery, reset_discovery
from openenv_runtime.auto._discovery import _infer_class_name, _is_hub_url, _normalize_env_name
from openenv_runtime.auto.auto_env import _installed_openenv_package

CLIENT = """
from openenv_runtime import Action, GenericEnvClient, Observation


class {prefix}Action(Action):
    text: str = ""


class {prefix}Observation(Observation):
    text: str = ""


class {prefix}Env(GenericEnvClient):
    pass
"""


def install(
    root: Path,
    dist: str,
    module: str,
    prefix: str,
    manifest: str | None = None,
    entry_point: str | None = None,
) -> None:
    package = root / module
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "client.py").write_text(CLIENT.format(prefix=prefix))
    if manifest is not None:
        (package / "openenv.yaml").write_text(manifest)
    info = root / f"{dist.replace('-', '_')}-0.3.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 0.3.0\n")
    if entry_point is not None:
        (info / "entry_points.txt").write_text(f"[openenv.environments]\n{entry_point}\n")


@pytest.fixture()
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.syspath_prepend(str(tmp_path))
    reset_discovery()
    yield tmp_path
    reset_discovery()
    for name in [
        m for m in sys.modules if m.split(".")[0] in {"lantern_env", "lamplight_env", "tiny"}
    ]:
        del sys.modules[name]


def test_names_are_normalised() -> None:
    assert {_normalize_env_name(n) for n in ("echo", "echo-env", "echo_env")} == {"echo_env"}
    assert _is_hub_url("org/echo_env") and not _is_hub_url("echo")
    assert _infer_class_name("browser_gym_env", "client") == "BrowserGymEnv"


def test_reference_named_distribution_is_found_by_any_spelling(site: Path) -> None:
    install(
        site,
        "openenv-lantern_env",
        "lantern_env",
        "Lantern",
        "name: lantern_env\ndescription: Lights\n",
    )
    info = AutoEnv.get_env_info("lantern-env")
    assert info["package"] == "openenv-lantern_env" and info["description"] == "Lights"
    assert AutoEnv.get_env_class("lantern").__name__ == "LanternEnv"
    assert AutoAction.from_env("lantern_env").__name__ == "LanternAction"
    assert "lantern" in get_discovery().discover()


def test_a_hub_id_reaches_autoaction_through_autoenvs_install_step(
    site: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the reference's tests patch AutoEnv._ensure_package_from_hub; AutoAction follows it
    install(site, "openenv-lantern_env", "lantern_env", "Lantern", "name: lantern_env\n")
    asked: list[tuple[str, bool]] = []

    def installed(name: str, trust_remote_code: bool = False) -> str:
        asked.append((name, trust_remote_code))
        return "lantern_env"

    monkeypatch.setattr(AutoEnv, "_ensure_package_from_hub", staticmethod(installed))
    assert AutoAction.from_env("org/lantern", trust_remote_code=True).__name__ == "LanternAction"
    assert AutoEnv.installed_name("lantern_env") == "lantern_env"
    assert asked == [("org/lantern", True)]


def test_entry_point_finds_an_openenv_init_project(site: Path) -> None:
    # openenv init projects are not named openenv-*: they declare an entry point instead
    install(
        site,
        "tiny",
        "tiny",
        "Tiny",
        "name: tiny\naction: TinyAction\nobservation: TinyObservation\n",
        entry_point="tiny = tiny",
    )
    assert AutoAction.get_action_info("tiny")["action_class"] == "TinyAction"
    assert AutoEnv.get_env_class("tiny_env").__name__ == "TinyEnv"


def test_unknown_names_suggest_the_installed_ones(site: Path) -> None:
    install(site, "openenv-lantern_env", "lantern_env", "Lantern")
    with pytest.raises(ValueError, match="Did you mean: lantern"):
        AutoEnv.from_env("lanternn", base_url="http://127.0.0.1:9")


def test_factories_are_not_instantiated() -> None:
    with pytest.raises(TypeError, match="factory class"):
        AutoEnv()
    with pytest.raises(TypeError, match="factory class"):
        AutoAction()


@pytest.mark.parametrize(
    "output",
    [
        "Collecting x\nSuccessfully installed fastapi-0.1 openenv-wordle_env-0.1.0\n",
        "Resolved 3 packages\n + fastapi==0.1\n + openenv-wordle_env==0.1.0\n",
    ],
)
def test_the_installed_package_is_read_from_pip_or_uv_output(output: str) -> None:
    assert _installed_openenv_package(output) == "openenv-wordle_env"
    assert _installed_openenv_package("Requirement already satisfied: x") is None


def test_from_env_runs_the_image_openenv_build_tags(
    site: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One naming rule: the image AutoEnv starts is one of the tags `openenv build` applies.

    (Not named my_env: the Quickstart's project of that name may be installed beside the tests.)"""
    from openenv_cli.image.plan import plan_build
    from openenv_cli.scaffold import render_project, write_project

    for variable in ("OPENENV_IMAGE_TAG", "OPENENV_BASE_IMAGE"):
        monkeypatch.delenv(variable, raising=False)
    write_project(render_project("lamplight_env"), site / "lamplight_env", force=False)
    info = site / "lamplight_env-0.1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: lamplight_env\nVersion: 0.1.0\n")
    (info / "entry_points.txt").write_text(
        "[openenv.environments]\nlamplight_env = lamplight_env\n"
    )
    started: list[str] = []

    def from_docker_image(cls: type, image: str, provider: object = None, **_: object) -> None:
        started.append(image)

    from openenv_runtime import EnvClient

    monkeypatch.setattr(EnvClient, "from_docker_image", classmethod(from_docker_image))
    AutoEnv.from_env("lamplight_env")
    assert started == ["lamplight_env:latest"]
    assert started[0] in plan_build(site / "lamplight_env").tags

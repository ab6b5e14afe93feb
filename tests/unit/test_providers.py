"""Providers without engines: what they resolve, and the errors they give."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from openenv_runtime import EnvClient, EnvPool, GenericEnvClient
from openenv_runtime.providers import (
    DockerProvider,
    ProcessProvider,
    ProviderError,
    RayProvider,
    SpaceProvider,
    SwarmProvider,
    space_image,
    space_url,
)
from openenv_runtime.providers.process import resolve_target


def test_reference_names_are_the_reference_style_faces() -> None:
    # LocalDockerProvider / DockerSwarmProvider have the reference's API (start_container, ...)
    # in openenv_runtime.compat.containers.runtime; providers/ keeps only our own classes.
    import openenv_runtime.providers as providers
    from openenv_runtime.compat.containers.runtime import LocalDockerProvider

    assert not hasattr(providers, "LocalDockerProvider")
    assert hasattr(LocalDockerProvider, "start_container")


def test_from_hub_is_from_env() -> None:
    assert EnvClient.from_hub.__func__ is EnvClient.from_env.__func__  # type: ignore[attr-defined]


def test_space_names() -> None:
    assert space_url("Org/My_Env") == "https://org-my-env.hf.space"
    assert space_image("org/my.env") == "registry.hf.space/org-my-env:latest"
    with pytest.raises(ProviderError, match="org/name"):
        SpaceProvider("no-namespace")


def test_space_token_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_TOKEN", "hf_x")
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9/")
    provider = SpaceProvider("org/env")
    assert provider.token == "hf_x" and provider.endpoint == "http://127.0.0.1:9"


def test_resolve_import_path() -> None:
    target = resolve_target("pkg.server.app:app")
    assert target.app == "pkg.server.app:app" and target.app_dir is None


def test_resolve_project_folder(tmp_path: Path) -> None:
    project = tmp_path / "my_env"
    project.mkdir()
    (project / "openenv.yaml").write_text(
        "name: my_env\napp: my_env.server.app:app  # the app\nserver:\n  max_concurrent_envs: 7\n"
    )
    target = resolve_target(project)
    assert target.app == "my_env.server.app:app"
    assert target.app_dir == str(tmp_path.resolve())
    assert target.env == {"MAX_CONCURRENT_ENVS": "7"}


@pytest.mark.parametrize(
    "target", ["gymnasium:CartPole-v1", "reasoning_gym:leg_counting?size=5&seed=3", "harbor:/t/x"]
)
def test_resolve_a_family_target(target: str) -> None:
    resolved = resolve_target(target)  # the server checks it (openenv_runtime.adapters)
    assert (resolved.app, resolved.app_dir) == (target, None)


@pytest.mark.parametrize("target", ["not an app", "/nonexistent/folder", "gym: CartPole"])
def test_resolve_rejects(target: str) -> None:
    with pytest.raises(ProviderError, match="neither a project folder, an import path"):
        resolve_target(target)


def test_folder_without_manifest(tmp_path: Path) -> None:
    with pytest.raises(ProviderError, match=r"no openenv\.yaml"):
        ProcessProvider(tmp_path)


@pytest.mark.parametrize(
    ("module", "extra", "make"),
    [
        ("docker", "docker", lambda: DockerProvider("img:latest").start()),
        ("docker", "docker", lambda: SwarmProvider("img:latest").start()),
        ("ray", "ray", lambda: RayProvider("pkg.app:app").start()),
    ],
)
def test_missing_extra_names_it(
    monkeypatch: pytest.MonkeyPatch, module: str, extra: str, make: object
) -> None:
    monkeypatch.setitem(sys.modules, module, None)  # import fails as if not installed
    with pytest.raises(ProviderError, match=rf"pip install 'openenv-runtime\[{extra}\]'"):
        make()  # type: ignore[operator]


def test_stop_before_start_is_harmless() -> None:
    provider = ProcessProvider("pkg.app:app")
    provider.stop()
    provider.stop()
    assert not provider.running


def test_pool_arguments() -> None:
    with pytest.raises(ValueError, match="either urls"):
        EnvPool(GenericEnvClient, size=1)
    with pytest.raises(ValueError, match="either urls"):
        EnvPool(GenericEnvClient, urls=["http://x"], provider=ProcessProvider("a.b:c"), size=1)
    with pytest.raises(ValueError, match="at least 1"):
        EnvPool(GenericEnvClient, urls=["http://x"], size=0)


class _Images:
    def __init__(self, check: dict[str, object]) -> None:
        self.check = check

    def get(self, image: str) -> object:
        return type("Image", (), {"attrs": {"Config": {"Healthcheck": self.check}}})()


class _Engine:
    def __init__(self, api: str, check: dict[str, object]) -> None:
        self.api = type("Api", (), {"api_version": api})()
        self.images = _Images(check)


def test_swarm_tasks_get_a_start_interval_where_the_engine_takes_one() -> None:
    from openenv_runtime.providers import SwarmProvider

    provider = SwarmProvider("img:1", startup_timeout=60)
    image_check = {
        "Test": ["CMD-SHELL", "probe"],
        "Interval": 30 * 10**9,
        "StartPeriod": 20 * 10**9,
    }
    fast = provider._fast_healthcheck(_Engine("1.44", image_check))
    assert fast == {"StartInterval": 10**9, "StartPeriod": 20 * 10**9}  # the rest inherits
    no_period = provider._fast_healthcheck(_Engine("1.45", {"Test": ["CMD", "x"]}))
    assert no_period == {"StartInterval": 10**9, "StartPeriod": 60 * 10**9}
    assert provider._fast_healthcheck(_Engine("1.41", image_check)) is None  # refused there
    assert provider._fast_healthcheck(_Engine("1.44", {})) is None  # no check to speed up

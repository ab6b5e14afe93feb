"""The reference's provider interfaces: what needs no engine or server."""

from __future__ import annotations

from typing import Any

import pytest

from openenv_runtime import GenericEnvClient
from openenv_runtime.compat.containers.runtime import (
    ContainerProvider,
    DaytonaProvider,
    KubernetesProvider,
    RuntimeProvider,
    UVProvider,
)
from openenv_runtime.providers.base import wait_until_healthy
from openenv_runtime.providers.process import free_port


def test_interfaces_are_abstract() -> None:
    with pytest.raises(TypeError):
        ContainerProvider()  # type: ignore[abstract]
    with pytest.raises(TypeError):
        RuntimeProvider()  # type: ignore[abstract]


def test_container_provider_stop_is_stop_container() -> None:
    calls: list[str] = []

    class Fake(ContainerProvider):
        def start_container(
            self, image: str, port: int | None = None, env_vars: Any = None, **kwargs: Any
        ) -> str:
            return "http://127.0.0.1:1"

        def stop_container(self) -> None:
            calls.append("stop_container")

        def wait_for_ready(self, base_url: str, timeout_s: float = 30.0) -> None:
            pass

    Fake().stop()
    assert calls == ["stop_container"]


def test_kubernetes_says_what_to_use() -> None:
    with pytest.raises(NotImplementedError, match="openenv deploy kubernetes"):
        KubernetesProvider(namespace="dev")


def test_daytona_without_its_sdk_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "daytona", None)
    with pytest.raises(RuntimeError, match=r"openenv-runtime\[daytona\]"):
        DaytonaProvider(api_key="k")


def test_wait_for_ready_times_out_on_a_silent_port() -> None:
    with pytest.raises(TimeoutError, match="did not become ready"):
        wait_until_healthy(f"http://127.0.0.1:{free_port()}", timeout_s=0.3, what="Container")


def test_uv_provider_before_start(tmp_path: Any) -> None:
    provider = UVProvider(project_path=str(tmp_path))
    assert provider.app == "server.app:app" and provider.host == "0.0.0.0"
    with pytest.raises(RuntimeError, match="not been started"):
        provider.base_url  # noqa: B018
    provider.stop()  # nothing runs: a no-op


def test_client_owns_a_provider_passed_to_it() -> None:
    stopped: list[bool] = []

    class Owned:
        def stop(self) -> None:
            stopped.append(True)

    client = GenericEnvClient(base_url="http://127.0.0.1:1", provider=Owned())
    client.sync().close()
    assert stopped == [True]


class _DuckProvider:
    """Shaped like the reference's container providers without subclassing anything."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []

    def start_container(self, image: str, **kwargs: Any) -> str:
        self.calls.append(("start_container", (image,), kwargs))
        return "http://127.0.0.1:1"

    def wait_for_ready(self, base_url: str) -> None:
        self.calls.append(("wait_for_ready", (base_url,), {}))

    def stop_container(self) -> None:
        self.calls.append(("stop_container", (), {}))


def test_from_docker_image_takes_a_duck_typed_container_provider() -> None:
    duck = _DuckProvider()
    client = GenericEnvClient.from_docker_image("img:1", provider=duck)  # type: ignore[arg-type]
    assert duck.calls == [
        ("start_container", ("img:1",), {}),  # no options the caller did not give
        ("wait_for_ready", ("http://127.0.0.1:1",), {}),
    ]
    client.sync().close()
    assert duck.calls[-1][0] == "stop_container"


def test_from_env_runs_the_space_image_on_a_duck_typed_provider() -> None:
    duck = _DuckProvider()
    GenericEnvClient.from_env("user/my-env", provider=duck, env_vars={"A": "1"})  # type: ignore[arg-type]
    name, args, kwargs = duck.calls[0]
    assert name == "start_container" and "registry.hf.space/user-my-env" in args[0]
    assert kwargs == {"env_vars": {"A": "1"}}


def test_uv_provider_serves_the_current_folder_by_default(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert UVProvider().project_path == str(tmp_path)


def test_from_hub_passes_provider_keywords_to_start_container() -> None:
    duck = _DuckProvider()
    client = GenericEnvClient.from_hub(
        "user/my-env",
        provider=duck,  # type: ignore[arg-type]
        replicas=4,
        connect_timeout_s=5,
    )
    name, _, kwargs = duck.calls[0]
    assert name == "start_container" and kwargs == {"replicas": 4}
    assert client.connect_timeout == 5  # the client's own keywords stay with the client
    client.sync().close()


def test_arguments_are_checked_before_anything_starts() -> None:
    from openenv_runtime.compat.containers.runtime import DockerSwarmProvider
    from openenv_runtime.compat.containers.runtime.providers import _ProviderFace

    class Strict(_DuckProvider):
        def start_container(self, image: str, port: int | None = None) -> str:  # type: ignore[override]
            return super().start_container(image, port=port)

    strict = Strict()
    with pytest.raises(TypeError, match=r"replicas.*nothing was started"):
        GenericEnvClient.from_hub("user/my-env", provider=strict, replicas=4)  # type: ignore[arg-type]
    assert strict.calls == []

    # the swarm provider (built without an engine): a bad option fails before the service exists
    swarm = object.__new__(DockerSwarmProvider)
    _ProviderFace.__init__(swarm)
    made: list[dict[str, Any]] = []

    def make(image: str, port: Any, env_vars: Any, kwargs: dict[str, Any]) -> Any:
        made.append(kwargs)
        raise RuntimeError("would start a service here")

    swarm._make = make  # type: ignore[method-assign]
    with pytest.raises(ValueError, match=r"bogus.*nothing was started"):
        GenericEnvClient.from_hub("user/my-env", provider=swarm, replicas=4, bogus=1)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="replicas"):
        GenericEnvClient.from_hub("user/my-env", provider=swarm, replicas=0)  # type: ignore[arg-type]
    assert made == []
    with pytest.raises(RuntimeError, match="would start"):
        GenericEnvClient.from_hub("user/my-env", provider=swarm, replicas=4)  # type: ignore[arg-type]
    assert made == [{"replicas": 4}]


def test_from_provider_checks_client_keywords_before_starting() -> None:
    from openenv_runtime.providers.base import Provider

    class Never(Provider):
        def _launch(self) -> list[str]:
            raise AssertionError("must not start")

        def _teardown(self) -> None:
            pass

    with pytest.raises(TypeError, match=r"replicas.*nothing was started"):
        GenericEnvClient.from_provider(Never(), replicas=4)

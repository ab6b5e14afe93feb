"""The reference's provider interfaces: what needs no engine or server."""

from __future__ import annotations

from typing import Any

import pytest

from openenv_runtime import GenericEnvClient
from openenv_runtime.containers.runtime import (
    ContainerProvider,
    DaytonaProvider,
    KubernetesProvider,
    RuntimeProvider,
    UVProvider,
)
from openenv_runtime.containers.runtime.providers import poll_ready
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
        poll_ready(f"http://127.0.0.1:{free_port()}", timeout_s=0.3, what="Container")


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

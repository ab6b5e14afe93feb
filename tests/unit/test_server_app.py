import asyncio
import gc
import inspect
from typing import Any

import pytest
from fastapi.testclient import TestClient

from openenv_runtime import Action, Environment, Observation, State, create_app
from openenv_runtime.server import ServerSettings
from openenv_runtime.server.app import collect_connection_cycles
from openenv_runtime.server.config.fields import KEYS
from openenv_runtime.server.ws.endpoint import WebSocketEndpoint
from openenv_runtime.wire import EnvironmentMetadata


class Counter:
    total_opened = 0
    active = 0


def test_cycles_are_collected_after_n_sessions_close(monkeypatch: pytest.MonkeyPatch) -> None:
    collected: list[int] = []
    monkeypatch.setattr(gc, "collect", lambda *a: collected.append(1) or 0)
    manager = Counter()

    async def go() -> None:
        task = asyncio.get_running_loop().create_task(collect_connection_cycles(manager, every=3))  # type: ignore[arg-type]
        await asyncio.sleep(1.2)
        assert collected == []  # no sessions, no collection
        manager.total_opened = manager.active = 3
        await asyncio.sleep(1.2)
        assert collected == []  # sessions opened, none closed: nothing to collect yet
        manager.active = 0
        await asyncio.sleep(1.2)
        task.cancel()

    asyncio.run(go())
    assert collected == [1]


def test_a_burst_of_new_sessions_collects_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    """A full collection walks every open session: a connect storm must not pay it per 2,000
    opened; the collection waits for as many closes as there are sessions open."""
    collected: list[int] = []
    monkeypatch.setattr(gc, "collect", lambda *a: collected.append(1) or 0)
    manager = Counter()

    async def go() -> None:
        task = asyncio.get_running_loop().create_task(collect_connection_cycles(manager, every=3))  # type: ignore[arg-type]
        manager.total_opened = manager.active = 10
        await asyncio.sleep(1.2)
        manager.total_opened, manager.active = 15, 10  # 5 closed: fewer than the 10 open
        await asyncio.sleep(1.2)
        assert collected == []
        manager.total_opened = 20  # 10 closed since the start: as many as are open
        await asyncio.sleep(1.2)
        task.cancel()

    asyncio.run(go())
    assert collected == [1]


class Say(Action):
    message: str


class Heard(Observation):
    message: str = ""


class Count(State):
    heard: int = 0


class Parrot(Environment[Say, Heard, Count]):
    SUPPORTS_CONCURRENT_SESSIONS = True

    def reset(self, seed: int | None = None, episode_id: str | None = None, **kw: Any) -> Heard:
        return Heard()

    def step(self, action: Say, **kw: Any) -> Heard:
        return Heard(message=action.message)

    @property
    def state(self) -> Count:
        return Count()


class LoudParrot(Parrot):
    """A subclass inherits what its base declared."""


@pytest.mark.parametrize("env", [Parrot, LoudParrot])
def test_the_models_are_read_from_the_environments_declaration(env: type[Parrot]) -> None:
    with TestClient(create_app(env=env)) as client:
        schema = client.get("/schema").json()
        assert schema["action"]["required"] == ["message"]
        assert "message" in schema["observation"]["properties"]
        assert "heard" in schema["state"]["properties"]
        session = client.post("/reset", json={}).json()["session_id"]
        reply = client.post("/step", json={"action": {"message": "hi"}, "session_id": session})
        assert reply.json()["observation"]["message"] == "hi"


def test_models_given_win_over_the_declaration() -> None:
    class Shout(Action):
        words: list[str]

    with TestClient(create_app(Parrot, Shout, Heard)) as client:
        assert client.get("/schema").json()["action"]["required"] == ["words"]


def test_a_declaration_left_generic_falls_back_to_the_base_models() -> None:
    class Odd(Environment[Any, Heard, State]):
        def reset(self, seed: int | None = None, episode_id: str | None = None, **kw: Any) -> Heard:
            return Heard()

        def step(self, action: Any, **kw: Any) -> Heard:
            return Heard()

        @property
        def state(self) -> State:
            return State()

    with TestClient(create_app(Odd)) as client:  # Any: the base Action, as for tool servers
        assert client.get("/schema").status_code == 200


# -- create_app's face: the environment, its models, one settings object, the metadata ----------


def test_settings_given_are_the_apps_defaults_and_the_environment_still_wins(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    settings = ServerSettings(max_concurrent_envs=3, web_interface=False, session_timeout=0)
    app = create_app(Parrot, settings=settings)
    resolved = app.state.openenv_settings
    assert resolved.values.max_concurrent_envs == 3
    assert resolved.values.session_timeout is None  # 0 is "never", not "not given"
    assert str(resolved.origin("max_concurrent_envs")) == "create_app(settings=...)"
    assert str(resolved.origin("port")) == "default"  # only the fields given count
    with TestClient(app) as client:
        assert client.get("/health").json()["max_sessions"] == 3
        assert client.get("/web/").status_code == 404

    monkeypatch.setenv("MAX_CONCURRENT_ENVS", "5")
    resolved = create_app(Parrot, settings=settings).state.openenv_settings
    assert resolved.values.max_concurrent_envs == 5
    assert resolved.overrides() == [
        "MAX_CONCURRENT_ENVS overrides create_app's max_concurrent_envs=3"
    ]


def test_the_references_keywords_map_into_the_same_layer() -> None:
    app = create_app(Parrot, Say, Heard, Count, env_name="parrot", max_concurrent_envs=2)
    resolved = app.state.openenv_settings
    assert resolved.values.max_concurrent_envs == 2
    assert str(resolved.origin("max_concurrent_envs")) == "create_app(settings=...)"
    with TestClient(app) as client:
        assert client.get("/metadata").json()["name"] == "parrot"
    with pytest.raises(ValueError, match="both as a keyword and in settings="):
        create_app(Parrot, settings=ServerSettings(max_concurrent_envs=3), max_concurrent_envs=2)


@pytest.mark.parametrize(
    ("keyword", "hint"),
    [
        ("enable_web_interface", "settings=ServerSettings(web_interface=...)"),
        ("step_timeout", "settings=ServerSettings(step_timeout=...)"),
        ("readme", "metadata=EnvironmentMetadata(readme_content=...)"),
        ("colour", ""),
    ],
)
def test_a_keyword_create_app_does_not_take_says_where_it_goes(keyword: str, hint: str) -> None:
    with pytest.raises(TypeError, match=f"unexpected keyword arguments: {keyword}") as info:
        create_app(Parrot, **{keyword: 1})  # type: ignore[arg-type]
    assert hint in str(info.value)


def test_metadata_is_what_metadata_reports() -> None:
    given = EnvironmentMetadata(
        name="parrot", description="Says it back.", version="1.2.3", readme_content="# Parrot\n"
    )
    with TestClient(create_app(Parrot, metadata=given)) as client:
        assert client.get("/metadata").json() == {
            "name": "parrot",
            "description": "Says it back.",
            "version": "1.2.3",
            "readme_content": "# Parrot\n",
            "author": None,
            "documentation_url": None,
        }


def test_no_parameter_of_create_app_repeats_a_server_setting() -> None:
    named = {
        name
        for name, parameter in inspect.signature(create_app).parameters.items()
        if parameter.kind is not inspect.Parameter.VAR_KEYWORD
    }
    assert named.isdisjoint(KEYS) and named.isdisjoint({"enable_web_interface"})


def test_the_ws_endpoint_is_built_whole_with_typed_parts() -> None:
    parameters = inspect.signature(WebSocketEndpoint.__init__).parameters
    for part in ("validate_action", "tally", "checkpoints", "mcp", "attach"):
        annotation = str(parameters[part].annotation)
        assert annotation.endswith("| None") and not annotation.startswith("Any"), part
    with TestClient(create_app(Parrot, settings=ServerSettings(metrics=False))) as client:
        endpoint = client.app.ws_endpoint  # type: ignore[attr-defined]
        assert endpoint.checkpoints is client.app.state.openenv_checkpoints  # type: ignore[attr-defined]
        assert endpoint.mcp is not None and endpoint.attach is not None
        assert endpoint.tally is None  # metrics off: no per-step counting
    # every part given at construction: none is set afterwards through a property
    assert not any(isinstance(v, property) for v in vars(WebSocketEndpoint).values())

import asyncio
import gc
from typing import Any

import pytest
from fastapi.testclient import TestClient

from openenv_runtime import Action, Environment, Observation, State, create_app
from openenv_runtime.server.app import collect_connection_cycles


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

"""The Gymnasium family: spaces as typed fields and back, options, seeding, frames."""

from __future__ import annotations

import json
from typing import Any

import gymnasium
import numpy as np
import pytest
from gymnasium import spaces
from pydantic import TypeAdapter, ValidationError

from openenv_runtime.adapters.gymnasium import (
    SPACE_KEY,
    from_wire,
    load,
    make_options,
    space_from_json,
    space_to_json,
    space_type,
    to_wire,
)
from openenv_runtime.errors import AdapterError

SPACES: list[Any] = [
    spaces.Box(-1.0, 1.0, shape=(3,), dtype=np.float32),
    spaces.Box(
        low=np.array([-4.8, -np.inf], dtype=np.float32),
        high=np.array([4.8, np.inf], dtype=np.float32),
        dtype=np.float32,
    ),
    spaces.Box(0, 255, shape=(4, 5, 3), dtype=np.uint8),
    spaces.Box(-2.0, 2.0, shape=(), dtype=np.float64),
    spaces.Discrete(4),
    spaces.Discrete(3, start=-1),
    spaces.MultiDiscrete([3, 4, 5]),
    spaces.MultiDiscrete(np.array([[2, 3], [4, 5]]), start=np.array([[1, 0], [0, -1]])),
    spaces.MultiBinary(5),
    spaces.MultiBinary([2, 3]),
    spaces.Text(8, min_length=2, charset="abc"),
    spaces.Dict({"pos": spaces.Box(-1, 1, shape=(2,)), "flag": spaces.Discrete(2)}),
    spaces.Tuple((spaces.Discrete(3), spaces.Box(0.0, 1.0, shape=(2,), dtype=np.float32))),
]


@pytest.mark.parametrize("space", SPACES, ids=lambda s: type(s).__name__)
def test_a_space_survives_its_json_description_equal_under_gymnasium(space: Any) -> None:
    described = json.loads(json.dumps(space_to_json(space)))  # travels as strict JSON
    rebuilt = space_from_json(described)
    assert rebuilt == space
    assert type(rebuilt) is type(space)
    if isinstance(space, spaces.Box):
        assert rebuilt.dtype == space.dtype


@pytest.mark.parametrize("space", SPACES, ids=lambda s: type(s).__name__)
def test_a_sample_travels_as_json_and_validates_against_its_field(space: Any) -> None:
    space.seed(0)
    sample = space.sample()
    wire = json.loads(json.dumps(to_wire(space, sample)))
    TypeAdapter(space_type(space)).validate_python(wire)
    back = from_wire(space, wire)
    assert space.contains(back)
    assert json.dumps(to_wire(space, back)) == json.dumps(wire)


def test_fields_refuse_values_outside_their_space() -> None:
    with pytest.raises(ValidationError):
        TypeAdapter(space_type(spaces.Discrete(2))).validate_python(2)
    with pytest.raises(ValidationError):  # wrong shape
        TypeAdapter(space_type(spaces.Box(-1, 1, shape=(3,)))).validate_python([0.0, 0.0])
    with pytest.raises(ValidationError):
        TypeAdapter(space_type(spaces.MultiBinary(2))).validate_python([0, 2])


@pytest.mark.parametrize(
    "space",
    [
        spaces.Graph(node_space=spaces.Discrete(3), edge_space=None),
        spaces.Sequence(spaces.Discrete(3)),
        spaces.OneOf([spaces.Discrete(2), spaces.Discrete(3)]),
        spaces.Dict({"inner": spaces.Sequence(spaces.Discrete(3))}),
    ],
    ids=lambda s: type(s).__name__,
)
def test_an_unsupported_space_is_a_clear_error_naming_it(space: Any) -> None:
    with pytest.raises(AdapterError, match=r"(Graph|Sequence|OneOf).*cannot be served"):
        space_to_json(space)
    with pytest.raises(AdapterError, match="cannot be served"):
        space_type(space)


def test_options_are_make_keyword_arguments_read_as_json_else_text() -> None:
    assert make_options(
        {"max_episode_steps": "200", "is_slippery": "false", "g": "9.8", "render_mode": "rgb_array"}
    ) == {"max_episode_steps": 200, "is_slippery": False, "g": 9.8, "render_mode": "rgb_array"}


def test_the_schema_describes_each_space() -> None:
    adapted = load("CartPole-v1", {})
    schema = adapted.observation_cls.model_json_schema()
    described = schema["properties"]["observation"][SPACE_KEY]
    assert space_from_json(described) == gymnasium.make("CartPole-v1").observation_space
    action = adapted.action_cls.model_json_schema()["properties"]["action"]
    assert space_from_json(action[SPACE_KEY]) == spaces.Discrete(2)
    assert adapted.package == "gymnasium" and adapted.package_version == gymnasium.__version__


def test_an_unknown_id_is_a_clear_error() -> None:
    with pytest.raises(AdapterError, match=r"gymnasium.make\('NoSuchEnv-v0'\) failed"):
        load("NoSuchEnv-v0", {})


def test_reset_with_a_seed_reseeds_mid_episode_as_the_library_does() -> None:
    env = load("CartPole-v1", {}).factory()
    native = gymnasium.make("CartPole-v1")
    try:
        first = env.reset(seed=7)
        for _ in range(5):
            env.step(_Action(1))
        again = env.reset(seed=7)  # mid-episode, same session
        assert again.observation == first.observation
        expected, _ = native.reset(seed=7)
        assert again.observation == expected.tolist()
        # then an unseeded reset continues the generator, as the native env's does
        assert env.reset().observation == native.reset()[0].tolist()
    finally:
        env.close()


class _Action:
    """What the server hands ``step``: a validated model with an ``action`` field."""

    def __init__(self, action: Any) -> None:
        self.action = action


def test_terminated_and_truncated_stay_apart() -> None:
    env = load("CartPole-v1", {"max_episode_steps": "2"}).factory()
    try:
        env.reset(seed=0)
        env.step(_Action(0))
        last = env.step(_Action(0))
        assert last.truncated is True and last.terminated is False
        assert last.done is True and last.reward == 1.0
    finally:
        env.close()


class _Painted(gymnasium.Env[np.ndarray, int]):
    """A tiny environment that renders rgb_array frames without pygame."""

    metadata = {"render_modes": ["rgb_array"], "render_fps": 4}  # noqa: RUF012

    def __init__(self, render_mode: str | None = None) -> None:
        self.render_mode = render_mode
        self.observation_space = spaces.Box(0.0, 1.0, shape=(1,), dtype=np.float32)
        self.action_space = spaces.Discrete(2)
        self.t = 0

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> Any:
        super().reset(seed=seed)
        self.t = 0
        return np.zeros(1, dtype=np.float32), {}

    def step(self, action: int) -> Any:
        self.t += 1
        return np.ones(1, dtype=np.float32), 0.0, False, False, {"t": np.int64(self.t)}

    def render(self) -> Any:
        return np.full((2, 3, 3), self.t, dtype=np.uint8)


def test_rgb_array_frames_come_with_the_observation_when_asked() -> None:
    gymnasium.register("OpenEnvPainted-v0", entry_point=_Painted)
    try:
        plain = load("OpenEnvPainted-v0", {}).factory()
        assert plain.reset().frame is None
        env = load("OpenEnvPainted-v0", {"render_mode": "rgb_array"}).factory()
        env.reset()
        step = env.step(_Action(1))
        assert np.array_equal(np.asarray(step.frame), np.full((2, 3, 3), 1))
        assert step.info == {"t": 1}  # numpy values in info become JSON data
        json.dumps(step.model_dump())
    finally:
        gymnasium.registry.pop("OpenEnvPainted-v0")

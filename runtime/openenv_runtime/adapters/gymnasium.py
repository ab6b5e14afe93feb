"""Gymnasium environments served as they are: ``gymnasium:CartPole-v1?render_mode=rgb_array``.

The target's name is any registered Gymnasium id and its query options are ``gymnasium.make``
keyword arguments (values read as JSON when they parse, else as strings:
``max_episode_steps=200``, ``is_slippery=false``, ``render_mode=rgb_array``). Gymnasium's
passive environment checker is off unless ``disable_env_checker=false`` is given: it only
warns, and its one slow first step per instance would keep every step off the fast path.

Each space becomes a typed field: the action is ``{"action": ...}`` and the observation carries
``observation``, ``terminated`` and ``truncated`` apart (``done`` is either), ``info`` and,
with ``render_mode=rgb_array``, the ``frame``. Every field's JSON schema describes its space
under ``x-gymnasium-space`` (shape, dtype, bounds), so a client rebuilds the very same space
(:func:`space_from_json`, used by :mod:`openenv_runtime.gym`). ``reset(seed=s)`` reseeds the
environment exactly as ``env.reset(seed=s)`` does, also mid-episode on a reused session.

Spaces served: Box, Discrete, MultiDiscrete, MultiBinary, Text and Dict / Tuple of these.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from importlib.metadata import version
from typing import Annotated, Any, ClassVar, cast
from uuid import uuid4

import gymnasium
import numpy as np
from gymnasium import spaces
from pydantic import BaseModel, ConfigDict, Field, create_model

from ..environment import Environment
from ..errors import AdapterError
from ..models import Action, Observation, State
from .target import AdaptedEnvironment

SPACE_KEY = "x-gymnasium-space"  # the JSON schema key that describes a field's space


# -- spaces as JSON -------------------------------------------------------------------------------
def _bound(value: Any) -> Any:
    """A Box bound as JSON: one number when every element is the same, infinities as strings."""
    array = np.asarray(value)
    flat = array.reshape(-1)
    if flat.size and bool(np.all(flat == flat[0])):
        return _number(flat[0])
    return _nested(array.tolist())


def _number(x: Any) -> Any:
    value = x.item() if isinstance(x, np.generic) else x
    if isinstance(value, float) and math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return value


def _nested(value: Any) -> Any:
    if isinstance(value, list):
        return [_nested(v) for v in value]
    return _number(value)


def _unbound(value: Any) -> Any:
    if isinstance(value, list):
        return [_unbound(v) for v in value]
    if isinstance(value, str):
        return float(value)
    return value


def unsupported(space: Any) -> AdapterError:
    """The error for a space the adapter cannot type."""
    return AdapterError(
        f"Gymnasium space {space!r} ({type(space).__name__}) cannot be served: the adapter types "
        "Box, Discrete, MultiDiscrete, MultiBinary, Text, and Dict / Tuple of these. Wrap the "
        "environment to use one of those spaces."
    )


def space_to_json(space: Any) -> dict[str, Any]:
    """A JSON description of ``space`` from which :func:`space_from_json` builds an equal one."""
    if isinstance(space, spaces.Box):
        return {
            "type": "Box",
            "shape": list(space.shape),
            "dtype": str(space.dtype),
            "low": _bound(space.low),
            "high": _bound(space.high),
        }
    if isinstance(space, spaces.Discrete):
        return {"type": "Discrete", "n": int(space.n), "start": int(space.start)}
    if isinstance(space, spaces.MultiDiscrete):
        return {
            "type": "MultiDiscrete",
            "nvec": space.nvec.tolist(),
            "start": space.start.tolist(),
            "dtype": str(space.dtype),
        }
    if isinstance(space, spaces.MultiBinary):
        n: Any = space.n
        return {"type": "MultiBinary", "n": int(n) if np.ndim(n) == 0 else [int(k) for k in n]}
    if isinstance(space, spaces.Text):
        return {
            "type": "Text",
            "min_length": space.min_length,
            "max_length": space.max_length,
            "charset": space.characters,
        }
    if isinstance(space, spaces.Dict):
        return {"type": "Dict", "spaces": {k: space_to_json(s) for k, s in space.spaces.items()}}
    if isinstance(space, spaces.Tuple):
        return {"type": "Tuple", "spaces": [space_to_json(s) for s in space.spaces]}
    raise unsupported(space)


def space_from_json(data: Mapping[str, Any]) -> Any:
    """The Gymnasium space :func:`space_to_json` described."""
    kind = data.get("type")
    if kind == "Box":
        dtype = np.dtype(data["dtype"])
        shape = tuple(data["shape"])
        low = np.broadcast_to(np.asarray(_unbound(data["low"]), dtype=dtype), shape)
        high = np.broadcast_to(np.asarray(_unbound(data["high"]), dtype=dtype), shape)
        return spaces.Box(low=low, high=high, shape=shape, dtype=dtype)
    if kind == "Discrete":
        return spaces.Discrete(int(data["n"]), start=int(data.get("start", 0)))
    if kind == "MultiDiscrete":
        return spaces.MultiDiscrete(
            np.asarray(data["nvec"]), dtype=data["dtype"], start=np.asarray(data["start"])
        )
    if kind == "MultiBinary":
        return spaces.MultiBinary(data["n"])
    if kind == "Text":
        return spaces.Text(
            int(data["max_length"]),
            min_length=int(data["min_length"]),
            charset=str(data["charset"]),
        )
    if kind == "Dict":
        return spaces.Dict({k: space_from_json(v) for k, v in data["spaces"].items()})
    if kind == "Tuple":
        return spaces.Tuple([space_from_json(v) for v in data["spaces"]])
    raise AdapterError(f"Unknown Gymnasium space description {dict(data)!r}.")


# -- spaces as pydantic types ---------------------------------------------------------------------
def _array_type(shape: tuple[int, ...], element: Any) -> Any:
    typ = element
    for size in reversed(shape):
        typ = Annotated[list[typ], Field(min_length=size, max_length=size)]  # type: ignore[valid-type]
    return typ


def space_type(space: Any) -> Any:
    """The Python type of a value of ``space`` on the wire (lists for arrays)."""
    if isinstance(space, spaces.Box):
        element: Any = int if np.issubdtype(space.dtype, np.integer) else float
        if np.issubdtype(space.dtype, np.bool_):
            element = bool
        return _array_type(space.shape, element)
    if isinstance(space, spaces.Discrete):
        start = int(space.start)
        return Annotated[int, Field(ge=start, le=start + int(space.n) - 1)]
    if isinstance(space, spaces.MultiDiscrete):
        return _array_type(space.shape, int)
    if isinstance(space, spaces.MultiBinary):
        return _array_type(space.shape, Annotated[int, Field(ge=0, le=1)])
    if isinstance(space, spaces.Text):
        return Annotated[str, Field(min_length=space.min_length, max_length=space.max_length)]
    if isinstance(space, spaces.Dict):
        fields: dict[str, Any] = {}
        for key, sub in space.spaces.items():
            if not (isinstance(key, str) and key.isidentifier() and not key.startswith("_")):
                raise AdapterError(
                    f"Dict space key {key!r} is not a Python identifier: the adapter names a "
                    "field after each key."
                )
            fields[key] = (
                space_type(sub),
                Field(json_schema_extra={SPACE_KEY: space_to_json(sub)}),
            )
        return create_model("DictSpace", __config__=ConfigDict(extra="forbid"), **fields)
    if isinstance(space, spaces.Tuple):
        return tuple[tuple(space_type(s) for s in space.spaces)]  # type: ignore[misc]
    raise unsupported(space)


def to_wire(space: Any, value: Any) -> Any:
    """A native value of ``space`` as plain JSON data."""
    if isinstance(space, spaces.Dict):
        return {k: to_wire(s, value[k]) for k, s in space.spaces.items()}
    if isinstance(space, spaces.Tuple):
        return [to_wire(s, v) for s, v in zip(space.spaces, value, strict=True)]
    if isinstance(space, spaces.Text):
        return str(value)
    if isinstance(space, spaces.Discrete):
        return int(value)
    return np.asarray(value).tolist()


def from_wire(space: Any, value: Any) -> Any:
    """Plain data (or a validated model) as the native value of ``space``."""
    if isinstance(space, spaces.Dict):
        get = (lambda k: getattr(value, k)) if isinstance(value, BaseModel) else value.__getitem__
        return {k: from_wire(s, get(k)) for k, s in space.spaces.items()}
    if isinstance(space, spaces.Tuple):
        return tuple(from_wire(s, v) for s, v in zip(space.spaces, value, strict=True))
    if isinstance(space, spaces.Text):
        return str(value)
    if isinstance(space, spaces.Discrete):
        return int(value)
    return np.asarray(value, dtype=space.dtype)


def plain(value: Any) -> Any:
    """``value`` (an ``info`` dict, say) with numpy arrays and scalars as JSON data."""
    if isinstance(value, np.ndarray):
        return plain(value.tolist())
    if isinstance(value, np.generic):
        return plain(value.item())
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return repr(value)


# -- the environment ------------------------------------------------------------------------------
class GymnasiumState(State):
    """The episode's bookkeeping, and which Gymnasium environment it runs."""

    env_id: str = Field(description="The Gymnasium id served.")
    seed: int | None = Field(default=None, description="The seed of the last reset, if any.")


def make_options(options: Mapping[str, str]) -> dict[str, Any]:
    """The target's query options as ``gymnasium.make`` keyword arguments (JSON, else text)."""
    kwargs: dict[str, Any] = {}
    for key, text in options.items():
        try:
            kwargs[key] = json.loads(text)
        except ValueError:
            kwargs[key] = text
    return kwargs


def _make(name: str, kwargs: Mapping[str, Any]) -> Any:
    # Gymnasium's passive checker only warns, on each instance's first reset and step; that one
    # slow first step would keep every later step of the class off the event loop
    # (server/running/step_placement.py). `disable_env_checker=false` turns it back on.
    kwargs = {"disable_env_checker": True, **kwargs}
    try:
        return gymnasium.make(name, **kwargs)
    except gymnasium.error.Error as exc:
        raise AdapterError(
            f"gymnasium.make({name!r}) failed: {str(exc).rstrip('.?')}. Use a registered id "
            "(gymnasium.pprint_registry() lists them) and make()'s keyword arguments as options."
        ) from None
    except TypeError as exc:
        raise AdapterError(
            f"gymnasium.make({name!r}, ...) refused the options {dict(kwargs)!r}: {exc}"
        ) from None


def load(name: str, options: Mapping[str, str]) -> AdaptedEnvironment:
    """The Gymnasium environment ``name`` made with ``options``, ready for ``create_app``."""
    kwargs = make_options(options)
    probe = _make(name, kwargs)
    try:
        action_space, observation_space = probe.action_space, probe.observation_space
        render_mode = probe.render_mode
    finally:
        probe.close()
    action_field = (
        space_type(action_space),
        Field(
            description="The action.", json_schema_extra={SPACE_KEY: space_to_json(action_space)}
        ),
    )
    obs_field = (
        space_type(observation_space),
        Field(
            description="The environment's observation.",
            json_schema_extra={SPACE_KEY: space_to_json(observation_space)},
        ),
    )
    action_cls = create_model(
        "GymnasiumAction", __base__=Action, __doc__=f"An action of {name}.", action=action_field
    )
    observation_cls = create_model(
        "GymnasiumObservation",
        __base__=Observation,
        __doc__=f"An observation of {name}.",
        observation=obs_field,
        terminated=(
            bool,
            Field(default=False, description="The episode reached a terminal state."),
        ),
        truncated=(
            bool,
            Field(default=False, description="The episode was cut short (time limit)."),
        ),
        info=(dict[str, Any], Field(default_factory=dict, description="The step's info dict.")),
        frame=(
            list[Any] | None,
            Field(default=None, description="The rendered RGB frame (render_mode=rgb_array)."),
        ),
    )
    frames = render_mode == "rgb_array"

    def factory() -> GymnasiumEnvironment:
        return GymnasiumEnvironment(name, kwargs, observation_cls, frames)

    return AdaptedEnvironment(
        factory=factory,
        action_cls=action_cls,
        observation_cls=observation_cls,
        state_cls=GymnasiumState,
        name=name,
        description=f"Gymnasium's {name}, served as it is (gymnasium.make options: {kwargs}).",
        package="gymnasium",
        package_version=version("gymnasium"),
    )


class GymnasiumEnvironment(Environment[Action, Observation, GymnasiumState]):
    """One session's ``gymnasium.make(env_id, **kwargs)``, reset and stepped as the library does."""

    SUPPORTS_CONCURRENT_SESSIONS: ClassVar[bool] = True

    def __init__(
        self,
        env_id: str,
        kwargs: Mapping[str, Any],
        observation_cls: type[Observation],
        frames: bool,
    ) -> None:
        super().__init__()
        self._env = _make(env_id, kwargs)
        self._obs_space = self._env.observation_space
        self._act_space = self._env.action_space
        # built with the fields of its space: typed as a plain callable of keywords
        self._observation_cls: Callable[..., Observation] = observation_cls
        self._frames = frames
        self._env_id = env_id
        self._episode_id: str | None = None
        self._seed: int | None = None
        self._steps = 0  # a plain int: a pydantic attribute write costs more than the step

    def _observation(
        self,
        obs: Any,
        reward: float | None,
        terminated: bool,
        truncated: bool,
        info: Mapping[str, Any],
    ) -> Observation:
        frame = plain(self._env.render()) if self._frames else None
        return self._observation_cls(
            observation=to_wire(self._obs_space, obs),
            terminated=terminated,
            truncated=truncated,
            done=terminated or truncated,
            reward=reward,
            info=plain(info) if info else {},
            frame=frame,
        )

    def reset(
        self,
        seed: int | None = None,
        episode_id: str | None = None,
        options: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> Observation:
        """``env.reset(seed=seed, options=options)``: the same seed, the same episode."""
        obs, info = self._env.reset(seed=seed, options=options)
        self._episode_id, self._seed, self._steps = episode_id or str(uuid4()), seed, 0
        return self._observation(obs, None, False, False, info)

    def step(self, action: Action, **kwargs: Any) -> Observation:
        """``env.step(action)``, the action turned into the space's own type."""
        native = from_wire(self._act_space, cast(Any, action).action)
        obs, reward, terminated, truncated, info = self._env.step(native)
        self._steps += 1
        return self._observation(obs, float(reward), bool(terminated), bool(truncated), info)

    @property
    def state(self) -> GymnasiumState:
        return GymnasiumState(
            env_id=self._env_id,
            episode_id=self._episode_id,
            step_count=self._steps,
            seed=self._seed,
        )

    def close(self) -> None:
        self._env.close()

"""The ``Environment`` contract: the class an environment author writes.

Subclass ``Environment`` and implement three members::

    class EchoEnvironment(Environment[EchoAction, EchoObservation, State]):
        SUPPORTS_CONCURRENT_SESSIONS = True      # instances share no mutable globals

        def __init__(self) -> None:
            self._state = State()

        def reset(self, seed=None, episode_id=None, **kwargs) -> EchoObservation:
            self._state = State(episode_id=episode_id or str(uuid4()))
            return EchoObservation(echoed_message="ready")

        def step(self, action: EchoAction, **kwargs) -> EchoObservation:
            self._state.step_count += 1
            return EchoObservation(echoed_message=action.message, reward=1.0)

        @property
        def state(self) -> State:
            return self._state

Rules the server relies on:

* The server creates one instance per session (a WebSocket connection or an HTTP session)
  and calls ``close()`` on it exactly once when that session ends, for whatever reason.
  So keep per-episode data on ``self``, never in module globals.
* ``reset``, ``step`` and ``close`` may be plain methods or ``async def``; ``state`` may be a
  property or a (plain or async) method. Async methods run on the server's event loop and
  must not block it; plain methods run on a shared, bounded thread pool.
* ``reset`` and ``step`` return an instance of your ``Observation`` subclass, with
  ``reward`` and ``done`` set on it; ``state`` returns a ``State`` (or subclass).
* ``reset`` receives ``seed`` and ``episode_id`` (and any other key the client sends) only
  if its signature accepts them.
* ``SUPPORTS_CONCURRENT_SESSIONS = False`` (the default) limits the server to one session
  at a time, for environments that hold a single shared resource. Set it to ``True`` when
  instances are independent.

For authors porting from openenv-core, ``reset_async`` / ``step_async`` are honoured too:
when a subclass defines them, the server calls them instead of ``reset`` / ``step``.

Optional parts, as in the reference OpenEnv: ``Environment(transform=..., rubric=...)``
keeps a :class:`~openenv_runtime.transforms.Transform` and a
:class:`~openenv_runtime.rubrics.Rubric` that ``step`` applies with ``_apply_transform`` /
``_apply_rubric``; ``get_metadata()`` may be overridden to fill ``/metadata``; and
``REQUIRES_SINGLE_THREAD_EXECUTOR = True`` runs every plain call of a session (its
constructor included) on one thread of its own, for libraries bound to the thread that
created them (Playwright, some simulators).

Checkpoints: set ``SUPPORTS_CHECKPOINT = True`` and implement ``export_state()`` (the
episode as JSON data or bytes) and ``import_state(state)``; clients can then
``checkpoint()``, ``restore()`` and ``fork()`` sessions (docs/pool-and-checkpoints.md).
"""

from __future__ import annotations

import inspect
import typing
from typing import TYPE_CHECKING, Any, ClassVar, Generic, Protocol, TypeVar

from .models import Action, Observation, State

if TYPE_CHECKING:
    from .transforms import Transform
    from .wire import EnvironmentMetadata

ActT = TypeVar("ActT", bound=Action)
ObsT = TypeVar("ObsT", bound=Observation)
StateT = TypeVar("StateT", bound=State)


class RubricLike(Protocol):
    """What ``Environment`` needs of a rubric (every :class:`openenv_runtime.rubrics.Rubric` is one).

    Called with ``(action, observation)``, it returns the reward (or an awaitable of it, for an
    async rubric); ``reset()`` forgets its per-episode state.
    """

    def __call__(self, action: Any, observation: Any) -> Any: ...

    def reset(self) -> None: ...


class Environment(Generic[ActT, ObsT, StateT]):
    """Base class of every environment. See the module docstring for the contract."""

    SUPPORTS_CONCURRENT_SESSIONS: ClassVar[bool] = False
    REQUIRES_SINGLE_THREAD_EXECUTOR: ClassVar[bool] = False
    SUPPORTS_CHECKPOINT: ClassVar[bool] = False

    # Class-level defaults, so subclasses that skip ``super().__init__()`` still have them.
    transform: Transform[Any] | None = None
    rubric: RubricLike | None = None

    def __init__(
        self, transform: Transform[Any] | None = None, rubric: RubricLike | None = None
    ) -> None:
        self.transform = transform
        self.rubric = rubric

    def reset(self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any) -> ObsT:
        """Start a new episode and return its first observation."""
        raise NotImplementedError(_missing(type(self), "reset"))

    def step(self, action: ActT, **kwargs: Any) -> ObsT:
        """Apply ``action`` and return the next observation (with ``reward`` and ``done`` set)."""
        raise NotImplementedError(_missing(type(self), "step"))

    @property
    def state(self) -> StateT:
        """The current episode's state (``episode_id``, ``step_count`` and your own fields)."""
        raise NotImplementedError(_missing(type(self), "state"))

    def close(self) -> None:
        """Release what the instance holds. Called exactly once when its session ends."""

    async def reset_async(
        self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any
    ) -> ObsT:
        """Async ``reset``; by default calls ``reset``. Override for a truly async reset."""
        return self.reset(seed=seed, episode_id=episode_id, **kwargs)

    async def step_async(self, action: ActT, timeout_s: float | None = None, **kwargs: Any) -> ObsT:
        """Async ``step``; by default calls ``step``. Override for a truly async step."""
        if timeout_s is not None:
            kwargs["timeout_s"] = timeout_s
        return self.step(action, **kwargs)

    def export_state(self) -> Any:
        """Everything needed to continue the episode elsewhere: JSON data or ``bytes``.

        Called when a client checkpoints the session (only if ``SUPPORTS_CHECKPOINT = True``).
        Return plain data (dicts, lists, strings, numbers, booleans, None) that
        ``import_state`` turns back into the same state; the server never pickles it. Include
        the episode's ``State`` and any random generator's state, so that the next step after a
        restore is the same as it would have been. May be ``async def``.
        """
        raise NotImplementedError(
            f"{type(self).__qualname__} sets SUPPORTS_CHECKPOINT but does not implement "
            "export_state(); return the episode's state as JSON data or bytes."
        )

    def import_state(self, state: Any) -> None:
        """Replace this instance's episode with ``state`` (what ``export_state`` returned).

        Called on a fresh or running instance, possibly in another server process; no
        ``reset`` comes first. May be ``async def``.
        """
        raise NotImplementedError(
            f"{type(self).__qualname__} sets SUPPORTS_CHECKPOINT but does not implement "
            "import_state(state); rebuild the episode from what export_state() returned."
        )

    def get_metadata(self) -> EnvironmentMetadata:
        """What ``/metadata`` reports; override to describe the environment yourself."""
        from .wire import EnvironmentMetadata

        name = type(self).__name__
        return EnvironmentMetadata(name=name, description=f"{name} environment", version="1.0.0")

    def _apply_transform(self, observation: ObsT) -> ObsT:
        """``observation`` passed through ``self.transform`` (unchanged when there is none)."""
        return observation if self.transform is None else self.transform(observation)

    def _apply_rubric(self, action: ActT, observation: ObsT) -> float:
        """The reward ``self.rubric`` gives ``(action, observation)``; 0.0 without a rubric."""
        if self.rubric is None:
            return 0.0
        score = self.rubric(action, observation)
        if inspect.isawaitable(score):
            close = getattr(score, "close", None)
            if close is not None:
                close()  # never awaited: close it rather than leave a "never awaited" warning
            raise TypeError(
                f"{type(self.rubric).__name__} is async: call `await self._apply_rubric_async(...)` "
                "from an async step (`async def step` or `step_async`)."
            )
        return float(score)

    async def _apply_rubric_async(self, action: ActT, observation: ObsT) -> float:
        """Like ``_apply_rubric``, awaiting an async rubric."""
        if self.rubric is None:
            return 0.0
        score = self.rubric(action, observation)
        return float(await score if inspect.isawaitable(score) else score)

    def _reset_rubric(self) -> None:
        """Clear the rubric's per-episode state (call it from ``reset``)."""
        if self.rubric is not None:
            self.rubric.reset()

    async def _reset_rubric_async(self) -> None:
        """Like ``_reset_rubric``: the rubric's ``reset_async`` when it has one, else ``reset``
        (awaited when async)."""
        if self.rubric is not None:
            reset: Any = getattr(self.rubric, "reset_async", None) or self.rubric.reset
            result = reset()
            if inspect.isawaitable(result):
                await result


_SNIPPETS = {
    "reset": (
        "    def reset(self, seed=None, episode_id=None, **kwargs) -> {obs}:\n"
        "        ...  # start a new episode\n"
        "        return {obs}(...)"
    ),
    "step": (
        "    def step(self, action: {act}, **kwargs) -> {obs}:\n"
        "        ...  # apply the action\n"
        "        return {obs}(..., reward=1.0, done=False)"
    ),
    "state": ("    @property\n    def state(self) -> {state}:\n        return self._state"),
}


def _type_names(cls: type) -> dict[str, str]:
    """The names of ``cls``'s action, observation and state types, from
    ``Environment[MyAction, MyObservation, MyState]`` in its bases (placeholders otherwise)."""
    names = {"act": "MyAction", "obs": "MyObservation", "state": "State"}
    for klass in cls.__mro__:
        for base in getattr(klass, "__orig_bases__", ()):
            origin = typing.get_origin(base)
            if not (isinstance(origin, type) and issubclass(origin, Environment)):
                continue
            args = typing.get_args(base)
            for key, arg in zip(("act", "obs", "state"), args, strict=False):
                if isinstance(arg, type):
                    names[key] = arg.__name__
            return names
    return names


def _snippet(cls: type, member: str) -> str:
    return _SNIPPETS[member].format(**_type_names(cls))


def _missing(cls: type, member: str) -> str:
    return (
        f"{cls.__qualname__} does not implement `{member}`, which every Environment needs. "
        f"Add to class {cls.__qualname__}:\n\n{_snippet(cls, member)}\n"
    )


def missing_members(cls: type) -> list[str]:
    """The contract members that ``cls`` leaves to the base class (empty when complete)."""
    missing = []
    for member, alternative in (("reset", "reset_async"), ("step", "step_async"), ("state", None)):
        own = getattr(cls, member, None) is not getattr(Environment, member)
        alt = alternative is not None and overrides(cls, alternative)
        if not (own or alt):
            missing.append(member)
    return missing


def contract_error_message(cls: type, missing: list[str]) -> str:
    """A message listing what ``cls`` must add, with code to paste."""
    names = ", ".join(f"`{m}`" for m in missing)
    snippets = "\n\n".join(_snippet(cls, m) for m in missing)
    return (
        f"{cls.__qualname__} ({cls.__module__}) does not implement {names}. "
        f"Every Environment needs reset(), step() and a state property. Add to the class:\n\n{snippets}\n"
    )


def overrides(cls: type, name: str) -> bool:
    """Whether ``cls`` defines ``name`` itself rather than inheriting ``Environment``'s default."""
    own = getattr(cls, name, None)
    return own is not None and own is not getattr(Environment, name, None)

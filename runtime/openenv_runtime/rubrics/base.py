"""``Rubric``: a reward function of ``(action, observation)`` that nests like a module tree.

A rubric's ``forward`` returns a score (plain or ``async def``). Calling the rubric runs
its pre-hooks, ``forward`` and post-hooks, and records ``last_score``. Rubrics assigned
as attributes become children, so ``named_rubrics()`` walks the whole tree (what a
trainer logs per step). A rubric whose ``forward`` (or any child's) is async returns an
awaitable from ``__call__``; sync ones return the float directly.
"""

from __future__ import annotations

import inspect
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Generator, Iterator
from typing import Any

# Hooks may be plain or async (an async hook is awaited when the rubric runs async).
PreHook = Callable[["Rubric", Any, Any], Any]
PostHook = Callable[["Rubric", Any, Any, float], Any]


class Rubric(ABC):
    """Base class of rubrics; implement ``forward(action, observation) -> float``."""

    last_score: float | None
    _children: dict[str, Rubric]
    _pre_hooks: list[PreHook]
    _post_hooks: list[PostHook]

    def __init__(self) -> None:
        object.__setattr__(self, "_children", {})
        object.__setattr__(self, "_pre_hooks", [])
        object.__setattr__(self, "_post_hooks", [])
        object.__setattr__(self, "last_score", None)

    def __setattr__(self, name: str, value: Any) -> None:
        children = self.__dict__.get("_children")
        if children is None:
            raise AttributeError(
                f"{type(self).__name__}.__init__ must call super().__init__() before setting {name!r}"
            )
        if isinstance(value, Rubric):
            children[name] = value
        else:
            children.pop(name, None)
        object.__setattr__(self, name, value)

    @abstractmethod
    def forward(self, action: Any, observation: Any) -> float | Awaitable[float]:
        """The score of ``observation`` (reached by ``action``)."""

    def __call__(self, action: Any, observation: Any) -> Any:
        if inspect.iscoroutinefunction(self.forward):
            return self._call_async(action, observation)
        for hook in self._pre_hooks:
            hook(self, action, observation)
        score = self.forward(action, observation)
        if inspect.isawaitable(score):
            return self._finish_later(action, observation, score)
        return self._finish(action, observation, score)

    async def _call_async(self, action: Any, observation: Any) -> float:
        for hook in self._pre_hooks:  # hooks may be async here
            pending = hook(self, action, observation)
            if inspect.isawaitable(pending):
                await pending
        return await self._finish_later(action, observation, self.forward(action, observation))

    def _finish(self, action: Any, observation: Any, score: Any) -> float:
        object.__setattr__(self, "last_score", score)
        for hook in self._post_hooks:
            hook(self, action, observation, score)
        return score  # type: ignore[no-any-return]

    async def _finish_later(self, action: Any, observation: Any, pending: Any) -> float:
        score = await pending if inspect.isawaitable(pending) else pending
        object.__setattr__(self, "last_score", score)
        for hook in self._post_hooks:
            done = hook(self, action, observation, score)
            if inspect.isawaitable(done):
                await done
        return score  # type: ignore[no-any-return]

    def register_forward_pre_hook(self, hook: PreHook) -> None:
        """Call ``hook(rubric, action, observation)`` before every ``forward``."""
        self._pre_hooks.append(hook)

    def register_forward_hook(self, hook: PostHook) -> None:
        """Call ``hook(rubric, action, observation, score)`` after every ``forward``."""
        self._post_hooks.append(hook)

    def children(self) -> Iterator[Rubric]:
        yield from self._children.values()

    def named_children(self) -> Iterator[tuple[str, Rubric]]:
        yield from self._children.items()

    def named_rubrics(self, prefix: str = "") -> Iterator[tuple[str, Rubric]]:
        """Every rubric below this one, depth first, with dotted paths (``"a.b"``)."""
        for name, child in self._children.items():
            path = f"{prefix}.{name}" if prefix else name
            yield path, child
            yield from child.named_rubrics(path)

    def rubrics(self) -> Iterator[Rubric]:
        for _, rubric in self.named_rubrics():
            yield rubric

    def get_rubric(self, path: str) -> Rubric:
        """The rubric at dotted ``path`` (raises ``KeyError`` naming the path)."""
        node = self
        for part in path.split("."):
            child = dict(node.named_children()).get(part)
            if child is None:
                raise KeyError(f"no rubric at {path!r}")
            node = child
        return node

    def reset(self) -> None:
        """Forget per-episode state, here and in every child (``Environment._reset_rubric``)."""
        for child in self._children.values():
            child.reset()

    def state_dict(self) -> dict[str, Any]:
        """Configuration to save (override to add yours)."""
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what ``state_dict`` returned."""
        return None


# Containers describe how they combine children as a generator: it yields a child and
# receives that child's score. ``drive`` runs it synchronously until a child turns out to
# be async, then goes on awaiting, so sync trees never touch an event loop.
ScoreGen = Generator[Rubric, float, float]


def drive(gen: ScoreGen, action: Any, observation: Any) -> Any:
    try:
        child = next(gen)
        while True:
            score = child(action, observation)
            if inspect.isawaitable(score):
                return _drive_async(gen, score, action, observation)
            child = gen.send(score)
    except StopIteration as done:
        return done.value


async def _drive_async(
    gen: ScoreGen, pending: Awaitable[float], action: Any, observation: Any
) -> float:
    score = await pending
    try:
        while True:
            child = gen.send(score)
            result = child(action, observation)
            score = await result if inspect.isawaitable(result) else result
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]

"""Rubrics that combine other rubrics: ``Sequential``, ``Gate``, ``WeightedSum``, ``RubricList``, ``RubricDict``."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from .base import Rubric, ScoreGen, drive


def _in_event_loop() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


class _AwaitableInAsyncCode(Rubric):
    """A container that, called from a running event loop, always returns an awaitable.

    As in the reference: async code can ``await`` a ``Sequential`` or ``Gate`` whatever its
    children are, and its pre- and post-hooks may be ``async def``. Called from plain code
    (a sync ``step`` runs in a worker thread) it returns the score itself when every child
    is sync.
    """

    def __call__(self, action: Any, observation: Any) -> Any:
        if _in_event_loop():
            return self._call_async(action, observation)
        return super().__call__(action, observation)


class Sequential(_AwaitableInAsyncCode):
    """Runs its rubrics in order and stops at the first that scores 0 (then 0); else the last score."""

    def __init__(self, *rubrics: Rubric) -> None:
        super().__init__()
        for i, rubric in enumerate(rubrics):
            setattr(self, f"rubric_{i}", rubric)
        self._items = list(rubrics)

    def _combine(self) -> ScoreGen:
        result = 1.0
        for rubric in self._items:
            score = yield rubric
            if score == 0.0:
                return 0.0
            result = score
        return result

    def forward(self, action: Any, observation: Any) -> Any:
        return drive(self._combine(), action, observation)

    def __len__(self) -> int:
        return len(self._items)

    def __getitem__(self, index: int) -> Rubric:
        return self._items[index]


class Gate(_AwaitableInAsyncCode):
    """The wrapped rubric's score when it reaches ``threshold``, else 0."""

    def __init__(self, rubric: Rubric, threshold: float = 1.0) -> None:
        super().__init__()
        self.rubric = rubric
        self.threshold = threshold

    def _combine(self) -> ScoreGen:
        score = yield self.rubric
        return score if score >= self.threshold else 0.0

    def forward(self, action: Any, observation: Any) -> Any:
        return drive(self._combine(), action, observation)


class WeightedSum(Rubric):
    """Σ weight × score; the weights must sum to 1."""

    def __init__(self, rubrics: list[Rubric], weights: list[float]) -> None:
        super().__init__()
        if len(rubrics) != len(weights):
            raise ValueError(
                f"rubrics and weights must match in length: {len(rubrics)} rubrics but "
                f"{len(weights)} weights; give one weight each"
            )
        if abs(sum(weights) - 1.0) > 1e-6:
            raise ValueError(f"weights must sum to 1.0, they sum to {sum(weights)}")
        for i, rubric in enumerate(rubrics):
            setattr(self, f"rubric_{i}", rubric)
        self._items = list(rubrics)
        self._weights = list(weights)

    @property
    def weights(self) -> list[float]:
        return list(self._weights)

    def forward(self, action: Any, observation: Any) -> Any:
        scores = [rubric(action, observation) for rubric in self._items]
        if any(inspect.isawaitable(s) for s in scores):
            return self._gather(scores)  # async children run concurrently
        return sum(s * w for s, w in zip(scores, self._weights, strict=True))

    async def _gather(self, scores: list[Any]) -> float:
        async def value(score: Any) -> float:
            return await score if inspect.isawaitable(score) else score  # type: ignore[no-any-return]

        done = await asyncio.gather(*(value(s) for s in scores))
        return sum(s * w for s, w in zip(done, self._weights, strict=True))


class RubricList(Rubric):
    """A list of rubrics for a parent rubric to combine; it has no score of its own."""

    def __init__(self, rubrics: Iterable[Rubric] | None = None) -> None:
        super().__init__()
        self._items: list[Rubric] = []
        self.extend(rubrics or [])

    def forward(self, action: Any, observation: Any) -> float:
        raise NotImplementedError(
            "RubricList only holds rubrics; combine them in a parent rubric's forward "
            "(or use WeightedSum / Sequential)."
        )

    def append(self, rubric: Rubric) -> None:
        setattr(self, str(len(self._items)), rubric)
        self._items.append(rubric)

    def extend(self, rubrics: Iterable[Rubric]) -> None:
        for rubric in rubrics:
            self.append(rubric)

    def __len__(self) -> int:
        return len(self._items)

    def __getitem__(self, index: int) -> Rubric:
        return self._items[index]

    def __iter__(self) -> Iterator[Rubric]:
        return iter(self._items)


class RubricDict(Rubric):
    """Named rubrics for a parent rubric to combine; it has no score of its own."""

    def __init__(self, rubrics: Mapping[str, Rubric] | None = None) -> None:
        super().__init__()
        self._items: dict[str, Rubric] = {}
        self.update(rubrics or {})

    def forward(self, action: Any, observation: Any) -> float:
        raise NotImplementedError(
            "RubricDict only holds rubrics; combine them in a parent rubric's forward."
        )

    def __setitem__(self, key: str, rubric: Rubric) -> None:
        setattr(self, key, rubric)
        self._items[key] = rubric

    def __getitem__(self, key: str) -> Rubric:
        return self._items[key]

    def __contains__(self, key: object) -> bool:
        return key in self._items

    def __len__(self) -> int:
        return len(self._items)

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def keys(self) -> Iterable[str]:
        return self._items.keys()

    def values(self) -> Iterable[Rubric]:
        return self._items.values()

    def items(self) -> Iterable[tuple[str, Rubric]]:
        return self._items.items()

    def update(self, rubrics: Mapping[str, Rubric]) -> None:
        for key, rubric in rubrics.items():
            self[key] = rubric

"""reasoning-gym datasets served as environments: ``reasoning_gym:NAME[?key=value&...]``.

Any dataset of ``reasoning_gym`` by its registered name; the query options are the keyword
arguments of ``reasoning_gym.create_dataset`` (``seed`` is the dataset's seed, ``size`` its
size), converted to the types of the dataset's config (``3`` an int, ``true`` a bool,
``+,-`` or ``["+","-"]`` a list). One option is the adapter's own: ``attempts`` (default 1),
how many answers an episode takes before it ends.

An episode is one entry of the dataset. ``reset(task_index=i)`` starts entry ``i``;
``reset(seed=s)`` entry ``s % size``; a bare ``reset()`` the next entry of a cursor the whole
server shares (so sessions collecting in parallel get different entries). The observation
carries the entry's ``question``; the action is ``{"answer": "..."}``; the reward of each
answer is exactly the dataset's own ``score_answer(answer, entry)``, partial credit included.
With ``attempts=N`` an episode ends when an answer scores 1.0 or after ``N`` answers, and
each observation before the end carries ``feedback`` on the last answer (its score, never the
expected answer).

The Task API lists the entries (one split, ``train``): index, question and metadata.
"""

from __future__ import annotations

import typing
from collections.abc import Mapping
from importlib.metadata import version
from typing import Any
from uuid import uuid4

from pydantic import Field
from pydantic_core import to_jsonable_python

from ..environment import Environment
from ..errors import AdapterError
from ..models import Action, Observation, State
from .options import convert_option
from .target import AdaptedEnvironment
from .task_list import IndexedTaskApi, TaskCursor, check_split, episode_index

# Options the adapter reads itself; every other one goes to ``create_dataset``.
ATTEMPTS_OPTION = "attempts"
TASKS_ARE = "a reasoning-gym dataset"
# Entry metadata keys a trainer may want that give away no answer.
_SHARED_METADATA = ("source_dataset", "source_index", "difficulty")


class ReasoningGymAction(Action):
    """An answer to the current question."""

    answer: str = Field(description="The answer, scored by the dataset's score_answer.")


class ReasoningGymObservation(Observation):
    """The entry's question, and feedback on the last answer when attempts remain."""

    question: str = Field(default="", description="The entry's question, as the dataset wrote it.")
    task_index: int = Field(default=0, description="The entry's index in the dataset.")
    attempts_left: int = Field(default=0, description="Answers this episode still accepts.")
    feedback: str | None = Field(
        default=None, description="What the last answer scored (multi-attempt episodes)."
    )


class ReasoningGymState(State):
    """The episode's entry and how many answers it has taken."""

    dataset: str = ""
    task_index: int | None = None
    attempts: int = 1
    best_score: float = 0.0


class DatasetSource:
    """One dataset, built once per served target and shared by its sessions."""

    def __init__(self, name: str, dataset: Any, attempts: int) -> None:
        self.name = name
        self.dataset = dataset
        self.size = len(dataset)
        self.attempts = attempts
        self.cursor = TaskCursor()

    def entry(self, index: int) -> dict[str, Any]:
        if not 0 <= index < self.size:
            raise IndexError(
                f"task_index {index} is outside dataset {self.name!r} (0..{self.size - 1})"
            )
        entry: dict[str, Any] = self.dataset[index]
        return entry

    def listing(self, index: int) -> dict[str, Any]:
        entry = self.entry(index)
        return {"index": index, "question": entry["question"], "metadata": shared_metadata(entry)}


def shared_metadata(entry: Mapping[str, Any]) -> dict[str, Any]:
    """The part of an entry's metadata that helps a trainer and reveals no answer."""
    given = entry.get("metadata") or {}
    kept = {key: given[key] for key in _SHARED_METADATA if key in given}
    jsonable: dict[str, Any] = to_jsonable_python(kept, fallback=str)
    return jsonable


class ReasoningGymEnvironment(
    IndexedTaskApi, Environment[ReasoningGymAction, ReasoningGymObservation, ReasoningGymState]
):
    """One session over a shared :class:`DatasetSource`."""

    SUPPORTS_CONCURRENT_SESSIONS = True
    TASKS_ARE = TASKS_ARE

    def __init__(self, source: DatasetSource) -> None:
        super().__init__()
        self.source = source
        self._entry: dict[str, Any] | None = None
        self._state = ReasoningGymState(dataset=source.name, attempts=source.attempts)
        self._done = True

    def reset(
        self,
        seed: int | None = None,
        episode_id: str | None = None,
        task_index: int | str | None = None,
        split: str | None = None,
        **kwargs: Any,
    ) -> ReasoningGymObservation:
        check_split(split, TASKS_ARE)
        index = episode_index(self.source.size, self.source.cursor, task_index, seed)
        self._entry = self.source.entry(index)
        self._state = ReasoningGymState(
            episode_id=episode_id or str(uuid4()),
            dataset=self.source.name,
            task_index=index,
            attempts=self.source.attempts,
        )
        self._done = False
        return ReasoningGymObservation(
            question=str(self._entry["question"]),
            task_index=index,
            attempts_left=self.source.attempts,
            metadata=shared_metadata(self._entry),
        )

    def step(self, action: ReasoningGymAction, **kwargs: Any) -> ReasoningGymObservation:
        if self._entry is None or self._done:
            raise RuntimeError("The episode is over (or never started): call reset() first.")
        entry = self._entry
        score = float(self.source.dataset.score_answer(action.answer, entry))
        state = self._state
        state.step_count += 1
        state.best_score = max(state.best_score, score)
        left = state.attempts - state.step_count
        self._done = score >= 1.0 or left <= 0
        feedback = None
        if not self._done:
            feedback = (
                f"Your answer scored {score:g} out of 1. "
                f"{left} attempt{'s' if left != 1 else ''} left: try again."
            )
        return ReasoningGymObservation(
            question=str(entry["question"]),
            task_index=state.task_index or 0,
            attempts_left=max(left, 0) if not self._done else 0,
            feedback=feedback,
            reward=score,
            done=self._done,
            metadata=shared_metadata(entry),
        )

    @property
    def state(self) -> ReasoningGymState:
        return self._state

    @property
    def task_source(self) -> DatasetSource:
        return self.source


def dataset_kwargs(name: str, options: Mapping[str, str], config_cls: type) -> dict[str, Any]:
    """The ``create_dataset`` keyword arguments of ``options``, typed by ``config_cls``."""
    hints = typing.get_type_hints(config_cls)
    kwargs: dict[str, Any] = {}
    for key, value in options.items():
        if key == ATTEMPTS_OPTION:
            continue
        if key not in hints:
            known = ", ".join(sorted(hints)) or "none"
            raise AdapterError(
                f"Dataset {name!r} has no option {key!r}; its options are: {known} "
                f"(and {ATTEMPTS_OPTION})."
            )
        kwargs[key] = convert_option(key, value, hints[key])
    return kwargs


def attempts_option(options: Mapping[str, str]) -> int:
    raw = options.get(ATTEMPTS_OPTION, "1")
    try:
        attempts = int(raw)
    except ValueError:
        attempts = 0
    if attempts < 1:
        raise AdapterError(f"Option attempts={raw!r} must be a whole number ≥ 1, e.g. attempts=3.")
    return attempts


def load(name: str, options: Mapping[str, str]) -> AdaptedEnvironment:
    """The reasoning-gym dataset ``name`` built with ``options``, as an environment."""
    import reasoning_gym

    registered = reasoning_gym.factory.DATASETS
    if name not in registered:
        import difflib

        close = difflib.get_close_matches(name, list(registered), n=3)
        hint = f" Did you mean {', '.join(close)}?" if close else ""
        raise AdapterError(
            f"reasoning-gym has no dataset {name!r}.{hint} "
            "List them with: python -c 'import reasoning_gym; print(sorted(reasoning_gym.factory.DATASETS))'"
        )
    attempts = attempts_option(options)
    kwargs = dataset_kwargs(name, options, registered[name][1])
    try:
        dataset = reasoning_gym.create_dataset(name, **kwargs)
    except (AssertionError, ValueError, TypeError) as exc:
        raise AdapterError(f"reasoning-gym refused the options of {name!r}: {exc}") from None
    source = DatasetSource(name, dataset, attempts)
    return AdaptedEnvironment(
        factory=lambda: ReasoningGymEnvironment(source),
        action_cls=ReasoningGymAction,
        observation_cls=ReasoningGymObservation,
        state_cls=ReasoningGymState,
        name=f"reasoning_gym:{name}",
        description=f"reasoning-gym dataset {name} ({source.size} entries), scored by its score_answer",
        package="reasoning-gym",
        package_version=version("reasoning_gym"),
    )

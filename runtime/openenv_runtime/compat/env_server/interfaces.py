"""The reference's ``openenv.core.env_server.interfaces``: chat messages, tokenizers, task providers.

The module also exposes the models it imports; ported code imports them from here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from pydantic import BaseModel

# typing_extensions' TypedDict (a pydantic dependency): pydantic refuses typing.TypedDict in
# model fields before Python 3.12, and chat environments put Message lists in their models.
from typing_extensions import TypedDict

from ...environment import Environment
from ...models import Action, Observation, State
from ...transforms import Transform
from ...wire import EnvironmentMetadata


class Message(TypedDict):
    """One chat message, as Hugging Face chat templates take it."""

    role: str
    content: str


class ModelTokenizer(Protocol):
    """What chat environments need of a tokenizer (a ``transformers`` tokenizer fits)."""

    def apply_chat_template(
        self,
        conversation: list[Message],
        tokenize: bool = True,
        return_tensors: str | None = None,
        **kwargs: Any,
    ) -> Any: ...

    def decode(self, token_ids: Any, skip_special_tokens: bool = False, **kwargs: Any) -> str: ...


@runtime_checkable
class TaskProvider(Protocol):
    """Task discovery for dataset-backed environments, served as the Task API routes.

    Declare these methods on your Environment (no need to inherit this class); each may be
    plain or ``async def``. They must work on a freshly built instance and change nothing:
    the server calls them on a short-lived instance of their own. A method left out
    answers 501. To play a task, pass its split and index to ``reset()``.
    """

    def list_splits(self) -> list[Any]: ...

    def list_tasks(self, split: str) -> list[Any]: ...

    def num_tasks(self, split: str) -> int: ...

    def get_task(self, split: str, index: int) -> Any: ...

    def get_task_range(
        self, split: str, start: int | None = None, stop: int | None = None
    ) -> list[Any]: ...


@dataclass
class GetEndpointConfig:
    """A simple GET route (the reference registers its info routes from these)."""

    path: str
    handler: Any
    response_model: type[BaseModel] | type[dict[str, Any]]
    tag: str
    summary: str
    description: str


__all__ = [
    "Action",
    "Environment",
    "EnvironmentMetadata",
    "GetEndpointConfig",
    "Message",
    "ModelTokenizer",
    "Observation",
    "State",
    "TaskProvider",
    "Transform",
]

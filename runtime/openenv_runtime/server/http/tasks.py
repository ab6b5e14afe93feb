"""The Task API: task discovery routes for environments that implement ``TaskProvider``.

``GET /list_environments``, ``GET /{env_name}/splits``, ``POST /{env_name}/tasks``,
``/num_tasks``, ``/task`` and ``/task_range``, answered by the environment's own
``list_splits`` / ``list_tasks`` / ``num_tasks`` / ``get_task`` / ``get_task_range`` (plain
or async) on a short-lived instance. A method the environment lacks answers 501, an
index out of range 400, an unknown ``env_name`` 404. The short-lived instance holds a slot
and counts for its client like a session (no slot: 503, the client's cap: 429), and its
call runs within the step timeout (504 past it).
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, HTTPException, Request
from pydantic import BaseModel
from pydantic_core import to_jsonable_python

from openenv_runtime.server.guards.limits import client_identity
from openenv_runtime.server.running.adapter import Exhausted, StepTimeout
from openenv_runtime.server.sessions.registry import NoCapacity, SessionManager
from openenv_runtime.wire import (
    GetTaskRangeRequest,
    GetTaskRequest,
    ListTasksRequest,
    NumTasksRequest,
)

_SPLIT_TYPES = frozenset({"train", "validation", "test"})


def _jsonable(value: Any) -> Any:
    return to_jsonable_python(value, fallback=str)


def normalize_split(split: Any) -> dict[str, Any]:
    """A split descriptor as ``{"name": ..., "type": ...}`` (strings, dicts and models accepted)."""
    if isinstance(split, BaseModel):
        return split.model_dump(mode="json")
    if isinstance(split, dict):
        return dict(_jsonable(split))
    name = str(split)
    return {"name": name, "type": name if name in _SPLIT_TYPES else "validation"}


def build_task_router(
    manager: SessionManager, env_name: str, auth_required: bool = False
) -> APIRouter:
    router = APIRouter(tags=["Task API"])
    runner = manager.runner

    def check(name: str) -> None:
        if name.lower() != env_name.lower():
            raise HTTPException(404, f"unknown environment {name!r}; this server has {env_name!r}")

    async def call(request: Request, method: str, *args: Any) -> Any:
        client = client_identity(request.scope, auth_required)
        try:
            async with manager.borrow(client) as env:
                func = getattr(env, method, None)
                if not callable(func):
                    raise HTTPException(501, f"{method} is not implemented by this environment")
                try:
                    return await runner.bounded(env, func, *args)
                except NotImplementedError:
                    raise HTTPException(
                        501, f"{method} is not implemented by this environment"
                    ) from None
                except IndexError:
                    raise HTTPException(400, "Invalid task index") from None
        except NoCapacity as refused:
            raise HTTPException(refused.status, refused.message) from None
        except StepTimeout as exc:
            raise HTTPException(504, str(exc)) from None
        except Exhausted as exc:
            raise HTTPException(503, str(exc)) from None

    @router.get("/list_environments")
    async def list_environments() -> list[str]:
        return [env_name]

    @router.get("/{env_name}/splits")
    async def splits(env_name: str, http: Request) -> list[dict[str, Any]]:
        check(env_name)
        return [normalize_split(s) for s in await call(http, "list_splits")]

    @router.post("/{env_name}/tasks")
    async def tasks(env_name: str, request: ListTasksRequest, http: Request) -> dict[str, Any]:
        check(env_name)
        found = await call(http, "list_tasks", request.split)
        return {"tasks": _jsonable(found), "env_name": env_name_of_server}

    @router.post("/{env_name}/num_tasks")
    async def num_tasks(env_name: str, request: NumTasksRequest, http: Request) -> dict[str, Any]:
        check(env_name)
        return {"num_tasks": await call(http, "num_tasks", request.split)}

    @router.post("/{env_name}/task")
    async def task(env_name: str, request: GetTaskRequest, http: Request) -> dict[str, Any]:
        check(env_name)
        return {"task": _jsonable(await call(http, "get_task", request.split, request.index))}

    @router.post("/{env_name}/task_range")
    async def task_range(
        env_name: str, request: GetTaskRangeRequest, http: Request
    ) -> dict[str, Any]:
        check(env_name)
        found = await call(http, "get_task_range", request.split, request.start, request.stop)
        return {"tasks": _jsonable(found)}

    env_name_of_server = env_name
    return router

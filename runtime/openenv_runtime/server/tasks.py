"""The Task API: task discovery routes for environments that implement ``TaskProvider``.

``GET /list_environments``, ``GET /{env_name}/splits``, ``POST /{env_name}/tasks``,
``/num_tasks``, ``/task`` and ``/task_range``, answered by the environment's own
``list_splits`` / ``list_tasks`` / ``num_tasks`` / ``get_task`` / ``get_task_range`` (plain
or async) on a short-lived instance. A method the environment lacks answers 501, an
index out of range 400, an unknown ``env_name`` 404.
"""

from __future__ import annotations

import inspect
from typing import Any

from fastapi import APIRouter, HTTPException
from pydantic import BaseModel
from pydantic_core import to_jsonable_python

from ..wire import GetTaskRangeRequest, GetTaskRequest, ListTasksRequest, NumTasksRequest
from .adapter import EnvRunner

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


def build_task_router(runner: EnvRunner, env_name: str) -> APIRouter:
    router = APIRouter(tags=["Task API"])

    def check(name: str) -> None:
        if name.lower() != env_name.lower():
            raise HTTPException(404, f"unknown environment {name!r}; this server has {env_name!r}")

    async def call(method: str, *args: Any) -> Any:
        env = await runner.create()
        try:
            func = getattr(env, method, None)
            if not callable(func):
                raise HTTPException(501, f"{method} is not implemented by this environment")
            try:
                result = func(*args)
                return await result if inspect.isawaitable(result) else result
            except NotImplementedError:
                raise HTTPException(
                    501, f"{method} is not implemented by this environment"
                ) from None
            except IndexError:
                raise HTTPException(400, "Invalid task index") from None
        finally:
            await runner.close(env)

    @router.get("/list_environments")
    async def list_environments() -> list[str]:
        return [env_name]

    @router.get("/{env_name}/splits")
    async def splits(env_name: str) -> list[dict[str, Any]]:
        check(env_name)
        return [normalize_split(s) for s in await call("list_splits")]

    @router.post("/{env_name}/tasks")
    async def tasks(env_name: str, request: ListTasksRequest) -> dict[str, Any]:
        check(env_name)
        found = await call("list_tasks", request.split)
        return {"tasks": _jsonable(found), "env_name": env_name_of_server}

    @router.post("/{env_name}/num_tasks")
    async def num_tasks(env_name: str, request: NumTasksRequest) -> dict[str, Any]:
        check(env_name)
        return {"num_tasks": await call("num_tasks", request.split)}

    @router.post("/{env_name}/task")
    async def task(env_name: str, request: GetTaskRequest) -> dict[str, Any]:
        check(env_name)
        return {"task": _jsonable(await call("get_task", request.split, request.index))}

    @router.post("/{env_name}/task_range")
    async def task_range(env_name: str, request: GetTaskRangeRequest) -> dict[str, Any]:
        check(env_name)
        found = await call("get_task_range", request.split, request.start, request.stop)
        return {"tasks": _jsonable(found)}

    env_name_of_server = env_name
    return router

"""Validating step data into the environment's action class (MCP tool actions included)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from openenv_runtime.models import Action

MCP_ACTION_TYPES = ("list_tools", "call_tool")


def action_validator(action_cls: type[Action]) -> Callable[[Any], Any]:
    """Validate step data into ``action_cls``.

    MCP ``list_tools`` / ``call_tool`` data is recognised by its ``type`` when the server
    hosts tools, that is when ``action_cls`` is the base ``Action`` or an MCP action class
    (as in the reference); an environment with an action class of its own validates
    everything itself, so ``type: call_tool`` cannot slip past its validation.
    """
    validate = action_cls.__pydantic_validator__.validate_python
    from openenv_runtime.mcp.types import CallToolAction, ListToolsAction

    if action_cls not in (Action, CallToolAction, ListToolsAction):
        return validate

    def validate_with_tools(data: Any) -> Any:
        if type(data) is dict:
            kind = data.get("type")
            if kind == "list_tools":
                return ListToolsAction.model_validate(data)
            if kind == "call_tool":
                return CallToolAction.model_validate(data)
        return validate(data)

    return validate_with_tools

"""Tool listings and messages in each provider's format: MCP tools for OpenAI and Anthropic,
and OpenAI-style chat messages for Anthropic's API (used by the clients in ``llm.client``)."""

from __future__ import annotations

import json
from typing import Any


def clean_mcp_schema(schema: Any) -> dict[str, Any]:
    """An MCP input schema as a plain object schema providers accept (a new dict).

    ``allOf`` parts are merged; from ``oneOf`` / ``anyOf`` the first object alternative is
    taken; ``type`` defaults to ``object`` and ``properties`` / ``required`` are present.
    """
    if not isinstance(schema, dict):
        return {"type": "object", "properties": {}, "required": []}
    result = dict(schema)
    if isinstance(result.get("allOf"), list):
        properties: dict[str, Any] = dict(result.get("properties") or {})
        required: list[str] = list(result.get("required") or [])
        for part in result.pop("allOf"):
            if isinstance(part, dict):
                properties.update(part.get("properties") or {})
                required.extend(r for r in part.get("required") or [] if r not in required)
        result["properties"], result["required"] = properties, required
    for key in ("oneOf", "anyOf"):
        options = result.get(key)
        if isinstance(options, list):
            chosen = next(
                (
                    o
                    for o in options
                    if isinstance(o, dict) and (o.get("type") == "object" or "properties" in o)
                ),
                None,
            )
            if chosen is not None:
                result.pop(key)
                result.update({k: v for k, v in chosen.items() if k not in result or k == "type"})
    result.setdefault("type", "object")
    result["properties"] = dict(result.get("properties") or {})
    result["required"] = list(result.get("required") or [])
    return result


def _schema_of(tool: dict[str, Any]) -> dict[str, Any]:
    return clean_mcp_schema(tool.get("inputSchema", tool.get("input_schema")))


def mcp_tools_to_openai(tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """MCP tool listings (``name``, ``description``, ``inputSchema``) as OpenAI function tools."""
    return [
        {
            "type": "function",
            "function": {
                "name": t["name"],
                "description": t.get("description") or "",
                "parameters": _schema_of(t),
            },
        }
        for t in tools
    ]


def mcp_tools_to_anthropic(tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """MCP tool listings as Anthropic tools (``name``, ``description``, ``input_schema``)."""
    return [
        {
            "name": t["name"],
            "description": t.get("description") or "",
            "input_schema": _schema_of(t),
        }
        for t in tools
    ]


def openai_messages_to_anthropic(
    messages: list[dict[str, Any]],
) -> tuple[str, list[dict[str, Any]]]:
    """OpenAI chat messages as ``(system text, Anthropic messages)``.

    System messages are joined into the system text; an assistant's ``tool_calls`` become
    ``tool_use`` blocks, and ``tool`` messages become ``tool_result`` blocks of a user turn.
    """
    system: list[str] = []
    result: list[dict[str, Any]] = []
    for message in messages:
        role, content = message.get("role"), message.get("content")
        if role == "system":
            system.append(str(content or ""))
        elif role == "tool":
            block = {
                "type": "tool_result",
                "tool_use_id": message.get("tool_call_id"),
                "content": str(content or ""),
            }
            if result and result[-1]["role"] == "user" and isinstance(result[-1]["content"], list):
                result[-1]["content"].append(block)
            else:
                result.append({"role": "user", "content": [block]})
        elif role == "assistant" and message.get("tool_calls"):
            blocks: list[dict[str, Any]] = [{"type": "text", "text": content}] if content else []
            for call in message["tool_calls"]:
                function = call.get("function") or {}
                blocks.append(
                    {
                        "type": "tool_use",
                        "id": call.get("id"),
                        "name": function.get("name"),
                        "input": json.loads(function.get("arguments") or "{}"),
                    }
                )
            result.append({"role": "assistant", "content": blocks})
        else:
            result.append({"role": role, "content": content})
    return "\n\n".join(system), result


# The reference's names for the helpers.
_clean_mcp_schema = clean_mcp_schema
_mcp_tools_to_openai = mcp_tools_to_openai
_mcp_tools_to_anthropic = mcp_tools_to_anthropic
_openai_msgs_to_anthropic = openai_messages_to_anthropic

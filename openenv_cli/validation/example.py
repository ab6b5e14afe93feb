"""Build an example value from a JSON schema (for an action when the manifest gives none)."""

from __future__ import annotations

import math
from typing import Any

_MAX_DEPTH = 8


def resolve_ref(schema: Any, root: dict[str, Any]) -> dict[str, Any]:
    """``schema`` with a local ``$ref`` (``#/$defs/...``) replaced by its target; ``{}`` for a non-object."""
    if not isinstance(schema, dict):
        return {}
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/"):
        target: Any = root
        for part in ref[2:].split("/"):
            target = target.get(part, {}) if isinstance(target, dict) else {}
        return {**target, **{k: v for k, v in schema.items() if k != "$ref"}}
    return schema


def example_value(
    schema: dict[str, Any], root: dict[str, Any] | None = None, depth: int = 0
) -> Any:
    """A value that validates against ``schema``: its default, first example, first enum value,
    or a minimal value of its type (required object properties filled in recursively)."""
    root = root if root is not None else schema
    schema = resolve_ref(schema, root)
    if depth > _MAX_DEPTH:
        return None
    if "default" in schema:
        return schema["default"]
    if schema.get("examples"):
        return schema["examples"][0]
    if "const" in schema:
        return schema["const"]
    if schema.get("enum"):
        return schema["enum"][0]
    for key in ("anyOf", "oneOf", "allOf"):
        options = schema.get(key)
        if options:
            non_null = [o for o in options if resolve_ref(o, root).get("type") != "null"]
            return example_value((non_null or options)[0], root, depth + 1)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind == "string":
        text = "hello".ljust(int(schema.get("minLength", 0)), "x")
        return text[: int(schema["maxLength"])] if "maxLength" in schema else text
    if kind == "integer":
        if "minimum" in schema:
            return math.ceil(schema["minimum"])
        if "exclusiveMinimum" in schema:
            return math.floor(schema["exclusiveMinimum"]) + 1
        return 0
    if kind == "number":
        if "minimum" in schema:
            return float(schema["minimum"])
        if "exclusiveMinimum" in schema:
            return float(schema["exclusiveMinimum"]) + 1.0
        return 0.0
    if kind == "boolean":
        return False
    if kind == "null":
        return None
    if kind == "array":
        count = int(schema.get("minItems", 0))
        items = schema.get("items", {})
        return [example_value(items, root, depth + 1) for _ in range(count)]
    if kind == "object" or "properties" in schema:
        properties = schema.get("properties", {})
        return {
            name: example_value(properties[name], root, depth + 1)
            for name in schema.get("required", [])
            if name in properties
        }
    return None


def example_action(action_schema: dict[str, Any]) -> dict[str, Any]:
    """An action object with every required field filled in."""
    value = example_value({k: v for k, v in action_schema.items() if k != "default"})
    return value if isinstance(value, dict) else {}

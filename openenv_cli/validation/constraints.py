"""Which way a field's JSON Schema constraints moved: narrower (rejects values it accepted) or wider.

The contract check (:mod:`openenv_cli.validation.contract`) compares the *set of value kinds*
a field admits; this module compares the keywords pydantic emits to restrict values inside a
kind: ``maximum``/``exclusiveMaximum`` (``le``/``lt``), ``minimum``/``exclusiveMinimum``
(``ge``/``gt``), ``multipleOf``, ``maxLength``/``minLength``, ``pattern``, ``format``,
``maxItems``/``minItems``, ``uniqueItems``, ``maxProperties``/``minProperties``,
``additionalProperties``, ``propertyNames``, ``patternProperties``, and the same inside ``items``,
``prefixItems``, dictionary values and each branch of an ``anyOf``. Enum and ``const``
narrowing (``Literal``, ``Enum``) is seen by the value-kind comparison.

Each :class:`Shift` says whether the change narrows, widens, or both (a changed ``pattern``
cannot be compared, so it is taken as both). The caller decides what is breaking: narrowing
for what clients send, widening for what they read.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from openenv_cli.validation.example import resolve_ref

_MAX_DEPTH = 6


@dataclass(frozen=True)
class Shift:
    """One constraint that moved; ``where`` is a suffix of the field path (``[]`` for items)."""

    where: str
    description: str
    narrows: bool
    widens: bool


def _show(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def _bound(schema: dict[str, Any], upper: bool) -> tuple[float, int] | None:
    """The tighter of the inclusive and the exclusive bound on one side, as a sortable key.

    Upper bounds are ``(value, 0 if exclusive else 1)``, so a smaller key is tighter; lower
    bounds are ``(value, 1 if exclusive else 0)``, so a larger key is tighter.
    """
    keys = ("maximum", "exclusiveMaximum") if upper else ("minimum", "exclusiveMinimum")
    found: list[tuple[float, int]] = []
    for key, exclusive in zip(keys, (False, True), strict=True):
        value = schema.get(key)
        if isinstance(value, int | float) and not isinstance(value, bool):
            found.append((float(value), int(exclusive != upper)))
    if not found:
        return None
    return min(found) if upper else max(found)


def _bound_text(bound: tuple[float, int] | None, upper: bool) -> str:
    if bound is None:
        return "none"
    value = int(bound[0]) if bound[0].is_integer() else bound[0]
    exclusive = bound[1] == (0 if upper else 1)
    return f"{'<' if upper else '>'}{'' if exclusive else '='} {value}"


def _compare_bound(
    old: dict[str, Any], new: dict[str, Any], upper: bool
) -> tuple[str, bool, bool] | None:
    before, after = _bound(old, upper), _bound(new, upper)
    if before == after:
        return None
    if before is None or after is None:
        narrows = before is None
    else:
        narrows = after < before if upper else after > before
    side = "upper" if upper else "lower"
    text = f"{side} bound {_bound_text(before, upper)} → {_bound_text(after, upper)}"
    return text, narrows, not narrows


def _compare_limit(old: Any, new: Any, is_max: bool) -> tuple[bool, bool]:
    """(narrows, widens) for a maxLength-like (``is_max``) or minLength-like limit; None = no limit."""
    if old is None:
        return True, False
    if new is None:
        return False, True
    narrows = new < old if is_max else new > old
    return narrows, not narrows


_LIMITS = (
    ("maxLength", True, "max length"),
    ("minLength", False, "min length"),
    ("maxItems", True, "max items"),
    ("minItems", False, "min items"),
    ("maxProperties", True, "max properties"),
    ("minProperties", False, "min properties"),
)


def _keyword_shifts(old: dict[str, Any], new: dict[str, Any]) -> Iterator[tuple[str, bool, bool]]:
    """(description, narrows, widens) for each keyword that differs between two schemas."""
    for upper in (True, False):
        moved = _compare_bound(old, new, upper)
        if moved is not None:
            yield moved
    for key, is_max, label in _LIMITS:
        before, after = old.get(key), new.get(key)
        if before != after:
            narrows, widens = _compare_limit(before, after, is_max)
            yield f"{label} {_show(before)} → {_show(after)}", narrows, widens
    before, after = old.get("multipleOf"), new.get("multipleOf")
    if before != after:
        if before is None or after is None:
            narrows, widens = before is None, after is None
        else:  # multiples of 6 are all multiples of 3, not the other way round
            narrows = (after / before).is_integer()
            widens = (before / after).is_integer()
            narrows, widens = (narrows, widens) if narrows != widens else (True, True)
        yield f"multiple of {_show(before)} → {_show(after)}", narrows, widens
    for key in ("pattern", "format", "propertyNames", "patternProperties"):
        before, after = old.get(key), new.get(key)
        if before != after:
            if before is None:
                yield f"new {key} {_show(after)}", True, False
            elif after is None:
                yield f"{key} {_show(before)} removed", False, True
            else:  # containment of two patterns cannot be decided here: either way may break
                yield f"{key} {_show(before)} → {_show(after)}", True, True
    if bool(old.get("uniqueItems")) != bool(new.get("uniqueItems")):
        narrows = bool(new.get("uniqueItems"))
        yield (
            ("items must now be unique" if narrows else "items need no longer be unique"),
            (narrows),
            not narrows,
        )
    before_closed = old.get("additionalProperties") is False
    after_closed = new.get("additionalProperties") is False
    if before_closed != after_closed and ("properties" in old or "properties" in new):
        yield (
            ("unknown fields now rejected" if after_closed else "unknown fields now accepted"),
            after_closed,
            before_closed,
        )


def _branch_key(schema: dict[str, Any]) -> str:
    kind = schema.get("type")
    if isinstance(kind, list):
        return ",".join(sorted(map(str, kind)))
    if kind:
        return str(kind)
    return "object" if "properties" in schema else "?"


def _branches(schema: dict[str, Any], root: dict[str, Any]) -> dict[str, dict[str, Any]]:
    options = schema.get("anyOf") or schema.get("oneOf")
    if not isinstance(options, list):
        return {_branch_key(schema): schema}
    resolved = [resolve_ref(o, root) for o in options]
    keyed: dict[str, dict[str, Any]] = {}
    for option in resolved:
        keyed.setdefault(_branch_key(option), option)  # several of one type: compare the first
    return keyed


def constraint_shifts(
    old: Any,
    new: Any,
    old_root: dict[str, Any],
    new_root: dict[str, Any],
    depth: int = 0,
) -> list[Shift]:
    """The constraints that moved between the field schemas ``old`` and ``new``.

    Nested models' own fields are compared by the caller; this looks at the field itself,
    its ``anyOf`` branches of the same type, list items, tuple positions and dict values.
    """
    shifts: list[Shift] = []
    if depth > _MAX_DEPTH:
        return shifts
    old_s, new_s = resolve_ref(old, old_root), resolve_ref(new, new_root)
    old_branches, new_branches = _branches(old_s, old_root), _branches(new_s, new_root)
    for key, before in old_branches.items():
        after = new_branches.get(key)
        if after is None:
            continue  # a kind that went away is reported by the type comparison
        for text, narrows, widens in _keyword_shifts(before, after):
            shifts.append(Shift("", text, narrows, widens))
        shifts.extend(_inner(before, after, old_root, new_root, depth))
    return shifts


def _inner(
    old: dict[str, Any],
    new: dict[str, Any],
    old_root: dict[str, Any],
    new_root: dict[str, Any],
    depth: int,
) -> Iterator[Shift]:
    def nested(old_child: Any, new_child: Any, where: str) -> Iterator[Shift]:
        for shift in constraint_shifts(old_child, new_child, old_root, new_root, depth + 1):
            yield Shift(where + shift.where, shift.description, shift.narrows, shift.widens)

    children: list[tuple[Callable[[dict[str, Any]], Any], str]] = [
        (lambda s: s.get("items"), "[]"),
        (
            lambda s: (
                s.get("additionalProperties")
                if isinstance(s.get("additionalProperties"), dict)
                else None
            ),
            "{}",
        ),
    ]
    for pick, where in children:
        before, after = pick(old), pick(new)
        if isinstance(before, dict) and isinstance(after, dict):
            yield from nested(before, after, where)
    old_prefix, new_prefix = old.get("prefixItems"), new.get("prefixItems")
    if isinstance(old_prefix, list) and isinstance(new_prefix, list):
        for index, (before, after) in enumerate(zip(old_prefix, new_prefix, strict=False)):
            yield from nested(before, after, f"[{index}]")

"""The schema contract: ``openenv.lock.json`` records the action, observation and state schemas
a published environment serves, and drift from it is classified as breaking or additive.

Direction matters. Clients *send* actions, so an action may accept more (a new optional
field, a wider type, a looser constraint) but not less: a tighter ``le``/``lt``/``ge``/``gt``,
``max_length``/``min_length``, ``multiple_of``, pattern, format or a narrower ``Literal``
rejects what used to be valid. Clients *read* observations and state (the typed client
validates them with the models it was built with), so those may promise more (a narrower
type or constraint) but not less. A removed or renamed field, a changed type, or a newly
required field is breaking either way.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from openenv_cli.safe_files import UnsafePathError, write_inside
from openenv_cli.validation.constraints import constraint_shifts
from openenv_cli.validation.example import resolve_ref
from openenv_cli.validation.results import CheckResult, failed, passed, warned

LOCK_FILE = "openenv.lock.json"
LOCK_VERSION = 1
KINDS = ("action", "observation", "state")
_MAX_DEPTH = 6


@dataclass(frozen=True)
class Change:
    kind: str  # action / observation / state
    path: str  # dotted field path
    description: str
    breaking: bool

    def __str__(self) -> str:
        return f"{self.kind}.{self.path}: {self.description}"


def build_lock(schemas: dict[str, Any], name: str, version: str | None) -> dict[str, Any]:
    return {
        "lock_version": LOCK_VERSION,
        "name": name,
        "version": version,
        "schemas": {k: schemas[k] for k in KINDS},
    }


def write_lock(project_dir: Path, lock: dict[str, Any]) -> Path:
    """Write the lock file atomically, never through a link."""
    write_inside(project_dir, LOCK_FILE, json.dumps(lock, indent=2, sort_keys=True) + "\n")
    return project_dir / LOCK_FILE


class LockError(ValueError):
    pass


def read_lock(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise LockError(f"{LOCK_FILE} cannot be read: {exc}") from None
    schemas = data.get("schemas") if isinstance(data, dict) else None
    if not isinstance(schemas, dict) or not all(isinstance(schemas.get(k), dict) for k in KINDS):
        raise LockError(f"{LOCK_FILE} has no `schemas` with action, observation and state")
    lock: dict[str, Any] = data
    return lock


# -- normalising schemas into fields and type atoms -----------------------------------------


def _atoms(schema: Any, root: dict[str, Any], depth: int = 0) -> frozenset[str]:
    """The set of value kinds a schema admits: "string", "integer", "null", "const:..." ..."""
    schema = resolve_ref(schema, root)
    if depth > _MAX_DEPTH or not schema:
        return frozenset({"any"})
    if "const" in schema:
        return frozenset({f"const:{json.dumps(schema['const'], sort_keys=True)}"})
    if "enum" in schema:
        return frozenset(f"const:{json.dumps(v, sort_keys=True)}" for v in schema["enum"])
    for key in ("anyOf", "oneOf"):
        if key in schema:
            return frozenset().union(*(_atoms(s, root, depth + 1) for s in schema[key]))
    if "allOf" in schema and len(schema["allOf"]) == 1:
        return _atoms(schema["allOf"][0], root, depth + 1)
    kind = schema.get("type")
    kinds = kind if isinstance(kind, list) else [kind] if kind else []
    if not kinds:
        return frozenset({"object"} if "properties" in schema else {"any"})
    atoms = set()
    for k in kinds:
        if k == "array":
            items = schema.get("items")
            inner = ",".join(sorted(_atoms(items, root, depth + 1))) if items else "any"
            atoms.add(f"array<{inner}>")
        elif (
            k == "object"
            and "additionalProperties" in schema
            and isinstance(schema["additionalProperties"], dict)
        ):
            inner = ",".join(sorted(_atoms(schema["additionalProperties"], root, depth + 1)))
            atoms.add(f"map<{inner}>")
        elif k == "object" and isinstance(schema.get("patternProperties"), dict):
            # dict[constr(pattern=...), V]: a map of V whose keys are constrained (constraints.py)
            values = schema["patternProperties"].values()
            inner = ",".join(
                sorted(frozenset().union(*(_atoms(v, root, depth + 1) for v in values)))
            )
            atoms.add(f"map<{inner}>")
        else:
            atoms.add(str(k))
    return frozenset(atoms)


def _covers(wide: frozenset[str], narrow: frozenset[str]) -> bool:
    """True when every value ``narrow`` admits is admitted by ``wide``."""
    if "any" in wide:
        return True
    for atom in narrow:
        if atom in wide:
            continue
        if atom == "integer" and "number" in wide:
            continue
        if atom.startswith("const:"):
            value = json.loads(atom[6:])
            base = {
                str: "string",
                bool: "boolean",
                int: "integer",
                float: "number",
                type(None): "null",
            }.get(type(value))
            if base in wide or (base == "integer" and "number" in wide):
                continue
        return False
    return True


def _fields(schema: Any, root: dict[str, Any]) -> tuple[dict[str, Any], set[str]]:
    schema = resolve_ref(schema, root)
    if "allOf" in schema and len(schema["allOf"]) == 1:
        schema = resolve_ref(schema["allOf"][0], root)
    return dict(schema.get("properties") or {}), set(schema.get("required") or [])


def _nested(schema: Any, root: dict[str, Any]) -> dict[str, Any] | None:
    """The object schema inside a field (``Model`` or ``Model | None``), if it has properties."""
    schema = resolve_ref(schema, root)
    options = schema.get("anyOf") or schema.get("oneOf") or [schema]
    objects = [resolve_ref(o, root) for o in options if "properties" in resolve_ref(o, root)]
    return objects[0] if len(objects) == 1 else None


def _type_text(atoms: frozenset[str]) -> str:
    return " | ".join(sorted(a.replace("const:", "") for a in atoms))


def _compare(
    kind: str,
    path: str,
    old: Any,
    new: Any,
    old_root: dict[str, Any],
    new_root: dict[str, Any],
    depth: int,
    changes: list[Change],
) -> None:
    old_fields, old_required = _fields(old, old_root)
    new_fields, new_required = _fields(new, new_root)
    sends = kind == "action"
    if not path:  # the model itself (nested models are compared as fields of their parent)
        changes.extend(
            Change(kind, "(model)", s.description, s.narrows if sends else s.widens)
            for s in constraint_shifts(old, new, old_root, new_root)
        )
    removed = [f for f in old_fields if f not in new_fields]
    added = [f for f in new_fields if f not in old_fields]
    for name in removed:
        twin = [
            a
            for a in added
            if _atoms(new_fields[a], new_root) == _atoms(old_fields[name], old_root)
        ]
        hint = f" (renamed to `{twin[0]}`?)" if len(removed) == 1 and len(twin) == 1 else ""
        changes.append(Change(kind, path + name, f"field removed{hint}", True))
    for name in added:
        if name in new_required:
            changes.append(Change(kind, path + name, "new required field", True))
        else:
            changes.append(Change(kind, path + name, "new optional field", False))
    for name in old_fields:
        if name not in new_fields:
            continue
        before, after = _atoms(old_fields[name], old_root), _atoms(new_fields[name], new_root)
        if before != after:
            widened, narrowed = _covers(after, before), _covers(before, after)
            safe = widened if sends else narrowed
            text = f"type changed from {_type_text(before)} to {_type_text(after)}"
            if widened != narrowed and safe:
                text += " (accepts more)" if sends else " (promises more)"
            changes.append(Change(kind, path + name, text, not safe))
        for shift in constraint_shifts(old_fields[name], new_fields[name], old_root, new_root):
            breaking = shift.narrows if sends else shift.widens
            effect = "rejects values it accepted" if shift.narrows else "admits more values"
            if shift.narrows and shift.widens:
                effect = "changed, may reject values it accepted"
            changes.append(
                Change(
                    kind, f"{path}{name}{shift.where}", f"{shift.description} ({effect})", breaking
                )
            )
        if name in new_required and name not in old_required:
            changes.append(Change(kind, path + name, "field is now required", True))
        elif name in old_required and name not in new_required:
            changes.append(Change(kind, path + name, "field is now optional", False))
        if depth < _MAX_DEPTH:
            inner_old, inner_new = (
                _nested(old_fields[name], old_root),
                _nested(new_fields[name], new_root),
            )
            if inner_old is not None and inner_new is not None:
                _compare(
                    kind,
                    f"{path}{name}.",
                    inner_old,
                    inner_new,
                    old_root,
                    new_root,
                    depth + 1,
                    changes,
                )


def diff_schemas(old: dict[str, Any], new: dict[str, Any]) -> list[Change]:
    """Changes from the locked schemas ``old`` to the code's schemas ``new``."""
    changes: list[Change] = []
    for kind in KINDS:
        _compare(
            kind,
            "",
            old.get(kind, {}),
            new.get(kind, {}),
            old.get(kind, {}),
            new.get(kind, {}),
            0,
            changes,
        )
    return changes


# -- the check ------------------------------------------------------------------------------


def check_contract(
    project_dir: Path, schemas: dict[str, Any], name: str, version: str | None, update: bool = False
) -> CheckResult:
    """Compare ``schemas`` with the lock file (or, with ``update``, write it)."""
    path = project_dir / LOCK_FILE
    previous: dict[str, Any] | None = None
    if path.is_file():
        try:
            previous = read_lock(path)
        except LockError as exc:
            if not update:
                return failed(
                    "contract",
                    f"{exc}.",
                    f"Regenerate it: `openenv validate --update-lock`, then commit {LOCK_FILE}.",
                    file=LOCK_FILE,
                )
    if update:
        changes = diff_schemas(previous["schemas"], schemas) if previous else []
        try:
            write_lock(project_dir, build_lock(schemas, name, version))
        except UnsafePathError as exc:
            return failed("contract", exc.message, exc.hint or "", file=LOCK_FILE)
        except OSError as exc:
            return failed(
                "contract",
                f"Cannot write {LOCK_FILE}: {exc}.",
                "Make the project folder writable.",
                file=LOCK_FILE,
            )
        accepted = [str(c) for c in changes if c.breaking]
        note = (
            f" It accepts {len(accepted)} breaking change(s): {'; '.join(accepted)}."
            if accepted
            else ""
        )
        return passed(
            "contract",
            f"Wrote {LOCK_FILE} with the current action, observation and state schemas.{note}",
            fix=None,
            file=LOCK_FILE,
            details={"changes": [c.__dict__ for c in changes]},
        )
    if previous is None:
        return warned(
            "contract",
            f"No {LOCK_FILE}: nothing records the schemas your clients rely on.",
            f"Run `openenv validate --update-lock` and commit {LOCK_FILE}.",
            file=LOCK_FILE,
        )
    changes = diff_schemas(previous["schemas"], schemas)
    details = {"changes": [c.__dict__ for c in changes]}
    breaking = [c for c in changes if c.breaking]
    additive = [c for c in changes if not c.breaking]
    if breaking:
        listed = "; ".join(str(c) for c in breaking)
        also = f" (and {len(additive)} additive)" if additive else ""
        return failed(
            "contract",
            f"Breaking changes for existing clients since {LOCK_FILE}: {listed}{also}.",
            "Restore the fields in models.py (add new ones as optional instead), or, if the break is intended, "
            "bump the version and run `openenv validate --update-lock` to accept it.",
            file="models.py",
            details=details,
        )
    if additive:
        return warned(
            "contract",
            f"Additive schema changes since {LOCK_FILE}: {'; '.join(str(c) for c in additive)}.",
            f"Run `openenv validate --update-lock` and commit {LOCK_FILE} to record them.",
            file=LOCK_FILE,
            details=details,
        )
    if previous["schemas"] != schemas:
        return passed(
            "contract",
            f"Schemas match {LOCK_FILE} (descriptions or defaults changed; run --update-lock to record them).",
            file=LOCK_FILE,
        )
    return passed("contract", f"Schemas match {LOCK_FILE}.", file=LOCK_FILE)

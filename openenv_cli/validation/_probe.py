"""Run in a child process by ``openenv validate``: import a project and describe it as JSON.

    python -m openenv_cli.validation._probe REQUEST.json RESULT.json

Never raises: every failure is written into the result with the file and line it came from.
"""

from __future__ import annotations

import asyncio
import importlib
import importlib.abc
import importlib.machinery
import inspect
import json
import sys
import traceback
from pathlib import Path
from typing import Any

KINDS = ("action", "observation", "state")


_ALIAS: list[tuple[str, str]] = []  # (temporary symlink path, project path) to clean messages


def _clean(text: str) -> str:
    for alias, real in _ALIAS:
        text = text.replace(alias, real)
    return text


def _error(exc: BaseException, project_dir: Path) -> dict[str, Any]:
    frames = traceback.extract_tb(exc.__traceback__)
    where = None
    if isinstance(exc, SyntaxError) and exc.filename:
        try:
            where = {
                "file": Path(exc.filename).resolve().relative_to(project_dir).as_posix(),
                "line": exc.lineno,
            }
        except ValueError:
            pass
    for frame in reversed(frames if where is None else []):
        try:
            relative = Path(frame.filename).resolve().relative_to(project_dir)
        except ValueError:
            continue
        where = {"file": relative.as_posix(), "line": frame.lineno}
        break
    return {
        "type": type(exc).__name__,
        "message": _clean(str(exc).strip()) or type(exc).__name__,
        "missing_module": getattr(exc, "name", None)
        if isinstance(exc, ModuleNotFoundError)
        else None,
        "where": where,
        "traceback": _clean("".join(traceback.format_exception(type(exc), exc, exc.__traceback__)))[
            -6000:
        ],
    }


def _base_kind(cls: type) -> tuple[str | None, str | None]:
    """Which runtime base ``cls`` derives from, and from which package ("runtime"/"openenv-core")."""
    import openenv_runtime

    for kind, base in (
        ("action", openenv_runtime.Action),
        ("observation", openenv_runtime.Observation),
        ("state", openenv_runtime.State),
    ):
        if issubclass(cls, base) and cls is not base:
            return kind, "openenv_runtime"
    for klass in cls.__mro__[1:]:
        if klass.__module__.startswith("openenv.") and klass.__name__ in {
            "Action",
            "Observation",
            "State",
        }:
            return klass.__name__.lower(), "openenv-core"
    return None, None


def _describe_models(
    module: Any, expected: dict[str, str], chosen_out: dict[str, type]
) -> dict[str, Any]:
    from pydantic import BaseModel

    found: dict[str, list[type]] = {k: [] for k in KINDS}
    plain: dict[str, list[str]] = {k: [] for k in KINDS}
    for value in vars(module).values():
        if not (isinstance(value, type) and issubclass(value, BaseModel)):
            continue
        kind, _ = _base_kind(value)
        if kind is not None:
            found[kind].append(value)
        elif value.__module__ == module.__name__:
            for k in KINDS:
                if value.__name__.lower().endswith(k):
                    plain[k].append(value.__name__)
    out: dict[str, Any] = {}
    for kind in KINDS:
        local = [c for c in found[kind] if c.__module__ == module.__name__] or found[kind]
        chosen = next((c for c in local if c.__name__ == expected.get(kind)), None) or (
            local[-1] if local else None
        )
        entry: dict[str, Any] = {"candidates": [c.__name__ for c in local], "plain": plain[kind]}
        if chosen is not None:
            chosen_out[kind] = chosen
            entry.update(_describe_class(chosen))
        out[kind] = entry
    return out


def _describe_class(cls: type) -> dict[str, Any]:
    entry: dict[str, Any] = {"name": cls.__name__, "origin": _base_kind(cls)[1]}
    try:
        entry["schema"] = cls.model_json_schema()  # type: ignore[attr-defined]
    except Exception as exc:
        entry["schema_error"] = f"{type(exc).__name__}: {exc}"
    return entry


def _describe_served(served: dict[str, type], chosen_out: dict[str, type]) -> dict[str, Any]:
    """The classes an app was built with (projects without models.py, e.g. MCP tool servers)."""
    out: dict[str, Any] = {}
    for kind in KINDS:
        cls = served.get(kind)
        entry: dict[str, Any] = {"candidates": [], "plain": []}
        if isinstance(cls, type):
            chosen_out[kind] = cls
            entry.update(_describe_class(cls), candidates=[cls.__name__], origin="app")
        out[kind] = entry
    return out


def _served_schema(app: Any) -> dict[str, Any] | None:
    """Call the app's own /schema endpoint in-process (what clients will be served)."""
    for route in getattr(app, "routes", []) or []:
        if getattr(route, "path", None) == "/schema" and callable(getattr(route, "endpoint", None)):
            if inspect.signature(route.endpoint).parameters:
                return None
            result = route.endpoint()
            if inspect.iscoroutine(result):
                result = asyncio.run(result)
            return result if isinstance(result, dict) else None
    return None


class _WorkingTreeOnly(importlib.abc.MetaPathFinder):
    """The project's package comes from the working tree only, never from an installed copy.

    An editable install's finder sits after the path finder, so a module missing from the
    working tree (a deleted ``models.py``) would otherwise be imported from the installed copy.
    """

    def __init__(self, package: str) -> None:
        self.package = package

    def find_spec(
        self, fullname: str, path: Any, target: Any = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname != self.package and not fullname.startswith(f"{self.package}."):
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None:
            raise ModuleNotFoundError(f"No module named {fullname!r}", name=fullname)
        return spec


def probe(request: dict[str, Any]) -> dict[str, Any]:
    project_dir = Path(request["project_dir"]).resolve()
    if request.get("alias"):
        _ALIAS.append((request["alias"], str(project_dir)))
    if request.get("package"):
        sys.meta_path.insert(0, _WorkingTreeOnly(request["package"]))
    result: dict[str, Any] = {"python": sys.version.split()[0]}
    try:
        import openenv_runtime

        result["runtime_version"] = openenv_runtime.__version__
    except Exception as exc:
        result["runtime_error"] = _error(exc, project_dir)
        return result

    models_module = request["models_module"]
    classes: dict[str, type] = {}
    missing: dict[str, Any] = {}
    try:
        module = importlib.import_module(models_module)
        result["models"] = {
            "ok": True,
            "module": models_module,
            "file": getattr(module, "__file__", None),
        }
        result["classes"] = _describe_models(module, request.get("expected", {}), classes)
    except ModuleNotFoundError as exc:
        missing = {"ok": False, "module": models_module, "error": _error(exc, project_dir)}
        if exc.name != models_module:
            result["models"] = missing
        # else no models.py (tool-only environments): the app's own classes are checked below
    except BaseException as exc:
        result["models"] = {"ok": False, "module": models_module, "error": _error(exc, project_dir)}

    app_path = request["app"]
    module_name, _, attribute = app_path.partition(":")
    try:
        app_module = importlib.import_module(module_name)
        app: Any = app_module
        for part in attribute.split("."):
            app = getattr(app, part)
        entry = {
            "ok": True,
            "type": f"{type(app).__module__}.{type(app).__qualname__}",
            "callable": callable(app),
        }
        try:
            entry["schema"] = _served_schema(app)
        except Exception as exc:
            entry["schema_error"] = f"{type(exc).__name__}: {exc}"
        result["app"] = entry
        served = getattr(getattr(app, "state", None), "openenv_models", None)
        if "models" not in result and isinstance(served, dict):
            result["models"] = {"ok": True, "module": None, "source": "app"}
            result["classes"] = _describe_served(served, classes)
    except BaseException as exc:
        result["app"] = {"ok": False, "error": _error(exc, project_dir)}
    if "models" not in result:
        result["models"] = missing
    action = result.get("classes", {}).get("action", {})
    if action.get("name") and "action" in classes:
        result["example_action"] = _example_action(
            classes["action"], action, request.get("example_action")
        )
    return result


def _example_action(cls: Any, action: dict[str, Any], example: Any) -> dict[str, Any]:
    """Whether ``example`` (from openenv.yaml, else made up from the schema) is a valid action."""
    source = "manifest"
    if example is None and "schema" in action:
        from openenv_cli.validation.example import example_action

        example, source = example_action(action["schema"]), "schema"
    entry: dict[str, Any] = {"source": source, "value": example}
    try:
        cls.model_validate(example)
        entry["ok"] = True
    except Exception as exc:
        entry["ok"] = False
        errors = getattr(exc, "errors", None)
        entry["errors"] = (
            [f"{'.'.join(str(p) for p in e['loc']) or '(root)'}: {e['msg']}" for e in errors()]
            if callable(errors)
            else [str(exc)]
        )
    return entry


def main() -> None:
    request_path, result_path = sys.argv[1], sys.argv[2]
    request = json.loads(Path(request_path).read_text(encoding="utf-8"))
    result = probe(request)
    Path(result_path).write_text(json.dumps(result, default=str), encoding="utf-8")


if __name__ == "__main__":
    main()

"""Import the project in a child process and turn what the probe found into checks."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from openenv_cli.manifest_schema import Manifest
from openenv_cli.project_names import class_names
from openenv_cli.validation.isolation import import_layout
from openenv_cli.validation.results import CheckResult, failed, passed, skipped, warned

KINDS = ("action", "observation", "state")


@dataclass
class ProbeOutcome:
    """What the probe reported, plus the checks derived from it."""

    data: dict[str, Any]
    checks: list[CheckResult] = field(default_factory=list)

    @property
    def schemas(self) -> dict[str, Any] | None:
        """The schemas clients will see: the app's /schema, else the models' own."""
        served = (self.data.get("app") or {}).get("schema")
        if isinstance(served, dict) and all(isinstance(served.get(k), dict) for k in KINDS):
            return {k: served[k] for k in KINDS}
        classes = self.data.get("classes") or {}
        if all("schema" in classes.get(k, {}) for k in KINDS):
            return {k: classes[k]["schema"] for k in KINDS}
        return None

    @property
    def example_action(self) -> dict[str, Any] | None:
        entry = self.data.get("example_action") or {}
        return entry.get("value") if entry.get("ok") else None


def _short(message: str | None) -> str:
    lines = [
        line.strip()
        for line in (message or "").splitlines()
        if line.strip() and "errors.pydantic.dev" not in line
    ]
    return " ".join(lines[:3]) + (" ..." if len(lines) > 3 else "")


def _where(error: dict[str, Any], default: str) -> tuple[str, str]:
    where = error.get("where") or {}
    file = where.get("file") or default
    line = f", line {where['line']}" if where.get("line") else ""
    return file, f"{file}{line}"


def _import_fix(error: dict[str, Any], file: str, package: str) -> str:
    missing = error.get("missing_module")
    if missing:
        top = missing.split(".")[0]
        if top == package:
            return (
                f"The module {missing} is missing from the project: check the file exists and that "
                f"imports use the package name (`from {package}.models import ...`)."
            )
        return (
            f"Install it (`pip install {top}`) and list it under [project] dependencies in pyproject.toml; "
            "or run `pip install -e .` in the project."
        )
    if error.get("type") == "SyntaxError":
        return f"Fix the syntax error in {file}."
    return (
        f'Fix the error in {file} (run `python -c "import {package}.models"` to see the traceback).'
    )


def run_probe(project_dir: Path, manifest: Manifest, timeout: float) -> ProbeOutcome:
    """Import the models and the app of ``project_dir`` in a child process, bounded by ``timeout``."""
    with (
        import_layout(project_dir, manifest.name, manifest.app_module) as layout,
        tempfile.TemporaryDirectory(prefix="openenv-probe-") as tmp,
    ):
        names = class_names(manifest.name)
        request = {
            "project_dir": str(project_dir.resolve()),
            "models_module": f"{layout.package}.models",
            "package": layout.package,
            "app": manifest.app,
            "example_action": manifest.example_action,
            "alias": str(layout.root / layout.package),
            "expected": {
                "action": names.action,
                "observation": names.observation,
                "state": names.state,
            },
        }
        request_file, result_file = Path(tmp, "request.json"), Path(tmp, "result.json")
        request_file.write_text(json.dumps(request), encoding="utf-8")
        try:
            proc = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "openenv_cli.validation._probe",
                    str(request_file),
                    str(result_file),
                ],
                cwd=layout.root,
                env=layout.env,
                capture_output=True,
                text=True,
                timeout=timeout,
            )
        except subprocess.TimeoutExpired:
            outcome = ProbeOutcome({})
            outcome.checks.append(
                failed(
                    "models",
                    f"Importing the project took longer than {timeout:g}s (models.py and {manifest.app_module}).",
                    "Move slow work out of module level (load models or data lazily, e.g. in reset()), "
                    "or raise --timeout.",
                    file="models.py",
                )
            )
            return outcome
        if not result_file.is_file():
            tail = "\n".join((proc.stderr or proc.stdout or "").strip().splitlines()[-8:])
            outcome = ProbeOutcome({})
            outcome.checks.append(
                failed(
                    "models",
                    f"Importing the project killed the Python process (exit code {proc.returncode}): {tail or 'no output'}",
                    'Run `python -c "import '
                    + layout.package
                    + '.models"` in the project to see what happens.',
                    file="models.py",
                )
            )
            return outcome
        data = json.loads(result_file.read_text(encoding="utf-8"))
    outcome = ProbeOutcome(data)
    outcome.checks.extend(_checks(data, manifest, layout.package, project_dir))
    return outcome


def _checks(
    data: dict[str, Any], manifest: Manifest, package: str, project_dir: Path
) -> list[CheckResult]:
    checks: list[CheckResult] = []
    if "runtime_error" in data:
        return [
            failed(
                "models",
                f"openenv-runtime cannot be imported: {data['runtime_error']['message']}",
                "Install it in this environment: `pip install -e PATH/TO/openenv/runtime` from a "
                "checkout, or `pip install --find-links DIR openenv-runtime` with its wheel in DIR "
                "(it is not on PyPI yet).",
            )
        ]
    models = data.get("models") or {}
    if not models.get("ok"):
        error = models.get("error") or {}
        file, where = _where(error, "models.py")
        checks.append(
            failed(
                "models",
                f"Importing {models.get('module', 'models')} failed at {where}: "
                f"{error.get('type')}: {_short(error.get('message'))}",
                _import_fix(error, file, package),
                file=file,
                details={"traceback": error.get("traceback")},
            )
        )
    elif models.get("source") == "app":
        classes = data.get("classes") or {}
        names = ", ".join(classes[k]["name"] for k in KINDS if (classes.get(k) or {}).get("name"))
        checks.append(passed("models", f"No models.py: the app serves {names}."))
        checks.append(_schemas(classes))
        checks.append(_example(data.get("example_action"), manifest))
    else:
        checks.append(_model_classes(data.get("classes") or {}))
        checks.append(_schemas(data.get("classes") or {}))
        checks.append(_example(data.get("example_action"), manifest))
    app = data.get("app") or {}
    if app.get("ok"):
        if not app.get("callable"):
            checks.append(
                failed(
                    "app",
                    f"{manifest.app} is a {app.get('type')}, not an ASGI app.",
                    "Point `app:` in openenv.yaml at the object create_app() returns.",
                    file="openenv.yaml",
                )
            )
        else:
            checks.append(passed("app", f"{manifest.app} imports ({app.get('type')})."))
    else:
        error = app.get("error") or {}
        from openenv_cli.validation.static import app_file

        default = app_file(project_dir, manifest).relative_to(project_dir).as_posix()
        file, where = _where(error, default)
        if error.get("type") == "AttributeError" and not error.get("where"):
            fix = f"Define `{manifest.app_attribute}` in {default}, or correct `app:` in openenv.yaml."
            file = default
        else:
            fix = _import_fix(error, file, package)
        checks.append(
            failed(
                "app",
                f"Importing the app {manifest.app} failed at {where}: {error.get('type')}: "
                f"{_short(error.get('message'))}",
                fix,
                file=file,
                details={"traceback": error.get("traceback")},
            )
        )
    return checks


def _model_classes(classes: dict[str, Any]) -> CheckResult:
    problems, fixes, found = [], [], []
    for kind in KINDS:
        entry = classes.get(kind) or {}
        base = kind.capitalize()
        if entry.get("name"):
            found.append(f"{entry['name']}({base})")
            continue
        if kind == "state" and not entry.get("plain"):
            found.append("State (the runtime's)")
            continue
        plain = entry.get("plain") or []
        if plain:
            problems.append(f"{plain[0]} does not derive from openenv_runtime.{base}")
            fixes.append(
                f"Write `class {plain[0]}({base}):` with `from openenv_runtime import {base}`"
            )
        else:
            problems.append(f"no {base} subclass")
            fixes.append(
                f"Add `class My{base}({base}):` (from openenv_runtime import {base}) with its fields"
            )
    if problems:
        return failed(
            "models",
            "models.py: " + "; ".join(problems) + ".",
            " in models.py. ".join(fixes) + " in models.py.",
            file="models.py",
        )
    extra = [
        f"{k}: {', '.join(classes[k]['candidates'])}"
        for k in KINDS
        if len((classes.get(k) or {}).get("candidates", [])) > 1
    ]
    if extra:
        return warned(
            "models",
            f"models.py defines several subclasses ({'; '.join(extra)}); checked {', '.join(found)}.",
            "Keep one Action, Observation and State subclass in models.py, or name them after the project.",
            file="models.py",
        )
    core = [k for k in KINDS if (classes.get(k) or {}).get("origin") == "openenv-core"]
    note = " (openenv-core base classes)" if core else ""
    return passed("models", f"models.py defines {', '.join(found)}{note}.", file="models.py")


def _schemas(classes: dict[str, Any]) -> CheckResult:
    broken = [
        f"{classes[k]['name']}: {_short(classes[k]['schema_error'])}"
        for k in KINDS
        if "schema_error" in (classes.get(k) or {})
    ]
    if broken:
        return failed(
            "schemas",
            "JSON schema generation failed: " + "; ".join(broken) + ".",
            "Use JSON-compatible field types in models.py (str, int, float, bool, list, dict, nested models); "
            "arbitrary Python objects have no schema.",
            file="models.py",
        )
    return passed("schemas", "Action, Observation and State give JSON schemas.")


def _example(entry: dict[str, Any] | None, manifest: Manifest) -> CheckResult:
    if entry is None:
        return skipped("example_action", "No Action class to validate an example against.")
    value = json.dumps(entry.get("value"))
    if entry.get("ok"):
        where = (
            "openenv.yaml example_action"
            if entry["source"] == "manifest"
            else "built from the action schema"
        )
        return passed("example_action", f"Example action {value} ({where}) validates.")
    errors = "; ".join(entry.get("errors") or [])
    if entry["source"] == "manifest":
        return failed(
            "example_action",
            f"openenv.yaml example_action {value} does not validate: {errors}.",
            "Make `example_action:` in openenv.yaml match the fields of the action class (models.py).",
            file="openenv.yaml",
        )
    return failed(
        "example_action",
        f"No valid example action could be built from the schema ({errors}).",
        "Add `example_action:` to openenv.yaml with a valid action.",
        file="openenv.yaml",
    )

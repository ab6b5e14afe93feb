"""Checks that read the project's files without running any of its code."""

from __future__ import annotations

import re
import shlex
import tomllib
from pathlib import Path
from typing import Any

from openenv_cli import __version__
from openenv_cli.manifest import ManifestReport
from openenv_cli.manifest_schema import MANIFEST_FILE, Manifest
from openenv_cli.validation.results import CheckResult, failed, passed, skipped, warned

RUNTIME_DISTRIBUTIONS = {
    "openenv-runtime": "openenv-runtime",
    "openenv-core": "openenv-core (the reference)",
}


def check_manifest(report: ManifestReport) -> list[CheckResult]:
    """``openenv.yaml`` against its schema: errors fail, unknown keys warn."""
    if report.errors:
        return [
            failed("manifest", issue.message, issue.fix, file=MANIFEST_FILE)
            for issue in report.errors
        ]
    results = [warned("manifest", w.message, w.fix, file=MANIFEST_FILE) for w in report.warnings]
    assert report.manifest is not None
    results.insert(
        0,
        passed(
            "manifest",
            f"{MANIFEST_FILE} is valid (name {report.manifest.name}, app {report.manifest.app}).",
            file=MANIFEST_FILE,
        ),
    )
    if not report.manifest.name.isidentifier():
        results.append(
            warned(
                "manifest",
                f"name {report.manifest.name!r} is not a Python identifier, so it cannot be the package name.",
                f"Use lowercase letters, digits and underscores in `name:` of {MANIFEST_FILE}.",
                file=MANIFEST_FILE,
            )
        )
    return results


def app_file(project_dir: Path, manifest: Manifest) -> Path:
    """The file that should define the app: ``my_env.server.app`` → ``server/app.py``."""
    parts = manifest.app_module.split(".")
    if parts[0] == manifest.name or not (project_dir / parts[0]).exists():
        parts = parts[1:]  # the package is the project folder itself
    return (
        project_dir.joinpath(*parts[:-1], parts[-1] + ".py")
        if parts
        else project_dir / "__init__.py"
    )


def check_files(project_dir: Path, manifest: Manifest) -> list[CheckResult]:
    """The files serve, build, push and validate rely on."""
    required = {
        app_file(project_dir, manifest)
        .relative_to(project_dir)
        .as_posix(): f"the app `{manifest.app}`",
    }
    recommended = {
        "models.py": "the Action, Observation and State models (else the app's are checked)",
        "__init__.py": "makes the project folder the package (pip install builds it)",
        "server/__init__.py": "makes server/ a subpackage",
        "client.py": "the typed client users import",
        "README.md": "shown at /metadata, /web and on the Hugging Face Space",
    }
    results: list[CheckResult] = []
    missing = [
        f"{path} ({why})" for path, why in required.items() if not (project_dir / path).is_file()
    ]
    if missing:
        results.append(
            failed(
                "files",
                "Missing " + "; ".join(missing) + ".",
                "Restore the files (compare with a fresh `openenv init` project), or correct `app:` in openenv.yaml.",
                file=missing[0].split(" ")[0],
            )
        )
    absent = [
        f"{path} ({why})" for path, why in recommended.items() if not (project_dir / path).is_file()
    ]
    if absent:
        results.append(
            warned(
                "files",
                "Missing " + "; ".join(absent) + ".",
                "Add them (a fresh `openenv init` project has them).",
                file=absent[0].split(" ")[0],
            )
        )
    if not results:
        results.append(
            passed(
                "files",
                "models.py, the app module, __init__.py, client.py and README.md are present.",
            )
        )
    return results


def _requirement_name(requirement: str) -> str:
    match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", requirement)
    return re.sub(r"[-_.]+", "-", match.group(1)).lower() if match else ""


def read_pyproject(project_dir: Path) -> tuple[dict[str, Any] | None, CheckResult | None]:
    path = project_dir / "pyproject.toml"
    if not path.is_file():
        return None, failed(
            "pyproject",
            "pyproject.toml is missing, so the project cannot be installed (pip install . in the image).",
            "Add a pyproject.toml (see a fresh `openenv init` project) that depends on openenv-runtime.",
            file="pyproject.toml",
        )
    try:
        return tomllib.loads(path.read_text(encoding="utf-8")), None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        return None, failed(
            "pyproject",
            f"pyproject.toml does not parse: {exc}.",
            "Fix the TOML syntax at the position shown.",
            file="pyproject.toml",
        )


def check_pyproject(project_dir: Path, manifest: Manifest | None) -> list[CheckResult]:
    """pyproject.toml parses, has a [project] table, and depends on the runtime."""
    data, problem = read_pyproject(project_dir)
    if problem is not None:
        return [problem]
    assert data is not None
    project = data.get("project")
    if not isinstance(project, dict):
        return [
            failed(
                "pyproject",
                "pyproject.toml has no [project] table.",
                f'Add [project] with name, version and dependencies = ["openenv-runtime>={__version__}"].',
                file="pyproject.toml",
            )
        ]
    dependencies = project.get("dependencies") or []
    names = {_requirement_name(d) for d in dependencies if isinstance(d, str)}
    found = [label for dist, label in RUNTIME_DISTRIBUTIONS.items() if dist in names]
    if not found:
        return [
            failed(
                "pyproject",
                "pyproject.toml does not depend on openenv-runtime, so the image and `pip install` miss it.",
                f'Add "openenv-runtime>={__version__}" to [project] dependencies in pyproject.toml.',
                file="pyproject.toml",
            )
        ]
    results = [
        passed(
            "pyproject", f"pyproject.toml parses and depends on {found[0]}.", file="pyproject.toml"
        )
    ]
    if "openenv-toolkit" in names:
        results.append(
            warned(
                "pyproject",
                "pyproject.toml depends on openenv-toolkit (the CLI); the server does not need it.",
                "Remove openenv-toolkit from [project] dependencies (install the CLI separately).",
                file="pyproject.toml",
            )
        )
    version = project.get("version")
    if (
        manifest is not None
        and manifest.version
        and isinstance(version, str)
        and version != manifest.version
    ):
        results.append(
            warned(
                "pyproject",
                f"Versions differ: openenv.yaml says {manifest.version}, pyproject.toml {version}.",
                "Set the same version in both files.",
                file="pyproject.toml",
            )
        )
    return results


def _instructions(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs, with continuation lines joined and comments dropped."""
    logical: list[str] = []
    current = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not current and (not line or line.startswith("#")):
            continue
        if current and line.startswith("#"):
            continue
        if line.endswith("\\"):
            current += line[:-1] + " "
            continue
        logical.append(current + line)
        current = ""
    if current:
        logical.append(current)
    pairs = []
    for line in logical:
        word, _, rest = line.partition(" ")
        pairs.append((word.upper(), rest.strip()))
    return pairs


def _command_words(arguments: str) -> list[str]:
    if arguments.startswith("["):
        try:
            import json

            words = json.loads(arguments)
            return [str(w) for w in words] if isinstance(words, list) else [arguments]
        except ValueError:
            pass
    try:
        return shlex.split(arguments)
    except ValueError:
        return arguments.split()


def check_dockerfile(project_dir: Path, manifest: Manifest) -> list[CheckResult]:
    """The Dockerfile exists, has a FROM, and its command serves the manifest's app."""
    relative = manifest.build.dockerfile
    path = project_dir / relative
    if not path.is_file():
        return [
            failed(
                "dockerfile",
                f"{relative} is missing, so `openenv build` and `openenv push` cannot build an image.",
                f"Restore {relative} (a fresh `openenv init` project has one), or point `build.dockerfile` in openenv.yaml at yours.",
                file=relative,
            )
        ]
    try:
        instructions = _instructions(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        return [
            failed(
                "dockerfile",
                f"{relative} cannot be read: {exc}.",
                f"Make {relative} a readable text file.",
                file=relative,
            )
        ]
    if not any(word == "FROM" for word, _ in instructions):
        return [
            failed(
                "dockerfile",
                f"{relative} has no FROM instruction.",
                f"Start {relative} with `FROM python:3.11-slim`.",
                file=relative,
            )
        ]
    commands = [args for word, args in instructions if word in {"CMD", "ENTRYPOINT"}]
    if not commands:
        return [
            failed(
                "dockerfile",
                f"{relative} has no CMD, so the container would not start the server.",
                f'Add `CMD ["python", "-m", "openenv_runtime.serve", "{manifest.app}"]` to {relative}.',
                file=relative,
            )
        ]
    words = " ".join(" ".join(_command_words(c)) for c in commands)
    served = manifest.app in words or (
        manifest.app_module in words and manifest.app_attribute in words
    )
    if not served:
        last = commands[-1]
        return [
            failed(
                "dockerfile",
                f"{relative} runs `{last}`, which does not serve {manifest.app} (the app in openenv.yaml).",
                f'Use `CMD ["python", "-m", "openenv_runtime.serve", "{manifest.app}"]`, or correct `app:` in openenv.yaml.',
                file=relative,
            )
        ]
    results = [passed("dockerfile", f"{relative} serves {manifest.app}.", file=relative)]
    exposed = [
        p.split("/")[0] for word, args in instructions if word == "EXPOSE" for p in args.split()
    ]
    if exposed and str(manifest.port) not in exposed and not any("$" in p for p in exposed):
        results.append(
            warned(
                "dockerfile",
                f"{relative} exposes {', '.join(exposed)} but openenv.yaml's port is {manifest.port}.",
                f"Use `EXPOSE {manifest.port}` (and app_port: {manifest.port} in README.md's front matter).",
                file=relative,
            )
        )
    return results


def skipped_all(names: list[str], reason: str) -> list[CheckResult]:
    return [skipped(name, reason) for name in names]

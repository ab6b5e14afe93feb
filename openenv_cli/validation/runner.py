"""Run the checks in order, skipping what cannot run once something it needs has failed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from openenv_cli.console import debug_enabled
from openenv_cli.manifest import inspect_manifest
from openenv_cli.manifest_schema import MANIFEST_FILE
from openenv_cli.validation import contract, static, wire
from openenv_cli.validation.example import example_action
from openenv_cli.validation.introspect import run_probe
from openenv_cli.validation.results import Report, Status, failed, passed, skipped
from openenv_cli.validation.smoke import run_smoke

DEFAULT_TIMEOUT = 60.0


def validate_project(
    project_dir: Path,
    *,
    smoke: bool = True,
    timeout: float = DEFAULT_TIMEOUT,
    update_lock: bool = False,
) -> Report:
    """Static checks, the import probe, the contract and (unless ``smoke`` is False) the smoke test."""
    report = Report(target=str(project_dir))
    try:
        _project_checks(report, project_dir, smoke, timeout, update_lock)
    except Exception as exc:  # validate must report, never crash
        if debug_enabled():
            raise
        report.add(
            failed(
                "internal",
                f"validate stopped on an unexpected {type(exc).__name__}: {exc}",
                "Run again with --debug for the traceback, and report it.",
            )
        )
    return report


def _project_checks(
    report: Report, project_dir: Path, smoke: bool, timeout: float, update_lock: bool
) -> None:
    manifest_report = inspect_manifest(project_dir)
    report.add(*static.check_manifest(manifest_report))
    manifest = manifest_report.manifest
    report.add(*static.check_pyproject(project_dir, manifest))
    later = ["files", "dockerfile", "models", "app", "contract", "smoke"]
    if manifest is None:
        report.add(*static.skipped_all(later, f"Needs a valid {MANIFEST_FILE}."))
        return
    report.add(*static.check_files(project_dir, manifest))
    report.add(*static.check_dockerfile(project_dir, manifest))

    probe = run_probe(project_dir, manifest, timeout)
    report.add(*probe.checks)
    schemas = probe.schemas
    if schemas is None:
        reason = "Needs the models to import and give JSON schemas."
        report.add(
            failed(
                "contract",
                f"Cannot update {contract.LOCK_FILE}: the models do not import.",
                "Fix the models first.",
            )
            if update_lock
            else skipped("contract", reason)
        )
    else:
        report.add(
            contract.check_contract(
                project_dir, schemas, manifest.name, manifest.version, update=update_lock
            )
        )

    if not smoke:
        report.add(skipped("smoke", "Smoke test off (--no-smoke)."))
        return
    app_check = report.get("app")
    if app_check is None or app_check.status is Status.FAIL:
        report.add(skipped("smoke", "Needs the app to import."))
        return
    action = probe.example_action
    if action is None:
        report.add(skipped("smoke", "Needs a valid example action."))
        return
    served = probe.data.get("classes") or {}
    expected = {k: served[k]["schema"] for k in contract.KINDS if "schema" in served.get(k, {})}
    report.add(
        *run_smoke(project_dir, manifest, action, timeout, expected if len(expected) == 3 else None)
    )


def validate_family(target: str, *, timeout: float = DEFAULT_TIMEOUT, steps: int = 3) -> Report:
    """Check a family target (``gymnasium:CartPole-v1``): its server starts in local processes,
    then the checks of :func:`validate_url` (/health, /schema, /metadata, an episode); the
    server is stopped at the end."""
    from openenv_cli.errors import OpenEnvError
    from openenv_cli.targets import parse_target, start_target
    from openenv_runtime.adapters.target import load_family
    from openenv_runtime.errors import AdapterError

    parsed = parse_target(target)
    report = Report(target=str(parsed))
    assert parsed.family is not None
    try:  # here first: a wrong name or option is one line, not a server's traceback
        adapted = load_family(parsed.family)
    except AdapterError as exc:
        report.add(failed("family", str(exc), "Fix the target, or install the extra named."))
        return report
    try:
        provider, urls = start_target(parsed, startup_timeout=timeout)
    except OpenEnvError as exc:
        report.add(failed("family", f"{parsed} did not start: {exc}", exc.hint))
        return report
    try:
        report.add(
            passed(
                "family",
                f"{parsed}: {adapted.package} {adapted.package_version}, served in local processes.",
            )
        )
        report.add(*validate_url(urls[0], timeout=timeout, steps=steps).checks)
    finally:
        provider.stop()
    return report


def validate_url(
    url: str,
    *,
    project_dir: Path | None = None,
    timeout: float = DEFAULT_TIMEOUT,
    token: str | None = None,
    steps: int = 3,
) -> Report:
    """Check a running server: /health, /schema, /metadata and a WebSocket episode with latencies."""
    report = Report(target=url)
    try:
        health = wire.check_health("remote", url, timeout, token)
        report.add(health)
        if health.details.get("unreachable"):
            report.add(
                *static.skipped_all(
                    ["remote.schema", "remote.metadata", "remote.episode"],
                    "The server is unreachable.",
                )
            )
            return report
        schema_check, served = wire.check_schema("remote", url, timeout, token)
        report.add(schema_check, wire.check_metadata("remote", url, timeout, token))
        action: dict[str, Any] | None = None
        manifest = inspect_manifest(project_dir).manifest if project_dir is not None else None
        if manifest is not None and manifest.example_action is not None:
            action = manifest.example_action
        elif served is not None:
            action = example_action(served["action"])
        if action is None:
            report.add(
                skipped(
                    "remote.episode",
                    "Needs /schema (or example_action in openenv.yaml) for an action.",
                )
            )
        else:
            report.add(wire.run_episode("remote", url, action, timeout, token, steps=steps))
        if (
            project_dir is not None
            and served is not None
            and (project_dir / contract.LOCK_FILE).is_file()
        ):
            report.add(
                contract.check_contract(
                    project_dir, served, manifest.name if manifest else "", None
                )
            )
    except Exception as exc:
        if debug_enabled():
            raise
        report.add(
            failed(
                "internal",
                f"validate stopped on an unexpected {type(exc).__name__}: {exc}",
                "Run again with --debug for the traceback, and report it.",
            )
        )
    return report

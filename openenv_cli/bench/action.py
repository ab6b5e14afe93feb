"""Which action ``openenv bench`` steps with: the measured environment's own.

In order: ``--action JSON`` or ``--action-file PATH``; with ``--serve``, the built-in
benchmark action (``{"wait": ...}``); else the ``example_action`` of the project's
``openenv.yaml`` (when run inside a project); else an example built from the server's
``/schema`` (defaults, examples, then minimal values; the builder ``openenv validate``
uses). Each run's ``--wait-grid`` value goes into the action as ``wait`` only when the
environment's action has a ``wait`` field and the chosen action does not set one.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from openenv_cli.errors import OpenEnvError, UsageError

MAX_ACTION_FILE_BYTES = 1 << 20
BUILT_IN = "the built-in benchmark action"


@dataclass(frozen=True, slots=True)
class StepAction:
    """The action every step sends, where it came from, and whether the wait grid applies."""

    value: dict[str, Any]
    source: str
    wait_field: bool


def parse_action(text: str, where: str) -> dict[str, Any]:
    """A JSON object from ``--action`` or a file; :class:`UsageError` for anything else."""
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise UsageError(
            f"{where} is not valid JSON: {exc}",
            hint='For example: --action \'{"message": "hello"}\'',
        ) from None
    if not isinstance(value, dict):
        raise UsageError(
            f"{where} must be a JSON object (the action's fields), got {type(value).__name__}",
            hint='For example: --action \'{"message": "hello"}\'',
        )
    return value


def read_action_file(path: Path) -> dict[str, Any]:
    """The JSON object in ``path`` (at most 1 MiB)."""
    try:
        if path.stat().st_size > MAX_ACTION_FILE_BYTES:
            raise UsageError(f"--action-file {path} is larger than 1 MiB.")
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"Cannot read --action-file {path}: {exc}") from None
    return parse_action(text, f"--action-file {path}")


def project_example(project_dir: Path) -> dict[str, Any] | None:
    """``example_action`` of ``project_dir/openenv.yaml``, if there is a valid one."""
    if not (project_dir / "openenv.yaml").is_file():
        return None
    from openenv_cli.manifest import inspect_manifest

    manifest = inspect_manifest(project_dir).manifest
    return manifest.example_action if manifest is not None else None


def served_action_schema(
    base_url: str, timeout: float, token: str | None = None, token_source: str | None = None
) -> dict[str, Any]:
    """The action's JSON schema from ``GET /schema`` (sent with ``token``, if any).

    :class:`.auth.Unauthorized` when the server refuses the token (or its absence), else
    :class:`OpenEnvError` when the schema is unreadable.
    """
    from openenv_runtime.errors import EnvError
    from openenv_runtime.http_reads import read_answer

    from .auth import AUTH_STATUSES, Unauthorized

    try:
        status, body = read_answer(base_url, "/schema", token=token, timeout=timeout)
    except EnvError as exc:
        raise _unreadable(base_url, exc.message) from None
    if status in AUTH_STATUSES:
        raise Unauthorized(base_url, f"HTTP {status} on /schema", token_source)
    if status != 200:
        raise _unreadable(base_url, f"HTTP {status}")
    try:
        schema = json.loads(body)
    except ValueError:
        raise _unreadable(base_url, "the answer is not JSON") from None
    action = schema.get("action") if isinstance(schema, dict) else None
    if not isinstance(action, dict):
        raise OpenEnvError(
            f"{base_url}/schema has no action schema.",
            hint="Give the action with --action JSON or --action-file PATH.",
        )
    return action


def _unreadable(base_url: str, why: str) -> OpenEnvError:
    return OpenEnvError(
        f"Could not read {base_url}/schema to build an action to step with: {why}",
        hint="Check that --url points at a running OpenEnv server, "
        "or give the action yourself with --action JSON or --action-file PATH.",
    )


def _has_wait(schema: dict[str, Any] | None) -> bool:
    properties = schema.get("properties") if schema else None
    return isinstance(properties, dict) and "wait" in properties


def resolve_action(
    *,
    action: str | None,
    action_file: Path | None,
    serve: bool,
    base_url: str,
    project_dir: Path | None,
    timeout: float = 10.0,
    token: str | None = None,
    token_source: str | None = None,
) -> StepAction:
    """Choose the action (see the module's docstring); reads ``/schema`` only with ``--url``.

    ``token`` goes with that read; a refused one (or none where one is needed) raises
    :class:`.auth.Unauthorized` here, before any run, also when the action is given.
    """
    from .auth import Unauthorized

    if action is not None and action_file is not None:
        raise UsageError("Give either --action or --action-file, not both.")
    explicit: dict[str, Any] | None = None
    source = ""
    if action is not None:
        explicit, source = parse_action(action, "--action"), "--action"
    elif action_file is not None:
        explicit, source = read_action_file(action_file), f"--action-file {action_file}"

    if serve:  # the built-in environment: its action is `wait` and nothing else
        if explicit is None:
            return StepAction({}, BUILT_IN, wait_field=True)
        return StepAction(explicit, source, wait_field="wait" not in explicit)

    if explicit is not None:
        try:
            schema: dict[str, Any] | None = served_action_schema(
                base_url, timeout, token, token_source
            )
        except Unauthorized:
            raise
        except OpenEnvError:
            schema = None  # the runs will say what is wrong with the server
        return StepAction(explicit, source, wait_field=_has_wait(schema) and "wait" not in explicit)

    schema = served_action_schema(base_url, timeout, token, token_source)
    example = project_example(project_dir) if project_dir is not None else None
    if example is not None and project_dir is not None:
        value, source = example, f"example_action of {project_dir / 'openenv.yaml'}"
    else:
        from openenv_cli.validation.example import example_action

        value, source = example_action(schema), f"an example built from {base_url}/schema"
    return StepAction(value, source, wait_field=_has_wait(schema) and "wait" not in value)

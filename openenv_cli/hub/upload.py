"""What a push uploads, prepared locally with no network (so ``--dry-run`` stops here): the
staged context with the Dockerfile at the root and the runtime bundle, a README whose front
matter configures the Space, and the Space variables."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from openenv_cli.hub.space import (
    RepoRef,
    parse_repo_id,
    space_hardware,
    space_readme,
    space_variables,
    truthy,
)
from openenv_cli.image.context import ContextFolder, stage_context
from openenv_cli.image.safe_files import read_inside
from openenv_cli.image.selection import typed_includes
from openenv_cli.manifest_schema import Manifest
from openenv_cli.safe_files import write_inside

README = "README.md"


@dataclass
class PushPlan:
    """Everything ``deploy`` uploads and sets, staged on disk under ``staged.root``."""

    manifest: Manifest
    repo: RepoRef
    staged: ContextFolder
    front_matter: dict[str, Any]
    variables: dict[str, str]
    secrets: dict[str, str] = field(repr=False)
    private: bool | None  # --private / --public; None: leave an existing Space as it is
    interface: bool
    hardware: str | None = None

    @property
    def create_private(self) -> bool:
        return self.private if self.private is not None else self.manifest.push.private


def prepare_push(
    project_dir: Path,
    dest: Path,
    *,
    manifest: Manifest,
    repo_id: str | None = None,
    namespace: str | None = None,
    base_image: str | None = None,
    variables: Mapping[str, str] | None = None,
    secrets: Mapping[str, str] | None = None,
    excludes: Sequence[str] = (),
    include_secrets: Sequence[str] = (),
    private: bool | None = None,
    no_interface: bool = False,
    hardware: str | None = None,
) -> PushPlan:
    """Stage ``project_dir`` into ``dest`` for a Space and return the plan. No network."""
    repo = parse_repo_id(repo_id or manifest.push.repo_id or manifest.name, namespace)
    if hardware is not None:
        hardware = space_hardware(hardware)
    final_variables = space_variables(manifest, variables or {}, no_interface=no_interface)
    interface = truthy(final_variables.get("ENABLE_WEB_INTERFACE")) is not False
    staged = stage_context(
        project_dir,
        dest,
        dockerfile=manifest.build.dockerfile,
        base_image=base_image,
        excludes=[*manifest.push.exclude, *excludes],
        include_secrets=typed_includes(manifest.build.include_secret_files, include_secrets),
        dockerfile_at_root=True,
    )
    # The README as shipped, else the project's own when only an ignore file left it out;
    # never one left out as a secret or a link (a new one is written instead).
    ignored = any(i.path == README and i.kind == "ignored" for i in staged.left_out)
    source = staged.root if README in staged.files else Path(project_dir).resolve()
    readme_bytes: bytes | None = None
    if README in staged.files or ignored:
        try:
            readme_bytes = read_inside(source, README)
        except OSError:
            readme_bytes = None
    readme_text = (
        readme_bytes.decode("utf-8", errors="replace") if readme_bytes is not None else None
    )
    readme, front = space_readme(readme_text, manifest, interface=interface)
    write_inside(staged.root, README, readme)
    return PushPlan(
        manifest=manifest,
        repo=repo,
        staged=staged.with_file(README),
        front_matter=front,
        variables=final_variables,
        secrets=dict(secrets or {}),
        private=private,
        interface=interface,
        hardware=hardware,
    )

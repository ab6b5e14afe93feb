"""``openenv push``: deploy the project to a Hugging Face Docker Space."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from openenv_cli.commands.options import (
    BaseImage,
    DryRun,
    IncludeSecret,
    SpaceHardware,
    SpaceSecrets,
    SpaceVariables,
)
from openenv_cli.commands.push_output import (
    show_left_out,
    show_plan,
    show_result,
    show_secrets_shipped,
)
from openenv_cli.console import console
from openenv_cli.errors import UsageError


def command(
    path: Annotated[
        Path | None,
        typer.Argument(
            help="The project folder (with openenv.yaml) \\[default: .].", show_default=False
        ),
    ] = None,
    directory: Annotated[
        Path | None,
        typer.Option(
            "--directory",
            "-d",
            help="The project folder, as an option (same as PATH).",
            show_default=False,
        ),
    ] = None,
    repo_id: Annotated[
        str | None,
        typer.Option(
            "--repo-id",
            "-r",
            help="The Space, NAMESPACE/NAME; a bare NAME goes to your namespace \\[openenv.yaml push.repo_id; default <your user>/<name>].",
            show_default=False,
        ),
    ] = None,
    namespace: Annotated[
        str | None,
        typer.Option(
            "--namespace",
            help="Put the Space in this organization or user: ORG/<name> (or ORG/NAME with a bare --repo-id).",
            show_default=False,
        ),
    ] = None,
    private: Annotated[
        bool | None,
        typer.Option(
            "--private/--public",
            help="Make the Space private or public, also when it exists \\[default: new Spaces follow push.private; existing ones keep theirs].",
            show_default=False,
        ),
    ] = None,
    base_image: BaseImage = None,
    env: SpaceVariables = None,
    secret: SpaceSecrets = None,
    exclude: Annotated[
        list[str] | None,
        typer.Option(
            "--exclude",
            metavar="PATTERN",
            help="A gitignore-style pattern not to upload (repeatable); added to push.exclude.",
            show_default=False,
        ),
    ] = None,
    exclude_from: Annotated[
        list[Path] | None,
        typer.Option(
            "--exclude-from",
            metavar="FILE",
            help="A file of gitignore-style patterns not to upload, one a line (repeatable).",
            show_default=False,
        ),
    ] = None,
    include_secret: IncludeSecret = None,
    token: Annotated[
        str | None,
        typer.Option(
            "--token",
            help="Hugging Face token \\[default: $HF_TOKEN, then the `hf auth login` token].",
            show_default=False,
        ),
    ] = None,
    interface: Annotated[
        bool | None,
        typer.Option(
            "--interface/--no-interface",
            help="Turn the web interface on or off (--no-interface: no /web base path, ENABLE_WEB_INTERFACE=false) \\[default: on].",
            show_default=False,
        ),
    ] = None,
    hardware: SpaceHardware = None,
    dry_run: DryRun = False,
    registry: Annotated[str | None, typer.Option("--registry", hidden=True)] = None,
    create_pr: Annotated[bool, typer.Option("--create-pr", hidden=True)] = False,
    count: Annotated[int | None, typer.Option("--count", "-n", hidden=True)] = None,
) -> None:
    """Deploy the project to a Hugging Face Docker Space.

    Uploads the project (honouring .gitignore, .dockerignore and --exclude; never .git, virtualenvs, caches, other tools' lock files, symbolic links leading out of the project, hard links, or secrets: files such as .env*, .netrc, .aws/, .ssh/, *.pem, id_rsa* or terraform.tfstate, and any file holding a private key or a token, inside archives and notebooks too, or an archive too large to scan, unless named with --include-secret) with its Dockerfile at the root, the runtime this CLI uses in [bold]_openenv_runtime/[/], and a README whose front matter configures the Space.

    Creates the Space when needed, sets its variables and secrets on every push, and commits only what changed (files no longer shipped are deleted). The Hub is [bold]$HF_ENDPOINT[/] (default https://huggingface.co).
    """
    from openenv_cli.config import parse_assignments
    from openenv_cli.hub.deploy import deploy
    from openenv_cli.hub.errors import Redactor, redacting, resolve_token
    from openenv_cli.hub.upload import prepare_push
    from openenv_cli.manifest import load_manifest

    refuse_reference_options(registry=registry, create_pr=create_pr, count=count)
    project = project_folder(path, directory)
    patterns = [*(exclude or []), *read_exclude_files(exclude_from or [])]
    refuse_ignore_file_as_pattern(exclude or [])
    secrets = parse_assignments(secret or [], "--secret", secret=True)
    redactor = Redactor(secrets.values())
    redactor.add(token)
    with redacting(redactor):
        variables = parse_assignments(env or [], "-e")
        manifest = load_manifest(project)
        with tempfile.TemporaryDirectory(prefix="openenv-push-") as tmp:
            plan = prepare_push(
                project,
                Path(tmp) / "space",
                manifest=manifest,
                repo_id=repo_id,
                namespace=namespace,
                base_image=base_image,
                variables=variables,
                secrets=secrets,
                excludes=patterns,
                include_secrets=include_secret or [],
                private=private,
                no_interface=interface is False,
                hardware=hardware,
            )
            if dry_run:
                show_plan(plan)
                return
            show_left_out(plan.staged.left_out, brief=True)
            show_secrets_shipped(plan.staged.secrets_shipped)
            found, source = resolve_token(token)
            redactor.add(found)
            console.print(
                f"Staged {len(plan.staged.files)} files (Dockerfile at the root, openenv-runtime {plan.staged.runtime_version}).",
                highlight=False,
                soft_wrap=True,
            )
            with console.status(f"Deploying to {escape(plan.repo.shown())} ..."):
                result = deploy(plan, found, token_source=source)
    show_result(result)


def project_folder(path: Path | None, directory: Path | None) -> Path:
    """PATH or --directory (the reference's spelling); both only when they agree."""
    if path is not None and directory is not None and path.resolve() != directory.resolve():
        raise UsageError(
            f"PATH {path} and --directory {directory} name different folders.",
            hint="Pass the project folder once: `openenv push DIR` or `openenv push -d DIR`.",
        )
    folder = path or directory or Path(".")
    if not folder.is_dir():
        looks_like_id = not folder.exists() and len(folder.parts) == 2
        raise UsageError(
            f"{folder} is not a folder.",
            hint=f"To name the Space, use --repo-id {folder.as_posix()}; PATH is the project folder."
            if looks_like_id
            else "Pass the project folder: `openenv push path/to/my_env`.",
        )
    return folder


def refuse_reference_options(*, registry: str | None, create_pr: bool, count: int | None) -> None:
    """Options of the reference's ``push`` that have no meaning here: say what to use."""
    if registry is not None:
        raise UsageError(
            "openenv push deploys to a Hugging Face Space; it does not push images to a registry (--registry).",
            hint=f"Build and tag the image with `openenv build -t {registry.rstrip('/')}/NAME:TAG`, then `docker push` it.",
        )
    if create_pr:
        raise UsageError(
            "openenv push commits to the Space's main branch; --create-pr is not supported.",
            hint="To review a change first, push it to a second Space: --repo-id NAMESPACE/NAME-staging.",
        )
    if count is not None:
        raise UsageError(
            "openenv push deploys one Space per run; --count/-n is not supported.",
            hint="Run it once per Space: --repo-id NAMESPACE/NAME-1, --repo-id NAMESPACE/NAME-2, ...",
        )


def read_exclude_files(files: list[Path]) -> list[str]:
    patterns: list[str] = []
    for file in files:
        try:
            lines = file.read_text(encoding="utf-8").splitlines()
        except OSError as exc:
            raise UsageError(
                f"Cannot read --exclude-from {file}: {exc.strerror or exc}.",
                hint="Pass a text file of patterns, one a line.",
            ) from None
        patterns += [
            line.strip() for line in lines if line.strip() and not line.lstrip().startswith("#")
        ]
    return patterns


def refuse_ignore_file_as_pattern(patterns: list[str]) -> None:
    """The reference's ``--exclude FILE`` reads patterns from FILE; ours takes a pattern. An
    existing file named like an ignore file is almost surely meant as the former."""
    for pattern in patterns:
        candidate = Path(pattern)
        # .gitignore and .dockerignore are read anyway; excluding them is a fair wish.
        honoured = candidate.name in {".gitignore", ".dockerignore"}
        if candidate.name.endswith("ignore") and not honoured and candidate.is_file():
            raise UsageError(
                f"--exclude takes a pattern here, and {pattern} looks like a file of patterns.",
                hint=f"Read patterns from it with --exclude-from {pattern}.",
            )

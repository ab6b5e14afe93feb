"""Options that several commands share, declared once.

``openenv build`` and ``openenv push`` stage the same build context (the project, the runtime,
the Dockerfile) under the same secret rules; ``openenv push`` and ``openenv fork`` both set up a
Space (hardware, variables, secrets). These options mean the same in each; a help text names a
difference where one exists.
"""

from __future__ import annotations

from typing import Annotated

import typer

from openenv_cli.image import BASE_IMAGE_ENV

BaseImage = Annotated[
    str | None,
    typer.Option(
        "--base-image",
        "-b",
        metavar="IMAGE",
        help="Python base image to build on, multi-stage files included \\[build: else "
        f"${BASE_IMAGE_ENV}, then build.base_image, then python:3.11-slim; push: else the "
        "Dockerfile's own].",
        show_default=False,
    ),
]
"""``--base-image`` / ``-b``: the image the Dockerfile's Python stages start from."""

IncludeSecret = Annotated[
    list[str] | None,
    typer.Option(
        "--include-secret",
        metavar="PATH",
        help="Ship this file (or folder), e.g. certs/ca.pem, although a secret rule (its name, "
        "a hard link, or a secret found in it) leaves it out of the build context or the "
        "upload (repeatable). build.include_secret_files in openenv.yaml only asks: the flag "
        "must be typed.",
        show_default=False,
    ),
]
"""``--include-secret PATH``: the typed half of shipping a file a secret rule leaves out."""

DryRun = Annotated[
    bool,
    typer.Option(
        "--dry-run",
        help="Stage the files and show what would ship and what is left out, and why (push: "
        "also the README front matter, Dockerfile and variables); build and upload nothing, "
        "contact nobody.",
    ),
]
"""``--dry-run``: stage and show, change nothing anywhere."""

SpaceHardware = Annotated[
    str | None,
    typer.Option(
        "--hardware",
        "-H",
        metavar="FLAVOR",
        help="Space hardware, e.g. cpu-upgrade or t4-small (billed by the Hub) \\[default: a "
        "new Space gets cpu-basic (free), an existing one keeps its own; fork never copies the "
        "source's].",
        show_default=False,
    ),
]
"""``--hardware`` / ``-H``: the Space's hardware flavour."""

SpaceVariables = Annotated[
    list[str] | None,
    typer.Option(
        "--env",
        "--env-var",
        "--set-env",
        "-e",
        metavar="KEY=VALUE",
        help="A Space variable (repeatable). Variables are public, so a name like HF_TOKEN or "
        "*_KEY is refused: use --secret. push: also written to openenv.yaml push.variables; "
        "fork: the source's variables are copied and these win.",
        show_default=False,
    ),
]
"""``--env KEY=VALUE``: a public Space variable."""

SpaceSecrets = Annotated[
    list[str] | None,
    typer.Option(
        "--secret",
        "--set-secret",
        "-s",
        metavar="KEY[=VALUE]",
        help="A Space secret KEY=VALUE, or KEY to read $KEY (repeatable). Never shown or "
        "stored; fork never copies the source's secrets.",
        show_default=False,
    ),
]
"""``--secret KEY[=VALUE]``: a Space secret, sent to the Hub and nowhere else."""

"""Dockerfile preparation: which base image a Dockerfile builds on, and how to change it.

Generated Dockerfiles declare ``ARG BASE_IMAGE=...`` before ``FROM ${BASE_IMAGE}``: ``openenv
build`` then passes ``--base-image`` as that build argument and leaves the text alone. For a
Space (which builds the Dockerfile itself, without our build arguments) and for user
Dockerfiles without the argument, :func:`set_base_image` rewrites the text, reading it with
``dockerfile-parse`` (continuation lines, the ``escape`` directive and multi-stage files).
Known limit of that parser: a line starting with ``FROM`` inside a heredoc body is taken for an
instruction.
"""

from __future__ import annotations

import io
import re
from dataclasses import dataclass

from dockerfile_parse import DockerfileParser

BASE_IMAGE_ARG = "BASE_IMAGE"
_USES_ARG = re.compile(rf"\$(?:{BASE_IMAGE_ARG}\b|\{{{BASE_IMAGE_ARG}(?:[:}}]))")
_ARG_ITEM = re.compile(rf"(?<=\s){BASE_IMAGE_ARG}(?:=(?:\"[^\"]*\"|'[^']*'|\S*))?(?=\s|$)")


@dataclass(frozen=True)
class DockerStage:
    """One ``FROM`` of a Dockerfile: its image (as written), its ``AS`` name, and its lines."""

    image: str
    name: str | None
    first_line: int  # 0-based index of the FROM line
    last_line: int  # 0-based, inclusive (continuation lines)


def _parse(text: str) -> tuple[list[str], list[dict[str, object]]]:
    parser = DockerfileParser(fileobj=io.BytesIO(text.encode("utf-8")), env_replace=False)
    return list(parser.lines), list(parser.structure)


def _stage_of(instruction: dict[str, object]) -> DockerStage | None:
    words = [w for w in str(instruction["value"]).split() if not w.startswith("--")]
    if not words:
        return None
    name = words[2] if len(words) >= 3 and words[1].lower() == "as" else None
    return DockerStage(
        words[0], name, int(str(instruction["startline"])), int(str(instruction["endline"]))
    )


def final_env(dockerfile_text: str) -> dict[str, str]:
    """The ``ENV`` values the Dockerfile's last stage sets (what a container starts with)."""
    parser = DockerfileParser(fileobj=io.BytesIO(dockerfile_text.encode("utf-8")), env_replace=True)
    return dict(parser.envs)


def dockerfile_stages(dockerfile_text: str) -> list[DockerStage]:
    """The stages of a Dockerfile, in order."""
    _, structure = _parse(dockerfile_text)
    stages = (_stage_of(i) for i in structure if i["instruction"] == "FROM")
    return [stage for stage in stages if stage is not None]


def declares_base_image_arg(dockerfile_text: str) -> bool:
    """True when a global ``ARG BASE_IMAGE`` is used by a ``FROM``: then ``--base-image`` is
    passed as a build argument instead of rewriting the text."""
    _, structure = _parse(dockerfile_text)
    stages = dockerfile_stages(dockerfile_text)
    if not stages or not any(_USES_ARG.search(stage.image) for stage in stages):
        return False
    first = stages[0].first_line
    return any(
        i["instruction"] == "ARG"
        and int(str(i["startline"])) < first
        and _ARG_ITEM.search(" " + str(i["value"]))
        for i in structure
    )


def set_base_image(dockerfile_text: str, base_image: str) -> str:
    """Return ``dockerfile_text`` built on ``base_image`` instead of its Python base.

    - When a global ``ARG BASE_IMAGE`` is used by a FROM, its default becomes ``base_image``
      (so a plain ``docker build`` and a Space both use it); literal FROMs naming the ARG's
      old default change too.
    - Otherwise the base is found by following the final stage back through the stages it
      is built ``FROM`` to an external image, and every FROM naming that image is rewritten
      (``--platform`` flags and ``AS`` names are kept). FROMs naming an earlier stage and
      stages on other images (``node:20 AS ui``) are left alone. When that chain ends at
      ``scratch``, the first external image is the base.

    Raises ``ValueError`` when ``base_image`` is not an image reference or the text has no FROM.
    """
    base_image = base_image.strip()
    if not base_image or any(ch.isspace() for ch in base_image):
        raise ValueError(f"{base_image!r} is not an image reference")
    lines, structure = _parse(dockerfile_text)
    stages = dockerfile_stages(dockerfile_text)
    if not stages:
        raise ValueError("the Dockerfile has no FROM instruction")
    edits: dict[int, tuple[int, str]] = {}  # first line -> (last line, new text)

    def rewrite_from(stage: DockerStage) -> None:
        text = "".join(lines[stage.first_line : stage.last_line + 1])
        image = re.compile(rf"(?<=\s){re.escape(stage.image)}(?=\s|$)")
        edits[stage.first_line] = (stage.last_line, image.sub(lambda _: base_image, text, count=1))

    if declares_base_image_arg(dockerfile_text):
        for instruction in structure:
            first, last = int(str(instruction["startline"])), int(str(instruction["endline"]))
            if instruction["instruction"] != "ARG" or first >= stages[0].first_line:
                continue
            text = "".join(lines[first : last + 1])
            match = _ARG_ITEM.search(text)
            if match is None:
                continue
            old = match.group(0).partition("=")[2].strip("\"'")
            edits[first] = (
                last,
                text[: match.start()] + f"{BASE_IMAGE_ARG}={base_image}" + text[match.end() :],
            )
            for stage in stages:
                if old and stage.image == old:
                    rewrite_from(stage)
            break
        return _apply(lines, edits)

    names = {stage.name.lower(): stage for stage in stages if stage.name}
    current, seen = stages[-1], set()
    while current.image.lower() in names and current.image.lower() not in seen:
        seen.add(current.image.lower())
        current = names[current.image.lower()]
    target = current.image
    if target.lower() == "scratch" or target.lower() in names:
        external = [
            s.image for s in stages if s.image.lower() not in names and s.image.lower() != "scratch"
        ]
        if not external:
            return dockerfile_text
        target = external[0]
    declared: set[str] = set()
    for stage in stages:
        if stage.image == target and stage.image.lower() not in declared:
            rewrite_from(stage)
        if stage.name:
            declared.add(stage.name.lower())
    return _apply(lines, edits)


def _apply(lines: list[str], edits: dict[int, tuple[int, str]]) -> str:
    out = list(lines)
    for first in sorted(edits, reverse=True):
        last, text = edits[first]
        out[first : last + 1] = [text]
    return "".join(out)

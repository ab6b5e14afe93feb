"""The one naming rule for an environment's Docker image.

``openenv build`` tags a project ``<image_name(name)>:<version>`` and ``...:latest``;
``AutoEnv.from_env(name)`` looks for ``default_image(name)``. Both call this module, so an
image built by one is found by the other.
"""

from __future__ import annotations

import re

__all__ = ["default_image", "image_name"]


def image_name(project_name: str) -> str:
    """The repository part of an environment's image: its name, made valid for Docker.

    Lower case; runs of characters Docker refuses become ``-``; underscores are kept
    (``my_env`` → ``my_env``), at most two in a row; separators are trimmed from both ends.
    """
    name = re.sub(r"[^a-z0-9._-]+", "-", project_name.lower())
    name = re.sub(r"_{3,}", "__", name)
    name = re.sub(r"^[^a-z0-9]+|[^a-z0-9]+$", "", name)
    return name or "openenv-env"


def default_image(project_name: str, tag: str = "latest") -> str:
    """``<image_name(project_name)>:<tag>``: the image ``openenv build`` makes for the project."""
    return f"{image_name(project_name)}:{tag}"

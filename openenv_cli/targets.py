"""The one home of what a command's TARGET means: a server, a family, a project, an image, a Space.

``openenv collect``, ``eval``, ``validate`` and ``bench`` take a target and, when it is not a
running server, start one for the command's duration:

- ``http://...`` / ``https://...``: a running server, used as it is;
- ``FAMILY:NAME[?key=value&...]`` (``gymnasium:CartPole-v1``, ``reasoning_gym:leg_counting?seed=3``,
  ``harbor:/abs/path/to/task``): an environment of a library the runtime adapts, served in
  local processes (a Harbor task's episodes run in containers on the local Docker engine). A known family
  prefix wins over ``MODULE:APP`` and over Docker image names (``gymnasium`` is importable);
- ``space:org/name`` or ``org/name``: a Hugging Face Space;
- ``image:NAME``: a Docker image;
- an existing folder (a project), or ``FILE.py:APP``: served in local processes;
- anything else: a Docker image name (``my_env:latest``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from openenv_cli.errors import OpenEnvError, UsageError

if TYPE_CHECKING:  # the runtime imports pydantic: commands load this module at start-up
    from openenv_runtime.adapters.target import FamilyTarget
    from openenv_runtime.providers import Provider

Kind = Literal["url", "family", "project", "space", "image"]
TARGET_HELP = (
    "A server URL, a family target (gymnasium:CartPole-v1, reasoning_gym:leg_counting?seed=3, "
    "textarena:GuessTheNumber-v0, harbor:/abs/path/to/task), a project folder, a Docker image (image:NAME) "
    "or a Space (space:org/name)."
)


@dataclass(frozen=True)
class Target:
    """A parsed target: its kind and what it names (for a family, the parsed family target)."""

    kind: Kind
    value: str
    family: FamilyTarget | None = None

    def __str__(self) -> str:
        return str(self.family) if self.family is not None else self.value


def parse_target(text: str) -> Target:
    """What ``text`` names; see the module's docstring for the forms and their precedence."""
    from openenv_runtime.adapters.target import parse_family_target
    from openenv_runtime.errors import AdapterError

    text = text.strip()
    if text.startswith(("http://", "https://")):
        return Target("url", text.rstrip("/"))
    try:
        family = parse_family_target(text)
    except AdapterError as exc:
        raise UsageError(str(exc)) from None
    if family is not None:
        return Target("family", str(family), family)
    if text.startswith("space:"):
        return Target("space", text.removeprefix("space:"))
    if text.startswith("image:"):
        return Target("image", text.removeprefix("image:"))
    if Path(text).exists() or (":" in text and text.split(":")[0].endswith(".py")):
        return Target("project", text)
    if _looks_like_repo(text):
        return Target("space", text)
    return Target("image", text)


def _looks_like_repo(text: str) -> bool:
    parts = text.split("/")
    return len(parts) == 2 and ":" not in text and all(parts)


def target_provider(target: Target, **options: Any) -> Provider:
    """A provider that serves ``target`` (not a URL); ``options`` go to a local process provider."""
    from openenv_runtime.providers import DockerProvider, ProcessProvider, SpaceProvider

    if target.kind == "family":
        assert target.family is not None
        from openenv_runtime.adapters.served import family_provider
        from openenv_runtime.errors import AdapterError

        try:
            return family_provider(target.family, **options)
        except AdapterError as exc:
            raise UsageError(str(exc), hint="Install the extra named above.") from None
    if target.kind == "project":
        return ProcessProvider(target.value, **options)
    if target.kind == "space":
        return SpaceProvider(target.value)
    if target.kind == "image":
        return DockerProvider(target.value)
    raise UsageError(f"{target.value} is a running server: there is nothing to start.")


def start_target(target: Target, **options: Any) -> tuple[Provider, list[str]]:
    """Start a server for ``target`` (not a URL): its provider (stop it when done) and URLs.

    A server that does not start is one :class:`OpenEnvError` with its last lines, and
    nothing is left running.
    """
    from openenv_runtime.providers import ProviderError

    provider = target_provider(target, **options)
    try:
        return provider, provider.start()
    except ProviderError as exc:
        raise OpenEnvError(
            f"Could not start a server for {target}: {exc}",
            hint=f"Fix the cause above; `openenv validate {target}` says what is wrong."
            if target.kind in ("family", "project")
            else "Fix the cause above.",
        ) from None


@contextlib.contextmanager
def started_servers(
    targets: Sequence[str | Target],
) -> Iterator[tuple[list[str], dict[str, Any]]]:
    """Base URLs of running servers for ``targets`` and where they came from (for provenance).

    A target that is not a URL is started here and stopped when the block ends, whatever
    happens in it.
    """
    urls: list[str] = []
    origin: dict[str, Any] = {}
    providers: list[Provider] = []
    try:
        for given in targets:
            target = given if isinstance(given, Target) else parse_target(given)
            if target.kind == "url":
                urls.append(target.value)
                continue
            origin.update(_origin(target))
            provider, started = start_target(target)
            providers.append(provider)
            urls.extend(started)
        yield urls, origin
    finally:
        for provider in providers:
            provider.stop()


def _origin(target: Target) -> dict[str, Any]:
    if target.kind == "family":
        return {"family": str(target)}
    if target.kind == "project":
        return {"project": str(Path(target.value).resolve())}
    if target.kind == "space":
        return {"space": target.value}
    return {"image": target.value, "image_digest": _image_digest(target.value)}


def _image_digest(image: str) -> str:
    try:
        import docker

        return str(docker.from_env().images.get(image).id)
    except Exception:  # no engine or no such image: the provider will say so
        return ""

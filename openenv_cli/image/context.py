"""Stage a build context (for ``openenv build``) or a Space's files (for ``openenv push``).

``stage_context`` copies what :mod:`.selection` ships, reading every file through
:mod:`.safe_files` (so nothing outside the project is ever read), prepares the Dockerfile
(:mod:`.dockerfile`) and adds the runtime bundle (:mod:`.runtime_bundle`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from openenv_cli.errors import OpenEnvError
from openenv_cli.image.dockerfile import set_base_image
from openenv_cli.image.runtime_bundle import runtime_version, write_runtime_bundle
from openenv_cli.image.safe_files import OutsideProjectError, copy_inside, read_inside
from openenv_cli.image.secret_rules import secret_pattern
from openenv_cli.image.secret_scan import scan_text
from openenv_cli.image.selection import LeftOut, ShippedSecret, normalise_includes, select_files
from openenv_cli.safe_files import write_inside


@dataclass(frozen=True)
class ContextFolder:
    """A staged folder, ready to be built or uploaded.

    ``files`` lists every file under ``root`` (relative POSIX paths, sorted), the runtime
    bundle included; ``dockerfile`` is the Dockerfile to build with, relative to ``root``
    (``"Dockerfile"`` when staged at the root), and ``dockerfile_text`` its final content;
    ``left_out`` is what the project has and the folder does not, with the reasons;
    ``secrets_shipped`` the files that match a secret rule and ship because they were named.
    """

    root: Path
    files: tuple[str, ...]
    dockerfile: str
    dockerfile_text: str
    runtime_version: str
    left_out: tuple[LeftOut, ...] = ()
    secrets_shipped: tuple[ShippedSecret, ...] = ()

    @property
    def size(self) -> int:
        return sum((self.root / name).stat().st_size for name in self.files)

    def with_file(self, relative: str) -> ContextFolder:
        """The same folder, with ``relative`` (written there by the caller) listed."""
        files = tuple(sorted({*self.files, relative}))
        return ContextFolder(
            self.root,
            files,
            self.dockerfile,
            self.dockerfile_text,
            self.runtime_version,
            self.left_out,
            self.secrets_shipped,
        )


def _looks_like_a_dockerfile(relative: str) -> bool:
    name = relative.rpartition("/")[2].lower()
    return "dockerfile" in name or "containerfile" in name


def read_dockerfile(root: Path, dockerfile: str) -> tuple[str, str]:
    """The Dockerfile's path relative to ``root`` and its text; it must be a regular file
    inside the project (a link leading out is refused), named as a Dockerfile
    (``Dockerfile``, ``Dockerfile.gpu``, ``app.dockerfile``, ``Containerfile``), and match no
    secret rule (by its own name or the name it was given)."""
    relative = dockerfile.strip().replace("\\", "/")
    source = (root / relative).resolve()
    if not source.is_relative_to(root):
        raise OpenEnvError(
            f"The Dockerfile {dockerfile} is outside the project {root}.",
            hint="Keep the Dockerfile inside the project (build.dockerfile in openenv.yaml, or --dockerfile).",
        )
    if not source.is_file():
        raise OpenEnvError(
            f"No Dockerfile at {dockerfile} in {root}.",
            hint="Create it (`openenv init` writes server/Dockerfile) or set build.dockerfile in openenv.yaml.",
        )
    inside = source.relative_to(root).as_posix()
    for name in dict.fromkeys((relative, inside)):
        pattern = secret_pattern(name)
        if pattern is not None or not _looks_like_a_dockerfile(name):
            why = (
                f"matches the secret rule {pattern}" if pattern else "is not named as a Dockerfile"
            )
            raise OpenEnvError(
                f"The Dockerfile {dockerfile} {why}; it would be shipped as the image's recipe.",
                hint="Point build.dockerfile (or --dockerfile) at a Dockerfile of the project, e.g. server/Dockerfile.",
            )
    try:
        return inside, read_inside(root, inside).decode("utf-8")
    except OutsideProjectError as exc:
        raise OpenEnvError(f"Cannot read the Dockerfile {dockerfile}: {exc}.") from None


def stage_context(
    project_dir: str | Path,
    dest: str | Path,
    *,
    dockerfile: str = "server/Dockerfile",
    base_image: str | None = None,
    excludes: Sequence[str] = (),
    include_secrets: Iterable[str] = (),
    dockerfile_at_root: bool = False,
) -> ContextFolder:
    """Copy ``project_dir``'s shippable files and the runtime bundle into ``dest``.

    ``dockerfile`` (relative to the project) is always staged, even when an ignore file
    lists it, with its text passed through ``set_base_image`` when ``base_image`` is given.
    With ``dockerfile_at_root`` the same text is also written to ``dest/Dockerfile`` (for a
    Space, which builds the root Dockerfile with the repository as context; a project file
    named ``Dockerfile`` at the root is replaced). ``dest`` must be missing or empty and
    is left out of the copy when it lies inside the project.
    """
    root = Path(project_dir).resolve()
    destination = Path(dest).resolve()
    dockerfile_relative, text = read_dockerfile(root, dockerfile)
    if base_image:
        try:
            text = set_base_image(text, base_image)
        except ValueError as exc:
            raise OpenEnvError(
                f"Cannot set the base image in {dockerfile}: {exc}.",
                hint="Check the Dockerfile and --base-image.",
            ) from None
    if destination.exists() and (not destination.is_dir() or any(destination.iterdir())):
        raise OpenEnvError(
            f"The staging folder {destination} is not empty.",
            hint="Stage into a new or empty folder.",
        )
    named = normalise_includes(include_secrets)
    finding = scan_text(text, dockerfile_relative)
    if finding is not None and dockerfile_relative not in named:
        raise OpenEnvError(
            f"The Dockerfile {dockerfile_relative} holds what looks like a secret ({finding.describe()}).",
            hint="Pass secrets at run time (a Space secret: openenv push --secret NAME), not in the Dockerfile; "
            f"if this is a false alarm, type --include-secret {dockerfile_relative}.",
        )
    links = (root / dockerfile_relative).lstat().st_nlink
    if links > 1 and dockerfile_relative not in named:
        raise OpenEnvError(
            f"The Dockerfile {dockerfile_relative} is a hard link ({links} names for one file; another may lie outside the project).",
            hint=f"Copy it into a file of its own; to ship it as it is, type --include-secret {dockerfile_relative}.",
        )
    selection = select_files(root, excludes, named)
    left_out = list(selection.left_out)
    shipped = list(selection.secrets_shipped)
    if finding is not None:
        shipped.append(
            ShippedSecret(
                dockerfile_relative, f"holds what looks like a secret ({finding.describe()})"
            )
        )
    inside = destination.relative_to(root).as_posix() if destination.is_relative_to(root) else None
    destination.mkdir(parents=True, exist_ok=True)
    for item in selection.files:
        if inside is not None and (item.path == inside or item.path.startswith(inside + "/")):
            continue
        try:
            copy_inside(root, item.source, destination, item.path)
        except OutsideProjectError as exc:  # changed on disk since it was listed
            left_out.append(LeftOut(item.path, "link", f"changed while being read: {exc}"))
    write_inside(destination, dockerfile_relative, text, sync=False)
    if dockerfile_at_root:
        write_inside(destination, "Dockerfile", text, sync=False)
    write_runtime_bundle(destination)
    staged = sorted(
        p.relative_to(destination).as_posix() for p in destination.rglob("*") if p.is_file()
    )
    return ContextFolder(
        root=destination,
        files=tuple(staged),
        dockerfile="Dockerfile" if dockerfile_at_root else dockerfile_relative,
        dockerfile_text=text,
        runtime_version=runtime_version(),
        left_out=tuple(sorted(left_out, key=lambda item: item.path)),
        secrets_shipped=tuple(sorted(set(shipped), key=lambda item: item.path)),
    )

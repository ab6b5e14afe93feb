"""Which files of a project go into a build context or a Space upload, and which do not.

Four rules, in this order; the first that applies decides, and every file or folder left out
is reported with its reason (``openenv push --dry-run`` and ``openenv build`` print them).
Then two more that only ``--include-secret PATH`` (typed at the command) can override:
a **hard link** (a file with more than one name, one of which may lie outside the project)
is left out, and so is a file whose **content** holds a secret (:mod:`.secret_scan`: a private
key, an AWS, Hugging Face, Anthropic, Google or GitHub token, a Docker login, ..., also inside
archives and notebooks, base64-encoded or in UTF-16) whatever its name, or that cannot be
scanned (an archive past the scan's bounds, encrypted or broken). Every secret that ships
because it was named is listed in :attr:`Selection.secrets_shipped`.

1. **Never shipped**: version control, caches, build output, other tools' lock files, an old
   ``_openenv_runtime/``, and any folder holding a virtual or conda environment.
2. **Secrets** (:data:`.secret_rules.SECRET_PATTERNS`: ``.env*``, ``.netrc``, ``.aws/``,
   ``.ssh/``, ``*.pem``, ``id_rsa*``, Terraform state, key stores, shell histories, …, at any
   depth, in any case, and their backups). The project's ignore files cannot bring them back
   (a ``!`` negation in ``.gitignore`` or ``.dockerignore`` has no effect on them); only
   naming the path explicitly does (``include_secrets``, from ``--include-secret PATH``).
3. **Ignore files**: ``.gitignore`` files (nested ones apply below their folder), the root
   ``.dockerignore`` with Docker's own matcher (the Docker SDK's, which ``docker build``
   follows), and extra patterns (``--exclude``, ``push.exclude``; gitignore syntax).
4. **Symbolic links**: a link is kept only when it points to a regular file inside the
   project that rules 1-2 would ship; it is copied as a file. Links to folders are never
   followed; links leading outside the project (``/proc/self/environ``, ``/etc/passwd``,
   ``~/.aws``), dangling links and loops are left out. Non-regular files (FIFOs, sockets,
   devices) are left out too. Reading re-checks all of this (:mod:`.safe_files`).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Literal

import pathspec
from docker.utils.build import PatternMatcher

from openenv_cli.errors import OpenEnvError, UsageError
from openenv_cli.image.safe_files import read_inside, target_inside
from openenv_cli.image.secret_rules import secret_pattern
from openenv_cli.image.secret_scan import scan_file, scan_text

RUNTIME_DIR = "_openenv_runtime"

# Gitignore syntax, relative to the project; never shipped and cannot be asked for.
NEVER_SHIPPED: tuple[str, ...] = (
    ".git",
    ".hg/",
    ".svn/",
    "__pycache__/",
    "*.pyc",
    "*.pyo",
    ".pytest_cache/",
    ".mypy_cache/",
    ".ruff_cache/",
    "node_modules/",
    "*.egg-info/",
    "/build/",
    "/dist/",
    "uv.lock",
    "poetry.lock",
    "Pipfile.lock",
    "pdm.lock",
    f"{RUNTIME_DIR}/",
    ".DS_Store",
    ".venv/",
    "venv/",
    ".conda/",
)

# Files that mark a folder as a Python environment (virtualenv / conda).
ENVIRONMENT_MARKERS = ("pyvenv.cfg", "conda-meta")

_NEVER = pathspec.GitIgnoreSpec.from_lines(NEVER_SHIPPED)

Kind = Literal["never shipped", "secret", "ignored", "link", "not a file", "environment"]


@dataclass(frozen=True)
class ContextFile:
    """A file to ship: ``path`` in the context, read from ``source`` (both relative to the
    project; they differ only for a symbolic link kept because it points inside)."""

    path: str
    source: str


@dataclass(frozen=True)
class LeftOut:
    """A file or folder (``path`` ends with ``/``) that is not shipped, and why."""

    path: str
    kind: Kind
    reason: str


@dataclass(frozen=True)
class ShippedSecret:
    """A file that ships although a secret rule matches it, because it was named."""

    path: str
    reason: str


@dataclass(frozen=True)
class Selection:
    """The outcome of :func:`select_files`, every list sorted by path."""

    files: tuple[ContextFile, ...]
    left_out: tuple[LeftOut, ...]
    secrets_shipped: tuple[ShippedSecret, ...] = ()

    @property
    def paths(self) -> list[str]:
        return [f.path for f in self.files]

    def left_out_of(self, *kinds: Kind) -> list[LeftOut]:
        return [item for item in self.left_out if item.kind in kinds]


def normalise_includes(paths: Iterable[str]) -> frozenset[str]:
    """Explicit includes as clean relative POSIX paths; one leaving the project is refused."""
    clean = set()
    for raw in paths:
        text = raw.strip().replace("\\", "/").strip("/")
        while text.startswith("./"):
            text = text[2:]
        if not text:
            continue
        parts = PurePosixPath(text).parts
        if ".." in parts or raw.strip().startswith("/"):
            raise UsageError(
                f"--include-secret {raw!r} is not a path inside the project.",
                hint="Name the file relative to the project folder, e.g. --include-secret certs/server.pem.",
            )
        clean.add(PurePosixPath(*parts).as_posix())
    return frozenset(clean)


def typed_includes(asked: Iterable[str], typed: Iterable[str]) -> tuple[str, ...]:
    """The includes to use: only ``typed`` (``--include-secret``, typed at the command).

    ``asked`` (``build.include_secret_files`` in ``openenv.yaml``, which a cloned repository
    controls) may only ask: any entry the command line does not also name is refused, with
    every such path and the flag that would ship it.
    """
    flags = normalise_includes(typed)
    missing = sorted(normalise_includes(asked) - flags)
    if missing:
        flags_text = " ".join(f"--include-secret {p}" for p in missing)
        raise OpenEnvError(
            "openenv.yaml (build.include_secret_files) asks to ship files on the secret deny "
            f"list: {', '.join(missing)}. A project file cannot opt secrets in.",
            hint=f"If you mean to ship them, type {flags_text}; otherwise remove build.include_secret_files from openenv.yaml.",
        )
    return tuple(sorted(flags))


def _under(relative: str, folder: str) -> bool:
    return relative == folder or relative.startswith(folder + "/")


class _Rules:
    """The ignore-file part (rule 3) and the explicit includes of rule 2."""

    def __init__(self, root: Path, extra: Sequence[str], includes: frozenset[str]) -> None:
        self.root = root
        self.includes = includes
        self.gitignores: dict[str, pathspec.GitIgnoreSpec] = {}
        patterns = [p.strip() for p in extra if p and p.strip()]
        self.extra = pathspec.GitIgnoreSpec.from_lines(patterns) if patterns else None
        lines = _ignore_lines(root, ".dockerignore")
        # The same reading of .dockerignore as docker's own client: no blanks, no comments.
        self.docker = PatternMatcher([x for x in lines if x and not x.startswith("#")])

    def enter(self, relative_folder: str) -> None:
        name = f"{relative_folder}/.gitignore" if relative_folder else ".gitignore"
        lines = _ignore_lines(self.root, name)
        if lines:
            self.gitignores[relative_folder] = pathspec.GitIgnoreSpec.from_lines(lines)

    def named(self, relative: str, is_dir: bool) -> bool:
        """Named by an explicit include (a folder also when an include lies beneath it)."""
        if any(_under(relative, p) for p in self.includes):
            return True
        return is_dir and any(p.startswith(relative + "/") for p in self.includes)

    def ignored(self, relative: str, is_dir: bool) -> str | None:
        """Which ignore file leaves ``relative`` out, or None."""
        probe = relative + "/" if is_dir else relative
        verdict = None
        for base, spec in self.gitignores.items():  # parents before children
            if base and not relative.startswith(base + "/"):
                continue
            result = spec.check_file(probe[len(base) + 1 :] if base else probe).include
            if result is not None:
                verdict = (f"{base}/.gitignore" if base else ".gitignore") if result else None
        if verdict:
            return verdict
        if self.docker.matches(relative) and not (is_dir and self._docker_reincludes(relative)):
            return ".dockerignore"
        if self.extra is not None and self.extra.check_file(probe).include:
            return "--exclude / push.exclude"
        return None

    def _docker_reincludes(self, folder: str) -> bool:
        # As docker's own walk: an excluded folder is still entered when a `!` pattern
        # names something beneath it.
        return any(
            p.exclusion and p.cleaned_pattern.startswith(folder) for p in self.docker.patterns
        )


def _ignore_lines(root: Path, relative: str) -> list[str]:
    """The lines of an ignore file, read without following links (a linked one is skipped)."""
    try:
        return read_inside(root, relative).decode("utf-8", errors="replace").splitlines()
    except OSError:
        return []


def _is_environment(folder: Path) -> bool:
    return any(os.path.lexists(folder / marker) for marker in ENVIRONMENT_MARKERS)


def select_files(
    project_dir: str | Path,
    extra_excludes: Sequence[str] = (),
    include_secrets: Iterable[str] = (),
) -> Selection:
    """Apply the four rules above to ``project_dir`` (see the module's documentation)."""
    root = Path(project_dir).resolve()
    rules = _Rules(root, extra_excludes, normalise_includes(include_secrets))
    files: list[ContextFile] = []
    left_out: list[LeftOut] = []

    def verdict(relative: str, is_dir: bool) -> LeftOut | None:
        shown = relative + "/" if is_dir else relative
        probe = relative + "/" if is_dir else relative
        if _NEVER.check_file(probe).include:
            return LeftOut(shown, "never shipped", "tool output, caches or version control")
        pattern = secret_pattern(relative, is_dir)
        if pattern is not None and not rules.named(relative, is_dir):
            return LeftOut(
                shown,
                "secret",
                f"may hold credentials (matches {pattern}); name it with --include-secret to ship it",
            )
        source = rules.ignored(relative, is_dir)
        if source is not None:
            return LeftOut(shown, "ignored", f"excluded by {source}")
        return None

    for current, dirnames, filenames in os.walk(root):
        folder = Path(current)
        relative_folder = "" if folder == root else folder.relative_to(root).as_posix()
        rules.enter(relative_folder)
        keep = []
        for name in sorted(dirnames):
            relative = f"{relative_folder}/{name}" if relative_folder else name
            path = folder / name
            if path.is_symlink():
                left_out.append(_link_left_out(root, relative, folder_link=True))
                continue
            if _is_environment(path):
                left_out.append(
                    LeftOut(relative + "/", "environment", "a virtual or conda environment")
                )
                continue
            refused = verdict(relative, is_dir=True)
            if refused is not None:
                left_out.append(refused)
                continue
            keep.append(name)
        dirnames[:] = keep
        for name in sorted(filenames):
            relative = f"{relative_folder}/{name}" if relative_folder else name
            refused = verdict(relative, is_dir=False)
            if refused is not None:
                left_out.append(refused)
                continue
            path = folder / name
            if path.is_symlink():
                kept = _kept_link(root, relative, rules)
                if isinstance(kept, LeftOut):
                    left_out.append(kept)
                else:
                    files.append(kept)
                continue
            if not path.is_file():
                left_out.append(LeftOut(relative, "not a file", "not a regular file"))
                continue
            files.append(ContextFile(relative, relative))
    shippable, shipped = _check_files(root, files, rules, left_out)
    return Selection(
        files=tuple(sorted(shippable, key=lambda f: f.path)),
        left_out=tuple(sorted(left_out, key=lambda item: item.path)),
        secrets_shipped=tuple(sorted(shipped, key=lambda item: item.path)),
    )


def _check_files(
    root: Path, files: list[ContextFile], rules: _Rules, left_out: list[LeftOut]
) -> tuple[list[ContextFile], list[ShippedSecret]]:
    """The last two rules, on what the first four keep: hard links, then the content scan.
    A file named with an include ships anyway, and is listed with the rule it breaks."""
    kept: list[ContextFile] = []
    shipped: list[ShippedSecret] = []
    for item in files:
        named = rules.named(item.path, False) or rules.named(item.source, False)
        why = []
        pattern = secret_pattern(item.path) or secret_pattern(item.source)
        if pattern is not None:
            why.append(f"matches {pattern}")
        try:
            links = os.lstat(root / item.source).st_nlink
        except OSError:
            links = 1
        if links > 1:
            if not named:
                left_out.append(
                    LeftOut(
                        item.path,
                        "link",
                        f"hard link ({links} names for one file; another may lie outside the project); name it with --include-secret to ship it",
                    )
                )
                continue
            why.append(f"hard link with {links} names")
        # A token can hide in a file's name too (the name travels as the path on the Hub).
        finding = scan_text(item.path) or scan_file(root, item.source)
        if finding is not None:
            what = (
                f"cannot be scanned for secrets: {finding.describe()}"
                if finding.unscanned
                else f"holds what looks like a secret ({finding.describe()})"
            )
            if not named:
                left_out.append(
                    LeftOut(
                        item.path, "secret", f"{what}; name it with --include-secret to ship it"
                    )
                )
                continue
            why.append(what)
        if why:
            shipped.append(ShippedSecret(item.path, "; ".join(why)))
        kept.append(item)
    return kept, shipped


def _link_left_out(root: Path, relative: str, *, folder_link: bool) -> LeftOut:
    try:
        target = os.readlink(root / relative)
    except OSError:
        target = "?"
    inside = target_inside(root, relative)
    if inside is None:
        try:
            resolved = (root / relative).resolve(strict=True)
            why = f"points outside the project ({resolved})"
        except (OSError, RuntimeError):
            why = f"points nowhere ({target})"
        return LeftOut(relative + ("/" if folder_link else ""), "link", f"symbolic link {why}")
    return LeftOut(
        relative + "/",
        "link",
        f"symbolic link to the folder {inside}/: links to folders are not followed",
    )


def _kept_link(root: Path, relative: str, rules: _Rules) -> ContextFile | LeftOut:
    inside = target_inside(root, relative)
    if inside is None:
        return _link_left_out(root, relative, folder_link=False)
    target = root / inside
    if not target.is_file():
        return LeftOut(relative, "link", f"symbolic link to {inside}, which is not a regular file")
    if _NEVER.check_file(inside).include or any(
        _is_environment(root / p) for p in PurePosixPath(inside).parents if str(p) != "."
    ):
        return LeftOut(relative, "link", f"symbolic link to {inside}, which is never shipped")
    pattern = secret_pattern(inside)
    if pattern is not None and not rules.named(inside, False) and not rules.named(relative, False):
        return LeftOut(
            relative,
            "secret",
            f"symbolic link to {inside}, which may hold credentials (matches {pattern})",
        )
    return ContextFile(relative, inside)

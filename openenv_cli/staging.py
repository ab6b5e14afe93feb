"""Stage a project for a Docker build or a Hugging Face Space (shared by ``build`` and ``push``).

The runtime is on no package index, so whatever builds the image must carry it: every
staged context holds ``_openenv_runtime/``, a pip-installable source tree of the exact
``openenv_runtime`` this CLI runs with, which the project's Dockerfile installs.

API (all paths may be ``str`` or ``Path``):

``stage(project_dir, dest, *, dockerfile=..., base_image=None, excludes=(), dockerfile_at_root=False)``
    Copy what ships (see ``project_files``) plus the runtime bundle into ``dest`` (which must
    be missing or empty) and return a :class:`StagedContext`. ``base_image`` rewrites the
    Dockerfile (see ``set_base_image``); ``dockerfile_at_root`` also writes it as
    ``dest/Dockerfile``, where Spaces look for it.
``project_files(project_dir, extra_excludes=())``
    The project's files to ship, as sorted paths relative to ``project_dir``.
``write_runtime_bundle(dest_dir)``
    Write ``dest_dir/_openenv_runtime/`` and return that folder.
``set_base_image(dockerfile_text, base_image)``
    The Dockerfile text with its Python base image replaced. Pure.
``runtime_version()``
    The version the bundle carries.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

import pathspec

from openenv_cli.errors import OpenEnvError

RUNTIME_DIR = "_openenv_runtime"
RUNTIME_DISTRIBUTION = "openenv-runtime"
RUNTIME_PACKAGE = "openenv_runtime"
RUNTIME_BUILD_REQUIREMENT = "setuptools>=64"

# Never shipped, whatever the ignore files say (gitignore syntax, relative to the project).
ALWAYS_EXCLUDED: tuple[str, ...] = (
    ".git",
    ".env",
    ".env.*",
    ".venv/",
    "venv/",
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
)
_ALWAYS = pathspec.GitIgnoreSpec.from_lines(ALWAYS_EXCLUDED)


@dataclass(frozen=True)
class StagedContext:
    """A staged build context.

    ``files`` lists every file under ``root`` (relative POSIX paths, sorted), the runtime
    bundle included; ``dockerfile`` is the Dockerfile to build with, relative to ``root``
    (``"Dockerfile"`` when staged at the root), and ``dockerfile_text`` its final content.
    """

    root: Path
    files: tuple[str, ...]
    dockerfile: str
    dockerfile_text: str
    runtime_version: str


# -- what ships -----------------------------------------------------------------------------


def _read_lines(path: Path) -> list[str]:
    try:
        return path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return []


def _dockerignore_as_gitignore(lines: Iterable[str]) -> list[str]:
    """Docker anchors patterns at the context root; gitignore does not: anchor them."""
    converted = []
    for raw in lines:
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        negate = line.startswith("!")
        body = line[1:].strip() if negate else line
        body = body.lstrip("/").rstrip("/")
        while body.startswith("./"):
            body = body[2:]
        if not body or body == ".":
            continue
        if not body.startswith("**/"):
            body = "/" + body
        converted.append(("!" if negate else "") + body)
    return converted


class _IgnoreRules:
    """Decides whether a path is left out: always-excluded names, the ``.gitignore`` files
    (nested ones apply below their folder; the last match wins), the root ``.dockerignore``
    and the extra patterns. A file inside an excluded folder cannot be re-included."""

    def __init__(self, root: Path, extra: Sequence[str]) -> None:
        self.gitignores: dict[str, pathspec.GitIgnoreSpec] = {}
        self.others: list[pathspec.GitIgnoreSpec] = []
        dockerignore = root / ".dockerignore"
        if dockerignore.is_file():
            self.others.append(
                pathspec.GitIgnoreSpec.from_lines(
                    _dockerignore_as_gitignore(_read_lines(dockerignore))
                )
            )
        patterns = [p.strip() for p in extra if p and p.strip()]
        if patterns:
            self.others.append(pathspec.GitIgnoreSpec.from_lines(patterns))

    def enter(self, folder: Path, relative: str) -> None:
        gitignore = folder / ".gitignore"
        if gitignore.is_file():
            self.gitignores[relative] = pathspec.GitIgnoreSpec.from_lines(_read_lines(gitignore))

    def excluded(self, relative: str, is_dir: bool) -> bool:
        probe = relative + "/" if is_dir else relative
        if _ALWAYS.check_file(probe).include:
            return True
        verdict = None
        for base, spec in self.gitignores.items():  # insertion order: parents before children
            if base and not relative.startswith(base + "/"):
                continue
            result = spec.check_file(probe[len(base) + 1 :] if base else probe).include
            if result is not None:
                verdict = result
        if verdict:
            return True
        return any(spec.check_file(probe).include for spec in self.others)


def project_files(project_dir: str | Path, extra_excludes: Sequence[str] = ()) -> list[Path]:
    """The files of ``project_dir`` to ship, as sorted paths relative to it.

    Honours ``.gitignore`` files (nested ones too), the root ``.dockerignore`` (with Docker's
    root-anchored meaning) and ``extra_excludes`` (gitignore syntax, relative to the project).
    Never includes ``ALWAYS_EXCLUDED`` entries, any folder holding a virtualenv
    (``pyvenv.cfg``), or an existing ``_openenv_runtime/``. Symbolic links to files are
    followed; symbolic links to folders are not.
    """
    root = Path(project_dir).resolve()
    rules = _IgnoreRules(root, extra_excludes)
    found: list[Path] = []
    for current, dirnames, filenames in os.walk(root):
        folder = Path(current)
        relative_folder = "" if folder == root else folder.relative_to(root).as_posix()
        rules.enter(folder, relative_folder)
        keep = []
        for name in sorted(dirnames):
            path = folder / name
            relative = f"{relative_folder}/{name}" if relative_folder else name
            if (
                path.is_symlink()
                or (path / "pyvenv.cfg").exists()
                or rules.excluded(relative, is_dir=True)
            ):
                continue
            keep.append(name)
        dirnames[:] = keep
        for name in sorted(filenames):
            path = folder / name
            relative = f"{relative_folder}/{name}" if relative_folder else name
            if not path.is_file() or rules.excluded(relative, is_dir=False):
                continue
            found.append(Path(relative))
    return sorted(found, key=lambda p: p.as_posix())


# -- the runtime bundle ---------------------------------------------------------------------


def _runtime_source() -> Path:
    """The installed ``openenv_runtime`` package folder, found without importing it (fastapi is slow to import)."""
    spec = importlib.util.find_spec(RUNTIME_PACKAGE)
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    if not locations:
        raise OpenEnvError(
            "The openenv runtime (openenv_runtime) is not installed.",
            hint="Reinstall the CLI: `pip install --force-reinstall openenv-toolkit`.",
        )
    return Path(locations[0]).resolve()


_VERSION_LINE = re.compile(r"^__version__\s*=\s*[\"']([^\"']+)[\"']", re.MULTILINE)


def runtime_version() -> str:
    """The version of the runtime the bundle carries.

    The package's own ``__version__`` (from ``_version.py``) wins over the distribution
    metadata: it describes the files that are copied even when an editable install's
    metadata is stale.
    """
    try:
        match = _VERSION_LINE.search(
            (_runtime_source() / "_version.py").read_text(encoding="utf-8")
        )
    except (OSError, OpenEnvError):
        match = None
    if match:
        return match.group(1)
    try:
        return metadata.version(RUNTIME_DISTRIBUTION)
    except metadata.PackageNotFoundError:
        raise OpenEnvError(
            "Cannot tell which openenv-runtime version is installed.",
            hint="Reinstall the CLI: `pip install --force-reinstall openenv-toolkit`.",
        ) from None


_EXTRA_MARKER = re.compile(r"""\s*(?:\band\s+)?\(?\s*extra\s*==\s*['"]([^'"]+)['"]\s*\)?\s*""")


def _split_requirements(requirements: Iterable[str]) -> tuple[list[str], dict[str, list[str]]]:
    """Plain dependencies and ``{extra: [requirement]}``, from ``Requires-Dist`` entries."""
    plain: list[str] = []
    extras: dict[str, list[str]] = {}
    for requirement in requirements:
        spec, _, marker = requirement.partition(";")
        match = _EXTRA_MARKER.search(marker) if marker else None
        if match is None:
            plain.append(requirement.strip())
            continue
        rest = (marker[: match.start()] + " " + marker[match.end() :]).strip()
        rest = re.sub(r"^(and\s+)|(\s+and)$", "", rest).strip()
        extras.setdefault(match.group(1), []).append(spec.strip() + (f"; {rest}" if rest else ""))
    return plain, extras


def _toml_list(values: Iterable[str], indent: str = "    ") -> str:
    items = [f"{indent}{json.dumps(v)}," for v in values]
    return "[\n" + "\n".join(items) + "\n]" if items else "[]"


def _runtime_pyproject(version: str, package_files: list[str]) -> str:
    try:
        requirements = metadata.requires(RUNTIME_DISTRIBUTION)
        meta = metadata.metadata(RUNTIME_DISTRIBUTION)
    except metadata.PackageNotFoundError:
        raise OpenEnvError(
            "The openenv-runtime distribution metadata is missing, so its dependencies are unknown.",
            hint="Reinstall the CLI: `pip install --force-reinstall openenv-toolkit`.",
        ) from None
    plain, extras = _split_requirements(requirements or [])
    packages = sorted(
        {
            str(Path(f).parent).replace("/", ".")
            for f in package_files
            if Path(f).name == "__init__.py"
        }
    )
    package_data: dict[str, list[str]] = {}
    for relative in package_files:
        if relative.endswith(".py") and str(Path(relative).parent).replace("/", ".") in packages:
            continue
        owner = Path(relative).parent
        while str(owner).replace("/", ".") not in packages:
            owner = owner.parent
        package_data.setdefault(str(owner).replace("/", "."), []).append(
            Path(relative).relative_to(owner).as_posix()
        )
    lines = [
        f"# The {RUNTIME_DISTRIBUTION} {version} that the openenv CLI runs with, carried in the build",
        "# context because no package index serves it. Generated by openenv; do not edit.",
        "[build-system]",
        f"requires = [{json.dumps(RUNTIME_BUILD_REQUIREMENT)}]",
        'build-backend = "setuptools.build_meta"',
        "",
        "[project]",
        f"name = {json.dumps(RUNTIME_DISTRIBUTION)}",
        f"version = {json.dumps(version)}",
        f"description = {json.dumps(meta.get('Summary') or 'The openenv runtime.')}",
    ]
    if meta.get("Requires-Python"):
        lines.append(f"requires-python = {json.dumps(meta['Requires-Python'])}")
    lines.append(f"dependencies = {_toml_list(plain)}")
    if extras:
        lines += ["", "[project.optional-dependencies]"]
        lines += [
            f"{json.dumps(name)} = {_toml_list(reqs)}" for name, reqs in sorted(extras.items())
        ]
    lines += [
        "",
        "[tool.setuptools]",
        f"packages = {_toml_list(packages)}",
        "include-package-data = false",
    ]
    if package_data:
        lines += ["", "[tool.setuptools.package-data]"]
        lines += [
            f"{json.dumps(name)} = {_toml_list(sorted(files))}"
            for name, files in sorted(package_data.items())
        ]
    return "\n".join(lines) + "\n"


def write_runtime_bundle(dest_dir: str | Path) -> Path:
    """Write ``dest_dir/_openenv_runtime/``: the installed ``openenv_runtime`` package (its
    files, without caches) and a generated ``pyproject.toml`` naming its version and
    dependencies, so ``pip install ./_openenv_runtime`` installs exactly this runtime.

    Works for wheel and editable installs alike; replaces an existing bundle. Returns the
    bundle folder.
    """
    source = _runtime_source()
    version = runtime_version()
    bundle = Path(dest_dir) / RUNTIME_DIR
    if bundle.exists():
        shutil.rmtree(bundle)
    target = bundle / RUNTIME_PACKAGE
    copied: list[str] = []
    for current, dirnames, filenames in os.walk(source):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__" and not d.startswith("."))
        for name in sorted(filenames):
            if name.endswith((".pyc", ".pyo")) or name.startswith("."):
                continue
            path = Path(current) / name
            relative = path.relative_to(source)
            destination = target / relative
            destination.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, destination)
            copied.append((Path(RUNTIME_PACKAGE) / relative).as_posix())
    if not copied:
        raise OpenEnvError(
            f"The openenv runtime at {source} has no files.", hint="Reinstall the CLI."
        )
    (bundle / "pyproject.toml").write_text(_runtime_pyproject(version, copied), encoding="utf-8")
    return bundle


# -- the Dockerfile -------------------------------------------------------------------------


@dataclass(frozen=True)
class DockerStage:
    """One ``FROM`` of a Dockerfile: its image (as written), its ``AS`` name, and its lines."""

    image: str
    name: str | None
    first_line: int  # 0-based index of the FROM line
    last_line: int  # 0-based, inclusive (continuation lines)


@dataclass(frozen=True)
class _Instruction:
    keyword: str
    first: int
    last: int


_DIRECTIVE_ESCAPE = re.compile(r"^#\s*escape\s*=\s*(\S)\s*$", re.IGNORECASE)
_HEREDOC = re.compile(r"<<(-?)\s*([\"']?)([A-Za-z_][A-Za-z0-9_]*)\2")


def _escape_char(lines: list[str]) -> str:
    for line in lines:
        stripped = line.strip()
        if not stripped.startswith("#"):
            break
        match = _DIRECTIVE_ESCAPE.match(stripped)
        if match:
            return match.group(1)
    return "\\"


def _instructions(lines: list[str], escape: str) -> list[_Instruction]:
    found: list[_Instruction] = []
    i, count = 0, len(lines)
    while i < count:
        stripped = lines[i].strip()
        if not stripped or stripped.startswith("#"):
            i += 1
            continue
        keyword = stripped.split(None, 1)[0].upper()
        j = i
        while lines[j].rstrip().endswith(escape) and j + 1 < count:
            j += 1
            while j + 1 < count and (not lines[j].strip() or lines[j].strip().startswith("#")):
                j += 1
        if keyword in {"RUN", "COPY", "ADD"}:
            for heredoc in _HEREDOC.finditer("".join(lines[i : j + 1])):
                strip_tabs, delimiter = heredoc.group(1) == "-", heredoc.group(3)
                while j + 1 < count:
                    j += 1
                    body = lines[j].rstrip("\r\n")
                    if (body.lstrip("\t") if strip_tabs else body) == delimiter:
                        break
        found.append(_Instruction(keyword, i, j))
        i = j + 1
    return found


def _patterns(escape: str) -> tuple[re.Pattern[str], re.Pattern[str]]:
    gap = rf"(?:[ \t]|{re.escape(escape)}[ \t]*\r?\n)+"
    from_line = re.compile(
        rf"^(?P<pre>[ \t]*FROM(?:{gap}--\S+)*{gap})(?P<image>[^\s{re.escape(escape)}]+)(?P<rest>.*)\Z",
        re.IGNORECASE | re.DOTALL,
    )
    alias = re.compile(rf"^{gap}AS{gap}(?P<name>[^\s{re.escape(escape)}]+)", re.IGNORECASE)
    return from_line, alias


def dockerfile_stages(dockerfile_text: str) -> list[DockerStage]:
    """The stages of a Dockerfile, in order (a FROM the parser cannot read is left out)."""
    lines = dockerfile_text.splitlines(keepends=True)
    escape = _escape_char(lines)
    from_line, alias = _patterns(escape)
    stages = []
    for instruction in _instructions(lines, escape):
        if instruction.keyword != "FROM":
            continue
        match = from_line.match("".join(lines[instruction.first : instruction.last + 1]))
        if match is None:
            continue
        named = alias.match(match.group("rest"))
        stages.append(
            DockerStage(
                match.group("image"),
                named.group("name") if named else None,
                instruction.first,
                instruction.last,
            )
        )
    return stages


def _references(image: str, arg: str) -> bool:
    return re.search(rf"\$(?:{arg}\b|\{{{arg}(?:[:}}]))", image) is not None


def set_base_image(dockerfile_text: str, base_image: str) -> str:
    """Return ``dockerfile_text`` built on ``base_image`` instead of its Python base.

    - When a global ``ARG BASE_IMAGE`` (declared before the first FROM) is used by a FROM,
      its default becomes ``base_image``, so a plain ``docker build`` and a Space both use
      it; literal FROMs naming the ARG's old default change too.
    - Otherwise the base is found by following the final stage back through the stages it
      is built ``FROM`` to an external image, and every FROM naming that same image is
      rewritten (``--platform`` flags and ``AS`` names are kept). FROMs naming an earlier
      stage, ``COPY --from=...`` and stages on other images (``node:20 AS ui``) are left
      alone. When that chain ends at ``scratch``, the first external image is the base.

    Raises ``ValueError`` when ``base_image`` is not an image reference or the text has no FROM.
    """
    base_image = base_image.strip()
    if not base_image or any(ch.isspace() for ch in base_image):
        raise ValueError(f"{base_image!r} is not an image reference")
    lines = dockerfile_text.splitlines(keepends=True)
    escape = _escape_char(lines)
    instructions = _instructions(lines, escape)
    stages = dockerfile_stages(dockerfile_text)
    if not stages:
        raise ValueError("the Dockerfile has no FROM instruction")
    first_from = stages[0].first_line
    from_line, _ = _patterns(escape)

    arg_value = re.compile(r"(?<=\s)BASE_IMAGE(?:=(?:\"[^\"]*\"|'[^']*'|[^\s\"']*))?(?=\s|$)")
    if any(_references(stage.image, "BASE_IMAGE") for stage in stages):
        for instruction in instructions:
            if instruction.keyword != "ARG" or instruction.first >= first_from:
                continue
            text = "".join(lines[instruction.first : instruction.last + 1])
            match = arg_value.search(text)
            if match is None:
                continue
            old = match.group(0).partition("=")[2].strip("\"'")
            text = text[: match.start()] + f"BASE_IMAGE={base_image}" + text[match.end() :]
            _replace_lines(lines, instruction.first, instruction.last, text)
            if old:
                for stage in stages:
                    if stage.image == old:
                        _rewrite_from(lines, stage, from_line, base_image)
            return "".join(lines)

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
            _rewrite_from(lines, stage, from_line, base_image)
        if stage.name:
            declared.add(stage.name.lower())
    return "".join(lines)


def _replace_lines(lines: list[str], first: int, last: int, text: str) -> None:
    """Put ``text`` where lines ``first..last`` were, keeping the list's length."""
    lines[first : last + 1] = [text] + [""] * (last - first)


def _rewrite_from(
    lines: list[str], stage: DockerStage, from_line: re.Pattern[str], image: str
) -> None:
    match = from_line.match("".join(lines[stage.first_line : stage.last_line + 1]))
    if match is not None:
        _replace_lines(
            lines,
            stage.first_line,
            stage.last_line,
            match.group("pre") + image + match.group("rest"),
        )


# -- staging --------------------------------------------------------------------------------


def stage(
    project_dir: str | Path,
    dest: str | Path,
    *,
    dockerfile: str = "server/Dockerfile",
    base_image: str | None = None,
    excludes: Sequence[str] = (),
    dockerfile_at_root: bool = False,
) -> StagedContext:
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
    source_dockerfile = (root / dockerfile).resolve()
    if not source_dockerfile.is_relative_to(root):
        raise OpenEnvError(
            f"The Dockerfile {dockerfile} is outside the project {root}.",
            hint="Keep the Dockerfile inside the project (build.dockerfile in openenv.yaml).",
        )
    if not source_dockerfile.is_file():
        raise OpenEnvError(
            f"No Dockerfile at {dockerfile} in {root}.",
            hint="Create it (`openenv init` writes server/Dockerfile) or set build.dockerfile in openenv.yaml.",
        )
    text = source_dockerfile.read_text(encoding="utf-8")
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
    files = project_files(root, excludes)
    try:
        inside = destination.relative_to(root)
        files = [f for f in files if not (f == inside or f.is_relative_to(inside))]
    except ValueError:
        pass
    destination.mkdir(parents=True, exist_ok=True)
    for relative in files:
        target = destination / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(root / relative, target)
    dockerfile_relative = source_dockerfile.relative_to(root)
    (destination / dockerfile_relative).parent.mkdir(parents=True, exist_ok=True)
    (destination / dockerfile_relative).write_text(text, encoding="utf-8")
    if dockerfile_at_root:
        (destination / "Dockerfile").write_text(text, encoding="utf-8")
    write_runtime_bundle(destination)
    staged = sorted(
        p.relative_to(destination).as_posix() for p in destination.rglob("*") if p.is_file()
    )
    return StagedContext(
        root=destination,
        files=tuple(staged),
        dockerfile="Dockerfile" if dockerfile_at_root else dockerfile_relative.as_posix(),
        dockerfile_text=text,
        runtime_version=runtime_version(),
    )

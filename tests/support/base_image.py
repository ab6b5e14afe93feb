"""A local stand-in for the official ``python:3.11-slim`` image, built without a registry.

Base images cannot be pulled on our machines, so ``ensure_base_image()`` makes one:
debootstrap a minimal Debian bookworm (python3, pip, venv, CA certificates) into a folder,
make it behave like ``python:3.11-slim`` as far as our Dockerfiles need, and
``docker import`` it. Steps, each skipped when its result already exists:

1. rootfs tarball, cached under ``$OPENENV_TEST_CACHE`` (default ``~/.cache/openenv-tests``)
   and keyed by the recipe: the slow step (about a minute), needs root and debootstrap;
2. ``openenv-test/rootfs:<recipe key>``: the tarball imported with ENV/CMD/LABEL changes;
3. the requested tag: step 2 plus the CA certificates that this host trusts and Debian
   does not ship (e.g. a TLS-intercepting egress proxy's), so ``pip install`` inside
   containers and ``docker build`` RUN steps reach PyPI exactly as the host does.

A file lock keeps concurrent test processes from building at the same time.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import io
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import docker
import docker.errors
from docker.utils import parse_repository_tag

DEFAULT_TAG = "openenv-test/python:3.11-slim"
ROOTFS_REPOSITORY = "openenv-test/rootfs"
LABEL = "org.openenv.test-base"

SUITE = "bookworm"
PACKAGES = ("python3", "python3-pip", "python3-venv", "python-is-python3", "ca-certificates")
# Bump when the customisation below changes, so cached tarballs and images are rebuilt.
RECIPE_VERSION = 1

DEFAULT_MIRROR = "http://deb.debian.org/debian"
DEFAULT_SECURITY_MIRROR = "http://deb.debian.org/debian-security"
BUNDLE = "/etc/ssl/certs/ca-certificates.crt"
PATH_ENV = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

DEBOOTSTRAP_TIMEOUT = 900
LOCK_TIMEOUT = 1200

_PEM = re.compile(rb"-----BEGIN CERTIFICATE-----\s*(.+?)\s*-----END CERTIFICATE-----", re.DOTALL)


class BaseImageError(RuntimeError):
    """The base image could not be built; the message says why and what to do."""


def ensure_base_image(tag: str = DEFAULT_TAG, *, client: docker.DockerClient | None = None) -> str:
    """Return ``tag`` after making sure the image exists and is up to date.

    Builds it (see the module docstring) when missing or made from an older recipe or a
    different host CA set. Progress goes to stderr. Raises ``BaseImageError``.
    """
    own_client = client is None
    if client is None:
        client = docker.from_env(timeout=600)
    try:
        key = _image_key()
        if _has_image(client, tag, key):
            return tag
        with _file_lock(cache_dir() / "base-image.lock", LOCK_TIMEOUT):
            if _has_image(client, tag, key):  # another process built it while we waited
                return tag
            started = time.monotonic()
            rootfs_image = _ensure_rootfs_image(client)
            _build_final_image(client, rootfs_image, tag, key)
            _progress(f"{tag} ready in {time.monotonic() - started:.1f}s")
            return tag
    finally:
        if own_client:
            client.close()


def cache_dir() -> Path:
    """Where the rootfs tarball and the lock file live."""
    root = os.environ.get("OPENENV_TEST_CACHE") or Path.home() / ".cache" / "openenv-tests"
    path = Path(root)
    path.mkdir(parents=True, exist_ok=True)
    return path


def recipe_key() -> str:
    """Identifies what the rootfs contains; part of cache file and image names."""
    recipe = json.dumps({"suite": SUITE, "packages": PACKAGES, "version": RECIPE_VERSION})
    return hashlib.sha256(recipe.encode()).hexdigest()[:12]


# --- image steps -----------------------------------------------------------------------


def _image_key() -> str:
    host_cas = sorted(_certificates(_host_bundle().read_bytes()))
    return f"{recipe_key()}-{hashlib.sha256(b''.join(host_cas)).hexdigest()[:12]}"


def _has_image(client: docker.DockerClient, tag: str, key: str) -> bool:
    try:
        image = client.images.get(tag)
    except docker.errors.ImageNotFound:
        return False
    return (image.labels or {}).get(LABEL) == key


def _ensure_rootfs_image(client: docker.DockerClient) -> str:
    name = f"{ROOTFS_REPOSITORY}:{recipe_key()}"
    try:
        client.images.get(name)
        return name
    except docker.errors.ImageNotFound:
        pass
    tarball = _ensure_tarball()
    _progress(f"importing {tarball.name} as {name}")
    changes = [
        f"ENV PATH={PATH_ENV}",
        "ENV LANG=C.UTF-8",
        # Python tools that bring their own CA list (requests + certifi, uv) use the system one.
        f"ENV SSL_CERT_FILE={BUNDLE}",
        f"ENV REQUESTS_CA_BUNDLE={BUNDLE}",
        f"LABEL {LABEL}.recipe={recipe_key()}",
        'CMD ["python3"]',
    ]
    repository, image_tag = parse_repository_tag(name)
    client.api.import_image_from_file(
        str(tarball), repository=repository, tag=image_tag, changes=changes
    )
    client.images.get(name)  # raises if the import did not produce the image
    return name


def _build_final_image(client: docker.DockerClient, rootfs_image: str, tag: str, key: str) -> None:
    """``rootfs_image`` plus the host's extra CA certificates, labelled with ``key``."""
    image_cas = set(_certificates(_read_from_image(client, rootfs_image, BUNDLE)))
    extra = [pem for pem in _certificates(_host_bundle().read_bytes()) if pem not in image_cas]
    lines = [f"FROM {rootfs_image}"]
    files: dict[str, bytes] = {}
    if extra:
        _progress(f"adding {len(extra)} CA certificate(s) that this host trusts")
        for index, body in enumerate(extra):
            files[f"certs/host-{index}.crt"] = _pem_text(body)
        lines += [
            "COPY certs/ /usr/local/share/ca-certificates/openenv-host/",
            "RUN update-ca-certificates >/dev/null",
        ]
    lines.append(f"LABEL {LABEL}={key}")
    files["Dockerfile"] = ("\n".join(lines) + "\n").encode()
    context = io.BytesIO()
    with tarfile.open(fileobj=context, mode="w") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mode = 0o644
            tar.addfile(info, io.BytesIO(data))
    context.seek(0)
    try:
        client.images.build(
            fileobj=context, custom_context=True, tag=tag, rm=True, forcerm=True, pull=False
        )
    except docker.errors.BuildError as exc:
        log = "".join(
            str(chunk.get("stream") or chunk.get("error") or "") for chunk in exc.build_log
        )
        raise BaseImageError(
            f"adding CA certificates to {rootfs_image} failed: {exc}\n{log}"
        ) from exc


def _read_from_image(client: docker.DockerClient, image: str, path: str) -> bytes:
    container = client.containers.create(image, ["true"])
    try:
        stream, _ = container.get_archive(path)
        with tarfile.open(fileobj=io.BytesIO(b"".join(stream))) as tar:
            member = tar.next()
            data = tar.extractfile(member) if member else None
            return data.read() if data else b""
    finally:
        container.remove(force=True)


# --- rootfs tarball ----------------------------------------------------------------------


def _ensure_tarball() -> Path:
    tarball = cache_dir() / f"debian-{SUITE}-python3-{recipe_key()}.tar"
    if tarball.exists():
        _progress(f"using cached rootfs {tarball}")
        return tarball
    if os.geteuid() != 0:
        raise BaseImageError("building the test base image needs root (debootstrap, chroot)")
    if shutil.which("debootstrap") is None:
        raise BaseImageError(
            "debootstrap is not installed; run `bash .ci/docker-engine.sh` as root"
        )
    mirror, security = apt_mirrors()
    with tempfile.TemporaryDirectory(dir=cache_dir(), prefix="rootfs-") as work:
        rootfs = Path(work) / "rootfs"
        log = Path(work) / "debootstrap.log"
        _progress(f"debootstrap {SUITE} from {mirror} (about a minute)")
        started = time.monotonic()
        command = [
            "debootstrap",
            "--variant=minbase",
            f"--include={','.join(PACKAGES)}",
            SUITE,
            str(rootfs),
            mirror,
        ]
        try:
            returncode = _run_bounded(command, log, DEBOOTSTRAP_TIMEOUT)
        finally:
            _unmount_below(rootfs)  # debootstrap mounts /proc and /sys while it works
        if returncode is None:
            raise BaseImageError(f"debootstrap took over {DEBOOTSTRAP_TIMEOUT}s:\n{_tail(log)}")
        if returncode != 0:
            raise BaseImageError(f"debootstrap failed (exit {returncode}):\n{_tail(log)}")
        _progress(f"debootstrap done in {time.monotonic() - started:.1f}s; customising")
        _customise(rootfs, mirror, security)
        partial = Path(work) / "rootfs.tar"
        subprocess.run(
            [
                "tar",
                "--numeric-owner",
                "--xattrs",
                "--xattrs-include=*",
                "-C",
                str(rootfs),
                "--exclude=./dev/*",
                "--exclude=./proc/*",
                "--exclude=./sys/*",
                "--exclude=./tmp/*",
                "-cf",
                str(partial),
                ".",
            ],
            check=True,
            timeout=300,
        )
        os.replace(partial, tarball)
    _progress(f"cached rootfs {tarball} ({tarball.stat().st_size / 2**20:.0f} MiB)")
    return tarball


def _customise(rootfs: Path, mirror: str, security: str) -> None:
    """Make the debootstrapped tree behave like python:3.11-slim for our Dockerfiles."""
    # `pip install` system-wide as in the official image, which has no PEP 668 marker;
    # pip.conf keeps that true if an apt upgrade brings the marker back. The cert line
    # makes every pip (also one upgraded from PyPI or inside a venv) use the system CAs.
    for marker in rootfs.glob("usr/lib/python3*/EXTERNALLY-MANAGED"):
        marker.unlink()
    _write(rootfs, "etc/pip.conf", f"[global]\nbreak-system-packages = true\ncert = {BUNDLE}\n")

    _write(
        rootfs,
        "etc/apt/sources.list",
        f"deb {mirror} {SUITE} main\n"
        f"deb {mirror} {SUITE}-updates main\n"
        f"deb {security} {SUITE}-security main\n",
    )
    # Like Debian's own container images: no services started by package scripts, and
    # no docs, man pages or translations (also for packages installed later).
    _write(rootfs, "usr/sbin/policy-rc.d", "#!/bin/sh\nexit 101\n", mode=0o755)
    _write(
        rootfs,
        "etc/dpkg/dpkg.cfg.d/openenv-slim",
        "path-exclude /usr/share/doc/*\n"
        "path-include /usr/share/doc/*/copyright\n"
        "path-exclude /usr/share/man/*\n"
        "path-exclude /usr/share/info/*\n"
        "path-exclude /usr/share/locale/*\n"
        "path-include /usr/share/locale/locale.alias\n",
    )
    for folder in ("usr/share/man", "usr/share/info", "usr/share/locale"):
        for child in (rootfs / folder).glob("*"):
            if child.name != "locale.alias":
                _remove(child)
    for doc in (rootfs / "usr/share/doc").glob("*"):
        for child in doc.glob("*"):
            if child.name != "copyright":
                _remove(child)

    for pattern in ("var/cache/apt/archives/*.deb", "var/cache/apt/*.bin", "var/lib/apt/lists/*"):
        for path in rootfs.glob(pattern):
            if path.is_file() or path.is_symlink():
                path.unlink()
    for log in (rootfs / "var/log").rglob("*"):
        if log.is_file() and not log.is_symlink():
            log.write_bytes(b"")
    # Docker bind-mounts its own; don't ship this host's.
    for name in ("etc/resolv.conf", "etc/hostname", "etc/machine-id"):
        _write(rootfs, name, "")

    for needed in ("usr/bin/python", "usr/bin/pip", "usr/sbin/useradd", BUNDLE.lstrip("/")):
        if not (rootfs / needed).exists():
            raise BaseImageError(f"the debootstrapped rootfs lacks /{needed}")


def apt_mirrors() -> tuple[str, str]:
    """(Debian archive, security archive) from this machine's apt sources, or defaults.

    ``OPENENV_TEST_DEBIAN_MIRROR`` overrides the archive.
    """
    archive = security = None
    for suites, uri in _apt_sources():
        if any(suite.endswith("-security") for suite in suites):
            security = security or uri
        elif any(suite.isalpha() for suite in suites) and "/debian" in uri:
            archive = archive or uri
    archive = os.environ.get("OPENENV_TEST_DEBIAN_MIRROR") or archive or DEFAULT_MIRROR
    return archive.rstrip("/"), (security or DEFAULT_SECURITY_MIRROR).rstrip("/")


def _apt_sources() -> Iterator[tuple[list[str], str]]:
    """(suites, uri) of each http(s) ``deb`` source, one-line and deb822 formats."""
    apt = Path("/etc/apt")
    for path in [apt / "sources.list", *sorted((apt / "sources.list.d").glob("*.list"))]:
        with contextlib.suppress(OSError):
            for line in path.read_text().splitlines():
                words = [w for w in line.split("#", 1)[0].split() if not w.startswith("[")]
                if len(words) >= 3 and words[0] == "deb" and words[1].startswith("http"):
                    yield [words[2]], words[1]
    for path in sorted((apt / "sources.list.d").glob("*.sources")):
        with contextlib.suppress(OSError):
            for stanza in re.split(r"\n\s*\n", path.read_text()):
                fields = {}
                for line in stanza.splitlines():
                    if ":" in line and not line.startswith(("#", " ", "\t")):
                        name, value = line.split(":", 1)
                        fields[name.strip().lower()] = value.split()
                if "deb" in fields.get("types", []) and fields.get("enabled", ["yes"]) != ["no"]:
                    for uri in fields.get("uris", []):
                        if uri.startswith("http"):
                            yield fields.get("suites", []), uri


# --- helpers -----------------------------------------------------------------------------


def _host_bundle() -> Path:
    """The CA bundle this host's Python tools trust."""
    import ssl

    for candidate in (
        os.environ.get("SSL_CERT_FILE"),
        BUNDLE,
        ssl.get_default_verify_paths().cafile,
    ):
        if candidate and Path(candidate).is_file():
            return Path(candidate)
    raise BaseImageError("no CA bundle found on this host (install ca-certificates)")


def _certificates(bundle: bytes) -> list[bytes]:
    """The base64 bodies of the PEM certificates in ``bundle``, whitespace removed."""
    return [re.sub(rb"\s+", b"", match) for match in _PEM.findall(bundle)]


def _pem_text(body: bytes) -> bytes:
    lines = [body[i : i + 64] for i in range(0, len(body), 64)]
    return b"-----BEGIN CERTIFICATE-----\n" + b"\n".join(lines) + b"\n-----END CERTIFICATE-----\n"


@contextlib.contextmanager
def _file_lock(path: Path, timeout: float) -> Iterator[None]:
    with path.open("a") as handle:
        deadline = time.monotonic() + timeout
        announced = False
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise BaseImageError(
                        f"waited {timeout:.0f}s for {path}; is another build stuck?"
                    ) from None
                if not announced:
                    _progress("another process is building the base image; waiting")
                    announced = True
                time.sleep(1)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _write(rootfs: Path, relative: str, text: str, mode: int = 0o644) -> None:
    """Write a file inside ``rootfs``, replacing (never following) a symlink there."""
    path = rootfs / relative
    if path.is_symlink() or path.exists():
        path.unlink()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(mode)


def _run_bounded(command: list[str], log: Path, timeout: float) -> int | None:
    """Run ``command`` with output to ``log``; its exit code, or None if it timed out
    (then its whole process group is killed: debootstrap's dpkg runs in a chroot)."""
    with log.open("wb") as out:
        process = subprocess.Popen(
            command, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
        try:
            return process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            return None


def _unmount_below(root: Path) -> None:
    """Unmount whatever is still mounted inside ``root`` (deepest first)."""
    prefix = str(root.resolve()) + "/"
    with open("/proc/self/mounts") as mounts:
        points = [line.split()[1].replace("\\040", " ") for line in mounts]
    for point in sorted((p for p in points if p.startswith(prefix)), key=len, reverse=True):
        subprocess.run(["umount", "-l", point], check=False)


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink()


def _tail(path: Path, lines: int = 30) -> str:
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])


def _progress(message: str) -> None:
    print(f"[base-image] {message}", file=sys.stderr, flush=True)


if __name__ == "__main__":
    # `python -m tests.support.base_image [TAG]`: build ahead of a test run (e.g. in CI).
    print(ensure_base_image(*sys.argv[1:2]))

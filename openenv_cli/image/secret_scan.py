"""Look inside the files a build context or a Space upload would hold, for secrets.

Names alone cannot tell: a private key saved as ``notes.txt``, an AWS key pasted into
``server/config.py`` or a home folder packed into ``backup.tar.gz`` looks innocent on disk.
Every file that would ship is read (through :mod:`.safe_files`) and searched with the
detectors of ``detect-secrets`` that recognise a credential by its own shape, plus those of
:mod:`.secret_detectors` for the formats it lacks (:func:`.secret_detectors.detectors`).

- **Any size.** A file is read in chunks of :data:`CHUNK_BYTES` (the last
  :data:`OVERLAP_CHARS` characters of one chunk are searched again with the next, so a token
  across the boundary is still found): memory stays bounded whatever the size.
- **Encodings.** UTF-16 and UTF-32 text (with a byte-order mark, or UTF-16 recognised by its
  zero bytes) is decoded first; other text as UTF-8. In a binary file (a zero byte near the
  start) the runs of printable ASCII are searched, where a key or a token would be. Runs of
  base64 (:data:`MIN_BASE64_CHARS` or more, wrapped or not) are decoded and the result
  searched as well, up to :data:`MAX_BASE64_BYTES` per file.
- **Containers.** Recognised by their first bytes, not their names: gzip, bzip2, xz, tar and
  zip are opened and every member searched (its name against the deny list of
  :mod:`.secret_rules` too), and so are the cells and outputs of a Jupyter notebook
  (``.ipynb``). Opening is bounded: at most :data:`MAX_NESTING` containers deep,
  :data:`MAX_EXPANDED_BYTES` decompressed (and nothing expanding more than :data:`MAX_RATIO`
  times) and :data:`MAX_MEMBERS` members per file; a zip's declared sizes are checked before
  anything is decompressed. (Bytes stored without compression, as in a plain tar or a
  PyTorch checkpoint, cost what the file itself does and are not counted.)
  A file past a bound, an encrypted member or a broken archive cannot be scanned; it gives a
  :class:`Finding` with ``unscanned`` set, and is left out like a secret (named with
  ``--include-secret``, it ships).

Each detector's patterns run over a whole chunk at once (C-speed regular-expression searches),
and only a line they hit is handed to the detector itself to confirm.
"""

from __future__ import annotations

import base64
import binascii
import bz2
import codecs
import gzip
import io
import json
import lzma
import os
import re
import tarfile
import tempfile
import zipfile
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from functools import cache, partial
from pathlib import Path, PurePosixPath
from typing import IO, Any, cast

from detect_secrets.plugins.base import RegexBasedDetector

from openenv_cli.image.safe_files import open_inside
from openenv_cli.image.secret_detectors import detectors
from openenv_cli.image.secret_rules import secret_pattern

CHUNK_BYTES = 1 << 20
OVERLAP_CHARS = 4096
MAX_NESTING = 5
MAX_EXPANDED_BYTES = 64 << 20
MAX_RATIO = 100
_RATIO_FLOOR = 1 << 20  # what a small file expands to is never a bomb
MAX_MEMBERS = 10_000
MIN_BASE64_CHARS = 32
MAX_BASE64_BYTES = 32 << 20
# A base64 run reaching the end of a chunk is carried into the next window up to this length.
MAX_BASE64_CARRIED = 64 << 10
# A notebook is parsed (and its cells searched one by one) up to this size; past it, only its
# text is searched, as any other file's.
MAX_NOTEBOOK_BYTES = 64 << 20
_HEAD = 512
# A base64 run, possibly wrapped over lines (real newlines, or \n escaped in JSON).
_BASE64 = re.compile(r"[A-Za-z0-9+/_-]{16,}={0,2}(?:(?:\r?\n|\\n)[A-Za-z0-9+/_-]{16,}={0,2})*")
_BASE64_CHARS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/_-=\r\n\\"
_PRINTABLE = bytes(range(32, 127)) + b"\t\r\n"
_PRINTABLE_RUN = re.compile(rb"[\t\n\r\x20-\x7e]{12,}")
_IMAGES = (b"\x89PNG", b"\xff\xd8\xff", b"GIF8", b"RIFF")


@dataclass(frozen=True)
class Finding:
    """What a scan found: the detector's name for it, where (the line; for a member of an
    archive or a notebook's cell, ``inside``), never the value. ``unscanned``: the file could
    not be scanned, ``kind`` says why."""

    kind: str
    line: int = 0
    inside: str = ""
    unscanned: bool = False

    def describe(self) -> str:
        text = self.kind
        if self.inside:
            text += f" in {self.inside}"
        return f"{text} on line {self.line}" if self.line else text


class _Unscannable(Exception):
    """A file past a bound of the scan, or that cannot be opened; the message says which."""


class _Budget:
    """What one file may cost: bytes read out of containers, members, base64 decoded."""

    def __init__(self) -> None:
        self.expanded = 0
        self.members = 0
        self.decoded = 0

    def expand(self, size: int) -> None:
        self.expanded += size
        if self.expanded > MAX_EXPANDED_BYTES:
            raise _Unscannable(f"expands past {MAX_EXPANDED_BYTES >> 20} MiB")

    def member(self) -> None:
        self.members += 1
        if self.members > MAX_MEMBERS:
            raise _Unscannable(f"holds more than {MAX_MEMBERS} files")


class _Tally(io.RawIOBase):
    """The compressed bytes a decompressor reads, counted (to know how far it expands them)."""

    def __init__(self, source: IO[bytes]) -> None:
        self._source = source
        self.count = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        data = self._source.read(len(buffer))
        self.count += len(data)
        buffer[: len(data)] = data
        return len(data)


class _Counted(io.RawIOBase):
    """The bytes out of a decompressor, counted against the budget; ``compressed`` says how
    many bytes went in, for the ratio bound."""

    def __init__(
        self, source: io.BufferedIOBase | IO[bytes], budget: _Budget, compressed: Callable[[], int]
    ) -> None:
        self._source = source
        self._budget = budget
        self._compressed = compressed
        self._out = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        data = self._source.read(len(buffer))
        self._budget.expand(len(data))
        self._out += len(data)
        _check_ratio(self._out, self._compressed())
        buffer[: len(data)] = data
        return len(data)


def _check_ratio(expanded: int, compressed: int) -> None:
    if expanded > _RATIO_FLOOR and expanded > MAX_RATIO * max(compressed, 1):
        raise _Unscannable(f"expands more than {MAX_RATIO} times (a decompression bomb?)")


class _Prefixed(io.RawIOBase):
    """``head`` (already read to recognise the content), then the rest of ``source``."""

    def __init__(self, head: bytes, source: IO[bytes]) -> None:
        self._head = memoryview(head)
        self._source = source

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        if self._head:
            size = min(len(buffer), len(self._head))
            buffer[:size] = self._head[:size]
            self._head = self._head[size:]
            return size
        data = self._source.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)


@cache
def _compiled() -> tuple[tuple[RegexBasedDetector, tuple[re.Pattern[str], ...]], ...]:
    # The same patterns, with ^ and $ at every line: one search over the whole text.
    return tuple(
        (d, tuple(re.compile(p.pattern, p.flags | re.MULTILINE) for p in d.denylist))
        for d in detectors()
    )


def _detected(text: str, name: str) -> Finding | None:
    """The first finding of the detectors in ``text`` (the lowest line)."""
    first: Finding | None = None
    for detector, patterns in _compiled():
        for pattern in patterns:
            for match in pattern.finditer(text):
                start = text.rfind("\n", 0, match.start()) + 1
                end = text.find("\n", match.end())
                line = text[start : end if end >= 0 else len(text)]
                number = text.count("\n", 0, start) + 1
                if detector.analyze_line(filename=name, line=line, line_number=number):
                    if first is None or number < first.line:
                        first = Finding(str(detector.secret_type), number)
                    break
    return first


def _decoded_base64(run: str) -> bytes | None:
    clean = re.sub(r"\\n|\s", "", run).rstrip("=").replace("-", "+").replace("_", "/")
    if len(clean) < MIN_BASE64_CHARS:
        return None
    if len(clean) % 4 == 1:  # one character too many for whole bytes
        clean = clean[:-1]
    try:
        return base64.b64decode(clean + "=" * (-len(clean) % 4), validate=True)
    except binascii.Error:
        return None


def _worth_searching(data: bytes) -> bool:
    """Decoded base64 is searched when it is text, UTF-16 or a container; not when it is an
    image or noise (an identifier that merely looked like base64)."""
    if data.startswith(_IMAGES):
        return False
    if _container(data) or _utf16(data):
        return True
    sample = data[:4096]
    return len(sample.translate(None, _PRINTABLE)) <= len(sample) // 10


def _scan_window(text: str, name: str, budget: _Budget, depth: int) -> Finding | None:
    """The detectors over ``text``, then what its base64 runs decode to."""
    found = _detected(text, name)
    if found is not None or depth >= MAX_NESTING:
        return found
    for match in _BASE64.finditer(text):
        if budget.decoded >= MAX_BASE64_BYTES:
            break
        data = _decoded_base64(match.group())
        if data is None or not _worth_searching(data):
            continue
        budget.decoded += len(data)
        inner = _scan_stream(io.BytesIO(data), name, budget, depth + 1)
        if inner is not None:
            line = text.count("\n", 0, match.start()) + 1
            return replace(inner, kind=f"{inner.kind} (base64-encoded)", line=line)
    return None


def scan_text(text: str, name: str = "") -> Finding | None:
    """The first secret in ``text`` (base64 runs decoded too), or None."""
    try:
        return _scan_window(text, name, _Budget(), 0)
    except _Unscannable as exc:  # a base64 run decoding to an archive past the bounds
        return Finding(str(exc), unscanned=True)


def _utf16(head: bytes) -> str | None:
    """UTF-16 without a byte-order mark, recognised by its zero bytes in every other place."""
    sample = head[: len(head) - len(head) % 2]
    if len(sample) < 16:
        return None
    pairs = len(sample) // 2
    odd = sample[1::2].count(0)
    even = sample[0::2].count(0)
    if odd >= pairs * 0.6 and even <= pairs * 0.05:
        return "utf-16-le"
    if even >= pairs * 0.6 and odd <= pairs * 0.05:
        return "utf-16-be"
    return None


def _encoding(head: bytes) -> str:
    boms = (
        (codecs.BOM_UTF32_LE, "utf-32"),
        (codecs.BOM_UTF32_BE, "utf-32"),
        (codecs.BOM_UTF8, "utf-8-sig"),
        (codecs.BOM_UTF16_LE, "utf-16"),
        (codecs.BOM_UTF16_BE, "utf-16"),
    )
    for bom, encoding in boms:
        if head.startswith(bom):
            return encoding
    return _utf16(head) or "utf-8"


def _scan_text_stream(
    stream: IO[bytes], head: bytes, name: str, budget: _Budget, depth: int
) -> Finding | None:
    """A file of any size as text, chunk by chunk; a window keeps the end of the one before."""
    encoding = _encoding(head)
    if encoding == "utf-8" and b"\0" in head:
        return _scan_binary_stream(stream, name, budget, depth)
    decoder = codecs.getincrementaldecoder(encoding)(errors="replace")
    tail = ""
    lines_before = 0
    final = False
    while not final:
        chunk = stream.read(CHUNK_BYTES)
        final = not chunk
        text = decoder.decode(chunk, final=final)
        if not text and (final or not tail):
            continue
        window = tail + text
        found = _scan_window(window, name, budget, depth)
        if found is not None:
            return replace(found, line=found.line + lines_before) if found.line else found
        keep = max(len(window) - OVERLAP_CHARS, 0)
        # A base64 run reaching the end is carried whole (up to MAX_BASE64_CARRIED, from a
        # multiple of four characters into it) into the next window.
        run = len(window.rstrip(_BASE64_CHARS))
        if run < keep:
            floor = max(keep - MAX_BASE64_CARRIED, 0)
            keep = run if run >= floor else floor + (run - floor) % 4
        lines_before += window.count("\n", 0, keep)
        tail = window[keep:]
    return None


def _scan_binary_stream(
    stream: IO[bytes], name: str, budget: _Budget, depth: int
) -> Finding | None:
    """A binary file (a NUL byte near the start): only its runs of printable ASCII, where a
    key or a token would be, are searched (as ``strings`` shows them), one per line; a
    finding has no line number."""
    tail = b""
    while chunk := stream.read(CHUNK_BYTES):
        window = tail + chunk
        text = "\n".join(run.decode("ascii") for run in _PRINTABLE_RUN.findall(window))
        found = _scan_window(text, name, budget, depth) if text else None
        if found is not None:
            return replace(found, line=0)
        tail = window[-OVERLAP_CHARS:]
    return None


def _read_head(stream: IO[bytes]) -> bytes:
    head = b""
    while len(head) < _HEAD and (more := stream.read(_HEAD - len(head))):
        head += more
    return head


def _container(head: bytes) -> str | None:
    if head.startswith(b"\x1f\x8b"):
        return "gzip"
    if head.startswith(b"BZh") and head[4:10] in (b"1AY&SY", b"\x17rE8P\x90"):
        return "bzip2"
    if head.startswith(b"\xfd7zXZ\x00"):
        return "xz"
    if head.startswith((b"PK\x03\x04", b"PK\x05\x06")):
        return "zip"
    if head[257:262] == b"ustar":
        return "tar"
    return None


def _decompressor(kind: str, source: io.RawIOBase) -> io.BufferedIOBase:
    if kind == "gzip":
        return gzip.GzipFile(fileobj=source, mode="rb")
    if kind == "bzip2":
        return bz2.BZ2File(source, "rb")
    return lzma.LZMAFile(cast(IO[bytes], source), "rb")


def _scan_stream(stream: IO[bytes], name: str, budget: _Budget, depth: int) -> Finding | None:
    """Whatever ``stream`` holds: a container is opened, anything else searched as text."""
    seekable = stream.seekable()
    head = _read_head(stream)
    kind = _container(head)
    if kind is not None and depth >= MAX_NESTING:
        raise _Unscannable(f"archives nested more than {MAX_NESTING} deep")
    if seekable:
        stream.seek(0)
        whole: IO[bytes] = stream
    else:
        whole = io.BufferedReader(_Prefixed(head, stream), CHUNK_BYTES)
    try:
        if kind == "zip":
            return _scan_zip(whole, seekable, budget, depth + 1)
        if kind == "tar":
            return _scan_tar(whole, budget, depth + 1)
        if kind is not None:
            tally = _Tally(whole)
            with _decompressor(kind, tally) as decompressed:
                inner = io.BufferedReader(_Counted(decompressed, budget, lambda: tally.count))
                return _scan_stream(inner, PurePosixPath(name).stem, budget, depth + 1)
    except (
        tarfile.TarError,
        zipfile.BadZipFile,
        zlib.error,
        lzma.LZMAError,
        EOFError,
        OSError,
        ValueError,
        NotImplementedError,
    ) as exc:
        raise _Unscannable(f"a {kind} archive that cannot be read ({exc})") from exc
    if name.lower().endswith(".ipynb"):
        return _scan_notebook(whole, name, budget, depth)
    return _scan_text_stream(whole, head, name, budget, depth)


def _scan_member(stream: IO[bytes], member: str, budget: _Budget, depth: int) -> Finding | None:
    """A member of an archive: its name (the deny list, a token in it), then its content."""
    budget.member()
    clean = PurePosixPath(member.lstrip("/")).as_posix().removeprefix("./")
    pattern = secret_pattern(clean)
    if pattern is not None:
        return Finding(f"a file matching the secret rule {pattern}", inside=clean)
    found = _detected(clean, clean) or _scan_stream(
        io.BufferedReader(_Prefixed(b"", stream), CHUNK_BYTES), clean, budget, depth
    )
    if found is None:
        return None
    return replace(found, inside=f"{clean} › {found.inside}" if found.inside else clean)


def _scan_tar(stream: IO[bytes], budget: _Budget, depth: int) -> Finding | None:
    with tarfile.open(fileobj=stream, mode="r|") as archive:
        for info in archive:
            if not info.isfile():
                budget.member()
                continue
            if info.issparse():  # its holes read as zeros, as many as it claims: a bomb
                raise _Unscannable(f"a sparse member ({info.name})")
            member = archive.extractfile(info)
            if member is not None:
                found = _scan_member(member, info.name, budget, depth)
                if found is not None:
                    return found
    return None


def _scan_zip(stream: IO[bytes], seekable: bool, budget: _Budget, depth: int) -> Finding | None:
    with _seekable(stream, seekable) as source, zipfile.ZipFile(source) as archive:
        infos = archive.infolist()
        if budget.members + len(infos) > MAX_MEMBERS:
            raise _Unscannable(f"holds more than {MAX_MEMBERS} files")
        declared = sum(i.file_size for i in infos if i.compress_type != zipfile.ZIP_STORED)
        if budget.expanded + declared > MAX_EXPANDED_BYTES:
            raise _Unscannable(f"expands past {MAX_EXPANDED_BYTES >> 20} MiB")
        for info in infos:
            if info.compress_type != zipfile.ZIP_STORED:
                _check_ratio(info.file_size, info.compress_size)
        if archive.comment:
            found = _detected(archive.comment.decode("utf-8", errors="replace"), "")
            if found is not None:
                return replace(found, inside="the archive's comment")
        for info in infos:
            if info.is_dir():
                budget.member()
                continue
            if info.flag_bits & 0x1:
                raise _Unscannable(f"an encrypted member ({info.filename})")
            with archive.open(info) as member:
                if info.compress_type == zipfile.ZIP_STORED:  # read as it is on disk
                    found = _scan_member(member, info.filename, budget, depth)
                else:
                    size = partial(int, info.compress_size)
                    counted = io.BufferedReader(_Counted(member, budget, size), CHUNK_BYTES)
                    found = _scan_member(counted, info.filename, budget, depth)
            if found is not None:
                return found
    return None


@contextmanager
def _seekable(stream: IO[bytes], seekable: bool) -> Iterator[IO[bytes]]:
    """``stream`` itself when it can seek, else a temporary copy (zip needs to seek); its
    bytes were counted as they came out of a decompressor."""
    if seekable:
        yield stream
        return
    with tempfile.TemporaryFile() as copy:
        while chunk := stream.read(CHUNK_BYTES):
            copy.write(chunk)
        copy.seek(0)
        yield copy


def _notebook_texts(notebook: Any) -> Iterator[tuple[str, str]]:
    """``(where, text)`` for every cell's source and every output's text and data."""

    def joined(value: Any) -> str:
        if isinstance(value, list):
            return "".join(v for v in value if isinstance(v, str))
        return value if isinstance(value, str) else json.dumps(value)

    cells = notebook.get("cells") if isinstance(notebook, dict) else None
    for number, cell in enumerate(cells if isinstance(cells, list) else [], start=1):
        if not isinstance(cell, dict):
            continue
        yield f"cell {number}", joined(cell.get("source", ""))
        outputs = cell.get("outputs")
        for output in outputs if isinstance(outputs, list) else []:
            if not isinstance(output, dict):
                continue
            where = f"cell {number}'s output"
            for key in ("text", "traceback", "evalue"):
                if key in output:
                    yield where, joined(output[key])
            data = output.get("data")
            for value in data.values() if isinstance(data, dict) else []:
                yield where, joined(value)


def _scan_notebook(stream: IO[bytes], name: str, budget: _Budget, depth: int) -> Finding | None:
    """A notebook: its text as any file's, then each cell's source and outputs unescaped."""
    data = stream.read(MAX_NOTEBOOK_BYTES + 1)
    if len(data) > MAX_NOTEBOOK_BYTES:
        return _scan_text_stream(
            io.BufferedReader(_Prefixed(data, stream)), data[:_HEAD], name, budget, depth
        )
    found = _scan_text_stream(io.BytesIO(data), data[:_HEAD], name, budget, depth)
    if found is not None:
        return found
    try:
        notebook = json.loads(data)
    except ValueError:
        return None
    for where, text in _notebook_texts(notebook):
        found = _scan_window(text, name, budget, depth)
        if found is not None:
            return replace(found, inside=where)
    return None


def scan_file(root: Path, relative: str) -> Finding | None:
    """The first secret in the project file ``root/relative`` (of any size, archives and
    notebooks opened), a :class:`Finding` with ``unscanned`` set when it cannot be scanned,
    or None."""
    try:
        with os.fdopen(open_inside(root, relative), "rb") as source:
            return _scan_stream(source, relative, _Budget(), 0)
    except _Unscannable as exc:
        return Finding(str(exc), unscanned=True)
    except OSError:
        return None

"""Look inside the files a build context or a Space upload would hold, for secrets.

Names alone cannot tell: a private key saved as ``notes.txt`` or an AWS key pasted into
``server/config.py`` looks innocent on disk. Every file that would ship is read (through
:mod:`.safe_files`) and searched with the detectors of ``detect-secrets``, the ones that
recognise a credential by its own shape (private keys, AWS, GitHub, GitLab, Slack, Stripe,
PyPI, npm and OpenAI tokens, JSON Web Tokens, passwords in URLs, ...) plus one for Hugging Face
tokens. Its guessing detectors (high-entropy strings, ``password =`` keywords, public IP
addresses) are left out: they flag ordinary code and would stop ordinary pushes; so are the
four that only recognise a value beside a vendor's keyword (Cloudant, IBM, SoftLayer), which
cost more time than all the others together.

To stay fast, every detector runs only over text files up to :data:`MAX_SCANNED_BYTES`: its
patterns run once over the whole text (C-speed regular-expression searches), and only a line
they hit is handed to the detector itself to confirm. Binary and larger files are searched
for private-key blocks only (their first :data:`MAX_KEY_SEARCH_BYTES`).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class
from detect_secrets.plugins.base import RegexBasedDetector
from detect_secrets.plugins.private_key import PrivateKeyDetector

from openenv_cli.image.safe_files import open_inside, read_inside

MAX_SCANNED_BYTES = 1 << 20
MAX_KEY_SEARCH_BYTES = 64 << 20
_CHUNK = 1 << 20
# Detectors of detect-secrets left out: those that guess rather than recognise (too many false
# alarms), and those that need a vendor's keyword next to the value, whose look-behind patterns
# cost more than all the others together.
_LEFT_OUT = frozenset(
    {
        "IPPublicDetector",
        "KeywordDetector",
        "CloudantDetector",
        "IbmCloudIamDetector",
        "IbmCosHmacDetector",
        "SoftlayerDetector",
    }
)
_BINARY_PROBE = 8192


class HuggingFaceTokenDetector(RegexBasedDetector):
    """Hugging Face user and organisation access tokens (``hf_...``, ``api_org_...``)."""

    secret_type = "Hugging Face Token"
    denylist = (re.compile(r"\b(?:hf_|api_org_)[A-Za-z0-9]{30,}\b"),)


@dataclass(frozen=True)
class Finding:
    """What a scan found: the detector's name for it and the line (never the value)."""

    kind: str
    line: int

    def describe(self) -> str:
        return f"{self.kind} on line {self.line}" if self.line else self.kind


@cache
def _detectors() -> tuple[tuple[RegexBasedDetector, tuple[re.Pattern[str], ...]], ...]:
    mapping: dict[str, Any] = dict(get_mapping_from_secret_type_to_class())
    classes: list[type[RegexBasedDetector]] = [
        cls
        for cls in mapping.values()
        if isinstance(cls, type)
        and issubclass(cls, RegexBasedDetector)
        and cls.__name__ not in _LEFT_OUT
    ]
    classes.append(HuggingFaceTokenDetector)
    found = []
    for cls in classes:
        detector = cls()
        # The same patterns, with ^ and $ at every line: one search over the whole text.
        patterns = tuple(re.compile(p.pattern, p.flags | re.MULTILINE) for p in detector.denylist)
        found.append((detector, patterns))
    return tuple(found)


def scan_text(text: str, name: str = "") -> Finding | None:
    """The first secret in ``text``, or None."""
    first: Finding | None = None
    for detector, patterns in _detectors():
        for pattern in patterns:
            for match in pattern.finditer(text):
                start = text.rfind("\n", 0, match.start()) + 1
                end = text.find("\n", match.start())
                line = text[start : end if end >= 0 else len(text)]
                number = text.count("\n", 0, start) + 1
                if detector.analyze_line(filename=name, line=line, line_number=number):
                    if first is None or number < first.line:
                        first = Finding(str(detector.secret_type), number)
                    break
    return first


def looks_binary(data: bytes) -> bool:
    """Binary files (a NUL byte near the start) are not scanned line by line."""
    return b"\0" in data[:_BINARY_PROBE]


@cache
def _private_key_markers() -> re.Pattern[bytes]:
    return re.compile(b"|".join(re.escape(p.pattern.encode()) for p in PrivateKeyDetector.denylist))


def _private_key_in(root: Path, relative: str) -> Finding | None:
    """Binary and large files: only the private-key markers, over the first
    :data:`MAX_KEY_SEARCH_BYTES`, read in chunks (a key block is plain text wherever it sits)."""
    markers = _private_key_markers()
    overlap = 64
    seen = 0
    tail = b""
    with os.fdopen(open_inside(root, relative), "rb") as source:
        while seen < MAX_KEY_SEARCH_BYTES and (chunk := source.read(_CHUNK)):
            seen += len(chunk)
            window = tail + chunk
            if markers.search(window):
                return Finding(str(PrivateKeyDetector.secret_type), 0)
            tail = window[-overlap:]
    return None


def scan_file(root: Path, relative: str) -> Finding | None:
    """The first secret in the project file ``root/relative``, or None: every detector over a
    text file up to :data:`MAX_SCANNED_BYTES`; the private-key markers alone over binary and
    larger files (their first :data:`MAX_KEY_SEARCH_BYTES`)."""
    try:
        if (root / relative).lstat().st_size > MAX_SCANNED_BYTES:
            return _private_key_in(root, relative)
        data = read_inside(root, relative)
        if looks_binary(data):
            return _private_key_in(root, relative)
    except OSError:
        return None
    return scan_text(data.decode("utf-8", errors="replace"), relative)

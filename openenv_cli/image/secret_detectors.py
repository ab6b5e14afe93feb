"""Detectors for the credential formats ``detect-secrets`` does not know yet.

Each is a ``detect-secrets`` plugin (a :class:`RegexBasedDetector`): a published, prefixed
format that recognises a credential by its own shape, so an ordinary project never trips it.
Every pattern starts with its literal prefix (no ``\b`` before it): the regular-expression
engine then skips ahead to that prefix instead of trying every position, several times faster.
:func:`detectors` is the full set the content scan runs: detect-secrets' own recognisers
plus these.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Generator
from functools import cache
from typing import Any

from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class
from detect_secrets.plugins.base import RegexBasedDetector

# Detectors of detect-secrets left out: those that guess rather than recognise (too many false
# alarms), and those that need a vendor's keyword next to the value, whose look-behind patterns
# cost more than all the others together.
LEFT_OUT = frozenset(
    {
        "IPPublicDetector",
        "KeywordDetector",
        "CloudantDetector",
        "IbmCloudIamDetector",
        "IbmCosHmacDetector",
        "SoftlayerDetector",
    }
)


class HuggingFaceTokenDetector(RegexBasedDetector):
    """Hugging Face user and organisation access tokens (``hf_...``, ``api_org_...``)."""

    secret_type = "Hugging Face Token"
    denylist = (
        re.compile(r"hf_[A-Za-z0-9]{30,}\b"),
        re.compile(r"api_org_[A-Za-z0-9]{30,}\b"),
    )


class AnthropicKeyDetector(RegexBasedDetector):
    """Anthropic API, admin and OAuth keys (``sk-ant-api03-...``, ``sk-ant-admin01-...``)."""

    secret_type = "Anthropic API Key"
    denylist = (re.compile(r"sk-ant-[a-z]{3,8}\d{2}-[A-Za-z0-9_-]{40,}"),)


class OpenAIProjectKeyDetector(RegexBasedDetector):
    """OpenAI project, service-account and admin keys (``sk-proj-...``, ``sk-svcacct-...``,
    ``sk-admin-...``), whose inner ``-`` and ``_`` the older OpenAI detector does not allow."""

    secret_type = "OpenAI Token"
    denylist = (re.compile(r"sk-(?:proj|svcacct|admin)-[A-Za-z0-9_-]{40,}"),)


class GoogleApiKeyDetector(RegexBasedDetector):
    """Google Cloud / Gemini / Maps API keys (``AIza`` and 35 more characters)."""

    secret_type = "Google API Key"
    denylist = (re.compile(r"AIza[0-9A-Za-z_-]{35}(?![0-9A-Za-z_-])"),)


class GoogleOAuthSecretDetector(RegexBasedDetector):
    """Google OAuth client secrets (``GOCSPX-...``)."""

    secret_type = "Google OAuth Client Secret"
    denylist = (re.compile(r"GOCSPX-[A-Za-z0-9_-]{28}(?![A-Za-z0-9_-])"),)


class GitHubFineGrainedTokenDetector(RegexBasedDetector):
    """GitHub fine-grained personal access tokens (``github_pat_...``)."""

    secret_type = "GitHub Token"
    denylist = (re.compile(r"github_pat_[A-Za-z0-9_]{60,}"),)


class GroqKeyDetector(RegexBasedDetector):
    """Groq API keys (``gsk_...``)."""

    secret_type = "Groq API Key"
    denylist = (re.compile(r"gsk_[A-Za-z0-9]{48,}\b"),)


class ReplicateTokenDetector(RegexBasedDetector):
    """Replicate API tokens (``r8_...``)."""

    secret_type = "Replicate API Token"
    denylist = (re.compile(r"r8_[A-Za-z0-9]{37}\b"),)


class XaiKeyDetector(RegexBasedDetector):
    """xAI API keys (``xai-...``)."""

    secret_type = "xAI API Key"
    denylist = (re.compile(r"xai-[A-Za-z0-9]{70,}\b"),)


class DockerRegistryAuthDetector(RegexBasedDetector):
    """A Docker registry login as Docker writes it (``"auth": "<base64 of user:password>"``,
    or an ``"identitytoken"``), whatever the file is called; also inside escaped JSON."""

    secret_type = "Docker Registry Credentials"
    denylist = (
        re.compile(r'"auth\\?"\s*:\s*\\?"([A-Za-z0-9+/]{4,}={0,2})\\?"'),
        re.compile(r'"identitytoken\\?"\s*:\s*\\?"([^"\\\s]{8,})\\?"'),
    )

    def analyze_string(self, string: str) -> Generator[str, None, None]:
        for match in self.denylist[0].finditer(string):
            if _user_and_password(match.group(1)):
                yield match.group(1)
        for match in self.denylist[1].finditer(string):
            yield match.group(1)


def _user_and_password(value: str) -> bool:
    """Whether ``value`` is base64 of ``user:password`` (both parts non-empty, printable)."""
    try:
        decoded = base64.b64decode(value, validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return False
    user, colon, password = decoded.partition(":")
    return bool(colon and user and password and decoded.isprintable())


EXTRA_DETECTORS: tuple[type[RegexBasedDetector], ...] = (
    HuggingFaceTokenDetector,
    AnthropicKeyDetector,
    OpenAIProjectKeyDetector,
    GoogleApiKeyDetector,
    GoogleOAuthSecretDetector,
    GitHubFineGrainedTokenDetector,
    GroqKeyDetector,
    ReplicateTokenDetector,
    XaiKeyDetector,
    DockerRegistryAuthDetector,
)


@cache
def detectors() -> tuple[RegexBasedDetector, ...]:
    """One instance of every detector the scan runs: detect-secrets' recognisers (not those
    in :data:`LEFT_OUT`) and :data:`EXTRA_DETECTORS`."""
    mapping: dict[str, Any] = dict(get_mapping_from_secret_type_to_class())
    classes: list[type[RegexBasedDetector]] = [
        cls
        for cls in mapping.values()
        if isinstance(cls, type)
        and issubclass(cls, RegexBasedDetector)
        and cls.__name__ not in LEFT_OUT
    ]
    return tuple(cls() for cls in (*classes, *EXTRA_DETECTORS))

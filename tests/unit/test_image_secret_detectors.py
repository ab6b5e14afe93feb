"""The detectors openenv adds to detect-secrets: each format found, look-alikes not.

Every value is built at run time from pieces (none is a real key)."""

from __future__ import annotations

import base64
import json

import pytest

from openenv_cli.image.secret_detectors import EXTRA_DETECTORS, LEFT_OUT, detectors
from openenv_cli.image.secret_scan import scan_text

BODY = "Zq7Xv2Lm9Kp4Rt8Wn3Hy6Bc1Df5Gj0Ns"  # 32 letters and digits


@pytest.mark.parametrize(
    ("value", "kind"),
    [
        ("hf" + "_" + BODY + "ab", "Hugging Face Token"),
        ("api" + "_org_" + BODY + "ab", "Hugging Face Token"),
        ("sk-" + "ant-api03-" + BODY * 3 + "AA", "Anthropic API Key"),
        ("sk-" + "ant-admin01-" + BODY * 2, "Anthropic API Key"),
        ("sk-" + "proj-" + BODY + "_-" + BODY + "T3Blbk" + "FJ" + "-" + BODY, "OpenAI Token"),
        ("sk-" + "svcacct-" + BODY + "_" + BODY, "OpenAI Token"),
        ("AI" + "za" + BODY + "Q_z", "Google API Key"),
        ("GOC" + "SPX-" + BODY[:28], "Google OAuth Client Secret"),
        ("github" + "_pat_" + BODY[:22] + "_" + BODY + BODY[:27], "GitHub Token"),
        ("gs" + "k_" + BODY + BODY[:20], "Groq API Key"),
        ("r8" + "_" + BODY + BODY[:5], "Replicate API Token"),
        ("xa" + "i-" + BODY * 2 + BODY[:16], "xAI API Key"),
    ],
    ids=lambda value: value if " " in value else value[:4],  # no whole key in a test's name
)
def test_each_format_is_found_with_its_name(value: str, kind: str) -> None:
    finding = scan_text(f'config = {{\n  "key": "{value}",\n}}\n')
    assert finding is not None and (finding.kind, finding.line) == (kind, 2)


def test_a_docker_login_is_found_under_any_name_and_in_escaped_json() -> None:
    auth = base64.b64encode(b"robot:" + BODY.encode()).decode()
    plain = '{\n  "auths": {\n    "registry.example.com": {\n      "auth": "%s"\n    }\n  }\n}\n'
    finding = scan_text(plain % auth, "registry.json")
    assert finding is not None and (finding.kind, finding.line) == (
        "Docker Registry Credentials",
        4,
    )
    escaped = json.dumps({"text": [json.dumps({"auths": {"r": {"auth": auth}}})]})
    assert '\\"auth\\"' in escaped and scan_text(escaped) is not None
    token = json.dumps({"auths": {"r": {"identitytoken": BODY}}})
    assert scan_text(token) is not None


@pytest.mark.parametrize(
    "text",
    [
        '"auth": "bm90IGEgbG9naW4="',  # base64 of "not a login": no colon
        '"auth": "basic"',
        "skip = sk-ant-short",
        "AIza_is_a_prefix_only",
        "github_pat_",
        "hf_short",
        "x = 'gsk_' + name",
        "def github_pat_helper(): ...",
    ],
)
def test_look_alikes_are_not_secrets(text: str) -> None:
    assert scan_text(text) is None


def test_the_full_set_is_detect_secrets_recognisers_plus_ours() -> None:
    names = {type(d).__name__ for d in detectors()}
    assert {cls.__name__ for cls in EXTRA_DETECTORS} <= names
    assert not names & LEFT_OUT
    assert {"AWSKeyDetector", "PrivateKeyDetector", "GitHubTokenDetector"} <= names

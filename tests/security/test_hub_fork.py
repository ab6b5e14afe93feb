"""`openenv fork` and secrets: a source's secrets are never copied, and the values given with
`--secret` (and the token) appear in no output, error, traceback or debug log of the client.

The real CLI runs in a subprocess with the real `huggingface_hub` client against the local
Hub-compatible test server (tests/support/hub_server.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.hub_server import ALICE_TOKEN, BOB_TOKEN, HubHandle, isolated_hub
from tests.support.hub_spaces import pushed_space, run_cli

pytestmark = [pytest.mark.integration, pytest.mark.hub]

SOURCE_SECRET = "bobs-source-s3cr3t-4410"
SECRET = "alices-fork-s3cr3t-9052"
ENV_SECRET = "from-env-s3cr3t-1187"


@pytest.fixture
def hub(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[HubHandle]:
    with isolated_hub(monkeypatch, tmp_path / "hf_home") as handle:
        pushed_space(handle, tmp_path, "echo_env", BOB_TOKEN, secrets={"API_KEY": SOURCE_SECRET})
        yield handle


def test_the_source_secrets_are_not_copied(hub: HubHandle, tmp_path: Path) -> None:
    done = run_cli(hub, tmp_path, "fork", "bob/echo_env", token=ALICE_TOKEN)
    assert done.returncode == 0, done.stderr
    assert hub.state.repo("alice/echo_env").secrets == {}
    assert SOURCE_SECRET not in done.stdout + done.stderr


def test_secret_values_stay_out_of_output_debug_logs_and_errors(
    hub: HubHandle, tmp_path: Path
) -> None:
    results = [
        # a success with every debug switch on: huggingface_hub's HF_DEBUG logs request bodies
        run_cli(
            hub,
            tmp_path,
            "--debug",
            "fork",
            "bob/echo_env",
            "--secret",
            f"API_KEY={SECRET}",
            "--secret",
            "FROM_ENV",
            token=ALICE_TOKEN,
            HF_DEBUG="1",
            FROM_ENV=ENV_SECRET,
        ),
        # a failure after the secrets were read: the target exists now
        run_cli(
            hub,
            tmp_path,
            "--debug",
            "fork",
            "bob/echo_env",
            "--secret",
            f"API_KEY={SECRET}",
            token=ALICE_TOKEN,
            HF_DEBUG="1",
        ),
        # the token itself is the secret and the Hub rejects it
        run_cli(
            hub,
            tmp_path,
            "--debug",
            "fork",
            "bob/echo_env",
            "--repo-id",
            "other",
            "--token",
            SECRET,
            token=None,
            HF_DEBUG="1",
        ),
        # a mistyped entry may be the secret itself: it is not quoted back
        run_cli(hub, tmp_path, "fork", "bob/echo_env", "--secret", SECRET, token=ALICE_TOKEN),
    ]
    assert [r.returncode for r in results] == [0, 1, 1, 2]
    assert hub.state.repo("alice/echo_env").secret_values() == {
        "API_KEY": SECRET,
        "FROM_ENV": ENV_SECRET,
    }
    for result in results:
        for text in (result.stdout, result.stderr):
            assert SECRET not in text and ENV_SECRET not in text and ALICE_TOKEN not in text
    assert "Send:" in results[0].stderr  # the debug log was on, and said nothing secret

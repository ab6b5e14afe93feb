"""`openenv fork`: the plain function and the CLI, with the real `huggingface_hub` client
against the local Hub-compatible test server (its duplicate endpoint)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from openenv_cli.errors import OpenEnvError, UsageError
from openenv_cli.hub.fork import fork_space
from tests.support.hub_server import (
    ALICE_READ_TOKEN,
    ALICE_TOKEN,
    BOB_TOKEN,
    ORG,
    HubHandle,
    isolated_hub,
)
from tests.support.hub_spaces import pushed_space, run_cli

SECRET = "fork-s3cr3t-Value-7781"


@pytest.fixture
def hub(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[HubHandle]:
    with isolated_hub(monkeypatch, tmp_path / "hf_home") as handle:
        yield handle


@pytest.fixture
def bobs_env(hub: HubHandle, tmp_path: Path) -> str:
    """bob/echo_env, deployed by `openenv push` code, with a variable and a secret."""
    pushed_space(
        hub,
        tmp_path,
        "echo_env",
        BOB_TOKEN,
        variables={"LOG_LEVEL": "debug"},
        secrets={"API_KEY": SECRET},
        hardware="t4-small",
    )
    return "bob/echo_env"


def test_fork_copies_files_sdk_and_variables_never_secrets(hub: HubHandle, bobs_env: str) -> None:
    result = fork_space(bobs_env, ALICE_TOKEN, endpoint=hub.url)

    source, fork = hub.state.repo(bobs_env), hub.state.repo("alice/echo_env")
    assert result.repo_id == "alice/echo_env" and result.source == bobs_env
    assert fork.files == source.files and "openenv.yaml" in fork.files
    assert result.sdk == "docker" == fork.effective_sdk
    assert fork.variable_values()["LOG_LEVEL"] == "debug"
    assert "LOG_LEVEL" in result.variables
    assert fork.secrets == {} and result.secrets_set == []
    # alice cannot read bob's secret names: the result says it does not know them
    assert result.secrets_missing is None
    assert fork.hardware == "cpu-basic" == result.hardware  # never the source's paid hardware
    assert result.openenv and not result.notes
    assert not result.private and not fork.private  # as the source is
    assert result.urls.page == f"{hub.url}/spaces/alice/echo_env"
    assert result.urls.app == "https://alice-echo-env.hf.space"
    assert [c.oid for c in fork.commits] == [c.oid for c in source.commits]


def test_fork_to_a_new_id_private_with_settings(hub: HubHandle, bobs_env: str) -> None:
    result = fork_space(
        f"{hub.url}/spaces/{bobs_env}",
        ALICE_TOKEN,
        repo_id=f"{ORG}/echo-copy",
        private=True,
        hardware="cpu-upgrade",
        variables={"LOG_LEVEL": "info", "EXTRA": "1"},
        secrets={"API_KEY": SECRET},
        endpoint=hub.url,
    )
    fork = hub.state.repo(f"{ORG}/echo-copy")
    assert result.repo_id == f"{ORG}/echo-copy" and result.private and fork.private
    assert fork.hardware == "cpu-upgrade"
    assert fork.variable_values()["LOG_LEVEL"] == "info" and fork.variable_values()["EXTRA"] == "1"
    assert fork.secret_values() == {"API_KEY": SECRET}
    assert result.secrets_set == ["API_KEY"] and result.variables_set == ["EXTRA", "LOG_LEVEL"]
    assert not hub.state.has_repo("alice/echo_env")


def test_fork_of_a_private_source_stays_private_unless_asked(
    hub: HubHandle, tmp_path: Path
) -> None:
    pushed_space(
        hub, tmp_path, "secret_env", ALICE_TOKEN, repo_id=f"{ORG}/secret_env", private=True
    )
    kept = fork_space(f"{ORG}/secret_env", ALICE_TOKEN, endpoint=hub.url)
    public = fork_space(
        f"{ORG}/secret_env", ALICE_TOKEN, repo_id="public_env", private=False, endpoint=hub.url
    )
    assert kept.private and hub.state.repo("alice/secret_env").private
    assert not public.private and not hub.state.repo("alice/public_env").private


def test_owner_learns_which_secrets_were_not_copied(hub: HubHandle, tmp_path: Path) -> None:
    pushed_space(
        hub, tmp_path, "echo_env", ALICE_TOKEN, secrets={"API_KEY": SECRET, "DB_PASSWORD": "pw-123"}
    )
    result = fork_space(
        "alice/echo_env",
        ALICE_TOKEN,
        repo_id="echo_two",
        secrets={"API_KEY": SECRET},
        endpoint=hub.url,
    )
    assert result.secrets_missing == ["DB_PASSWORD"]
    assert hub.state.repo("alice/echo_two").secret_values() == {"API_KEY": SECRET}


def test_existing_target_is_refused_and_a_free_name_suggested(
    hub: HubHandle, tmp_path: Path, bobs_env: str
) -> None:
    hub.state.create_repo("alice/echo_env")
    hub.state.create_repo("alice/echo_env-fork")
    before = hub.state.repo("alice/echo_env").sha
    with pytest.raises(OpenEnvError) as caught:
        fork_space(bobs_env, ALICE_TOKEN, endpoint=hub.url)
    assert "alice/echo_env already exists" in caught.value.message
    assert caught.value.hint == "Choose a new name: --repo-id alice/echo_env-fork-2."
    assert hub.state.repo("alice/echo_env").sha == before
    assert not hub.state.calls("POST", "/duplicate")


def test_when_every_proposed_name_is_taken_the_hint_says_to_pick_one(
    hub: HubHandle, bobs_env: str
) -> None:
    for name in ["echo_env", "echo_env-fork", *(f"echo_env-fork-{n}" for n in range(2, 6))]:
        hub.state.create_repo(f"alice/{name}")
    with pytest.raises(OpenEnvError) as caught:
        fork_space(bobs_env, ALICE_TOKEN, endpoint=hub.url)
    assert caught.value.hint == "Choose a new name: --repo-id alice/NEW_NAME."


def test_a_target_taken_between_check_and_copy_is_refused_too(
    hub: HubHandle, bobs_env: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from huggingface_hub import HfApi

    real = HfApi.repo_exists
    monkeypatch.setattr(
        HfApi,
        "repo_exists",
        lambda self, repo_id, **kw: False if repo_id == "alice/late" else real(self, repo_id, **kw),
    )
    hub.state.create_repo("alice/late")
    with pytest.raises(OpenEnvError, match="alice/late already exists") as caught:
        fork_space(bobs_env, ALICE_TOKEN, repo_id="late", endpoint=hub.url)
    assert "--repo-id alice/late-fork" in (caught.value.hint or "")
    assert [c.status for c in hub.state.calls("POST", "/duplicate")] == [409]


@pytest.mark.parametrize(
    ("source", "token", "words"),
    [
        ("bob/missing_env", ALICE_TOKEN, ["bob/missing_env was not found", "openenv discover"]),
        ("bob/echo_env", ALICE_READ_TOKEN, ["read-only"]),
        ("bob/echo_env", "hf_not_a_token", ["rejected the token"]),
    ],
)
def test_fork_errors(
    hub: HubHandle, bobs_env: str, source: str, token: str, words: list[str]
) -> None:
    with pytest.raises(OpenEnvError) as caught:
        fork_space(source, token, endpoint=hub.url)
    for word in words:
        assert word in str(caught.value)
    assert not hub.state.calls("POST", "/duplicate")


def test_fork_refuses_a_foreign_namespace_and_bad_ids(hub: HubHandle, bobs_env: str) -> None:
    with pytest.raises(OpenEnvError, match="bob cannot fork to alice/x"):
        fork_space(bobs_env, BOB_TOKEN, repo_id="alice/x", endpoint=hub.url)
    with pytest.raises(UsageError, match="NAMESPACE/NAME"):
        fork_space("echo_env", ALICE_TOKEN, endpoint=hub.url)
    with pytest.raises(UsageError, match="not a Space"):
        fork_space("datasets/bob/echo_env", ALICE_TOKEN, endpoint=hub.url)
    with pytest.raises(UsageError, match="hardware flavor"):
        fork_space(bobs_env, ALICE_TOKEN, hardware="h100-x99", endpoint=hub.url)
    with pytest.raises(UsageError, match="Space variables are public"):
        fork_space(bobs_env, ALICE_TOKEN, variables={"HF_TOKEN": "x"}, endpoint=hub.url)
    assert not hub.state.calls("POST", "/duplicate")


def test_a_private_source_of_someone_else_is_not_found(hub: HubHandle, tmp_path: Path) -> None:
    pushed_space(hub, tmp_path, "hidden_env", BOB_TOKEN, private=True)
    with pytest.raises(OpenEnvError, match="bob/hidden_env was not found"):
        fork_space("bob/hidden_env", ALICE_TOKEN, endpoint=hub.url)


def test_a_source_not_tagged_openenv_is_forked_with_a_note(hub: HubHandle) -> None:
    hub.state.create_repo("bob/plain", sdk="gradio")
    result = fork_space("bob/plain", ALICE_TOKEN, endpoint=hub.url)
    assert result.sdk == "gradio" and not result.openenv
    assert "not tagged 'openenv'" in result.notes[0]


# -- the CLI --------------------------------------------------------------------------------


def test_cli_fork(hub: HubHandle, tmp_path: Path, bobs_env: str) -> None:
    done = run_cli(
        hub,
        tmp_path,
        "fork",
        bobs_env,
        "--repo-id",
        "alice/my_echo",
        "--private",
        "--secret",
        f"API_KEY={SECRET}",
        "-e",
        "MODE=fast",
        token=ALICE_TOKEN,
    )
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "Forked bob/echo_env to alice/my_echo (private, docker SDK, cpu-basic)" in out
    assert "variables copied from the source:" in out and "LOG_LEVEL" in out
    assert "variables set: MODE" in out and "secrets set: API_KEY" in out
    assert f"{hub.url}/spaces/alice/my_echo" in out and "https://alice-my-echo.hf.space" in out
    assert "secrets are never copied" in out
    assert SECRET not in out + done.stderr and ALICE_TOKEN not in out + done.stderr
    fork = hub.state.repo("alice/my_echo")
    assert fork.private and fork.secret_values() == {"API_KEY": SECRET}


def test_cli_fork_existing_target(hub: HubHandle, tmp_path: Path, bobs_env: str) -> None:
    hub.state.create_repo("alice/echo_env")
    done = run_cli(hub, tmp_path, "fork", bobs_env, token=ALICE_TOKEN)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert "alice/echo_env already exists" in done.stderr
    assert "--repo-id alice/echo_env-fork" in done.stderr


def test_cli_fork_not_logged_in(hub: HubHandle, tmp_path: Path, bobs_env: str) -> None:
    done = run_cli(hub, tmp_path, "fork", bobs_env, token=None)
    assert done.returncode == 1 and "not logged in" in done.stderr
    assert "hf auth login" in done.stderr
    assert not hub.state.calls("POST", "/duplicate")


def test_clients_before_duplicate_repo_use_duplicate_space(
    hub: HubHandle, bobs_env: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """huggingface_hub < 1.x names the call `duplicate_space(from_id, to_id, *, private,
    hardware, secrets, variables, ...)` and sends the older `private` flag: the same request."""
    from huggingface_hub import HfApi
    from huggingface_hub.utils import get_session, hf_raise_for_status

    def duplicate_space(
        self: HfApi,
        from_id: str,
        to_id: str | None = None,
        *,
        private: bool | None = None,
        token: object = None,
        exist_ok: bool = False,
        hardware: str | None = None,
        storage: str | None = None,
        sleep_time: int | None = None,
        secrets: list[dict[str, str]] | None = None,
        variables: list[dict[str, str]] | None = None,
    ) -> None:
        given = {
            "private": private,
            "hardware": hardware,
            "secrets": secrets,
            "variables": variables,
        }
        payload = {"repository": to_id, **{k: v for k, v in given.items() if v is not None}}
        response = get_session().post(
            f"{self.endpoint}/api/spaces/{from_id}/duplicate",
            headers=self._build_hf_headers(),
            json=payload,
        )
        hf_raise_for_status(response)

    monkeypatch.delattr(HfApi, "duplicate_repo")
    monkeypatch.setattr(HfApi, "duplicate_space", duplicate_space, raising=False)
    result = fork_space(
        bobs_env,
        ALICE_TOKEN,
        repo_id="old_client",
        private=True,
        secrets={"API_KEY": SECRET},
        endpoint=hub.url,
    )
    fork = hub.state.repo("alice/old_client")
    assert result.private and fork.private and fork.secret_values() == {"API_KEY": SECRET}
    with pytest.raises(OpenEnvError, match="alice/old_client already exists"):
        fork_space(bobs_env, ALICE_TOKEN, repo_id="old_client", endpoint=hub.url)

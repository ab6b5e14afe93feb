"""`openenv discover`: the plain function and the CLI, with the real `huggingface_hub` client
against the local Hub-compatible test server (its Space listing)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from openenv_cli.errors import OpenEnvError
from openenv_cli.hub.discover import MAX_MANIFEST_BYTES, discover_spaces
from tests.support.hub_server import (
    ALICE_TOKEN,
    BOB_TOKEN,
    ORG,
    HubHandle,
    HubRequest,
    isolated_hub,
)
from tests.support.hub_spaces import pushed_space, run_cli


@pytest.fixture
def hub(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[HubHandle]:
    with isolated_hub(monkeypatch, tmp_path / "hf_home") as handle:
        yield handle


def listings(hub: HubHandle) -> list[HubRequest]:
    return [r for r in hub.state.calls("GET") if r.path == "/api/spaces"]


@pytest.fixture
def spaces(hub: HubHandle, tmp_path: Path) -> HubHandle:
    """Three environment Spaces made by `openenv push` (one private, one on a GPU), and Spaces
    that are not environments."""
    pushed_space(hub, tmp_path, "echo_env", ALICE_TOKEN, version="1.2.0")
    pushed_space(hub, tmp_path, "maze_env", BOB_TOKEN, version="0.3.1", hardware="t4-small")
    pushed_space(hub, tmp_path, "vault_env", ALICE_TOKEN, repo_id=f"{ORG}/vault_env", private=True)
    hub.state.create_repo("bob/gradio-demo", sdk="gradio")  # no openenv tag
    hub.state.create_repo("bob/echo_env", kind="model")  # not a Space
    return hub


def test_discover_lists_what_push_made_with_version_and_hardware(spaces: HubHandle) -> None:
    found = {s.id: s for s in discover_spaces(endpoint=spaces.url)}
    assert set(found) == {"alice/echo_env", "bob/maze_env"}  # no token: public only
    echo, maze = found["alice/echo_env"], found["bob/maze_env"]
    assert echo.version == "1.2.0" and maze.version == "0.3.1"
    assert echo.hardware == "cpu-basic" and maze.hardware == "t4-small"
    assert echo.sdk == "docker" and not echo.private and "openenv" in echo.tags
    assert echo.url == f"{spaces.url}/spaces/alice/echo_env"
    assert echo.app_url == "https://alice-echo-env.hf.space"
    assert echo.stage and echo.last_modified


def test_a_token_shows_the_private_spaces_it_can_read(spaces: HubHandle) -> None:
    alice = {s.id for s in discover_spaces(token=ALICE_TOKEN, endpoint=spaces.url)}
    bob = {s.id for s in discover_spaces(token=BOB_TOKEN, endpoint=spaces.url)}
    assert f"{ORG}/vault_env" in alice and f"{ORG}/vault_env" not in bob
    vault = next(
        s for s in discover_spaces(token=ALICE_TOKEN, endpoint=spaces.url) if "vault" in s.id
    )
    assert vault.private and vault.version == "0.1.0"


def test_query_author_and_limit(spaces: HubHandle) -> None:
    assert [s.id for s in discover_spaces("MAZE", endpoint=spaces.url)] == ["bob/maze_env"]
    assert [s.id for s in discover_spaces("alice/", endpoint=spaces.url)] == ["alice/echo_env"]
    assert [s.id for s in discover_spaces(author="bob", endpoint=spaces.url)] == ["bob/maze_env"]
    assert discover_spaces("nothing-like-this", endpoint=spaces.url) == []
    assert len(discover_spaces(limit=1, endpoint=spaces.url)) == 1
    listing = listings(spaces)[-1]
    assert "filter=openenv" in listing.query and "limit=1" in listing.query


def test_sort_orders(spaces: HubHandle) -> None:
    def order(sort: str) -> list[str]:
        return [s.id for s in discover_spaces(sort=sort, endpoint=spaces.url, versions=False)]

    assert order("created") == ["bob/maze_env", "alice/echo_env"]  # newest first
    echo = spaces.state.repo("alice/echo_env")
    spaces.state.commit(echo, author="alice", summary="touch", writes={"x.txt": b"x"})
    assert order("updated") == ["alice/echo_env", "bob/maze_env"]
    sent = [r.query for r in listings(spaces)]
    assert "sort=createdAt" in sent[0] and "sort=lastModified" in sent[1]


def test_pages_are_followed(spaces: HubHandle) -> None:
    spaces.state.page_size = 1
    assert len(discover_spaces(endpoint=spaces.url, versions=False)) == 2
    assert len(listings(spaces)) == 2


def test_without_versions_one_request(spaces: HubHandle) -> None:
    before = len(spaces.state.requests)
    found = discover_spaces(endpoint=spaces.url, versions=False)
    assert {s.version for s in found} == {None}
    assert len(spaces.state.requests) == before + 1


def test_a_space_without_a_readable_manifest_has_no_version(spaces: HubHandle) -> None:
    repo = spaces.state.repo("bob/maze_env")
    spaces.state.commit(
        repo, author="bob", summary="huge", writes={"openenv.yaml": b"#" * (MAX_MANIFEST_BYTES + 1)}
    )
    echo = spaces.state.repo("alice/echo_env")
    spaces.state.commit(echo, author="alice", summary="bad", writes={"openenv.yaml": b"[: nope"})
    found = {s.id: s.version for s in discover_spaces(endpoint=spaces.url)}
    assert found == {"alice/echo_env": None, "bob/maze_env": None}
    # the oversized file was never downloaded, only its size asked
    downloads = spaces.state.calls("GET", "/spaces/bob/maze_env/resolve/")
    assert downloads == []


def test_a_bad_token_is_one_clear_error(spaces: HubHandle) -> None:
    with pytest.raises(OpenEnvError, match="rejected the token"):
        discover_spaces(token="hf_wrong", token_source="HF_TOKEN", endpoint=spaces.url)


# -- the CLI --------------------------------------------------------------------------------


def test_cli_table(spaces: HubHandle, tmp_path: Path) -> None:
    done = run_cli(spaces, tmp_path, "discover", token=None)
    assert done.returncode == 0, done.stderr
    rows = {line.split()[0]: line.split() for line in done.stdout.splitlines() if "/" in line}
    assert rows["alice/echo_env"][1:3] == ["1.2.0", "cpu-basic"]
    assert rows["bob/maze_env"][1:3] == ["0.3.1", "t4-small"]
    assert "openenv fork SPACE" in done.stdout


def test_cli_json_with_a_query_and_a_token(spaces: HubHandle, tmp_path: Path) -> None:
    done = run_cli(spaces, tmp_path, "discover", "vault", "--json", token=ALICE_TOKEN)
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["query"] == "vault" and data["tag"] == "openenv"
    [vault] = data["spaces"]
    assert vault["id"] == f"{ORG}/vault_env" and vault["private"] is True
    assert vault["version"] == "0.1.0" and vault["hardware"] == "cpu-basic"
    assert ALICE_TOKEN not in done.stdout + done.stderr


def test_cli_nothing_found_and_bad_sort(spaces: HubHandle, tmp_path: Path) -> None:
    done = run_cli(spaces, tmp_path, "discover", "zzz", "--author", "carol", token=None)
    assert done.returncode == 0 and "No environment Spaces matching 'zzz' by carol" in done.stdout
    bad = run_cli(spaces, tmp_path, "discover", "--sort", "stars", token=None)
    assert bad.returncode == 2 and "likes, updated, created" in bad.stderr

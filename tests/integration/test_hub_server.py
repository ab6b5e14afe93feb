"""The local test Hub, driven by the real `huggingface_hub` client over HTTP."""

from __future__ import annotations

import base64
import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.hub_server import (
    ALICE_READ_TOKEN,
    ALICE_TOKEN,
    BOB_TOKEN,
    INVALID_CREDENTIALS,
    ORG,
    HubHandle,
    git_blob_sha1,
    isolate_hf_client,
    isolated_hub,
    running_hub,
)


@pytest.fixture
def hub(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[HubHandle]:
    with isolated_hub(monkeypatch, tmp_path / "hf_home") as handle:
        yield handle


README = """---
title: Echo Env
emoji: 🤖
colorFrom: blue
colorTo: green
sdk: docker
app_port: 8000
pinned: false
tags:
  - openenv
---
# Echo Env
"""
DOCKERFILE = 'FROM python:3.11-slim\nCMD ["python", "-m", "server.app"]\n'


def _project(root: Path) -> Path:
    (root / "server").mkdir(parents=True)
    (root / "README.md").write_text(README, encoding="utf-8")
    (root / "Dockerfile").write_text(DOCKERFILE)
    (root / "server" / "app.py").write_text("print('hello')\n")
    (root / "server" / "__init__.py").write_text("")
    return root


def _space(hub: HubHandle, repo_id: str = "alice/echo-env", private: bool = False) -> str:
    hub.api().create_repo(repo_id, repo_type="space", space_sdk="docker", private=private)
    return repo_id


def _raw(
    hub: HubHandle, method: str, path: str, body: bytes, token: str, content_type: str
) -> tuple[int, dict]:
    request = urllib.request.Request(
        hub.url + path,
        data=body,
        method=method,
        headers={"Authorization": f"Bearer {token}", "Content-Type": content_type},
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, {
            **json.loads(exc.read()),
            "_headers": {k.lower(): v for k, v in exc.headers.items()},
        }


def test_whoami_reports_user_orgs_and_role(hub: HubHandle) -> None:
    me = hub.api(ALICE_TOKEN).whoami()
    assert me["name"] == "alice"
    assert [org["name"] for org in me["orgs"]] == [ORG]
    assert me["auth"]["accessToken"]["role"] == "write"
    assert hub.api(ALICE_READ_TOKEN).whoami()["auth"]["accessToken"]["role"] == "read"


def test_create_private_and_public_spaces(hub: HubHandle) -> None:
    api = hub.api()
    url = api.create_repo("alice/secret-env", repo_type="space", space_sdk="docker", private=True)
    assert url == f"{hub.url}/spaces/alice/secret-env"
    assert url.repo_id == "alice/secret-env"
    api.create_repo("alice/open-env", repo_type="space", space_sdk="docker", private=False)
    api.create_repo(f"{ORG}/team-env", repo_type="space", space_sdk="docker")

    assert hub.state.repo("alice/secret-env").private
    assert not hub.state.repo("alice/open-env").private
    assert hub.state.repo(f"{ORG}/team-env").sdk == "docker"
    info = api.space_info("alice/secret-env")
    assert (info.private, info.sdk, info.runtime.stage) == (True, "docker", "NO_APP_FILE")
    assert [s.rfilename for s in info.siblings] == [".gitattributes"]
    assert api.space_info("alice/open-env").private is False

    # Private Spaces are invisible to others and to anonymous callers; public ones are not.
    from huggingface_hub.errors import RepositoryNotFoundError

    with pytest.raises(RepositoryNotFoundError):
        hub.api(BOB_TOKEN).space_info("alice/secret-env")
    with pytest.raises(RepositoryNotFoundError):
        hub.api(False).space_info("alice/secret-env")
    assert hub.api(False).space_info("alice/open-env").id == "alice/open-env"
    with pytest.raises(RepositoryNotFoundError):
        api.space_info("alice/missing")


def test_existing_space_conflicts_unless_exist_ok(hub: HubHandle) -> None:
    from huggingface_hub.errors import HfHubHTTPError

    api = hub.api()
    repo_id = _space(hub, private=True)
    api.create_repo(repo_id, repo_type="space", space_sdk="docker", private=False, exist_ok=True)
    assert hub.state.repo(repo_id).private, "exist_ok must not change the visibility"
    with pytest.raises(HfHubHTTPError) as excinfo:
        api.create_repo(repo_id, repo_type="space", space_sdk="docker")
    assert excinfo.value.response.status_code == 409
    assert len(hub.state.repo(repo_id).commits) == 1


def test_update_repo_settings_changes_visibility(hub: HubHandle) -> None:
    api = hub.api()
    repo_id = _space(hub, private=True)
    api.update_repo_settings(repo_id, private=False, repo_type="space")
    assert api.space_info(repo_id).private is False
    api.update_repo_settings(repo_id, private=True, repo_type="space")
    assert hub.state.repo(repo_id).private


def test_upload_folder_round_trip(hub: HubHandle, tmp_path: Path) -> None:
    from huggingface_hub import hf_hub_download

    api = hub.api()
    repo_id = _space(hub)
    folder = _project(tmp_path / "project")
    info = api.upload_folder(
        repo_id=repo_id, repo_type="space", folder_path=folder, commit_message="Deploy env"
    )

    repo = hub.state.repo(repo_id)
    assert info.oid == repo.sha
    assert repo.head.summary == "Deploy env"
    assert repo.text("README.md") == README
    assert sorted(repo.head.added) == [
        "Dockerfile",
        "README.md",
        "server/__init__.py",
        "server/app.py",
    ]
    assert hub.state.calls("POST", "/api/validate-yaml"), "a README upload is validated first"

    expected = {".gitattributes", "Dockerfile", "README.md", "server/__init__.py", "server/app.py"}
    assert set(api.list_repo_files(repo_id, repo_type="space")) == expected
    tree = {entry.path for entry in api.list_repo_tree(repo_id, repo_type="space")}
    assert tree == {".gitattributes", "Dockerfile", "README.md", "server"}
    server = {entry.path for entry in api.list_repo_tree(repo_id, "server", repo_type="space")}
    assert server == {"server/__init__.py", "server/app.py"}

    space = api.space_info(repo_id)
    assert space.sha == repo.sha
    assert space.sdk == "docker"
    assert space.card_data.title == "Echo Env"
    assert space.card_data.app_port == 8000
    assert space.card_data.tags == ["openenv"]
    assert {s.rfilename for s in space.siblings} == expected

    downloaded = hf_hub_download(
        repo_id,
        "Dockerfile",
        repo_type="space",
        endpoint=hub.url,
        token=ALICE_TOKEN,
        cache_dir=tmp_path / "cache",
    )
    assert Path(downloaded).read_text() == DOCKERFILE
    assert hub.state.calls("HEAD", "/spaces/alice/echo-env/resolve/main/Dockerfile")

    from huggingface_hub.errors import EntryNotFoundError

    with pytest.raises(EntryNotFoundError):
        hf_hub_download(
            repo_id,
            "missing.txt",
            repo_type="space",
            endpoint=hub.url,
            token=ALICE_TOKEN,
            cache_dir=tmp_path / "cache",
        )


def test_identical_upload_makes_no_commit(hub: HubHandle, tmp_path: Path) -> None:
    api = hub.api()
    repo_id = _space(hub)
    folder = _project(tmp_path / "project")
    api.upload_folder(repo_id=repo_id, repo_type="space", folder_path=folder)
    commits_before = len(hub.state.repo(repo_id).commits)
    posts_before = len(hub.state.calls("POST", "/commit/"))

    api.upload_folder(repo_id=repo_id, repo_type="space", folder_path=folder)
    assert len(hub.state.repo(repo_id).commits) == commits_before
    assert len(hub.state.calls("POST", "/commit/")) == posts_before

    (folder / "server" / "app.py").write_text("print('changed')\n")
    api.upload_folder(repo_id=repo_id, repo_type="space", folder_path=folder)
    assert hub.state.repo(repo_id).head.added == ["server/app.py"], "only the changed file travels"


def test_delete_patterns_remove_remote_files(hub: HubHandle, tmp_path: Path) -> None:
    api = hub.api()
    repo_id = _space(hub)
    folder = _project(tmp_path / "project")
    (folder / "old.txt").write_text("stale\n")
    api.upload_folder(repo_id=repo_id, repo_type="space", folder_path=folder)
    (folder / "old.txt").unlink()

    api.upload_folder(
        repo_id=repo_id, repo_type="space", folder_path=folder, delete_patterns=["*.txt"]
    )
    repo = hub.state.repo(repo_id)
    assert repo.head.deleted == ["old.txt"]
    assert "old.txt" not in api.list_repo_files(repo_id, repo_type="space")
    assert "README.md" in repo.files


def test_upload_file_uses_single_commit_path(hub: HubHandle) -> None:
    api = hub.api()
    repo_id = _space(hub)
    api.upload_file(
        path_or_fileobj=README.encode(),
        path_in_repo="README.md",
        repo_id=repo_id,
        repo_type="space",
    )
    assert hub.state.repo(repo_id).text("README.md") == README


def test_invalid_readme_front_matter_is_rejected(hub: HubHandle) -> None:
    repo_id = _space(hub)
    with pytest.raises(ValueError, match=r"Invalid metadata in README\.md"):
        hub.api().upload_file(
            path_or_fileobj=b"---\ntitle: [unclosed\n---\n",
            path_in_repo="README.md",
            repo_id=repo_id,
            repo_type="space",
        )
    assert len(hub.state.repo(repo_id).commits) == 1


def test_space_variables_and_secrets(hub: HubHandle) -> None:
    api = hub.api()
    repo_id = _space(hub)
    variables = api.add_space_variable(
        repo_id, "ENABLE_WEB_INTERFACE", "true", description="web UI"
    )
    assert variables["ENABLE_WEB_INTERFACE"].value == "true"
    api.add_space_variable(repo_id, "MAX_STEPS", "50")
    assert set(api.get_space_variables(repo_id)) == {"ENABLE_WEB_INTERFACE", "MAX_STEPS"}
    api.delete_space_variable(repo_id, "MAX_STEPS")
    assert hub.state.repo(repo_id).variable_values() == {"ENABLE_WEB_INTERFACE": "true"}

    api.add_space_secret(repo_id, "API_KEY", "s3cr3t-value")
    assert hub.state.repo(repo_id).secret_values() == {"API_KEY": "s3cr3t-value"}
    assert set(api.get_space_secrets(repo_id)) == {"API_KEY"}
    logged = json.dumps([vars(r) for r in hub.state.requests])
    assert "s3cr3t-value" not in logged
    api.delete_space_secret(repo_id, "API_KEY")
    assert hub.state.repo(repo_id).secrets == {}


def test_space_runtime_builds_after_a_commit(hub: HubHandle, tmp_path: Path) -> None:
    api = hub.api()
    repo_id = _space(hub)
    assert api.get_space_runtime(repo_id).stage == "NO_APP_FILE"
    api.upload_folder(
        repo_id=repo_id, repo_type="space", folder_path=_project(tmp_path / "project")
    )
    assert api.get_space_runtime(repo_id).stage == "BUILDING"
    running = api.get_space_runtime(repo_id)
    assert running.stage == "RUNNING"
    assert running.hardware == "cpu-basic"

    hub.state.build_result = "BUILD_ERROR"
    hub.state.build_polls = 0
    api.restart_space(repo_id)
    assert api.get_space_runtime(repo_id).stage == "BUILD_ERROR"


def test_space_hardware_request(hub: HubHandle) -> None:
    from huggingface_hub import SpaceHardware
    from huggingface_hub.errors import HfHubHTTPError

    api = hub.api()
    repo_id = _space(hub)
    runtime = api.request_space_hardware(repo_id, SpaceHardware.CPU_UPGRADE)
    assert runtime.requested_hardware == "cpu-upgrade"
    assert hub.state.repo(repo_id).hardware == "cpu-upgrade"
    with pytest.raises(HfHubHTTPError):
        hub.api(BOB_TOKEN).request_space_hardware(repo_id, SpaceHardware.T4_SMALL)
    assert hub.state.repo(repo_id).hardware == "cpu-upgrade"


def test_bad_token_is_an_auth_error(hub: HubHandle) -> None:
    from huggingface_hub.errors import HfHubHTTPError, RepositoryNotFoundError

    bad = hub.api("hf_not_a_real_token")
    with pytest.raises(HfHubHTTPError, match="Invalid user token") as excinfo:
        bad.whoami()
    assert excinfo.value.response.status_code == 401

    repo_id = _space(hub)
    for call in (
        lambda: bad.create_repo("alice/other", repo_type="space", space_sdk="docker"),
        lambda: bad.space_info(repo_id),
        lambda: bad.add_space_secret(repo_id, "K", "v"),
    ):
        with pytest.raises(HfHubHTTPError) as excinfo:
            call()
        assert not isinstance(excinfo.value, RepositoryNotFoundError), (
            "a bad token is not a missing repo"
        )
        assert excinfo.value.response.status_code == 401
        assert excinfo.value.response.headers["X-Error-Message"] == INVALID_CREDENTIALS


def test_writing_into_another_namespace_is_forbidden(hub: HubHandle, tmp_path: Path) -> None:
    from huggingface_hub.errors import HfHubHTTPError

    alice = hub.api(ALICE_TOKEN)
    with pytest.raises(HfHubHTTPError) as excinfo:
        alice.create_repo("bob/env", repo_type="space", space_sdk="docker")
    assert excinfo.value.response.status_code == 403
    with pytest.raises(HfHubHTTPError) as excinfo:
        alice.create_repo("bob/env", repo_type="space", space_sdk="docker", exist_ok=True)
    assert excinfo.value.response.status_code == 403
    assert not hub.state.has_repo("bob/env")

    hub.api(BOB_TOKEN).create_repo("bob/env", repo_type="space", space_sdk="docker")
    with pytest.raises(HfHubHTTPError) as excinfo:
        alice.upload_folder(
            repo_id="bob/env", repo_type="space", folder_path=_project(tmp_path / "p")
        )
    assert excinfo.value.response.status_code == 403
    with pytest.raises(HfHubHTTPError) as excinfo:
        alice.add_space_variable("bob/env", "K", "v")
    assert excinfo.value.response.status_code == 403
    assert hub.state.calls("POST", "/commit/") == []

    with pytest.raises(HfHubHTTPError) as excinfo:
        hub.api(ALICE_READ_TOKEN).create_repo("alice/env", repo_type="space", space_sdk="docker")
    assert excinfo.value.response.status_code == 403


def test_lfs_commit_entries_get_a_clear_error(hub: HubHandle) -> None:
    repo_id = _space(hub)
    payload = b"\n".join(
        json.dumps(line).encode()
        for line in (
            {"key": "header", "value": {"summary": "lfs", "description": ""}},
            {
                "key": "lfsFile",
                "value": {"path": "model.bin", "algo": "sha256", "oid": "0" * 64, "size": 3},
            },
        )
    )
    status, body = _raw(
        hub,
        "POST",
        f"/api/spaces/{repo_id}/commit/main",
        payload,
        ALICE_TOKEN,
        "application/x-ndjson",
    )
    assert status == 400
    assert "LFS" in body["error"] and body["_headers"]["x-error-message"] == body["error"]
    assert len(hub.state.repo(repo_id).commits) == 1


def test_preupload_oid_is_the_git_blob_sha1(hub: HubHandle) -> None:
    repo_id = _space(hub)
    hub.api().upload_file(
        path_or_fileobj=b"hello\n", path_in_repo="a.txt", repo_id=repo_id, repo_type="space"
    )
    body = json.dumps(
        {
            "files": [
                {"path": "a.txt", "sample": base64.b64encode(b"hello\n").decode(), "size": 6},
                {"path": "new.txt", "sample": "", "size": 0},
            ]
        }
    ).encode()
    status, answer = _raw(
        hub, "POST", f"/api/spaces/{repo_id}/preupload/main", body, ALICE_TOKEN, "application/json"
    )
    assert status == 200
    assert answer["files"] == [
        {
            "path": "a.txt",
            "uploadMode": "regular",
            "shouldIgnore": False,
            "oid": git_blob_sha1(b"hello\n"),
        },
        {"path": "new.txt", "uploadMode": "regular", "shouldIgnore": False, "oid": None},
    ]
    # git's own object id for "hello\n"
    assert git_blob_sha1(b"hello\n") == "ce013625030ba8dba906f756967f9e9ca394464a"


def test_older_clients_private_flag_forms(hub: HubHandle) -> None:
    body = {
        "name": "legacy-env",
        "organization": "alice",
        "type": "space",
        "sdk": "docker",
        "private": True,
    }
    status, answer = _raw(
        hub, "POST", "/api/repos/create", json.dumps(body).encode(), ALICE_TOKEN, "application/json"
    )
    assert status == 200 and answer["url"] == f"{hub.url}/spaces/alice/legacy-env"
    assert hub.state.repo("alice/legacy-env").private
    status, _ = _raw(
        hub,
        "PUT",
        "/api/spaces/alice/legacy-env/settings",
        b'{"private": false}',
        ALICE_TOKEN,
        "application/json",
    )
    assert status == 200 and not hub.state.repo("alice/legacy-env").private


def test_duplicate_copies_history_and_variables_never_secrets(hub: HubHandle) -> None:
    repo_id = "bob/source-env"
    source = hub.state.create_repo(repo_id, visibility="private")
    hub.state.commit(source, author="bob", summary="files", writes={"README.md": README.encode()})
    hub.api(BOB_TOKEN).add_space_variable(repo_id, "LEVEL", "3")
    hub.api(BOB_TOKEN).add_space_secret(repo_id, "API_KEY", "bob-secret-1")
    hub.state.repo(repo_id).visibility = "public"
    body = {
        "repository": "alice/copy",
        "hardware": "t4-small",
        "variables": [{"key": "MODE", "value": "x"}],
        "secrets": [{"key": "TOKEN_B", "value": "alice-secret"}],
    }
    status, answer = _raw(
        hub,
        "POST",
        f"/api/spaces/{repo_id}/duplicate",
        json.dumps(body).encode(),
        ALICE_TOKEN,
        "application/json",
    )
    assert status == 200 and answer["url"] == f"{hub.url}/spaces/alice/copy"
    copy = hub.state.repo("alice/copy")
    assert [c.oid for c in copy.commits] == [c.oid for c in source.commits]
    assert copy.files == source.files and copy.sdk == "docker" and not copy.private
    assert copy.variable_values() == {"LEVEL": "3", "MODE": "x"}
    assert copy.secret_values() == {"TOKEN_B": "alice-secret"}
    assert copy.hardware == "t4-small"
    # private=True in the request wins over the source's visibility
    status, _ = _raw(
        hub,
        "POST",
        f"/api/spaces/{repo_id}/duplicate",
        b'{"repository": "alice/copy2", "private": true}',
        ALICE_TOKEN,
        "application/json",
    )
    assert status == 200 and hub.state.repo("alice/copy2").private
    assert hub.state.repo("alice/copy2").hardware == "cpu-basic"


@pytest.mark.parametrize(
    ("body", "token", "status"),
    [
        ({"repository": "alice/echo-env"}, ALICE_TOKEN, 409),  # the target exists
        ({"repository": "bob/x"}, ALICE_TOKEN, 403),  # not alice's namespace
        ({"repository": "alice/x"}, ALICE_READ_TOKEN, 403),  # a read token
        ({"repository": "alice/x", "hardware": "h100-x99"}, ALICE_TOKEN, 400),
        (
            {"repository": "alice/x", "secrets": [{"key": "bad key", "value": "v"}]},
            ALICE_TOKEN,
            400,
        ),
        ({"repository": "no-namespace"}, ALICE_TOKEN, 400),
    ],
)
def test_duplicate_refusals(hub: HubHandle, body: dict, token: str, status: int) -> None:
    repo_id = _space(hub)
    got, _ = _raw(
        hub,
        "POST",
        f"/api/spaces/{repo_id}/duplicate",
        json.dumps(body).encode(),
        token,
        "application/json",
    )
    assert got == status
    missing, _ = _raw(
        hub,
        "POST",
        "/api/spaces/alice/missing/duplicate",
        b'{"repository": "alice/y"}',
        ALICE_TOKEN,
        "application/json",
    )
    assert missing == 404
    assert sorted(hub.state.repos) == [f"spaces/{repo_id}"]


def test_list_spaces_search_filter_visibility_expand_and_pages(hub: HubHandle) -> None:
    api = hub.api()
    for repo_id, private in (
        ("alice/echo-env", False),
        ("alice/maze-env", True),
        ("bob/Echo-2", False),
    ):
        hub.state.create_repo(repo_id, visibility="private" if private else "public")
        repo = hub.state.repo(repo_id)
        hub.state.commit(repo, author="x", summary="card", writes={"README.md": README.encode()})
    hub.state.create_repo("bob/untagged")
    hub.state.create_repo("alice/echo-model", kind="model")

    def ids(**kwargs: object) -> list[str]:
        return [s.id for s in api.list_spaces(**kwargs)]  # type: ignore[arg-type]

    assert ids(filter="openenv") == ["alice/echo-env", "alice/maze-env", "bob/Echo-2"]
    assert ids(filter="openenv", search="ECHO") == ["alice/echo-env", "bob/Echo-2"]
    assert ids(author="bob") == ["bob/Echo-2", "bob/untagged"]
    assert "alice/maze-env" not in [s.id for s in hub.api(BOB_TOKEN).list_spaces()]
    assert "alice/maze-env" not in [s.id for s in hub.api(False).list_spaces()]

    [space] = api.list_spaces(search="maze", expand=["runtime", "sdk", "cardData"])
    assert space.sdk == "docker" and space.runtime is not None and space.card_data is not None
    assert space.private is None  # only what was asked for
    short = next(iter(api.list_spaces(search="maze")))
    assert short.private is True and short.card_data is None

    hub.state.page_size = 2
    assert len(ids()) == 4 and len(ids(limit=3)) == 3
    pages = [r for r in hub.state.calls("GET") if r.path == "/api/spaces"][-2:]
    assert "cursor=2" in pages[-1].query

    from huggingface_hub.errors import BadRequestError

    with pytest.raises(BadRequestError, match="Invalid sort"):
        list(api.list_spaces(sort="stars"))  # type: ignore[arg-type]


def test_agent_harness_registry_is_empty(hub: HubHandle) -> None:
    with urllib.request.urlopen(f"{hub.url}/api/agent-harnesses", timeout=10) as response:
        assert json.loads(response.read()) == {"standardEnvVars": [], "harnesses": {}}


def test_running_hub_with_custom_tokens_stops_cleanly(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    with running_hub(tokens={"tok-carol": "carol"}) as other:
        isolate_hf_client(monkeypatch, tmp_path / "hf_home", endpoint=other.url)
        assert other.api("tok-carol").whoami()["name"] == "carol"
        url = other.url
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(f"{url}/api/agent-harnesses", timeout=2)

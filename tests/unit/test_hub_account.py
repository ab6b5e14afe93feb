"""Which Space id a token may write (`openenv_cli.hub.account`), from `whoami`'s answer."""

from __future__ import annotations

import pytest

from openenv_cli.errors import OpenEnvError
from openenv_cli.hub.account import writable_repo_id
from openenv_cli.hub.space import RepoRef

ME = {"name": "alice", "orgs": [{"name": "team"}], "auth": {"accessToken": {"role": "write"}}}


def check(ref: RepoRef, me: dict[str, object] = ME) -> str:
    return writable_repo_id(
        ref, me, token_source="HF_TOKEN", endpoint="https://hub", doing="forking", verb="fork to"
    )


def test_a_bare_name_goes_to_the_user_and_orgs_are_allowed() -> None:
    assert check(RepoRef(None, "env")) == "alice/env"
    assert check(RepoRef("team", "env")) == "team/env"


def test_a_foreign_namespace_is_refused_with_the_users_own() -> None:
    with pytest.raises(OpenEnvError) as caught:
        check(RepoRef("bob", "env"))
    assert "alice cannot fork to bob/env" in caught.value.message
    assert "your organizations: team" in caught.value.message
    assert "--repo-id alice/env" in (caught.value.hint or "")


def test_a_read_token_is_refused() -> None:
    me = {**ME, "auth": {"accessToken": {"role": "read"}}}
    with pytest.raises(OpenEnvError, match="HF_TOKEN is read-only; forking needs write access"):
        check(RepoRef(None, "env"), me)

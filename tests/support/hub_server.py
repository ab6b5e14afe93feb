"""The local Hugging Face Hub-compatible server that `push` tests run the real client against.

The `hub` fixture gives a fresh Hub per test (register this module as a plugin, e.g.
`pytest_plugins = ["tests.support.hub_server"]` in the root conftest, or wrap `isolated_hub`
in a local fixture)::

    def test_push(hub):
        api = hub.api(ALICE_TOKEN)          # HfApi(endpoint=hub.url, token=...)
        ...
        repo = hub.state.repo("alice/my-env")           # a Space; kind="model"/"dataset" otherwise
        assert repo.text("README.md").startswith("---")
        assert repo.variable_values() == {...}; assert repo.secret_values() == {...}
        assert [c.summary for c in repo.commits] == ["initial commit", ...]
        assert not hub.state.calls("POST", "/commit/")   # request log: method, path, query, user, status

Without pytest: `with running_hub(tokens={"tok": "carol"}) as hub: ...`. More tokens at any time:
`hub.state.add_token("tok", "carol", role="read", orgs=["team"])`. Seed repositories with
`hub.state.create_repo("bob/existing")` and `hub.state.commit(repo, author=..., summary=..., writes={...})`.
A Space reports BUILDING for `state.build_polls` runtime reads after each commit, then
`state.build_result` (default "RUNNING"). `POST /api/spaces/{id}/duplicate` copies a Space as the
Hub does (history, SDK, variables; never secrets); `GET /api/spaces` searches them (`search`,
`author`, `filter` tags, `sort`, `limit`, `expand`), `state.page_size` items a page.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.support.hub import *  # noqa: F403  (re-exported API)
from tests.support.hub import Account, HubHandle, isolate_hf_client, running_hub
from tests.support.hub import __all__ as _hub_all

__all__ = [*_hub_all, "hub", "hub_home", "isolated_hub"]


@contextmanager
def isolated_hub(
    monkeypatch: pytest.MonkeyPatch,
    hf_home: Path,
    tokens: Mapping[str, str | Account] | None = None,
) -> Iterator[HubHandle]:
    """`running_hub` plus `isolate_hf_client`: in-process clients see this Hub and nothing else."""
    with running_hub(tokens) as handle:
        isolate_hf_client(monkeypatch, hf_home, endpoint=handle.url)
        yield handle


@pytest.fixture
def hub_home(tmp_path: Path) -> Path:
    """An empty HF_HOME for the test."""
    return tmp_path / "hf_home"


@pytest.fixture
def hub(monkeypatch: pytest.MonkeyPatch, hub_home: Path) -> Iterator[HubHandle]:
    """A fresh test Hub with the default tokens; in-process `huggingface_hub` is isolated onto it."""
    with isolated_hub(monkeypatch, hub_home) as handle:
        yield handle

"""A local, in-memory, Hugging Face Hub-compatible server for tests (see `tests/support/hub_server.py`)."""

from .app import INVALID_CREDENTIALS, HubError, create_app
from .runner import (
    ALICE,
    ALICE_READ_TOKEN,
    ALICE_TOKEN,
    BOB,
    BOB_TOKEN,
    DEFAULT_TOKENS,
    ORG,
    HubHandle,
    isolate_hf_client,
    running_hub,
)
from .state import (
    Account,
    Commit,
    HubRequest,
    HubState,
    Repo,
    Setting,
    git_blob_sha1,
    parse_front_matter,
)

__all__ = [
    "ALICE",
    "ALICE_READ_TOKEN",
    "ALICE_TOKEN",
    "BOB",
    "BOB_TOKEN",
    "DEFAULT_TOKENS",
    "INVALID_CREDENTIALS",
    "ORG",
    "Account",
    "Commit",
    "HubError",
    "HubHandle",
    "HubRequest",
    "HubState",
    "Repo",
    "Setting",
    "create_app",
    "git_blob_sha1",
    "isolate_hf_client",
    "parse_front_matter",
    "running_hub",
]

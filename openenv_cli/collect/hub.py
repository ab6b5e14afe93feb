"""Upload a collection folder as a Hugging Face dataset repository."""

from __future__ import annotations

import os
from pathlib import Path

from openenv_cli.hub.errors import HubContext, hub_call, quiet_client, resolve_token


def push_dataset(out: Path, repo_id: str, *, private: bool, token: str | None = None) -> str:
    """Create (or reuse) dataset ``repo_id`` and upload ``out``'s shards, card and run record."""
    from huggingface_hub import HfApi

    secret, source = resolve_token(token)
    endpoint = os.environ.get("HF_ENDPOINT", "https://huggingface.co")
    api = HfApi(endpoint=endpoint, token=secret)
    ctx = HubContext(endpoint=endpoint, token_source=source, repo_id=repo_id)
    with hub_call(f"creating dataset {repo_id}", ctx), quiet_client():
        api.create_repo(repo_id, repo_type="dataset", private=private, exist_ok=True)
    with hub_call(f"uploading to dataset {repo_id}", ctx), quiet_client():
        api.upload_folder(
            repo_id=repo_id,
            repo_type="dataset",
            folder_path=str(out),
            allow_patterns=["README.md", "run.json", "data/shard-*"],
            commit_message="openenv collect",
        )
    return f"{endpoint.rstrip('/')}/datasets/{repo_id}"

"""Upload a collection folder as a Hugging Face dataset repository."""

from __future__ import annotations

import json
import os
from pathlib import Path

from openenv_cli.errors import OpenEnvError
from openenv_cli.hub.errors import HubContext, hub_call, quiet_client, resolve_token


def scan_collection(out: Path) -> list[str]:
    """Secrets found in what a push would upload: the run record, the card, every row."""
    from openenv_cli.image.secret_scan import scan_text

    from .store import RUN_FILE, read_rows

    found = []
    for name in (RUN_FILE, "README.md"):
        path = out / name
        if path.is_file():
            finding = scan_text(path.read_text(encoding="utf-8", errors="replace"), name)
            if finding:
                found.append(f"{name}: {finding.describe()}")
    for row in read_rows(out):
        finding = scan_text(json.dumps(row, ensure_ascii=False), row.get("episode_id", ""))
        if finding:
            found.append(f"episode {row.get('episode_id')}: {finding.kind}")
    return found


def push_dataset(out: Path, repo_id: str, *, private: bool, token: str | None = None) -> str:
    """Create (or reuse) dataset ``repo_id`` and upload ``out``'s shards, card and run record.

    Refused when anything to upload holds what looks like a secret (an environment that
    echoes a key into its observations, say): the episodes stay on this machine.
    """
    from huggingface_hub import HfApi

    leaks = scan_collection(out)
    if leaks:
        shown = "; ".join(leaks[:5]) + (f"; and {len(leaks) - 5} more" if len(leaks) > 5 else "")
        raise OpenEnvError(
            f"Not pushed: what would be uploaded holds secrets ({shown}).",
            hint="Find where the environment or the policy puts them into episodes; the folder "
            "stays on this machine.",
        )

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

"""Upload a collection folder as a Hugging Face dataset repository."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

from openenv_cli.errors import OpenEnvError
from openenv_cli.hub.errors import HubContext, hub_call, quiet_client, resolve_token

CARD = "README.md"
SHARD_PREFIX = "shard-"


def upload_list(out: Path) -> list[str]:
    """What a push uploads, relative to ``out``: the card, the run record and every shard.

    A symbolic link or anything but a regular file among them is refused: the upload would
    follow it, and send what it points to.
    """
    from .store import DATA_DIR, RUN_FILE

    root = out.resolve()
    names = [name for name in (RUN_FILE, CARD) if os.path.lexists(root / name)]
    data = root / DATA_DIR
    if data.is_dir() and not data.is_symlink():
        names += sorted(
            f"{DATA_DIR}/{path.name}"
            for path in data.iterdir()
            if path.name.startswith(SHARD_PREFIX)
        )
    elif os.path.lexists(data):
        names.append(DATA_DIR)
    for name in names:
        if not stat.S_ISREG(os.lstat(root / name).st_mode):
            raise OpenEnvError(
                f"Not pushed: {root / name} is a symbolic link or not a regular file.",
                hint="A collection folder holds only what openenv collect writes; remove it and push again.",
            )
    return names


def scan_collection(out: Path, names: list[str] | None = None) -> list[str]:
    """Secrets found in what a push would upload (``names``, by default :func:`upload_list`):
    every file as it is, with the scan of ``openenv push`` (any size, archives, encodings),
    then every episode row decoded."""
    from openenv_cli.image.secret_scan import scan_file, scan_text

    from .store import read_rows

    root = out.resolve()
    found = []
    for name in upload_list(root) if names is None else names:
        finding = scan_file(root, name)
        if finding:
            found.append(f"{name}: {finding.describe()}")
    for row in read_rows(root):
        finding = scan_text(json.dumps(row, ensure_ascii=False), row.get("episode_id", ""))
        if finding:
            found.append(f"episode {row.get('episode_id')}: {finding.kind}")
    return found


def push_dataset(out: Path, repo_id: str, *, private: bool, token: str | None = None) -> str:
    """Create (or reuse) dataset ``repo_id`` and upload ``out``'s shards, card and run record
    (the files :func:`upload_list` names, scanned by :func:`scan_collection`, and no other).

    Refused when anything to upload holds what looks like a secret (an environment that
    echoes a key into its observations, say): the episodes stay on this machine.
    """
    from huggingface_hub import CommitOperationAdd, HfApi

    root = out.resolve()
    names = upload_list(root)
    leaks = scan_collection(root, names)
    if leaks:
        shown = "; ".join(leaks[:5]) + (f"; and {len(leaks) - 5} more" if len(leaks) > 5 else "")
        raise OpenEnvError(
            f"Not pushed: what would be uploaded holds secrets ({shown}).",
            hint="Find where the environment or the policy puts them into episodes; the folder "
            "stays on this machine.",
        )
    operations = [
        CommitOperationAdd(path_in_repo=name, path_or_fileobj=str(root / name)) for name in names
    ]
    secret, source = resolve_token(token)
    endpoint = os.environ.get("HF_ENDPOINT", "https://huggingface.co")
    api = HfApi(endpoint=endpoint, token=secret)
    ctx = HubContext(endpoint=endpoint, token_source=source, repo_id=repo_id)
    with hub_call(f"creating dataset {repo_id}", ctx), quiet_client():
        api.create_repo(repo_id, repo_type="dataset", private=private, exist_ok=True)
    with hub_call(f"uploading to dataset {repo_id}", ctx), quiet_client():
        api.create_commit(
            repo_id=repo_id,
            repo_type="dataset",
            operations=list(operations),
            commit_message="openenv collect",
        )
    return f"{endpoint.rstrip('/')}/datasets/{repo_id}"

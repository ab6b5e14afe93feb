"""Create or update the Space of a :class:`PushPlan` through ``huggingface_hub``.

The endpoint comes from ``HF_ENDPOINT``. Order: check the token, create the Space if needed,
set its visibility, hardware, variables and secrets (before the files, so the build the commit
starts already sees them), then one commit: every staged file as an addition and every remote
file no longer shipped as a deletion. ``huggingface_hub`` decides what changed (its preupload
step drops files the Hub already has) and makes no commit when nothing did.
"""

from __future__ import annotations

from dataclasses import dataclass

from openenv_cli.hub.account import writable_repo_id
from openenv_cli.hub.errors import HubContext, hub_call, no_request_logging, quiet_client
from openenv_cli.hub.space import SpaceUrls, space_urls
from openenv_cli.hub.upload import PushPlan

# The Hub creates this file in every repository; it is never deleted by a push.
HUB_MANAGED_FILES = frozenset({".gitattributes"})


@dataclass
class PushResult:
    repo_id: str
    urls: SpaceUrls
    created: bool
    private: bool
    visibility_changed: bool
    commit: str | None  # None when nothing changed (no commit was made)
    sent: int  # files offered to the Hub (it stores only the changed ones)
    deleted: list[str]
    variables_set: list[str]  # keys whose value changed
    secrets_set: list[str]  # keys only
    hardware: str | None
    notes: list[str]


def deploy(
    plan: PushPlan, token: str, *, token_source: str = "--token", endpoint: str | None = None
) -> PushResult:
    """Create or update the Space for ``plan``; every Hub failure is one :class:`OpenEnvError`."""
    from huggingface_hub import (
        CommitOperationAdd,
        CommitOperationDelete,
        HfApi,
        SpaceHardware,
        constants,
    )
    from huggingface_hub.errors import RepositoryNotFoundError

    endpoint = (endpoint or constants.ENDPOINT).rstrip("/")
    api = HfApi(endpoint=endpoint, token=token)
    ctx = HubContext(endpoint=endpoint, token_source=token_source)
    notes: list[str] = []

    with hub_call("checking the token", ctx):
        me = api.whoami()
    ctx.user = str(me.get("name"))
    repo_id = ctx.repo_id = writable_repo_id(
        plan.repo,
        me,
        token_source=token_source,
        endpoint=endpoint,
        doing="deploying a Space",
        verb="push to",
    )

    with hub_call(f"reading {repo_id}", ctx):
        try:
            info = api.space_info(repo_id)
        except RepositoryNotFoundError:
            info = None
    created = info is None
    if info is None:
        with hub_call(f"creating the Space {repo_id}", ctx):
            api.create_repo(
                repo_id,
                repo_type="space",
                space_sdk="docker",
                private=plan.create_private,
                exist_ok=True,
            )
            info = api.space_info(repo_id)
    elif info.sdk and info.sdk != "docker":
        notes.append(f"{repo_id} was a {info.sdk} Space; its new README makes it a Docker Space.")

    private = bool(info.private)
    desired = (
        plan.private if plan.private is not None else (True if plan.manifest.push.private else None)
    )
    visibility_changed = desired is not None and desired != private
    if visibility_changed:
        with hub_call(f"making {repo_id} {'private' if desired else 'public'}", ctx):
            api.update_repo_settings(repo_id, repo_type="space", private=desired)
        private = bool(desired)

    if plan.hardware:
        with hub_call(f"requesting {plan.hardware} hardware for {repo_id}", ctx):
            api.request_space_hardware(repo_id, SpaceHardware(plan.hardware))

    with hub_call(f"reading the variables of {repo_id}", ctx):
        current = {key: var.value for key, var in api.get_space_variables(repo_id).items()}
    variables_set = []
    for key, value in plan.variables.items():
        if current.get(key) != value:
            with hub_call(f"setting the variable {key} on {repo_id}", ctx):
                api.add_space_variable(repo_id, key, value)
            variables_set.append(key)
    for key, value in plan.secrets.items():
        with hub_call(f"setting the secret {key} on {repo_id}", ctx), no_request_logging():
            api.add_space_secret(repo_id, key, value)

    root, shipped = plan.staged.root, set(plan.staged.files)
    with hub_call(f"listing the files of {repo_id}", ctx):
        remote = api.list_repo_files(repo_id, repo_type="space", revision=info.sha)
    deleted = sorted(p for p in remote if p not in shipped and p not in HUB_MANAGED_FILES)
    operations: list[CommitOperationAdd | CommitOperationDelete] = [
        CommitOperationDelete(path_in_repo=p) for p in deleted
    ]
    operations += [
        CommitOperationAdd(path_in_repo=p, path_or_fileobj=str(root / p)) for p in plan.staged.files
    ]
    version = plan.manifest.version or ""
    with hub_call(f"uploading to {repo_id}", ctx), quiet_client():
        result = api.create_commit(
            repo_id,
            repo_type="space",
            operations=operations,
            commit_message=f"Deploy {plan.manifest.name} {version}".rstrip() + " with openenv",
            parent_commit=info.sha,
        )
    # huggingface_hub answers the parent commit when it found nothing to change.
    commit = None if result.oid == info.sha else result.oid
    return PushResult(
        repo_id=repo_id,
        urls=space_urls(repo_id, endpoint, plan.manifest.port, getattr(info, "subdomain", None)),
        created=created,
        private=private,
        visibility_changed=visibility_changed,
        commit=commit,
        sent=len(plan.staged.files),
        deleted=deleted if commit is not None else [],
        variables_set=variables_set,
        secrets_set=list(plan.secrets),
        hardware=plan.hardware,
        notes=notes,
    )

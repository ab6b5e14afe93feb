"""Copy a Space into your namespace with the Hub's own duplicate endpoint (``openenv fork``).

The Hub copies the repository (its whole history, hence its files and SDK) and the source's
variables. It never copies secrets: their values cannot be read back, by anyone. Secrets the
fork needs are passed with ``--secret`` and set in the same request; when the token may read
the source's secret names (it can write the source), the ones left unset are reported.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from openenv_cli.errors import OpenEnvError, UsageError
from openenv_cli.hub.account import writable_repo_id
from openenv_cli.hub.errors import HubContext, hub_call, no_request_logging
from openenv_cli.hub.space import (
    OPENENV_TAG,
    RepoRef,
    SpaceUrls,
    parse_repo_id,
    refuse_secret_variables,
    space_hardware,
    space_urls,
)

if TYPE_CHECKING:
    from huggingface_hub import HfApi

# Free hardware: a fork never starts on paid hardware unless asked (the source's is not copied).
DEFAULT_HARDWARE = "cpu-basic"
# Where Docker Spaces listen when their card sets no ``app_port``.
SPACE_DEFAULT_PORT = 7860
# Names tried, in order, when the target is taken.
_FREE_NAME_TRIES = 5


@dataclass
class ForkResult:
    source: str
    repo_id: str
    urls: SpaceUrls
    sdk: str | None
    private: bool
    hardware: str
    openenv: bool  # the source is tagged as an environment Space
    variables: list[str]  # names of the fork's variables: the source's, then -e
    variables_set: list[str]  # names given with -e
    secrets_set: list[str]  # names given with --secret (values are never kept)
    # The source's secrets the fork lacks; None when the token may not read their names.
    secrets_missing: list[str] | None
    notes: list[str] = field(default_factory=list)


def fork_space(
    source: str,
    token: str,
    *,
    repo_id: str | None = None,
    private: bool | None = None,
    hardware: str | None = None,
    variables: Mapping[str, str] | None = None,
    secrets: Mapping[str, str] | None = None,
    token_source: str = "--token",
    endpoint: str | None = None,
) -> ForkResult:
    """Duplicate the Space ``source`` (NAMESPACE/NAME or its URL) to ``repo_id`` (default: the
    same name in your namespace; a bare name goes there too).

    ``private`` None keeps the source's visibility (the Hub's rule). Every Hub failure is one
    :class:`OpenEnvError` saying what to do; secret values are only ever sent in the request.
    """
    from huggingface_hub import HfApi, constants
    from huggingface_hub.errors import RepositoryNotFoundError

    src = parse_repo_id(source)
    if src.namespace is None:
        raise UsageError(
            f"Which {source!r}? The Space to fork is NAMESPACE/NAME.",
            hint=f"For example: openenv fork OWNER/{src.name} (as in the Space's URL).",
        )
    source_id = f"{src.namespace}/{src.name}"
    target = parse_repo_id(repo_id) if repo_id else RepoRef(None, src.name)
    flavor = space_hardware(hardware) if hardware is not None else DEFAULT_HARDWARE
    variables = dict(variables or {})
    secrets = dict(secrets or {})
    refuse_secret_variables(variables, "-e")

    endpoint = (endpoint or constants.ENDPOINT).rstrip("/")
    api = HfApi(endpoint=endpoint, token=token)
    ctx = HubContext(endpoint=endpoint, token_source=token_source, repo_id=source_id)
    with hub_call("checking the token", ctx):
        me = api.whoami()
    ctx.user = str(me.get("name"))
    target_id = writable_repo_id(
        target, me, token_source=token_source, endpoint=endpoint, doing="forking", verb="fork to"
    )

    with hub_call(f"reading {source_id}", ctx):
        try:
            info = api.space_info(source_id)
        except RepositoryNotFoundError:
            raise OpenEnvError(
                f"The Space {source_id} was not found on {endpoint}.",
                hint="Check the id (NAMESPACE/NAME, as in the Space's URL); a private Space needs a "
                "token with access to it. `openenv discover` lists environment Spaces.",
            ) from None
        if api.repo_exists(target_id, repo_type="space"):
            raise _taken(api, target_id)
    with hub_call(f"reading the secret names of {source_id}", ctx):
        missing = _secret_names(api, source_id)
    if missing is not None:
        missing = sorted(set(missing) - set(secrets))

    ctx.repo_id = target_id
    with hub_call(f"forking {source_id} to {target_id}", ctx), no_request_logging():
        _duplicate(
            api,
            source_id,
            target_id,
            private=private,
            hardware=flavor,
            variables=variables,
            secrets=secrets,
        )
    with hub_call(f"reading {target_id}", ctx):
        fork = api.space_info(target_id)
        names = sorted(api.get_space_variables(target_id))

    card = fork.card_data.to_dict() if fork.card_data is not None else {}  # type: ignore[no-untyped-call]
    port = card.get("app_port")
    tags = [str(t) for t in (info.tags or [])]
    notes = []
    if OPENENV_TAG not in tags:
        notes.append(
            f"{source_id} is not tagged {OPENENV_TAG!r}, so it may not be an environment; "
            "the copy was made all the same."
        )
    return ForkResult(
        source=source_id,
        repo_id=target_id,
        urls=space_urls(
            target_id,
            endpoint,
            port if isinstance(port, int) else SPACE_DEFAULT_PORT,
            getattr(fork, "subdomain", None),
        ),
        sdk=fork.sdk,
        private=bool(fork.private),
        hardware=flavor,
        openenv=OPENENV_TAG in tags,
        variables=names,
        variables_set=sorted(variables),
        secrets_set=sorted(secrets),
        secrets_missing=missing,
        notes=notes,
    )


def _duplicate(
    api: HfApi,
    source_id: str,
    target_id: str,
    *,
    private: bool | None,
    hardware: str,
    variables: Mapping[str, str],
    secrets: Mapping[str, str],
) -> None:
    """One ``POST /api/spaces/{source}/duplicate`` through whichever name the installed
    ``huggingface_hub`` gives it: ``duplicate_repo`` (new clients) or ``duplicate_space``."""
    from huggingface_hub.errors import HfHubHTTPError

    as_list = [{"key": k, "value": v} for k, v in variables.items()] or None
    secret_list = [{"key": k, "value": v} for k, v in secrets.items()] or None
    try:
        duplicate_repo = getattr(api, "duplicate_repo", None)
        if duplicate_repo is not None:
            duplicate_repo(
                source_id,
                target_id,
                repo_type="space",
                private=private,
                space_hardware=hardware,
                space_variables=as_list,
                space_secrets=secret_list,
            )
        else:
            api_any: Any = api
            api_any.duplicate_space(
                source_id,
                target_id,
                private=private,
                hardware=hardware,
                variables=as_list,
                secrets=secret_list,
            )
    except HfHubHTTPError as exc:
        if exc.response is not None and exc.response.status_code == 409:
            raise _taken(api, target_id) from None
        raise


def _secret_names(api: HfApi, repo_id: str) -> list[str] | None:
    """The names of a Space's secrets, or None when this token may not read them (only those
    who can write a Space can) or the client cannot ask."""
    from huggingface_hub.errors import HfHubHTTPError

    read = getattr(api, "get_space_secrets", None)
    if read is None:
        return None
    try:
        return sorted(read(repo_id))
    except HfHubHTTPError:
        return None


def _taken(api: HfApi, repo_id: str) -> OpenEnvError:
    """The target exists: name a free one to use instead."""
    namespace, name = repo_id.split("/", 1)
    candidates = [f"{namespace}/{name}-fork"] + [
        f"{namespace}/{name}-fork-{n}" for n in range(2, _FREE_NAME_TRIES + 1)
    ]
    free = next((c for c in candidates if not api.repo_exists(c, repo_type="space")), None)
    return OpenEnvError(
        f"The Space {repo_id} already exists; a fork never overwrites a Space.",
        hint=f"Choose a new name: --repo-id {free or f'{namespace}/NEW_NAME'}.",
    )

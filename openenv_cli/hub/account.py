"""Who the token belongs to, and where it may write: checked before any change on the Hub."""

from __future__ import annotations

from collections.abc import Mapping

from openenv_cli.errors import OpenEnvError
from openenv_cli.hub.space import RepoRef


def writable_repo_id(
    ref: RepoRef,
    me: Mapping[str, object],
    *,
    token_source: str,
    endpoint: str,
    doing: str,
    verb: str,
) -> str:
    """The full id ``ref`` names for the user of ``me`` (``whoami``'s answer).

    Refuses a read-only token (``doing`` says what needs write access, e.g. "deploying a
    Space") and a namespace that is neither the user nor one of their organizations (``verb``
    is how the message says it, e.g. "push to").
    """
    user = str(me.get("name"))
    auth = me.get("auth")
    token = auth.get("accessToken") if isinstance(auth, dict) else None
    if isinstance(token, dict) and token.get("role") == "read":
        raise OpenEnvError(
            f"The token from {token_source} is read-only; {doing} needs write access.",
            hint=f"Create a write token at {endpoint}/settings/tokens, then run `hf auth login` or pass --token.",
        )
    repo_id = ref.with_user(user)
    namespace = repo_id.split("/", 1)[0]
    raw_orgs = me.get("orgs")
    orgs = (
        [str(o.get("name")) for o in raw_orgs if isinstance(o, dict)]
        if isinstance(raw_orgs, list)
        else []
    )
    if namespace != user and namespace not in orgs:
        member_of = f" (your organizations: {', '.join(orgs)})" if orgs else ""
        raise OpenEnvError(
            f"{user} cannot {verb} {repo_id}: {namespace!r} is neither your user nor one of your organizations{member_of}.",
            hint=f"Use --repo-id {user}/{ref.name}, or ask an admin of {namespace} to add you with write access.",
        )
    return repo_id

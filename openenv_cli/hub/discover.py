"""Find environment Spaces on the Hub (``openenv discover``).

An environment Space is one tagged ``openenv`` in its README front matter: the tag
``openenv push`` always writes, as the reference CLI's push and template do. The Hub's own
search does the finding (``list_spaces``: the tag, a part of the id, an author); the version
is the ``version:`` of the Space's ``openenv.yaml``, read (size-checked first) for each Space
found, a few at a time.
"""

from __future__ import annotations

import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, cast

from openenv_cli.hub.errors import HubContext, hub_call, network_errors
from openenv_cli.hub.space import OPENENV_TAG, space_urls

if TYPE_CHECKING:
    from huggingface_hub import HfApi, SpaceInfo
    from huggingface_hub.hf_api import ExpandSpaceProperty_T, SpaceSort_T

MANIFEST = "openenv.yaml"
# A manifest is a few hundred bytes; a larger file is not read (nor downloaded).
MAX_MANIFEST_BYTES = 64 * 1024
# Manifests read at once.
_READERS = 8
# --sort → the Hub's own name for it (most first). huggingface_hub passes these through
# unchanged in every version (it renames only its snake_case spellings, and not all of them
# before 1.0).
SORTS: dict[str, str] = {"likes": "likes", "updated": "lastModified", "created": "createdAt"}
# Properties of each Space asked for; the Hub answers only these.
_EXPAND: list[ExpandSpaceProperty_T] = [
    "author",
    "cardData",
    "lastModified",
    "likes",
    "private",
    "runtime",
    "sdk",
    "sha",
    "siblings",
    "subdomain",
    "tags",
]


@dataclass
class EnvSpace:
    """One environment Space as ``openenv discover`` shows it (and ``--json`` prints it)."""

    id: str
    version: str | None  # openenv.yaml's version; None when absent or unreadable
    hardware: str | None  # what it runs on now, else what it requested
    stage: str | None  # RUNNING, SLEEPING, BUILDING, ...
    sdk: str | None
    private: bool
    likes: int
    last_modified: str | None  # ISO 8601
    url: str  # the Space's page
    app_url: str  # https://<ns>-<name>.hf.space
    tags: list[str] = field(default_factory=list)


def discover_spaces(
    query: str | None = None,
    *,
    author: str | None = None,
    limit: int = 20,
    sort: str = "likes",
    token: str | None = None,
    token_source: str = "no token",
    endpoint: str | None = None,
    versions: bool = True,
) -> list[EnvSpace]:
    """Environment Spaces whose id contains ``query`` (case-insensitive), of ``author`` when
    given, most liked (or updated, created) first, at most ``limit``. Without a token only
    public Spaces are listed; with one, also the private ones it can read."""
    from huggingface_hub import HfApi, constants

    endpoint = (endpoint or constants.ENDPOINT).rstrip("/")
    api = HfApi(endpoint=endpoint, token=token if token is not None else False)
    ctx = HubContext(endpoint=endpoint, token_source=token_source, repo_id="the Spaces")
    with hub_call("listing environment Spaces", ctx):
        found = list(
            api.list_spaces(
                filter=OPENENV_TAG,
                search=query or None,
                author=author or None,
                sort=cast("SpaceSort_T", SORTS[sort]),
                limit=limit,
                expand=_EXPAND,
            )
        )
    spaces = [_env_space(info, endpoint) for info in found]
    if versions:
        readable = [(s, i) for s, i in zip(spaces, found, strict=True) if _has_manifest(i)]
        if readable:
            with (
                tempfile.TemporaryDirectory(prefix="openenv-discover-") as tmp,
                ThreadPoolExecutor(max_workers=min(_READERS, len(readable))) as pool,
            ):
                read = pool.map(lambda pair: _version(api, pair[1], Path(tmp)), readable)
                for (space, _), version in zip(readable, read, strict=True):
                    space.version = version
    return spaces


def _env_space(info: SpaceInfo, endpoint: str) -> EnvSpace:
    runtime = info.runtime
    hardware = None
    if runtime is not None:
        hardware = runtime.hardware or runtime.requested_hardware
    urls = space_urls(info.id, endpoint, 0, getattr(info, "subdomain", None))
    return EnvSpace(
        id=info.id,
        version=None,
        hardware=str(hardware) if hardware is not None else None,
        stage=str(runtime.stage) if runtime is not None else None,
        sdk=info.sdk,
        private=bool(info.private),
        likes=int(info.likes or 0),
        last_modified=info.last_modified.isoformat() if info.last_modified else None,
        url=urls.page,
        app_url=urls.app,
        tags=[str(t) for t in (info.tags or [])],
    )


def _has_manifest(info: SpaceInfo) -> bool:
    return any(s.rfilename == MANIFEST for s in info.siblings or [])


def _version(api: HfApi, info: SpaceInfo, cache: Path) -> str | None:
    """``version:`` of the Space's openenv.yaml at the listed commit; None when it is missing,
    too large, not YAML, or cannot be fetched (one Space never fails the listing)."""
    import yaml
    from huggingface_hub import get_hf_file_metadata, hf_hub_download, hf_hub_url
    from huggingface_hub.errors import HfHubHTTPError

    failures: tuple[type[BaseException], ...] = (
        HfHubHTTPError,
        OSError,
        UnicodeDecodeError,
        yaml.YAMLError,
        *network_errors(),
    )
    try:
        url = hf_hub_url(
            info.id, MANIFEST, repo_type="space", revision=info.sha, endpoint=api.endpoint
        )
        meta = get_hf_file_metadata(url, token=api.token)
        if meta.size is None or meta.size > MAX_MANIFEST_BYTES:
            return None
        path = hf_hub_download(
            info.id,
            MANIFEST,
            repo_type="space",
            revision=info.sha,
            token=api.token,
            endpoint=api.endpoint,
            cache_dir=cache,
        )
        with open(path, "rb") as file:
            text = file.read(MAX_MANIFEST_BYTES + 1)
        if len(text) > MAX_MANIFEST_BYTES:
            return None
        data = yaml.safe_load(text.decode("utf-8"))
    except failures:
        return None
    version = data.get("version") if isinstance(data, dict) else None
    return str(version) if isinstance(version, str | int | float) and str(version) else None

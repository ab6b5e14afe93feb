"""Deploy a project to a Hugging Face Docker Space (the logic behind ``openenv push``).

Two steps, so ``--dry-run`` can stop after the first:

- ``prepare_push`` (local only, no network): stage the project with the Dockerfile at the
  root and the runtime bundle (``openenv_cli.staging``), write the README with valid Spaces
  front matter, work out the Space variables.
- ``deploy`` (through ``huggingface_hub``, endpoint from ``HF_ENDPOINT``): check the token,
  create the Space if needed, set its visibility, variables and secrets, then commit
  exactly the files that changed (and delete the ones no longer shipped).

Secret values live only in memory: they are never written to the staging folder, never
shown, and ``redacting`` scrubs them (and the token) from every error that passes through.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from openenv_cli.config import parse_bool
from openenv_cli.errors import OpenEnvError, UsageError
from openenv_cli.manifest import Manifest
from openenv_cli.staging import RUNTIME_DIR, StagedContext, stage

SPACE_COLORS = ("red", "yellow", "green", "blue", "indigo", "purple", "pink", "gray")
OPENENV_TAG = "openenv"
WEB_BASE_PATH = "/web"
README = "README.md"
# The Hub creates this file in every repository; it is never deleted by a push.
HUB_MANAGED_FILES = frozenset({".gitattributes"})

_REPO_PART = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9._-]{0,94}[A-Za-z0-9])?$")
# Front matter keys that describe other SDKs and would confuse a Docker Space.
_FOREIGN_KEYS = ("sdk_version", "app_file", "python_version")


# -- options --------------------------------------------------------------------------------


@dataclass(frozen=True)
class RepoRef:
    """A Space id as given: ``namespace`` is None for a bare name (the user's namespace)."""

    namespace: str | None
    name: str

    def with_user(self, user: str) -> str:
        return f"{self.namespace or user}/{self.name}"

    def shown(self) -> str:
        return f"{self.namespace or '<your user>'}/{self.name}"


def parse_repo_id(raw: str) -> RepoRef:
    """Read ``name``, ``ns/name``, ``spaces/ns/name`` or a ``.../spaces/ns/name`` URL.

    Model and dataset ids (``datasets/ns/name``, a URL without ``/spaces/``) are refused:
    ``push`` deploys Spaces only.
    """
    text = raw.strip()
    if "://" in text:
        path = text.rstrip("/").split("://", 1)[1].partition("/")[2]
        if not path.startswith("spaces/"):
            raise UsageError(
                f"{raw!r} is not a Space URL.",
                hint="Use --repo-id NAMESPACE/NAME, e.g. --repo-id alice/my_env.",
            )
        text = path
    parts = text.split("/")
    if len(parts) == 3 and parts[0] == "spaces":
        parts = parts[1:]
    elif len(parts) == 3 and parts[0] in {"datasets", "models"}:
        raise UsageError(
            f"{raw!r} names a {parts[0][:-1]} repository; openenv push deploys a Space.",
            hint=f"Use --repo-id {parts[1]}/{parts[2]} (a Space may share a model's name).",
        )
    if not 1 <= len(parts) <= 2 or not all(
        _REPO_PART.match(p) and "--" not in p and ".." not in p for p in parts
    ):
        raise UsageError(
            f"{raw!r} is not a valid Space id.",
            hint="Use NAMESPACE/NAME or NAME: letters, digits, '-', '_' and '.', not starting or ending with '-' or '.'.",
        )
    return RepoRef(parts[0], parts[1]) if len(parts) == 2 else RepoRef(None, parts[0])


# -- URLs -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class SpaceUrls:
    page: str  # the Space's page on the Hub
    app: str  # https://<ns>-<name>.hf.space
    websocket: str  # wss://<ns>-<name>.hf.space/ws
    pip: str  # pip install git+<endpoint>/spaces/ns/name
    pip_with_runtime: str  # the same, plus the runtime from the Space (no package index serves it)
    docker: str  # docker run -p PORT:PORT registry.hf.space/<ns>-<name>:latest


def space_subdomain(repo_id: str) -> str:
    """``Alice/my_env`` → ``alice-my-env``: how Spaces name the app's host and image."""
    return re.sub(r"[^a-z0-9]", "-", repo_id.replace("/", "-").lower())


def space_urls(repo_id: str, endpoint: str, port: int) -> SpaceUrls:
    sub = space_subdomain(repo_id)
    page = f"{endpoint.rstrip('/')}/spaces/{repo_id}"
    return SpaceUrls(
        page=page,
        app=f"https://{sub}.hf.space",
        websocket=f"wss://{sub}.hf.space/ws",
        pip=f"pip install git+{page}",
        pip_with_runtime=f'pip install "openenv-runtime @ git+{page}#subdirectory={RUNTIME_DIR}" git+{page}',
        docker=f"docker run -p {port}:{port} registry.hf.space/{sub}:latest",
    )


# -- README front matter and variables ------------------------------------------------------


def split_front_matter(text: str) -> tuple[dict[str, Any] | None, str]:
    """The YAML mapping between leading ``---`` lines (None when absent or invalid) and the body."""
    lines = text.splitlines(keepends=True)
    if not lines or lines[0].strip() != "---":
        return None, text
    for index in range(1, len(lines)):
        if lines[index].strip() == "---":
            body = "".join(lines[index + 1 :]).lstrip("\n")
            try:
                data = yaml.safe_load("".join(lines[1:index]))
            except yaml.YAMLError:
                return None, body
            return (data if isinstance(data, dict) else None), body
    return None, text


def space_front_matter(
    manifest: Manifest, existing: Mapping[str, Any] | None, *, interface: bool
) -> dict[str, Any]:
    """Front matter a Docker Space accepts, keeping the user's valid choices and other keys.

    Forced: ``sdk: docker``, ``app_port`` (the manifest's port), the ``openenv`` tag, and
    ``base_path: /web`` exactly when the web interface is on. Filled in when missing or
    invalid: ``title``, ``emoji``, ``colorFrom``, ``colorTo``, ``pinned: false``.
    """
    from openenv_cli.scaffold import project_context

    defaults = project_context(manifest.name)
    rest = dict(existing or {})

    def take(key: str, valid: Any, default: Any) -> Any:
        value = rest.pop(key, None)
        return value if valid(value) else default

    front: dict[str, Any] = {
        "title": take("title", lambda v: isinstance(v, str) and v.strip(), defaults["title"]),
        "emoji": take("emoji", lambda v: isinstance(v, str) and v.strip(), defaults["emoji"]),
        "colorFrom": take("colorFrom", lambda v: v in SPACE_COLORS, defaults["color_from"]),
        "colorTo": take("colorTo", lambda v: v in SPACE_COLORS, defaults["color_to"]),
        "sdk": "docker",
        "app_port": manifest.port,
        "pinned": take("pinned", lambda v: isinstance(v, bool), False),
    }
    for key in ("sdk", "app_port", "base_path", *_FOREIGN_KEYS):
        rest.pop(key, None)
    tags = rest.pop("tags", None)
    tags = (
        [str(t) for t in tags]
        if isinstance(tags, list)
        else ([str(tags)] if isinstance(tags, str) else [])
    )
    front["tags"] = tags if OPENENV_TAG in tags else [*tags, OPENENV_TAG]
    if interface:
        front["base_path"] = WEB_BASE_PATH
    front.update(rest)
    return front


def render_front_matter(front: Mapping[str, Any]) -> str:
    return (
        "---\n"
        + yaml.safe_dump(dict(front), sort_keys=False, allow_unicode=True, default_flow_style=False)
        + "---\n"
    )


def space_readme(
    readme_text: str | None, manifest: Manifest, *, interface: bool
) -> tuple[str, dict[str, Any]]:
    """The README.md to upload and its front matter (the body is kept; a README is made when
    the project has none)."""
    existing, body = split_front_matter(readme_text) if readme_text is not None else (None, "")
    front = space_front_matter(manifest, existing, interface=interface)
    if not body.strip():
        body = f"# {front['title']}\n\n{manifest.description or 'An OpenEnv-compatible RL environment.'}\n"
    return render_front_matter(front) + "\n" + body, front


def space_variables(
    manifest: Manifest, cli_variables: Mapping[str, str], *, no_interface: bool
) -> dict[str, str]:
    """Variables set on the Space: the manifest's ``server:`` settings (the container reads
    them from the environment), then ``push.variables``, then ``-e`` (later wins).
    ``ENABLE_WEB_INTERFACE`` is always set, so turning the interface back on works too."""
    server = manifest.server
    variables: dict[str, str] = {}
    if server.workers is not None:
        variables["WORKERS"] = str(server.workers)
    if server.max_concurrent_envs is not None:
        variables["MAX_CONCURRENT_ENVS"] = str(server.max_concurrent_envs)
    if server.session_timeout is not None:
        variables["SESSION_TIMEOUT"] = f"{server.session_timeout:g}"
    variables["ENABLE_WEB_INTERFACE"] = (
        "false" if no_interface or server.web_interface is False else "true"
    )
    variables.update(manifest.push.variables)
    if no_interface and "ENABLE_WEB_INTERFACE" in manifest.push.variables:
        variables["ENABLE_WEB_INTERFACE"] = "false"
    if no_interface and _truthy(cli_variables.get("ENABLE_WEB_INTERFACE")) is True:
        raise UsageError(
            "--no-interface contradicts -e ENABLE_WEB_INTERFACE="
            + cli_variables["ENABLE_WEB_INTERFACE"]
            + ".",
            hint="Drop one of them.",
        )
    variables.update(cli_variables)
    return variables


def _truthy(value: str | None) -> bool | None:
    if value is None:
        return None
    try:
        return parse_bool(value)
    except ValueError:
        return None


# -- the plan -------------------------------------------------------------------------------


@dataclass
class PushPlan:
    """Everything ``deploy`` uploads and sets, staged on disk under ``staged.root``."""

    manifest: Manifest
    repo: RepoRef
    staged: StagedContext
    front_matter: dict[str, Any]
    variables: dict[str, str]
    secrets: dict[str, str] = field(repr=False)
    private: bool | None  # --private / --public; None: leave an existing Space as it is
    interface: bool

    @property
    def create_private(self) -> bool:
        return self.private if self.private is not None else self.manifest.push.private


def prepare_push(
    project_dir: Path,
    dest: Path,
    *,
    manifest: Manifest,
    repo_id: str | None = None,
    base_image: str | None = None,
    variables: Mapping[str, str] | None = None,
    secrets: Mapping[str, str] | None = None,
    excludes: Sequence[str] = (),
    private: bool | None = None,
    no_interface: bool = False,
) -> PushPlan:
    """Stage ``project_dir`` into ``dest`` for a Space and return the plan. No network."""
    repo = parse_repo_id(repo_id or manifest.push.repo_id or manifest.name)
    final_variables = space_variables(manifest, variables or {}, no_interface=no_interface)
    interface = _truthy(final_variables.get("ENABLE_WEB_INTERFACE")) is not False
    staged = stage(
        project_dir,
        dest,
        dockerfile=manifest.build.dockerfile,
        base_image=base_image,
        excludes=[*manifest.push.exclude, *excludes],
        dockerfile_at_root=True,
    )
    source = Path(project_dir) / README
    readme_text = source.read_text(encoding="utf-8") if source.is_file() else None
    readme, front = space_readme(readme_text, manifest, interface=interface)
    (staged.root / README).write_text(readme, encoding="utf-8")
    if README not in staged.files:
        staged = StagedContext(
            staged.root,
            tuple(sorted((*staged.files, README))),
            staged.dockerfile,
            staged.dockerfile_text,
            staged.runtime_version,
        )
    return PushPlan(
        manifest=manifest,
        repo=repo,
        staged=staged,
        front_matter=front,
        variables=final_variables,
        secrets=dict(secrets or {}),
        private=private,
        interface=interface,
    )


# -- token and errors -----------------------------------------------------------------------


def resolve_token(flag: str | None, environ: Mapping[str, str] | None = None) -> tuple[str, str]:
    """The token and where it came from: ``--token``, then ``HF_TOKEN``, then the stored login."""
    environ = os.environ if environ is None else environ
    if flag and flag.strip():
        return flag.strip(), "--token"
    if environ.get("HF_TOKEN", "").strip():
        return environ["HF_TOKEN"].strip(), "HF_TOKEN"
    from huggingface_hub import get_token

    stored = get_token()
    if stored:
        return stored, "the stored login"
    raise OpenEnvError(
        "You are not logged in to the Hugging Face Hub.",
        hint="Run `hf auth login` with a token that has write access, or pass --token (or set HF_TOKEN).",
    )


class Redactor:
    """Replaces known secret strings with ``***`` in any text."""

    def __init__(self, values: Iterable[str] = ()) -> None:
        self._values: set[str] = set()
        for value in values:
            self.add(value)

    def add(self, value: str | None) -> None:
        if value and len(value) >= 3:  # shorter values would garble unrelated text
            self._values.add(value)

    def __call__(self, text: str) -> str:
        for value in sorted(self._values, key=len, reverse=True):
            text = text.replace(value, "***")
        return text


@contextmanager
def redacting(redactor: Redactor) -> Iterator[None]:
    """Let no secret out through an exception: errors leave as :class:`OpenEnvError` with
    scrubbed text and no chained cause (so ``--debug`` tracebacks carry no values either)."""
    try:
        yield
    except OpenEnvError as error:
        error.message = redactor(error.message)
        error.hint = redactor(error.hint) if error.hint else error.hint
        error.args = (error.message,)
        raise error from None
    except (KeyboardInterrupt, SystemExit):
        raise
    except Exception as error:
        raise OpenEnvError(
            redactor(f"Unexpected {type(error).__name__} while pushing: {error}"),
            hint="This may be a bug in openenv; please report it (without your secrets).",
        ) from None


def _network_errors() -> tuple[type[BaseException], ...]:
    found: list[type[BaseException]] = [ConnectionError, TimeoutError]
    for module, name in (
        ("httpx2", "TransportError"),
        ("httpx", "TransportError"),
        ("requests", "ConnectionError"),
        ("requests", "Timeout"),
    ):
        try:
            found.append(getattr(__import__(module), name))
        except (ImportError, AttributeError):
            pass
    return tuple(found)


@dataclass
class _Context:
    endpoint: str
    token_source: str
    repo_id: str | None = None
    user: str | None = None


@contextmanager
def _hub(what: str, ctx: _Context) -> Iterator[None]:
    """Turn a failed Hub call into one :class:`OpenEnvError` line saying what to do."""
    from huggingface_hub.errors import HfHubHTTPError, OfflineModeIsEnabled

    try:
        yield
    except OfflineModeIsEnabled:
        raise OpenEnvError(
            "huggingface_hub is in offline mode (HF_HUB_OFFLINE is set).",
            hint="Unset HF_HUB_OFFLINE and run again.",
        ) from None
    except HfHubHTTPError as exc:
        raise _http_error(exc, what, ctx) from None
    except _network_errors() as exc:
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise OpenEnvError(
            f"Cannot reach the Hugging Face Hub at {ctx.endpoint} while {what}: {reason}.",
            hint="Check the network connection, proxy settings and HF_ENDPOINT, then run again.",
        ) from None


def _http_error(exc: Any, what: str, ctx: _Context) -> OpenEnvError:
    response = exc.response
    status = response.status_code
    server = (
        (exc.server_message or response.headers.get("X-Error-Message") or "").strip().splitlines()
    )
    detail = f": {server[0]}" if server else ""
    repo = ctx.repo_id or "the Space"
    tokens = f"{ctx.endpoint}/settings/tokens"
    if status == 401:
        return OpenEnvError(
            f"The Hub at {ctx.endpoint} rejected the token from {ctx.token_source} (invalid or expired) while {what}.",
            hint=f"Create a write token at {tokens}, then run `hf auth login` or pass --token.",
        )
    if status == 403:
        return OpenEnvError(
            f"No write access to {repo} for {ctx.user or 'this token'}{detail}.",
            hint=f"Push to a namespace you can write to (--repo-id {ctx.user or 'YOUR_USER'}/NAME), or use a token with write access ({tokens}).",
        )
    if status == 404:
        return OpenEnvError(
            f"{repo} was not found on {ctx.endpoint} while {what}{detail}.", hint="Check --repo-id."
        )
    if status == 409:
        return OpenEnvError(f"The name {repo} is taken{detail}.", hint="Choose another --repo-id.")
    if status == 402:
        return OpenEnvError(
            f"The Hub requires a paid plan for {what}{detail}.",
            hint="Check your plan and the Space's hardware.",
        )
    if status == 429:
        return OpenEnvError(
            f"The Hub rate-limited the request while {what}.", hint="Wait a minute and run again."
        )
    return OpenEnvError(
        f"The Hub answered {status} while {what}{detail}.",
        hint="Run again; if it persists, check the Hub status page."
        if status >= 500
        else "Fix the cause above and run again.",
    )


@contextmanager
def _no_request_logging() -> Iterator[None]:
    """With HF_DEBUG, huggingface_hub logs request bodies; secret values must not be among them."""
    logger = logging.getLogger("huggingface_hub.utils._http")
    level = logger.level
    logger.setLevel(logging.WARNING)
    try:
        yield
    finally:
        logger.setLevel(level)


# -- deploy ---------------------------------------------------------------------------------


@dataclass
class PushResult:
    repo_id: str
    urls: SpaceUrls
    created: bool
    private: bool
    visibility_changed: bool
    commit: str | None  # None when nothing changed (no commit was made)
    uploaded: list[str]
    deleted: list[str]
    variables_set: list[str]  # keys whose value changed
    secrets_set: list[str]  # keys only
    notes: list[str]


def _git_blob_sha1(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def _unchanged(data: bytes, remote: Any) -> bool:
    lfs = getattr(remote, "lfs", None)
    if lfs is not None:
        return hashlib.sha256(data).hexdigest() == getattr(lfs, "sha256", None)
    return _git_blob_sha1(data) == getattr(remote, "blob_id", None)


def deploy(
    plan: PushPlan, token: str, *, token_source: str = "--token", endpoint: str | None = None
) -> PushResult:
    """Create or update the Space for ``plan``; every Hub failure is one :class:`OpenEnvError`."""
    from huggingface_hub import (
        CommitOperationAdd,
        CommitOperationDelete,
        HfApi,
        constants,
    )
    from huggingface_hub.errors import RepositoryNotFoundError
    from huggingface_hub.hf_api import RepoFile

    endpoint = (endpoint or constants.ENDPOINT).rstrip("/")
    api = HfApi(endpoint=endpoint, token=token)
    ctx = _Context(endpoint=endpoint, token_source=token_source)
    notes: list[str] = []

    with _hub("checking the token", ctx):
        me = api.whoami()
    ctx.user = user = str(me.get("name"))
    role = ((me.get("auth") or {}).get("accessToken") or {}).get("role")
    if role == "read":
        raise OpenEnvError(
            f"The token from {token_source} is read-only; deploying a Space needs write access.",
            hint=f"Create a write token at {endpoint}/settings/tokens, then run `hf auth login` or pass --token.",
        )
    repo_id = plan.repo.with_user(user)
    ctx.repo_id = repo_id
    namespace = repo_id.split("/", 1)[0]
    orgs = [str(org.get("name")) for org in me.get("orgs") or [] if isinstance(org, dict)]
    if namespace != user and namespace not in orgs:
        member_of = f" (your organizations: {', '.join(orgs)})" if orgs else ""
        raise OpenEnvError(
            f"{user} cannot push to {repo_id}: {namespace!r} is neither your user nor one of your organizations{member_of}.",
            hint=f"Use --repo-id {user}/{plan.repo.name}, or ask an admin of {namespace} to add you with write access.",
        )

    with _hub(f"reading {repo_id}", ctx):
        try:
            info = api.space_info(repo_id)
        except RepositoryNotFoundError:
            info = None
    created = info is None
    if created:
        with _hub(f"creating the Space {repo_id}", ctx):
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
        with _hub(f"making {repo_id} {'private' if desired else 'public'}", ctx):
            api.update_repo_settings(repo_id, repo_type="space", private=desired)
        private = bool(desired)

    # Variables and secrets before the files, so the build the commit starts already sees them.
    with _hub(f"reading the variables of {repo_id}", ctx):
        current = {
            key: getattr(var, "value", None)
            for key, var in api.get_space_variables(repo_id).items()
        }
    variables_set = []
    for key, value in plan.variables.items():
        if current.get(key) != value:
            with _hub(f"setting the variable {key} on {repo_id}", ctx):
                api.add_space_variable(repo_id, key, value)
            variables_set.append(key)
    for key, value in plan.secrets.items():
        with _hub(f"setting the secret {key} on {repo_id}", ctx), _no_request_logging():
            api.add_space_secret(repo_id, key, value)

    with _hub(f"listing the files of {repo_id}", ctx):
        remote = {
            entry.path: entry
            for entry in api.list_repo_tree(
                repo_id, repo_type="space", recursive=True, revision=info.sha
            )
            if isinstance(entry, RepoFile)
        }
    root = plan.staged.root
    uploaded = [
        p
        for p in plan.staged.files
        if p not in remote or not _unchanged((root / p).read_bytes(), remote[p])
    ]
    deleted = sorted(p for p in remote if p not in plan.staged.files and p not in HUB_MANAGED_FILES)
    commit = None
    if uploaded or deleted:
        operations = [
            CommitOperationAdd(path_in_repo=p, path_or_fileobj=str(root / p)) for p in uploaded
        ]
        operations += [CommitOperationDelete(path_in_repo=p) for p in deleted]
        version = plan.manifest.version or ""
        with _hub(f"uploading to {repo_id}", ctx):
            result = api.create_commit(
                repo_id,
                repo_type="space",
                operations=operations,
                commit_message=f"Deploy {plan.manifest.name} {version}".rstrip() + " with openenv",
                parent_commit=info.sha,
            )
        commit = result.oid
    return PushResult(
        repo_id=repo_id,
        urls=space_urls(repo_id, endpoint, plan.manifest.port),
        created=created,
        private=private,
        visibility_changed=visibility_changed,
        commit=commit,
        uploaded=uploaded,
        deleted=deleted,
        variables_set=variables_set,
        secrets_set=list(plan.secrets),
        notes=notes,
    )

"""What a Docker Space of an environment is made of: its id, URLs, README card and variables.

Repository ids are checked by ``huggingface_hub``'s own ``validate_repo_id`` and Space URLs
read by its ``RepoUrl``; the README front matter is read and written with its ``SpaceCard``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import yaml
from huggingface_hub import RepoUrl, SpaceCard, SpaceCardData
from huggingface_hub.errors import HFValidationError
from huggingface_hub.repocard import REGEX_YAML_BLOCK
from huggingface_hub.utils import validate_repo_id  # type: ignore[attr-defined]  # public, not in __all__

from openenv_cli.config import parse_bool
from openenv_cli.errors import UsageError
from openenv_cli.image.secret_rules import secret_variable_name
from openenv_cli.image.secret_scan import scan_text
from openenv_cli.image.selection import RUNTIME_DIR
from openenv_cli.manifest_schema import Manifest

SPACE_COLORS = ("red", "yellow", "green", "blue", "indigo", "purple", "pink", "gray")
OPENENV_TAG = "openenv"
WEB_BASE_PATH = "/web"
# Front matter keys that describe other SDKs and would confuse a Docker Space.
_FOREIGN_KEYS = ("sdk_version", "app_file", "python_version")
_ID_HINT = "Use NAMESPACE/NAME or NAME: letters, digits, '-', '_' and '.', not starting or ending with '-' or '.'."


@dataclass(frozen=True)
class RepoRef:
    """A Space id as given: ``namespace`` is None for a bare name (the user's namespace)."""

    namespace: str | None
    name: str

    def with_user(self, user: str) -> str:
        return f"{self.namespace or user}/{self.name}"

    def shown(self) -> str:
        return f"{self.namespace or '<your user>'}/{self.name}"


def parse_repo_id(raw: str, namespace: str | None = None) -> RepoRef:
    """Read ``name``, ``ns/name``, ``spaces/ns/name`` or a ``.../spaces/ns/name`` URL.

    ``namespace`` (``--namespace``) places a bare name in that namespace; it must agree with
    a namespace given in ``raw``. Model and dataset ids are refused: only Spaces are meant.
    """
    text = raw.strip()
    if "://" in text:
        parts = urlsplit(text)
        try:
            url = RepoUrl(text.rstrip("/"), endpoint=f"{parts.scheme}://{parts.netloc}")
        except ValueError:
            url = None
        if url is None or url.repo_type != "space":
            raise UsageError(
                f"{raw!r} is not a Space URL.",
                hint="Use --repo-id NAMESPACE/NAME, e.g. --repo-id alice/my_env.",
            )
        text = url.repo_id
    pieces = text.split("/")
    if len(pieces) == 3 and pieces[0] == "spaces":
        text = "/".join(pieces[1:])
    elif len(pieces) == 3 and pieces[0] in {"datasets", "models"}:
        raise UsageError(
            f"{raw!r} names a {pieces[0][:-1]} repository, not a Space.",
            hint=f"Use --repo-id {pieces[1]}/{pieces[2]} (a Space may share a model's name).",
        )
    try:
        validate_repo_id(text)
        if namespace is not None:
            validate_repo_id(namespace)
    except HFValidationError:
        raise UsageError(f"{raw!r} is not a valid Space id.", hint=_ID_HINT) from None
    given, _, name = text.rpartition("/")
    if namespace is not None and given and given != namespace:
        raise UsageError(
            f"--namespace {namespace} and --repo-id {raw} name different namespaces.",
            hint=f"Pass only one: --repo-id {namespace}/{name} or --namespace {namespace}.",
        )
    return RepoRef(given or namespace, name)


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
    """``Alice/my_env`` → ``alice-my-env``: how Spaces name the app's host and image, when the
    Hub does not say (its ``space_info`` gives ``subdomain``)."""
    return re.sub(r"[^a-z0-9]", "-", repo_id.replace("/", "-").lower())


def space_urls(repo_id: str, endpoint: str, port: int, subdomain: str | None = None) -> SpaceUrls:
    sub = subdomain or space_subdomain(repo_id)
    page = f"{endpoint.rstrip('/')}/spaces/{repo_id}"
    return SpaceUrls(
        page=page,
        app=f"https://{sub}.hf.space",
        websocket=f"wss://{sub}.hf.space/ws",
        pip=f"pip install git+{page}",
        pip_with_runtime=f'pip install "openenv-runtime @ git+{page}#subdirectory={RUNTIME_DIR}" git+{page}',
        docker=f"docker run -p {port}:{port} registry.hf.space/{sub}:latest",
    )


# -- README card and variables --------------------------------------------------------------


def split_front_matter(text: str) -> tuple[dict[str, Any] | None, str]:
    """The card metadata (None when absent or invalid) and the README body, read by
    ``huggingface_hub``'s ``SpaceCard``."""
    if not REGEX_YAML_BLOCK.search(text):
        return None, text
    try:
        card = SpaceCard(text)
    except (ValueError, yaml.YAMLError):
        return None, REGEX_YAML_BLOCK.sub("", text, count=1).lstrip("\r\n")
    data: dict[str, Any] = card.data.to_dict()  # type: ignore[no-untyped-call]
    return data, card.text.lstrip("\r\n")


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
    """The ``---`` block of a README, written by ``huggingface_hub``'s card data."""
    return "---\n" + SpaceCardData(**dict(front)).to_yaml() + "\n---\n"


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
    ``ENABLE_WEB_INTERFACE`` is always set, so turning the interface back on works too.

    Space variables are public (anyone can read them on a public Space): a name that looks
    like a secret's (``HF_TOKEN``, ``*_KEY``, ``*PASSWORD*``, ...) is refused, pointing to
    ``--secret``."""
    refuse_secret_variables(manifest.push.variables, "openenv.yaml push.variables")
    refuse_secret_variables(cli_variables, "-e")
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
    if no_interface and truthy(cli_variables.get("ENABLE_WEB_INTERFACE")) is True:
        raise UsageError(
            "--no-interface contradicts -e ENABLE_WEB_INTERFACE="
            + cli_variables["ENABLE_WEB_INTERFACE"]
            + ".",
            hint="Drop one of them.",
        )
    variables.update(cli_variables)
    return variables


def refuse_secret_variables(variables: Mapping[str, str], origin: str) -> None:
    """Refuse variables whose names say they hold a secret, or whose values look like one
    (a token under ``MODEL_ID``): they belong in Space secrets."""
    names = [name for name in variables if secret_variable_name(name)]
    for name, value in variables.items():
        finding = scan_text(value) if name not in names else None
        if finding is not None:
            raise UsageError(
                f"The value of {name} ({origin}) looks like a secret ({finding.kind}), "
                "and Space variables are public: anyone who can see the Space can read them.",
                hint=f"Pass it as a Space secret instead: --secret {name} (a bare NAME reads $NAME).",
            )
    if names:
        listed = ", ".join(names)
        raise UsageError(
            f"{listed} ({origin}) look{'s' if len(names) == 1 else ''} like secret{'s' if len(names) > 1 else ''}, "
            "and Space variables are public: anyone who can see the Space can read them.",
            hint="Pass "
            + " ".join(f"--secret {name}" for name in names)
            + " instead (a Space secret, never shown; a bare NAME reads $NAME).",
        )


def truthy(value: str | None) -> bool | None:
    """A boolean setting's value, or None when unset or unreadable."""
    if value is None:
        return None
    try:
        return parse_bool(value)
    except ValueError:
        return None


def space_hardware(flavor: str) -> str:
    """A hardware flavor the Hub knows (``huggingface_hub``'s ``SpaceHardware``), checked
    before anything is uploaded."""
    from huggingface_hub import SpaceHardware

    known = [h.value for h in SpaceHardware]
    if flavor.strip() not in known:
        raise UsageError(
            f"--hardware {flavor!r} is not a Space hardware flavor.",
            hint="Use one of: " + ", ".join(known) + ".",
        )
    return flavor.strip()

"""In-memory state of the local Hub-compatible test server.

Everything a test may want to assert on lives here: accounts and tokens, repositories with their
full commit history (each commit keeps a snapshot of every file), Space variables, secrets and
runtime stage, and a log of the requests the server answered.
"""

from __future__ import annotations

import hashlib
import itertools
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime

import yaml

REPO_KINDS = ("model", "dataset", "space")
DEFAULT_BRANCH = "main"
SPACE_SDKS = ("gradio", "docker", "static", "streamlit")

# What the Hub puts in the first commit of a new repository: a `.gitattributes` routing large
# binary formats to LFS. Only its presence matters to clients (it shows up in file listings).
INITIAL_GITATTRIBUTES = b"".join(
    f"*.{ext} filter=lfs diff=lfs merge=lfs -text\n".encode()
    for ext in (
        "7z",
        "bin",
        "gz",
        "h5",
        "npz",
        "onnx",
        "parquet",
        "pt",
        "safetensors",
        "tar",
        "zip",
    )
)


def git_blob_sha1(data: bytes) -> str:
    """The git object id of a blob: what the Hub reports as a regular file's `oid`."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def utc_now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def parse_front_matter(text: str) -> dict | None:
    """The YAML mapping between the leading `---` lines of a README, or None when there is none.

    Raises `yaml.YAMLError` when the block is there but is not valid YAML.
    """
    lines = text.splitlines()
    if not lines or lines[0].strip() != "---":
        return None
    for index, line in enumerate(lines[1:], start=1):
        if line.strip() == "---":
            data = yaml.safe_load("\n".join(lines[1:index]))
            return data if isinstance(data, dict) else None
    return None


@dataclass(frozen=True)
class Account:
    """Who a token belongs to: a user, the organizations they are in, and the token's role."""

    user: str
    role: str = "write"  # "write" or "read"
    orgs: tuple[str, ...] = ()

    def member_of(self, namespace: str) -> bool:
        return namespace == self.user or namespace in self.orgs

    def can_write(self, namespace: str) -> bool:
        return self.role == "write" and self.member_of(namespace)


@dataclass
class Commit:
    oid: str
    summary: str
    description: str
    author: str
    added: list[str]  # paths written by this commit (new or changed)
    deleted: list[str]
    files: dict[str, bytes]  # snapshot of the whole repository after this commit
    created_at: str


@dataclass
class Setting:
    """A Space variable or secret as stored by the Hub."""

    value: str
    description: str | None
    updated_at: str


@dataclass
class HubRequest:
    """One answered request. Bodies are never logged, so secret values never end up here."""

    method: str
    path: str
    query: str
    user: str | None
    status: int


@dataclass
class Repo:
    kind: str  # "model", "dataset" or "space"
    namespace: str
    name: str
    visibility: str  # "public", "private" or "protected"
    sdk: str | None  # the SDK given at creation; README front matter takes precedence
    commits: list[Commit] = field(default_factory=list)
    variables: dict[str, Setting] = field(default_factory=dict)
    secrets: dict[str, Setting] = field(default_factory=dict)
    stage: str = "NO_APP_FILE"
    hardware: str = "cpu-basic"
    pending_build_polls: int = 0
    gated: object = False
    created_at: str = field(default_factory=utc_now)

    @property
    def id(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def key(self) -> str:
        return f"{self.kind}s/{self.id}"

    @property
    def private(self) -> bool:
        return self.visibility != "public"

    @property
    def head(self) -> Commit:
        return self.commits[-1]

    @property
    def sha(self) -> str:
        return self.head.oid

    @property
    def files(self) -> dict[str, bytes]:
        """Path → content at the head of the default branch."""
        return dict(self.head.files)

    def file(self, path: str) -> bytes:
        try:
            return self.head.files[path]
        except KeyError:
            raise KeyError(
                f"{path!r} is not in {self.key}; files: {sorted(self.head.files)}"
            ) from None

    def text(self, path: str) -> str:
        return self.file(path).decode("utf-8")

    def card_data(self, files: Mapping[str, bytes] | None = None) -> dict | None:
        readme = (self.head.files if files is None else files).get("README.md")
        if readme is None:
            return None
        try:
            return parse_front_matter(readme.decode("utf-8", errors="replace"))
        except yaml.YAMLError:
            return None

    @property
    def effective_sdk(self) -> str | None:
        card = self.card_data() or {}
        return card.get("sdk") or self.sdk

    def variable_values(self) -> dict[str, str]:
        return {key: entry.value for key, entry in self.variables.items()}

    def secret_values(self) -> dict[str, str]:
        return {key: entry.value for key, entry in self.secrets.items()}

    def commit_at(self, revision: str) -> Commit | None:
        """The commit a revision names: the default branch, or a full or abbreviated (≥7) sha."""
        if revision == DEFAULT_BRANCH:
            return self.head
        if len(revision) >= 7:
            for commit in reversed(self.commits):
                if commit.oid.startswith(revision.lower()):
                    return commit
        return None


class HubState:
    """Everything the test Hub knows. Safe to read from the test thread while the server runs."""

    def __init__(self, tokens: Mapping[str, str | Account] | None = None) -> None:
        self.lock = threading.RLock()
        self.tokens: dict[str, Account] = {}
        self.repos: dict[str, Repo] = {}
        self.requests: list[HubRequest] = []
        # After a commit (or restart) a Space reports BUILDING for `build_polls` reads of its
        # runtime, then `build_result` ("RUNNING", "BUILD_ERROR", "RUNTIME_ERROR", ...).
        self.build_result = "RUNNING"
        self.build_polls = 1
        # The most items one page of a listing (`GET /api/spaces`) holds; more pages are
        # linked with a `Link: <...>; rel="next"` header, which the client follows.
        self.page_size = 1000
        self._counter = itertools.count(1)
        for token, who in (tokens or {}).items():
            account = who if isinstance(who, Account) else Account(user=who)
            self.tokens[token] = account

    # -- accounts -----------------------------------------------------------------------------

    def add_token(
        self, token: str, user: str, *, role: str = "write", orgs: Iterable[str] = ()
    ) -> Account:
        account = Account(user=user, role=role, orgs=tuple(orgs))
        with self.lock:
            self.tokens[token] = account
        return account

    def account(self, token: str) -> Account | None:
        with self.lock:
            return self.tokens.get(token)

    # -- repositories -------------------------------------------------------------------------

    def find(self, repo_id: str, kind: str = "space") -> Repo | None:
        with self.lock:
            return self.repos.get(f"{kind}s/{repo_id}")

    def has_repo(self, repo_id: str, kind: str = "space") -> bool:
        return self.find(repo_id, kind) is not None

    def repo(self, repo_id: str, kind: str = "space") -> Repo:
        """The repository `namespace/name` of that kind; KeyError naming the existing ones."""
        found = self.find(repo_id, kind)
        if found is None:
            raise KeyError(f"no {kind} {repo_id!r} on the test Hub; repos: {sorted(self.repos)}")
        return found

    def commits(self, repo_id: str, kind: str = "space") -> list[Commit]:
        return list(self.repo(repo_id, kind).commits)

    def create_repo(
        self,
        repo_id: str,
        *,
        kind: str = "space",
        sdk: str | None = None,
        visibility: str = "public",
        author: str | None = None,
    ) -> Repo:
        """Create a repository with its initial commit (also usable by tests to seed the Hub)."""
        namespace, name = repo_id.split("/", 1)
        if kind == "space" and sdk is None:
            sdk = "docker"
        repo = Repo(kind=kind, namespace=namespace, name=name, visibility=visibility, sdk=sdk)
        with self.lock:
            if repo.key in self.repos:
                raise ValueError(f"{repo.key} already exists")
            self.repos[repo.key] = repo
            self.commit(
                repo,
                author=author or namespace,
                summary="initial commit",
                writes={".gitattributes": INITIAL_GITATTRIBUTES},
            )
        return repo

    def duplicate_repo(
        self,
        source: Repo,
        target_id: str,
        *,
        visibility: str,
        hardware: str | None = None,
        variables: Mapping[str, Setting] | None = None,
        secrets: Mapping[str, Setting] | None = None,
    ) -> Repo:
        """A copy of `source` under `target_id`, as the Hub's duplicate endpoint makes it.

        The whole history is copied (the Hub copies the git history server-side). For a Space,
        the source's variables are copied and then overridden by `variables`; its secrets are
        not copied (the Hub never does: they cannot be read back), only `secrets` are set.
        """
        namespace, name = target_id.split("/", 1)
        with self.lock:
            repo = Repo(
                kind=source.kind,
                namespace=namespace,
                name=name,
                visibility=visibility,
                sdk=source.sdk,
                commits=[
                    Commit(**{**vars(commit), "files": dict(commit.files)})
                    for commit in source.commits
                ],
            )
            if repo.key in self.repos:
                raise ValueError(f"{repo.key} already exists")
            if repo.kind == "space":
                repo.variables = {
                    key: Setting(entry.value, entry.description, utc_now())
                    for key, entry in source.variables.items()
                }
                repo.variables.update(variables or {})
                repo.secrets = dict(secrets or {})
                repo.hardware = hardware or "cpu-basic"
            self.repos[repo.key] = repo
            if repo.kind == "space":
                self.start_build(repo)
        return repo

    def delete_repo(self, repo: Repo) -> None:
        with self.lock:
            self.repos.pop(repo.key, None)

    def commit(
        self,
        repo: Repo,
        *,
        author: str,
        summary: str,
        description: str = "",
        writes: Mapping[str, bytes] | None = None,
        deletes: Iterable[str] = (),
    ) -> Commit:
        """Apply deletions then writes on top of the head and record the result as a new commit."""
        writes = dict(writes or {})
        with self.lock:
            parent = repo.commits[-1] if repo.commits else None
            files = dict(parent.files) if parent else {}
            deleted = []
            for path in deletes:
                for existing in [
                    p for p in files if p == path or p.startswith(path.rstrip("/") + "/")
                ]:
                    del files[existing]
                    deleted.append(existing)
            files.update(writes)
            seed = f"{parent.oid if parent else ''}\n{summary}\n{next(self._counter)}\n"
            seed += "".join(
                f"{path} {git_blob_sha1(data)}\n" for path, data in sorted(files.items())
            )
            commit = Commit(
                oid=hashlib.sha1(seed.encode()).hexdigest(),
                summary=summary,
                description=description,
                author=author,
                added=sorted(writes),
                deleted=deleted,
                files=files,
                created_at=utc_now(),
            )
            repo.commits.append(commit)
            if repo.kind == "space" and parent is not None:
                self.start_build(repo)
            return commit

    # -- Space runtime ------------------------------------------------------------------------

    def start_build(self, repo: Repo) -> None:
        with self.lock:
            files = repo.head.files
            if repo.effective_sdk == "docker":
                has_app = "Dockerfile" in files
            else:
                has_app = any(path not in (".gitattributes", "README.md") for path in files)
            repo.stage = "BUILDING" if has_app else "NO_APP_FILE"
            repo.pending_build_polls = self.build_polls

    def poll_runtime(self, repo: Repo) -> dict:
        """The runtime a client reads; each read moves a building Space one step closer to done."""
        with self.lock:
            if repo.stage == "BUILDING":
                if repo.pending_build_polls > 0:
                    repo.pending_build_polls -= 1
                else:
                    repo.stage = self.build_result
            return self.runtime(repo)

    def runtime(self, repo: Repo) -> dict:
        with self.lock:
            running = repo.stage in ("RUNNING", "RUNNING_BUILDING", "APP_STARTING")
            runtime: dict = {
                "stage": repo.stage,
                "hardware": {
                    "current": repo.hardware if running else None,
                    "requested": repo.hardware,
                },
                "storage": None,
                "gcTimeout": None,
                "devMode": False,
                "domains": [
                    {
                        "domain": f"{subdomain(repo)}.hf.space",
                        "stage": "READY" if running else "PENDING",
                    }
                ],
            }
            if repo.stage.endswith("_ERROR"):
                runtime["errorMessage"] = f"{repo.stage} (emulated by the local test Hub)"
            return runtime

    # -- request log --------------------------------------------------------------------------

    def record(self, request: HubRequest) -> None:
        with self.lock:
            self.requests.append(request)

    def calls(
        self, method: str | None = None, path_contains: str | None = None
    ) -> list[HubRequest]:
        """Logged requests, filtered by method and/or a substring of the path."""
        with self.lock:
            return [
                r
                for r in self.requests
                if (method is None or r.method == method.upper())
                and (path_contains is None or path_contains in r.path)
            ]


def subdomain(repo: Repo) -> str:
    raw = f"{repo.namespace}-{repo.name}".lower()
    return "".join(ch if ch.isalnum() else "-" for ch in raw)

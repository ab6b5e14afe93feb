"""The HTTP face of the local test Hub: the routes `huggingface_hub` calls to deploy a Space
(`openenv push`), duplicate one (`openenv fork`) and search them (`openenv discover`).

Handlers are `async` so they all run on the server's event loop, one at a time; `HubState.lock`
guards against the test thread reading while a handler writes.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import re
from collections.abc import Awaitable, Callable

import yaml
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response
from huggingface_hub import SpaceHardware
from starlette.exceptions import HTTPException as StarletteHTTPException

from .state import (
    DEFAULT_BRANCH,
    REPO_KINDS,
    SPACE_SDKS,
    Account,
    Commit,
    HubRequest,
    HubState,
    Repo,
    Setting,
    git_blob_sha1,
    parse_front_matter,
    subdomain,
    utc_now,
)

INVALID_CREDENTIALS = "Invalid credentials in Authorization header"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,95}$")
_ENV_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# What `GET /api/spaces` accepts in `expand` and `sort` (huggingface_hub's own lists).
_SPACE_EXPAND = (
    "author",
    "cardData",
    "createdAt",
    "datasets",
    "disabled",
    "lastModified",
    "likes",
    "models",
    "private",
    "region",
    "resourceGroup",
    "runtime",
    "sdk",
    "sha",
    "siblings",
    "subdomain",
    "tags",
    "trendingScore",
    "usedStorage",
)
_SPACE_SORTS = ("createdAt", "lastModified", "likes", "trendingScore")
# The hardware flavors a Space may request (huggingface_hub's SpaceHardware).
_SPACE_HARDWARE = tuple(flavor.value for flavor in SpaceHardware)
# The empty agent-harness registry, in the shape huggingface_hub's agent detection reads.
_EMPTY_HARNESS_REGISTRY = {"standardEnvVars": [], "harnesses": {}}


class HubError(Exception):
    """An error answered the Hub's way: JSON `{"error"}` plus X-Error-Code / X-Error-Message."""

    def __init__(self, status: int, message: str, code: str | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.code = status, message, code


def _error_response(status: int, message: str, code: str | None = None) -> JSONResponse:
    headers = {"X-Error-Message": message}
    if code:
        headers["X-Error-Code"] = code
    return JSONResponse({"error": message}, status_code=status, headers=headers)


def _bearer_token(authorization: str | None) -> str | None:
    if not authorization:
        return None
    scheme, _, token = authorization.partition(" ")
    return token.strip() if scheme.lower() == "bearer" else ""


class _RequestLog:
    """ASGI middleware that records method, path, query, caller and status of every request."""

    def __init__(self, app: Callable[..., Awaitable[None]], state: HubState) -> None:
        self.app, self.state = app, state

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        status = {"code": 500}

        async def send_and_note(message: dict) -> None:
            if message["type"] == "http.response.start":
                status["code"] = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_and_note)
        finally:
            headers = {
                k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]
            }
            token = _bearer_token(headers.get("authorization"))
            account = self.state.account(token) if token else None
            self.state.record(
                HubRequest(
                    method=scope["method"],
                    path=scope["path"],
                    query=scope.get("query_string", b"").decode("latin-1"),
                    user=account.user if account else None,
                    status=status["code"],
                )
            )


def create_app(state: HubState) -> FastAPI:
    """A FastAPI app serving `state` over the subset of the Hub API that openenv uses."""
    app = FastAPI(title="local test Hub", openapi_url=None, docs_url=None, redoc_url=None)
    app.add_middleware(_RequestLog, state=state)

    @app.exception_handler(HubError)
    async def _hub_error(_: Request, exc: HubError) -> JSONResponse:
        return _error_response(exc.status, exc.message, exc.code)

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        return _error_response(exc.status_code, str(exc.detail))

    # -- helpers closed over `state` ----------------------------------------------------------

    def caller(request: Request) -> Account | None:
        token = _bearer_token(request.headers.get("authorization"))
        if token is None:
            return None
        account = state.account(token) if token else None
        if account is None:
            raise HubError(401, INVALID_CREDENTIALS)
        return account

    def kind_of(kinds: str) -> str:
        kind = kinds[:-1] if kinds.endswith("s") else ""
        if kind not in REPO_KINDS:
            raise HubError(404, f"Unknown repository type {kinds!r}")
        return kind

    def readable(
        request: Request, kinds: str, namespace: str, name: str
    ) -> tuple[Repo, Account | None]:
        who = caller(request)
        repo = state.find(f"{namespace}/{name}", kind_of(kinds))
        if repo is None or (repo.private and not (who and who.member_of(namespace))):
            # Like the Hub: a private repository you cannot see is reported as missing.
            raise HubError(401 if who is None else 404, "Repository not found", "RepoNotFound")
        return repo, who

    def writable(request: Request, kinds: str, namespace: str, name: str) -> tuple[Repo, Account]:
        repo, who = readable(request, kinds, namespace, name)
        if who is None:
            raise HubError(401, "You must be authenticated to modify a repository")
        if not who.can_write(namespace):
            raise HubError(403, f"You don't have the rights to write to {repo.key} with this token")
        return repo, who

    def revision(repo: Repo, rev: str):
        commit = repo.commit_at(rev)
        if commit is None:
            raise HubError(404, f"Invalid rev id: {rev}", "RevisionNotFound")
        return commit

    async def json_body(request: Request) -> dict:
        try:
            body = json.loads(await request.body() or b"{}")
        except ValueError as exc:
            raise HubError(400, f"Request body is not valid JSON: {exc}") from None
        if not isinstance(body, dict):
            raise HubError(400, "Request body must be a JSON object")
        return body

    def requested_visibility(body: dict) -> str | None:
        """`visibility` (clients >=1.8) or the older `private` flag; None when neither is given."""
        if "visibility" in body:
            visibility = body["visibility"]
            if visibility not in ("public", "private", "protected"):
                raise HubError(400, f"Invalid visibility {visibility!r}")
            return str(visibility)
        if body.get("private") is not None:
            return "private" if body["private"] else "public"
        return None

    def settings_from(body: dict, field_name: str) -> dict[str, Setting]:
        """The `variables` or `secrets` list of a create or duplicate request, checked."""
        found: dict[str, Setting] = {}
        items = body.get(field_name) or []
        if not isinstance(items, list):
            raise HubError(400, f"{field_name} must be a list of {{key, value}} objects")
        for item in items:
            key = item.get("key") if isinstance(item, dict) else None
            if not isinstance(key, str) or not _ENV_KEY.match(key) or "value" not in item:
                raise HubError(
                    400, f"Invalid {field_name} entry: give a key (letters, digits, _) and a value"
                )
            found[key] = Setting(str(item["value"]), item.get("description"), utc_now())
        return found

    def repo_url(request: Request, repo: Repo) -> str:
        base = str(request.base_url).rstrip("/")
        return f"{base}/{repo.id}" if repo.kind == "model" else f"{base}/{repo.kind}s/{repo.id}"

    # -- account ------------------------------------------------------------------------------

    @app.get("/api/whoami-v2")
    async def whoami(request: Request) -> dict:
        who = caller(request)
        if who is None:
            raise HubError(401, "You must be authenticated to call whoami")
        return {
            "type": "user",
            "id": hashlib.sha1(who.user.encode()).hexdigest()[:24],
            "name": who.user,
            "fullname": who.user,
            "isPro": False,
            "orgs": [{"type": "org", "name": org, "fullname": org} for org in who.orgs],
            "auth": {
                "type": "access_token",
                "accessToken": {"displayName": "test token", "role": who.role},
            },
        }

    @app.get("/api/agent-harnesses")
    async def agent_harnesses() -> dict:
        return _EMPTY_HARNESS_REGISTRY

    # -- repository lifecycle -----------------------------------------------------------------

    @app.post("/api/repos/create")
    async def create_repo(request: Request) -> JSONResponse:
        who = caller(request)
        body = await json_body(request)
        if who is None:
            raise HubError(401, "You must be authenticated to create a repository")
        kind = body.get("type") or "model"
        name = body.get("name") or ""
        namespace = body.get("organization") or who.user
        if kind not in REPO_KINDS:
            raise HubError(400, f"Invalid repository type {kind!r}")
        if not _NAME.match(name) or ".." in name or "--" in name:
            raise HubError(400, f"Invalid repository name {name!r}")
        if not who.can_write(namespace):
            raise HubError(
                403,
                f"You don't have the rights to create a {kind} under the namespace {namespace!r}",
            )
        visibility = requested_visibility(body) or "public"
        sdk = body.get("sdk")
        if kind == "space" and sdk not in SPACE_SDKS:
            raise HubError(
                400, f"Invalid Space SDK {sdk!r}; expected one of {', '.join(SPACE_SDKS)}"
            )
        existing = state.find(f"{namespace}/{name}", kind)
        if existing is not None:
            message = f"You already created this {kind} repo"
            return JSONResponse(
                {"error": message, "url": repo_url(request, existing)},
                status_code=409,
                headers={"X-Error-Message": message},
            )
        with state.lock:
            repo = state.create_repo(
                f"{namespace}/{name}",
                kind=kind,
                sdk=sdk if kind == "space" else None,
                visibility=visibility,
                author=who.user,
            )
            if kind == "space":
                repo.hardware = body.get("hardware") or repo.hardware
                repo.variables.update(settings_from(body, "variables"))
                repo.secrets.update(settings_from(body, "secrets"))
        return JSONResponse({"url": repo_url(request, repo), "name": repo.id, "id": repo.id})

    @app.delete("/api/repos/delete")
    async def delete_repo(request: Request) -> dict:
        body = await json_body(request)
        namespace = body.get("organization") or (caller(request) or Account("")).user
        repo, _ = writable(
            request, f"{body.get('type') or 'model'}s", namespace, body.get("name") or ""
        )
        state.delete_repo(repo)
        return {}

    @app.post("/api/{kinds}/{namespace}/{name}/duplicate")
    async def duplicate(request: Request, kinds: str, namespace: str, name: str) -> JSONResponse:
        """The Hub's server-side copy: history, SDK and (for a Space) its variables; never
        its secrets. Visibility defaults to the source's; hardware to cpu-basic."""
        source, who = readable(request, kinds, namespace, name)
        if who is None:
            raise HubError(401, "You must be authenticated to duplicate a repository")
        body = await json_body(request)
        target = body.get("repository")
        if not isinstance(target, str) or target.count("/") != 1:
            raise HubError(400, "repository must be NAMESPACE/NAME")
        target_namespace, target_name = target.split("/")
        if not _NAME.match(target_name) or ".." in target_name or "--" in target_name:
            raise HubError(400, f"Invalid repository name {target_name!r}")
        if not who.can_write(target_namespace):
            raise HubError(
                403,
                f"You don't have the rights to create a {source.kind} under the namespace {target_namespace!r}",
            )
        visibility = requested_visibility(body) or source.visibility
        variables = settings_from(body, "variables")
        secrets = settings_from(body, "secrets")
        hardware = body.get("hardware")
        if hardware is not None and hardware not in _SPACE_HARDWARE:
            raise HubError(400, f"Invalid hardware {hardware!r}")
        if state.find(target, source.kind) is not None:
            message = f"You already created this {source.kind} repo"
            return JSONResponse(
                {"error": message}, status_code=409, headers={"X-Error-Message": message}
            )
        with state.lock:
            repo = state.duplicate_repo(
                source,
                target,
                visibility=visibility,
                hardware=hardware,
                variables=variables,
                secrets=secrets,
            )
        return JSONResponse({"url": repo_url(request, repo), "filesCopyPending": False})

    @app.put("/api/{kinds}/{namespace}/{name}/settings")
    async def update_settings(request: Request, kinds: str, namespace: str, name: str) -> dict:
        repo, _ = writable(request, kinds, namespace, name)
        body = await json_body(request)
        with state.lock:
            if "visibility" in body:
                if body["visibility"] not in ("public", "private", "protected"):
                    raise HubError(400, f"Invalid visibility {body['visibility']!r}")
                repo.visibility = body["visibility"]
            elif "private" in body:
                repo.visibility = "private" if body["private"] else "public"
            if "gated" in body:
                repo.gated = body["gated"]
        return {}

    # -- reading a repository -----------------------------------------------------------------

    def info(request: Request, kinds: str, namespace: str, name: str, rev: str) -> dict:
        repo, _ = readable(request, kinds, namespace, name)
        with state.lock:
            return describe(request, repo, revision(repo, rev))

    def describe(request: Request, repo: Repo, commit: Commit) -> dict:
        """Everything `GET /api/{kinds}/{id}` says about `repo` at `commit`."""
        with state.lock:
            card = repo.card_data(commit.files)
            blobs = request.query_params.get("blobs", "").lower() in ("1", "true")
            siblings = [
                {
                    "rfilename": path,
                    **({"size": len(data), "blobId": git_blob_sha1(data)} if blobs else {}),
                }
                for path, data in sorted(commit.files.items())
            ]
            data: dict = {
                "_id": hashlib.sha1(repo.key.encode()).hexdigest()[:24],
                "id": repo.id,
                "author": repo.namespace,
                "sha": commit.oid,
                "createdAt": repo.created_at,
                "lastModified": commit.created_at,
                "private": repo.private,
                "gated": repo.gated,
                "disabled": False,
                "likes": 0,
                "tags": list((card or {}).get("tags") or []),
                "siblings": siblings,
            }
            if card is not None:
                data["cardData"] = card
            if repo.kind == "space":
                data["sdk"] = (card or {}).get("sdk") or repo.sdk
                data["subdomain"] = subdomain(repo)
                data["host"] = f"https://{subdomain(repo)}.hf.space"
                data["runtime"] = state.runtime(repo)
            if repo.kind == "model":
                data["modelId"] = repo.id
            return data

    @app.get("/api/spaces")
    async def list_spaces(request: Request) -> JSONResponse:
        """The Hub's Space search: `search` (a case-insensitive part of the id), `author`,
        `filter` (tags, all of them), `sort` with `direction`, `limit`, and `expand` (only
        those properties, plus `_id` and `id`) or `full`; pages linked by a `Link` header."""
        who = caller(request)
        params = request.query_params
        expand = params.getlist("expand") + params.getlist("expand[]")
        full = params.get("full", "").lower() in ("1", "true")
        if expand and full:
            raise HubError(400, "expand cannot be used together with full")
        unknown = sorted(set(expand) - set(_SPACE_EXPAND))
        if unknown:
            raise HubError(400, f"Invalid expand value(s): {', '.join(unknown)}")
        sort = params.get("sort")
        if sort is not None and sort not in _SPACE_SORTS:
            raise HubError(400, f"Invalid sort {sort!r}; expected one of {', '.join(_SPACE_SORTS)}")
        try:
            limit = int(params["limit"]) if "limit" in params else None
            cursor = int(params.get("cursor") or 0)
        except ValueError:
            raise HubError(400, "limit and cursor must be integers") from None
        search = (params.get("search") or "").lower()
        author = params.get("author")
        tags = params.getlist("filter")
        with state.lock:
            rows = []
            for repo in list(state.repos.values()):
                visible = not repo.private or (who is not None and who.member_of(repo.namespace))
                if repo.kind != "space" or not visible:
                    continue
                if search not in repo.id.lower() or (author and repo.namespace != author):
                    continue
                data = describe(request, repo, repo.head)
                if all(tag in data["tags"] for tag in tags):
                    rows.append(data)
        if sort is not None:
            descending = params.get("direction", "-1") != "1"
            rows.sort(key=lambda row: row.get(sort) or 0, reverse=descending)
        size = min(limit or state.page_size, state.page_size)
        page = rows[cursor : cursor + size]
        if expand:
            shown = [{k: row[k] for k in ("_id", "id", *expand) if k in row} for row in page]
        elif full:
            shown = page
        else:  # the Hub's short form
            keys = ("_id", "id", "likes", "private", "sdk", "tags", "createdAt")
            shown = [{k: row[k] for k in keys if k in row} for row in page]
        headers = {}
        if cursor + size < len(rows):
            nxt = request.url.include_query_params(cursor=cursor + size)
            headers["Link"] = f'<{nxt}>; rel="next"'
        return JSONResponse(shown, headers=headers)

    @app.get("/api/{kinds}/{namespace}/{name}")
    async def repo_info(request: Request, kinds: str, namespace: str, name: str) -> dict:
        return info(request, kinds, namespace, name, DEFAULT_BRANCH)

    @app.get("/api/{kinds}/{namespace}/{name}/revision/{rev}")
    async def repo_info_at(
        request: Request, kinds: str, namespace: str, name: str, rev: str
    ) -> dict:
        return info(request, kinds, namespace, name, rev)

    @app.get("/api/{kinds}/{namespace}/{name}/tree/{rev}")
    @app.get("/api/{kinds}/{namespace}/{name}/tree/{rev}/{path:path}")
    async def tree(
        request: Request, kinds: str, namespace: str, name: str, rev: str, path: str = ""
    ) -> list:
        repo, _ = readable(request, kinds, namespace, name)
        recursive = request.query_params.get("recursive", "").lower() in ("1", "true")
        with state.lock:
            files = revision(repo, rev).files
        prefix = f"{path.strip('/')}/" if path.strip("/") else ""
        below = {p: data for p, data in files.items() if p.startswith(prefix)}
        if prefix and not below:
            raise HubError(404, f"{path} does not exist on {rev}", "EntryNotFound")
        entries: dict[str, dict] = {}
        for file_path, data in sorted(below.items()):
            parts = file_path[len(prefix) :].split("/")
            depth = len(parts) if recursive else 1
            for i in range(1, min(depth, len(parts) - 1) + 1):  # the directories on the way
                folder = prefix + "/".join(parts[:i])
                listing = "".join(f"{p}\n" for p in sorted(below) if p.startswith(folder + "/"))
                entries.setdefault(
                    folder,
                    {
                        "type": "directory",
                        "oid": hashlib.sha1(listing.encode()).hexdigest(),
                        "size": 0,
                        "path": folder,
                    },
                )
            if recursive or len(parts) == 1:
                entries[file_path] = {
                    "type": "file",
                    "oid": git_blob_sha1(data),
                    "size": len(data),
                    "path": file_path,
                }
        return list(entries.values())

    async def resolve(
        request: Request, kinds: str, namespace: str, name: str, rev: str, path: str
    ) -> Response:
        repo, _ = readable(request, kinds, namespace, name)
        with state.lock:
            commit = revision(repo, rev)
            data = commit.files.get(path)
        if data is None:
            raise HubError(404, f"Entry not found: {path}", "EntryNotFound")
        headers = {"X-Repo-Commit": commit.oid, "ETag": f'"{git_blob_sha1(data)}"'}
        return Response(content=data, media_type="application/octet-stream", headers=headers)

    @app.api_route("/{kinds}/{namespace}/{name}/resolve/{rev}/{path:path}", methods=["GET", "HEAD"])
    async def resolve_typed(
        request: Request, kinds: str, namespace: str, name: str, rev: str, path: str
    ) -> Response:
        if kinds not in ("datasets", "spaces"):
            raise HubError(404, "Not Found")
        return await resolve(request, kinds, namespace, name, rev, path)

    @app.api_route("/{namespace}/{name}/resolve/{rev}/{path:path}", methods=["GET", "HEAD"])
    async def resolve_model(
        request: Request, namespace: str, name: str, rev: str, path: str
    ) -> Response:
        return await resolve(request, "models", namespace, name, rev, path)

    # -- writing ------------------------------------------------------------------------------

    @app.post("/api/validate-yaml")
    async def validate_yaml(request: Request) -> JSONResponse:
        body = await json_body(request)
        try:
            parse_front_matter(str(body.get("content") or ""))
        except yaml.YAMLError as exc:
            message = f"Invalid YAML in README.md front matter: {exc}".replace("\n", " ")
            return JSONResponse(
                {"errors": [{"message": message}], "warnings": []},
                status_code=400,
                headers={"X-Error-Message": message},
            )
        return JSONResponse({"errors": [], "warnings": []})

    @app.post("/api/{kinds}/{namespace}/{name}/preupload/{rev}")
    async def preupload(request: Request, kinds: str, namespace: str, name: str, rev: str) -> dict:
        repo, _ = writable(request, kinds, namespace, name)
        body = await json_body(request)
        with state.lock:
            files = revision(repo, rev).files
        answer = []
        for item in body.get("files") or []:
            existing = files.get(item.get("path"))
            answer.append(
                {
                    "path": item.get("path"),
                    # Always "regular": an "lfs" answer sends new clients to Xet storage.
                    "uploadMode": "regular",
                    "shouldIgnore": False,
                    "oid": git_blob_sha1(existing) if existing is not None else None,
                }
            )
        return {"files": answer, "commitOid": repo.sha}

    @app.post("/api/{kinds}/{namespace}/{name}/commit/{rev}")
    async def commit(request: Request, kinds: str, namespace: str, name: str, rev: str) -> dict:
        repo, who = writable(request, kinds, namespace, name)
        if request.query_params.get("create_pr") in ("1", "true"):
            raise HubError(400, "Pull requests are not supported by the local test Hub")
        if rev != DEFAULT_BRANCH:
            raise HubError(
                404,
                f"Invalid rev id: {rev} (the local test Hub only has {DEFAULT_BRANCH!r})",
                "RevisionNotFound",
            )
        header, writes, deletes = _parse_commit(await request.body())
        with state.lock:
            files = repo.head.files
            parent = header.get("parentCommit")
            if parent and parent != repo.sha:
                raise HubError(412, "A commit has happened since; refresh and try again")
            for path in deletes:
                if path not in files and not any(
                    p.startswith(path.rstrip("/") + "/") for p in files
                ):
                    raise HubError(
                        404, f"Cannot delete {path}: no such file in {repo.key}", "EntryNotFound"
                    )
            new = state.commit(
                repo,
                author=who.user,
                summary=str(header.get("summary") or ""),
                description=str(header.get("description") or ""),
                writes=writes,
                deletes=deletes,
            )
        return {
            "success": True,
            "commitOid": new.oid,
            "commitUrl": f"{repo_url(request, repo)}/commit/{new.oid}",
            "hookOutput": "",
        }

    # -- Space settings and runtime -----------------------------------------------------------

    def space(request: Request, namespace: str, name: str, write: bool) -> Repo:
        check = writable if write else readable
        return check(request, "spaces", namespace, name)[0]

    def listing(entries: dict[str, Setting], with_values: bool) -> dict:
        shown = {}
        for key, entry in sorted(entries.items()):
            shown[key] = {"description": entry.description, "updatedAt": entry.updated_at}
            if with_values:
                shown[key]["value"] = entry.value
        return shown

    async def upsert(request: Request, target: dict[str, Setting]) -> None:
        body = await json_body(request)
        key = body.get("key")
        if not isinstance(key, str) or not _ENV_KEY.match(key):
            raise HubError(400, f"Invalid key {key!r}: use letters, digits and underscores")
        if "value" not in body:
            raise HubError(400, "Missing value")
        with state.lock:
            target[key] = Setting(str(body["value"]), body.get("description"), utc_now())

    async def remove(request: Request, target: dict[str, Setting]) -> None:
        key = (await json_body(request)).get("key")
        with state.lock:
            if target.pop(key, None) is None:
                raise HubError(404, f"No such key: {key}")

    @app.get("/api/spaces/{namespace}/{name}/variables")
    async def get_variables(request: Request, namespace: str, name: str) -> dict:
        return listing(space(request, namespace, name, write=False).variables, with_values=True)

    @app.post("/api/spaces/{namespace}/{name}/variables")
    async def add_variable(request: Request, namespace: str, name: str) -> dict:
        repo = space(request, namespace, name, write=True)
        await upsert(request, repo.variables)
        return listing(repo.variables, with_values=True)

    @app.delete("/api/spaces/{namespace}/{name}/variables")
    async def delete_variable(request: Request, namespace: str, name: str) -> dict:
        repo = space(request, namespace, name, write=True)
        await remove(request, repo.variables)
        return listing(repo.variables, with_values=True)

    @app.get("/api/spaces/{namespace}/{name}/secrets")
    async def get_secrets(request: Request, namespace: str, name: str) -> dict:
        return listing(space(request, namespace, name, write=True).secrets, with_values=False)

    @app.post("/api/spaces/{namespace}/{name}/secrets")
    async def add_secret(request: Request, namespace: str, name: str) -> dict:
        await upsert(request, space(request, namespace, name, write=True).secrets)
        return {}

    @app.delete("/api/spaces/{namespace}/{name}/secrets")
    async def delete_secret(request: Request, namespace: str, name: str) -> dict:
        await remove(request, space(request, namespace, name, write=True).secrets)
        return {}

    @app.get("/api/spaces/{namespace}/{name}/runtime")
    async def runtime(request: Request, namespace: str, name: str) -> dict:
        return state.poll_runtime(space(request, namespace, name, write=False))

    @app.post("/api/spaces/{namespace}/{name}/hardware")
    async def request_hardware(request: Request, namespace: str, name: str) -> dict:
        repo = space(request, namespace, name, write=True)
        flavor = (await json_body(request)).get("flavor")
        if not isinstance(flavor, str) or not flavor:
            raise HubError(400, "flavor is required")
        with state.lock:
            repo.hardware = flavor
        return state.runtime(repo)

    @app.post("/api/spaces/{namespace}/{name}/restart")
    async def restart(request: Request, namespace: str, name: str) -> dict:
        repo = space(request, namespace, name, write=True)
        state.start_build(repo)
        return state.runtime(repo)

    return app


def _parse_commit(raw: bytes) -> tuple[dict, dict[str, bytes], list[str]]:
    """Split an ndjson commit payload into its header, files to write, and paths to delete."""
    header: dict | None = None
    writes: dict[str, bytes] = {}
    deletes: list[str] = []
    for number, line in enumerate(raw.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
            key, value = item["key"], item["value"]
        except (ValueError, KeyError, TypeError):
            raise HubError(
                400, f"Commit payload line {number} is not a {{key, value}} JSON object"
            ) from None
        if key == "header":
            header = value
            continue
        path = str(value.get("path") or "")
        if not path or path.startswith("/") or ".." in path.split("/"):
            raise HubError(400, f"Invalid path in commit: {path!r}")
        if key == "file":
            writes[path] = _decode_content(value, path)
        elif key in ("deletedFile", "deletedFolder"):
            deletes.append(path)
        elif key == "lfsFile":
            raise HubError(
                400,
                f"{path}: LFS files are not supported by the local test Hub "
                "(its preupload always answers 'regular', so clients should send file contents inline)",
            )
        else:
            raise HubError(400, f"Commit operation {key!r} is not supported by the local test Hub")
    if header is None:
        raise HubError(400, "Commit payload has no header line")
    return header, writes, deletes


def _decode_content(value: dict, path: str) -> bytes:
    content = value.get("content")
    if not isinstance(content, str):
        raise HubError(400, f"{path}: missing file content")
    if value.get("encoding") == "base64":
        try:
            return base64.b64decode(content, validate=True)
        except (binascii.Error, ValueError):
            raise HubError(400, f"{path}: content is not valid base64") from None
    return content.encode("utf-8")

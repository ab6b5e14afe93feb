"""``SpaceProvider``: a Hugging Face Space that already runs an environment server.

Nothing is started: the Space's runtime is read from the Hub (``GET {endpoint}/api/spaces/
{id}/runtime``, with ``HF_TOKEN`` for a private Space) until it is ``RUNNING``, then its URL
(the ``host`` the Hub reports, ``https://<namespace>-<name>.hf.space`` on huggingface.co) is
polled until ``/health`` answers. With
:func:`space_image` the same Space runs locally through the Docker provider instead.
"""

from __future__ import annotations

import json
import os
import time
import urllib.error
import urllib.request
from typing import Any

from .base import Provider, ProviderError, wait_until_healthy

DEFAULT_ENDPOINT = "https://huggingface.co"
RUNNING = ("RUNNING", "RUNNING_BUILDING")
WAITING = ("BUILDING", "APP_STARTING", "RUNNING_APP_STARTING")
ASLEEP = ("SLEEPING", "PAUSED", "STOPPED")


def space_subdomain(repo_id: str) -> str:
    """``Org/My_Env`` → ``org-my-env``: how the Hub names a Space's host."""
    namespace, _, name = _split(repo_id)
    raw = f"{namespace}-{name}".lower()
    return "".join(ch if ch.isalnum() else "-" for ch in raw)


def space_url(repo_id: str) -> str:
    return f"https://{space_subdomain(repo_id)}.hf.space"


def space_image(repo_id: str) -> str:
    """The image the Hub builds for a Docker Space: ``registry.hf.space/<subdomain>:latest``."""
    return f"registry.hf.space/{space_subdomain(repo_id)}:latest"


def _split(repo_id: str) -> tuple[str, str, str]:
    namespace, sep, name = repo_id.strip().strip("/").partition("/")
    if not sep or not namespace or not name or "/" in name:
        raise ProviderError(f"{repo_id!r} is not a Space id; use the form org/name")
    return namespace, sep, name


def hf_token(token: str | None = None) -> str | None:
    return token or os.environ.get("HF_TOKEN") or os.environ.get("HUGGING_FACE_HUB_TOKEN") or None


class SpaceProvider(Provider):
    """Wait for a running Space and hand back its URL.

    Args:
        repo_id: ``org/name`` of the Space.
        token: for a private Space; default ``HF_TOKEN``.
        endpoint: the Hub; default ``HF_ENDPOINT`` or https://huggingface.co.
        url: the Space's URL; default: the ``host`` the Hub reports for it
            (``https://<org>-<name>.hf.space`` on huggingface.co).
        startup_timeout: seconds allowed for the Space to build, wake up and answer.
        poll_interval: seconds between two looks at the Space's stage and ``/health``.
    """

    def __init__(
        self,
        repo_id: str,
        *,
        token: str | None = None,
        endpoint: str | None = None,
        url: str | None = None,
        startup_timeout: float = 600.0,
        poll_interval: float = 1.0,
    ) -> None:
        super().__init__()
        _split(repo_id)
        self.repo_id = repo_id.strip().strip("/")
        self.token = hf_token(token)
        self.endpoint = (endpoint or os.environ.get("HF_ENDPOINT") or DEFAULT_ENDPOINT).rstrip("/")
        self.url = url.rstrip("/") if url else None
        self.startup_timeout = startup_timeout
        self.poll_interval = poll_interval
        self.last_stage: str | None = None

    def _get(self, path: str) -> dict[str, Any]:
        request = urllib.request.Request(self.endpoint + path)
        if self.token:
            request.add_header("Authorization", f"Bearer {self.token}")
        try:
            with urllib.request.urlopen(request, timeout=15) as response:
                body = json.loads(response.read() or b"{}")
        except urllib.error.HTTPError as exc:
            if exc.code in (401, 403, 404):
                who = "with this token" if self.token else "without a token"
                raise ProviderError(
                    f"the Hub at {self.endpoint} does not show Space {self.repo_id} {who} "
                    f"(HTTP {exc.code}); check the id, and set HF_TOKEN for a private Space"
                ) from None
            raise ProviderError(
                f"the Hub at {self.endpoint} answered HTTP {exc.code} for {path}"
            ) from None
        except (urllib.error.URLError, OSError) as exc:
            raise ProviderError(
                f"cannot reach the Hub at {self.endpoint} ({exc}); check HF_ENDPOINT and the network"
            ) from None
        return body if isinstance(body, dict) else {}

    def _launch(self) -> list[str]:
        deadline = time.monotonic() + self.startup_timeout
        while True:
            runtime = self._get(f"/api/spaces/{self.repo_id}/runtime")
            stage = str(runtime.get("stage") or "")
            self.last_stage = stage
            if stage in RUNNING:
                if self.url is None:
                    # The Hub says where the Space is served; the usual name is the fallback.
                    host = self._get(f"/api/spaces/{self.repo_id}").get("host")
                    self.url = (
                        host if isinstance(host, str) and host else space_url(self.repo_id)
                    ).rstrip("/")
                return [self.url]
            if stage in ASLEEP:
                raise ProviderError(
                    f"Space {self.repo_id} is {stage}; restart it from its settings page "
                    f"({self.endpoint}/spaces/{self.repo_id}/settings)"
                )
            if stage not in WAITING:
                raise ProviderError(
                    f"Space {self.repo_id} is in stage {stage or 'unknown'}; see its logs at "
                    f"{self.endpoint}/spaces/{self.repo_id}?logs=container"
                )
            if time.monotonic() > deadline:
                raise ProviderError(
                    f"Space {self.repo_id} was still {stage} after {self.startup_timeout:g}s; "
                    "raise startup_timeout or check its build logs"
                )
            time.sleep(self.poll_interval)

    def wait_healthy(self, timeout: float | None = None) -> None:
        assert self.url is not None
        try:
            wait_until_healthy(
                self.url,
                self.startup_timeout if timeout is None else timeout,
                token=self.token,
                interval_s=self.poll_interval,
                probe_timeout_s=min(10.0, self.startup_timeout),
            )
        except TimeoutError:
            raise ProviderError(
                f"Space {self.repo_id} is RUNNING but {self.url}/health does not answer; "
                "is it an OpenEnv server (and HF_TOKEN set if it is private)?"
            ) from None

    def _teardown(self) -> None:
        """A Space is not ours to stop."""

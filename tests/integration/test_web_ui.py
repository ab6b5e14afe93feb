"""The page at /web in headless Chromium (Debian's, driven by Playwright) against a real server.

Screenshots are written to test-artifacts/web/. Chromium comes from `.ci/browser.sh`; without
it these tests skip locally and fail when CI is set. Set OPENENV_WRITE_DOCS_SCREENSHOT=1 to
refresh docs/web-ui.png (the picture in docs/server.md) as well.
"""

from __future__ import annotations

import base64
import json
import os
import socket
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from openenv_runtime import Environment, Observation, State, create_app
from openenv_runtime.server import ServerSettings
from openenv_runtime.testing import running_server
from openenv_runtime.wire import EnvironmentMetadata
from tests.fixtures.echo import EchoAction, EchoEnvironment, EchoObservation
from tests.fixtures.web_kinds import (
    GRID_README,
    README,
    GridAction,
    GridEnvironment,
    GridObservation,
    KindsAction,
    KindsEnvironment,
    KindsObservation,
)
from tests.support.servers import active_sessions, wait_until

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts" / "web"
CHROMIUM = os.environ.get("CHROMIUM_PATH", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
TIMEOUT_MS = 10_000
ECHO_README = "# Echo\n\nEchoes the message back.\n\n## Reward\n`0.1` per character; `bye` ends the episode.\n"


def _unavailable(reason: str) -> None:
    message = (
        f"{reason}; run `.ci/browser.sh` (installs Debian's chromium) to run the browser tests"
    )
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not Path(CHROMIUM).is_file():
        _unavailable(f"Chromium not found at {CHROMIUM}")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _unavailable(
            "the Python package playwright is not installed (pip install -e ./runtime -e '.[ci]')"
        )
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


@dataclass
class Visit:
    """A page plus everything it did: requests, WebSockets, console errors."""

    page: Any
    base_url: str
    requests: list[str] = field(default_factory=list)
    websockets: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    authorization: list[str | None] = field(default_factory=list)

    def outside_requests(self) -> list[str]:
        host = urlsplit(self.base_url).netloc
        return [
            u
            for u in self.requests + self.websockets
            if not u.startswith(("data:", "blob:")) and urlsplit(u).netloc != host
        ]

    def shot(self, name: str) -> Path:
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        path = ARTIFACTS / f"{name}.png"
        self.page.screenshot(path=str(path), full_page=True)
        return path

    def field(self, key: str) -> Any:
        return self.page.locator(f"#fields [data-key='{key}']").first

    def status(self) -> str:
        return self.page.locator("#conn-status").inner_text()


@pytest.fixture()
def visit(browser: Any) -> Iterator[Callable[..., Visit]]:
    contexts: list[Any] = []

    def open_page(base_url: str, wait_ready: bool = True, init_script: str = "") -> Visit:
        context = browser.new_context(
            viewport={"width": 1280, "height": 900}, accept_downloads=True
        )
        if init_script:
            context.add_init_script(init_script)
        context.set_default_timeout(TIMEOUT_MS)
        contexts.append(context)
        page = context.new_page()
        v = Visit(page, base_url)
        page.on("request", lambda r: v.requests.append(r.url))
        page.on("request", lambda r: v.authorization.append(r.headers.get("authorization")))
        page.on("websocket", lambda ws: v.websockets.append(ws.url))
        page.on(
            "console",
            lambda m: v.errors.append(f"console.{m.type}: {m.text}") if m.type == "error" else None,
        )
        page.on("pageerror", lambda e: v.errors.append(f"uncaught: {e}"))
        page.goto(base_url + "/")
        if wait_ready:
            page.wait_for_selector("body[data-ready='true']")
        return v

    yield open_page
    for context in contexts:
        context.close()


def described(env: type[Any], readme: str, **given: Any) -> EnvironmentMetadata:
    """``/metadata`` as the class gives it, with ``readme`` as the README."""
    return EnvironmentMetadata(
        name=env.__name__, description=env.__doc__.splitlines()[0], readme_content=readme, **given
    )


def kinds_app(**settings: Any) -> Any:
    return create_app(
        KindsEnvironment,
        KindsAction,
        KindsObservation,
        metadata=described(KindsEnvironment, README),
        settings=ServerSettings(**settings),
    )


def echo_app(**settings: Any) -> Any:
    return create_app(
        EchoEnvironment,
        EchoAction,
        EchoObservation,
        metadata=described(EchoEnvironment, ECHO_README),
        settings=ServerSettings(**settings),
    )


def observation(v: Visit) -> Any:
    return json.loads(v.page.locator("#obs-json").inner_text())


def history_rows(v: Visit) -> list[list[str]]:
    rows = v.page.locator("#history-body tr:not(.placeholder)")
    return [
        [c.strip() for c in rows.nth(i).locator("td").all_inner_texts()]
        for i in range(rows.count())
    ]


def wait_rows(v: Visit, n: int) -> None:
    v.page.wait_for_function(
        "n => document.querySelectorAll('#history-body tr:not(.placeholder)').length === n", arg=n
    )


def reset(v: Visit, seed: int | None = None) -> None:
    before = v.page.locator("#history-body tr.reset").count()
    if seed is not None:
        v.page.fill("#seed", str(seed))
    v.page.click("#reset-btn")
    v.page.wait_for_function(
        "n => document.querySelectorAll('#history-body tr.reset').length > 0 && "
        "document.querySelectorAll('#history-body tr').length === 1 && "
        "document.querySelector('#conn-status').dataset.state === 'connected'",
        arg=before,
    )


# ---------------------------------------------------------------- loading


def test_page_loads_cleanly_offline_and_renders_the_readme(visit: Callable[..., Visit]) -> None:
    with running_server(kinds_app()) as url:
        v = visit(url)
        page = v.page
        assert page.url == url + "/web/"
        assert page.title() == "KindsEnvironment · OpenEnv"
        assert page.locator("#env-name").inner_text() == "KindsEnvironment"
        assert "the reward is the count" in page.locator("#env-desc").inner_text()
        page.wait_for_function(
            "() => document.querySelector('#capacity').textContent.includes('/ 100')"
        )
        assert page.locator("#capacity").inner_text() == "Sessions 0 / 100"
        # the page opens no session until it is used: a visitor reading it holds no slot
        assert v.status() == "Not connected" and v.websockets == [] and active_sessions(url) == 0

        readme = page.locator("#readme")
        assert readme.locator("h1").inner_text() == "Field kinds"
        assert readme.locator("strong").first.inner_text() == "web interface"
        assert readme.locator("table td code").inner_text() == "count"
        # raw HTML shows as text; script links lose their target; images are never fetched
        assert readme.locator("script").count() == 0
        assert '<script>alert("not run")</script>' in readme.inner_text()
        assert (
            readme.locator("a", has_text="the docs").get_attribute("href")
            == "https://example.org/docs"
        )
        assert readme.locator("a[href^='javascript']").count() == 0
        assert readme.locator("img").count() == 0
        assert "A logo that must not be fetched (image)" in readme.inner_text()

        page.wait_for_timeout(300)  # let any late request or error surface
        v.shot("01-loaded")
        assert v.errors == []
        assert v.outside_requests() == []
        assert {urlsplit(u).path for u in v.requests} >= {
            "/web/",
            "/web/app.js",
            "/schema",
            "/metadata",
            "/health",
        }


# ---------------------------------------------------------------- the form


def test_form_has_a_control_for_every_field_kind(visit: Callable[..., Visit]) -> None:
    with running_server(kinds_app()) as url:
        v = visit(url)
        page = v.page
        keys = page.locator("#fields > [data-key]").evaluate_all(
            "els => els.map(e => e.dataset.key)"
        )
        assert keys == [
            "name",
            "notes",
            "count",
            "temperature",
            "ratio",
            "verbose",
            "mode",
            "color",
            "limit",
            "tags",
            "target",
        ]

        name = page.get_by_label("Name", exact=True)
        assert (
            name.evaluate("e => e.tagName + ':' + e.type") == "INPUT:text"
            and name.input_value() == ""
        )
        assert v.field("name").locator(".req").inner_text() == "required"
        help_id = name.get_attribute("aria-describedby")
        assert page.locator(f"#{help_id}").inner_text() == "Who is acting."

        notes = page.get_by_label("Notes")
        assert (
            notes.evaluate("e => e.tagName") == "TEXTAREA"
            and notes.get_attribute("maxlength") == "2000"
        )

        count = page.get_by_label("Count")
        assert (
            count.get_attribute("type"),
            count.get_attribute("min"),
            count.get_attribute("max"),
            count.get_attribute("step"),
            count.input_value(),
        ) == ("number", "0", "10", "1", "2")
        assert v.field("count").locator(".type").inner_text() == "integer · 0 – 10"

        temperature = page.get_by_label("Temperature")
        assert (
            temperature.get_attribute("min"),
            temperature.get_attribute("max"),
            temperature.get_attribute("step"),
            temperature.input_value(),
        ) == ("0", "2", "any", "0.5")
        ratio = page.get_by_label("Ratio")
        assert ratio.get_attribute("min") is None and ratio.input_value() == "1.25"

        verbose = page.get_by_label("Verbose")
        assert verbose.get_attribute("type") == "checkbox" and not verbose.is_checked()

        mode = page.get_by_label("Mode")
        assert mode.locator("option").all_inner_texts() == ["fast", "careful", "exhaustive"]
        assert mode.evaluate("e => e.selectedOptions[0].textContent") == "careful"
        color = page.get_by_label("Color")
        assert color.locator("option").all_inner_texts() == ["red", "green", "blue"]
        assert color.evaluate("e => e.selectedOptions[0].textContent") == "green"

        limit = page.get_by_label("Limit", exact=True)
        unset = v.field("limit").locator(".unset input")
        assert (
            limit.get_attribute("min") == "1" and unset.is_checked()
        )  # default None: explicitly unset

        tags = v.field("tags")
        assert tags.locator("legend").inner_text().startswith("Tags")
        assert [
            tags.locator("input").nth(i).input_value() for i in range(tags.locator("input").count())
        ] == ["alpha", "beta"]
        assert page.get_by_label("Tags item 2", exact=True).input_value() == "beta"

        target = v.field("target")
        assert target.evaluate("e => e.tagName") == "FIELDSET"
        assert target.locator("legend .legend-text").inner_text() == "Target"
        x = target.get_by_label("X")
        assert (x.get_attribute("min"), x.get_attribute("max"), x.input_value()) == (
            "-10",
            "10",
            "0",
        )

        # the base `metadata` field is there, but only under "Advanced"
        metadata = page.locator("#advanced [data-key='metadata'] textarea")
        assert (
            not metadata.is_visible() and page.locator("#fields [data-key='metadata']").count() == 0
        )
        page.click("#advanced summary")
        assert metadata.is_visible() and json.loads(metadata.input_value()) == {}

        # every control has a label
        unlabelled = page.locator("#action-form").evaluate(
            "f => [...f.querySelectorAll('input, select, textarea')].filter(e => !e.labels.length && !e.getAttribute('aria-label')).map(e => e.outerHTML)"
        )
        assert unlabelled == []
        v.shot("02-form-kinds")

        # fill every kind and step: the server receives typed values
        reset(v)
        name.fill("alice")
        notes.fill("line one\nline two")
        count.fill("4")
        temperature.fill("1.5")
        verbose.check()
        mode.select_option(label="exhaustive")
        color.select_option(label="blue")
        limit.fill("7")  # typing a value switches "unset" off
        assert not unset.is_checked()
        tags.get_by_role("button", name="Add an item to Tags").click()
        page.get_by_label("Tags item 3", exact=True).fill("gamma")
        tags.get_by_role("button", name="Remove Tags item 1").click()
        x.fill("3")
        metadata.fill('{"source": "browser"}')
        page.click("#step-btn")
        wait_rows(v, 2)
        received = observation(v)["received"]
        assert received == {
            "metadata": {"source": "browser"},
            "name": "alice",
            "notes": "line one\nline two",
            "count": 4,
            "temperature": 1.5,
            "ratio": 1.25,
            "verbose": True,
            "mode": "exhaustive",
            "color": "blue",
            "limit": 7,
            "tags": ["beta", "gamma"],
            "target": {"x": 3, "y": 0},
        }
        assert page.locator("#stat-reward").inner_text() == "4"

        # and back to null
        unset.check()
        page.click("#step-btn")
        wait_rows(v, 3)
        assert observation(v)["received"]["limit"] is None
        assert v.errors == [] and v.outside_requests() == []


def test_server_validation_errors_show_beside_their_fields(visit: Callable[..., Visit]) -> None:
    with running_server(kinds_app()) as url:
        v = visit(url)
        page = v.page
        reset(v)
        page.get_by_label("Name", exact=True).fill("bob")
        count = page.get_by_label("Count")

        # the browser catches a bound it knows, before anything is sent
        count.fill("11")
        page.click("#step-btn")
        assert v.field("count").locator(".error").inner_text() == "Must be at most 10."
        assert len(history_rows(v)) == 1

        # only the server knows that count must be even
        count.fill("3")
        count.press("Enter")
        error = v.field("count").locator(".error")
        error.wait_for()
        assert "count must be even" in error.inner_text()
        assert count.get_attribute("aria-invalid") == "true"
        assert error.get_attribute("id") in count.get_attribute("aria-describedby").split()
        assert "The server rejected this action" in page.locator("#form-error").inner_text()
        assert page.evaluate("document.activeElement.id") == count.get_attribute("id")
        assert len(history_rows(v)) == 1 and v.status() == "Connected"  # the session lives on
        v.shot("03-validation-error")

        # an error in the advanced section opens it and lands beside that field
        count.fill("4")
        assert v.field("count").locator(".error").is_hidden()  # editing clears the message
        page.click("#advanced summary")
        page.locator("#advanced [data-key='metadata'] textarea").fill('["not", "a", "dict"]')
        page.click("#advanced summary")  # close it again
        page.click("#step-btn")
        meta_error = page.locator("#advanced [data-key='metadata'] .error")
        meta_error.wait_for()
        assert "dictionary" in meta_error.inner_text()
        assert page.locator("#advanced").evaluate("d => d.open")

        # fixed: the step goes through
        page.locator("#advanced [data-key='metadata'] textarea").fill("{}")
        page.click("#step-btn")
        wait_rows(v, 2)
        assert page.locator("#form-error").is_hidden()
        assert v.outside_requests() == []


# ---------------------------------------------------------------- an episode


def test_reset_and_steps_show_observations_rewards_and_history(visit: Callable[..., Visit]) -> None:
    with running_server(echo_app()) as url:
        v = visit(url)
        page = v.page
        reset(v, seed=42)
        assert v.status() == "Connected"
        assert observation(v) == {
            "metadata": {"seed": 42},
            "echoed_message": "ready",
            "message_length": 0,
        }
        assert page.locator("#stat-reward").inner_text() == "0"
        assert page.locator("#stat-done").inner_text() == "No"
        # the page holds exactly one session, counted like any other client's
        assert wait_until(lambda: active_sessions(url) == 1)
        page.wait_for_function(
            "() => document.querySelector('#capacity').textContent === 'Sessions 1 / 100'"
        )

        message = page.get_by_label("Message")
        for i, text in enumerate(["Hello", "hi", "bye"], start=1):
            message.fill(text)
            message.press("Enter")  # Enter steps
            wait_rows(v, i + 1)
            assert observation(v)["echoed_message"] == text
            assert observation(v)["message_length"] == len(text)
        assert page.locator("#stat-reward").inner_text() == "0.3"
        assert page.locator("#stat-done").inner_text() == "Yes"  # "bye" ends the episode
        assert page.locator("#stat-step").inner_text() == "3"
        assert page.locator("#stat-return").inner_text() == "1"
        assert page.locator("#history-total").inner_text() == "1"

        rows = history_rows(v)
        assert [r[0] for r in rows] == ["0", "1", "2", "3"]
        assert rows[0][1] == "reset (seed 42)"
        assert json.loads(rows[1][1]) == {"message": "Hello", "wait": 0}
        assert [r[2] for r in rows] == ["0", "0.5", "0.2", "0.3"]
        assert [r[3] for r in rows] == ["–", "–", "–", "done"]
        assert all(r[4].endswith(" ms") and float(r[4][:-3]) >= 0 for r in rows)

        # an earlier step can be looked at again
        page.get_by_role("button", name="Show the observation of step 1").click()
        assert observation(v)["echoed_message"] == "Hello"
        assert page.locator("#stat-return").inner_text() == "0.5"
        page.get_by_role("button", name="show latest").click()
        assert observation(v)["echoed_message"] == "bye"

        page.click("#state-btn")
        page.locator("#state-card").wait_for()
        page.wait_for_function(
            "() => document.querySelector('#state-json').textContent.includes('step_count')"
        )
        state = json.loads(page.locator("#state-json").inner_text())
        assert state["step_count"] == 3 and state["episode_id"]

        # an environment error is shown, and the session survives it
        message.fill("boom")
        page.click("#step-btn")
        page.locator("#exec-error").wait_for()
        assert "EXECUTION_ERROR" in page.locator("#exec-error").inner_text()
        assert "the environment exploded" in page.locator("#exec-error").inner_text()
        assert v.status() == "Connected" and len(history_rows(v)) == 4
        v.shot("04-episode")

        with page.expect_download() as download:
            page.click("#download-btn")
        assert download.value.suggested_filename.startswith("EchoEnvironment-episode-")
        exported = json.loads(Path(download.value.path()).read_text())
        assert exported["environment"]["name"] == "EchoEnvironment"
        assert (
            exported["episode"]["seed"] == 42
            and exported["episode"]["episode_id"] == state["episode_id"]
        )
        assert exported["cumulative_reward"] == pytest.approx(1.0)
        assert [s["step"] for s in exported["steps"]] == [0, 1, 2, 3]
        assert exported["steps"][1]["action"] == {"message": "Hello", "wait": 0}
        assert exported["steps"][3]["done"] is True and exported["steps"][3][
            "reward"
        ] == pytest.approx(0.3)
        assert exported["steps"][2]["observation"]["echoed_message"] == "hi"

        # a new episode starts a new history
        reset(v)
        assert len(history_rows(v)) == 1 and page.locator("#history-total").inner_text() == "0"

        # Disconnect frees the slot
        page.click("#connect-btn")
        page.wait_for_function(
            "() => document.querySelector('#conn-status').textContent === 'Not connected'"
        )
        assert wait_until(lambda: active_sessions(url) == 0)
        assert page.locator("#banner").is_hidden()
        assert v.errors == [] and v.outside_requests() == []


def test_long_episode_keeps_the_table_short_and_the_download_complete(
    visit: Callable[..., Visit],
) -> None:
    with running_server(echo_app()) as url:
        v = visit(url)
        page = v.page
        reset(v)
        page.get_by_label("Message").fill("ab")
        steps = 310
        page.evaluate(
            """async (n) => {
                const step = document.querySelector('#step-btn');
                const shown = () => document.querySelector('#stat-step').textContent;
                for (let i = 0; i < n; i++) {
                    const before = shown();
                    step.click();
                    while (shown() === before) await new Promise((r) => setTimeout(r, 1));
                }
            }""",
            steps,
        )
        rows = history_rows(v)
        assert len(rows) == 300 and rows[0][0] == "11" and rows[-1][0] == str(steps)
        assert "table shows the last 300" in page.locator("#history-summary").inner_text()
        assert page.locator("#history-body tr.selected").count() == 1
        assert page.locator("#history-total").inner_text() == "62"  # 310 × 0.2
        with page.expect_download() as download:
            page.click("#download-btn")
        exported = json.loads(Path(download.value.path()).read_text())
        assert len(exported["steps"]) == steps + 1 and exported[
            "cumulative_reward"
        ] == pytest.approx(62)
        assert v.errors == []


# ---------------------------------------------------------------- a full server, a dropped connection


def test_full_server_shows_the_capacity_message(visit: Callable[..., Visit]) -> None:
    from websockets.sync.client import connect

    with running_server(echo_app(max_concurrent_envs=1)) as url:
        with connect(url.replace("http://", "ws://") + "/ws") as other:
            other.send(json.dumps({"type": "reset"}))
            json.loads(other.recv())  # the other client holds the only slot
            v = visit(url)
            page = v.page
            page.click("#reset-btn")
            banner = page.locator("#banner")
            banner.wait_for()
            assert "The server is full." in banner.inner_text()
            assert "All 1 session is in use" in banner.inner_text()
            assert page.locator("#banner-action").inner_text() == "Try again"
            assert v.status() == "Server full"
            page.wait_for_function(
                "() => document.querySelector('#capacity').textContent === 'Sessions 1 / 1'"
            )
            assert len(history_rows(v)) == 0
            v.shot("05-server-full")
        assert wait_until(lambda: active_sessions(url) == 0)
        page.click("#banner-action")
        page.wait_for_function(
            "() => document.querySelector('#conn-status').textContent === 'Connected'"
        )
        assert banner.is_hidden()
        reset(v)
        assert observation(v)["echoed_message"] == "ready"
        assert v.outside_requests() == []


class DroppingProxy:
    """A TCP relay in front of the server whose connections can be cut, as a network drop would."""

    def __init__(self, target: str) -> None:
        self.target = urlsplit(target)
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        self.sockets: list[socket.socket] = []
        self.lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            upstream = socket.create_connection((self.target.hostname, self.target.port))
            with self.lock:
                self.sockets += [client, upstream]
            threading.Thread(target=self._pump, args=(client, upstream), daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, client), daemon=True).start()

    @staticmethod
    def _pump(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                s.close()

    def drop_all(self) -> None:
        with self.lock:
            sockets, self.sockets = self.sockets, []
        for s in sockets:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()

    def close(self) -> None:
        self.listener.close()
        self.drop_all()


def test_connection_drop_shows_a_message_and_reconnects(visit: Callable[..., Visit]) -> None:
    with running_server(echo_app()) as url:
        proxy = DroppingProxy(url)
        try:
            v = visit(proxy.url)
            page = v.page
            reset(v)
            page.get_by_label("Message").fill("Hello")
            page.get_by_label("Message").press("Enter")
            wait_rows(v, 2)

            proxy.drop_all()
            banner = page.locator("#banner")
            banner.wait_for()
            assert "The connection dropped." in banner.inner_text()
            assert "history stays here" in banner.inner_text()
            assert v.status() == "Disconnected"
            assert page.locator("#banner-action").inner_text() == "Reconnect"
            assert len(history_rows(v)) == 2  # what happened is kept
            assert wait_until(lambda: active_sessions(url) == 0)  # the server freed the slot
            v.shot("06-connection-dropped")

            page.click("#banner-action")
            page.wait_for_function(
                "() => document.querySelector('#conn-status').textContent === 'Connected'"
            )
            assert banner.is_hidden()
            reset(v)
            page.get_by_label("Message").fill("again")
            page.click("#step-btn")
            wait_rows(v, 2)
            assert observation(v)["echoed_message"] == "again"
            assert v.outside_requests() == []
        finally:
            proxy.close()


def test_session_closed_by_the_server_is_explained(visit: Callable[..., Visit]) -> None:
    with running_server(echo_app(session_timeout=0.5)) as url:
        v = visit(url)
        reset(v)
        banner = v.page.locator("#banner")
        banner.wait_for()  # the idle session is reaped by the server
        assert "The server ended this session." in banner.inner_text()
        assert v.status() == "Session ended"
        v.page.click("#banner-action")
        v.page.wait_for_function(
            "() => document.querySelector('#conn-status').textContent === 'Connected'"
        )


# ---------------------------------------------------------------- a protected server


# Records what the page gives `new WebSocket` and what the server selected.
RECORD_WEBSOCKETS = """
(() => {
  const Native = window.WebSocket;
  window.__sockets = [];
  window.WebSocket = class extends Native {
    constructor(url, protocols) {
      super(url, protocols);
      const entry = { url: String(url), offered: protocols || [], selected: null };
      window.__sockets.push(entry);
      this.addEventListener("open", () => { entry.selected = this.protocol; });
    }
  };
})();
"""


def test_token_prompt_when_the_server_requires_a_key(visit: Callable[..., Visit]) -> None:
    with running_server(echo_app(api_key="s3cret-key")) as url:
        v = visit(url, wait_ready=False, init_script=RECORD_WEBSOCKETS)
        page = v.page
        dialog = page.locator("#token-dialog")
        dialog.wait_for()
        assert v.status() == "Token needed"
        v.shot("07-token-prompt")

        page.get_by_label("Token", exact=True).fill("wrong")
        page.click("#token-submit")
        page.locator("#token-error").wait_for()
        assert page.locator("#token-error").inner_text() == "The server refused this token."
        assert dialog.is_visible()

        page.get_by_label("Token", exact=True).fill("s3cret-key")
        page.click("#token-submit")
        page.wait_for_selector("body[data-ready='true']")
        assert dialog.is_hidden()
        assert page.evaluate("sessionStorage.getItem('openenv.token')") == "s3cret-key"
        reset(v)
        # the token travels in the subprotocol list, never in a URL; the server picks "openenv"
        sockets = page.evaluate("window.__sockets")
        bearer = "openenv.bearer." + base64.urlsafe_b64encode(b"s3cret-key").decode().rstrip("=")
        assert sockets[-1]["offered"] == ["openenv", bearer]
        assert sockets[-1]["selected"] == "openenv"
        for address in v.requests + v.websockets:
            assert "s3cret" not in address and "access_token" not in address, address
        # and every HTTP request after the prompt carries it as a bearer header
        assert "Bearer s3cret-key" in v.authorization
        page.get_by_label("Message").fill("ok")
        page.click("#step-btn")
        wait_rows(v, 2)

        # kept for this tab: a reload needs no prompt
        page.reload()
        page.wait_for_selector("body[data-ready='true']")
        assert dialog.is_hidden()
        # the only refused requests are the ones made before the token was given
        assert all("status of 401" in e for e in v.errors), v.errors
        assert v.outside_requests() == []

        # "Forget token" asks again
        page.click("#token-btn")
        dialog.wait_for()
        assert page.evaluate("sessionStorage.getItem('openenv.token')") is None


# ---------------------------------------------------------------- hostile README, no CSP

HOSTILE_README = """# Hostile

<javascript:alert(1)>

[x](javascript:alert(2)) and [y](JaVaScRiPt:alert(3)) and [v](vbscript:alert(4))

[e](javascript&#58;alert(16)) [f](&#x6A;avascript:alert(17)) [g]( javascript:alert(18) ) [h](<javascript:alert(19)>)

<http://a" onmouseover="alert(5)>

<http://x[a](onmouseover=alert)>

[t](https://ok.example/ "title\\" onmouseover=\\"alert(6)")

<a href="javascript:alert(7)" onclick="alert(8)" onmouseover="alert(9)">raw link</a>

![pic](https://ok.example/p.png) ![q](x" onerror="alert(10))

<img src=x onerror=alert(11)> <svg onload=alert(12)></svg> <iframe src="javascript:alert(13)"></iframe>

[d](data:text/html,<script>alert(14)</script>) [fine](https://ok.example/docs)

<details open><summary onmouseover=alert(15)>s</summary></details>
"""


def test_hostile_markdown_is_neutralised_even_without_the_csp(browser: Any) -> None:
    """Autolinks, link targets and raw HTML cannot inject script, with the CSP switched off."""
    app = create_app(
        EchoEnvironment,
        EchoAction,
        EchoObservation,
        metadata=described(EchoEnvironment, HOSTILE_README),
    )
    with running_server(app) as url:
        context = browser.new_context(bypass_csp=True)
        try:
            context.add_init_script(
                "window.__fired = []; for (const f of ['alert', 'confirm', 'prompt'])"
                " window[f] = (x) => window.__fired.push(String(x));"
            )
            page = context.new_page()
            page.set_default_timeout(TIMEOUT_MS)
            page.goto(url + "/web/")
            page.wait_for_selector("body[data-ready='true']")
            page.wait_for_selector("#readme h1")
            # the control: with the CSP off, an inline handler does run here
            page.evaluate(
                "document.body.insertAdjacentHTML('beforeend',"
                " '<img id=control src=x onerror=\"window.__fired.push(\\'control\\')\">')"
            )
            page.wait_for_function("window.__fired.includes('control')")
            page.evaluate("document.getElementById('control').remove()")

            found = page.evaluate(
                """() => {
                  const readme = document.getElementById('readme');
                  const all = [...readme.querySelectorAll('*')];
                  for (const el of all) {
                    for (const type of ['mouseover', 'mouseenter', 'focus', 'error', 'load'])
                      el.dispatchEvent(new Event(type));
                  }
                  return {
                    handlers: all.flatMap(el => [...el.attributes].map(a => a.name))
                      .filter(n => n.startsWith('on')),
                    tags: all.map(el => el.tagName.toLowerCase()),
                    hrefs: [...readme.querySelectorAll('[href]')].map(a => a.href),
                    schemes: [...readme.querySelectorAll('[href]')]
                      .map(a => (/^\\s*([a-z][a-z0-9+.-]*):/i.exec(a.getAttribute('href'))
                                 || [null, 'relative'])[1].toLowerCase()),
                    text: readme.innerText,
                  };
                }"""
            )
            page.wait_for_timeout(300)  # let anything that would fire, fire
            fired = page.evaluate("window.__fired.filter(x => x !== 'control')")
        finally:
            context.close()
    assert fired == []
    assert found["handlers"] == []
    assert not {"script", "img", "svg", "iframe", "details", "summary"} & set(found["tags"])
    assert set(found["schemes"]) <= {"http", "https", "mailto", "relative"}, found["hrefs"]
    assert "https://ok.example/docs" in found["hrefs"]
    assert "pic (image)" in found["text"]  # an image became a link, never fetched


# ---------------------------------------------------------------- frames


def test_a_gymnasium_frame_is_drawn_beside_the_observation(visit: Callable[..., Visit]) -> None:
    pytest.importorskip("gymnasium") if not os.environ.get("CI") else None
    from openenv_runtime.adapters.target import create_family_app

    app = create_family_app("gymnasium:CartPole-v1?render_mode=rgb_array")
    with running_server(app) as url:
        v = visit(url)
        assert v.page.locator("#obs-frame").is_hidden()  # nothing to draw before a reset
        reset(v, seed=2)
        frame = v.page.locator("#obs-frame")
        frame.wait_for(state="visible")
        size = v.page.evaluate(
            "() => [document.querySelector('#obs-frame').width, document.querySelector('#obs-frame').height]"
        )
        assert size == [600, 400]  # CartPole's rgb_array: 400 rows of 600 pixels
        colours = v.page.evaluate(
            "() => { const c = document.querySelector('#obs-frame').getContext('2d');"
            " const d = c.getImageData(0, 0, 600, 400).data; const seen = new Set();"
            " for (let i = 0; i < d.length; i += 4 * 97) seen.add(d[i] + ',' + d[i + 1] + ',' + d[i + 2]);"
            " return seen.size; }"
        )
        assert colours > 1  # a picture (the cart and its pole on white), not a blank canvas
        assert not v.errors and not v.outside_requests()


class FrameObservation(Observation):
    frame: Any = None


HOSTILE_FRAMES: dict[int, Any] = {
    # ragged rows, junk pixels (strings, objects, nulls, out-of-range numbers): drawn as black
    1: [
        [[255, 0, 0], "<img src=x onerror=alert(1)>", {"r": 9}, None],
        [[0, 255, 0, 128], [1e300, -5, "7"]],
        "not a row",
    ],
    # one pixel past the bound: left to the JSON view, nothing allocated for it
    2: [[[1, 2, 3]] + [0] * 4_000_000],
    # not a picture at all
    3: "<svg onload=alert(2)></svg>",
}


class HostileFrames(Environment[EchoAction, FrameObservation, State]):
    """Observations whose ``frame`` is whatever the seed picks from HOSTILE_FRAMES."""

    def reset(
        self, seed: int | None = None, episode_id: str | None = None, **kwargs: object
    ) -> FrameObservation:
        return FrameObservation(frame=HOSTILE_FRAMES.get(seed or 0), reward=0.0)

    def step(self, action: EchoAction, **kwargs: object) -> FrameObservation:
        return FrameObservation(done=True)

    @property
    def state(self) -> State:
        return State()


def test_a_hostile_frame_is_drawn_safely_or_not_at_all(visit: Callable[..., Visit]) -> None:
    app = create_app(HostileFrames, EchoAction, FrameObservation)
    with running_server(app) as url:
        v = visit(url)
        v.page.on("dialog", lambda d: v.errors.append(f"dialog: {d.message}"))
        frame = v.page.locator("#obs-frame")
        reset(v, seed=1)
        frame.wait_for(state="visible")
        size = v.page.evaluate(
            "() => [document.querySelector('#obs-frame').width, document.querySelector('#obs-frame').height]"
        )
        assert size == [4, 3]  # the first row's width, every row (the junk ones black)
        for seed in (2, 3):
            reset(v, seed=seed)
            frame.wait_for(state="hidden")
            if seed == 2:  # 8 MB of JSON: the view lays out a cut, not four million lines
                tail = v.page.evaluate(
                    "() => document.querySelector('#obs-json').textContent.slice(-80)"
                )
                assert "more characters (Copy JSON or Download JSON has it whole)" in tail
        assert not v.errors and not v.outside_requests()


# ---------------------------------------------------------------- the picture of docs/server.md


def test_screenshot_for_the_readme(visit: Callable[..., Visit]) -> None:
    app = create_app(
        GridEnvironment,
        GridAction,
        GridObservation,
        metadata=EnvironmentMetadata(
            name="grid-walk",
            description="Walk an agent across a 5 × 5 grid to the goal.",
            version="0.1.0",
            readme_content=GRID_README,
        ),
    )
    with running_server(app) as url:
        v = visit(url)
        page = v.page
        reset(v, seed=7)
        moves = [("right", 3), ("down", 2), ("right", 1), ("down", 2)]
        for i, (direction, cells) in enumerate(moves, start=1):
            page.get_by_label("Direction").select_option(direction)
            page.get_by_label("Cells").fill(str(cells))
            page.click("#step-btn")
            wait_rows(v, i + 1)
        assert page.locator("#stat-done").inner_text() == "Yes"
        assert page.locator("#history-total").inner_text() == "0.7"
        page.get_by_label("Direction").focus()
        page.mouse.move(1, 1)  # no hover effect in the picture
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "08-readme.png"))
        if os.environ.get("OPENENV_WRITE_DOCS_SCREENSHOT"):
            (ROOT / "docs").mkdir(exist_ok=True)
            page.screenshot(path=str(ROOT / "docs" / "web-ui.png"))
        assert v.errors == [] and v.outside_requests() == []

"""``openenv top``'s command: its inputs checked, a down replica reported, Ctrl-C a clean exit."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from openenv_cli.errors import UsageError
from openenv_cli.fleet.scrape import Fleet, replica_url
from openenv_cli.main import app as cli
from openenv_runtime.client.endpoints import ENDPOINTS_FILE, Endpoints
from openenv_runtime.testing import free_port

runner = CliRunner()


def test_urls_take_http_by_default_and_refuse_other_schemes() -> None:
    assert replica_url("10.0.0.5:8000/") == "http://10.0.0.5:8000"
    assert replica_url("https://envs.example.com") == "https://envs.example.com"
    result = runner.invoke(cli, ["top", "ftp://10.0.0.5"])
    assert isinstance(result.exception, UsageError)
    assert "not a server URL" in str(result.exception)


def test_nothing_to_watch_says_how_to_name_replicas() -> None:
    result = runner.invoke(cli, ["top"])
    assert isinstance(result.exception, UsageError)
    assert "--deploy" in (result.exception.hint or "")


def test_a_down_replica_is_an_error_object() -> None:
    where = f"127.0.0.1:{free_port()}"
    result = runner.invoke(cli, ["top", where, "--json", "--interval", "0.1"])
    assert result.exit_code == 0, result.output
    (view,) = json.loads(result.stdout)
    assert view["url"] == f"http://{where}" and "unreachable" in view["error"]


def test_deploy_reads_the_folders_endpoints(tmp_path: Path) -> None:
    port = free_port()
    replicas = [f"http://127.0.0.1:{port}"]
    record = Endpoints("envoy", front="http://127.0.0.1:8080", replicas=replicas)
    (tmp_path / ENDPOINTS_FILE).write_text(record.to_json())
    result = runner.invoke(cli, ["top", "--deploy", str(tmp_path), "--json", "-n", "0.1"])
    assert result.exit_code == 0, result.output
    assert [v["url"] for v in json.loads(result.stdout)] == replicas


def test_a_deploy_that_records_only_its_front_asks_for_the_replicas(tmp_path: Path) -> None:
    record = Endpoints("kubernetes", front="http://demo-envoy:8080")
    (tmp_path / ENDPOINTS_FILE).write_text(record.to_json())
    result = runner.invoke(cli, ["top", "--deploy", str(tmp_path)])
    assert isinstance(result.exception, UsageError)
    assert "no replica" in str(result.exception) and "port-forward" in (result.exception.hint or "")
    missing = runner.invoke(cli, ["top", "--deploy", str(tmp_path / "nowhere")])
    assert isinstance(missing.exception, UsageError)
    assert "openenv deploy" in str(missing.exception)


def test_ctrl_c_leaves_the_live_view_with_exit_code_0(monkeypatch: pytest.MonkeyPatch) -> None:
    polls = 0

    def poll(self: Fleet) -> list[dict[str, Any]]:
        nonlocal polls
        polls += 1
        if polls > 2:
            raise KeyboardInterrupt
        return [{"url": "http://10.0.0.5:8000", "error": "unreachable: test"}]

    monkeypatch.setattr(Fleet, "poll", poll)
    result = runner.invoke(cli, ["top", "10.0.0.5:8000", "--interval", "0.1"])
    assert result.exit_code == 0, result.output
    assert polls == 3 and "unreachable: test" in result.output

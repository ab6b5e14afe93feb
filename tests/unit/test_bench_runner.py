"""What the bench takes from a server's /health: its capacity, all workers counted."""

from __future__ import annotations

from openenv_cli.bench.runner import BenchSettings, adopt_health


def test_capacity_counts_every_worker() -> None:
    settings = BenchSettings(url="http://127.0.0.1:1", requests_grid=[300, 500])
    lines = adopt_health(settings, {"max_sessions": 100, "workers": 4})
    assert settings.server_capacity == 400
    assert "4 workers × 100 sessions = 400 sessions" in lines[0]
    assert any("batch 500 exceeds the server's capacity of 400" in line for line in lines)


def test_one_worker_or_an_older_server_reads_as_before() -> None:
    settings = BenchSettings(url="http://127.0.0.1:1")
    lines = adopt_health(settings, {"max_sessions": 4})
    assert settings.server_capacity == 4
    assert lines[0] == "server capacity: 4 sessions at once (from /health)"

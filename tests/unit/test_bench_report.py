"""JSON, CSV, Markdown and PNG reports of ``openenv bench``."""

from __future__ import annotations

import builtins
import csv
import io
import json
from pathlib import Path

import pytest

from openenv_cli.bench import report
from openenv_cli.bench.stats import BenchRun, SessionsCell, ThroughputCell
from tests.support.optional import require


def sessions_run() -> BenchRun:
    run = BenchRun(
        mode="sessions",
        url="http://127.0.0.1:8000",
        transport="ws",
        settings={"processes": 1, "timeout": 30.0, "deadline": 600.0, "compression": True},
        started_at="2026-01-01T00:00:00+00:00",
        duration_s=12.5,
        environment={"cpus": 2, "python": "3.11", "server": "test server", "server_pids": [123]},
    )
    for wait in (1.0, 5.0):
        for batch, ok in ((32, 32), (128, 120)):
            for rep in (1, 2):
                raw = {
                    "attempted": batch,
                    "ok": ok,
                    "errors": {"connect: timeout": batch - ok} if ok < batch else {},
                    "connect": [0.01] * batch,
                    "reset": [0.001] * ok,
                    "step": [wait] * ok,
                    "total": [wait + 0.02] * ok,
                    "wall": wait + 0.1,
                    "cpu": 0.1,
                }
                run.sessions.append(
                    SessionsCell.from_raw(raw, batch=batch, wait=wait, rep=rep, server_cpu_s=0.05)
                )
    return run


def throughput_run() -> BenchRun:
    run = BenchRun(
        mode="throughput",
        url="http://127.0.0.1:8000",
        transport="ws",
        settings={"processes": 2},
        started_at="2026-01-01T00:00:00+00:00",
    )
    for sessions in (1, 64):
        raw = {
            "ok": sessions,
            "steps": sessions * 100,
            "window": [0.0, 1.0],
            "step_latencies": [0.0002] * (sessions * 100),
            "errors": {},
            "cpu": 0.3,
        }
        run.throughput.append(
            ThroughputCell.from_raw(
                raw, sessions=sessions, steps_per_session=100, wait=0.0, rep=1, server_cpu_s=0.2
            )
        )
    return run


def test_json_has_every_cell_the_summary_and_the_max_batch() -> None:
    data = report.to_json_dict(sessions_run())
    text = json.dumps(data)  # serializable as is
    assert json.loads(text)["schema_version"] == report.SCHEMA_VERSION
    assert len(data["sessions"]) == 8
    assert len(data["sessions_summary"]) == 4
    assert data["max_batch"] == {"1.0": 32, "5.0": 32}
    first = data["sessions"][0]
    assert first["total"]["p99"] == pytest.approx(1020.0)
    assert data["server_cpu_s"] == pytest.approx(0.4)


def test_csv_has_one_row_per_run() -> None:
    rows = list(csv.reader(io.StringIO(report.csv_text(sessions_run()))))
    assert rows[0] == report.SESSIONS_COLUMNS
    assert len(rows) == 9
    row = dict(zip(rows[0], rows[3], strict=True))  # 128 sessions, wait 1, rep 1
    assert row["batch"] == "128" and row["ok"] == "120"
    assert row["errors"] == "connect: timeout ×8"


def test_throughput_csv_and_table() -> None:
    run = throughput_run()
    rows = list(csv.reader(io.StringIO(report.csv_text(run))))
    assert rows[0] == report.THROUGHPUT_COLUMNS
    assert [r[0] for r in rows[1:]] == ["1", "64"]
    headers, body = report.summary_table(run)
    assert "steps/s" in headers
    assert body[1][4] == "6,400"  # 6,400 steps in one second
    assert body[1][7] == "31.2"  # server µs per step: 0.2 s / 6,400


def test_markdown_report() -> None:
    text = report.markdown(sessions_run(), plots=[Path("x/run-sessions.png")])
    assert text.startswith("# openenv bench: sessions")
    assert "| batch | wait s |" in text
    assert "wait 1 s: **32**" in text
    assert "connect: timeout: 32" in text  # 8 per failing run, 4 failing runs
    assert "![run-sessions](run-sessions.png)" in text


def test_markdown_table_alignment() -> None:
    text = report.markdown_table(["a", "b"], [["x", "1"]])
    assert text.splitlines() == ["| a | b |", "|---|---:|", "| x | 1 |"]


def test_write_reports_writes_every_file(tmp_path: Path) -> None:
    require("matplotlib")
    paths = report.write_reports(sessions_run(), tmp_path / "out", "run")
    for key in ("json", "csv", "markdown"):
        assert Path(paths[key]).is_file()  # type: ignore[arg-type]
    plots = paths["plots"]
    assert [p.name for p in plots] == ["run-sessions.png"]  # type: ignore[union-attr]
    assert plots[0].read_bytes().startswith(b"\x89PNG")  # type: ignore[index]
    assert "run-sessions.png" in Path(paths["markdown"]).read_text()  # type: ignore[arg-type]


def test_throughput_plot(tmp_path: Path) -> None:
    require("matplotlib")
    assert [p.name for p in report.write_plots(throughput_run(), tmp_path, "t")] == [
        "t-throughput.png"
    ]


def test_no_plots_without_matplotlib(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real_import = builtins.__import__

    def fake_import(name: str, *args: object, **kwargs: object) -> object:
        if name == "matplotlib" or name.startswith("matplotlib."):
            raise ImportError("no matplotlib here")
        return real_import(name, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(builtins, "__import__", fake_import)
    paths = report.write_reports(sessions_run(), tmp_path, "run")
    assert paths["plots"] == []
    assert "## Plots" not in Path(paths["markdown"]).read_text()  # type: ignore[arg-type]


def test_listen_overflow_note() -> None:
    run = sessions_run()
    assert report.listen_overflow_note(run) is None
    run.sessions[3].listen_overflows = 1200
    note = report.listen_overflow_note(run)
    assert note is not None and "1,200" in note and "128-session run" in note
    assert note in report.markdown(run)
    rows = list(csv.DictReader(io.StringIO(report.csv_text(run))))
    assert rows[3]["listen_overflows"] == "1200" and rows[0]["listen_overflows"] == ""

"""`openenv validate` option handling that needs no project or server."""

from __future__ import annotations

import pytest
from rich.console import Console

from openenv_cli.main import main
from openenv_cli.validation.render import render_table
from openenv_cli.validation.results import Report, failed, one_period, passed, warned


@pytest.mark.parametrize(
    "url,base",
    [
        ("http://127.0.0.1:8000/web/", "http://127.0.0.1:8000"),
        ("http://127.0.0.1:8000/web", "http://127.0.0.1:8000"),
        ("https://me-my-env.hf.space/docs", "https://me-my-env.hf.space"),
        ("http://host:9/prefix/health", "http://host:9/prefix"),
        ("http://host/openapi.json", "http://host"),
    ],
)
def test_url_of_a_page_points_at_the_base_url(
    url: str, base: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["validate", "--url", url])
    assert exc.value.code == 2
    err = " ".join(capsys.readouterr().err.split())
    assert f"openenv validate --url {base}`" in err
    assert "route" in err


def test_one_warning_is_singular() -> None:
    console = Console(record=True, width=200)
    report = Report(target="x")
    report.add(passed("a", "fine"), warned("b", "hmm", "do this"))
    render_table(report, console)
    text = console.export_text()
    assert "1 warning," in text and "1 warnings" not in text


@pytest.mark.parametrize(
    "text,expected",
    [
        ("Failed: boom.", "Failed: boom."),
        ("Failed: boom..", "Failed: boom."),
        ("Wait...", "Wait..."),
    ],
)
def test_messages_never_end_with_a_doubled_period(text: str, expected: str) -> None:
    assert one_period(text) == expected
    assert failed("x", f"{text}", f"{text}").message == expected
    assert failed("x", "m", f"{text}").fix == expected

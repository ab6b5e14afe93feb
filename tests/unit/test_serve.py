"""What `python -m openenv_runtime.serve` (a container's command) says when it starts."""

from __future__ import annotations

import pytest

from openenv_runtime.serve import settings_summary


def test_a_container_log_starts_with_the_settings_and_their_sources(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PORT", "7860")
    monkeypatch.setenv("OPENENV_API_KEY", "not-shown-anywhere")
    text = settings_summary("my_app.server.app:app")
    assert text.splitlines()[0].startswith("openenv_runtime.serve my_app.server.app:app")
    assert any(line.split()[:3] == ["port", "7860", "(PORT)"] for line in text.splitlines())
    assert "checkpoint_dir" in text and "not-shown-anywhere" not in text

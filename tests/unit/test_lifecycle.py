"""Resolution of the resume / drain / warm-pool settings."""

from __future__ import annotations

import pytest

from openenv_runtime.errors import EnvironmentContractError
from openenv_runtime.server.lifecycle import LifecycleSettings, resolve_lifecycle


def test_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("SESSION_RESUME_GRACE", "DRAIN_TIMEOUT", "WARM_POOL"):
        monkeypatch.delenv(name, raising=False)
    assert resolve_lifecycle() == LifecycleSettings(30.0, 30.0, 0)


def test_argument_beats_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SESSION_RESUME_GRACE", "5")
    monkeypatch.setenv("DRAIN_TIMEOUT", "7")
    monkeypatch.setenv("WARM_POOL", "3")
    assert resolve_lifecycle() == LifecycleSettings(5.0, 7.0, 3)
    assert resolve_lifecycle(resume_grace=0, drain_timeout=1, warm_pool=0) == LifecycleSettings(
        0.0, 1.0, 0
    )


@pytest.mark.parametrize(
    ("name", "value"),
    [("SESSION_RESUME_GRACE", "soon"), ("DRAIN_TIMEOUT", "-1"), ("WARM_POOL", "1.5")],
)
def test_bad_values_say_what_to_write(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str
) -> None:
    monkeypatch.setenv(name, value)
    with pytest.raises(EnvironmentContractError, match=name):
        resolve_lifecycle()

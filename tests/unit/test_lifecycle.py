"""The resume / drain / warm-pool settings resolve like every server setting."""

from __future__ import annotations

import pytest

from openenv_runtime.errors import EnvironmentContractError
from openenv_runtime.server.config.settings import load_settings


def test_defaults() -> None:
    values = load_settings(environ={}).values
    assert (values.resume_grace, values.drain_timeout, values.warm_pool) == (30.0, 30.0, 0)


def test_variable_beats_create_app_argument() -> None:
    environ = {"SESSION_RESUME_GRACE": "5", "DRAIN_TIMEOUT": "7", "WARM_POOL": "3"}
    code = {"resume_grace": 1.0, "drain_timeout": 2.0, "warm_pool": 1}
    values = load_settings(environ=environ, code=code).values
    assert (values.resume_grace, values.drain_timeout, values.warm_pool) == (5.0, 7.0, 3)
    values = load_settings(environ={}, code=code).values
    assert (values.resume_grace, values.drain_timeout, values.warm_pool) == (1.0, 2.0, 1)


@pytest.mark.parametrize(
    ("name", "value"),
    [("SESSION_RESUME_GRACE", "soon"), ("DRAIN_TIMEOUT", "-1"), ("WARM_POOL", "1.5")],
)
def test_bad_values_name_their_source(name: str, value: str) -> None:
    with pytest.raises(EnvironmentContractError, match=name):
        load_settings(environ={name: value})

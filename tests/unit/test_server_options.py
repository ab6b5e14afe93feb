"""The reference's create_app keywords, mapped with settings= into one settings layer."""

from __future__ import annotations

import pytest

from openenv_runtime.models import State
from openenv_runtime.server import ServerSettings
from openenv_runtime.server.config.reference_options import resolve_reference_options
from openenv_runtime.wire import ConcurrencyConfig


def test_concurrency_config_gives_both_settings_and_leaves_an_unset_timeout_unset() -> None:
    both = ConcurrencyConfig(max_concurrent_envs=3, session_timeout=30)
    assert resolve_reference_options(State, {"concurrency_config": both}, None).code == {
        "max_concurrent_envs": 3,
        "session_timeout": 30,
    }
    capacity_only = ConcurrencyConfig(max_concurrent_envs=3)
    code = resolve_reference_options(State, {"concurrency_config": capacity_only}, None).code
    assert code == {"max_concurrent_envs": 3}


def test_settings_fields_given_join_the_reference_keywords_in_one_layer() -> None:
    settings = ServerSettings(web_interface=False, step_timeout=0)
    options = resolve_reference_options("my_env", {"max_concurrent_envs": 2}, settings)
    assert options.code == {"web_interface": False, "step_timeout": None, "max_concurrent_envs": 2}
    assert options.env_name == "my_env" and options.state_cls is State


def test_a_setting_given_twice_is_refused() -> None:
    with pytest.raises(ValueError, match="session_timeout"):
        resolve_reference_options(
            State,
            {"concurrency_config": ConcurrencyConfig(max_concurrent_envs=2, session_timeout=5)},
            ServerSettings(session_timeout=9),
        )

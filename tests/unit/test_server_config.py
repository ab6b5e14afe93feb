import pytest

from openenv_runtime import EnvironmentContractError
from openenv_runtime.server.config import parse_bool, resolve_config


def test_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (
        "MAX_CONCURRENT_ENVS",
        "SESSION_TIMEOUT",
        "OPENENV_API_KEY",
        "ENABLE_WEB_INTERFACE",
    ):
        monkeypatch.delenv(name, raising=False)
    config = resolve_config()
    assert config.max_concurrent_envs == 100
    assert config.session_timeout == 600.0
    assert config.api_key is None
    assert config.enable_web_interface is True


def test_environment_variables_then_parameters_win(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MAX_CONCURRENT_ENVS", "7")
    monkeypatch.setenv("SESSION_TIMEOUT", "0")
    monkeypatch.setenv("ENABLE_WEB_INTERFACE", "false")
    config = resolve_config()
    assert (config.max_concurrent_envs, config.session_timeout, config.enable_web_interface) == (
        7,
        None,
        False,
    )
    assert resolve_config(max_concurrent_envs=3).max_concurrent_envs == 3


def test_bad_values_say_how_to_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MAX_CONCURRENT_ENVS", "lots")
    with pytest.raises(EnvironmentContractError, match="MAX_CONCURRENT_ENVS=100"):
        resolve_config()


def test_parse_bool() -> None:
    assert parse_bool("Yes") and not parse_bool("off")
    with pytest.raises(EnvironmentContractError):
        parse_bool("maybe")

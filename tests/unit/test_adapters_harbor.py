"""The parts of harbor:PATH targets that need no engine: the target, its options, the action's
shape and how a verifier's reward files are read (openenv_runtime.adapters.harbor)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from openenv_runtime.adapters.harbor import (
    HarborAction,
    HarborOptions,
    main_reward,
    parse_options,
    parse_reward,
)
from openenv_runtime.adapters.target import FamilyTarget, load_family, parse_family_target
from openenv_runtime.errors import AdapterError


def test_a_harbor_target_names_an_absolute_folder() -> None:
    target = parse_family_target("harbor:/srv/tasks/hello-world?warm=2")
    assert target == FamilyTarget("harbor", "/srv/tasks/hello-world", {"warm": "2"})
    assert parse_family_target(str(target)) == target


def test_a_relative_folder_is_a_clear_error_before_any_engine_is_asked() -> None:
    target = parse_family_target("harbor:tasks/hello")
    assert target is not None
    with pytest.raises(AdapterError, match="not an absolute path"):
        load_family(target)


def test_options_are_typed_and_checked() -> None:
    assert parse_options({}) == HarborOptions()
    assert parse_options({"warm": "0", "command_timeout": "2.5", "max_output": "10"}) == (
        HarborOptions(warm=0, command_timeout=2.5, max_output=10)
    )
    with pytest.raises(
        AdapterError, match=r"no option colour.*command_timeout, executor, max_output, warm"
    ):
        parse_options({"colour": "red"})
    with pytest.raises(AdapterError, match="must be positive"):
        parse_options({"command_timeout": "0"})
    with pytest.raises(AdapterError, match="must be positive"):
        parse_options({"warm": "-1"})


def test_the_executor_is_docker_or_local_and_local_has_no_warm_pool() -> None:
    assert parse_options({}).executor == "docker"
    assert parse_options({"executor": "local"}).executor == "local"
    with pytest.raises(AdapterError, match="one of docker, local"):
        parse_options({"executor": "ssh"})
    with pytest.raises(AdapterError, match="no warm pool"):
        parse_options({"executor": "local", "warm": "2"})


@pytest.mark.parametrize(
    "fields",
    [{}, {"command": "ls", "submit": True}, {"read_path": "/a", "write_path": "/b"}],
)
def test_an_action_does_exactly_one_thing(fields: dict[str, object]) -> None:
    with pytest.raises(ValidationError, match="exactly one of"):
        HarborAction.model_validate(fields)


def test_the_action_schema_gives_a_working_example() -> None:
    (example,) = HarborAction.model_json_schema()["examples"]
    assert HarborAction.model_validate(example).command == "ls -la"


def test_reward_files_are_read_as_harbor_writes_them() -> None:
    assert parse_reward("reward.txt", " 1\n") == {"reward": 1.0}
    assert parse_reward("reward.json", '{"reward": 0.75}') == {"reward": 0.75}
    assert main_reward(parse_reward("reward.json", '{"accuracy": 0.5}')) == 0.5
    assert main_reward({"reward": 0.2, "style": 1.0}) == 0.2
    with pytest.raises(ValueError, match="name the main one 'reward'"):
        main_reward({"a": 1.0, "b": 0.0})
    with pytest.raises(ValueError, match="not a number"):
        parse_reward("reward.txt", "passed")
    with pytest.raises(ValueError, match="not a number"):
        parse_reward("reward.json", '{"reward": true}')
    with pytest.raises(ValueError, match="not JSON"):
        parse_reward("reward.json", "{")

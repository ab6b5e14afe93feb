"""verifiers:TASKSET targets: the adapter's parts that need no verifiers installed.

verifiers itself never enters this interpreter (tests/support/verifiers_venv.py says why);
tests/integration/test_adapters_verifiers.py serves real tasksets from its own virtualenv.
Here the stand-ins are plain pydantic models and classes of the same shape.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

from openenv_runtime.adapters.target import FamilyTarget, parse_family_target
from openenv_runtime.adapters.verifiers import (
    MAX_TURNS_OPTION,
    VerifiersAction,
    VerifiersToolCall,
    as_message_dict,
    call_arguments,
    discover_tools,
    max_turns_option,
    prompt_messages,
    shown_fields,
    taskset_options,
)
from openenv_runtime.errors import AdapterError


class Data(BaseModel):
    """Shaped like verifiers' TaskData, with a reference answer of its own."""

    idx: int | None = None
    id: str | None = None
    name: str | None = None
    description: str | None = None
    prompt: str | list[Any] | None = None
    system_prompt: str | None = None
    answer: str = "42"


class Message(BaseModel):
    role: str
    content: str | None = None
    tool_calls: list[Any] | None = None


def test_a_verifiers_target_is_a_family_target_with_typed_options_later() -> None:
    assert parse_family_target("verifiers:my_taskset?num_tasks=5&max_turns=3") == FamilyTarget(
        "verifiers", "my_taskset", {"num_tasks": "5", "max_turns": "3"}
    )


def test_a_string_prompt_opens_with_the_system_prompt_then_the_user() -> None:
    data = Data(prompt="What is 2 + 2?", system_prompt="Be brief.")
    assert prompt_messages(data) == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "What is 2 + 2?"},
    ]
    assert prompt_messages(Data(prompt="Hi")) == [{"role": "user", "content": "Hi"}]


def test_a_message_list_prompt_is_kept_in_order_unset_fields_left_out() -> None:
    data = Data(
        prompt=[Message(role="user", content="a"), {"role": "assistant", "content": "b", "x": None}]
    )
    assert prompt_messages(data) == [
        {"role": "user", "content": "a"},
        {"role": "assistant", "content": "b"},
    ]
    assert as_message_dict(Message(role="user", content="c")) == {"role": "user", "content": "c"}


def test_the_client_sees_the_task_identity_never_its_answer() -> None:
    data = Data(idx=3, name="sum", prompt="?", answer="secret")
    assert shown_fields(data) == {"idx": 3, "name": "sum"}


def test_tool_call_arguments_may_be_an_object_or_its_json_text() -> None:
    as_object = VerifiersToolCall(name="t", arguments={"k": 1})
    assert call_arguments(as_object) == (json.dumps({"k": 1}), {"k": 1})
    assert call_arguments(VerifiersToolCall(name="t", arguments='{"k": 2}')) == (
        '{"k": 2}',
        {"k": 2},
    )
    assert call_arguments(VerifiersToolCall(name="t", arguments="")) == ("", {})
    # not an object: recorded as sent, not called
    assert call_arguments(VerifiersToolCall(name="t", arguments="[1]")) == ("[1]", None)
    assert call_arguments(VerifiersToolCall(name="t", arguments="{oops")) == ("{oops", None)


def test_an_action_without_tool_calls_is_a_final_reply() -> None:
    assert VerifiersAction(content="done").tool_calls == []


class Facts:
    """Shaped like a verifiers Toolset: @vf.tool marks a method with ``tool = True``."""

    server_name = "facts"

    def lookup(self, key: str, limit: int = 3) -> str:
        """The value under key."""
        return key * limit

    lookup.tool = True  # type: ignore[attr-defined]

    async def renamed(self) -> list[str]:
        return ["a"]

    renamed.tool = True  # type: ignore[attr-defined]
    renamed.tool_name = "every_key"  # type: ignore[attr-defined]

    def helper(self) -> None:  # not a tool
        return None


def test_tools_are_named_as_verifiers_advertises_them_with_their_schema() -> None:
    tools = discover_tools([Facts()])
    assert set(tools) == {"facts_lookup", "facts_every_key"}
    function = tools["facts_lookup"].schema["function"]
    assert function["description"] == "The value under key."
    assert function["parameters"]["required"] == ["key"]
    assert function["parameters"]["properties"]["limit"]["default"] == 3


@pytest.mark.asyncio
async def test_a_tool_is_called_with_its_arguments_and_answers_text() -> None:
    tools = discover_tools([Facts()])
    assert await tools["facts_lookup"]({"key": "ab", "limit": 2}) == "abab"
    assert await tools["facts_every_key"]({}) == '["a"]'  # not a string: its JSON


@pytest.mark.asyncio
async def test_tool_arguments_are_converted_by_the_signature_or_refused() -> None:
    lookup = discover_tools([Facts()])["facts_lookup"]
    assert await lookup({"key": "ab", "limit": "3"}) == "ababab"  # "3" is an int here
    for wrong in ({"limit": 2}, {"key": "a", "colour": "red"}, {"key": "a", "limit": "x"}):
        with pytest.raises(ValidationError):
            await lookup(wrong)


class Config(BaseModel):
    """Shaped like a verifiers TasksetConfig."""

    id: str = ""
    num_tasks: int = 5
    difficulty: list[str] = []


def test_options_are_typed_by_the_taskset_config() -> None:
    fields = Config.model_fields
    typed = taskset_options("t", {"num_tasks": "7", "difficulty": "easy,hard"}, fields)
    assert typed == {"num_tasks": 7, "difficulty": ["easy", "hard"]}
    assert taskset_options("t", {MAX_TURNS_OPTION: "3"}, fields) == {}


@pytest.mark.parametrize(
    ("options", "words"),
    [
        ({"colour": "red"}, "has no option 'colour'; its options are: difficulty, num_tasks"),
        ({"id": "other"}, "has no option 'id'"),  # the target names the taskset
        ({"num_tasks": "many"}, "num_tasks='many' is not a valid int"),
    ],
)
def test_a_wrong_option_is_one_clear_error(options: dict[str, str], words: str) -> None:
    with pytest.raises(AdapterError, match=words):
        taskset_options("t", options, Config.model_fields)


def test_max_turns_defaults_and_must_be_positive() -> None:
    assert max_turns_option({}) == 32
    assert max_turns_option({MAX_TURNS_OPTION: "4"}) == 4
    for bad in ("0", "-1", "x"):
        with pytest.raises(AdapterError, match="must be a whole number"):
            max_turns_option({MAX_TURNS_OPTION: bad})

"""``blocking_outside_loop``: every way of calling a wrapped method reaches it unchanged."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from openenv_runtime.blocking import install_blocking


class Calls:
    BLOCKING_EXTRA = ("call",)

    async def call(
        self, first: Any = None, second: Any = None, *more: Any, **options: Any
    ) -> tuple[Any, ...]:
        return (first, second, more, options)


install_blocking(Calls)

CASES: list[tuple[tuple[Any, ...], dict[str, Any], tuple[Any, ...]]] = [
    ((), {}, (None, None, (), {})),
    ((1,), {}, (1, None, (), {})),
    ((1, 2), {}, (1, 2, (), {})),
    ((1, 2, 3), {}, (1, 2, (3,), {})),
    ((), {"first": 1}, (1, None, (), {})),
    ((), {"second": 2, "x": 3}, (None, 2, (), {"x": 3})),
    ((1,), {"second": 2}, (1, 2, (), {})),
    ((1,), {"arg": 5}, (1, None, (), {"arg": 5})),
]


@pytest.mark.parametrize(("args", "kwargs", "expected"), CASES)
def test_a_plain_call_blocks_for_the_result(
    args: tuple[Any, ...], kwargs: dict[str, Any], expected: tuple[Any, ...]
) -> None:
    assert Calls().call(*args, **kwargs) == expected


@pytest.mark.parametrize(("args", "kwargs", "expected"), CASES)
def test_inside_a_loop_the_call_is_awaited(
    args: tuple[Any, ...], kwargs: dict[str, Any], expected: tuple[Any, ...]
) -> None:
    async def run() -> Any:
        return await Calls().call(*args, **kwargs)

    assert asyncio.run(run()) == expected


def test_the_wrapper_keeps_the_method_s_signature() -> None:
    import inspect

    assert list(inspect.signature(Calls.call).parameters) == [
        "self",
        "first",
        "second",
        "more",
        "options",
    ]

"""openenv_runtime.failures: one classification of failed episodes for the rollouts and collect."""

from __future__ import annotations

import pytest

from openenv_runtime.errors import EnvError
from openenv_runtime.failures import (
    MODEL_HTTP,
    MODEL_NO_TOKEN_IDS,
    MODEL_NOT_FOUND,
    MODEL_OTHER,
    MODEL_TIMEOUT,
    MODEL_UNAUTHORIZED,
    MODEL_UNREACHABLE,
    FailureLog,
    env_kind,
    model_failure,
    stops_run,
    too_many,
)
from openenv_runtime.llm.tokens import MissingTokenIdsError

pytest.importorskip("openai", reason="needs openenv-runtime[llm]")


def _refused() -> RuntimeError:
    try:
        try:
            raise ConnectionRefusedError(111, "Connection refused")
        except ConnectionRefusedError as inner:
            raise RuntimeError("could not connect") from inner
    except RuntimeError as outer:
        return outer


def test_model_errors_of_every_client_are_classified() -> None:
    import httpx
    import openai

    from openenv_runtime.rollouts.transport import ModelCallError

    request = httpx.Request("POST", "http://127.0.0.1:1/v1/chat/completions")
    missing = openai.NotFoundError(
        "no such model", response=httpx.Response(404, request=request), body=None
    )
    cases = {
        MODEL_NOT_FOUND: [ModelCallError(404, "u", b"no"), missing],
        MODEL_UNAUTHORIZED: [ModelCallError(401, "u", b""), ModelCallError(403, "u", b"")],
        MODEL_HTTP: [ModelCallError(503, "u", b"busy")],
        MODEL_NO_TOKEN_IDS: [MissingTokenIdsError("no token ids")],
        MODEL_UNREACHABLE: [_refused(), openai.APIConnectionError(request=request)],
        MODEL_TIMEOUT: [TimeoutError(), openai.APITimeoutError(request=request)],
        MODEL_OTHER: [ValueError("not JSON")],
    }
    for kind, errors in cases.items():
        for error in errors:
            assert model_failure(error).kind == kind, error
    assert str(model_failure(ValueError("not JSON"))) == "ValueError: not JSON"


def test_which_failures_stop_a_run() -> None:
    for kind in (MODEL_NOT_FOUND, MODEL_UNAUTHORIZED, MODEL_UNREACHABLE, MODEL_NO_TOKEN_IDS):
        assert stops_run(kind)
    for kind in (MODEL_HTTP, MODEL_TIMEOUT, MODEL_OTHER, "env:EXECUTION_ERROR", "policy"):
        assert not stops_run(kind)
    assert env_kind(EnvError("EXECUTION_ERROR", "broke")) == "env:EXECUTION_ERROR"
    assert env_kind(TimeoutError()) == "env:timeout"
    assert not too_many(5, 10, 0.5) and too_many(6, 10, 0.5)
    assert not too_many(0, 0, 0.0) and too_many(1, 10, 0.0) and not too_many(10, 10, 1.0)


def test_the_report_shows_the_first_errors_of_each_kind() -> None:
    log = FailureLog()
    for i in range(8):
        log.add(MODEL_NOT_FOUND, f"HTTP 404: model {i % 5}")
    log.add("env:timeout", "environment: TimeoutError")
    assert log.failed == 9 and log.stops_run
    lines = log.report(12).splitlines()
    assert lines[0] == "9 of 12 episodes failed:"
    assert lines[1].startswith("  model:not_found (8): ") and "/v1/models" in lines[1]
    assert lines[2:5] == [f"    - HTTP 404: model {i}" for i in range(3)]  # three, no repeats
    assert lines[5] == "  env:timeout (1)" and lines[6] == "    - environment: TimeoutError"

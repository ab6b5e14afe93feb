"""The capture proxy's own HTTP protocol: used only with the uvicorn it is tested with."""

from __future__ import annotations

import logging

import pytest

from openenv_runtime.capture import CaptureProxy, server
from openenv_runtime.capture.server import CaptureProtocol, protocol_for


def test_the_protocol_is_bound_to_its_proxy() -> None:
    proxy = CaptureProxy("http://127.0.0.1:9")
    protocol = protocol_for(proxy)
    assert isinstance(protocol, type) and issubclass(protocol, CaptureProtocol)
    assert protocol.proxy is proxy


def test_an_untested_uvicorn_gets_its_own_protocol_and_one_log_line(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(server, "_uvicorn_version", lambda: (9, 1))
    with caplog.at_level(logging.WARNING, logger="openenv_runtime.capture"):
        assert protocol_for(CaptureProxy("http://127.0.0.1:9")) == "auto"
    assert "tested with uvicorn" in caplog.text and "not 9.1" in caplog.text

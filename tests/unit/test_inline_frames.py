"""The frame reader and writer of the protocol's shortcut, checked against websockets' own parser."""

from __future__ import annotations

import logging
import os

import pytest
from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol
from websockets.frames import Frame, Opcode
from websockets.protocol import OPEN, Protocol, Side

from openenv_runtime.server import connections
from openenv_runtime.server.ws import inline_frames
from openenv_runtime.server.ws.inline_frames import (
    TESTED,
    InlineFrames,
    between_frames,
    frame_header,
    supports,
    text_frame,
    untested_versions,
)


def client_frame(payload: bytes, opcode: Opcode = Opcode.TEXT, fin: bool = True) -> bytes:
    """The bytes a client sends: a masked frame, serialized by websockets."""
    return Frame(opcode, payload, fin=fin).serialize(mask=True, extensions=[])


def with_rsv1(data: bytes) -> bytes:
    """``data`` with the first extension bit set (what permessage-deflate sets)."""
    return bytes((data[0] | 0x40,)) + data[1:]


def server_parser() -> Protocol:
    return Protocol(Side.SERVER, state=OPEN, max_size=1 << 20)


@pytest.mark.parametrize("size", [0, 1, 125, 126, 4000, 65535])
def test_a_whole_masked_text_frame_is_unmasked(size: int) -> None:
    payload = os.urandom(size)
    assert text_frame(client_frame(payload), None) == payload


@pytest.mark.parametrize(
    "data",
    [
        client_frame(b"x" * 65536),  # 64-bit length: left to websockets
        client_frame(b"{}", opcode=Opcode.BINARY),
        client_frame(b"{}", fin=False),  # the first fragment of a message
        with_rsv1(client_frame(b"{}")),  # an extension bit (compression)
        client_frame(b"", opcode=Opcode.PING),
        client_frame(b"", opcode=Opcode.CLOSE),
        Frame(Opcode.TEXT, b"{}").serialize(mask=False, extensions=[]),  # unmasked: an error
        client_frame(b'{"a":1}')[:-1],  # cut short
        client_frame(b"{}") + client_frame(b"{}"),  # two frames in one read
        client_frame(b"x" * 300)[:3],  # not even the extended length
        b"",
    ],
    ids=[
        "64-bit-length",
        "binary",
        "fragment",
        "rsv1",
        "ping",
        "close",
        "unmasked",
        "truncated",
        "two-frames",
        "short-header",
        "empty",
    ],
)
def test_anything_else_is_left_to_websockets(data: bytes) -> None:
    assert text_frame(data, None) is None


def test_a_frame_over_the_size_limit_is_left_to_websockets_which_refuses_it() -> None:
    data = client_frame(b"x" * 101)
    assert text_frame(data, 100) is None
    assert text_frame(data, 101) == b"x" * 101


@pytest.mark.parametrize("size", [0, 125, 126, 65535, 65536, 70000])
def test_the_reply_header_is_what_a_client_parses(size: int) -> None:
    client = Protocol(Side.CLIENT, state=OPEN, max_size=None)
    payload = b"y" * size
    client.receive_data(frame_header(size) + payload)
    [event] = client.events_received()
    assert isinstance(event, Frame)
    assert (event.opcode, event.fin, bytes(event.data)) == (Opcode.TEXT, True, payload)
    assert client.parser_exc is None


def test_the_parser_is_between_frames_only_with_nothing_half_read() -> None:
    parser = server_parser()
    assert between_frames(parser)
    whole = client_frame(b'{"type":"step"}')
    parser.receive_data(whole[:2])  # the header: consumed, the payload still to come
    assert not parser.reader.buffer
    assert not between_frames(parser)
    parser.receive_data(whole[2:])
    assert [bytes(e.data) for e in parser.events_received()] == [b'{"type":"step"}']
    assert between_frames(parser)


def test_a_fragmented_message_in_progress_is_not_between_frames() -> None:
    parser = server_parser()
    parser.receive_data(client_frame(b'{"type":', fin=False))
    parser.events_received()
    assert not between_frames(parser)  # the next frame must be its continuation
    parser.receive_data(client_frame(b'"step"}', opcode=Opcode.CONT))
    parser.events_received()
    assert between_frames(parser)


def test_a_closing_parser_is_not_between_frames() -> None:
    parser = server_parser()
    parser.receive_data(client_frame(b"\x03\xe8", opcode=Opcode.CLOSE))
    assert parser.state is not OPEN
    assert not between_frames(parser)  # discard(), not parse(): and the state says so too


def test_the_server_protocol_takes_the_shortcut_with_the_installed_uvicorn() -> None:
    # If a uvicorn upgrade changes the protocol, this fails instead of the speed quietly going.
    assert supports(WebSocketsSansIOProtocol)
    assert issubclass(connections.GuardedWebSocketProtocol, InlineFrames)
    assert not supports(type("Changed", (WebSocketsSansIOProtocol,), {}))
    assert not supports(object)


def test_the_installed_uvicorn_and_websockets_are_among_the_tested_versions() -> None:
    assert untested_versions() == []
    assert set(TESTED) == {"uvicorn", "websockets"}


@pytest.mark.parametrize(
    ("name", "found"),
    [("uvicorn", "0.99.0"), ("uvicorn", "1.0"), ("websockets", "14.2"), ("websockets", "18.0")],
)
def test_an_untested_version_turns_the_shortcut_off_with_one_log_line(
    name: str, found: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    real = inline_frames.installed_version
    monkeypatch.setattr(
        inline_frames, "installed_version", lambda dist: found if dist == name else real(dist)
    )
    with caplog.at_level(logging.WARNING, logger="openenv_runtime.server"):
        assert not supports(WebSocketsSansIOProtocol)
    [record] = caplog.records
    assert f"{name} {found}" in record.getMessage()
    assert "through ASGI" in record.getMessage()


def test_a_version_that_cannot_be_read_is_untested(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(inline_frames, "installed_version", lambda dist: None)
    assert untested_versions() == ["uvicorn None", "websockets None"]

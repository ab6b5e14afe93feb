"""Spans kept in memory: tracing on in this process (as ``OTEL_TRACES_EXPORTER`` turns it on),
through one SDK provider installed once, whatever test comes first."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

EXPORTER = InMemorySpanExporter()


class _WhileOn(SimpleSpanProcessor):
    """Keeps spans only during a test that asked for them: the provider stays installed for
    the rest of the process (FastAPI's own telemetry would fill the exporter otherwise)."""

    on = False

    def on_end(self, span: ReadableSpan) -> None:
        if self.on:
            super().on_end(span)


PROCESSOR = _WhileOn(EXPORTER)


@pytest.fixture(name="spans")
def spans_fixture(monkeypatch: pytest.MonkeyPatch) -> Iterator[InMemorySpanExporter]:
    """``spans``: tracing on for what the test creates, every finished span kept in memory
    (import ``spans_fixture`` into the test module)."""
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "console")  # the provider below wins: it is set
    if not isinstance(trace.get_tracer_provider(), TracerProvider):
        provider = TracerProvider()
        trace.set_tracer_provider(provider)
        provider.add_span_processor(PROCESSOR)
    EXPORTER.clear()
    PROCESSOR.on = True
    try:
        yield EXPORTER
    finally:
        PROCESSOR.on = False
        EXPORTER.clear()


def named(spans: InMemorySpanExporter, name: str) -> list[ReadableSpan]:
    return [s for s in spans.get_finished_spans() if s.name == name]

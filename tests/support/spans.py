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


@pytest.fixture(name="spans")
def spans_fixture(monkeypatch: pytest.MonkeyPatch) -> Iterator[InMemorySpanExporter]:
    """``spans``: tracing on for what the test creates, every finished span kept in memory
    (import ``spans_fixture`` into the test module)."""
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "console")  # the provider below wins: it is set
    if not isinstance(trace.get_tracer_provider(), TracerProvider):
        provider = TracerProvider()
        trace.set_tracer_provider(provider)
        provider.add_span_processor(SimpleSpanProcessor(EXPORTER))
    EXPORTER.clear()
    yield EXPORTER
    EXPORTER.clear()


def named(spans: InMemorySpanExporter, name: str) -> list[ReadableSpan]:
    return [s for s in spans.get_finished_spans() if s.name == name]

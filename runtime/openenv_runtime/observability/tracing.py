"""OpenTelemetry spans, off unless the standard variables turn them on.

Tracing is on when ``OTEL_EXPORTER_OTLP_ENDPOINT`` or ``OTEL_TRACES_EXPORTER`` is set (and
``OTEL_SDK_DISABLED`` is not ``true``); it needs the ``otel`` extra
(``pip install 'openenv-runtime[otel]'``). Off, nothing here imports ``opentelemetry``, and
:func:`tracer` answers ``None``: callers check that once per session or episode and keep their
untraced path as it is.

On, the first call sets up the SDK's tracer provider unless the application already installed
its own (then its provider, exporters and sampling are used as they are): the service name
from ``OTEL_SERVICE_NAME`` (else ``service_name``), an OTLP/HTTP exporter (``otlp``, the
default) or the console (``console``) as ``OTEL_TRACES_EXPORTER`` says, batched. Trace context
crosses processes as W3C ``traceparent`` (``OTEL_PROPAGATORS`` to change it).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable, Mapping
from contextlib import AbstractContextManager, nullcontext
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from opentelemetry.context import Context
    from opentelemetry.trace import Span, Tracer

__all__ = [
    "EPISODE",
    "FRAMES_HEADER",
    "TRACEPARENT",
    "SessionSpan",
    "annotate",
    "context_from",
    "context_from_asgi",
    "enabled",
    "failed",
    "headers_for",
    "request_span",
    "span",
    "tracer",
    "with_traceparent",
]

TRACEPARENT = "traceparent"
"""The W3C header (and, in frames, the key) that carries a span's identity to another process."""
FRAMES_HEADER = "x-openenv-trace-frames"
"""A tracing server's handshake answer says it reads ``traceparent`` in reset and step frames
(a client sends it only then: other servers may refuse a frame with a key they do not know)."""
_SCOPE = "openenv_runtime"
_setup_lock = threading.Lock()
_configured = False
_session: ContextVar[SessionSpan | None] = ContextVar("openenv_session_span", default=None)
EPISODE: ContextVar[Span | None] = ContextVar("openenv_episode_span", default=None)
"""The span of the episode a trainer's task plays (set by the rollouts' player), if traced."""


def enabled() -> bool:
    """Whether the standard OpenTelemetry variables ask for traces."""
    environ = os.environ
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    exporter = environ.get("OTEL_TRACES_EXPORTER", "").strip().lower()
    if exporter == "none":
        return False
    return bool(exporter or environ.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").strip())


def tracer(service_name: str = "openenv") -> Tracer | None:
    """The runtime's tracer when tracing is on (see the module), else ``None``."""
    if not enabled():
        return None
    from opentelemetry import trace

    _configure(service_name)
    return trace.get_tracer(_SCOPE)


def _configure(service_name: str) -> None:
    """Install the SDK's provider once, unless the application set one (the proxy is the default)."""
    global _configured
    with _setup_lock:
        if _configured:
            return
        from opentelemetry import trace

        if not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider):
            _configured = True
            return  # the application's own provider
        try:
            from opentelemetry.sdk.resources import SERVICE_NAME, Resource
            from opentelemetry.sdk.trace import TracerProvider
            from opentelemetry.sdk.trace.export import (
                BatchSpanProcessor,
                ConsoleSpanExporter,
                SpanExporter,
            )
        except ImportError as exc:
            raise RuntimeError(
                "OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_TRACES_EXPORTER asks for traces, but the "
                "OpenTelemetry SDK is not installed: pip install 'openenv-runtime[otel]' "
                "(or unset them)."
            ) from exc
        resource = Resource.create()  # OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES
        if str(resource.attributes.get(SERVICE_NAME, "")).startswith("unknown_service"):
            resource = resource.merge(Resource({SERVICE_NAME: service_name}))
        provider = TracerProvider(resource=resource)
        names = os.environ.get("OTEL_TRACES_EXPORTER", "").strip().lower() or "otlp"
        for name in (n.strip() for n in names.split(",")):
            exporter: SpanExporter
            if name == "console":
                exporter = ConsoleSpanExporter()
            elif name == "otlp":
                from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

                exporter = OTLPSpanExporter()  # endpoint, headers, timeout: OTEL_EXPORTER_OTLP_*
            else:
                raise RuntimeError(
                    f"OTEL_TRACES_EXPORTER={name!r} is not one openenv sets up; use otlp, "
                    "console or none (or install your own tracer provider before starting)."
                )
            provider.add_span_processor(BatchSpanProcessor(exporter))
        trace.set_tracer_provider(provider)
        _configured = True


def context_from(carrier: Mapping[str, str]) -> Context:
    """The trace context a peer sent (``traceparent``, ``tracestate``); empty when none."""
    from opentelemetry.propagate import extract

    return extract(carrier)


def context_from_asgi(headers: Iterable[tuple[bytes, bytes]]) -> Context:
    """The trace context of an ASGI request's headers (only the trace headers are read)."""
    carrier = {}
    for name, value in headers:
        if name == b"traceparent" or name == b"tracestate":
            carrier[name.decode("latin-1")] = value.decode("latin-1")
    return context_from(carrier)


def headers_for(context: Context | None = None) -> dict[str, str]:
    """The headers that carry ``context`` (default: the current span) to another process."""
    from opentelemetry.propagate import inject

    carrier: dict[str, str] = {}
    inject(carrier, context=context)
    return carrier


class SessionSpan:
    """A server session's span, from its first request to its end.

    A WebSocket session's is current in the session's task (:meth:`open`); an HTTP session's,
    whose requests come on many connections, is kept on the session (:meth:`start`). Its resets
    and steps are spans of their own (:meth:`request`): children of the session's, or of the
    span the client sent with the request (``traceparent``), then linked to the session's.
    Attributes name the session by its label (``#12``), never by its id or token.
    """

    __slots__ = ("_restore", "label", "span", "steps", "total")

    def __init__(self, span: Span, label: str) -> None:
        self.span = span
        self.label = label
        self.steps = 0  # in the current episode
        self.total = 0
        self._restore: Any = None

    @classmethod
    def start(
        cls, tracer: Tracer, label: str, kind: str, parent: Context | None = None
    ) -> SessionSpan:
        """Start the session's span, a child of ``parent`` (a client's context) if given."""
        from opentelemetry import trace

        span = tracer.start_span(
            "openenv.session",
            context=parent,
            kind=trace.SpanKind.SERVER,
            attributes={"openenv.session": label, "openenv.session.transport": kind},
        )
        return cls(span, label)

    @classmethod
    def open(
        cls, tracer: Tracer, label: str, kind: str, parent: Context | None = None
    ) -> SessionSpan:
        """:meth:`start`, and make the span current in this task until :meth:`end`."""
        opened = cls.start(tracer, label, kind, parent)
        opened.make_current()
        return opened

    def make_current(self) -> None:
        """Make this span (and :meth:`current`) current in this task until :meth:`end`."""
        from opentelemetry import context, trace

        token = context.attach(trace.set_span_in_context(self.span))
        mine = _session.set(self)

        def restore() -> None:
            context.detach(token)
            _session.reset(mine)

        self._restore = restore

    @staticmethod
    def current() -> SessionSpan | None:
        """The span of the WebSocket session this task serves, if it is traced."""
        return _session.get()

    def request(
        self, tracer: Tracer, kind: str, sent: object = None
    ) -> AbstractContextManager[Span]:
        """The span of one ``reset`` or ``step``; ``sent`` is the ``traceparent`` the client
        sent with it, if any."""
        from opentelemetry import trace

        attributes: dict[str, Any] = {"openenv.session": self.label}
        if kind == "step":
            self.steps += 1
            self.total += 1
            attributes["openenv.step.index"] = self.steps
        elif kind == "reset":
            self.steps = 0
        links = None
        parent = None
        if type(sent) is str and len(sent) <= 256:
            parent = context_from({TRACEPARENT: sent})
            if trace.get_current_span(parent).get_span_context().is_valid:
                links = [trace.Link(self.span.get_span_context())]
            else:
                parent = None
        return tracer.start_as_current_span(
            f"openenv.{kind}",
            context=parent if parent is not None else trace.set_span_in_context(self.span),
            kind=trace.SpanKind.SERVER,
            attributes=attributes,
            links=links,
        )

    def end(self, ended_by: str) -> None:
        """End the session's span (``ended_by``: why the session ended)."""
        self.span.set_attribute("openenv.session.ended_by", ended_by)
        self.span.set_attribute("openenv.session.steps", self.total)
        self.span.end()
        if self._restore is not None:
            self._restore()


def failed(span: Span, code: str) -> None:
    """Mark ``span`` as failed with the protocol's error ``code``."""
    from opentelemetry.trace import StatusCode

    span.set_attribute("openenv.outcome", "error")
    span.set_attribute("openenv.error.code", code)
    span.set_status(StatusCode.ERROR, code)


def with_traceparent(frame: str) -> str:
    """A request frame (a JSON object) with the current span's ``traceparent`` added, so the
    server's span of this reset or step is its child (unchanged when no span is current)."""
    sent = headers_for().get(TRACEPARENT)
    if sent is None or not frame.endswith("}"):
        return frame
    return f'{frame[:-1]},"{TRACEPARENT}":"{sent}"}}'


def span(
    tracer: Tracer | None, name: str, attributes: Mapping[str, Any] | None = None
) -> AbstractContextManager[Span | None]:
    """A span current inside the ``with`` block, child of the current one; nothing without a tracer."""
    if tracer is None:
        return nullcontext()
    return tracer.start_as_current_span(name, attributes=attributes)


def annotate(attributes: Mapping[str, Any]) -> None:
    """Add ``attributes`` to the current span (call it only with tracing on)."""
    from opentelemetry import trace

    trace.get_current_span().set_attributes(attributes)


def request_span(
    tracer: Tracer | None,
    name: str,
    headers: Iterable[tuple[bytes, bytes]],
    attributes: Mapping[str, Any] | None = None,
) -> AbstractContextManager[Span | None]:
    """The span of one ASGI request, a child of the caller's ``traceparent`` if it sent one;
    nothing without a tracer."""
    if tracer is None:
        return nullcontext()
    from opentelemetry.trace import SpanKind

    return tracer.start_as_current_span(
        name, context=context_from_asgi(headers), kind=SpanKind.SERVER, attributes=attributes
    )

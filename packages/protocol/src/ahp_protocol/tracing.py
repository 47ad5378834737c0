"""Traces across the hook boundary: W3C Trace Context in a reverse-DNS extension.

Owns :data:`EXTENSION`, the key under a request's ``params.extensions`` that carries
``traceparent`` (and ``tracestate``) from a harness to a backend, and the two halves
that use it: :func:`start_hook_span` / :func:`end_hook_span` (the harness side: one
span per hook call, its context carried in the message) and :func:`handler_span` (the
server kit: the handler's span, continuing the harness's trace).

Tracing is on in a process once that process has imported OpenTelemetry
(``opentelemetry.trace``; configuring an SDK needs that import). This module never
imports it itself: without the ``otel`` extra, or with it installed and unused,
nothing is imported, nothing is added to a message, and a call costs a dictionary
lookup. AHP does not depend on OpenTelemetry (draft): a backend that ignores the
extension loses nothing, and a missing or malformed carrier starts a new trace.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Mapping, MutableMapping
from contextlib import contextmanager, nullcontext
from typing import TYPE_CHECKING, Any, Final, Protocol

if TYPE_CHECKING:
    from contextlib import AbstractContextManager

__all__ = ["EXTENSION", "HookCallOutcome", "end_hook_span", "handler_span", "start_hook_span"]

EXTENSION: Final = "org.w3c.trace-context"
"""``params.extensions[EXTENSION] = {"traceparent": ..., "tracestate"?: ...}``."""
TRACER: Final = "ahp_protocol"
_MAX_FIELD: Final = 512  # a traceparent is 55 characters; tracestate is bounded by W3C
_OFF: Final = nullcontext()


class HookCallOutcome(Protocol):
    """What :func:`end_hook_span` reads of a finished hook call: the client's
    :class:`~ahp_protocol.client.Diagnostic` is one. Declared here, so the server kit,
    which imports this module, depends on nothing of the client."""

    @property
    def outcome(self) -> str: ...
    @property
    def latency_ms(self) -> float: ...
    @property
    def failure(self) -> str | None: ...  # a failure class (a StrEnum: its value)
    @property
    def policy(self) -> str | None: ...


def _otel() -> Any:
    """``opentelemetry.trace`` when this process has imported it, else ``None``."""
    return sys.modules.get("opentelemetry.trace")


def _propagator() -> Any:
    # W3C Trace Context whatever the process's global propagator is: the extension is
    # defined as that format.
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    return TraceContextTextMapPropagator()


def _span(backend: str, event_type: str, mode: str) -> tuple[str, dict[str, str]]:
    """A hook call's span name and attributes, the same on both sides of the call."""
    method = "hooks/intercept" if mode == "intercept" else "hooks/observe"
    attributes = {
        "rpc.system": "jsonrpc",
        "rpc.method": method,
        "ahp.backend.id": backend,
        "ahp.event.type": event_type,
        "ahp.mode": mode,
    }
    return f"{method} {event_type}", attributes


def start_hook_span(
    params: MutableMapping[str, Any], backend: str, event_type: str, mode: str
) -> Any:
    """Start the span of one hook call and carry its context in ``params`` (the
    message's params, before it is sent); ``None`` when tracing is off."""
    trace = _otel()
    if trace is None:
        return None
    kind = trace.SpanKind.CLIENT if mode == "intercept" else trace.SpanKind.PRODUCER
    name, attributes = _span(backend, event_type, mode)
    span = trace.get_tracer(TRACER).start_span(name, kind=kind, attributes=attributes)
    carrier: dict[str, str] = {}
    _propagator().inject(carrier, context=trace.set_span_in_context(span))
    if carrier:  # a non-recording span with no valid context carries nothing
        extensions = params.get("extensions")
        params["extensions"] = {
            **(extensions if isinstance(extensions, dict) else {}),
            EXTENSION: carrier,
        }
    return span


def end_hook_span(span: Any, diagnostic: HookCallOutcome) -> None:
    """End a span from :func:`start_hook_span` with what the call came to."""
    if span is None:
        return
    span.set_attribute("ahp.outcome", diagnostic.outcome)
    span.set_attribute("ahp.latency_ms", round(diagnostic.latency_ms, 3))
    if diagnostic.failure is not None:
        from opentelemetry.trace import Status, StatusCode

        failure = str(diagnostic.failure)  # the plain string of a StrEnum member
        span.set_attribute("ahp.failure", failure)
        if diagnostic.policy is not None:
            span.set_attribute("ahp.failure_policy", diagnostic.policy)
        span.set_status(Status(StatusCode.ERROR, failure))
    span.end()


def _carrier(params: Mapping[str, Any]) -> dict[str, str] | None:
    extensions = params.get("extensions")
    value = extensions.get(EXTENSION) if isinstance(extensions, dict) else None
    if not isinstance(value, dict):
        return None
    carrier = {
        key: value[key]
        for key in ("traceparent", "tracestate")
        if isinstance(value.get(key), str) and len(value[key]) <= _MAX_FIELD
    }
    return carrier if "traceparent" in carrier else None


def handler_span(
    params: Mapping[str, Any], backend: str, event_type: str, mode: str
) -> AbstractContextManager[Any]:
    """The current span around a handler call when tracing is on: a child of the
    harness's span when the message carries a valid ``traceparent``, else a new trace;
    a no-op context when tracing is off."""
    trace = _otel()
    if trace is None:
        return _OFF
    return _handler_span(trace, _carrier(params), backend, event_type, mode)


@contextmanager
def _handler_span(
    trace: Any, carrier: dict[str, str] | None, backend: str, event_type: str, mode: str
) -> Iterator[Any]:
    kind = trace.SpanKind.SERVER if mode == "intercept" else trace.SpanKind.CONSUMER
    name, attributes = _span(backend, event_type, mode)
    with trace.get_tracer(TRACER).start_as_current_span(
        name,
        context=None if carrier is None else _propagator().extract(carrier),
        kind=kind,
        attributes=attributes,
        # A handler's exception text stays out of the span, as it stays off the wire.
        record_exception=False,
        set_status_on_exception=False,
    ) as span:
        try:
            yield span
        except BaseException as exc:
            span.set_status(trace.Status(trace.StatusCode.ERROR, type(exc).__name__))
            raise

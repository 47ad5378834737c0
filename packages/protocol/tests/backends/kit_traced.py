"""A kit backend with OpenTelemetry configured, recording the spans it makes.

The OpenTelemetry SDK with its in-memory exporter, as a deployed backend would
configure an exporter of its own. At exit the finished spans are written, one JSON
object per line, to the file named by ``AHP_TEST_SPANS``. Policy: a ``tool.before``
whose command holds ``rm -rf`` is denied; every event type is observed (and nothing is
done with it); a command holding ``raise`` makes the handler raise. Serves like any kit
backend (no arguments: stdio persistent; ``--once``; ``--http HOST:PORT``).
"""

from __future__ import annotations

import atexit
import json
import os
import signal
import sys

from ahp_protocol.server import Backend, InterceptRequest
from ahp_protocol.wire.effects import DenyEffect
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

exporter = InMemorySpanExporter()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(exporter))
trace.set_tracer_provider(provider)


def span_record(span: object) -> dict[str, object]:
    """What a test compares: ids, parent, name, kind, status, attributes."""
    context = span.context  # type: ignore[attr-defined]
    parent = span.parent  # type: ignore[attr-defined]
    return {
        "name": span.name,  # type: ignore[attr-defined]
        "trace_id": f"{context.trace_id:032x}",
        "span_id": f"{context.span_id:016x}",
        "parent_id": None if parent is None else f"{parent.span_id:016x}",
        "kind": span.kind.name,  # type: ignore[attr-defined]
        "status": span.status.status_code.name,  # type: ignore[attr-defined]
        "attributes": dict(span.attributes or {}),  # type: ignore[attr-defined]
    }


@atexit.register
def dump() -> None:
    with open(os.environ["AHP_TEST_SPANS"], "a", encoding="utf-8") as out:
        for span in exporter.get_finished_spans():
            out.write(json.dumps(span_record(span)) + "\n")


backend = Backend("com.example.kit.traced")


@backend.intercept("tool.before")
def guard(request: InterceptRequest) -> DenyEffect | None:
    command = str(request.tool_input.get("command", ""))
    if "raise" in command:
        raise RuntimeError("secret detail that must not reach the span")
    if "rm -rf" in command:
        return DenyEffect(reason="No recursive deletes (traced).", code="com.example.kit.rm_rf")
    return None


@backend.observe("*")
def seen(event: dict[str, object]) -> None:
    return None


if __name__ == "__main__":
    # uvicorn stops on SIGTERM and then raises it again: exit normally, so the spans
    # are written.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    backend.run()

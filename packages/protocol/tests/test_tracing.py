"""Traces across the hook boundary (``ahp_protocol.tracing``), with real processes.

A harness process (our :class:`~ahp_protocol.client.Dispatcher`, with the
OpenTelemetry SDK and its in-memory exporter configured) runs events through
``backends/kit_traced.py`` (the server kit, with the SDK configured too) over stdio
and over loopback HTTP; both processes write their finished spans out, and the test
shows one trace: the harness's span per hook call is the parent of the backend's
handler span, with the backend id, event type, outcome and failure class on it. A
harness process that never imports OpenTelemetry sends no extension and imports no
``opentelemetry`` module; a backend given a malformed carrier starts its own trace.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent
TRACED = HERE / "backends" / "kit_traced.py"
RECORDER = HERE / "backends" / "recorder.py"
EXTENSION = "org.w3c.trace-context"

HARNESS = r"""
import json, sys
import anyio

configure = sys.argv[2] == "otel"
if configure:
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)

from ahp_protocol.client import Dispatcher
from ahp_protocol.wire.registration import parse_registration

registration = parse_registration(json.loads(open(sys.argv[1]).read()))


def event(number, command):
    return {
        "id": f"evt_trace_{number}", "source": "urn:example:tracing", "type": "tool.before",
        "time": "2026-08-24T08:51:14Z", "harness": {"name": "tracing-tests", "version": "1"},
        "session": {"id": "sess_trace", "cwd": "/repo"},
        "tool": {"name": "Bash", "kind": "shell", "origin": "native",
                 "input": {"command": command}},
        "call": {"id": f"call_{number}"}, "path": "native",
    }


async def main():
    out = {}
    async with Dispatcher(registration, capabilities={"tool.before": {"effects": ["deny"]}},
                          source="urn:example:tracing") as dispatcher:
        if configure:
            with trace.get_tracer("tests").start_as_current_span("tool call") as parent:
                out["parent"] = f"{parent.get_span_context().span_id:016x}"
                results = [await dispatcher.intercept(event(i, c))
                           for i, c in enumerate(["ls -la", "rm -rf /", "raise"])]
        else:
            results = [await dispatcher.intercept(event(i, c))
                       for i, c in enumerate(["ls -la", "rm -rf /"])]
    out["denied"] = [r.denied for r in results]
    out["otel_modules"] = sorted(m for m in sys.modules if m.startswith("opentelemetry"))
    if configure:
        out["spans"] = [
            {"name": s.name, "trace_id": f"{s.context.trace_id:032x}",
             "span_id": f"{s.context.span_id:016x}",
             "parent_id": None if s.parent is None else f"{s.parent.span_id:016x}",
             "kind": s.kind.name, "status": s.status.status_code.name,
             "attributes": dict(s.attributes or {})}
            for s in exporter.get_finished_spans()
        ]
    print(json.dumps(out))


anyio.run(main)
"""


def intercept_sub(policy: str = "fail-open") -> dict[str, Any]:
    return {
        "mode": "intercept",
        "events": ["tool.before"],
        "timeoutMs": 10000,
        "failurePolicy": policy,
        "content": {"default": "body"},
    }


def run_harness(tmp_path: Path, hooks: list[dict[str, Any]], mode: str) -> dict[str, Any]:
    registration = tmp_path / "registration.json"
    registration.write_text(json.dumps({"protocolVersion": "draft", "hooks": hooks}))
    done = subprocess.run(
        [sys.executable, "-c", HARNESS, str(registration), mode],
        capture_output=True,
        text=True,
        timeout=90,
        env={**os.environ, "AHP_TEST_SPANS": str(tmp_path / "backend-spans.jsonl")},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out: dict[str, Any] = json.loads(done.stdout)
    return out


def backend_spans(tmp_path: Path) -> list[dict[str, Any]]:
    path = tmp_path / "backend-spans.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def traced_stdio(lifecycle: str, spans: Path) -> dict[str, Any]:
    args = [str(TRACED), *(["--once"] if lifecycle == "per_event" else [])]
    return {
        "id": "com.example.kit.traced",
        "transport": {
            "type": "stdio",
            "command": sys.executable,
            "args": args,
            "lifecycle": lifecycle,
            "env": {"AHP_TEST_SPANS": str(spans)},  # a backend gets no other environment
        },
        "subscriptions": [intercept_sub()],
    }


def check_one_trace(out: dict[str, Any], backend: list[dict[str, Any]]) -> None:
    """Each hook call: the harness's CLIENT span under the caller's span, and the
    backend's SERVER span under it, in the same trace."""
    hook_spans = [s for s in out["spans"] if s["kind"] == "CLIENT"]
    (caller,) = [s for s in out["spans"] if s["name"] == "tool call"]
    assert caller["span_id"] == out["parent"]
    assert len(hook_spans) == 3 and len(backend) == 3, (hook_spans, backend)
    for span in hook_spans:
        assert span["name"] == "hooks/intercept tool.before"
        assert span["trace_id"] == caller["trace_id"]
        assert span["parent_id"] == caller["span_id"]
        assert span["attributes"]["ahp.backend.id"] == "com.example.kit.traced"
        assert span["attributes"]["ahp.event.type"] == "tool.before"
        assert span["attributes"]["ahp.latency_ms"] >= 0
    outcomes = [s["attributes"]["ahp.outcome"] for s in hook_spans]
    assert outcomes == ["no_effect", "denied", "failed"]
    failed = hook_spans[2]
    assert failed["status"] == "ERROR"
    assert failed["attributes"]["ahp.failure"] == "rpc_error"  # the handler raised: -32004
    assert failed["attributes"]["ahp.failure_policy"] == "fail-open"
    children = {s["parent_id"]: s for s in backend}
    for span in hook_spans:
        handler = children[span["span_id"]]  # the backend's span is the hook span's child
        assert handler["trace_id"] == caller["trace_id"]
        assert handler["kind"] == "SERVER"
        assert handler["name"] == "hooks/intercept tool.before"
        assert handler["attributes"]["ahp.backend.id"] == "com.example.kit.traced"
    raised = children[failed["span_id"]]
    assert raised["status"] == "ERROR"
    assert "secret" not in json.dumps(backend)  # the exception's text stays out of spans


@pytest.mark.timeout(120)
@pytest.mark.parametrize("lifecycle", ["persistent", "per_event"])
def test_one_trace_spans_harness_and_stdio_backend(tmp_path: Path, lifecycle: str) -> None:
    out = run_harness(tmp_path, [traced_stdio(lifecycle, tmp_path / "backend-spans.jsonl")], "otel")
    assert out["denied"] == [False, True, False]
    check_one_trace(out, backend_spans(tmp_path))


@pytest.mark.timeout(120)
def test_one_trace_spans_harness_and_http_backend(tmp_path: Path) -> None:
    spans = tmp_path / "backend-spans.jsonl"
    server = subprocess.Popen(
        [sys.executable, str(TRACED), "--http", "127.0.0.1:0"],
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "AHP_TEST_SPANS": str(spans)},
    )
    try:
        assert server.stderr is not None
        line = server.stderr.readline()
        assert "listening on http://" in line, line
        url = line.rsplit(" ", 1)[-1].strip()
        hook = {
            "id": "com.example.kit.traced",
            "transport": {"type": "http", "url": url},
            "subscriptions": [intercept_sub()],
        }
        out = run_harness(tmp_path, [hook], "otel")
    finally:
        server.terminate()  # uvicorn shuts down on SIGTERM; the backend writes its spans
        server.wait(timeout=30)
    assert out["denied"] == [False, True, False]
    check_one_trace(out, backend_spans(tmp_path))


def run_recorded(tmp_path: Path, mode: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The harness (``mode``) against a persistent recording backend: its output, and
    every message the backend received."""
    record = tmp_path / "record.jsonl"
    hook = {
        "id": "com.example.recorder",
        "transport": {
            "type": "stdio",
            "command": sys.executable,
            "args": ["-I", "-S", str(RECORDER), "--record", str(record)],
            "lifecycle": "persistent",
        },
        "subscriptions": [intercept_sub()],
    }
    out = run_harness(tmp_path, [hook], mode)
    entries = [json.loads(line) for line in record.read_text().splitlines()]
    return out, [e["message"] for e in entries if e["event"] == "message"]


@pytest.mark.timeout(120)
def test_without_opentelemetry_nothing_is_imported_or_sent(tmp_path: Path) -> None:
    out, sent = run_recorded(tmp_path, "plain")
    assert out["otel_modules"] == []
    assert len(sent) == 2 and all("extensions" not in m["params"] for m in sent)


@pytest.mark.timeout(120)
def test_the_carrier_is_on_the_wire_under_its_extension(tmp_path: Path) -> None:
    out, sent = run_recorded(tmp_path, "otel")
    hook_spans = [s for s in out["spans"] if s["kind"] == "CLIENT"]
    assert len(sent) == 3
    for message, span in zip(sent, hook_spans, strict=True):
        carrier = message["params"]["extensions"][EXTENSION]
        assert set(carrier) == {"traceparent"}
        assert carrier["traceparent"].startswith(f"00-{span['trace_id']}-{span['span_id']}-")


def test_a_malformed_carrier_starts_a_new_trace(tmp_path: Path) -> None:
    """The backend continues only a valid ``traceparent``; without one (absent, not a
    string, not W3C, oversized, a carrier that is not an object) its span is a new root."""
    code = (
        "import importlib.util, json, sys\n"
        f"spec = importlib.util.spec_from_file_location('traced', {str(TRACED)!r})\n"
        "traced = importlib.util.module_from_spec(spec); spec.loader.exec_module(traced)\n"
        "def request(n, carrier):\n"
        "    event = {'id': f'evt_{n}', 'source': 'urn:x', 'type': 'tool.before',\n"
        "             'time': '2026-08-24T08:51:14Z', 'harness': {'name': 'h', 'version': '1'},\n"
        "             'session': {'id': 's', 'cwd': '/r'}, 'call': {'id': 'c'},\n"
        "             'tool': {'name': 'Bash', 'kind': 'shell', 'origin': 'native',\n"
        "                      'input': {'command': 'ls'}},\n"
        "             'path': 'native'}\n"
        "    params = {'protocolVersion': 'draft', 'event': event,\n"
        "              'capabilities': {'effects': ['deny']}}\n"
        "    if carrier is not None:\n"
        "        params['extensions'] = {'org.w3c.trace-context': carrier}\n"
        "    return json.dumps({'jsonrpc': '2.0', 'id': f'evt_{n}',\n"
        "                       'method': 'hooks/intercept', 'params': params}).encode()\n"
        "good = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01'\n"
        "carriers = [{'traceparent': good}, None, {'traceparent': 'nonsense'},\n"
        "            {'traceparent': 7}, 'text', {'traceparent': good * 20}]\n"
        "for n, carrier in enumerate(carriers):\n"
        "    reply = json.loads(traced.backend.respond_sync(request(n, carrier)).body)\n"
        "    assert reply['result']['effects'] == [], reply\n"
        "print(json.dumps([traced.span_record(s) for s in traced.exporter.get_finished_spans()]))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "AHP_TEST_SPANS": str(tmp_path / "spans.jsonl")},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    spans = json.loads(done.stdout.splitlines()[-1])
    assert len(spans) == 6
    assert spans[0]["trace_id"] == "0af7651916cd43dd8448eb211c80319c"
    assert spans[0]["parent_id"] == "b7ad6b7169203331"
    roots = spans[1:]
    assert all(s["parent_id"] is None for s in roots)
    assert len({s["trace_id"] for s in spans}) == 6  # each a trace of its own

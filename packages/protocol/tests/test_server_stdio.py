"""The server kit over stdio, as real processes: persistent and per_event lifecycles.

Backends are the scripts in ``tests/backends``; every stdout line must be one
protocol message valid against the official schemas, and nothing else.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

import pytest

sys.path.insert(0, str(Path(__file__).parent / "backends"))
from kit_messages import (
    configuration_request,
    intercept,
    line,
    observe,
    session_end,
    tool_before,
)

BACKENDS = Path(__file__).parent / "backends"
DENYLIST = BACKENDS / "kit_denylist.py"
ASYNC = BACKENDS / "kit_async.py"
SECRET = "sk-live-SECRET-do-not-echo"
DEADLINE = 20.0
SchemaCheck = Callable[[str, Any], list[str]]


def spawn(script: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, str(script), *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, **(env or {})},
    )


def run_persistent(script: Path, payload: bytes, *args: str) -> tuple[list[Any], str, int]:
    """Feed ``payload`` and EOF; return the stdout messages, stderr and exit status."""
    proc = spawn(script, *args)
    out, err = proc.communicate(payload, timeout=DEADLINE)
    assert out == b"" or out.endswith(b"\n")
    messages = [json.loads(raw) for raw in out.splitlines()]
    return messages, err.decode("utf-8", "replace"), proc.returncode


class Lines:
    """Bounded reads of one pipe's lines from a background thread."""

    def __init__(self, stream: IO[bytes]) -> None:
        self.queue: queue.Queue[bytes] = queue.Queue()
        self.thread = threading.Thread(target=self._pump, args=(stream,), daemon=True)
        self.thread.start()

    def _pump(self, stream: IO[bytes]) -> None:
        for raw in iter(stream.readline, b""):
            self.queue.put(raw)
        self.queue.put(b"")

    def next(self, timeout: float = DEADLINE) -> bytes:
        return self.queue.get(timeout=timeout)


@pytest.fixture
def check(official_schema: SchemaCheck) -> Callable[[Any], Any]:
    def check_message(message: Any) -> Any:
        assert official_schema("json-rpc-message.schema.json", message) == []
        if "result" in message:
            kind = (
                "configuration-response.schema.json"
                if "configuration" in message["result"]
                else "intercept-response.schema.json"
            )
            assert official_schema(kind, message) == []
        return message

    return check_message


# --------------------------------------------------------------------- persistent


@pytest.mark.parametrize("script", [DENYLIST, ASYNC], ids=["sync", "async"])
def test_persistent_answers_many_requests_in_order(
    script: Path, check: Callable[[Any], Any]
) -> None:
    payload = b"".join(
        line(intercept(tool_before(f"evt_{i}", "rm -rf /" if i % 3 == 0 else "ls")))
        for i in range(60)
    )
    messages, _, status = run_persistent(script, payload)
    assert status == 0
    assert [m["id"] for m in messages] == [f"evt_{i}" for i in range(60)]
    for i, message in enumerate(map(check, messages)):
        effects = message["result"]["effects"]
        assert [e["type"] for e in effects] == (["deny"] if i % 3 == 0 else [])


def test_persistent_is_interactive() -> None:
    """Each response is flushed as soon as it is ready, with stdin still open."""
    proc = spawn(DENYLIST)
    assert proc.stdin is not None and proc.stdout is not None
    lines = Lines(proc.stdout)
    try:
        for i in range(3):
            proc.stdin.write(line(intercept(tool_before(f"i{i}", "rm -rf /tmp"))))
            proc.stdin.flush()
            answer = json.loads(lines.next())
            assert answer["id"] == f"i{i}"
            assert answer["result"]["effects"][0]["type"] == "deny"
        proc.stdin.close()
        assert proc.wait(timeout=DEADLINE) == 0
        assert lines.next() == b""
    finally:
        proc.kill()
        proc.wait()


def test_persistent_recovers_from_garbage_and_stays_protocol_only(
    check: Callable[[Any], Any],
) -> None:
    payload = b"".join(
        [
            b"this is not json\n",
            b"\n",  # blank lines are skipped
            b"\xff\xfe\n",
            line([intercept(tool_before("batched"))]),
            line(intercept(tool_before("after-garbage", "rm -rf /"))),
            line(observe(session_end("obs_1"))),  # a notification: no answer
            line(intercept(tool_before("chatty", "chatty"))),
            line(intercept(tool_before("boom", "boom"))),
            line(intercept(tool_before("unadvertised", "allow-me"))),
            line(configuration_request("cfg")),
            line(intercept(tool_before("last"))),
        ]
    )
    messages, stderr, status = run_persistent(DENYLIST, payload)
    assert status == 0
    for message in messages:
        check(message)
    summary = [(m["id"], m.get("error", {}).get("code")) for m in messages]
    assert summary == [
        (None, -32700),
        (None, -32700),
        (None, -32600),
        ("after-garbage", None),
        ("chatty", None),
        ("boom", -32004),
        ("unadvertised", -32603),
        ("cfg", None),
        ("last", None),
    ]
    assert messages[3]["result"]["effects"][0]["type"] == "deny"
    assert messages[7]["result"]["configuration"]["subscriptions"][0]["mode"] == "intercept"
    # Stray output went to stderr, never to the protocol stream.
    assert "stray print from a handler" in stderr
    assert "stray output from a child process" in stderr
    assert "observed session.end obs_1" in stderr
    assert "RuntimeError" in stderr and SECRET not in stderr


def test_persistent_oversized_line_is_discarded_then_serving_continues(
    check: Callable[[Any], Any],
) -> None:
    big = line(intercept(tool_before("big", "x" * 200_000)))
    payload = big + line(intercept(tool_before("small", "rm -rf /")))
    messages, stderr, status = run_persistent(DENYLIST, payload, "--max-frame-bytes", "4096")
    assert status == 0
    assert [(m["id"], m.get("error", {}).get("code")) for m in map(check, messages)] == [
        (None, -32700),
        ("small", None),
    ]
    assert "framing error" in stderr


def test_persistent_unterminated_last_record_is_a_framing_error(
    check: Callable[[Any], Any],
) -> None:
    complete = line(intercept(tool_before("whole")))
    cut = line(intercept(tool_before("cut"))).rstrip(b"\n")
    messages, stderr, status = run_persistent(DENYLIST, complete + cut)
    assert status == 0
    assert [(m["id"], m.get("error", {}).get("code")) for m in map(check, messages)] == [
        ("whole", None),
        (None, -32700),
    ]
    assert "framing error" in stderr


def test_persistent_eof_without_input_exits_zero_silently() -> None:
    messages, _, status = run_persistent(DENYLIST, b"")
    assert (messages, status) == ([], 0)


def test_persistent_notifications_only_produce_no_output() -> None:
    payload = line(observe(session_end("n1"))) + line(observe(session_end("n2"), version="0.9"))
    messages, stderr, status = run_persistent(DENYLIST, payload)
    assert (messages, status) == ([], 0)
    assert "observed session.end n1" in stderr and "n2" not in stderr


# --------------------------------------------------------------------- per_event


def _once(
    script: Path, message: bytes, env: dict[str, str] | None = None
) -> tuple[list[bytes], str, int]:
    """Write one message, keep stdin OPEN, and require the process to exit by itself."""
    proc = spawn(script, "--once", env=env)
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    try:
        proc.stdin.write(message)
        proc.stdin.flush()
        status = proc.wait(timeout=DEADLINE)  # stdin is still open here
        out = proc.stdout.read()
        err = proc.stderr.read().decode("utf-8", "replace")
    finally:
        proc.kill()
        proc.wait()
        for stream in (proc.stdin, proc.stdout, proc.stderr):
            stream.close()
    return out.splitlines(keepends=True), err, status


@pytest.mark.parametrize("script", [DENYLIST, ASYNC], ids=["sync", "async"])
def test_per_event_answers_one_request_and_exits_without_eof(
    script: Path, check: Callable[[Any], Any]
) -> None:
    out, _, status = _once(script, line(intercept(tool_before("once_1", "rm -rf /"))))
    assert status == 0
    assert len(out) == 1 and out[0].endswith(b"\n")
    answer = check(json.loads(out[0]))
    assert answer["id"] == "once_1" and answer["result"]["effects"][0]["type"] == "deny"


@pytest.mark.parametrize("script", [DENYLIST, ASYNC], ids=["sync", "async"])
def test_per_event_notification_exits_without_output(script: Path) -> None:
    out, err, status = _once(script, line(observe(session_end("once_obs"))))
    assert (out, status) == ([], 0)
    assert "observed session.end once_obs" in err


def test_per_event_reads_only_one_message() -> None:
    two = line(intercept(tool_before("first"))) + line(intercept(tool_before("second")))
    out, _, status = _once(DENYLIST, two)
    assert status == 0
    assert [json.loads(raw)["id"] for raw in out] == ["first"]


def test_per_event_handler_failure_and_errors() -> None:
    out, err, status = _once(DENYLIST, line(intercept(tool_before("once_boom", "boom"))))
    assert status == 0
    assert json.loads(out[0])["error"]["code"] == -32004
    assert SECRET.encode() not in b"".join(out) and SECRET not in err
    out, _, status = _once(DENYLIST, b"garbage\n")
    assert status == 0 and json.loads(out[0])["error"]["code"] == -32700


def test_per_event_sync_backend_needs_no_event_loop() -> None:
    out, err, status = _once(
        DENYLIST,
        line(intercept(tool_before("once_mod", "rm -rf /"))),
        env={"AHP_TEST_REPORT_MODULES": "1"},
    )
    assert status == 0 and len(out) == 1
    assert "modules-loaded: none" in err


def test_per_event_empty_input_exits_nonzero() -> None:
    proc = spawn(DENYLIST, "--once")
    out, _ = proc.communicate(b"", timeout=DEADLINE)
    assert (out, proc.returncode) == (b"", 1)


def test_per_event_stray_output_stays_off_stdout(check: Callable[[Any], Any]) -> None:
    out, err, status = _once(DENYLIST, line(intercept(tool_before("once_chatty", "chatty"))))
    assert status == 0 and len(out) == 1
    assert check(json.loads(out[0]))["id"] == "once_chatty"
    assert "stray print from a handler" in err and "stray output from a child process" in err


def test_help() -> None:
    done = subprocess.run(
        [sys.executable, str(DENYLIST), "--help"], capture_output=True, text=True, timeout=30
    )
    assert done.returncode == 0
    for option in ("--once", "--http", "--max-frame-bytes"):
        assert option in done.stdout


# --------------------------------------------------------------------- in-process streams


def test_serve_functions_with_explicit_streams(check: Callable[[Any], Any]) -> None:
    import io

    from ahp_protocol.server import Backend
    from ahp_protocol.server.stdio import serve_once, serve_persistent

    backend = Backend("com.example.streams")
    backend.intercept("tool.before")(lambda request: {"type": "deny", "reason": "no"})
    source = io.BytesIO(line(intercept(tool_before("s1"))) + line(intercept(tool_before("s2"))))
    sink = io.BytesIO()
    serve_persistent(backend, source, sink)
    assert [check(json.loads(raw))["id"] for raw in sink.getvalue().splitlines()] == ["s1", "s2"]

    source = io.BytesIO(line(intercept(tool_before("o1"))) + line(intercept(tool_before("o2"))))
    sink = io.BytesIO()
    assert serve_once(backend, source, sink) is True
    assert [json.loads(raw)["id"] for raw in sink.getvalue().splitlines()] == ["o1"]
    assert source.read() == line(intercept(tool_before("o2")))  # the rest stays unread


def test_serve_once_pauses_the_garbage_collector_and_restores_it() -> None:
    import gc
    import io

    from ahp_protocol.server import Backend
    from ahp_protocol.server.stdio import serve_once

    backend = Backend("com.example.gc")
    seen: list[bool] = []

    @backend.intercept("tool.before")
    def guard(request: Any) -> None:
        seen.append(gc.isenabled())

    assert gc.isenabled()
    sink = io.BytesIO()
    assert serve_once(backend, io.BytesIO(line(intercept(tool_before("g1")))), sink) is True
    assert seen == [False] and gc.isenabled()
    gc.disable()  # a caller that keeps it off keeps it off
    try:
        assert serve_once(backend, io.BytesIO(line(intercept(tool_before("g2")))), sink) is True
        assert not gc.isenabled()
    finally:
        gc.enable()


# --------------------------------------------------------------------- the official SDK as harness


@pytest.mark.anyio
@pytest.mark.parametrize("lifecycle", ["persistent", "per_event"])
async def test_official_sdk_stdio_transport_interoperates(lifecycle: str) -> None:
    """The SDK's harness-side stdio transport (which validates responses) accepts ours."""
    import anyio
    from agenthooksprotocol.transports.stdio import StdioTransport

    args = [str(DENYLIST)] + (["--once"] if lifecycle == "per_event" else [])
    transport = StdioTransport(sys.executable, args, lifecycle=lifecycle, inherit_environment=True)
    try:
        with anyio.fail_after(DEADLINE):
            deny = await transport.request(intercept(tool_before("sdk_1", "rm -rf /")))
            assert deny["result"]["effects"][0]["type"] == "deny"
            allow = await transport.request(intercept(tool_before("sdk_2", "ls")))
            assert allow["result"] == {"protocolVersion": "draft", "effects": []}
            await transport.notify(observe(session_end("sdk_3")))  # per_event: waits for exit
            config = await transport.request(configuration_request("sdk_4"))
            assert config["result"]["configuration"]["subscriptions"][0]["mode"] == "intercept"
    finally:
        await transport.aclose()


WARM_PROBE = r"""
import json, os, sys, time
from ahp_protocol.server import Backend
from ahp_protocol.server.stdio import serve_persistent
from ahp_protocol.wire import events

backend = Backend("com.example.warm")

@backend.intercept("tool.before")
def none(request):
    return None

read, write = os.pipe()
if sys.argv[1] == "waiting":  # a request is there before the backend reads
    os.write(write, (json.dumps({"jsonrpc": "2.0", "id": "c1", "method": "hooks/configuration",
                                 "params": {"protocolVersion": "draft"}}) + "\n").encode())
    os.close(write)
else:  # idle: the harness has sent nothing yet
    import threading
    threading.Timer(0.3, os.close, (write,)).start()
serve_persistent(backend, os.fdopen(read, "rb"), open(os.devnull, "wb"))
print(json.dumps({"built": sorted(events._VALIDATORS)}))
"""


@pytest.mark.parametrize(("stdin", "built"), [("idle", ["tool.before"]), ("waiting", [])])
def test_a_persistent_backend_idle_at_start_builds_its_validators(
    stdin: str, built: list[str]
) -> None:
    # Idle before its first request, it builds what judging that request needs; with a
    # request already waiting, it answers first (a configuration answer needs no models).
    done = subprocess.run(
        [sys.executable, "-c", WARM_PROBE, stdin],
        capture_output=True,
        text=True,
        timeout=DEADLINE,
        check=True,
    )
    assert json.loads(done.stdout.splitlines()[-1]) == {"built": built}

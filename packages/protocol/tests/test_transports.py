"""Client transports against a real misbehaving backend (``tests/backends/misbehave.py``).

Every stdio test runs real child processes; every HTTP test talks to a real
loopback server. Readiness is a signal (the server's first stderr line), never a
sleep. Each misbehaviour must yield its failure class, and malformed output must
be detected quickly (well under the deadline the test allows).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
import subprocess
import sys
import threading
import time
import traceback
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from ahp_protocol.client import FailureClass, OperationalFailure
from ahp_protocol.client.transports import (
    HeaderValue,
    HttpTransport,
    StdioTransport,
    child_environment,
    open_transport,
)
from ahp_protocol.client.transports.exchange import Exchange
from ahp_protocol.client.transports.stdio import (
    MAX_UNCORRELATED,
    NOTIFY_DELIVERY_S,
    STDERR_TAIL_BYTES,
    request_key,
)
from ahp_protocol.wire import jsonrpc

MISBEHAVE = Path(__file__).resolve().parent / "backends" / "misbehave.py"
QUICK = 1.0  # seconds: how fast a malformed or failed exchange must be reported
LONG = 10.0  # seconds: the generous deadline those exchanges run under
F = FailureClass


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


# -- helpers -------------------------------------------------------------------------


def message(
    mode: str | None = None, *, id: str | int | None = None, **extra: Any
) -> dict[str, Any]:
    params: dict[str, Any] = {"protocolVersion": "draft", **extra}
    if mode is not None:
        params["_mode"] = mode
    return jsonrpc.request(jsonrpc.INTERCEPT, params, id if id is not None else uuid.uuid4().hex)


def note(mode: str | None = None) -> dict[str, Any]:
    params: dict[str, Any] = {"protocolVersion": "draft", "nonce": uuid.uuid4().hex}
    if mode is not None:
        params["_mode"] = mode
    return jsonrpc.notification(jsonrpc.OBSERVE, params)


def stdio(
    mode: str = "ok",
    *,
    lifecycle: str = "persistent",
    record: Path | None = None,
    extra: tuple[str, ...] = (),
    **kwargs: Any,
) -> StdioTransport:
    args = ["-I", "-S", str(MISBEHAVE), mode, *extra]
    if record is not None:
        args += ["--record", str(record)]
    if lifecycle == "per_event":
        args.append("--once")
    kwargs.setdefault("environ", os.environ)
    return StdioTransport(sys.executable, args, lifecycle=lifecycle, **kwargs)  # type: ignore[arg-type]


def records(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text("ascii").splitlines() if line]


def starts(path: Path) -> list[dict[str, Any]]:
    return [r for r in records(path) if r["event"] == "start"]


def children() -> dict[int, str]:
    """Direct children of this test process (pid -> state), zombies included, from /proc."""
    me = os.getpid()
    found: dict[int, str] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        state, ppid = stat[stat.rfind(")") + 2 :].split()[:2]
        if int(ppid) == me:
            found[int(entry)] = state
    return found


def process_gone(pid: int) -> bool:
    """The process no longer runs (absent, or a zombie waiting for its reaper)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat[stat.rfind(")") + 2] == "Z"


async def outcome(
    transport: Any, msg: dict[str, Any], deadline: float = LONG, exchange: Exchange | None = None
) -> tuple[Any, float]:
    """(response | FailureClass | "timeout", elapsed seconds) of one request."""
    started = time.perf_counter()
    try:
        with anyio.fail_after(deadline):
            result: Any = await transport.request(msg, exchange)
    except OperationalFailure as exc:
        result = exc.failure
    except TimeoutError:
        result = "timeout"
    return result, time.perf_counter() - started


async def discarding(
    transport: Any, msg: dict[str, Any], deadline: float = LONG
) -> tuple[Any, float, list[int]]:
    """:func:`outcome`, plus the sizes of the frames the transport discarded meanwhile
    (the exchange record, read after a failure or the deadline too)."""
    exchange = Exchange()
    result, elapsed = await outcome(transport, msg, deadline, exchange)
    return result, elapsed, exchange.discarded


def effects(response: Any) -> list[Any]:
    assert isinstance(response, dict), response
    return list(response["result"]["effects"])


Check = Callable[[Any], bool]


def is_ok(r: Any) -> bool:
    return isinstance(r, dict) and effects(r) == []


def is_deny(r: Any) -> bool:
    return isinstance(r, dict) and [e["type"] for e in effects(r)] == ["deny"]


def is_rpc_error(r: Any) -> bool:
    return isinstance(r, dict) and r["error"]["code"] == -32004


def is_wrong_version(r: Any) -> bool:
    return isinstance(r, dict) and r["result"]["protocolVersion"] == "0.1"


def is_effect(kind: str) -> Check:
    return lambda r: isinstance(r, dict) and [e["type"] for e in effects(r)] == [kind]


# Modes whose answer reaches the caller as a response (the caller classifies it).
RESPONSES: dict[str, Check] = {
    "ok": is_ok,
    "deny": is_deny,
    "rpc-error": is_rpc_error,
    "wrong-version": is_wrong_version,
    "unknown-effect": is_effect("teleport"),
    "unadvertised-effect": is_effect("allow"),
    "late": is_ok,
    "slow-start": is_ok,
    "stderr-noise": is_ok,
    "linger": is_ok,
}

STDIO_FAILURES: dict[str, FailureClass] = {
    "crash": F.ABNORMAL_EXIT,
    "exit-before-answer": F.ABNORMAL_EXIT,
    "garbage": F.MALFORMED_OUTPUT,
    "multi-line": F.MALFORMED_OUTPUT,
    "wrong-id": F.ID_MISMATCH,  # per_event: its one answer is not this request's
    "oversized": F.MALFORMED_OUTPUT,
    "non-utf8": F.MALFORMED_OUTPUT,
    "unterminated": F.MALFORMED_OUTPUT,
}
PERSISTENT_DISCARDS = {"wrong-id"}
"""Persistent modes whose only answer has another id: discarded, so the deadline ends them."""


def check(mode: str, result: Any, expected: FailureClass | Check) -> None:
    if isinstance(expected, FailureClass):
        assert result == expected, f"{mode}: {result!r}"
    else:
        assert expected(result), f"{mode}: {result!r}"


# -- stdio: every mode, both lifecycles ------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize("lifecycle", ["persistent", "per_event"])
@pytest.mark.parametrize("mode", sorted({*RESPONSES, *STDIO_FAILURES}))
async def test_stdio_mode(lifecycle: str, mode: str, tmp_path: Path) -> None:
    transport = stdio(mode, lifecycle=lifecycle, extra=("--delay-ms", "150"), exit_grace=0.3)
    try:
        if lifecycle == "persistent" and mode in PERSISTENT_DISCARDS:
            result, elapsed, discarded = await discarding(transport, message(), deadline=0.5)
            assert (result, len(discarded)) == ("timeout", 1), mode
            assert elapsed < QUICK
            return
        result, elapsed = await outcome(transport, message())
        expected = STDIO_FAILURES.get(mode) or RESPONSES[mode]
        check(mode, result, expected)
        if isinstance(expected, FailureClass):
            assert elapsed < QUICK, f"{mode} took {elapsed:.2f}s"
    finally:
        await transport.aclose()
    assert transport.pids == []


@pytest.mark.anyio
@pytest.mark.parametrize("lifecycle", ["persistent", "per_event"])
async def test_stdio_hang_is_the_callers_deadline(lifecycle: str) -> None:
    transport = stdio("hang", lifecycle=lifecycle)
    try:
        result, elapsed = await outcome(transport, message(), deadline=0.3)
        assert result == "timeout"
        assert 0.25 < elapsed < QUICK
    finally:
        await transport.aclose()


@pytest.mark.anyio
async def test_per_event_nonzero_exit_after_a_valid_answer_fails() -> None:
    transport = stdio("answer-then-fail", lifecycle="per_event")
    result, elapsed = await outcome(transport, message())
    await transport.aclose()
    assert result == F.ABNORMAL_EXIT
    assert elapsed < QUICK


@pytest.mark.anyio
async def test_per_event_second_response_is_malformed() -> None:
    transport = stdio("two-responses", lifecycle="per_event")
    result, _ = await outcome(transport, message())
    await transport.aclose()
    assert result == F.MALFORMED_OUTPUT


@pytest.mark.anyio
async def test_per_event_lingering_child_is_killed_and_its_answer_counts(tmp_path: Path) -> None:
    rec = tmp_path / "rec.jsonl"
    transport = stdio("linger", lifecycle="per_event", record=rec, exit_grace=0.3)
    result, elapsed = await outcome(transport, message())
    assert is_ok(result)
    assert 0.25 < elapsed < 0.3 + QUICK
    assert transport.pids == []
    (start,) = starts(rec)
    assert process_gone(start["pid"])
    await transport.aclose()


def ok_line(rid: str) -> bytes:
    """What misbehave's ``ok`` mode writes for ``rid`` (one compact line)."""
    result = {"protocolVersion": "draft", "effects": []}
    body = {"jsonrpc": "2.0", "id": rid, "result": result}
    return json.dumps(body, separators=(",", ":")).encode() + b"\n"


@pytest.mark.anyio
@pytest.mark.parametrize("lifecycle", ["persistent", "per_event"])
async def test_stdio_frame_limit_is_exact(lifecycle: str) -> None:
    size = len(ok_line("edge")) - 1  # the framing newline is not part of the frame
    for limit, fits in ((size, True), (size - 1, False)):
        transport = stdio(lifecycle=lifecycle, max_frame_bytes=limit)
        result, _ = await outcome(transport, message(id="edge"))
        await transport.aclose()
        assert is_ok(result) if fits else result == F.MALFORMED_OUTPUT, (limit, result)


@pytest.mark.anyio
async def test_a_lone_surrogate_is_sent_escaped_as_valid_json(tmp_path: Path) -> None:
    # "\ud800" is what json.dumps and JSON.stringify write for a lone surrogate: JSON
    # carries it, UTF-8 cannot. The client writes it escaped (#26), as the server kit
    # does, instead of raising UnicodeEncodeError; the backend decodes valid JSON.
    rec = tmp_path / "rec.jsonl"
    transport = stdio(record=rec)
    try:
        sent = message(id="surrogate", description="lone \ud800 here")
        result, _ = await outcome(transport, sent)
        assert is_ok(result) and result["id"] == "surrogate"
    finally:
        await transport.aclose()
    # misbehave records a frame it could not decode as {"event": "raw"}: this one decoded.
    got = [r for r in records(rec) if r["event"] in ("message", "raw")]
    assert [r["event"] for r in got] == ["message"]
    assert got[0]["message"]["params"]["description"] == "lone \ud800 here"


@pytest.mark.anyio
async def test_persistent_stale_duplicate_is_discarded_and_the_next_answer_taken() -> None:
    # A late duplicate of an earlier answer is uncorrelated: discarded, never fatal.
    transport = stdio()
    try:
        first, _ = await outcome(transport, message("two-responses", id="first"))
        assert is_ok(first) and first["id"] == "first"
        (pid,) = transport.pids
        second, elapsed, discarded = await discarding(transport, message(id="second"))
        assert is_ok(second) and second["id"] == "second"
        assert discarded == [len(ok_line("first")) - 1]  # the duplicate, by size only
        assert elapsed < QUICK
        assert transport.pids == [pid]  # the same child: nothing failed
    finally:
        await transport.aclose()


# -- stdio: uncorrelated frames on a persistent backend (draft §8.1) ---------------------


@pytest.mark.anyio
@pytest.mark.parametrize("lifecycle", ["persistent", "per_event"])
async def test_a_stray_response_before_the_live_one(
    lifecycle: str, caplog: pytest.LogCaptureFixture
) -> None:
    """persistent: discarded (logged by size), the live answer accepted within the same
    deadline. per_event: the child's one response is not this request's: a failure."""
    transport = stdio(lifecycle=lifecycle)
    try:
        with caplog.at_level(logging.INFO, "ahp_protocol.client.transports.stdio"):
            result, elapsed, discarded = await discarding(
                transport, message("stray-then-ok", id="live")
            )
        assert elapsed < QUICK
        if lifecycle == "per_event":
            assert result == F.ID_MISMATCH and discarded == []
            return
        assert is_ok(result) and result["id"] == "live"
        assert discarded == [len(ok_line("live-stray")) - 1]
        logged = caplog.text
        assert f"discarded an uncorrelated response ({discarded[0]} bytes)" in logged
        assert "live-stray" not in logged  # never the content
        (pid,) = transport.pids
        again, _ = await outcome(transport, message(id="next"))
        assert is_ok(again) and again["id"] == "next" and transport.pids == [pid]
    finally:
        await transport.aclose()


@pytest.mark.anyio
async def test_uncorrelated_responses_are_bounded_per_request() -> None:
    transport = stdio()
    try:
        tolerated = message("strays", id="edge", _strays=MAX_UNCORRELATED)
        result, _, discarded = await discarding(transport, tolerated)
        assert is_ok(result) and result["id"] == "edge"
        assert len(discarded) == MAX_UNCORRELATED
        (pid,) = transport.pids
        # One more is a misbehaving backend: failed at once, not at the deadline, and the
        # child replaced; a flood is read no further than the bound.
        for count in (MAX_UNCORRELATED + 1, 100 * MAX_UNCORRELATED):
            flood = message("strays", _strays=count)
            result, elapsed, discarded = await discarding(transport, flood)
            assert result == F.ID_MISMATCH, count
            assert len(discarded) == MAX_UNCORRELATED
            assert elapsed < QUICK, f"{count} strays took {elapsed:.2f}s"
            assert pid not in transport.pids and transport.pids == []
        after, _ = await outcome(transport, message())
        assert is_ok(after)
    finally:
        await transport.aclose()


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("then", "failure"),
    [
        ("garbage", F.MALFORMED_OUTPUT),
        ("multi-line", F.MALFORMED_OUTPUT),
        ("non-utf8", F.MALFORMED_OUTPUT),
        ("oversized", F.MALFORMED_OUTPUT),
    ],
)
async def test_malformed_output_after_a_stray_still_fails_at_once(
    then: str, failure: FailureClass
) -> None:
    transport = stdio()
    try:
        result, elapsed, discarded = await discarding(
            transport, message("strays", _strays=1, _then=then)
        )
        assert result == failure and len(discarded) == 1
        assert elapsed < QUICK
        assert transport.pids == []
    finally:
        await transport.aclose()


@pytest.mark.anyio
async def test_a_late_answer_never_passes_for_a_new_request_with_the_same_id(
    tmp_path: Path,
) -> None:
    # The abandoned request's late answer (ok) would carry the same id as the new request
    # (deny): the child that owed it is gone, so the answer the new request gets is its own.
    rec = tmp_path / "rec.jsonl"
    transport = stdio(record=rec)
    try:
        with anyio.move_on_after(0.2) as scope:
            await transport.request(message("late", id="same", _delay_ms=400))
        assert scope.cancelled_caught
        assert transport.pids == []
        result, _ = await outcome(transport, message("deny", id="same"), deadline=5)
        assert is_deny(result)
        first, second = (s["pid"] for s in starts(rec))
        assert transport.pids == [second] and process_gone(first)
    finally:
        await transport.aclose()


@pytest.mark.anyio
async def test_stderr_is_drained_and_only_a_bounded_tail_kept() -> None:
    # 1 MiB of stderr would block a child on an undrained pipe long before it answered.
    transport = stdio("stderr-noise")
    try:
        for _ in range(3):
            result, _ = await outcome(transport, message(), deadline=5)
            assert is_ok(result)
        tail = transport.stderr_tail()
        assert b"stderr noise" in tail
        assert len(tail) <= STDERR_TAIL_BYTES
    finally:
        await transport.aclose()


# -- stdio: persistent correlation, abandonment and replacement --------------------------


@pytest.mark.anyio
async def test_a_request_given_up_on_replaces_its_child_at_once(tmp_path: Path) -> None:
    # #26: a child still busy with an expired request kept every later request waiting
    # behind it. Given up on (the caller's deadline), the child and its group are killed
    # and reaped before the cancellation returns; the next request gets a fresh child and
    # its answer at once, and a child that answers in time is kept.
    before = children()
    rec = tmp_path / "rec.jsonl"
    transport = stdio(record=rec)
    try:
        started = time.perf_counter()
        with anyio.move_on_after(0.2) as scope:
            await transport.request(message("late", id="first", _delay_ms=30000))
        assert scope.cancelled_caught and time.perf_counter() - started < 0.2 + QUICK
        (busy,) = (s["pid"] for s in starts(rec))
        assert transport.pids == [] and busy not in children()  # killed and reaped
        result, elapsed = await outcome(transport, message(id="second"), deadline=5)
        assert isinstance(result, dict) and result["id"] == "second"
        assert elapsed < QUICK  # not behind the 30 s request
        (fresh,) = transport.pids
        assert fresh != busy
        result, _ = await outcome(transport, message(id="third"))
        assert isinstance(result, dict) and result["id"] == "third"
        assert transport.pids == [fresh]  # answered in time: kept
        ids = [(r["pid"], r["message"]["id"]) for r in records(rec) if r["event"] == "message"]
        assert ids == [(busy, "first"), (fresh, "second"), (fresh, "third")]
    finally:
        await transport.aclose()
    assert set(children()) <= set(before)


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("bad", "failure"),
    [
        ("garbage", F.MALFORMED_OUTPUT),
        ("multi-line", F.MALFORMED_OUTPUT),
        ("non-utf8", F.MALFORMED_OUTPUT),
        ("oversized", F.MALFORMED_OUTPUT),
        ("crash", F.ABNORMAL_EXIT),
    ],
)
async def test_persistent_child_is_replaced_after_a_failure(
    bad: str, failure: FailureClass, tmp_path: Path
) -> None:
    rec = tmp_path / "rec.jsonl"
    transport = stdio(record=rec)
    try:
        ok_before, _ = await outcome(transport, message())
        assert is_ok(ok_before)
        (first,) = transport.pids
        result, elapsed = await outcome(transport, message(bad))
        assert result == failure
        assert elapsed < QUICK
        assert transport.pids == []  # killed and reaped at once
        assert process_gone(first)
        ok_after, _ = await outcome(transport, message())
        assert is_ok(ok_after)
        (second,) = transport.pids
        assert second != first
        assert [s["pid"] for s in starts(rec)] == [first, second]
    finally:
        await transport.aclose()


@pytest.mark.anyio
async def test_persistent_requests_are_serial(tmp_path: Path) -> None:
    rec = tmp_path / "rec.jsonl"
    transport = stdio(record=rec)
    results: dict[str, Any] = {}

    async def call(rid: str) -> None:
        results[rid], _ = await outcome(transport, message("late", id=rid, _delay_ms=250))

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(call, "a")
            tg.start_soon(call, "b")
        assert {k: v["id"] for k, v in results.items()} == {"a": "a", "b": "b"}
        received = [r["time"] for r in records(rec) if r["event"] == "message"]
        assert len(received) == 2
        assert received[1] - received[0] >= 0.24  # the second was sent after the first answer
    finally:
        await transport.aclose()


@pytest.mark.anyio
async def test_persistent_notify_does_not_wait_for_an_outstanding_request(tmp_path: Path) -> None:
    rec = tmp_path / "rec.jsonl"
    transport = stdio(record=rec)
    try:
        assert is_ok((await outcome(transport, message()))[0])  # the child is up
        pending: list[Any] = []

        async def slow() -> None:
            pending.append((await outcome(transport, message("late", _delay_ms=600)))[0])

        async with anyio.create_task_group() as tg:
            tg.start_soon(slow)
            await anyio.wait_all_tasks_blocked()  # the request is written and awaiting its reply
            started = time.perf_counter()
            with anyio.fail_after(LONG):
                await transport.notify(note())
            assert time.perf_counter() - started < 0.3
        assert is_ok(pending[0])
        assert is_ok((await outcome(transport, message()))[0])  # the backend has read all
        methods = [r["message"]["method"] for r in records(rec) if r["event"] == "message"]
        assert methods == [jsonrpc.INTERCEPT, jsonrpc.INTERCEPT, jsonrpc.OBSERVE, jsonrpc.INTERCEPT]
        assert len(starts(rec)) == 1
    finally:
        await transport.aclose()


@pytest.mark.anyio
async def test_persistent_notify_to_a_hung_backend_returns_at_once() -> None:
    transport = stdio("hang")
    try:
        with anyio.fail_after(QUICK):
            for _ in range(5):
                await transport.notify(note())
    finally:
        await transport.aclose()


# -- stdio: per_event notifications, leaks, reaping ------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize("lifecycle", ["persistent", "per_event"])
async def test_notifications_written_before_aclose_are_delivered(
    lifecycle: str, tmp_path: Path
) -> None:
    rec = tmp_path / "rec.jsonl"
    transport = stdio(lifecycle=lifecycle, record=rec)
    sent = [note() for _ in range(3)]
    with anyio.fail_after(QUICK):
        for msg in sent:
            await transport.notify(msg)
        await transport.aclose()  # EOF, a grace to exit, then reaped
    assert transport.pids == []
    got = [r["message"] for r in records(rec) if r["event"] == "message"]
    assert sorted(got, key=json.dumps) == sorted(sent, key=json.dumps)
    assert len(starts(rec)) == (1 if lifecycle == "persistent" else 3)


@pytest.mark.anyio
@pytest.mark.parametrize("lifecycle", ["persistent", "per_event"])
async def test_a_notification_to_a_child_still_starting_survives_aclose(
    lifecycle: str, tmp_path: Path
) -> None:
    """A backend started for the session's last notification (an audit observer whose
    first event is the denied call's ``tool.before``) may still be importing when the
    harness closes: it gets up to ``NOTIFY_DELIVERY_S`` from its start, not the short
    ``close_grace`` a warm child gets, or that observation is lost (seen under load)."""
    rec = tmp_path / "rec.jsonl"
    transport = stdio("slow-start", lifecycle=lifecycle, record=rec, extra=("--delay-ms", "1000"))
    sent = note()
    with anyio.fail_after(QUICK + NOTIFY_DELIVERY_S):
        await transport.notify(sent)
        await transport.aclose()
    assert transport.pids == []
    assert [r["message"] for r in records(rec) if r["event"] == "message"] == [sent]


@pytest.mark.anyio
async def test_per_event_notify_children_are_bounded_and_reaped(tmp_path: Path) -> None:
    transport = stdio("linger", lifecycle="per_event", notify_grace=0.2)
    before = children()
    try:
        for _ in range(3):
            await transport.notify(note())
        lingering = set(transport.pids)
        assert len(lingering) == 3
        await anyio.sleep(0.3)  # past notify_grace: the next call sweeps them
        await transport.notify(note())
        assert not lingering & set(transport.pids)
        assert all(process_gone(pid) for pid in lingering)
    finally:
        await transport.aclose()
    assert transport.pids == []
    assert set(children()) <= set(before)


@pytest.mark.anyio
async def test_200_per_event_calls_leave_no_child_behind() -> None:
    before = children()
    transport = stdio(lifecycle="per_event", exit_grace=0.3)
    modes = ["ok", "deny", "garbage", "crash", "wrong-id", "exit-before-answer", "rpc-error"]
    expected: dict[str, FailureClass | Check] = {
        "ok": is_ok,
        "deny": is_deny,
        "rpc-error": is_rpc_error,
        **STDIO_FAILURES,
    }
    try:
        for i in range(200):
            mode = modes[i % len(modes)]
            result, _ = await outcome(transport, message(mode))
            check(mode, result, expected[mode])
        for _ in range(3):  # and a few abandoned by the caller's deadline
            with anyio.move_on_after(0.2):
                await transport.request(message("hang"))
        for _ in range(5):
            await transport.notify(note())
    finally:
        await transport.aclose()
    assert transport.pids == []
    assert set(children()) <= set(before), children()


@pytest.mark.anyio
async def test_aclose_kills_and_reaps_everything(tmp_path: Path) -> None:
    before = children()
    persistent = stdio("hang", close_grace=0.2)  # neither backend exits on EOF
    per_event = stdio("linger", lifecycle="per_event", close_grace=0.2)
    outcomes: list[Any] = []

    async def hung_request() -> None:
        outcomes.append((await outcome(persistent, message()))[0])

    async with anyio.create_task_group() as tg:
        tg.start_soon(hung_request)
        for _ in range(3):
            await per_event.notify(note())
        await persistent.notify(note())  # spawns the child if the request has not yet
        owned = [*persistent.pids, *per_event.pids]
        assert len(owned) == 4
        with anyio.fail_after(QUICK):
            await persistent.aclose()
            await per_event.aclose()
    assert outcomes == [F.ABNORMAL_EXIT]  # the in-flight request ended, not hung
    assert all(process_gone(pid) for pid in owned)
    assert set(children()) <= set(before)
    assert not any(state == "Z" for state in children().values())
    await persistent.aclose()  # idempotent
    result, _ = await outcome(persistent, message())
    assert result == F.SPAWN_FAILED  # closed for good


@pytest.mark.anyio
async def test_the_whole_process_group_is_killed(tmp_path: Path) -> None:
    rec = tmp_path / "rec.jsonl"
    transport = stdio("grandchild", lifecycle="per_event", record=rec, exit_grace=0.2)
    result, _ = await outcome(transport, message())
    await transport.aclose()
    assert is_ok(result)
    (grandchild,) = [r["grandchild"] for r in records(rec) if r["event"] == "grandchild"]
    with anyio.fail_after(5):
        while not process_gone(grandchild):  # SIGKILL delivery is asynchronous
            await anyio.sleep(0.01)


@pytest.mark.anyio
async def test_a_deadline_kills_the_persistent_childs_whole_group(tmp_path: Path) -> None:
    # The child answers once (leaving a grandchild in its process group), then hangs on a
    # request given up on: the group goes with it, while the transport is still open.
    rec = tmp_path / "rec.jsonl"
    transport = stdio(record=rec)
    try:
        assert is_ok((await outcome(transport, message("grandchild")))[0])
        (grandchild,) = [r["grandchild"] for r in records(rec) if r["event"] == "grandchild"]
        assert not process_gone(grandchild)
        with anyio.move_on_after(0.2) as scope:
            await transport.request(message("hang"))
        assert scope.cancelled_caught and transport.pids == []
        with anyio.fail_after(5):
            while not process_gone(grandchild):  # SIGKILL delivery is asynchronous
                await anyio.sleep(0.01)
    finally:
        await transport.aclose()


# -- stdio: spawning and environment ---------------------------------------------------


@pytest.mark.anyio
async def test_spawn_failures(tmp_path: Path) -> None:
    not_executable = tmp_path / "plain.txt"
    not_executable.write_text("#!/bin/sh\n")
    cases = [
        StdioTransport(str(tmp_path / "missing")),
        StdioTransport(str(not_executable), lifecycle="per_event"),
        StdioTransport(sys.executable, ["-c", "pass"], cwd=str(tmp_path / "no-such-dir")),
    ]
    for transport in cases:
        result, elapsed = await outcome(transport, message())
        assert result == F.SPAWN_FAILED
        assert elapsed < QUICK
        with pytest.raises(OperationalFailure) as info:
            await transport.notify(note())
        assert info.value.failure == F.SPAWN_FAILED
        await transport.aclose()


@pytest.mark.anyio
@pytest.mark.parametrize("lifecycle", ["persistent", "per_event"])
async def test_child_gets_a_minimal_environment(lifecycle: str, tmp_path: Path) -> None:
    rec = tmp_path / "rec.jsonl"
    environ = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": "/home/host",
        "LC_CTYPE": "C.UTF-8",
        "AHP_SECRET_TOKEN": "s3cr3t-value",
        "PYTHONPATH": "/should/not/leak",
    }
    transport = stdio(
        lifecycle=lifecycle,
        record=rec,
        environ=environ,
        env={"PASSED_EXPLICITLY": "yes", "HOME": "/override", "EXPOSED": "s3cr3t-value"},
        cwd=str(tmp_path),
    )
    result, _ = await outcome(transport, message())
    await transport.aclose()
    assert is_ok(result)
    (start,) = starts(rec)
    env = start["env"]
    assert "AHP_SECRET_TOKEN" not in env
    assert "PYTHONPATH" not in env
    assert env["PASSED_EXPLICITLY"] == "yes"
    assert env["EXPOSED"] == "s3cr3t-value"  # only because `env` passed it
    assert env["HOME"] == "/override"
    assert env["LC_CTYPE"] == "C.UTF-8"
    assert start["cwd"] == str(tmp_path)
    assert "s3cr3t" not in repr(transport)


def test_child_environment_rules() -> None:
    host = {"PATH": "/bin", "LC_ALL": "C", "LC_TIME": "C", "SECRET": "x", "Path2": "y"}
    assert child_environment(host) == {"PATH": "/bin", "LC_ALL": "C", "LC_TIME": "C"}
    assert child_environment(host, {"PATH": "/opt/bin", "X": "$SECRET"}) == {
        "PATH": "/opt/bin",
        "LC_ALL": "C",
        "LC_TIME": "C",
        "X": "$SECRET",  # literal, never interpolated
    }
    windows = child_environment(
        {"Path": "C:\\", "SystemRoot": "C:\\W"}, {"PATH": "D:\\"}, windows=True
    )
    assert windows == {"SystemRoot": "C:\\W", "PATH": "D:\\"}


def test_stdio_constructor_rejects_bad_settings() -> None:
    with pytest.raises(ValueError):
        StdioTransport("x", lifecycle="sometimes")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        StdioTransport("")
    with pytest.raises(ValueError):  # request() of a notification is a programming error
        request_key(note())


# -- HTTP ------------------------------------------------------------------------------


class Server:
    def __init__(self, base: str, record: Path, process: subprocess.Popen[bytes]) -> None:
        self.base = base
        self.record = record
        self.process = process

    def url(self, mode: str = "ok") -> str:
        return f"{self.base}/{mode}"

    def received(self, rid: object) -> list[dict[str, Any]]:
        return [
            r
            for r in records(self.record)
            if r["event"] == "message" and r["message"].get("id") == rid
        ]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    rec = tmp_path_factory.mktemp("http") / "rec.jsonl"
    process = subprocess.Popen(
        [sys.executable, "-I", "-S", str(MISBEHAVE), "--http", "127.0.0.1:0", "--record", str(rec)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    assert process.stderr is not None
    port = int(process.stderr.readline())  # readiness: the first stderr line is the port
    drain = threading.Thread(target=process.stderr.read, daemon=True)
    drain.start()  # stderr-noise must never block the server
    try:
        yield Server(f"http://127.0.0.1:{port}", rec, process)
    finally:
        process.kill()
        process.wait(timeout=10)
        drain.join(timeout=10)


HTTP_FAILURES: dict[str, FailureClass] = {
    "crash": F.CONNECT_FAILED,
    "exit-before-answer": F.CONNECT_FAILED,
    "garbage": F.MALFORMED_OUTPUT,
    "wrong-id": F.ID_MISMATCH,
    "oversized": F.MALFORMED_OUTPUT,
    "oversized-stream": F.MALFORMED_OUTPUT,
    "non-utf8": F.MALFORMED_OUTPUT,
    "two-responses": F.MALFORMED_OUTPUT,
    "http-500": F.HTTP_STATUS,
    "redirect": F.HTTP_STATUS,
    "wrong-content-type": F.MALFORMED_OUTPUT,
}
HTTP_RESPONSES: dict[str, Check] = {
    **{k: v for k, v in RESPONSES.items() if k != "linger"},
    "multi-line": is_ok,  # an HTTP body is not line-framed: pretty JSON is fine
    "unterminated": is_ok,
    "observe-body": is_ok,  # only notifications get a body in that mode
}


@pytest.mark.anyio
@pytest.mark.parametrize("mode", sorted({*HTTP_RESPONSES, *HTTP_FAILURES}))
async def test_http_mode(mode: str, server: Server) -> None:
    transport = HttpTransport(f"{server.url(mode)}?delay_ms=150")
    try:
        msg = message()
        result, elapsed = await outcome(transport, msg)
        expected = HTTP_FAILURES.get(mode) or HTTP_RESPONSES[mode]
        check(mode, result, expected)
        if isinstance(expected, FailureClass):
            assert elapsed < QUICK, f"{mode} took {elapsed:.2f}s"
        assert len(server.received(msg["id"])) == 1  # exactly one POST, nothing followed
    finally:
        await transport.aclose()


@pytest.mark.anyio
async def test_http_hang_is_the_callers_deadline_and_the_client_stays_usable(
    server: Server,
) -> None:
    transport = HttpTransport(server.url("hang"))
    try:
        result, elapsed = await outcome(transport, message(), deadline=0.3)
        assert result == "timeout"
        assert elapsed < QUICK
        result, _ = await outcome(transport, message("ok"))
        assert is_ok(result)
    finally:
        await transport.aclose()


@pytest.mark.anyio
async def test_http_a_dribbled_body_is_ended_by_the_callers_deadline() -> None:
    """A head, then the body one byte every 0.5 s: httpx's read timeout would restart at
    every byte, so the transport sets none and the caller's deadline bounds the whole
    answer (head and body)."""
    listener = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def dribble() -> None:
        with contextlib.suppress(OSError):
            conn, _ = listener.accept()
            with conn:
                conn.recv(65536)
                conn.sendall(
                    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                    b"Content-Length: 100000\r\n\r\n"
                )
                while not stop.wait(0.5):
                    conn.sendall(b" ")

    threading.Thread(target=dribble, daemon=True).start()
    transport = HttpTransport(f"http://127.0.0.1:{listener.getsockname()[1]}/")
    try:
        result, elapsed = await outcome(transport, message(), deadline=1.0)
        assert result == "timeout"
        assert elapsed < LONG  # a hang detector: the deadline ended it, not the server
    finally:
        stop.set()
        listener.close()
        await transport.aclose()


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("mode", "expected"),
    [
        ("ok", None),  # 202, empty
        ("no-content", None),  # 204
        ("observe-body", F.MALFORMED_OUTPUT),
        ("notify-200", F.HTTP_STATUS),
        ("http-500", F.HTTP_STATUS),
        ("redirect", F.HTTP_STATUS),
        ("crash", F.CONNECT_FAILED),
    ],
)
async def test_http_notify(mode: str, expected: FailureClass | None, server: Server) -> None:
    transport = HttpTransport(server.url(mode))
    try:
        failure = None
        with anyio.fail_after(LONG):
            try:
                await transport.notify(note())
            except OperationalFailure as exc:
                failure = exc.failure
        assert failure == expected
    finally:
        await transport.aclose()


@pytest.mark.anyio
async def test_http_connection_refused() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    transport = HttpTransport(f"http://127.0.0.1:{port}/")
    try:
        result, elapsed = await outcome(transport, message())
        assert result == F.CONNECT_FAILED
        assert elapsed < QUICK
        with pytest.raises(OperationalFailure) as info:
            await transport.notify(note())
        assert info.value.failure == F.CONNECT_FAILED
    finally:
        await transport.aclose()
    result, _ = await outcome(transport, message())
    assert result == F.CONNECT_FAILED  # closed


@pytest.mark.anyio
async def test_http_frame_limit_is_configurable(server: Server) -> None:
    transport = HttpTransport(server.url("ok"), max_frame_bytes=32)
    try:
        result, _ = await outcome(transport, message())
        assert result == F.MALFORMED_OUTPUT
    finally:
        await transport.aclose()


@pytest.mark.anyio
async def test_http_body_limit_is_exact(server: Server) -> None:
    size = len(ok_line("edge"))  # the whole body counts, trailing newline included
    for limit, fits in ((size, True), (size - 1, False)):
        transport = HttpTransport(server.url(), max_frame_bytes=limit)
        result, _ = await outcome(transport, message(id="edge"))
        await transport.aclose()
        assert is_ok(result) if fits else result == F.MALFORMED_OUTPUT, (limit, result)


def headers_of(entry: dict[str, Any]) -> dict[str, str]:
    return {name.lower(): value for name, value in entry["headers"]}


TOKEN = "tok-" + uuid.uuid4().hex


@pytest.mark.anyio
async def test_bearer_token_is_sent_only_in_authorization(
    server: Server, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    environ = {"AHP_TOKEN": TOKEN}
    captured: list[str] = []
    sent: list[object] = []
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{sock.getsockname()[1]}/"
    for url in [*(server.url(m) for m in ("ok", "http-500", "garbage", "redirect", "crash")), dead]:
        transport = HttpTransport(url, bearer_env="AHP_TOKEN", environ=environ)
        captured.append(repr(transport))
        for call in ("request", "notify"):
            msg = message() if call == "request" else note()
            sent.append(msg.get("id") or msg["params"]["nonce"])
            try:
                with anyio.fail_after(LONG):
                    await getattr(transport, call)(msg)
            except OperationalFailure as exc:
                captured += [str(exc), repr(exc), exc.detail]
                captured += traceback.format_exception(exc)
        await transport.aclose()
    captured.append(caplog.text)
    captured += [repr(r.__dict__) for r in caplog.records]
    for text in captured:
        assert TOKEN not in text
    mine = [
        r
        for r in records(server.record)
        if r["event"] == "message"
        and (r["message"].get("id") in sent or r["message"]["params"].get("nonce") in sent)
    ]
    assert len(mine) == 10  # 5 live endpoints x (request + notify); none for the dead port
    for entry in mine:
        headers = headers_of(entry)
        assert headers["authorization"] == f"Bearer {TOKEN}"
        rest = dict(entry, headers={k: v for k, v in headers.items() if k != "authorization"})
        assert TOKEN not in json.dumps(rest)
        assert headers["content-type"] == "application/json"
        assert headers["accept"] == "application/json"


@pytest.mark.anyio
@pytest.mark.parametrize("value", [None, "", "bad\r\nX-Injected: 1"])
async def test_unresolvable_bearer_sends_nothing(value: str | None, server: Server) -> None:
    environ = {} if value is None else {"AHP_TOKEN": value}
    transport = HttpTransport(server.url(), bearer_env="AHP_TOKEN", environ=environ)
    try:
        msg = message()
        result, _ = await outcome(transport, msg)
        assert result == F.AUTH_FAILED
        with pytest.raises(OperationalFailure) as info:
            await transport.notify(note())
        assert info.value.failure == F.AUTH_FAILED
        assert not server.received(msg["id"])
        environ["AHP_TOKEN"] = TOKEN  # resolved at each send, not at construction
        result, _ = await outcome(transport, message())
        assert is_ok(result)
    finally:
        await transport.aclose()


@pytest.mark.anyio
async def test_registration_headers(server: Server) -> None:
    environ = {"TENANT_KEY": "key-123", "AHP_TOKEN": TOKEN}
    transport = HttpTransport(
        server.url(),
        headers={"X-Tenant": "acme", "X-Key": HeaderValue(value_env="TENANT_KEY")},
        bearer_env="AHP_TOKEN",
        environ=environ,
    )
    try:
        msg = message()
        assert is_ok((await outcome(transport, msg))[0])
        (entry,) = server.received(msg["id"])
        headers = headers_of(entry)
        assert headers["x-tenant"] == "acme"
        assert headers["x-key"] == "key-123"
        assert headers["authorization"] == f"Bearer {TOKEN}"
        assert "key-123" not in repr(transport) and "acme" not in repr(transport)
        del environ["TENANT_KEY"]
        msg = message()
        assert (await outcome(transport, msg))[0] == F.AUTH_FAILED
        assert not server.received(msg["id"])
    finally:
        await transport.aclose()


@pytest.mark.anyio
async def test_an_authorization_header_replaces_the_bearer_binding(server: Server) -> None:
    auths: list[dict[str, Any]] = [
        {"bearer_env": "UNSET_TOKEN"},  # unresolvable, but never consulted
        {"auth_unsupported": "oauth"},
    ]
    for auth in auths:
        transport = HttpTransport(
            server.url(), headers={"authorization": "Custom abc"}, environ={}, **auth
        )
        try:
            msg = message()
            assert is_ok((await outcome(transport, msg))[0])
            (entry,) = server.received(msg["id"])
            assert headers_of(entry)["authorization"] == "Custom abc"
            assert sum(1 for name, _ in entry["headers"] if name.lower() == "authorization") == 1
        finally:
            await transport.aclose()


@pytest.mark.anyio
@pytest.mark.parametrize(
    "kwargs",
    [
        {"headers": {"X-Key": HeaderValue(value_ref="vault://k")}},
        {"auth_unsupported": "token_ref"},
        {"auth_unsupported": "oauth"},
        {"headers": {"X-Key": HeaderValue(value_env="NOT_SET")}},
    ],
)
async def test_unsupported_or_missing_credentials_fail_closed(
    kwargs: dict[str, Any], server: Server
) -> None:
    transport = HttpTransport(server.url(), environ={}, **kwargs)
    try:
        msg = message()
        result, _ = await outcome(transport, msg)
        assert result == F.AUTH_FAILED
        assert not server.received(msg["id"])
    finally:
        await transport.aclose()


@pytest.mark.parametrize(
    "url",
    [
        "http://example.com/hooks",
        "http://10.0.0.1:8080/",
        "http://localhost.example.com/",
        "http://[2001:db8::1]/",
    ],
)
def test_plain_http_is_refused_for_remote_hosts(url: str) -> None:
    from urllib.parse import urlsplit

    with pytest.raises(ValueError) as info:
        HttpTransport(url)
    host = urlsplit(url).hostname
    assert host is not None and host in str(info.value)
    assert "https" in str(info.value)


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:1/",
        "http://127.8.9.10/",
        "http://localhost:8080/x",
        "http://[::1]:9/",
        "https://hooks.example.com/ahp",
    ],
)
def test_loopback_http_and_remote_https_are_accepted(url: str) -> None:
    assert HttpTransport(url).url == url


@pytest.mark.parametrize(
    ("url", "kwargs"),
    [
        ("ftp://127.0.0.1/", {}),
        ("https://user:pw@example.com/", {}),
        ("https://example.com/", {"headers": {"Bad Name": "x"}}),
        ("https://example.com/", {"headers": {"X-A": "a\r\nX-B: b"}}),
        ("https://example.com/", {"headers": {"X-A": "a", "x-a": "b"}}),
        ("https://example.com/", {"headers": {"Content-Length": "1"}}),
        ("https://example.com/", {"headers": {"X-A": HeaderValue()}}),
    ],
)
def test_http_constructor_rejects_bad_settings(url: str, kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError) as info:
        HttpTransport(url, **kwargs)
    assert "pw" not in str(info.value)


# -- open_transport ----------------------------------------------------------------------


@pytest.mark.anyio
async def test_open_transport_maps_a_registration_hook(tmp_path: Path, server: Server) -> None:
    from ahp_protocol.wire.registration import Hook

    rec = tmp_path / "rec.jsonl"
    stdio_hook = Hook.model_validate(
        {
            "id": "com.example.stdio",
            "transport": {
                "type": "stdio",
                "command": sys.executable,
                "args": ["-I", "-S", str(MISBEHAVE), "deny", "--once", "--record", str(rec)],
                "lifecycle": "per_event",
                "env": {"FROM_REGISTRATION": "1"},
            },
        }
    )
    transport = open_transport(stdio_hook, environ={"PATH": "/bin", "HOST_SECRET": "x"})
    assert isinstance(transport, StdioTransport) and transport.lifecycle == "per_event"
    result, _ = await outcome(transport, message())
    await transport.aclose()
    assert is_deny(result)
    env = starts(rec)[0]["env"]
    assert env.get("FROM_REGISTRATION") == "1" and "HOST_SECRET" not in env

    http_hook = Hook.model_validate(
        {
            "id": "com.example.http",
            "transport": {
                "type": "http",
                "url": server.url(),
                "headers": {"X-K": {"valueEnv": "K"}},
            },
            "authentication": {"type": "bearer", "tokenEnv": "AHP_TOKEN"},
        }
    )
    http = open_transport(http_hook, environ={"AHP_TOKEN": TOKEN, "K": "v"})
    assert isinstance(http, HttpTransport)
    msg = message()
    result, _ = await outcome(http, msg)
    await http.aclose()
    assert is_ok(result)
    (entry,) = server.received(msg["id"])
    assert headers_of(entry)["authorization"] == f"Bearer {TOKEN}"
    assert headers_of(entry)["x-k"] == "v"

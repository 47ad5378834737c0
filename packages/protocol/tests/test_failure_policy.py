"""Failure policy, proved once, in memory: every fault of the shared scripted backend.

Each fault of :data:`ahp_protocol.testing.FAULTS` x both shapes of answer (a persistent
stream; the one answer of HTTP or a per_event process) x {fail-open, fail-closed}, run
through a real :class:`~ahp_protocol.client.Dispatcher` whose backends answer in memory
(:mod:`ahp_protocol.testing`). Each case shows the failure class and its diagnostic,
the decision (a generic synthetic denial for fail-closed; the chain going on unchanged
for fail-open), the short-circuit observation or the next backend asked, the
``hook.failure`` audit event (valid against the official schema), and that nothing the
backend said reaches what the harness keeps. A fault fails at once; a hang or a late
answer fails at the deadline.

What a fault is on each *real* transport (the same faults, the same classes, through
real processes and loopback HTTP) is ``test_transports.py``; each promise end to end is
``tests/e2e`` (its README maps them).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import pytest
from ahp_protocol.client import Dispatcher, FailureClass, HookResult
from ahp_protocol.client.chain import SYNTHETIC_DENIAL_REASON
from ahp_protocol.server import Backend
from ahp_protocol.testing import (
    FAULTS,
    MemoryTransport,
    Misbehaving,
    memory_transports,
    tool_before,
)
from ahp_protocol.testing.faults import TRACEBACK
from ahp_protocol.wire.registration import parse_registration

F = FailureClass
FAILING, FOLLOWER = "com.example.failing", "com.example.follower"
SOURCE = "urn:uuid:5b0c39f4-4b8c-4e38-9d69-0e0e7bb0d5f5"
HARNESS = {"name": "failure-policy-tests", "version": "1.0"}
DEADLINE_MS = 150
LATE_MS = DEADLINE_MS + 200
LONG_DEADLINE_MS = 5000  # the deadline of the faults that must not wait it out ...
FAST_MS = 1000.0  # ... which are reported far before it (a 4 MiB frame included, loaded)
MARGIN_MS = 150.0
BODY = {"content": {"default": "body"}}

EXPECTED: dict[str, dict[str, FailureClass | None]] = {
    # fault: {shape: failure class, or None where the fault is no failure in that shape}
    "hang": {"persistent": F.DEADLINE_EXCEEDED, "single": F.DEADLINE_EXCEEDED},
    "late": {"persistent": F.DEADLINE_EXCEEDED, "single": F.DEADLINE_EXCEEDED},
    "crash": {"persistent": F.ABNORMAL_EXIT, "single": F.ABNORMAL_EXIT},
    "rpc-error": {"persistent": F.RPC_ERROR, "single": F.RPC_ERROR},
    "leak-exception": {"persistent": F.RPC_ERROR, "single": F.RPC_ERROR},
    "declared-unsupported": {"persistent": F.RPC_ERROR, "single": F.RPC_ERROR},
    "garbage": {"persistent": F.MALFORMED_OUTPUT, "single": F.MALFORMED_OUTPUT},
    "non-utf8": {"persistent": F.MALFORMED_OUTPUT, "single": F.MALFORMED_OUTPUT},
    "stdout-noise": {"persistent": F.MALFORMED_OUTPUT, "single": F.MALFORMED_OUTPUT},
    "oversized": {"persistent": F.MALFORMED_OUTPUT, "single": F.MALFORMED_OUTPUT},
    # A stream breaks a pretty-printed object into lines; one answer is one JSON body.
    "multi-line": {"persistent": F.MALFORMED_OUTPUT, "single": None},
    # A stream discards another id and waits on (draft §8.1); one answer has no other.
    "wrong-id": {"persistent": F.DEADLINE_EXCEEDED, "single": F.ID_MISMATCH},
    "stray-frame": {"persistent": None, "single": F.ID_MISMATCH},
    "unadvertised-effect": {"persistent": F.UNADVERTISED_EFFECT, "single": F.UNADVERTISED_EFFECT},
    "unknown-effect": {"persistent": F.UNKNOWN_EFFECT, "single": F.UNKNOWN_EFFECT},
    "no-effects": {"persistent": F.INVALID_RESULT, "single": F.INVALID_RESULT},
    "no-version": {"persistent": F.UNSUPPORTED_VERSION, "single": F.UNSUPPORTED_VERSION},
    # Well-behaved at hooks/intercept (the first answers notifications too).
    "reply-to-notifications": {"persistent": None, "single": None},
    "deny": {"persistent": None, "single": None},
    "allow": {"persistent": None, "single": None},  # allow is not granted here: no effect
}
WAITS = {("hang", s) for s in ("persistent", "single")} | {("late", "persistent")}
WAITS |= {("late", "single"), ("wrong-id", "persistent")}
DISCARDS = {("wrong-id", "persistent"), ("stray-frame", "persistent")}
BACKEND_TEXT = ("not JSON", "padding", "Traceback", "secret-rule", "scripted backend")
"""What the scripted backend says that a harness must never keep (its error message too)."""

CASES = [
    pytest.param(fault, shape, policy, id=f"{fault}-{shape}-{policy}")
    for fault in EXPECTED
    for shape in ("persistent", "single")
    for policy in ("fail-open", "fail-closed")
]


def test_every_fault_of_the_shared_table_has_an_expectation() -> None:
    assert set(EXPECTED) == set(FAULTS)


def follower() -> tuple[Backend, list[dict[str, Any]], list[dict[str, Any]]]:
    """A well-behaved backend after the failing one: what it was asked, what it was told."""
    asked: list[dict[str, Any]] = []
    told: list[dict[str, Any]] = []
    backend = Backend(FOLLOWER)

    @backend.intercept("tool.before")
    def decide(request: Any) -> None:
        asked.append(request.event)

    @backend.observe("*")
    def seen(event: dict[str, Any]) -> None:
        told.append(event)

    return backend, asked, told


def dispatcher(
    fault: str, shape: str, policy: str, follower_backend: Backend
) -> tuple[Dispatcher, MemoryTransport]:
    """The failing backend then the follower; and the follower's transport (what it was sent)."""
    sub = {
        "mode": "intercept",
        "events": ["tool.before"],
        "timeoutMs": DEADLINE_MS if (fault, shape) in WAITS else LONG_DEADLINE_MS,
        "failurePolicy": policy,
        **BODY,
    }
    hooks = [
        {"id": FAILING, "transport": {"type": "http", "url": "http://127.0.0.1:9/"}},
        {"id": FOLLOWER, "transport": {"type": "http", "url": "http://127.0.0.1:9/"}},
    ]
    hooks[0]["subscriptions"] = [sub]
    hooks[1]["subscriptions"] = [
        {**sub, "timeoutMs": 2000, "failurePolicy": "fail-open"},
        {"mode": "observe", "events": ["hook.failure"], **BODY},
    ]
    registration = parse_registration({"protocolVersion": "draft", "hooks": hooks})
    transports = {
        FAILING: MemoryTransport(Misbehaving(fault, delay_ms=LATE_MS), shape=shape),  # type: ignore[arg-type]
        FOLLOWER: MemoryTransport(follower_backend),
    }
    hooks = Dispatcher(
        registration,
        capabilities={"tool.before": {"effects": ["deny"]}},
        source=SOURCE,
        harness=HARNESS,
        transport=lambda hook: transports[hook.id],
    )
    return hooks, transports[FOLLOWER]


def diagnostic(result: HookResult, backend: str, mode: str = "intercept") -> Any:
    (found,) = [d for d in result.diagnostics if d.backend == backend and d.mode == mode]
    return found


@pytest.mark.anyio
@pytest.mark.parametrize(("fault", "shape", "policy"), CASES)
async def test_a_failure_is_handled_by_its_policy_and_never_decides(
    fault: str, shape: str, policy: str, official_schema: Callable[[str, Any], list[str]]
) -> None:
    expected = EXPECTED[fault][shape]
    backend, asked, told = follower()
    event = tool_before()
    hooks, to_follower = dispatcher(fault, shape, policy, backend)
    async with hooks:
        started = time.perf_counter()
        result = await hooks.intercept(event)
        elapsed_ms = (time.perf_counter() - started) * 1000
    first = diagnostic(result, FAILING)
    assert first.discarded == (1 if (fault, shape) in DISCARDS else 0)

    if expected is None:  # no failure in this shape: the answer decides, the chain goes on
        assert first.failure is None and first.outcome in ("no_effect", "denied")
        assert result.denied == (fault == "deny") and not result.synthetic_denial
        assert [e["id"] for e in asked] == ([] if fault == "deny" else [event["id"]])
        return

    assert (first.outcome, first.failure, first.policy) == ("failed", expected, policy)
    if (fault, shape) in WAITS:  # at the deadline, not before and not much after
        assert DEADLINE_MS <= first.latency_ms < DEADLINE_MS + MARGIN_MS, first.latency_ms
        assert elapsed_ms < DEADLINE_MS + 2 * MARGIN_MS
    else:  # one retry at most, and no wait: far below a long deadline
        assert first.latency_ms < FAST_MS, first.latency_ms

    tool_seen = [e for e in told if e["type"] == "tool.before"]
    if policy == "fail-closed":  # a generic synthetic denial; the next backend only told
        assert result.permission == "deny" and result.stopped and result.synthetic_denial
        assert result.denial is not None and result.denial.reason == SYNTHETIC_DENIAL_REASON
        assert result.denial.code is None and result.denied_by == FAILING
        assert asked == [] and [e["id"] for e in tool_seen] == [event["id"]]
        assert diagnostic(result, FOLLOWER, "short-circuit").outcome == "delivered"
    else:  # the chain goes on with the event unchanged, and the failure decided nothing
        assert result.permission == "none" and result.denial is None and not result.stopped
        assert result.event == event and [e["id"] for e in asked] == [event["id"]]
        assert tool_seen == []
        assert diagnostic(result, FOLLOWER).outcome == "no_effect"

    shown = json.dumps(result.to_json()) + repr(result)
    for text in (*BACKEND_TEXT, TRACEBACK):
        assert text not in shown, text

    (audit,) = [e for e in told if e["type"] == "hook.failure"]
    assert audit["failure"] == {"backendId": FAILING, "reason": expected, "policy": policy}
    assert audit["parentEventId"] == event["id"] and audit["source"] == event["source"]
    (notification,) = [
        m
        for m in to_follower.received
        if m.get("method") == "hooks/observe" and m["params"]["event"]["type"] == "hook.failure"
    ]
    assert official_schema("observe-notification.schema.json", notification) == []


@pytest.mark.anyio
@pytest.mark.parametrize(
    "sub",
    [
        {"failurePolicy": "fail-open", "scope": "managed", "disableable": False},
        {"failurePolicy": "fail-open", "disableable": False},
    ],
    ids=["managed", "not-disableable"],
)
async def test_a_mandatory_subscription_is_fail_closed_whatever_it_declares(
    sub: dict[str, Any],
) -> None:
    hook = {
        "id": FAILING,
        "transport": {"type": "http", "url": "http://127.0.0.1:9/"},
        "subscriptions": [
            {"mode": "intercept", "events": ["tool.before"], "timeoutMs": 2000, **BODY, **sub}
        ],
    }
    registration = parse_registration({"protocolVersion": "draft", "hooks": [hook]})
    transport = memory_transports({FAILING: Misbehaving("garbage")})
    caps = {"tool.before": {"effects": ["deny"]}}
    async with Dispatcher(registration, capabilities=caps, transport=transport) as hooks:
        result = await hooks.intercept(tool_before())
    assert result.synthetic_denial and result.permission == "deny"
    assert diagnostic(result, FAILING).policy == "fail-closed"

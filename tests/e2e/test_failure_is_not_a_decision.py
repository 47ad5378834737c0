"""Promise 3: a failure is not a decision.

An interceptor on ``tool.before`` that fails in one of twelve ways, over every
transport where the failure exists, under ``fail-closed`` and ``fail-open``,
followed by a recording interceptor that answers no effect. The session
proposes two writes the host itself decides by user rules: ``allowed.txt`` (an
``allow`` rule) and ``refused.txt`` (a ``deny`` rule).

- ``fail-closed``: neither write runs (the workspace stays empty); each call is
  refused by a *synthetic* denial, marked so in the transcript
  (``synthetic_denial``) and in the audit log (``denial.synthetic`` and the
  ``call`` record), with a generic reason that carries nothing the backend
  sent; the chain stopped (the next interceptor was only sent the observation).
- ``fail-open``: the failure is recorded, the chain goes on (the next
  interceptor is asked) and the host decides as if AHP had said nothing:
  ``allowed.txt`` is written, ``refused.txt`` is refused by the rule; no
  denial is attributed to the backend.
- Either way the audit log records each exchange as ``failed`` with its failure
  class and policy, and its ``latencyMs`` is bounded: within the deadline plus
  a small margin for the classes that wait (hang, late reply, and a wrong id on
  persistent stdio), and far below the deadline for every other class
  (malformed output never waits it out).
- A wrong id: a persistent stdio backend's answer with another id is
  uncorrelated, so it is discarded (the exchange says ``discarded: 1``) and the
  harness keeps waiting for the real answer, which never comes: the deadline
  ends it (``deadline_exceeded``). A per_event child or an HTTP response carries
  the one answer to the request, so another id there is ``id_mismatch`` at once.

The failure classes are data (:data:`FAILURES`); the matrix is failure x transport,
the policy alternating (:func:`cases`).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

TRANSPORTS = ("persistent", "per_event", "http")
STDIO = ("persistent", "per_event")
POLICIES = ("fail-closed", "fail-open")

DEADLINE_MS = 500
"""``timeoutMs`` for the classes that wait (hang, late reply)."""
MARGIN_MS = 750
"""What a waiting exchange may take beyond its deadline (kill, reap, fold) on a loaded machine."""
LONG_DEADLINE_MS = 10000
"""``timeoutMs`` for the classes that must fail fast: they may not wait it out..."""
FAST_MS = 2500
"""...and must fail within this (a per_event spawn included)."""
LATE_MS = 1500
"""How late the late reply comes (three deadlines)."""

HOST_RULES = """
[[rules]]
decision = "allow"
tool = "write_file"
glob = "allowed.txt"
reason = "the host allows this write"

[[rules]]
decision = "deny"
tool = "write_file"
glob = "refused.txt"
reason = "the host refuses this write"
"""

STEPS = [
    {"tool": "write_file", "input": {"path": "allowed.txt", "content": "the host allowed me"}},
    {"tool": "write_file", "input": {"path": "refused.txt", "content": "the host refused me"}},
]

HOOK_ID = "com.example.e2e.failing"
FOLLOWER_ID = "com.example.e2e.follower"
RUN_BUDGET_S = 15.0
"""A whole run (start-up, two calls, shutdown): far less than waiting out two long deadlines."""


@dataclass(frozen=True)
class Failure:
    """One way to fail: how to make it, where it exists, how it must be classified."""

    name: str
    make: Callable[[Any], Any] | None  # e2e -> Command; None: a refused connection
    failure: str | dict[str, str]  # the audit log's failure class (per transport when a dict)
    transports: tuple[str, ...] = TRANSPORTS
    waits: tuple[str, ...] = ()  # transports where it waits out its deadline (hang, late reply)
    backend_text: tuple[str, ...] = ()  # what the backend sent, never to be echoed
    discarded: tuple[str, ...] = ()  # transports where one uncorrelated answer is discarded

    def expected(self, transport: str) -> str:
        return self.failure if isinstance(self.failure, str) else self.failure[transport]


ASK = [{"type": "ask"}]  # never advertised to a non-interactive harness

FAILURES = (
    Failure("hang", lambda e2e: e2e.misbehave("hang"), "deadline_exceeded", waits=TRANSPORTS),
    Failure(
        "crash",
        lambda e2e: e2e.misbehave("crash"),
        {"persistent": "abnormal_exit", "per_event": "abnormal_exit", "http": "connect_failed"},
    ),
    Failure("garbage", lambda e2e: e2e.misbehave("garbage"), "malformed_output"),
    Failure("multiline-json", lambda e2e: e2e.misbehave("multi-line"), "malformed_output", STDIO),
    Failure(
        "wrong-id",
        lambda e2e: e2e.misbehave("wrong-id"),
        {"persistent": "deadline_exceeded", "per_event": "id_mismatch", "http": "id_mismatch"},
        waits=("persistent",),
        discarded=("persistent",),
    ),
    Failure(
        "rpc-error",
        lambda e2e: e2e.misbehave("rpc-error"),
        "rpc_error",
        backend_text=("backend_internal_error",),
    ),
    Failure("wrong-version", lambda e2e: e2e.misbehave("wrong-version"), "unsupported_version"),
    Failure(
        "unknown-effect",
        lambda e2e: e2e.misbehave("unknown-effect"),
        "unknown_effect",
        backend_text=("teleport", "mars"),
    ),
    Failure("unadvertised-effect", lambda e2e: e2e.effects(ASK), "unadvertised_effect"),
    Failure("http-500", lambda e2e: e2e.misbehave("http-500"), "http_status", ("http",)),
    Failure("refused-connection", None, "connect_failed", ("http",)),
    Failure(
        "late-reply",
        lambda e2e: e2e.misbehave("late", delay_ms=LATE_MS),
        "deadline_exceeded",
        waits=TRANSPORTS,
    ),
)


def cases() -> list[Any]:
    """Each failure over each transport where it exists, the policy alternating: what a
    policy does with a failure does not depend on its class (every class x both policies
    is ``packages/protocol/tests/test_failure_policy.py``, in memory), so here each
    transport meets both policies, over many classes, through the real harness."""
    out = []
    for f, failure in enumerate(FAILURES):
        for t, transport in enumerate(failure.transports):
            policy = POLICIES[(f + t) % len(POLICIES)]
            out.append(
                pytest.param(failure, transport, policy, id=f"{failure.name}-{transport}-{policy}")
            )
    return out


def failing_registration(e2e: Any, failure: Failure, transport: str, policy: str) -> Any:
    """The failing interceptor, then a recording one that answers no effect."""
    timeout_ms = DEADLINE_MS if transport in failure.waits else LONG_DEADLINE_MS
    subscription = e2e.intercept("tool.before", policy=policy, timeout_ms=timeout_ms)
    if failure.make is None:
        hook = e2e.hook(HOOK_ID, None, transport, [subscription], url=e2e.refused_url())
    else:
        hook = e2e.hook(HOOK_ID, failure.make(e2e), transport, [subscription])
    follower = e2e.misbehave("ok", record="follower.jsonl")
    then = e2e.hook(FOLLOWER_ID, follower, transport, [e2e.intercept("tool.before")])
    return e2e.registration(hook, then)


@pytest.mark.parametrize(("failure", "transport", "policy"), cases())
def test_failure_is_not_a_decision(e2e: Any, failure: Failure, transport: str, policy: str) -> None:
    reg = failing_registration(e2e, failure, transport, policy)
    run = e2e.run(registration=reg, steps=STEPS, permissions=HOST_RULES).ok()
    calls = run.transcript
    assert [c["call_id"] for c in calls] == ["call_1", "call_2"], run.explain()
    assert run.elapsed <= RUN_BUDGET_S, run.explain()

    # Every exchange failed, classified, under this subscription's policy, in time.
    exchanges = [e for e in run.exchanges() if e["backend"] == HOOK_ID]
    assert [e["callId"] for e in exchanges] == ["call_1", "call_2"], run.explain()
    for exchange in exchanges:
        assert exchange["mode"] == "intercept"
        assert exchange["outcome"] == "failed", run.explain()
        assert exchange["failure"] == failure.expected(transport), run.explain()
        assert exchange["policy"] == policy
        assert exchange.get("discarded", 0) == (1 if transport in failure.discarded else 0)
        latency = exchange["latencyMs"]
        if transport in failure.waits:
            assert DEADLINE_MS * 0.95 <= latency <= DEADLINE_MS + MARGIN_MS, run.explain()
        else:
            assert latency <= FAST_MS, run.explain()
    hooks = run.hooks("tool.before")
    assert len(hooks) == 2, run.explain()
    follower = e2e.received(e2e.path("follower.jsonl"))
    asked = e2e.deliveries(follower, "hooks/intercept", "tool.before")
    told = e2e.deliveries(follower, "hooks/observe", "tool.before")

    written = sorted(p.name for p in e2e.workspace.iterdir())
    if policy == "fail-closed":
        # The tool never runs; the denial is synthetic, and says nothing the backend said.
        assert written == [], run.explain()
        # The chain stopped: the next interceptor was never asked, only told.
        assert asked == [], follower
        # Each event exactly once; per_event, each observation is its own process, and
        # two of them may record in either order.
        assert sorted(e["id"] for e in told) == sorted(h["eventId"] for h in hooks), follower
        for line in run.records("call"):
            assert line["synthetic_denial"] is True and line["denied_by"] == HOOK_ID
        for call, hook in zip(calls, hooks, strict=True):
            assert call["outcome"] == "denied" and call["executed"] is False
            assert call["synthetic_denial"] is True, run.explain()
            assert call["denied_by"] == HOOK_ID
            assert call["hook_permission"] == "deny"
            assert call["host_stage"] == "ahp"
            assert hook["denial"]["synthetic"] is True, run.explain()
            assert hook["denial"]["backend"] == HOOK_ID
            for text in failure.backend_text:
                assert text not in call["reason"] and text not in hook["denial"]["reason"]
    else:
        # The failure is no decision: the chain went on, then the host's own rules decided.
        assert [e["id"] for e in asked] == [h["eventId"] for h in hooks], follower
        assert told == [], follower
        assert written == ["allowed.txt"], run.explain()
        allowed, refused = calls
        assert allowed["outcome"] == "ok" and allowed["executed"] is True, run.explain()
        assert allowed["host_stage"] == "rule" and allowed["host_decision"] == "allow"
        assert refused["outcome"] == "denied" and refused["executed"] is False
        assert refused["host_stage"] == "rule" and refused["host_decision"] == "deny"
        for call, hook in zip(calls, hooks, strict=True):
            assert call["hook_permission"] == "none"
            assert call["denied_by"] is None and call["synthetic_denial"] is False
            assert hook["denial"] is None


@pytest.mark.parametrize("policy", POLICIES)
def test_a_late_deny_is_ignored_and_settles_no_other_call(e2e: Any, policy: str) -> None:
    """A deny that comes after the deadline is no decision, and never lands on the next call.

    ``recorder.py`` (stdio persistent, one request at a time) answers its first request
    with a deny 300 ms after the deadline, then no effect at once (the call count kept
    in a file, across processes). At the deadline the harness kills the child that owes
    the late deny and sends the second request to a fresh one (#26), so no later call
    waits behind the first and the late deny is never read. The host allows all three
    writes. The first call is settled by the policy alone; the late deny must not be
    taken for the answer to another call.
    """
    late_deny = {"type": "deny", "reason": "a late deny", "code": "com.example.e2e.late"}
    script = [{"delayMs": DEADLINE_MS + 300, "effects": [late_deny]}, {"effects": []}]
    command = e2e.recorder(script=script, record="late.jsonl", counter="late.count")
    subscription = e2e.intercept("tool.before", policy=policy, timeout_ms=DEADLINE_MS)
    reg = e2e.registration(e2e.hook(HOOK_ID, command, "persistent", [subscription]))
    steps = [
        {"tool": "write_file", "input": {"path": f"allowed{i}.txt", "content": str(i)}}
        for i in (1, 2, 3)
    ]
    rules = HOST_RULES.replace('glob = "allowed.txt"', 'glob = "allowed*.txt"')
    run = e2e.run(registration=reg, steps=steps, permissions=rules).ok()
    first, second, third = run.transcript
    (failed,) = [e for e in run.exchanges("call_1") if e["backend"] == HOOK_ID]
    assert failed["failure"] == "deadline_exceeded", run.explain()
    assert DEADLINE_MS * 0.95 <= failed["latencyMs"] <= DEADLINE_MS + MARGIN_MS, run.explain()
    if policy == "fail-closed":
        assert first["synthetic_denial"] is True and first["executed"] is False
    else:
        assert first["executed"] is True and first["denied_by"] is None, run.explain()
    for call in (second, third):  # answered no effect: the host's allow rule decides
        assert call["denied_by"] is None and call["hook_permission"] == "none", run.explain()
        assert call["executed"] is True and call["outcome"] == "ok"
        (exchange,) = [e for e in run.exchanges(call["call_id"]) if e["backend"] == HOOK_ID]
        assert exchange["outcome"] == "no_effect", run.explain()
    asked = e2e.deliveries(e2e.received(e2e.path("late.jsonl")), "hooks/intercept")
    assert [e["call"]["id"] for e in asked] == ["call_1", "call_2", "call_3"]
    assert "a late deny" not in json.dumps(run.transcript)
    expected = ["allowed2.txt", "allowed3.txt"]
    if policy == "fail-open":
        expected.insert(0, "allowed1.txt")
    assert sorted(p.name for p in e2e.workspace.iterdir()) == expected, run.explain()


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("mode", ["garbage", "hang"])
def test_a_failure_at_the_approval_prompt_is_not_a_decision(
    e2e: Any, mode: str, policy: str
) -> None:
    """The same promise at the second decision point, ``tool.permission.request``.

    The write needs the mode's ordinary prompt and ``--approve always`` would approve
    it. Fail-closed: a synthetic denial refuses it before anyone is asked. Fail-open:
    the prompt goes to the user as if AHP had said nothing, and the write runs.
    """
    timeout_ms = DEADLINE_MS if mode == "hang" else LONG_DEADLINE_MS
    subscription = e2e.intercept("tool.permission.request", policy=policy, timeout_ms=timeout_ms)
    hook = e2e.hook(HOOK_ID, e2e.misbehave(mode), "persistent", [subscription])
    step = {"tool": "write_file", "input": {"path": "asked.txt", "content": "approved"}}
    run = e2e.run(registration=e2e.registration(hook), steps=[step], approve="always").ok()
    (call,) = run.transcript
    (request,) = run.hooks("tool.permission.request")
    (exchange,) = [e for e in run.exchanges("call_1") if e["backend"] == HOOK_ID]
    assert exchange["outcome"] == "failed" and exchange["policy"] == policy, run.explain()
    bound = DEADLINE_MS + MARGIN_MS if mode == "hang" else FAST_MS
    assert exchange["latencyMs"] <= bound, run.explain()
    if policy == "fail-closed":
        assert request["denial"]["synthetic"] is True, run.explain()
        assert call["synthetic_denial"] is True and call["denied_by"] == HOOK_ID
        assert call["approval"] == "not_needed"  # nobody was asked
        assert call["executed"] is False and not (e2e.workspace / "asked.txt").exists()
    else:
        assert request["denial"] is None, run.explain()
        assert call["synthetic_denial"] is False and call["denied_by"] is None
        assert call["approval"] == "approved", run.explain()
        assert call["executed"] is True and (e2e.workspace / "asked.txt").exists()

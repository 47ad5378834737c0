"""The client engine (``client/engine.py``), driven by hand: no I/O, a clock we move.

What one chain sends, how it takes answers and failures back, the deadline as a value
(acceptance included), the one retry, failure policy and short-circuit, and what is
observed after settlement. The same rules through a real dispatcher and every fault
are ``test_failure_policy.py``; through real processes, ``test_dispatcher.py``.
"""

from __future__ import annotations

from typing import Any

import pytest
from ahp_protocol.client import FailureClass, OperationalFailure
from ahp_protocol.client.chain import SYNTHETIC_DENIAL_REASON
from ahp_protocol.client.engine import (
    MAX_ERROR_REASON_CHARS,
    Chain,
    Route,
    accept,
    result_of,
    rpc_error_detail,
)
from ahp_protocol.client.transports.exchange import Exchange
from ahp_protocol.testing import tool_before
from ahp_protocol.wire import jsonrpc
from ahp_protocol.wire._legality import Grants
from ahp_protocol.wire.registration import parse_registration
from hypothesis import given, settings
from hypothesis import strategies as st

F = FailureClass
GRANT = {"effects": ["deny", "allow", "message"]}
DEADLINE_MS = 1000


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def routes(*policies: str) -> list[Route]:
    hooks = [
        {
            "id": f"com.example.b{i}",
            "transport": {"type": "http", "url": "http://127.0.0.1:9/"},
            "subscriptions": [
                {
                    "mode": "intercept",
                    "events": ["tool.before"],
                    "timeoutMs": DEADLINE_MS,
                    "failurePolicy": policy,
                    "content": {"default": "body"},
                }
            ],
        }
        for i, policy in enumerate(policies)
    ]
    registration = parse_registration({"protocolVersion": "draft", "hooks": hooks})
    return [Route.of(hook, 0, hook.subscriptions[0]) for hook in registration.hooks]


def chain(*policies: str, clock: Clock | None = None) -> Chain:
    grants = (GRANT, Grants(GRANT))
    return Chain(
        tool_before(), routes(*policies), lambda _type, _route: grants, clock=clock or Clock()
    )


def answer(send: Any, *effects: dict[str, Any]) -> dict[str, Any]:
    result = {"protocolVersion": "draft", "effects": list(effects)}
    return {"jsonrpc": "2.0", "id": send.message["id"], "result": result}


DENY = {"type": "deny", "reason": "no", "code": "com.example.no"}
CRASH = OperationalFailure(F.ABNORMAL_EXIT, "backend process exited or closed stdout")


def test_the_request_is_the_event_its_grant_and_the_state_so_far() -> None:
    clock = Clock()
    c = chain("fail-open", "fail-open", clock=clock)
    first = c.send()
    assert first is not None and c.send() is first  # the same request until it is answered
    assert first.message["method"] == jsonrpc.INTERCEPT
    assert first.message["id"] == c.state.event["id"]
    params = first.message["params"]
    assert set(params) == {"protocolVersion", "event", "capabilities", "state"}
    assert params["capabilities"] == GRANT and params["event"] == c.state.event
    assert params["state"] == {"permission": "none", "candidate": None, "flow": "none"}
    assert first.deadline == clock.now + DEADLINE_MS / 1000
    c.receive(answer(first, {"type": "allow"}))
    second = c.send()
    assert second is not None and second.route.hook.id == "com.example.b1"
    assert second.message["params"]["state"]["permission"] == "allow"


def test_an_answer_out_of_turn_is_a_programming_error() -> None:
    c = chain("fail-open")
    with pytest.raises(RuntimeError):
        c.receive({"jsonrpc": "2.0", "id": "x", "result": {}})
    with pytest.raises(RuntimeError):
        c.result()
    send = c.send()
    c.receive(answer(send))
    assert c.send() is None and c.settled
    with pytest.raises(RuntimeError):
        c.fail(CRASH)


def test_a_retryable_failure_is_sent_once_more_with_the_same_message_and_deadline() -> None:
    clock = Clock()
    c = chain("fail-open", clock=clock)
    first = c.send()
    assert first is not None
    clock.now += 0.1
    assert c.fail(CRASH) is None  # retried
    again = c.send()
    assert again is not None and again.attempt == 2
    assert again.message is first.message and again.deadline == first.deadline
    clock.now += 0.1
    diagnostic = c.fail(CRASH)  # the second failure is the failure
    assert diagnostic is not None and diagnostic.failure == F.ABNORMAL_EXIT
    assert diagnostic.latency_ms == pytest.approx(200.0)
    assert c.send() is None


@pytest.mark.parametrize(
    "failure",
    [F.MALFORMED_OUTPUT, F.ID_MISMATCH, F.HTTP_STATUS, F.SPAWN_FAILED, F.DEADLINE_EXCEEDED],
)
def test_other_failures_are_never_retried(failure: FailureClass) -> None:
    c = chain("fail-open")
    c.send()
    diagnostic = c.fail(OperationalFailure(failure, "x"))
    assert diagnostic is not None and diagnostic.failure == failure


def test_a_retry_never_extends_the_deadline() -> None:
    clock = Clock()
    c = chain("fail-open", clock=clock)
    send = c.send()
    assert send is not None
    clock.now = send.deadline  # no time left: the crash is the failure
    diagnostic = c.fail(CRASH)
    assert diagnostic is not None and diagnostic.failure == F.ABNORMAL_EXIT


def test_the_deadline_covers_acceptance() -> None:
    clock = Clock()
    c = chain("fail-closed", clock=clock)
    send = c.send()
    assert send is not None
    clock.now = send.deadline + 0.001  # the answer came, but accepting it ended past the deadline
    diagnostic = c.receive(answer(send, DENY))
    assert (diagnostic.outcome, diagnostic.failure) == ("failed", F.DEADLINE_EXCEEDED)
    assert c.state.denial is not None and c.state.denial.synthetic  # not the backend's deny


def test_expiry_is_a_deadline_failure_under_the_routes_policy() -> None:
    c = chain("fail-closed", "fail-open")
    c.send()
    diagnostic = c.expire()
    assert (diagnostic.failure, diagnostic.policy) == (F.DEADLINE_EXCEEDED, "fail-closed")
    assert c.send() is None  # stopped: the second route is not called
    assert [r.hook.id for r in c.uncalled] == ["com.example.b1"]


def test_fail_open_continues_with_the_state_unchanged() -> None:
    c = chain("fail-open", "fail-open")
    c.send()
    c.fail(OperationalFailure(F.MALFORMED_OUTPUT, "backend output is not a JSON-RPC message"))
    second = c.send()
    assert second is not None
    assert second.message["params"]["state"]["permission"] == "none"
    c.receive(answer(second))
    result = c.result()
    assert result.permission == "none" and not result.denied
    assert [d.outcome for d in result.diagnostics] == ["failed", "no_effect"]


def test_fail_closed_denies_generically_and_short_circuits() -> None:
    c = chain("fail-closed", "fail-open", "fail-open")
    c.send()
    c.fail(OperationalFailure(F.RPC_ERROR, "x"))
    assert c.send() is None
    result = c.result()
    assert result.permission == "deny" and result.synthetic_denial
    assert result.denial is not None and result.denial.reason == SYNTHETIC_DENIAL_REASON
    assert result.denial.backend == "com.example.b0" and result.denial.code is None
    assert [r.hook.id for r in c.uncalled] == ["com.example.b1", "com.example.b2"]


def test_an_accepted_deny_stops_the_chain_and_names_its_backend() -> None:
    c = chain("fail-open", "fail-open")
    send = c.send()
    diagnostic = c.receive(answer(send, DENY))
    assert diagnostic.outcome == "denied" and c.send() is None
    result = c.result()
    assert result.denied_by == "com.example.b0" and not result.synthetic_denial
    assert result.denial is not None and result.denial.reason == "no"


def test_deliveries_after_settlement() -> None:
    c = chain("fail-closed", "fail-open")
    observer, audit = routes("fail-open", "fail-open")
    c.send()
    c.fail(OperationalFailure(F.MALFORMED_OUTPUT, "x"))
    made: list[tuple[str, FailureClass]] = []

    def failure_event(route: Route, failure: FailureClass) -> dict[str, Any]:
        made.append((route.hook.id, failure))
        return {"type": "hook.failure"}

    with pytest.raises(RuntimeError):  # not before the chain is settled
        c.deliveries([observer], [audit], failure_event)
    assert c.send() is None
    deliveries = c.deliveries([observer], [audit], failure_event)
    assert [(d.route.hook.id, d.mode, d.event["type"]) for d in deliveries] == [
        ("com.example.b0", "observe", "tool.before"),
        ("com.example.b1", "short-circuit", "tool.before"),
        ("com.example.b1", "observe", "hook.failure"),
    ]
    assert made == [("com.example.b0", F.MALFORMED_OUTPUT)]


def test_a_diagnostic_counts_the_frames_the_exchange_discarded() -> None:
    c = chain("fail-open")
    send = c.send()
    exchange = Exchange()
    exchange.discard(10)
    exchange.discard(20)
    diagnostic = c.receive(answer(send), exchange)
    assert diagnostic.discarded == 2 and diagnostic.to_json()["discarded"] == 2
    assert exchange.received_bytes == 30


# -- what an answer must be ----------------------------------------------------------


@pytest.mark.parametrize(
    ("response", "failure"),
    [
        ({"error": {"code": -32004, "message": "boom"}}, F.RPC_ERROR),
        ({"result": None}, F.INVALID_RESULT),
        ({"result": []}, F.INVALID_RESULT),
        ({"result": {"effects": []}}, F.UNSUPPORTED_VERSION),
        ({"result": {"protocolVersion": "0.9", "effects": []}}, F.UNSUPPORTED_VERSION),
        ({"result": {"protocolVersion": "draft"}}, F.INVALID_RESULT),
        ({"result": {"protocolVersion": "draft", "effects": None}}, F.INVALID_RESULT),
        ({"result": {"protocolVersion": "draft", "effects": {}}}, F.INVALID_RESULT),
        ({"result": {"protocolVersion": "draft", "effects": [], "manifest": {}}}, F.INVALID_RESULT),
        (
            {"result": {"protocolVersion": "draft", "effects": [], "configuration": {}}},
            F.INVALID_RESULT,
        ),
        ({"result": {"protocolVersion": "draft", "effects": [{"type": "x.y"}]}}, F.UNKNOWN_EFFECT),
        (
            {"result": {"protocolVersion": "draft", "effects": [{"type": "deny"}]}},
            F.MALFORMED_EFFECT,
        ),
        (
            {"result": {"protocolVersion": "draft", "effects": [{"type": "ask"}]}},
            F.UNADVERTISED_EFFECT,
        ),
    ],
)
def test_an_answer_is_accepted_whole_or_failed_with_its_class(
    response: dict[str, Any], failure: FailureClass
) -> None:
    with pytest.raises(OperationalFailure) as caught:
        accept("tool.before", Grants(GRANT), {"jsonrpc": "2.0", "id": "1", **response})
    assert caught.value.failure == failure


def test_a_valid_answer_gives_its_effects_in_order() -> None:
    response = answer_with([DENY, {"type": "message", "text": "hi"}])
    effects = accept("tool.before", Grants(GRANT), response)
    assert [e.type for e in effects] == ["deny", "message"]
    assert result_of(response)["protocolVersion"] == "draft"


def answer_with(effects: list[dict[str, Any]]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": "1", "result": {"protocolVersion": "draft", "effects": effects}}


def test_an_rpc_error_detail_keeps_the_code_its_name_and_a_bounded_printable_reason() -> None:
    long = "evaluation\nfailed " + "x" * 500
    detail = rpc_error_detail(
        {"code": -32004, "message": "Traceback: secret", "data": {"reason": long}}
    )
    assert detail.startswith(
        "backend answered with JSON-RPC error -32004 (backend_internal_error): evaluation failed "
    )
    assert "Traceback" not in detail and "\n" not in detail and detail.endswith("…")
    assert len(detail) < 80 + MAX_ERROR_REASON_CHARS
    assert rpc_error_detail({"code": "x"}) == "backend answered with a malformed JSON-RPC error"
    assert rpc_error_detail(None) == "backend answered with a malformed JSON-RPC error"
    assert rpc_error_detail({"code": 7}) == "backend answered with JSON-RPC error 7"


# -- every sequence of answers and failures, as a property ---------------------------

STEPS = st.sampled_from(["no-effect", "allow", "deny", "crash", "crash-twice", "garbage"])


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(["fail-open", "fail-closed"]), STEPS), min_size=1, max_size=6
    )
)
def test_any_chain_settles_by_the_rules(chain_spec: list[tuple[str, str]]) -> None:
    """Whatever each backend does: a route is sent only while nothing stopped the chain;
    the first accepted deny or fail-closed failure stops it (the deny is the backend's,
    the failure's a generic synthetic one); a fail-open failure changes nothing; every
    route is either asked once (a crash retried once) or observed, never both."""
    c = chain(*(policy for policy, _ in chain_spec))
    sent: list[int] = []
    expected_stop: tuple[str, int] | None = None
    permission = "none"
    while (send := c.send()) is not None:
        index = int(send.route.hook.id.removeprefix("com.example.b"))
        sent.append(index)
        policy, step = chain_spec[index]
        if step in ("crash", "crash-twice"):
            assert c.fail(CRASH) is None  # retried once
            again = c.send()
            assert again is not None and again.attempt == 2 and again.route == send.route
            if step == "crash-twice":
                c.fail(CRASH)
            else:
                c.receive(answer(again))
        elif step == "garbage":
            c.fail(OperationalFailure(F.MALFORMED_OUTPUT, "x"))
        else:
            effects = {"no-effect": [], "allow": [{"type": "allow"}], "deny": [DENY]}[step]
            c.receive(answer(send, *effects))
        failed = step in ("crash-twice", "garbage")
        if step == "deny" or (failed and policy == "fail-closed"):
            expected_stop = ("deny" if step == "deny" else "synthetic", index)
        elif step == "allow" and permission == "none":
            permission = "allow"
    result = c.result()
    first_stop = expected_stop[1] if expected_stop else len(chain_spec) - 1
    assert sent == list(range(min(first_stop + 1, len(chain_spec))))
    assert [r.hook.id for r in c.uncalled] == [
        f"com.example.b{i}" for i in range(len(sent), len(chain_spec))
    ]
    assert len(result.diagnostics) == len(sent)
    if expected_stop is None:
        assert result.permission == permission and not result.denied
    else:
        kind, index = expected_stop
        assert result.permission == "deny" and result.denied_by == f"com.example.b{index}"
        assert result.synthetic_denial == (kind == "synthetic")

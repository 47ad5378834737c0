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


# -- the details a diagnostic keeps (each pinned: an operator reads them) -------------


@pytest.mark.parametrize(
    ("result", "detail"),
    [
        (None, "result is not an object"),
        ({"effects": []}, "unsupported protocolVersion"),
        ({"protocolVersion": "draft"}, "result has no effects array"),
        (
            {"protocolVersion": "draft", "effects": [], "manifest": {}},
            "discovery payload in a decision",
        ),
        (
            {"protocolVersion": "draft", "effects": [{"type": "deny"}]},
            "effect rejected (malformed)",
        ),
        ({"protocolVersion": "draft", "effects": [{"type": "x.y"}]}, "effect rejected (unknown)"),
    ],
)
def test_a_failed_answer_says_why_in_a_fixed_phrase(result: Any, detail: str) -> None:
    with pytest.raises(OperationalFailure) as caught:
        accept("tool.before", Grants(GRANT), {"jsonrpc": "2.0", "id": "1", "result": result})
    assert caught.value.detail == detail


def test_an_unparsable_effects_list_is_malformed_with_a_fixed_phrase() -> None:
    with pytest.raises(OperationalFailure) as caught:
        accept("tool.before", Grants(GRANT), answer_with([{"type": "message", "text": 7}]))
    assert caught.value.failure in (F.MALFORMED_EFFECT, F.UNADVERTISED_EFFECT)
    assert caught.value.detail in ("effects rejected", "effect rejected (malformed)")


def test_an_rpc_error_is_its_detail() -> None:
    error = {"code": -32004, "message": "x", "data": {"reason": "evaluation failed"}}
    with pytest.raises(OperationalFailure) as caught:
        result_of({"jsonrpc": "2.0", "id": "1", "error": error})
    assert caught.value.failure == F.RPC_ERROR
    assert caught.value.detail == rpc_error_detail(error)
    assert caught.value.detail.endswith(": evaluation failed")
    assert rpc_error_detail({"code": -32004, "data": {"reason": 5}}) == (
        "backend answered with JSON-RPC error -32004 (backend_internal_error)"
    )


def test_every_way_to_fail_keeps_the_exchange_record() -> None:
    clock = Clock()
    for fail in ("receive", "late", "fail", "expire"):
        c = chain("fail-open", clock=clock)
        send = c.send()
        assert send is not None
        exchange = Exchange()
        exchange.discard(3)
        if fail == "receive":
            diagnostic = c.receive({"jsonrpc": "2.0", "id": "1", "result": None}, exchange)
            assert diagnostic.detail == "result is not an object"
        elif fail == "late":
            clock.now = send.deadline + 1
            diagnostic = c.receive(answer(send), exchange)
            assert (diagnostic.failure, diagnostic.detail) == (
                F.DEADLINE_EXCEEDED,
                "no answer in time",
            )
        elif fail == "fail":
            got = c.fail(OperationalFailure(F.MALFORMED_OUTPUT, "bad"), exchange)
            assert got is not None
            diagnostic = got
            assert diagnostic.detail == "bad"
        else:
            diagnostic = c.expire(exchange)
            assert diagnostic.detail == "no answer in time"
        assert diagnostic.discarded == 1 and diagnostic.outcome == "failed", fail
        assert diagnostic.policy == "fail-open" and diagnostic.subscription == 0


def test_an_answer_at_the_deadline_itself_is_in_time() -> None:
    clock = Clock()
    c = chain("fail-open", clock=clock)
    send = c.send()
    assert send is not None
    clock.now = send.deadline
    diagnostic = c.receive(answer(send, {"type": "message", "text": "hi"}))
    assert (diagnostic.outcome, diagnostic.failure, diagnostic.policy) == ("accepted", None, None)
    assert c.result().messages == ("hi",) and c.result().event_type == "tool.before"


def test_latency_runs_from_the_send() -> None:
    clock = Clock()
    c = chain("fail-open", "fail-open", clock=clock)
    first = c.send()
    clock.now += 0.25
    assert c.receive(answer(first)).latency_ms == pytest.approx(250.0)
    clock.now += 1.0  # time between exchanges is nobody's latency
    second = c.send()
    clock.now += 0.5
    assert c.receive(answer(second)).latency_ms == pytest.approx(500.0)


def test_a_retried_request_is_judged_by_its_grant() -> None:
    c = chain("fail-open")
    c.send()
    assert c.fail(CRASH) is None
    again = c.send()
    assert again is not None
    assert c.receive(answer(again, {"type": "ask"})).failure == F.UNADVERTISED_EFFECT


def test_the_carried_state_is_the_first_request_s_state() -> None:
    from ahp_protocol.wire.state import Candidate

    grants = (GRANT, Grants(GRANT))
    candidate = Candidate(value="earlier result")
    c = Chain(
        tool_before(),
        routes("fail-open"),
        lambda _t, _r: grants,
        permission="ask",
        candidate=candidate,
    )
    send = c.send()
    assert send is not None
    state = send.message["params"]["state"]
    assert state["permission"] == "ask" and state["candidate"] == candidate.to_wire()


def test_a_fail_closed_denial_names_its_route() -> None:
    c = chain("fail-open", "fail-closed")
    c.receive(answer(c.send()))
    c.send()
    c.expire()
    assert c.send() is None
    denial = c.result().denial
    assert denial is not None and (denial.backend, denial.subscription) == ("com.example.b1", 0)


def test_misuse_says_what_to_do() -> None:
    c = chain("fail-open")
    with pytest.raises(RuntimeError, match=r"call send\(\) first"):
        c.expire()
    with pytest.raises(RuntimeError, match="not settled"):
        c.result()
    c.send()
    with pytest.raises(RuntimeError, match=r"send\(\) has more to send"):
        c.deliveries([], [], lambda _r, _f: {})


@pytest.mark.parametrize(
    ("observers", "uncalled", "failure", "audits", "count"),
    [
        (False, False, False, False, 0),
        (False, False, True, False, 0),  # a failure, nobody audits it
        (False, False, True, True, 1),  # its hook.failure
        (False, True, True, False, 1),  # the short-circuit only
        (False, True, True, True, 2),  # the short-circuit and the hook.failure
        (True, False, False, False, 1),  # the observer
    ],
)
def test_what_is_observed_depends_on_who_listens(
    observers: bool, uncalled: bool, failure: bool, audits: bool, count: int
) -> None:
    policy = "fail-closed" if uncalled else "fail-open"
    c = chain(policy, "fail-open") if uncalled else chain(policy)
    send = c.send()
    if failure or uncalled:
        c.fail(OperationalFailure(F.MALFORMED_OUTPUT, "x"))
    else:
        c.receive(answer(send))
    while (more := c.send()) is not None:
        c.receive(answer(more))
    observer, audit = routes("fail-open", "fail-open")
    made = c.deliveries(
        [observer] if observers else [], [audit] if audits else [], lambda _r, _f: {"type": "x"}
    )
    assert len(made) == count


def test_a_route_sees_the_event_as_its_content_selection_says() -> None:
    event = {**tool_before(), "native": {"raw": "payload"}}
    full, metadata = [
        route_with(content) for content in ({"default": "body"}, {"default": "metadata"})
    ]
    assert full.sees_everything and not metadata.sees_everything
    assert "native" not in full.view(event)  # includeNative not asked for
    assert full.view(tool_before()) is not None
    plain = tool_before()
    assert full.view(plain) is plain  # nothing to withhold: the event itself
    assert metadata.view(plain) is not plain and metadata.view(plain)["id"] == plain["id"]
    native = route_with({"default": "body"}, include_native=True)
    assert native.view(event) is event
    assert full.of(full.hook, 3, full.subscription).index == 3


def route_with(content: dict[str, str], **extra: Any) -> Route:
    sub = {
        "mode": "intercept",
        "events": ["tool.before"],
        "timeoutMs": 1000,
        "failurePolicy": "fail-open",
        "content": content,
        **({"includeNative": True} if extra.get("include_native") else {}),
    }
    hook = {"id": "com.example.v", "transport": {"type": "http", "url": "http://127.0.0.1:9/"}}
    registration = parse_registration(
        {"protocolVersion": "draft", "hooks": [{**hook, "subscriptions": [sub]}]}
    )
    (parsed,) = registration.hooks
    return Route.of(parsed, 0, parsed.subscriptions[0])

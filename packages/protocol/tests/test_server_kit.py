"""The server kit's sans-I/O core: every error path, effects, notifications, robustness.

Each message the core emits is checked against the official JSON Schemas
(``json-rpc-message``; successes also against ``intercept-response`` or
``configuration-response``).
"""

from __future__ import annotations

import json
import logging
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from ahp_protocol.server import Backend, InterceptRequest
from ahp_protocol.wire.effects import AllowEffect, DenyEffect, MessageEffect, ModifyEffect
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).parent / "backends"))
from kit_messages import (
    configuration_request,
    intercept,
    line,
    observe,
    session_end,
    tool_after,
    tool_before,
    turn_start,
)

SECRET = "sk-live-TOPSECRET-9f8e7d"
SchemaCheck = Callable[[str, Any], list[str]]

CONFIGURATION: list[dict[str, Any]] = [
    {
        "mode": "intercept",
        "events": ["tool.before"],
        "timeoutMs": 1500,
        "failurePolicy": "fail-closed",
        "content": {"default": "metadata"},
    },
    {"mode": "observe", "events": ["session.*"], "content": {"default": "omit"}},
]


def make_backend(configuration: Any = None, **kwargs: Any) -> tuple[Backend, list[Any]]:
    """A backend whose verdicts depend on the command; ``seen`` records observations."""
    backend = Backend("com.example.kit.test", configuration=configuration, **kwargs)
    seen: list[Any] = []

    @backend.intercept("tool.before")
    def guard(request: InterceptRequest) -> Any:
        seen.append(("intercept", request.id))
        command = str(request.tool_input.get("command", ""))
        if command == "boom":
            raise RuntimeError(f"database password is {SECRET}")
        if command == "allow-me":
            return AllowEffect()
        if command == "as-dict":
            return {"type": "deny", "reason": "dict form"}
        if command == "as-generator":
            return (e for e in [MessageEffect(text="note"), DenyEffect(reason="gen")])
        if command == "bad-shape":
            return {"type": "deny", "reason": "x", "bogus": True}
        if command == "not-an-effect":
            return 42
        if command == "string":
            return "deny"
        if command == "grant-myself":
            request.capabilities["effects"].append("allow")  # must not widen the grant
            return AllowEffect()
        if command == "modify-output":
            return {"type": "modify", "target": "output", "operation": "replace", "value": {}}
        if command == "huge":
            return DenyEffect(reason="x" * 5000)
        if "rm -rf" in command:
            return DenyEffect(reason="No recursive deletes.", code="com.example.rm_rf")
        return None

    @backend.intercept("tool.after")
    def after(request: InterceptRequest) -> Any:
        return DenyEffect(reason="deny is not legal at tool.after")

    @backend.observe("*")
    def record(event: dict[str, Any]) -> None:
        if event.get("extensions", {}).get("com.example.test", {}).get("raise"):
            raise ValueError(SECRET)
        seen.append(("observe", event["type"], event["id"]))

    return backend, seen


@pytest.fixture
def kit() -> tuple[Backend, list[Any]]:
    return make_backend(CONFIGURATION)


def emitted(official_schema: SchemaCheck, out: bytes | None, kind: str | None = None) -> Any:
    """Parse one emitted line and check it against the official schemas."""
    assert out is not None
    assert out.endswith(b"\n") and out.count(b"\n") == 1
    message = json.loads(out)
    assert official_schema("json-rpc-message.schema.json", message) == []
    if "result" in message and kind is not None:
        assert official_schema(kind, message) == []
    return message


def call(
    backend: Backend, message: Any, official_schema: SchemaCheck, kind: str | None = None
) -> Any:
    raw = message if isinstance(message, bytes) else line(message)
    return emitted(official_schema, backend.handle_sync(raw), kind)


def error_of(response: Any) -> tuple[int, Any]:
    assert "result" not in response
    return response["error"]["code"], response["id"]


INTERCEPT_RESPONSE = "intercept-response.schema.json"


# --------------------------------------------------------------------- successes


def test_the_test_messages_are_valid(official_schema: SchemaCheck) -> None:
    """The valid requests these tests start from are valid for the official schemas."""
    for event in (tool_before("v1"), tool_after("v2"), turn_start("v3")):
        effects = ["deny"] if event["type"] != "tool.after" else ["message"]
        assert official_schema("intercept-request.schema.json", intercept(event, effects)) == []
    assert official_schema("observe-notification.schema.json", observe(session_end())) == []
    request = configuration_request("c1")
    assert official_schema("configuration-request.schema.json", request) == []


def test_no_effect(kit: tuple[Backend, list[Any]], official_schema: SchemaCheck) -> None:
    backend, seen = kit
    response = call(backend, intercept(tool_before("evt_ok")), official_schema, INTERCEPT_RESPONSE)
    assert response == {
        "jsonrpc": "2.0",
        "id": "evt_ok",
        "result": {"protocolVersion": "draft", "effects": []},
    }
    assert official_schema("intercept-no-effect-response.schema.json", response) == []
    assert seen == [("intercept", "evt_ok")]


def test_deny(kit: tuple[Backend, list[Any]], official_schema: SchemaCheck) -> None:
    backend, _ = kit
    response = call(
        backend, intercept(tool_before("e2", "rm -rf /")), official_schema, INTERCEPT_RESPONSE
    )
    assert response["result"]["effects"] == [
        {"type": "deny", "reason": "No recursive deletes.", "code": "com.example.rm_rf"}
    ]
    assert official_schema("intercept-deny-response.schema.json", response) == []


def test_plain_dict_and_generator_effects(
    kit: tuple[Backend, list[Any]], official_schema: SchemaCheck
) -> None:
    backend, _ = kit
    response = call(
        backend, intercept(tool_before("e3", "as-dict")), official_schema, INTERCEPT_RESPONSE
    )
    assert response["result"]["effects"] == [{"type": "deny", "reason": "dict form"}]
    response = call(
        backend,
        intercept(tool_before("e4", "as-generator"), ["deny", "message"]),
        official_schema,
        INTERCEPT_RESPONSE,
    )
    assert [e["type"] for e in response["result"]["effects"]] == ["message", "deny"]


def test_trailing_newline_is_optional(kit: tuple[Backend, list[Any]]) -> None:
    backend, _ = kit
    raw = line(intercept(tool_before("e5")))
    assert backend.handle_sync(raw) == backend.handle_sync(raw.rstrip(b"\n"))


def test_request_view(official_schema: SchemaCheck) -> None:
    backend = Backend("com.example.view")
    views: list[InterceptRequest] = []

    @backend.intercept("*")
    def capture(request: InterceptRequest) -> None:
        views.append(request)

    state = {"permission": "ask", "candidate": None}
    event = tool_before("e6", "git push", extensions={"com.example.x": {"k": 1}})
    call(backend, intercept(event, ["deny", "message"], state=state), official_schema)
    (view,) = views
    assert view.id == "e6" and view.event_type == "tool.before"
    assert view.event == event  # lossless, unknown members included
    assert view.advertised == frozenset({"deny", "message"})
    assert view.state == state
    assert view.tool_name == "Bash" and view.tool_input == {"command": "git push"}
    assert view.session_id == "sess_123"
    assert view.params["protocolVersion"] == "draft"
    with pytest.raises(AttributeError):
        view.id = "other"  # type: ignore[misc]
    views.clear()
    call(backend, intercept(turn_start("e7"), ["deny"]), official_schema)
    assert views[0].tool == {} and views[0].tool_name is None and views[0].tool_input == {}


def test_most_specific_handler_wins(official_schema: SchemaCheck) -> None:
    backend = Backend("com.example.specific")
    backend.intercept("*")(lambda r: DenyEffect(reason="star"))
    backend.intercept("tool.*")(lambda r: DenyEffect(reason="family"))
    backend.intercept("tool.before")(lambda r: DenyEffect(reason="exact"))

    def reason(event: dict[str, Any]) -> str:
        response = call(backend, intercept(event, ["deny"]), official_schema)
        return str(response["result"]["effects"][0]["reason"])

    assert reason(tool_before("a")) == "exact"
    assert reason(turn_start("b")) == "star"


def test_family_selector(official_schema: SchemaCheck) -> None:
    backend = Backend("com.example.family")
    backend.intercept("tool.*")(lambda r: None)
    assert "result" in call(backend, intercept(tool_before("a")), official_schema)
    assert error_of(call(backend, intercept(turn_start("b")), official_schema))[0] == -32002


# --------------------------------------------------------------------- framing and envelope


@pytest.mark.parametrize(
    "raw",
    [b"{not json", b'{"jsonrpc":"2.0",', b"\xff\xfe{}", b"NaN", b'{"a":NaN}', b"", b"[" * 5000],
    ids=["bad-json", "truncated", "bad-utf8", "nan", "nan-member", "empty", "deep"],
)
def test_parse_error(
    kit: tuple[Backend, list[Any]], official_schema: SchemaCheck, raw: bytes
) -> None:
    backend, _ = kit
    assert error_of(call(backend, raw, official_schema)) == (-32700, None)


def test_oversized_message_is_a_parse_error(official_schema: SchemaCheck) -> None:
    backend, seen = make_backend(max_frame_bytes=1024)
    message = intercept(tool_before("big", "x" * 2000))
    assert error_of(call(backend, line(message), official_schema)) == (-32700, None)
    assert seen == []


def test_response_over_the_limit_is_an_internal_error(official_schema: SchemaCheck) -> None:
    backend, _ = make_backend(max_frame_bytes=2048)
    response = call(backend, intercept(tool_before("huge", "huge")), official_schema)
    assert error_of(response) == (-32603, "huge")


@pytest.mark.parametrize(
    ("message", "expected_id"),
    [
        ([intercept(tool_before("b1"))], None),
        ([], None),
        (7, None),
        ("hooks/intercept", None),
        ({"jsonrpc": "1.0", "id": "x1", "method": "hooks/intercept", "params": {}}, "x1"),
        ({"id": "x2", "method": "hooks/intercept", "params": {}}, "x2"),
        ({"jsonrpc": "2.0", "id": True, "method": "hooks/intercept", "params": {}}, None),
        ({"jsonrpc": "2.0", "id": "", "method": "hooks/intercept"}, None),
        ({"jsonrpc": "2.0", "id": None, "method": "hooks/intercept"}, None),
        ({"jsonrpc": "2.0", "id": 3, "method": 5}, 3),
        ({"jsonrpc": "2.0", "id": 4, "method": "hooks/intercept", "params": "p"}, 4),
        ({"jsonrpc": "2.0", "id": 5}, 5),
        ({"jsonrpc": "2.0", "method": 5}, None),
        ({"jsonrpc": "2.0", "id": "o1", "method": "hooks/observe", "params": {}}, "o1"),
    ],
    ids=[
        "batch",
        "empty-batch",
        "number",
        "string",
        "jsonrpc-1.0",
        "jsonrpc-missing",
        "id-bool",
        "id-empty",
        "id-null",
        "method-not-string",
        "params-string",
        "no-method",
        "no-id-bad-method",
        "observe-with-id",
    ],
)
def test_invalid_request(
    kit: tuple[Backend, list[Any]], official_schema: SchemaCheck, message: Any, expected_id: Any
) -> None:
    backend, seen = kit
    assert error_of(call(backend, message, official_schema)) == (-32600, expected_id)
    assert seen == []


@pytest.mark.parametrize(
    "method", ["hooks/capabilities", "hooks/unknown", "tools/call", "hooks/configuration"]
)
def test_method_not_found(official_schema: SchemaCheck, method: str) -> None:
    backend, _ = make_backend(configuration=None)  # no hooks/configuration offered
    message = {"jsonrpc": "2.0", "id": 9, "method": method, "params": {"protocolVersion": "draft"}}
    assert error_of(call(backend, message, official_schema)) == (-32601, 9)


def test_responses_sent_to_a_backend_are_ignored(kit: tuple[Backend, list[Any]]) -> None:
    backend, _ = kit
    assert backend.handle_sync(line({"jsonrpc": "2.0", "id": 1, "result": {}})) is None
    error = {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "x"}}
    assert backend.handle_sync(line(error)) is None


# --------------------------------------------------------------------- params


def test_unsupported_version(kit: tuple[Backend, list[Any]], official_schema: SchemaCheck) -> None:
    backend, seen = kit
    for version in ("0.1", "2026-01-01", ""):
        response = call(backend, intercept(tool_before("v1"), version=version), official_schema)
        assert error_of(response) == (-32001, "v1")
        assert response["error"]["data"] == {"supported": ["draft"]}
    assert seen == []


def _without(message: dict[str, Any], *path: str) -> dict[str, Any]:
    target = message
    for key in path[:-1]:
        target = target[key]
    del target[path[-1]]
    return message


def _with(message: dict[str, Any], value: Any, *path: str) -> dict[str, Any]:
    target = message
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return message


INVALID_PARAMS: list[tuple[str, Callable[[], dict[str, Any]]]] = [
    ("id-mismatch", lambda: intercept(tool_before("evt_a"), id="evt_b")),
    ("integer-id", lambda: intercept(tool_before("1"), id=1)),
    ("params-missing", lambda: _without(intercept(tool_before("p1")), "params")),
    ("params-array", lambda: _with(intercept(tool_before("p2")), [], "params")),
    (
        "version-missing",
        lambda: _without(intercept(tool_before("p3")), "params", "protocolVersion"),
    ),
    ("version-number", lambda: _with(intercept(tool_before("p4")), 1, "params", "protocolVersion")),
    ("event-missing", lambda: _without(intercept(tool_before("p5")), "params", "event")),
    ("event-string", lambda: _with(intercept(tool_before("p6")), "e", "params", "event")),
    ("type-missing", lambda: _without(intercept(tool_before("p7")), "params", "event", "type")),
    ("caps-missing", lambda: _without(intercept(tool_before("p8")), "params", "capabilities")),
    (
        "caps-effects-missing",
        lambda: _with(intercept(tool_before("p9")), {}, "params", "capabilities"),
    ),
    ("caps-effects-string", lambda: intercept(tool_before("p10"), "deny")),  # type: ignore[arg-type]
    ("caps-effects-repeated", lambda: intercept(tool_before("p11"), ["deny", "deny"])),
    ("caps-effects-unknown", lambda: intercept(tool_before("p12"), ["deny", "obliterate"])),
    ("state-string", lambda: intercept(tool_before("p13"), state="allow")),
    ("state-bad-permission", lambda: intercept(tool_before("p17"), state={"permission": "maybe"})),
    ("caps-beyond-event", lambda: intercept(tool_after("p18"), ["deny", "message"])),
    ("caps-modify-block-missing", lambda: intercept(tool_before("p19"), ["deny", "modify"])),
    ("caps-extension-at-event", lambda: intercept(tool_before("p20"), ["deny", "com.example.x"])),
    (
        "event-harness-missing",
        lambda: _without(intercept(tool_before("p14")), "params", "event", "harness"),
    ),
    (
        "event-time-bad",
        lambda: _with(intercept(tool_before("p15")), "yesterday", "params", "event", "time"),
    ),
    (
        "event-tool-missing",
        lambda: _without(intercept(tool_before("p16")), "params", "event", "tool"),
    ),
]


@pytest.mark.parametrize(
    "build", [b for _, b in INVALID_PARAMS], ids=[n for n, _ in INVALID_PARAMS]
)
def test_invalid_params(
    kit: tuple[Backend, list[Any]],
    official_schema: SchemaCheck,
    build: Callable[[], dict[str, Any]],
) -> None:
    backend, seen = kit
    message = build()
    code, rid = error_of(call(backend, message, official_schema))
    assert (code, rid) == (-32602, message["id"])
    assert seen == []


def test_remembered_grant_verdicts_never_leak_between_distinct_grants(
    kit: tuple[Backend, list[Any]], official_schema: SchemaCheck
) -> None:
    # Verdicts are remembered; values that compare equal in Python but differ in
    # JSON (true vs 1), or an absent state vs a present one, are distinct grants.
    backend, seen = kit
    good = {"effects": ["deny", "modify"], "modify": {"input": {"replace": True, "merge": False}}}
    bad = {"effects": ["deny", "modify"], "modify": {"input": {"replace": 1, "merge": 0}}}
    assert good == bad
    for n in range(2):  # the second round answers from the remembered verdicts
        ok = call(backend, intercept(tool_before(f"g{n}"), capabilities=good), official_schema)
        assert ok["result"]["effects"] == []
        refused = call(backend, intercept(tool_before(f"b{n}"), capabilities=bad), official_schema)
        assert error_of(refused) == (-32602, f"b{n}")
        bad_state = intercept(tool_before(f"s{n}"), state={"permission": "maybe"})
        assert error_of(call(backend, bad_state, official_schema)) == (-32602, f"s{n}")
        no_state = call(backend, intercept(tool_before(f"n{n}")), official_schema)
        assert no_state["result"]["effects"] == []
    assert seen == [("intercept", i) for i in ("g0", "n0", "g1", "n1")]


def test_a_handler_cannot_widen_a_remembered_grant(
    kit: tuple[Backend, list[Any]], official_schema: SchemaCheck
) -> None:
    backend, _ = kit
    for n in range(3):
        message = intercept(tool_before(f"w{n}", "grant-myself"))
        assert error_of(call(backend, message, official_schema)) == (-32603, f"w{n}")
        allowed = intercept(tool_before(f"a{n}", "allow-me"))
        assert error_of(call(backend, allowed, official_schema)) == (-32603, f"a{n}")


def test_remembered_effect_verdicts_are_per_grant_and_per_wire_form(
    official_schema: SchemaCheck,
) -> None:
    """The kit remembers which wire form of a handler's effect models it accepted under
    which grant; another grant, or another form (a ``model_construct`` forgery, a new
    reason), is judged anew, also once the bounded memory has been cleared."""
    backend = Backend("com.example.kit.memo")
    returned: list[Any] = []

    @backend.intercept("tool.before")
    def guard(request: InterceptRequest) -> Any:
        return returned[-1]

    valid = DenyEffect(reason="No.", code="com.example.no")
    forged = DenyEffect.model_construct(reason="", code="com.example.no")
    for n in range(3):
        returned.append(valid)
        ok = call(backend, intercept(tool_before(f"ok{n}"), ["deny"]), official_schema)
        assert ok["result"]["effects"] == [
            {"type": "deny", "reason": "No.", "code": "com.example.no"}
        ]
        unadvertised = call(backend, intercept(tool_before(f"un{n}"), ["allow"]), official_schema)
        assert error_of(unadvertised) == (-32603, f"un{n}")
        returned.append(forged)
        refused = call(backend, intercept(tool_before(f"fg{n}"), ["deny"]), official_schema)
        assert error_of(refused) == (-32603, f"fg{n}")
    variants = [  # same values in other fields or classes: each is its own wire form
        (DenyEffect(reason="No."), {"type": "deny", "reason": "No."}),
        (DenyEffect(reason="No.", code=None), {"type": "deny", "reason": "No."}),
        (MessageEffect(text="No."), {"type": "message", "text": "No."}),
        (DenyEffect(reason="No.", extensions={"com.example.x": 1}), None),
    ]
    for effect, wire in variants:
        returned.append(effect)
        answer = call(backend, intercept(tool_before("v"), ["deny", "message"]), official_schema)
        expected = wire or {"type": "deny", "reason": "No.", "extensions": {"com.example.x": 1}}
        assert answer["result"]["effects"] == [expected]
    for i in range(300):  # more distinct forms than are remembered
        returned.append(DenyEffect(reason=f"reason {i}"))
        ok = call(backend, intercept(tool_before(f"m{i}"), ["deny"]), official_schema)
        assert ok["result"]["effects"] == [{"type": "deny", "reason": f"reason {i}"}]
    returned.append(forged)
    refused = call(backend, intercept(tool_before("last"), ["deny"]), official_schema)
    assert error_of(refused) == (-32603, "last")


def test_an_effect_with_a_lone_surrogate_is_sent_escaped(official_schema: SchemaCheck) -> None:
    """Valid effects whose text JSON can carry only as an escape are still sent (and,
    not being rememberable by their JSON text, judged every time)."""
    backend = Backend("com.example.kit.surrogate")

    @backend.intercept("tool.before")
    def edit(request: InterceptRequest) -> Any:
        return ModifyEffect(target="input", operation="merge", value={"note": "\ud800"})

    for n in range(2):
        message = intercept(tool_before(f"s{n}"), ["modify"])
        message["params"]["capabilities"]["modify"] = {"input": {"replace": False, "merge": True}}
        out = backend.handle_sync(line(message))
        assert out is not None and b"\\ud800" in out
        response = emitted(official_schema, out, INTERCEPT_RESPONSE)
        assert response["result"]["effects"] == [
            {"type": "modify", "target": "input", "operation": "merge", "value": {"note": "\ud800"}}
        ]


def test_id_mismatch_is_invalid_params_even_for_a_valid_event(
    kit: tuple[Backend, list[Any]], official_schema: SchemaCheck
) -> None:
    backend, seen = kit
    response = call(
        backend, intercept(tool_before("evt_x", "rm -rf /"), id="evt_y"), official_schema
    )
    assert error_of(response) == (-32602, "evt_y")
    assert "deny" not in json.dumps(response)
    assert seen == []


@pytest.mark.parametrize(
    "event_type",
    [
        "tool.error",
        "prompt.submitted",
        "other",
        "tool.exploded",
        "session.end",
        "file.changed",
        "x",
    ],
)
def test_unsupported_event(
    kit: tuple[Backend, list[Any]], official_schema: SchemaCheck, event_type: str
) -> None:
    backend, seen = kit
    response = call(backend, intercept(tool_before("u1", type=event_type)), official_schema)
    assert error_of(response) == (-32002, "u1")
    assert seen == []


def test_interceptable_event_without_handler_is_unsupported(
    kit: tuple[Backend, list[Any]], official_schema: SchemaCheck
) -> None:
    backend, _ = kit
    assert error_of(call(backend, intercept(turn_start("t1")), official_schema)) == (-32002, "t1")


# --------------------------------------------------------------------- handler failures and effects


def test_handler_exception_is_backend_internal_error_without_its_text(
    kit: tuple[Backend, list[Any]], official_schema: SchemaCheck, caplog: pytest.LogCaptureFixture
) -> None:
    backend, _ = kit
    with caplog.at_level(logging.WARNING, logger="ahp_protocol.server"):
        out = backend.handle_sync(line(intercept(tool_before("boom1", "boom"))))
    assert out is not None and SECRET.encode() not in out and b"database" not in out
    assert error_of(emitted(official_schema, out)) == (-32004, "boom1")
    assert "RuntimeError" in caplog.text and SECRET not in caplog.text


@pytest.mark.parametrize(
    ("command", "effects"),
    [
        ("allow-me", ["deny"]),  # allow is legal at tool.before but not advertised
        ("grant-myself", ["deny"]),  # the handler widened request.capabilities: no effect
        ("bad-shape", ["deny"]),  # unknown member in a strict effect object
        ("not-an-effect", ["deny"]),
        ("string", ["deny"]),
        ("as-generator", ["deny"]),  # message not advertised
    ],
)
def test_effects_the_request_does_not_allow_are_never_sent(
    kit: tuple[Backend, list[Any]], official_schema: SchemaCheck, command: str, effects: list[str]
) -> None:
    backend, _ = kit
    out = backend.handle_sync(line(intercept(tool_before("fx", command), effects)))
    response = emitted(official_schema, out)
    assert error_of(response) == (-32603, "fx")
    assert out is not None
    assert b'"result"' not in out and b'"type"' not in out and b'"allow"' not in out


def test_advertised_allow_is_sent(
    kit: tuple[Backend, list[Any]], official_schema: SchemaCheck
) -> None:
    backend, _ = kit
    response = call(
        backend,
        intercept(tool_before("al", "allow-me"), ["deny", "allow"]),
        official_schema,
        INTERCEPT_RESPONSE,
    )
    assert response["result"]["effects"] == [{"type": "allow"}]


def test_effect_illegal_at_the_event(
    kit: tuple[Backend, list[Any]], official_schema: SchemaCheck
) -> None:
    """modify is advertised (for the input), but the output is no target at tool.before."""
    backend, _ = kit
    message = intercept(tool_before("ill", "modify-output"), ["deny", "modify"])
    message["params"]["capabilities"]["modify"] = {"input": {"replace": True, "merge": False}}
    out = backend.handle_sync(line(message))
    assert error_of(emitted(official_schema, out)) == (-32603, "ill")
    assert out is not None and b'"modify"' not in out


# --------------------------------------------------------------------- notifications


def test_observe_notification_runs_handlers_and_is_not_answered(
    kit: tuple[Backend, list[Any]],
) -> None:
    backend, seen = kit
    assert backend.handle_sync(line(observe(session_end("s1")))) is None
    assert backend.handle_sync(line(observe(tool_before("s2")))) is None
    assert seen == [("observe", "session.end", "s1"), ("observe", "tool.before", "s2")]


def test_every_matching_observer_runs_in_order() -> None:
    backend = Backend("com.example.observers")
    calls: list[str] = []
    backend.observe("session.end")(lambda e: calls.append("exact"))
    backend.observe("*")(lambda e: calls.append("star"))
    backend.observe("tool.*")(lambda e: calls.append("tool"))
    assert backend.handle_sync(line(observe(session_end()))) is None
    assert calls == ["exact", "star"]


NOTIFICATIONS: list[tuple[str, Any]] = [
    ("wrong-version", observe(session_end("n1"), version="0.1")),
    ("no-params", {"jsonrpc": "2.0", "method": "hooks/observe"}),
    ("params-array", {"jsonrpc": "2.0", "method": "hooks/observe", "params": []}),
    ("params-string", {"jsonrpc": "2.0", "method": "hooks/observe", "params": "x"}),
    ("event-invalid", observe(_without(session_end("n2"), "outcome"))),
    ("event-harness-missing", observe(_without(session_end("n3"), "harness"))),
    ("unknown-type", observe(session_end("n4", type="tool.error"))),
    ("intercept-without-id", _without(intercept(tool_before("n5", "rm -rf /")), "id")),
    ("unknown-method", {"jsonrpc": "2.0", "method": "hooks/whatever", "params": {}}),
    ("capabilities", {"jsonrpc": "2.0", "method": "hooks/capabilities", "params": {}}),
    ("configuration", {"jsonrpc": "2.0", "method": "hooks/configuration", "params": {}}),
    ("bad-jsonrpc", {"jsonrpc": "1.0", "method": "hooks/observe", "params": {}}),
    ("no-jsonrpc", {"method": "hooks/observe"}),
    ("handler-raises", observe(session_end("n6", extensions={"com.example.test": {"raise": 1}}))),
]


@pytest.mark.parametrize(
    "message", [m for _, m in NOTIFICATIONS], ids=[n for n, _ in NOTIFICATIONS]
)
def test_notifications_are_never_answered(
    kit: tuple[Backend, list[Any]], message: Any, caplog: pytest.LogCaptureFixture
) -> None:
    backend, seen = kit
    with caplog.at_level(logging.WARNING, logger="ahp_protocol.server"):
        assert backend.handle_sync(line(message)) is None
    assert seen == []
    assert SECRET not in caplog.text


# --------------------------------------------------------------------- hooks/configuration


def test_configuration(kit: tuple[Backend, list[Any]], official_schema: SchemaCheck) -> None:
    backend, _ = kit
    response = call(
        backend, configuration_request("cfg"), official_schema, "configuration-response.schema.json"
    )
    assert response["id"] == "cfg"
    assert response["result"] == {
        "protocolVersion": "draft",
        "configuration": {"subscriptions": CONFIGURATION},
    }


def test_configuration_errors(kit: tuple[Backend, list[Any]], official_schema: SchemaCheck) -> None:
    backend, _ = kit
    extra = configuration_request(1, event={"type": "x"})
    assert error_of(call(backend, extra, official_schema)) == (-32602, 1)
    missing = _without(configuration_request(2), "params", "protocolVersion")
    assert error_of(call(backend, missing, official_schema)) == (-32602, 2)
    wrong = configuration_request(3, protocolVersion="0.1")
    response = call(backend, wrong, official_schema)
    assert error_of(response) == (-32001, 3)
    assert response["error"]["data"] == {"supported": ["draft"]}


def test_configuration_is_copied_and_checked() -> None:
    subscriptions = [dict(CONFIGURATION[0])]
    backend = Backend("com.example.cfg", configuration=subscriptions)
    subscriptions[0]["timeoutMs"] = 1
    assert backend.configuration is not None and backend.configuration[0]["timeoutMs"] == 1500
    for bad in (
        [],
        [{"mode": "intercept"}],
        [{**CONFIGURATION[0], "events": ["session.end"]}],
        [{**CONFIGURATION[0], "timeoutMs": 0}],
        [{**CONFIGURATION[1], "content": None}],
        [{**CONFIGURATION[1], "events": ["nope"]}],
        [{**CONFIGURATION[1], "mode": "watch"}],
    ):
        with pytest.raises(ValueError):
            Backend("com.example.cfg", configuration=bad)


def test_configuration_is_judged_by_the_registration_rules() -> None:
    """Default subscriptions meet the rules a registration's subscriptions meet (one
    copy of them), and the error names the path and what to fix."""
    cases = [
        ({**CONFIGURATION[1], "timeoutMs": 1000}, "configuration[0]: observe subscriptions"),
        ({**CONFIGURATION[0], "scope": "managed"}, 'configuration[0]: scope "managed"'),
        ({**CONFIGURATION[0], "content": {"default": "all"}}, "configuration[0].content.default"),
        ({**CONFIGURATION[0], "events": ["tool.before", "tool.before"]}, "duplicate selector"),
    ]
    for subscription, message in cases:
        with pytest.raises(ValueError, match=re.escape(message)):
            Backend("com.example.cfg", configuration=[subscription])


# --------------------------------------------------------------------- what transports call


def test_transports_answer_through_the_public_respond() -> None:
    """``respond``/``respond_sync`` give a transport the line and whether it was a parse
    error (HTTP's 400), with the frame limit it serves under; ``Reply`` is public."""
    import anyio
    from ahp_protocol.server import Reply
    from ahp_protocol.server import backend as kit

    backend, _ = make_backend()
    bad = backend.respond_sync(b"{not json")
    assert isinstance(bad, Reply) and bad.parse_error and bad.body is not None
    assert json.loads(bad.body)["error"]["code"] == -32700
    message = line(intercept(tool_before("r1", "ls")))
    ok = backend.respond_sync(message)
    assert not ok.parse_error and ok.body == backend.handle_sync(message)
    assert anyio.run(backend.respond, message) == ok
    small = backend.respond_sync(message, max_frame_bytes=16)
    assert small.parse_error and small.body is not None
    assert json.loads(small.body)["error"]["data"] == {"reason": "frame too large"}
    framing = kit.parse_error_reply("record cut off by end of input")
    assert framing.parse_error and framing.body is not None
    assert json.loads(framing.body)["id"] is None
    assert kit.InterceptResult is not Any  # the authoring type is checked by mypy


# --------------------------------------------------------------------- registration


def test_registration_errors() -> None:
    backend = Backend("com.example.reg")
    backend.intercept("tool.before")(lambda r: None)
    with pytest.raises(ValueError):
        backend.intercept("tool.before")
    for selector in ("session.end", "file.*", "tool.error", "tool", "tool.*.x", ""):
        with pytest.raises(ValueError):
            backend.intercept(selector)
    with pytest.raises(ValueError):
        backend.observe("prompt.submitted")
    for name in ("guard", "", "com..x", "1com.example"):
        with pytest.raises(ValueError):
            Backend(name)
    with pytest.raises(ValueError):
        Backend("com.example.x", max_frame_bytes=0)


def test_decorators_return_the_function() -> None:
    backend = Backend("com.example.deco")

    def handler(request: InterceptRequest) -> None:
        return None

    assert backend.intercept("tool.before")(handler) is handler
    assert backend.observe("*")(print) is print


# --------------------------------------------------------------------- async handlers


@pytest.mark.anyio
async def test_async_handlers(official_schema: SchemaCheck) -> None:
    import anyio

    backend = Backend("com.example.async")
    observed: list[str] = []

    @backend.intercept("tool.before")
    async def guard(request: InterceptRequest) -> Any:
        await anyio.sleep(0)
        if request.tool_input.get("command") == "boom":
            raise RuntimeError(SECRET)
        return DenyEffect(reason="async")

    @backend.observe("*")
    async def record(event: dict[str, Any]) -> None:
        await anyio.sleep(0)
        observed.append(event["id"])

    assert backend.needs_event_loop
    out = await backend.handle(line(intercept(tool_before("a1"))))
    assert emitted(official_schema, out, INTERCEPT_RESPONSE)["result"]["effects"][0]["reason"] == (
        "async"
    )
    out = await backend.handle(line(intercept(tool_before("a2", "boom"))))
    assert out is not None and SECRET.encode() not in out
    assert error_of(emitted(official_schema, out)) == (-32004, "a2")
    assert await backend.handle(line(observe(session_end("a3")))) is None
    assert observed == ["a3"]


def test_handle_sync_runs_async_handlers(official_schema: SchemaCheck) -> None:
    backend = Backend("com.example.async.sync")

    @backend.intercept("tool.before")
    async def guard(request: InterceptRequest) -> Any:
        return [DenyEffect(reason="from a coroutine")]

    response = call(backend, intercept(tool_before("as1")), official_schema, INTERCEPT_RESPONSE)
    assert response["result"]["effects"] == [{"type": "deny", "reason": "from a coroutine"}]


@pytest.mark.anyio
async def test_sync_backend_via_async_handle(
    kit: tuple[Backend, list[Any]], official_schema: SchemaCheck
) -> None:
    backend, _ = kit
    assert not backend.needs_event_loop
    out = await backend.handle(line(intercept(tool_before("h1", "rm -rf /"))))
    assert emitted(official_schema, out, INTERCEPT_RESPONSE)["result"]["effects"][0]["type"] == (
        "deny"
    )


# --------------------------------------------------------------------- robustness


def test_lone_surrogate_id_is_echoed_as_valid_json(
    kit: tuple[Backend, list[Any]], official_schema: SchemaCheck
) -> None:
    backend, _ = kit
    out = backend.handle_sync(b'{"jsonrpc":"2.0","id":"\\ud800","method":"nope"}')
    assert out is not None
    out.decode("utf-8")  # valid UTF-8 on the wire
    assert error_of(emitted(official_schema, out)) == (-32601, "\ud800")


@pytest.mark.parametrize("rid", ["evt-é-1", "e\u2028x\U0001f600", 'q"\\'])
@pytest.mark.parametrize("command", ["ls", "rm -rf /"])
def test_success_lines_are_compact_json(rid: str, command: str) -> None:
    backend, _ = make_backend()
    out = backend.handle_sync(line(intercept(tool_before(rid, command))))
    effects = (
        [{"type": "deny", "reason": "No recursive deletes.", "code": "com.example.rm_rf"}]
        if "rm" in command
        else []
    )
    expected = {
        "jsonrpc": "2.0",
        "id": rid,
        "result": {"protocolVersion": "draft", "effects": effects},
    }
    text = json.dumps(expected, ensure_ascii=False, separators=(",", ":"))
    assert out == text.encode("utf-8") + b"\n"


def _check_any_output(backend: Backend, official_schema: SchemaCheck, raw: bytes) -> None:
    out = backend.handle_sync(raw)
    if out is None:
        return
    emitted(official_schema, out)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(raw=st.binary(max_size=300))
def test_random_bytes_never_crash(official_schema: SchemaCheck, raw: bytes) -> None:
    backend, _ = make_backend(CONFIGURATION)
    _check_any_output(backend, official_schema, raw)


JSON_SCALARS = st.none() | st.booleans() | st.integers() | st.text(max_size=8)
JSON_VALUES = st.recursive(
    JSON_SCALARS,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=8,
)


def _mutated(
    draw: st.DrawFn,
    message: dict[str, Any],
    paths: list[tuple[str, ...]],
    times: int,
    values: st.SearchStrategy[Any],
) -> dict[str, Any]:
    """``message`` with the part at a drawn path removed or replaced, ``times`` times."""
    for _ in range(times):
        path = draw(st.sampled_from(paths))
        target: Any = message
        for key in path[:-1]:
            target = target.get(key) if isinstance(target, dict) else None
        if not isinstance(target, dict):
            continue
        if draw(st.booleans()):
            target.pop(path[-1], None)
        else:
            target[path[-1]] = draw(values)
    return message


@st.composite
def messages(draw: st.DrawFn) -> dict[str, Any]:
    """Near-valid messages: a real request or notification with parts replaced or removed."""
    base = draw(
        st.sampled_from(
            [
                intercept(tool_before("m1", "rm -rf /")),
                intercept(tool_before("m2", "boom")),
                intercept(tool_after("m3"), ["message"]),
                observe(session_end("m4")),
                configuration_request("m5"),
            ]
        )
    )
    message: dict[str, Any] = json.loads(json.dumps(base))
    paths = [
        ("id",),
        ("jsonrpc",),
        ("method",),
        ("params",),
        ("params", "protocolVersion"),
        ("params", "event"),
        ("params", "capabilities"),
        ("params", "state"),
        ("params", "event", "type"),
        ("params", "event", "id"),
    ]
    return _mutated(draw, message, paths, draw(st.integers(0, 3)), JSON_VALUES)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(message=messages())
def test_mutated_messages_never_crash(
    official_schema: SchemaCheck, message: dict[str, Any]
) -> None:
    backend, _ = make_backend(CONFIGURATION)
    raw = json.dumps(message).encode()
    out = backend.handle_sync(raw)
    if "id" not in message and isinstance(message.get("method"), str):
        assert out is None  # a notification is never answered
    if out is not None:
        response = emitted(official_schema, out)
        assert SECRET not in json.dumps(response)


# --------------------------------------------------------------------- the memo
# Verdicts on a grant, a state and an event type are remembered, and so are accepted
# effect models. Whatever arrives, a warm backend must answer exactly as one that never
# saw a request.

WARM_UP = [
    intercept(tool_before("warm1", "ls")),
    intercept(tool_before("warm2", "rm -rf /")),
    intercept(
        tool_before("warm3", "ls"),
        ["deny", "allow"],
        state={"candidate": None, "permission": "none"},
    ),
    intercept(tool_after("warm4"), ["message"]),
]


def _warm() -> tuple[Backend, list[Any]]:
    backend, seen = make_backend(CONFIGURATION)
    for message in WARM_UP:
        assert backend.handle_sync(line(message)) is not None
    seen.clear()
    return backend, seen


def _answers_like_a_fresh_backend(raw: bytes) -> None:
    warm, warm_seen = _warm()
    fresh, fresh_seen = make_backend(CONFIGURATION)
    assert warm.handle_sync(raw) == fresh.handle_sync(raw)
    assert warm_seen == fresh_seen


@pytest.mark.parametrize(
    "build", [b for _, b in INVALID_PARAMS], ids=[n for n, _ in INVALID_PARAMS]
)
def test_a_warm_backend_refuses_invalid_params_alike(build: Callable[[], dict[str, Any]]) -> None:
    _answers_like_a_fresh_backend(line(build()))


@st.composite
def near_usual_requests(draw: st.DrawFn) -> dict[str, Any]:
    """A request like the warm-up ones, often with a part deep inside replaced or removed."""
    base = draw(st.sampled_from(WARM_UP))
    message: dict[str, Any] = json.loads(json.dumps(base))
    command = draw(st.sampled_from(["ls", "rm -rf /", "allow-me", "boom", "as-dict", "huge"]))
    if message["params"]["event"]["type"] == "tool.before":
        message["params"]["event"]["tool"]["input"]["command"] = command
    paths = [
        ("id",),
        ("jsonrpc",),
        ("result",),
        ("params", "protocolVersion"),
        ("params", "capabilities"),
        ("params", "capabilities", "effects"),
        ("params", "state"),
        ("params", "state", "permission"),
        ("params", "event", "id"),
        ("params", "event", "type"),
        ("params", "event", "time"),
        ("params", "event", "harness"),
        ("params", "event", "path"),
        ("params", "event", "tool", "origin"),
        ("params", "event", "tool", "input"),
        ("params", "event", "tool", "mcp"),
        ("params", "event", "call", "id"),
        ("params", "event", "outcome"),
    ]
    values = JSON_VALUES | st.sampled_from(["warm1", "draft", "none"])
    return _mutated(draw, message, paths, draw(st.integers(0, 2)), values)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(message=near_usual_requests())
def test_a_warm_backend_answers_like_a_fresh_one(message: dict[str, Any]) -> None:
    _answers_like_a_fresh_backend(json.dumps(message).encode())


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(message=messages())
def test_a_warm_backend_answers_any_message_like_a_fresh_one(message: dict[str, Any]) -> None:
    _answers_like_a_fresh_backend(json.dumps(message).encode())


# --------------------------------------------------------------------- import hygiene


def test_importing_the_kit_does_not_import_transports() -> None:
    code = (
        "import sys, ahp_protocol.server\n"
        "heavy = [m for m in ('uvicorn', 'httpx', 'anyio', 'pydantic') if m in sys.modules]\n"
        "print(','.join(heavy))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=30, check=True
    )
    assert done.stdout.strip() == ""

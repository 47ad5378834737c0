"""Effects: strict shapes, per-event legality, advertisement, value types, atomicity.

Also the chain state (``params.state``) that carries inject effects and candidates.
Every rejection asserts the failure class (``kind``) and the JSON path.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
from ahp_protocol.wire import effects as fx
from ahp_protocol.wire.catalogue import INTERCEPTABLE, OBSERVE_ONLY
from ahp_protocol.wire.errors import WireErrors
from ahp_protocol.wire.state import Candidate, State, _is_plain_state, parse_state
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

Schema = Callable[[str, Any], list[str]]


def text_part(pid: str = "p1", text: str = "hello") -> dict[str, Any]:
    return {"id": pid, "kind": "text", "mediaType": "text/plain", "selection": "body", "text": text}


def message(mid: str = "m1", role: str = "user", text: str = "hello") -> dict[str, Any]:
    return {"id": mid, "role": role, "parts": [text_part(f"{mid}-p", text)]}


MESSAGES = [message()]
TEXT_PARTS = [text_part()]
METADATA_MESSAGES = [
    {
        "id": "m1",
        "role": "assistant",
        "parts": [{"id": "p1", "kind": "text", "mediaType": "text/plain", "selection": "metadata"}],
    }
]


def official_defs() -> dict[str, Any]:
    text = resources.files("agenthooksprotocol").joinpath("schemas.json").read_text("utf-8")
    for schema in json.loads(text):
        if schema["$id"].endswith("/capabilities.schema.json"):
            defs: dict[str, Any] = schema["$defs"]
            return defs
    raise AssertionError("capabilities schema missing")


def bounds(event: str) -> dict[str, Any]:
    props = official_defs()[event]["allOf"][1]["properties"]
    return {
        "effects": frozenset(props["effects"]["items"]["enum"]),
        "modify": frozenset(props.get("modify", {}).get("propertyNames", {}).get("enum", ())),
        "flow": frozenset(
            props.get("flow", {})
            .get("properties", {})
            .get("operations", {})
            .get("items", {})
            .get("enum", ())
        ),
    }


FULL_CAPS: dict[str, Any] = {
    "effects": ["deny", "allow", "ask", "modify", "message", "return", "flow", "inject"],
    "modify": {t: {"replace": True, "merge": True} for t in sorted(fx.MODIFY_TARGET_NAMES)},
    "flow": {
        "operations": ["stop", "continue"],
        "remainingContinuations": 2,
        "continuationCount": 0,
    },
    "inject": {"context": {"append": True, "deliverAt": ["now", "next_turn"]}},
}


def modify_value(event: str, target: str) -> Any:
    kind = fx.modify_value_kind(event, target)
    return {
        "object": {"command": "ls"},
        "messages": MESSAGES,
        "text_parts": TEXT_PARTS,
        "workspace": {"cwd": "/repo"},
        "form_answers": {"name": "new"},
    }[kind or "object"]


RETURN_VALUES: dict[str, Any] = {
    "json": {"exitCode": 0, "stdout": "ok"},
    "messages": [message(role="assistant")],
    "text_parts": TEXT_PARTS,
    "elicit_result": {"action": "accept", "content": {"name": "x"}},
}


def sample_effect(event: str, kind: str) -> dict[str, Any]:
    """A shape-valid effect of ``kind`` that is well-typed for ``event`` where it is legal."""
    if kind == "deny":
        return {"type": "deny", "reason": "no"}
    if kind in ("allow", "ask"):
        return {"type": kind}
    if kind == "message":
        return {"type": "message", "text": "hi"}
    if kind == "modify":
        targets = sorted(fx.MODIFY_TARGETS.get(event) or {"input"})
        target = targets[0]
        return {
            "type": "modify",
            "target": target,
            "operation": "merge",
            "value": modify_value(event, target),
        }
    if kind == "return":
        value = RETURN_VALUES[fx.RETURN_VALUE.get(event, "json")]
        return {"type": "return", "value": value}
    if kind == "flow":
        return {"type": "flow", "operation": "stop", "reason": "enough"}
    assert kind == "inject"
    return {
        "type": "inject",
        "target": "context",
        "operation": "append",
        "deliverAt": "now",
        "value": MESSAGES,
    }


def rejected(
    event: str, effects: Any, caps: Any = None, **kw: Any
) -> fx.EffectError:  # the error check_effects raises
    with pytest.raises(fx.EffectError) as info:
        fx.check_effects(event, FULL_CAPS if caps is None else caps, effects, **kw)
    return info.value


# --------------------------------------------------------------------------- tables


def test_tables_cover_exactly_the_interceptable_events() -> None:
    for table in (fx.EVENT_EFFECTS, fx.MODIFY_TARGETS, fx.FLOW_OPERATIONS):
        assert set(table) == set(INTERCEPTABLE)
    assert len(fx.EVENT_EFFECTS) == 19
    assert {
        "deny",
        "allow",
        "ask",
        "modify",
        "message",
        "return",
        "flow",
        "inject",
    } == fx.EFFECT_TYPES


@pytest.mark.parametrize("event", INTERCEPTABLE)
def test_tables_match_the_official_capabilities_defs(event: str) -> None:
    expected = bounds(event)
    assert fx.EVENT_EFFECTS[event] == expected["effects"]
    assert fx.MODIFY_TARGETS[event] == expected["modify"]
    assert fx.FLOW_OPERATIONS[event] == expected["flow"]
    # a block exists exactly where its effect is allowed
    assert bool(fx.MODIFY_TARGETS[event]) == ("modify" in fx.EVENT_EFFECTS[event])
    assert bool(fx.FLOW_OPERATIONS[event]) == ("flow" in fx.EVENT_EFFECTS[event])


def test_draft_summary_rules_hold_in_the_tables() -> None:
    assert {e for e, names in fx.EVENT_EFFECTS.items() if "return" in names} == set(fx.RETURN_VALUE)
    assert set(fx.RETURN_VALUE) == {
        "tool.before",
        "model.request.before",
        "context.compact.before",
        "user.elicitation.request",
    }
    assert {e for e, ops in fx.FLOW_OPERATIONS.items() if "continue" in ops} == {
        "turn.finish.before",
        "tool.after",
    }
    assert all("message" in names for names in fx.EVENT_EFFECTS.values())
    assert fx.modify_value_kind("user.message.outbound", "content") == "messages"
    assert fx.modify_value_kind("user.elicitation.result", "content") == "form_answers"
    assert fx.modify_value_kind("tool.before", "nope") is None


# --------------------------------------------------------------------------- parse_effect

PARSE_CASES: list[tuple[str, Any, str, str]] = [
    ("not-an-object", ["deny"], "malformed", "effects[0]"),
    ("type-missing", {"reason": "x"}, "malformed", "effects[0]"),
    ("type-not-string", {"type": 5}, "malformed", "effects[0].type"),
    ("type-unknown", {"type": "unknown"}, "unknown", "effects[0].type"),
    ("type-extension", {"type": "com.example.effect"}, "unknown", "effects[0].type"),
    ("deny-unknown-field", {"type": "deny", "reason": "x", "why": 1}, "unknown", "effects[0]"),
    ("deny-reason-missing", {"type": "deny"}, "malformed", "effects[0]"),
    ("deny-reason-empty", {"type": "deny", "reason": ""}, "malformed", "effects[0].reason"),
    ("deny-reason-number", {"type": "deny", "reason": 3}, "malformed", "effects[0].reason"),
    (
        "deny-code-bad",
        {"type": "deny", "reason": "x", "code": "no dots"},
        "malformed",
        "effects[0].code",
    ),
    (
        "deny-code-null",
        {"type": "deny", "reason": "x", "code": None},
        "malformed",
        "effects[0].code",
    ),
    (
        "deny-extensions-key",
        {"type": "deny", "reason": "x", "extensions": {"plain": 1}},
        "malformed",
        "effects[0].extensions",
    ),
    ("allow-unknown-field", {"type": "allow", "reason": "x"}, "unknown", "effects[0]"),
    ("ask-unknown-field", {"type": "ask", "x": None}, "unknown", "effects[0]"),
    ("message-text-missing", {"type": "message"}, "malformed", "effects[0]"),
    ("message-text-number", {"type": "message", "text": 1}, "malformed", "effects[0].text"),
    (
        "modify-target-unknown",
        {"type": "modify", "target": "parts", "operation": "replace", "value": []},
        "unknown",
        "effects[0].target",
    ),
    (
        "modify-target-number",
        {"type": "modify", "target": 1, "operation": "replace", "value": []},
        "malformed",
        "effects[0].target",
    ),
    (
        "modify-operation-unknown",
        {"type": "modify", "target": "input", "operation": "append", "value": {}},
        "unknown",
        "effects[0].operation",
    ),
    (
        "modify-value-missing",
        {"type": "modify", "target": "input", "operation": "merge"},
        "malformed",
        "effects[0]",
    ),
    (
        "modify-path-field",
        {"type": "modify", "target": "input", "operation": "merge", "value": {}, "path": "/a"},
        "unknown",
        "effects[0]",
    ),
    ("return-value-missing", {"type": "return"}, "malformed", "effects[0]"),
    (
        "modify-prompt-object",
        {"type": "modify", "target": "prompt", "operation": "merge", "value": {"text": "hello"}},
        "malformed",
        "effects[0].value",
    ),
    (
        "modify-instructions-messages",
        {"type": "modify", "target": "instructions", "operation": "merge", "value": MESSAGES},
        "malformed",
        "effects[0].value[0]",
    ),
    (
        "modify-input-list",
        {"type": "modify", "target": "input", "operation": "replace", "value": []},
        "malformed",
        "effects[0].value",
    ),
    (
        "modify-workspace-empty",
        {"type": "modify", "target": "workspace", "operation": "replace", "value": {}},
        "malformed",
        "effects[0].value",
    ),
    (
        "modify-content-string",
        {"type": "modify", "target": "content", "operation": "replace", "value": "x"},
        "malformed",
        "effects[0].value",
    ),
    (
        "modify-content-nested-answer",
        {"type": "modify", "target": "content", "operation": "merge", "value": {"a": {"b": 1}}},
        "malformed",
        "effects[0].value.a",
    ),
    ("flow-operation-missing", {"type": "flow", "reason": "stop"}, "malformed", "effects[0]"),
    (
        "flow-operation-unknown",
        {"type": "flow", "operation": "pause"},
        "unknown",
        "effects[0].operation",
    ),
    ("stop-reason-missing", {"type": "flow", "operation": "stop"}, "malformed", "effects[0]"),
    (
        "stop-reason-empty",
        {"type": "flow", "operation": "stop", "reason": ""},
        "malformed",
        "effects[0].reason",
    ),
    (
        "stop-with-instruction",
        {"type": "flow", "operation": "stop", "reason": "r", "instruction": "i"},
        "unknown",
        "effects[0]",
    ),
    (
        "continue-instruction-empty",
        {"type": "flow", "operation": "continue", "instruction": ""},
        "malformed",
        "effects[0].instruction",
    ),
    (
        "continue-instruction-null",
        {"type": "flow", "operation": "continue", "instruction": None},
        "malformed",
        "effects[0].instruction",
    ),
    (
        "continue-with-reason",
        {"type": "flow", "operation": "continue", "reason": "r"},
        "unknown",
        "effects[0]",
    ),
    (
        "inject-operation-unknown",
        {
            "type": "inject",
            "target": "context",
            "operation": "replace",
            "deliverAt": "now",
            "value": MESSAGES,
        },
        "unknown",
        "effects[0].operation",
    ),
    (
        "inject-target-unknown",
        {
            "type": "inject",
            "target": "history",
            "operation": "append",
            "deliverAt": "now",
            "value": MESSAGES,
        },
        "unknown",
        "effects[0].target",
    ),
    (
        "inject-deliver-unknown",
        {
            "type": "inject",
            "target": "context",
            "operation": "append",
            "deliverAt": "later",
            "value": MESSAGES,
        },
        "unknown",
        "effects[0].deliverAt",
    ),
    (
        "inject-deliver-python-name",
        {
            "type": "inject",
            "target": "context",
            "operation": "append",
            "deliver_at": "now",
            "value": MESSAGES,
        },
        "unknown",
        "effects[0]",
    ),
    (
        "inject-target-missing",
        {"type": "inject", "operation": "append", "deliverAt": "now", "value": MESSAGES},
        "malformed",
        "effects[0]",
    ),
    (
        "inject-value-object",
        {
            "type": "inject",
            "target": "context",
            "operation": "append",
            "deliverAt": "now",
            "value": {},
        },
        "malformed",
        "effects[0].value",
    ),
    (
        "inject-value-bad-message",
        {
            "type": "inject",
            "target": "context",
            "operation": "append",
            "deliverAt": "now",
            "value": [{"id": "m1", "role": "user", "parts": [{"id": "p", "kind": "text"}]}],
        },
        "malformed",
        "effects[0].value[0].parts[0]",
    ),
]


@pytest.mark.parametrize(
    ("obj", "kind", "path"), [c[1:] for c in PARSE_CASES], ids=[c[0] for c in PARSE_CASES]
)
def test_parse_effect_rejects(obj: Any, kind: str, path: str) -> None:
    with pytest.raises(fx.EffectError) as info:
        fx.parse_effect(obj)
    assert info.value.kind == kind
    assert info.value.path == path or info.value.path.startswith(path + ".")
    if kind != "malformed" or path.endswith(("type", "target", "operation", "deliverAt")):
        assert info.value.path == path


@pytest.mark.parametrize(
    ("obj", "kind", "path"), [c[1:] for c in PARSE_CASES], ids=[c[0] for c in PARSE_CASES]
)
def test_parse_cases_agree_with_the_official_effect_schema(
    obj: Any, kind: str, path: str, official_schema: Schema
) -> None:
    assert official_schema("effect.schema.json", obj), "the official schema accepts it too"


def test_value_checks_can_be_deferred_to_the_event() -> None:
    prompt = {"type": "modify", "target": "prompt", "operation": "merge", "value": {"a": 1}}
    parsed = fx.parse_effect(prompt, check_values=False)
    assert isinstance(parsed, fx.ModifyEffect) and parsed.value == {"a": 1}
    # content: a list or an object is fine without an event, only the event decides
    for value in (MESSAGES, {"name": "x"}):
        fx.parse_effect(
            {"type": "modify", "target": "content", "operation": "merge", "value": value}
        )


def test_parse_effect_uses_the_given_path() -> None:
    with pytest.raises(fx.EffectError) as info:
        fx.parse_effect({"type": "deny", "reason": ""}, path="result.effects[4]")
    assert info.value.path == "result.effects[4].reason"
    moved = info.value.at("x")
    assert isinstance(moved, fx.EffectError) and moved.kind == "malformed"
    assert moved.path == "x.result.effects[4].reason"


def test_reasons_never_quote_values() -> None:
    secret = "sk-live-SECRET"
    for obj in (
        {"type": "deny", "reason": "x", "code": secret},
        {"type": secret},
        {"type": "modify", "target": secret, "operation": "merge", "value": {}},
        {"type": "flow", "operation": "stop", "reason": 5, "x": secret},
    ):
        with pytest.raises(fx.EffectError) as info:
            fx.parse_effect(obj)
        assert secret not in str(info.value)


# --------------------------------------------------------------------------- authoring / wire


def test_authoring_is_pleasant_and_type_is_always_on_the_wire() -> None:
    assert fx.DenyEffect(reason="x", code="com.example.y").to_wire() == {
        "type": "deny",
        "reason": "x",
        "code": "com.example.y",
    }
    assert fx.AllowEffect().to_wire() == {"type": "allow"}
    assert fx.AskEffect().to_wire() == {"type": "ask"}
    assert fx.ModifyEffect(target="input", operation="merge", value={"a": 1}).to_wire() == {
        "type": "modify",
        "target": "input",
        "operation": "merge",
        "value": {"a": 1},
    }
    assert fx.FlowStopEffect(reason="r").to_wire() == {
        "type": "flow",
        "operation": "stop",
        "reason": "r",
    }
    assert fx.FlowContinueEffect().to_wire() == {"type": "flow", "operation": "continue"}
    inject = fx.InjectEffect(deliver_at="next_turn", value=MESSAGES)
    assert inject.to_wire() == {
        "type": "inject",
        "target": "context",
        "operation": "append",
        "deliverAt": "next_turn",
        "value": MESSAGES,
    }


def test_null_is_a_literal_value_but_absent_optionals_stay_absent() -> None:
    assert fx.ReturnEffect(value=None).to_wire() == {"type": "return", "value": None}
    merge = fx.ModifyEffect(target="input", operation="merge", value={"timeout": None})
    assert merge.to_wire()["value"] == {"timeout": None}
    assert fx.parse_effect({"type": "return", "value": None}) == fx.ReturnEffect(value=None)
    assert "code" not in fx.DenyEffect(reason="x", code=None).to_wire()
    assert "instruction" not in fx.FlowContinueEffect(instruction=None).to_wire()
    assert "extensions" not in fx.DenyEffect(reason="x", extensions=None).to_wire()


def test_constants_are_written_however_the_model_was_built() -> None:
    assert fx.FlowStopEffect(reason="r").to_wire() == {
        "type": "flow",
        "operation": "stop",
        "reason": "r",
    }
    constructed = fx.InjectEffect.model_construct(deliver_at="now", value=[])
    assert constructed.to_wire() == {
        "type": "inject",
        "target": "context",
        "operation": "append",
        "deliverAt": "now",
        "value": [],
    }


def test_effect_models_are_strict_and_frozen() -> None:
    with pytest.raises(ValueError):
        fx.DenyEffect(reason="x", severity="high")  # type: ignore[call-arg]
    with pytest.raises(ValueError):
        fx.DenyEffect(reason="")
    deny = fx.DenyEffect(reason="x")
    with pytest.raises(ValueError):
        deny.reason = "y"  # type: ignore[misc]
    with pytest.raises(ValueError):
        fx.ReturnEffect(value=float("nan"))
    with pytest.raises(ValueError):
        fx.ModifyEffect(target="input", operation="merge", value={1: "non-string key"})


def test_inject_rejects_bad_messages_at_construction() -> None:
    with pytest.raises(ValueError):
        fx.InjectEffect(deliver_at="now", value=[{"id": "m", "role": "robot", "parts": []}])


def test_content_models_are_accepted_as_values() -> None:
    from ahp_protocol.wire import content

    models = content.parse_messages(MESSAGES)
    inject = fx.InjectEffect(deliver_at="now", value=models)
    assert inject.value == MESSAGES
    modify = fx.ModifyEffect(target="prompt", operation="replace", value=tuple(models))
    assert modify.to_wire()["value"] == MESSAGES


def test_effects_to_wire_takes_models_and_dicts() -> None:
    wire = fx.effects_to_wire([fx.AllowEffect(), {"type": "message", "text": "hi"}])
    assert wire == [{"type": "allow"}, {"type": "message", "text": "hi"}]
    with pytest.raises(fx.EffectError) as info:
        fx.effects_to_wire([fx.AllowEffect(), {"type": "message"}])
    assert info.value.path == "effects[1]"


# --------------------------------------------------------------------------- legality (19 x 8)

LEGALITY = [(event, kind) for event in INTERCEPTABLE for kind in fx.EFFECT_TYPE_ORDER]


@pytest.mark.parametrize(("event", "kind"), LEGALITY, ids=[f"{e}-{k}" for e, k in LEGALITY])
def test_effect_legality_per_event(event: str, kind: str) -> None:
    effect = sample_effect(event, kind)
    if kind in fx.EVENT_EFFECTS[event]:
        [parsed] = fx.check_effects(event, FULL_CAPS, [effect])
        assert parsed.to_wire() == effect
    else:
        error = rejected(event, [effect])
        assert (error.kind, error.path) == ("illegal", "effects[0].type")


@pytest.mark.parametrize("event", (*OBSERVE_ONLY[:3], "not.an.event"))
def test_no_effect_is_legal_outside_interceptable_events(event: str) -> None:
    assert fx.check_effects(event, FULL_CAPS, []) == []
    error = rejected(event, [{"type": "message", "text": "x"}])
    assert (error.kind, error.path) == ("illegal", "effects[0].type")
    assert error.reason == "is not allowed at this event"  # no name echoed from the request


def test_an_illegal_effect_names_its_interceptable_event() -> None:
    error = rejected("tool.after", [{"type": "deny", "reason": "x"}])
    assert (error.kind, error.reason) == ("illegal", "is not allowed at tool.after")


@pytest.mark.parametrize(
    "grant",
    [
        None,
        "deny",
        ["deny"],
        {"effects": "deny"},
        {"effects": ["modify"], "modify": ["input"]},
        {"effects": ["flow"], "flow": ["stop"]},
        {"effects": ["flow"], "flow": {"operations": "stop"}},
    ],
    ids=repr,
)
def test_a_grant_of_the_wrong_shape_grants_nothing(grant: Any) -> None:
    """``Grants`` reads whatever it is given; a part of the wrong shape grants nothing
    (and never raises), so the effect it would have granted is unadvertised."""

    class NoWire:  # an object whose to_wire gives no object at all
        def to_wire(self) -> Any:
            return grant

    for read in (grant, NoWire()):
        grants = fx.Grants(read)
        assert grants.effects <= {"modify", "flow"}
        assert dict(grants.modify) == {} and grants.flow_operations() == frozenset()
    for effect in ({"type": "deny", "reason": "x"}, sample_effect("tool.before", "flow")):
        with pytest.raises(fx.EffectError) as info:
            fx.check_effects("tool.before", grant, [effect])
        assert info.value.kind == "unadvertised"


MODIFY_LEGALITY = [
    (event, target)
    for event in INTERCEPTABLE
    if "modify" in fx.EVENT_EFFECTS[event]
    for target in sorted(fx.MODIFY_TARGET_NAMES)
]


@pytest.mark.parametrize(
    ("event", "target"), MODIFY_LEGALITY, ids=[f"{e}-{t}" for e, t in MODIFY_LEGALITY]
)
def test_modify_target_legality_per_event(event: str, target: str) -> None:
    effect = {
        "type": "modify",
        "target": target,
        "operation": "merge",
        "value": modify_value(event, target),
    }
    if target in fx.MODIFY_TARGETS[event]:
        assert len(fx.check_effects(event, FULL_CAPS, [effect])) == 1
    else:
        error = rejected(event, [effect])
        assert (error.kind, error.path) == ("illegal", "effects[0].target")


FLOW_LEGALITY = [
    (event, op)
    for event in INTERCEPTABLE
    if "flow" in fx.EVENT_EFFECTS[event]
    for op in ("stop", "continue")
]


@pytest.mark.parametrize(("event", "op"), FLOW_LEGALITY, ids=[f"{e}-{o}" for e, o in FLOW_LEGALITY])
def test_flow_operation_legality_per_event(event: str, op: str) -> None:
    effect = {"type": "flow", "operation": op, **({"reason": "r"} if op == "stop" else {})}
    if op in fx.FLOW_OPERATIONS[event]:
        assert len(fx.check_effects(event, FULL_CAPS, [effect])) == 1
    else:
        error = rejected(event, [effect])
        assert (error.kind, error.path) == ("illegal", "effects[0].operation")


# --------------------------------------------------------------------------- advertisement


def caps(*effects: str, **blocks: Any) -> dict[str, Any]:
    return {"effects": list(effects), **blocks}


ADVERTISED_CASES: list[tuple[str, str, Any, dict[str, Any], str]] = [
    ("empty-caps", "tool.before", {"type": "deny", "reason": "x"}, caps(), "effects[0].type"),
    (
        "deny-not-advertised",
        "tool.before",
        {"type": "deny", "reason": "x"},
        caps("allow"),
        "effects[0].type",
    ),
    (
        "message-not-advertised",
        "session.start",
        {"type": "message", "text": "x"},
        caps("inject", inject={"context": {"append": True, "deliverAt": ["now"]}}),
        "effects[0].type",
    ),
    (
        "modify-target-not-advertised",
        "tool.before",
        {"type": "modify", "target": "input", "operation": "merge", "value": {}},
        caps("modify", modify={"output": {"replace": True, "merge": True}}),
        "effects[0].target",
    ),
    (
        "modify-operation-not-advertised",
        "tool.before",
        {"type": "modify", "target": "input", "operation": "replace", "value": {}},
        caps("modify", modify={"input": {"replace": False, "merge": True}}),
        "effects[0].operation",
    ),
    (
        "flow-stop-not-advertised",
        "tool.after",
        {"type": "flow", "operation": "stop", "reason": "r"},
        caps(
            "flow",
            flow={"operations": ["continue"], "remainingContinuations": 1, "continuationCount": 0},
        ),
        "effects[0].operation",
    ),
    (
        "continue-allowance-exhausted",
        "turn.finish.before",
        {"type": "flow", "operation": "continue"},
        caps(
            "flow",
            flow={"operations": ["continue"], "remainingContinuations": 0, "continuationCount": 3},
        ),
        "effects[0].operation",
    ),
    (
        "continue-allowance-missing",
        "turn.finish.before",
        {"type": "flow", "operation": "continue"},
        caps("flow", flow={"operations": ["continue"]}),
        "effects[0].operation",
    ),
    (
        "inject-deliver-not-advertised",
        "tool.after",
        sample_effect("tool.after", "inject"),
        caps("inject", inject={"context": {"append": True, "deliverAt": ["next_turn"]}}),
        "effects[0].deliverAt",
    ),
]


@pytest.mark.parametrize(
    ("event", "effect", "grant", "path"),
    [c[1:] for c in ADVERTISED_CASES],
    ids=[c[0] for c in ADVERTISED_CASES],
)
def test_unadvertised_effects_are_rejected(
    event: str, effect: Any, grant: dict[str, Any], path: str
) -> None:
    error = rejected(event, [effect], grant)
    assert (error.kind, error.path) == ("unadvertised", path)


def test_advertised_effects_pass_with_exact_grants() -> None:
    grant = caps(
        "deny",
        "modify",
        "flow",
        "inject",
        modify={"input": {"replace": False, "merge": True}},
        flow={"operations": ["stop"]},
        inject={"context": {"append": True, "deliverAt": ["now"]}},
    )
    effects = [
        sample_effect("tool.before", "modify"),
        sample_effect("tool.before", "flow"),
        sample_effect("tool.before", "inject"),
        {"type": "deny", "reason": "x", "code": "com.example.policy.force_push"},
    ]
    parsed = fx.check_effects("tool.before", grant, effects)
    assert [e.type for e in parsed] == ["modify", "flow", "inject", "deny"]


def test_continue_with_allowance_left_passes_and_several_continues_share_it() -> None:
    grant = caps(
        "flow",
        flow={"operations": ["continue"], "remainingContinuations": 1, "continuationCount": 0},
    )
    effects = [
        {"type": "flow", "operation": "continue", "instruction": "a"},
        {"type": "flow", "operation": "continue"},
    ]
    assert len(fx.check_effects("tool.after", grant, effects)) == 2


def test_capabilities_model_is_accepted_as_the_grant() -> None:
    from ahp_protocol.wire.capabilities import parse_capabilities

    grant = parse_capabilities(caps("deny"))
    assert fx.check_effects("tool.before", grant, [{"type": "deny", "reason": "x"}])
    error = rejected("tool.before", [{"type": "ask"}], grant)
    assert error.kind == "unadvertised"


def test_check_order_shape_then_legality_then_advertisement() -> None:
    # malformed beats illegal: a bad deny at an event that forbids deny
    error = rejected("session.start", [{"type": "deny", "reason": ""}], caps())
    assert (error.kind, error.path) == ("malformed", "effects[0].reason")
    # illegal beats unadvertised: return at task.change.before, not advertised either
    error = rejected("task.change.before", [{"type": "return", "value": 1}], caps("deny"))
    assert (error.kind, error.path) == ("illegal", "effects[0].type")
    # modify: target legality before target advertisement
    error = rejected(
        "tool.before",
        [{"type": "modify", "target": "output", "operation": "merge", "value": MESSAGES}],
        caps("modify", modify={"input": {"replace": True, "merge": True}}),
    )
    assert (error.kind, error.path) == ("illegal", "effects[0].target")
    # advertisement before value type
    error = rejected(
        "tool.before",
        [{"type": "modify", "target": "input", "operation": "replace", "value": "not an object"}],
        caps("modify", modify={"input": {"replace": False, "merge": True}}),
    )
    assert (error.kind, error.path) == ("unadvertised", "effects[0].operation")
    # flow: operation legality before advertisement
    error = rejected(
        "tool.before",
        [{"type": "flow", "operation": "continue"}],
        caps("flow", flow={"operations": ["stop"]}),
    )
    assert (error.kind, error.path) == ("illegal", "effects[0].operation")


# --------------------------------------------------------------------------- value types

VALUE_CASES: list[tuple[str, str, dict[str, Any], str]] = [
    ("output-primitive", "tool.after", {"target": "output", "value": "result"}, "effects[0].value"),
    (
        "output-object",
        "tool.after",
        {"target": "output", "value": {"text": "x"}},
        "effects[0].value",
    ),
    (
        "output-text-parts",
        "tool.after",
        {"target": "output", "value": TEXT_PARTS},
        "effects[0].value[0]",
    ),
    (
        "prompt-object",
        "turn.start",
        {"target": "prompt", "value": {"text": "hello"}},
        "effects[0].value",
    ),
    (
        "request-null",
        "model.request.before",
        {"target": "request", "value": None},
        "effects[0].value",
    ),
    (
        "response-bad-role",
        "model.response.after",
        {"target": "response", "value": [message(role="robot")]},
        "effects[0].value[0].role",
    ),
    (
        "instructions-messages",
        "context.compact.before",
        {"target": "instructions", "value": MESSAGES},
        "effects[0].value[0]",
    ),
    (
        "summary-string",
        "context.compact.after",
        {"target": "summary", "value": "short"},
        "effects[0].value",
    ),
    ("input-list", "tool.before", {"target": "input", "value": []}, "effects[0].value"),
    (
        "input-string",
        "tool.permission.request",
        {"target": "input", "value": "{}"},
        "effects[0].value",
    ),
    (
        "workspace-empty",
        "workspace.change.before",
        {"target": "workspace", "value": {}},
        "effects[0].value",
    ),
    (
        "workspace-cwd-empty",
        "workspace.change.before",
        {"target": "workspace", "value": {"cwd": ""}},
        "effects[0].value.cwd",
    ),
    (
        "workspace-roots-dup",
        "workspace.change.before",
        {"target": "workspace", "value": {"workspaceRoots": ["/a", "/a"]}},
        "effects[0].value.workspaceRoots",
    ),
    (
        "workspace-roots-item",
        "workspace.change.before",
        {"target": "workspace", "value": {"workspaceRoots": [""]}},
        "effects[0].value.workspaceRoots[0]",
    ),
    (
        "workspace-list",
        "workspace.change.before",
        {"target": "workspace", "value": ["/a"]},
        "effects[0].value",
    ),
    (
        "outbound-content-object",
        "user.message.outbound",
        {"target": "content", "value": {"name": "x"}},
        "effects[0].value",
    ),
    (
        "elicitation-content-list",
        "user.elicitation.result",
        {"target": "content", "value": MESSAGES},
        "effects[0].value",
    ),
    (
        "elicitation-content-nested",
        "user.elicitation.result",
        {"target": "content", "value": {"nested": {"x": 1}}},
        "effects[0].value.nested",
    ),
    (
        "elicitation-content-number-list",
        "user.elicitation.result",
        {"target": "content", "value": {"n": [1]}},
        "effects[0].value.n",
    ),
]


@pytest.mark.parametrize(
    ("event", "fields", "path"), [c[1:] for c in VALUE_CASES], ids=[c[0] for c in VALUE_CASES]
)
def test_modify_value_type_by_target(event: str, fields: dict[str, Any], path: str) -> None:
    effect = {"type": "modify", "operation": "merge", **fields}
    error = rejected(event, [effect])
    assert error.kind == "malformed"
    assert error.path == path or error.path.startswith(path + ".")


@pytest.mark.parametrize(
    ("event", "target", "value"),
    [
        ("user.message.outbound", "content", [message(role="assistant")]),
        ("user.elicitation.result", "content", {"name": "new", "n": 2, "ok": True, "tags": ["a"]}),
        ("workspace.change.before", "workspace", {"cwd": "/r", "workspaceRoots": ["/r", "/s"]}),
        ("tool.before", "input", {}),
        ("context.compact.after", "summary", []),
    ],
)
def test_modify_values_of_the_right_type_pass(event: str, target: str, value: Any) -> None:
    effect = {"type": "modify", "target": target, "operation": "replace", "value": value}
    [parsed] = fx.check_effects(event, FULL_CAPS, [effect])
    assert isinstance(parsed, fx.ModifyEffect) and parsed.value == value


RETURN_CASES: list[tuple[str, str, Any, str]] = [
    ("model-request-object", "model.request.before", {"text": "x"}, "effects[0].value"),
    ("model-request-parts", "model.request.before", TEXT_PARTS, "effects[0].value[0]"),
    ("compact-messages", "context.compact.before", MESSAGES, "effects[0].value[0]"),
    ("compact-string", "context.compact.before", "summary", "effects[0].value"),
    ("elicit-not-object", "user.elicitation.request", "accept", "effects[0].value"),
    ("elicit-action-missing", "user.elicitation.request", {"content": {}}, "effects[0].value"),
    (
        "elicit-action-unknown",
        "user.elicitation.request",
        {"action": "maybe"},
        "effects[0].value.action",
    ),
    (
        "elicit-content-on-decline",
        "user.elicitation.request",
        {"action": "decline", "content": {"a": "b"}},
        "effects[0].value.content",
    ),
    (
        "elicit-content-nested",
        "user.elicitation.request",
        {"action": "accept", "content": {"a": {"b": 1}}},
        "effects[0].value.content.a",
    ),
    (
        "elicit-meta-not-object",
        "user.elicitation.request",
        {"action": "cancel", "_meta": 1},
        "effects[0].value._meta",
    ),
]


@pytest.mark.parametrize(
    ("event", "value", "path"), [c[1:] for c in RETURN_CASES], ids=[c[0] for c in RETURN_CASES]
)
def test_return_value_kind_per_event(event: str, value: Any, path: str) -> None:
    error = rejected(event, [{"type": "return", "value": value}])
    assert error.kind == "malformed"
    assert error.path == path or error.path.startswith(path + ".")


@pytest.mark.parametrize(
    ("event", "value"),
    [
        ("tool.before", None),
        ("tool.before", "plain text result"),
        ("tool.before", [1, {"a": [True, None]}]),
        ("model.request.before", [message(role="assistant")]),
        ("context.compact.before", TEXT_PARTS),
        ("user.elicitation.request", {"action": "decline"}),
        ("user.elicitation.request", {"action": "accept", "content": {"x": 1.5}, "_meta": {}}),
    ],
)
def test_return_values_of_the_right_kind_pass(event: str, value: Any) -> None:
    [parsed] = fx.check_effects(event, FULL_CAPS, [{"type": "return", "value": value}])
    assert isinstance(parsed, fx.ReturnEffect) and parsed.value == value


# --------------------------------------------------------------------------- edit context

ELICIT_EDIT = {
    "type": "modify",
    "target": "content",
    "operation": "merge",
    "value": {"name": "new"},
}


@pytest.mark.parametrize(
    ("context", "ok"),
    [
        ({"mode": "form", "action": "accept", "current": {"content": {"name": "old"}}}, True),
        ({"mode": "form", "action": "decline", "current": {"content": {}}}, False),
        ({"mode": "form", "action": "cancel"}, False),
        ({"mode": "url", "action": "accept", "current": {"content": {}}}, False),
        (None, True),
    ],
)
def test_elicitation_content_needs_an_accepted_form(context: Any, ok: bool) -> None:
    if ok:
        assert fx.check_effects(
            "user.elicitation.result", FULL_CAPS, [ELICIT_EDIT], edit_context=context
        )
    else:
        error = rejected("user.elicitation.result", [ELICIT_EDIT], edit_context=context)
        assert (error.kind, error.path) == ("illegal", "effects[0].target")


def test_whole_list_replace_over_withheld_text_is_illegal_but_merge_is_fine() -> None:
    context = {"current": {"response": METADATA_MESSAGES}}
    replace = {"type": "modify", "target": "response", "operation": "replace", "value": MESSAGES}
    error = rejected("model.response.after", [replace], edit_context=context)
    assert (error.kind, error.path) == ("illegal", "effects[0].operation")
    merge = {**replace, "operation": "merge"}
    assert fx.check_effects("model.response.after", FULL_CAPS, [merge], edit_context=context)
    visible = {"current": {"response": MESSAGES}}
    assert fx.check_effects("model.response.after", FULL_CAPS, [replace], edit_context=visible)
    gap = [
        {
            "id": "g",
            "kind": "text",
            "mediaType": "text/plain",
            "selection": "body",
            "gap": {"reason": "x"},
        }
    ]
    summary = {"type": "modify", "target": "summary", "operation": "replace", "value": TEXT_PARTS}
    error = rejected("context.compact.after", [summary], edit_context={"current": {"summary": gap}})
    assert error.kind == "illegal"


def test_object_merge_needs_a_current_object() -> None:
    merge = {"type": "modify", "target": "input", "operation": "merge", "value": {"a": 1}}
    error = rejected("tool.before", [merge], edit_context={"current": {"input": "raw"}})
    assert (error.kind, error.path) == ("illegal", "effects[0].operation")
    assert fx.check_effects(
        "tool.before", FULL_CAPS, [merge], edit_context={"current": {"input": {}}}
    )


def test_url_elicitation_result_carries_no_content() -> None:
    value = {"type": "return", "value": {"action": "accept", "content": {"a": "b"}}}
    error = rejected("user.elicitation.request", [value], edit_context={"mode": "url"})
    assert (error.kind, error.path) == ("illegal", "effects[0].value.content")
    assert fx.check_effects(
        "user.elicitation.request", FULL_CAPS, [value], edit_context={"mode": "form"}
    )


# --------------------------------------------------------------------------- atomicity


def test_missing_effects_is_empty_and_non_lists_are_malformed() -> None:
    assert fx.check_effects("tool.before", caps("deny"), None) == []
    assert fx.check_effects("tool.before", caps("deny"), []) == []
    for bad in ({"type": "deny", "reason": "x"}, "deny", 1):
        error = rejected("tool.before", bad)
        assert (error.kind, error.path) == ("malformed", "effects")


def test_a_deny_with_an_unknown_field_rejects_the_whole_response() -> None:
    effects = [
        {"type": "message", "text": "shown?"},
        {"type": "deny", "reason": "x", "severity": "high"},
    ]
    error = rejected("tool.before", effects)
    assert (error.kind, error.path) == ("unknown", "effects[1]")
    assert "severity" in error.reason


def test_a_valid_deny_after_an_invalid_element_is_not_salvaged() -> None:
    deny = {"type": "deny", "reason": "Force pushes are prohibited"}
    for bad, kind, path in (
        ({"type": "unknown"}, "unknown", "effects[0].type"),
        ({"type": "deny", "reason": "x", "extra": True}, "unknown", "effects[0]"),
        ({"type": "message"}, "malformed", "effects[0]"),
        ({"type": "ask"}, "illegal", "effects[0].type"),
        ({"type": "message", "text": "x"}, "unadvertised", "effects[0].type"),
    ):
        with pytest.raises(fx.EffectError) as info:
            fx.check_effects("config.change.before", caps("deny"), [bad, deny])
        assert (info.value.kind, info.value.path) == (kind, path)


def test_the_first_invalid_element_is_reported() -> None:
    effects = [{"type": "message", "text": "ok"}, {"type": "nope"}, {"type": "deny", "reason": ""}]
    error = rejected("tool.before", effects)
    assert (error.kind, error.path) == ("unknown", "effects[1].type")


def test_models_and_dicts_mix_and_come_back_as_models() -> None:
    handler_output = [
        fx.DenyEffect(reason="x", code="com.example.y"),
        {"type": "message", "text": "hi"},
        fx.ModifyEffect(target="input", operation="merge", value={"a": 1}),
    ]
    parsed = fx.check_effects("tool.before", FULL_CAPS, handler_output)
    assert parsed == [
        fx.DenyEffect(reason="x", code="com.example.y"),
        fx.MessageEffect(text="hi"),
        fx.ModifyEffect(target="input", operation="merge", value={"a": 1}),
    ]
    error = rejected("tool.before", [fx.AllowEffect(), fx.AskEffect()], caps("allow"))
    assert (error.kind, error.path) == ("unadvertised", "effects[1].type")


def test_unvalidated_models_are_checked_again() -> None:
    sneaky = fx.DenyEffect.model_construct(reason="")
    error = rejected("tool.before", [sneaky])
    assert (error.kind, error.path) == ("malformed", "effects[0].reason")
    weird = fx.ReturnEffect.model_construct(value=object())
    assert rejected("tool.before", [weird]).kind == "malformed"


def test_golden_atomic_fixtures(fixtures_dir: Path) -> None:
    # atomic-unknown: a displayable message before an unknown effect is not salvaged
    doc = json.loads((fixtures_dir / "http" / "atomic-unknown.invalid.json").read_text())
    error = rejected("tool.before", doc["result"]["effects"])
    assert (error.kind, error.path) == ("unknown", "effects[1].type")
    doc = json.loads((fixtures_dir / "http" / "flow-inject.valid.json").read_text())
    parsed = fx.check_effects("tool.after", FULL_CAPS, doc["result"]["effects"])
    assert fx.effects_to_wire(parsed) == doc["result"]["effects"]


# --------------------------------------------------------------------------- round trip

JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
REVERSE_DNS = st.from_regex(r"\A[a-z][a-z0-9]{0,5}(\.[a-z][a-z0-9_-]{0,5}){1,3}\Z")
NON_EMPTY = st.text(min_size=1, max_size=20)
ROLES = st.sampled_from(["system", "developer", "user", "assistant", "tool"])
MESSAGE_LISTS = st.lists(
    st.builds(message, st.text(min_size=1, max_size=5), ROLES, st.text(max_size=10)), max_size=2
)

EFFECTS = st.one_of(
    st.builds(
        fx.DenyEffect,
        reason=NON_EMPTY,
        code=st.none() | REVERSE_DNS,
        extensions=st.none() | st.dictionaries(REVERSE_DNS, JSON, max_size=2),
    ),
    st.just(fx.AllowEffect()),
    st.just(fx.AskEffect()),
    st.builds(fx.MessageEffect, text=st.text(max_size=20)),
    st.builds(
        fx.ModifyEffect,
        target=st.just("input"),
        operation=st.sampled_from(["replace", "merge"]),
        value=st.dictionaries(st.text(max_size=8), JSON, max_size=4),
    ),
    st.builds(
        fx.ModifyEffect,
        target=st.sampled_from(["prompt", "request", "response", "output", "content"]),
        operation=st.sampled_from(["replace", "merge"]),
        value=MESSAGE_LISTS,
    ),
    st.builds(
        fx.ModifyEffect,
        target=st.sampled_from(["instructions", "summary"]),
        operation=st.sampled_from(["replace", "merge"]),
        value=st.lists(
            st.builds(text_part, st.text(min_size=1, max_size=5), st.text()), max_size=3
        ),
    ),
    st.builds(
        fx.ModifyEffect,
        target=st.just("workspace"),
        operation=st.sampled_from(["replace", "merge"]),
        value=st.fixed_dictionaries({"cwd": NON_EMPTY}),
    ),
    st.builds(
        fx.ModifyEffect,
        target=st.just("content"),
        operation=st.sampled_from(["replace", "merge"]),
        value=st.dictionaries(
            st.text(max_size=8),
            st.text() | st.integers() | st.booleans() | st.lists(st.text(), max_size=2),
            max_size=3,
        ),
    ),
    st.builds(fx.ReturnEffect, value=JSON),
    st.builds(fx.FlowStopEffect, reason=NON_EMPTY),
    st.builds(fx.FlowContinueEffect, instruction=st.none() | NON_EMPTY),
    st.builds(
        lambda deliver_at, value: fx.InjectEffect(deliver_at=deliver_at, value=value),
        st.sampled_from(["now", "next_turn"]),
        MESSAGE_LISTS,
    ),
)


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(EFFECTS)
def test_round_trip(effect: Any) -> None:
    wire = effect.to_wire()
    assert json.loads(json.dumps(wire)) == wire
    assert fx.parse_effect(wire) == effect
    assert fx.parse_effect(wire).to_wire() == wire


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
@given(effect=EFFECTS)
def test_wire_output_validates_against_the_official_effect_schema(
    effect: Any, official_schema: Schema
) -> None:
    assert official_schema("effect.schema.json", effect.to_wire()) == []


@pytest.mark.parametrize("event", INTERCEPTABLE)
def test_checked_effects_validate_in_an_official_intercept_response(
    event: str, official_schema: Schema
) -> None:
    effects = [
        sample_effect(event, k) for k in fx.EFFECT_TYPE_ORDER if k in fx.EVENT_EFFECTS[event]
    ]
    parsed = fx.check_effects(event, FULL_CAPS, effects)
    response = {
        "jsonrpc": "2.0",
        "id": "evt1",
        "result": {"protocolVersion": "draft", "effects": fx.effects_to_wire(parsed)},
    }
    assert official_schema("intercept-response.schema.json", response) == []


# --------------------------------------------------------------------------- state


def test_state_defaults_and_wire_form() -> None:
    assert State().to_wire() == {"permission": "none", "candidate": None}
    state = State(
        permission="ask",
        candidate=Candidate(value=None, provenance={"by": "x"}),
        flow="continue",
        instructions=["Check tests."],
        injections=[fx.InjectEffect(deliver_at="now", value=MESSAGES)],
    )
    wire = state.to_wire()
    assert wire["candidate"] == {"value": None, "provenance": {"by": "x"}}
    assert wire["injections"][0]["deliverAt"] == "now"
    assert parse_state(wire) == state
    assert parse_state(wire).to_wire() == wire


def test_state_keeps_unknown_fields() -> None:
    wire = {"permission": "allow", "candidate": {"value": 1, "note": "x"}, "future": {"a": 1}}
    assert parse_state(wire).to_wire() == wire


STATE_CASES: list[tuple[str, Any, str]] = [
    ("not-object", [], "$"),
    ("permission-missing", {"candidate": None}, "$"),
    ("candidate-missing", {"permission": "none"}, "$"),
    ("permission-unknown", {"permission": "maybe", "candidate": None}, "permission"),
    ("candidate-value-missing", {"permission": "none", "candidate": {}}, "candidate"),
    ("candidate-not-object", {"permission": "none", "candidate": 5}, "candidate"),
    (
        "provenance-not-object",
        {"permission": "none", "candidate": {"value": 1, "provenance": "me"}},
        "candidate.provenance",
    ),
    ("flow-unknown", {"permission": "none", "candidate": None, "flow": "pause"}, "flow"),
    (
        "instruction-empty",
        {"permission": "none", "candidate": None, "instructions": [""]},
        "instructions[0]",
    ),
    (
        "injection-not-inject",
        {"permission": "none", "candidate": None, "injections": [{"type": "allow"}]},
        "injections[0].type",
    ),
    (
        "injection-unknown-field",
        {
            "permission": "none",
            "candidate": None,
            "injections": [{**sample_effect("tool.before", "inject"), "x": 1}],
        },
        "injections[0]",
    ),
]


@pytest.mark.parametrize(
    ("obj", "path"), [c[1:] for c in STATE_CASES], ids=[c[0] for c in STATE_CASES]
)
def test_parse_state_rejects(obj: Any, path: str) -> None:
    with pytest.raises(WireErrors) as info:
        parse_state(obj)
    assert info.value.first.path == path


def test_candidate_value_is_typed_per_event() -> None:
    wire = {"permission": "none", "candidate": {"value": {"not": "messages"}}}
    assert parse_state(wire, event_type="tool.before").candidate is not None
    with pytest.raises(WireErrors) as info:
        parse_state(wire, event_type="model.request.before")
    assert info.value.first.path == "candidate.value"
    ok = {"permission": "none", "candidate": {"value": TEXT_PARTS}}
    assert parse_state(ok, event_type="context.compact.before").candidate == Candidate(
        value=TEXT_PARTS
    )


def test_state_validates_in_an_official_intercept_request(
    fixtures_dir: Path, official_schema: Schema
) -> None:
    request = json.loads((fixtures_dir / "http" / "intercept-request.valid.json").read_text())
    request["params"]["event"].setdefault("harness", {"name": "h", "version": "1"})
    for state in (
        State(),
        State(permission="deny", candidate=Candidate(value={"stdout": "x"}), flow="stop"),
        State(
            instructions=["again"],
            injections=[fx.InjectEffect(deliver_at="next_turn", value=MESSAGES)],
        ),
    ):
        doc = copy.deepcopy(request)
        doc["params"]["state"] = state.to_wire()
        assert official_schema("intercept-request.schema.json", doc) == []


def test_modify_construction_defers_the_target_value_type_to_checking() -> None:
    odd = fx.ModifyEffect(target="prompt", operation="merge", value={"text": "x"})
    error = rejected("turn.start", [odd])
    assert (error.kind, error.path) == ("malformed", "effects[0].value")
    with pytest.raises(fx.EffectError):
        fx.parse_effect(odd.to_wire())


def _state_valid_at(event_type: str, obj: Any) -> bool:
    try:
        parse_state(obj, event_type=event_type)
    except WireErrors:
        return False
    return True


STATE_SHAPES: list[Any] = [
    {"permission": permission, "candidate": candidate, **extra}
    for permission in ("none", "allow", "ask", "deny", "maybe", "", 1, None)
    for candidate in (None, {"value": None}, {"value": {"content": []}}, 0)
    for extra in ({}, {"flow": "stop"}, {"com.example.note": 1})
] + [{"permission": "none"}, {"candidate": None}, {}, [], None, "none"]


def test_a_plain_state_is_exactly_permission_and_a_null_candidate() -> None:
    """``_is_plain_state`` lets a backend skip the state models: what it calls plain is
    valid at every interceptable event, and it calls plain exactly that shape."""
    plain = 0
    for obj in STATE_SHAPES:
        expected = (
            isinstance(obj, dict)
            and set(obj) == {"permission", "candidate"}
            and obj["candidate"] is None
            and obj["permission"] in ("none", "allow", "ask", "deny")
        )
        assert _is_plain_state(obj) is expected, obj
        if expected:
            plain += 1
            assert all(_state_valid_at(event, obj) for event in INTERCEPTABLE), obj
    assert plain == 4

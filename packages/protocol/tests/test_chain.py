"""Folding rules of the chain (draft §5.4), one table row per rule, plus properties."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from ahp_protocol.client import FailureClass, OperationalFailure
from ahp_protocol.client.chain import (
    SYNTHETIC_DENIAL_REASON,
    Candidate,
    ChainState,
    apply_modify,
    edited,
    fold_response,
    same_json,
)
from ahp_protocol.wire.effects import (
    AllowEffect,
    AskEffect,
    DenyEffect,
    FlowContinueEffect,
    FlowStopEffect,
    InjectEffect,
    MessageEffect,
    ModifyEffect,
    ReturnEffect,
)
from hypothesis import given
from hypothesis import strategies as st

TOOL_BEFORE: dict[str, Any] = {
    "id": "evt_1",
    "source": "urn:uuid:5b7de29e-a9e0-41a8-bf26-d94b05f0656d",
    "type": "tool.before",
    "time": "2026-08-24T08:51:14Z",
    "harness": {"name": "test", "version": "1"},
    "session": {"id": "sess_1"},
    "tool": {
        "name": "shell",
        "kind": "shell",
        "input": {"command": "ls", "cwd": "/w"},
        "origin": "native",
    },
    "call": {"id": "call_1"},
    "path": "native",
}

MESSAGE = {
    "id": "m2",
    "role": "user",
    "parts": [
        {"id": "p2", "kind": "text", "mediaType": "text/plain", "selection": "body", "text": "more"}
    ],
}


def fold(state: ChainState, *effects: Any) -> ChainState:
    return fold_response(state, list(effects), backend="com.example.a", subscription=0)


def start(**kw: Any) -> ChainState:
    return ChainState(event=copy.deepcopy(TOOL_BEFORE), **kw)


@pytest.mark.parametrize(
    ("initial", "effects", "permission"),
    [
        ("none", [], "none"),
        ("none", [AllowEffect()], "allow"),
        ("none", [AskEffect()], "ask"),
        ("none", [AskEffect(), AllowEffect()], "ask"),  # ask survives a later allow
        ("ask", [AllowEffect()], "ask"),  # ... also across interceptors
        ("allow", [AskEffect()], "ask"),
        ("none", [AllowEffect(), DenyEffect(reason="no")], "deny"),  # deny beats allow
        ("ask", [DenyEffect(reason="no")], "deny"),  # deny beats ask
        ("deny", [AskEffect(), AllowEffect()], "deny"),  # ... also an inherited deny
        ("allow", [], "allow"),  # an empty response changes nothing
    ],
)
def test_permission_precedence(initial: Any, effects: list[Any], permission: str) -> None:
    assert fold(start(permission=initial), *effects).permission == permission


def test_deny_records_who_and_is_not_synthetic() -> None:
    state = fold(start(), DenyEffect(reason="Force pushes are prohibited", code="com.example.fp"))
    assert state.stopped
    assert state.denial is not None
    assert (state.denial.reason, state.denial.code) == (
        "Force pushes are prohibited",
        "com.example.fp",
    )
    assert (state.denial.backend, state.denial.subscription, state.denial.synthetic) == (
        "com.example.a",
        0,
        False,
    )


def test_first_deny_of_a_response_is_kept() -> None:
    state = fold(start(), DenyEffect(reason="first"), DenyEffect(reason="second"))
    assert state.denial is not None and state.denial.reason == "first"


def test_a_later_deny_never_replaces_the_recorded_one() -> None:
    first = fold(start(), DenyEffect(reason="first", code="com.example.first"))
    state = fold_response(
        first, [DenyEffect(reason="second")], backend="com.example.b", subscription=1
    )
    assert state.denial == first.denial and state.permission == "deny"


def test_synthetic_denial_is_generic_and_marked() -> None:
    state = start().deny_synthetic("com.example.b", 2)
    assert state.permission == "deny" and state.stopped
    assert state.denial is not None
    assert state.denial.synthetic and state.denial.reason == SYNTHETIC_DENIAL_REASON
    assert (state.denial.backend, state.denial.subscription) == ("com.example.b", 2)


def test_modify_input_replace_and_merge() -> None:
    replaced = fold(
        start(), ModifyEffect(target="input", operation="replace", value={"command": "pwd"})
    )
    assert replaced.event["tool"]["input"] == {"command": "pwd"}
    merged = fold(
        start(), ModifyEffect(target="input", operation="merge", value={"command": "pwd"})
    )
    assert merged.event["tool"]["input"] == {"command": "pwd", "cwd": "/w"}
    assert TOOL_BEFORE["tool"]["input"] == {"command": "ls", "cwd": "/w"}, (
        "the input event is untouched"
    )


def test_modifications_apply_in_order() -> None:
    state = fold(
        start(),
        ModifyEffect(target="input", operation="replace", value={"command": "a"}),
        ModifyEffect(target="input", operation="merge", value={"extra": None}),
    )
    assert state.event["tool"]["input"] == {"command": "a", "extra": None}  # null is a value


def test_change_drops_inherited_candidate_and_allow() -> None:
    inherited = start(permission="allow", candidate=Candidate(value={"stdout": "cached"}))
    state = fold(inherited, ModifyEffect(target="input", operation="merge", value={"command": "x"}))
    assert state.candidate is None
    assert state.permission == "none"
    assert state.event_changed


def test_allow_in_the_same_response_as_a_change_survives() -> None:
    state = fold(
        start(permission="allow"),
        ModifyEffect(target="input", operation="merge", value={"command": "x"}),
        AllowEffect(),
    )
    assert state.permission == "allow"


def test_return_after_change_rebinds_candidate_last_wins() -> None:
    state = fold(
        start(candidate=Candidate(value=1)),
        ModifyEffect(target="input", operation="merge", value={"command": "x"}),
        ReturnEffect(value=2),
        ReturnEffect(value=None),
    )
    assert state.candidate == Candidate(value=None)  # a supplied null is still a candidate


def test_unchanged_event_keeps_inherited_allow_and_candidate() -> None:
    state = fold(start(permission="allow", candidate=Candidate(value=1)), MessageEffect(text="hi"))
    assert (state.permission, state.candidate) == ("allow", Candidate(value=1))
    assert state.messages == ("hi",)


def test_a_modification_that_changes_nothing_keeps_inherited_allow_and_candidate() -> None:
    # Interceptor 1 answered [allow, return]; interceptor 2 merges what is already there.
    first = fold(start(), AllowEffect(), ReturnEffect(value={"stdout": "cached"}))
    assert (first.permission, first.candidate) == ("allow", Candidate(value={"stdout": "cached"}))
    second = fold(first, ModifyEffect(target="input", operation="merge", value={"command": "ls"}))
    assert (second.permission, second.candidate) == ("allow", Candidate(value={"stdout": "cached"}))
    assert not second.event_changed
    assert second.event == TOOL_BEFORE


def test_key_order_is_no_change_but_a_changed_type_is() -> None:
    inherited = start(permission="allow", candidate=Candidate(value=1))
    reordered = {"cwd": "/w", "command": "ls"}
    same = fold(inherited, ModifyEffect(target="input", operation="replace", value=reordered))
    assert (same.permission, same.candidate, same.event_changed) == (
        "allow",
        Candidate(value=1),
        False,
    )
    # A change and its undo in one response leave the event as it was.
    undone = fold(
        inherited,
        ModifyEffect(target="input", operation="merge", value={"command": "rm -rf /"}),
        ModifyEffect(target="input", operation="merge", value={"command": "ls"}),
    )
    assert (undone.permission, undone.candidate) == ("allow", Candidate(value=1))
    # JSON types, not Python's ==: true is not 1, 1 is not 1.0.
    typed = copy.deepcopy(TOOL_BEFORE)
    typed["tool"]["input"] = {"command": "ls", "recursive": True, "limit": 20}
    base = ChainState(event=typed, permission="allow", candidate=Candidate(value=1))
    for value in ({"recursive": 1}, {"limit": 20.0}, {"limit": True}):
        changed = fold(base, ModifyEffect(target="input", operation="merge", value=value))
        assert (changed.permission, changed.candidate) == ("none", None), value
        assert changed.event_changed


def test_messages_and_injections_accumulate_across_interceptors() -> None:
    inject = InjectEffect(deliver_at="now", value=[MESSAGE])
    state = fold(start(), MessageEffect(text="one"), inject)
    state = fold(state, MessageEffect(text="two"), inject)
    assert state.messages == ("one", "two")
    assert len(state.injections) == 2
    assert state.injections[0]["deliverAt"] == "now"
    assert state.wire_state()["injections"] == [dict(i) for i in state.injections]


def test_flow_stop_beats_continue_and_instructions_collect() -> None:
    event = {**copy.deepcopy(TOOL_BEFORE), "type": "tool.after"}
    state = ChainState(event=event)
    state = fold(
        state, FlowContinueEffect(instruction="run tests"), FlowContinueEffect(instruction="lint")
    )
    assert state.flow == "continue" and state.instructions == ("run tests", "lint")
    assert not state.stopped
    state = fold(state, FlowStopEffect(reason="budget"))
    assert state.flow == "stop" and state.flow_reason == "budget" and state.stopped
    state = fold(state, FlowContinueEffect(instruction="again"))
    assert state.flow == "stop"
    assert state.wire_state()["instructions"] == ["run tests", "lint", "again"]


def test_the_first_stop_gives_the_reason() -> None:
    state = ChainState(event={**copy.deepcopy(TOOL_BEFORE), "type": "tool.after"})
    state = fold(state, FlowStopEffect(reason="budget"), FlowStopEffect(reason="later"))
    assert (state.flow, state.flow_reason) == ("stop", "budget")
    assert fold(state, FlowStopEffect(reason="next")).flow_reason == "budget"


def test_wire_state_shape() -> None:
    state = fold(start(), AskEffect(), ReturnEffect(value={"ok": True}))
    assert state.wire_state() == {
        "permission": "ask",
        "candidate": {"value": {"ok": True}},
        "flow": "none",
    }


def test_modification_that_breaks_the_event_is_rejected_whole() -> None:
    before = start()
    with pytest.raises(OperationalFailure) as info:
        fold(before, ModifyEffect(target="input", operation="replace", value="rm -rf /"))
    assert info.value.failure is FailureClass.MALFORMED_EFFECT
    assert info.value.detail == "modification leaves an invalid event"  # fixed, no value
    assert before.event["tool"]["input"] == {"command": "ls", "cwd": "/w"}


def test_target_not_at_this_event_rejects_the_whole_response() -> None:
    before = start(permission="allow")
    with pytest.raises(OperationalFailure) as info:
        fold(
            before,
            ModifyEffect(target="input", operation="replace", value={"command": "x"}),
            ModifyEffect(target="workspace", operation="replace", value={"cwd": "/"}),
        )
    assert info.value.failure is FailureClass.UNADVERTISED_EFFECT
    assert info.value.detail == "modify target not at this event"
    assert before.permission == "allow"  # the state given is never mutated


def test_message_list_targets() -> None:
    turn = {
        "id": "evt_t",
        "source": "urn:x:y",
        "type": "turn.start",
        "time": "2026-08-24T08:51:14Z",
        "harness": {"name": "t", "version": "1"},
        "turn": {"id": "t1"},
        "trigger": "user",
        "items": [
            {
                "id": "m1",
                "role": "user",
                "parts": [
                    {
                        "id": "p1",
                        "kind": "text",
                        "mediaType": "text/plain",
                        "selection": "body",
                        "text": "hi",
                    }
                ],
            }
        ],
    }
    appended = apply_modify(turn, "prompt", "merge", [MESSAGE])
    assert [m["id"] for m in appended["items"]] == ["m1", "m2"]
    replaced = apply_modify(turn, "prompt", "replace", [MESSAGE])
    assert [m["id"] for m in replaced["items"]] == ["m2"]


def test_outbound_content_is_the_message_list() -> None:
    outbound = {
        "id": "evt_o",
        "source": "urn:x:y",
        "type": "user.message.outbound",
        "time": "2026-08-24T08:51:14Z",
        "message": {"messages": [MESSAGE]},
    }
    appended = apply_modify(outbound, "content", "merge", [MESSAGE])
    assert appended["message"]["messages"] == [MESSAGE, MESSAGE]
    assert outbound["message"]["messages"] == [MESSAGE]


def elicitation_result(text: str | None) -> dict[str, Any]:
    part = {"id": "r1", "kind": "text", "mediaType": "text/plain", "selection": "body"}
    elicitation: dict[str, Any] = {"server": "fs", "mode": "form", "action": "accept"}
    if text is not None:
        elicitation["result"] = {**part, "text": text}
    return {
        "id": "evt_e",
        "source": "urn:x:y",
        "type": "user.elicitation.result",
        "time": "2026-08-24T08:51:14Z",
        "harness": {"name": "t", "version": "1"},
        "elicitation": elicitation,
    }


def test_elicitation_content_is_the_answer_object_inside_the_result_text() -> None:
    """Draft §5.2: ``content`` at ``user.elicitation.result`` is the parsed MCP result's
    ``content``; the rest of the result and of its text part stay as they were."""
    event = elicitation_result('{"action":"accept","content":{"answer":"yes","n":1}}')
    state = fold(
        ChainState(event=event),
        ModifyEffect(target="content", operation="merge", value={"answer": "no"}),
    )
    result = state.event["elicitation"]["result"]
    assert json.loads(result["text"]) == {"action": "accept", "content": {"answer": "no", "n": 1}}
    assert {k: v for k, v in result.items() if k != "text"} == {
        "id": "r1",
        "kind": "text",
        "mediaType": "text/plain",
        "selection": "body",
    }
    assert state.event_changed
    assert json.loads(event["elicitation"]["result"]["text"])["content"]["answer"] == "yes"
    replaced = apply_modify(event, "content", "replace", {"other": True})
    assert json.loads(replaced["elicitation"]["result"]["text"])["content"] == {"other": True}
    # A result without answers yet: the merge starts from an empty object.
    empty = apply_modify(elicitation_result('{"action":"accept"}'), "content", "merge", {"a": 1})
    assert json.loads(empty["elicitation"]["result"]["text"])["content"] == {"a": 1}


@pytest.mark.parametrize("text", [None, "not json", "[1, 2]", '"text"'])
def test_elicitation_content_needs_a_form_result_body(text: str | None) -> None:
    with pytest.raises(OperationalFailure) as info:
        apply_modify(elicitation_result(text), "content", "merge", {"a": 1})
    assert info.value.failure is FailureClass.MALFORMED_EFFECT
    assert info.value.detail == "elicitation content edit needs a form result body"


@pytest.mark.parametrize(
    ("current", "value"), [([1], {"a": 1}), ({"a": 1}, [1]), ("text", "more"), (None, {"a": 1})]
)
def test_merge_needs_a_list_onto_a_list_or_an_object_onto_an_object(
    current: Any, value: Any
) -> None:
    """Draft §5.3: merge appends to a list and is shallow on objects, "only when current
    target and value are both objects"; anything else is a malformed effect."""
    with pytest.raises(OperationalFailure) as info:
        edited(current, "merge", value)
    assert info.value.failure is FailureClass.MALFORMED_EFFECT
    assert info.value.detail == "merge value does not fit the target"


@pytest.mark.parametrize(
    ("current", "operation"), [({"a": {}}, "merge"), ([], "merge"), ({}, "replace")]
)
def test_an_edited_target_shares_nothing_with_the_effect_value(
    current: Any, operation: str
) -> None:
    """The effective event owns its values: changing the effect's value afterwards (a
    caller reusing it) never reaches the event."""
    value: Any = [{"nested": ["x"]}] if isinstance(current, list) else {"a": {"nested": ["x"]}}
    result = edited(current, operation, value)
    nested = (value[0] if isinstance(value, list) else value["a"])["nested"]
    nested.append("changed later")
    assert (result[0] if isinstance(result, list) else result["a"]) == {"nested": ["x"]}


def test_a_missing_place_is_created_for_the_target() -> None:
    """``apply_modify`` writes the target at its place (§5.2) even when an enclosing
    object is absent; the fold's revalidation then judges the whole event."""
    sparse = {"type": "workspace.change.before"}
    assert apply_modify(sparse, "workspace", "replace", {"kind": "x"}) == {
        "type": "workspace.change.before",
        "workspace": {"change": {"kind": "x"}},
    }


def test_separately_decoded_equal_values_are_the_same_json() -> None:
    text = '{"s": "a longer text", "n": 123456789, "f": 1.5, "l": [null, true, "x"]}'
    assert same_json(json.loads(text), json.loads(text))
    assert not same_json(json.loads(text), {**json.loads(text), "n": 123456780})


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3)
    ),
    max_leaves=8,
)


@given(
    current=st.dictionaries(st.text(max_size=3), json_values, max_size=4),
    value=st.dictionaries(st.text(max_size=3), json_values, max_size=4),
)
def test_object_merge_is_shallow(current: dict[str, Any], value: dict[str, Any]) -> None:
    merged = edited(current, "merge", value)
    assert set(merged) == set(current) | set(value)
    for key in merged:
        assert merged[key] == (value[key] if key in value else current[key])


@given(current=st.lists(json_values, max_size=4), value=st.lists(json_values, max_size=4))
def test_list_merge_appends_and_replace_substitutes(current: list[Any], value: list[Any]) -> None:
    assert edited(current, "merge", value) == current + value
    assert edited(current, "replace", value) == value


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


@given(current=st.dictionaries(st.text(max_size=3), json_values, max_size=4), data=st.data())
def test_state_survives_exactly_when_the_input_is_unchanged(
    current: dict[str, Any], data: st.DataObject
) -> None:
    """The fold keeps allow and candidate iff the effective input is the same JSON value."""
    event = copy.deepcopy(TOOL_BEFORE)
    event["tool"]["input"] = current
    keys = sorted(current)
    # Either a sub-object of what is there (no change), or arbitrary values (maybe a change).
    picked = data.draw(st.lists(st.sampled_from(keys), unique=True) if keys else st.just([]))
    value = (
        {k: copy.deepcopy(current[k]) for k in picked}
        if data.draw(st.booleans())
        else data.draw(st.dictionaries(st.text(max_size=3), json_values, max_size=3))
    )
    inherited = ChainState(event=event, permission="allow", candidate=Candidate(value=1))
    state = fold(inherited, ModifyEffect(target="input", operation="merge", value=value))
    unchanged = _canonical({**current, **value}) == _canonical(current)
    assert same_json(state.event, event) is unchanged
    assert state.event_changed is not unchanged
    if unchanged:
        assert (state.permission, state.candidate) == ("allow", Candidate(value=1))
    else:
        assert (state.permission, state.candidate) == ("none", None)


@given(a=json_values, b=json_values)
def test_same_json_is_equality_of_the_canonical_json_text(a: Any, b: Any) -> None:
    assert same_json(a, b) is (_canonical(a) == _canonical(b))
    assert same_json(a, copy.deepcopy(a))


def test_every_legal_modify_target_has_a_place_in_its_event() -> None:
    """``MODIFY_TARGETS`` says which targets are legal, ``MODIFY_LOCATIONS`` where each lives:
    two facts, but never a legal target without a place (elicitation content is special)."""
    from ahp_protocol.client.chain import MODIFY_LOCATIONS
    from ahp_protocol.wire.effects import MODIFY_TARGETS

    legal = {(event, target) for event, targets in MODIFY_TARGETS.items() for target in targets}
    assert set(MODIFY_LOCATIONS) | {("user.elicitation.result", "content")} == legal

"""Capabilities and the manifest: coupling rules, per-event bounds, narrowing, discovery.

Every rejection asserts the JSON path, and is cross-checked against the official
schema (which must reject it too); every accepted object validates against it.
"""

from __future__ import annotations

import copy
import itertools
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from ahp_protocol.wire import effects as fx
from ahp_protocol.wire._legality import is_plain_grant_at
from ahp_protocol.wire.capabilities import (
    Capabilities,
    FlowGrant,
    InjectContextGrant,
    InjectGrant,
    ModifyGrant,
    capabilities_for,
    check_capabilities_at,
    parse_capabilities,
)
from ahp_protocol.wire.catalogue import EVENT_TYPES, INTERCEPTABLE, OBSERVE_ONLY
from ahp_protocol.wire.errors import WireErrors
from ahp_protocol.wire.manifest import Manifest, parse_manifest

Schema = Callable[[str, Any], list[str]]

MAXIMAL: dict[str, Any] = {
    "effects": ["deny", "allow", "ask", "modify", "message", "return", "flow", "inject"],
    "modify": {t: {"replace": True, "merge": True} for t in sorted(fx.MODIFY_TARGET_NAMES)},
    "flow": {
        "operations": ["stop", "continue"],
        "remainingContinuations": 3,
        "continuationCount": 1,
        "maxContinuations": 4,
    },
    "inject": {"context": {"append": True, "deliverAt": ["now", "next_turn"]}},
    "elicitation": {"form": {}},
}


def response(manifest: Any) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": "discovery",
        "result": {"protocolVersion": "draft", "manifest": manifest},
    }


def minimal_manifest() -> dict[str, Any]:
    """The draft's minimal harness manifest (checklist 12.1)."""
    return {
        "events": [
            {
                "event": "tool.before",
                "modes": ["intercept", "observe"],
                "capabilities": {"effects": ["deny"]},
            }
        ],
        "gaps": [{"path": "tool.after", "reason": "not emitted"}],
        "transports": ["stdio"],
        "authentication": [],
        "toolPaths": ["native"],
        "contentCategories": ["text"],
        "limits": {"minTimeoutMs": 100, "maxTimeoutMs": 30000},
        "managedPolicy": {"scopes": ["user"], "disableable": True},
        "correlationIdentityFields": ["event.id", "call.id"],
    }


# --------------------------------------------------------------------------- capabilities


def test_parse_and_round_trip_the_maximal_object(official_schema: Schema) -> None:
    caps = parse_capabilities(MAXIMAL)
    assert caps.modify is not None and caps.modify["input"] == ModifyGrant(replace=True, merge=True)
    assert caps.flow is not None and caps.flow.remaining_continuations == 3
    assert caps.inject is not None and caps.inject.context.deliver_at == ["now", "next_turn"]
    assert caps.to_wire() == MAXIMAL
    assert official_schema("capabilities.schema.json", caps.to_wire()) == []


def test_authoring_in_python_names() -> None:
    caps = Capabilities(
        effects=["deny", "flow", "inject"],
        flow=FlowGrant(operations=["continue"], remaining_continuations=1, continuation_count=0),
        inject=InjectGrant(context=InjectContextGrant(append=True, deliver_at=["now"])),
    )
    assert caps.to_wire() == {
        "effects": ["deny", "flow", "inject"],
        "flow": {"operations": ["continue"], "remainingContinuations": 1, "continuationCount": 0},
        "inject": {"context": {"append": True, "deliverAt": ["now"]}},
    }
    assert caps.grants("deny") and not caps.grants("allow")


def test_unknown_fields_are_kept_and_grant_nothing(official_schema: Schema) -> None:
    wire: dict[str, Any] = {
        "effects": ["deny", "com.example.rewrite", "modify"],
        "future": {"anything": [1, None]},
        "modify": {"input": {"replace": True, "merge": False, "partial": True}},
    }
    caps = parse_capabilities(wire)
    assert caps.to_wire() == wire
    assert official_schema("capabilities.schema.json", wire) == []
    # an unknown modify target is dropped: it grants nothing
    odd = parse_capabilities(
        {
            "effects": ["modify"],
            "modify": {"input": ModifyGrant(replace=True, merge=False).to_wire(), "everything": {}},
        }
    )
    assert odd.modify is not None and set(odd.modify) == {"input"}


def test_python_names_on_the_wire_are_unknown_fields() -> None:
    wire = {
        "effects": ["flow"],
        "flow": {"operations": ["continue"], "remaining_continuations": 1, "continuation_count": 0},
    }
    with pytest.raises(WireErrors) as info:
        parse_capabilities(wire)
    assert info.value.first.path == "flow"


CAPS_CASES: list[tuple[str, Any, str]] = [
    ("not-an-object", ["deny"], "$"),
    ("effects-missing", {}, "$"),
    ("effects-not-list", {"effects": "deny"}, "effects"),
    ("effects-duplicate", {"effects": ["deny", "deny"]}, "effects"),
    ("effect-unknown", {"effects": ["deny", "bogus"]}, "effects[1]"),
    ("effect-not-string", {"effects": [1]}, "effects[0]"),
    ("modify-block-missing", {"effects": ["modify"]}, "modify"),
    (
        "modify-block-unnamed",
        {"effects": ["deny"], "modify": {"input": {"replace": True, "merge": True}}},
        "modify",
    ),
    ("flow-block-missing", {"effects": ["flow"]}, "flow"),
    ("flow-block-unnamed", {"effects": [], "flow": {"operations": ["stop"]}}, "flow"),
    ("inject-block-missing", {"effects": ["inject"]}, "inject"),
    (
        "inject-block-unnamed",
        {"effects": ["message"], "inject": {"context": {"append": True, "deliverAt": ["now"]}}},
        "inject",
    ),
    ("modify-empty", {"effects": ["modify"], "modify": {}}, "modify"),
    ("modify-not-object", {"effects": ["modify"], "modify": ["input"]}, "modify"),
    (
        "modify-grants-nothing",
        {"effects": ["modify"], "modify": {"input": {"replace": False, "merge": False}}},
        "modify.input",
    ),
    (
        "modify-op-missing",
        {"effects": ["modify"], "modify": {"output": {"replace": True}}},
        "modify.output",
    ),
    (
        "modify-op-not-bool",
        {"effects": ["modify"], "modify": {"input": {"replace": "true", "merge": False}}},
        "modify.input.replace",
    ),
    ("flow-ops-missing", {"effects": ["flow"], "flow": {}}, "flow"),
    ("flow-ops-empty", {"effects": ["flow"], "flow": {"operations": []}}, "flow.operations"),
    (
        "flow-ops-duplicate",
        {"effects": ["flow"], "flow": {"operations": ["stop", "stop"]}},
        "flow.operations",
    ),
    (
        "flow-op-unknown",
        {"effects": ["flow"], "flow": {"operations": ["pause"]}},
        "flow.operations[0]",
    ),
    (
        "continue-without-counters",
        {"effects": ["flow"], "flow": {"operations": ["continue"], "remainingContinuations": 1}},
        "flow",
    ),
    (
        "counter-negative",
        {
            "effects": ["flow"],
            "flow": {"operations": ["stop"], "remainingContinuations": -1},
        },
        "flow.remainingContinuations",
    ),
    (
        "counter-not-integer",
        {"effects": ["flow"], "flow": {"operations": ["stop"], "maxContinuations": 1.5}},
        "flow.maxContinuations",
    ),
    (
        "counter-bool",
        {"effects": ["flow"], "flow": {"operations": ["stop"], "continuationCount": True}},
        "flow.continuationCount",
    ),
    ("inject-context-missing", {"effects": ["inject"], "inject": {}}, "inject"),
    (
        "inject-append-false",
        {"effects": ["inject"], "inject": {"context": {"append": False, "deliverAt": ["now"]}}},
        "inject.context.append",
    ),
    (
        "inject-append-missing",
        {"effects": ["inject"], "inject": {"context": {"deliverAt": ["now"]}}},
        "inject.context",
    ),
    (
        "deliver-empty",
        {"effects": ["inject"], "inject": {"context": {"append": True, "deliverAt": []}}},
        "inject.context.deliverAt",
    ),
    (
        "deliver-duplicate",
        {
            "effects": ["inject"],
            "inject": {"context": {"append": True, "deliverAt": ["now", "now"]}},
        },
        "inject.context.deliverAt",
    ),
    (
        "deliver-unknown",
        {"effects": ["inject"], "inject": {"context": {"append": True, "deliverAt": ["later"]}}},
        "inject.context.deliverAt[0]",
    ),
    (
        "elicitation-mode-not-object",
        {"effects": [], "elicitation": {"form": True}},
        "elicitation.form",
    ),
]


@pytest.mark.parametrize(
    ("obj", "path"), [c[1:] for c in CAPS_CASES], ids=[c[0] for c in CAPS_CASES]
)
def test_capabilities_rules(obj: Any, path: str, official_schema: Schema) -> None:
    with pytest.raises(WireErrors) as info:
        parse_capabilities(obj)
    assert info.value.first.path == path
    assert official_schema("capabilities.schema.json", obj), "the official schema rejects it too"


@pytest.mark.parametrize(
    "obj",
    [
        {"effects": []},
        {"effects": ["deny"]},
        {"effects": ["com.example.effect"]},
        {"effects": ["flow"], "flow": {"operations": ["stop"]}},
        {
            "effects": ["flow"],
            "flow": {
                "operations": ["continue"],
                "remainingContinuations": 0,
                "continuationCount": 2,
            },
        },
        {"effects": ["modify"], "modify": {"summary": {"replace": False, "merge": True}}},
        {
            "effects": ["inject"],
            "inject": {"context": {"append": True, "deliverAt": ["next_turn"]}},
        },
        {"effects": [], "elicitation": {"form": {}, "url": {}}},
    ],
)
def test_valid_capabilities(obj: Any, official_schema: Schema) -> None:
    assert parse_capabilities(obj).to_wire() == obj
    assert official_schema("capabilities.schema.json", obj) == []


def test_construction_enforces_the_same_rules() -> None:
    with pytest.raises(ValueError):
        Capabilities(effects=["modify"])
    with pytest.raises(ValueError):
        Capabilities(effects=[], flow=FlowGrant(operations=["stop"]))
    with pytest.raises(ValueError):
        FlowGrant(operations=["continue"])
    with pytest.raises(ValueError):
        ModifyGrant(replace=False, merge=False)


# --------------------------------------------------------------------------- per-event bounds

BOUNDS_CASES: list[tuple[str, str, dict[str, Any], str]] = [
    (
        "modify-input-at-model-response",
        "model.response.after",
        {"effects": ["modify"], "modify": {"input": {"replace": True, "merge": False}}},
        "modify.input",
    ),
    ("return-at-task-change", "task.change.before", {"effects": ["return"]}, "effects[0]"),
    (
        "continue-at-tool-before",
        "tool.before",
        {
            "effects": ["flow"],
            "flow": {
                "operations": ["continue"],
                "remainingContinuations": 1,
                "continuationCount": 0,
            },
        },
        "flow.operations[0]",
    ),
    ("deny-at-session-start", "session.start", {"effects": ["message", "deny"]}, "effects[1]"),
    ("extension-effect", "tool.before", {"effects": ["com.example.effect"]}, "effects[0]"),
    ("anything-at-observe-only", "session.end", {"effects": ["message"]}, "effects[0]"),
]


@pytest.mark.parametrize(
    ("event", "obj", "path"), [c[1:] for c in BOUNDS_CASES], ids=[c[0] for c in BOUNDS_CASES]
)
def test_per_event_bounds(event: str, obj: dict[str, Any], path: str) -> None:
    parse_capabilities(obj)  # well formed on its own
    with pytest.raises(WireErrors) as info:
        parse_capabilities(obj, event_type=event)
    assert info.value.first.path == path
    with pytest.raises(WireErrors):
        check_capabilities_at(event, parse_capabilities(obj))


def test_bounds_errors_say_what_is_out_of_bounds_and_where() -> None:
    """Every part beyond the event's bounds is reported, with its path and a fixed reason
    naming the event (an event outside the catalogue is never echoed)."""
    obj = {
        "effects": ["ask", "modify", "flow"],
        "modify": {"input": {"replace": True, "merge": False}},
        "flow": {"operations": ["stop"]},
    }
    with pytest.raises(WireErrors) as info:
        check_capabilities_at("tool.after", parse_capabilities(obj))
    assert [(e.path, e.reason) for e in info.value.errors] == [
        ("effects[0]", "is not an effect allowed at tool.after"),
        ("modify.input", "is not a modify target at tool.after"),
    ]
    for event in ("session.end", "not.an.event"):
        with pytest.raises(WireErrors) as info:
            check_capabilities_at(event, parse_capabilities(obj))
        assert [(e.path, e.reason) for e in info.value.errors] == [
            ("effects[0]", "is not an effect allowed at this event"),
            ("effects[1]", "is not an effect allowed at this event"),
            ("effects[2]", "is not an effect allowed at this event"),
            ("modify.input", "is not a modify target at this event"),
            ("flow.operations[0]", "is not a flow operation at this event"),
        ]


@pytest.mark.parametrize(
    ("obj", "path", "reason"),
    [
        ("effects", "$", "capabilities must be an object"),
        ({"effects": ["deny", "deny"]}, "effects", "must not contain duplicates"),
        (
            {"effects": ["Not-An-Effect"]},
            "effects[0]",
            "must be a standard effect or a reverse-DNS extension name",
        ),
    ],
)
def test_capabilities_reasons_say_what_to_fix(obj: Any, path: str, reason: str) -> None:
    with pytest.raises(WireErrors) as info:
        parse_capabilities(obj)
    assert (info.value.first.path, info.value.first.reason) == (path, reason)


@pytest.mark.parametrize("event", INTERCEPTABLE)
def test_capabilities_for_narrows_to_the_draft_bounds(event: str, official_schema: Schema) -> None:
    declared = parse_capabilities(
        {**MAXIMAL, "effects": [*MAXIMAL["effects"], "com.example.x"], "future": 1}
    )
    granted = capabilities_for(event, declared)
    wire = granted.to_wire()
    assert wire["effects"] == [e for e in fx.EFFECT_TYPE_ORDER if e in fx.EVENT_EFFECTS[event]]
    assert set(wire.get("modify", {})) == fx.MODIFY_TARGETS[event]
    assert set(wire.get("flow", {}).get("operations", [])) == fx.FLOW_OPERATIONS[event]
    assert ("inject" in wire) == ("inject" in fx.EVENT_EFFECTS[event])
    assert wire["future"] == 1 and wire["elicitation"] == {"form": {}}
    if "continue" in fx.FLOW_OPERATIONS[event]:
        assert wire["flow"]["remainingContinuations"] == 3
    elif "flow" in wire:
        assert set(wire["flow"]) == {"operations"}
    check_capabilities_at(event, granted)
    assert capabilities_for(event, granted) == granted  # idempotent
    # the official per-event bounds apply to manifest intercept entries
    manifest = minimal_manifest()
    manifest["events"] = [{"event": event, "modes": ["intercept"], "capabilities": wire}]
    assert official_schema("capabilities-response.schema.json", response(manifest)) == []


def test_capabilities_for_drops_an_effect_whose_block_empties() -> None:
    declared = parse_capabilities(
        {
            "effects": ["deny", "modify", "flow"],
            "modify": {"output": {"replace": True, "merge": True}},
            "flow": {
                "operations": ["continue"],
                "remainingContinuations": 1,
                "continuationCount": 0,
            },
        }
    )
    assert capabilities_for("tool.before", declared).to_wire() == {"effects": ["deny"]}
    assert capabilities_for("config.change.after", declared).to_wire() == {"effects": []}


# --------------------------------------------------------------------------- manifest


def test_golden_capabilities_response_manifest(fixtures_dir: Path) -> None:
    doc = json.loads((fixtures_dir / "http" / "capabilities-response.valid.json").read_text())
    manifest = parse_manifest(doc["result"]["manifest"])
    assert manifest.to_wire() == doc["result"]["manifest"]
    assert manifest.limits.max_continuations == 4
    assert manifest.modes_for("task.change.after") == {"observe"}


def test_minimal_manifest(official_schema: Schema) -> None:
    manifest = parse_manifest(minimal_manifest())
    assert isinstance(manifest, Manifest)
    entry = manifest.declared("tool.before")
    assert entry is not None and entry.capabilities is not None
    assert entry.capabilities.effects == ["deny"]
    assert manifest.declared("tool.after") is None
    assert manifest.to_wire() == minimal_manifest()
    assert official_schema("capabilities-response.schema.json", response(manifest.to_wire())) == []


def test_manifest_keeps_unknown_fields(official_schema: Schema) -> None:
    wire = minimal_manifest()
    wire["future"] = {"x": 1}
    wire["events"][0]["note"] = "kept"
    wire["limits"]["maxWidgets"] = 3
    assert parse_manifest(wire).to_wire() == wire
    assert official_schema("capabilities-response.schema.json", response(wire)) == []


def _without(key: str) -> dict[str, Any]:
    wire = minimal_manifest()
    del wire[key]
    return wire


def _with(path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    wire = minimal_manifest()
    node: Any = wire
    for part in path[:-1]:
        node = node[part]
    node[path[-1]] = value
    return wire


MANIFEST_CASES: list[tuple[str, Any, str]] = [
    *[(f"{key}-missing", _without(key), "$") for key in minimal_manifest()],
    ("identity", {**minimal_manifest(), "identity": {"sub": "x"}}, "$"),
    (
        "intercept-without-capabilities",
        _with(("events", 0), {"event": "tool.before", "modes": ["intercept"]}),
        "events[0]",
    ),
    (
        "observe-only-with-effects",
        _with(
            ("events", 0),
            {
                "event": "tool.after",
                "modes": ["observe"],
                "capabilities": {
                    "effects": ["modify"],
                    "modify": {"output": {"replace": True, "merge": True}},
                },
            },
        ),
        "events[0]",
    ),
    (
        "observe-only-event-intercepted",
        _with(
            ("events", 0),
            {"event": "session.end", "modes": ["intercept"], "capabilities": {"effects": []}},
        ),
        "events[0]",
    ),
    (
        "intercept-beyond-bounds",
        _with(
            ("events", 0),
            {
                "event": "session.start",
                "modes": ["intercept"],
                "capabilities": {"effects": ["deny"]},
            },
        ),
        "events[0]",
    ),
    ("modes-empty", _with(("events", 0, "modes"), []), "events[0].modes"),
    (
        "modes-duplicate",
        _with(("events", 0, "modes"), ["intercept", "intercept"]),
        "events[0].modes",
    ),
    ("mode-unknown", _with(("events", 0, "modes"), ["veto"]), "events[0].modes[0]"),
    ("event-unknown", _with(("events", 0, "event"), "tool.error"), "events[0].event"),
    (
        "capabilities-coupling",
        _with(("events", 0, "capabilities"), {"effects": ["modify"]}),
        "events[0].capabilities.modify",
    ),
    ("gap-path-empty", _with(("gaps", 0, "path"), ""), "gaps[0].path"),
    ("gap-reason-missing", _with(("gaps", 0), {"path": "x"}), "gaps[0]"),
    ("transport-unknown", _with(("transports",), ["websocket"]), "transports[0]"),
    ("transport-duplicate", _with(("transports",), ["stdio", "stdio"]), "transports"),
    ("auth-unknown", _with(("authentication",), ["mtls"]), "authentication[0]"),
    ("tool-path-empty", _with(("toolPaths",), [""]), "toolPaths[0]"),
    ("tool-path-duplicate", _with(("toolPaths",), ["native", "native"]), "toolPaths"),
    ("category-duplicate", _with(("contentCategories",), ["text", "text"]), "contentCategories"),
    (
        "correlation-not-string",
        _with(("correlationIdentityFields",), [1]),
        "correlationIdentityFields[0]",
    ),
    ("limit-negative", _with(("limits", "maxUploadBytes"), -1), "limits.maxUploadBytes"),
    ("limit-string", _with(("limits", "minTimeoutMs"), "100"), "limits.minTimeoutMs"),
    ("limit-bool", _with(("limits", "maxContinuations"), True), "limits.maxContinuations"),
    # Limits are integers: null is not "unknown" (omit it and say so in gaps).
    *[
        (f"limit-null-{name}", _with(("limits", name), None), f"limits.{name}")
        for name in ("maxUploadBytes", "maxContinuations", "minTimeoutMs", "maxTimeoutMs")
    ],
    ("limits-not-object", _with(("limits",), []), "limits"),
    (
        "managed-disableable",
        _with(("managedPolicy",), {"scopes": ["managed"], "disableable": True}),
        "managedPolicy",
    ),
    ("scope-unknown", _with(("managedPolicy", "scopes"), ["org"]), "managedPolicy.scopes[0]"),
    ("disableable-missing", _with(("managedPolicy",), {"scopes": []}), "managedPolicy"),
    ("manifest-not-object", [], "$"),
]


@pytest.mark.parametrize(
    ("obj", "path"), [c[1:] for c in MANIFEST_CASES], ids=[c[0] for c in MANIFEST_CASES]
)
def test_manifest_rules(obj: Any, path: str, official_schema: Schema) -> None:
    with pytest.raises(WireErrors) as info:
        parse_manifest(obj)
    assert info.value.first.path == path
    assert official_schema("capabilities-response.schema.json", response(obj)), (
        "schema rejects it too"
    )


def test_manifest_accepts_every_event_for_observation(official_schema: Schema) -> None:
    wire = minimal_manifest()
    wire["events"] = [{"event": e, "modes": ["observe"]} for e in EVENT_TYPES]
    wire["events"] += [
        {"event": e, "modes": ["observe"], "capabilities": {"effects": []}} for e in OBSERVE_ONLY
    ]
    wire["managedPolicy"] = {"scopes": ["user", "project", "managed"], "disableable": False}
    wire["transports"] = ["http", "stdio", "in_process"]
    wire["authentication"] = ["bearer", "oauth"]
    manifest = parse_manifest(wire)
    assert manifest.modes_for("hook.failure") == {"observe"}
    assert official_schema("capabilities-response.schema.json", response(manifest.to_wire())) == []


def test_manifest_reasons_name_the_rule() -> None:
    for case, fragment in (
        ("intercept-without-capabilities", "capabilities is required"),
        ("observe-only-event-intercepted", "observe-only event"),
        ("intercept-beyond-bounds", "capabilities.effects[0]"),
        ("identity", "identity"),
        ("managed-disableable", "disableable"),
    ):
        obj = next(c[1] for c in MANIFEST_CASES if c[0] == case)
        with pytest.raises(WireErrors) as info:
            parse_manifest(copy.deepcopy(obj))
        assert fragment in info.value.first.reason


# --------------------------------------------------------------------------- plain grants


def _valid_at(event_type: str, capabilities: Any) -> bool:
    try:
        parse_capabilities(capabilities, event_type=event_type)
    except WireErrors:
        return False
    return True


def test_a_plain_grant_is_exactly_a_valid_grant_of_names_without_blocks() -> None:
    """``is_plain_grant_at`` lets a backend skip the models; checked on every set of
    standard effect names (in two orders) at every interceptable event."""
    names = sorted(fx.EFFECT_TYPES)
    plain = 0
    for event in INTERCEPTABLE:
        for size in range(len(names) + 1):
            for combo in itertools.combinations(names, size):
                for effects in (list(combo), list(reversed(combo))):
                    caps = {"effects": effects}
                    expected = _valid_at(event, caps) and not {"modify", "flow", "inject"} & set(
                        effects
                    )
                    assert is_plain_grant_at(event, caps) is expected, (event, effects)
                    plain += expected
    assert plain > 100


@pytest.mark.parametrize(
    "caps",
    [
        {"effects": ["deny", "deny"]},
        {"effects": ["deny", "com.example.block"]},
        {"effects": ["deny"], "com.example.note": 1},
        {"effects": ["deny"], "elicitation": {}},
        {"effects": ["deny", 1]},
        {"effects": [{"type": "deny"}]},
        {"effects": [["deny"]]},
        {"effects": "deny"},
        {"effects": ["modify"], "modify": {"input": {"replace": True, "merge": False}}},
        {},
        ["deny"],
        None,
    ],
)
def test_anything_more_than_names_is_not_a_plain_grant(caps: Any) -> None:
    assert not is_plain_grant_at("tool.before", caps)


def test_a_plain_grant_needs_an_interceptable_event() -> None:
    for event in ("session.end", "tool.call", "", "tool.*"):
        assert not is_plain_grant_at(event, {"effects": []})
    assert is_plain_grant_at("tool.before", {"effects": []})

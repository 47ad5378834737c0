"""Events: the 32 standard event models, judged against fixtures and the official schemas.

Three kinds of evidence:

- every event in the golden fixtures (``http/*.json``, ``params.event`` with a
  ``harness`` added) gets the same verdict from :func:`parse_event` as from the
  official ``event.schema.json``; the ``catalogue-*`` cases all parse;
- one full sample of each of the 32 events (every optional field filled) is
  mutated mechanically (a field removed, an unknown field added, a value set to
  ``null`` or to the wrong type) and each mutant gets the official verdict too;
- table tests name the rules: conditional rules, strict time, URIs,
  reverse-DNS extension keys, removed names, lossless round trips.
"""

import ast
import copy
import datetime
import importlib
import json
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from ahp_protocol.wire import catalogue
from ahp_protocol.wire import events as events_module
from ahp_protocol.wire.content import OpenModel
from ahp_protocol.wire.errors import WireError, WireErrors
from ahp_protocol.wire.events import (
    EVENT_MODELS,
    Event,
    Harness,
    Ref,
    Time,
    Tool,
    ToolBefore,
    UnsupportedEvent,
    _event_validator,
    is_uri,
    parse_event,
)
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import TypeAdapter, ValidationError

from kit_testing import fixtures_root, official_validator, schema_errors

HARNESS = {"name": "fixture-harness", "version": "0"}
Schema = Callable[[str, Any], list[str]]

# --------------------------------------------------------------------------- samples

TEXT = {
    "id": "p-text",
    "kind": "text",
    "mediaType": "text/plain",
    "selection": "body",
    "text": "hi",
}
IMAGE = {
    "id": "p-image",
    "kind": "attachment",
    "mediaType": "image/png",
    "selection": "body",
    "body": {"ref": "upload-1"},
}
GAP = {
    "id": "p-gap",
    "kind": "text",
    "mediaType": "text/plain",
    "selection": "body",
    "gap": {"reason": "unavailable", "path": "x"},
    "size": 3,
    "sha256": "a" * 64,
}


def _message(role: str, mid: str = "m1") -> dict[str, Any]:
    return {"id": mid, "role": role, "parts": [dict(TEXT), dict(IMAGE)], "synthesized": False}


ENVELOPE: dict[str, Any] = {
    "id": "evt-1",
    "source": "urn:uuid:5b7de29e-a9e0-41a8-bf26-d94b05f0656d",
    "time": "2026-09-15T12:00:00.250+02:00",
    "harness": HARNESS,
    "session": {
        "id": "s1",
        "cwd": "/repo",
        "workspaceRoots": ["/repo"],
        "model": "m",
        "agent": {"id": "a1", "type": "primary"},
        "synthesized": False,
        "counters": {"turns": 1, "toolCalls": 2, "custom": 0},
    },
    "turn": {"id": "t1", "synthesized": False},
    "parentEventId": "evt-0",
    "gaps": [{"path": "model.reasoning", "reason": "not exposed"}],
    "native": {"raw": [1, 2]},
    "extensions": {"com.example.flag": True, "org.example.x-y_z": {"a": 1}},
    "synthesized": False,
}

MCP_TOOL = {
    "name": "mcp__fs__read",
    "kind": "file_read",
    "input": {"path": "README.md"},
    "origin": "mcp",
    "mcp": {
        "server": {"id": "fs", "name": "Filesystem"},
        "toolName": "read",
        "provenance": "runtime",
        "connection": {"transport": "stdio", "command": "fs-server", "args": ["--ro"], "cwd": "/"},
    },
}
TOOL = {
    "name": "read_file",
    "kind": "file_read",
    "input": {"path": "README.md"},
    "origin": "native",
}
CALL = {"id": "call-1", "synthesized": False}
BATCH = {"id": "b1", "callIds": ["call-1", "call-2"], "synthesized": False}
MODEL = {"id": "gpt", "provider": "openai"}
ATTEMPT = {"id": "att-1", "number": 1, "synthesized": False}
ERROR = {"message": "failed", "class": "tool", "code": "ENOENT", "status": 2, "native": {"e": 1}}
ATTEMPT_USAGE = {
    "kind": "amount",
    "scope": "attempt",
    "completeness": "complete",
    "provenance": "provider",
    "inputTokens": 10,
    "outputTokens": 5,
    "cacheReadTokens": 0,
    "cacheWriteTokens": 0,
    "cost": {"amount": 0.5, "currency": "USD", "basis": "billed"},
}
TURN_USAGE = {**ATTEMPT_USAGE, "kind": "total", "scope": "turn", "provenance": "mixed"}
MANIFEST = {
    "events": [
        {"event": "task.change.after", "modes": ["observe"], "capabilities": {"effects": []}}
    ],
    "gaps": [{"path": "model.reasoning", "reason": "not exposed"}],
    "transports": ["http", "stdio"],
    "authentication": ["bearer"],
    "toolPaths": ["native"],
    "contentCategories": ["text"],
    "limits": {"maxUploadBytes": 1048576, "maxContinuations": 4, "minTimeoutMs": 1},
    "managedPolicy": {"scopes": ["user"], "disableable": True},
    "correlationIdentityFields": ["id", "source"],
}
TOOL_CALL = {"call": CALL, "tool": MCP_TOOL, "path": "mcp", "batch": BATCH}

BODIES: dict[str, dict[str, Any]] = {
    "tool.before": {**TOOL_CALL, "items": [dict(TEXT)]},
    "tool.after": {
        **TOOL_CALL,
        "outcome": "error",
        "execution": {"status": "executed"},
        "error": ERROR,
        "durationMs": 12.5,
        "fileChanges": [
            {"path": "/a", "change": "modified", "before": dict(TEXT), "after": dict(GAP)},
            {"path": "/b", "change": "moved", "previousPath": "/c"},
        ],
        "items": [_message("tool")],
    },
    "tool.permission.request": {
        **TOOL_CALL,
        "suggestions": [{"rule": "allow read"}],
        "sandboxBypass": False,
        "items": [dict(IMAGE)],
    },
    "tool.permission.resolved": {**TOOL_CALL, "decision": "deny", "decidedBy": "hook"},
    "tool.progress": {**TOOL_CALL, "partialOutput": _message("tool"), "backgrounded": True},
    "tool.batch.after": {
        "batch": {"id": "b1", "synthesized": False},
        "calls": [
            {**TOOL_CALL, "outcome": "ok", "execution": {"status": "executed"}},
            {
                "call": {"id": "call-2"},
                "tool": TOOL,
                "path": "native",
                "outcome": "denied",
                "execution": {"status": "skipped", "reason": "policy", "detail": "deny-list"},
            },
        ],
    },
    "session.start": {
        "trigger": "fork",
        "resumedFrom": {"id": "s0", "synthesized": False},
        "permissionMode": "default",
        "manifest": MANIFEST,
        "items": [_message("system")],
    },
    "session.end": {"outcome": "completed", "reason": "exit", "counters": {"turns": 3}},
    "turn.start": {"trigger": "user", "expandedFrom": "/cmd", "items": [_message("user")]},
    "turn.finish.before": {
        "outcome": "completed",
        "continuationCount": 0,
        "lastAssistantItem": {"id": "m1", "synthesized": False},
        "usage": TURN_USAGE,
        "items": [_message("assistant")],
    },
    "turn.end": {
        "outcome": "failed",
        "continuationCount": 1,
        "lastAssistantItem": {"id": "m1"},
        "usage": TURN_USAGE,
        "error": ERROR,
        "items": [_message("assistant")],
    },
    "turn.progress": {"item": {"id": "m1"}, "delta": _message("assistant"), "final": False},
    "model.request.before": {
        "model": MODEL,
        "attempt": ATTEMPT,
        "params": {"temperature": 0},
        "items": [_message("developer"), _message("user", "m2")],
    },
    "model.response.after": {
        "model": MODEL,
        "attempt": ATTEMPT,
        "execution": {"status": "executed"},
        "usage": ATTEMPT_USAGE,
        "finishReason": "stop",
        "latencyMs": 300,
        "items": [_message("assistant")],
    },
    "model.error": {
        "model": MODEL,
        "attempt": ATTEMPT,
        "execution": {"status": "executed"},
        "error": ERROR,
        "usage": ATTEMPT_USAGE,
        "latencyMs": 5,
        "recovery": "retry",
    },
    "model.switch.before": {
        "current": MODEL,
        "proposed": {"id": "small", "provider": "openai"},
        "reason": "budget",
        "pricing": {"currency": "EUR", "inputPerMillionTokens": 1, "outputPerMillionTokens": 2.5},
    },
    "model.switch.after": {"previous": MODEL, "current": MODEL, "reason": "budget"},
    "context.compact.before": {
        "trigger": "manual",
        "instructions": [dict(TEXT)],
        "tokenCounts": {"before": 1000},
        "items": [_message("user")],
    },
    "context.compact.after": {
        "summary": [dict(TEXT)],
        "removed": [{"id": "m0"}],
        "execution": {"status": "skipped", "reason": "supplied_result"},
        "tokenCounts": {"before": 1000, "after": 100},
        "items": [_message("assistant")],
    },
    "config.change.before": {
        "change": {
            "source": "user",
            "scope": "project",
            "settings": ["model"],
            "summary": "switch model",
            "path": "/repo/.cfg",
        }
    },
    "config.change.after": {
        "change": {
            "source": "user",
            "scope": "project",
            "settings": ["mcp"],
            "summary": "add server",
            "mcpServers": [{"name": "fs"}],
        }
    },
    "task.change.before": {
        "task": {
            "id": "task1",
            "operation": "update",
            "change": {"status": "done"},
            "prior": {"status": "open"},
            "synthesized": False,
        }
    },
    "task.change.after": {"task": {"id": "task1", "operation": "create", "change": {}}},
    "workspace.change.before": {
        "workspace": {
            "kind": "roots",
            "change": {"workspaceRoots": ["/a", "/b"]},
            "prior": {"cwd": "/a"},
            "reason": "",
        }
    },
    "workspace.change.after": {"workspace": {"kind": "cwd", "change": {"cwd": "/b"}}},
    "file.changed": {
        "changes": [
            {"path": "/a", "operation": "update", "agentCaused": True, "before": dict(TEXT)},
            {"path": "/b", "operation": "create", "agentCaused": False, "after": dict(IMAGE)},
        ]
    },
    "user.attention": {
        "attention": {"kind": "idle", "message": [dict(TEXT)], "title": [dict(GAP)]}
    },
    "user.elicitation.request": {
        "elicitation": {"server": "fs", "mode": "form", "request": dict(TEXT)}
    },
    "user.elicitation.result": {
        "elicitation": {"server": "fs", "mode": "url", "action": "decline", "result": dict(TEXT)}
    },
    "user.message.inbound": {
        "message": {"channel": "slack", "sender": "alice", "messages": [_message("user")]}
    },
    "user.message.outbound": {"message": {"channel": "slack", "messages": [_message("assistant")]}},
    "hook.failure": {
        "failure": {"backendId": "deny-list", "reason": "timeout", "policy": "fail-closed"}
    },
}


def sample(event_type: str) -> dict[str, Any]:
    """A valid event of ``event_type`` with every optional field the schema has filled."""
    return copy.deepcopy({**ENVELOPE, "type": event_type, **BODIES[event_type]})


SPECIFIC_SCHEMA = {
    "tool.before": "tool-before.schema.json",
    "tool.after": "tool-after.schema.json",
    "session.start": "session-start.schema.json",
    "session.end": "session-end.schema.json",
}


def _type_validator(event_type: str) -> Any:
    """The official schema of one event type (the ``event.schema.json`` branch it selects)."""
    name = SPECIFIC_SCHEMA.get(event_type, f"catalogue-event.schema.json#/$defs/{event_type}")
    return official_validator(name)


def official_valid(event: Any) -> bool:
    """The official verdict: by the event type's own schema when the type is standard."""
    event_type = event.get("type") if isinstance(event, dict) else None
    if event_type in EVENT_MODELS:
        return bool(_type_validator(event_type).is_valid(event))
    return not schema_errors("event.schema.json", event)


def ours_valid(event: Any) -> bool:
    try:
        parse_event(event)
    except (WireError, WireErrors):
        return False
    return True


def problems(event: Any) -> str:
    try:
        parse_event(event)
    except (WireError, WireErrors) as exc:
        return str(exc)
    return ""


# --------------------------------------------------------------------------- catalogue


def test_every_standard_event_has_a_model() -> None:
    assert set(EVENT_MODELS) == set(catalogue.EVENT_TYPES)
    assert len(EVENT_MODELS) == 32
    for name, model in EVENT_MODELS.items():
        assert issubclass(model, Event)
        assert model.model_fields["type"].default == name
    assert set(BODIES) == set(EVENT_MODELS)


@pytest.mark.parametrize("event_type", sorted(BODIES))
def test_full_sample_is_valid_and_round_trips(event_type: str, official_schema: Schema) -> None:
    event = sample(event_type)
    assert official_schema("event.schema.json", event) == []
    parsed = parse_event(event)
    assert type(parsed) is EVENT_MODELS[event_type]
    wire = parsed.to_wire()
    assert wire == event
    assert official_schema("event.schema.json", wire) == []
    if event_type in SPECIFIC_SCHEMA:
        assert official_schema(SPECIFIC_SCHEMA[event_type], wire) == []


# --------------------------------------------------------------------------- fixtures


def _fixture_events() -> list[Path]:
    root = fixtures_root() / "http"
    return sorted(root.glob("*.json")) if root.is_dir() else []


def _event_of(path: Path) -> dict[str, Any] | None:
    message = json.loads(path.read_text("utf-8"))
    params = message.get("params") if isinstance(message, dict) else None
    event = params.get("event") if isinstance(params, dict) else None
    if not isinstance(event, dict):
        return None
    event = copy.deepcopy(event)
    event.setdefault("harness", dict(HARNESS))
    return event


CATALOGUE_FIXTURES = [p for p in _fixture_events() if p.name.startswith("catalogue-")]


@pytest.mark.parametrize("path", CATALOGUE_FIXTURES, ids=lambda p: p.name)
def test_catalogue_fixtures_parse(path: Path, fixtures_dir: Path) -> None:
    event = _event_of(fixtures_dir / "http" / path.name)
    assert event is not None
    parsed = parse_event(event)
    assert parsed.type == event["type"]
    assert parsed.to_wire() == event


def test_catalogue_fixtures_cover_28_events(fixtures_dir: Path) -> None:
    names = {p.name[len("catalogue-") : -len(".valid.json")] for p in CATALOGUE_FIXTURES}
    # The other four (tool.before/after, session.start/end) have their own observe-* cases.
    assert names == set(catalogue.EVENT_TYPES) - set(SPECIFIC_SCHEMA)


EVENT_FIXTURES = [p for p in _fixture_events() if _event_of(p) is not None]


def test_fixtures_with_events_are_found(fixtures_dir: Path) -> None:
    assert len(EVENT_FIXTURES) >= 90


@pytest.mark.parametrize("path", EVENT_FIXTURES, ids=lambda p: p.name)
def test_fixture_event_verdict_matches_official_schema(
    path: Path, fixtures_dir: Path, official_schema: Schema
) -> None:
    event = _event_of(fixtures_dir / "http" / path.name)
    assert event is not None
    expected = official_schema("event.schema.json", event) == []
    if event.get("type") not in catalogue.EVENT_TYPES:
        assert not expected
        with pytest.raises(UnsupportedEvent):
            parse_event(event)
        return
    assert ours_valid(event) == expected, problems(event)
    if expected:
        wire = parse_event(event).to_wire()
        assert wire == event
        assert official_schema("event.schema.json", wire) == []


# --------------------------------------------------------------------------- mutations

OPAQUE = {"input", "params", "native", "extensions", "change", "prior", "manifest", "counters"}
"""Keys whose values are open JSON (or owned by another module): not mutated inside."""


def _dict_paths(value: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    if isinstance(value, dict):
        yield path
        for key, child in value.items():
            if key in OPAQUE and path != ("workspace",):
                continue
            yield from _dict_paths(child, (*path, key))
    elif isinstance(value, list):
        for i, child in enumerate(value[:1]):
            yield from _dict_paths(child, (*path, i))


def _at(value: Any, path: tuple[Any, ...]) -> Any:
    for key in path:
        value = value[key]
    return value


WRONG: dict[type, Any] = {str: 7, bool: "true", int: "1", float: "1.5", list: {}, dict: []}


def _mutants(event: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    for path in _dict_paths(event):
        where = ".".join(map(str, path)) or "$"
        mutant = copy.deepcopy(event)
        _at(mutant, path)["zzUnknown"] = 1
        yield f"{where} + unknown field", mutant
        for key, value in _at(event, path).items():
            mutant = copy.deepcopy(event)
            del _at(mutant, path)[key]
            yield f"{where} - {key}", mutant
            mutant = copy.deepcopy(event)
            _at(mutant, path)[key] = None
            yield f"{where}.{key} = null", mutant
            wrong = WRONG.get(type(value))
            if wrong is not None:
                mutant = copy.deepcopy(event)
                _at(mutant, path)[key] = wrong
                yield f"{where}.{key} wrong type", mutant
            if isinstance(value, list) and value:
                mutant = copy.deepcopy(event)
                _at(mutant, path)[key] = []
                yield f"{where}.{key} = []", mutant
            if isinstance(value, str) and value:
                mutant = copy.deepcopy(event)
                _at(mutant, path)[key] = ""
                yield f"{where}.{key} = ''", mutant


@pytest.mark.parametrize("event_type", sorted(BODIES))
def test_event_validator_gives_parse_events_verdict(event_type: str) -> None:
    """The validate-only callable a backend uses judges exactly as ``parse_event`` does."""
    validate = _event_validator(event_type)
    assert _event_validator(event_type) is validate  # built once, then kept
    verdicts = []
    for label, mutant in [("sample", sample(event_type)), *_mutants(sample(event_type))]:
        if mutant.get("type") != event_type:
            continue
        try:
            validate(mutant)
            valid = True
        except ValidationError:
            valid = False
        assert valid == ours_valid(mutant), label
        verdicts.append(valid)
    assert verdicts[0] is True and verdicts.count(False) > 10


def test_event_validator_knows_only_standard_events() -> None:
    for name in ("tool.call", "com.example.custom", "", "tool.*"):
        with pytest.raises(KeyError):
            _event_validator(name)


@pytest.mark.parametrize("event_type", sorted(BODIES))
def test_mutants_get_the_official_verdict(event_type: str) -> None:
    disagreements = []
    count = 0
    for label, mutant in _mutants(sample(event_type)):
        count += 1
        expected = official_valid(mutant)
        if mutant.get("type") not in catalogue.EVENT_TYPES:
            with pytest.raises(UnsupportedEvent):
                parse_event(mutant)
            continue
        if ours_valid(mutant) != expected:
            disagreements.append(f"{label}: official={expected} ours={problems(mutant) or 'ok'}")
    assert count > 20
    assert disagreements == []


# --------------------------------------------------------------------------- rules


def _errors(event: Any) -> list[tuple[str, str]]:
    with pytest.raises(WireErrors) as info:
        parse_event(event)
    return [(e.path, e.reason) for e in info.value.errors]


def _with(event_type: str, **changes: Any) -> dict[str, Any]:
    event = sample(event_type)
    for key, value in changes.items():
        wire = key.replace("__", ".")
        if value is _DROP:
            event.pop(wire, None)
        else:
            event[wire] = value
    return event


_DROP = object()

RULES: list[tuple[str, dict[str, Any], tuple[str, str]]] = [
    (
        "tool.after",
        {"outcome": "ok"},
        ("error", 'is allowed only when outcome is "error"'),
    ),
    (
        "tool.after",
        {"error": _DROP},
        ("$", 'error is required when outcome is "error"'),
    ),
    (
        "tool.after",
        {"outcome": "denied", "error": _DROP},
        ("execution", 'must be {"status": "skipped", "reason": "policy"} when outcome is "denied"'),
    ),
    (
        "tool.after",
        {"execution": {"status": "skipped", "reason": "timeout"}},
        ("durationMs", "is not allowed when execution is skipped"),
    ),
    (
        "tool.after",
        {"execution": {"status": "skipped", "reason": "supplied_result"}, "durationMs": _DROP},
        ("fileChanges", "is not allowed when execution is skipped"),
    ),
    (
        "tool.after",
        {"execution": {"status": "done"}},
        ("execution", 'status must be "executed" or "skipped"'),
    ),
    ("tool.before", {"outcome": "ok"}, ("outcome", "is not allowed on tool.before")),
    ("tool.before", {"execution": {}}, ("execution", "is not allowed on tool.before")),
    ("tool.before", {"durationMs": 1}, ("durationMs", "is not allowed on tool.before")),
    ("tool.before", {"fileChanges": []}, ("fileChanges", "is not allowed on tool.before")),
    ("tool.before", {"tool": {**TOOL, "input": "{}"}}, ("tool.input", "must be an object")),
    (
        "tool.before",
        {"tool": {**TOOL, "origin": "mcp"}},
        ("tool", 'mcp is required when origin is "mcp"'),
    ),
    (
        "tool.before",
        {"tool": {**MCP_TOOL, "origin": "native"}},
        ("tool.mcp", 'is allowed only when origin is "mcp"'),
    ),
    ("tool.before", {"call": {"id": "c", "extra": 1}}, ("call", "extra is not an allowed field")),
    ("tool.before", {"call": {"id": ""}}, ("call.id", "must not be empty")),
    (
        "tool.before",
        {"batch": {**BATCH, "callIds": ["a", "a"]}},
        ("batch.callIds", "call ids must be unique"),
    ),
    (
        "tool.permission.request",
        {"decision": "allow"},
        ("decision", "is not allowed on tool.permission.request"),
    ),
    ("tool.progress", {"outcome": "ok"}, ("outcome", "is not allowed on tool.progress")),
    (
        "session.start",
        {"resumedFrom": _DROP},
        ("$", 'resumedFrom is required when trigger is "fork"'),
    ),
    ("session.start", {"tool": TOOL}, ("tool", "is not allowed on session.start")),
    ("session.start", {"outcome": "completed"}, ("outcome", "is not allowed on session.start")),
    ("session.end", {"tool": TOOL}, ("tool", "is not allowed on session.end")),
    ("turn.end", {"outcome": "completed"}, ("error", 'is not allowed when outcome is "completed"')),
    (
        "model.request.before",
        {"usage": ATTEMPT_USAGE},
        ("usage", "is not allowed on model.request.before"),
    ),
    (
        "model.request.before",
        {"finishReason": "stop"},
        ("finishReason", "is not allowed on model.request.before"),
    ),
    (
        "model.response.after",
        {"execution": {"status": "skipped", "reason": "policy"}},
        ("execution.reason", 'must be "supplied_result" when a model response is skipped'),
    ),
    (
        "model.response.after",
        {"execution": {"status": "skipped", "reason": "supplied_result"}},
        ("usage", "is not allowed on a supplied response"),
    ),
    (
        "model.response.after",
        {"execution": {"status": "skipped", "reason": "supplied_result"}, "usage": _DROP},
        ("latencyMs", "is not allowed on a supplied response"),
    ),
    ("model.response.after", {"error": ERROR}, ("error", "is not allowed on model.response.after")),
    (
        "model.response.after",
        {"usage": {**ATTEMPT_USAGE, "kind": "total"}},
        ("usage.kind", 'must be "amount" for an attempt'),
    ),
    (
        "model.response.after",
        {"usage": {**ATTEMPT_USAGE, "provenance": "mixed"}},
        ("usage.provenance", 'must be "provider" or "estimate" for an attempt'),
    ),
    (
        "turn.end",
        {"usage": {**TURN_USAGE, "scope": "attempt"}},
        ("usage.scope", 'must be "turn" for a turn'),
    ),
    (
        "model.error",
        {"execution": {"status": "skipped", "reason": "supplied_result"}},
        ("execution.status", 'must be "executed" at model.error'),
    ),
    ("model.error", {"finishReason": "stop"}, ("finishReason", "is not allowed on model.error")),
    (
        "model.switch.before",
        {"previous": MODEL},
        ("previous", "is not allowed on model.switch.before"),
    ),
    (
        "model.switch.after",
        {"proposed": MODEL},
        ("proposed", "is not allowed on model.switch.after"),
    ),
    (
        "model.switch.before",
        {"pricing": {"currency": "usd"}},
        ("pricing.currency", "must be an ISO 4217 code: three uppercase letters"),
    ),
    (
        "context.compact.before",
        {"tokenCounts": {"before": 1, "after": 0}},
        ("tokenCounts.after", "is not known before compaction"),
    ),
    (
        "context.compact.before",
        {"summary": []},
        ("summary", "is not allowed on context.compact.before"),
    ),
    (
        "context.compact.after",
        {"execution": {"status": "skipped", "reason": "other"}},
        ("execution.reason", 'must be "supplied_result" when compaction is skipped'),
    ),
    (
        "context.compact.after",
        {"summary": [IMAGE]},
        (
            "summary[0]",
            'must be a text part: kind "text" and selection "body", "metadata" or "omit"',
        ),
    ),
    (
        "workspace.change.before",
        {"workspace": {"kind": "cwd", "change": {}}},
        ("workspace.change", "must have cwd or workspaceRoots"),
    ),
    (
        "workspace.change.before",
        {"workspace": {"kind": "roots", "change": {"workspaceRoots": ["/a", "/a"]}}},
        ("workspace.change.workspaceRoots", "must not repeat a root"),
    ),
    ("file.changed", {"changes": []}, ("changes", "must have at least 1 item")),
    ("hook.failure", {"parentEventId": _DROP}, ("$", "parentEventId is required")),
    (
        "user.message.inbound",
        {"message": {"channel": "c", "sender": "s", "messages": [_message("assistant")]}},
        ("message.messages[0].role", "must be 'user'"),
    ),
    ("tool.batch.after", {"calls": []}, ("calls", "must have at least 1 item")),
]


@pytest.mark.parametrize(("event_type", "changes", "expected"), RULES)
def test_rules(
    event_type: str,
    changes: dict[str, Any],
    expected: tuple[str, str],
    official_schema: Schema,
) -> None:
    event = _with(event_type, **changes)
    assert official_schema("event.schema.json", event) != []
    assert expected in _errors(event)


def test_file_change_rules() -> None:
    for change, fields, expected in [
        ("moved", {}, ("fileChanges[0]", 'previousPath is required when change is "moved"')),
        (
            "created",
            {"before": TEXT},
            ("fileChanges[0].before", 'is not allowed when change is "created"'),
        ),
        (
            "deleted",
            {"after": TEXT},
            ("fileChanges[0].after", 'is not allowed when change is "deleted"'),
        ),
    ]:
        event = _with("tool.after", fileChanges=[{"path": "/a", "change": change, **fields}])
        assert not official_valid(event)
        assert expected in _errors(event)


def test_mcp_connection_shapes() -> None:
    def with_connection(connection: dict[str, Any]) -> dict[str, Any]:
        tool = copy.deepcopy(MCP_TOOL)
        tool["mcp"]["connection"] = connection
        return _with("tool.before", tool=tool)

    good = [
        {"transport": "http", "url": "https://mcp.example/v1"},
        {"transport": "sse", "url": "http://127.0.0.1:9/sse"},
        {"transport": "http", "gaps": [{"path": "url", "reason": "withheld"}]},
        {"transport": "stdio", "command": "x", "args": [], "cwd": "/"},
        {"transport": "_unix", "addressForm": "path", "address": "/run/mcp.sock"},
    ]
    bad = [
        ({"transport": "http"}, 'url is required, or a gaps entry whose path is "url"'),
        ({"transport": "http", "url": "ftp://x"}, "must be an http:// or https:// URL"),
        (
            {"transport": "stdio", "command": "x", "args": []},
            'cwd is required, or a gaps entry whose path is "cwd"',
        ),
        (
            {"transport": "_unix", "address": "/s"},
            'addressForm is required, or a gaps entry whose path is "addressForm"',
        ),
        (
            {"transport": "ws", "url": "https://x"},
            'transport must be "http", "sse", "stdio" or an extension "_name"',
        ),
        (
            {"transport": "http", "url": "https://x", "headers": {}},
            "headers is not an allowed field",
        ),
        ({"transport": "http", "url": "https://x", "gaps": []}, "must have at least 1 item"),
    ]
    for connection in good:
        event = with_connection(connection)
        assert official_valid(event), connection
        assert ours_valid(event), problems(event)
    for connection, reason in bad:
        event = with_connection(connection)
        assert not official_valid(event), connection
        assert reason in [r for _p, r in _errors(event)], problems(event)


@pytest.mark.parametrize(
    "time",
    [
        "2026-09-15T12:00:00Z",
        "2026-09-15T12:00:00.123456789Z",
        "2026-09-15T12:00:00+05:30",
        "2026-09-15T12:00:00-00:00",
        "2024-02-29T23:59:59Z",
        "2026-09-15t12:00:00z",
    ],
)
def test_rfc3339_times_accepted(time: str) -> None:
    event = _with("tool.before", time=time)
    assert official_valid(event)
    assert ours_valid(event), problems(event)


@pytest.mark.parametrize(
    "time",
    [
        "20260915T120000+0000",
        "2026-09-15T12:00:00",
        "2026-09-15 12:00:00Z",
        "2026-09-15T12:00Z",
        "2026-09-15T12:00:00+0530",
        "2026-02-30T12:00:00Z",
        "2026-09-15T24:00:00Z",
        "2026-09-15T12:60:00Z",
        "2026-09-15T12:00:00.Z",
        "2026-09-15T12:00:00+24:00",
        "\uff12\uff10\uff12\uff16-09-15T12:00:00Z",  # full-width digits
        "",
    ],
)
def test_non_rfc3339_times_rejected(time: str) -> None:
    event = _with("tool.before", time=time)
    assert not official_valid(event)
    assert [p for p, _r in _errors(event)] == ["time"]


def test_time_with_a_trailing_newline_is_rejected() -> None:
    # Stricter than the Python date-time checker the official schemas run under
    # (its pattern ends in ``$``, which also matches before a final newline):
    # RFC 3339 has no trailing newline, and the draft checks time strictly.
    event = _with("tool.before", time="2026-09-15T12:00:00Z\n")
    assert [p for p, _r in _errors(event)] == ["time"]


def _calendar_time(value: str) -> bool:
    """The reference rule: the RFC 3339 shape, a real date and time, an offset <= 23:59."""
    match = re.fullmatch(
        r"([0-9]{4})-([0-9]{2})-([0-9]{2})[Tt]([0-9]{2}):([0-9]{2}):([0-9]{2})(\.[0-9]+)?"
        r"(?:[Zz]|[+-]([0-9]{2}):([0-9]{2}))",
        value,
    )
    if match is None:
        return False
    try:
        datetime.datetime(*(int(g) for g in match.groups()[:6]))
    except ValueError:
        return False
    hours, minutes = match.group(8), match.group(9)
    return hours is None or (int(hours) <= 23 and int(minutes) <= 59)


def test_the_native_time_pattern_is_the_calendar() -> None:
    # The pattern is checked by pydantic-core; it must agree with the calendar.
    time = TypeAdapter(Time)

    def native(value: str) -> bool:
        try:
            time.validate_python(value, strict=True)
        except ValidationError:
            return False
        return True

    years = ["0000", "0001", "0004", "0100", "1900", "1996", "2000", "2023", "2024", "2100"]
    years += ["2400", "9996", "9999"]
    dates = [f"{y}-{m:02d}-{d:02d}" for y in years for m in range(14) for d in range(33)]
    times = [
        f"{h}:{mi}:{s}{frac}{off}"
        for h in ("00", "09", "23", "24", "99")
        for mi in ("00", "59", "60")
        for s in ("00", "59", "60")
        for frac in ("", ".5", ".123456789")
        for off in ("Z", "z", "+00:00", "-23:59", "+24:00", "+05:60", "+5:30")
    ]
    checked = 0
    for value in [f"{d}T12:00:00Z" for d in dates] + [f"2024-02-29T{t}" for t in times]:
        assert native(value) == _calendar_time(value), value
        checked += 1
    assert checked > 5000
    # The errors keep their reasons.
    reasons = {
        "2026-02-30T12:00:00Z": "must be a real calendar date and time of day",
        "2026-09-15T12:00:00+24:00": "has an invalid UTC offset",
        "yesterday": "must be an RFC 3339 date-time (YYYY-MM-DDTHH:MM:SS[.frac](Z|+HH:MM))",
    }
    for value, reason in reasons.items():
        assert _errors(_with("tool.before", time=value)) == [("time", reason)]


URI_CHARS = st.sampled_from(list("aZ09+-.:/?#[]@!$&'()*,;=%~_ fF\u00e9\n"))


@settings(max_examples=400, deadline=None)
@given(st.text(URI_CHARS, max_size=14))
def test_the_native_source_pattern_is_is_uri(source: str) -> None:
    event = _with("tool.before", source=source)
    assert ours_valid(event) == is_uri(source), source
    if not is_uri(source):
        assert _errors(event) == [("source", "must be an absolute URI (scheme:rest, RFC 3986)")]


def test_only_the_envelope_and_session_are_open_objects_with_renamed_fields() -> None:
    # parse_event puts right Python-spelled unknown keys on these two only.
    renamed = {
        cls.__name__
        for cls in vars(events_module).values()
        if isinstance(cls, type)
        and issubclass(cls, OpenModel)
        and not issubclass(cls, Event)
        and any(f.alias not in (None, name) for name, f in cls.model_fields.items())
    }
    assert renamed == {"Session"}
    event = _with(
        "tool.before",
        session={"id": "s", "workspace_roots": ["/x"], "cwd": "/r"},
    )
    parsed = parse_event(event)
    assert parsed.session is not None and parsed.session.workspace_roots is None
    assert parsed.to_wire() == event


@pytest.mark.parametrize(
    ("source", "valid"),
    [
        ("urn:uuid:5b7de29e-a9e0-41a8-bf26-d94b05f0656d", True),
        ("https://harness.example/runtime/42?x=1#frag", True),
        ("https://[::1]:8080/p", True),
        ("a:", True),
        ("https://bad host/%zz", False),
        ("http://x/%zz", False),
        ("not a uri", False),
        ("/relative/path", False),
        ("1abc:x", False),
        ("", False),
    ],
)
def test_source_is_a_uri(source: str, valid: bool) -> None:
    event = _with("tool.before", source=source)
    assert official_valid(event) == valid
    assert ours_valid(event) == valid, problems(event)


@pytest.mark.parametrize(
    ("key", "valid"),
    [
        ("com.example.flag", True),
        ("org.example.sub.x-y_z", True),
        ("A.b", True),
        ("flag", False),
        ("com.", False),
        (".com.x", False),
        ("com.1x", False),
        ("com..x", False),
        ("com.example flag", False),
        ("", False),
    ],
)
def test_extension_keys_are_reverse_dns(key: str, valid: bool) -> None:
    event = _with("tool.before", extensions={key: 1})
    assert official_valid(event) == valid
    if valid:
        assert ours_valid(event), problems(event)
    else:
        assert ("extensions", "keys must be reverse-DNS names (for example com.example.flag)") in (
            _errors(event)
        )


@pytest.mark.parametrize("name", sorted(catalogue.REMOVED))
def test_removed_names_are_unsupported(name: str) -> None:
    event = {**sample("tool.before"), "type": name}
    with pytest.raises(UnsupportedEvent) as info:
        parse_event(event)
    assert info.value.path == "type"
    assert "removed" in info.value.reason


@pytest.mark.parametrize(
    ("event", "path"),
    [
        ({k: v for k, v in ENVELOPE.items()}, "$"),
        ({**ENVELOPE, "type": "tool.unknown"}, "type"),
        ({**ENVELOPE, "type": 7}, "type"),
        ({**ENVELOPE, "type": "tool.*"}, "type"),
        ({**ENVELOPE, "type": ""}, "type"),
    ],
)
def test_missing_or_unknown_type_is_unsupported(event: dict[str, Any], path: str) -> None:
    with pytest.raises(UnsupportedEvent) as info:
        parse_event(event)
    assert info.value.path == path
    assert isinstance(info.value, WireError)
    assert not isinstance(info.value, WireErrors)


def test_shape_errors_are_not_unsupported() -> None:
    with pytest.raises(WireErrors) as info:
        parse_event(_with("tool.before", call={}))
    assert not isinstance(info.value, UnsupportedEvent)
    assert [(e.path, e.reason) for e in info.value.errors] == [("call", "id is required")]
    with pytest.raises(WireErrors) as info:
        parse_event(["not", "an", "object"])
    assert info.value.first.path == "$"


def test_errors_never_quote_input_values() -> None:
    secret = "sk-live-SECRET-VALUE"
    event = _with(
        "tool.before",
        source=secret + " x",
        time=secret,
        call={"id": "c", "synthesized": secret},
        harness={"name": "h", "version": "1", "token": secret},
    )
    with pytest.raises(WireErrors) as info:
        parse_event(event)
    assert len(info.value.errors) == 4
    assert secret not in str(info.value)


def test_null_is_not_absent() -> None:
    for field in ("session", "turn", "gaps", "extensions", "parentEventId", "items", "batch"):
        event = _with("tool.before", **{field: None})
        assert not official_valid(event)
        assert (field, "must not be null") in _errors(event)
    event = _with("tool.before", native=None)
    assert official_valid(event)
    assert parse_event(event).to_wire()["native"] is None


def test_strict_types_never_coerce() -> None:
    assert (
        "call.synthesized",
        "must be a boolean",
    ) in _errors(_with("tool.before", call={"id": "c", "synthesized": 1}))
    assert ("attempt.number", "must be an integer") in _errors(
        _with("model.request.before", attempt={"id": "a", "number": 1.0})
    )
    assert ("attempt.number", "must be >= 1") in _errors(
        _with("model.request.before", attempt={"id": "a", "number": 0})
    )
    assert ("durationMs", "must be a number") in _errors(_with("tool.after", durationMs=True))
    assert ("latencyMs", "must be >= 0") in _errors(_with("model.response.after", latencyMs=-1))


# --------------------------------------------------------------------------- round trips

KNOWN = {
    name
    for model in EVENT_MODELS.values()
    for name in (f.alias or n for n, f in model.model_fields.items())
} | {"outcome", "execution", "durationMs", "fileChanges", "decision", "decidedBy", "tool"}

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=8,
)
unknown_keys = st.text(min_size=1, max_size=12).filter(lambda k: k not in KNOWN)


@settings(max_examples=150, deadline=None)
@given(
    event_type=st.sampled_from(sorted(BODIES)),
    extra=st.dictionaries(unknown_keys, json_values, min_size=1, max_size=4),
)
def test_unknown_envelope_fields_survive(event_type: str, extra: dict[str, Any]) -> None:
    event = {**sample(event_type), **extra}
    parsed = parse_event(event)
    assert parsed.model_extra == extra
    assert parsed.to_wire() == event


def test_python_names_on_the_wire_are_unknown_fields() -> None:
    event = _with("tool.before", parent_event_id="not-the-field", parentEventId=_DROP)
    parsed = parse_event(event)
    assert parsed.parent_event_id is None
    assert parsed.to_wire() == event


def test_python_api_builds_wire_events(official_schema: Schema) -> None:
    event = ToolBefore(
        id="e1",
        source="urn:x:harness",
        time="2026-09-15T12:00:00Z",
        harness=Harness(name="mini", version="0.1"),
        call=Ref(id="c1"),
        tool=Tool(name="shell", input={"command": "ls"}, origin="native"),
        path="native",
        parent_event_id="e0",
    )
    wire = event.to_wire()
    assert wire["type"] == "tool.before"
    assert wire["parentEventId"] == "e0"
    assert official_schema("tool-before.schema.json", wire) == []
    assert parse_event(wire).to_wire() == wire


# --------------------------------------------------------------------------- lazy families


def test_lazy_names_agree_with_the_family_modules() -> None:
    """The table ``__getattr__`` reads is every public name each family module defines,
    nothing more; type checkers read the same families (star imports); ``__all__`` has
    them all. (The table stays hand-written: building it at import would import every
    family, the cost the lazy names exist to avoid.)"""
    init = Path(events_module.__file__)
    starred: set[str] = set()
    for node in ast.parse(init.read_text()).body:
        if isinstance(node, ast.If) and getattr(node.test, "id", None) == "TYPE_CHECKING":
            for imp in node.body:
                assert isinstance(imp, ast.ImportFrom) and imp.module is not None
                assert [alias.name for alias in imp.names] == ["*"]
                starred.add(imp.module.rsplit(".", 1)[1])
    assert starred == set(events_module._FAMILY_NAMES)
    for module, names in events_module._FAMILY_NAMES.items():
        defined: set[str] = set()
        for node in ast.parse(Path(init.parent, f"{module}.py").read_text()).body:
            if isinstance(node, ast.ClassDef | ast.FunctionDef):
                defined.add(node.name)
            elif isinstance(node, ast.Assign | ast.AnnAssign):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                defined.update(t.id for t in targets if isinstance(t, ast.Name))
        assert {name for name in defined if not name.startswith("_")} == set(names), module
        home = importlib.import_module(f"ahp_protocol.wire.events.{module}")
        for name in names:
            assert getattr(events_module, name) is getattr(home, name)
    public = set(events_module.__all__)
    assert set(events_module._HOME) <= public
    assert all(hasattr(events_module, name) for name in public)
    with pytest.raises(AttributeError):
        events_module.NoSuchEvent  # noqa: B018


def test_importing_events_builds_only_what_an_event_needs() -> None:
    """A per-event backend pays for the family it receives, not for all 32 events."""
    code = (
        "import json, sys\n"
        "import ahp_protocol.wire.events as ev\n"
        "def loaded():\n"
        "    return sorted(m for m in sys.modules if m.startswith('ahp_protocol.wire.events.'))\n"
        "first = loaded()\n"
        "assert len(ev.EVENT_MODELS) == 32 and 'tool.before' in ev.EVENT_MODELS\n"
        "second = loaded()\n"
        "ev.parse_event(json.loads(sys.stdin.read()))\n"
        "print(json.dumps([first, second, loaded()]))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        input=json.dumps(sample("tool.before")),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    first, second, third = json.loads(out.stdout)
    envelope = ["ahp_protocol.wire.events.envelope"]
    assert first == envelope and second == envelope
    assert third == sorted([*envelope, "ahp_protocol.wire.events.tool"])

"""Content: canonical messages and parts, their paths in errors, and projection by selection.

Parts are judged against the official ``content-item.schema.json`` (a table and
mechanical mutants). Projection is checked on one content-rich event of each of
the 32 types, where every body carries a marker: under ``metadata``/``omit`` no
marker, ``text``, ``body`` or ``gap`` may survive anywhere, the view must stay a
valid event, and each part's selection must match the official SDK's projection.
"""

import copy
import hashlib
import itertools
import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from ahp_protocol.wire import catalogue
from ahp_protocol.wire.content import (
    CATEGORIES,
    WITHHELD_REASON,
    AttachmentBodyPart,
    ContentReference,
    Message,
    TextBodyPart,
    TextMetadataPart,
    content_hash,
    is_attachment_media_type,
    parse_messages,
    parse_part,
    parse_parts,
    parse_text_parts,
    part_category,
    project_event,
)
from ahp_protocol.wire.errors import WireErrors
from ahp_protocol.wire.events import parse_event
from hypothesis import given, settings
from hypothesis import strategies as st

from kit_testing import schema_errors

Schema = Callable[[str, Any], list[str]]
MARK = "SECRET"

# --------------------------------------------------------------------------- parsing

TEXT = {"id": "p1", "kind": "text", "mediaType": "text/plain", "selection": "body", "text": "hi"}
IMAGE = {
    "id": "p2",
    "kind": "attachment",
    "mediaType": "image/png",
    "selection": "body",
    "body": {"ref": "r1"},
}
PART_SAMPLES: list[dict[str, Any]] = [
    TEXT,
    {**TEXT, "category": "reasoning", "synthesized": True, "text": ""},
    {
        "id": "g",
        "kind": "text",
        "mediaType": "text/plain",
        "selection": "body",
        "gap": {"reason": "receiver unavailable", "path": "x"},
        "size": 0,
        "sha256": "0" * 64,
    },
    {"id": "m", "kind": "text", "mediaType": "text/plain", "selection": "metadata", "size": 4},
    {"id": "o", "kind": "text", "mediaType": "text/plain", "selection": "omit", "sha256": "f" * 64},
    IMAGE,
    {**IMAGE, "category": "screenshots", "synthesized": False},
    {
        "id": "ag",
        "kind": "attachment",
        "mediaType": "application/pdf",
        "selection": "body",
        "gap": {"reason": "too large"},
        "size": 10,
    },
    {"id": "am", "kind": "attachment", "mediaType": "audio/ogg", "selection": "metadata"},
    {"id": "ao", "kind": "attachment", "mediaType": "video/mp4", "selection": "omit", "size": 1},
]


def official_part_valid(part: Any) -> bool:
    return not schema_errors("content-item.schema.json", part)


def ours_part_valid(part: Any) -> bool:
    try:
        parse_part(part)
    except WireErrors:
        return False
    return True


def _errors(parse: Callable[[object], object], value: Any) -> list[tuple[str, str]]:
    with pytest.raises(WireErrors) as info:
        parse(value)
    return [(e.path, e.reason) for e in info.value.errors]


@pytest.mark.parametrize(
    "part", PART_SAMPLES, ids=lambda p: f"{p['kind']}-{p['selection']}-{p['id']}"
)
def test_valid_parts_parse_and_round_trip(part: dict[str, Any]) -> None:
    assert official_part_valid(part)
    parsed = parse_part(part)
    assert parsed.to_wire() == part
    assert [p.to_wire() for p in parse_parts([part, part])] == [part, part]


WRONG: dict[type, Any] = {str: 7, bool: "true", int: "1", dict: [], list: {}}


def _part_mutants(part: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    objects: list[tuple[str, ...]] = [()] + [(k,) for k, v in part.items() if isinstance(v, dict)]
    for path in objects:
        where = ".".join(path) or "$"
        target = part
        for key in path:
            target = target[key]
        mutant = copy.deepcopy(part)
        inner = mutant
        for key in path:
            inner = inner[key]
        inner["zzUnknown"] = 1
        yield f"{where} + unknown", mutant
        for key, value in target.items():
            for label, change in [
                ("-", None),
                ("null", lambda m, k=key: m.__setitem__(k, None)),
                ("wrong", lambda m, k=key, v=value: m.__setitem__(k, WRONG.get(type(v), v))),
            ]:
                mutant = copy.deepcopy(part)
                inner = mutant
                for k in path:
                    inner = inner[k]
                if change is None:
                    del inner[key]
                else:
                    change(inner)
                yield f"{where}.{key} {label}", mutant
    for key, value in [
        ("text", "x"),
        ("body", {"ref": "r"}),
        ("gap", {"reason": "r"}),
        ("size", 1),
        ("sha256", "a" * 64),
        ("role", "user"),
        ("parts", []),
    ]:
        if key not in part:
            yield f"+ {key}", {**part, key: value}


@pytest.mark.parametrize(
    "part", PART_SAMPLES, ids=lambda p: f"{p['kind']}-{p['selection']}-{p['id']}"
)
def test_part_mutants_get_the_official_verdict(part: dict[str, Any]) -> None:
    disagreements = [
        label
        for label, mutant in _part_mutants(part)
        if ours_part_valid(mutant) != official_part_valid(mutant)
    ]
    assert disagreements == []


@pytest.mark.parametrize(
    ("media_type", "attachment"),
    [
        ("image/png", True),
        ("application/octet-stream", True),
        ("application/pdf", True),
        ("application/jsonl", True),
        ("application/json-patch", True),
        ("text/plain", False),
        ("TEXT/html", False),
        ("Text/csv; charset=utf-8", False),
        ("application/json", False),
        ("application/JSON", False),
        ("application/json; charset=utf-8", False),
        ("application/problem+json", False),
        ("application/vnd.api+json;v=1", False),
        ("", False),
    ],
)
def test_attachment_media_types(media_type: str, attachment: bool) -> None:
    part = {**IMAGE, "mediaType": media_type}
    assert official_part_valid(part) == attachment
    assert ours_part_valid(part) == attachment
    assert is_attachment_media_type(media_type) == attachment


@pytest.mark.parametrize(
    "digest",
    ["a" * 63, "a" * 65, "A" * 64, "a" * 64 + "\n", "g" * 64, "a" * 32 + " " + "a" * 31],
)
def test_sha256_is_64_lowercase_hex(digest: str) -> None:
    part = {"id": "m", "kind": "text", "mediaType": "text/plain", "selection": "metadata"}
    assert ours_part_valid({**part, "sha256": "0123456789abcdef" * 4})
    assert not ours_part_valid({**part, "sha256": digest})
    assert ("sha256", "must be 64 lowercase hex digits (SHA-256)") in _errors(
        parse_part, {**part, "sha256": digest}
    )


def test_error_paths_are_relative_to_the_value() -> None:
    messages = [
        {"id": "m0", "role": "user", "parts": [TEXT]},
        {
            "id": "m1",
            "role": "assistant",
            "parts": [
                TEXT,
                {**TEXT, "text": 7},
                {k: v for k, v in TEXT.items() if k != "text"},
                {**IMAGE, "mediaType": "application/json"},
                {**TEXT, "kind": "json"},
                {**TEXT, "role": "user"},
            ],
        },
        {"id": "m2", "role": "human", "parts": []},
        {"id": "m3", "parts": []},
        "not an object",
    ]
    assert _errors(parse_messages, messages) == [
        ("[1].parts[1].text", "must be a string"),
        ("[1].parts[2]", "text is required"),
        (
            "[1].parts[3].mediaType",
            "an attachment cannot be text or JSON (text is inline; JSON is serialized into text)",
        ),
        (
            "[1].parts[4]",
            'must be a content part: kind "text" or "attachment" and '
            'selection "body", "metadata" or "omit"',
        ),
        ("[1].parts[5]", "role is not an allowed field"),
        ("[2].role", "must be 'system', 'developer', 'user', 'assistant' or 'tool'"),
        ("[3]", "role is required"),
        ("[4]", "must be an object"),
    ]
    assert _errors(parse_messages, {"id": "m"}) == [("$", "must be an array")]


def test_text_part_lists_reject_attachments() -> None:
    assert [p.to_wire() for p in parse_text_parts([TEXT])] == [TEXT]
    assert _errors(parse_text_parts, [TEXT, IMAGE]) == [
        ("[1]", 'must be a text part: kind "text" and selection "body", "metadata" or "omit"')
    ]


def test_parts_never_carry_roles_and_messages_are_closed() -> None:
    assert _errors(parse_parts, [{**TEXT, "role": "user"}]) == [
        ("[0]", "role is not an allowed field")
    ]
    message = {"id": "m", "role": "tool", "parts": [], "name": "x"}
    assert _errors(parse_messages, [message]) == [("[0]", "name is not an allowed field")]


def test_strict_parsing_never_coerces() -> None:
    assert ("[0].synthesized", "must be a boolean") in _errors(
        parse_parts, [{**TEXT, "synthesized": "true"}]
    )
    meta = {"id": "m", "kind": "text", "mediaType": "text/plain", "selection": "metadata"}
    assert ("[0].size", "must be an integer") in _errors(parse_parts, [{**meta, "size": True}])
    assert ("[0].size", "must be >= 0") in _errors(parse_parts, [{**meta, "size": -1}])
    assert ("[0].parts", "must be an array") in _errors(
        parse_messages, [{"id": "m", "role": "user", "parts": (TEXT,)}]
    )


def test_wire_needs_the_constant_fields_python_does_not() -> None:
    missing = {k: v for k, v in TEXT.items() if k != "mediaType"}
    assert not official_part_valid(missing)
    assert _errors(parse_part, missing) == [("$", "mediaType is required")]
    built = TextBodyPart(id="p1", text="hi")
    assert built.to_wire() == TEXT
    image = AttachmentBodyPart(id="p2", media_type="image/png", body=ContentReference(ref="r1"))
    assert image.to_wire() == IMAGE
    message = Message(id="m", role="user", parts=[built, image, TextMetadataPart(id="x")])
    wire = message.to_wire()
    assert wire["parts"][2] == {
        "id": "x",
        "kind": "text",
        "mediaType": "text/plain",
        "selection": "metadata",
    }
    assert [m.to_wire() for m in parse_messages([wire])] == [wire]


def test_content_hash() -> None:
    assert content_hash("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    assert content_hash("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    assert content_hash("é") == hashlib.sha256(b"\xc3\xa9").hexdigest()
    digest = content_hash("héllo\n")
    assert len(digest) == 64 and digest == digest.lower()
    assert ours_part_valid({**PART_SAMPLES[3], "sha256": digest})


@pytest.mark.parametrize(
    ("part", "category"),
    [
        (TEXT, "text"),
        ({**TEXT, "category": "reasoning"}, "reasoning"),
        (IMAGE, "images"),
        ({**IMAGE, "mediaType": "IMAGE/PNG"}, "images"),
        ({**IMAGE, "mediaType": "audio/mpeg"}, "audio"),
        ({**IMAGE, "mediaType": "video/webm"}, "video"),
        ({**IMAGE, "mediaType": "application/pdf"}, "files"),
        ({**IMAGE, "mediaType": "font/woff2"}, "files"),
        ({**IMAGE, "category": "screenshots"}, "screenshots"),
    ],
)
def test_part_category(part: dict[str, Any], category: str) -> None:
    assert part_category(part) == category


# --------------------------------------------------------------------------- rich events

_ids = itertools.count()


def _text(category: str | None = None) -> dict[str, Any]:
    n = next(_ids)
    part = {
        "id": f"t{n}",
        "kind": "text",
        "mediaType": "text/plain",
        "selection": "body",
        "text": f"{MARK}{n} the body of text part number {n}",
    }
    if category:
        part["category"] = category
    return part


def _attachment(media_type: str, category: str | None = None) -> dict[str, Any]:
    n = next(_ids)
    part = {
        "id": f"a{n}",
        "kind": "attachment",
        "mediaType": media_type,
        "selection": "body",
        "body": {"ref": f"{MARK}REF{n}"},
    }
    if category:
        part["category"] = category
    return part


def _gap() -> dict[str, Any]:
    n = next(_ids)
    return {
        "id": f"g{n}",
        "kind": "text",
        "mediaType": "text/plain",
        "selection": "body",
        "gap": {"reason": "receiver unavailable", "path": "x"},
        "size": 12,
        "sha256": "b" * 64,
    }


def _parts() -> list[dict[str, Any]]:
    return [
        _text(),
        _text("reasoning"),
        _text("tool_result"),
        _attachment("image/png"),
        _attachment("audio/wav"),
        _attachment("video/mp4"),
        _attachment("application/pdf"),
        _attachment("image/jpeg", "screenshots"),
        _gap(),
        {
            "id": f"m{next(_ids)}",
            "kind": "text",
            "mediaType": "text/plain",
            "selection": "metadata",
        },
    ]


def _text_parts() -> list[dict[str, Any]]:
    return [_text(), _text("reasoning"), _gap()]


def _message(role: str) -> dict[str, Any]:
    return {"id": f"msg{next(_ids)}", "role": role, "parts": _parts()}


def _tool() -> dict[str, Any]:
    return {"name": "shell", "input": {"command": "ls -la"}, "origin": "native"}


def _call() -> dict[str, Any]:
    return {"call": {"id": "c1"}, "tool": _tool(), "path": "native"}


def _model() -> dict[str, Any]:
    return {"model": {"id": "m", "provider": "p"}, "attempt": {"id": "a", "number": 1}}


ERROR = {"message": "boom", "class": "tool", "native": {"trace": f"{MARK}-error-native"}}


def _bodies() -> dict[str, dict[str, Any]]:
    return {
        "tool.before": {**_call(), "items": _parts()},
        "tool.after": {
            **_call(),
            "outcome": "error",
            "execution": {"status": "executed"},
            "error": copy.deepcopy(ERROR),
            "fileChanges": [
                {
                    "path": "/f",
                    "change": "modified",
                    "before": _text(),
                    "after": _attachment("image/gif"),
                }
            ],
            "items": [_message("tool")],
        },
        "tool.permission.request": {
            **_call(),
            "suggestions": [],
            "sandboxBypass": False,
            "items": _parts(),
        },
        "tool.permission.resolved": {
            **_call(),
            "decision": "allow",
            "decidedBy": "user",
            "items": _parts(),
        },
        "tool.progress": {
            **_call(),
            "partialOutput": _message("tool"),
            "backgrounded": False,
            "items": _parts(),
        },
        "tool.batch.after": {
            "batch": {"id": "b"},
            "calls": [{**_call(), "outcome": "ok", "execution": {"status": "executed"}}],
            "items": _parts(),
        },
        "session.start": {
            "session": {"id": "s"},
            "trigger": "startup",
            "permissionMode": "default",
            "manifest": {
                "events": [],
                "gaps": [],
                "transports": ["stdio"],
                "authentication": [],
                "toolPaths": ["native"],
                "contentCategories": ["text"],
                "limits": {},
                "managedPolicy": {"scopes": ["user"], "disableable": True},
                "correlationIdentityFields": [],
            },
            "items": [_message("system"), _message("developer")],
        },
        "session.end": {
            "session": {"id": "s"},
            "outcome": "completed",
            "reason": "bye",
            "items": _parts(),
        },
        "turn.start": {"turn": {"id": "t"}, "trigger": "user", "items": [_message("user")]},
        "turn.finish.before": {
            "turn": {"id": "t"},
            "outcome": "completed",
            "continuationCount": 0,
            "items": [_message("assistant")],
        },
        "turn.end": {
            "turn": {"id": "t"},
            "outcome": "failed",
            "continuationCount": 0,
            "error": copy.deepcopy(ERROR),
            "items": [_message("assistant")],
        },
        "turn.progress": {
            "turn": {"id": "t"},
            "item": {"id": "i"},
            "delta": _message("assistant"),
            "final": True,
            "items": _parts(),
        },
        "model.request.before": {
            **_model(),
            "params": {"temperature": 0},
            "items": [_message("user")],
        },
        "model.response.after": {
            **_model(),
            "execution": {"status": "executed"},
            "finishReason": "stop",
            "items": [_message("assistant")],
        },
        "model.error": {
            **_model(),
            "execution": {"status": "executed"},
            "error": copy.deepcopy(ERROR),
            "items": _parts(),
        },
        "model.switch.before": {
            "current": {"id": "a", "provider": "p"},
            "proposed": {"id": "b", "provider": "p"},
            "reason": "r",
            "items": _parts(),
        },
        "model.switch.after": {
            "previous": {"id": "a", "provider": "p"},
            "current": {"id": "b", "provider": "p"},
            "reason": "r",
            "items": _parts(),
        },
        "context.compact.before": {
            "trigger": "auto",
            "instructions": _text_parts(),
            "items": [_message("user")],
        },
        "context.compact.after": {
            "summary": _text_parts(),
            "removed": [],
            "execution": {"status": "executed"},
            "items": [_message("assistant")],
        },
        "config.change.before": {
            "change": {"source": "u", "scope": "p", "settings": [], "summary": "s"},
            "items": _parts(),
        },
        "config.change.after": {
            "change": {"source": "u", "scope": "p", "settings": [], "summary": "s"},
            "items": _parts(),
        },
        "task.change.before": {
            "task": {"id": "t", "operation": "create", "change": {}},
            "items": _parts(),
        },
        "task.change.after": {
            "task": {"id": "t", "operation": "create", "change": {}},
            "items": _parts(),
        },
        "workspace.change.before": {
            "workspace": {"kind": "cwd", "change": {"cwd": "/x"}},
            "items": _parts(),
        },
        "workspace.change.after": {
            "workspace": {"kind": "cwd", "change": {"cwd": "/x"}},
            "items": _parts(),
        },
        "file.changed": {
            "changes": [
                {
                    "path": "/a",
                    "operation": "update",
                    "agentCaused": True,
                    "before": _text(),
                    "after": _text(),
                },
                {
                    "path": "/b",
                    "operation": "create",
                    "agentCaused": True,
                    "after": _attachment("image/png"),
                },
            ],
            "items": _parts(),
        },
        "user.attention": {
            "attention": {"kind": "k", "message": _text_parts(), "title": _text_parts()},
            "items": _parts(),
        },
        "user.elicitation.request": {
            "elicitation": {"server": "s", "mode": "form", "request": _text()},
            "items": _parts(),
        },
        "user.elicitation.result": {
            "elicitation": {"server": "s", "mode": "form", "action": "accept", "result": _text()},
            "items": _parts(),
        },
        "user.message.inbound": {
            "message": {"channel": "c", "sender": "s", "messages": [_message("user")]},
            "items": _parts(),
        },
        "user.message.outbound": {
            "message": {"channel": "c", "messages": [_message("assistant")]},
            "items": _parts(),
        },
        "hook.failure": {
            "parentEventId": "e0",
            "failure": {"backendId": "b", "reason": "r", "policy": "fail-open"},
            "items": _parts(),
        },
    }


BODIES = _bodies()


def rich(event_type: str) -> dict[str, Any]:
    """A valid event of ``event_type`` with a marked body in every content slot it has."""
    return copy.deepcopy(
        {
            "id": "e1",
            "source": "urn:test:harness",
            "type": event_type,
            "time": "2026-09-15T12:00:00Z",
            "harness": {"name": "h", "version": "1"},
            "native": {"raw": f"{MARK}-native"},
            **BODIES[event_type],
        }
    )


def _part_nodes(value: Any) -> Iterator[dict[str, Any]]:
    """Every object that looks like a content part, anywhere."""
    if isinstance(value, dict):
        if "kind" in value and "mediaType" in value:
            yield value
        for child in value.values():
            yield from _part_nodes(child)
    elif isinstance(value, list):
        for child in value:
            yield from _part_nodes(child)


def test_rich_samples_cover_the_catalogue(official_schema: Schema) -> None:
    assert set(BODIES) == set(catalogue.EVENT_TYPES)
    for event_type in BODIES:
        event = rich(event_type)
        assert official_schema("event.schema.json", event) == [], event_type
        assert parse_event(event).to_wire() == event
        assert MARK in json.dumps(event)


def test_slots_cover_every_official_content_slot() -> None:
    from agenthooksprotocol._content import normalized_content_slots  # test peer only
    from ahp_protocol.wire._projection import _PART_SLOTS

    ours = set(_PART_SLOTS)
    for event_type, (parts, _messages) in normalized_content_slots().items():
        for path in parts:
            covered = path in ours or (path[-2:] == ("parts", "*") and path[:-2] in ours)
            assert covered, (event_type, path)


# --------------------------------------------------------------------------- projection

WITHHOLDING = [
    {"default": "omit"},
    {"default": "metadata"},
    {
        "default": "body",
        "text": "omit",
        "reasoning": "metadata",
        "tool_result": "omit",
        "images": "metadata",
        "audio": "omit",
        "video": "metadata",
        "files": "omit",
        "screenshots": "metadata",
    },
]


@pytest.mark.parametrize("selection", WITHHOLDING, ids=["omit", "metadata", "per-category"])
@pytest.mark.parametrize("event_type", sorted(BODIES))
def test_withheld_views_carry_no_body_anywhere(
    event_type: str, selection: dict[str, str], official_schema: Schema
) -> None:
    event = rich(event_type)
    before = copy.deepcopy(event)
    view = project_event(event, selection)
    assert event == before
    assert MARK not in json.dumps(view)
    parts = list(_part_nodes(view))
    assert parts
    for part in parts:
        assert part["selection"] in ("metadata", "omit")
        assert not {"text", "body", "gap"} & set(part)
        if part["selection"] == "omit":
            assert not {"size", "sha256"} & set(part)
    assert "native" not in view
    assert "native" not in view.get("error", {})
    assert official_schema("event.schema.json", view) == []
    assert parse_event(view).to_wire() == view


@pytest.mark.parametrize("event_type", sorted(BODIES))
def test_body_selection_is_an_identical_copy(event_type: str) -> None:
    event = rich(event_type)
    view = project_event(event, {"default": "body"}, include_native=True)
    assert view == event
    assert view is not event
    view["native"]["raw"] = "changed"
    assert event["native"]["raw"] != "changed"


SELECTIONS = st.fixed_dictionaries(
    {"default": st.sampled_from(["body", "metadata", "omit"])},
    optional={
        c: st.sampled_from(["body", "metadata", "omit"])
        for c in (*CATEGORIES, "tool_result", "screenshots")
    },
)


@settings(max_examples=120, deadline=None)
@given(event_type=st.sampled_from(sorted(BODIES)), selection=SELECTIONS, include=st.booleans())
def test_projection_matches_the_sdk_part_by_part(
    event_type: str, selection: dict[str, str], include: bool
) -> None:
    from agenthooksprotocol._content import project_content  # test peer only

    event = rich(event_type)
    ours = project_event(event, selection, include_native=include)
    theirs = project_content(copy.deepcopy(event), dict(selection), include_native=include)
    ours_modes = {p["id"]: p["selection"] for p in _part_nodes(ours)}
    theirs_modes = {p["id"]: p["selection"] for p in _part_nodes(theirs)}
    assert ours_modes == theirs_modes
    rank = {"omit": 0, "metadata": 1, "body": 2}
    originals = {p["id"]: p for p in _part_nodes(event)}
    for part in _part_nodes(ours):
        original = originals[part["id"]]
        mode = selection.get(part_category(original), selection["default"])
        assert part["selection"] == min(mode, original["selection"], key=rank.__getitem__)
        if part["selection"] != "body":
            assert not {"text", "body", "gap"} & set(part)
        else:
            assert part == original
    assert parse_event(ours).to_wire() == ours
    assert ("native" in ours) == (include and all(v == "body" for v in selection.values()))


def test_categories_pick_the_view() -> None:
    event = rich("turn.start")
    view = project_event(
        event,
        {"default": "omit", "text": "body", "images": "metadata", "reasoning": "omit"},
    )
    by_id = {p["id"]: p for p in _part_nodes(view)}
    originals = {p["id"]: p for p in _part_nodes(event)}
    for pid, part in by_id.items():
        original = originals[pid]
        category = part_category(original)
        expected = {"text": "body", "images": "metadata"}.get(category, "omit")
        if original["selection"] == "metadata":
            expected = "metadata" if expected != "omit" else "omit"
        assert part["selection"] == expected, (category, part)


def test_metadata_view_keeps_size_and_digest_but_never_invents_a_digest() -> None:
    text = _text()
    gap = _gap()
    event = {**rich("tool.before"), "items": [text, gap]}
    view = project_event(event, {"default": "metadata"})
    assert view["items"][0] == {
        "id": text["id"],
        "kind": "text",
        "mediaType": "text/plain",
        "selection": "metadata",
        "size": len(text["text"].encode("utf-8")),
    }
    assert view["items"][1] == {
        "id": gap["id"],
        "kind": "text",
        "mediaType": "text/plain",
        "selection": "metadata",
        "size": 12,
        "sha256": "b" * 64,
    }
    omitted = project_event(event, {"default": "omit"})
    assert omitted["items"][1] == {
        "id": gap["id"],
        "kind": "text",
        "mediaType": "text/plain",
        "selection": "omit",
    }


def test_a_selection_never_upgrades_a_part() -> None:
    meta = {
        "id": "m",
        "kind": "text",
        "mediaType": "text/plain",
        "selection": "metadata",
        "size": 3,
    }
    omitted = {"id": "o", "kind": "text", "mediaType": "text/plain", "selection": "omit"}
    event = {**rich("tool.before"), "items": [meta, omitted]}
    view = project_event(event, {"default": "body"})
    assert view["items"] == [meta, omitted]


def test_unknown_or_missing_selection_values_count_as_omit() -> None:
    event = {**rich("tool.before"), "items": [_text()]}
    assert project_event(event, {"text": "everything"})["items"][0]["selection"] == "omit"
    assert project_event(event, {})["items"][0]["selection"] == "omit"
    assert "native" not in project_event(event, {})


def test_native_is_kept_only_when_everything_is_body_and_native_is_allowed() -> None:
    event = rich("tool.after")
    kept = project_event(event, {"default": "body", "images": "body"}, include_native=True)
    assert kept["native"] == event["native"]
    assert kept["error"]["native"] == event["error"]["native"]
    for selection in ({"default": "body", "reasoning": "metadata"}, {"default": "metadata"}):
        view = project_event(event, selection, include_native=True)
        assert "native" not in view and "native" not in view["error"]
    for view in (
        project_event(event, {"default": "body"}),
        project_event(event, {"default": "body"}, include_native=False),
    ):
        assert "native" not in view and "native" not in view["error"]


def test_duplicate_bodies_in_tool_input_are_withheld_and_named_in_gaps() -> None:
    body = _text()
    long_body = _text()
    event = rich("tool.before")
    event["items"] = [body, long_body]
    event["tool"]["input"] = {
        "path": "notes.txt",
        "content": body["text"],
        "patch": ["keep", f"--- a\n+++ b\n{long_body['text']}\n"],
        "short": "the",
    }
    event["gaps"] = [{"path": "model.reasoning", "reason": "not exposed"}]
    view = project_event(event, {"default": "metadata"})
    assert view["tool"]["input"] == {
        "path": "notes.txt",
        "content": "",
        "patch": ["keep", ""],
        "short": "the",
    }
    assert view["gaps"] == [
        {"path": "model.reasoning", "reason": "not exposed"},
        {"path": "tool.input.content", "reason": WITHHELD_REASON},
        {"path": "tool.input.patch[1]", "reason": WITHHELD_REASON},
    ]
    assert MARK not in json.dumps(view)
    assert parse_event(view).to_wire() == view
    untouched = project_event(event, {"default": "body"})
    assert untouched["tool"]["input"] == event["tool"]["input"]
    assert untouched["gaps"] == event["gaps"]


def test_duplicates_in_other_open_json_are_withheld() -> None:
    event = rich("model.request.before")
    text = event["items"][0]["parts"][0]["text"]
    ref = event["items"][0]["parts"][3]["body"]["ref"]
    event["params"] = {"messages": [{"content": text}], "image": ref}
    event["extensions"] = {"com.example.copy": text}
    view = project_event(event, {"default": "omit"})
    assert view["params"] == {"messages": [{"content": ""}], "image": ""}
    assert view["extensions"] == {"com.example.copy": ""}
    assert {g["path"] for g in view["gaps"]} == {
        "params.messages[0].content",
        "params.image",
        "extensions.com.example.copy",
    }
    assert MARK not in json.dumps(view)


def test_projection_of_a_single_tool_input_keeps_the_operation() -> None:
    event = rich("tool.before")
    view = project_event(event, {"default": "omit"})
    assert view["tool"] == event["tool"]
    assert "gaps" not in view

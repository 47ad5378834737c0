"""``ahp-protocol validate`` (the installed command) on two rules upstream's interop found.

- AHP-DEC-001: a successful intercept result *contains* an ordered ``effects`` array
  (``[]`` for no effect); a result without it, or with ``"effects": null``, is invalid.
  The official SDK 0.10.1 schema is looser here (``effects`` optional); we follow the
  spec, and this file pins that divergence so it stays deliberate.
- Manifest limits are integers >= 0: ``limits.maxUploadBytes: null`` (or any other
  limit) is invalid, in a ``hooks/capabilities`` result and in ``session.start``, as the
  official schemas say.

Each case runs the real command on a file and reads its ``--json`` verdict.
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

COMMAND = Path(sys.executable).parent / "ahp-protocol"
LIMITS = ("maxUploadBytes", "maxContinuations", "minTimeoutMs", "maxTimeoutMs")
Schema = Callable[[str, Any], list[str]]

MANIFEST: dict[str, Any] = {
    "events": [
        {"event": "tool.before", "modes": ["intercept"], "capabilities": {"effects": ["deny"]}}
    ],
    "gaps": [],
    "transports": ["stdio"],
    "authentication": [],
    "toolPaths": ["native"],
    "contentCategories": ["text"],
    "limits": {"maxUploadBytes": 0, "maxContinuations": 0, "minTimeoutMs": 1, "maxTimeoutMs": 9},
    "managedPolicy": {"scopes": ["user"], "disableable": True},
    "correlationIdentityFields": ["id"],
}


def validate(tmp_path: Path, document: Any) -> dict[str, Any]:
    """Run ``ahp-protocol validate --json`` on ``document``; its one verdict."""
    path = tmp_path / "message.json"
    path.write_text(json.dumps(document), "utf-8")
    done = subprocess.run(
        [str(COMMAND), "validate", "--json", str(path)],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    (verdict,) = json.loads(done.stdout)
    assert done.returncode == (0 if verdict["valid"] else 1), done.stderr
    assert isinstance(verdict, dict)
    return verdict


def intercept_response(result: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": "evt_1", "result": {"protocolVersion": "draft", **result}}


def capabilities_response(manifest: dict[str, Any]) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": "discovery",
        "result": {"protocolVersion": "draft", "manifest": manifest},
    }


def envelope(event_type: str, event_id: str, **fields: Any) -> dict[str, Any]:
    """An event of ``event_type`` with the envelope fields filled, plus ``fields``."""
    return {
        "id": event_id,
        "source": "urn:example:harness",
        "type": event_type,
        "time": "2026-01-01T00:00:00Z",
        "harness": {"name": "h", "version": "1"},
        **fields,
    }


def observe(event: dict[str, Any]) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "method": "hooks/observe",
        "params": {"protocolVersion": "draft", "event": event},
    }


def session_start(manifest: dict[str, Any]) -> dict[str, Any]:
    return observe(
        envelope(
            "session.start",
            "evt_s",
            session={"id": "s"},
            trigger="startup",
            permissionMode="default",
            manifest=manifest,
            items=[],
        )
    )


def with_limit(name: str, value: Any) -> dict[str, Any]:
    manifest = copy.deepcopy(MANIFEST)
    manifest["limits"][name] = value
    return manifest


# -- AHP-DEC-001: the effects array --------------------------------------------------------


def test_an_intercept_result_without_effects_is_invalid(
    tmp_path: Path, official_schema: Schema
) -> None:
    message = intercept_response({})
    verdict = validate(tmp_path, message)
    assert not verdict["valid"]
    (error,) = verdict["errors"]
    assert error["path"] == "result" and "effects is required" in error["reason"]
    # The SDK 0.10.1 schema accepts it: the spec, not the schema, decides here.
    assert official_schema("json-rpc-message.schema.json", message) == []


def test_null_or_non_array_effects_are_invalid(tmp_path: Path) -> None:
    for effects in (None, {}, "deny"):
        verdict = validate(tmp_path, intercept_response({"effects": effects}))
        assert not verdict["valid"], effects
        assert verdict["errors"][0]["path"] == "result.effects", effects


def test_an_empty_effects_array_is_the_valid_no_effect(tmp_path: Path) -> None:
    assert validate(tmp_path, intercept_response({"effects": []}))["valid"]


# -- manifest limits are integers ----------------------------------------------------------


def test_the_manifest_fixture_is_valid(tmp_path: Path, official_schema: Schema) -> None:
    assert validate(tmp_path, capabilities_response(MANIFEST))["valid"]
    assert validate(tmp_path, session_start(MANIFEST))["valid"]
    assert (
        official_schema("capabilities-response.schema.json", capabilities_response(MANIFEST)) == []
    )


@pytest.mark.parametrize("name", LIMITS)
def test_a_null_limit_is_invalid_in_discovery_and_session_start(
    name: str, tmp_path: Path, official_schema: Schema
) -> None:
    manifest = with_limit(name, None)
    discovery = capabilities_response(manifest)
    verdict = validate(tmp_path, discovery)
    assert not verdict["valid"]
    assert verdict["errors"][0]["path"] == f"result.manifest.limits.{name}"
    assert "not null" in verdict["errors"][0]["reason"]
    assert official_schema("capabilities-response.schema.json", discovery) != []

    started = validate(tmp_path, session_start(manifest))
    assert not started["valid"]
    assert started["errors"][0]["path"].endswith(f"manifest.limits.{name}")


def test_omitted_limits_are_valid(tmp_path: Path) -> None:
    # Absence is how a manifest says "unknown" (with a gap); other non-integers
    # (negative, string, boolean) are judged by the model: test_capabilities.py.
    manifest = copy.deepcopy(MANIFEST)
    manifest["limits"] = {}
    manifest["gaps"] = [{"path": "limits", "reason": "not measured"}]
    assert validate(tmp_path, capabilities_response(manifest))["valid"]


# -- tool kinds outside the vocabulary: valid, with a note --------------------------------

TOOL = {"name": "Bash", "kind": "shell", "input": {"command": "ls"}, "origin": "native"}


def tool_before(kind: str) -> dict[str, Any]:
    """A valid ``hooks/intercept`` of a tool.before whose tool says ``kind`` ("": none)."""
    tool = {**TOOL, "kind": kind}
    if not kind:
        del tool["kind"]
    event = envelope(
        "tool.before", "evt_k", session={"id": "s"}, call={"id": "c1"}, tool=tool, path="native"
    )
    return {
        "jsonrpc": "2.0",
        "id": "evt_k",
        "method": "hooks/intercept",
        "params": {"protocolVersion": "draft", "event": event, "capabilities": {"effects": []}},
    }


def batch_after(*kinds: str) -> dict[str, Any]:
    calls = [
        {
            "call": {"id": f"c{i}"},
            "tool": {**TOOL, "kind": kind},
            "path": "native",
            "outcome": "ok",
            "execution": {"status": "executed"},
        }
        for i, kind in enumerate(kinds)
    ]
    return observe(envelope("tool.batch.after", "evt_b", batch={"id": "b1"}, calls=calls))


def subscription(*kinds: str) -> dict[str, Any]:
    return {
        "events": ["tool.before"],
        "mode": "intercept",
        "timeoutMs": 100,
        "failurePolicy": "fail-closed",
        "content": {"default": "metadata"},
        "filters": {"toolKinds": list(kinds)},
    }


KNOWN = "shell, file_read, file_write, file_edit, search, fetch, task, mcp, other"


def test_an_unknown_tool_kind_is_valid_with_a_note(tmp_path: Path) -> None:
    verdict = validate(tmp_path, tool_before("bash"))
    assert verdict["valid"] and verdict["errors"] == []
    (note,) = verdict["notes"]
    assert note["path"] == "params.event.tool.kind"
    assert note["note"].startswith(f'unknown tool kind "bash" (known: {KNOWN})')
    assert "never matches" in note["note"]


@pytest.mark.parametrize("kind", ["shell", "other", "mcp", ""])
def test_a_known_or_absent_kind_has_no_note(kind: str, tmp_path: Path) -> None:
    verdict = validate(tmp_path, tool_before(kind))
    assert verdict["valid"] and verdict["notes"] == []


def test_every_call_of_a_batch_is_looked_at(tmp_path: Path) -> None:
    verdict = validate(tmp_path, batch_after("shell", "Shell", "file_read", "exec"))
    assert verdict["valid"], verdict
    assert [n["path"] for n in verdict["notes"]] == [
        "params.event.calls[1].tool.kind",
        "params.event.calls[3].tool.kind",
    ]


def test_unknown_filter_kinds_in_a_registration_and_a_configuration(tmp_path: Path) -> None:
    hook = {
        "id": "com.example.guard",
        "transport": {"type": "stdio", "command": "guard", "lifecycle": "persistent"},
        "subscriptions": [subscription("shell"), subscription("file_read", "bash")],
    }
    verdict = validate(tmp_path, {"protocolVersion": "draft", "hooks": [hook]})
    assert verdict["valid"], verdict
    (note,) = verdict["notes"]
    assert note["path"] == "hooks[0].subscriptions[1].filters.toolKinds[1]"
    assert note["note"].startswith(f'unknown tool kind "bash" (known: {KNOWN})')
    assert "never justify dropping" in note["note"]

    configuration = {
        "jsonrpc": "2.0",
        "id": "config",
        "result": {
            "protocolVersion": "draft",
            "configuration": {"subscriptions": [subscription("Read")]},
        },
    }
    verdict = validate(tmp_path, configuration)
    assert verdict["valid"], verdict
    assert [n["path"] for n in verdict["notes"]] == [
        "result.configuration.subscriptions[0].filters.toolKinds[0]"
    ]


def test_notes_in_text_output_and_stdio_files(tmp_path: Path) -> None:
    path = tmp_path / "session.jsonl"
    lines = [tool_before("shell"), tool_before("bash")]
    path.write_text("".join(json.dumps(m) + "\n" for m in lines), "utf-8")
    done = subprocess.run(
        [str(COMMAND), "validate", str(path)],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    first, second = done.stdout.splitlines()
    assert first == f"{path}: valid"
    assert second.startswith(
        f'{path}: note: line 2: params.event.tool.kind: unknown tool kind "bash"'
    )


def test_an_invalid_file_keeps_its_verdict_and_still_notes(tmp_path: Path) -> None:
    message = tool_before("bash")
    del message["params"]["capabilities"]
    verdict = validate(tmp_path, message)
    assert not verdict["valid"]
    assert [n["path"] for n in verdict["notes"]] == ["params.event.tool.kind"]


def test_a_long_unknown_kind_is_shown_cut_but_still_quoted(tmp_path: Path) -> None:
    """Notes show a value the way registration reasons do (``registration_rules.show``)."""
    verdict = validate(tmp_path, tool_before("k" * 100))
    (note,) = verdict["notes"]
    assert note["note"].startswith('unknown tool kind "' + "k" * 63 + '\u2026" (known: ')

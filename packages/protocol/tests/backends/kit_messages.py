"""Message builders shared by the server-kit tests (not a test module)."""

from __future__ import annotations

import json
from typing import Any

HARNESS = {"name": "kit-test-harness", "version": "1.0"}


def tool_before(event_id: str = "evt_1", command: str = "ls", **extra: Any) -> dict[str, Any]:
    event: dict[str, Any] = {
        "id": event_id,
        "source": "urn:uuid:5b7de29e-a9e0-41a8-bf26-d94b05f0656d",
        "type": "tool.before",
        "time": "2026-08-24T08:51:14Z",
        "harness": dict(HARNESS),
        "session": {"id": "sess_123", "cwd": "/repo"},
        "tool": {
            "name": "Bash",
            "kind": "shell",
            "input": {"command": command},
            "origin": "native",
        },
        "call": {"id": "call_456"},
        "path": "native",
    }
    event.update(extra)
    return event


def tool_after(event_id: str = "evt_after_1") -> dict[str, Any]:
    return {
        "id": event_id,
        "source": "https://harness.example/runtime/42",
        "type": "tool.after",
        "time": "2026-08-24T08:51:15Z",
        "harness": dict(HARNESS),
        "session": {"id": "sess_123"},
        "tool": {"name": "read_file", "input": {"path": "README.md"}, "origin": "native"},
        "outcome": "ok",
        "execution": {"status": "executed"},
        "call": {"id": "call_457"},
        "path": "native",
        "items": [],
    }


def turn_start(event_id: str = "evt_turn_1") -> dict[str, Any]:
    return {
        "id": event_id,
        "source": "urn:test:harness",
        "type": "turn.start",
        "time": "2026-09-15T12:00:00Z",
        "harness": dict(HARNESS),
        "turn": {"id": "turn1"},
        "trigger": "user",
        "items": [],
    }


def session_end(event_id: str = "evt_end_1", **extra: Any) -> dict[str, Any]:
    event: dict[str, Any] = {
        "id": event_id,
        "source": "urn:uuid:5b7de29e-a9e0-41a8-bf26-d94b05f0656d",
        "type": "session.end",
        "time": "2026-08-24T09:15:00Z",
        "harness": dict(HARNESS),
        "session": {"id": "sess_123"},
        "outcome": "completed",
        "reason": "example",
    }
    event.update(extra)
    return event


def intercept(
    event: dict[str, Any],
    effects: list[str] | None = None,
    *,
    id: Any = None,
    version: str = "draft",
    **params: Any,
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "protocolVersion": version,
        "event": event,
        "capabilities": {"effects": ["deny"] if effects is None else effects},
    }
    body.update(params)
    return {
        "jsonrpc": "2.0",
        "id": event["id"] if id is None else id,
        "method": "hooks/intercept",
        "params": body,
    }


def observe(event: dict[str, Any], *, version: str = "draft") -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "method": "hooks/observe",
        "params": {"protocolVersion": version, "event": event},
    }


def configuration_request(id: Any = "cfg_1", **params: Any) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": id,
        "method": "hooks/configuration",
        "params": {"protocolVersion": "draft", **params},
    }


def line(message: Any) -> bytes:
    return json.dumps(message, separators=(",", ":")).encode() + b"\n"

"""What this harness can enforce, per event: its capabilities and its manifest.

Owns the honest declaration served by ``hooks/capabilities`` and printed by
``ahp-harness manifest``: the events it emits, the modes and effects it
enforces at each, and ``gaps`` for everything it does not cover. ``ask`` is
advertised only when someone can answer a prompt (an interactive session);
``flow continue`` is never advertised (the harness runs no continuation
loop), nor is ``return`` where it cannot deliver one. ``modify`` of the input
at ``tool.permission.request`` is advertised because the gate enforces it in
full: a changed input goes through ``tool.before`` again before the host
decides (``ahp_harness.hooks``), so no input runs that ``tool.before`` did not see.
"""

from __future__ import annotations

from typing import Any

from ahp_protocol.wire import catalogue

_MESSAGES_TARGET = {"replace": True, "merge": True}

INTERCEPTED: dict[str, dict[str, Any]] = {
    "tool.before": {
        "effects": ["deny", "allow", "ask", "modify", "inject", "flow", "return", "message"],
        "modify": {"input": {"replace": True, "merge": True}},
        "flow": {"operations": ["stop"]},
        "inject": {"context": {"append": True, "deliverAt": ["now", "next_turn"]}},
    },
    "tool.permission.request": {
        "effects": ["allow", "deny", "modify", "flow", "message"],
        "modify": {"input": {"replace": True, "merge": True}},
        "flow": {"operations": ["stop"]},
    },
    "tool.after": {
        "effects": ["modify", "inject", "flow", "message"],
        "modify": {"output": dict(_MESSAGES_TARGET)},
        "flow": {"operations": ["stop"]},
        "inject": {"context": {"append": True, "deliverAt": ["now", "next_turn"]}},
    },
    "session.start": {
        "effects": ["inject", "message"],
        "inject": {"context": {"append": True, "deliverAt": ["now", "next_turn"]}},
    },
    "turn.start": {
        "effects": ["deny", "modify", "inject", "flow", "message"],
        "modify": {"prompt": dict(_MESSAGES_TARGET)},
        "flow": {"operations": ["stop"]},
        "inject": {"context": {"append": True, "deliverAt": ["now", "next_turn"]}},
    },
    "model.request.before": {
        "effects": ["deny", "modify", "flow", "message"],
        "modify": {"request": dict(_MESSAGES_TARGET)},
        "flow": {"operations": ["stop"]},
    },
    "model.response.after": {
        "effects": ["modify", "flow", "message"],
        "modify": {"response": dict(_MESSAGES_TARGET)},
        "flow": {"operations": ["stop"]},
    },
}
"""Interceptable events this harness enforces, with the most it grants at each."""

MAX_UPLOAD_BYTES = 256_000
"""The largest attachment this harness produces: ``read_file`` attaches a binary file of
at most ``Limits.read_cap_bytes`` (its default; a test keeps the two equal)."""

OBSERVED = (
    "session.start",
    "session.end",
    "turn.start",
    "turn.end",
    "model.request.before",
    "model.response.after",
    "tool.before",
    "tool.after",
    "tool.permission.request",
    "tool.permission.resolved",
    "file.changed",
    "hook.failure",
)
"""Events this harness emits to observers."""


def capabilities(*, interactive: bool) -> dict[str, dict[str, Any]]:
    """Per-event capabilities to grant (the dispatcher narrows them per request)."""
    out: dict[str, dict[str, Any]] = {}
    for event, caps in INTERCEPTED.items():
        grant = {k: (dict(v) if isinstance(v, dict) else list(v)) for k, v in caps.items()}
        if not interactive:
            grant["effects"] = [e for e in grant["effects"] if e != "ask"]
        out[event] = grant
    return out


def manifest(*, interactive: bool) -> dict[str, Any]:
    """The manifest served for ``hooks/capabilities`` (all nine fields, with gaps)."""
    caps = capabilities(interactive=interactive)
    events = []
    for event in catalogue.EVENT_TYPES:
        modes = []
        if event in caps:
            modes.append("intercept")
        if event in OBSERVED:
            modes.append("observe")
        if not modes:
            continue
        entry: dict[str, Any] = {"event": event, "modes": modes}
        entry["capabilities"] = caps.get(event, {"effects": []})
        events.append(entry)
    covered = {e["event"] for e in events}
    gaps = [
        {"path": f"events.{event}", "reason": "not emitted by this harness"}
        for event in catalogue.EVENT_TYPES
        if event not in covered
    ]
    gaps += [
        {"path": "capabilities.flow.continue", "reason": "no continuation loop"},
    ]
    if not interactive:
        gaps.append({"path": "capabilities.ask", "reason": "non-interactive: nobody can answer"})
        gaps.append({"path": "authentication.oauth.flow", "reason": "non-interactive: no PKCE"})
    return {
        "events": events,
        "gaps": gaps,
        "transports": ["stdio", "http"],
        "authentication": ["bearer", "oauth"],
        "toolPaths": ["native", "mcp"],
        "contentCategories": ["text", "images", "files"],
        "limits": {"minTimeoutMs": 1, "maxTimeoutMs": 600000, "maxUploadBytes": MAX_UPLOAD_BYTES},
        "managedPolicy": {"scopes": ["user", "managed"], "disableable": False},
        "correlationIdentityFields": ["event.id", "call.id", "session.id"],
    }

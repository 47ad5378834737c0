"""Canonical AHP events from a parsed native payload, and the adapter's manifest.

Owns the envelope every adapter event carries: a fresh ``id``; a ``source``
that is stable per machine, user and dialect (``urn:uuid:`` derived, never the
machine id itself); ``time``; ``harness`` (the dialect's harness name and the
version from the payload, the environment or ``"unknown"``); and the native
payload under ``native`` as ``{provider, eventName, payload}``. ``native`` is
always attached here and the dispatcher delivers it only to subscriptions that
set ``includeNative`` (with a full-body content selection), as the draft says.

Also owns :func:`manifest`, the honest declaration embedded in
``session.start``: ``tool.before`` interceptable with exactly what the dialect
advertises per call (:meth:`Dialect.capabilities`: ``deny``, plus ``modify`` of
``tool.input`` where the harness enforces a rewrite), the rest observed, gaps for
what the dialect cannot see or enforce. Standard library only.
"""

from __future__ import annotations

import functools
import os
import uuid
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from ahp_adapters.dialects.base import Dialect, Parsed

SOURCE_NAMESPACE = uuid.UUID("6f1d2c3e-4b5a-5c6d-8e7f-a0b1c2d3e4f5")
HARNESS_VERSION_ENV = "AHP_ADAPTER_HARNESS_VERSION"
MACHINE_ID_FILES = ("/etc/machine-id", "/var/lib/dbus/machine-id")


def now_rfc3339() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _machine() -> str:
    for path in MACHINE_ID_FILES:
        try:
            with open(path, encoding="ascii") as handle:
                value = handle.read().strip()
        except (OSError, UnicodeDecodeError):
            continue
        if value:
            return value
    import socket

    return socket.gethostname()


@functools.cache
def source_uri(dialect: str) -> str:
    """``urn:uuid:`` stable per machine, user and dialect (a name-based UUID: nothing leaks)."""
    uid = os.getuid() if hasattr(os, "getuid") else os.environ.get("USERNAME", "")
    name = f"ahp-adapter\0{_machine()}\0{uid}\0{dialect}"
    return f"urn:uuid:{uuid.uuid5(SOURCE_NAMESPACE, name)}"


def harness_version(
    parsed: Parsed, override: str | None = None, dialect: Dialect | None = None
) -> str:
    """The payload's version, else ``--harness-version``, else ``$AHP_ADAPTER_HARNESS_VERSION``,
    else what the harness exports to its hooks (read where the event is built: in the
    adapter's daemon, the environment of the hook that started it), else ``unknown``."""
    for value in (parsed.harness_version, override, os.environ.get(HARNESS_VERSION_ENV)):
        if value:
            return value
    return (dialect.version_from_env(os.environ) if dialect else None) or "unknown"


def build_event(
    dialect: Dialect,
    parsed: Parsed,
    payload: Mapping[str, Any],
    *,
    source: str | None = None,
    version: str | None = None,
    budget_ms: int = 10_000,
) -> dict[str, Any]:
    """The canonical event for ``parsed`` (``parsed.kind`` must not be ``ignore``)."""
    if parsed.kind == "ignore":
        raise ValueError("an ignored payload has no event")
    event: dict[str, Any] = {
        "id": f"evt_{uuid.uuid4().hex}",
        "source": source or source_uri(dialect.name),
        "type": parsed.kind,
        "time": now_rfc3339(),
        "harness": {
            "name": dialect.harness_name,
            "version": harness_version(parsed, version, dialect),
        },
    }
    event.update(parsed.fields)
    if parsed.kind == "session.start":
        event["manifest"] = manifest(dialect, budget_ms=budget_ms)
    event["native"] = {
        "provider": dialect.provider,
        "eventName": parsed.native_event,
        "payload": dict(payload),
    }
    return event


def tool_before_capabilities(dialect: Dialect) -> dict[str, Any]:
    """The union of what the dialect advertises at its pre-tool events (each call's own
    advertisement is then a subset of this declaration, as the draft requires)."""
    effects: list[str] = ["deny"]
    modify: dict[str, dict[str, bool]] = {}
    for native_event in sorted(dialect.pre_tool_events):
        advertised = dialect.capabilities(native_event)
        effects += [e for e in advertised["effects"] if e not in effects]
        for target, ops in advertised.get("modify", {}).items():
            have = modify.setdefault(target, {"replace": False, "merge": False})
            for op in ("replace", "merge"):
                have[op] = have[op] or bool(ops.get(op))
    return {"effects": effects, "modify": modify} if modify else {"effects": effects}


def manifest(dialect: Dialect, *, budget_ms: int = 10_000) -> dict[str, Any]:
    """What this adapter can do for ``dialect`` (all nine manifest fields)."""
    observed = dialect.observed_events()
    before = tool_before_capabilities(dialect)
    events: list[dict[str, Any]] = []
    for name in observed:
        if name == "tool.before":
            events.append(
                {"event": name, "modes": ["intercept", "observe"], "capabilities": before}
            )
        else:
            events.append({"event": name, "modes": ["observe"], "capabilities": {"effects": []}})
    gaps = [
        {
            "path": "capabilities.allow",
            "reason": "never encoded: the native allow would skip the harness's permission prompt",
        },
        *(
            []
            if "modify" in before["effects"]
            else [
                {
                    "path": "capabilities.modify",
                    "reason": "input rewrites are not carried into the native answer",
                }
            ]
        ),
        {
            "path": "adapter.process",
            "reason": "if the harness cannot start the adapter or kills it, the harness fails open",
        },
        *dialect.manifest_gaps(),
    ]
    return {
        "events": events,
        "gaps": gaps,
        "transports": ["stdio", "http"],
        "authentication": ["bearer"],
        "toolPaths": dialect.tool_paths(),
        "contentCategories": ["text"],
        "limits": {"minTimeoutMs": 1, "maxTimeoutMs": max(1, budget_ms)},
        "managedPolicy": {"scopes": ["user", "project"], "disableable": True},
        "correlationIdentityFields": ["event.id", "call.id", "session.id", "turn.id"],
    }

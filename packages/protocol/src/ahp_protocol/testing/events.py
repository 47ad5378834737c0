"""Valid events for tests: what a harness would send, with fresh ids.

Owns :func:`tool_before`, a ``tool.before`` event that passes the wire models (a shell
call by default), for driving a :class:`~ahp_protocol.client.Dispatcher` or a
:class:`~ahp_protocol.client.engine.Chain` in a test. A harness builds its events with
:class:`~ahp_protocol.client.Hooks` instead.
"""

from __future__ import annotations

import uuid
from typing import Any

SOURCE = "urn:uuid:5b0c39f4-4b8c-4e38-9d69-0e0e7bb0d5f5"
HARNESS = {"name": "ahp-testing", "version": "1"}


def tool_before(
    command: str = "ls",
    *,
    tool: str = "Bash",
    kind: str = "shell",
    source: str = SOURCE,
    harness: dict[str, str] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """A valid ``tool.before`` event for ``command`` (fresh event and call ids); ``extra``
    keys are set on the event as given."""
    token = uuid.uuid4().hex
    event: dict[str, Any] = {
        "id": f"evt_{token}",
        "source": source,
        "type": "tool.before",
        "time": "2026-08-24T08:51:14Z",
        "harness": dict(harness or HARNESS),
        "session": {"id": "sess_1", "cwd": "/repo"},
        "tool": {"name": tool, "kind": kind, "input": {"command": command}, "origin": "native"},
        "call": {"id": f"call_{token}"},
        "path": "native",
    }
    event.update(extra)
    return event

"""The event catalogue of the draft: names, modes, and subscription selectors.

Owns the 32 standard event types, which of them are interceptable (19) and
which are observe-only (13), the names the draft removed, and selector
matching (exact name, ``family.*`` or ``*``). Pure data and functions; the
shapes of the events themselves live in :mod:`ahp_protocol.wire.events`.
"""

from __future__ import annotations

import re
from typing import Final, Literal

Mode = Literal["intercept", "observe"]

INTERCEPTABLE: Final = (
    "tool.before",
    "tool.after",
    "session.start",
    "config.change.before",
    "turn.start",
    "turn.finish.before",
    "model.request.before",
    "model.switch.before",
    "tool.permission.request",
    "tool.batch.after",
    "context.compact.before",
    "context.compact.after",
    "task.change.before",
    "user.elicitation.request",
    "user.elicitation.result",
    "user.message.inbound",
    "user.message.outbound",
    "workspace.change.before",
    "model.response.after",
)

OBSERVE_ONLY: Final = (
    "session.end",
    "config.change.after",
    "turn.end",
    "turn.progress",
    "model.error",
    "model.switch.after",
    "tool.permission.resolved",
    "tool.progress",
    "task.change.after",
    "user.attention",
    "workspace.change.after",
    "file.changed",
    "hook.failure",
)

EVENT_TYPES: Final = INTERCEPTABLE + OBSERVE_ONLY
INTERCEPTABLE_SET: Final = frozenset(INTERCEPTABLE)
EVENT_TYPE_SET: Final = frozenset(EVENT_TYPES)

REMOVED: Final = frozenset(
    {
        "tool.error",
        "prompt.submitted",
        "agent.stop",
        "notification",
        "permission.request",
        "compact.pre",
        "compact.post",
        "file.edited",
        "other",
    }
)
"""Names of earlier drafts. They are not standard events: unsupported, like any unknown type."""

_WILDCARD = re.compile(r"\*|[a-z][a-z0-9]*\.\*")


def is_event_type(name: object) -> bool:
    return isinstance(name, str) and name in EVENT_TYPE_SET


def is_interceptable(name: str) -> bool:
    return name in INTERCEPTABLE_SET


def is_wildcard(selector: str) -> bool:
    return _WILDCARD.fullmatch(selector) is not None


def is_valid_selector(selector: object) -> bool:
    """A standard event name, ``*``, or a first-segment family such as ``tool.*``."""
    return isinstance(selector, str) and (selector in EVENT_TYPE_SET or is_wildcard(selector))


def selector_matches(selector: str, event_type: str) -> bool:
    """Whether one selector covers one event type (no other pattern language exists)."""
    if selector == "*":
        return True
    if selector.endswith(".*"):
        return event_type.startswith(selector[:-1])
    return selector == event_type


def expand(selector: str, mode: Mode) -> tuple[str, ...]:
    """The standard events one selector covers in ``mode`` (intercept: interceptable only)."""
    pool = INTERCEPTABLE if mode == "intercept" else EVENT_TYPES
    return tuple(e for e in pool if selector_matches(selector, e))

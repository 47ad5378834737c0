"""The task events: ``task.change.before`` and ``task.change.after``.

Builds on :mod:`.envelope`; imported on first use by
:mod:`ahp_protocol.wire.events` (import the names from there). No I/O.
"""

from typing import Literal

from ahp_protocol.wire.content import ClosedModel, ContentItem, NonEmptyStr, Omittable
from ahp_protocol.wire.events.envelope import Event, JsonObject

# --------------------------------------------------------------------------- payloads


class Task(ClosedModel):
    """``task``: ``change``/``prior`` stay open objects."""

    id: NonEmptyStr
    operation: Literal["create", "update", "remove"]
    change: JsonObject
    prior: Omittable[JsonObject] = None
    synthesized: Omittable[bool] = None


# --------------------------------------------------------------------------- events


class TaskChangeBefore(Event):
    type: Literal["task.change.before"] = "task.change.before"
    task: Task
    items: Omittable[list[ContentItem]] = None


class TaskChangeAfter(Event):
    type: Literal["task.change.after"] = "task.change.after"
    task: Task
    items: Omittable[list[ContentItem]] = None

"""The task events: ``task.change.before`` and ``task.change.after``."""

from typing import Literal

from ahp_protocol.wire.content import ContentItem
from ahp_protocol.wire.events.envelope import Event, JsonObject
from ahp_protocol.wire.model import ClosedModel, NonEmptyStr, Omittable


class Task(ClosedModel):
    """``task``: ``change``/``prior`` stay open objects."""

    id: NonEmptyStr
    operation: Literal["create", "update", "remove"]
    change: JsonObject
    prior: Omittable[JsonObject] = None
    synthesized: Omittable[bool] = None


class TaskChangeBefore(Event):
    type: Literal["task.change.before"] = "task.change.before"
    task: Task
    items: Omittable[list[ContentItem]] = None


class TaskChangeAfter(Event):
    type: Literal["task.change.after"] = "task.change.after"
    task: Task
    items: Omittable[list[ContentItem]] = None

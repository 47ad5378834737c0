"""The hook event: ``hook.failure`` (the harness reports a failed backend)."""

from typing import Literal

from ahp_protocol.wire.content import ContentItem
from ahp_protocol.wire.events.envelope import Event
from ahp_protocol.wire.model import ClosedModel, NonEmptyStr, Omittable


class Failure(ClosedModel):
    backend_id: NonEmptyStr
    reason: NonEmptyStr
    policy: Literal["fail-open", "fail-closed"]


class HookFailure(Event):
    """The harness reports a failed backend; ``parentEventId`` names the event it failed on."""

    type: Literal["hook.failure"] = "hook.failure"
    parent_event_id: NonEmptyStr
    failure: Failure
    items: Omittable[list[ContentItem]] = None

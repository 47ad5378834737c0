"""The hook event: ``hook.failure`` (the harness reports a failed backend).

Builds on :mod:`.envelope`; imported on first use by
:mod:`ahp_protocol.wire.events` (import the names from there). No I/O.
"""

from typing import Literal

from ahp_protocol.wire.content import ClosedModel, ContentItem, NonEmptyStr, Omittable
from ahp_protocol.wire.events.envelope import Event

# --------------------------------------------------------------------------- payloads


class Failure(ClosedModel):
    backend_id: NonEmptyStr
    reason: NonEmptyStr
    policy: Literal["fail-open", "fail-closed"]


# --------------------------------------------------------------------------- events


class HookFailure(Event):
    """The harness reports a failed backend; ``parentEventId`` names the event it failed on."""

    type: Literal["hook.failure"] = "hook.failure"
    parent_event_id: NonEmptyStr
    failure: Failure
    items: Omittable[list[ContentItem]] = None

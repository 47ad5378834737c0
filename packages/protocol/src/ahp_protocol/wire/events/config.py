"""The configuration events: ``config.change.before`` and ``config.change.after``.

Builds on :mod:`.envelope`; imported on first use by
:mod:`ahp_protocol.wire.events` (import the names from there). No I/O.
"""

from typing import Literal

from ahp_protocol.wire.content import ClosedModel, ContentItem, NonEmptyStr, Omittable
from ahp_protocol.wire.events.envelope import Event, JsonObject

# --------------------------------------------------------------------------- payloads


class ConfigChange(ClosedModel):
    source: NonEmptyStr
    scope: NonEmptyStr
    settings: list[NonEmptyStr]
    summary: NonEmptyStr
    path: Omittable[NonEmptyStr] = None


class AppliedConfigChange(ConfigChange):
    mcp_servers: Omittable[list[JsonObject]] = None


# --------------------------------------------------------------------------- events


class ConfigChangeBefore(Event):
    type: Literal["config.change.before"] = "config.change.before"
    change: ConfigChange
    items: Omittable[list[ContentItem]] = None


class ConfigChangeAfter(Event):
    type: Literal["config.change.after"] = "config.change.after"
    change: AppliedConfigChange
    items: Omittable[list[ContentItem]] = None

"""The configuration events: ``config.change.before`` and ``config.change.after``."""

from typing import Literal

from ahp_protocol.wire.content import ContentItem
from ahp_protocol.wire.events.envelope import Event, JsonObject
from ahp_protocol.wire.model import ClosedModel, NonEmptyStr, Omittable


class ConfigChange(ClosedModel):
    source: NonEmptyStr
    scope: NonEmptyStr
    settings: list[NonEmptyStr]
    summary: NonEmptyStr
    path: Omittable[NonEmptyStr] = None


class AppliedConfigChange(ConfigChange):
    mcp_servers: Omittable[list[JsonObject]] = None


class ConfigChangeBefore(Event):
    type: Literal["config.change.before"] = "config.change.before"
    change: ConfigChange
    items: Omittable[list[ContentItem]] = None


class ConfigChangeAfter(Event):
    type: Literal["config.change.after"] = "config.change.after"
    change: AppliedConfigChange
    items: Omittable[list[ContentItem]] = None

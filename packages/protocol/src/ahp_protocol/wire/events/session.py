"""The session events: ``session.start`` (its ``manifest`` checked by
:func:`ahp_protocol.wire.manifest.parse_manifest`) and ``session.end``."""

from typing import Literal, Self

from pydantic import field_validator, model_validator

from ahp_protocol.wire.content import ContentItem, Message
from ahp_protocol.wire.errors import WireError, WireErrors
from ahp_protocol.wire.events.envelope import Event, JsonObject, Ref, Session
from ahp_protocol.wire.model import NonEmptyStr, NonNegativeInt, Omittable, rule


class SessionStart(Event):
    _forbidden = ("tool", "outcome")
    type: Literal["session.start"] = "session.start"
    session: Session
    trigger: Literal["startup", "resume", "clear", "compact", "fork"]
    resumed_from: Omittable[Ref] = None
    permission_mode: NonEmptyStr
    manifest: JsonObject
    items: list[Message]

    @field_validator("manifest")
    @classmethod
    def _manifest(cls, value: JsonObject) -> JsonObject:
        from ahp_protocol.wire.manifest import parse_manifest

        try:
            parse_manifest(value)
        except (WireError, WireErrors) as exc:
            first = exc.first
            raise rule(first.reason, *(() if first.path == "$" else (first.path,))) from None
        return value

    @model_validator(mode="after")
    def _resumed(self) -> Self:
        if self.trigger in ("clear", "fork") and self.resumed_from is None:
            raise rule(f'resumedFrom is required when trigger is "{self.trigger}"')
        return self


class SessionEnd(Event):
    _forbidden = ("tool",)
    type: Literal["session.end"] = "session.end"
    session: Session
    outcome: Literal["completed", "cancelled", "error", "unknown"]
    reason: NonEmptyStr
    counters: Omittable[dict[str, NonNegativeInt]] = None
    items: Omittable[list[ContentItem]] = None

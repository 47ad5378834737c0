"""The file event: ``file.changed`` (files changed on disk, by the agent or not)."""

from typing import Annotated, Literal

from pydantic import Field

from ahp_protocol.wire.content import ContentItem
from ahp_protocol.wire.events.envelope import Event
from ahp_protocol.wire.model import ClosedModel, NonEmptyStr, Omittable


class ChangedFile(ClosedModel):
    """One entry of ``file.changed.changes``; snapshots are content parts."""

    path: NonEmptyStr
    operation: Literal["create", "update", "remove"]
    agent_caused: bool
    before: Omittable[ContentItem] = None
    after: Omittable[ContentItem] = None


class FileChanged(Event):
    type: Literal["file.changed"] = "file.changed"
    changes: Annotated[list[ChangedFile], Field(min_length=1)]
    items: Omittable[list[ContentItem]] = None

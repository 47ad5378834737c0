"""The workspace events: ``workspace.change.before`` and ``workspace.change.after``."""

from typing import Literal, Self

from pydantic import model_validator

from ahp_protocol.wire.content import ContentItem
from ahp_protocol.wire.events.envelope import Event
from ahp_protocol.wire.model import ClosedModel, NonEmptyStr, Omittable, rule


class WorkspaceChange(ClosedModel):
    """``{cwd?, workspaceRoots?}`` with at least one of them."""

    cwd: Omittable[NonEmptyStr] = None
    workspace_roots: Omittable[list[NonEmptyStr]] = None

    @model_validator(mode="after")
    def _not_empty(self) -> Self:
        if not self.model_fields_set:
            raise rule("must have cwd or workspaceRoots")
        roots = self.workspace_roots or []
        if len(set(roots)) != len(roots):
            raise rule("must not repeat a root", "workspaceRoots")
        return self


class Workspace(ClosedModel):
    kind: Literal["cwd", "roots", "switch"]
    change: WorkspaceChange
    prior: Omittable[WorkspaceChange] = None
    reason: Omittable[str] = None


class WorkspaceChangeBefore(Event):
    type: Literal["workspace.change.before"] = "workspace.change.before"
    workspace: Workspace
    items: Omittable[list[ContentItem]] = None


class WorkspaceChangeAfter(Event):
    type: Literal["workspace.change.after"] = "workspace.change.after"
    workspace: Workspace
    items: Omittable[list[ContentItem]] = None

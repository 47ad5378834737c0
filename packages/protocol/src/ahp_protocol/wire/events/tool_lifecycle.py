"""The tool events after ``tool.before``: the permission stage (``tool.permission.request``,
``tool.permission.resolved``), ``tool.progress`` and the outcome (``tool.after``,
``tool.batch.after``), with ``fileChanges``, a batch's calls and the outcome/execution/error
consistency rules."""

from typing import Annotated, Literal, Self

from pydantic import Field, model_validator

from ahp_protocol.wire.content import ContentItem, Message, NonNegativeNumber
from ahp_protocol.wire.events.envelope import ClosedTurn, Event, JsonObject, Ref
from ahp_protocol.wire.events.results import (
    ErrorInfo,
    Executed,
    Execution,
    Skipped,
    SuppliedResult,
    _is_skipped,
)
from ahp_protocol.wire.events.tool import Batch, Tool, _ToolEvent
from ahp_protocol.wire.model import ClosedModel, NonEmptyStr, Omittable, rule


class FileChange(ClosedModel):
    """One file a tool changed: ``moved`` needs ``previousPath``; no ``before`` when created."""

    path: NonEmptyStr
    change: Literal["created", "modified", "deleted", "moved"]
    previous_path: Omittable[NonEmptyStr] = None
    before: Omittable[ContentItem] = None
    after: Omittable[ContentItem] = None

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        if self.change == "moved" and self.previous_path is None:
            raise rule('previousPath is required when change is "moved"')
        if self.change == "created" and self.before is not None:
            raise rule('is not allowed when change is "created"', "before")
        if self.change == "deleted" and self.after is not None:
            raise rule('is not allowed when change is "deleted"', "after")
        return self


class BatchCall(ClosedModel):
    """One resolved call in ``tool.batch.after.calls``."""

    call: Ref
    tool: Tool
    path: NonEmptyStr
    batch: Omittable[Batch] = None
    outcome: Literal["ok", "error", "denied", "cancelled", "timeout"]
    execution: Execution

    @model_validator(mode="after")
    def _denied(self) -> Self:
        _check_denied(self.outcome, self.execution)
        return self


def _check_denied(outcome: str, execution: Executed | SuppliedResult | Skipped) -> None:
    if outcome == "denied" and not (
        isinstance(execution, Skipped) and execution.reason == "policy"
    ):
        raise rule(
            'must be {"status": "skipped", "reason": "policy"} when outcome is "denied"',
            "execution",
        )


class ToolPermissionRequest(_ToolEvent):
    """``tool.permission.request``: the host is about to prompt for this call."""

    _forbidden = ("decision", "decidedBy", "outcome", "execution")
    type: Literal["tool.permission.request"] = "tool.permission.request"
    turn: Omittable[ClosedTurn] = None
    suggestions: list[JsonObject]
    sandbox_bypass: bool
    items: Omittable[list[ContentItem]] = None


class ToolPermissionResolved(_ToolEvent):
    type: Literal["tool.permission.resolved"] = "tool.permission.resolved"
    turn: Omittable[ClosedTurn] = None
    decision: Literal["allow", "deny"]
    decided_by: Literal["user", "policy", "hook", "auto", "classifier"]
    items: Omittable[list[ContentItem]] = None


class ToolProgress(_ToolEvent):
    _forbidden = ("outcome", "execution")
    type: Literal["tool.progress"] = "tool.progress"
    turn: Omittable[ClosedTurn] = None
    partial_output: Message
    backgrounded: bool
    items: Omittable[list[ContentItem]] = None


class ToolAfter(_ToolEvent):
    """``tool.after``: exactly one per resolved call (executed, denied or supplied)."""

    type: Literal["tool.after"] = "tool.after"
    outcome: Literal["ok", "error", "denied", "cancelled", "timeout"]
    execution: Execution
    items: list[Message]
    error: Omittable[ErrorInfo] = None
    duration_ms: Omittable[NonNegativeNumber] = None
    file_changes: Omittable[list[FileChange]] = None

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        if self.outcome == "error" and self.error is None:
            raise rule('error is required when outcome is "error"')
        if self.outcome != "error" and self.error is not None:
            raise rule('is allowed only when outcome is "error"', "error")
        _check_denied(self.outcome, self.execution)
        if _is_skipped(self.execution):
            if self.duration_ms is not None:
                raise rule("is not allowed when execution is skipped", "durationMs")
            if self.file_changes is not None:
                raise rule("is not allowed when execution is skipped", "fileChanges")
        return self


class ToolBatchAfter(Event):
    type: Literal["tool.batch.after"] = "tool.batch.after"
    turn: Omittable[ClosedTurn] = None
    batch: Ref
    calls: Annotated[list[BatchCall], Field(min_length=1)]
    items: Omittable[list[ContentItem]] = None

"""The turn events: ``turn.start``, ``turn.finish.before``, ``turn.end`` and
``turn.progress``, with the usage of a whole turn and the turn outcomes."""

from typing import Literal, Self, TypeAlias

from pydantic import model_validator

from ahp_protocol.wire.content import ContentItem, Message
from ahp_protocol.wire.events.envelope import ClosedTurn, Event, Ref
from ahp_protocol.wire.events.results import ErrorInfo, Usage
from ahp_protocol.wire.model import NonEmptyStr, NonNegativeInt, Omittable, rule


class TurnUsage(Usage):
    """Usage of a whole turn: a total."""

    @model_validator(mode="after")
    def _turn(self) -> Self:
        if self.kind != "total":
            raise rule('must be "total" for a turn', "kind")
        if self.scope != "turn":
            raise rule('must be "turn" for a turn', "scope")
        return self


TurnOutcome: TypeAlias = Literal["completed", "failed", "cancelled", "max_iterations"]


class TurnStart(Event):
    type: Literal["turn.start"] = "turn.start"
    turn: ClosedTurn
    trigger: Literal["user", "continuation", "hook", "external"]
    expanded_from: Omittable[NonEmptyStr] = None
    items: list[Message]


class TurnFinishBefore(Event):
    type: Literal["turn.finish.before"] = "turn.finish.before"
    turn: ClosedTurn
    outcome: TurnOutcome
    continuation_count: NonNegativeInt
    last_assistant_item: Omittable[Ref] = None
    usage: Omittable[TurnUsage] = None
    items: list[Message]


class TurnEnd(Event):
    type: Literal["turn.end"] = "turn.end"
    turn: ClosedTurn
    outcome: TurnOutcome
    continuation_count: NonNegativeInt
    last_assistant_item: Omittable[Ref] = None
    usage: Omittable[TurnUsage] = None
    error: Omittable[ErrorInfo] = None
    items: list[Message]

    @model_validator(mode="after")
    def _no_error_when_completed(self) -> Self:
        if self.outcome == "completed" and self.error is not None:
            raise rule('is not allowed when outcome is "completed"', "error")
        return self


class TurnProgress(Event):
    type: Literal["turn.progress"] = "turn.progress"
    turn: ClosedTurn
    item: Ref
    delta: Message
    final: bool
    items: Omittable[list[ContentItem]] = None

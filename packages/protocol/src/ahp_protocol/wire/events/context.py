"""The context events: ``context.compact.before`` and ``context.compact.after``."""

from typing import Literal, Self

from pydantic import model_validator

from ahp_protocol.wire.content import Message, TextPart
from ahp_protocol.wire.events.envelope import ClosedTurn, Event, IdOnly
from ahp_protocol.wire.events.results import Execution, SuppliedResult, _is_skipped
from ahp_protocol.wire.model import ClosedModel, NonNegativeInt, Omittable, rule


class TokenCounts(ClosedModel):
    before: Omittable[NonNegativeInt] = None
    after: Omittable[NonNegativeInt] = None


class ContextCompactBefore(Event):
    _forbidden = ("summary", "removed", "execution")
    type: Literal["context.compact.before"] = "context.compact.before"
    turn: Omittable[ClosedTurn] = None
    trigger: Literal["auto", "manual", "hook"]
    instructions: Omittable[list[TextPart]] = None
    token_counts: Omittable[TokenCounts] = None
    items: list[Message]

    @model_validator(mode="after")
    def _no_after_count(self) -> Self:
        if self.token_counts is not None and self.token_counts.after is not None:
            raise rule("is not known before compaction", "tokenCounts", "after")
        return self


class ContextCompactAfter(Event):
    type: Literal["context.compact.after"] = "context.compact.after"
    turn: Omittable[ClosedTurn] = None
    summary: list[TextPart]
    removed: list[IdOnly]
    execution: Execution
    token_counts: Omittable[TokenCounts] = None
    items: Omittable[list[Message]] = None

    @model_validator(mode="after")
    def _supplied(self) -> Self:
        if _is_skipped(self.execution) and not isinstance(self.execution, SuppliedResult):
            raise rule(
                'must be "supplied_result" when compaction is skipped', "execution", "reason"
            )
        return self

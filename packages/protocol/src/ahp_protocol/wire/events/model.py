"""The model events: ``model.request.before``, ``model.response.after``, ``model.error``,
``model.switch.before`` and ``model.switch.after``, with the model reference, the attempt
and its usage, and pricing."""

from typing import Literal, Self

from pydantic import model_validator

from ahp_protocol.wire.content import ContentItem, Message, NonNegativeNumber, PositiveInt
from ahp_protocol.wire.events.envelope import ClosedTurn, Currency, Event, JsonObject
from ahp_protocol.wire.events.results import (
    ErrorInfo,
    Executed,
    Execution,
    SuppliedResult,
    Usage,
    _is_skipped,
)
from ahp_protocol.wire.model import ClosedModel, NonEmptyStr, Omittable, rule


class AttemptUsage(Usage):
    """Usage of one model attempt: an amount, from the provider or an estimate."""

    @model_validator(mode="after")
    def _attempt(self) -> Self:
        if self.kind != "amount":
            raise rule('must be "amount" for an attempt', "kind")
        if self.scope != "attempt":
            raise rule('must be "attempt" for an attempt', "scope")
        if self.provenance == "mixed":
            raise rule('must be "provider" or "estimate" for an attempt', "provenance")
        return self


class ModelRef(ClosedModel):
    id: NonEmptyStr
    provider: NonEmptyStr


class Attempt(ClosedModel):
    id: NonEmptyStr
    number: PositiveInt
    synthesized: Omittable[bool] = None


class Pricing(ClosedModel):
    currency: Currency
    input_per_million_tokens: Omittable[NonNegativeNumber] = None
    output_per_million_tokens: Omittable[NonNegativeNumber] = None


class ModelRequestBefore(Event):
    _forbidden = ("usage", "execution", "finishReason", "latencyMs", "error")
    type: Literal["model.request.before"] = "model.request.before"
    turn: Omittable[ClosedTurn] = None
    model: ModelRef
    attempt: Attempt
    params: JsonObject
    items: list[Message]


class ModelResponseAfter(Event):
    _forbidden = ("error",)
    type: Literal["model.response.after"] = "model.response.after"
    turn: Omittable[ClosedTurn] = None
    model: ModelRef
    attempt: Attempt
    execution: Execution
    finish_reason: NonEmptyStr
    usage: Omittable[AttemptUsage] = None
    latency_ms: Omittable[NonNegativeNumber] = None
    items: list[Message]

    @model_validator(mode="after")
    def _supplied(self) -> Self:
        if _is_skipped(self.execution):
            if not isinstance(self.execution, SuppliedResult):
                raise rule(
                    'must be "supplied_result" when a model response is skipped',
                    "execution",
                    "reason",
                )
            if self.usage is not None:
                raise rule("is not allowed on a supplied response", "usage")
            if self.latency_ms is not None:
                raise rule("is not allowed on a supplied response", "latencyMs")
        return self


class ModelError(Event):
    _forbidden = ("finishReason",)
    type: Literal["model.error"] = "model.error"
    turn: Omittable[ClosedTurn] = None
    model: ModelRef
    attempt: Attempt
    execution: Execution
    error: ErrorInfo
    usage: Omittable[AttemptUsage] = None
    latency_ms: Omittable[NonNegativeNumber] = None
    recovery: Omittable[NonEmptyStr] = None
    items: Omittable[list[ContentItem]] = None

    @model_validator(mode="after")
    def _executed(self) -> Self:
        if not isinstance(self.execution, Executed):
            raise rule('must be "executed" at model.error', "execution", "status")
        return self


class ModelSwitchBefore(Event):
    _forbidden = ("previous",)
    type: Literal["model.switch.before"] = "model.switch.before"
    turn: Omittable[ClosedTurn] = None
    current: ModelRef
    proposed: ModelRef
    reason: NonEmptyStr
    pricing: Omittable[Pricing] = None
    items: Omittable[list[ContentItem]] = None


class ModelSwitchAfter(Event):
    _forbidden = ("proposed",)
    type: Literal["model.switch.after"] = "model.switch.after"
    turn: Omittable[ClosedTurn] = None
    previous: ModelRef
    current: ModelRef
    reason: NonEmptyStr
    items: Omittable[list[ContentItem]] = None

"""What became of a piece of work, shared by several families: :data:`Execution` (ran,
skipped, or result supplied), :class:`ErrorInfo` and :class:`Usage` with its :class:`Cost`.
Imports only :mod:`.envelope`, never a family module."""

from typing import Annotated, Any, Literal, TypeAlias

from pydantic import Discriminator, Field, PlainValidator

from ahp_protocol.wire.content import NonNegativeNumber
from ahp_protocol.wire.events.envelope import Currency
from ahp_protocol.wire.model import (
    ClosedModel,
    NonEmptyStr,
    NonNegativeInt,
    Omittable,
    WireConstants,
    member,
    rule,
    union_tag,
)

# --------------------------------------------------------------------------- execution


class Executed(WireConstants):
    _always = frozenset({"status"})
    status: Literal["executed"] = "executed"


class SuppliedResult(WireConstants):
    """Original execution skipped because a candidate result was supplied."""

    _always = frozenset({"status", "reason"})
    status: Literal["skipped"] = "skipped"
    reason: Literal["supplied_result"] = "supplied_result"


class Skipped(WireConstants):
    _always = frozenset({"status"})
    status: Literal["skipped"] = "skipped"
    reason: Literal["policy", "cancelled", "timeout", "other"]
    detail: Omittable[NonEmptyStr] = None


def _execution_tag(value: Any) -> str | None:
    status, reason = member(value, "status"), member(value, "reason")
    if status == "executed":
        return "execution:executed"
    if status == "skipped":
        return "execution:supplied" if reason == "supplied_result" else "execution:skipped"
    return None


Execution: TypeAlias = Annotated[
    Annotated[Executed, union_tag("execution:executed")]
    | Annotated[SuppliedResult, union_tag("execution:supplied")]
    | Annotated[Skipped, union_tag("execution:skipped")],
    Discriminator(
        _execution_tag,
        custom_error_type="invalid_execution",
        custom_error_message='status must be "executed" or "skipped"',
    ),
]


def _is_skipped(execution: Executed | SuppliedResult | Skipped) -> bool:
    return execution.status == "skipped"


# --------------------------------------------------------------------------- error


def _string_or_int(value: object) -> str | int:
    if isinstance(value, str) and value:
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    raise rule("must be a non-empty string or an integer")


class ErrorInfo(ClosedModel):
    """``error``: ``{message, class, code?, status?, native?}``."""

    message: NonEmptyStr
    class_: NonEmptyStr = Field(alias="class")
    code: Omittable[NonEmptyStr] = None
    status: Omittable[Annotated[str | int, PlainValidator(_string_or_int)]] = None
    native: Any = None


# --------------------------------------------------------------------------- usage


class Cost(ClosedModel):
    amount: NonNegativeNumber
    currency: Currency
    basis: Literal["billed", "reported", "estimated"]


class Usage(ClosedModel):
    """Token usage; never fabricated for supplied or skipped work."""

    kind: Literal["amount", "total"]
    scope: Literal["attempt", "turn"]
    completeness: Literal["complete", "partial", "unknown"]
    provenance: Literal["provider", "estimate", "mixed"]
    input_tokens: Omittable[NonNegativeInt] = None
    output_tokens: Omittable[NonNegativeInt] = None
    cache_read_tokens: Omittable[NonNegativeInt] = None
    cache_write_tokens: Omittable[NonNegativeInt] = None
    cost: Omittable[Cost] = None

"""Capabilities: the per-request grant.

Owns :class:`Capabilities` (``params.capabilities`` of ``hooks/intercept``: which effects,
modify targets/operations, flow operations and inject delivery points a backend may use
for this one interception), its coupling rules (``modify``, ``flow`` and ``inject``
blocks present iff named in ``effects``; each modify target grants an operation;
``continue`` carries its counters) and the draft's per-event bounds
(:func:`check_capabilities_at`, :func:`capabilities_for`). The harness manifest is
:mod:`ahp_protocol.wire.manifest`.

Unknown fields are kept and round-tripped but grant nothing; unknown modify targets are
dropped. No I/O, no negotiation; every check is linear in what it judges. Errors are
:class:`~ahp_protocol.wire.errors.WireErrors` with JSON paths.
"""

from collections.abc import Hashable, Mapping
from typing import Annotated, Any, Final, Literal, Self, TypeVar

from pydantic import (
    AfterValidator,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from ahp_protocol.wire._legality import (
    EVENT_EFFECTS,
    FLOW_OPERATIONS,
    MODIFY_TARGET_NAMES,
    MODIFY_TARGETS,
    DeliverAt,
    FlowOperation,
    ModifyTarget,
    at_event,
    is_effect_name,
)
from ahp_protocol.wire.errors import WireError, WireErrors
from ahp_protocol.wire.model import NonNegativeInt, StrictBool, WireModel, to_wire_errors

__all__ = [
    "Capabilities",
    "ElicitationGrant",
    "FlowGrant",
    "InjectContextGrant",
    "InjectGrant",
    "ModifyGrant",
    "capabilities_for",
    "check_capabilities_at",
    "parse_capabilities",
]

H = TypeVar("H", bound=Hashable)


def _unique(values: list[H]) -> list[H]:
    """``values`` unchanged, unless two of them are equal: linear (a set), so only
    hashable values (every list validated with it holds strings)."""
    if len(set(values)) != len(values):
        raise ValueError("must not contain duplicates")
    return values


def _effect_name(name: str) -> str:
    if is_effect_name(name):
        return name
    raise ValueError("must be a standard effect or a reverse-DNS extension name")


EffectName = Annotated[str, Field(strict=True), AfterValidator(_effect_name)]


class _Open(WireModel):
    """Open wire object: unknown fields kept (and ignored); ``None`` fields are absent."""

    model_config = ConfigDict(extra="allow", frozen=True, serialize_by_alias=True)


# --------------------------------------------------------------------------- capabilities


class ModifyGrant(_Open):
    """Which edit operations one ``modify`` target allows; at least one is true."""

    replace: StrictBool
    merge: StrictBool

    @model_validator(mode="after")
    def _one_true(self) -> Self:
        if not (self.replace or self.merge):
            raise ValueError("must grant replace or merge")
        return self


class FlowGrant(_Open):
    """Flow operations; ``continue`` needs ``remainingContinuations`` and ``continuationCount``."""

    operations: Annotated[list[FlowOperation], Field(min_length=1), AfterValidator(_unique)]
    remaining_continuations: NonNegativeInt | None = None
    continuation_count: NonNegativeInt | None = None
    max_continuations: NonNegativeInt | None = None

    _absent_when_none = frozenset(
        {"remaining_continuations", "continuation_count", "max_continuations"}
    )

    @model_validator(mode="after")
    def _counters(self) -> Self:
        if "continue" in self.operations and (
            self.remaining_continuations is None or self.continuation_count is None
        ):
            raise ValueError(
                "remainingContinuations and continuationCount are required with 'continue'"
            )
        return self


class InjectContextGrant(_Open):
    """``inject(context)``: append only, at the listed delivery points."""

    append: Literal[True]
    deliver_at: Annotated[list[DeliverAt], Field(min_length=1), AfterValidator(_unique)]


class InjectGrant(_Open):
    context: InjectContextGrant


class ElicitationGrant(_Open):
    """Independent opt-in elicitation modes (``form``, ``url``)."""

    form: dict[str, Any] | None = None
    url: dict[str, Any] | None = None

    _absent_when_none = frozenset({"form", "url"})


_BLOCKS: Final = ("modify", "flow", "inject")


class Capabilities(_Open):
    """The per-request grant (``params.capabilities``); unknown fields grant nothing."""

    effects: Annotated[list[EffectName], AfterValidator(_unique)]
    modify: dict[ModifyTarget, ModifyGrant] | None = Field(default=None, validate_default=True)
    flow: FlowGrant | None = Field(default=None, validate_default=True)
    inject: InjectGrant | None = Field(default=None, validate_default=True)
    elicitation: ElicitationGrant | None = None

    _absent_when_none = frozenset({"modify", "flow", "inject", "elicitation"})

    @field_validator("modify", mode="before")
    @classmethod
    def _known_targets(cls, value: object) -> object:
        if not isinstance(value, Mapping):
            return value
        if not value:
            raise ValueError("must name at least one target")
        # Unknown targets grant nothing: they are dropped (a block naming only unknown
        # targets stays, empty, so that ``modify`` in ``effects`` keeps its block).
        return {k: v for k, v in value.items() if k in MODIFY_TARGET_NAMES}

    @field_validator(*_BLOCKS, mode="after")
    @classmethod
    def _coupling(cls, value: object, info: ValidationInfo) -> object:
        """A ``modify``/``flow``/``inject`` block is present iff its name is in ``effects``."""
        effects = info.data.get("effects")
        if effects is None:  # effects itself was invalid; reported there
            return value
        name = info.field_name
        if value is None and name in effects:
            raise ValueError(f"is required when effects contains '{name}'")
        if value is not None and name not in effects:
            raise ValueError(f"is allowed only when effects contains '{name}'")
        return value

    def grants(self, effect: str) -> bool:
        return effect in self.effects


def _parse(model: type[_Open], obj: object, *, what: str) -> Any:
    if not isinstance(obj, Mapping):
        raise WireErrors([WireError("$", f"{what} must be an object")])
    try:
        return model.model_validate(obj, by_alias=True, by_name=False)
    except ValidationError as exc:
        raise to_wire_errors(exc) from None


def _bounds_errors(event_type: str, caps: Capabilities) -> list[WireError]:
    at = at_event(event_type)
    errors: list[WireError] = []
    allowed = EVENT_EFFECTS.get(event_type, frozenset())
    for i, name in enumerate(caps.effects):
        if name not in allowed:
            errors.append(WireError(("effects", i), f"is not an effect allowed {at}"))
    targets = MODIFY_TARGETS.get(event_type, frozenset())
    for target in caps.modify or {}:
        if target not in targets:
            errors.append(WireError(("modify", target), f"is not a modify target {at}"))
    operations = FLOW_OPERATIONS.get(event_type, frozenset())
    for i, op in enumerate(caps.flow.operations if caps.flow else ()):
        if op not in operations:
            errors.append(WireError(("flow", "operations", i), f"is not a flow operation {at}"))
    return errors


def check_capabilities_at(event_type: str, capabilities: Capabilities) -> None:
    """Raise :class:`WireErrors` unless ``capabilities`` stays within ``event_type``'s bounds.

    The bounds are the draft's per-event effects, modify targets and flow operations
    (``capabilities.schema.json#/$defs/<event>``); an extension effect name is never
    within them.
    """
    errors = _bounds_errors(event_type, capabilities)
    if errors:
        raise WireErrors(errors)


def parse_capabilities(obj: object, *, event_type: str | None = None) -> Capabilities:
    """Parse a wire capabilities object; with ``event_type``, also check per-event bounds."""
    caps: Capabilities = _parse(Capabilities, obj, what="capabilities")
    if event_type is not None:
        check_capabilities_at(event_type, caps)
    return caps


def capabilities_for(event_type: str, declared: Capabilities) -> Capabilities:
    """Narrow a declaration to what the draft allows at ``event_type`` (harness side).

    Drops effects, modify targets and flow operations the event does not allow, and any
    block whose effect is dropped (an effect whose block empties is dropped too).
    Continuation counters stay only while ``continue`` does. Unknown fields are kept.
    """
    wire = declared.to_wire()
    allowed = EVENT_EFFECTS.get(event_type, frozenset())
    effects = [name for name in declared.effects if name in allowed]

    if "modify" in effects and declared.modify is not None:
        targets = MODIFY_TARGETS.get(event_type, frozenset())
        kept = {t: g for t, g in wire.get("modify", {}).items() if t in targets}
        if kept:
            wire["modify"] = kept
        else:
            effects.remove("modify")
    if "flow" in effects and declared.flow is not None:
        operations = FLOW_OPERATIONS.get(event_type, frozenset())
        flow = dict(wire["flow"])
        flow["operations"] = [op for op in declared.flow.operations if op in operations]
        if not flow["operations"]:
            effects.remove("flow")
        else:
            if "continue" not in flow["operations"]:
                for key in ("remainingContinuations", "continuationCount", "maxContinuations"):
                    flow.pop(key, None)
            wire["flow"] = flow
    for block in _BLOCKS:
        if block not in effects:
            wire.pop(block, None)
    wire["effects"] = effects
    return parse_capabilities(wire)

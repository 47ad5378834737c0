"""Chain state: what earlier interceptors decided, passed on in ``params.state``.

Owns :class:`State` (``permission``, ``candidate``, ``flow``, ``instructions``,
``injections``) and :class:`Candidate` (a supplied result plus opaque
``provenance``, never an authorization claim), their wire form and strict parsing.
Folding responses into a state is the client's job; this module only says what a
state is. Unknown fields are kept and round-tripped. No I/O.
"""

from collections.abc import Mapping
from typing import Annotated, Any, Final, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from ahp_protocol.wire import effects as fx
from ahp_protocol.wire.errors import WireError, WireErrors, from_validation_error

__all__ = ["Candidate", "FlowState", "Permission", "State", "is_plain_state", "parse_state"]

Permission = Literal["none", "allow", "ask", "deny"]
_PERMISSIONS: Final = frozenset(get_args(Permission))
FlowState = Literal["none", "stop", "continue"]

_CONFIG = ConfigDict(extra="allow", frozen=True, defer_build=True)


def _extras(model: BaseModel) -> dict[str, Any]:
    return fx.to_json_value(model.__pydantic_extra__ or {})  # type: ignore[no-any-return]


class Candidate(BaseModel):
    """A supplied result that replaces original execution (never policy or approval).

    ``value`` is typed per event (see :data:`~ahp_protocol.wire.effects.RETURN_VALUE`);
    a ``None`` value is a JSON ``null`` result, not an absent candidate.
    """

    model_config = _CONFIG

    value: Any
    provenance: dict[str, Any] | None = None

    @field_validator("value", "provenance", mode="before")
    @classmethod
    def _json(cls, value: object) -> Any:
        return fx.to_json_value(value)

    def to_wire(self) -> dict[str, Any]:
        out: dict[str, Any] = {"value": self.value}
        if self.provenance is not None:
            out["provenance"] = self.provenance
        out.update(_extras(self))
        return out


class State(BaseModel):
    """Chain state after the interceptors so far; ``State()`` is the neutral start."""

    model_config = _CONFIG

    permission: Permission = "none"
    candidate: Candidate | None = None
    flow: FlowState | None = None
    instructions: list[Annotated[str, Field(min_length=1, strict=True)]] | None = None
    injections: list[fx.InjectEffect] | None = None

    def to_wire(self) -> dict[str, Any]:
        """``permission`` and ``candidate`` always (``null`` when none); the rest if set."""
        out: dict[str, Any] = {
            "permission": self.permission,
            "candidate": None if self.candidate is None else self.candidate.to_wire(),
        }
        if self.flow is not None:
            out["flow"] = self.flow
        if self.instructions is not None:
            out["instructions"] = list(self.instructions)
        if self.injections is not None:
            out["injections"] = [effect.to_wire() for effect in self.injections]
        out.update(_extras(self))
        return out


def parse_state(obj: object, *, event_type: str | None = None) -> State:
    """Parse ``params.state`` strictly; raises :class:`WireErrors` with JSON paths.

    ``permission`` and ``candidate`` are required (``candidate`` may be ``null``);
    ``injections`` are strict inject effects. With ``event_type``, a candidate value is
    also checked against that event's result type (tool result, canonical messages,
    text parts or MCP ``ElicitResult``).
    """
    if not isinstance(obj, Mapping):
        raise WireErrors([WireError("$", "must be an object")])
    for key in ("permission", "candidate"):
        if key not in obj:
            raise WireErrors([WireError("$", f"{key} is required")])
    data = dict(obj)
    try:
        injections = data.get("injections")
        if isinstance(injections, list):
            parsed: list[fx.InjectEffect] = []
            for i, item in enumerate(injections):
                effect = fx.parse_effect(item, f"injections[{i}]")
                if not isinstance(effect, fx.InjectEffect):
                    raise WireError(f"injections[{i}].type", "must be 'inject'")
                parsed.append(effect)
            data["injections"] = parsed
        candidate = data.get("candidate")
        if event_type is not None and isinstance(candidate, Mapping) and "value" in candidate:
            fx.check_return_value(event_type, candidate["value"], "candidate.value")
    except WireError as exc:
        raise WireErrors([exc]) from None
    try:
        return State.model_validate(data, by_alias=True, by_name=False)
    except ValidationError as exc:
        raise from_validation_error(exc) from None


def is_plain_state(obj: object) -> bool:
    """Whether ``obj`` is a plain state: ``permission`` and a ``null`` ``candidate``,
    nothing else (the neutral start ``{"permission": "none", "candidate": null}`` is
    one). Every plain state is valid at every event (:func:`parse_state` accepts it;
    a test checks); ``False`` only means "not plain", for :func:`parse_state` to judge.
    It lets a backend judge the usual state without building the state models.
    """
    return (
        type(obj) is dict
        and len(obj) == 2
        and obj.get("candidate", False) is None
        and type(obj.get("permission")) is str
        and obj["permission"] in _PERMISSIONS
    )

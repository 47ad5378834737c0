"""Chain state: what earlier interceptors decided, passed on in ``params.state``.

Owns :class:`State` (``permission``, ``candidate``, ``flow``, ``instructions``,
``injections``) and :class:`Candidate` (a supplied result plus opaque ``provenance``,
never an authorization claim), their wire form and strict parsing. Folding responses
into a state is the client's job. Unknown fields are kept and round-tripped. No I/O.
"""

from collections.abc import Mapping
from typing import Any, Final, Literal, get_args

from pydantic import ConfigDict, ValidationError, field_validator

from ahp_protocol.wire import effects as fx
from ahp_protocol.wire.errors import WireError, WireErrors
from ahp_protocol.wire.model import NonEmptyStr, WireModel, to_wire_errors

__all__ = ["Candidate", "FlowState", "Permission", "State", "parse_state"]

Permission = Literal["none", "allow", "ask", "deny"]
_PERMISSIONS: Final = frozenset(get_args(Permission))
FlowState = Literal["none", "stop", "continue"]


class _Open(WireModel):
    model_config = ConfigDict(extra="allow", frozen=True)


class Candidate(_Open):
    """A supplied result that replaces original execution (never policy or approval).

    ``value`` is typed per event (see :data:`~ahp_protocol.wire.effects.RETURN_VALUE`);
    a ``None`` value is a JSON ``null`` result, not an absent candidate.
    """

    _always = frozenset({"value"})
    _absent_when_none = frozenset({"provenance"})

    value: Any
    provenance: dict[str, Any] | None = None

    @field_validator("value", "provenance", mode="before")
    @classmethod
    def _json(cls, value: object) -> Any:
        return fx.to_json_value(value)


class State(_Open):
    """Chain state after the interceptors so far; ``State()`` is the neutral start.

    On the wire: ``permission`` and ``candidate`` always (``null`` when none); the
    rest only when set.
    """

    _always = frozenset({"permission", "candidate"})
    _absent_when_none = frozenset({"flow", "instructions", "injections"})

    permission: Permission = "none"
    candidate: Candidate | None = None
    flow: FlowState | None = None
    instructions: list[NonEmptyStr] | None = None
    injections: list[fx.InjectEffect] | None = None


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
        raise to_wire_errors(exc) from None


def _is_plain_state(obj: object) -> bool:
    """Whether ``obj`` is ``permission`` and a ``null`` ``candidate``, nothing else (the
    neutral start is one). Every plain state is valid at every event (:func:`parse_state`
    accepts it; a test checks); ``False`` only means "not plain", for that parse to judge.
    """
    return (
        type(obj) is dict
        and len(obj) == 2
        and obj.get("candidate", False) is None
        and type(obj.get("permission")) is str
        and obj["permission"] in _PERMISSIONS
    )

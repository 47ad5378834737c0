"""Effects: what a backend may answer to ``hooks/intercept``, and where it may.

Owns the strict effect models (an unknown field rejects the effect),
:func:`parse_effect` (one effect, without an event) and :func:`check_effects`,
the atomic validation of a response's whole ``effects`` list against its event
and the request's capabilities: the first invalid element rejects the list,
nothing is salvaged. The per-event legality tables and :class:`Grants` live in
:mod:`ahp_protocol.wire._legality`, the value kind of each ``modify`` target
and ``return`` in :mod:`ahp_protocol.wire._values`; both are re-exported here.

Never applies or folds effects (that is the client's chain) and does no I/O.
Values are plain JSON. Error reasons are fixed texts that never quote effect values.
"""

from collections.abc import Iterable, Mapping
from functools import cache
from types import MappingProxyType
from typing import Annotated, Any, Final, Literal, cast, get_args

from pydantic import BeforeValidator, ConfigDict, Field, ValidationError, field_validator

from ahp_protocol.wire._legality import (
    DELIVER_AT,
    EDIT_OPERATIONS,
    EFFECT_TYPE_ORDER,
    EFFECT_TYPES,
    EVENT_EFFECTS,
    FLOW_OPERATION_NAMES,
    FLOW_OPERATIONS,
    MODIFY_TARGET_NAMES,
    MODIFY_TARGETS,
    DeliverAt,
    EditOperation,
    Grants,
    ModifyTarget,
    at_event,
)
from ahp_protocol.wire._values import (
    RETURN_VALUE,
    check_modify_value,
    check_return_value,
    check_standalone_modify_value,
    content_error,
    field_name,
    modify_value_kind,
    to_json_value,
)
from ahp_protocol.wire.errors import EffectError, ErrorKind, json_path, rebase
from ahp_protocol.wire.model import NonEmptyStr, WireModel, rule, to_wire_errors
from ahp_protocol.wire.names import REVERSE_DNS, is_reverse_dns

__all__ = [  # with the names of _legality and _values, re-exported (import paths kept)
    "DELIVER_AT",
    "EDIT_OPERATIONS",
    "EFFECT_TYPES",
    "EFFECT_TYPE_ORDER",
    "EVENT_EFFECTS",
    "FLOW_OPERATIONS",
    "MODIFY_TARGETS",
    "MODIFY_TARGET_NAMES",
    "RETURN_VALUE",
    "REVERSE_DNS",
    "AllowEffect",
    "AskEffect",
    "BaseEffect",
    "DenyEffect",
    "Effect",
    "EffectError",
    "FlowContinueEffect",
    "FlowStopEffect",
    "Grants",
    "InjectEffect",
    "MessageEffect",
    "ModifyEffect",
    "ReturnEffect",
    "check_effects",
    "check_return_value",
    "effects_to_wire",
    "modify_value_kind",
    "parse_effect",
    "to_json_value",
]

# --------------------------------------------------------------------------- models

ReverseDnsStr = Annotated[str, Field(pattern=REVERSE_DNS.pattern, strict=True)]


class BaseEffect(WireModel):
    """Common base: closed (unknown fields reject), frozen. ``to_wire`` writes the constants
    always, other fields when set; a ``value`` of ``None`` stays a JSON ``null``."""

    model_config = ConfigDict(extra="forbid", frozen=True, serialize_by_alias=True)

    _always = frozenset({"type"})


def _json_field(value: object) -> Any:
    try:
        return to_json_value(value)
    except RecursionError:
        raise ValueError("is nested too deeply") from None


JsonValue = Annotated[Any, BeforeValidator(_json_field)]
"""Any JSON value; a wire model inside becomes its wire form (:func:`to_json_value`)."""


class DenyEffect(BaseEffect):
    """Refuse the operation. ``reason`` is shown; ``code`` is a reverse-DNS identifier."""

    _absent_when_none = frozenset({"code", "extensions"})

    type: Literal["deny"] = "deny"
    reason: NonEmptyStr
    code: ReverseDnsStr | None = None
    extensions: dict[str, Any] | None = None

    @field_validator("extensions", mode="before")
    @classmethod
    def _extensions(cls, value: object) -> object:
        if value is None or not isinstance(value, Mapping):
            return value
        if not all(is_reverse_dns(key) for key in value):
            raise ValueError("keys must be reverse-DNS names")
        return _json_field(value)


class AllowEffect(BaseEffect):
    """Suppress the host's ordinary prompt (never managed policy, access or sandbox)."""

    type: Literal["allow"] = "allow"


class AskEffect(BaseEffect):
    """Force the host's interactive approval."""

    type: Literal["ask"] = "ask"


class MessageEffect(BaseEffect):
    """User-facing text (not diagnostics)."""

    type: Literal["message"] = "message"
    text: Annotated[str, Field(strict=True)]


class ModifyEffect(BaseEffect):
    """Edit one target of the event. Construction checks only that ``value`` is JSON; its
    type per target is checked by :func:`parse_effect` and :func:`check_effects`."""

    type: Literal["modify"] = "modify"
    target: ModifyTarget
    operation: EditOperation
    value: JsonValue


class ReturnEffect(BaseEffect):
    """Supply a candidate result instead of original execution."""

    type: Literal["return"] = "return"
    value: JsonValue


class FlowStopEffect(BaseEffect):
    """End decision-making: no pending execution, no further model work."""

    _always = frozenset({"type", "operation"})

    type: Literal["flow"] = "flow"
    operation: Literal["stop"] = "stop"
    reason: NonEmptyStr


class FlowContinueEffect(BaseEffect):
    """Ask for one more step (uses one continuation allowance per response)."""

    _always = frozenset({"type", "operation"})
    _absent_when_none = frozenset({"instruction"})

    type: Literal["flow"] = "flow"
    operation: Literal["continue"] = "continue"
    instruction: NonEmptyStr | None = None


class InjectEffect(BaseEffect):
    """Append canonical messages to the context, now or at the next turn."""

    _always = frozenset({"type", "target", "operation"})

    type: Literal["inject"] = "inject"
    target: Literal["context"] = "context"
    operation: Literal["append"] = "append"
    deliver_at: DeliverAt
    value: list[Any]

    @field_validator("value", mode="before")
    @classmethod
    def _messages(cls, value: object) -> Any:
        data = _json_field(value)
        if not isinstance(data, list):
            raise ValueError("must be a list of canonical messages")
        problem = content_error("messages", data)
        if problem is not None:
            raise rule(problem.reason, below=problem.path)
        return data


FlowEffect = Annotated[FlowStopEffect | FlowContinueEffect, Field(discriminator="operation")]
Effect = Annotated[
    DenyEffect
    | AllowEffect
    | AskEffect
    | MessageEffect
    | ModifyEffect
    | ReturnEffect
    | FlowEffect
    | InjectEffect,
    Field(discriminator="type"),
]
"""Any one effect (a tagged union on ``type``, flow on ``operation``)."""

AnyEffect = (
    DenyEffect
    | AllowEffect
    | AskEffect
    | MessageEffect
    | ModifyEffect
    | ReturnEffect
    | FlowStopEffect
    | FlowContinueEffect
    | InjectEffect
)

_FLOW: Final = (FlowStopEffect, FlowContinueEffect)
_MODELS: Final[Mapping[str, type[BaseEffect]]] = MappingProxyType(
    {m.model_fields["type"].default: m for m in get_args(AnyEffect) if m not in _FLOW}
)
"""The model of each effect ``type`` (``flow``: :data:`_FLOW_MODELS`, by ``operation``)."""
_FLOW_MODELS: Final[Mapping[str, type[BaseEffect]]] = MappingProxyType(
    {m.model_fields["operation"].default: m for m in _FLOW}
)


@cache
def _wire_names(model: type[BaseEffect]) -> frozenset[str]:
    return frozenset(field.alias or name for name, field in model.model_fields.items())


# --------------------------------------------------------------------------- parsing


def _error(path: str, key: str, reason: str, kind: ErrorKind = "malformed") -> EffectError:
    """An :class:`EffectError` at member ``key`` of the effect at ``path``."""
    return EffectError(json_path((key,), path), reason, kind)


def _require_enum(
    obj: Mapping[str, Any], key: str, allowed: frozenset[str], path: str, reason: str
) -> None:
    if key not in obj:
        return  # reported as "is required" by the model
    value = obj[key]
    if not isinstance(value, str):
        raise _error(path, key, "must be a string")
    if value not in allowed:
        raise _error(path, key, reason, "unknown")


def parse_effect(obj: object, path: str = "effects[0]", *, check_values: bool = True) -> AnyEffect:
    """Parse one wire effect strictly, without an event; raises :class:`EffectError`.

    Checks what ``effect.schema.json`` checks: known ``type``, operation, target and
    ``deliverAt`` values, no unknown or null optional fields, field types, the messages
    of ``inject`` and, unless ``check_values`` is false, the value type a ``modify``
    target has in every event (``content``: messages or form answers). Legality at an
    event is :func:`check_effects`'s work.
    """
    if not isinstance(obj, Mapping):
        raise EffectError(path, "must be an object")
    if "type" not in obj:
        raise EffectError(path, "type is required")
    kind = obj["type"]
    if not isinstance(kind, str):
        raise _error(path, "type", "must be a string")
    if kind not in EFFECT_TYPES:
        raise _error(path, "type", "is not a known effect type", "unknown")
    if kind == "flow":
        if "operation" not in obj:
            raise EffectError(path, "operation is required")
        _require_enum(obj, "operation", FLOW_OPERATION_NAMES, path, "is not a known flow operation")
        model = _FLOW_MODELS[obj["operation"]]
    else:
        model = _MODELS[kind]

    names = _wire_names(model)
    for key in obj:
        if key not in names:
            raise EffectError(path, f"{field_name(key)} is not an allowed field", "unknown")
    for key in sorted(model._always):
        if key not in obj:  # constants have defaults for authors, never on the wire
            raise EffectError(path, f"{key} is required")
    for key in model._absent_when_none:
        if key in obj and obj[key] is None:
            raise _error(path, key, "must not be null")

    if kind == "modify":
        _require_enum(obj, "target", MODIFY_TARGET_NAMES, path, "is not a known modify target")
        _require_enum(obj, "operation", EDIT_OPERATIONS, path, "is not a known edit operation")
    elif kind == "inject":
        _require_enum(obj, "target", frozenset({"context"}), path, "is not a known inject target")
        _require_enum(
            obj, "operation", frozenset({"append"}), path, "is not a known inject operation"
        )
        _require_enum(obj, "deliverAt", DELIVER_AT, path, "is not a known delivery point")

    try:
        effect = model.model_validate(obj, by_alias=True, by_name=False)
    except ValidationError as exc:
        first = to_wire_errors(exc).first
        raise EffectError(rebase(first.path, path), first.reason) from None
    if check_values and isinstance(effect, ModifyEffect):
        check_standalone_modify_value(effect.target, effect.value, json_path(("value",), path))
    return cast(AnyEffect, effect)


# --------------------------------------------------------------------------- checking


def _holds_withheld_text(current: object) -> bool:
    """Whether a current message/text-part list holds text withheld by selection or a gap."""
    if not isinstance(current, list):
        return False
    parts: list[object] = []
    for item in current:
        if isinstance(item, Mapping) and isinstance(item.get("parts"), list):
            parts.extend(item["parts"])
        else:
            parts.append(item)
    for part in parts:
        if not isinstance(part, Mapping) or part.get("kind", "text") != "text":
            continue
        if part.get("selection") in ("metadata", "omit") or "gap" in part:
            return True
    return False


def _known(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def _check_modify(
    event_type: str,
    grants: Grants,
    effect: ModifyEffect,
    path: str,
    context: Mapping[str, Any],
) -> None:
    target, operation = effect.target, effect.operation
    if target not in MODIFY_TARGETS.get(event_type, frozenset()):
        raise _error(path, "target", f"is not a modify target {at_event(event_type)}", "illegal")
    grant = grants.modify.get(target)
    if not isinstance(grant, Mapping):
        raise _error(path, "target", "is not advertised in capabilities.modify", "unadvertised")
    if grant.get(operation) is not True:
        raise _error(
            path,
            "operation",
            "is not advertised for this target in capabilities.modify",
            "unadvertised",
        )
    kind = modify_value_kind(event_type, target)
    if kind is None:  # pragma: no cover - target names are closed
        raise _error(path, "target", "is not a known modify target", "unknown")
    check_modify_value(kind, effect.value, json_path(("value",), path))

    # Edit context: what the harness knows about the current target.
    if kind == "form_answers":
        mode, action = _known(context.get("mode")), _known(context.get("action"))
        if mode is not None and mode != "form":
            raise _error(
                path, "target", "content is editable only for form elicitations", "illegal"
            )
        if action is not None and action != "accept":
            raise _error(path, "target", "content is editable only for accepted forms", "illegal")
    current_values = context.get("current")
    if isinstance(current_values, Mapping) and target in current_values:
        current = current_values[target]
        if (
            operation == "replace"
            and kind in ("messages", "text_parts")
            and _holds_withheld_text(current)
        ):
            reason = "whole-list replace is not allowed over withheld text"
            raise _error(path, "operation", reason, "illegal")
        if (
            operation == "merge"
            and kind in ("object", "workspace", "form_answers")
            and not isinstance(current, Mapping)
        ):
            raise _error(path, "operation", "merge needs a current object value", "illegal")


def _check_one(
    event_type: str,
    grants: Grants,
    effect: AnyEffect,
    path: str,
    context: Mapping[str, Any],
) -> None:
    kind = effect.type
    if kind not in EVENT_EFFECTS.get(event_type, frozenset()):
        raise _error(path, "type", f"is not allowed {at_event(event_type)}", "illegal")
    if kind not in grants.effects:
        raise _error(path, "type", "is not advertised in capabilities.effects", "unadvertised")
    if isinstance(effect, ModifyEffect):
        _check_modify(event_type, grants, effect, path, context)
    elif isinstance(effect, (FlowStopEffect, FlowContinueEffect)):
        operation = effect.operation
        if operation not in FLOW_OPERATIONS.get(event_type, frozenset()):
            reason = f"is not a flow operation {at_event(event_type)}"
            raise _error(path, "operation", reason, "illegal")
        if operation not in grants.flow_operations():
            reason = "is not advertised in capabilities.flow.operations"
            raise _error(path, "operation", reason, "unadvertised")
        if operation == "continue" and not grants.continuations_left():
            reason = "continuation allowance is exhausted"
            raise _error(path, "operation", reason, "unadvertised")
    elif isinstance(effect, InjectEffect):
        if effect.deliver_at not in grants.deliver_at:
            reason = "is not advertised in capabilities.inject.context.deliverAt"
            raise _error(path, "deliverAt", reason, "unadvertised")
    elif isinstance(effect, ReturnEffect):
        check_return_value(event_type, effect.value, json_path(("value",), path))
        value = effect.value
        if (
            RETURN_VALUE.get(event_type) == "elicit_result"
            and isinstance(value, dict)
            and "content" in value
            and _known(context.get("mode")) == "url"
        ):
            raise EffectError(
                json_path(("value", "content"), path),
                "is not allowed for URL elicitations",
                "illegal",
            )


def _wire_item(item: object, path: str) -> object:
    if isinstance(item, BaseEffect):
        try:
            return item.to_wire()
        except Exception:
            raise EffectError(path, "could not be serialized") from None
    return item


def check_effects(
    event_type: str,
    capabilities: Mapping[str, Any] | WireModel | Grants,
    effects: object,
    *,
    edit_context: Mapping[str, Any] | None = None,
) -> list[AnyEffect]:
    """Validate a response's whole ``effects`` value atomically; return the parsed list.

    ``effects`` is the wire value (``None`` means ``[]``) or a handler's list of effect
    models and plain dicts (a model is judged by its wire form). ``capabilities`` is the
    request's grant (a mapping, a ``Capabilities`` model, or :class:`Grants`). Each
    element is checked in order: shape, legal at ``event_type``, advertised, then per
    type (modify target, operation and value; flow operation and continuations; inject
    ``deliverAt``; return value). The first problem raises :class:`EffectError` with a
    path such as ``effects[2].value[0].parts``; no element is ever salvaged.

    ``edit_context`` (harness side): ``{"current": {target: value}, "mode": "form"|"url",
    "action": "accept"|…}``. With it, whole-list replace over withheld text, object merge
    over a non-object, and elicitation content edits outside an accepted form are
    ``illegal``.
    """
    if effects is None:
        return []
    if not isinstance(effects, (list, tuple)):
        raise EffectError("effects", "must be an array")
    grants = capabilities if isinstance(capabilities, Grants) else Grants(capabilities)
    context: Mapping[str, Any] = edit_context if isinstance(edit_context, Mapping) else {}
    out: list[AnyEffect] = []
    for index, item in enumerate(effects):
        path = f"effects[{index}]"
        # A model is judged by its wire form: what is accepted is exactly what is sent.
        effect = parse_effect(_wire_item(item, path), path, check_values=False)
        _check_one(event_type, grants, effect, path, context)
        out.append(effect)
    return out


def effects_to_wire(effects: Iterable[BaseEffect | Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Wire form of a list of effects (plain dicts are parsed strictly first)."""
    out: list[dict[str, Any]] = []
    for index, effect in enumerate(effects):
        if isinstance(effect, BaseEffect):
            out.append(effect.to_wire())
        else:
            out.append(parse_effect(effect, f"effects[{index}]").to_wire())
    return out

"""Effects: what a backend may answer to ``hooks/intercept``, and where it may.

Owns the strict effect models (an unknown field rejects the effect), the
per-event legality tables of the draft (§4.2, ``capabilities.schema.json``
``$defs``), the value type each ``modify`` target and each ``return`` carries,
and :func:`check_effects`, the atomic validation of a response's whole
``effects`` list against its event and the request's capabilities: the first
invalid element rejects the list, nothing is salvaged.

Never applies or folds effects (that is the client's chain) and does no I/O.
Values are plain JSON; canonical message and text-part lists are checked by
:mod:`ahp_protocol.wire.content` (imported lazily). Error reasons are fixed
texts that never quote effect values.
"""

import math
import re
from collections.abc import Iterable, Mapping
from functools import cache
from types import MappingProxyType
from typing import Annotated, Any, ClassVar, Final, Literal, TypeGuard, cast

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
)
from pydantic.alias_generators import to_camel

from ahp_protocol.wire.catalogue import INTERCEPTABLE, is_interceptable
from ahp_protocol.wire.errors import PathPart, WireError, WireErrors, from_validation_error

__all__ = [
    "DELIVER_AT",
    "EDIT_OPERATIONS",
    "EFFECT_TYPES",
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
    "is_plain_grant_at",
    "modify_value_kind",
    "parse_effect",
    "to_json_value",
]

EffectType = Literal["deny", "allow", "ask", "modify", "message", "return", "flow", "inject"]
ModifyTarget = Literal[
    "input",
    "output",
    "prompt",
    "request",
    "response",
    "content",
    "instructions",
    "summary",
    "workspace",
]
EditOperation = Literal["replace", "merge"]
FlowOperation = Literal["stop", "continue"]
DeliverAt = Literal["now", "next_turn"]
ReturnKind = Literal["json", "messages", "text_parts", "elicit_result"]
ModifyValueKind = Literal["object", "messages", "text_parts", "workspace", "form_answers"]
ErrorKind = Literal["malformed", "unknown", "unadvertised", "illegal"]

EFFECT_TYPE_ORDER: Final = ("deny", "allow", "ask", "modify", "message", "return", "flow", "inject")
EFFECT_TYPES: Final = frozenset(EFFECT_TYPE_ORDER)
MODIFY_TARGET_NAMES: Final = frozenset(
    {
        "input",
        "output",
        "prompt",
        "request",
        "response",
        "content",
        "instructions",
        "summary",
        "workspace",
    }
)
EDIT_OPERATIONS: Final = frozenset({"replace", "merge"})
FLOW_OPERATION_NAMES: Final = frozenset({"stop", "continue"})
DELIVER_AT: Final = frozenset({"now", "next_turn"})
ELICIT_ACTIONS: Final = frozenset({"accept", "decline", "cancel"})

REVERSE_DNS: Final = re.compile(r"^(?:[A-Za-z][A-Za-z0-9_-]*\.)+[A-Za-z][A-Za-z0-9_-]*$")
"""Extension keys, deny codes and extension effect names (``com.example.thing``)."""


def _table(rows: Mapping[str, Iterable[str]]) -> Mapping[str, frozenset[str]]:
    return MappingProxyType({event: frozenset(rows.get(event, ())) for event in INTERCEPTABLE})


EVENT_EFFECTS: Final = _table(
    {
        "session.start": ("inject", "message"),
        "config.change.before": ("deny", "message"),
        "turn.start": ("deny", "modify", "inject", "flow", "message"),
        "turn.finish.before": ("modify", "flow", "message"),
        "model.request.before": ("deny", "modify", "inject", "return", "flow", "message"),
        "model.response.after": ("modify", "flow", "message"),
        "model.switch.before": ("deny", "flow", "message"),
        "tool.before": ("deny", "allow", "ask", "modify", "inject", "flow", "return", "message"),
        "tool.after": ("modify", "inject", "flow", "message"),
        "tool.permission.request": ("allow", "deny", "modify", "flow", "message"),
        "tool.batch.after": ("flow", "inject", "message"),
        "context.compact.before": ("deny", "modify", "return", "inject", "message"),
        "context.compact.after": ("inject", "modify", "message"),
        "task.change.before": ("deny", "message"),
        "user.elicitation.request": ("deny", "return", "message"),
        "user.elicitation.result": ("modify", "message"),
        "user.message.inbound": ("deny", "modify", "message"),
        "user.message.outbound": ("deny", "modify", "message"),
        "workspace.change.before": ("deny", "modify", "message"),
    }
)
"""The effects each of the 19 interceptable events allows (observe-only events allow none)."""

MODIFY_TARGETS: Final = _table(
    {
        "turn.start": ("prompt",),
        "turn.finish.before": ("response",),
        "model.request.before": ("request",),
        "model.response.after": ("response",),
        "tool.before": ("input",),
        "tool.after": ("output",),
        "tool.permission.request": ("input",),
        "context.compact.before": ("instructions",),
        "context.compact.after": ("summary",),
        "user.elicitation.result": ("content",),
        "user.message.inbound": ("prompt",),
        "user.message.outbound": ("content",),
        "workspace.change.before": ("workspace",),
    }
)
"""The ``modify`` targets each interceptable event allows (empty where modify is not allowed)."""

FLOW_OPERATIONS: Final = _table(
    {
        "turn.start": ("stop",),
        "turn.finish.before": ("stop", "continue"),
        "model.request.before": ("stop",),
        "model.response.after": ("stop",),
        "model.switch.before": ("stop",),
        "tool.before": ("stop",),
        "tool.after": ("stop", "continue"),
        "tool.permission.request": ("stop",),
        "tool.batch.after": ("stop",),
    }
)
"""The ``flow`` operations each interceptable event allows (empty where flow is not allowed)."""

RETURN_VALUE: Final[Mapping[str, ReturnKind]] = MappingProxyType(
    {
        "tool.before": "json",
        "model.request.before": "messages",
        "context.compact.before": "text_parts",
        "user.elicitation.request": "elicit_result",
    }
)
"""What a ``return`` value (and a chain candidate) is at the four events that allow it:
any JSON tool result, canonical messages, text parts, or an MCP ``ElicitResult``."""

_BASE_VALUE_KIND: Final[Mapping[str, ModifyValueKind]] = MappingProxyType(
    {
        "input": "object",
        "output": "messages",
        "prompt": "messages",
        "request": "messages",
        "response": "messages",
        "content": "messages",
        "instructions": "text_parts",
        "summary": "text_parts",
        "workspace": "workspace",
    }
)


def modify_value_kind(event_type: str, target: str) -> ModifyValueKind | None:
    """The value type of ``modify(target)`` at ``event_type`` (``None`` for an unknown target).

    ``content`` is a canonical message list at ``user.message.outbound`` and the MCP
    form-answer object at ``user.elicitation.result``.
    """
    if target == "content" and event_type == "user.elicitation.result":
        return "form_answers"
    return _BASE_VALUE_KIND.get(target)


# --------------------------------------------------------------------------- errors


class EffectError(WireError):
    """One invalid effect: where, why, and which class of failure.

    ``kind`` is ``"unknown"`` (unknown effect type, operation, target, field or enum
    value), ``"malformed"`` (wrong shape or value type), ``"illegal"`` (not allowed at
    this event by the draft, or not in this edit context) or ``"unadvertised"`` (legal,
    but not granted by the request's capabilities, including an exhausted continuation
    allowance). Every kind rejects the whole response.
    """

    def __init__(
        self, path: str | tuple[PathPart, ...], reason: str, kind: ErrorKind = "malformed"
    ) -> None:
        super().__init__(path, reason)
        self.kind: ErrorKind = kind

    def at(self, *prefix: PathPart) -> "EffectError":
        moved = super().at(*prefix)
        return EffectError(moved.path, moved.reason, self.kind)


def _join(base: str, *parts: PathPart) -> str:
    out = "" if base == "$" else base
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else part
    return out or "$"


def _rebase(base: str, relative: str) -> str:
    if relative == "$":
        return base
    if base == "$":
        return relative.lstrip(".")
    return base + relative if relative.startswith("[") else f"{base}.{relative}"


def _field_name(key: object) -> str:
    text = key if isinstance(key, str) else "a non-string key"
    return text if len(text) <= 64 else "an over-long field name"


# --------------------------------------------------------------------------- JSON values

_MAX_DEPTH: Final = 256
_PREVALIDATED: Final = "ahp_protocol.effects.prevalidated"


def _unwrap_model(value: object) -> object:
    if isinstance(value, BaseModel):
        to_wire = getattr(value, "to_wire", None)
        if callable(to_wire):
            return to_wire()
        return value.model_dump(mode="json", by_alias=True, exclude_none=True)
    return value


def to_json_value(value: object, depth: int = 0) -> Any:
    """A fresh plain-JSON copy of ``value``; wire models inside become their wire form.

    Raises ``ValueError`` (fixed text) for anything JSON cannot carry: non-string keys,
    NaN or infinite numbers, other Python objects, or nesting deeper than 256.
    """
    if depth > _MAX_DEPTH:
        raise ValueError("is nested too deeply")
    value = _unwrap_model(value)
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError("must not contain NaN or infinite numbers")
        return value
    if isinstance(value, (list, tuple)):
        return [to_json_value(item, depth + 1) for item in value]
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise ValueError("must have string keys only")
            out[key] = to_json_value(item, depth + 1)
        return out
    raise ValueError("must be a JSON value")


# --------------------------------------------------------------------------- value types


def _content_error(kind: Literal["messages", "text_parts"], value: object) -> WireError | None:
    """The first problem the content module finds in a message or text-part list."""
    from ahp_protocol.wire import content

    try:
        if kind == "messages":
            content.parse_messages(value)
        else:
            content.parse_text_parts(value)
    except WireErrors as exc:
        return exc.first
    except WireError as exc:
        return exc
    return None


def _check_list(kind: Literal["messages", "text_parts"], value: object, path: str) -> None:
    if not isinstance(value, list):
        what = "canonical messages" if kind == "messages" else "text parts"
        raise EffectError(path, f"must be a list of {what}")
    problem = _content_error(kind, value)
    if problem is not None:
        raise EffectError(_rebase(path, problem.path), problem.reason)


def _check_workspace(value: object, path: str) -> None:
    if not isinstance(value, dict):
        raise EffectError(path, "must be a WorkspaceChange object")
    if not value:
        raise EffectError(path, "must name cwd or workspaceRoots")
    for key in value:
        if key not in ("cwd", "workspaceRoots"):
            raise EffectError(path, f"{_field_name(key)} is not an allowed field", "unknown")
    cwd = value.get("cwd", "-")
    if not isinstance(cwd, str) or not cwd:
        raise EffectError(_join(path, "cwd"), "must be a non-empty string")
    if "workspaceRoots" in value:
        roots = value["workspaceRoots"]
        if not isinstance(roots, list):
            raise EffectError(_join(path, "workspaceRoots"), "must be an array")
        for i, root in enumerate(roots):
            if not isinstance(root, str) or not root:
                raise EffectError(_join(path, "workspaceRoots", i), "must be a non-empty string")
        if len(set(roots)) != len(roots):
            raise EffectError(_join(path, "workspaceRoots"), "must not contain duplicates")


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _check_form_answers(value: object, path: str) -> None:
    """MCP ``FormAnswers``: an object of strings, numbers, booleans or string arrays."""
    if not isinstance(value, dict):
        raise EffectError(path, "must be an object of form answers")
    for key, answer in value.items():
        if isinstance(answer, (str, bool)) or _is_number(answer):
            continue
        if isinstance(answer, list) and all(isinstance(item, str) for item in answer):
            continue
        raise EffectError(
            _join(path, _field_name(key)),
            "must be a string, number, boolean or array of strings",
        )


def _check_elicit_result(value: object, path: str) -> None:
    """MCP ``ElicitResult``: ``{action, content?, _meta?}``; content only with accept."""
    if not isinstance(value, dict):
        raise EffectError(path, "must be an MCP ElicitResult object")
    if "action" not in value:
        raise EffectError(path, "action is required")
    action = value["action"]
    if not isinstance(action, str) or action not in ELICIT_ACTIONS:
        raise EffectError(_join(path, "action"), "must be 'accept', 'decline' or 'cancel'")
    if "_meta" in value and not isinstance(value["_meta"], dict):
        raise EffectError(_join(path, "_meta"), "must be an object")
    if "content" in value:
        if action != "accept":
            raise EffectError(_join(path, "content"), "is only allowed when action is 'accept'")
        _check_form_answers(value["content"], _join(path, "content"))


def check_return_value(event_type: str, value: object, path: str = "value") -> None:
    """Check a ``return`` value (or a chain candidate) against ``event_type``'s kind.

    Raises :class:`EffectError` (``malformed``). Events that allow no ``return`` accept
    any value here; legality is :func:`check_effects`'s concern.
    """
    kind = RETURN_VALUE.get(event_type)
    if kind == "messages" or kind == "text_parts":
        _check_list(kind, value, path)
    elif kind == "elicit_result":
        _check_elicit_result(value, path)


def _check_modify_value(kind: ModifyValueKind, value: object, path: str) -> None:
    if kind == "object":
        if not isinstance(value, dict):
            raise EffectError(path, "must be an object")
    elif kind == "messages" or kind == "text_parts":
        _check_list(kind, value, path)
    elif kind == "workspace":
        _check_workspace(value, path)
    else:
        _check_form_answers(value, path)


# --------------------------------------------------------------------------- models

NonEmptyStr = Annotated[str, Field(min_length=1, strict=True)]
ReverseDnsStr = Annotated[str, Field(pattern=REVERSE_DNS.pattern, strict=True)]


class BaseEffect(BaseModel):
    """Common base: strict (unknown fields reject), frozen, wire names via aliases."""

    model_config = ConfigDict(
        extra="forbid",
        frozen=True,
        defer_build=True,
        alias_generator=to_camel,
        validate_by_name=True,
        validate_by_alias=True,
        serialize_by_alias=True,
    )

    always_on_wire: ClassVar[frozenset[str]] = frozenset({"type"})
    """Fields with constant defaults that are serialized even when never set."""
    absent_when_none: ClassVar[frozenset[str]] = frozenset()
    """Optional fields for which ``None`` means "absent" (never a JSON null on the wire)."""

    def to_wire(self) -> dict[str, Any]:
        """The wire object: the constants (``type``, ...) always, other fields only when
        set; a ``value`` of ``None`` stays a JSON ``null`` (a literal, not a deletion).

        A plain serialization: an instance built with ``model_construct`` is not
        validated by it; :func:`check_effects` judges what this returns.
        """
        wire: dict[str, Any] = self.__pydantic_serializer__.to_python(
            self, mode="json", by_alias=True, exclude_unset=True
        )
        for name in self.absent_when_none:  # field and wire names are the same here
            if name in wire and wire[name] is None:
                del wire[name]
        if not self.always_on_wire <= wire.keys():
            # Constants left at their defaults: written first, in declaration order
            # (their field and wire names are the same).
            constants = {name: getattr(self, name) for name in _constants(type(self))}
            wire = {**constants, **wire}
        return wire


@cache
def _constants(model: type[BaseEffect]) -> tuple[str, ...]:
    return tuple(name for name in model.model_fields if name in model.always_on_wire)


def _json_field(value: object) -> Any:
    try:
        return to_json_value(value)
    except RecursionError:
        raise ValueError("is nested too deeply") from None


class DenyEffect(BaseEffect):
    """Refuse the operation. ``reason`` is shown; ``code`` is a reverse-DNS identifier."""

    absent_when_none: ClassVar[frozenset[str]] = frozenset({"code", "extensions"})

    type: Literal["deny"] = "deny"
    reason: NonEmptyStr
    code: ReverseDnsStr | None = None
    extensions: dict[str, Any] | None = None

    @field_validator("extensions", mode="before")
    @classmethod
    def _extensions(cls, value: object) -> object:
        if value is None or not isinstance(value, Mapping):
            return value
        for key in value:
            if not isinstance(key, str) or not REVERSE_DNS.match(key):
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
    """Edit one target of the event; the value type depends on target and event.

    Construction checks only that ``value`` is JSON; whether it fits the target is
    checked on parsing (:func:`parse_effect`) and per event (:func:`check_effects`).
    """

    type: Literal["modify"] = "modify"
    target: ModifyTarget
    operation: EditOperation
    value: Any

    @field_validator("value", mode="before")
    @classmethod
    def _value(cls, value: object) -> Any:
        return _json_field(value)


class ReturnEffect(BaseEffect):
    """Supply a candidate result instead of original execution."""

    type: Literal["return"] = "return"
    value: Any

    @field_validator("value", mode="before")
    @classmethod
    def _value(cls, value: object) -> Any:
        return _json_field(value)


class FlowStopEffect(BaseEffect):
    """End decision-making: no pending execution, no further model work."""

    always_on_wire: ClassVar[frozenset[str]] = frozenset({"type", "operation"})

    type: Literal["flow"] = "flow"
    operation: Literal["stop"] = "stop"
    reason: NonEmptyStr


class FlowContinueEffect(BaseEffect):
    """Ask for one more step (uses one continuation allowance per response)."""

    always_on_wire: ClassVar[frozenset[str]] = frozenset({"type", "operation"})
    absent_when_none: ClassVar[frozenset[str]] = frozenset({"instruction"})

    type: Literal["flow"] = "flow"
    operation: Literal["continue"] = "continue"
    instruction: NonEmptyStr | None = None


class InjectEffect(BaseEffect):
    """Append canonical messages to the context, now or at the next turn."""

    always_on_wire: ClassVar[frozenset[str]] = frozenset({"type", "target", "operation"})

    type: Literal["inject"] = "inject"
    target: Literal["context"] = "context"
    operation: Literal["append"] = "append"
    deliver_at: DeliverAt
    value: list[Any]

    @field_validator("value", mode="before")
    @classmethod
    def _messages(cls, value: object, info: ValidationInfo) -> Any:
        data = _json_field(value)
        if not isinstance(data, list):
            raise ValueError("must be a list of canonical messages")
        if not (info.context or {}).get(_PREVALIDATED):
            problem = _content_error("messages", data)
            if problem is not None:
                raise ValueError(str(problem))
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

_MODELS: Final[Mapping[str, type[BaseEffect]]] = MappingProxyType(
    {
        "deny": DenyEffect,
        "allow": AllowEffect,
        "ask": AskEffect,
        "message": MessageEffect,
        "modify": ModifyEffect,
        "return": ReturnEffect,
        "inject": InjectEffect,
    }
)
_FLOW_MODELS: Final[Mapping[str, type[BaseEffect]]] = MappingProxyType(
    {"stop": FlowStopEffect, "continue": FlowContinueEffect}
)


@cache
def _wire_names(model: type[BaseEffect]) -> frozenset[str]:
    return frozenset(field.alias or name for name, field in model.model_fields.items())


# --------------------------------------------------------------------------- parsing


def _require_enum(
    obj: Mapping[str, Any], key: str, allowed: frozenset[str], path: str, reason: str
) -> None:
    if key not in obj:
        return  # reported as "is required" by the model
    value = obj[key]
    if not isinstance(value, str):
        raise EffectError(_join(path, key), "must be a string")
    if value not in allowed:
        raise EffectError(_join(path, key), reason, "unknown")


def _check_standalone_modify_value(target: str, value: object, path: str) -> None:
    """The value type ``effect.schema.json`` fixes for ``target`` without an event."""
    if target == "content":  # messages (outbound) or form answers (elicitation result)
        if isinstance(value, list):
            _check_list("messages", value, path)
        elif isinstance(value, dict):
            _check_form_answers(value, path)
        else:
            raise EffectError(path, "must be a list of canonical messages or form answers")
        return
    kind = _BASE_VALUE_KIND.get(target)
    if kind is not None:
        _check_modify_value(kind, value, path)


def parse_effect(obj: object, path: str = "effects[0]", *, check_values: bool = True) -> AnyEffect:
    """Parse one wire effect strictly, without an event; raises :class:`EffectError`.

    Checks what ``effect.schema.json`` checks: a known ``type`` (and flow
    ``operation``), no unknown or null optional fields, known target, operation and
    ``deliverAt`` values, field types, the canonical messages of ``inject`` and, unless
    ``check_values`` is false, the value type a ``modify`` target has in every event
    (``content`` may be messages or form answers here). Whether the effect is legal and
    advertised at an event, and its event-specific value type, is :func:`check_effects`'s
    work (it parses with ``check_values=False`` to keep its order of checks).
    """
    if not isinstance(obj, Mapping):
        raise EffectError(path, "must be an object")
    if "type" not in obj:
        raise EffectError(path, "type is required")
    kind = obj["type"]
    if not isinstance(kind, str):
        raise EffectError(_join(path, "type"), "must be a string")
    if kind not in EFFECT_TYPES:
        raise EffectError(_join(path, "type"), "is not a known effect type", "unknown")
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
            raise EffectError(path, f"{_field_name(key)} is not an allowed field", "unknown")
    for key in sorted(model.always_on_wire):
        if key not in obj:  # constants have defaults for authors, never on the wire
            raise EffectError(path, f"{key} is required")
    for key in model.absent_when_none:
        if key in obj and obj[key] is None:
            raise EffectError(_join(path, key), "must not be null")

    if kind == "modify":
        _require_enum(obj, "target", MODIFY_TARGET_NAMES, path, "is not a known modify target")
        _require_enum(obj, "operation", EDIT_OPERATIONS, path, "is not a known edit operation")
    elif kind == "inject":
        _require_enum(obj, "target", frozenset({"context"}), path, "is not a known inject target")
        _require_enum(
            obj, "operation", frozenset({"append"}), path, "is not a known inject operation"
        )
        _require_enum(obj, "deliverAt", DELIVER_AT, path, "is not a known delivery point")
        if "value" in obj:
            _check_list("messages", obj["value"], _join(path, "value"))

    try:
        effect = model.model_validate(
            obj, by_alias=True, by_name=False, context={_PREVALIDATED: True}
        )
    except ValidationError as exc:
        first = from_validation_error(exc).first
        raise EffectError(_rebase(path, first.path), first.reason) from None
    if check_values and isinstance(effect, ModifyEffect):
        _check_standalone_modify_value(effect.target, effect.value, _join(path, "value"))
    return cast(AnyEffect, effect)


# --------------------------------------------------------------------------- checking

_BLOCK_EFFECTS: Final = frozenset({"modify", "flow", "inject"})
"""Effects a grant must qualify with a block of the same name."""


def is_plain_grant_at(event_type: str, capabilities: object) -> bool:
    """Whether ``capabilities`` is a plain grant at ``event_type``: an object with
    ``effects`` only, naming distinct standard effects that the event allows and that
    need no block (not ``modify``, ``flow`` or ``inject``).

    Every plain grant is valid at its event:
    :func:`ahp_protocol.wire.capabilities.parse_capabilities` accepts it (a test checks
    every combination). ``False`` only means "not plain": anything else needs that
    parse to be judged. It lets a backend judge the usual grant from the legality
    table without creating the capabilities models.
    """
    if type(capabilities) is not dict or len(capabilities) != 1:
        return False
    effects = capabilities.get("effects")
    allowed = EVENT_EFFECTS.get(event_type)
    if type(effects) is not list or allowed is None:
        return False
    if not all(
        type(name) is str and name in allowed and name not in _BLOCK_EFFECTS for name in effects
    ):
        return False
    return len(set(effects)) == len(effects)


class Grants:
    """A tolerant read of a request's capabilities (validated upstream), for
    :func:`check_effects`. Build it once to judge many responses to the same grant."""

    __slots__ = ("deliver_at", "effects", "flow", "modify")

    def __init__(self, capabilities: Mapping[str, Any] | BaseModel) -> None:
        if isinstance(capabilities, BaseModel):
            to_wire = getattr(capabilities, "to_wire", None)
            capabilities = to_wire() if callable(to_wire) else capabilities.model_dump()
        caps: Mapping[str, Any] = capabilities if _is_mapping(capabilities) else {}
        effects = caps.get("effects")
        self.effects = frozenset(
            e for e in (effects if isinstance(effects, list) else ()) if isinstance(e, str)
        )
        modify = caps.get("modify")
        self.modify: Mapping[str, Any] = modify if _is_mapping(modify) else {}
        flow = caps.get("flow")
        self.flow: Mapping[str, Any] = flow if _is_mapping(flow) else {}
        inject = caps.get("inject")
        context = inject.get("context") if _is_mapping(inject) else None
        deliver = context.get("deliverAt") if _is_mapping(context) else None
        self.deliver_at = frozenset(deliver if isinstance(deliver, list) else ())

    def flow_operations(self) -> frozenset[str]:
        ops = self.flow.get("operations")
        return frozenset(ops if isinstance(ops, list) else ())

    def continuations_left(self) -> bool:
        left = self.flow.get("remainingContinuations")
        return isinstance(left, int) and not isinstance(left, bool) and left > 0


def _is_mapping(value: object) -> TypeGuard[Mapping[str, Any]]:
    return isinstance(value, (dict, Mapping))  # dict first: a cheap exact test


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


def _at_event(event_type: str) -> str:
    return f"at {event_type}" if is_interceptable(event_type) else "at this event"


def _check_modify(
    event_type: str,
    grants: Grants,
    effect: ModifyEffect,
    path: str,
    context: Mapping[str, Any],
) -> None:
    target, operation = effect.target, effect.operation
    if target not in MODIFY_TARGETS.get(event_type, frozenset()):
        raise EffectError(
            _join(path, "target"), f"is not a modify target {_at_event(event_type)}", "illegal"
        )
    grant = grants.modify.get(target)
    if not isinstance(grant, Mapping):
        raise EffectError(
            _join(path, "target"), "is not advertised in capabilities.modify", "unadvertised"
        )
    if grant.get(operation) is not True:
        raise EffectError(
            _join(path, "operation"),
            "is not advertised for this target in capabilities.modify",
            "unadvertised",
        )
    kind = modify_value_kind(event_type, target)
    if kind is None:  # pragma: no cover - target names are closed
        raise EffectError(_join(path, "target"), "is not a known modify target", "unknown")
    _check_modify_value(kind, effect.value, _join(path, "value"))

    # Edit context: what the harness knows about the current target.
    if kind == "form_answers":
        mode, action = _known(context.get("mode")), _known(context.get("action"))
        if mode is not None and mode != "form":
            raise EffectError(
                _join(path, "target"), "content is editable only for form elicitations", "illegal"
            )
        if action is not None and action != "accept":
            raise EffectError(
                _join(path, "target"), "content is editable only for accepted forms", "illegal"
            )
    current_values = context.get("current")
    if isinstance(current_values, Mapping) and target in current_values:
        current = current_values[target]
        if (
            operation == "replace"
            and kind in ("messages", "text_parts")
            and _holds_withheld_text(current)
        ):
            raise EffectError(
                _join(path, "operation"),
                "whole-list replace is not allowed over withheld text",
                "illegal",
            )
        if (
            operation == "merge"
            and kind in ("object", "workspace", "form_answers")
            and not isinstance(current, Mapping)
        ):
            raise EffectError(
                _join(path, "operation"), "merge needs a current object value", "illegal"
            )


def _check_one(
    event_type: str,
    grants: Grants,
    effect: AnyEffect,
    path: str,
    context: Mapping[str, Any],
) -> None:
    kind = effect.type
    if kind not in EVENT_EFFECTS.get(event_type, frozenset()):
        raise EffectError(_join(path, "type"), f"is not allowed {_at_event(event_type)}", "illegal")
    if kind not in grants.effects:
        raise EffectError(
            _join(path, "type"), "is not advertised in capabilities.effects", "unadvertised"
        )
    if isinstance(effect, ModifyEffect):
        _check_modify(event_type, grants, effect, path, context)
    elif isinstance(effect, (FlowStopEffect, FlowContinueEffect)):
        operation = effect.operation
        if operation not in FLOW_OPERATIONS.get(event_type, frozenset()):
            raise EffectError(
                _join(path, "operation"),
                f"is not a flow operation {_at_event(event_type)}",
                "illegal",
            )
        if operation not in grants.flow_operations():
            raise EffectError(
                _join(path, "operation"),
                "is not advertised in capabilities.flow.operations",
                "unadvertised",
            )
        if operation == "continue" and not grants.continuations_left():
            raise EffectError(
                _join(path, "operation"), "continuation allowance is exhausted", "unadvertised"
            )
    elif isinstance(effect, InjectEffect):
        if effect.deliver_at not in grants.deliver_at:
            raise EffectError(
                _join(path, "deliverAt"),
                "is not advertised in capabilities.inject.context.deliverAt",
                "unadvertised",
            )
    elif isinstance(effect, ReturnEffect):
        check_return_value(event_type, effect.value, _join(path, "value"))
        value = effect.value
        if (
            RETURN_VALUE.get(event_type) == "elicit_result"
            and isinstance(value, dict)
            and "content" in value
            and _known(context.get("mode")) == "url"
        ):
            raise EffectError(
                _join(path, "value", "content"),
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
    capabilities: Mapping[str, Any] | BaseModel | Grants,
    effects: object,
    *,
    edit_context: Mapping[str, Any] | None = None,
) -> list[AnyEffect]:
    """Validate a response's whole ``effects`` value atomically; return the parsed list.

    ``effects`` is the wire value (``None`` means ``[]``) or what a handler returned: a
    list mixing effect models and plain dicts (a model is judged by its wire form).
    ``capabilities`` is the request's grant (a mapping, a ``Capabilities`` model, or
    :class:`Grants` built from one). Each element is checked in order: shape and
    unknown values, legal at ``event_type``, advertised, then per type (modify target
    legal, advertised with that operation, value type; flow operation legal, advertised,
    continuation left; inject ``deliverAt`` advertised; return value type). The first
    problem raises :class:`EffectError` with a path such as ``effects[2].value[0].parts``;
    no element is ever salvaged.

    ``edit_context`` (optional, harness side) describes the current targets:
    ``{"current": {target: value}, "mode": "form"|"url", "action": "accept"|…}``. With it,
    whole-list replace over withheld text, object merge over a non-object, and elicitation
    content edits outside an accepted form are ``illegal``.
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
        # An effect model is judged by its wire form, like a plain value: what is
        # accepted is exactly what would be sent, however the model was built.
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

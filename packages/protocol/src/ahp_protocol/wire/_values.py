"""What an effect's value is: JSON values, and the value kind of each target.

Owns :func:`to_json_value` (a fresh plain-JSON copy; wire models become their wire
form), :data:`RETURN_VALUE` (what a ``return`` carries at the four events that allow
it), :func:`modify_value_kind` (what ``modify(target)`` carries at an event) and the
checks of those kinds (messages and text parts by :mod:`ahp_protocol.wire.content`, a
``WorkspaceChange``, MCP form answers and ``ElicitResult``), each raising
:class:`~ahp_protocol.wire.errors.EffectError` (``malformed``) with a reason that never
quotes the value. Re-exported by :mod:`ahp_protocol.wire.effects`. No I/O.
"""

import math
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Final, Literal

from pydantic import BaseModel

from ahp_protocol.wire.errors import EffectError, WireError, WireErrors, json_path, rebase

ReturnKind = Literal["json", "messages", "text_parts", "elicit_result"]
ModifyValueKind = Literal["object", "messages", "text_parts", "workspace", "form_answers"]
ELICIT_ACTIONS: Final = frozenset({"accept", "decline", "cancel"})

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


def field_name(key: object) -> str:
    text = key if isinstance(key, str) else "a non-string key"
    return text if len(text) <= 64 else "an over-long field name"


# --------------------------------------------------------------------------- JSON values

_MAX_DEPTH: Final = 256


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


def content_error(kind: Literal["messages", "text_parts"], value: object) -> WireError | None:
    """The first problem the content module finds in a message or text-part list."""
    from ahp_protocol.wire import content

    try:
        if kind == "messages":
            content.parse_messages(value)
        else:
            content.parse_text_parts(value)
    except (WireError, WireErrors) as exc:
        return exc.first
    return None


def check_list(kind: Literal["messages", "text_parts"], value: object, path: str) -> None:
    if not isinstance(value, list):
        what = "canonical messages" if kind == "messages" else "text parts"
        raise EffectError(path, f"must be a list of {what}")
    problem = content_error(kind, value)
    if problem is not None:
        raise EffectError(rebase(problem.path, path), problem.reason)


def _check_workspace(value: object, path: str) -> None:
    if not isinstance(value, dict):
        raise EffectError(path, "must be a WorkspaceChange object")
    if not value:
        raise EffectError(path, "must name cwd or workspaceRoots")
    for key in value:
        if key not in ("cwd", "workspaceRoots"):
            raise EffectError(path, f"{field_name(key)} is not an allowed field", "unknown")
    cwd = value.get("cwd", "-")
    if not isinstance(cwd, str) or not cwd:
        raise EffectError(json_path(("cwd",), path), "must be a non-empty string")
    if "workspaceRoots" in value:
        roots, where = value["workspaceRoots"], json_path(("workspaceRoots",), path)
        if not isinstance(roots, list):
            raise EffectError(where, "must be an array")
        for i, root in enumerate(roots):
            if not isinstance(root, str) or not root:
                raise EffectError(json_path((i,), where), "must be a non-empty string")
        if len(set(roots)) != len(roots):
            raise EffectError(where, "must not contain duplicates")


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
            json_path((field_name(key),), path),
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
        raise EffectError(json_path(("action",), path), "must be 'accept', 'decline' or 'cancel'")
    if "_meta" in value and not isinstance(value["_meta"], dict):
        raise EffectError(json_path(("_meta",), path), "must be an object")
    if "content" in value:
        where = json_path(("content",), path)
        if action != "accept":
            raise EffectError(where, "is only allowed when action is 'accept'")
        _check_form_answers(value["content"], where)


def check_return_value(event_type: str, value: object, path: str = "value") -> None:
    """Check a ``return`` value (or a chain candidate) against ``event_type``'s kind.

    Raises :class:`EffectError` (``malformed``). Events that allow no ``return`` accept
    any value here; legality is :func:`check_effects`'s concern.
    """
    kind = RETURN_VALUE.get(event_type)
    if kind == "messages" or kind == "text_parts":
        check_list(kind, value, path)
    elif kind == "elicit_result":
        _check_elicit_result(value, path)


def check_modify_value(kind: ModifyValueKind, value: object, path: str) -> None:
    if kind == "object":
        if not isinstance(value, dict):
            raise EffectError(path, "must be an object")
    elif kind == "messages" or kind == "text_parts":
        check_list(kind, value, path)
    elif kind == "workspace":
        _check_workspace(value, path)
    else:
        _check_form_answers(value, path)


def check_standalone_modify_value(target: str, value: object, path: str) -> None:
    """The value type ``effect.schema.json`` fixes for ``target`` without an event."""
    if target == "content":  # messages (outbound) or form answers (elicitation result)
        if isinstance(value, list):
            check_list("messages", value, path)
        elif isinstance(value, dict):
            _check_form_answers(value, path)
        else:
            raise EffectError(path, "must be a list of canonical messages or form answers")
        return
    kind = _BASE_VALUE_KIND.get(target)
    if kind is not None:
        check_modify_value(kind, value, path)

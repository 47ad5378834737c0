"""Whole-message validation: is this JSON-RPC message a valid AHP message?

Owns the rules that span one message: which AHP method or result it is, each method's
``params`` (version, event, capabilities legal at that event, state, id correlation),
each response's ``result``, stdio framing (one object per line), and edits judged
against a host-side current value (:class:`EditContext`). It composes the pieces
(events, effects, capabilities, state) and does no I/O. Every problem is a
:class:`WireError` whose path starts at the message root (``params.event.tool.input``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from ahp_protocol.wire import catalogue, jsonrpc
from ahp_protocol.wire.errors import WireError, WireErrors

if TYPE_CHECKING:
    from ahp_protocol.wire.events import Event

_T = TypeVar("_T")

MessageKind = Literal[
    "intercept-request",
    "observe-notification",
    "capabilities-request",
    "configuration-request",
    "intercept-response",
    "capabilities-response",
    "configuration-response",
    "error-response",
]


@dataclass(frozen=True, slots=True)
class EditContext:
    """The host-side situation an edit is judged in (the draft's contextual validity).

    ``event`` is the event type the response answers; ``current`` maps a modify
    target to its current value; ``mode``/``action`` describe an elicitation
    result (``form``/``url``, ``accept``/``decline``/``cancel``) where relevant.
    """

    event: str
    current: Mapping[str, Any]
    mode: str = ""
    action: str = ""

    @classmethod
    def from_wire(cls, obj: Mapping[str, Any]) -> EditContext:
        return cls(
            event=str(obj.get("event", "")),
            current=dict(obj.get("current") or {}),
            mode=str(obj.get("mode") or ""),
            action=str(obj.get("action") or ""),
        )


def _within(check: Callable[[], _T], *prefix: str | int) -> _T:
    """Run ``check`` on a part of the message; its first error, seen from the root."""
    try:
        return check()
    except (WireError, WireErrors) as exc:
        raise exc.first.at(*prefix) from None


def _version(container: Mapping[str, Any], where: str) -> None:
    if "protocolVersion" not in container:
        raise WireError(where, "protocolVersion is required")
    if container["protocolVersion"] != jsonrpc.PROTOCOL_VERSION:
        raise WireError(
            f"{where}.protocolVersion",
            f'unsupported protocol version (expected "{jsonrpc.PROTOCOL_VERSION}")',
        )


def _params(message: Mapping[str, Any]) -> dict[str, Any]:
    params = message.get("params")
    if not isinstance(params, dict):
        raise WireError("params", "params must be an object")
    _version(params, "params")
    return params


def _only(container: Mapping[str, Any], allowed: set[str], where: str) -> None:
    extra = sorted(set(container) - allowed)
    if extra:
        raise WireError(
            where, f"{extra[0]} is not allowed here (only {', '.join(sorted(allowed))})"
        )


def _event(params: Mapping[str, Any]) -> Event:
    """The request's or notification's ``params.event``, parsed."""
    from ahp_protocol.wire import events

    if "event" not in params:
        raise WireError("params", "event is required")
    return _within(lambda: events.parse_event(params["event"]), "params", "event")


def _intercept_request(message: Mapping[str, Any]) -> None:
    from ahp_protocol.wire import capabilities, state

    params = _params(message)
    event = _event(params)
    if not catalogue.is_interceptable(event.type):
        raise WireError("params.event.type", f'"{event.type}" cannot be intercepted')
    if message.get("id") != event.id:
        raise WireError("id", "the request id must equal params.event.id")
    if "capabilities" not in params:
        raise WireError("params", "capabilities is required")
    _within(
        lambda: capabilities.parse_capabilities(params["capabilities"], event_type=event.type),
        "params",
        "capabilities",
    )
    if "state" in params:
        _within(
            lambda: state.parse_state(params["state"], event_type=event.type), "params", "state"
        )


def _result(message: Mapping[str, Any]) -> dict[str, Any]:
    result = message["result"]
    if not isinstance(result, dict):
        raise WireError("result", "result must be an object")
    _version(result, "result")
    return result


def _intercept_response(result: Mapping[str, Any], context: EditContext | None) -> None:
    from ahp_protocol.wire import effects

    if "effects" not in result:  # AHP-DEC-001 (the SDK 0.10.1 schema is looser here)
        raise WireError("result", "effects is required (an ordered array, [] for no effect)")
    raw = result["effects"]
    if not isinstance(raw, list):
        raise WireError("result.effects", "effects must be an array")
    if context is None:
        for i, item in enumerate(raw):
            _within(partial(effects.parse_effect, item, path=f"effects[{i}]"), "result")
    else:
        edit = {"current": dict(context.current), "mode": context.mode, "action": context.action}
        grant = full_grant(context.event)
        _within(
            lambda: effects.check_effects(context.event, grant, raw, edit_context=edit), "result"
        )


def full_grant(event_type: str) -> dict[str, Any]:
    """Every capability the draft allows at ``event_type`` (for judging edits in context)."""
    from ahp_protocol.wire import effects

    names = sorted(effects.EVENT_EFFECTS.get(event_type, frozenset()))
    grant: dict[str, Any] = {"effects": names}
    if "modify" in names:
        grant["modify"] = {
            t: {"replace": True, "merge": True} for t in effects.MODIFY_TARGETS[event_type]
        }
    if "flow" in names:
        ops = sorted(effects.FLOW_OPERATIONS[event_type])
        grant["flow"] = {"operations": ops}
        if "continue" in ops:
            grant["flow"].update(remainingContinuations=1, continuationCount=0)
    if "inject" in names:
        grant["inject"] = {"context": {"append": True, "deliverAt": ["now", "next_turn"]}}
    return grant


def _capabilities_response(result: Mapping[str, Any]) -> None:
    from ahp_protocol.wire.manifest import parse_manifest

    _only(result, {"protocolVersion", "manifest"}, "result")
    _within(lambda: parse_manifest(result["manifest"]), "result", "manifest")


def _configuration_response(result: Mapping[str, Any]) -> None:
    from ahp_protocol.wire import registration

    _only(result, {"protocolVersion", "configuration"}, "result")
    _within(
        lambda: registration.parse_configuration(result["configuration"]), "result", "configuration"
    )


def validate_message(message: object, *, context: EditContext | None = None) -> MessageKind:
    """Validate one decoded AHP message; return what it is or raise :class:`WireError`.

    A response is judged as the kind its result shows (``manifest`` →
    capabilities, ``configuration`` → configuration, otherwise intercept).
    With ``context``, an intercept response's effects are also judged against
    the event and current value it answers.
    """
    if not isinstance(message, dict):
        raise WireError("$", "a message must be a JSON object")
    try:
        kind = jsonrpc.classify(message)
    except jsonrpc.DecodeError as exc:
        raise WireError("$", exc.reason) from None
    if kind in ("request", "notification"):
        method = message["method"]
        expected = "notification" if method == jsonrpc.OBSERVE else "request"
        if method not in jsonrpc.METHODS:
            raise WireError("method", f'unknown method "{method}"')
        if kind != expected:
            raise WireError("$", f"{method} must be a {expected}")
        if method == jsonrpc.INTERCEPT:
            _intercept_request(message)
            return "intercept-request"
        if method == jsonrpc.OBSERVE:
            _event(_params(message))
            return "observe-notification"
        _only(_params(message), {"protocolVersion"}, "params")
        return "capabilities-request" if method == jsonrpc.CAPABILITIES else "configuration-request"
    if kind == "error":
        return "error-response"
    result = _result(message)
    if "manifest" in result:
        _capabilities_response(result)
        return "capabilities-response"
    if "configuration" in result:
        _configuration_response(result)
        return "configuration-response"
    _intercept_response(result, context)
    return "intercept-response"


def validate_stdio(data: bytes, *, context: EditContext | None = None) -> list[MessageKind]:
    """Validate stdio framing: one complete JSON-RPC object per ``\\n``-terminated line.

    A record split over several lines (pretty-printed JSON), a blank line, a
    missing final newline or anything that is not a message is an error whose
    path names the line (``line 2``).
    """
    if not data:
        raise WireError("line 1", "no message")
    if not data.endswith(b"\n"):
        raise WireError("$", "the last record is not terminated by a newline")
    kinds: list[MessageKind] = []
    for number, line in enumerate(data[:-1].split(b"\n"), start=1):
        where = f"line {number}"
        try:
            message = jsonrpc.decode(line.rstrip(b"\r"))
        except jsonrpc.DecodeError as exc:
            raise WireError(where, f"{exc.reason} (one complete JSON object per line)") from None
        try:
            kinds.append(validate_message(message, context=context))
        except WireError as exc:
            raise WireError(f"{where}: {exc.path}", exc.reason) from None
    return kinds

"""The server kit's sans-I/O core: which handler answers a message, and with what.

:meth:`Core.prepare` judges one framed message into a :class:`Reply`, or a call for
a driver to make (:class:`InterceptCall`, :class:`ObserveCall`); :meth:`Core.answer`
judges what an intercept handler returned. The rules, in the order they apply, are
listed in :mod:`ahp_protocol.server.backend`. One path: after the envelope checks,
one memo lookup keyed by what the :class:`Admission` depends on (event type, exact capabilities,
state) returns the handler, the grant and the event validator; on a miss the same
path judges them in full and stores them. The event is validated every time.
No I/O besides stderr diagnostics; never echoes input in error ``data``.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Final, NamedTuple, Protocol, TypeAlias, TypeGuard

from ahp_protocol.server import _codec
from ahp_protocol.server._codec import SILENT, Reply, codec, error_reply
from ahp_protocol.server._memo import EffectMemo, Memo
from ahp_protocol.wire import catalogue
from ahp_protocol.wire import jsonrpc as rpc
from ahp_protocol.wire.catalogue import INTERCEPTABLE_SET
from ahp_protocol.wire.jsonrpc import (
    CONFIGURATION,
    INTERCEPT,
    OBSERVE,
    PROTOCOL_VERSION,
    ErrorCode,
    RequestId,
)

if TYPE_CHECKING:
    from ahp_protocol.wire.effects import Grants


class Effect(Protocol):
    """An effect model (:class:`ahp_protocol.wire.effects.BaseEffect`)."""

    def to_wire(self) -> dict[str, Any]: ...


InterceptResult: TypeAlias = (
    Effect | Mapping[str, Any] | Iterable[Effect | Mapping[str, Any]] | None
)
"""``None``, one effect (an effect model or a dict), or an iterable of effects."""
InterceptHandler: TypeAlias = Callable[
    ["InterceptRequest"], InterceptResult | Awaitable[InterceptResult]
]
"""``(request) -> InterceptResult`` or an ``async def`` returning one."""
ObserveHandler: TypeAlias = Callable[[dict[str, Any]], Any]
"""``(event) -> None`` or an ``async def``; its return value is ignored."""

MAX_EFFECT_NAMES: Final = 64
"""The most effect names a request's ``capabilities.effects`` may list (the draft has
eight standard effects; the rest are extensions); more is -32602, judged before
anything else about the grant, so no grant costs more than a bounded amount."""
_NO_STATE: Final[Any] = object()  # ``params.state`` absent: its key is a shorter tuple
_BAD: Final = ErrorCode.INVALID_PARAMS
_INVALID_EVENT: Final = "params.event is not a valid event"


def log(message: str, *args: object) -> None:
    """One-line diagnostic to stderr (logging's last-resort handler when unconfigured)."""
    import logging

    logging.getLogger("ahp_protocol.server").warning(message, *args)


class InterceptRequest(NamedTuple):
    """One ``hooks/intercept`` request as a handler sees it (immutable).

    ``event`` is the raw event dict (lossless, as received); ``capabilities`` and
    ``state`` are the raw request objects; ``advertised`` is the set of effect types
    the harness accepts for this interception (``capabilities.effects``).
    """

    id: str | int
    event: dict[str, Any]
    event_type: str
    capabilities: dict[str, Any]
    state: dict[str, Any] | None
    advertised: frozenset[str]
    params: dict[str, Any]

    @property
    def tool(self) -> dict[str, Any]:
        """``event.tool`` or ``{}``."""
        tool = self.event.get("tool")
        return tool if isinstance(tool, dict) else {}

    @property
    def tool_name(self) -> str | None:
        name = self.tool.get("name")
        return name if isinstance(name, str) else None

    @property
    def tool_input(self) -> dict[str, Any]:
        """``event.tool.input`` when it is an object, else ``{}``."""
        tool = self.event.get("tool")  # not ``self.tool``: one call fewer on a hot path
        value = tool.get("input") if isinstance(tool, dict) else None
        return value if isinstance(value, dict) else {}

    @property
    def session_id(self) -> str | None:
        session = self.event.get("session")
        sid = session.get("id") if isinstance(session, dict) else None
        return sid if isinstance(sid, str) else None


class Admission(NamedTuple):
    """What the core decided about an intercept request besides its event: refused or
    admitted, to which handler, under which grant. A pure function of
    ``(event type, capabilities, state)`` and the handlers, remembered by ``key``.

    ``refusal`` is the error judged before the event (capabilities' shape, a state
    that is not an object, no handler: in that order); ``invalid`` why the grant or
    the state is invalid at the event (judged after it). ``judge`` is what
    ``check_effects`` reads, built from a private copy of the capabilities.
    """

    refusal: tuple[ErrorCode, str] | None
    invalid: str | None = None
    handler: InterceptHandler | None = None
    is_async: bool = False
    validate: Callable[[dict[str, Any]], object] = id  # set whenever refusal is None
    advertised: frozenset[str] = frozenset()
    judge: Grants | None = None
    key: str | bytes | None = None  # ``None``: not remembered, nor are its effects


class InterceptCall(NamedTuple):
    handler: InterceptHandler
    is_async: bool
    request: InterceptRequest
    admission: Admission  # judges the handler's effects; never handed to a handler
    limit: int


# Each request builds an InterceptRequest, an InterceptCall and a Reply: ``tuple.__new__``
# builds them without the Python-level ``__new__`` a NamedTuple's constructor runs
# (every field given, in declaration order).
_new: Final = tuple.__new__


class ObserveCall(NamedTuple):
    handlers: tuple[tuple[ObserveHandler, bool], ...]
    event: dict[str, Any]
    params: dict[str, Any]


class _MalformedResult(Exception):
    """A handler returned something that is not None, an effect or effects."""


def _capabilities_shape(capabilities: Any) -> str | None:
    """A fixed reason when ``capabilities`` is unusable, else ``None``."""
    if not isinstance(capabilities, dict):
        return "params.capabilities must be an object"
    effects = capabilities.get("effects")
    if not isinstance(effects, list):
        return "params.capabilities.effects must be an array of strings"
    if len(effects) > MAX_EFFECT_NAMES:
        return f"params.capabilities.effects names more than {MAX_EFFECT_NAMES} effects"
    if not all(isinstance(e, str) for e in effects):
        return "params.capabilities.effects must be an array of strings"
    if len(set(effects)) != len(effects):
        return "params.capabilities.effects must not repeat an effect"
    from ahp_protocol.wire._legality import is_effect_name

    if not all(is_effect_name(name) for name in effects):
        return "params.capabilities.effects holds an unknown effect type"
    return None


def _grant_problem(event_type: str, capabilities: dict[str, Any], state: Any) -> str | None:
    """Why the grant or the state is invalid at the event, else ``None``; the usual
    ones are judged without building their models."""
    from ahp_protocol.wire._legality import is_plain_grant_at
    from ahp_protocol.wire.state import _is_plain_state

    if not is_plain_grant_at(event_type, capabilities):
        from ahp_protocol.wire.capabilities import parse_capabilities

        try:
            parse_capabilities(capabilities, event_type=event_type)
        except Exception:
            return "params.capabilities is not a valid grant at this event"
    if state is not _NO_STATE and not _is_plain_state(state):
        from ahp_protocol.wire.state import parse_state

        try:
            parse_state(state, event_type=event_type)
        except Exception:
            return "params.state is not a valid chain state"
    return None


def _as_effect_list(result: Any) -> list[Any]:
    """Normalize a handler's return value. Iterating a generator runs handler code."""
    if result is None:
        return []
    if hasattr(type(result), "model_dump") or isinstance(result, (dict, Mapping)):
        return [result]
    if isinstance(result, str | bytes | bytearray | memoryview) or not isinstance(result, Iterable):
        raise _MalformedResult
    return list(result)


def is_awaitable(result: Any) -> TypeGuard[Awaitable[Any]]:
    """``inspect.isawaitable``, after the cheap tests that rule out what handlers
    usually return (nothing, effect models, dicts, lists)."""
    if result is None or hasattr(type(result), "model_dump"):
        return False
    return not isinstance(result, (dict, list, tuple)) and inspect.isawaitable(result)


def _specificity(selector: str) -> int:
    return 0 if selector == "*" else 1 if selector.endswith(".*") else 2


class Core:
    """The judging half of :class:`~ahp_protocol.server.Backend`: handler tables and
    memos, no I/O. Registering a handler clears what depends on the handlers."""

    name: str
    configuration: list[dict[str, Any]] | None

    def __init__(self) -> None:
        self._intercepts: list[tuple[str, InterceptHandler, bool]] = []
        self._observers: list[tuple[str, ObserveHandler, bool]] = []
        self._observe_cache: dict[str, tuple[tuple[ObserveHandler, bool], ...]] = {}
        self._codec = codec()
        self._admissions: Memo[Admission] = Memo(512, 16 * 1024)
        self._effects = EffectMemo()

    def _registered(self) -> None:
        self._admissions.clear()
        self._observe_cache.clear()

    def warm(self) -> None:
        """Build now what judging the first event would (the wire models, a validator per
        intercepted event type, pydantic-core's decoder): for a process that is idle
        until its first request anyway. Changes no answer; never raises."""
        try:
            from ahp_protocol.wire import effects  # noqa: F401
            from ahp_protocol.wire.events import _event_validator

            self._codec.accelerate()
            for selector, _fn, _is_async in self._intercepts:
                for event_type in catalogue.expand(selector, "intercept"):
                    _event_validator(event_type)
        except Exception as exc:  # the first event builds it, and reports what is wrong
            log("%s: warm-up failed (%s)", self.name, type(exc).__name__)

    # -- one message in ----------------------------------------------------------------

    def prepare(self, message: bytes, limit: int) -> Reply | InterceptCall | ObserveCall:
        """The reply to ``message``, or the handler call that decides it."""
        msg = self._codec.decode(message, limit)
        if isinstance(msg, Reply):
            return msg
        notification = "id" not in msg and isinstance(msg.get("method"), str)
        try:
            return self._notification(msg) if notification else self._request(msg, limit)
        except Exception as exc:  # a bug of ours must not take the server down
            log("%s: internal error (%s)", self.name, type(exc).__name__)
            rid = None if notification else rpc.recoverable_id(msg)
            return SILENT if notification else error_reply(rid, ErrorCode.INTERNAL_ERROR)

    def _request(self, msg: dict[str, Any], limit: int) -> Reply | InterceptCall:
        """A request: the envelope, the method, its params, then (intercept) the event
        and its :class:`Admission` (the grant judged)."""
        try:
            kind = rpc.classify(msg)
        except rpc.DecodeError as exc:
            return error_reply(rpc.recoverable_id(msg), ErrorCode.INVALID_REQUEST, exc.reason)
        if kind != "request":
            return SILENT  # a response sent to a backend: nothing to answer
        rid: RequestId = msg["id"]  # classify checked it
        method, params = msg["method"], msg.get("params")
        if method == OBSERVE:
            return error_reply(rid, ErrorCode.INVALID_REQUEST, "hooks/observe is a notification")
        if method != INTERCEPT and (method != CONFIGURATION or self.configuration is None):
            return error_reply(rid, ErrorCode.METHOD_NOT_FOUND)
        if type(params) is not dict:
            return error_reply(rid, _BAD, "params must be an object")
        version = params.get("protocolVersion")
        if type(version) is not str:
            return error_reply(rid, _BAD, "params.protocolVersion is required")
        if version != PROTOCOL_VERSION:
            return Reply(_codec.encode(rpc.unsupported_version(rid)))
        if method == CONFIGURATION:
            if len(params) != 1:
                return error_reply(rid, _BAD, "params must hold protocolVersion only")
            result = {
                "protocolVersion": PROTOCOL_VERSION,
                "configuration": {"subscriptions": self.configuration},
            }
            return Reply(_codec.encode({"jsonrpc": "2.0", "id": rid, "result": result}))
        event = params.get("event")
        if type(event) is not dict:
            return error_reply(rid, _BAD, "params.event must be an object")
        event_type = event.get("type")
        if type(event_type) is not str:
            return error_reply(rid, _BAD, "params.event.type must be a string")
        if event_type not in INTERCEPTABLE_SET:
            return error_reply(rid, ErrorCode.UNSUPPORTED_EVENT, "event type not interceptable")
        if event.get("id") != rid or type(rid) is not str:
            return error_reply(rid, _BAD, "the request id must equal params.event.id")
        capabilities: Any = params.get("capabilities")
        state = params.get("state", _NO_STATE)
        memo = self._admissions
        key = memo.key(
            (event_type, capabilities) if state is _NO_STATE else (event_type, capabilities, state)
        )
        admission = memo.get(key)  # a key of None is never stored
        if admission is None:
            admission = self._judge(event_type, capabilities, state, key)
            if key is not None:
                memo.put(key, admission)
        if admission.refusal is not None:
            return error_reply(rid, *admission.refusal)
        try:
            admission.validate(event)
        except Exception:
            return error_reply(rid, *(self._event_problem(event) or (_BAD, _INVALID_EVENT)))
        if admission.invalid is not None:
            return error_reply(rid, _BAD, admission.invalid)
        assert admission.handler is not None
        request = _new(InterceptRequest, (
            rid, event, event_type, capabilities, None if state is _NO_STATE else state,
            admission.advertised, params,
        ))  # fmt: skip
        return _new(
            InterceptCall, (admission.handler, admission.is_async, request, admission, limit)
        )

    def _judge(self, event_type: str, capabilities: Any, state: Any, key: Any) -> Admission:
        """The admission in full (a memo miss)."""
        shape = _capabilities_shape(capabilities)
        if shape is not None:
            return Admission((_BAD, shape))
        if state is not _NO_STATE and not isinstance(state, dict):
            return Admission((_BAD, "params.state must be an object"))
        found, rank = None, -1
        for selector, fn, is_async in self._intercepts:
            if catalogue.selector_matches(selector, event_type) and _specificity(selector) > rank:
                found, rank = (fn, is_async), _specificity(selector)
        if found is None:
            return Admission((ErrorCode.UNSUPPORTED_EVENT, "no handler for this event"))
        from ahp_protocol.wire.effects import Grants
        from ahp_protocol.wire.events import _event_validator

        self._codec.accelerate()  # the wire models import pydantic: use its decoder too
        return Admission(
            None, _grant_problem(event_type, capabilities, state), *found,
            _event_validator(event_type), frozenset(capabilities["effects"]),
            Grants(_codec.json_copy(capabilities)), key,
        )  # fmt: skip

    def _event_problem(self, event: dict[str, Any]) -> tuple[ErrorCode, str] | None:
        """Validate the event with the wire models; a code and fixed reason if invalid."""
        from ahp_protocol.wire.errors import WireError, WireErrors
        from ahp_protocol.wire.events import UnsupportedEvent, parse_event

        self._codec.accelerate()

        try:
            parse_event(event)
        except UnsupportedEvent:
            return ErrorCode.UNSUPPORTED_EVENT, "event type not supported"
        except (WireError, WireErrors):
            return _BAD, _INVALID_EVENT
        except Exception as exc:
            log("%s: event validation failed (%s)", self.name, type(exc).__name__)
            return _BAD, _INVALID_EVENT
        return None

    def _notification(self, msg: dict[str, Any]) -> Reply | ObserveCall:
        """Never answered. Only a valid current-version hooks/observe is processed."""
        if msg.get("jsonrpc") != "2.0" or msg["method"] != OBSERVE:
            return SILENT
        params = msg.get("params")
        if not isinstance(params, dict) or params.get("protocolVersion") != PROTOCOL_VERSION:
            return SILENT
        event = params.get("event")
        if not isinstance(event, dict) or not catalogue.is_event_type(event.get("type")):
            return SILENT
        handlers = self._observe_cache.get(event["type"])
        if handlers is None:
            handlers = self._observe_cache[event["type"]] = tuple(
                (fn, is_async)
                for selector, fn, is_async in self._observers
                if catalogue.selector_matches(selector, event["type"])
            )
        if not handlers or self._event_problem(event) is not None:
            return SILENT
        return ObserveCall(handlers, event, params)

    # -- what a handler returned -------------------------------------------------------

    def handler_raised(self, kind: str, exc: BaseException, call: InterceptCall | None) -> Reply:
        """Log the exception's type (never its text); -32004 for an intercept call."""
        log("%s: %s handler raised %s", self.name, kind, type(exc).__name__)
        return (
            SILENT
            if call is None
            else error_reply(call.request.id, ErrorCode.BACKEND_INTERNAL_ERROR)
        )

    def answer(self, call: InterceptCall, result: Any) -> Reply:
        """The reply to an intercept handler's (awaited) result."""
        rid, key = call.request.id, call.admission.key
        if result is None:
            encoded: bytes | None = b"[]"
        else:  # the usual repeated effect model is found by its fields
            encoded = None if key is None else self._effects.one(key, result)
        if encoded is None:
            try:
                effects = _as_effect_list(result)
            except _MalformedResult:
                return self._bad_effects(call, None)
            except Exception as exc:
                return self.handler_raised("intercept", exc, call)
            try:
                encoded = self._accepted(call, effects) if effects else b"[]"
            except Exception as exc:
                return self._bad_effects(call, exc)
            if encoded is None:
                return self._bad_effects(call, None)
        try:
            line = _codec.encode_result(rid, encoded)
        except (TypeError, ValueError) as exc:
            return self._bad_effects(call, exc)
        if len(line) - 1 > call.limit:
            log("%s: response exceeds the frame size limit", self.name)
            return error_reply(rid, ErrorCode.INTERNAL_ERROR, "response too large")
        return _new(Reply, (line, False, False))

    def _accepted(self, call: InterceptCall, effects: list[Any]) -> bytes | None:
        """The encoded wire form of a handler's effects once judged (``check_effects``),
        or ``None`` when one has a type the request did not advertise; raises when the
        effects are refused or cannot be encoded. Remembered for effect models."""
        from ahp_protocol.wire.effects import BaseEffect, check_effects, effects_to_wire

        admission, memo = call.admission, None
        assert admission.judge is not None
        if admission.key is not None and all(isinstance(e, BaseEffect) for e in effects):
            memo, effects = self._effects.key(admission.key, effects)
            remembered = None if memo is None else self._effects.get(memo)
            if remembered is not None:
                return remembered
        wire = effects_to_wire(check_effects(call.request.event_type, admission.judge, effects))
        # Belt and braces: never send a type the request did not advertise.
        if not all(isinstance(e, dict) and e.get("type") in admission.advertised for e in wire):
            return None
        encoded = _codec.json_bytes(wire)
        if memo is not None:
            self._effects.put(memo, encoded)
        return encoded

    def _bad_effects(self, call: InterceptCall, exc: BaseException | None) -> Reply:
        from ahp_protocol.wire.errors import WireError, WireErrors

        if isinstance(exc, WireError | WireErrors):
            # Wire errors carry a path and a fixed rule, never a value: safe for stderr.
            log("%s: refused the handler's effects: %s", self.name, str(exc))
        elif exc is not None:
            log("%s: refused the handler's effects (%s)", self.name, type(exc).__name__)
        else:
            log("%s: intercept handler returned neither effects nor None", self.name)
        reason = "effects refused: malformed, illegal at this event or not advertised"
        return error_reply(call.request.id, ErrorCode.INTERNAL_ERROR, reason)

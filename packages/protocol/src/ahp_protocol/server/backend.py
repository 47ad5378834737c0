"""The backend authoring API and its sans-I/O core: one framed message in, one line out.

A backend is a :class:`Backend` with a handler per event: ``@backend.intercept(selector)``
handlers receive an :class:`InterceptRequest` and return ``None``, one effect, or an
iterable of effects (effect models or plain dicts); ``@backend.observe(selector)``
handlers receive the raw event dict. Handlers may be sync or ``async def``.

Owns, for every transport (``Backend.handle`` / ``handle_sync``):

- decoding one message (bounded by ``max_frame_bytes``, default 4 MiB): invalid
  UTF-8/JSON, oversize or nested deeper than ``MAX_NESTING`` (200) -> -32700; batch,
  non-object or bad envelope -> -32600 (id recovered when valid, else ``null``);
- methods: ``hooks/intercept`` and ``hooks/observe``; ``hooks/configuration`` only
  when ``configuration`` was given (else -32601); ``hooks/capabilities`` is always
  -32601 (a backend is not a harness); ``hooks/observe`` sent with an id -> -32600;
- params: not an object, missing ``protocolVersion``, an invalid event
  (``wire.events``), capabilities that are malformed, list more than
  ``MAX_EFFECT_NAMES`` (64) effects or exceed the event's bounds
  (``wire.capabilities``) or an invalid ``state`` (``wire.state``) -> -32602;
  ``protocolVersion`` other than ``"draft"`` -> -32001 with ``data.supported``;
  request ``id`` different from ``params.event.id`` -> -32602;
- event types: unknown, removed or observe-only types at ``hooks/intercept`` ->
  -32002. A standard interceptable event that no intercept handler covers is also
  -32002, as the official SDK backend does: the backend does not support that event,
  and an error (an operational failure at the harness, governed by its failure
  policy) is more honest than an empty answer that claims "evaluated, no effect";
- handler failures: a raising intercept handler -> -32004 with a fixed message (the
  exception text is never sent; its *type* is logged to stderr); effects that are
  malformed, illegal at the event, or not in ``capabilities.effects`` -> -32603 with
  a fixed message and never the effect (checked by ``wire.effects.check_effects``
  and again here against the advertised types); a response above the frame limit
  -> -32603;
- notifications (an object without ``id`` whose ``method`` is a string) are never
  answered, whatever is wrong with them; an invalid or wrong-version notification is
  not processed; observe handler exceptions are swallowed (type logged).

Intercept handler selection: the most specific selector wins (exact name, then
``family.*``, then ``*``); one handler per selector. Every observe handler whose
selector matches runs, in registration order.

Never does I/O besides stderr diagnostics; never echoes input in error ``data``
(only ``data.supported`` on -32001 and fixed reasons). Heavy modules (the wire
models, logging, anyio) are imported on first use only, once: decoding and envelope
errors need none of them; an answer without effects from a sync handler validates no
effect and needs no event loop; a plain grant and a plain state (effect names only; a
permission and a null candidate) are judged without building the capabilities and
state models (``wire.effects.is_plain_grant_at``, ``wire.state.is_plain_state``).

Per-request cost is linear in the size of the frame (every check is; tests feed
growing lists to every field), and the grant's part is bounded by ``MAX_EFFECT_NAMES``.
The verdict on ``(event type, capabilities, state)`` is a pure
function of them and is remembered (bounded), so a repeated grant costs one exact
key (``_exact_key``); so is the verdict on a handler's effect models, by their wire
form under that grant (plain dicts are judged every time); frames are decoded by
``pydantic_core.from_json`` once pydantic is loaded (the stdlib judges whatever it
refuses, so what is accepted does not change); the event is validated by the wire
models on every request. Most of what is left is Python calls, so a request like one
already answered (same method, event type and a grant already judged valid) is judged
by a shorter path, ``_usual_intercept``, and a repeated accepted effect model is
answered from the remembered verdict (``_remembered_reply``); anything else takes the
general path, and tests check that the answers are the same either way.
"""

from __future__ import annotations

import functools
import inspect
import json
import sys
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, NamedTuple, NoReturn, TypeAlias, TypeVar

from ahp_protocol.wire import catalogue
from ahp_protocol.wire.jsonrpc import (
    CONFIGURATION,
    INTERCEPT,
    MAX_FRAME_BYTES,
    OBSERVE,
    PROTOCOL_VERSION,
    DecodeError,
    ErrorCode,
    classify,
    recoverable_id,
    unsupported_version,
)
from ahp_protocol.wire.jsonrpc import error as _rpc_error

if TYPE_CHECKING:
    from anyio import CapacityLimiter

    from ahp_protocol.wire.effects import Grants
    from ahp_protocol.wire.jsonrpc import RequestId

__all__ = [
    "Backend",
    "InterceptHandler",
    "InterceptRequest",
    "InterceptResult",
    "ObserveHandler",
]

InterceptResult: TypeAlias = Any
"""``None``, one effect (an effect model or a dict), or an iterable of effects."""
InterceptHandler: TypeAlias = Callable[["InterceptRequest"], Any]
"""``(request) -> InterceptResult`` or an ``async def`` returning one."""
ObserveHandler: TypeAlias = Callable[[dict[str, Any]], Any]
"""``(event) -> None`` or an ``async def``; its return value is ignored."""

_F = TypeVar("_F", bound=Callable[..., Any])

_EFFECT_NAMES: Final = frozenset(
    {"deny", "allow", "ask", "modify", "message", "return", "flow", "inject"}
)
_LOGGER_NAME: Final = "ahp_protocol.server"


@dataclass(frozen=True, slots=True)
class InterceptRequest:
    """One ``hooks/intercept`` request as a handler sees it.

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
        if isinstance(session, dict):
            sid = session.get("id")
            if isinstance(sid, str):
                return sid
        return None


class Reply(NamedTuple):
    """What the core decided: the encoded line (``None``: stay silent).

    ``parse_error`` is true when the bytes were not one decodable JSON value
    within the frame limit (-32700); HTTP maps that to status 400.
    """

    body: bytes | None
    parse_error: bool = False


_SILENT: Final = Reply(None)


class _InterceptCall(NamedTuple):
    handler: InterceptHandler
    is_async: bool
    request: InterceptRequest
    grant: _Grant  # judges the handler's effects; never handed to a handler
    limit: int


class _ObserveCall(NamedTuple):
    handlers: tuple[tuple[ObserveHandler, bool], ...]
    event: dict[str, Any]


class _MalformedResult(Exception):
    """A handler returned something that is not None, an effect or effects."""


def _log(message: str, *args: object) -> None:
    """One-line diagnostic to stderr (logging's last-resort handler when unconfigured)."""
    import logging

    logging.getLogger(_LOGGER_NAME).warning(message, *args)


def _reject_constant(name: str) -> Any:
    raise ValueError("not JSON")


def _is_async_callable(fn: Callable[..., Any]) -> bool:
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(
        getattr(fn, "__call__", None)  # noqa: B004 - async callable objects
    )


def _json_copy(value: Any) -> Any:
    """A deep copy of decoded JSON (dicts, lists and scalars), faster than deepcopy."""
    if isinstance(value, dict):
        return {k: _json_copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_json_copy(v) for v in value]
    return value


_encode_string: Final[Callable[[str], str]] = json.encoder.encode_basestring

# Built once: ``json.loads``/``json.dumps`` with options build a codec per call.
_DECODER: Final = json.JSONDecoder(parse_constant=_reject_constant)
_ENCODER: Final = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)
_ASCII_ENCODER: Final = json.JSONEncoder(separators=(",", ":"), allow_nan=False)


def _json_bytes(value: Any) -> bytes:
    """Compact JSON in UTF-8; lone surrogates are escaped instead of failing."""
    try:
        if type(value) is str:  # a request id: the C string encoder, as _ENCODER uses
            return _encode_string(value).encode("utf-8")
        return _ENCODER.encode(value).encode("utf-8")
    except UnicodeEncodeError:
        return _ASCII_ENCODER.encode(value).encode("ascii")


def _encode(message: Mapping[str, Any]) -> bytes:
    """One compact JSON line."""
    return _json_bytes(message) + b"\n"


_NOT_DECODED: Final[Any] = object()


def _stdlib_loads(raw: bytes) -> Any:
    raise ValueError("use the stdlib decoder")


_fast_loads: Callable[[bytes], Any] = _stdlib_loads
"""Decodes a frame, or raises ``ValueError`` and the stdlib decoder judges it.

Once pydantic is loaded anyway (the first event validated), this is
``pydantic_core.from_json``: about twice as fast as ``json.loads``, and where it
accepts a frame it returns the same value (it refuses lone surrogates, very deep
nesting and ``NaN``/``Infinity``, which the stdlib path then judges as before).
"""


_RESULT_HEAD: Final = b'{"jsonrpc":"2.0","id":'
_RESULT_MIDDLE: Final = (
    b',"result":{"protocolVersion":"' + PROTOCOL_VERSION.encode() + b'","effects":'
)
_RESULT_TAIL: Final = b"}}\n"


def _encode_result(id: RequestId, effects: bytes) -> bytes:
    """The intercept success line for ``id`` with the encoded ``effects`` array, without
    encoding the constant frame each time (the same bytes ``_encode`` would write)."""
    return b"".join((_RESULT_HEAD, _json_bytes(id), _RESULT_MIDDLE, effects, _RESULT_TAIL))


class _EventsApi(NamedTuple):
    parse_event: Callable[[object], object]
    event_validator: Callable[[str], Callable[[dict[str, Any]], object]]
    unsupported: type[Exception]
    invalid: tuple[type[Exception], ...]


class _Usual(NamedTuple):
    """What the usual-request path needs for one event type (see ``_usual_intercept``)."""

    handler: InterceptHandler
    is_async: bool
    validate: Callable[[dict[str, Any]], object]  # raises when the event is invalid


class _EffectsApi(NamedTuple):
    check_effects: Callable[[str, Any, object], list[Any]]
    effects_to_wire: Callable[[Iterable[Any]], list[dict[str, Any]]]
    model: type[Any]  # BaseEffect


def _exact_key(value: Any) -> str | bytes:
    """A text that differs whenever decoded JSON differs: ``repr`` (``1``, ``1.0`` and
    ``True`` differ; strings are quoted and escaped) until pydantic is loaded, then
    ``pydantic_core.to_json``, about twice as fast and as exact (JSON text; decoded
    frames hold no ``NaN``). Raises on what neither can write (a lone surrogate)."""
    return repr(value)


@functools.cache
def _events_api() -> _EventsApi:
    """The event models, imported on first use (start-up stays light) and kept."""
    global _fast_loads, _exact_key
    from pydantic_core import from_json, to_json

    from ahp_protocol.wire.errors import WireError, WireErrors
    from ahp_protocol.wire.events import UnsupportedEvent, event_validator, parse_event

    _fast_loads = functools.partial(from_json, allow_inf_nan=False)
    _exact_key = to_json
    return _EventsApi(parse_event, event_validator, UnsupportedEvent, (WireError, WireErrors))


@functools.cache
def _effects_api() -> _EffectsApi:
    """The effect checks, imported on first use and kept."""
    from ahp_protocol.wire.effects import BaseEffect, check_effects, effects_to_wire

    return _EffectsApi(check_effects, effects_to_wire, BaseEffect)


def _error_reply(
    id: RequestId | None, code: ErrorCode, reason: str | None = None, *, parse: bool = False
) -> Reply:
    data = {"reason": reason} if reason is not None else None
    return Reply(_encode(_rpc_error(id, code, data=data)), parse_error=parse)


def _as_effect_list(result: Any) -> list[Any]:
    """Normalize a handler's return value. Iterating a generator runs handler code."""
    if result is None:
        return []
    if hasattr(type(result), "model_dump") or isinstance(result, (dict, Mapping)):
        return [result]
    if isinstance(result, str | bytes | bytearray | memoryview) or not isinstance(result, Iterable):
        raise _MalformedResult
    return list(result)


def _is_awaitable(result: Any) -> bool:
    """``inspect.isawaitable``, after the cheap tests that rule out what handlers
    usually return (effect models, dicts, lists)."""
    if hasattr(type(result), "model_dump") or isinstance(result, (dict, list, tuple)):
        return False
    return inspect.isawaitable(result)


_UNSET: Final[Any] = object()


def _flat_effect_key(effect: Any) -> tuple[Any, ...] | None:
    """What an effect model's wire form is a function of (its class, its field values,
    which fields are set), when every value is a string or ``None``; else ``None``.
    Comparing such keys is exact: no two different wire forms share one."""
    fields_set = effect.__pydantic_fields_set__
    key: list[Any] = [type(effect)]
    for name, value in effect.__dict__.items():
        if value is not None and type(value) is not str:
            return None
        key.append(value if name in fields_set else _UNSET)
    return tuple(key)


def _validate_capabilities(capabilities: Any) -> str | None:
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
    for name in effects:
        if name not in _EFFECT_NAMES and not _is_reverse_dns(name):
            return "params.capabilities.effects holds an unknown effect type"
    return None


MAX_EFFECT_NAMES: Final = 64
"""The most effect names a request's ``capabilities.effects`` may list (the draft has
eight standard effects; the rest are extensions); more is -32602, judged before
anything else about the grant, so no grant costs more than a bounded amount."""

MAX_NESTING: Final = 200
"""No value in a frame may sit inside more than this many arrays or objects; a deeper
frame is -32700 (``"nested too deeply"``). It is the limit of the fast decoder
(``pydantic_core.from_json``, a test checks), applied by ``_too_deep`` wherever the
stdlib decodes instead, so the same frames are accepted on every path, and nothing
after decoding (the wire models, copies of the grant, handlers) recurses deeper."""


def _too_deep(value: Any) -> bool:
    """Whether some value in decoded JSON sits inside more than ``MAX_NESTING`` arrays
    or objects. Iterative: linear in the size of ``value``, whatever its depth."""
    if type(value) is not dict and type(value) is not list:
        return False
    stack: list[tuple[Any, int]] = [(value, 0)]
    pop, push = stack.pop, stack.append
    while stack:
        node, depth = pop()  # a container inside ``depth`` others
        children = node.values() if type(node) is dict else node
        if depth >= MAX_NESTING and children:
            return True
        for child in children:
            if type(child) is dict or type(child) is list:
                push((child, depth + 1))
    return False


_NO_STATE: Final[Any] = object()
"""``params.state`` absent (its key is then a two-item tuple: no state can collide)."""
_GRANT_VERDICTS: Final = 512
_GRANT_KEY_MAX: Final = 16 * 1024
"""Larger grants are judged every time (the cache must stay small)."""
_ACCEPTED_EFFECTS: Final = 256
_EFFECTS_KEY_MAX: Final = 16 * 1024
"""Remembered effect verdicts (at most this many, each key at most this long)."""


class _Grant(NamedTuple):
    """Everything about one request's grant that is a pure function of
    ``(event type, capabilities, state)``: remembered, so a repeat costs one key.

    ``shape`` is the reason the capabilities are unusable (checked before the
    event); ``grant`` the reason they or the state are invalid at the event
    (checked after it). When both are ``None``, ``advertised`` and ``judge`` (what
    ``check_effects`` reads of the capabilities, built from a private copy and
    never handed to a handler) are set. ``key`` is the exact key it is remembered
    by (``None`` when it is not remembered).
    """

    shape: str | None
    grant: str | None
    advertised: frozenset[str] = frozenset()
    judge: Grants | None = None
    key: str | bytes | None = None


def _judge_grant(
    event_type: str, capabilities: Any, state: Any, key: str | bytes | None = None
) -> _Grant:
    shape = _validate_capabilities(capabilities)
    if shape is not None:
        return _Grant(shape, None)
    from ahp_protocol.wire.effects import Grants, is_plain_grant_at

    # The usual grant and state are judged without building their models.
    if not is_plain_grant_at(event_type, capabilities):
        from ahp_protocol.wire.capabilities import parse_capabilities

        try:
            parse_capabilities(capabilities, event_type=event_type)
        except Exception:
            return _Grant(None, "params.capabilities is not a valid grant at this event")
    if state is not _NO_STATE:
        from ahp_protocol.wire.state import is_plain_state, parse_state

        try:
            if not is_plain_state(state):
                parse_state(state, event_type=event_type)
        except Exception:
            return _Grant(None, "params.state is not a valid chain state")
    judge = Grants(_json_copy(capabilities))
    return _Grant(None, None, frozenset(capabilities["effects"]), judge, key)


def _is_reverse_dns(name: str) -> bool:
    parts = name.split(".")
    if len(parts) < 2:
        return False
    for part in parts:
        if not part or not part[0].isascii() or not part[0].isalpha():
            return False
        if not all(c.isascii() and (c.isalnum() or c in "_-") for c in part):
            return False
    return True


def _check_configuration(configuration: Any) -> list[dict[str, Any]]:
    """A JSON-clean copy of the default subscriptions; ValueError names what is wrong."""
    if not isinstance(configuration, list | tuple) or not configuration:
        raise ValueError("configuration must be a non-empty list of subscriptions")
    try:
        clean = json.loads(json.dumps(list(configuration), allow_nan=False))
    except (TypeError, ValueError):
        raise ValueError("configuration must be plain JSON data") from None
    for i, sub in enumerate(clean):
        where = f"configuration[{i}]"
        if not isinstance(sub, dict):
            raise ValueError(f"{where} must be an object")
        mode = sub.get("mode")
        if mode not in ("intercept", "observe"):
            raise ValueError(f'{where}.mode must be "intercept" or "observe"')
        events = sub.get("events")
        if not isinstance(events, list) or not events:
            raise ValueError(f"{where}.events must be a non-empty list")
        for selector in events:
            if not catalogue.is_valid_selector(selector) or not catalogue.expand(selector, mode):
                raise ValueError(f"{where}.events holds a selector that covers no {mode} event")
        content = sub.get("content")
        if not isinstance(content, dict) or "default" not in content:
            raise ValueError(f"{where}.content with a default is required")
        if mode == "intercept":
            if not isinstance(sub.get("timeoutMs"), int) or sub["timeoutMs"] < 1:
                raise ValueError(f"{where}.timeoutMs must be a positive integer")
            if sub.get("failurePolicy") not in ("fail-open", "fail-closed"):
                raise ValueError(f'{where}.failurePolicy must be "fail-open" or "fail-closed"')
    return list(clean)


def _specificity(selector: str) -> int:
    if selector == "*":
        return 0
    return 1 if selector.endswith(".*") else 2


async def _await(awaitable: Awaitable[Any]) -> Any:
    return await awaitable


def _run_awaitable(awaitable: Awaitable[Any]) -> Any:
    """Run an awaitable to completion from sync code (not from inside an event loop)."""
    import anyio

    return anyio.run(_await, awaitable)


class Backend:
    """An AHP backend: handlers per event, plus optional default subscriptions.

    ``name`` is the backend's reverse-DNS id (``com.example.guard``), used in
    diagnostics. ``configuration`` is the list of subscriptions this backend
    answers to ``hooks/configuration`` with; ``None`` means that method is not
    offered (-32601). ``max_frame_bytes`` bounds every message in and out.
    """

    def __init__(
        self,
        name: str,
        configuration: Iterable[Mapping[str, Any]] | None = None,
        *,
        max_frame_bytes: int = MAX_FRAME_BYTES,
    ) -> None:
        if not isinstance(name, str) or not _is_reverse_dns(name):
            raise ValueError("backend name must be a reverse-DNS id such as com.example.guard")
        if max_frame_bytes < 1:
            raise ValueError("max_frame_bytes must be positive")
        self.name = name
        self.max_frame_bytes = max_frame_bytes
        self.configuration: list[dict[str, Any]] | None = (
            None if configuration is None else _check_configuration(list(configuration))
        )
        self._intercepts: list[tuple[str, InterceptHandler, bool]] = []
        self._observers: list[tuple[str, ObserveHandler, bool]] = []
        self._intercept_cache: dict[str, tuple[InterceptHandler, bool] | None] = {}
        self._usual: dict[str, _Usual] = {}
        self._observe_cache: dict[str, tuple[tuple[ObserveHandler, bool], ...]] = {}
        self._grant_verdicts: dict[str | bytes, _Grant] = {}
        self._accepted_effects: dict[tuple[str | bytes, Any], bytes] = {}
        self._flat_types: set[type[Any]] = set()  # effect classes remembered by flat keys

    # -- registration -----------------------------------------------------------------

    def intercept(self, selector: str) -> Callable[[_F], _F]:
        """Register the decorated function for ``hooks/intercept`` on ``selector``.

        ``selector`` is an interceptable event name, ``family.*`` or ``*``; it must
        cover at least one interceptable event, and each selector takes one handler.
        """
        if not catalogue.is_valid_selector(selector):
            raise ValueError("selector must be a standard event name, family.* or *")
        if not catalogue.expand(selector, "intercept"):
            raise ValueError("selector covers no interceptable event")
        if any(existing == selector for existing, _, _ in self._intercepts):
            raise ValueError("an intercept handler is already registered for this selector")

        def register(fn: _F) -> _F:
            self._intercepts.append((selector, fn, _is_async_callable(fn)))
            self._intercept_cache.clear()
            self._usual.clear()
            return fn

        return register

    def observe(self, selector: str) -> Callable[[_F], _F]:
        """Register the decorated function for ``hooks/observe`` on ``selector``."""
        if not catalogue.is_valid_selector(selector):
            raise ValueError("selector must be a standard event name, family.* or *")

        def register(fn: _F) -> _F:
            self._observers.append((selector, fn, _is_async_callable(fn)))
            self._observe_cache.clear()
            return fn

        return register

    @property
    def needs_event_loop(self) -> bool:
        """Whether any registered handler is ``async def``."""
        return any(a for _, _, a in self._intercepts) or any(a for _, _, a in self._observers)

    def _intercept_handler(self, event_type: str) -> tuple[InterceptHandler, bool] | None:
        try:
            return self._intercept_cache[event_type]
        except KeyError:
            pass
        best: tuple[InterceptHandler, bool] | None = None
        rank = -1
        for selector, fn, is_async in self._intercepts:
            if catalogue.selector_matches(selector, event_type) and _specificity(selector) > rank:
                best, rank = (fn, is_async), _specificity(selector)
        self._intercept_cache[event_type] = best
        return best

    def _observe_handlers(self, event_type: str) -> tuple[tuple[ObserveHandler, bool], ...]:
        try:
            return self._observe_cache[event_type]
        except KeyError:
            pass
        found = tuple(
            (fn, is_async)
            for selector, fn, is_async in self._observers
            if catalogue.selector_matches(selector, event_type)
        )
        self._observe_cache[event_type] = found
        return found

    # -- the sans-I/O core -------------------------------------------------------------

    async def handle(self, message: bytes) -> bytes | None:
        """Answer one framed message: the encoded response line, or ``None``."""
        return (await self._respond(message, self.max_frame_bytes)).body

    def handle_sync(self, message: bytes) -> bytes | None:
        """The same as :meth:`handle` without an event loop (for sync handlers).

        An ``async def`` handler is run with ``anyio.run``; do not call this from
        inside a running event loop then.
        """
        return self._respond_sync(message, self.max_frame_bytes).body

    def _respond_sync(self, message: bytes, limit: int) -> Reply:
        step = self._prepare(message, limit)
        if isinstance(step, Reply):
            return step
        if isinstance(step, _ObserveCall):
            for fn, _ in step.handlers:
                try:
                    result = fn(step.event)
                    if inspect.isawaitable(result):
                        _run_awaitable(result)
                except Exception as exc:
                    self._handler_failed("observe", exc)
            return _SILENT
        try:
            result = step.handler(step.request)
        except Exception as exc:
            return self._handler_raised(step, exc)
        if result is None:
            line = _encode_result(step.request.id, b"[]")
            return Reply(line) if len(line) - 1 <= step.limit else self._finish(step, [])
        remembered = self._remembered_reply(step, result)
        if remembered is not None:
            return remembered
        try:
            if _is_awaitable(result):
                result = _run_awaitable(result)
            effects = _as_effect_list(result)
        except _MalformedResult:
            return self._bad_effects(step, None)
        except Exception as exc:
            return self._handler_raised(step, exc)
        return self._finish(step, effects)

    async def _respond(
        self,
        message: bytes,
        limit: int,
        *,
        offload_sync: bool = False,
        judge_in: CapacityLimiter | None = None,
    ) -> Reply:
        """Async core. ``offload_sync`` runs sync handlers in a worker thread (HTTP);
        with ``judge_in``, decoding and judging the message (``_prepare``) runs in a
        worker thread of that limiter too (HTTP, large frames: off the event loop)."""
        if judge_in is None:
            step = self._prepare(message, limit)
        else:
            import anyio.to_thread

            step = await anyio.to_thread.run_sync(self._prepare, message, limit, limiter=judge_in)
        if isinstance(step, Reply):
            return step
        if isinstance(step, _ObserveCall):
            for fn, is_async in step.handlers:
                try:
                    await self._call(fn, step.event, is_async, offload_sync)
                except Exception as exc:
                    self._handler_failed("observe", exc)
            return _SILENT
        try:
            result = await self._call(step.handler, step.request, step.is_async, offload_sync)
        except Exception as exc:
            return self._handler_raised(step, exc)
        remembered = None if result is None else self._remembered_reply(step, result)
        if remembered is not None:
            return remembered
        try:
            effects = _as_effect_list(result)
        except _MalformedResult:
            return self._bad_effects(step, None)
        except Exception as exc:
            return self._handler_raised(step, exc)
        return self._finish(step, effects)

    @staticmethod
    async def _call(fn: Callable[[Any], Any], arg: Any, is_async: bool, offload: bool) -> Any:
        if offload and not is_async:
            import anyio.to_thread

            result = await anyio.to_thread.run_sync(fn, arg)
        else:
            result = fn(arg)
        if inspect.isawaitable(result):
            result = await result
        return result

    def _handler_failed(self, kind: str, exc: BaseException) -> None:
        _log("%s: %s handler raised %s", self.name, kind, type(exc).__name__)

    def _handler_raised(self, step: _InterceptCall, exc: BaseException) -> Reply:
        self._handler_failed("intercept", exc)
        return _error_reply(step.request.id, ErrorCode.BACKEND_INTERNAL_ERROR)

    def _bad_effects(self, step: _InterceptCall, exc: BaseException | None) -> Reply:
        from ahp_protocol.wire.errors import WireError, WireErrors

        if isinstance(exc, WireError | WireErrors):
            # Wire errors carry a path and a fixed rule, never a value: safe for stderr.
            _log("%s: refused the handler's effects: %s", self.name, str(exc))
        elif exc is not None:
            _log("%s: refused the handler's effects (%s)", self.name, type(exc).__name__)
        else:
            _log("%s: intercept handler returned neither effects nor None", self.name)
        return _error_reply(
            step.request.id,
            ErrorCode.INTERNAL_ERROR,
            "effects refused: malformed, illegal at this event or not advertised",
        )

    def _finish(self, step: _InterceptCall, effects: list[Any]) -> Reply:
        request = step.request
        encoded = b"[]"
        if effects:
            try:
                accepted = self._accepted(step, effects)
            except Exception as exc:
                return self._bad_effects(step, exc)
            if accepted is None:
                return self._bad_effects(step, None)
            encoded = accepted
        try:
            line = _encode_result(request.id, encoded)
        except (TypeError, ValueError) as exc:
            return self._bad_effects(step, exc)
        if len(line) - 1 > step.limit:
            _log("%s: response exceeds the frame size limit", self.name)
            return _error_reply(request.id, ErrorCode.INTERNAL_ERROR, "response too large")
        return Reply(line)

    def _remembered_reply(self, step: _InterceptCall, result: Any) -> Reply | None:
        """The reply for a handler that returned one effect model whose wire form was
        already accepted under this grant (the usual repeated deny), straight from the
        remembered verdicts; ``None`` for anything else (``_finish`` judges it)."""
        key = step.grant.key
        if key is None or type(result) not in self._flat_types:
            return None
        encoded = self._accepted_effects.get((key, (_flat_effect_key(result),)))
        if encoded is None:
            return None
        line = _encode_result(step.request.id, encoded)
        if len(line) - 1 > step.limit:
            return None
        return Reply(line)

    def _accepted(self, step: _InterceptCall, effects: list[Any]) -> bytes | None:
        """The encoded wire form of a handler's effects once judged (``check_effects``),
        or ``None`` when one has a type the request did not advertise; raises when the
        effects are refused or cannot be encoded.

        Effect models are judged by their wire form, so the verdict on the same wire
        form under the same grant is remembered (bounded): a handler that denies with
        the same effect again and again pays for one key. The key is the models' fields
        when they are all strings (deny, message, flow, ...), else their wire form.
        Plain dicts are judged every time.
        """
        api = _effects_api()
        grant = step.grant
        memo: tuple[str | bytes, Any] | None = None
        if grant.key is not None and all(isinstance(e, api.model) for e in effects):
            flat = [_flat_effect_key(e) for e in effects]
            if None in flat:
                effects = [e.to_wire() for e in effects]  # JSON values: an exact key
                try:
                    text = _exact_key(effects)
                except Exception:  # a lone surrogate: judged, not remembered
                    text = None
                if text is not None and len(text) <= _EFFECTS_KEY_MAX:
                    memo = (grant.key, text)
            else:
                memo = (grant.key, tuple(flat))
                self._flat_types.update(type(e) for e in effects)
            if memo is not None:
                remembered = self._accepted_effects.get(memo)
                if remembered is not None:
                    return remembered
        checked = api.check_effects(step.request.event_type, grant.judge, effects)
        wire = list(api.effects_to_wire(checked))
        for effect in wire:
            # Belt and braces: never send a type the request did not advertise.
            if not isinstance(effect, dict) or effect.get("type") not in grant.advertised:
                return None
        encoded = _json_bytes(wire)
        if memo is not None:
            if len(self._accepted_effects) >= _ACCEPTED_EFFECTS:
                self._accepted_effects.clear()
            self._accepted_effects[memo] = encoded
        return encoded

    def _prepare(self, message: bytes, limit: int) -> Reply | _InterceptCall | _ObserveCall:
        decoded: Any = _NOT_DECODED
        if len(message) <= limit:  # the usual case, decoded here once
            try:
                decoded = _fast_loads(message)
            except Exception:  # not decodable by the fast path: ``_decode`` judges it
                decoded = _NOT_DECODED
        if type(decoded) is dict:
            if self._usual:
                usual = self._usual_intercept(decoded, limit)
                if usual is not None:
                    return usual
        else:
            decoded = self._decode(message, limit)
            if isinstance(decoded, Reply):
                return decoded
        notification = "id" not in decoded and isinstance(decoded.get("method"), str)
        try:
            if notification:
                return self._notification(decoded)
            return self._request(decoded, limit)
        except Exception as exc:  # a bug of ours must not take the server down
            _log("%s: internal error (%s)", self.name, type(exc).__name__)
            if notification:
                return _SILENT
            return _error_reply(recoverable_id(decoded), ErrorCode.INTERNAL_ERROR)

    @staticmethod
    def _decode(message: bytes, limit: int) -> Reply | dict[str, Any]:
        raw = bytes(message)
        # The frame is the message without one final newline; JSON ignores that
        # newline, so it is not sliced off (no copy).
        if len(raw) - raw.endswith(b"\n") > limit:
            return _error_reply(None, ErrorCode.PARSE_ERROR, "frame too large", parse=True)
        try:
            msg = _fast_loads(raw)
        except Exception:  # not decodable by the fast path: judged by the stdlib
            msg = _NOT_DECODED
        try:
            if msg is _NOT_DECODED:
                msg = _DECODER.decode(raw.decode("utf-8"))
                if _too_deep(msg):  # the fast decoder refuses these itself
                    return _error_reply(
                        None, ErrorCode.PARSE_ERROR, "nested too deeply", parse=True
                    )
        except UnicodeDecodeError:
            return _error_reply(None, ErrorCode.PARSE_ERROR, "not UTF-8", parse=True)
        except RecursionError:
            return _error_reply(None, ErrorCode.PARSE_ERROR, "nested too deeply", parse=True)
        except ValueError:
            return _error_reply(None, ErrorCode.PARSE_ERROR, "not JSON", parse=True)
        if isinstance(msg, list):
            return _error_reply(None, ErrorCode.INVALID_REQUEST, "batches are not allowed")
        if not isinstance(msg, dict):
            return _error_reply(None, ErrorCode.INVALID_REQUEST, "a message must be an object")
        return msg

    def _request(self, msg: dict[str, Any], limit: int) -> Reply | _InterceptCall:
        try:
            kind = classify(msg)
        except DecodeError as exc:
            return _error_reply(recoverable_id(msg), ErrorCode.INVALID_REQUEST, exc.reason)
        if kind != "request":
            return _SILENT  # a response sent to a backend: nothing to answer
        rid: RequestId = msg["id"]  # classify checked it
        method = msg["method"]
        params = msg.get("params")
        if method == INTERCEPT:
            return self._intercept(rid, params, limit)
        if method == CONFIGURATION and self.configuration is not None:
            return self._configuration(rid, params)
        if method == OBSERVE:
            return _error_reply(rid, ErrorCode.INVALID_REQUEST, "hooks/observe is a notification")
        return _error_reply(rid, ErrorCode.METHOD_NOT_FOUND)

    def _intercept(self, rid: RequestId, params: Any, limit: int) -> Reply | _InterceptCall:
        bad = ErrorCode.INVALID_PARAMS
        if not isinstance(params, dict):
            return _error_reply(rid, bad, "params must be an object")
        version = params.get("protocolVersion")
        if not isinstance(version, str):
            return _error_reply(rid, bad, "params.protocolVersion is required")
        if version != PROTOCOL_VERSION:
            return Reply(_encode(unsupported_version(rid)))
        event = params.get("event")
        if not isinstance(event, dict):
            return _error_reply(rid, bad, "params.event must be an object")
        event_type = event.get("type")
        if not isinstance(event_type, str):
            return _error_reply(rid, bad, "params.event.type must be a string")
        if event_type not in catalogue.INTERCEPTABLE_SET:
            return _error_reply(rid, ErrorCode.UNSUPPORTED_EVENT, "event type not interceptable")
        event_id = event.get("id")
        if not (isinstance(event_id, str) and event_id == rid):
            return _error_reply(rid, bad, "the request id must equal params.event.id")
        capabilities = params.get("capabilities")
        state = params.get("state", _NO_STATE)
        grant = self._grant(event_type, capabilities, state)
        if grant.shape is not None:
            return _error_reply(rid, bad, grant.shape)
        if state is not _NO_STATE and not isinstance(state, dict):
            return _error_reply(rid, bad, "params.state must be an object")
        found = self._intercept_handler(event_type)
        if found is None:
            return _error_reply(rid, ErrorCode.UNSUPPORTED_EVENT, "no handler for this event")
        problem = self._event_problem(event)
        if problem is not None:
            return _error_reply(rid, problem[0], problem[1])
        if grant.grant is not None:
            return _error_reply(rid, bad, grant.grant)
        assert isinstance(capabilities, dict) and grant.judge is not None
        if event_type not in self._usual:
            validate = _events_api().event_validator(event_type)
            self._usual[event_type] = _Usual(found[0], found[1], validate)
        request = InterceptRequest(
            rid, event, event_type, capabilities, None if state is _NO_STATE else state,
            grant.advertised, params,
        )  # fmt: skip
        return _InterceptCall(found[0], found[1], request, grant, limit)

    def _usual_intercept(self, msg: dict[str, Any], limit: int) -> _InterceptCall | None:
        """The usual request, judged in fewer steps: ``hooks/intercept`` with a string
        id, the current version, an event type this backend has already answered and
        a grant already judged valid; ``None`` for anything else, which the general
        path (``_request``) then judges from the start.

        It returns a call only where ``_request`` returns the same call (a test
        compares the two on valid and broken requests): every check of the general
        path holds here, either tested again or implied by a remembered verdict (the
        grant's, which covers the capabilities' shape and the state). Per-request
        cost is most of a backend's overhead, and most of that is Python calls.
        """
        if msg.get("jsonrpc") != "2.0" or msg.get("method") != INTERCEPT:
            return None
        rid = msg.get("id")
        params = msg.get("params")
        if type(rid) is not str or not rid or type(params) is not dict:
            return None
        if "result" in msg or "error" in msg or params.get("protocolVersion") != PROTOCOL_VERSION:
            return None
        event = params.get("event")
        if type(event) is not dict or event.get("id") != rid:
            return None
        event_type = event.get("type")
        if type(event_type) is not str:
            return None
        usual = self._usual.get(event_type)
        if usual is None:
            return None
        capabilities = params.get("capabilities")
        state = params.get("state", _NO_STATE)
        if type(capabilities) is not dict or (state is not _NO_STATE and type(state) is not dict):
            return None
        try:
            key = _exact_key(
                (event_type, capabilities)
                if state is _NO_STATE
                else (event_type, capabilities, state)
            )
        except Exception:
            return None
        grant = self._grant_verdicts.get(key)
        if grant is None or grant.judge is None:
            return None
        try:
            usual.validate(event)
        except Exception:
            return None
        request = InterceptRequest(
            rid, event, event_type, capabilities, None if state is _NO_STATE else state,
            grant.advertised, params,
        )  # fmt: skip
        return _InterceptCall(usual.handler, usual.is_async, request, grant, limit)

    def _event_problem(self, event: dict[str, Any]) -> tuple[ErrorCode, str] | None:
        """Validate the event with the wire models; a code and fixed reason if invalid."""
        api = _events_api()
        try:
            api.parse_event(event)
        except api.unsupported:
            return ErrorCode.UNSUPPORTED_EVENT, "event type not supported"
        except api.invalid:
            return ErrorCode.INVALID_PARAMS, "params.event is not a valid event"
        except Exception as exc:
            _log("%s: event validation failed (%s)", self.name, type(exc).__name__)
            return ErrorCode.INVALID_PARAMS, "params.event is not a valid event"
        return None

    def _grant(self, event_type: str, capabilities: Any, state: Any) -> _Grant:
        """Judge capabilities (shape, coupling, per-event bounds) and state.

        The verdict is a pure function of its inputs, and a harness sends the same
        grant and the same initial state again and again: verdicts are remembered
        (bounded) by an exact text of the inputs (:func:`_exact_key`), so a repeat
        costs one serialization.
        """
        inputs = (
            (event_type, capabilities) if state is _NO_STATE else (event_type, capabilities, state)
        )
        key: str | bytes | None
        try:
            key = _exact_key(inputs)
        except Exception:  # a lone surrogate, nesting too deep: judged every time
            key = None
        if key is None or len(key) > _GRANT_KEY_MAX:
            return _judge_grant(event_type, capabilities, state)
        verdicts = self._grant_verdicts
        try:
            return verdicts[key]
        except KeyError:
            pass
        grant = _judge_grant(event_type, capabilities, state, key)
        if len(verdicts) >= _GRANT_VERDICTS:
            verdicts.clear()
        verdicts[key] = grant
        return grant

    def _notification(self, msg: dict[str, Any]) -> Reply | _ObserveCall:
        """Never answered. Only a valid current-version hooks/observe is processed."""
        if msg.get("jsonrpc") != "2.0" or msg["method"] != OBSERVE:
            return _SILENT
        params = msg.get("params")
        if not isinstance(params, dict) or params.get("protocolVersion") != PROTOCOL_VERSION:
            return _SILENT
        event = params.get("event")
        if not isinstance(event, dict) or not catalogue.is_event_type(event.get("type")):
            return _SILENT
        handlers = self._observe_handlers(event["type"])
        if not handlers or self._event_problem(event) is not None:
            return _SILENT
        return _ObserveCall(handlers, event)

    def _configuration(self, rid: RequestId, params: Any) -> Reply:
        bad = ErrorCode.INVALID_PARAMS
        if not isinstance(params, dict):
            return _error_reply(rid, bad, "params must be an object")
        version = params.get("protocolVersion")
        if not isinstance(version, str):
            return _error_reply(rid, bad, "params.protocolVersion is required")
        if version != PROTOCOL_VERSION:
            return Reply(_encode(unsupported_version(rid)))
        if len(params) != 1:
            return _error_reply(rid, bad, "params must hold protocolVersion only")
        result = {
            "protocolVersion": PROTOCOL_VERSION,
            "configuration": {"subscriptions": self.configuration},
        }
        return Reply(_encode({"jsonrpc": "2.0", "id": rid, "result": result}))

    # -- running -------------------------------------------------------------------------

    def run(self, argv: list[str] | None = None) -> NoReturn:
        """Serve from the command line and exit (``SystemExit``).

        No arguments: stdio ``persistent`` (until EOF). ``--once``: stdio
        ``per_event`` (one message, then exit). ``--http HOST:PORT``: HTTP via
        uvicorn (``ahp_protocol.server.asgi``), on a loopback address unless
        ``--allow-remote``; with ``--bearer-token-env VAR``, only callers sending
        ``Authorization: Bearer`` with the token in environment variable ``VAR`` are
        answered (401 otherwise). ``--max-frame-bytes N`` changes the frame limit.
        """
        args = sys.argv[1:] if argv is None else list(argv)
        # Fast paths keep per-event start-up free of argparse.
        if not args:
            from ahp_protocol.server.stdio import serve_persistent

            serve_persistent(self)
            raise SystemExit(0)
        if args == ["--once"]:
            self._run_once(None)
        raise SystemExit(self._run_parsed(args))

    def _run_parsed(self, args: list[str]) -> int:
        import argparse

        parser = argparse.ArgumentParser(
            description=(
                f"AHP backend {self.name}. Speaks the Agent Hooks Protocol (draft) on "
                "stdin/stdout by default (persistent: until EOF; stdout carries protocol "
                "only, diagnostics go to stderr)."
            ),
        )
        mode = parser.add_mutually_exclusive_group()
        mode.add_argument(
            "--once",
            action="store_true",
            help="per_event stdio: answer exactly one message, then exit",
        )
        mode.add_argument(
            "--http",
            metavar="HOST:PORT",
            help="serve HTTP POST on HOST:PORT (port 0 picks a free port; the address "
            "is printed on stderr)",
        )
        parser.add_argument(
            "--allow-remote",
            action="store_true",
            help="allow --http on a non-loopback address (put TLS in front of it: AHP "
            "requires https remotely)",
        )
        parser.add_argument(
            "--bearer-token-env",
            metavar="VAR",
            help="with --http: answer only requests with 'Authorization: Bearer <token>', "
            "the token being the value of environment variable VAR (401 otherwise)",
        )
        parser.add_argument(
            "--max-frame-bytes",
            type=int,
            default=self.max_frame_bytes,
            metavar="N",
            help=f"largest message accepted or sent, in bytes (default {self.max_frame_bytes})",
        )
        ns = parser.parse_args(args)
        limit: int = ns.max_frame_bytes
        if limit < 1:
            parser.error("--max-frame-bytes must be positive")
        if ns.http is None and (ns.allow_remote or ns.bearer_token_env is not None):
            parser.error("--allow-remote and --bearer-token-env apply to --http only")
        if ns.http is not None:
            from ahp_protocol.server.asgi import bearer_token_from_env, http_address, serve_http

            try:
                host, port = http_address(str(ns.http), allow_remote=ns.allow_remote)
                token = (
                    None
                    if ns.bearer_token_env is None
                    else bearer_token_from_env(ns.bearer_token_env)
                )
            except ValueError as exc:
                parser.error(str(exc))
            serve_http(self, host, port, max_frame_bytes=limit, bearer_token=token)
            return 0
        if ns.once:
            self._run_once(limit)
        from ahp_protocol.server.stdio import serve_persistent

        serve_persistent(self, max_frame_bytes=limit)
        return 0

    def _run_once(self, limit: int | None) -> NoReturn:
        """``per_event``: answer one message, then exit. The cyclic garbage collector
        stays off until exit (``serve_once`` pauses it, and a collection put off until
        it is back would only delay the exit)."""
        import gc

        from ahp_protocol.server.stdio import serve_once

        gc.disable()
        raise SystemExit(0 if serve_once(self, max_frame_bytes=limit) else 1)

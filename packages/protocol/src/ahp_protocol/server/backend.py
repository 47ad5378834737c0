"""The backend authoring API: a :class:`Backend` with a handler per event.

``@backend.intercept(selector)`` handlers receive an :class:`InterceptRequest` and
return ``None``, one effect, or an iterable of effects (effect models or plain dicts);
``@backend.observe(selector)`` handlers receive the raw event dict. Handlers may be
sync or ``async def``. The most specific intercept selector wins (exact name, then
``family.*``, then ``*``; one handler per selector); every matching observe handler
runs, in registration order.

Every transport answers a message with :meth:`Backend.respond` (or
:meth:`Backend.respond_sync`); :meth:`Backend.handle` is the same for callers that
only need the line. The rules it applies, for every transport:

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
  a fixed message and never the effect (``wire.effects.check_effects``, and the
  advertised types again); a response above the frame limit -> -32603;
- notifications (an object without ``id`` whose ``method`` is a string) are never
  answered, whatever is wrong with them; an invalid or wrong-version notification is
  not processed; an observe handler's exception is not raised further (its type is
  logged, every other handler still runs) and marks the reply ``unprocessed``: over
  HTTP the answer is then ``500``, never ``204``, so ``204`` means "processed".

Never echoes input in error ``data`` (only ``data.supported`` on -32001 and fixed
reasons). Per-request cost is linear in the size of the frame, and the grant's part
is bounded by ``MAX_EFFECT_NAMES``. Importing it imports no pydantic, anyio or
transport; :meth:`Backend.run` (the command line) is :mod:`ahp_protocol.server.cli`.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

from ahp_protocol.server._codec import MAX_NESTING, SILENT, UNPROCESSED, Reply, parse_error_reply
from ahp_protocol.server._core import (
    MAX_EFFECT_NAMES,
    Core,
    InterceptCall,
    InterceptHandler,
    InterceptRequest,
    InterceptResult,
    ObserveCall,
    ObserveHandler,
    is_awaitable,
)
from ahp_protocol.tracing import handler_span
from ahp_protocol.wire import catalogue
from ahp_protocol.wire.jsonrpc import MAX_FRAME_BYTES
from ahp_protocol.wire.names import is_reverse_dns

if TYPE_CHECKING:
    from anyio import CapacityLimiter

__all__ = [
    "MAX_EFFECT_NAMES",
    "MAX_NESTING",
    "Backend",
    "InterceptHandler",
    "InterceptRequest",
    "InterceptResult",
    "ObserveHandler",
    "Reply",
    "parse_error_reply",
]

_F = TypeVar("_F", bound=Callable[..., Any])


def _is_async_callable(fn: Callable[..., Any]) -> bool:
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(
        getattr(fn, "__call__", None)  # noqa: B004 - async callable objects
    )


def _check_configuration(configuration: Any) -> list[dict[str, Any]]:
    """A JSON-clean copy of the default subscriptions, judged by the registration's
    rules (a ``hooks/configuration`` result); ValueError names the first problem."""
    import json

    from ahp_protocol.wire.errors import json_path
    from ahp_protocol.wire.registration_rules import Checks

    if not isinstance(configuration, list | tuple):
        raise ValueError("configuration must be a list of subscriptions")
    try:
        clean = json.loads(json.dumps(list(configuration), allow_nan=False))
    except (TypeError, ValueError):
        raise ValueError("configuration must be plain JSON data") from None
    checks = Checks()
    checks.configuration({"subscriptions": clean})
    if checks.errors:
        path, reason = checks.errors[0]
        raise ValueError(f"{json_path(path[1:], 'configuration')}: {reason}")
    return list(clean)


def _check_selector(selector: str) -> None:
    if not catalogue.is_valid_selector(selector):
        raise ValueError("selector must be a standard event name, family.* or *")


async def _await(awaitable: Awaitable[Any]) -> Any:
    return await awaitable


def _run_awaitable(awaitable: Awaitable[Any]) -> Any:
    """Run an awaitable to completion from sync code (not from inside an event loop)."""
    import anyio

    return anyio.run(_await, awaitable)


class Backend(Core):
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
        if not is_reverse_dns(name):
            raise ValueError("backend name must be a reverse-DNS id such as com.example.guard")
        if max_frame_bytes < 1:
            raise ValueError("max_frame_bytes must be positive")
        super().__init__()
        self.name = name
        self.max_frame_bytes = max_frame_bytes
        self.configuration = (
            None if configuration is None else _check_configuration(list(configuration))
        )

    # -- registration -----------------------------------------------------------------

    def intercept(self, selector: str) -> Callable[[_F], _F]:
        """Register the decorated function for ``hooks/intercept`` on ``selector``.

        ``selector`` is an interceptable event name, ``family.*`` or ``*``; it must
        cover at least one interceptable event, and each selector takes one handler.
        """
        _check_selector(selector)
        if not catalogue.expand(selector, "intercept"):
            raise ValueError("selector covers no interceptable event")
        if any(existing == selector for existing, _, _ in self._intercepts):
            raise ValueError("an intercept handler is already registered for this selector")

        def register(fn: _F) -> _F:
            self._intercepts.append((selector, fn, _is_async_callable(fn)))
            self._registered()
            return fn

        return register

    def observe(self, selector: str) -> Callable[[_F], _F]:
        """Register the decorated function for ``hooks/observe`` on ``selector``."""
        _check_selector(selector)

        def register(fn: _F) -> _F:
            self._observers.append((selector, fn, _is_async_callable(fn)))
            self._registered()
            return fn

        return register

    @property
    def needs_event_loop(self) -> bool:
        """Whether any registered handler is ``async def``."""
        return any(a for _, _, a in self._intercepts) or any(a for _, _, a in self._observers)

    # -- answering: one core, two drivers ----------------------------------------------

    async def handle(self, message: bytes) -> bytes | None:
        """Answer one framed message: the encoded response line, or ``None``."""
        return (await self.respond(message)).body

    def handle_sync(self, message: bytes) -> bytes | None:
        """The same as :meth:`handle` without an event loop (for sync handlers).

        An ``async def`` handler is run with ``anyio.run``; do not call this from
        inside a running event loop then.
        """
        return self.respond_sync(message).body

    def respond_sync(self, message: bytes, max_frame_bytes: int | None = None) -> Reply:
        """The :class:`Reply` to one framed message (``max_frame_bytes``: default the
        backend's), without an event loop unless an ``async def`` handler runs."""
        limit = self.max_frame_bytes if max_frame_bytes is None else max_frame_bytes
        step = self.prepare(message, limit)
        if isinstance(step, InterceptCall):
            request = step.request
            try:
                with handler_span(request.params, self.name, request.event_type, "intercept"):
                    result: Any = step.handler(request)
                    if result is not None and is_awaitable(result):
                        result = _run_awaitable(result)
            except Exception as exc:
                return self.handler_raised("intercept", exc, step)
            return self.answer(step, result)
        if isinstance(step, Reply):
            return step
        failed = False
        with handler_span(step.params, self.name, step.event["type"], "observe"):
            for fn, _ in step.handlers:
                try:
                    done = fn(step.event)
                    if inspect.isawaitable(done):
                        _run_awaitable(done)
                except Exception as exc:
                    failed = True
                    self.handler_raised("observe", exc, None)
        return UNPROCESSED if failed else SILENT

    async def respond(
        self,
        message: bytes,
        max_frame_bytes: int | None = None,
        *,
        offload_sync: bool = False,
        judge_in: CapacityLimiter | None = None,
    ) -> Reply:
        """The :class:`Reply` to one framed message. ``offload_sync`` runs sync
        handlers in a worker thread (HTTP); with ``judge_in``, decoding and judging
        the message runs in a worker thread of that limiter too (large frames)."""
        limit = self.max_frame_bytes if max_frame_bytes is None else max_frame_bytes
        if judge_in is None:
            step = self.prepare(message, limit)
        else:
            import anyio.to_thread

            step = await anyio.to_thread.run_sync(self.prepare, message, limit, limiter=judge_in)
        if isinstance(step, Reply):
            return step
        if isinstance(step, ObserveCall):
            failed = False
            with handler_span(step.params, self.name, step.event["type"], "observe"):
                for fn, is_async in step.handlers:
                    try:
                        await self._call(fn, step.event, is_async, offload_sync)
                    except Exception as exc:
                        failed = True
                        self.handler_raised("observe", exc, None)
            return UNPROCESSED if failed else SILENT
        request = step.request
        try:
            with handler_span(request.params, self.name, request.event_type, "intercept"):
                result = await self._call(step.handler, request, step.is_async, offload_sync)
        except Exception as exc:
            return self.handler_raised("intercept", exc, step)
        return self.answer(step, result)

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

    def run(self, argv: list[str] | None = None) -> NoReturn:
        """Serve from the command line and exit: :func:`ahp_protocol.server.cli.run`."""
        from ahp_protocol.server.cli import run

        run(self, argv)

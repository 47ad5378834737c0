"""The client engine: one event through its interceptors, as values, with no I/O.

In the style of h11's ``Connection``: a :class:`Chain` is given one interceptable event
and its matching routes, says what to send next (:meth:`Chain.send`), and takes each
answer or failure back (:meth:`Chain.receive`, :meth:`Chain.fail`). It owns the rules of
one exchange and of the chain: the request each interceptor gets (its view of the event,
its capabilities, the chain state so far), what an answer must be to be accepted
(:func:`accept`: envelope result, version, the effects judged by
:func:`~ahp_protocol.wire.effects.check_effects`, all or nothing), the deadline as a
value (``timeoutMs`` from the first send, acceptance included), the one retry a
retryable failure may have within that deadline, failure policy (fail-closed ends the
chain with a synthetic denial; fail-open continues), short-circuit after a stop, and
what is observed after settlement (:meth:`Chain.deliveries`).

It never reads a clock of its own choosing (``clock`` is given), never touches a
transport, never sleeps. :class:`~ahp_protocol.client.Dispatcher` is the async driver
around it; a test can drive it by hand. The fold itself is
:func:`~ahp_protocol.client.chain.fold_response`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple

from ahp_protocol.client._failures import FailureClass, OperationalFailure
from ahp_protocol.client._result import Diagnostic, HookResult, Mode, Outcome
from ahp_protocol.client.chain import ChainState, fold_response
from ahp_protocol.wire import jsonrpc
from ahp_protocol.wire.routing import Policy, failure_policy
from ahp_protocol.wire.state import Candidate, Permission

if TYPE_CHECKING:
    from ahp_protocol.client.transports.exchange import Exchange
    from ahp_protocol.wire.effects import Grants
    from ahp_protocol.wire.registration import Hook, Subscription

RETRYABLE = frozenset({FailureClass.ABNORMAL_EXIT, FailureClass.CONNECT_FAILED})
"""Failures after which one retry (same ids, same content) may fit in the original deadline."""

MAX_ERROR_REASON_CHARS = 160
"""How much of a backend's ``error.data.reason`` a diagnostic keeps."""

_EFFECT_FAILURES = {
    "unknown": FailureClass.UNKNOWN_EFFECT,
    "malformed": FailureClass.MALFORMED_EFFECT,
    "unadvertised": FailureClass.UNADVERTISED_EFFECT,
    "illegal": FailureClass.UNADVERTISED_EFFECT,
}


@dataclass(frozen=True, slots=True)
class Route:
    """One subscription of one backend, as the chain uses it."""

    hook: Hook
    index: int
    subscription: Subscription
    selection: dict[str, str] = field(default_factory=dict)

    @classmethod
    def of(cls, hook: Hook, index: int, subscription: Subscription) -> Route:
        return cls(hook, index, subscription, subscription.content.to_wire())

    @property
    def sees_everything(self) -> bool:
        """True when the subscriber's view of an event is the event itself."""
        return all(v == "body" for v in self.selection.values())

    def view(self, event: Mapping[str, Any]) -> Mapping[str, Any]:
        """The event as this subscription may see it (content selection, ``native``)."""
        from ahp_protocol.wire.content import project_event

        include_native = bool(self.subscription.include_native)
        if self.sees_everything and (include_native or "native" not in event):
            return event  # nothing to withhold: no copy on the hot path
        return project_event(event, self.selection, include_native=include_native)

    @property
    def fail_closed(self) -> bool:
        return self.policy == "fail-closed"

    @property
    def timeout_s(self) -> float:
        timeout_ms: int = getattr(self.subscription, "timeout_ms", 0)
        return timeout_ms / 1000

    @property
    def policy(self) -> Policy:
        """The subscription's failure policy (:func:`ahp_protocol.wire.routing.failure_policy`)."""
        sub = self.subscription
        return failure_policy(
            getattr(sub, "failure_policy", None),
            scope=getattr(sub, "scope", None),
            disableable=getattr(sub, "disableable", None),
        )


# -- what an answer must be --------------------------------------------------------


def rpc_error_detail(error: object) -> str:
    """What a JSON-RPC error says, for a diagnostic: its code, the code's fixed name and
    the backend's ``data.reason`` (printable, bounded); never ``message`` or other data,
    where a careless backend may have put exception text."""
    if not isinstance(error, Mapping) or type(error.get("code")) is not int:
        return "backend answered with a malformed JSON-RPC error"
    code: int = error["code"]
    detail = f"backend answered with JSON-RPC error {code}"
    name = jsonrpc.ERROR_MESSAGES.get(code)
    if name is not None:
        detail += f" ({name})"
    data = error.get("data")
    reason = data.get("reason") if isinstance(data, Mapping) else None
    if isinstance(reason, str) and reason:
        text = "".join(c if c.isprintable() else " " for c in reason[:MAX_ERROR_REASON_CHARS])
        detail += f": {text}" + ("…" if len(reason) > MAX_ERROR_REASON_CHARS else "")
    return detail


def result_of(response: Mapping[str, Any]) -> dict[str, Any]:
    """The ``result`` of a response whose envelope and id the transport checked, or
    :class:`OperationalFailure` (a JSON-RPC error, no object, another protocol version)."""
    if "error" in response:
        raise OperationalFailure(FailureClass.RPC_ERROR, rpc_error_detail(response["error"]))
    result = response.get("result")
    if not isinstance(result, dict):
        raise OperationalFailure(FailureClass.INVALID_RESULT, "result is not an object")
    if result.get("protocolVersion") != jsonrpc.PROTOCOL_VERSION:
        raise OperationalFailure(FailureClass.UNSUPPORTED_VERSION, "unsupported protocolVersion")
    return result


def accept(event_type: str, judge: Grants, response: Mapping[str, Any]) -> list[Any]:
    """The effects of one ``hooks/intercept`` answer, parsed and judged against what the
    request granted, or :class:`OperationalFailure`: the whole answer or none of it."""
    from ahp_protocol.wire.effects import EffectError, check_effects
    from ahp_protocol.wire.errors import WireErrors

    result = result_of(response)
    if "manifest" in result or "configuration" in result:
        raise OperationalFailure(FailureClass.INVALID_RESULT, "discovery payload in a decision")
    effects = result.get("effects")
    if not isinstance(effects, list):  # AHP-DEC-001: a success has an ordered effects array
        raise OperationalFailure(FailureClass.INVALID_RESULT, "result has no effects array")
    try:
        return check_effects(event_type, judge, effects)
    except EffectError as exc:
        raise OperationalFailure(
            _EFFECT_FAILURES[exc.kind], f"effect rejected ({exc.kind})"
        ) from None
    except WireErrors:
        raise OperationalFailure(FailureClass.MALFORMED_EFFECT, "effects rejected") from None


# -- the chain ---------------------------------------------------------------------


class Send(NamedTuple):  # a tuple: built on every call, the cheapest immutable record
    """The request to send now: to ``route``'s backend, answered by ``deadline`` (on the
    engine's clock). A retry is the same message with the same deadline."""

    route: Route
    message: dict[str, Any]
    deadline: float
    judge: Grants
    """What ``check_effects`` reads of the request's capabilities."""
    attempt: int = 1


@dataclass(frozen=True, slots=True)
class Delivery:
    """One ``hooks/observe`` notification due after settlement."""

    route: Route
    event: Mapping[str, Any]
    mode: Mode


Granter = Callable[[str, "Route"], "tuple[dict[str, Any], Grants]"]
"""The per-request capabilities at an event type for a route, in wire form and as
``check_effects`` reads them."""


class Chain:
    """One interceptable event through its interceptor routes (see the module docstring).

    Drive it as ``while (send := chain.send()) is not None: chain.receive(...) or
    chain.fail(...)``, then read :attr:`state`, :attr:`diagnostics` and
    :meth:`deliveries`. ``carried`` params (a trace context) may be added to
    ``send.message["params"]`` before it goes out. ``view`` (default
    :meth:`Route.view`) gives each route's view of the event, e.g. with its uploaded
    attachment refs (:class:`~ahp_protocol.client.uploads.Uploads`).
    """

    __slots__ = (
        "_clock",
        "_grants",
        "_next",
        "_pending",
        "_routes",
        "_started",
        "_view",
        "diagnostics",
        "event_type",
        "failures",
        "state",
        "uncalled",
    )

    def __init__(
        self,
        event: Mapping[str, Any],
        routes: Sequence[Route],
        grants: Granter,
        *,
        permission: Permission = "none",
        candidate: Candidate | None = None,
        clock: Callable[[], float] = time.perf_counter,
        view: Callable[[Route, Mapping[str, Any]], Mapping[str, Any]] | None = None,
    ) -> None:
        self._view = view
        self.event_type = str(event.get("type"))
        self.state = ChainState(event=dict(event), permission=permission, candidate=candidate)
        self.diagnostics: list[Diagnostic] = []
        self.failures: list[tuple[Route, FailureClass]] = []
        self.uncalled: list[Route] = []
        self._routes = routes
        self._grants = grants
        self._clock = clock
        self._next = 0
        self._pending: Send | None = None
        self._started = 0.0

    @property
    def settled(self) -> bool:
        return self._pending is None and self._next >= len(self._routes)

    def send(self) -> Send | None:
        """The request to send now (the same one again while it awaits its answer), or
        ``None`` when the chain is settled. Routes after a stop are not called: they are
        observed instead (:meth:`deliveries`)."""
        if self._pending is not None:
            return self._pending
        while self._next < len(self._routes):
            route = self._routes[self._next]
            self._next += 1
            if self.state.stopped:
                self.uncalled.append(route)
                continue
            self._started = self._clock()
            grant, judge = self._grants(self.event_type, route)
            event = self.state.event
            params: dict[str, Any] = {
                "protocolVersion": jsonrpc.PROTOCOL_VERSION,
                "event": route.view(event) if self._view is None else self._view(route, event),
                "capabilities": grant,
                "state": self.state.wire_state(),
            }
            message = jsonrpc.request(jsonrpc.INTERCEPT, params, self.state.event["id"])
            self._pending = Send(route, message, self._started + route.timeout_s, judge)
            return self._pending
        return None

    def receive(self, response: Mapping[str, Any], exchange: Exchange | None = None) -> Diagnostic:
        """Take the answer to the pending request (envelope and id checked by the
        transport): accepted and folded, or a failure under the route's policy."""
        send = self._awaiting()
        try:
            effects = accept(self.event_type, send.judge, response)
            folded = fold_response(
                self.state, effects, backend=send.route.hook.id, subscription=send.route.index
            )
        except OperationalFailure as exc:
            return self._failed(send, exc, exchange)
        now = self._clock()
        if now > send.deadline:  # timeoutMs covers acceptance too
            late = OperationalFailure(FailureClass.DEADLINE_EXCEEDED, "no answer in time")
            return self._failed(send, late, exchange)
        self.state = folded
        outcome: Outcome = "denied" if folded.denial else "accepted" if effects else "no_effect"
        return self._record(send.route, outcome, None, exchange, now)

    def fail(
        self, failure: OperationalFailure, exchange: Exchange | None = None
    ) -> Diagnostic | None:
        """Take a failure of the pending request. ``None`` when the request may be sent
        once more (a retryable failure, the first time, with time left): :meth:`send`
        gives it again, same ids, same content, same deadline."""
        send = self._awaiting()
        if failure.failure in RETRYABLE and send.attempt == 1 and self._clock() < send.deadline:
            self._pending = Send(send.route, send.message, send.deadline, send.judge, attempt=2)
            return None
        return self._failed(send, failure, exchange)

    def expire(self, exchange: Exchange | None = None) -> Diagnostic:
        """The pending request's deadline passed with no answer."""
        failure = OperationalFailure(FailureClass.DEADLINE_EXCEEDED, "no answer in time")
        return self._failed(self._awaiting(), failure, exchange)

    def result(self, observed: Sequence[Diagnostic] = ()) -> HookResult:
        """The settled result, with the diagnostics of what was observed afterwards."""
        if not self.settled:
            raise RuntimeError("the chain is not settled")
        return HookResult.settle(self.event_type, self.state, [*self.diagnostics, *observed])

    def deliveries(
        self,
        observers: Sequence[Route],
        failure_observers: Sequence[Route],
        failure_event: Callable[[Route, FailureClass], Mapping[str, Any]],
    ) -> list[Delivery]:
        """What is observed once settled: the (final) event to its observers, to each
        interceptor a stop left uncalled, and one ``hook.failure`` event per failure to
        the ``hook.failure`` observers."""
        if not self.settled:
            raise RuntimeError("the chain is not settled (send() has more to send)")
        if not (observers or self.uncalled or (self.failures and failure_observers)):
            return []
        event = self.state.event
        out = [Delivery(route, event, "observe") for route in observers]
        out += [Delivery(route, event, "short-circuit") for route in self.uncalled]
        for route, failure in self.failures:
            payload = failure_event(route, failure)
            out += [Delivery(observer, payload, "observe") for observer in failure_observers]
        return out

    # -- internals -------------------------------------------------------------------

    def _awaiting(self) -> Send:
        if self._pending is None:
            raise RuntimeError("no request is awaiting an answer (call send() first)")
        return self._pending

    def _failed(
        self, send: Send, failure: OperationalFailure, exchange: Exchange | None
    ) -> Diagnostic:
        route = send.route
        self.failures.append((route, failure.failure))
        if route.fail_closed:
            self.state = self.state.deny_synthetic(route.hook.id, route.index)
        return self._record(route, "failed", failure, exchange)

    def _record(
        self,
        route: Route,
        outcome: Outcome,
        failure: OperationalFailure | None,
        exchange: Exchange | None,
        now: float | None = None,
    ) -> Diagnostic:
        self._pending = None
        if now is None:
            now = self._clock()
        diagnostic = Diagnostic(
            route.hook.id,
            route.index,
            "intercept",
            outcome,
            (now - self._started) * 1000,
            failure.failure if failure else None,
            route.policy if failure else None,
            failure.detail if failure else None,
            len(exchange.discarded) if exchange else 0,
        )
        self.diagnostics.append(diagnostic)
        return diagnostic

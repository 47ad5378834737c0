"""The dispatcher: run one event through a registration's subscriptions, as the draft says.

Owns the order of a chain (``hooks`` array order, then subscription order),
the per-request capabilities each interceptor is granted, deadlines
(``timeoutMs`` covers spawn or connect, sending, backend time, parsing and
acceptance), acceptance of a response (atomic, via
:func:`~ahp_protocol.wire.effects.check_effects`), failure policy,
short-circuit observation, ``hook.failure`` events, observer delivery
(bounded, after settlement) and ``hooks/configuration`` discovery.

The rules of folding live in :mod:`ahp_protocol.client.chain` and the I/O in
:mod:`ahp_protocol.client.transports`; this module only sequences them. It
never decides for the host: a result with permission ``none`` or ``allow``
still goes through the host's own permissions and sandbox.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import anyio

from ahp_protocol.client._checks import (
    RegistrationError,
    check_declaration,
    check_registration,
    check_subscription,
)
from ahp_protocol.client._failures import FailureClass, OperationalFailure
from ahp_protocol.client._result import Diagnostic, HookResult, Mode, Outcome
from ahp_protocol.client.chain import ChainState, fold_response
from ahp_protocol.client.transports.stdio import DISCARDED
from ahp_protocol.tracing import end_hook_span, start_hook_span
from ahp_protocol.wire import jsonrpc, routing
from ahp_protocol.wire.routing import Policy, failure_policy
from ahp_protocol.wire.state import Candidate, Permission

if TYPE_CHECKING:
    from ahp_protocol.client.transports import Transport
    from ahp_protocol.wire.effects import Grants
    from ahp_protocol.wire.registration import Hook, Registration, Subscription

log = logging.getLogger("ahp_protocol.client")

DISCOVERY_TIMEOUT_S = 5.0
OBSERVE_TIMEOUT_S = 2.0
RETRYABLE = frozenset({FailureClass.ABNORMAL_EXIT, FailureClass.CONNECT_FAILED})
"""Failures after which one retry (same ids, same content) may fit in the original deadline."""

_EFFECT_FAILURES = {
    "unknown": FailureClass.UNKNOWN_EFFECT,
    "malformed": FailureClass.MALFORMED_EFFECT,
    "unadvertised": FailureClass.UNADVERTISED_EFFECT,
    "illegal": FailureClass.UNADVERTISED_EFFECT,
}


@dataclass(frozen=True, slots=True)
class Route:
    """One subscription as the dispatcher uses it."""

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


MAX_ERROR_REASON_CHARS = 160
"""How much of a backend's ``error.data.reason`` a diagnostic keeps."""


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


def now() -> str:
    """RFC 3339 UTC with milliseconds, as events carry ``time``."""
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def new_id(prefix: str) -> str:
    """A fresh envelope id such as ``evt_<32 hex digits>``."""
    return f"{prefix}_{uuid.uuid4().hex}"


def envelope(event_type: str, source: str, harness: Any) -> dict[str, Any]:
    """What every event the client builds starts with: a fresh id, ``source``, ``type``,
    ``time`` (now) and ``harness``."""
    return {
        "id": new_id("evt"),
        "source": source,
        "type": event_type,
        "time": now(),
        "harness": harness,
    }


class Dispatcher:
    """Runs events through the subscriptions of one validated registration.

    ``capabilities`` maps each event type the host can intercept to the per-request
    capabilities it can enforce there (wire form); other events are only observed.
    Use as ``async with Dispatcher(...) as hooks: result = await hooks.intercept(event)``.
    ``deliver_observations=False`` sends no ``hooks/observe`` at all (to observers, to
    interceptors a short-circuit left uncalled, ``hook.failure``): for re-running
    events that happened long ago, such as a policy replay; every rule that decides is
    unchanged.
    """

    def __init__(
        self,
        registration: Registration,
        *,
        capabilities: Mapping[str, Mapping[str, Any]],
        environ: Mapping[str, str] | None = None,
        observe_timeout: float = OBSERVE_TIMEOUT_S,
        discovery_timeout: float = DISCOVERY_TIMEOUT_S,
        source: str | None = None,
        harness: Mapping[str, str] | None = None,
        deliver_observations: bool = True,
    ) -> None:
        self.registration = registration
        self.deliver_observations = deliver_observations
        self.capabilities = check_declaration(capabilities)
        self.environ = dict(os.environ if environ is None else environ)
        self.observe_timeout = observe_timeout
        self.discovery_timeout = discovery_timeout
        self.source = source or f"urn:uuid:{uuid.uuid4()}"
        self.harness = dict(harness or {"name": "ahp-protocol", "version": "0"})
        self.configuration_diagnostics: list[Diagnostic] = []
        self._transports: dict[str, Transport] = {}
        self._stderr: dict[str, Callable[[], bytes]] = {}
        self._subscriptions: dict[str, Sequence[Subscription]] = {}
        self._routes: dict[tuple[str, str], list[Route]] = {}
        self._grants: dict[tuple[str, str, int], tuple[dict[str, Any], Grants]] = {}
        self._started = False
        self._start_lock = anyio.Lock()
        self._closed = False
        check_registration(registration, self.environ, self.capabilities)

    # -- lifecycle -----------------------------------------------------------------

    async def __aenter__(self) -> Dispatcher:
        await self.start()
        return self

    async def __aexit__(self, *_exc: object) -> None:
        await self.aclose()

    async def start(self) -> None:
        """Open nothing eagerly; discover subscriptions for backends registered without them.

        Concurrent callers wait for the one start: routing before discovery has finished
        would find no subscription for a discovered backend, and pass its events unjudged.
        """
        if self._started:
            return
        async with self._start_lock:
            if self._started:
                return
            for hook in self.registration.hooks:
                if hook.subscriptions:
                    self._subscriptions[hook.id] = list(hook.subscriptions)
                else:
                    self._subscriptions[hook.id] = await self._discover(hook)
            self._started = True
        self._warm()

    async def prepare(self) -> None:
        """:meth:`start`, then start every persistent backend an event would be sent to
        (each transport's ``prepare``), so the first event pays for no process start-up.
        Failures are the first event's to report."""
        await self.start()
        async with anyio.create_task_group() as tg:
            for transport in list(self._transports.values()):
                tg.start_soon(transport.prepare)

    def _warm(self) -> None:
        """Import the wire modules acceptance needs, create each transport (nothing is spawned
        or connected) and build every grant now, so no ``timeoutMs`` pays for our start-up."""
        from ahp_protocol.wire import content, effects  # noqa: F401

        for event_type in self.capabilities:
            for route in self.routes(event_type, "intercept"):
                self._transport(route.hook)
                self.grant(event_type, route)
        for hook in self.registration.hooks:
            if any(sub.mode == "observe" for sub in self._subscriptions.get(hook.id, ())):
                self._transport(hook)

    async def aclose(self) -> None:
        """Close every transport; no child process outlives this call."""
        self._closed = True
        transports, self._transports = list(self._transports.values()), {}
        for transport in transports:
            with anyio.CancelScope(shield=True):
                await transport.aclose()

    def stderr_tail(self, backend_id: str) -> str:
        """The most recent stderr of a stdio backend's processes (``""`` for HTTP, or none yet):
        why a backend failed, in its own words (it may echo what it was given), for the
        operator only, never for the model or an event."""
        tail = self._stderr.get(backend_id)
        return tail().decode("utf-8", "replace") if tail is not None else ""

    def _transport(self, hook: Hook) -> Transport:
        transport = self._transports.get(hook.id)
        if transport is None:
            from ahp_protocol.client.transports import open_transport

            transport = open_transport(hook, environ=self.environ)
            self._transports[hook.id] = transport
            tail = getattr(transport, "stderr_tail", None)
            if callable(tail):  # kept after aclose(): why a backend died is read afterwards
                self._stderr[hook.id] = tail
        return transport

    async def _discover(self, hook: Hook) -> list[Subscription]:
        from ahp_protocol.wire.errors import WireError, WireErrors
        from ahp_protocol.wire.registration import parse_configuration

        started = time.perf_counter()
        message = jsonrpc.request(
            jsonrpc.CONFIGURATION,
            {"protocolVersion": jsonrpc.PROTOCOL_VERSION},
            f"configuration-{uuid.uuid4()}",
        )
        failure: FailureClass | None = None
        detail = ""
        subscriptions: list[Subscription] = []
        try:
            with anyio.fail_after(self.discovery_timeout):
                response = await self._transport(hook).request(message)
            result = self._result(response)
            configuration = parse_configuration(result.get("configuration"))
            for j, sub in enumerate(configuration.subscriptions):
                with contextlib.suppress(RegistrationError):  # a selector the host cannot serve
                    check_subscription(sub, f"configuration.subscriptions[{j}]", self.capabilities)
                    subscriptions.append(sub)
            if not subscriptions:
                failure, detail = FailureClass.CONFIGURATION_FAILED, "no applicable subscriptions"
        except TimeoutError:
            failure, detail = FailureClass.DEADLINE_EXCEEDED, "configuration discovery timed out"
        except OperationalFailure as exc:
            failure, detail = exc.failure, exc.detail
        except (WireError, WireErrors):
            failure, detail = FailureClass.CONFIGURATION_FAILED, "invalid configuration"
        if failure is not None:
            latency = (time.perf_counter() - started) * 1000
            why = f"hooks/configuration: {detail}; backend skipped"
            self.configuration_diagnostics.append(
                Diagnostic(hook.id, -1, "intercept", "failed", latency, failure, detail=why)
            )
            log.warning("backend %s skipped: hooks/configuration %s (%s)", hook.id, failure, detail)
        return subscriptions

    # -- matching ------------------------------------------------------------------

    def routes(self, event_type: str, mode: str) -> list[Route]:
        """Matching subscriptions in order: ``hooks`` order, then subscription order.

        Intercept routes exist only for interceptable events the host declared.
        """
        cached = self._routes.get((event_type, mode))
        if cached is not None:
            return cached
        out = []
        if mode != "intercept" or event_type in self.capabilities:
            for hook in self.registration.hooks:
                for j, sub in enumerate(self._subscriptions.get(hook.id, ())):
                    if routing.routes(sub.events, sub.mode, event_type, mode):
                        out.append(Route.of(hook, j, sub))
        if self._started:
            self._routes[(event_type, mode)] = out
        return out

    def intercepts(self, event_type: str) -> bool:
        return bool(self.routes(event_type, "intercept"))

    def observes(self, event_type: str) -> bool:
        return bool(self.routes(event_type, "observe"))

    # -- one exchange --------------------------------------------------------------

    def grant(self, event_type: str, route: Route) -> dict[str, Any]:
        """Per-request capabilities: the host's declaration narrowed to this event and route."""
        return self._granted(event_type, route)[0]

    def _granted(self, event_type: str, route: Route) -> tuple[dict[str, Any], Grants]:
        """:meth:`grant` and what ``check_effects`` reads of it: built once per route."""
        key = (event_type, route.hook.id, route.index)
        cached = self._grants.get(key)
        if cached is None:
            from ahp_protocol.wire.effects import Grants

            granted = self._narrow(event_type, route)
            cached = self._grants[key] = (granted, Grants(granted))
        return cached

    def _narrow(self, event_type: str, route: Route) -> dict[str, Any]:
        from ahp_protocol.wire.capabilities import capabilities_for, parse_capabilities

        declared = parse_capabilities(self.capabilities[event_type])
        granted: dict[str, Any] = capabilities_for(event_type, declared).to_wire()
        modify = granted.get("modify")
        if not route.sees_everything and isinstance(modify, dict):
            # Whole-list replace is never granted over content this subscriber could not see.
            for target, ops in list(modify.items()):
                if target in ("input", "workspace") or not ops.get("replace"):
                    continue
                if ops.get("merge"):
                    modify[target] = {**ops, "replace": False}
                else:
                    del modify[target]
            if not modify:
                granted.pop("modify")
                granted["effects"] = [e for e in granted["effects"] if e != "modify"]
        return granted

    @staticmethod
    def _result(response: Mapping[str, Any]) -> dict[str, Any]:
        """The ``result`` of a response whose envelope and id the transport checked."""
        if "error" in response:
            raise OperationalFailure(FailureClass.RPC_ERROR, rpc_error_detail(response["error"]))
        result = response.get("result")
        if not isinstance(result, dict):
            raise OperationalFailure(FailureClass.INVALID_RESULT, "result is not an object")
        if result.get("protocolVersion") != jsonrpc.PROTOCOL_VERSION:
            raise OperationalFailure(
                FailureClass.UNSUPPORTED_VERSION, "unsupported protocolVersion"
            )
        return result

    def _accept(self, event_type: str, judge: Grants, response: Mapping[str, Any]) -> list[Any]:
        from ahp_protocol.wire.effects import EffectError, check_effects
        from ahp_protocol.wire.errors import WireErrors

        result = self._result(response)
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

    async def _exchange(
        self, route: Route, event_type: str, state: ChainState, carried: dict[str, Any]
    ) -> tuple[ChainState, Outcome]:
        """The state after one interceptor's accepted answer, and the answer's outcome.
        ``carried``: params the request carries besides the protocol's (a trace)."""
        event = state.event
        grant, judge = self._granted(event_type, route)
        params: dict[str, Any] = {
            "protocolVersion": jsonrpc.PROTOCOL_VERSION,
            "event": route.view(event),
            "capabilities": grant,
            "state": state.wire_state(),
            **carried,
        }
        message = jsonrpc.request(jsonrpc.INTERCEPT, params, event["id"])
        transport = self._transport(route.hook)
        try:
            response = await transport.request(message)
        except OperationalFailure as exc:
            if exc.failure not in RETRYABLE:
                raise
            response = await transport.request(message)  # same ids, same content, same deadline
        effects = self._accept(event_type, judge, response)
        folded = fold_response(state, effects, backend=route.hook.id, subscription=route.index)
        return folded, "denied" if folded.denial else "accepted" if effects else "no_effect"

    # -- the chain -----------------------------------------------------------------

    async def intercept(
        self,
        event: Mapping[str, Any],
        *,
        initial_permission: Permission = "none",
        initial_candidate: Candidate | None = None,
    ) -> HookResult:
        """Run one interceptable event through the chain, then deliver observations.

        ``initial_permission`` and ``initial_candidate`` are the first interceptor's
        ``params.state``: what an earlier run for the same operation settled and carried
        over (draft §5.4), folded and invalidated as any other state. The result is
        settled: after an accepted deny, a flow stop or a fail-closed failure, later
        interceptors received the event through ``hooks/observe`` instead.
        """
        if self._closed:
            raise RuntimeError("dispatcher is closed")
        await self.start()
        event_type = str(event.get("type"))
        state = ChainState(
            event=dict(event), permission=initial_permission, candidate=initial_candidate
        )
        diagnostics: list[Diagnostic] = []
        failures: list[tuple[Route, FailureClass]] = []
        uncalled: list[Route] = []
        for route in self.routes(event_type, "intercept"):
            if state.stopped:
                uncalled.append(route)
                continue
            started = time.perf_counter()
            discarded: list[int] = []  # uncorrelated frames the transport dropped meanwhile
            token = DISCARDED.set(discarded)
            failure: OperationalFailure | None = None
            carried: dict[str, Any] = {}
            span = start_hook_span(carried, route.hook.id, event_type, "intercept")
            try:
                with anyio.fail_after(route.timeout_s):
                    state, outcome = await self._exchange(route, event_type, state, carried)
            except TimeoutError:
                failure = OperationalFailure(FailureClass.DEADLINE_EXCEEDED, "no answer in time")
            except OperationalFailure as exc:
                failure = exc
            finally:
                DISCARDED.reset(token)
            latency = (time.perf_counter() - started) * 1000
            if failure is not None:
                outcome = "failed"
                failures.append((route, failure.failure))
                log.info("backend %s failed: %s (%s)", route.hook.id, failure.failure, route.policy)
                if route.fail_closed:
                    state = state.deny_synthetic(route.hook.id, route.index)
            diagnostics.append(
                Diagnostic(
                    route.hook.id,
                    route.index,
                    "intercept",
                    outcome,
                    latency,
                    failure.failure if failure else None,
                    route.policy if failure else None,
                    failure.detail if failure else None,
                    len(discarded),
                )
            )
            end_hook_span(span, diagnostics[-1])
        observed = await self._deliver(state.event, uncalled, failures)
        return HookResult.settle(event_type, state, diagnostics + observed)

    async def observe(self, event: Mapping[str, Any]) -> list[Diagnostic]:
        """Deliver one event to its observe subscriptions (bounded; never a decision)."""
        await self.start()
        return await self._deliver(dict(event), [], [])

    def failure_event(
        self, parent: Mapping[str, Any], route: Route, failure: FailureClass
    ) -> dict[str, Any]:
        """The ``hook.failure`` event about one failed backend (no backend detail in it)."""
        source, harness = parent.get("source", self.source), parent.get("harness", self.harness)
        event = envelope("hook.failure", source, harness)
        event["parentEventId"] = parent["id"]
        event["failure"] = {
            "backendId": route.hook.id,
            "reason": failure.value,
            "policy": route.policy,
        }
        if isinstance(parent.get("session"), Mapping):
            event["session"] = parent["session"]
        return event

    async def _deliver(
        self,
        event: Mapping[str, Any],
        uncalled: list[Route],
        failures: list[tuple[Route, FailureClass]],
    ) -> list[Diagnostic]:
        """Observations after settlement, concurrently, each bounded by ``observe_timeout``."""
        if not self.deliver_observations:
            return []
        deliveries: list[tuple[Route, Mapping[str, Any], Mode]] = [
            (r, event, "observe") for r in self.routes(str(event.get("type")), "observe")
        ]
        deliveries += [(r, event, "short-circuit") for r in uncalled]
        for route, failure in failures:
            failure_event = self.failure_event(event, route, failure)
            deliveries += [
                (r, failure_event, "observe") for r in self.routes("hook.failure", "observe")
            ]
        diagnostics: list[Diagnostic] = []
        if not deliveries:
            return diagnostics

        async def deliver(route: Route, payload: Mapping[str, Any], mode: Mode) -> None:
            started = time.perf_counter()
            params = {"protocolVersion": jsonrpc.PROTOCOL_VERSION, "event": route.view(payload)}
            span = start_hook_span(params, route.hook.id, str(payload.get("type")), "observe")
            message = jsonrpc.notification(jsonrpc.OBSERVE, params)
            failure: FailureClass | None = None
            with anyio.move_on_after(self.observe_timeout) as scope:
                try:
                    await self._transport(route.hook).notify(message)
                except OperationalFailure as exc:
                    failure = exc.failure
            if scope.cancelled_caught:
                failure = FailureClass.DEADLINE_EXCEEDED
            latency = (time.perf_counter() - started) * 1000
            outcome: Outcome = "failed" if failure else "delivered"
            detail = "observation not delivered" if failure else None
            diagnostics.append(
                Diagnostic(
                    route.hook.id, route.index, mode, outcome, latency, failure, detail=detail
                )
            )
            end_hook_span(span, diagnostics[-1])

        async with anyio.create_task_group() as tg:
            for route, payload, mode in deliveries:
                tg.start_soon(deliver, route, payload, mode)
        return diagnostics

"""The dispatcher: the async driver that runs events through a registration's subscriptions.

Owns what needs I/O or lives longer than one event: the transports (one per backend,
opened on first use by ``transport=`` or :func:`~ahp_protocol.client.transports.open_transport`,
all closed by :meth:`Dispatcher.aclose`), ``hooks/configuration`` discovery, the routes
of each event type (``hooks`` array order, then subscription order) and the
per-request capabilities of each route, built once; then, for one event, it drives a
:class:`~ahp_protocol.client.engine.Chain` (sends what it says to send within the
deadline it gives, hands back each answer, failure or expiry, with the transport's
:class:`~ahp_protocol.client.transports.exchange.Exchange` record) and delivers what the
chain says to observe, concurrently, each bounded by ``observe_timeout``. The rules
(acceptance, deadlines, the one retry, failure policy, short-circuit, the fold) are the
engine's and :mod:`~ahp_protocol.client.chain`'s; this module only sequences them. It
never decides for the host: a result with permission ``none`` or ``allow`` still goes
through the host's own permissions and sandbox.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
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
from ahp_protocol.client.engine import Chain, Delivery, Route, Send, result_of
from ahp_protocol.client.transports.exchange import Exchange
from ahp_protocol.tracing import end_hook_span, start_hook_span
from ahp_protocol.wire import jsonrpc, routing
from ahp_protocol.wire.state import Candidate, Permission

if TYPE_CHECKING:
    import httpx

    from ahp_protocol.client.transports import Transport
    from ahp_protocol.client.uploads import Attachment, Uploads
    from ahp_protocol.wire.effects import Grants
    from ahp_protocol.wire.registration import Hook, Registration, Subscription

log = logging.getLogger("ahp_protocol.client")

DISCOVERY_TIMEOUT_S = 5.0
OBSERVE_TIMEOUT_S = 2.0


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

    ``interaction(url)`` shows a person an OAuth sign-in URL (an
    ``authorization_code_pkce`` binding); without it the host is non-interactive and such
    a registration is refused.

    ``authorize_configuration(hook, subscriptions)`` is the host's consent to what a
    backend registered without subscriptions answers to ``hooks/configuration``: without
    it, a discovered configuration with an ``upload`` is refused (the backend is skipped,
    diagnostic ``configuration not authorized``); with it, only a ``True`` accepts one.

    ``transport`` opens the connection to one backend (``hook`` in, a
    :class:`~ahp_protocol.client.transports.Transport` out), called once per backend on
    first use; by default :func:`~ahp_protocol.client.transports.open_transport` (stdio or
    HTTP, as the registration says). Any transport will do, e.g. an in-memory one from
    :mod:`ahp_protocol.testing`.
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
        transport: Callable[[Hook], Transport] | None = None,
        authorize_configuration: Callable[[Hook, Sequence[Subscription]], bool] | None = None,
        interaction: Callable[[str], Any] | None = None,
    ) -> None:
        self.registration = registration
        self.authorize_configuration = authorize_configuration
        self.interaction = interaction
        self._open = transport
        self.deliver_observations = deliver_observations
        self.capabilities = check_declaration(capabilities)
        self.environ = dict(os.environ if environ is None else environ)
        self.observe_timeout = observe_timeout
        self.discovery_timeout = discovery_timeout
        self.source = source or f"urn:uuid:{uuid.uuid4()}"
        self.harness = dict(harness or {"name": "ahp-protocol", "version": "0"})
        self.configuration_diagnostics: list[Diagnostic] = []
        self.upload_failures: list[tuple[str, int, FailureClass]] = []
        """(backend, subscription index, failure class) of each upload that did not confirm."""
        self._transports: dict[str, Transport] = {}
        self._stderr: dict[str, Callable[[], bytes]] = {}
        self._subscriptions: dict[str, Sequence[Subscription]] = {}
        self._routes: dict[tuple[str, str], list[Route]] = {}
        self._grants: dict[tuple[str, str, int], tuple[dict[str, Any], Grants]] = {}
        self._upload_client: httpx.AsyncClient | None = None
        self._started = False
        self._start_lock = anyio.Lock()
        self._closed = False
        check_registration(
            registration, self.environ, self.capabilities, interactive=interaction is not None
        )

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
        client, self._upload_client = self._upload_client, None
        if client is not None:
            with anyio.CancelScope(shield=True):
                await client.aclose()

    def stderr_tail(self, backend_id: str) -> str:
        """The most recent stderr of a stdio backend's processes (``""`` for HTTP, or none yet):
        why a backend failed, in its own words (it may echo what it was given), for the
        operator only, never for the model or an event."""
        tail = self._stderr.get(backend_id)
        return tail().decode("utf-8", "replace") if tail is not None else ""

    def _transport(self, hook: Hook) -> Transport:
        transport = self._transports.get(hook.id)
        if transport is None:
            if self._open is not None:
                transport = self._open(hook)
            else:
                from ahp_protocol.client.transports import open_transport

                transport = open_transport(hook, environ=self.environ, interaction=self.interaction)
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
            result = result_of(response)
            configuration = parse_configuration(result.get("configuration"))
            for j, sub in enumerate(configuration.subscriptions):
                with contextlib.suppress(RegistrationError):  # a selector the host cannot serve
                    check_subscription(sub, f"configuration.subscriptions[{j}]", self.capabilities)
                    subscriptions.append(sub)
            if not subscriptions:
                failure, detail = FailureClass.CONFIGURATION_FAILED, "no applicable subscriptions"
            elif not self._authorized(hook, subscriptions):
                failure, detail = FailureClass.CONFIGURATION_FAILED, "configuration not authorized"
                subscriptions = []
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

    def _authorized(self, hook: Hook, subscriptions: Sequence[Subscription]) -> bool:
        """Whether the host accepts a discovered configuration (draft §2.4): one with an
        ``upload`` (an endpoint the backend chose, where the host's content would go)
        needs the host's ``authorize_configuration`` to say yes; with a callback, every
        discovered configuration does. A raising callback is a no."""
        callback = self.authorize_configuration
        if callback is None:
            return not any(sub.upload is not None for sub in subscriptions)
        try:
            return callback(hook, subscriptions) is True
        except Exception:  # the host's own code: never a reason to accept
            log.warning("authorize_configuration raised for backend %s; refused", hook.id)
            return False

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

    # -- the chain -----------------------------------------------------------------

    async def intercept(
        self,
        event: Mapping[str, Any],
        *,
        initial_permission: Permission = "none",
        initial_candidate: Candidate | None = None,
        attachments: Sequence[Attachment] = (),
    ) -> HookResult:
        """Run one interceptable event through the chain, then deliver observations.

        ``attachments`` hold the bytes of the event's attachment parts
        (:class:`~ahp_protocol.client.uploads.Attachment`): every upload a subscription
        selects is finished before the event is sent to anyone.

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
        routes = self.routes(event_type, "intercept")
        uploads = await self._uploads(attachments, event_type, routes) if attachments else None
        chain = Chain(
            event,
            routes,
            self._granted,
            permission=initial_permission,
            candidate=initial_candidate,
            view=uploads.view if uploads is not None else None,
        )
        while (send := chain.send()) is not None:
            params = send.message["params"]
            span = start_hook_span(params, send.route.hook.id, event_type, "intercept")
            end_hook_span(span, await self._drive(chain, send))
        deliveries = chain.deliveries(
            self.routes(event_type, "observe"),
            self.routes("hook.failure", "observe"),
            lambda route, failure: self.failure_event(chain.state.event, route, failure),
        )
        return chain.result(await self._deliver(deliveries, uploads))

    async def _uploads(
        self, attachments: Sequence[Attachment], event_type: str, routes: Sequence[Route]
    ) -> Uploads | None:
        """The event's uploads, all finished, or ``None`` when it has no attachments."""
        if not attachments:
            return None
        from ahp_protocol.client.uploads import Uploads

        if self._upload_client is None:
            with contextlib.suppress(OperationalFailure):  # then every upload fails
                self._upload_client = Uploads.client(self.environ)
        uploads = Uploads(attachments, self._upload_client, self.environ)
        observers = self.routes(event_type, "observe")
        await uploads.prepare([*routes, *observers])
        for (backend, index), _part, failure in uploads.failures:
            log.info("upload for backend %s failed: %s", backend, failure)
            self.upload_failures.append((backend, index, failure))
        return uploads

    async def _drive(self, chain: Chain, send: Send) -> Diagnostic:
        """Send the chain's pending request until the chain has its answer or its failure
        (one retry where the engine allows it), within the engine's deadline."""
        transport = self._transport(send.route.hook)
        exchange = Exchange()
        diagnostic: Diagnostic | None = None
        while diagnostic is None:
            try:
                with anyio.fail_after(max(0.0, send.deadline - time.perf_counter())):
                    response = await transport.request(send.message, exchange)
            except TimeoutError:
                diagnostic = chain.expire(exchange)
            except OperationalFailure as exc:
                diagnostic = chain.fail(exc, exchange)
                if diagnostic is None:  # retried: same ids, same content, same deadline
                    send = chain.send() or send
            else:
                diagnostic = chain.receive(response, exchange)
        if diagnostic.failure is not None:
            log.info(
                "backend %s failed: %s (%s)",
                diagnostic.backend,
                diagnostic.failure,
                diagnostic.policy,
            )
        return diagnostic

    async def observe(
        self, event: Mapping[str, Any], *, attachments: Sequence[Attachment] = ()
    ) -> list[Diagnostic]:
        """Deliver one event to its observe subscriptions (bounded; never a decision),
        after the uploads of its ``attachments`` they select."""
        await self.start()
        event_type = str(event.get("type"))
        routes = self.routes(event_type, "observe")
        uploads = await self._uploads(attachments, event_type, ())
        deliveries = [Delivery(route, event, "observe") for route in routes]
        return await self._deliver(deliveries, uploads)

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
        self, deliveries: Sequence[Delivery], uploads: Uploads | None = None
    ) -> list[Diagnostic]:
        """Observations after settlement, concurrently, each bounded by ``observe_timeout``."""
        diagnostics: list[Diagnostic] = []
        if not self.deliver_observations or not deliveries:
            return diagnostics

        async def deliver(route: Route, payload: Mapping[str, Any], mode: Mode) -> None:
            started = time.perf_counter()
            view = route.view(payload) if uploads is None else uploads.view(route, payload)
            params = {"protocolVersion": jsonrpc.PROTOCOL_VERSION, "event": view}
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
            for delivery in deliveries:
                tg.start_soon(deliver, delivery.route, delivery.event, delivery.mode)
        return diagnostics

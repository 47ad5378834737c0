"""Run one adapter event through a registration's backends, under a budget.

Owns :class:`Engine`: the registration loaded and checked, one
:class:`~ahp_protocol.client.Dispatcher` per capability declaration (the
adapter intercepts ``tool.before`` only, with what the dialect can enforce),
and the budget: every call is bounded by the seconds the hook still has, and
a spent budget is a failure whose policy is the strictest ``tool.before``
interceptor's (the chain may have been anywhere when time ran out).

Used in-process by the hook (no daemon) and by the daemon (warm). Never
decides for the harness: a result without a denial is "nothing", which the
hook never turns into a native allow, or, when accepted modifications changed
``tool.input`` (only where the dialect advertised ``modify``), ``modify`` with
the effective input, which is not a permission either. A denial always wins.
Never lets an exception out of :meth:`Engine.intercept` or
:meth:`Engine.observe`; details are fixed phrases. A decision names the backend whose
fail-closed failure denied and its failure class (the model may see those), and
carries one line per failed backend for the operator (:func:`failure_lines`), never
for the model.
"""

from __future__ import annotations

import json
import logging
import os
import traceback
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import anyio

from ahp_adapters.decision import NativeDecision, Policy, read_policy

if TYPE_CHECKING:
    from ahp_protocol.client import Diagnostic, Dispatcher
    from ahp_protocol.wire.registration import Registration

log = logging.getLogger("ahp_adapters")

OBSERVE_TIMEOUT_S = 1.0
"""Each observation delivery's bound (they happen after settlement, inside the budget)."""


ADAPTER_FIX = (
    " (`ahp-adapter install` writes only the adapter's own absolute path, not the "
    "backends'; `ahp-adapter doctor DIALECT` checks each backend command on the hook's PATH)"
)
"""What the adapter adds to a fix about a command not on the hook's ``PATH``."""


def failure_lines(diagnostics: Sequence[Diagnostic]) -> tuple[str, ...]:
    """The operator's line about each backend that failed
    (:func:`ahp_protocol.client.failure_line`), with the adapter's own tools named where
    the fix is the hook's ``PATH``."""
    from ahp_protocol.client import failure_line, fix_for

    lines: list[str] = []
    for d in diagnostics:
        if d.outcome == "failed" and d.failure is not None:
            line = failure_line(d.backend, d.failure, d.policy, d.detail)
            lines.append(line + ADAPTER_FIX if fix_for(d.failure, d.detail) else line)
    return tuple(lines)


class EngineError(Exception):
    """The registration cannot be run by this adapter (message: fixed text plus JSON path)."""


def load(path: str) -> Registration:
    from ahp_protocol.client.hooks import load_anchored
    from ahp_protocol.wire.errors import WireError, WireErrors

    try:
        return load_anchored(path)  # its backends run in its folder
    except WireErrors as exc:
        raise EngineError(str(exc.first)) from None
    except WireError as exc:
        raise EngineError(str(exc)) from None


class Engine:
    """The backends of one registration, for one or more capability declarations."""

    def __init__(
        self,
        registration_path: str,
        *,
        environ: Mapping[str, str] | None = None,
        observe_timeout: float = OBSERVE_TIMEOUT_S,
    ) -> None:
        self.path = registration_path
        self.registration = load(registration_path)
        self.environ = dict(os.environ if environ is None else environ)
        self.observe_timeout = observe_timeout
        self._fallback_policy = read_policy(registration_path)
        self._dispatchers: dict[str, Dispatcher] = {}
        self._started: set[int] = set()

    def dispatcher(self, capabilities: Mapping[str, Any]) -> Dispatcher:
        """The dispatcher granting ``capabilities`` at ``tool.before`` (created once)."""
        key = json.dumps(capabilities, sort_keys=True)
        found = self._dispatchers.get(key)
        if found is None:
            from ahp_protocol.client import Dispatcher, RegistrationError

            try:
                found = Dispatcher(
                    self.registration,
                    capabilities={"tool.before": dict(capabilities)},
                    environ=self.environ,
                    observe_timeout=self.observe_timeout,
                    harness={"name": "ahp-adapter", "version": "unknown"},
                )
            except RegistrationError as exc:
                raise EngineError(str(exc)) from None
            self._dispatchers[key] = found
        return found

    def policy(self, dispatcher: Dispatcher | None) -> Policy:
        """The strictest policy among the ``tool.before`` interceptors (after discovery)."""
        if dispatcher is None or id(dispatcher) not in self._started:
            return self._fallback_policy
        routes = dispatcher.routes("tool.before", "intercept")
        if any(route.fail_closed for route in routes):
            return "fail-closed"
        return "fail-open" if routes else "none"

    async def _start(self, dispatcher: Dispatcher) -> None:
        """Start: ``hooks/configuration`` discovery for backends without subscriptions."""
        await dispatcher.start()
        self._started.add(id(dispatcher))

    async def prepare(self, declarations: Sequence[Mapping[str, Any]]) -> None:
        """Start the chain of each capability declaration before its first event (discovery,
        persistent backends spawned); never raises: a failure is the first event's."""
        for capabilities in declarations:
            try:
                dispatcher = self.dispatcher(capabilities)
                await dispatcher.prepare()
            except Exception as exc:
                log.warning("chain not prepared (%s)", type(exc).__name__)
                continue
            self._started.add(id(dispatcher))

    async def intercept(
        self, event: Mapping[str, Any], capabilities: Mapping[str, Any], budget: float
    ) -> NativeDecision:
        """The decision for one ``tool.before`` within ``budget`` seconds; never raises."""
        dispatcher: Dispatcher | None = None
        try:
            dispatcher = self.dispatcher(capabilities)
            with anyio.fail_after(max(budget, 0.001)):
                await self._start(dispatcher)
                result = await dispatcher.intercept(event)
        except TimeoutError:
            return NativeDecision(
                "failure", policy=self.policy(dispatcher), detail="budget exhausted"
            )
        except EngineError:
            return NativeDecision(
                "failure", policy=self._fallback_policy, detail="registration rejected"
            )
        except Exception as exc:  # its type and where, never its text (it may quote input)
            where = "".join(traceback.format_tb(exc.__traceback__))
            log.error("intercept failed (%s)\n%s", type(exc).__name__, where)
            return NativeDecision(
                "failure", policy=self.policy(dispatcher), detail="internal error"
            )
        failures = failure_lines(result.diagnostics)
        if result.denial is not None:
            failed = result.denial_failure
            return NativeDecision(
                "deny",
                reason=result.denial.reason,
                code=result.denial.code,
                synthetic=result.denial.synthetic,
                policy=self.policy(dispatcher),
                detail="backend failure (fail-closed)" if result.denial.synthetic else "",
                backend=result.denial.backend if result.denial.synthetic else None,
                failure=failed.failure.value if failed and failed.failure else None,
                failures=failures,
            )
        updated = result.tool_input
        sent = event.get("tool")
        if (
            result.event_changed
            and isinstance(updated, Mapping)
            and isinstance(sent, Mapping)
            and updated != sent.get("input")
        ):
            return NativeDecision(
                "modify",
                policy=self.policy(dispatcher),
                updated_input=dict(updated),
                failures=failures,
            )
        return NativeDecision("none", policy=self.policy(dispatcher), failures=failures)

    async def observe(
        self, event: Mapping[str, Any], capabilities: Mapping[str, Any], budget: float
    ) -> bool:
        """Deliver one observation within ``budget`` seconds; ``False`` on any failure."""
        try:
            dispatcher = self.dispatcher(capabilities)
            with anyio.fail_after(max(budget, 0.001)):
                await self._start(dispatcher)
                diagnostics = await dispatcher.observe(event)
        except Exception:
            return False
        return all(d.outcome != "failed" for d in diagnostics)

    async def aclose(self) -> None:
        """Close every dispatcher (no backend child outlives this)."""
        dispatchers, self._dispatchers = list(self._dispatchers.values()), {}
        self._started.clear()
        for dispatcher in dispatchers:
            with anyio.CancelScope(shield=True):
                await dispatcher.aclose()

    async def __aenter__(self) -> Engine:
        return self

    async def __aexit__(self, *_exc: object) -> None:
        await self.aclose()


def run_once(
    registration_path: str,
    op: str,
    event: Mapping[str, Any],
    capabilities: Mapping[str, Any],
    budget: float,
) -> NativeDecision:
    """In-process: load, run one event, close everything; bounded by ``budget`` plus close time."""

    async def main() -> NativeDecision:
        try:
            engine = Engine(registration_path)
        except EngineError:
            return NativeDecision(
                "failure", policy=read_policy(registration_path), detail="registration rejected"
            )
        async with engine:
            if op == "observe":
                ok = await engine.observe(event, capabilities, budget)
                return NativeDecision("none", detail="" if ok else "observation not delivered")
            return await engine.intercept(event, capabilities, budget)

    return anyio.run(main)

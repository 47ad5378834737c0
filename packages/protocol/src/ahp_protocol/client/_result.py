"""What running one event through the chain produced: the settled result and diagnostics.

Owns :class:`HookResult` (the settled chain state, as the host reads it) and
:class:`Diagnostic` (one record per subscription reached), and how a failure reads:
:func:`synthetic_denial_reason` (what the user and the model see of a fail-closed
denial: the backend's id and the failure class, both chosen by the harness side, never
backend output) and :func:`failure_line` (what the operator sees: that, the policy, the
diagnostic's fixed detail and, where the kit knows it, the fix). Plain frozen
dataclasses; nothing here holds a secret, backend output or exception text.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any, Literal

from ahp_protocol.client._failures import FailureClass, fix_for
from ahp_protocol.client.chain import SYNTHETIC_DENIAL_REASON, ChainState
from ahp_protocol.wire.names import is_reverse_dns
from ahp_protocol.wire.routing import Policy

Mode = Literal["intercept", "observe", "short-circuit"]
Outcome = Literal["no_effect", "accepted", "denied", "failed", "delivered"]

_FAILURE_CLASSES = frozenset(FailureClass)

SYNTHETIC_DENIAL_PATTERN = re.compile(
    r"Required policy backend (?:[A-Za-z0-9._-]+ )?unavailable(?: \([a-z_]+\))?\."
)
"""What every :func:`synthetic_denial_reason` matches, naming a backend or not: for a tool
that reads a harness's answer to tell a fail-closed failure from a policy's deny."""


def synthetic_denial_reason(backend: str | None, failure: FailureClass | str | None) -> str:
    """The reason a fail-closed denial shows the user (and the model): which backend
    failed and how, e.g. ``Required policy backend com.example.policy unavailable
    (spawn_failed).``; :data:`~ahp_protocol.client.chain.SYNTHETIC_DENIAL_REASON` when
    either is unknown. Both come from the harness side (the registration's reverse-DNS
    id, the kit's failure class), so no backend output or detail reaches the model."""
    if not is_reverse_dns(backend):
        return SYNTHETIC_DENIAL_REASON
    if not isinstance(failure, str) or failure not in _FAILURE_CLASSES:
        return SYNTHETIC_DENIAL_REASON
    return f"Required policy backend {backend} unavailable ({FailureClass(failure).value})."


def failure_line(
    backend: str, failure: FailureClass | str, policy: str | None, detail: str | None
) -> str:
    """One line for the operator (never the model) about one failed backend:
    ``backend ID failed (CLASS, POLICY): DETAIL``, then ``; fix: ...`` where
    :func:`~ahp_protocol.client._failures.fix_for` knows one. The detail is the
    diagnostic's fixed phrase (a command and its ``PATH``, never an argument, a header
    value or a token)."""
    value = failure.value if isinstance(failure, FailureClass) else failure
    line = f"backend {backend} failed ({value}, {policy or 'observation'})"
    if detail:
        line += f": {detail}"
    fix = fix_for(failure, detail)
    return f"{line}; fix: {fix}" if fix else line


@dataclass(frozen=True, slots=True)
class Diagnostic:
    """One subscription reached by one event.

    ``outcome``: ``no_effect`` (empty effects), ``accepted`` (effects folded), ``denied``
    (an accepted deny), ``failed`` (see ``failure`` and ``policy``) or ``delivered`` (an
    observation sent). ``latency_ms`` is wall time for the exchange, acceptance included.
    ``discarded`` counts the responses with another id a persistent stdio backend sent
    meanwhile (dropped unread, as the stdio binding says).
    """

    backend: str
    subscription: int
    mode: Mode
    outcome: Outcome
    latency_ms: float
    failure: FailureClass | None = None
    policy: Policy | None = None
    detail: str | None = None
    discarded: int = 0

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "backend": self.backend,
            "subscription": self.subscription,
            "mode": self.mode,
            "outcome": self.outcome,
            "latencyMs": round(self.latency_ms, 3),
        }
        if self.failure is not None:
            out.update(failure=self.failure.value, policy=self.policy, detail=self.detail)
        if self.discarded:
            out["discarded"] = self.discarded
        return out


@dataclass(frozen=True, slots=True, kw_only=True)
class HookResult(ChainState):
    """The settled outcome of one event: the chain's final state, the event's type and
    a diagnostic per subscription reached. ``permission`` is ``none|allow|ask|deny``.

    ``none`` is not permission: the host's own permission flow still decides.
    ``allow`` only suppresses the host's ordinary prompt.
    """

    event_type: str
    diagnostics: tuple[Diagnostic, ...]

    @classmethod
    def settle(
        cls, event_type: str, state: ChainState, diagnostics: list[Diagnostic]
    ) -> HookResult:
        carried = {f.name: getattr(state, f.name) for f in fields(ChainState)}
        return cls(event_type=event_type, diagnostics=tuple(diagnostics), **carried)

    @property
    def denied(self) -> bool:
        return self.denial is not None

    @property
    def synthetic_denial(self) -> bool:
        return self.denial is not None and self.denial.synthetic

    @property
    def denied_by(self) -> str | None:
        """The backend id that denied (or whose failure denied), else ``None``."""
        return self.denial.backend if self.denial else None

    @property
    def denial_failure(self) -> Diagnostic | None:
        """The failed diagnostic whose fail-closed failure denied (synthetic), else ``None``."""
        denial = self.denial
        if denial is None or not denial.synthetic:
            return None
        for d in self.diagnostics:
            if (
                d.failure is not None
                and d.backend == denial.backend
                and d.subscription == denial.subscription
            ):
                return d
        return None

    @property
    def denial_reason(self) -> str | None:
        """The reason to show for the denial: the backend's own for an accepted deny; for a
        synthetic one, :func:`synthetic_denial_reason` (the backend and its failure class)."""
        denial = self.denial
        if denial is None:
            return None
        if not denial.synthetic:
            return denial.reason
        failed = self.denial_failure
        return synthetic_denial_reason(denial.backend, failed.failure if failed else None)

    @property
    def tool_input(self) -> Any:
        """The effective tool input (after accepted modifications), if the event has one."""
        tool = self.event.get("tool")
        return tool.get("input") if isinstance(tool, Mapping) else None

    def to_json(self) -> dict[str, Any]:
        return {
            "eventType": self.event_type,
            "eventId": self.event.get("id"),
            "permission": self.permission,
            "denial": asdict(self.denial) if self.denial else None,
            "flow": self.flow,
            "flowReason": self.flow_reason,
            "candidate": self.candidate.to_wire() if self.candidate else None,
            "messages": list(self.messages),
            "injections": [dict(i) for i in self.injections],
            "instructions": list(self.instructions),
            "toolInput": self.tool_input,
            "diagnostics": [d.to_json() for d in self.diagnostics],
        }

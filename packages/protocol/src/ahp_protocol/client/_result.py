"""What running one event through the chain produced: the settled result and diagnostics.

Owns :class:`HookResult` (the settled chain state, as the host reads it) and
:class:`Diagnostic` (one record per subscription reached). Plain frozen dataclasses;
nothing here holds a secret, backend output or exception text.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any, Literal

from ahp_protocol.client._failures import FailureClass
from ahp_protocol.client.chain import ChainState
from ahp_protocol.wire.routing import Policy

Mode = Literal["intercept", "observe", "short-circuit"]
Outcome = Literal["no_effect", "accepted", "denied", "failed", "delivered"]


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

"""The shared record of one backend judge run: checks so far, faults seen, incidents.

Owns :class:`Judge` (the report's checks, the framing and transport faults the links
collect as :class:`Problem` items, the errors seen, and the give-up rule: after
:data:`MAX_TIMEOUTS` timeouts, :data:`MAX_EXITS` exits or a backend that cannot start,
every check left fails with that as its evidence) and :class:`RoundTrip` (one message
sent and what came back). It talks to no backend: the links (:mod:`.links`) fill it,
the check groups read it, :mod:`.summary` judges what it collected.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

from ahp_conformance.backend.peer import HttpReply
from ahp_conformance.report import Check, Evidence, Status

MAX_TIMEOUTS = 3
"""Requests left unanswered after which the backend is given up on (the rest fail)."""
MAX_EXITS = 6
"""Exits (or lost connections) after which the backend is given up on."""

Incident = Literal["timeout", "exit", "fatal"]


@dataclass
class Problem:
    """A framing or transport fault seen during an exchange, and the requirement it breaks."""

    requirement: str
    text: str
    sent: bytes
    received: bytes


@dataclass
class RoundTrip:
    """One message sent and what came back for it."""

    sent: bytes
    reply: dict[str, Any] | None = None
    """The correlated JSON-RPC response (decoded), when there was one."""
    responses: list[dict[str, Any]] = field(default_factory=list)
    """Every JSON-RPC response that came back (for frames without a usable id)."""
    received: bytes = b""
    failure: str | None = None
    """Why nothing usable came back (no answer in time, exit, connection, given up)."""
    http: HttpReply | None = None

    @property
    def evidence(self) -> Evidence:
        return Evidence.of(self.sent, self.received or self.failure)


class Judge:
    """Shared record of one run: the report's checks, the faults and errors seen, incidents."""

    def __init__(self, binding: str, timeout_s: float, startup_s: float) -> None:
        self.binding = binding
        self.timeout_s = timeout_s
        self.startup_s = startup_s
        self.problems: list[Problem] = []
        self.unanswered: list[Problem] = []
        self.errors_seen: list[tuple[bytes, dict[str, Any]]] = []
        self.checks: list[Check] = []
        self.incidents: list[str] = []
        self.timeouts = 0
        self.exits = 0
        self.fatal = False
        self.received_any = False
        """Whether anything at all came back (else the framing checks judged nothing)."""

    def check(
        self,
        cid: str,
        title: str,
        requirements: Iterable[str],
        status: Status,
        detail: str = "",
        evidence: Evidence | None = None,
    ) -> None:
        self.checks.append(
            Check(cid, title, tuple(requirements), status, detail, evidence, self.binding)
        )

    def incident(self, reason: str, kind: Incident) -> None:
        """The backend timed out (``timeout``), exited (``exit``), or cannot start or exited
        before answering anything (``fatal``: it is given up on at once)."""
        self.incidents.append(reason)
        if kind == "timeout":
            self.timeouts += 1
        elif kind == "exit":
            self.exits += 1
        else:
            self.fatal = True

    def given_up(self) -> str | None:
        """Why the backend is no longer talked to (the last incidents), or ``None``."""
        if self.fatal or self.timeouts >= MAX_TIMEOUTS or self.exits >= MAX_EXITS:
            return (
                "not run: the backend stopped answering earlier ("
                + "; ".join(self.incidents[-3:])
                + ")"
            )
        return None

    def saw(self, outcome: RoundTrip) -> None:
        """Note what came back: anything at all, and every error (for exception text)."""
        if outcome.received:
            self.received_any = True
        for response in outcome.responses:
            if "error" in response:
                self.errors_seen.append((outcome.sent, response))

    def problem(self, requirement: str, text: str, sent: bytes, received: bytes) -> None:
        """A framing or transport fault, judged by the run-wide checks (:mod:`.summary`)."""
        self.problems.append(Problem(requirement, text, sent, received))

    def no_answer(self, text: str, sent: bytes) -> None:
        """A request that got nothing back at all (judged as AHP-RPC-002)."""
        self.unanswered.append(Problem("AHP-RPC-002", text, sent, b""))

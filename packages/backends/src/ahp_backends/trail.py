"""What an audit trail says about each recorded ``tool.before``, and how a replayed
decision compares with it: the model of ``ahp-backend audit replay``
(:mod:`ahp_backends.replay` runs the chains and reports).

- :func:`replayable` reads the records (``session.start``, ``tool.before``,
  ``tool.permission.request``, ``tool.after``, ``hook.failure``) into one :class:`Call`
  per recorded ``tool.before``: its :class:`Recorded` outcome and the capabilities the
  session's manifest declared (or :data:`FALLBACK_CAPABILITIES`);
- :class:`Decision` is what a chain decided (from its settled ``HookResult``);
  :func:`judge` compares a replayed decision with the record, and with ``--baseline``
  two decisions, giving a :data:`Change` or *undetermined*; a call a backend failed on
  (its ``failures``: timeout, crash, JSON-RPC error, bad output) is *undecided* instead
  (:attr:`Call.undecided`), never judged;
- :func:`for_replay` keeps only a registration's ``tool.before`` interceptors.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Final, Literal

if TYPE_CHECKING:
    from ahp_protocol.client import Diagnostic, HookResult
    from ahp_protocol.wire.registration import Registration

    from ahp_backends.audit import Record

__all__ = [
    "FALLBACK_CAPABILITIES",
    "TRAIL_TYPES",
    "Call",
    "Change",
    "Decision",
    "Recorded",
    "for_replay",
    "judge",
    "member",
    "moment_of",
    "parse_moment",
    "replayable",
]

TRAIL_TYPES: Final = (
    "session.start",
    "tool.before",
    "tool.permission.request",
    "tool.after",
    "hook.failure",
)
FALLBACK_CAPABILITIES: Final[dict[str, Any]] = {"effects": ["deny"]}
"""Granted at ``tool.before`` when no manifest was recorded: the draft's minimum."""

Change = Literal[
    "newly denied",
    "no longer denied",
    "different deny code",
    "different deny reason",
    "denied by another backend",
    "different refusal",
    "permission changed",
    "input modified",
]

_DURATION: Final = re.compile(r"^(\d+)([smhdw])$")
_UNITS: Final = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


# -- what the trail says ----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Recorded:
    """What the trail says about one recorded ``tool.before``.

    ``passed``: ``True`` when the call got past ``tool.before`` (it ran, a backend
    supplied its result, it prompted, or it was judged again); ``False`` when it was
    refused (by a backend or by the host: ``chain_refusal`` names a fail-closed backend
    failure when the trail shows one); ``None`` when no outcome was recorded.
    """

    passed: bool | None
    outcome: str
    chain_refusal: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"passed": self.passed, "outcome": self.outcome, "chainRefusal": self.chain_refusal}


def member(event: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    """``event[key]`` when it is an object, else an empty one (recorded events are data)."""
    value = event.get(key)
    return value if isinstance(value, Mapping) else {}


def _call_key(event: Mapping[str, Any]) -> tuple[str, str, str] | None:
    session, call = event.get("session"), event.get("call")
    call_id = call.get("id") if isinstance(call, Mapping) else None
    if not isinstance(call_id, str):
        return None
    session_id = session.get("id") if isinstance(session, Mapping) else None
    return str(event.get("source")), str(session_id), call_id


def _recorded(before: Mapping[str, Any], later: Sequence[Mapping[str, Any]]) -> Recorded:
    """The record of ``before`` from the events of the same call that follow it."""
    failures = [
        e["failure"]
        for e in later
        if e.get("type") == "hook.failure"
        and e.get("parentEventId") == before.get("id")
        and isinstance(e.get("failure"), Mapping)
    ]
    closed = [f for f in failures if f.get("policy") == "fail-closed"]
    prompted = False
    for event in later:
        kind = event.get("type")
        if kind == "tool.before":
            return Recorded(True, "passed; its changed input was judged again")
        if kind == "tool.permission.request":
            prompted = True
        if kind == "tool.after":
            outcome = str(event.get("outcome", "?"))
            execution = event.get("execution")
            supplied = isinstance(execution, Mapping) and execution.get("reason") == (
                "supplied_result"
            )
            if outcome != "denied":
                return Recorded(True, "result supplied" if supplied else f"ran: {outcome}")
            if prompted:
                return Recorded(True, "refused at the approval prompt")
            if closed:
                backend = str(closed[0].get("backendId", "?"))
                reason = str(closed[0].get("reason", "?"))
                return Recorded(
                    False, f"refused: {backend} failed ({reason}, fail-closed)", backend
                )
            return Recorded(False, "refused")
    if prompted:
        return Recorded(True, "prompted; no outcome recorded")
    return Recorded(None, "no outcome recorded")


# -- what a chain decides ---------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Decision:
    """What one chain settled for a replayed ``tool.before``, in the terms compared."""

    verdict: Literal["deny", "stop", "pass"]
    permission: str
    code: str | None = None
    reason: str | None = None
    backend: str | None = None
    synthetic: bool = False
    input: Any = None
    input_changed: bool = False
    supplied: bool = False
    failures: tuple[str, ...] = ()

    @classmethod
    def of(
        cls, result: HookResult, recorded_input: Any, skipped: Sequence[Diagnostic] = ()
    ) -> Decision:
        """``skipped``: the chain's backends that failed ``hooks/configuration`` (the
        dispatcher's ``configuration_diagnostics``): they are failures of this call too."""
        reached = [d for d in result.diagnostics if d.outcome == "failed"]
        failures = tuple(_failure(d) for d in [*skipped, *reached])
        effective = result.tool_input
        common: dict[str, Any] = {
            "permission": result.permission,
            "input": effective,
            "input_changed": effective != recorded_input,
            "supplied": result.candidate is not None,
            "failures": failures,
        }
        denial = result.denial
        if denial is not None:
            return cls(
                "deny",
                code=denial.code,
                reason=denial.reason,
                backend=denial.backend,
                synthetic=denial.synthetic,
                **common,
            )
        if result.flow == "stop":
            return cls("stop", reason=result.flow_reason, **common)
        return cls("pass", **common)

    @property
    def stops(self) -> bool:
        return self.verdict != "pass"

    def describe(self) -> str:
        if self.verdict == "deny" and self.synthetic:
            text = f"denied: {self.backend} failed (fail-closed)"
        elif self.verdict == "deny":
            code = f" ({self.code})" if self.code else ""
            text = f"denied by {self.backend}{code}: {self.reason}"
        elif self.verdict == "stop":
            text = f"stopped by a backend: {self.reason or 'flow stop'}"
        else:
            text = "passed" + ("" if self.permission == "none" else f" ({self.permission})")
        if self.input_changed and not self.stops:
            text += "; input modified"
        if self.supplied and not self.stops:
            text += "; result supplied"
        return text

    def to_json(self) -> dict[str, Any]:
        return {
            "verdict": self.verdict,
            "permission": self.permission,
            "code": self.code,
            "reason": self.reason,
            "backend": self.backend,
            "synthetic": self.synthetic,
            "inputModified": self.input_changed,
            "input": self.input,
            "supplied": self.supplied,
            "failures": list(self.failures),
            "summary": self.describe(),
        }


def _failure(diagnostic: Diagnostic) -> str:
    """``backend: failure class (policy)``, the client's classification, never its text."""
    kind = diagnostic.failure.value if diagnostic.failure is not None else "failed"
    if diagnostic.subscription < 0:  # hooks/configuration: the backend was skipped
        return f"{diagnostic.backend}: {kind} (at hooks/configuration, skipped)"
    return f"{diagnostic.backend}: {kind} ({diagnostic.policy or 'observe'})"


def judge(
    recorded: Recorded, new: Decision, baseline: Decision | None = None
) -> tuple[Change | None, bool]:
    """The change a replay shows, and whether the record cannot tell (``undetermined``).

    With ``baseline`` the two chains are compared (the module docstring lists what);
    without, the new chain is compared with what the record can say.
    """
    if baseline is not None:
        return _compare(baseline, new), False
    if recorded.passed is None:
        return None, False
    if recorded.passed:
        if new.stops:
            return "newly denied", False
        return ("input modified" if new.input_changed else None), False
    if new.stops:
        if recorded.chain_refusal is not None and not (
            new.synthetic and new.backend == recorded.chain_refusal
        ):
            return "different refusal", False
        return None, False
    if recorded.chain_refusal is not None:
        return "no longer denied", False
    return None, True


def _compare(old: Decision, new: Decision) -> Change | None:
    if old.stops != new.stops:
        return "newly denied" if new.stops else "no longer denied"
    if old.stops:
        if old.verdict != new.verdict or old.synthetic != new.synthetic:
            return "different refusal"
        if old.code != new.code:
            return "different deny code"
        if old.reason != new.reason:
            return "different deny reason"
        if old.backend != new.backend:
            return "denied by another backend"
        return None
    if old.permission != new.permission:
        return "permission changed"
    if old.input != new.input or old.supplied != new.supplied:
        return "input modified"
    return None


# -- the calls to replay ------------------------------------------------------------------


@dataclass
class Call:
    """One recorded ``tool.before`` and what the replay made of it."""

    record: Record
    recorded: Recorded
    capabilities: dict[str, Any]
    new: Decision | None = None
    baseline: Decision | None = None
    change: Change | None = None
    undetermined: bool = False
    undecided: tuple[str, ...] = ()
    """The backend failures that left this call without a decision (a failure is not a
    decision): ``backend: failure class (policy)``, the baseline's prefixed ``baseline``.
    An undecided call has no ``change`` and is not ``undetermined``."""

    @property
    def event(self) -> dict[str, Any]:
        return self.record.event

    def to_json(self) -> dict[str, Any]:
        event = self.event
        tool = member(event, "tool")
        return {
            "change": self.change,
            "undetermined": self.undetermined,
            "undecided": list(self.undecided),
            "eventId": event.get("id"),
            "source": event.get("source"),
            "time": event.get("time"),
            "session": member(event, "session").get("id"),
            "call": member(event, "call").get("id"),
            "tool": tool.get("name"),
            "input": tool.get("input"),
            "recorded": self.recorded.to_json(),
            "baseline": self.baseline.to_json() if self.baseline else None,
            "replayed": self.new.to_json() if self.new else None,
        }


def parse_moment(text: str, now: datetime | None = None) -> datetime:
    """An RFC 3339 time (no offset means UTC), or a duration before ``now`` (``7d``)."""
    found = _DURATION.match(text.strip())
    if found:
        amount, unit = int(found.group(1)), found.group(2)
        return (now or datetime.now(UTC)) - timedelta(**{_UNITS[unit]: amount})
    moment = datetime.fromisoformat(text.strip())  # ValueError: the caller names the option
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def moment_of(record: Record) -> datetime | None:
    """When ``record`` happened: the event's ``time``, else when it was received."""
    for value in (record.event.get("time"), record.received_at):
        if isinstance(value, str):
            try:
                moment = datetime.fromisoformat(value)
            except ValueError:
                continue
            return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)
    return None


def _declared(manifest: object) -> dict[str, Any] | None:
    """What a recorded manifest declares the harness enforces at each intercepted event.

    Entries that are not a well-formed interceptable declaration are left out (the
    dispatcher would refuse them): what remains is what the harness could enforce.
    """
    from ahp_protocol.wire import catalogue
    from ahp_protocol.wire.capabilities import parse_capabilities
    from ahp_protocol.wire.errors import WireError, WireErrors

    if not isinstance(manifest, Mapping) or not isinstance(manifest.get("events"), list):
        return None
    out: dict[str, Any] = {}
    for entry in manifest["events"]:
        if not (isinstance(entry, Mapping) and "intercept" in (entry.get("modes") or ())):
            continue
        event, caps = entry.get("event"), entry.get("capabilities")
        if not (isinstance(event, str) and catalogue.is_interceptable(event)):
            continue
        if not isinstance(caps, Mapping):
            continue
        try:
            parse_capabilities(caps)
        except (WireError, WireErrors):
            continue
        out[str(event)] = dict(caps)
    return out


def replayable(
    records: Iterable[Record],
    *,
    since: datetime | None = None,
    until: datetime | None = None,
    tool: str | None = None,
) -> tuple[list[Call], list[str]]:
    """The recorded ``tool.before`` events to replay (filtered), and notes about them."""
    records = list(records)
    notes: list[str] = []
    manifests: dict[tuple[str, str], dict[str, Any]] = {}
    by_call: dict[tuple[str, str, str], list[tuple[int, Mapping[str, Any]]]] = {}
    for index, record in enumerate(records):
        event = record.event
        if event.get("type") == "session.start":
            session = event.get("session")
            declared = _declared(event.get("manifest"))
            if isinstance(session, Mapping) and declared is not None:
                manifests[(str(event.get("source")), str(session.get("id")))] = declared
        key = _call_key(event) if event.get("type") != "hook.failure" else None
        if key is not None:
            by_call.setdefault(key, []).append((index, event))
    failures: dict[str, list[Mapping[str, Any]]] = {}
    for record in records:
        if record.event.get("type") == "hook.failure":
            parent = record.event.get("parentEventId")
            failures.setdefault(str(parent), []).append(record.event)
    calls: list[Call] = []
    unmanifested = uncovered = 0
    for index, record in enumerate(records):
        event = record.event
        if event.get("type") != "tool.before":
            continue
        tool_field = event.get("tool")
        name = tool_field.get("name") if isinstance(tool_field, Mapping) else None
        if tool is not None and name != tool:
            continue
        moment = moment_of(record)
        if since is not None and (moment is None or moment < since):
            continue
        if until is not None and (moment is None or moment > until):
            continue
        key = _call_key(event)
        later = [e for i, e in by_call.get(key, []) if i > index] if key else []
        later += failures.get(str(event.get("id")), [])
        session = event.get("session")
        session_id = session.get("id") if isinstance(session, Mapping) else None
        declared = manifests.get((str(event.get("source")), str(session_id)))
        if declared is None:
            unmanifested += 1
            declared = {"tool.before": FALLBACK_CAPABILITIES}
        if "tool.before" not in declared:
            uncovered += 1  # no chain decided it then; a replay has nothing to compare
            continue
        calls.append(Call(record, _recorded(event, later), declared))
    if unmanifested:
        notes.append(
            f"{unmanifested} call(s) have no recorded session.start (no manifest): replayed "
            'with the draft\'s minimum grant at tool.before, {"effects": ["deny"]}'
        )
    if uncovered:
        notes.append(
            f"{uncovered} call(s) not replayed: their harness's manifest does not intercept "
            "tool.before, so no backend decided them"
        )
    return calls, notes


# -- running the chains -------------------------------------------------------------------


def for_replay(registration: Registration) -> Registration:
    """``registration`` as the replay runs it: only what intercepts ``tool.before``.

    Observe subscriptions go, and so do intercept subscriptions of other events (each
    kept subscription's selectors are those that cover ``tool.before``, so the
    registration is checked against what the replay sends); a hook left with none goes.
    A hook without subscriptions stays: it is asked ``hooks/configuration`` (whatever
    it observes is never delivered: see :func:`_dispatcher`).
    """
    from ahp_protocol.wire import routing

    hooks = []
    for hook in registration.hooks:
        if not hook.subscriptions:
            hooks.append(hook)
            continue
        kept = []
        for sub in hook.subscriptions:
            selectors = [
                s for s in sub.events if routing.routes([s], sub.mode, "tool.before", "intercept")
            ]
            if selectors:
                kept.append(sub.model_copy(update={"events": selectors}))
        if kept:
            hooks.append(hook.model_copy(update={"subscriptions": kept}))
    return registration.model_copy(update={"hooks": hooks})

"""One backend judge run: the link, what the run has learnt, and the helpers of every group.

:class:`Run` carries what every check group needs: the :class:`~.judge.Judge` (checks,
faults, incidents), the link to the backend (:mod:`.links`), the message builder
(:mod:`.probes`), the official fixtures folder and catalogue, and what the run has
learnt about the backend so far (whether it intercepts tool.before, the events its own
discovery declares, the deny-grant answers that tolerance checks compare against). Its
helpers send one message and record one check: :meth:`Run.send_intercept`,
:meth:`Run.expect_error` (a bad request must get the right JSON-RPC error) and
:meth:`Run.expect_silence` (a notification must get nothing). The check groups are
functions of a ``Run``, one module each (see :mod:`ahp_conformance.backend`).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ahp_conformance.backend.answers import AnswerFindings, error_code, judge_result
from ahp_conformance.backend.judge import Judge, RoundTrip
from ahp_conformance.backend.links import HttpLink, Link
from ahp_conformance.backend.probes import Messages, frame
from ahp_conformance.fixtures import Catalogue
from ahp_conformance.report import Evidence


class Run:
    """One judge run over one link: shared state and the send-and-check helpers."""

    def __init__(
        self,
        judge: Judge,
        link: Link,
        msgs: Messages,
        fixtures: Path,
        per_event: bool,
        catalogue: Catalogue,
    ):
        self.catalogue = catalogue
        self.judge = judge
        self.link = link
        self.msgs = msgs
        self.fixtures = fixtures
        self.per_event = per_event
        self.supports_tool_before: bool | None = None
        """Whether the backend answered a tool.before with a result (False: only -32002)."""
        self.baseline: dict[str, list[Any] | None] = {}
        """Effects per probe label under the ``deny`` grant (what tolerance compares to)."""
        self.events: set[str] = set()
        """Events the backend's own discovery says it intercepts."""
        self.observes: set[str] = set()
        """Events the backend's own discovery says it observes."""
        self.quiet = False

    def judge_answer(
        self, outcome: RoundTrip, event_type: str, grant: Mapping[str, Any]
    ) -> AnswerFindings:
        """:func:`judge_result`, plus: -32002 for an event the backend itself declared
        (hooks/capabilities or hooks/configuration) that it intercepts is no answer."""
        findings = judge_result(outcome, event_type, grant)
        if findings.unsupported and event_type in self.events:
            findings.unsupported = False
            findings.answered = (
                f"-32002 (unsupported event) for {event_type}, which the backend's own "
                "discovery answer says it intercepts"
            )
        return findings

    def catalogue_profile(self, profile_id: str) -> tuple[str, ...]:
        try:
            return self.catalogue.profile(profile_id).requirements
        except KeyError:
            return ()

    def progress(self, text: str) -> None:
        if not self.quiet:
            print(f"ahp-conformance backend: {text}", file=sys.stderr, flush=True)

    def send_intercept(
        self, label: str, grant: Mapping[str, Any], tool: str, kind: str, tool_input: Any
    ) -> tuple[dict[str, Any], RoundTrip, AnswerFindings]:
        """One valid tool.before under ``grant``: the message, what came back, the findings
        (notes whether the backend intercepts tool.before)."""
        eid = self.msgs.new_id(label)
        message = self.msgs.intercept(self.msgs.event(eid, tool, kind, tool_input), grant)
        outcome = self.link.request(frame(message), eid)
        findings = self.judge_answer(outcome, "tool.before", grant)
        if findings.unsupported:
            self.supports_tool_before = self.supports_tool_before or False
        elif outcome.reply is not None and "result" in outcome.reply:
            self.supports_tool_before = True
        return message, outcome, findings

    def expect_error(
        self,
        cid: str,
        title: str,
        requirements: Sequence[str],
        data: bytes,
        rid: Any,
        codes: Sequence[int],
        *,
        check: Callable[[dict[str, Any]], str | None] | None = None,
        precise: bool = False,
    ) -> None:
        """Send a bad request; its answer must be a JSON-RPC error with one of ``codes``
        (``rid`` None: the id could not be recovered, the answer's id must be null).

        ``precise``: a failure names the requirement it breaks (no answer: RPC-002; a
        result: CORE-003, an invalid message accepted; a wrong error: RPC-001) instead of
        ``requirements`` (used for fixture cases, which list everything they cover)."""
        passed = list(requirements)
        # JSON-RPC lets an Invalid Request (-32600) be answered with id null even when the
        # id was readable, so such an answer is collected rather than awaited by id.
        null_ok = -32600 in codes
        if rid is None or self.per_event or null_ok:
            outcome = self.link.collect(data)
            errors = [r for r in outcome.responses if "error" in r]
            mine = [r for r in outcome.responses if rid is not None and r.get("id") == rid]
            reply = mine[0] if mine else errors[0] if errors else None
            if reply is None and outcome.http is not None and outcome.http.status is not None:
                status = outcome.http.status
                if 400 <= status < 500 and -32700 in codes and rid is None:
                    self.judge.check(cid, title, passed, "pass", f"HTTP {status}")
                    return
        else:
            outcome = self.link.request(data, rid)
            reply = outcome.reply
        if reply is None:
            self.judge.check(
                cid,
                title,
                ["AHP-RPC-002"] if precise else requirements,
                "fail",
                outcome.failure or "no JSON-RPC error came back",
                outcome.evidence,
            )
            return
        code = error_code(reply)
        problem = None
        if precise:
            requirements = ["AHP-RPC-001"] if "error" in reply else ["AHP-CORE-003"]
        if code not in codes:
            got = f"error {code}" if "error" in reply else "a result"
            problem = f"expected JSON-RPC error {' or '.join(map(str, codes))}, got {got}"
        elif rid is None and reply.get("id") is not None:
            problem = f"the error's id is {reply.get('id')!r}; an unrecoverable id answers null"
        elif rid is not None and reply.get("id") != rid:
            if not (code == -32600 and reply.get("id") is None):
                problem = f"the error's id is {reply.get('id')!r}, not {rid!r}"
        elif check is not None:
            problem = check(reply)
        if problem is None and precise and code == -32002 and -32002 in codes:
            # the backend does not intercept this event: right, but it shows nothing more
            self.judge.check(cid, title, passed, "unsupported", "-32002: event not intercepted")
            return
        if problem:
            self.judge.check(
                cid, title, requirements, "fail", problem, Evidence.of(data, outcome.received)
            )
        else:
            self.judge.check(cid, title, passed, "pass")

    def expect_silence(
        self,
        cid: str,
        title: str,
        requirements: Sequence[str],
        data: bytes,
        *,
        precise: bool = False,
    ) -> None:
        """Send a notification: nothing may come back (stdio), or 202/204 with no body (HTTP).

        ``precise``: a failure names AHP-RPC-002 (or AHP-HTTP-001 for a status) only."""
        outcome = self.link.collect(data)
        passed = list(requirements)
        if precise:
            requirements = ["AHP-RPC-002"]
        evidence = Evidence.of(data, outcome.received or outcome.failure)
        if isinstance(self.link, HttpLink):
            reply = outcome.http
            if outcome.failure or reply is None:
                self.judge.check(cid, title, requirements, "fail", outcome.failure or "", evidence)
            elif reply.body:
                self.judge.check(
                    cid,
                    title,
                    [*requirements, "AHP-HTTP-001"],
                    "fail",
                    f"a notification was answered with HTTP {reply.status} and a body",
                    evidence,
                )
            elif reply.status not in (202, 204):
                self.judge.check(
                    cid,
                    title,
                    ["AHP-HTTP-001"],
                    "fail",
                    f"a notification got HTTP {reply.status}, not 202 or 204",
                    evidence,
                )
            else:
                self.judge.check(cid, title, passed, "pass")
            return
        if outcome.responses:
            self.judge.check(
                cid,
                title,
                requirements,
                "fail",
                f"a notification was answered ({len(outcome.responses)} response(s))",
                evidence,
            )
        elif outcome.failure:
            self.judge.check(cid, title, requirements, "fail", outcome.failure, evidence)
        else:
            self.judge.check(cid, title, passed, "pass")

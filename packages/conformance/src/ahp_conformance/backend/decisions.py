"""Check groups ``tool-before.*`` (decisions), ``tolerance.*`` and ``duplicate.*``.

- :func:`decisions`: every :data:`~.probes.PROBES` input (``rm -rf /``, an SSH key,
  ``curl | sh``, a force push, ...) as a tool.before under each of
  :data:`~.probes.GRANTS` (narrowed to ``deny``, then ``deny``+``message``, then every
  effect). Each answer must be a result (AHP-RPC-002, AHP-TB-001) with
  ``protocolVersion`` (AHP-VER-001) and an ``effects`` array of valid effects
  (AHP-DEC-001), only advertised ones (AHP-CAP-001); -32002 from a backend that does not
  intercept tool.before makes the group ``unsupported``. :func:`judge_results` turns one
  batch of answers into those checks (``--per-event`` uses it too).
- :func:`tolerance`: unknown envelope, params, event, session and capabilities fields
  (AHP-CORE-003) and reverse-DNS extension keys (AHP-EXT-001) change no answer compared
  with the ``deny`` grant's; the very same request twice gets the same answer
  (AHP-CORE-004).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ahp_conformance.backend.answers import AnswerFindings
from ahp_conformance.backend.judge import RoundTrip
from ahp_conformance.backend.probes import GRANTS, PROBES, frame
from ahp_conformance.backend.run import Run
from ahp_conformance.report import Evidence, Status


def decisions(run: Run) -> None:
    """Every probe input under every grant, judged per grant (``tool-before.GRANT.*``)."""
    run.progress("tool.before decisions under narrowed and wider grants")
    for grant_name, grant in GRANTS.items():
        results: list[tuple[str, dict[str, Any], RoundTrip, AnswerFindings]] = []
        for label, tool, kind, tool_input in PROBES:
            message, outcome, findings = run.send_intercept(label, grant, tool, kind, tool_input)
            results.append((label, message, outcome, findings))
            if grant_name == "deny":
                run.baseline[label] = findings.effects_list
        judge_results(run, f"tool-before.{grant_name}", f"grant {grant_name}", grant, results)


def judge_results(
    run: Run,
    prefix: str,
    what: str,
    grant: Mapping[str, Any],
    results: Sequence[tuple[str, dict[str, Any], RoundTrip, AnswerFindings]],
) -> None:
    """One batch of tool.before answers as checks ``PREFIX.answered``, ``.version``,
    ``.effects``, ``.advertised`` (the first failure of each as its evidence)."""
    judge = run.judge
    answered = [r for r in results if r[3].answered is None]
    unsupported = [r for r in answered if r[3].unsupported]
    failed = [r for r in results if r[3].answered is not None]
    if failed:
        label, _, outcome, findings = failed[0]
        judge.check(
            f"{prefix}.answered",
            f"every valid tool.before ({what}) gets a result",
            ["AHP-RPC-002", "AHP-TB-001"],
            "fail",
            f"{label}: {findings.answered}",
            outcome.evidence,
        )
    elif len(unsupported) == len(results):
        judge.check(
            f"{prefix}.answered",
            f"every valid tool.before ({what}) gets a result",
            ["AHP-RPC-002", "AHP-TB-001"],
            "unsupported",
            "the backend answers -32002: it does not intercept tool.before",
        )
    else:
        judge.check(
            f"{prefix}.answered",
            f"every valid tool.before ({what}) gets a result",
            ["AHP-RPC-002", "AHP-TB-001"],
            "pass",
            f"{len(results) - len(unsupported)} results, {len(unsupported)} -32002",
        )
    judged = [r for r in answered if not r[3].unsupported]
    for key, requirement, title in (
        ("version", "AHP-VER-001", "every result carries protocolVersion 'draft'"),
        ("effects", "AHP-DEC-001", "every result has an effects array of valid effects"),
        ("advertised", "AHP-CAP-001", "every effect returned was advertised in the grant"),
    ):
        cid = f"{prefix}.{key}"
        full = f"{title} ({what})"
        if not judged:
            if failed:
                judge.check(
                    cid,
                    full,
                    [requirement],
                    "fail",
                    f"not judged: no result came back ({failed[0][3].answered})",
                    failed[0][2].evidence,
                )
            else:
                judge.check(cid, full, [requirement], "n/a", "no result to judge (-32002)")
            continue
        bad = [r for r in judged if getattr(r[3], key) is not None]
        if key == "advertised":
            bad = [r for r in bad if r[3].effects is None]
        if bad:
            label, _, outcome, findings = bad[0]
            judge.check(
                cid,
                full,
                [requirement],
                "fail",
                f"{label}: {getattr(findings, key)}",
                outcome.evidence,
            )
        else:
            judge.check(cid, full, [requirement], "pass", f"{len(judged)} results")


def tolerance(run: Run) -> None:
    """Unknown fields and extension keys change no answer; a duplicate gets the same one."""
    run.progress("unknown fields, extension keys, duplicate delivery")
    if run.supports_tool_before is not True:
        for cid, req in (
            ("tolerance.unknown-fields", "AHP-CORE-003"),
            ("tolerance.extensions", "AHP-EXT-001"),
            ("duplicate.same-answer", "AHP-CORE-004"),
        ):
            status: Status = "unsupported" if run.supports_tool_before is False else "fail"
            run.judge.check(
                cid,
                "judged on tool.before results",
                [req],
                status,
                "the backend gave no tool.before result to compare against",
            )
        return
    variants: list[tuple[str, str, Callable[[dict[str, Any]], None]]] = [
        ("envelope", "AHP-CORE-003", lambda m: m.update({"org.example.envelope": {"x": 1}})),
        ("params", "AHP-CORE-003", lambda m: m["params"].update({"futureField": [1, 2]})),
        ("event", "AHP-CORE-003", lambda m: m["params"]["event"].update({"futureField": "x"})),
        (
            "capabilities",
            "AHP-CORE-003",
            lambda m: m["params"]["capabilities"].update({"futureGrant": {"x": True}}),
        ),
        (
            "session",
            "AHP-CORE-003",
            lambda m: m["params"]["event"]["session"].update({"futureField": 1}),
        ),
        (
            "event-extensions",
            "AHP-EXT-001",
            lambda m: m["params"]["event"].update(
                {"extensions": {"org.example.trace": {"span": "abc"}}}
            ),
        ),
        (
            "params-extensions",
            "AHP-EXT-001",
            lambda m: m["params"].update({"extensions": {"org.example.hint": {"v": 1}}}),
        ),
    ]
    by_req: dict[str, list[tuple[str, str | None, Evidence | None]]] = {}
    for name, requirement, change in variants:
        for label, tool, kind, tool_input in PROBES[:2]:
            eid = run.msgs.new_id(f"{name}-{label}")
            message = run.msgs.intercept(
                run.msgs.event(eid, tool, kind, tool_input), GRANTS["deny"]
            )
            change(message)
            outcome = run.link.request(frame(message), eid)
            findings = run.judge_answer(outcome, "tool.before", GRANTS["deny"])
            problem = findings.answered
            if findings.unsupported:
                problem = "answered -32002 where the same event without the field got a result"
            if problem is None and findings.effects_list != run.baseline.get(label):
                problem = (
                    f"effects {findings.effects_list} differ from the same event without "
                    f"the field: {run.baseline.get(label)}"
                )
            by_req.setdefault(requirement, []).append(
                (f"{name} ({label})", problem, outcome.evidence)
            )
    for requirement, cid, title in (
        (
            "AHP-CORE-003",
            "tolerance.unknown-fields",
            "unknown envelope, params, event, session and capabilities fields are ignored",
        ),
        (
            "AHP-EXT-001",
            "tolerance.extensions",
            "reverse-DNS extension keys (event and params) are accepted and change nothing",
        ),
    ):
        bad = [r for r in by_req.get(requirement, []) if r[1] is not None]
        if bad:
            run.judge.check(
                cid, title, [requirement], "fail", f"{bad[0][0]}: {bad[0][1]}", bad[0][2]
            )
        else:
            run.judge.check(cid, title, [requirement], "pass")
    # duplicate delivery: the very same request twice
    eid = run.msgs.new_id("duplicate")
    label, tool, kind, tool_input = PROBES[1]
    message = run.msgs.intercept(
        run.msgs.event(eid, tool, kind, tool_input), GRANTS["deny+message"]
    )
    first = run.link.request(frame(message), eid)
    second = run.link.request(frame(message), eid)
    v1 = run.judge_answer(first, "tool.before", GRANTS["deny+message"])
    v2 = run.judge_answer(second, "tool.before", GRANTS["deny+message"])
    title = "the same request delivered twice gets an equivalent answer"
    problem = v1.answered or v2.answered
    if problem is None and (v1.unsupported, v1.effects_list) != (
        v2.unsupported,
        v2.effects_list,
    ):
        problem = f"first effects {v1.effects_list}, then {v2.effects_list}"
    if problem:
        run.judge.check(
            "duplicate.same-answer",
            title,
            ["AHP-CORE-004"],
            "fail",
            problem,
            Evidence.of(first.sent, first.received + b"\n" + second.received),
        )
    else:
        run.judge.check("duplicate.same-answer", title, ["AHP-CORE-004"], "pass")

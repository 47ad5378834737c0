"""Run-wide checks, judged last on everything the run collected.

``framing.rpc`` (every frame UTF-8 JSON-RPC with its request's id, AHP-RPC-001),
``framing.answered`` (every request answered in time, AHP-RPC-002), ``framing.stdio``
(stdout protocol lines only, one per line, AHP-STDIO-001) or ``framing.http`` (200 and
JSON bodies within 4 MiB, AHP-HTTP-001), from the faults the links recorded on the
:class:`~.judge.Judge`; ``errors.no-exception-text`` (no exception text in any error,
-32004 included: it cannot be provoked in a well-behaved backend, so whatever errors
came back are judged); and ``capabilities.grant``, a harness requirement (``n/a``).
A framing check with nothing received at all fails: it judged nothing.
"""

from __future__ import annotations

import json
import re

from ahp_conformance.backend.answers import error_code
from ahp_conformance.backend.run import Run
from ahp_conformance.report import Evidence

EXCEPTION_TEXT = re.compile(
    r"Traceback \(most recent call last\)|File \"[^\"]*\", line \d+|"
    r"\b[A-Z]\w*(?:Error|Exception)\b:|\n\s+at \S+ \(|panicked at"
)
"""What exception text looks like (Python tracebacks, ``SomeError:``, JS/Rust stacks)."""


def summary(run: Run, stdio: bool) -> None:
    """The run-wide checks, from what the whole run recorded (last)."""
    judge = run.judge
    groups: list[tuple[str, str, str]] = [
        (
            "framing.rpc",
            "AHP-RPC-001",
            "every frame is UTF-8 JSON-RPC 2.0 and every response echoes its request's id",
        ),
        (
            "framing.answered",
            "AHP-RPC-002",
            "every request is answered within the deadline; the backend stays up",
        ),
    ]
    if stdio:
        groups.append(
            (
                "framing.stdio",
                "AHP-STDIO-001",
                "stdout holds only protocol lines: one JSON-RPC object per line, nothing else",
            )
        )
    else:
        groups.append(
            (
                "framing.http",
                "AHP-HTTP-001",
                "every request gets 200 and a JSON body; bodies stay within 4 MiB",
            )
        )
    for cid, requirement, title in groups:
        pool = judge.unanswered if requirement == "AHP-RPC-002" else judge.problems
        bad = [p for p in pool if p.requirement == requirement]
        if not bad and not judge.received_any:
            judge.check(cid, title, [requirement], "fail", "not judged: the backend sent nothing")
        elif bad:
            first = bad[0]
            more = f" (and {len(bad) - 1} more)" if len(bad) > 1 else ""
            judge.check(
                cid,
                title,
                [requirement],
                "fail",
                first.text + more,
                Evidence.of(first.sent, first.received or None),
            )
        else:
            judge.check(cid, title, [requirement], "pass")
    leaks = []
    for sent, response in judge.errors_seen:
        error = response.get("error")
        text = json.dumps(error, ensure_ascii=False) if error is not None else ""
        if EXCEPTION_TEXT.search(text) or EXCEPTION_TEXT.search(text.replace("\\n", "\n")):
            leaks.append((sent, response))
    internal = [r for _, r in judge.errors_seen if error_code(r) == -32004]
    title = "errors (-32004 included) carry fixed messages, never exception text"
    if leaks:
        sent, response = leaks[0]
        judge.check(
            "errors.no-exception-text",
            title,
            ["AHP-RPC-001"],
            "fail",
            f"error {error_code(response)} carries exception text",
            Evidence.of(sent, response),
        )
    elif judge.errors_seen:
        judge.check(
            "errors.no-exception-text",
            title,
            ["AHP-RPC-001"],
            "pass",
            f"{len(judge.errors_seen)} errors, {len(internal)} of them -32004",
        )
    else:
        judge.check("errors.no-exception-text", title, ["AHP-RPC-001"], "n/a", "no error seen")
    judge.check(
        "capabilities.grant",
        "every intercept request carries capabilities.effects with deny for tool.before",
        ["AHP-CAP-002"],
        "n/a",
        "a harness requirement: every grant this judge sends has deny for tool.before",
    )

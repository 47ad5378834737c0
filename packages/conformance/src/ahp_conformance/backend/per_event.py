"""Check group ``per-event.*``: what stdio ``per_event`` changes (``--per-event``).

Every message starts a process, so this reduced set replaces the other groups after
discovery: two tool.before decisions (judged as in :mod:`.decisions`), a notification
that gets nothing, and a parse error that gets -32700. Each process's framing (at most
one response, stdout only protocol) and exit status are judged by
:class:`.links.PerEventLink` as it reads them.
"""

from __future__ import annotations

from typing import Any

from ahp_conformance.backend.answers import AnswerFindings
from ahp_conformance.backend.decisions import judge_results
from ahp_conformance.backend.judge import RoundTrip
from ahp_conformance.backend.probes import GRANTS, PROBES, frame
from ahp_conformance.backend.run import Run


def per_event(run: Run) -> None:
    """What ``per_event`` changes: one process per message, framing, exit status."""
    run.progress("per_event: one process per message (framing, stdout, exit)")
    results: list[tuple[str, dict[str, Any], RoundTrip, AnswerFindings]] = []
    for label, tool, kind, tool_input in PROBES[:2]:
        _, outcome, findings = run.send_intercept(
            label, GRANTS["deny+message"], tool, kind, tool_input
        )
        results.append((label, {}, outcome, findings))
    judge_results(
        run, "per-event.tool-before", "one process per event", GRANTS["deny+message"], results
    )
    run.expect_silence(
        "per-event.notify",
        "a valid hooks/observe gets no response",
        ["AHP-RPC-002"],
        frame(run.msgs.observe(run.msgs.event(run.msgs.new_id("observe")))),
    )
    run.expect_error(
        "per-event.parse-error",
        "a frame that is not JSON gets -32700",
        ["AHP-RPC-001"],
        b"not json\n",
        None,
        [-32700],
    )

"""Observers cannot decide: a slow, hanging, crashing or garbage-writing observer changes nothing.

One scripted session of three ``read_file`` calls (a 200 KB file, a file the
deny-list refuses, the 200 KB file again) runs through ``ahp-harness run`` with two
backends: ``ahp-backend denylist`` (stdio persistent, intercepting ``tool.before``)
and an observer of ``tool.before`` and ``tool.after`` (bodies included, so each
``tool.after`` is larger than a pipe buffer). The observer is well behaved, hangs,
is slower than the observe bound, is slow within it, dies, writes garbage or answers
with a bad HTTP status, over stdio persistent (``backends/b_observer.py``) and HTTP
(``misbehave.py``). For every observer:

- the decisions are the well-behaved ones, call by call: the transcript (permission,
  denier, synthetic flag, host decision, executed, outcome) and the audit log's
  ``tool.before`` results are the same table;
- the harness stays bounded: every observe exchange in the audit log took at most the
  observe bound (2 s) plus a margin, the time between two calls' records is at most
  one bound per observed event plus a margin, and so is the whole run;
- the misbehaviour really happened (the test can fail): the expected failure class
  shows up in the audit log's observe exchanges, or the observer was respawned, or was
  slow, or (well behaved) every event arrived and was ``delivered``.
"""

from __future__ import annotations

import itertools
import sys
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent
OBSERVER = HERE / "backends" / "b_observer.py"

OBSERVE_BOUND_S = 2.0  # the harness's observe bound (ahp_protocol's OBSERVE_TIMEOUT_S)
MARGIN_S = 2.0  # scheduling slack on a loaded 2-core machine
OBSERVED_PER_CALL = 2  # tool.before and tool.after
PER_CALL_BOUND_S = OBSERVED_PER_CALL * OBSERVE_BOUND_S + MARGIN_S
START_UP_BUDGET_S = 15.0  # interpreter, imports, the deny-list's start-up

DENIER = "com.example.e2e.denylist"
WATCHER = "com.example.e2e.observer"
BIG = "x" * 99 + "\n"  # 100-byte lines, 2000 of them: a 200 KB file
RULES = r"""
[[rules]]
reason = "secret.txt is off limits."
code = "com.example.e2e.secret"
tool = "read_file"
[rules.input]
path = '^secret\.txt$'
"""
STEPS = [
    {"tool": "read_file", "input": {"path": "big.txt"}},
    {"tool": "read_file", "input": {"path": "secret.txt"}},
    {"tool": "read_file", "input": {"path": "big.txt"}},
]
# (permission, denied_by, synthetic, host_decision, executed, outcome) per call
EXPECTED = [
    ("none", None, False, "allow", True, "ok"),
    ("deny", DENIER, False, "deny", False, "denied"),
    ("none", None, False, "allow", True, "ok"),
]


@dataclass(frozen=True)
class Case:
    """One observer: its transport, what it does, and the trace it must leave."""

    transport: str  # "persistent" (b_observer.py) or "http" (misbehave.py)
    mode: str
    failure: str | None = None  # a failure class some observe exchange must show
    respawned: bool = False  # the record file must show more than one process
    delay_ms: int | None = None
    slowest_at_least_ms: float = 0.0  # some observe exchange must have taken this long

    @property
    def id(self) -> str:
        return f"{self.transport}-{self.mode}"


CASES = [
    Case("persistent", "ok"),
    Case("persistent", "hang", failure="deadline_exceeded"),
    Case("persistent", "slow", failure="deadline_exceeded", delay_ms=3000),
    Case("persistent", "crash", respawned=True),
    Case("persistent", "garbage"),
    Case("http", "ok"),
    Case("http", "hang", failure="deadline_exceeded"),
    Case("http", "late", delay_ms=600, slowest_at_least_ms=500),  # slow, within the bound
    Case("http", "crash", failure="connect_failed"),
    Case("http", "observe-body", failure="malformed_output"),
    Case("http", "http-500", failure="http_status"),
]


def observer_hook(e2e: Any, case: Case) -> dict[str, Any]:
    subscriptions = [e2e.observe("tool.before", "tool.after", content="body")]
    if case.transport == "http":
        command = e2e.misbehave(case.mode, record="observer.jsonl", delay_ms=case.delay_ms)
        return e2e.hook(WATCHER, command, "http", subscriptions)
    argv = [str(OBSERVER), case.mode, "--record", str(e2e.path("observer.jsonl"))]
    if case.delay_ms is not None:
        argv += ["--delay-ms", str(case.delay_ms)]
    entry: dict[str, Any] = {
        "id": WATCHER,
        "transport": {
            "type": "stdio",
            "command": sys.executable,
            "args": argv,
            "lifecycle": "persistent",
        },
        "subscriptions": subscriptions,
    }
    return entry


def decisions(run: Any) -> list[tuple[Any, ...]]:
    return [
        (
            c["hook_permission"],
            c["denied_by"],
            c["synthetic_denial"],
            c["host_decision"],
            c["executed"],
            c["outcome"],
        )
        for c in run.transcript
    ]


def seconds(stamp: str) -> float:
    return datetime.fromisoformat(stamp).timestamp()


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_an_observer_changes_no_decision_and_latency_stays_bounded(e2e: Any, case: Case) -> None:
    (e2e.workspace / "big.txt").write_text(BIG * 2000, "utf-8")
    (e2e.workspace / "secret.txt").write_text("classified\n", "utf-8")
    denier = e2e.hook(DENIER, e2e.denylist(RULES), "persistent", [e2e.intercept("tool.before")])
    # The observer is registered first: the order of hooks must not matter either.
    registration = e2e.registration(observer_hook(e2e, case), denier)
    run = e2e.run(registration=registration, steps=STEPS).ok()

    # Decisions: exactly the well-behaved table, in the transcript and the audit log.
    assert decisions(run) == EXPECTED, run.explain()
    before = run.hooks("tool.before")
    assert [h["permission"] for h in before] == ["none", "deny", "none"], run.explain()
    assert before[1]["denial"]["backend"] == DENIER
    assert before[1]["denial"]["synthetic"] is False
    assert not any(h["denial"] and h["denial"]["backend"] == WATCHER for h in run.hooks())
    assert "3 tool calls, 1 refused" in run.stdout, run.explain()

    # Bounded: each observe exchange, the time between calls, the whole run.
    observed = [x for x in run.exchanges() if x["backend"] == WATCHER]
    assert len(observed) == 2 * len(STEPS), run.explain()
    assert all(x["mode"] == "observe" for x in observed)
    slowest = max(x["latencyMs"] for x in observed)
    assert slowest <= (OBSERVE_BOUND_S + MARGIN_S) * 1000, run.explain()
    stamps = [seconds(r["time"]) for r in run.records("call")]
    gaps = [b - a for a, b in itertools.pairwise(stamps)]
    assert all(gap <= PER_CALL_BOUND_S for gap in gaps), (gaps, run.explain())
    assert run.elapsed <= START_UP_BUDGET_S + len(STEPS) * PER_CALL_BOUND_S, run.explain()

    # The misbehaviour happened.
    failures = {x.get("failure") for x in observed if x["outcome"] == "failed"}
    record = e2e.json_lines(e2e.path("observer.jsonl"))
    if case.mode == "ok":
        assert failures == set(), run.explain()
        if case.transport == "http":  # misbehave.py records each message
            got = [e2e.event_of(m).get("type") for m in e2e.received(e2e.path("observer.jsonl"))]
        else:  # b_observer.py records each line's event type
            got = [r["type"] for r in record if r.get("event") == "line"]
        assert got == ["tool.before", "tool.after"] * len(STEPS), record
    if case.failure is not None:
        assert case.failure in failures, (failures, run.explain())
        assert all(x.get("policy") is None for x in observed)  # observers have no policy
    assert slowest >= case.slowest_at_least_ms, run.explain()
    if case.respawned:
        starts = {r["pid"] for r in record if r.get("event") == "start"}
        assert len(starts) > 1, record
    if case.mode == "garbage":
        assert any(r.get("event") == "line" for r in record), record

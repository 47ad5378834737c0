"""Promise 2: no effect, and even ``allow``, never bypasses the host.

A chain of three interceptors on ``tool.before`` and ``tool.permission.request``
where *every* backend answers the same thing: no effect, or ``allow`` (our
server kit and ``effects.py`` answering ``allow`` outright, and our
``ahp-backend approval`` holding a grant for every call). Over each transport,
one session proposes six calls; the host's own layers must decide each of
them exactly as they would without AHP:

==========================  ==========================  ==========================
call                        no effect                   allow
==========================  ==========================  ==========================
``fine.txt`` (allow rule)   runs                        runs
host ``deny`` rule          refused (rule)              refused (rule)
managed ``deny`` rule       refused (managed), although a user rule allows it
explicit ``ask`` rule       prompts; rejected: refused  prompts; rejected: refused
sandbox escape              refused (sandbox)           refused (sandbox)
ordinary prompt (the mode)  prompts; rejected: refused  suppressed: runs
==========================  ==========================  ==========================

The last row is the one thing ``allow`` may do: suppress the *ordinary* prompt.
The transcript's ``hook_permission`` shows that the backends really answered
what the row says, and their record files show they were asked about every call.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

TRANSPORTS = ("persistent", "per_event", "http")
EVENTS = ("tool.before", "tool.permission.request")
ALLOW = [{"type": "allow"}]

PERMISSIONS = r"""
[[rules]]
decision = "allow"
tool = "write_file"
reason = "writes are fine in general"

[[rules]]
decision = "deny"
tool = "write_file"
glob = "denied-by-rule.txt"
reason = "the user's own deny rule"

[[rules]]
decision = "ask"
tool = "write_file"
glob = "ask-first.txt"
reason = "the user wants to be asked"

[[rules]]
decision = "allow"
tool = "shell"
pattern = '^touch managed\.txt$'
reason = "the user would allow this; the managed policy does not"
"""

MANAGED = r"""
[[rules]]
decision = "deny"
kind = "shell"
pattern = 'managed\.txt'
reason = "the organisation's managed rule"
"""


def write(path: str) -> dict[str, Any]:
    return {"tool": "write_file", "input": {"path": path, "content": f"{path} was written"}}


def shell(command: str) -> dict[str, Any]:
    return {"tool": "shell", "input": {"command": command}}


STEPS = [
    write("fine.txt"),  # call_1: a user allow rule
    write("denied-by-rule.txt"),  # call_2: a user deny rule
    shell("touch managed.txt"),  # call_3: a managed deny rule (a user rule allows it)
    write("ask-first.txt"),  # call_4: an explicit ask rule; the prompt is rejected
    write("../escape.txt"),  # call_5: outside the workspace (a user rule allows writes)
    shell("touch ordinary.txt"),  # call_6: no rule: the mode's ordinary prompt
]


def grant_everything(store: Path) -> None:
    """``ahp-backend approval grant``: every call of every tool is pre-approved."""
    argv = [sys.executable, "-m", "ahp_backends.cli", "approval", "grant"]
    argv += ["--store", str(store), "--tool", "*", "--match", ".*"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)
    assert done.returncode == 0, done.stderr


def chain(e2e: Any, answer: str, transport: str) -> tuple[list[dict[str, Any]], list[Path]]:
    """Three interceptors that all answer ``answer`` (``none`` or ``allow``)."""
    store = e2e.path("grants.db")
    approval = e2e.ahp_backend("approval", "--store", str(store))
    if answer == "allow":
        grant_everything(store)
        if transport == "http":
            first = e2e.effects(ALLOW, record="first.jsonl")
        else:
            first = e2e.scripted_kit([{"event": "*", "effects": ALLOW}], record="first.jsonl")
        last = e2e.effects(ALLOW, record="last.jsonl")
    else:
        first = (
            e2e.misbehave("ok", record="first.jsonl")
            if transport == "http"
            else e2e.scripted_kit([], record="first.jsonl")
        )
        last = e2e.effects([], record="last.jsonl")
    subscriptions = [e2e.intercept(*EVENTS, policy="fail-closed")]
    hooks = [
        e2e.hook("com.example.e2e.first", first, transport, subscriptions),
        e2e.hook("com.example.e2e.approval", approval, transport, subscriptions),
        e2e.hook("com.example.e2e.last", last, transport, subscriptions),
    ]
    return hooks, [first.record, last.record]


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize("answer", ["none", "allow"], ids=["no-effect", "allow"])
def test_no_effect_never_bypasses_the_host(e2e: Any, answer: str, transport: str) -> None:
    hooks, records = chain(e2e, answer, transport)
    run = e2e.run(
        registration=e2e.registration(*hooks),
        steps=STEPS,
        permissions=PERMISSIONS,
        managed=MANAGED,
        approve="never",
    ).ok()
    calls = {c["call_id"]: c for c in run.transcript}
    assert sorted(calls) == [f"call_{i}" for i in range(1, 7)], run.explain()

    # The backends really answered `answer` to every call, and none failed.
    for call in calls.values():
        assert call["hook_permission"] == answer, run.explain()
        assert call["denied_by"] is None and call["synthetic_denial"] is False
    assert not [e for e in run.exchanges() if e["outcome"] == "failed"], run.explain()
    for record in records:
        asked = e2e.deliveries(e2e.received(record), "hooks/intercept", "tool.before")
        assert [e["call"]["id"] for e in asked] == list(calls), record

    files = {p.name for p in e2e.workspace.iterdir()}

    # call_1: the user's allow rule: runs (the host and the backends refuse nothing else).
    assert calls["call_1"]["outcome"] == "ok" and calls["call_1"]["executed"] is True
    assert "fine.txt" in files

    # call_2: the user's deny rule still refuses.
    assert _refused(calls["call_2"], "rule")
    assert "denied-by-rule.txt" not in files

    # call_3: the managed deny rule still refuses (over a user allow rule, too).
    assert _refused(calls["call_3"], "managed")
    assert "managed.txt" not in files

    # call_4: the explicit ask rule still prompts; the rejected prompt refuses.
    ask = calls["call_4"]
    assert ask["approval"] == "rejected", run.explain()
    assert ask["outcome"] == "denied" and ask["executed"] is False
    assert "ask-first.txt" not in files
    for record in records:  # the prompt's event went through the chain, answered `answer`
        prompted = e2e.deliveries(e2e.received(record), "hooks/intercept", EVENTS[1])
        assert "call_4" in [e["call"]["id"] for e in prompted], record
    (request,) = [h for h in run.hooks(EVENTS[1]) if h["toolInput"].get("path") == "ask-first.txt"]
    assert request["permission"] == answer

    # call_5: the sandbox escape is still refused.
    assert _refused(calls["call_5"], "sandbox")
    assert not (e2e.workspace.parent / "escape.txt").exists()

    # call_6: the ordinary prompt: no effect leaves it (rejected: refused); allow suppresses it.
    ordinary = calls["call_6"]
    if answer == "none":
        assert ordinary["approval"] == "rejected", run.explain()
        assert ordinary["outcome"] == "denied" and ordinary["executed"] is False
        assert "ordinary.txt" not in files
    else:
        assert ordinary["approval"] == "not_needed", run.explain()
        assert ordinary["outcome"] == "ok" and ordinary["executed"] is True
        assert "ordinary.txt" in files
        assert ordinary["host_stage"] == "mode"


def _refused(call: dict[str, Any], stage: str) -> bool:
    return (
        call["outcome"] == "denied"
        and call["executed"] is False
        and call["host_decision"] == "deny"
        and call["host_stage"] == stage
        and call["approval"] == "not_needed"
    )

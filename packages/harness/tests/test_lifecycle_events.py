"""The lifecycle events of a whole session, as recording backends receive them.

A scripted session (read, write with approval, a denied shell, a supplied result, a
sandbox escape, a rejected prompt) runs through the real gate and session with three
real backend processes: a policy (``scripted_kit.py``: deny ``rm -rf``, supply a
result), a recorder (``scripted_kit.py``: observes ``*`` and intercepts the session's
interceptable events with no effect) and a failing backend (``misbehave.py garbage``,
fail-open, at ``turn.start``) so a ``hook.failure`` is emitted too.

Checked, interactive and not:

- every message each backend received validates against the official JSON Schemas
  (``intercept-request`` / ``observe-notification``);
- each event type is emitted: session.start (with the manifest), turn.start,
  model.request.before, model.response.after, tool.before, tool.permission.request,
  tool.permission.resolved, tool.after, file.changed, hook.failure, turn.end,
  session.end, in a sensible order;
- exactly one ``tool.after`` per resolved call, with the right outcome and execution
  (executed; denied -> skipped/policy; supplied -> skipped/supplied_result);
- per-request capabilities are honest and narrowed: only effects legal at each event
  (the draft's table, written out here), never ``flow continue``, and ``ask`` only
  at ``tool.before`` of an interactive session.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import pytest
from ahp_harness.audit import Transcript
from ahp_harness.manifest import manifest
from ahp_harness.models.scripted import ScriptedDriver, parse_script
from ahp_harness.session import Session

if TYPE_CHECKING:  # the helpers live in this folder's conftest.py (fixture ``kit``)
    from conftest import HarnessKit

POLICY = "com.example.policy"
RECORDER = "com.example.recorder"
FAILING = "com.example.failing"

# The draft's per-event bounds (section 4.2): the effects a harness may ever grant,
# the modify target and the flow operations legal at each interceptable event.
LEGAL_EFFECTS: dict[str, set[str]] = {
    "session.start": {"inject", "message"},
    "turn.start": {"deny", "modify", "inject", "flow", "message"},
    "model.request.before": {"deny", "modify", "inject", "return", "flow", "message"},
    "model.response.after": {"modify", "flow", "message"},
    "tool.before": {"deny", "allow", "ask", "modify", "inject", "flow", "return", "message"},
    "tool.after": {"modify", "inject", "flow", "message"},
    "tool.permission.request": {"allow", "deny", "modify", "flow", "message"},
}
LEGAL_TARGET = {
    "turn.start": "prompt",
    "model.request.before": "request",
    "model.response.after": "response",
    "tool.before": "input",
    "tool.after": "output",
    "tool.permission.request": "input",
}
LEGAL_FLOW = {"stop"}  # "continue" also at tool.after, but this harness has no loop for it

SCRIPT = [
    {"tool": "read_file", "input": {"path": "README.md"}},  # call_1: runs (reads allowed)
    {"tool": "write_file", "input": {"path": "notes.txt", "content": "n\n"}},  # call_2: approved
    {"tool": "shell", "input": {"command": "rm -rf build"}},  # call_3: denied by the policy
    {"tool": "read_file", "input": {"path": "supplied.txt"}},  # call_4: supplied result
    {"tool": "write_file", "input": {"path": "../escape.txt", "content": "x"}},  # call_5: sandbox
    {"tool": "shell", "input": {"command": "echo hi"}},  # call_6: the prompt is rejected
    {"say": "Done."},
]
EXPECTED_AFTER = {
    "call_1": ("ok", {"status": "executed"}),
    "call_2": ("ok", {"status": "executed"}),
    "call_3": ("denied", {"status": "skipped", "reason": "policy"}),
    "call_4": ("ok", {"status": "skipped", "reason": "supplied_result"}),
    "call_5": ("denied", {"status": "skipped", "reason": "policy"}),
    "call_6": ("denied", {"status": "skipped", "reason": "policy"}),
}
PROMPTED = ("call_2", "call_6")
SESSION_INTERCEPTS = [
    "session.start",
    "turn.start",
    "model.request.before",
    "model.response.after",
    "tool.before",
    "tool.after",
    "tool.permission.request",
]


class WriteOnlyApprover:
    """Approves writes, rejects everything else."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    async def __call__(self, tool: str, tool_input: Mapping[str, Any], reason: str) -> bool:
        self.asked.append(tool)
        return tool == "write_file"


def schema_problems(
    official_schema: Callable[[str, Any], list[str]], messages: list[dict[str, Any]]
) -> list[Any]:
    problems = []
    for msg in messages:
        schema = {
            "hooks/intercept": "intercept-request.schema.json",
            "hooks/observe": "observe-notification.schema.json",
        }[msg["method"]]
        errors = official_schema(schema, msg)
        if errors:
            problems.append((event_of(msg)["type"], errors[:3]))
    return problems


def only_new_items(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The messages, each model.request.before keeping only the items its predecessor
    (same method) did not send. The conversation only grows (checked here), so every
    envelope and every item is still validated, once, not once per later request."""
    out = []
    sent: dict[str, list[Any]] = {}
    for msg in messages:
        event = event_of(msg)
        if event["type"] == "model.request.before":
            before = sent.get(msg["method"], [])
            items = event["items"]
            assert items[: len(before)] == before
            sent[msg["method"]] = items
            msg = json.loads(json.dumps(msg))
            msg["params"]["event"]["items"] = items[len(before) :]
        out.append(msg)
    return out


def event_of(msg: Mapping[str, Any]) -> dict[str, Any]:
    event: dict[str, Any] = msg["params"]["event"]
    return event


async def play(kit: HarnessKit, *, interactive: bool) -> tuple[Any, WriteOnlyApprover]:
    (kit.workspace / "README.md").write_text("hello\n")
    policy = kit.scripted(
        POLICY,
        [
            {
                "event": "tool.before",
                "contains": {"command": "rm -rf"},
                "effects": [{"type": "deny", "reason": "no recursive deletes"}],
            },
            {
                "event": "tool.before",
                "input": {"path": "supplied.txt"},
                "effects": [{"type": "return", "value": "supplied text"}],
            },
        ],
    )
    recorder = kit.scripted(RECORDER, [], intercept=SESSION_INTERCEPTS, observe=["*"])
    failing = kit.misbehave(FAILING, "garbage", policy="fail-open", events=["turn.start"])
    approver = WriteOnlyApprover()
    async with kit.open_gate([policy, recorder, failing], interactive=interactive) as run:
        run.gate.approve = approver
        session = Session(
            gate=run.gate,
            driver=ScriptedDriver(parse_script(SCRIPT)),
            transcript=Transcript(kit.root / "transcript.jsonl"),
            interactive=interactive,
            permission_mode="default",
        )
        summary = await session.run("tidy up")
        session.transcript.close()
    return summary, approver


@pytest.mark.anyio
@pytest.mark.parametrize("interactive", [True, False], ids=["interactive", "non-interactive"])
async def test_a_session_as_the_backends_receive_it(
    kit: HarnessKit, official_schema: Callable[[str, Any], list[str]], interactive: bool
) -> None:
    summary, approver = await play(kit, interactive=interactive)
    assert [c.call_id for c in summary.calls] == list(EXPECTED_AFTER)
    assert approver.asked == ["write_file", "shell"]
    received = kit.recorded(RECORDER)
    policy_received = kit.recorded(POLICY)

    # 1. Every message validates against the official schemas (the non-interactive run
    # differs only in its manifest and capabilities: there, those messages are checked).
    checked = [
        m
        for m in received + policy_received
        if interactive or event_of(m)["type"] in ("session.start", "tool.before")
    ]
    assert schema_problems(official_schema, only_new_items(checked)) == []

    # 2. Every lifecycle event is emitted, in order.
    observed = [event_of(m) for m in received if m["method"] == "hooks/observe"]
    types = [e["type"] for e in observed]
    for kind in (
        "session.start",
        "turn.start",
        "model.request.before",
        "model.response.after",
        "tool.before",
        "tool.permission.request",
        "tool.permission.resolved",
        "tool.after",
        "file.changed",
        "hook.failure",
        "turn.end",
        "session.end",
    ):
        assert kind in types, kind
    assert types[0] == "session.start"
    assert types[-2:] == ["turn.end", "session.end"]
    assert types.index("turn.start") < types.index("model.request.before")
    start = observed[0]
    assert start["manifest"] == manifest(interactive=interactive)
    assert start["permissionMode"] == "default"
    (failure,) = [e for e in observed if e["type"] == "hook.failure"]
    (turn_start,) = [e for e in observed if e["type"] == "turn.start"]
    assert failure["parentEventId"] == turn_start["id"]
    assert failure["failure"] == {
        "backendId": FAILING,
        "reason": failure["failure"]["reason"],
        "policy": "fail-open",
    }
    # One model request per reply, each answered.
    assert types.count("model.request.before") == types.count("model.response.after") >= 7

    # 3. Exactly one tool.after per resolved call, with the right outcome and execution.
    afters = [e for e in observed if e["type"] == "tool.after"]
    assert Counter(e["call"]["id"] for e in afters) == Counter(list(EXPECTED_AFTER))
    for event in afters:
        outcome, execution = EXPECTED_AFTER[event["call"]["id"]]
        assert (event["outcome"], event["execution"]) == (outcome, execution)
    # Per call: before -> permission request -> resolved -> after; call ids stable.
    for call_id in EXPECTED_AFTER:
        seen = {e["id"]: e["type"] for e in observed if e.get("call", {}).get("id") == call_id}
        order = list(seen.values())  # a short-circuited interceptor also observes the event
        prompted = call_id in PROMPTED
        expected = ["tool.before", "tool.after"]
        if prompted:
            expected[1:1] = ["tool.permission.request", "tool.permission.resolved"]
        assert order == expected, call_id
    resolved = {e["call"]["id"]: e for e in observed if e["type"] == "tool.permission.resolved"}
    assert {k: (v["decision"], v["decidedBy"]) for k, v in resolved.items()} == {
        "call_2": ("allow", "user"),
        "call_6": ("deny", "user"),
    }
    (changed,) = [e for e in observed if e["type"] == "file.changed"]
    (write_after,) = [e for e in afters if e["call"]["id"] == "call_2"]
    assert changed["parentEventId"] == write_after["id"]
    assert [(c["path"], c["operation"]) for c in changed["changes"]] == [
        (str(kit.workspace / "notes.txt"), "create")
    ]
    assert (kit.workspace / "notes.txt").read_text() == "n\n"
    assert not (kit.root / "escape.txt").exists()

    # 4. Per-request capabilities: honest, narrowed per event, ask only where answerable.
    intercepts = [m for m in received + policy_received if m["method"] == "hooks/intercept"]
    assert {event_of(m)["type"] for m in intercepts} >= set(SESSION_INTERCEPTS)
    for msg in intercepts:
        kind = event_of(msg)["type"]
        caps = msg["params"]["capabilities"]
        assert set(caps["effects"]) <= LEGAL_EFFECTS[kind], kind
        assert ("ask" in caps["effects"]) is (interactive and kind == "tool.before"), kind
        assert set(caps.get("modify", {})) <= {LEGAL_TARGET.get(kind)}, kind
        assert set(caps.get("flow", {}).get("operations", [])) <= LEGAL_FLOW, kind
        assert "remainingContinuations" not in caps.get("flow", {})
        if "return" in caps["effects"]:
            assert kind == "tool.before"
    # The state sent to the recorder carries the policy's earlier decisions.
    supplied = [
        m
        for m in received
        if m["method"] == "hooks/intercept"
        and event_of(m)["type"] == "tool.before"
        and event_of(m)["call"]["id"] == "call_4"
    ]
    assert supplied[0]["params"]["state"]["candidate"] == {"value": "supplied text"}
    # After the policy's deny, the recorder gets tool.before only as an observation.
    denied = [
        m["method"]
        for m in received
        if event_of(m)["type"] == "tool.before" and event_of(m)["call"]["id"] == "call_3"
    ]
    assert "hooks/intercept" not in denied
    assert "hooks/observe" in denied
    # And the session wrote one transcript line per resolved call.
    transcript = (kit.root / "transcript.jsonl").read_text().splitlines()
    assert [json.loads(line)["call_id"] for line in transcript] == list(EXPECTED_AFTER)

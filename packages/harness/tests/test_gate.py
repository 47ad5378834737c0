"""The precedence through the REAL gate, with real backends as processes.

Backends (persistent stdio, started once for this module): ``backends/scripted_kit.py``
(our server kit answering scripted effects, chosen by a marker in the tool input, and
recording every line it receives), and the protocol package's ``misbehave.py``
(``hang`` past a 300 ms deadline, ``garbage``) under ``fail-closed`` and ``fail-open``.
Host permissions come from real TOML files; tools really run in a temporary
workspace; the approver answers approved or rejected and counts its prompts.

What this file shows:

- a cross-section of the precedence table (hook permission x user rule x managed rule x
  mode x approval x sandbox): executed or not (the file on disk), the prompt shown or
  not, the transcript fields and exactly one ``tool.after`` with the right execution;
- a modified input is re-validated: an invalid one is refused and never run, a valid
  one is what runs and what the transcript records, and the host's layers judge it;
- a supplied result (``return``) skips execution but never approval;
- ``tool.permission.request``: ``allow`` answers only the ordinary prompt, ``deny``
  refuses, a modification is judged again (and goes through ``tool.before`` again:
  ``test_prompt_rewrite.py``);
- backend ``message`` effects reach the user; injections reach the model's context
  (from ``session.start`` and ``tool.after``, and, as advertised, from ``tool.before``);
- what ``tool.after`` is granted for a refused call (inject, flow stop) takes effect,
  and a fail-closed failure there stops the turn (the draft: "fail-closed denies and
  stops the chain");
- sandbox escapes (``..``, an absolute path outside, symlinks out, a shell reading an
  inherited secret) are refused or neutralised even when every layer says allow;
- ``ask`` is never granted where nobody can answer a prompt.
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import AsyncExitStack
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from ahp_harness.audit import Transcript
from ahp_harness.hooks import new_id
from ahp_harness.models.base import Reply
from ahp_harness.models.scripted import ScriptedDriver, parse_script
from ahp_harness.session import UI, Session
from ahp_protocol.client import Hooks

if TYPE_CHECKING:  # the helpers live in this folder's conftest.py (fixtures ``kit``, ``kit_class``)
    from conftest import GateRun, HarnessKit

POLICY = "com.example.policy"
HANG = "com.example.hang"
GARBAGE = "com.example.garbage"
GARBAGE_OPEN = "com.example.garbage-open"

ALLOW = {"type": "allow"}


def before(marker: str, *effects: Mapping[str, Any], key: str = "path") -> dict[str, Any]:
    return {"event": "tool.before", "contains": {key: marker}, "effects": list(effects)}


def on_request(marker: str, *effects: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "event": "tool.permission.request",
        "contains": {"path": marker},
        "effects": list(effects),
    }


POLICY_RULES = [
    # The precedence table: the hook's permission is chosen by the file name.
    before("hook-allow", ALLOW),
    before("hook-ask", {"type": "ask"}),
    before(
        "hook-deny", {"type": "deny", "reason": "writes are frozen", "code": "com.example.freeze"}
    ),
    before("hook-stop", {"type": "flow", "operation": "stop", "reason": "the session is over"}),
    # Modifications.
    before(
        "modify-invalid",
        {"type": "modify", "target": "input", "operation": "replace", "value": {"path": "x.txt"}},
        ALLOW,
    ),
    before(
        "modify-extra",
        {"type": "modify", "target": "input", "operation": "merge", "value": {"mode": "0777"}},
    ),
    before(
        "modify-valid",
        {
            "type": "modify",
            "target": "input",
            "operation": "merge",
            "value": {"path": "redirected.txt", "content": "rewritten by the policy\n"},
        },
    ),
    before(
        "modify-escape",
        {
            "type": "modify",
            "target": "input",
            "operation": "merge",
            "value": {"path": "../modify-escaped.txt"},
        },
        ALLOW,
    ),
    before(
        "modify-protected",
        {
            "type": "modify",
            "target": "input",
            "operation": "merge",
            "value": {"path": "protected/moved.txt"},
        },
        ALLOW,
    ),
    # Supplied results.
    before("supply-allow", {"type": "return", "value": "supplied by the policy"}, ALLOW),
    before("supply", {"type": "return", "value": "supplied by the policy"}),
    # Messages.
    before(
        "message",
        {"type": "message", "text": "policy says hi"},
        {"type": "message", "text": "and again"},
    ),
    # Everything allows the escapes (the sandbox alone must refuse them).
    before("escape-", ALLOW),
    {**before("escape-secret", ALLOW, key="command"), "tool": "shell"},
    # tool.permission.request.
    on_request("perm-allow", ALLOW),
    on_request("perm-deny", {"type": "deny", "reason": "not on a Friday"}),
    on_request(
        "perm-modify",
        {
            "type": "modify",
            "target": "input",
            "operation": "merge",
            "value": {"content": "approved content\n"},
        },
    ),
    on_request(
        "perm-invalid",
        {
            "type": "modify",
            "target": "input",
            "operation": "replace",
            "value": {"path": "perm-invalid.txt"},
        },
    ),
    on_request(
        "perm-escape",
        {
            "type": "modify",
            "target": "input",
            "operation": "merge",
            "value": {"path": "../perm-escaped.txt"},
        },
    ),
]

MODE_NAME = {"allow": "accept-edits", "ask": "default", "deny": "read-only"}


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory, kit_class: type[HarnessKit]) -> HarnessKit:
    return kit_class(tmp_path_factory.mktemp("gate"))


@pytest.fixture(scope="module")
async def backends(anyio_backend: str, shared: HarnessKit) -> AsyncIterator[dict[str, Hooks]]:
    """One Hooks (one backend each) per backend, shared by every test of this module."""
    policy = shared.scripted(
        POLICY,
        POLICY_RULES,
        intercept=["tool.before", "tool.permission.request"],
        observe=["tool.after", "tool.permission.resolved", "file.changed"],
    )
    hooks = {
        POLICY: policy,
        HANG: shared.misbehave(HANG, "hang", timeout_ms=300),
        GARBAGE: shared.misbehave(GARBAGE, "garbage"),
        GARBAGE_OPEN: shared.misbehave(GARBAGE_OPEN, "garbage", policy="fail-open"),
    }
    async with AsyncExitStack() as stack:
        out = {}
        for hook_id, hook in hooks.items():
            out[hook_id] = await stack.enter_async_context(shared.open_hooks([hook]))
        yield out


def gate_for(
    shared: HarnessKit,
    dispatcher: Hooks | None,
    name: str,
    *,
    rule: str | None = None,
    managed: str | None = None,
    mode: str = "ask",
    approve: bool = True,
    user_rules: Sequence[Mapping[str, str]] | None = None,
) -> tuple[GateRun, Path]:
    """A gate over a fresh workspace ``<root>/<name>/ws`` with permissions from TOML there."""
    workspace = shared.new_workspace(name)
    rules = list(user_rules or [])
    if rule:
        rules.append({"decision": rule, "tool": "write_file", "reason": f"user rule: {rule}"})
    admin = [{"decision": managed, "kind": "file_write", "reason": f"managed: {managed}"}]
    permissions = shared.permissions(
        rules=rules or None,
        managed=admin if managed else None,
        mode=MODE_NAME[mode],
        where=workspace.parent,
    )
    return shared.gate(dispatcher, permissions, approve=approve, workspace=workspace), workspace


def observed(shared: HarnessKit, call_id: str, event_type: str) -> list[dict[str, Any]]:
    """The ``event_type`` observations the policy backend received for one call."""
    out = []
    for msg in shared.recorded(POLICY):
        event = msg.get("params", {}).get("event", {})
        if (
            msg.get("method") == "hooks/observe"
            and event.get("type") == event_type
            and event.get("call", {}).get("id") == call_id
        ):
            out.append(event)
    return out


def audit_calls(run: GateRun) -> list[dict[str, Any]]:
    return [record for kind, record in run.audit if kind == "call"]


# -- the precedence table through the gate ---------------------------------------------

# hook: the backend's answer at tool.before ("hang"/"garbage": misbehave.py, fail-closed;
# "garbage-open": the same under fail-open). rule/managed: a user/managed rule for
# write_file ("-": none). mode: the mode's default for write_file (allow: accept-edits,
# ask: default, deny: read-only). answer: the approver's answer, if asked. Then the
# expectation, by hand: ran or not, the host's decision and the stage that made it.
TABLE = """
hook          rule   managed  mode   answer    sandbox  ->  ran  decision  stage
none          -      -        ask    approved  ok       ->  yes  ask       mode
none          -      -        ask    rejected  ok       ->  no   ask       mode
none          -      -        allow  rejected  ok       ->  yes  allow     mode
none          -      -        deny   approved  ok       ->  no   deny      mode
allow         -      -        ask    rejected  ok       ->  yes  allow     mode
allow         -      -        deny   approved  ok       ->  no   deny      mode
allow         ask    -        ask    rejected  ok       ->  no   ask       rule
allow         ask    -        allow  approved  ok       ->  yes  ask       rule
allow         allow  ask      allow  rejected  ok       ->  no   ask       managed
allow         deny   -        allow  approved  ok       ->  no   deny      rule
allow         allow  deny     allow  approved  ok       ->  no   deny      managed
allow         allow  allow    allow  approved  escape   ->  no   deny      sandbox
ask           -      -        allow  approved  ok       ->  yes  ask       ahp-ask
ask           -      -        allow  rejected  ok       ->  no   ask       ahp-ask
ask           allow  -        allow  rejected  ok       ->  no   ask       ahp-ask
ask           -      allow    allow  approved  ok       ->  yes  ask       ahp-ask
ask           deny   -        allow  approved  ok       ->  no   deny      rule
deny          allow  allow    allow  approved  ok       ->  no   deny      ahp
deny          -      -        ask    approved  ok       ->  no   deny      ahp
deny          -      -        allow  approved  escape   ->  no   deny      ahp
stop          allow  -        allow  approved  ok       ->  no   deny      ahp
hang          allow  allow    allow  approved  ok       ->  no   deny      ahp
garbage       -      -        ask    approved  ok       ->  no   deny      ahp
garbage-open  -      -        allow  rejected  ok       ->  yes  allow     mode
garbage-open  -      -        ask    rejected  ok       ->  no   ask       mode
none          allow  ask      allow  approved  ok       ->  yes  ask       managed
none          allow  -        ask    rejected  ok       ->  yes  allow     rule
none          ask    allow    allow  rejected  ok       ->  no   ask       rule
none          deny   allow    allow  approved  ok       ->  no   deny      rule
none          deny   ask      ask    approved  ok       ->  no   deny      rule
none          allow  deny     allow  approved  ok       ->  no   deny      managed
none          -      -        ask    approved  escape   ->  no   deny      sandbox
"""


def parse_table(text: str) -> list[tuple[Any, ...]]:
    rows = []
    for line in text.strip().splitlines()[1:]:
        hook, rule, managed, mode, answer, sandbox, _, ran, decision, stage = line.split()
        rows.append(
            (
                hook,
                None if rule == "-" else rule,
                None if managed == "-" else managed,
                mode,
                answer == "approved",
                sandbox == "escape",
                ran == "yes",
                decision,
                stage,
            )
        )
    return rows


ROWS = parse_table(TABLE)
ROW_IDS = [
    f"{i:02d}-{h}-rule={r}-managed={m}-mode={mo}-{'approved' if a else 'rejected'}"
    f"{'-escape' if e else ''}"
    for i, (h, r, m, mo, a, e, *_rest) in enumerate(ROWS)
]

DISPATCHER = {"hang": HANG, "garbage": GARBAGE, "garbage-open": GARBAGE_OPEN}
HOOK_PERMISSION = {"stop": "none", "hang": "deny", "garbage": "deny", "garbage-open": "none"}
DENIED_BY = {"deny": POLICY, "hang": HANG, "garbage": GARBAGE}


@pytest.mark.anyio
@pytest.mark.parametrize(
    (
        "hook",
        "rule",
        "managed",
        "mode",
        "approve",
        "escape",
        "executed",
        "decision",
        "stage",
    ),
    ROWS,
    ids=ROW_IDS,
)
async def test_precedence_row(
    shared: HarnessKit,
    backends: dict[str, Hooks],
    request: pytest.FixtureRequest,
    hook: str,
    rule: str | None,
    managed: str | None,
    mode: str,
    approve: bool,
    escape: bool,
    executed: bool,
    decision: str,
    stage: str,
) -> None:
    dispatcher = backends[DISPATCHER.get(hook, POLICY)]
    name = request.node.callspec.id
    run, workspace = gate_for(
        shared, dispatcher, name, rule=rule, managed=managed, mode=mode, approve=approve
    )
    filename = f"hook-{hook}.txt"
    path = f"../{filename}" if escape else filename
    try:
        record = await run.gate.call("write_file", {"path": path, "content": "hello\n"})
    finally:
        run.sandbox.close()

    # Executed or not: the disk says so.
    assert record.executed is executed
    assert (workspace / filename).exists() is (executed and not escape)
    if executed:
        assert (workspace / filename).read_text() == "hello\n"
    assert not (workspace.parent / filename).exists()
    assert record.outcome == ("ok" if executed else "denied")
    # The prompt was shown exactly when the host's decision was ask.
    assert len(run.approver.calls) == (1 if decision == "ask" else 0)
    assert record.approval == (
        ("approved" if approve else "rejected") if decision == "ask" else "not_needed"
    )
    # The transcript line says who decided what.
    line = record.transcript()
    assert (line["host_decision"], line["host_stage"]) == (decision, stage)
    assert line["hook_permission"] == HOOK_PERMISSION.get(hook, hook)
    assert line["denied_by"] == DENIED_BY.get(hook)
    assert line["synthetic_denial"] is (hook in ("hang", "garbage"))
    assert line["executed"] is executed
    assert line["input"] == {"path": path, "content": "hello\n"}
    if hook in ("hang", "garbage"):  # which backend failed, and its class: not its output
        failure = {"hang": "deadline_exceeded", "garbage": "malformed_output"}[hook]
        assert (
            line["reason"] == f"Required policy backend {DENIED_BY[hook]} unavailable ({failure})."
        )
    elif hook == "deny":
        assert line["reason"] == "writes are frozen"
    elif decision == "ask" and not approve:
        assert "rejected" in line["reason"]
    assert audit_calls(run) == [line]
    if dispatcher is backends[POLICY]:
        await run.barrier()
        (after,) = observed(shared, record.call_id, "tool.after")
        status = "executed" if executed else "skipped"
        assert after["execution"]["status"] == status
        assert after["outcome"] == record.outcome
        if not executed:
            assert after["execution"]["reason"] == "policy"
        assert len(observed_changes(shared, after["id"])) == (1 if executed else 0)


@pytest.mark.anyio
async def test_a_synthetic_denial_is_audited_apart_from_an_explicit_one(
    shared: HarnessKit, backends: dict[str, Hooks]
) -> None:
    run, _ = gate_for(shared, backends[GARBAGE], "audit-synthetic", mode="allow")
    synthetic = await run.gate.call("write_file", {"path": "a.txt", "content": "x"})
    run.sandbox.close()
    run2, _ = gate_for(shared, backends[POLICY], "audit-explicit", mode="allow")
    explicit = await run2.gate.call("write_file", {"path": "hook-deny.txt", "content": "x"})
    run2.sandbox.close()
    assert (synthetic.synthetic_denial, explicit.synthetic_denial) == (True, False)
    (hook_s,) = [r for k, r in run.audit if k == "hook"]
    (hook_e,) = [r for k, r in run2.audit if k == "hook"]
    assert hook_s["denial"]["synthetic"] is True
    assert hook_s["denial"]["backend"] == GARBAGE
    assert hook_s["diagnostics"][0]["failure"] and hook_s["diagnostics"][0]["policy"] == (
        "fail-closed"
    )
    assert hook_e["denial"] == {
        "reason": "writes are frozen",
        "code": "com.example.freeze",
        "backend": POLICY,
        "subscription": 0,
        "synthetic": False,
    }
    exchanges = [r for k, r in run.audit if k == "exchange"]
    assert any(e.get("policy") == "fail-closed" for e in exchanges)


# -- a modified input is re-validated --------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("marker", "effective"),
    [
        ("modify-invalid", {"path": "x.txt"}),  # replace dropped the required content
        ("modify-extra", {"path": "modify-extra.txt", "content": "hi\n", "mode": "0777"}),
    ],
)
async def test_an_invalid_modified_input_is_refused_not_run(
    shared: HarnessKit, backends: dict[str, Hooks], marker: str, effective: dict[str, Any]
) -> None:
    run, workspace = gate_for(
        shared, backends[POLICY], marker, rule="allow", managed="allow", mode="allow"
    )
    record = await run.gate.call("write_file", {"path": f"{marker}.txt", "content": "hi\n"})
    run.sandbox.close()
    assert record.executed is False
    assert record.outcome == "denied"
    assert record.reason.startswith("modified input is invalid")
    assert (record.host_decision, record.host_stage) == ("deny", "ahp")
    assert record.input == effective  # the transcript shows what the backend made of it
    assert list(workspace.iterdir()) == []
    assert run.approver.calls == []
    await run.barrier()
    (after,) = observed(shared, record.call_id, "tool.after")
    assert after["execution"] == {"status": "skipped", "reason": "policy"}


@pytest.mark.anyio
async def test_a_valid_modified_input_is_what_runs_and_what_is_recorded(
    shared: HarnessKit, backends: dict[str, Hooks]
) -> None:
    run, workspace = gate_for(shared, backends[POLICY], "modify-valid", mode="allow")
    record = await run.gate.call("write_file", {"path": "modify-valid.txt", "content": "mine\n"})
    run.sandbox.close()
    effective = {"path": "redirected.txt", "content": "rewritten by the policy\n"}
    assert record.executed is True
    assert not (workspace / "modify-valid.txt").exists()
    assert (workspace / "redirected.txt").read_text() == "rewritten by the policy\n"
    assert record.transcript()["input"] == effective
    await run.barrier()
    (after,) = observed(shared, record.call_id, "tool.after")
    assert after["tool"]["input"] == effective
    (changed,) = observed_changes(shared, after["id"])
    assert [c["path"] for c in changed["changes"]] == [str(workspace / "redirected.txt")]


def observed_changes(shared: HarnessKit, parent_id: str) -> list[dict[str, Any]]:
    out = []
    for msg in shared.recorded(POLICY):
        event = msg.get("params", {}).get("event", {})
        if event.get("type") == "file.changed" and event.get("parentEventId") == parent_id:
            out.append(event)
    return out


@pytest.mark.anyio
async def test_a_modified_input_is_judged_by_the_sandbox_again(
    shared: HarnessKit, backends: dict[str, Hooks]
) -> None:
    run, workspace = gate_for(
        shared, backends[POLICY], "modify-escape", rule="allow", managed="allow", mode="allow"
    )
    record = await run.gate.call("write_file", {"path": "modify-escape.txt", "content": "x\n"})
    run.sandbox.close()
    assert record.executed is False
    assert (record.host_decision, record.host_stage) == ("deny", "sandbox")
    assert record.input["path"] == "../modify-escaped.txt"
    assert not (workspace.parent / "modify-escaped.txt").exists()
    assert list(workspace.iterdir()) == []


@pytest.mark.anyio
async def test_a_modified_input_is_judged_by_the_host_rules_again(
    shared: HarnessKit, backends: dict[str, Hooks]
) -> None:
    protect = [{"decision": "deny", "glob": "protected/*", "reason": "protected folder"}]
    run, workspace = gate_for(
        shared, backends[POLICY], "modify-protected", mode="allow", user_rules=protect
    )
    record = await run.gate.call("write_file", {"path": "modify-protected.txt", "content": "x"})
    run.sandbox.close()
    assert record.executed is False
    assert (record.host_decision, record.host_stage) == ("deny", "rule")
    assert list(workspace.iterdir()) == []


# -- a supplied result skips execution, never approval ----------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("marker", "managed", "approve", "delivered", "prompted"),
    [
        ("supply", None, False, False, True),  # the prompt is rejected: not delivered
        ("supply", None, True, True, True),  # approved: delivered, the tool never runs
        ("supply-allow", None, False, True, False),  # allow suppresses the ordinary prompt
        ("supply-allow", "deny", True, False, False),  # managed deny: never delivered
    ],
)
async def test_a_supplied_result_still_needs_approval(
    shared: HarnessKit,
    backends: dict[str, Hooks],
    marker: str,
    managed: str | None,
    approve: bool,
    delivered: bool,
    prompted: bool,
) -> None:
    name = f"{marker}-{managed}-{approve}"
    run, workspace = gate_for(
        shared, backends[POLICY], name, managed=managed, mode="ask", approve=approve
    )
    record = await run.gate.call("write_file", {"path": f"{marker}.txt", "content": "real\n"})
    run.sandbox.close()
    assert record.executed is False  # never the tool itself
    assert list(workspace.iterdir()) == []
    assert len(run.approver.calls) == (1 if prompted else 0)
    assert record.supplied is delivered
    assert record.outcome == ("ok" if delivered else "denied")
    assert (record.output == "supplied by the policy") is delivered
    await run.barrier()
    (after,) = observed(shared, record.call_id, "tool.after")
    reason = "supplied_result" if delivered else "policy"
    assert after["execution"] == {"status": "skipped", "reason": reason}
    assert "fileChanges" not in after
    assert observed_changes(shared, after["id"]) == []


# -- tool.permission.request -------------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("marker", "rule", "approve", "prompted", "executed", "decided_by"),
    [
        ("perm-allow", None, False, False, True, "hook"),  # answers the ordinary prompt
        ("perm-allow", "ask", False, True, False, "user"),  # never an explicit ask rule
        ("perm-deny", None, True, False, False, "hook"),
        ("perm-modify", None, True, True, True, "user"),
    ],
)
async def test_the_permission_request_boundary(
    shared: HarnessKit,
    backends: dict[str, Hooks],
    marker: str,
    rule: str | None,
    approve: bool,
    prompted: bool,
    executed: bool,
    decided_by: str,
) -> None:
    name = f"{marker}-{rule}"
    run, workspace = gate_for(shared, backends[POLICY], name, rule=rule, approve=approve)
    record = await run.gate.call("write_file", {"path": f"{marker}.txt", "content": "orig\n"})
    run.sandbox.close()
    assert len(run.approver.calls) == (1 if prompted else 0)
    assert record.executed is executed
    assert (workspace / f"{marker}.txt").exists() is executed
    await run.barrier()
    (resolved,) = observed(shared, record.call_id, "tool.permission.resolved")
    assert resolved["decidedBy"] == decided_by
    assert resolved["decision"] == ("allow" if executed else "deny")
    if marker == "perm-modify":
        # The user was asked about, and approved, the modified input; that is what ran.
        assert run.approver.calls[0][1] == {
            "path": "perm-modify.txt",
            "content": "approved content\n",
        }
        assert (workspace / "perm-modify.txt").read_text() == "approved content\n"
        assert record.transcript()["input"]["content"] == "approved content\n"
    if marker == "perm-deny":
        assert record.denied_by == POLICY
        assert record.reason == "not on a Friday"


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("marker", "effective", "stage", "why"),
    [
        ("perm-escape", {"path": "../perm-escaped.txt"}, "sandbox", "outside the workspace"),
        ("perm-invalid", {"path": "perm-invalid.txt"}, "ahp", "modified input is invalid"),
    ],
)
async def test_a_permission_request_modification_is_judged_again(
    shared: HarnessKit,
    backends: dict[str, Hooks],
    marker: str,
    effective: dict[str, str],
    stage: str,
    why: str,
) -> None:
    run, workspace = gate_for(shared, backends[POLICY], marker)
    record = await run.gate.call("write_file", {"path": f"{marker}.txt", "content": "x\n"})
    run.sandbox.close()
    assert record.executed is False
    assert record.outcome == "denied"
    assert run.approver.calls == []  # refused before anyone is asked
    assert not (workspace.parent / "perm-escaped.txt").exists()
    assert list(workspace.iterdir()) == []
    assert {k: record.input[k] for k in effective} == effective
    await run.barrier()
    (resolved,) = observed(shared, record.call_id, "tool.permission.resolved")
    assert resolved["decision"] == "deny"
    (after,) = observed(shared, record.call_id, "tool.after")
    assert after["execution"] == {"status": "skipped", "reason": "policy"}
    # The transcript says why it was refused (not the prompt that was never shown).
    line = record.transcript()
    assert why in line["reason"]
    assert (line["host_decision"], line["host_stage"]) == ("deny", stage)


# -- messages and injections -------------------------------------------------------------


@pytest.mark.anyio
async def test_backend_messages_are_shown_to_the_user(
    shared: HarnessKit, backends: dict[str, Hooks]
) -> None:
    run, _ = gate_for(shared, backends[POLICY], "message", mode="allow")
    record = await run.gate.call("write_file", {"path": "message.txt", "content": "x"})
    run.sandbox.close()
    assert record.executed is True
    assert run.reporter.messages == ["policy says hi", "and again"]
    assert run.reporter.records == [record]
    assert record.transcript()["messages"] == ["policy says hi", "and again"]


class RecordingDriver:
    """A scripted driver that keeps every conversation it was sent."""

    provider = "script"
    model_id = "script:recording"

    def __init__(self, steps: list[dict[str, Any]]) -> None:
        self.inner = ScriptedDriver(parse_script(steps))
        self.seen: list[list[dict[str, Any]]] = []

    async def respond(self, conversation: Sequence[Mapping[str, Any]]) -> Reply:
        self.seen.append([dict(m) for m in conversation])
        return await self.inner.respond(conversation)

    async def aclose(self) -> None:
        return None


class NotingUI(UI):
    def __init__(self) -> None:
        self.notes: list[str] = []
        self.said: list[str] = []

    def note(self, text: str) -> None:
        self.notes.append(text)

    def say(self, text: str) -> None:
        self.said.append(text)


def injected(text: str) -> dict[str, Any]:
    part = {"id": new_id("part"), "kind": "text", "mediaType": "text/plain", "text": text}
    return {
        "type": "inject",
        "target": "context",
        "operation": "append",
        "deliverAt": "now",
        "value": [
            {"id": new_id("msg"), "role": "system", "parts": [{**part, "selection": "body"}]}
        ],
    }


def texts(conversation: Sequence[Mapping[str, Any]]) -> list[str]:
    return [p.get("text", "") for m in conversation for p in m.get("parts", [])]


@pytest.mark.anyio
async def test_injections_reach_the_model_and_messages_the_user(kit: HarnessKit) -> None:
    (kit.workspace / "README.md").write_text("hello\n")
    rules = [
        {
            "event": "session.start",
            "effects": [injected("house rules: be brief"), {"type": "message", "text": "welcome"}],
        },
        {"event": "tool.after", "effects": [injected("note: README is stale")]},
    ]
    hook = kit.scripted(POLICY, rules, intercept=["session.start", "tool.after"])
    driver = RecordingDriver([{"tool": "read_file", "input": {"path": "README.md"}}])
    ui = NotingUI()
    async with kit.open_gate([hook], kit.permissions()) as run:
        session = Session(
            gate=run.gate,
            driver=driver,
            transcript=Transcript(None),
            interactive=True,
            permission_mode="default",
            ui=ui,
        )
        summary = await session.run("look around")
    first, second, *_ = driver.seen
    assert "house rules: be brief" in texts(first)
    assert "note: README is stale" not in texts(first)
    # After the tool call: its result, then the injection from tool.after.
    later = texts(second)
    assert "house rules: be brief" in later
    assert later.index("hello\n") < later.index("note: README is stale")
    assert summary.calls[0].injections and summary.calls[0].executed
    assert "[backend] welcome" in ui.notes


async def play_session(
    kit: HarnessKit, rules: list[dict[str, Any]], steps: list[dict[str, Any]]
) -> tuple[Any, RecordingDriver]:
    hook = kit.scripted(POLICY, rules, intercept=["tool.before", "tool.after"])
    driver = RecordingDriver(steps)
    async with kit.open_gate([hook], kit.permissions()) as run:
        session = Session(
            gate=run.gate,
            driver=driver,
            transcript=Transcript(None),
            interactive=True,
            permission_mode="default",
        )
        summary = await session.run("go")
    return summary, driver


@pytest.mark.anyio
async def test_an_injection_at_tool_before_reaches_the_model(kit: HarnessKit) -> None:
    """tool.before advertises inject: an accepted injection must reach the context."""
    (kit.workspace / "README.md").write_text("hello\n")
    rules = [{"event": "tool.before", "effects": [injected("before: mind the README")]}]
    steps = [{"tool": "read_file", "input": {"path": "README.md"}}]
    summary, driver = await play_session(kit, rules, steps)
    assert summary.calls[0].executed
    assert "before: mind the README" in texts(driver.seen[-1])


@pytest.mark.anyio
async def test_tool_after_effects_on_a_denied_call_are_honoured(kit: HarnessKit) -> None:
    """tool.after of a refused call is granted inject and flow stop: both must take effect."""
    rules = [
        {"event": "tool.before", "tool": "shell", "effects": [{"type": "deny", "reason": "no"}]},
        {
            "event": "tool.after",
            "tool": "shell",
            "effects": [
                injected("after: the shell is off limits"),
                {"type": "flow", "operation": "stop", "reason": "enough"},
            ],
        },
    ]
    steps = [
        {"tool": "shell", "input": {"command": "ls"}},
        {"tool": "write_file", "input": {"path": "later.txt", "content": "x"}},
    ]
    summary, driver = await play_session(kit, rules, steps)
    assert summary.calls[0].outcome == "denied"
    assert summary.stopped is not None  # flow stop ends the turn
    assert [c.call_id for c in summary.calls] == ["call_1"]
    assert not (kit.workspace / "later.txt").exists()
    assert "after: the shell is off limits" in [t for seen in driver.seen for t in texts(seen)] + [
        t for c in summary.calls for i in c.injections for m in i["value"] for t in texts([m])
    ]


@pytest.mark.anyio
async def test_a_fail_closed_failure_at_tool_after_stops_the_turn(kit: HarnessKit) -> None:
    """A required tool.after backend (say, a redactor) fails: "fail-closed denies and stops
    the chain" (draft 6.3), so the raw output must not go on to the model's next request,
    as at model.response.after, where the session already stops on it."""
    (kit.workspace / "README.md").write_text("unredacted secret-ish text\n")
    redactor = kit.misbehave("com.example.redactor", "garbage", events=["tool.after"])
    driver = RecordingDriver(
        [
            {"tool": "read_file", "input": {"path": "README.md"}},
            {"tool": "write_file", "input": {"path": "later.txt", "content": "x"}},
        ]
    )
    async with kit.open_gate([redactor], kit.permissions(mode="accept-edits")) as run:
        session = Session(
            gate=run.gate,
            driver=driver,
            transcript=Transcript(None),
            interactive=True,
            permission_mode="accept-edits",
        )
        summary = await session.run("go")
    assert summary.calls[0].executed
    assert summary.stopped is not None
    assert all("unredacted secret-ish text\n" not in texts(seen) for seen in driver.seen)
    assert not (kit.workspace / "later.txt").exists()


# -- sandbox escapes are refused whatever every layer says -------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize("case", ["dotdot", "absolute", "symlink-read", "symlink-write"])
async def test_escapes_are_refused_even_when_everything_allows(
    shared: HarnessKit, backends: dict[str, Hooks], case: str
) -> None:
    name = f"escape-{case}"
    run, workspace = gate_for(
        shared,
        backends[POLICY],
        name,
        mode="allow",
        user_rules=[{"decision": "allow"}],
        managed="allow",
    )
    outside = workspace.parent / "outside"
    outside.mkdir()
    secret = outside / "secret.txt"
    secret.write_text(shared.secret_text)
    target = outside / "target.txt"
    target.write_text("original\n")
    os.symlink(secret, workspace / "escape-link-read")
    os.symlink(target, workspace / "escape-link-write")
    tool, arguments = {
        "dotdot": ("write_file", {"path": "../outside/escape-dotdot.txt", "content": "x"}),
        "absolute": ("write_file", {"path": str(outside / "escape-abs.txt"), "content": "x"}),
        "symlink-read": ("read_file", {"path": "escape-link-read"}),
        "symlink-write": ("write_file", {"path": "escape-link-write", "content": "pwned\n"}),
    }[case]
    record = await run.gate.call(tool, arguments)
    run.sandbox.close()
    assert record.hook_permission == "allow"
    assert record.executed is False
    assert (record.host_decision, record.host_stage) == ("deny", "sandbox")
    assert run.approver.calls == []
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt", "target.txt"]
    assert target.read_text() == "original\n"
    assert shared.secret_text not in record.output
    await run.barrier()
    assert shared.secret_text not in json.dumps(shared.recorded(POLICY))


@pytest.mark.anyio
async def test_a_shell_cannot_read_an_inherited_secret(
    shared: HarnessKit, backends: dict[str, Hooks], monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = "sk-harness-test-0123456789-SECRET"
    monkeypatch.setenv("AHP_HARNESS_TEST_API_TOKEN", secret)
    monkeypatch.setenv("DEPLOY_PASSWORD", secret)
    run, _ = gate_for(shared, backends[POLICY], "escape-secret", user_rules=[{"decision": "allow"}])
    command = 'echo "escape-secret:$AHP_HARNESS_TEST_API_TOKEN:$DEPLOY_PASSWORD:"; env'
    record = await run.gate.call("shell", {"command": command})
    run.sandbox.close()
    assert record.hook_permission == "allow"
    assert record.executed is True and record.outcome == "ok"
    assert "escape-secret:::" in record.output  # the variables are simply not there
    assert secret not in record.output
    assert "AHP_HARNESS_TEST_API_TOKEN" not in record.output
    await run.barrier()
    assert secret not in json.dumps(shared.recorded(POLICY))
    assert secret not in json.dumps(run.audit)


# -- no ask where nobody can answer a prompt ---------------------------------------------


@pytest.mark.anyio
async def test_ask_is_never_granted_where_nobody_can_answer(kit: HarnessKit) -> None:
    hook = kit.scripted(POLICY, [before("hook-ask", {"type": "ask"})], intercept=["tool.*"])
    async with kit.open_hooks([hook], interactive=False) as dispatcher:
        run = kit.gate(dispatcher, kit.permissions(mode="accept-edits"))
        record = await run.gate.call("write_file", {"path": "hook-ask.txt", "content": "x"})
        run.sandbox.close()
    # The backend's ask is unadvertised: an operational failure (fail-closed), not a prompt.
    assert record.synthetic_denial is True
    assert record.executed is False
    assert run.approver.calls == []
    requests = [m for m in kit.recorded(POLICY) if m.get("method") == "hooks/intercept"]
    assert requests
    for msg in requests:
        assert "ask" not in msg["params"]["capabilities"]["effects"]

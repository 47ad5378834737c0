"""Input rewrites: a backend's ``modify`` of ``tool.input`` reaching the native answer.

Claude Code's ``PreToolUse`` honours ``hookSpecificOutput.updatedInput``, which
"overrides tool_input fields"; the adapter advertises ``modify`` on ``input``
with ``merge`` only there (a ``replace`` that drops a field cannot be enforced
by an override) and writes the whole effective input, never with a
``permissionDecision`` (Claude's own permission flow judges the new input).
Every other dialect (VS Code, Codex, Kimi, ...) advertises ``deny`` only.

- through ``ahp-adapter hook`` (the protocol package's ``recorder.py`` over
  stdio answering the rewrite): the exact stdout bytes, with ``--daemon off``
  and with ``--daemon auto`` run twice (the second call warm: the daemon's
  frame and the thin client), and the daemon's JSON op carrying the decision;
- a later deny wins over an earlier rewrite (and sees the rewritten input);
- a rewrite where it is not advertised (Codex, Kimi, VS Code; ``replace`` on
  Claude) is an unadvertised effect: nothing under fail-open, the generic
  block under fail-closed, never an ``updatedInput``;
- a rewrite that leaves the input as it was writes nothing;
- the manifest declares what each call advertises, and the
  ``capabilities.modify`` gap only where rewrites are not carried;
- a malformed ``modify`` decision from the daemon is a fail-closed failure, and a
  ``modify`` decision for a dialect that does not advertise it is a failure
  under the policy, never "nothing".
"""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

import pytest
from ahp_adapters import dialects
from ahp_adapters.decision import NativeDecision
from ahp_adapters.dialects.base import ModifyNotCarried
from ahp_adapters.events import build_event, manifest
from ahp_adapters.hook import Call, Log, answer_for
from ahp_protocol.wire.manifest import parse_manifest

FIXTURES = Path(__file__).parent / "fixtures"
GENERIC = "Required policy backend unavailable."
UNADVERTISED = "Required policy backend com.example.recorder unavailable (unadvertised_effect)."
REASON = "Pushes to main need a review."
MERGE = [
    {
        "type": "modify",
        "target": "input",
        "operation": "merge",
        "value": {"command": "git push origin main"},
    }
]
CLAUDE_REWRITTEN = (
    '{"hookSpecificOutput": {"hookEventName": "PreToolUse", "updatedInput": '
    '{"command": "git push origin main", "description": "Force-push main", "timeout": 120000}}}\n'
)
"""The native answer, written out (not rendered by the codec under test)."""
CLAUDE_UNADVERTISED_DENY = (
    '{"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny", '
    f'"permissionDecisionReason": "{UNADVERTISED}"}}}}\n'
)
MERGE_GRANT = {
    "effects": ["deny", "modify"],
    "modify": {"input": {"replace": False, "merge": True}},
}


def fixture(dialect: str, case: str = "pre_tool_use.shell") -> dict[str, Any]:
    data: dict[str, Any] = json.loads((FIXTURES / dialect / f"{case}.json").read_text())
    return data["payload"]  # type: ignore[no-any-return]


def vscode_payload() -> dict[str, Any]:
    """A VS Code agent hook's PreToolUse (docs/native-dialects §7), camelCase common fields."""
    return {
        "timestamp": "2026-08-24T08:51:14.123Z",
        "cwd": "/home/dev/repo",
        "sessionId": "8c1f0e2a-5b7d-4e9f-a1c3-d5e7f9a1b3c5",
        "hookEventName": "PreToolUse",
        "transcript_path": "/home/dev/.vscode/transcript.json",
        "tool_name": "run_in_terminal",
        "tool_input": {
            "command": "git push --force origin main",
            "explanation": "Force-push main",
            "isBackground": False,
        },
        "tool_use_id": "call_x7Yp2Qd9",
    }


def recorded(path: Path) -> list[dict[str, Any]]:
    """The messages a recorder received, each with the recorder's pid."""
    out = []
    for line in path.read_text().splitlines():
        entry = json.loads(line)
        if entry.get("event") == "message":
            out.append({**entry["message"], "pid": entry["pid"]})
    return out


def intercepts(path: Path) -> list[dict[str, Any]]:
    return [m for m in recorded(path) if m.get("method") == "hooks/intercept"]


# -- Claude Code: the rewrite reaches updatedInput, byte for byte -------------------------


def test_claude_rewrite_is_updated_input_byte_for_byte_in_process(kit: Any) -> None:
    record = kit.tmp / "record.jsonl"
    registration = kit.registration(kit.recorder(effects=MERGE, record=record))
    done = kit.run_hook("claude-code", fixture("claude-code"), registration, daemon="off")
    assert (done.returncode, done.stdout) == (0, CLAUDE_REWRITTEN), done.stderr
    assert "permissionDecision" not in done.stdout
    (message,) = intercepts(record)
    assert message["params"]["capabilities"] == MERGE_GRANT  # the dispatcher granted it


def test_claude_rewrite_through_the_warm_daemon(kit: Any) -> None:
    record = kit.tmp / "record.jsonl"
    registration = kit.registration(kit.recorder(effects=MERGE, record=record))
    first = kit.run_hook("claude-code", fixture("claude-code"), registration, daemon="auto")
    assert (first.returncode, first.stdout) == (0, CLAUDE_REWRITTEN), first.stderr
    (sock,) = kit.daemon_sockets()  # the first call started the daemon
    served = request(sock, {"op": "ping"})["requests"]
    warm = kit.run_hook("claude-code", fixture("claude-code"), registration, daemon="auto")
    assert (warm.returncode, warm.stdout) == (0, CLAUDE_REWRITTEN), warm.stderr
    assert request(sock, {"op": "ping"})["requests"] == served + 1  # the daemon answered it
    *_, last = intercepts(record)
    assert last["params"]["capabilities"] == MERGE_GRANT


def test_the_daemon_json_op_carries_the_rewrite(kit: Any) -> None:
    registration = kit.registration(kit.recorder(effects=MERGE))
    kit.run_hook("claude-code", fixture("claude-code"), registration, daemon="auto")  # start it
    (sock,) = kit.daemon_sockets()
    codec = dialects.get("claude-code")
    event = build_event(codec, codec.parse(fixture("claude-code"), options={}), {})
    message = {
        "op": "intercept",
        "event": event,
        "capabilities": codec.capabilities("PreToolUse"),
        "budget": 10,
    }
    answer = request(sock, message)
    assert (answer["ok"], answer["decision"]) == (True, "modify"), answer
    rewritten = {"command": "git push origin main", "description": "Force-push main"}
    assert answer["input"] == {**rewritten, "timeout": 120000}
    decided = NativeDecision.from_json(answer)
    assert (decided.decision, decided.blocks, decided.updated_input) == (
        "modify",
        False,
        answer["input"],
    )


def request(sock: Path, message: dict[str, Any]) -> dict[str, Any]:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.settimeout(30)
        conn.connect(str(sock))
        conn.sendall(json.dumps(message).encode() + b"\n")
        data = b""
        while not data.endswith(b"\n"):
            chunk = conn.recv(65536)
            if not chunk:
                break
            data += chunk
    answer: dict[str, Any] = json.loads(data)
    return answer


# -- a denial always wins ------------------------------------------------------------------


def test_a_later_deny_wins_over_an_earlier_rewrite(kit: Any) -> None:
    record = kit.tmp / "second.jsonl"
    deny = [{"type": "deny", "reason": REASON, "code": "com.example.review"}]
    registration = kit.registration(
        kit.recorder(effects=MERGE, hook_id="com.example.rewriter"),
        kit.recorder(effects=deny, record=record, hook_id="com.example.reviewer"),
    )
    for daemon in ("off", "auto", "auto"):
        done = kit.run_hook("claude-code", fixture("claude-code"), registration, daemon=daemon)
        expected = {
            "hookSpecificOutput": {
                "hookEventName": "PreToolUse",
                "permissionDecision": "deny",
                "permissionDecisionReason": REASON,
            }
        }
        assert (done.returncode, done.stdout) == (0, json.dumps(expected) + "\n"), daemon
        assert "updatedInput" not in done.stdout
    # The second interceptor was sent the effective (rewritten) input, as the draft says.
    for message in intercepts(record):
        assert message["params"]["event"]["tool"]["input"]["command"] == "git push origin main"


# -- where a rewrite is not advertised --------------------------------------------------


NOT_CARRIED = [
    # (case, hook dialect, payload, merge value)
    ("codex", "codex", fixture("codex"), {"command": "git push origin main"}),
    ("kimi", "kimi", fixture("kimi"), {"command": "git push origin main"}),
    ("vscode", "claude-code", vscode_payload(), {"command": "git push origin main"}),
]


@pytest.mark.parametrize("policy", ["fail-open", "fail-closed"])
@pytest.mark.parametrize(
    ("case", "dialect", "payload", "value"), NOT_CARRIED, ids=[c[0] for c in NOT_CARRIED]
)
def test_a_rewrite_where_it_is_not_advertised_is_an_unadvertised_effect(
    kit: Any, policy: str, case: str, dialect: str, payload: dict[str, Any], value: Any
) -> None:
    record = kit.tmp / "record.jsonl"
    effects = [{"type": "modify", "target": "input", "operation": "merge", "value": value}]
    registration = kit.registration(kit.recorder(effects=effects, record=record, policy=policy))
    done = kit.run_hook(dialect, payload, registration, "--event", "PreToolUse")
    assert done.returncode == 0, done.stderr
    codec = dialects.get(dialect).resolve(payload)
    if policy == "fail-open":
        assert done.stdout == codec.render_nothing("PreToolUse").stdout == ""
    else:
        assert done.stdout == codec.render_deny(UNADVERTISED, "PreToolUse").stdout
        assert UNADVERTISED in done.stdout
    assert "updatedInput" not in done.stdout and "allow" not in done.stdout
    (message,) = intercepts(record)
    assert message["params"]["capabilities"] == {"effects": ["deny"]}


@pytest.mark.parametrize(
    ("policy", "expected"), [("fail-open", ""), ("fail-closed", CLAUDE_UNADVERTISED_DENY)]
)
def test_replace_on_claude_is_not_advertised(kit: Any, policy: str, expected: str) -> None:
    replace = [{**MERGE[0], "operation": "replace"}]
    registration = kit.registration(kit.recorder(effects=replace, policy=policy))
    done = kit.run_hook("claude-code", fixture("claude-code"), registration)
    assert (done.returncode, done.stdout) == (0, expected), done.stderr


def test_a_rewrite_that_changes_nothing_writes_nothing(kit: Any) -> None:
    same = [{**MERGE[0], "value": {"command": "git push --force origin main"}}]
    registration = kit.registration(kit.recorder(effects=same))
    for daemon in ("off", "auto", "auto"):
        done = kit.run_hook("claude-code", fixture("claude-code"), registration, daemon=daemon)
        assert (done.returncode, done.stdout, done.stderr) == (0, "", ""), daemon


# -- the declaration -----------------------------------------------------------------------


@pytest.mark.parametrize("dialect", [*sorted(dialects.DIALECTS), "vscode"])
def test_the_manifest_declares_what_each_call_advertises(dialect: str) -> None:
    if dialect == "vscode":
        codec = dialects.get("claude-code").resolve(vscode_payload())
    else:
        codec = dialects.get(dialect)
    carried = dialect == "claude-code"
    document = manifest(codec)
    (before,) = [e for e in document["events"] if e["event"] == "tool.before"]
    gaps = [g["path"] for g in document["gaps"]]
    if carried:
        assert codec.capabilities("PreToolUse") == MERGE_GRANT
        assert before["capabilities"] == MERGE_GRANT
        assert "capabilities.modify" not in gaps
    else:
        for event in codec.pre_tool_events:
            assert codec.capabilities(event) == {"effects": ["deny"]}
        assert before["capabilities"] == {"effects": ["deny"]}
        assert "capabilities.modify" in gaps
    parse_manifest(document)


# -- defence in depth ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "answer",
    [
        {"decision": "modify", "policy": "fail-open"},
        {"decision": "modify", "policy": "fail-open", "input": None},
        {"decision": "modify", "policy": "fail-open", "input": ["git push origin main"]},
        {"decision": "modify", "policy": "fail-open", "input": "git push origin main"},
    ],
)
def test_a_malformed_modify_from_the_daemon_is_a_fail_closed_failure(
    answer: dict[str, Any],
) -> None:
    decided = NativeDecision.from_json(answer)
    assert (decided.decision, decided.policy, decided.blocks) == ("failure", "fail-closed", True)
    assert decided.detail == "unreadable daemon answer"
    assert decided.updated_input is None


def test_a_modify_decision_round_trips_and_other_decisions_carry_no_input() -> None:
    decided = NativeDecision("modify", policy="fail-closed", updated_input={"command": "ls"})
    assert NativeDecision.from_json(json.loads(json.dumps(decided.to_json()))) == decided
    none = NativeDecision.from_json({"decision": "none", "policy": "fail-open", "input": {"x": 1}})
    assert none.updated_input is None and "input" not in none.to_json()


@pytest.mark.parametrize(("policy", "blocks"), [("fail-open", False), ("fail-closed", True)])
@pytest.mark.parametrize(("dialect", "payload"), [("codex", "codex"), ("kimi", "kimi")])
def test_a_modify_decision_the_dialect_does_not_carry_falls_to_the_policy(
    dialect: str, payload: str, policy: str, blocks: bool
) -> None:
    codec = dialects.get(dialect)
    call = Call(codec, "PreToolUse", capabilities=codec.capabilities("PreToolUse"))
    decided = NativeDecision("modify", policy=policy, updated_input={"command": "ls"})  # type: ignore[arg-type]
    answer = answer_for(call, decided, Log(False))
    if blocks:
        assert answer == codec.render_deny(GENERIC, "PreToolUse")
    else:
        assert answer == codec.render_nothing("PreToolUse")
    with pytest.raises(ModifyNotCarried):
        codec.render_modify({"command": "ls"}, "PreToolUse")


def test_claude_renders_a_rewrite_only_at_pre_tool_use() -> None:
    codec = dialects.get("claude-code")
    with pytest.raises(ModifyNotCarried):
        codec.render_modify({"command": "ls"}, "PostToolUse")
    vscode = codec.resolve(vscode_payload())
    with pytest.raises(ModifyNotCarried):
        vscode.render_modify({"command": "ls"}, "PreToolUse")

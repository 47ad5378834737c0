"""``ahp-harness`` as a user runs it: a subprocess, real files, real backend processes.

- without ``--registration`` the harness runs with no AHP step at all, and says so;
- a bad registration, or a bad permissions file, is exit 2 with a message naming the
  file and the JSON path (registration) or the rule and line (TOML);
- ``ahp-harness manifest`` is a valid ``hooks/capabilities`` result (official schema)
  and lists its gaps; non-interactive, it never offers ``ask``;
- the transcript has one line per call with the required fields (the effective
  input, the hook's and the host's decisions, the approval, execution, messages);
  the audit log tells a synthetic (fail-closed) denial from a backend's own, and
  neither carries a backend's exception text.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:  # the helpers live in this folder's conftest.py (fixture ``kit``)
    from conftest import HarnessKit

_SCRIPT = Path(sys.executable).parent / "ahp-harness"
COMMAND = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "ahp_harness.cli"]
REPO = Path(__file__).resolve().parents[3]
POLICY = "com.example.policy"
TRANSCRIPT_FIELDS = {
    "call_id",
    "tool",
    "input",
    "hook_permission",
    "denied_by",
    "synthetic_denial",
    "host_decision",
    "approval",
    "executed",
    "outcome",
    "messages",
}


def ahp_harness(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "400", "NO_COLOR": "1", "TERM": "dumb"}
    return subprocess.run(
        [*COMMAND, *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=50,
        stdin=subprocess.DEVNULL,
        check=False,
    )


def run_scripted(
    kit: HarnessKit, registration: Path, script: Path, *extra: str
) -> subprocess.CompletedProcess[str]:
    """``ahp-harness run`` of ``script`` with ``registration``, nobody to ask (approve all)."""
    return ahp_harness(
        "run",
        "--workspace",
        str(kit.workspace),
        "--registration",
        str(registration),
        "--model",
        f"script:{script}",
        "--non-interactive",
        "--approve",
        "always",
        *extra,
        cwd=kit.root,
    )


def script_file(root: Path, steps: Sequence[dict[str, Any]]) -> Path:
    path = root / "script.json"
    path.write_text(json.dumps(list(steps)), encoding="utf-8")
    return path


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


# -- no registration: no AHP step at all -----------------------------------------------


@pytest.mark.parametrize("approve", ["always", "never"])
def test_without_a_registration_it_runs_with_no_ahp_step_and_says_so(
    kit: HarnessKit, approve: str
) -> None:
    (kit.workspace / "README.md").write_text("hello\n")
    script = script_file(
        kit.root,
        [
            {"tool": "read_file", "input": {"path": "README.md"}},
            {"tool": "write_file", "input": {"path": "notes.txt", "content": "n\n"}},
            {"tool": "read_file", "input": {"path": "missing.txt"}},
        ],
    )
    transcript, audit = kit.root / "t.jsonl", kit.root / "a.jsonl"
    done = ahp_harness(
        "run",
        "--workspace",
        str(kit.workspace),
        "--model",
        f"script:{script}",
        "--non-interactive",
        "--approve",
        approve,
        "--transcript",
        str(transcript),
        "--audit-log",
        str(audit),
        cwd=kit.root,
    )
    assert done.returncode == 0, done.stderr
    assert "no --registration: running with no AHP step at all" in done.stdout
    assert "session over: 3 tool calls" in done.stdout
    # #29: a tool's error says what failed, not only "error".
    assert "→ error (ran): no such file: missing.txt" in done.stdout
    read, write, _missing = lines(transcript)
    assert (read["executed"], read["host_stage"]) == (True, "mode")
    # The host's own permissions still decide: the mode asks, --approve answers.
    assert write["approval"] == ("approved" if approve == "always" else "rejected")
    assert write["executed"] is (approve == "always")
    assert (kit.workspace / "notes.txt").exists() is (approve == "always")
    for line in (read, write):
        assert (line["hook_permission"], line["denied_by"]) == ("none", None)
    # No AHP step: the audit log has decisions, and no hook exchange at all.
    assert {entry["kind"] for entry in lines(audit)} == {"call"}


# -- configuration errors: exit 2, saying where ----------------------------------------


def _subscription(**extra: Any) -> dict[str, Any]:
    return {
        "mode": "intercept",
        "events": ["tool.before"],
        "timeoutMs": 1000,
        "failurePolicy": "fail-closed",
        "content": {"default": "body"},
        **extra,
    }


def _registration(hook_extra: dict[str, Any], **sub: Any) -> dict[str, Any]:
    hook = {
        "id": "com.example.guard",
        "transport": {"type": "stdio", "command": "false", "lifecycle": "persistent"},
        "subscriptions": [_subscription(**sub)],
        **hook_extra,
    }
    return {"protocolVersion": "draft", "hooks": [hook]}


@pytest.mark.parametrize(
    ("document", "where"),
    [
        (_registration({}, timeoutMs=0), "hooks[0].subscriptions[0].timeoutMs"),
        (_registration({}, failurePolicy=None), "hooks[0].subscriptions[0]"),
        (_registration({}, events=["config.change.before"]), "hooks[0].subscriptions[0].events[0]"),
        (
            _registration(
                {
                    "transport": {"type": "http", "url": "http://127.0.0.1:9/"},
                    "authentication": {"type": "bearer", "tokenEnv": "AHP_TEST_UNSET_TOKEN"},
                }
            ),
            "hooks[0].authentication.tokenEnv",
        ),
    ],
    ids=["timeout-zero", "no-failure-policy", "not-intercepted", "token-env-unset"],
)
def test_a_bad_registration_is_exit_2_naming_the_json_path(
    kit: HarnessKit, document: dict[str, Any], where: str
) -> None:
    sub = document["hooks"][0]["subscriptions"][0]
    if sub.get("failurePolicy") is None:
        del sub["failurePolicy"]
    registration = kit.root / "registration.json"
    registration.write_text(json.dumps(document), encoding="utf-8")
    script = script_file(kit.root, [{"tool": "write_file", "input": {"path": "x", "content": ""}}])
    done = run_scripted(kit, registration, script)
    assert done.returncode == 2
    message = done.stderr.strip()
    assert message.startswith(f"ahp-harness: error: {registration}: {where}")
    assert len(message.splitlines()) == 1  # one clear line, no traceback
    assert list(kit.workspace.iterdir()) == []  # nothing ran


@pytest.mark.parametrize("broken", ["rules-missing", "not-on-path"])
def test_why_a_backend_failed_is_shown_to_the_operator(kit: HarnessKit, broken: str) -> None:
    # The model sees which backend failed and its failure class, nothing of its output;
    # the terminal says what to fix: the fixed detail (the command not found, with the
    # fix) and the backend's own last stderr line.
    args = ["-m", "ahp_backends.cli", "denylist", "--rules", "rules.toml"]  # not written
    command = sys.executable if broken == "rules-missing" else "ahp-no-such-backend"
    hook = {
        "transport": {"type": "stdio", "command": command, "args": args, "lifecycle": "persistent"}
    }
    registration = kit.root / "registration.json"
    registration.write_text(json.dumps(_registration(hook, timeoutMs=20000)), encoding="utf-8")
    script = script_file(kit.root, [{"tool": "write_file", "input": {"path": "x", "content": ""}}])
    transcript = kit.root / "t.jsonl"
    done = run_scripted(kit, registration, script, "--transcript", str(transcript))
    assert done.returncode == 0, done.stderr
    (call,) = lines(transcript)
    failure = "abnormal_exit" if broken == "rules-missing" else "spawn_failed"
    reason = f"Required policy backend com.example.guard unavailable ({failure})."
    assert (call["synthetic_denial"], call["reason"]) == (True, reason)
    assert f"→ denied (not run): {reason}" in done.stdout
    assert "cannot read the rules" not in call["reason"]
    if broken == "rules-missing":
        assert "backend com.example.guard failed (abnormal_exit, fail-closed)" in done.stdout
        assert "backend com.example.guard stderr: error: rules.toml: cannot read the rules" in (
            done.stdout
        )
    else:
        assert (
            "backend com.example.guard failed (spawn_failed, fail-closed): "
            "'ahp-no-such-backend' not found on PATH"
        ) in done.stdout
        assert (
            "; fix: give an absolute command path in the registration, "
            "or install the backend where the harness's PATH finds it"
        ) in done.stdout
    assert list(kit.workspace.iterdir()) == []  # refused: nothing ran


def test_the_broken_example_registration_is_refused(kit: HarnessKit) -> None:
    broken = REPO / "examples" / "broken" / "missing-failure-policy.json"
    script = script_file(kit.root, [{"say": "hi"}])
    done = ahp_harness(
        "run",
        "--workspace",
        str(kit.workspace),
        "--registration",
        str(broken),
        "--model",
        f"script:{script}",
        "--non-interactive",
        cwd=REPO,
    )
    assert done.returncode == 2
    assert f"{broken}: hooks[0].subscriptions[0]" in done.stderr
    assert "failurePolicy" in done.stderr


@pytest.mark.parametrize(
    ("flag", "text", "expected"),
    [
        ("--permissions", 'fetch_hosts = [\n"a",\n[[rules]]\n', " (line 3): invalid TOML"),
        (
            "--permissions",
            '[[rules]]\ndecision = "allow"\n\n[[rules]]\ntool = "shell"\ndecision = "maybe"\n',
            ": rules[1] (line 6): decision: must be one of allow, ask, deny",
        ),
        (
            "--managed",
            '[[rules]]\ndecision = "deny"\npattern = "("\n',
            ": rules[0] (line 3): pattern: not a valid regular expression",
        ),
        ("--managed", "rulez = []\n", ": rulez: unknown key 'rulez'"),
    ],
    ids=["toml-syntax", "bad-decision", "bad-pattern-managed", "unknown-key-managed"],
)
def test_a_bad_permissions_file_is_exit_2_with_file_and_line(
    kit: HarnessKit, flag: str, text: str, expected: str
) -> None:
    path = kit.root / "perms.toml"
    path.write_text(text, encoding="utf-8")
    script = script_file(kit.root, [{"say": "hi"}])
    done = ahp_harness(
        "run",
        "--workspace",
        str(kit.workspace),
        flag,
        str(path),
        "--model",
        f"script:{script}",
        "--non-interactive",
        cwd=kit.root,
    )
    assert done.returncode == 2
    assert done.stderr.startswith(f"ahp-harness: error: {path}{expected}"), done.stderr
    assert "Traceback" not in done.stderr
    assert done.stdout == ""


# -- the manifest ------------------------------------------------------------------------


@pytest.mark.parametrize("interactive", [True, False], ids=["interactive", "non-interactive"])
def test_the_manifest_is_a_valid_capabilities_result_with_gaps(
    kit: HarnessKit, official_schema: Callable[[str, Any], list[str]], interactive: bool
) -> None:
    done = ahp_harness("manifest", *(() if interactive else ("--non-interactive",)), cwd=kit.root)
    assert done.returncode == 0, done.stderr
    manifest = json.loads(done.stdout)
    response = {
        "jsonrpc": "2.0",
        "id": "capabilities-1",
        "result": {"protocolVersion": "draft", "manifest": manifest},
    }
    assert official_schema("capabilities-response.schema.json", response) == []
    gaps = {gap["path"]: gap["reason"] for gap in manifest["gaps"]}
    assert all(gaps.values())
    assert "toolPaths.mcp" not in gaps  # MCP tools go through the same gate
    assert manifest["toolPaths"] == ["native", "mcp"]
    assert "capabilities.flow.continue" in gaps
    assert "events.tool.progress" in gaps  # an event it never emits is a gap, not a claim
    events = {entry["event"]: entry for entry in manifest["events"]}
    assert "tool.progress" not in events
    assert events["tool.before"]["modes"] == ["intercept", "observe"]
    assert events["tool.permission.resolved"]["modes"] == ["observe"]
    offered_ask = {e for e, entry in events.items() if "ask" in entry["capabilities"]["effects"]}
    assert offered_ask == ({"tool.before"} if interactive else set())
    assert ("capabilities.ask" in gaps) is (not interactive)
    for entry in events.values():
        assert "continue" not in entry["capabilities"].get("flow", {}).get("operations", [])


# -- the transcript and the audit log ----------------------------------------------------


def test_transcript_and_audit_log(kit: HarnessKit) -> None:
    (kit.workspace / "README.md").write_text("hello\n")
    rules = [
        {
            "event": "tool.before",
            "contains": {"command": "rm -rf"},
            "effects": [
                {"type": "deny", "reason": "no recursive deletes", "code": "com.example.rm"}
            ],
        },
        {"event": "tool.before", "contains": {"command": "crash"}, "raise": True},
        {
            "event": "tool.before",
            "input": {"path": "a.txt"},
            "effects": [
                {
                    "type": "modify",
                    "target": "input",
                    "operation": "merge",
                    "value": {"path": "b.txt"},
                }
            ],
        },
        {
            "event": "tool.before",
            "tool": "read_file",
            "effects": [{"type": "message", "text": "read noted"}],
        },
    ]
    registration = kit.registration_file([kit.scripted(POLICY, rules)])
    script = script_file(
        kit.root,
        [
            {"tool": "read_file", "input": {"path": "README.md"}},
            {"tool": "shell", "input": {"command": "rm -rf build"}},
            {"tool": "shell", "input": {"command": "crash now"}},
            {"tool": "write_file", "input": {"path": "a.txt", "content": "A\n"}},
            {"say": "done"},
        ],
    )
    transcript, audit = kit.root / "out" / "t.jsonl", kit.root / "out" / "a.jsonl"
    done = run_scripted(
        kit, registration, script, "--transcript", str(transcript), "--audit-log", str(audit)
    )
    assert done.returncode == 0, done.stderr
    assert "no --registration" not in done.stdout

    read, rm, crash, write = lines(transcript)
    assert read["messages"] == ["read noted"], (read, done.stdout, lines(audit)[:2])
    for line in (read, rm, crash, write):
        assert set(line) >= TRANSCRIPT_FIELDS, TRANSCRIPT_FIELDS - set(line)
    assert [line["call_id"] for line in (read, rm, crash, write)] == [
        "call_1",
        "call_2",
        "call_3",
        "call_4",
    ]
    # messages are recorded (above) and shown to the user.
    assert "backend says: read noted" in done.stdout
    # An explicit denial and a synthetic one, told apart.
    assert (rm["denied_by"], rm["synthetic_denial"], rm["executed"]) == (POLICY, False, False)
    assert rm["reason"] == "no recursive deletes"
    assert (crash["denied_by"], crash["synthetic_denial"], crash["executed"]) == (
        POLICY,
        True,
        False,
    )
    assert crash["reason"] == f"Required policy backend {POLICY} unavailable (rpc_error)."
    assert f"deny by {POLICY}" in done.stdout
    assert "deny (synthetic: a required backend failed)" in done.stdout
    # The effective input is what the transcript records, and what ran.
    assert write["input"] == {"path": "b.txt", "content": "A\n"}
    assert write["executed"] is True and write["approval"] == "approved"
    assert (kit.workspace / "b.txt").read_text() == "A\n"
    assert not (kit.workspace / "a.txt").exists()

    entries = lines(audit)
    hooks = {e["toolInput"].get("command"): e for e in entries if e["kind"] == "hook"}
    assert hooks["rm -rf build"]["denial"]["synthetic"] is False
    assert hooks["rm -rf build"]["denial"]["code"] == "com.example.rm"
    assert hooks["crash now"]["denial"]["synthetic"] is True
    (failed,) = hooks["crash now"]["diagnostics"]
    assert (failed["outcome"], failed["policy"]) == ("failed", "fail-closed")
    assert failed["failure"]
    calls = {e["call_id"]: e for e in entries if e["kind"] == "call"}
    assert (calls["call_2"]["synthetic_denial"], calls["call_3"]["synthetic_denial"]) == (
        False,
        True,
    )
    exchanges = [e for e in entries if e["kind"] == "exchange"]
    assert any(e["callId"] == "call_3" and e.get("policy") == "fail-closed" for e in exchanges)
    # The backend's exception text never leaves it.
    for text in (done.stdout, done.stderr, transcript.read_text(), audit.read_text()):
        assert "scripted failure" not in text


def test_a_lone_surrogate_in_a_tool_input_reaches_the_backend_and_both_records(
    kit: HarnessKit,
) -> None:
    # #26: "\ud800" (as json.dumps writes a lone surrogate: the script file holds that
    # escape) was a UnicodeEncodeError in the client and in the record writer: a traceback
    # and a lost record. It is sent and recorded escaped, so the backend's deny stands
    # (under fail-open too) and both records are kept, as valid UTF-8 JSON lines.
    lone = "lone \ud800 here"
    deny = {"type": "deny", "reason": "no surrogates", "code": "com.example.surrogate"}
    rules = [{"event": "tool.before", "contains": {"content": "\ud800"}, "effects": [deny]}]
    registration = kit.registration_file([kit.scripted(POLICY, rules, policy="fail-open")])
    script = script_file(
        kit.root, [{"tool": "write_file", "input": {"path": "a.txt", "content": lone}}]
    )
    transcript, audit = kit.root / "t.jsonl", kit.root / "a.jsonl"
    done = run_scripted(
        kit, registration, script, "--transcript", str(transcript), "--audit-log", str(audit)
    )
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    (sent,) = [m for m in kit.recorded(POLICY) if m.get("method") == "hooks/intercept"]
    assert sent["params"]["event"]["tool"]["input"]["content"] == lone
    (call,) = lines(transcript)
    assert call["input"]["content"] == lone
    assert (call["denied_by"], call["synthetic_denial"], call["executed"]) == (POLICY, False, False)
    kinds = {entry["kind"]: entry for entry in lines(audit)}
    assert set(kinds) == {"hook", "call", "exchange"}
    assert kinds["hook"]["toolInput"]["content"] == lone
    assert kinds["call"]["input"]["content"] == lone
    for path in (transcript, audit):
        assert b"lone \\ud800 here" in path.read_bytes()  # the escape, not raw bytes
    assert not (kit.workspace / "a.txt").exists()


def test_an_unusable_workspace_is_exit_2(kit: HarnessKit) -> None:
    script = script_file(kit.root, [{"say": "hi"}])
    missing = kit.root / "missing"
    done = ahp_harness(
        "run", "--workspace", str(missing), "--model", f"script:{script}", cwd=kit.root
    )
    assert done.returncode == 2
    assert f"--workspace {missing}: not a directory" in done.stderr


UPLOADER = """\
from pathlib import Path

from ahp_protocol.server import Backend

backend = Backend(
    "com.example.uploader",
    configuration=[
        {
            "mode": "observe",
            "events": ["session.start"],
            "content": {"default": "body"},
            "upload": {"endpoint": "http://127.0.0.1:9/c", "timeoutMs": 500, "maxBytes": 10},
        }
    ],
)


@backend.observe("session.start")
def seen(event):
    Path(MARKER).write_text(event["id"])


backend.run()
"""


def test_a_discovered_upload_configuration_needs_trust_uploads(kit: HarnessKit) -> None:
    # draft §2.4: a configuration the backend discovers that names an upload endpoint (where
    # the host's content would go) needs the host's consent. Without --trust-uploads the
    # backend is skipped and the warning says how to accept it; with it, it is used; an
    # id that is not a backend of the registration is exit 2.
    backend, marker = kit.root / "uploader.py", kit.root / "seen.txt"
    backend.write_text(UPLOADER.replace("MARKER", repr(str(marker))), encoding="utf-8")
    hook = {
        "id": "com.example.uploader",
        "transport": {
            "type": "stdio",
            "command": sys.executable,
            "args": [str(backend)],
            "lifecycle": "persistent",
        },
    }
    registration = kit.registration_file([hook])
    script = script_file(kit.root, [{"say": "hi"}])
    refused = run_scripted(kit, registration, script)
    assert refused.returncode == 0, refused.stderr
    assert "configuration not authorized" in refused.stdout
    assert "--trust-uploads com.example.uploader accepts it" in refused.stdout
    assert not marker.exists()
    trusted = run_scripted(kit, registration, script, "--trust-uploads", "com.example.uploader")
    assert trusted.returncode == 0, trusted.stderr
    assert "not authorized" not in trusted.stdout
    assert marker.read_text()  # the session.start it observed: its id
    unknown = run_scripted(kit, registration, script, "--trust-uploads", "com.example.other")
    assert unknown.returncode == 2
    assert f"--trust-uploads com.example.other: no backend com.example.other in {registration}" in (
        unknown.stderr
    )

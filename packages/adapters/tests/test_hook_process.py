"""The hook command as a process, end to end, with real backends.

Our deny-list backend (``ahp-backend denylist --rules examples/backends/denylist.toml``)
over stdio (persistent and per_event) and over loopback HTTP, through the warm
daemon and without it; then the failure paths the bar names: a spent budget, a
backend that cannot start, secrets that must not reach the native output,
malformed native payloads, and the observations (``tool.after``,
``session.start``, ``session.end``) the post-tool and session hooks deliver.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pytest

FIXTURES = Path(__file__).parent / "fixtures"
PRE = {
    "claude-code": "PreToolUse",
    "codex": "PreToolUse",
    "gemini": "BeforeTool",
    "cursor": "preToolUse",
    "kimi": "PreToolUse",
}
SHELL_CASE = {
    "claude-code": "pre_tool_use.shell",
    "codex": "pre_tool_use.shell",
    "gemini": "before_tool.shell",
    "cursor": "pre_tool_use.shell",
    "kimi": "pre_tool_use.shell",
}
RM_RF = "Recursive deletes are not allowed here."
FORCE_PUSH = "Force pushes rewrite shared history."
GENERIC = "Required policy backend unavailable."
SECRET = "sk-live-SECRET-do-not-echo"
NOTHING = {"cursor": "{}\n"}
"""No effect on stdout where it is not empty (Cursor blocks on empty output under failClosed)."""


DAEMON = {dialect: ("off", "auto")[i % 2] for i, dialect in enumerate(sorted(PRE))}
"""One daemon mode per dialect, alternating (claude-code off, codex auto, cursor off, gemini
auto, kimi off). The warm daemon renders the native answer with the same dialect code as
the in-process hook, so a dialect-by-mode product proves nothing twice: each dialect is
run once, and each transport below meets both modes (per_event: claude-code, gemini;
HTTP: codex, cursor). The daemon's own paths are ``test_daemon*.py``'s."""


def nothing(dialect: str) -> str:
    return NOTHING.get(dialect, "")


def fixture(dialect: str, case: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((FIXTURES / dialect / f"{case}.json").read_text())
    return data["payload"]  # type: ignore[no-any-return]


def shell(dialect: str, command: str) -> dict[str, Any]:
    payload = fixture(dialect, SHELL_CASE[dialect])
    payload["tool_input"] = {**payload["tool_input"], "command": command}
    return payload


def reason_of(dialect: str, stdout: str) -> str:
    body = json.loads(stdout)
    if dialect in ("claude-code", "codex", "kimi"):
        assert body["hookSpecificOutput"]["permissionDecision"] == "deny"
        return str(body["hookSpecificOutput"]["permissionDecisionReason"])
    if dialect == "gemini":
        assert body["decision"] == "deny"
        return str(body["reason"])
    assert body["permission"] == "deny"
    return str(body["agent_message"])


# -- real backends, with and without the daemon -----------------------------------------


@pytest.mark.parametrize("dialect", sorted(PRE))
def test_denylist_stdio_persistent(kit: Any, dialect: str) -> None:
    daemon = DAEMON[dialect]
    registration = kit.registration(kit.denylist_stdio("persistent"))
    denied = kit.run_hook(dialect, shell(dialect, "rm -rf /"), registration, daemon=daemon)
    assert denied.returncode == 0, denied.stderr
    assert reason_of(dialect, denied.stdout) == RM_RF
    allowed = kit.run_hook(dialect, shell(dialect, "ls -la"), registration, daemon=daemon)
    assert (allowed.returncode, allowed.stdout) == (0, nothing(dialect))
    assert bool(kit.daemon_sockets()) is (daemon == "auto")


@pytest.mark.parametrize("dialect", ["claude-code", "gemini"])
def test_denylist_stdio_per_event(kit: Any, dialect: str) -> None:
    daemon = DAEMON[dialect]
    registration = kit.registration(kit.denylist_stdio("per_event"))
    # The example rules' force-push rule names Claude's tool (Bash); rm -rf is by kind.
    command, reason = ("git push --force origin main", FORCE_PUSH)
    if dialect != "claude-code":
        command, reason = ("rm -rf build", RM_RF)
    denied = kit.run_hook(dialect, shell(dialect, command), registration, daemon=daemon)
    assert reason_of(dialect, denied.stdout) == reason
    allowed = kit.run_hook(dialect, shell(dialect, "git status"), registration, daemon=daemon)
    assert (allowed.returncode, allowed.stdout) == (0, "")


@pytest.mark.parametrize("dialect", ["codex", "cursor"])
def test_denylist_http(kit: Any, dialect: str) -> None:
    daemon = DAEMON[dialect]
    registration = kit.registration(kit.denylist_http())
    denied = kit.run_hook(dialect, shell(dialect, "rm -rf /tmp/x"), registration, daemon=daemon)
    assert reason_of(dialect, denied.stdout) == RM_RF
    allowed = kit.run_hook(dialect, shell(dialect, "echo hi"), registration, daemon=daemon)
    assert (allowed.returncode, allowed.stdout) == (0, nothing(dialect))


@pytest.mark.parametrize("dialect", sorted(PRE))
def test_mcp_and_file_rules_reach_the_backend(kit: Any, dialect: str) -> None:
    """The deny-list's MCP-server rule sees tool.mcp; its path rule sees file inputs."""
    registration = kit.registration(kit.denylist_stdio("persistent"))
    mcp_case = "before_tool.mcp" if dialect == "gemini" else "pre_tool_use.mcp"
    done = kit.run_hook(dialect, fixture(dialect, mcp_case), registration, daemon="auto")
    if dialect in ("cursor", "kimi"):  # no MCP server in the payload: the rule cannot match
        assert done.stdout == nothing(dialect)
    else:
        assert reason_of(dialect, done.stdout).startswith("Repository deletion")
    write_case = "before_tool.file_write" if dialect == "gemini" else "pre_tool_use.file_write"
    done = kit.run_hook(dialect, fixture(dialect, write_case), registration, daemon="auto")
    if dialect == "codex":  # an apply_patch adding notes/todo.md touches no secret path
        assert done.stdout == ""
    else:
        assert reason_of(dialect, done.stdout) == "Secrets and system files are off limits."


ADAPTER_RULES = Path(__file__).resolve().parents[3] / "examples" / "adapters" / "denylist.toml"


@pytest.mark.parametrize(
    "file_path", ["//etc/passwd", "/etc/./passwd", "/home/dev/repo/../../../etc/passwd/"]
)
def test_a_path_the_kernel_opens_as_etc_is_denied(kit: Any, file_path: str) -> None:
    """Claude Code's Read of a spelling of /etc/passwd meets the shipped ``/etc/**`` rule."""
    registration = kit.registration(kit.denylist_stdio("per_event", rules=ADAPTER_RULES))
    payload = fixture("claude-code", "pre_tool_use.file_write")
    payload["tool_name"] = "Read"
    payload["tool_input"] = {"file_path": file_path}
    done = kit.run_hook("claude-code", payload, registration)
    assert done.returncode == 0, done.stderr
    assert reason_of("claude-code", done.stdout) == "Secrets and system files are off limits."
    payload["tool_input"] = {"file_path": "//home/dev/repo/README.md"}
    assert kit.run_hook("claude-code", payload, registration).stdout == ""


def test_cursor_shell_and_mcp_hooks(kit: Any) -> None:
    registration = kit.registration(kit.denylist_stdio("persistent"))
    shell_payload = {**fixture("cursor", "before_shell_execution"), "command": "rm -rf /"}
    done = kit.run_hook("cursor", shell_payload, registration, daemon="auto")
    assert reason_of("cursor", done.stdout) == RM_RF
    mcp_payload = fixture("cursor", "before_mcp_execution")
    done = kit.run_hook("cursor", mcp_payload, registration, daemon="auto")
    assert done.stdout == "{}\n"  # the server (a URL) is not the rules' "github"
    split = kit.run_hook(
        "cursor", fixture("cursor", "pre_tool_use.shell"), registration, "--skip-shell-mcp"
    )
    assert (split.returncode, split.stdout) == (0, "{}\n")  # the shell hook answers for it


# -- failures ------------------------------------------------------------------------


@pytest.mark.parametrize("policy", ["fail-closed", "fail-open"])
def test_spent_budget_answers_in_time(kit: Any, policy: str) -> None:
    hung = kit.recorder(script=[{"hang": True}], policy=policy, timeout_ms=20000)
    registration = kit.registration(hung)
    started = time.monotonic()
    done = kit.run_hook("claude-code", shell("claude-code", "ls"), registration, "--budget", "2")
    elapsed = time.monotonic() - started
    assert elapsed < 2 + 3, elapsed  # the budget, plus interpreter start-up and exit
    expected = json.loads(blocking_claude(GENERIC)) if policy == "fail-closed" else None
    assert (json.loads(done.stdout) if done.stdout else None) == expected
    assert done.returncode == 0


def blocking_claude(reason: str) -> str:
    return json.dumps(
        {
            "hookSpecificOutput": {
                "hookEventName": "PreToolUse",
                "permissionDecision": "deny",
                "permissionDecisionReason": reason,
            }
        }
    )


@pytest.mark.parametrize("daemon", ["off", "auto"])
@pytest.mark.parametrize("policy", ["fail-closed", "fail-open"])
def test_backend_that_cannot_start(kit: Any, policy: str, daemon: str) -> None:
    missing = {
        "id": "com.example.missing",
        "transport": {"type": "stdio", "command": str(kit.tmp / "no-such-backend")},
        "subscriptions": [kit.intercept(policy)],
    }
    done = kit.run_hook("gemini", shell("gemini", "ls"), kit.registration(missing), daemon=daemon)
    assert done.returncode == 0
    if policy == "fail-closed":
        assert done.stdout == json.dumps({"decision": "deny", "reason": GENERIC}) + "\n"
    else:
        assert done.stdout == ""
    assert done.stderr == ""  # Gemini: nothing on stderr


def test_no_secret_reaches_the_native_output(kit: Any) -> None:
    """A backend raising with a secret, a bearer token for an endpoint that is down: the
    reason names the backend and the failure class, stderr its fixed detail, no secret."""
    raising = {
        "id": "com.example.kit",
        "transport": {
            "type": "stdio",
            "command": kit_python(),
            "args": [str(kit_denylist())],
            "lifecycle": "persistent",
        },
        "subscriptions": [kit.intercept("fail-closed")],
    }
    env = {**kit.env, "POLICY_TOKEN": SECRET}
    down = {
        "id": "com.example.down",
        "transport": {"type": "http", "url": "http://127.0.0.1:9/"},
        "authentication": {"type": "bearer", "tokenEnv": "POLICY_TOKEN"},
        "subscriptions": [kit.intercept("fail-closed")],
    }
    for hook, failure in ((raising, "rpc_error"), (down, "connect_failed")):
        registration = kit.registration(hook, name=f"{hook['id']}.json")
        reason = f"Required policy backend {hook['id']} unavailable ({failure})."
        for daemon in ("off", "auto", "auto"):  # in-process, the daemon started, then warm
            done = kit.run_hook(
                "claude-code", shell("claude-code", "boom"), registration, daemon=daemon, env=env
            )
            assert done.stdout == blocking_claude(reason) + "\n"
            assert f"backend {hook['id']} failed ({failure}, fail-closed): " in done.stderr
            assert SECRET not in done.stdout + done.stderr
        kit.stop_daemons()


def test_a_backend_not_on_the_hooks_path_is_named_with_its_fix(kit: Any) -> None:
    """#29: harnesses run hooks with their own PATH, without the kit's venv. The deny
    names the backend and the failure class; stderr and the daemon's log say how to fix
    it; neither has the backend's arguments or the hook's secrets."""
    missing = {
        "id": "com.example.ahp.denylist",
        "transport": {
            "type": "stdio",
            "command": "ahp-no-such-backend",
            "args": ["--token", SECRET],
            "lifecycle": "persistent",
        },
        "subscriptions": [kit.intercept("fail-closed")],
    }
    registration = kit.registration(missing)
    env = {**kit.env, "PATH": "/usr/bin:/bin", "POLICY_TOKEN": SECRET}
    reason = "Required policy backend com.example.ahp.denylist unavailable (spawn_failed)."
    line = (
        "ahp-adapter: backend com.example.ahp.denylist failed (spawn_failed, fail-closed): "
        "'ahp-no-such-backend' not found on PATH (the backend's PATH is '/usr/bin:/bin'); "
        "fix: give an absolute command path in the registration, or install the backend "
        "where the harness's PATH finds it (`ahp-adapter install` writes only the adapter's "
        "own absolute path, not the backends'; `ahp-adapter doctor DIALECT` checks each "
        "backend command on the hook's PATH)\n"
    )
    for daemon in ("off", "auto", "auto"):  # in-process, the daemon started, then warm
        done = kit.run_hook(
            "claude-code", shell("claude-code", "ls -la"), registration, daemon=daemon, env=env
        )
        assert done.stdout == blocking_claude(reason) + "\n", done.stderr
        assert line in done.stderr, done.stderr
        assert SECRET not in done.stdout + done.stderr
    (log,) = kit.runtime.glob("d-*.log")
    text = log.read_text(encoding="utf-8")
    assert line.removeprefix("ahp-adapter: ").strip() in text
    assert SECRET not in text
    # Gemini reads stray text: its answer names the backend, and stderr stays empty.
    done = kit.run_hook("gemini", shell("gemini", "ls -la"), registration, env=env)
    assert reason in done.stdout and done.stderr == ""


def kit_python() -> str:
    import sys

    return sys.executable


def kit_denylist() -> Path:
    return Path(__file__).resolve().parents[3] / "packages/protocol/tests/backends/kit_denylist.py"


def test_backend_stdout_never_reaches_ours(kit: Any) -> None:
    chatty = {
        "id": "com.example.kit",
        "transport": {"type": "stdio", "command": kit_python(), "args": [str(kit_denylist())]},
        "subscriptions": [kit.intercept("fail-open")],
    }
    done = kit.run_hook("claude-code", shell("claude-code", "chatty"), kit.registration(chatty))
    assert (done.returncode, done.stdout) == (0, "")


# -- malformed native payloads --------------------------------------------------------

BAD_INPUTS = [b"", b"not json", b"[1, 2]", b"\xff\xfe", b'{"tool_input": {"command": "ls"}}']


@pytest.mark.parametrize("dialect", sorted(PRE))
@pytest.mark.parametrize("policy", ["fail-closed", "fail-open"])
def test_malformed_payload(kit: Any, dialect: str, policy: str) -> None:
    registration = kit.registration(kit.recorder(effects=[], policy=policy))
    deny_generic = None
    for raw in BAD_INPUTS:
        done = kit.run_hook(dialect, raw, registration, "--event", PRE[dialect])
        assert done.returncode == 0, (raw, done.stderr)
        assert "Traceback" not in done.stdout + done.stderr
        if policy == "fail-open":
            assert done.stdout == nothing(dialect)
        else:
            assert reason_of(dialect, done.stdout) == GENERIC
            deny_generic = deny_generic or done.stdout
            assert done.stdout == deny_generic
        if dialect == "gemini":
            assert done.stderr == ""


@pytest.mark.parametrize("dialect", sorted(PRE))
def test_malformed_payload_of_unknown_event_blocks_with_exit_2(kit: Any, dialect: str) -> None:
    registration = kit.registration(kit.recorder(effects=[], policy="fail-closed"))
    done = kit.run_hook(dialect, b"garbage", registration)
    assert (done.returncode, done.stdout, done.stderr) == (2, "", GENERIC + "\n")
    # #29: JSON that names no event (and no --event) cannot be told either; it was let by.
    done = kit.run_hook(dialect, b'{"session_id": "s"}', registration)
    assert (done.returncode, done.stdout, done.stderr) == (2, "", GENERIC + "\n")
    opened = kit.registration(kit.recorder(effects=[], policy="fail-open"), name="open.json")
    done = kit.run_hook(dialect, b"garbage", opened)
    assert (done.returncode, done.stdout) == (0, nothing(dialect))


def test_malformed_post_tool_payload_never_blocks(kit: Any) -> None:
    registration = kit.registration(kit.recorder(effects=[], policy="fail-closed"))
    done = kit.run_hook("claude-code", b"garbage", registration, "--event", "PostToolUse")
    assert (done.returncode, done.stdout) == (0, "")


def test_unreadable_registration_fails_closed(kit: Any) -> None:
    missing = kit.tmp / "missing.json"
    done = kit.run_hook("codex", shell("codex", "ls"), missing)
    assert done.stdout == blocking_claude(GENERIC) + "\n"
    broken = kit.tmp / "broken.json"
    broken.write_text('{"protocolVersion": "draft", "hooks": [{"id": 1}]}')
    done = kit.run_hook("codex", shell("codex", "ls"), broken, daemon="auto")
    assert done.stdout == blocking_claude(GENERIC) + "\n"


# -- observations -------------------------------------------------------------------------


def recorded(path: Path) -> list[dict[str, Any]]:
    out = []
    for line in path.read_text().splitlines():
        entry = json.loads(line)
        if entry.get("event") == "message":
            out.append(entry["message"])
    return out


OBSERVED_CASES = {
    "claude-code": ["post_tool_use.shell", "session_start", "session_end"],
    "codex": ["post_tool_use.shell", "session_start"],
    "gemini": ["after_tool.shell", "session_start", "session_end"],
    "cursor": ["post_tool_use.shell", "session_start", "session_end"],
    "kimi": ["post_tool_use.shell", "session_start", "session_end"],
}


@pytest.mark.parametrize("dialect", sorted(OBSERVED_CASES))
def test_post_tool_and_session_hooks_are_observations(
    kit: Any, dialect: str, official_schema: Any
) -> None:
    daemon = DAEMON[dialect]
    record = kit.tmp / "record.jsonl"
    observer = kit.recorder(
        record=record, subscriptions=[kit.observe(["*"]), kit.intercept("fail-closed")]
    )
    registration = kit.registration(observer)
    for case in OBSERVED_CASES[dialect]:
        done = kit.run_hook(dialect, fixture(dialect, case), registration, daemon=daemon)
        assert (done.returncode, done.stdout) == (0, nothing(dialect)), done.stderr
    kit.stop_daemons()
    messages = recorded(record)
    assert all(m["method"] == "hooks/observe" and "id" not in m for m in messages)
    events = [m["params"]["event"] for m in messages]
    names = {
        "tool.after": "tool-after",
        "session.start": "session-start",
        "session.end": "session-end",
    }
    assert [e["type"] for e in events] == [
        json.loads((FIXTURES / dialect / f"{c}.json").read_text())["expect"]["type"]
        for c in OBSERVED_CASES[dialect]
    ]
    for event in events:
        assert official_schema(f"{names[event['type']]}.schema.json", event) == []
        assert "native" not in event  # includeNative is off


def test_include_native_delivers_the_native_payload(kit: Any) -> None:
    record = kit.tmp / "record.jsonl"
    backend = kit.recorder(
        record=record, effects=[], subscriptions=[kit.intercept("fail-open", includeNative=True)]
    )
    payload = shell("claude-code", "ls")
    kit.run_hook("claude-code", payload, kit.registration(backend))
    (message,) = recorded(record)
    assert message["params"]["event"]["native"] == {
        "provider": "claude-code",
        "eventName": "PreToolUse",
        "payload": payload,
    }
    rewrite = {"input": {"replace": False, "merge": True}}  # Claude Code carries input rewrites
    assert message["params"]["capabilities"] == {"effects": ["deny", "modify"], "modify": rewrite}


def test_gemini_pairs_the_synthesized_call_id(kit: Any) -> None:
    record = kit.tmp / "record.jsonl"
    backend = kit.recorder(
        record=record,
        effects=[],
        subscriptions=[kit.intercept("fail-open"), kit.observe(["tool.after"])],
    )
    registration = kit.registration(backend)
    before = fixture("gemini", "before_tool.shell")
    after = {
        **fixture("gemini", "after_tool.shell"),
        "tool_input": before["tool_input"],
        "tool_name": before["tool_name"],
    }
    assert kit.run_hook("gemini", before, registration).stdout == ""
    assert kit.run_hook("gemini", after, registration).stdout == ""
    intercepted, observed = recorded(record)
    call = intercepted["params"]["event"]["call"]
    assert call["synthesized"] is True
    assert observed["params"]["event"]["call"] == call
    assert os.listdir(kit.runtime / "pairs")  # the state lives in the private runtime dir

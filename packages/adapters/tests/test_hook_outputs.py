"""The exact native output of the hook process, per dialect, for every kind of outcome.

One real backend (the protocol package's scripted ``recorder.py`` over stdio)
answers a deny, no effect, ``allow``, or crashes; the hook runs as a process
(``python -m ahp_adapters hook``) and its stdout, stderr and exit code are
compared byte for byte:

- deny: the dialect's own blocking form with the backend's reason;
- no effect: nothing at all, exit 0; on Cursor ``{}`` (valid JSON without a
  decision), on every Cursor event, because the installer sets ``failClosed:
  true`` and Cursor then blocks on invalid JSON, empty stdout included;
- allow: the adapter advertises only ``deny`` (a native allow would skip the
  harness's permission prompt), so ``allow`` is an unadvertised effect, an
  operational failure: nothing under fail-open, the generic block under
  fail-closed; it is never written as a native allow;
- fail-closed failure: the blocking form with the generic reason, no internals;
- fail-open failure: no effect (as above), exit 0.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

FIXTURES = Path(__file__).parent / "fixtures"
SHELL_CASE = {
    "claude-code": ("pre_tool_use.shell", "PreToolUse"),
    "codex": ("pre_tool_use.shell", "PreToolUse"),
    "gemini": ("before_tool.shell", "BeforeTool"),
    "cursor": ("pre_tool_use.shell", "preToolUse"),
    "kimi": ("pre_tool_use.shell", "PreToolUse"),
}
REASON = "Force pushes rewrite shared history."
GENERIC = "Required policy backend unavailable."
UNADVERTISED = "Required policy backend com.example.recorder unavailable (unadvertised_effect)."
CRASHED = "Required policy backend com.example.recorder unavailable (abnormal_exit)."
DENY = [{"type": "deny", "reason": REASON, "code": "com.example.policy.force_push"}]
NOTHING = {"cursor": "{}\n"}
"""No effect on stdout, where it is not empty (written out here, not read from the codecs)."""


def nothing(dialect: str) -> str:
    return NOTHING.get(dialect, "")


def blocking(dialect: str, reason: str) -> str:
    if dialect in ("claude-code", "codex"):
        body: dict[str, Any] = {
            "hookSpecificOutput": {
                "hookEventName": "PreToolUse",
                "permissionDecision": "deny",
                "permissionDecisionReason": reason,
            }
        }
    elif dialect == "gemini":
        body = {"decision": "deny", "reason": reason}
    elif dialect == "kimi":
        body = {
            "hookSpecificOutput": {"permissionDecision": "deny", "permissionDecisionReason": reason}
        }
    else:
        body = {"permission": "deny", "user_message": reason, "agent_message": reason}
    return json.dumps(body, ensure_ascii=False) + "\n"


def payload(dialect: str) -> dict[str, Any]:
    case, _ = SHELL_CASE[dialect]
    data: dict[str, Any] = json.loads((FIXTURES / dialect / f"{case}.json").read_text())
    return data["payload"]  # type: ignore[no-any-return]


OUTCOMES: list[tuple[str, str, dict[str, Any], str | None]] = [
    # (name, policy, recorder script step, expected reason or None for nothing)
    ("deny", "fail-open", {"effects": DENY}, REASON),
    ("deny-fail-closed", "fail-closed", {"effects": DENY}, REASON),
    ("no-effect", "fail-closed", {"effects": []}, None),
    ("allow-fail-open", "fail-open", {"effects": [{"type": "allow"}]}, None),
    ("allow-fail-closed", "fail-closed", {"effects": [{"type": "allow"}]}, UNADVERTISED),
    ("failure-fail-closed", "fail-closed", {"crash": True}, CRASHED),
    ("failure-fail-open", "fail-open", {"crash": True}, None),
]


@pytest.mark.parametrize("dialect", sorted(SHELL_CASE))
@pytest.mark.parametrize(
    ("name", "policy", "step", "reason"), OUTCOMES, ids=[o[0] for o in OUTCOMES]
)
def test_exact_native_output(
    kit: Any, dialect: str, name: str, policy: str, step: dict[str, Any], reason: str | None
) -> None:
    registration = kit.registration(kit.recorder(script=[step], policy=policy))
    done = kit.run_hook(dialect, payload(dialect), registration, "--event", SHELL_CASE[dialect][1])
    assert done.returncode == 0, done.stderr
    if reason is None:
        assert done.stdout == nothing(dialect)
    else:
        assert done.stdout == blocking(dialect, reason)
    assert "allow" not in done.stdout
    assert "Traceback" not in done.stdout + done.stderr
    if dialect == "gemini" or name in ("deny", "deny-fail-closed", "no-effect"):
        assert done.stderr == ""  # Gemini reads stray stderr text; success says nothing


@pytest.mark.parametrize("dialect", sorted(SHELL_CASE))
def test_no_interceptor_means_nothing(kit: Any, dialect: str) -> None:
    observer = kit.recorder(subscriptions=[kit.observe(["session.*"])])
    done = kit.run_hook(dialect, payload(dialect), kit.registration(observer))
    assert (done.returncode, done.stdout) == (0, nothing(dialect))


def cursor_payload(case: str, **change: Any) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((FIXTURES / "cursor" / f"{case}.json").read_text())
    return {**data["payload"], **change}


CURSOR_NO_EFFECT: list[tuple[str, str, bytes | dict[str, Any], str, tuple[str, ...]]] = [
    # (name, hook dialect, payload, registration policy, extra hook arguments)
    ("preToolUse", "cursor", cursor_payload("pre_tool_use.shell"), "fail-closed", ()),
    (
        "preToolUse.file_write",
        "cursor",
        cursor_payload("pre_tool_use.file_write"),
        "fail-closed",
        (),
    ),
    ("preToolUse.mcp", "cursor", cursor_payload("pre_tool_use.mcp"), "fail-closed", ()),
    ("beforeShellExecution", "cursor", cursor_payload("before_shell_execution"), "fail-closed", ()),
    ("beforeMCPExecution", "cursor", cursor_payload("before_mcp_execution"), "fail-closed", ()),
    ("beforeReadFile", "cursor", cursor_payload("before_read_file"), "fail-closed", ()),
    ("postToolUse", "cursor", cursor_payload("post_tool_use.shell"), "fail-closed", ()),
    ("sessionStart", "cursor", cursor_payload("session_start"), "fail-closed", ()),
    ("sessionEnd", "cursor", cursor_payload("session_end"), "fail-closed", ()),
    (
        "ignored-event",
        "cursor",
        cursor_payload("pre_tool_use.shell", hook_event_name="afterAgentResponse"),
        "fail-closed",
        (),
    ),
    (
        "skipped-by-split-surface",
        "cursor",
        cursor_payload("pre_tool_use.shell"),
        "fail-closed",
        ("--skip-shell-mcp",),
    ),
    (
        "malformed-fail-open",
        "cursor",
        cursor_payload("pre_tool_use.shell", tool_input=None),
        "fail-open",
        ("--event", "preToolUse"),
    ),
    # Fail-closed, a payload naming no event blocks (it cannot be told: test_hook_process).
    ("no-event-name-fail-open", "cursor", {"not": "a cursor payload"}, "fail-open", ()),
    ("not-json-fail-open", "cursor", b"garbage", "fail-open", ()),
    (
        "malformed-post-tool-fail-closed",
        "cursor",
        cursor_payload("post_tool_use.shell", tool_name=7),
        "fail-closed",
        (),
    ),
    (
        "via-claude-hook-files",
        "claude-code",
        cursor_payload("pre_tool_use.shell", hook_event_name="PreToolUse"),
        "fail-closed",
        (),
    ),
]


@pytest.mark.parametrize(
    ("name", "dialect", "native", "policy", "args"),
    CURSOR_NO_EFFECT,
    ids=[c[0] for c in CURSOR_NO_EFFECT],
)
def test_cursor_no_effect_is_an_empty_object_on_every_event(
    kit: Any,
    name: str,
    dialect: str,
    native: bytes | dict[str, Any],
    policy: str,
    args: tuple[str, ...],
) -> None:
    """Cursor entries are installed with ``failClosed: true``: an empty answer would block."""
    registration = kit.registration(kit.recorder(effects=[], policy=policy))
    done = kit.run_hook(dialect, native, registration, *args)
    assert (done.returncode, done.stdout) == (0, "{}\n"), done.stderr


def test_cursor_fail_open_backend_failure_is_an_empty_object(kit: Any) -> None:
    registration = kit.registration(kit.recorder(script=[{"crash": True}], policy="fail-open"))
    for case in ("pre_tool_use.shell", "before_shell_execution"):
        done = kit.run_hook("cursor", cursor_payload(case), registration)
        assert (done.returncode, done.stdout) == (0, "{}\n"), done.stderr

"""The exact native output of the hook process, per dialect, for every kind of outcome.

One real backend (the protocol package's scripted ``recorder.py`` over stdio)
answers a deny, no effect, ``allow``, or crashes; the hook runs as a process
(``python -m ahp_adapters hook``) and its stdout, stderr and exit code are
compared byte for byte:

- deny: the dialect's own blocking form with the backend's reason;
- no effect: nothing at all, exit 0;
- allow: the adapter advertises only ``deny`` (a native allow would skip the
  harness's permission prompt), so ``allow`` is an unadvertised effect, an
  operational failure: nothing under fail-open, the generic block under
  fail-closed; it is never written as a native allow;
- fail-closed failure: the blocking form with the generic reason, no internals;
- fail-open failure: nothing at all, exit 0.
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
DENY = [{"type": "deny", "reason": REASON, "code": "com.example.policy.force_push"}]


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
    ("allow-fail-closed", "fail-closed", {"effects": [{"type": "allow"}]}, GENERIC),
    ("failure-fail-closed", "fail-closed", {"crash": True}, GENERIC),
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
        assert done.stdout == ""
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
    assert (done.returncode, done.stdout) == (0, "")

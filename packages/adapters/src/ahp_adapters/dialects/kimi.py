"""Kimi CLI hooks (``PreToolUse``, ``PostToolUse``, ``PostToolUseFailure``, sessions).

Owns the Kimi CLI codec (also Kimi Code, same contract). Payloads are
``{hook_event_name, session_id, cwd, tool_name, tool_input, tool_call_id}``;
``tool_call_id`` may be empty, and is then synthesized (from the session, the
tool and its input) and marked ``synthesized``. MCP tools are registered under
their bare MCP name, so they cannot be told from native tools here: they are
``other`` (the manifest says so).

Deny: exit 0 with ``{"hookSpecificOutput": {"permissionDecision": "deny",
"permissionDecisionReason": ...}}``. No effect: exit 0, nothing written (exit-0
stdout text would be added to the model's context). Kimi fails open by design
(timeouts, crashes, other exit codes). Fact source: docs/native-dialects §8
(kimi-cli ``hooks/events.py``, ``hooks/runner.py``, snapshot 2026-07-16).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, ClassVar

from ahp_adapters.dialects.base import (
    TOOL_PATH_NATIVE,
    Dialect,
    NativeAnswer,
    Parsed,
    PayloadError,
    Quirks,
    clip,
    output_items,
    session_of,
    stable_id,
    text,
    tool_input,
)

KIMI_KINDS: dict[str, str] = {
    "Shell": "shell",
    "ReadFile": "file_read",
    "ReadMediaFile": "file_read",
    "WriteFile": "file_write",
    "StrReplaceFile": "file_edit",
    "Glob": "search",
    "Grep": "search",
    "SearchWeb": "search",
    "FetchURL": "fetch",
    "Agent": "task",
    # Offered in 1.51.0 (live) and none of the kinds above:
    "AskUserQuestion": "other",
    "EnterPlanMode": "other",
    "ExitPlanMode": "other",
    "SetTodoList": "other",
    "TaskList": "other",
    "TaskOutput": "other",
    "TaskStop": "other",
}
SESSION_TRIGGERS = {"startup": "startup", "resume": "resume"}


class Kimi(Dialect):
    kinds: ClassVar[Mapping[str, str]] = KIMI_KINDS
    name: ClassVar[str] = "kimi"
    harness_name: ClassVar[str] = "kimi-cli"
    provider: ClassVar[str] = "kimi-cli"
    pre_tool_events: ClassVar[frozenset[str]] = frozenset({"PreToolUse"})
    all_events: ClassVar[frozenset[str]] = frozenset(
        {"PreToolUse", "PostToolUse", "PostToolUseFailure", "SessionStart", "SessionEnd"}
    )
    documented_timeout_s: ClassVar[float] = 30.0
    quirks: ClassVar[Quirks] = Quirks(
        title="Kimi CLI (and Kimi Code)",
        no_effect="Exit 0 and empty stdout: only a deny is read, and exit-0 stdout text would "
        "be added to the model's context.",
        no_effect_stdout="",
        empty_output="No decision: the tool goes on to its own approval request.",
        failure_default="Fail-open by design: timeouts (30 s by default), crashes and other "
        "exit codes allow.",
        failure_switch="None.",
        exit_codes="Exit 2 blocks with stderr as the reason, fed back to the model; other "
        "non-zero exits allow.",
        allow="Only `deny` is read: anything else is an allow that grants no permission (the "
        "tool's own approval still runs).",
        ask="None: not read.",
        modify="Not advertised: Kimi's runner ignores `updatedInput`.",
        call_ids="`tool_call_id` is real but may be empty, then synthesized from session, tool "
        "and input; `session_id` is `session.id`.",
        double_fire="None known: matching hooks run in parallel, identical commands once.",
        source="native-dialects.md §8 (kimi-cli `hooks/runner.py`, `hooks/events.py`, docs, "
        "snapshot 2026-07-16).",
    )

    def parse(self, payload: Mapping[str, Any], *, options: Mapping[str, Any]) -> Parsed:
        event = self.event_name(payload) or options.get("event")
        if not isinstance(event, str) or event not in self.all_events:
            return Parsed("ignore", str(event or ""))
        session = session_of(payload)
        sid = session["id"] if session else None
        if event in ("SessionStart", "SessionEnd"):
            if session is None:
                raise PayloadError("missing field session_id")
            if event == "SessionStart":
                source = payload.get("source")
                trigger = SESSION_TRIGGERS.get(source) if isinstance(source, str) else None
                fields: dict[str, Any] = {
                    "session": session,
                    "trigger": trigger or "startup",
                    "permissionMode": "unknown",
                    "items": [],
                }
                return Parsed("session.start", event, fields)
            reason = payload.get("reason")
            reason = reason if isinstance(reason, str) and reason else "unknown"
            return Parsed(
                "session.end", event, {"session": session, "outcome": "unknown", "reason": reason}
            )
        name = text(payload, "tool_name", required=True)
        assert name is not None
        arguments = tool_input(payload.get("tool_input"))
        real = text(payload, "tool_call_id")
        call: dict[str, Any] = (
            {"id": real}
            if real
            else {"id": stable_id("call", self.provider, sid, name, arguments), "synthesized": True}
        )
        kind = self.kinds.get(name, "other")
        tool = {"name": name, "kind": kind, "input": arguments, "origin": "native"}
        fields = {"call": call, "tool": tool, "path": TOOL_PATH_NATIVE}
        if session is not None:
            fields["session"] = session
        if event == "PreToolUse":
            return Parsed("tool.before", event, fields)
        fields["execution"] = {"status": "executed"}
        if event == "PostToolUseFailure":
            message = payload.get("error")
            fields["outcome"] = "error"
            fields["error"] = {
                "message": clip(message) if isinstance(message, str) else "the tool failed",
                "class": "tool_error",
            }
            fields["items"] = []
        else:
            output = next(
                (
                    payload[k]
                    for k in ("tool_output", "tool_response", "tool_result")
                    if k in payload
                ),
                None,
            )
            fields["outcome"] = "ok"
            fields["items"] = output_items(call["id"], output)
        return Parsed("tool.after", event, fields)

    def render_deny(self, reason: str, native_event: str | None) -> NativeAnswer:
        if native_event not in self.pre_tool_events:
            return self.exit2_deny(reason)
        output = {
            "hookSpecificOutput": {
                "permissionDecision": "deny",
                "permissionDecisionReason": clip(reason),
            }
        }
        return NativeAnswer(stdout=json.dumps(output, ensure_ascii=False) + "\n")

    def tool_paths(self) -> list[str]:
        return [TOOL_PATH_NATIVE]

    def manifest_gaps(self) -> list[dict[str, str]]:
        return [
            {
                "path": "toolPaths.mcp",
                "reason": "Kimi names MCP tools by their bare name: they are seen as native tools",
            }
        ]

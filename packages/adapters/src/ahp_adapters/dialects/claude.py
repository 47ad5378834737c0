"""Claude Code hooks (``PreToolUse``, ``PostToolUse``, ``PostToolUseFailure``, sessions).

Owns the Claude Code codec and the codecs of the harnesses that load Claude's
hook files (VS Code agent hooks; Cursor with third-party configs): the caller
is told from the payload (``cursor_version``/``conversation_id``: Cursor;
camelCase ``hookEventName``/``sessionId``: VS Code) and the right codec reads
it and answers in its own blocking form.

Deny: exit 0 with ``hookSpecificOutput.permissionDecision: "deny"`` (the
documented JSON form). No effect: exit 0, empty stdout; never ``allow``, which
would skip Claude's permission prompt. Claude Code (only: not VS Code, not
Codex) advertises ``modify`` (``merge``) on ``tool.input`` and renders an
accepted rewrite as ``hookSpecificOutput.updatedInput`` with no
``permissionDecision``. Each harness's behaviour the codecs rely on is the
``quirks`` of its class. Fact source: docs/native-dialects §1, §2.5,
§7 (Claude Agent SDK types, official hooks reference).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, ClassVar

from ahp_adapters.dialects.base import (
    TOOL_PATH_MCP,
    TOOL_PATH_NATIVE,
    Dialect,
    NativeAnswer,
    Parsed,
    PayloadError,
    Quirks,
    clip,
    mcp_tool,
    output_items,
    session_of,
    text,
    tool_input,
    unknown_connection,
)

CLAUDE_KINDS: dict[str, str] = {
    "Bash": "shell",
    "PowerShell": "shell",
    "Monitor": "shell",
    "Read": "file_read",
    "Write": "file_write",
    "Edit": "file_edit",
    "MultiEdit": "file_edit",
    "NotebookEdit": "file_edit",
    "Glob": "search",
    "Grep": "search",
    "WebSearch": "search",
    "LSP": "search",
    "WebFetch": "fetch",
    "Agent": "task",
    "Task": "task",
    "ToolSearch": "search",  # searches the deferred tools, as Qwen's tool_search
    # Offered in 2.1.332 (live) and none of the kinds above:
    "DeferredToolPlaceholder": "other",
    "ListAgents": "other",
    "ReportFindings": "other",
    "ScheduleWakeup": "other",
    "Skill": "other",
    "Workflow": "other",
}
"""Claude Code tool names -> AHP kind (anything else is ``other``; MCP tools are ``mcp``)."""

SESSION_TRIGGERS = {"startup": "startup", "resume": "resume", "compact": "compact"}
SESSION_END_OUTCOMES = {
    "clear": "completed",
    "logout": "completed",
    "prompt_input_exit": "completed",
    "exit": "completed",
}


def split_mcp(name: str, prefix: str = "mcp__") -> tuple[str, str] | None:
    """``mcp__<server>__<tool>`` -> (server, tool), else ``None``."""
    if not name.startswith(prefix):
        return None
    server, sep, tool = name[len(prefix) :].partition("__")
    if not (sep and server and tool):
        return None
    return server, tool


def describe_tool(
    name: str, arguments: dict[str, Any], kinds: Mapping[str, str]
) -> tuple[dict[str, Any], str]:
    """(``tool``, ``path``) for a Claude-style tool name (``mcp__server__tool`` is MCP)."""
    mcp = split_mcp(name)
    if mcp is not None:
        server, tool = mcp
        descriptor = mcp_tool(
            server,
            tool,
            provenance="inferred",
            connection=unknown_connection("the hook payload names only the server"),
        )
        tool_obj = {
            "name": name,
            "kind": "mcp",
            "input": arguments,
            "origin": "mcp",
            "mcp": descriptor,
        }
        return tool_obj, TOOL_PATH_MCP
    kind = kinds.get(name, "other")
    return {"name": name, "kind": kind, "input": arguments, "origin": "native"}, TOOL_PATH_NATIVE


def with_session(fields: dict[str, Any], session: dict[str, Any] | None) -> dict[str, Any]:
    if session is not None:
        fields["session"] = session
    return fields


class ClaudeCode(Dialect):
    name: ClassVar[str] = "claude-code"
    harness_name: ClassVar[str] = "claude-code"
    provider: ClassVar[str] = "claude-code"
    pre_tool_events: ClassVar[frozenset[str]] = frozenset({"PreToolUse"})
    all_events: ClassVar[frozenset[str]] = frozenset(
        {"PreToolUse", "PostToolUse", "PostToolUseFailure", "SessionStart", "SessionEnd"}
    )
    kinds: ClassVar[Mapping[str, str]] = CLAUDE_KINDS
    documented_timeout_s: ClassVar[float] = 600.0
    version_env: ClassVar[tuple[str, str] | None] = (
        "AI_AGENT",
        r"claude-code_(\d+)-(\d+)-(\d+)(?:_.*)?",
    )
    """Claude Code 2.1 exports ``AI_AGENT=claude-code_2-1-332_harness`` to its hooks."""
    input_rewrite: ClassVar[Mapping[str, bool] | None] = {"replace": False, "merge": True}
    """``updatedInput`` "overrides tool_input fields": the whole effective input is written,
    exact under override semantics and under wholesale replacement alike, except that a
    ``replace`` dropping a field cannot be enforced by an override; so merge only."""
    quirks: ClassVar[Quirks] = Quirks(
        title="Claude Code",
        no_effect="Exit 0 and empty stdout: Claude Code reads no decision and runs its normal "
        "permission flow.",
        no_effect_stdout="",
        empty_output="No decision: permission rules and the permission prompt apply as usual.",
        failure_default="Fail-open: a crash, an exit other than 0 or 2, a timeout (600 s by "
        "default), a missing script or invalid JSON is a non-blocking error; the tool proceeds.",
        failure_switch="None (an `http` hook's connection failure, non-2xx answer or timeout is "
        "non-blocking too): the adapter applies the failure policy itself.",
        exit_codes="Exit 2 blocks with stderr as the reason (stdout ignored); any other non-zero "
        "exit is a non-blocking error; `python3 missing.py` exits 2 and so blocks (#80697).",
        allow='`permissionDecision: "allow"` skips the permission prompt (not deny or ask rules, '
        "nor managed policy), so it is never written.",
        ask='`permissionDecision: "ask"` shows the permission prompt; never written.',
        modify="Enforced, merge only: an accepted modification becomes "
        "`hookSpecificOutput.updatedInput` (the whole effective input), never with a "
        "`permissionDecision`; `replace` is left out, since `updatedInput` overrides "
        "fields and a replace that drops one could not be enforced.",
        call_ids="`tool_use_id` is real and the same on PreToolUse and PostToolUse; `session_id` "
        "is `session.id`; there is no turn id.",
        double_fire="None known: one PreToolUse per call (matching handlers run in parallel, "
        "identical commands once).",
        source="native-dialects.md §1, §2 (Claude Agent SDK `types.py` 2026-08-22, the official "
        "hooks reference; anthropics/claude-code #84656, #80697).",
    )

    def resolve(self, payload: Mapping[str, Any]) -> Dialect:
        if "cursor_version" in payload or "conversation_id" in payload:
            from ahp_adapters.dialects.cursor import CursorViaClaude

            return CursorViaClaude()
        if "hookEventName" in payload or "sessionId" in payload:
            return VSCode()
        return self

    def parse(self, payload: Mapping[str, Any], *, options: Mapping[str, Any]) -> Parsed:
        event = self.event_name(payload) or options.get("event")
        if not isinstance(event, str) or event not in self.all_events:
            return Parsed("ignore", str(event or ""))
        session = session_of(payload)
        if event == "SessionStart":
            return self._session_start(payload, session, event)
        if event == "SessionEnd":
            return self._session_end(payload, session, event)
        name = text(payload, "tool_name", required=True)
        assert name is not None
        arguments = tool_input(payload.get("tool_input"))
        call_id = text(payload, "tool_use_id", required=True)
        tool, path = describe_tool(name, arguments, self.kinds)
        fields = with_session({"call": {"id": call_id}, "tool": tool, "path": path}, session)
        self._extra(payload, fields)
        if event in self.pre_tool_events:
            return Parsed("tool.before", event, fields)
        return Parsed("tool.after", event, self._after(payload, fields, event))

    def _extra(self, payload: Mapping[str, Any], fields: dict[str, Any]) -> None:
        """Dialect-specific fields (Codex adds ``turn``)."""

    def _after(
        self, payload: Mapping[str, Any], fields: dict[str, Any], event: str
    ) -> dict[str, Any]:
        call_id = fields["call"]["id"]
        fields["execution"] = {"status": "executed"}
        if event == "PostToolUseFailure":
            if payload.get("is_interrupt") is True:
                fields.update(outcome="cancelled", items=[])
                return fields
            message = payload.get("error")
            fields["outcome"] = "error"
            fields["error"] = {
                "message": clip(message) if isinstance(message, str) else "the tool failed",
                "class": "tool_error",
            }
            fields["items"] = []
            return fields
        fields["outcome"] = "ok"
        fields["items"] = output_items(call_id, payload.get("tool_response"))
        return fields

    def _session_start(
        self, payload: Mapping[str, Any], session: dict[str, Any] | None, event: str
    ) -> Parsed:
        if session is None:
            raise PayloadError("missing field session_id")
        source = payload.get("source")
        fields: dict[str, Any] = {"session": session, "items": []}
        trigger = SESSION_TRIGGERS.get(source) if isinstance(source, str) else None
        if trigger is None:
            # "clear" needs the previous session's id (resumedFrom), which the payload lacks.
            fields["trigger"] = "startup"
            fields["gaps"] = [
                {"path": "trigger", "reason": "native source has no AHP trigger without its origin"}
            ]
        else:
            fields["trigger"] = trigger
        mode = payload.get("permission_mode")
        fields["permissionMode"] = mode if isinstance(mode, str) and mode else "unknown"
        return Parsed("session.start", event, fields)

    def _session_end(
        self, payload: Mapping[str, Any], session: dict[str, Any] | None, event: str
    ) -> Parsed:
        if session is None:
            raise PayloadError("missing field session_id")
        reason = payload.get("reason")
        reason = reason if isinstance(reason, str) and reason else "unknown"
        outcome = SESSION_END_OUTCOMES.get(reason, "unknown")
        return Parsed(
            "session.end", event, {"session": session, "outcome": outcome, "reason": reason}
        )

    def render_deny(self, reason: str, native_event: str | None) -> NativeAnswer:
        if native_event not in self.pre_tool_events:
            return self.exit2_deny(reason)
        output = {
            "hookSpecificOutput": {
                "hookEventName": native_event,
                "permissionDecision": "deny",
                "permissionDecisionReason": clip(reason),
            }
        }
        return NativeAnswer(stdout=json.dumps(output, ensure_ascii=False) + "\n")

    def render_modify(
        self, updated_input: Mapping[str, Any], native_event: str | None
    ) -> NativeAnswer:
        """``updatedInput`` alone: no ``permissionDecision`` (never ``allow``), so Claude's
        own permission flow judges the updated input."""
        if not self.carries_modify(native_event):
            return super().render_modify(updated_input, native_event)
        output = {
            "hookSpecificOutput": {"hookEventName": native_event, "updatedInput": updated_input}
        }
        return NativeAnswer(stdout=json.dumps(output, ensure_ascii=False) + "\n")

    def manifest_gaps(self) -> list[dict[str, str]]:
        return [
            {"path": "toolPaths.mention", "reason": "@file mentions do not fire PreToolUse"},
            {"path": "toolPaths.skill", "reason": "a typed /skill does not fire PreToolUse"},
            {
                "path": "tool.mcp.connection",
                "reason": "MCP tools are named mcp__server__tool; no connection details",
            },
        ]


VSCODE_KINDS: dict[str, str] = {
    "run_in_terminal": "shell",
    "run_task": "shell",
    "create_and_run_task": "shell",
    "read_file": "file_read",
    "read_notebook_cell_output": "file_read",
    "create_file": "file_write",
    "create_directory": "file_write",
    "replace_string_in_file": "file_edit",
    "multi_replace_string_in_file": "file_edit",
    "insert_edit_into_file": "file_edit",
    "apply_patch": "file_edit",
    "edit_notebook_file": "file_edit",
    "file_search": "search",
    "grep_search": "search",
    "semantic_search": "search",
    "list_dir": "search",
    "search_workspace_symbols": "search",
    "list_code_usages": "search",
    "fetch_webpage": "fetch",
    "runSubagent": "task",
}


class VSCode(ClaudeCode):
    """VS Code agent hooks running a Claude-format hook (camelCase common fields).

    Same blocking form as Claude Code (``hookSpecificOutput`` deny); VS Code's
    ``allow`` auto-approves, so no effect stays empty output.
    """

    name: ClassVar[str] = "vscode"
    harness_name: ClassVar[str] = "vscode"
    provider: ClassVar[str] = "vscode"
    all_events: ClassVar[frozenset[str]] = frozenset({"PreToolUse", "PostToolUse", "SessionStart"})
    kinds: ClassVar[Mapping[str, str]] = VSCODE_KINDS
    documented_timeout_s: ClassVar[float] = 30.0
    input_rewrite: ClassVar[Mapping[str, bool] | None] = None  # not documented to be honoured
    quirks: ClassVar[Quirks] = Quirks(
        title="VS Code agent hooks (running Claude's hook files)",
        no_effect="Exit 0 and empty stdout: no decision (VS Code's examples print "
        '`{"continue":true}`, also harmless).',
        no_effect_stdout="",
        empty_output="No decision: processing continues and VS Code's own approval applies.",
        failure_default="Fail-open: other exit codes are a warning and processing continues; "
        "the timeout is 30 s by default.",
        failure_switch="None.",
        exit_codes="Exit 2 is a blocking error with stderr shown to the model; other non-zero "
        "exits are a non-blocking warning.",
        allow='`permissionDecision: "allow"` auto-approves the call, so it is never written.',
        ask='`permissionDecision: "ask"` asks the user (deny > ask > allow across hooks); '
        "never written.",
        modify="Not advertised: VS Code ignores an `updatedInput` that does not match the "
        "tool's schema, and those schemas are internal and change.",
        call_ids="`tool_use_id` is real; camelCase `sessionId` is `session.id`.",
        double_fire="None known, but VS Code ignores matchers: the hook runs for every tool.",
        source="native-dialects.md §7, §2.5 (microsoft/vscode-docs hooks reference 2026, "
        "vscode-copilot-chat `toolNames.ts`).",
    )

    def resolve(self, payload: Mapping[str, Any]) -> Dialect:
        return self

    def event_name(self, payload: Mapping[str, Any]) -> str | None:
        value = payload.get("hookEventName") or payload.get("hook_event_name")
        return value if isinstance(value, str) and value else None

    def parse(self, payload: Mapping[str, Any], *, options: Mapping[str, Any]) -> Parsed:
        normalized = dict(payload)
        if "sessionId" in payload and "session_id" not in payload:
            normalized["session_id"] = payload["sessionId"]
        normalized.pop("model", None)
        return super().parse(normalized, options=options)

    def manifest_gaps(self) -> list[dict[str, str]]:
        return [
            {"path": "tool.mcp", "reason": "VS Code's MCP tool naming is not documented"},
            {"path": "matcher", "reason": "VS Code ignores hook matchers"},
        ]

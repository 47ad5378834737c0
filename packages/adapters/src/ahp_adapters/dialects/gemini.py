"""Gemini CLI hooks (``BeforeTool``, ``AfterTool``, ``SessionStart``, ``SessionEnd``).

Owns the Gemini CLI codec. Gemini sends no tool-call id: ``call.id`` is
synthesized from the session id, the hook's ``timestamp``, the tool name and
its input (the same payload always gives the same id) and marked
``synthesized``; the hook pairs it with the later ``AfterTool`` through a small
per-session state file. MCP tools carry ``mcp_context``, the only runtime MCP
metadata any harness sends (provenance ``runtime``).

Exit-code quirks (hookRunner): text that is not JSON with an exit code other
than 0 or 1 is a *deny*, and exit 1 is an allow with a warning; plain text on
stdout is an allow plus a system message. So the adapter writes JSON or
nothing on stdout, keeps stderr empty when it exits 0, and exits non-zero only
with 2 on purpose. Deny: exit 0 with ``{"decision": "deny", "reason": ...}``.
No effect: exit 0, nothing written. Fact source: docs/native-dialects §3.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, ClassVar, Literal

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
    scrub_args,
    scrub_url,
    session_of,
    stable_id,
    text,
    tool_input,
)

GEMINI_KINDS: dict[str, str] = {
    "run_shell_command": "shell",
    "read_file": "file_read",
    "read_many_files": "file_read",
    "write_file": "file_write",
    "replace": "file_edit",
    "glob": "search",
    "grep_search": "search",
    "search_file_content": "search",
    "list_directory": "search",
    "google_web_search": "search",
    "web_fetch": "fetch",
    "invoke_agent": "task",
    "delegate_to_agent": "task",
    # Offered in 0.61.0 (live) and none of the kinds above (the background tools read or
    # list shells already started by run_shell_command; they run nothing):
    "activate_skill": "other",
    "enter_plan_mode": "other",
    "list_background_processes": "other",
    "read_background_output": "other",
    "update_topic": "other",
}

SESSION_TRIGGERS = {"startup": "startup", "resume": "resume"}
SESSION_END_OUTCOMES = {
    "exit": "completed",
    "clear": "completed",
    "logout": "completed",
    "prompt_input_exit": "completed",
}


def mcp_connection(context: Mapping[str, Any]) -> dict[str, Any]:
    """The connection ``mcp_context`` describes (credentials stripped), or gaps."""
    command = context.get("command")
    if isinstance(command, str) and command:
        connection: dict[str, Any] = {"transport": "stdio", "command": command}
        gaps = []
        args = context.get("args")
        if isinstance(args, list):
            connection["args"] = scrub_args(args)
        else:
            gaps.append({"path": "args", "reason": "not in mcp_context"})
        cwd = context.get("cwd")
        if isinstance(cwd, str) and cwd:
            connection["cwd"] = cwd
        else:
            gaps.append({"path": "cwd", "reason": "not in mcp_context"})
        if gaps:
            connection["gaps"] = gaps
        return connection
    url = context.get("url")
    if isinstance(url, str) and url and scrub_url(url):
        # mcp_context.url does not say whether the server speaks SSE or streamable HTTP.
        return {"transport": "_url", "addressForm": "url", "address": scrub_url(url)}
    tcp = context.get("tcp")
    if isinstance(tcp, str) and tcp:
        return {"transport": "_tcp", "addressForm": "host:port", "address": tcp}
    reason = "mcp_context has no command, url or tcp"
    return {
        "transport": "_undisclosed",
        "gaps": [{"path": "addressForm", "reason": reason}, {"path": "address", "reason": reason}],
    }


class Gemini(Dialect):
    kinds: ClassVar[Mapping[str, str]] = GEMINI_KINDS
    name: ClassVar[str] = "gemini"
    harness_name: ClassVar[str] = "gemini-cli"
    provider: ClassVar[str] = "gemini-cli"
    pre_tool_events: ClassVar[frozenset[str]] = frozenset({"BeforeTool"})
    all_events: ClassVar[frozenset[str]] = frozenset(
        {"BeforeTool", "AfterTool", "SessionStart", "SessionEnd"}
    )
    stderr_ok: ClassVar[bool] = False
    native_timeout_unit: ClassVar[Literal["s", "ms"]] = "ms"
    documented_timeout_s: ClassVar[float] = 60.0
    quirks: ClassVar[Quirks] = Quirks(
        title="Gemini CLI",
        no_effect="Exit 0, empty stdout and empty stderr: Gemini has no output to read and "
        "continues through its normal policy (`{}` would do as well).",
        no_effect_stdout="",
        empty_output="No decision; but Gemini parses stderr when stdout is empty, so the codec "
        "keeps stderr empty whenever it exits 0.",
        failure_default="Fail-open on a timeout (60 000 ms by default), a spawn error or exit 1; "
        "non-JSON text with any other non-zero exit is a deny.",
        failure_switch="None.",
        exit_codes="Exit 2 denies with stderr as the reason; exit 1 allows with a warning; other "
        "non-zero exits with non-JSON text deny (a shell's 127 blocks).",
        allow='`decision: "allow"` only continues through the normal policy and confirmation; '
        "plain stdout text becomes an allow plus a `systemMessage`; never written.",
        ask='`decision: "ask"` forces a user confirmation (current scheduler); never written.',
        modify="Not advertised: `hookSpecificOutput.tool_input` is a shallow merge over the "
        "arguments, not a replacement.",
        call_ids="None in the payload: `call.id` is synthesized from session, hook timestamp, "
        "tool and input, and paired with AfterTool through a per-session state file.",
        double_fire="None known: one BeforeTool per scheduled call.",
        source="native-dialects.md §3 (gemini-cli `hookRunner.ts`, `types.ts`, `docs/hooks`, "
        "snapshot 2026-08-21).",
    )

    def parse(self, payload: Mapping[str, Any], *, options: Mapping[str, Any]) -> Parsed:
        event = self.event_name(payload) or options.get("event")
        if not isinstance(event, str) or event not in self.all_events:
            return Parsed("ignore", str(event or ""))
        session = session_of(payload)
        sid = session["id"] if session else None
        if event == "SessionStart":
            if session is None:
                raise PayloadError("missing field session_id")
            source = payload.get("source")
            trigger = SESSION_TRIGGERS.get(source) if isinstance(source, str) else None
            fields: dict[str, Any] = {
                "session": session,
                "trigger": trigger or "startup",
                "permissionMode": "unknown",
                "items": [],
            }
            if trigger is None:
                fields["gaps"] = [{"path": "trigger", "reason": "native source has no AHP trigger"}]
            return Parsed("session.start", event, fields)
        if event == "SessionEnd":
            if session is None:
                raise PayloadError("missing field session_id")
            reason = payload.get("reason")
            reason = reason if isinstance(reason, str) and reason else "unknown"
            outcome = SESSION_END_OUTCOMES.get(reason, "unknown")
            return Parsed(
                "session.end", event, {"session": session, "outcome": outcome, "reason": reason}
            )
        name = text(payload, "tool_name", required=True)
        assert name is not None
        arguments = tool_input(payload.get("tool_input"))
        tool, path = self._tool(name, arguments, payload.get("mcp_context"))
        # No call id in Gemini payloads: same session, hook time, tool and input -> same id.
        call_id = stable_id(
            "call",
            self.provider,
            sid,
            payload.get("timestamp"),
            event,
            name,
            arguments,
            payload.get("original_request_name"),
        )
        fields = {"call": {"id": call_id, "synthesized": True}, "tool": tool, "path": path}
        if session is not None:
            fields["session"] = session
        pairing = (sid or "", stable_id("tool", name, arguments))
        if event == "BeforeTool":
            return Parsed("tool.before", event, fields, pairing=pairing)
        response = payload.get("tool_response")
        fields["execution"] = {"status": "executed"}
        error = response.get("error") if isinstance(response, Mapping) else None
        if error:
            message = error.get("message") if isinstance(error, Mapping) else error
            fields["outcome"] = "error"
            fields["error"] = {
                "message": clip(message) if isinstance(message, str) else "the tool failed",
                "class": "tool_error",
            }
            fields["items"] = []
        else:
            content = response
            if isinstance(response, Mapping) and "llmContent" in response:
                content = response["llmContent"]
            fields["outcome"] = "ok"
            fields["items"] = output_items(call_id, content)
        return Parsed("tool.after", event, fields, pairing=pairing)

    @staticmethod
    def _tool(name: str, arguments: dict[str, Any], context: Any) -> tuple[dict[str, Any], str]:
        if isinstance(context, Mapping):
            server = context.get("server_name")
            tool_name = context.get("tool_name")
            if isinstance(server, str) and server and isinstance(tool_name, str) and tool_name:
                descriptor = mcp_tool(
                    server, tool_name, provenance="runtime", connection=mcp_connection(context)
                )
                tool = {
                    "name": name,
                    "kind": "mcp",
                    "input": arguments,
                    "origin": "mcp",
                    "mcp": descriptor,
                }
                return tool, TOOL_PATH_MCP
        kind = GEMINI_KINDS.get(name, "other")
        return {
            "name": name,
            "kind": kind,
            "input": arguments,
            "origin": "native",
        }, TOOL_PATH_NATIVE

    def render_deny(self, reason: str, native_event: str | None) -> NativeAnswer:
        if native_event not in self.pre_tool_events:
            return self.exit2_deny(reason)
        output = {"decision": "deny", "reason": clip(reason)}
        return NativeAnswer(stdout=json.dumps(output, ensure_ascii=False) + "\n")

    def manifest_gaps(self) -> list[dict[str, str]]:
        return [
            {"path": "call.id", "reason": "Gemini sends no tool-call id; the adapter synthesizes"},
            {
                "path": "tool.mcp",
                "reason": "MCP tools without mcp_context cannot be told from native tools",
            },
        ]

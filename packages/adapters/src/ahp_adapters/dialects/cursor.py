"""Cursor hooks (``preToolUse``, ``beforeShellExecution``, ``beforeMCPExecution``, ...).

Owns the Cursor codec. Cursor fires ``preToolUse`` *and*
``beforeShellExecution``/``beforeMCPExecution`` for one shell or MCP call, so a
backend would see two ``tool.before`` events: the installer wires one surface
per tool family (``preToolUse`` alone by default; with ``--surface split``,
the shell and MCP hooks plus ``preToolUse --skip-shell-mcp``, which ignores
``Shell`` and ``MCP:*`` calls).

``conversation_id`` is ``session.id``; ``cursor_version`` is the harness
version (the only harness that sends one). ``tool_use_id`` exists on
``preToolUse`` only; elsewhere ``call.id`` is synthesized from the
conversation, the generation and the call. Deny: exit 0 with
``{"permission": "deny", "user_message", "agent_message"}`` (snake_case,
Cursor >= 2.0). No effect: exit 0 with ``{}`` on stdout, for every event
(``Cursor.quirks.no_effect_stdout``): the installer sets ``failClosed: true``,
under which Cursor treats invalid JSON, empty stdout included, as a failure
and blocks; and never ``allow``, which may skip Cursor's own approval on shell
and MCP calls. Fact source: docs/native-dialects §5 (medium confidence: no
official schema), issue 15 §3 (field reports of empty answers blocked).
"""

from __future__ import annotations

import json
import os
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
    scrub_args,
    scrub_url,
    stable_id,
    text,
    tool_input,
    unknown_connection,
)

CURSOR_KINDS: dict[str, str] = {
    "Shell": "shell",
    "Read": "file_read",
    "Write": "file_write",
    "Delete": "file_write",
    "Grep": "search",
    "Task": "task",
}

PRE_TOOL = "preToolUse"
SHELL = "beforeShellExecution"
MCP = "beforeMCPExecution"
READ = "beforeReadFile"
CLAUDE_EVENT_NAMES = {
    "PreToolUse": PRE_TOOL,
    "PostToolUse": "postToolUse",
    "SessionStart": "sessionStart",
    "SessionEnd": "sessionEnd",
}
"""Claude's event names, should Cursor pass them on when it runs Claude's hook files."""


def _edit_like(arguments: Mapping[str, Any]) -> bool:
    return any(k in arguments for k in ("old_string", "new_string", "oldString", "newString"))


class Cursor(Dialect):
    kinds: ClassVar[Mapping[str, str]] = CURSOR_KINDS
    name: ClassVar[str] = "cursor"
    harness_name: ClassVar[str] = "cursor"
    provider: ClassVar[str] = "cursor"
    pre_tool_events: ClassVar[frozenset[str]] = frozenset({PRE_TOOL, SHELL, MCP, READ})
    all_events: ClassVar[frozenset[str]] = frozenset(
        {PRE_TOOL, SHELL, MCP, READ, "postToolUse", "sessionStart", "sessionEnd"}
    )
    documented_timeout_s: ClassVar[float] = 30.0
    """Cursor documents no default; the installer always sets one."""
    quirks: ClassVar[Quirks] = Quirks(
        title="Cursor",
        no_effect="Exit 0 and `{}` on stdout, for every event: under `failClosed: true`, which "
        "the installer sets, empty stdout is invalid JSON, a failure, and blocks.",
        no_effect_stdout="{}\n",
        empty_output="Invalid JSON, so a hook failure: let through without `failClosed`, blocked "
        'with it (field reports: an empty `preToolUse` answer denied as "invalid JSON").',
        failure_default="Fail-open: a crash, a timeout (no documented default) or invalid JSON "
        "lets the action through, unless the entry sets `failClosed: true`.",
        failure_switch="`failClosed: true` on the hook entry, the only native one: the installer "
        "sets it on pre-tool entries when a `tool.before` interceptor is fail-closed.",
        exit_codes='Exit 2 is the same as `permission: "deny"`; other non-zero exits are '
        "failures (blocked only under `failClosed`).",
        allow='`permission: "allow"` proceeds, and on the shell and MCP hooks may skip '
        "Cursor's own approval, so it is never written.",
        ask="`ask` is enforced on beforeShellExecution and beforeMCPExecution, accepted but not "
        "enforced on preToolUse; never written.",
        modify="Not advertised: `preToolUse` accepts `updated_input`, but whether it replaces or "
        "merges is undocumented and unverified.",
        call_ids="`tool_use_id` on preToolUse only; the shell, MCP and read hooks get an id "
        "synthesized from conversation, generation and call; `conversation_id` is `session.id`.",
        double_fire="A shell or MCP call fires preToolUse and beforeShellExecution or "
        "beforeMCPExecution: the installer wires one surface per tool family (`--surface`).",
        source="native-dialects.md §5, §2.6 (cursor.com/docs/hooks copy 2026-08-24, preloop "
        "PR #415, cmux PR #9349); issue 15 §3 (field reports).",
    )

    def parse(self, payload: Mapping[str, Any], *, options: Mapping[str, Any]) -> Parsed:
        event = self.event_name(payload) or options.get("event")
        if not isinstance(event, str) or event not in self.all_events:
            return Parsed("ignore", str(event or ""))
        version = text(payload, "cursor_version")
        session = self._session(payload)
        if event == "sessionStart":
            if session is None:
                raise PayloadError("missing field conversation_id")
            fields: dict[str, Any] = {
                "session": session,
                "trigger": "startup",
                "permissionMode": "unknown",
                "items": [],
            }
            return Parsed("session.start", event, fields, harness_version=version)
        if event == "sessionEnd":
            if session is None:
                raise PayloadError("missing field conversation_id")
            reason = payload.get("reason")
            reason = reason if isinstance(reason, str) and reason else "unknown"
            fields = {"session": session, "outcome": "unknown", "reason": reason}
            return Parsed("session.end", event, fields, harness_version=version)
        if event == SHELL:
            fields = self._shell(payload)
        elif event == MCP:
            fields = self._mcp(payload)
        elif event == READ:
            fields = self._read(payload)
        else:
            fields = self._tool_call(payload, event)
            if (
                event == PRE_TOOL
                and options.get("skip_shell_mcp")
                and (fields["tool"]["name"] == "Shell" or fields["tool"]["origin"] == "mcp")
            ):
                return Parsed("ignore", event, harness_version=version)
        if session is not None:
            fields["session"] = session
        if event == "postToolUse":
            fields["execution"] = {"status": "executed"}
            output = payload.get("tool_output", payload.get("tool_response"))
            fields["outcome"] = "ok"
            fields["items"] = output_items(fields["call"]["id"], output)
            return Parsed("tool.after", event, fields, harness_version=version)
        return Parsed("tool.before", event, fields, harness_version=version)

    @staticmethod
    def _session(payload: Mapping[str, Any]) -> dict[str, Any] | None:
        sid = text(payload, "conversation_id") or text(payload, "session_id")
        if sid is None:
            return None
        session: dict[str, Any] = {"id": sid}
        cwd = text(payload, "cwd")
        if cwd:
            session["cwd"] = cwd
        roots = payload.get("workspace_roots")
        if isinstance(roots, list) and all(isinstance(r, str) for r in roots):
            session["workspaceRoots"] = list(roots)
        model = payload.get("model")
        if isinstance(model, str) and model:
            session["model"] = model
        return session

    def _call(self, payload: Mapping[str, Any], event: str, *parts: Any) -> dict[str, Any]:
        real = text(payload, "tool_use_id")
        if real is not None:
            return {"id": real}
        synthesized = stable_id(
            "call",
            self.provider,
            payload.get("conversation_id"),
            payload.get("generation_id"),
            event,
            *parts,
        )
        return {"id": synthesized, "synthesized": True}

    def _tool_call(self, payload: Mapping[str, Any], event: str) -> dict[str, Any]:
        name = text(payload, "tool_name", required=True)
        assert name is not None
        arguments = tool_input(payload.get("tool_input"))
        call = self._call(payload, event, name, arguments)
        if name.startswith("MCP:") and len(name) > 4:
            reason = "Cursor's preToolUse names MCP tools without their server"
            tool = {
                "name": name,
                "kind": "mcp",
                "input": arguments,
                "origin": "mcp",
                "mcp": mcp_tool(
                    "unknown",
                    name[4:],
                    provenance="inferred",
                    connection=unknown_connection(reason),
                ),
            }
            return {
                "call": call,
                "tool": tool,
                "path": TOOL_PATH_MCP,
                "gaps": [{"path": "tool.mcp.server.id", "reason": reason}],
            }
        kind = self.kinds.get(name, "other")
        if name == "Write" and _edit_like(arguments):
            kind = "file_edit"
        tool = {"name": name, "kind": kind, "input": arguments, "origin": "native"}
        return {"call": call, "tool": tool, "path": TOOL_PATH_NATIVE}

    def _shell(self, payload: Mapping[str, Any]) -> dict[str, Any]:
        command = text(payload, "command", required=True)
        arguments: dict[str, Any] = {"command": command}
        cwd = text(payload, "cwd")
        if cwd:
            arguments["cwd"] = cwd
        call = self._call(payload, SHELL, command, cwd)
        tool = {"name": "Shell", "kind": "shell", "input": arguments, "origin": "native"}
        return {"call": call, "tool": tool, "path": TOOL_PATH_NATIVE}

    def _mcp(self, payload: Mapping[str, Any]) -> dict[str, Any]:
        name = text(payload, "tool_name", required=True)
        assert name is not None
        arguments = tool_input(payload.get("tool_input"))
        call = self._call(payload, MCP, name, arguments)
        url = text(payload, "url")
        command = text(payload, "command")
        connection: dict[str, Any]
        if url and scrub_url(url):
            server = scrub_url(url)
            connection = {"transport": "_url", "addressForm": "url", "address": server}
        elif command:
            words = command.split()
            server = os.path.basename(words[0]) if words else command
            connection = {
                "transport": "stdio",
                "command": words[0] if words else command,
                "args": scrub_args(list(words[1:])),
                "gaps": [{"path": "cwd", "reason": "not in the beforeMCPExecution payload"}],
            }
        else:
            server = "unknown"
            connection = unknown_connection("beforeMCPExecution gave neither url nor command")
        tool = {
            "name": name,
            "kind": "mcp",
            "input": arguments,
            "origin": "mcp",
            "mcp": mcp_tool(server, name, provenance="runtime", connection=connection),
        }
        return {"call": call, "tool": tool, "path": TOOL_PATH_MCP}

    def _read(self, payload: Mapping[str, Any]) -> dict[str, Any]:
        file_path = text(payload, "file_path", required=True)
        call = self._call(payload, READ, file_path)
        # The file's content (also in the payload) stays in ``native``: policy reads the path.
        tool = {
            "name": "Read",
            "kind": "file_read",
            "input": {"file_path": file_path},
            "origin": "native",
        }
        return {"call": call, "tool": tool, "path": TOOL_PATH_NATIVE}

    def render_deny(self, reason: str, native_event: str | None) -> NativeAnswer:
        if native_event not in self.pre_tool_events:
            return self.exit2_deny(reason)
        reason = clip(reason)
        output: dict[str, Any] = {"permission": "deny", "user_message": reason}
        if native_event != READ:
            output["agent_message"] = reason
        return NativeAnswer(stdout=json.dumps(output, ensure_ascii=False) + "\n")

    def manifest_gaps(self) -> list[dict[str, str]]:
        return [
            {
                "path": "tool.mcp.server.id",
                "reason": "preToolUse names MCP tools without their server",
            },
            {
                "path": "harness.failure",
                "reason": "a hook that cannot start fails open unless "
                "the hook entry sets failClosed",
            },
        ]


class CursorViaClaude(Cursor):
    """Cursor running a hook from Claude's settings files ("third-party configs").

    Which output Cursor reads there is not documented, so a deny is written in
    both forms that Cursor honours: its own JSON on stdout and exit 2. No effect
    is ``{}`` as for Cursor's own hooks (valid JSON to Cursor and Claude alike).
    """

    name: ClassVar[str] = "cursor"
    quirks: ClassVar[Quirks] = Quirks(
        title="Cursor running Claude's hook files (third-party configs)",
        no_effect="Exit 0 and `{}` on stdout, as for Cursor's own hooks: valid JSON with no "
        "decision to Cursor and to Claude Code alike.",
        no_effect_stdout="{}\n",
        empty_output="Not documented for Claude-format hooks run by Cursor: treated as for "
        "Cursor's own (invalid JSON, a failure).",
        failure_default="Fail-open: a crash, a timeout or invalid JSON lets the action through.",
        failure_switch="None: `failClosed` exists only in Cursor's own `hooks.json` entries.",
        exit_codes="Exit 2 is a deny to Cursor (and to Claude Code), so a deny is written as "
        "Cursor's JSON and exit 2 with the reason on stderr.",
        allow='`permission: "allow"` may skip Cursor\'s own approval; never written.',
        ask="As for Cursor's own hooks; never written.",
        modify="Not advertised: which fields Cursor reads from a Claude-format hook's answer "
        "is not documented.",
        call_ids="As for Cursor's own hooks; Claude's event names (`PreToolUse`, ...) are read "
        "as Cursor's.",
        double_fire="A call fires both this hook and a `.cursor/hooks.json` one if both are "
        "installed: install one of the two files for Cursor.",
        source="native-dialects.md §2.5, §5 (Cursor's third-party hooks docs page).",
    )

    def event_name(self, payload: Mapping[str, Any]) -> str | None:
        name = super().event_name(payload)
        return CLAUDE_EVENT_NAMES.get(name, name) if name else None

    def render_deny(self, reason: str, native_event: str | None) -> NativeAnswer:
        answer = super().render_deny(reason, native_event)
        return NativeAnswer(stdout=answer.stdout, stderr=clip(reason) + "\n", exit_code=2)

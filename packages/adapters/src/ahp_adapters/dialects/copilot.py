"""GitHub Copilot CLI hooks (``preToolUse``, ``postToolUse``, ``postToolUseFailure``, sessions).

Owns the Copilot CLI codec. Copilot sends one of two payload variants,
chosen by the case of the event key in the hook file, and the codec tells
them apart from the payload itself:

- camelCase (key ``preToolUse``): ``{sessionId?, timestamp (Unix ms), cwd,
  toolName, toolArgs}``, ``toolArgs`` a JSON string (older docs) or an object
  (current docs); the payload carries no event name, so the event is
  ``--event`` (or, without it, told from the fields: ``toolResult`` post-tool,
  ``error`` failure, ``toolName`` pre-tool, ``source``/``reason`` session);
- PascalCase, "VS Code compatible" (key ``PreToolUse``): ``{hook_event_name,
  session_id, timestamp (ISO 8601), cwd, tool_name, tool_input}``.

A payload with camelCase ``hookEventName`` is VS Code's own agent hooks (which
also load ``.github/hooks/*.json``) and is read by the VS Code codec.

No tool-call id: ``call.id`` is synthesized from the session id (when sent),
the hook's ``timestamp``, the event, the tool and its arguments, marked
``synthesized``, and paired from ``preToolUse`` to ``postToolUse`` through the
per-session pairing file. MCP tools are not named in Copilot's hooks
reference; a name ``<server>-<tool>`` whose server is the built-in
``github-mcp-server`` or one in ``~/.copilot/mcp-config.json`` is ``mcp``
(provenance ``inferred``), everything else not in :data:`COPILOT_KINDS` is
``other``.

Deny: exit 0 with ``{"permissionDecision": "deny", "permissionDecisionReason":
...}`` on stdout, for every event, also when the event could not be told:
Copilot reads any non-zero exit of ``preToolUse`` (exit 2 too) as a hook
failure and skips it, and on ``postToolUseFailure`` exit 2 would put our
stderr in front of the model; the JSON form is ignored where no decision is
read. No effect: exit 0, nothing written. What a deny can and cannot
guarantee on Copilot is :data:`DENY_LIMITS` (printed by ``install``, quoted by
the README). Fact source: docs/native-dialects §2, §6, §11 (github/docs
``cli-hooks-reference.md``), field reports listed in :data:`QUIRKS`.
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
    stable_id,
    text,
    tool_input,
    unknown_connection,
)

COPILOT_KINDS: dict[str, str] = {
    "bash": "shell",
    "powershell": "shell",
    "view": "file_read",
    "create": "file_write",
    "edit": "file_edit",
    "glob": "search",
    "grep": "search",
    "web_fetch": "fetch",
    "task": "task",
    "semantic_code_search": "search",
    # Offered in 1.0.102 (live) and none of the kinds above (read_bash, stop_bash and
    # list_bash read, stop or list shells that bash started; they run no command):
    "fetch_copilot_cli_documentation": "other",
    "list_agents": "other",
    "list_bash": "other",
    "read_agent": "other",
    "read_bash": "other",
    "session_store_sql": "other",
    "skill": "other",
    "sql": "other",
    "stop_bash": "other",
    "write_agent": "other",
}
"""Copilot CLI tool names -> AHP kind (``ask_user`` and anything else: ``other``)."""

PRE_TOOL = "preToolUse"
POST_TOOL = "postToolUse"
POST_TOOL_FAILURE = "postToolUseFailure"
SESSION_START = "sessionStart"
SESSION_END = "sessionEnd"
PASCAL = {
    "PreToolUse": PRE_TOOL,
    "PostToolUse": POST_TOOL,
    "PostToolUseFailure": POST_TOOL_FAILURE,
    "SessionStart": SESSION_START,
    "SessionEnd": SESSION_END,
}
"""The "VS Code compatible" event names -> Copilot's own (camelCase) names."""
BUILTIN_MCP_SERVERS = ("github-mcp-server",)
MCP_CONFIG = os.path.join("~", ".copilot", "mcp-config.json")
SESSION_TRIGGERS = {"startup": "startup", "resume": "resume", "new": "startup"}
SESSION_END_OUTCOMES = {
    "complete": "completed",
    "user_exit": "completed",
    "abort": "cancelled",
    "error": "error",
    "timeout": "error",
}

DENY_LIMITS: tuple[str, ...] = (
    "Copilot CLI: what an AHP deny can and cannot guarantee.",
    'A deny is written as preToolUse permissionDecision "deny" (exit 0), which Copilot '
    "documents as blocking the tool.",
    "Seen live on Copilot CLI 1.0.102 (the live tier, tests/live): in a non-interactive "
    "run (-p) the deny blocks the call, also under --allow-all-tools, and the model is "
    "told the reason.",
    "Observed on 1.0.73 and not re-tested since: an interactive session handled the deny "
    'as an "ask" the user could approve, which --allow-all-tools, --allow-all or --yolo '
    "(or /allow-all, /yolo) auto-approved; check a new version with ahp-adapter verify "
    "copilot (non-interactive runs only).",
    "Project hooks (.github/hooks) load only in a folder Copilot trusts (trustedFolders), "
    "else they are skipped without a word: install --project refuses an untrusted folder "
    "unless --trust; user-scope hooks need no trust.",
    "A hook that crashes, times out (timeoutSec) or cannot start is logged and skipped, "
    "so the call runs: Copilot has no fail-closed switch, and fail-closed holds only "
    "while the adapter answers within timeoutSec.",
    "For a block Copilot always enforces, add its own --deny-tool rules "
    "(they take precedence over --allow-all-tools).",
)
"""What a deny can and cannot guarantee on Copilot CLI: ``install copilot`` prints these
lines as notes and the adapters README quotes them. The one place for that text."""

QUIRKS = Quirks(
    title="GitHub Copilot CLI",
    no_effect="Exit 0 and empty stdout: Copilot documents empty output as its default "
    "behaviour; never a native `allow`.",
    no_effect_stdout="",
    empty_output='The normal permission flow runs ("empty output uses default behavior"); '
    "invalid JSON is a hook failure, logged and skipped, so no answer of ours can block by "
    "accident.",
    failure_default="Non-zero exits, timeouts (`timeoutSec`, 30 s by default) and unreadable "
    "output are logged and skipped: the tool runs (fail-open).",
    failure_switch="None.",
    exit_codes="Any non-zero exit of `preToolUse`, exit 2 included, is a skipped hook failure "
    "(exit 2 denies only in `permissionRequest`, and is recovery guidance in "
    "`postToolUseFailure`), so the codec always exits 0, a deny included.",
    allow="`allow` was ignored by early versions and may now skip Copilot's own approval, so "
    "the codec never writes it.",
    ask="`ask` prompts the user in interactive sessions; on 1.0.73 a deny is itself handled "
    "as an ask, auto-approved under `--allow-all-tools` or `--yolo`.",
    modify="Not advertised: `modifiedArgs` substitutes the arguments, but whether it replaces "
    "or merges, and how it is checked, is not documented firmly across versions.",
    call_ids="None in the payload: `call.id` is synthesized from the session id (when sent), "
    "the timestamp, the event, the tool and its arguments, and paired from `preToolUse` to "
    "`postToolUse`.",
    double_fire="None: one `preToolUse` per tool call (no matcher: every tool); the hooks of "
    "several files all run, in order, and any deny blocks.",
    source="native-dialects.md §2, §6, §11 (github/docs `cli-hooks-reference.md`, "
    "`hooks-configuration.md`); live test on 1.0.73 in voodootikigod/adlc#240; "
    "github/copilot-cli#2855 (deny rules win over allow-all).",
)


def _configured_mcp_servers() -> tuple[str, ...]:
    """Server names in the user's ``~/.copilot/mcp-config.json`` (none if unreadable)."""
    try:
        with open(os.path.expanduser(MCP_CONFIG), "rb") as handle:
            doc = json.loads(handle.read(1024 * 1024))
    except (OSError, ValueError):
        return ()
    servers = doc.get("mcpServers") if isinstance(doc, dict) else None
    if not isinstance(servers, dict):
        return ()
    return tuple(name for name in servers if isinstance(name, str) and name)


def split_mcp(name: str) -> tuple[str, str] | None:
    """``<server>-<tool>`` -> (server, tool) for a known MCP server (the longest match)."""
    if name in COPILOT_KINDS or "-" not in name:
        return None
    servers = sorted({*BUILTIN_MCP_SERVERS, *_configured_mcp_servers()}, key=len, reverse=True)
    for server in servers:
        if name.startswith(server + "-") and len(name) > len(server) + 1:
            return server, name[len(server) + 1 :]
    return None


class Copilot(Dialect):
    kinds: ClassVar[Mapping[str, str]] = COPILOT_KINDS
    name: ClassVar[str] = "copilot"
    harness_name: ClassVar[str] = "copilot-cli"
    provider: ClassVar[str] = "copilot-cli"
    pre_tool_events: ClassVar[frozenset[str]] = frozenset({PRE_TOOL, "PreToolUse"})
    all_events: ClassVar[frozenset[str]] = frozenset({*PASCAL, *PASCAL.values()})
    stderr_ok: ClassVar[bool] = False
    """Copilot does not document what it does with a hook's stderr: keep it empty."""
    version_env: ClassVar[tuple[str, str] | None] = (
        "COPILOT_CLI_BINARY_VERSION",
        r"(\d+)\.(\d+)\.(\d+)",
    )
    quirks: ClassVar[Quirks] = QUIRKS
    documented_timeout_s: ClassVar[float] = 30.0

    def resolve(self, payload: Mapping[str, Any]) -> Dialect:
        if "hookEventName" in payload:  # VS Code agent hooks running our .github/hooks file
            from ahp_adapters.dialects.claude import VSCode

            return VSCode()
        return self

    @staticmethod
    def _infer(payload: Mapping[str, Any]) -> str | None:
        """The camelCase event, from the fields, when neither payload nor ``--event`` says."""
        if "toolName" in payload:
            if "toolResult" in payload:
                return POST_TOOL
            return POST_TOOL_FAILURE if "error" in payload else PRE_TOOL
        if "source" in payload:
            return SESSION_START
        if "reason" in payload:
            return SESSION_END
        return None

    def parse(self, payload: Mapping[str, Any], *, options: Mapping[str, Any]) -> Parsed:
        event = self.event_name(payload) or options.get("event") or self._infer(payload)
        if not isinstance(event, str) or event not in self.all_events:
            return Parsed("ignore", str(event or ""))
        which = PASCAL.get(event, event)
        snake = any(k in payload for k in ("hook_event_name", "session_id", "tool_name"))
        session = self._session(payload, snake)
        if which == SESSION_START:
            if session is None:
                raise PayloadError("missing field sessionId")
            source = payload.get("source")
            trigger = SESSION_TRIGGERS.get(source) if isinstance(source, str) else None
            fields: dict[str, Any] = {
                "session": session,
                "trigger": trigger or "startup",
                "permissionMode": "unknown",
                "items": [],
            }
            if trigger is None or source == "new":
                # "new" replaces a session in the same process: its origin is not in the payload.
                why = "native source has no AHP trigger without its origin"
                fields["gaps"] = [{"path": "trigger", "reason": why}]
            return Parsed("session.start", event, fields)
        if which == SESSION_END:
            if session is None:
                raise PayloadError("missing field sessionId")
            reason = payload.get("reason")
            reason = reason if isinstance(reason, str) and reason else "unknown"
            outcome = SESSION_END_OUTCOMES.get(reason, "unknown")
            return Parsed(
                "session.end", event, {"session": session, "outcome": outcome, "reason": reason}
            )
        name_key, args_key = ("tool_name", "tool_input") if snake else ("toolName", "toolArgs")
        name = text(payload, name_key, required=True)
        assert name is not None
        gaps: list[dict[str, str]] = []
        if payload.get(args_key) is None:
            arguments: dict[str, Any] = {}
            gaps.append({"path": "tool.input", "reason": f"the payload carries no {args_key}"})
        else:
            arguments = tool_input(payload[args_key], args_key)
        sid = session["id"] if session else None
        call_id = stable_id(
            "call", self.provider, sid, payload.get("timestamp"), which, name, arguments
        )
        tool, path = self._tool(name, arguments, gaps)
        fields = {"call": {"id": call_id, "synthesized": True}, "tool": tool, "path": path}
        if session is not None:
            fields["session"] = session
        if gaps:
            fields["gaps"] = gaps
        # Without a session id, the working directory keeps one project's calls together.
        pairing = (sid or f"cwd:{payload.get('cwd')}", stable_id("tool", name, arguments))
        if which == PRE_TOOL:
            return Parsed("tool.before", event, fields, pairing=pairing)
        fields["execution"] = {"status": "executed"}
        if which == POST_TOOL_FAILURE:
            message = payload.get("error")
            fields["outcome"] = "error"
            fields["error"] = {
                "message": clip(message) if isinstance(message, str) else "the tool failed",
                "class": "tool_error",
            }
            fields["items"] = []
            return Parsed("tool.after", event, fields, pairing=pairing)
        result = payload.get("tool_result" if snake else "toolResult")
        result_type, body = None, result
        if isinstance(result, Mapping):
            result_type = result.get("result_type" if snake else "resultType")
            body = result.get("text_result_for_llm" if snake else "textResultForLlm", result)
        if result_type == "denied":  # the permission flow refused it: never ran
            fields["execution"] = {"status": "skipped", "reason": "policy"}
            fields["outcome"] = "denied"
            fields["items"] = []
        elif result_type in ("failure", "error"):
            fields["outcome"] = "error"
            fields["error"] = {
                "message": clip(body) if isinstance(body, str) else "the tool failed",
                "class": "tool_error",
            }
            fields["items"] = []
        else:
            fields["outcome"] = "ok"
            fields["items"] = output_items(call_id, body)
        return Parsed("tool.after", event, fields, pairing=pairing)

    @staticmethod
    def _session(payload: Mapping[str, Any], snake: bool) -> dict[str, Any] | None:
        sid = text(payload, "session_id" if snake else "sessionId")
        if sid is None:
            return None
        session: dict[str, Any] = {"id": sid}
        cwd = text(payload, "cwd")
        if cwd:
            session["cwd"] = cwd
        return session

    @staticmethod
    def _tool(
        name: str, arguments: dict[str, Any], gaps: list[dict[str, str]]
    ) -> tuple[dict[str, Any], str]:
        mcp = split_mcp(name)
        if mcp is not None:
            server, tool_name = mcp
            reason = "Copilot's hook payload names MCP tools <server>-<tool> only"
            tool = {
                "name": name,
                "kind": "mcp",
                "input": arguments,
                "origin": "mcp",
                "mcp": mcp_tool(
                    server,
                    tool_name,
                    provenance="inferred",
                    connection=unknown_connection(reason),
                ),
            }
            return tool, TOOL_PATH_MCP
        kind = COPILOT_KINDS.get(name, "other")
        return {"name": name, "kind": kind, "input": arguments, "origin": "native"}, (
            TOOL_PATH_NATIVE
        )

    def render_deny(self, reason: str, native_event: str | None) -> NativeAnswer:
        # The JSON form for every event, even an untold one: Copilot skips a non-zero exit.
        output = {"permissionDecision": "deny", "permissionDecisionReason": clip(reason)}
        return NativeAnswer(stdout=json.dumps(output, ensure_ascii=False) + "\n")

    def manifest_gaps(self) -> list[dict[str, str]]:
        return [
            {"path": "call.id", "reason": "Copilot sends no tool-call id; the adapter synthesizes"},
            {
                "path": "capabilities.deny",
                "reason": "Copilot CLI 1.0.73 handles a preToolUse deny as an ask, "
                "auto-approved under --allow-all-tools or --yolo",
            },
            {
                "path": "tool.mcp",
                "reason": "MCP tool names are inferred from <server>-<tool> and known servers",
            },
            {
                "path": "harness.failure",
                "reason": "a hook failure or timeout is logged and skipped (no fail-closed switch)",
            },
        ]

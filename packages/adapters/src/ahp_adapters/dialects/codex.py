"""OpenAI Codex CLI hooks (``PreToolUse``, ``PostToolUse``, ``SessionStart``).

Owns the Codex codec. Codex fires ``PreToolUse`` only for shell tools (all
reported as ``Bash``), ``apply_patch`` and MCP tools (``mcp__server__tool``):
the manifest says so in ``gaps``, and ``deny`` is advertised only for what goes
through the hook. ``turn_id`` becomes ``turn.id``, ``model`` ``session.model``.

Deny: exit 0 with ``hookSpecificOutput.permissionDecision: "deny"``; when the
event cannot be told, exit 2 with a non-empty stderr reason (Codex treats exit
2 with an empty stderr as a failure, which fails open). No effect: exit 0,
empty stdout; a bare ``allow`` is "unsupported" in Codex and the run fails
(open), so it is never written. Fact source: docs/native-dialects §4 (codex-rs
hooks source and generated schemas).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from typing import Any, ClassVar

from ahp_adapters.dialects.base import Quirks
from ahp_adapters.dialects.claude import ClaudeCode

CODEX_KINDS: dict[str, str] = {"Bash": "shell", "apply_patch": "file_edit"}

_PATCH_HEADER = re.compile(r"^\*\*\* (Add|Update|Delete) File: ", re.MULTILINE)


def patch_kind(arguments: Mapping[str, Any]) -> str:
    """``file_write`` for a patch that only adds files, else ``file_edit``."""
    body = arguments.get("command")
    if not isinstance(body, str):
        return "file_edit"
    operations = set(_PATCH_HEADER.findall(body))
    return "file_write" if operations == {"Add"} else "file_edit"


class Codex(ClaudeCode):
    name: ClassVar[str] = "codex"
    harness_name: ClassVar[str] = "codex"
    provider: ClassVar[str] = "codex"
    pre_tool_events: ClassVar[frozenset[str]] = frozenset({"PreToolUse"})
    all_events: ClassVar[frozenset[str]] = frozenset({"PreToolUse", "PostToolUse", "SessionStart"})
    kinds: ClassVar[Mapping[str, str]] = CODEX_KINDS
    documented_timeout_s: ClassVar[float] = 600.0
    quirks: ClassVar[Quirks] = Quirks(
        title="OpenAI Codex CLI",
        no_effect="Exit 0 and empty stdout: no decision (a bare `allow` would be rejected as "
        "unsupported).",
        no_effect_stdout="",
        empty_output="No decision; plain text is ignored too, but text that looks like JSON "
        "and does not parse marks the run failed (open).",
        failure_default="Fail-open: a timeout (600 s by default), a spawn error, an exit other "
        "than 0 or 2, or invalid JSON is a failed, non-blocking run.",
        failure_switch='None (an opt-in `failureMode: "block"` is requested in '
        "openai/codex #41979).",
        exit_codes="Exit 2 blocks only with a non-empty stderr reason; exit 2 with empty stderr "
        "and any other non-zero exit are failures, and the tool runs.",
        allow='`permissionDecision: "allow"` is accepted only with `updatedInput`; a bare '
        "allow (or legacy `approve`) is unsupported and the run fails open.",
        ask="Unsupported on PreToolUse: the run is marked failed and the tool proceeds.",
        modify="Not advertised: Codex errors on `updatedInput` without an explicit `allow`, "
        "and the adapter never writes the native allow.",
        call_ids="`tool_use_id` is real; `turn_id` is `turn.id`, `session_id` is `session.id`.",
        double_fire="None known; PreToolUse fires only for shell tools (all named `Bash`), "
        "`apply_patch` and MCP tools.",
        source="native-dialects.md §4 (codex-rs `hooks/` source and generated schemas, "
        "PR #20527, issue #41979).",
    )

    def resolve(self, payload: Mapping[str, Any]) -> ClaudeCode:
        return self

    def version_from_env(self, environ: Mapping[str, str]) -> str | None:
        """Codex exports no version, but an npm-installed Codex exports its package root
        (``CODEX_MANAGED_PACKAGE_ROOT``), whose ``package.json`` has it."""
        root = environ.get("CODEX_MANAGED_PACKAGE_ROOT")
        if not root:
            return None
        try:
            with open(os.path.join(root, "package.json"), encoding="utf-8") as handle:
                version = json.load(handle).get("version")
        except (OSError, ValueError, AttributeError):
            return None
        return version if isinstance(version, str) and version else None

    def _extra(self, payload: Mapping[str, Any], fields: dict[str, Any]) -> None:
        turn = payload.get("turn_id")
        if isinstance(turn, str) and turn:
            fields["turn"] = {"id": turn}
        tool = fields["tool"]
        if tool["name"] == "apply_patch":
            tool["kind"] = patch_kind(tool["input"])

    def _after(
        self, payload: Mapping[str, Any], fields: dict[str, Any], event: str
    ) -> dict[str, Any]:
        if "tool_response" not in payload and "tool_output" in payload:
            payload = {**payload, "tool_response": payload["tool_output"]}
        return super()._after(payload, fields, event)

    def manifest_gaps(self) -> list[dict[str, str]]:
        return [
            {
                "path": "toolPaths.native",
                "reason": "Codex fires PreToolUse only for shell, apply_patch and MCP tools; "
                "read_file, web_search and other native tools are not intercepted",
            },
            {
                "path": "tool.mcp.connection",
                "reason": "MCP tools are named mcp__server__tool; no connection details",
            },
            {"path": "events.session.end", "reason": "Codex has no session end hook"},
        ]

    def observed_events(self) -> list[str]:
        return ["tool.before", "tool.after", "session.start", "hook.failure"]

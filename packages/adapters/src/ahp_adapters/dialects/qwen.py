"""Qwen Code hooks (``PreToolUse``, ``PostToolUse``, ``PostToolUseFailure``, sessions).

Owns the Qwen Code codec. Qwen Code (``@qwen-code/qwen-code``) reads Claude-Code-style
hooks from ``.qwen/settings.json`` (project, only in a trusted folder) or
``~/.qwen/settings.json`` (user) and sends Claude's payload shape (snake_case
``session_id``, ``tool_name``, ``tool_input``, ``tool_use_id``; ``timestamp`` too), so
this is Claude's codec with Qwen's tool names and Qwen's own facts: the native
``timeout`` is in **milliseconds** (``native_timeout_unit``: a Claude-style
``"timeout": 30`` killed the hook after 30 ms, live on 0.15.10), Qwen parses stderr
when stdout is empty (so ``stderr_ok`` is off, as for Gemini), and a PostToolUse's
``tool_response`` is ``{"llmContent", "returnDisplay"}``: the text the model saw,
``llmContent``, becomes the canonical ``items``.

Deny: exit 0 with ``hookSpecificOutput.permissionDecision: "deny"`` (Claude's form,
which Qwen reads); exit 2 with the reason on stderr when the event cannot be told.
No effect: exit 0, empty stdout and stderr. No ``modify``: Qwen 0.15.10 reads
``updatedInput`` only from PermissionRequest hooks.

Verified live (``qwen -p``, 0.15.10): the settings file and its ``hooks`` layout, the
millisecond timeout, the PreToolUse and PostToolUse payloads (the ``qwen-code``
fixtures marked ``live``), that the same ``tool_use_id`` reaches both, that
SessionStart/SessionEnd do **not** fire in headless ``-p`` runs, and (``ahp-adapter
verify qwen-code``, hooks written by ``install``) that the JSON deny holds, the model
sees its reason, and the generic fail-closed block holds too. Read from the 0.15.10
bundle (``cli.js``: ``hooks/hookRunner.ts``, ``hooks/types.ts``,
``core/toolHookTriggers.ts``, ``tools/mcp-tool.ts``) and not yet seen live: the exit
code and failure semantics, ``ask``, the MCP tool naming, and that the interactive
UI and ACP sessions fire SessionStart/SessionEnd.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Literal

from ahp_adapters.dialects.base import Quirks
from ahp_adapters.dialects.claude import ClaudeCode

QWEN_KINDS: dict[str, str] = {
    "run_shell_command": "shell",
    # `monitor` spawns its `command` argument as a shell command and streams its output
    # lines back (Qwen asks for it as an "exec", like run_shell_command): a shell call,
    # as Claude's Monitor is.
    "monitor": "shell",
    "read_file": "file_read",
    "write_file": "file_write",
    "edit": "file_edit",
    "glob": "search",
    "grep_search": "search",
    "list_directory": "search",
    "tool_search": "search",
    "lsp": "search",  # code navigation, as Claude's LSP (not offered by default)
    "web_fetch": "fetch",
    "agent": "task",
    # Offered in 0.15.10 (live) and none of the kinds above:
    "send_message": "other",
    "skill": "other",
    "task_stop": "other",
    "todo_write": "other",
}
"""Qwen Code 0.15.10 tool names -> AHP kind (anything else, such as ``save_memory``, is
``other``; MCP tools, named ``mcp__<server>__<tool>``, are ``mcp``)."""


def llm_text(value: Any) -> Any:
    """``tool_response.llmContent`` (Gemini's ``PartListUnion``) as text where it is text:
    a string as is, a text part (``{"text": ...}``) or a list of strings and text parts
    joined by newlines; anything else (an image part, a function response) unchanged,
    so :func:`~ahp_adapters.dialects.base.output_items` serializes it as JSON."""
    if isinstance(value, str):
        return value
    parts = value if isinstance(value, list) else [value]
    texts: list[str] = []
    for part in parts:
        if isinstance(part, str):
            texts.append(part)
        elif isinstance(part, dict) and set(part) == {"text"} and isinstance(part["text"], str):
            texts.append(part["text"])
        else:
            return value
    return "\n".join(texts)


class QwenCode(ClaudeCode):
    name: ClassVar[str] = "qwen-code"
    harness_name: ClassVar[str] = "qwen-code"
    provider: ClassVar[str] = "qwen-code"
    pre_tool_events: ClassVar[frozenset[str]] = frozenset({"PreToolUse"})
    all_events: ClassVar[frozenset[str]] = frozenset(
        {"PreToolUse", "PostToolUse", "PostToolUseFailure", "SessionStart", "SessionEnd"}
    )
    kinds: ClassVar[Mapping[str, str]] = QWEN_KINDS
    prepare_events: ClassVar[frozenset[str]] = frozenset({"UserPromptSubmit"})
    """Headless ``qwen -p`` fires no SessionStart, but UserPromptSubmit before each model
    turn (live, 0.15.10): the first one prepares the chain for the first tool call."""
    stderr_ok: ClassVar[bool] = False
    """Qwen parses stderr when stdout is empty: plain text there becomes an ``allow`` with
    a ``systemMessage`` shown to the user. Keep it empty."""
    native_timeout_unit: ClassVar[Literal["s", "ms"]] = "ms"
    documented_timeout_s: ClassVar[float] = 60.0
    # input_rewrite stays None (never inherited from Claude): no `modify`.
    quirks: ClassVar[Quirks] = Quirks(
        title="Qwen Code",
        no_effect="Exit 0, empty stdout and empty stderr: Qwen reads no decision and the call, "
        "already past Qwen's own approval step, runs.",
        no_effect_stdout="",
        empty_output="No decision; but Qwen parses stderr when stdout is empty (plain text "
        "becomes an allow with a `systemMessage`), so the codec keeps stderr empty on exit 0.",
        failure_default="Fail-open: a timeout (60 000 ms by default; `timeout` is in "
        "milliseconds, live on 0.15.10), a spawn error or a kill by a signal is a failed run "
        "and the tool proceeds (read from the 0.15.10 source).",
        failure_switch="None.",
        exit_codes="Exit 2 denies with stderr as the reason (empty stderr: the tool proceeds); "
        "any other non-zero exit with plain text is a non-blocking warning, though JSON on "
        "stdout is read whatever the exit (0.15.10 source, not seen live).",
        allow='`permissionDecision: "allow"` only lets the call proceed (PreToolUse fires '
        "after Qwen's approval step, so it grants nothing; 0.15.10 source); never written.",
        ask='`permissionDecision: "ask"` blocks the call ("User confirmation required") '
        "rather than prompting (0.15.10 source); never written.",
        modify="Not advertised: Qwen 0.15.10 takes `updatedInput` only from PermissionRequest "
        "hooks; a PreToolUse `hookSpecificOutput.tool_input` only reaches the next "
        "sequential hook, not the tool.",
        call_ids="`tool_use_id` is real (`toolu_<ms>_<random>`, Qwen's per call) and the same "
        "on PreToolUse and PostToolUse (live); `session_id` is `session.id`; no turn id.",
        double_fire="None known: one PreToolUse per scheduled call (matching hooks run in "
        "parallel, identical commands once); SessionStart/SessionEnd do not fire in `-p` "
        "runs (live), only in interactive and ACP sessions (source); UserPromptSubmit fires "
        "before each model turn, also in `-p` (live), and is wired only to prepare the chain.",
        source="@qwen-code/qwen-code 0.15.10: live `qwen -p` runs and its `cli.js` bundle "
        "(`hooks/hookRunner.ts`, `hooks/types.ts`, `core/toolHookTriggers.ts`, "
        "`tools/mcp-tool.ts`).",
    )

    def resolve(self, payload: Mapping[str, Any]) -> ClaudeCode:
        return self

    def _after(
        self, payload: Mapping[str, Any], fields: dict[str, Any], event: str
    ) -> dict[str, Any]:
        response = payload.get("tool_response")
        if isinstance(response, Mapping) and "llmContent" in response:
            # What the model saw; returnDisplay is the user's rendering of the same result.
            payload = {**payload, "tool_response": llm_text(response["llmContent"])}
        return super()._after(payload, fields, event)

    def manifest_gaps(self) -> list[dict[str, str]]:
        return [
            {"path": "toolPaths.mention", "reason": "@file mentions do not fire PreToolUse"},
            {
                "path": "tool.mcp.connection",
                "reason": "MCP tools are named mcp__server__tool (names cut to 63 characters, "
                "unverified live); no connection details",
            },
            {
                "path": "events.session.start",
                "reason": "SessionStart and SessionEnd fire in interactive and ACP sessions, "
                "not in headless qwen -p runs",
            },
        ]

    def observed_events(self) -> list[str]:
        # SessionStart/SessionEnd are installed like Claude's: an interactive or ACP session
        # fires them (read from the 0.15.10 source), and only those sessions can deliver the
        # session.start that carries this manifest; headless -p runs never do (live).
        return ["tool.before", "tool.after", "session.start", "session.end", "hook.failure"]

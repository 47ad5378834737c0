"""The terminal: what each backend decided, what the host decided, what happened.

Owns the readable per-call report (colour where the terminal supports it, via
rich), the display of backend ``message`` effects, and the approvers: the
interactive prompt (prompt-toolkit) and the non-interactive ``--approve``
answer. Shows only credential-free data (diagnostics carry fixed phrases).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from rich.console import Console
from rich.markup import escape

from ahp_harness.hooks import CallRecord
from ahp_harness.session import UI

_OUTCOME_STYLE = {"ok": "green", "denied": "red", "error": "yellow", "timeout": "yellow"}


def _short(value: Any, limit: int = 80) -> str:
    text = json.dumps(value, ensure_ascii=False) if not isinstance(value, str) else value
    return text if len(text) <= limit else text[: limit - 1] + "…"


class TerminalUI(UI):
    """Per-call reports on a rich console (plain text when not a terminal)."""

    def __init__(self, console: Console | None = None) -> None:
        self.console = console or Console(highlight=False)

    def say(self, text: str) -> None:
        self.console.print(f"[bold]model:[/] {escape(text)}")

    def note(self, text: str) -> None:
        self.console.print(f"[cyan]{escape(text)}[/]")

    def backend_messages(self, texts: Sequence[str]) -> None:
        for text in texts:
            self.console.print(f"  [cyan]backend says:[/] {escape(text)}")

    def call(self, record: CallRecord) -> None:
        c = self.console
        c.print(f"[bold]● {escape(record.tool)}[/] {escape(_short(record.input))}")
        for d in record.diagnostics:
            if d.mode != "intercept":
                continue
            line = f"  backend {escape(d.backend)}[{d.subscription}]: {d.outcome}"
            if d.failure is not None:
                line += f" ({d.failure.value}, {d.policy})"
            c.print(f"{line} [dim]{d.latency_ms:.1f} ms[/]")
        hook: str = record.hook_permission
        if record.synthetic_denial:
            hook = "deny (synthetic: a required backend failed)"
        elif record.denied_by:
            hook = f"deny by {record.denied_by}"
        c.print(f"  hooks: {escape(hook)}")
        host = f"  host: {record.host_decision} ({record.host_stage})"
        if record.approval != "not_needed":
            host += f", prompt {record.approval}"
        c.print(escape(host))
        style = _OUTCOME_STYLE.get(record.outcome, "white")
        what = "ran" if record.executed else ("supplied result" if record.supplied else "not run")
        detail = f": {escape(_short(record.reason, 120))}" if record.outcome == "denied" else ""
        c.print(f"  [{style}]→ {record.outcome}[/] ({what}){detail}")


class FixedApprover:
    """``--non-interactive``: every prompt gets the same answer."""

    def __init__(self, answer: bool) -> None:
        self.answer = answer

    async def __call__(self, tool: str, tool_input: Mapping[str, Any], reason: str) -> bool:
        return self.answer


class PromptApprover:
    """Asks the user with prompt-toolkit (``y`` approves; anything else rejects)."""

    def __init__(self, console: Console | None = None) -> None:
        self.console = console or Console(highlight=False)

    async def __call__(self, tool: str, tool_input: Mapping[str, Any], reason: str) -> bool:
        from prompt_toolkit import PromptSession

        call = f"{escape(tool)} {escape(_short(tool_input))}"
        self.console.print(f"[yellow]approval needed[/] ({escape(reason)}): {call}")
        try:
            answer = await PromptSession[str]().prompt_async("allow? [y/N] ")
        except (EOFError, KeyboardInterrupt):
            return False
        return answer.strip().lower() in ("y", "yes")

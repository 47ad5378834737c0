r"""The terminal: what each backend decided, what the host decided, what happened.

Owns the readable per-call report (colour where the terminal supports it, via
rich), the display of backend ``message`` effects, and the approvers: the
interactive prompt (prompt-toolkit) and the non-interactive ``--approve``
answer. Shows only credential-free data (diagnostics carry fixed phrases).

**What the user approves is what runs.** Before the approval question,
:class:`PromptApprover` shows the complete input of the call: every field, every
character, never cut; long values are wrapped at the terminal width (a display
line break inside a value is only a wrap: the value's own newlines show as
``\n``). No text from a model, a backend or a tool ever reaches the terminal as
control bytes: :func:`visible` is the one place text is made safe to show, and
everything this module prints goes through it. In a call's input:

* ``\\``, ``\n``, ``\r``, ``\t`` and the quote are backslash escapes; every other
  character a terminal would not show as itself — C0 and C1 controls (ESC, so no
  CSI/OSC sequence is ever interpreted), DEL, format characters such as the bidi
  overrides ``U+202E`` and zero-width spaces, line and paragraph separators,
  spaces other than ``U+0020``, a few invisible letters (Hangul fillers) and
  variation selectors, unpaired surrogates — is ``\xNN``, ``\uNNNN`` or
  ``\UNNNNNNNN``;
* a run of :data:`SPACE_RUN` or more spaces is shown as ``⟨N spaces⟩`` (so a long
  run cannot push the rest of a command out of sight); ``⟨`` in the input itself is
  shown as ``\u27e8``, so the marker is never ambiguous;
* strings are quoted, so leading and trailing spaces are visible.

Prose (what the model says, backend messages, tool results) keeps its line
breaks, tabs and backslashes; everything else is escaped the same way. The
per-call report after a call shows each input value up to :data:`REPORT_CHARS`
characters and says how many more there are (the call was already decided; the
approval prompt never cuts). Output goes through rich without markup or emoji
codes, and rich never wraps it (a wrap could swallow spaces): what is printed is
what the input holds.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from rich.cells import cell_len
from rich.console import Console
from rich.text import Text

from ahp_harness.hooks import CallRecord
from ahp_harness.interrupt import ends_session
from ahp_harness.session import UI

if TYPE_CHECKING:
    from prompt_toolkit.input import Input
    from prompt_toolkit.output import Output

__all__ = [
    "REPORT_CHARS",
    "SPACE_RUN",
    "FixedApprover",
    "PromptApprover",
    "TerminalPrompts",
    "TerminalUI",
    "call_lines",
    "visible",
]

#: A run of at least this many spaces is shown as ``⟨N spaces⟩``.
SPACE_RUN = 4
#: The per-call report (after the decision) shows this many characters of each value.
REPORT_CHARS = 400

_OUTCOME_STYLE = {"ok": "green", "denied": "red", "error": "yellow", "timeout": "yellow"}
_ESCAPE_STYLE = "bold magenta"
_MARK_STYLE = "reverse"
_MARK_OPEN = "\u27e8"
_MARK_CLOSE = "\u27e9"
_NAMED = {"\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t"}
# Printable by Unicode's rules, yet invisible or merely modifying: escaped too.
_INVISIBLE = frozenset({0x034F, 0x115F, 0x1160, 0x17B4, 0x17B5, 0x2800, 0x3164, 0xFFA0})
_SPACES = re.compile(f" {{{SPACE_RUN},}}")

Fragment = tuple[str, str]  # (rich style, text): one unit that is never split


def _hidden(ch: str) -> bool:
    code = ord(ch)
    return (
        (ch != " " and not ch.isprintable())
        or code in _INVISIBLE
        or 0xFE00 <= code <= 0xFE0F
        or 0xE0100 <= code <= 0xE01EF
        or 0x180B <= code <= 0x180F
    )


def _code(ch: str) -> str:
    code = ord(ch)
    if code < 0x100:
        return f"\\x{code:02x}"
    if code < 0x10000:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def _fragments(text: str, *, quote: str = "", prose: bool = False) -> Iterator[Fragment]:
    """``text`` as display units: plain characters, escapes, space-run markers."""
    position = 0
    runs = [] if prose else list(_SPACES.finditer(text))
    for run in [*runs, None]:
        end = run.start() if run is not None else len(text)
        for ch in text[position:end]:
            if prose and ch in "\n\t\\":
                yield "", ch
            elif ch in _NAMED:
                yield _ESCAPE_STYLE, _NAMED[ch]
            elif quote and ch == quote:
                yield _ESCAPE_STYLE, "\\" + ch
            elif ch == _MARK_OPEN or _hidden(ch):
                yield _ESCAPE_STYLE, _code(ch)
            else:
                yield "", ch
        if run is not None:
            yield _MARK_STYLE, f"{_MARK_OPEN}{len(run.group())} spaces{_MARK_CLOSE}"
            position = run.end()


def visible(text: str, *, prose: bool = False) -> str:
    """``text`` with nothing a terminal would interpret or hide (see the module docstring).

    ``prose=True`` keeps line breaks and tabs and does not mark runs of spaces.
    """
    return "".join(piece for _, piece in _fragments(text, prose=prose))


def _value(value: Any) -> Iterator[Fragment]:
    """A JSON value as display units; strings quoted and escaped."""
    if isinstance(value, str):
        yield "", '"'
        yield from _fragments(value, quote='"')
        yield "", '"'
    elif isinstance(value, Mapping):
        yield "", "{"
        for index, (key, item) in enumerate(value.items()):
            if index:
                yield "", ", "
            yield from _value(str(key))
            yield "", ": "
            yield from _value(item)
        yield "", "}"
    elif isinstance(value, list | tuple):
        yield "", "["
        for index, item in enumerate(value):
            if index:
                yield "", ", "
            yield from _value(item)
        yield "", "]"
    else:
        yield from _fragments(json.dumps(value, ensure_ascii=False, default=str))


def _wrap(fragments: Sequence[Fragment], first: str, indent: str, width: int) -> list[Text]:
    """Lay ``fragments`` out after ``first``, wrapped at ``width`` cells, never cut."""
    lines: list[Text] = []
    line = Text(first)
    used = cell_len(first)
    room = max(width, cell_len(indent) + 20)
    for index, (style, piece) in enumerate(fragments):
        size = cell_len(piece)
        if used + size > room and used > cell_len(indent):
            lines.append(line)
            line, used = Text(indent), cell_len(indent)
        line.append(piece, style=style or None)
        used += size
        if piece == "\\n" and style and index + 1 < len(fragments) - 1:
            lines.append(line)  # the value's own newline: shown as \n, then a new line
            line, used = Text(indent), cell_len(indent)
    lines.append(line)
    return lines


def call_lines(tool: str, tool_input: Mapping[str, Any], width: int = 80) -> list[Text]:
    """The complete display of one call: the tool, then each field, wrapped, never cut."""
    lines = [Text.assemble("  ", (visible(tool), "bold"))]
    if not tool_input:
        lines.append(Text("    (no input)"))
    for key, value in tool_input.items():
        name = visible(str(key))
        fragments = list(_value(value))
        label = f"    {name}: "
        indent = " " * min(len(label), 12)
        lines += _wrap(fragments, label, indent, width)
        if isinstance(value, str) and len(value) > 80:
            lines.append(Text(f"{indent}({len(value)} characters)", style="dim"))
    return lines


def _report_input(tool_input: Any) -> Text:
    """One line for the report: each value up to :data:`REPORT_CHARS`, the cut said."""
    out = Text()
    if not isinstance(tool_input, Mapping):  # an invalid input is reported too
        tool_input = {"input": tool_input}
    for index, (key, value) in enumerate(tool_input.items()):
        if index:
            out.append(", ")
        out.append(f"{visible(str(key))}=")
        more = ""
        if isinstance(value, str) and len(value) > REPORT_CHARS:
            more = f"{len(value) - REPORT_CHARS} more characters"
            value = value[:REPORT_CHARS]
        fragments = list(_value(value))
        if len(fragments) > REPORT_CHARS:
            fragments, more = fragments[:REPORT_CHARS], "more"
        for style, piece in fragments:
            out.append(piece, style=style or None)
        if more:
            out.append(f" [... {more}]", style="dim")
    return out


class TerminalUI(UI):
    """Per-call reports on a rich console (plain text when not a terminal)."""

    def __init__(self, console: Console | None = None) -> None:
        self.console = console or Console(highlight=False, emoji=False)

    def _print(self, *parts: str | Text | tuple[str, str]) -> None:
        self.console.print(Text.assemble(*parts), soft_wrap=True, highlight=False)

    def say(self, text: str) -> None:
        self._print(("model:", "bold"), " ", visible(text, prose=True))

    def note(self, text: str) -> None:
        self._print((visible(text, prose=True), "cyan"))

    def backend_messages(self, texts: Sequence[str]) -> None:
        for text in texts:
            self._print("  ", ("backend says:", "cyan"), " ", visible(text, prose=True))

    def call(self, record: CallRecord) -> None:
        self._print((f"● {visible(record.tool)}", "bold"), " ", _report_input(record.input))
        for d in record.diagnostics:
            if d.mode != "intercept":
                continue
            line = f"  backend {visible(d.backend)}[{d.subscription}]: {d.outcome}"
            if d.failure is not None:
                line += f" ({d.failure.value}, {d.policy})"
            self._print(line, " ", (f"{d.latency_ms:.1f} ms", "dim"))
        hook: str = record.hook_permission
        if record.synthetic_denial:
            hook = "deny (synthetic: a required backend failed)"
        elif record.denied_by:
            hook = f"deny by {record.denied_by}"
        self._print(f"  hooks: {visible(hook)}")
        host = f"  host: {record.host_decision} ({record.host_stage})"
        if record.approval != "not_needed":
            host += f", prompt {record.approval}"
        self._print(visible(host))
        style = _OUTCOME_STYLE.get(record.outcome, "white")
        what = "ran" if record.executed else ("supplied result" if record.supplied else "not run")
        detail = f": {visible(record.reason)}" if record.outcome == "denied" else ""
        if record.outcome not in ("ok", "denied") and record.output:
            # What failed, in the tool's words: its first line, bounded.
            first = record.output.strip().splitlines()[0] if record.output.strip() else ""
            detail = f": {visible(first[:200])}" if first else ""
        self._print("  ", (f"→ {record.outcome}", style), f" ({what}){detail}")


class FixedApprover:
    """``--non-interactive``: every prompt gets the same answer."""

    def __init__(self, answer: bool) -> None:
        self.answer = answer

    async def __call__(self, tool: str, tool_input: Mapping[str, Any], reason: str) -> bool:
        return self.answer


class PromptApprover:
    """Shows the whole call, then asks with prompt-toolkit (``y`` approves; else rejects).

    ``input`` and ``output`` are prompt-toolkit's (default: the current app session's,
    normally the terminal); the call is shown on ``console`` before the question.
    """

    def __init__(
        self,
        console: Console | None = None,
        *,
        input: Input | None = None,
        output: Output | None = None,
    ) -> None:
        self.console = console or Console(highlight=False, emoji=False)
        self._input = input
        self._output = output

    async def __call__(self, tool: str, tool_input: Mapping[str, Any], reason: str) -> bool:
        from prompt_toolkit import PromptSession  # only when asking (start-up speed)

        c = self.console
        header = Text.assemble(("approval needed", "yellow"), f" ({visible(reason)}):")
        c.print(header, soft_wrap=True, highlight=False)
        for line in call_lines(tool, tool_input, width=c.width):
            c.print(line, soft_wrap=True, highlight=False)
        session: PromptSession[str] = PromptSession(input=self._input, output=self._output)
        try:
            answer = await session.prompt_async("allow? [y/N] ", handle_sigint=False)
        except (EOFError, KeyboardInterrupt):
            return False
        return answer.strip().lower() in ("y", "yes")


class TerminalPrompts:
    """The user's prompts, one per turn, read at ``you>`` (prompt-toolkit).

    :meth:`read` returns the next non-empty line, or ``None`` when the user ends the
    session (Ctrl-D, ``/quit`` or ``/exit``, or Ctrl-C right after a Ctrl-C stopped a
    tool: :func:`ahp_harness.interrupt.ends_session`); else Ctrl-C asks again. History is kept in
    memory only: nothing is written to disk.
    """

    QUIT = frozenset({"/quit", "/exit"})

    def __init__(self, *, input: Input | None = None, output: Output | None = None) -> None:
        from prompt_toolkit import PromptSession  # only when prompting (start-up speed)

        self._session: PromptSession[str] = PromptSession(input=input, output=output)

    def _toolbar(self) -> str:
        return " your request starts a turn - Ctrl-D or /quit ends the session"

    async def read(self) -> str | None:
        while True:
            try:
                line = await self._session.prompt_async(
                    "you> ", bottom_toolbar=self._toolbar, handle_sigint=False
                )
            except KeyboardInterrupt:
                if ends_session():  # the Ctrl-C before it stopped a tool
                    return None
                continue
            except EOFError:
                return None
            text = line.strip()
            if text.lower() in self.QUIT:
                return None
            if text:
                return text

"""``manual``: the user plays the model in a prompt-toolkit REPL.

Each :meth:`ManualDriver.respond` first prints what is new since the user last
answered (the tool results, user prompts and injected messages after the last
assistant message, each shown once), then reads commands until one is a step:

==========================  ======================================================
``/shell CMD...``           ``shell {"command": CMD}`` (rest of the line, as typed)
``/read PATH``              ``read_file {"path"}``
``/write PATH TEXT...``     ``write_file {"path", "content": TEXT}`` (rest of line)
``/edit PATH OLD NEW``      ``edit_file {"path", "old", "new"}`` (shell-quoted words)
``/search PATTERN [PATH]``  ``search {"pattern", "path"?}`` (shell-quoted words)
``/fetch URL``              ``fetch {"url"}``
``/say TEXT...``            say ``TEXT`` and end the turn (the model's final answer)
``/help``                   list the commands
``/quit``, Ctrl-D           end the turn with nothing said, and the session
                            (``Reply.end_session``; :attr:`quit_requested`)
==========================  ======================================================

The session goes on after ``/say``: the next turn starts with the user's next prompt
(``ahp-harness run`` asks for it at ``you>``; ``/quit`` or Ctrl-D there ends the session).

Words are split like a POSIX shell (``shlex``): quote paths with spaces, and quote
regular expressions with single quotes to keep backslashes. In ``/write``, ``/edit``
and ``/say`` text, ``\\n``, ``\\t`` and ``\\\\`` stand for a newline, a tab and a
backslash. A tool command is one reply with one tool call (ids ``call_m<n>``).

A bad or unknown command prints a short explanation and prompts again; Ctrl-C at the
prompt prints a hint and prompts again, unless the Ctrl-C before it stopped a running
tool (:mod:`ahp_harness.interrupt`): then it ends the session. The driver never crashes
on input. It never runs tools or checks their input: the session sends every call
through the gate, which refuses what is invalid, and the refusal is shown before the
next prompt.

Tests inject ``input`` (``create_pipe_input()``) and ``output`` (``DummyOutput`` or a
plain-text output). Everything shown goes through :func:`ahp_harness.ui.visible`: a
tool result's control characters (ESC, CR, bidi overrides...) are shown escaped,
never interpreted by the terminal. Bounds: each shown message is cut at :data:`SHOW_CHARS`
characters (a note says how many more). prompt-toolkit needs an asyncio event loop.
"""

from __future__ import annotations

import difflib
import io
import re
import shlex
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from prompt_toolkit import PromptSession, print_formatted_text
from prompt_toolkit.completion import (
    CompleteEvent,
    Completer,
    Completion,
    PathCompleter,
    WordCompleter,
)
from prompt_toolkit.document import Document
from prompt_toolkit.formatted_text import FormattedText
from prompt_toolkit.history import FileHistory, History, InMemoryHistory
from prompt_toolkit.input import Input
from prompt_toolkit.output import Output

from ahp_harness.interrupt import ends_session
from ahp_harness.models.base import Reply, Say, ToolCall
from ahp_harness.models.conversation import call_id_of, message_text
from ahp_harness.tools import TOOLS
from ahp_harness.ui import visible

__all__ = [
    "COMMANDS",
    "SHOW_CHARS",
    "Command",
    "CommandCompleter",
    "ManualDriver",
    "help_text",
    "parse_line",
]

#: Each message shown before the prompt is cut at this many characters.
SHOW_CHARS = 4000


@dataclass(frozen=True)
class Command:
    """One REPL command: its usage line, what it does, and the tool it proposes (if any)."""

    name: str
    usage: str
    summary: str
    tool: str | None = None


def _tool_summary(tool: str, fallback: str) -> str:
    found = TOOLS.get(tool)
    return found.description if found is not None else fallback


COMMANDS: Mapping[str, Command] = {
    c.name: c
    for c in (
        Command("/shell", "/shell CMD...", "Run a shell command.", "shell"),
        Command("/read", "/read PATH", "Read a workspace text file.", "read_file"),
        Command(
            "/write", "/write PATH TEXT...", "Write TEXT (rest of line) to a file.", "write_file"
        ),
        Command("/edit", "/edit PATH OLD NEW", "Replace OLD with NEW in a file.", "edit_file"),
        Command("/search", "/search PATTERN [PATH]", "Search files for a regex.", "search"),
        Command("/fetch", "/fetch URL", "HTTP GET a URL.", "fetch"),
        Command("/say", "/say TEXT...", "Say TEXT to the user and end the turn."),
        Command("/help", "/help", "Show this help."),
        Command("/quit", "/quit", "End the turn and the session (Ctrl-D too)."),
    )
}
_ALIASES = {"/exit": "/quit", "/?": "/help"}


def help_text() -> str:
    """The ``/help`` text: every command, its usage and what it does."""
    width = max(len(c.usage) for c in COMMANDS.values())
    lines = ["You are the model. Propose one step per command:"]
    for command in COMMANDS.values():
        summary = command.summary
        if command.tool is not None:
            summary = f"{_tool_summary(command.tool, summary)} [{command.tool}]"
        lines.append(f"  {command.usage.ljust(width)}  {summary}")
    lines.append(
        "Words split like a shell: quote paths with spaces, and regexes with '...'. "
        "In text, \\n is a newline, \\t a tab, \\\\ a backslash."
    )
    return "\n".join(lines)


_ESCAPE = re.compile(r"\\([\\nt])")
_ESCAPES = {"\\": "\\", "n": "\n", "t": "\t"}


def _unescape(text: str) -> str:
    return _ESCAPE.sub(lambda m: _ESCAPES[m.group(1)], text)


class _Usage(Exception):
    """A command was malformed; the message says how to use it."""


def _first_word(rest: str, usage: str) -> tuple[str, str]:
    stream = io.StringIO(rest)
    lexer = shlex.shlex(stream, posix=True)
    lexer.whitespace_split = True
    lexer.commenters = ""
    try:
        word = lexer.get_token()
    except ValueError:
        raise _Usage(f"unbalanced quotes; usage: {usage}") from None
    if not word:
        raise _Usage(f"usage: {usage}")
    return word, stream.read()


def _words(rest: str, usage: str, least: int, most: int) -> list[str]:
    try:
        words = shlex.split(rest, comments=False, posix=True)
    except ValueError:
        raise _Usage(f"unbalanced quotes; usage: {usage}") from None
    if not least <= len(words) <= most:
        raise _Usage(f"usage: {usage}")
    return words


@dataclass(frozen=True)
class _Quit:
    pass


@dataclass(frozen=True)
class _Show:
    text: str


Parsed = ToolCall | Say | _Quit | _Show


def parse_line(line: str) -> Parsed:
    """What one REPL line means: a step (tool calls without id), quit, or text to show."""
    text = line.strip()
    if not text:
        return _Show("")
    if not text.startswith("/"):
        return _Show("Commands start with '/'. Answer with /say TEXT; /help lists commands.")
    name, _, rest = text.partition(" ")
    name = _ALIASES.get(name.lower(), name.lower())
    rest = rest.strip()
    command = COMMANDS.get(name)
    if command is None:
        close = difflib.get_close_matches(name, list(COMMANDS), n=1)
        hint = f" Did you mean {close[0]}?" if close else ""
        return _Show(f"Unknown command {name[:40]}.{hint} /help lists commands.")
    try:
        return _parse(command, rest)
    except _Usage as exc:
        return _Show(f"{command.name}: {exc}")


def _parse(command: Command, rest: str) -> Parsed:
    usage = command.usage
    if command.name == "/help":
        return _Show(help_text())
    if command.name == "/quit":
        return _Quit()
    if command.name == "/say":
        if not rest:
            raise _Usage(f"usage: {usage}")
        return Say(_unescape(rest))
    if command.name == "/shell":
        if not rest:
            raise _Usage(f"usage: {usage}")
        return ToolCall("shell", {"command": rest})
    if command.name == "/read":
        (path,) = _words(rest, usage, 1, 1)
        return ToolCall("read_file", {"path": path})
    if command.name == "/write":
        path, content = _first_word(rest, usage)
        return ToolCall("write_file", {"path": path, "content": _unescape(content)})
    if command.name == "/edit":
        path, old, new = _words(rest, usage, 3, 3)
        return ToolCall("edit_file", {"path": path, "old": _unescape(old), "new": _unescape(new)})
    if command.name == "/search":
        words = _words(rest, usage, 1, 2)
        inp = {"pattern": words[0]} | ({"path": words[1]} if len(words) > 1 else {})
        return ToolCall("search", inp)
    if command.name == "/fetch":
        (url,) = _words(rest, usage, 1, 1)
        return ToolCall("fetch", {"url": url})
    raise _Usage(f"usage: {usage}")  # pragma: no cover - every command is handled above


class CommandCompleter(Completer):
    """Completes command names, then paths after ``/read``, ``/write``, ``/edit``, ``/search``."""

    _PATH_COMMANDS = frozenset({"/read", "/write", "/edit", "/search"})

    def __init__(self) -> None:
        meta = {name: command.summary for name, command in COMMANDS.items()}
        self._names = WordCompleter(list(COMMANDS), meta_dict=meta, sentence=True)
        self._paths = PathCompleter(expanduser=True)

    def get_completions(
        self, document: Document, complete_event: CompleteEvent
    ) -> Iterable[Completion]:
        text = document.text_before_cursor.lstrip()
        if " " not in text:
            yield from self._names.get_completions(Document(text), complete_event)
            return
        name, _, rest = text.partition(" ")
        if name.lower() not in self._PATH_COMMANDS:
            return
        word = rest.rsplit(" ", 1)[-1]  # complete the word being typed as a path
        yield from self._paths.get_completions(Document(word), complete_event)


_ROLE_STYLE = {"tool": "ansicyan", "user": "ansigreen", "developer": "ansiyellow"}


class ManualDriver:
    """A prompt-toolkit REPL in which the user proposes each step."""

    provider = "manual"

    def __init__(
        self,
        *,
        input: Input | None = None,
        output: Output | None = None,
        history_file: str | Path | None = None,
        model_id: str = "manual",
    ) -> None:
        self.model_id = model_id
        self.quit_requested = False
        history: History = (
            FileHistory(str(history_file)) if history_file is not None else InMemoryHistory()
        )
        self.completer = CommandCompleter()
        self._session: PromptSession[str] = PromptSession(
            history=history,
            completer=self.completer,
            complete_while_typing=False,
            input=input,
            output=output,
        )
        self._shown: set[str] = set()
        self._tools: dict[str, str] = {}
        self._count = 0

    @property
    def history(self) -> History:
        """The command history (in memory, or the history file)."""
        return self._session.history

    def say(self, text: str, style: str = "") -> None:
        """Print ``text`` on the driver's output, control characters escaped (never interpreted)."""
        shown = visible(text, prose=True)
        print_formatted_text(FormattedText([(style, shown)]), output=self._session.output)

    def _show_news(self, conversation: Sequence[Mapping[str, Any]]) -> None:
        start = 0
        for index, message in enumerate(conversation):
            if message.get("role") == "assistant":
                start = index + 1
        for message in conversation[start:]:
            role = message.get("role")
            if role not in _ROLE_STYLE:
                continue
            mid = message.get("id")
            if isinstance(mid, str):
                if mid in self._shown:
                    continue
                self._shown.add(mid)
            text = message_text(message)
            if len(text) > SHOW_CHARS:
                text = f"{text[:SHOW_CHARS]}\n[... {len(text) - SHOW_CHARS} more characters]"
            label = str(role)
            call_id = call_id_of(message)
            if call_id is not None:
                tool = self._tools.get(call_id)
                label = f"result of {call_id}" + (f" ({tool})" if tool else "")
            self.say(f"[{label}]", _ROLE_STYLE[str(role)] + " bold")
            self.say(text or "(no text)")

    def _toolbar(self) -> str:
        return (
            f" {self.model_id}: you are the model - /say ends the turn, "
            "/quit or Ctrl-D the session, /help lists commands"
        )

    async def respond(self, conversation: Sequence[Mapping[str, Any]]) -> Reply:
        self._show_news(conversation)
        while True:
            try:
                line = await self._session.prompt_async(
                    "model> ", bottom_toolbar=self._toolbar, handle_sigint=False
                )
            except KeyboardInterrupt:
                if ends_session():  # the Ctrl-C before it stopped a tool
                    self.quit_requested = True
                    return Reply(done=True, end_session=True)
                self.say("(Ctrl-C: /quit or Ctrl-D ends the session; /help lists commands)")
                continue
            except EOFError:
                self.quit_requested = True
                return Reply(done=True, end_session=True)
            parsed = parse_line(line)
            if isinstance(parsed, _Show):
                if parsed.text:
                    self.say(parsed.text)
                continue
            if isinstance(parsed, _Quit):
                self.quit_requested = True
                return Reply(done=True, end_session=True)
            if isinstance(parsed, Say):
                return Reply(steps=(parsed,), done=True)
            self._count += 1
            call = ToolCall(parsed.tool, parsed.input, id=f"call_m{self._count}")
            self._tools[call.id] = call.tool
            return Reply(steps=(call,), done=False, finish_reason="tool_calls")

    async def aclose(self) -> None:
        return None

    def __repr__(self) -> str:
        return f"<ManualDriver {self.model_id}>"

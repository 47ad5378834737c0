"""``ahp-backend denylist --rules FILE``: deny tool calls that match rules written in TOML.

Owns the rules format, :data:`RULES_FORMAT` (the one description of it: ``--help``
prints it; the README and ``examples/backends/denylist.toml`` point to it), parsed
and validated in full before anything is served (an error names the file, the line,
the rule and field, and the reason; the file handling is
:mod:`ahp_backends.toml_lines`); the matching of one ``tool.before`` or
``tool.permission.request`` event against the rules (the first matching rule, in
file order, decides); and serving them, reloaded while serving (a broken edit keeps
the last good rules and says so once on stderr: :mod:`ahp_backends.rules_file`, which
also holds the path-glob dialect).

Never allows anything: its answer is a ``deny`` (plus an optional ``message``) or
no effect, and no effect is not permission (the harness's own rules still decide).
Input regexes are RE2 (:mod:`ahp_backends.patterns`, the engine CEL's ``matches()``
uses too): linear in the input, so no crafted command holds the process; a pattern RE2
cannot run is refused at load, naming the rule, the field and the construct.
Never echoes a rule's values or the event in diagnostics. Bounds: the rules file
is read whole (at most 1 MiB); answers are remembered by ``(source, event.id)``
(:class:`~ahp_backends.serving.Replies`), so a duplicate delivery gets the first
answer even if the rules changed in between.
"""

from __future__ import annotations

import argparse
import json
import posixpath
import re
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import IO, TYPE_CHECKING, Any, Final

from ahp_protocol.wire.kinds import TOOL_KINDS
from ahp_protocol.wire.names import is_reverse_dns

from ahp_backends.patterns import Pattern
from ahp_backends.rules_file import RulesFile, glob_to_regex
from ahp_backends.serving import (
    SERVED_TIMEOUT_MS,
    Replies,
    add_transport_arguments,
    fail,
    serve,
)
from ahp_backends.toml_lines import (
    MAX_FILE_BYTES,
    ConfigError,
    Locator,
    only_key,
    read_toml,
    table_lines,
)
from ahp_backends.tool_call import PATH_FIELDS, path_candidates, session_cwd

if TYPE_CHECKING:
    from ahp_protocol.server import Backend, InterceptRequest

__all__ = [
    "DEFAULT_SUBSCRIPTIONS",
    "EVENTS",
    "MAX_FILE_BYTES",
    "NAME",
    "PATH_FIELDS",
    "ConfigError",
    "Denylist",
    "Locator",
    "Rule",
    "RuleSet",
    "build_backend",
    "glob_to_regex",
    "main",
    "parse_rules",
    "read_toml",
    "table_lines",
]

NAME: Final = "com.example.ahp.denylist"
EVENTS: Final = ("tool.before", "tool.permission.request")

DEFAULT_SUBSCRIPTIONS: Final[list[dict[str, Any]]] = [
    {
        # tool.before is the earliest boundary: a deny there means the call never
        # reaches the host's permission stage. Register tool.permission.request
        # explicitly to have the rules checked there too.
        "mode": "intercept",
        "events": ["tool.before"],
        "timeoutMs": SERVED_TIMEOUT_MS,
        # A guard that cannot answer must not let the call through.
        "failurePolicy": "fail-closed",
        # The rules read the tool's name, kind, origin, MCP server and input, which a
        # content selection never withholds; message bodies are not needed at all.
        "content": {"default": "metadata"},
    }
]

RULE_KEYS: Final = (
    "reason",
    "code",
    "message",
    "kind",
    "tool",
    "origin",
    "mcp_server",
    "mcp_tool",
    "paths",
    "input",
    "events",
)
CONDITIONS: Final = ("kind", "tool", "origin", "mcp_server", "mcp_tool", "paths", "input")

_PATHS_HELP: Final = textwrap.fill(
    "paths       globs matched against path-like inputs (the input fields "
    + ", ".join(PATH_FIELDS)
    + "): '*' and '?' stay within a directory, '**' crosses directories; a glob "
    "without '/' matches the file name; a relative glob is relative to session.cwd; "
    "inputs are matched in the kernel's lexical form ('//etc/./x/' and '/tmp/../etc/x' "
    "are /etc/x), also resolved against session.cwd ('../../etc/x' is /etc/x); "
    "symlinks are not resolved (a link is matched by its own name)",
    width=80,
    initial_indent="  ",
    subsequent_indent=" " * 14,
    break_on_hyphens=False,
    break_long_words=False,
)

RULES_FORMAT: Final = """\
rules file (TOML): one [[rules]] table per rule; the first rule that matches, in
file order, denies with its reason and code. Keys:
  reason      (required) the deny reason, non-empty
  code        (required) reverse-DNS deny code, e.g. com.example.policy.rm_rf
  kind        tool.kind, exact (a string or a list: any of them), one of
              <kinds>
              (a native tool name such as "Bash" is matched with 'tool')
  tool        tool.name, exact (a string or a list)
  origin      tool.origin: "native" or "mcp"
  mcp_server  the MCP server's id or name (tool.mcp.server), a string or a list
  mcp_tool    the tool's own name on its MCP server (tool.mcp.toolName, not the
              harness's tool.name), exact, a string or a list
<paths>
  [rules.input] field = "regex"  found anywhere in tool.input.<field> (RE2 syntax, as
              CEL's matches(); linear in the input; no backreferences or lookaround)
  events      where the rule applies: tool.before, tool.permission.request (default both)
  message     optional text for a 'message' effect alongside the deny
Every condition a rule gives must hold, and a rule gives at least one. Unknown keys
are errors. The file is re-read when it changes; a broken edit keeps the last good
rules (and says so on stderr). With --once each process reads the file afresh, so
a broken file fails every event (the subscription's failure policy decides).

example:
  [[rules]]
  reason = "rm -rf is not allowed here."
  code = "com.example.policy.rm_rf"
  kind = "shell"
  [rules.input]
  command = "\\\\brm\\\\s+-rf\\\\b"
""".replace("<kinds>", ", ".join(TOOL_KINDS)).replace("<paths>", _PATHS_HELP)
"""The rules format, the one place it is written down (``--help`` prints it)."""


# --------------------------------------------------------------------------- rules


@dataclass(frozen=True, slots=True)
class PathGlob:
    text: str
    pattern: re.Pattern[str]
    basename_only: bool

    def matches(self, candidates: Sequence[str]) -> bool:
        for candidate in candidates:
            subject = posixpath.basename(candidate) if self.basename_only else candidate
            if self.pattern.match(subject):
                return True
        return False


@dataclass(frozen=True, slots=True)
class Rule:
    """One rule as loaded. ``None`` (or empty) conditions are not checked."""

    index: int
    reason: str
    code: str
    message: str | None = None
    kinds: frozenset[str] | None = None
    tools: frozenset[str] | None = None
    origin: str | None = None
    mcp_servers: frozenset[str] | None = None
    mcp_tools: frozenset[str] | None = None
    paths: tuple[PathGlob, ...] = ()
    inputs: tuple[tuple[str, Pattern], ...] = ()
    events: frozenset[str] = frozenset(EVENTS)

    def matches(self, event_type: str, event: Mapping[str, Any]) -> bool:
        if event_type not in self.events:
            return False
        tool = event.get("tool")
        if not isinstance(tool, Mapping):
            return False
        if self.kinds is not None and tool.get("kind") not in self.kinds:
            return False
        if self.tools is not None and tool.get("name") not in self.tools:
            return False
        if self.origin is not None and tool.get("origin") != self.origin:
            return False
        if self.mcp_servers is not None and not (_mcp_server_ids(tool) & self.mcp_servers):
            return False
        if self.mcp_tools is not None and _mcp_tool_name(tool) not in self.mcp_tools:
            return False
        tool_input = tool.get("input")
        values: Mapping[str, Any] = tool_input if isinstance(tool_input, Mapping) else {}
        for name, regex in self.inputs:
            if name not in values or not any(regex.search(t) for t in _texts(values[name])):
                return False
        if self.paths:
            candidates = path_candidates(values, session_cwd(event))
            if not any(glob.matches(candidates) for glob in self.paths):
                return False
        return True


def _mcp_server_ids(tool: Mapping[str, Any]) -> set[str]:
    mcp = tool.get("mcp")
    server = mcp.get("server") if isinstance(mcp, Mapping) else None
    if not isinstance(server, Mapping):
        return set()
    return {v for v in (server.get("id"), server.get("name")) if isinstance(v, str)}


def _mcp_tool_name(tool: Mapping[str, Any]) -> str | None:
    mcp = tool.get("mcp")
    name = mcp.get("toolName") if isinstance(mcp, Mapping) else None
    return name if isinstance(name, str) else None


def _texts(value: Any) -> Iterator[str]:
    """The strings a regex is searched in: a string itself, each item of a list, else JSON."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, list):
        for item in value:
            yield from _texts(item)
    elif value is not None:
        yield json.dumps(value, sort_keys=True, ensure_ascii=False)


@dataclass(frozen=True, slots=True)
class RuleSet:
    """The rules of one version of the file, in order."""

    rules: tuple[Rule, ...]

    def first_match(self, event_type: str, event: Mapping[str, Any]) -> Rule | None:
        for rule in self.rules:
            if rule.matches(event_type, event):
                return rule
        return None


def _names(
    loc: Locator, i: int, key: str, value: Any, *, allowed: Sequence[str] | None = None
) -> frozenset[str]:
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not items:
        raise loc.error(i, "must be a string or a non-empty list of strings", key)
    for item in items:
        if not isinstance(item, str) or not item:
            raise loc.error(i, "must be a string or a non-empty list of strings", key)
        if allowed is not None and item not in allowed:
            raise loc.error(i, "must be one of " + ", ".join(allowed), key)
    return frozenset(items)


UNKNOWN_KIND: Final = (
    "is not a tool kind of the draft (kinds: "
    + ", ".join(TOOL_KINDS)
    + "); the rule would never match, since harnesses send these kinds; "
    'to match a tool by its own name, use tool = "..."'
)


def _kinds(loc: Locator, i: int, value: Any) -> frozenset[str]:
    """A rule's ``kind`` condition; a kind outside the vocabulary is a load error."""
    kinds = _names(loc, i, "kind", value)
    if not kinds <= frozenset(TOOL_KINDS):
        raise loc.error(i, UNKNOWN_KIND, "kind")
    return kinds


def _rule(loc: Locator, i: int, table: Any) -> Rule:
    table = loc.table(i, table, RULE_KEYS)
    if "reason" not in table:
        raise loc.error(i, "'reason' is required (the deny reason)")
    if "code" not in table:
        raise loc.error(i, "'code' is required (a reverse-DNS deny code)")
    reason = loc.text(i, "reason", table["reason"])
    code = table["code"]
    if not is_reverse_dns(code):
        raise loc.error(i, "must be a reverse-DNS id like com.example.policy.rm_rf", "code")
    if not any(key in table for key in CONDITIONS):
        raise loc.error(
            i,
            "a rule needs at least one condition (" + ", ".join(CONDITIONS) + "); "
            "without one it would deny every call",
        )
    origin = table.get("origin")
    if origin is not None and origin not in ("native", "mcp"):
        raise loc.error(i, 'must be "native" or "mcp"', "origin")
    for key in ("mcp_server", "mcp_tool"):
        if key in table and origin == "native":
            raise loc.error(i, f'an {key} condition needs origin "mcp" (or no origin)', "origin")
    paths: list[PathGlob] = []
    if "paths" in table:
        for glob in _names(loc, i, "paths", table["paths"]):
            paths.append(PathGlob(glob, glob_to_regex(glob), "/" not in glob))
        paths.sort(key=lambda g: g.text)
    inputs: list[tuple[str, Pattern]] = []
    if "input" in table:
        fields = table["input"]
        if not isinstance(fields, dict) or not fields:
            raise loc.error(i, 'must be a table of field = "regex" ([rules.input])', "input")
        for name, regex in fields.items():
            if isinstance(regex, dict):
                raise loc.error(
                    i,
                    "nested fields are not supported; name a top-level input field",
                    "input",
                    name,
                )
            inputs.append((name, loc.regex(i, regex, "input", name)))
    return Rule(
        index=i,
        reason=reason,
        code=code,
        message=loc.text(i, "message", table["message"]) if "message" in table else None,
        kinds=_kinds(loc, i, table["kind"]) if "kind" in table else None,
        tools=_names(loc, i, "tool", table["tool"]) if "tool" in table else None,
        origin=origin,
        mcp_servers=(
            _names(loc, i, "mcp_server", table["mcp_server"]) if "mcp_server" in table else None
        ),
        mcp_tools=(_names(loc, i, "mcp_tool", table["mcp_tool"]) if "mcp_tool" in table else None),
        paths=tuple(paths),
        inputs=tuple(inputs),
        events=(
            _names(loc, i, "events", table["events"], allowed=EVENTS)
            if "events" in table
            else frozenset(EVENTS)
        ),
    )


def parse_rules(path: str, data: bytes | None = None) -> RuleSet:
    """Read and validate a rules file (``data``: its bytes, if already read)."""
    text, document = read_toml(path, data)
    only_key(path, document, "rules")
    if "rules" not in document:
        raise ConfigError(path, "no [[rules]] tables (write 'rules = []' for an empty list)")
    rules = document["rules"]
    if not isinstance(rules, list):
        raise ConfigError(path, "'rules' must be an array of tables ([[rules]])")
    loc = Locator(path, text, "rules")
    return RuleSet(tuple(_rule(loc, i, table) for i, table in enumerate(rules)))


# --------------------------------------------------------------------------- serving


class Denylist:
    """The serving state: the rules in force, their reload, and remembered answers.

    Thread-safe (HTTP runs handlers in worker threads): one lock covers reload,
    decision and the answer memory, so a duplicate gets exactly the first answer.
    """

    def __init__(
        self,
        path: str,
        *,
        stderr: IO[str] | None = None,
        clock_ns: Callable[[], int] = time.time_ns,
    ) -> None:
        self.path = path
        self._stderr = stderr
        self._file = RulesFile(
            path, parse_rules, count=lambda r: len(r.rules), say=self._say, clock_ns=clock_ns
        )
        self._lock = threading.Lock()
        self.replies = Replies()

    @property
    def rules(self) -> RuleSet:
        """The rules in force (the last good version of the file)."""
        return self._file.current

    def _say(self, text: str) -> None:
        stream = self._stderr if self._stderr is not None else sys.stderr
        print(f"ahp-backend denylist: {text}", file=stream, flush=True)

    def refresh(self) -> None:
        """Re-read the file if it changed; keep the last good rules if the new text is bad."""
        self._file.refresh()

    def decide(self, request: InterceptRequest) -> list[Any]:
        """The effects for one request (after a reload check), remembered by ``(source, id)``."""
        with self._lock:
            return self.replies.answer(request.event, lambda: self._decide(request))

    def _decide(self, request: InterceptRequest) -> list[Any]:
        self.refresh()
        rule = self.rules.first_match(request.event_type, request.event)
        if rule is None:
            return []
        from ahp_protocol.wire.effects import DenyEffect, MessageEffect

        effects: list[Any] = []
        if "deny" in request.advertised:
            effects.append(DenyEffect(reason=rule.reason, code=rule.code))
        else:
            self._say(f"rules[{rule.index}] matched, but this request does not accept deny")
        if rule.message is not None and "message" in request.advertised:
            effects.append(MessageEffect(text=rule.message))
        return effects


def build_backend(denylist: Denylist) -> Backend:
    """The AHP backend serving ``denylist`` at tool.before and tool.permission.request."""
    from ahp_protocol.server import Backend

    backend = Backend(NAME, configuration=DEFAULT_SUBSCRIPTIONS)
    for event_type in EVENTS:
        backend.intercept(event_type)(denylist.decide)
    return backend


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ahp-backend denylist",
        description=(
            "Deny tool calls that match rules (TOML). Speaks AHP on stdin/stdout by\n"
            "default (one persistent process). Serves hooks/configuration (intercept\n"
            f"tool.before, fail-closed, {SERVED_TIMEOUT_MS} ms, content metadata), so a\n"
            "registration may omit subscriptions."
        ),
        epilog=RULES_FORMAT,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--rules", required=True, metavar="FILE", help="the rules file (TOML)")
    parser.add_argument(
        "--check", action="store_true", help="validate the rules file, report, and exit"
    )
    add_transport_arguments(parser)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(list(sys.argv[1:] if argv is None else argv))
    path: str = args.rules
    try:
        denylist = Denylist(path)
    except ConfigError as exc:
        return fail(str(exc))
    except OSError as exc:
        return fail(f"{path}: cannot read the rules file ({exc.strerror or 'I/O error'})")
    if args.check:
        print(f"{path}: {len(denylist.rules.rules)} rules, valid")
        return 0
    return serve(build_backend(denylist), args)


if __name__ == "__main__":
    sys.exit(main())

r"""The host's own permission layer: rules, managed rules and modes.

Owns three independent sources of a host decision (``allow`` | ``ask`` | ``deny``)
for one tool call, and the hosts ``fetch`` may reach. Combining them with each other
and with AHP's result is the caller's job (:mod:`ahp_harness.hooks`); this module
only says what each source decides:

* **managed** (:meth:`Permissions.managed_decision`): rules from the ``--managed``
  file, set by whoever administers the machine. A managed ``deny`` or ``ask`` is a
  floor: no user rule, mode or AHP effect may relax it. A managed ``allow`` carries
  no more weight than a user ``allow`` (it suppresses the ordinary prompt only).
* **rule** (:meth:`Permissions.rule_decision`): the user's permissions file.
* **mode** (:meth:`Permissions.mode_decision`): the default when no rule matched:

  ==================  =========  ==============  =========
  kind                default    accept-edits    read-only
  ==================  =========  ==============  =========
  file_read, search   allow      allow           allow
  file_write, edit    ask        allow           deny
  shell, fetch        ask        ask             deny
  anything else       ask        ask             deny
  ==================  =========  ==============  =========

  Whatever the mode, a call the sandbox would refuse (a path outside the workspace,
  a fetch host not allowed) is ``deny`` with the sandbox's reason.

Among the matching rules of one source, ``deny`` beats ``ask`` beats ``allow``
(ties: the first in the file). No matching rule: ``None``.

**The file** (TOML; the managed file has the same shape)::

    fetch_hosts = ["127.0.0.1", "localhost", "*.example.org"]   # optional

    [[rules]]
    decision = "deny"              # required: allow | ask | deny
    tool = "shell"                 # optional: a tool name ...
    kind = "shell"                 # optional: ... and/or a tool kind (both must match)
    pattern = '\bgit\s+push\b'     # optional: regex, re.search in the main argument
    glob = "secrets/*"             # optional: fnmatch pattern on each path the call touches
    reason = "no pushes from here" # optional: shown to the user and the model

**MCP tools** (``--mcp-config``) are named ``mcp__<server>__<tool>`` (kind ``mcp``). In a
rule, ``tool = "mcp__files__delete"`` names one; ``tool = "mcp__files"`` or
``"mcp__files__*"`` every tool of the server ``files``; ``*`` and ``?`` are globs within
the server id and within the tool name (``"mcp__*__delete*"``); ``kind = "mcp"`` every
MCP tool. A rule naming an MCP tool is checked for its shape at load time (the server
need not be running). An MCP tool's main argument, for ``pattern``, is its input as
compact JSON with sorted keys (``{"path":"a.txt"}``); it has no paths, so ``glob`` never
matches it.

A rule with neither ``tool`` nor ``kind`` applies to every tool; with neither
``pattern`` nor ``glob`` to every call of its tools; with both, both must match.
The main argument is the command, path, url or search pattern
(:meth:`Tool.main_argument`); a path is normalised first (``a/./b/../c`` ->
``a/c``). ``glob`` matches each path of :meth:`Tool.paths` (normalised); ``*``
matches across ``/``; a glob matches the whole path or any tail of it after a
``/``, so ``glob = ".env"`` matches ``.env``, ``sub/.env`` and ``/w/sub/.env``. A
glob never matches a call without paths (``shell``, ``fetch``): use ``pattern``.
``fetch_hosts`` lists host names (``*.name`` for any subdomain; any port); in the
managed file it is an upper bound the user's list is intersected with.

**Writing an allow pattern for one command.** ``re.search`` finds a match anywhere,
``$`` also matches before a final newline, and a class such as ``[^;&|]`` matches
a newline: ``'^ls( [^;&|]*)?$'`` matches ``"ls\ntouch /x"``, which is two commands.
Anchor with ``\A`` and ``\Z``, and list the characters an argument may hold rather
than those it may not (``[A-Za-z0-9_./-]``, never ``\s`` or ``.``); ``(?x)`` lets a
long pattern span lines (spaces are then ``[ ]``). The examples in
``examples/permissions/`` do this, and their tests try newlines, ``\r``, ``;``,
``&&``, ``||``, ``|``, ``&``, ``$( )``, backticks, redirections and output options.

**Search.** A ``search`` of a folder reads every file under it, so a rule cannot be
judged on the folder alone. :meth:`Permissions.hidden_from_search` judges each file
as a ``search`` of that one file: a file a rule denies (or would ask for) is one the
search tool must skip. A ``glob`` rule without ``tool``/``kind`` (``glob = ".env"``)
therefore keeps the file from ``read_file``, ``write_file``, ``edit_file`` and
``search`` alike.

Load errors (:class:`PermissionsError`) name the file, the rule index and line, the
field and the reason; unknown keys, decisions, tools and kinds, and invalid regular
expressions are all rejected. Never does: run tools, touch AHP, or read files other
than the one it is given. Bounds: rules are matched against arguments as written;
symlinks are the sandbox's business (:mod:`ahp_harness.sandbox`), so a rule on
``docs/*`` also matches ``docs/link`` that points elsewhere in the workspace.
A shell command is matched as text: no rule knows which files it touches.
"""

from __future__ import annotations

import fnmatch
import ipaddress
import posixpath
import re
import tomllib
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, get_args

from ahp_harness.mcp_names import TOOL_PREFIX, split_tool_name
from ahp_harness.modes import MODES, Mode
from ahp_harness.sandbox import SandboxViolation
from ahp_harness.tools import KINDS, TOOLS
from ahp_harness.tools.search import SearchInput

if TYPE_CHECKING:
    from pydantic import BaseModel

    from ahp_harness.sandbox import Sandbox
    from ahp_harness.tools.base import Tool

__all__ = [
    "DECISIONS",
    "MODES",
    "Decision",
    "HostDecision",
    "Mode",
    "Permissions",
    "PermissionsError",
    "PermissionsFile",
    "Rule",
    "load_file",
    "load_rules",
    "strongest",
]

Decision = Literal["allow", "ask", "deny"]
DECISIONS: tuple[Decision, ...] = get_args(Decision)

_STRENGTH: dict[str, int] = {"allow": 0, "ask": 1, "deny": 2}
_RULE_KEYS = ("decision", "tool", "kind", "pattern", "glob", "reason")
_FILE_KEYS = ("rules", "fetch_hosts")
_READ_KINDS = frozenset({"file_read", "search"})
_EDIT_KINDS = frozenset({"file_write", "file_edit"})


class PermissionsError(ValueError):
    """A permissions file (or rule) is invalid. ``str()`` says where and why."""

    def __init__(
        self,
        file: str,
        reason: str,
        *,
        index: int | None = None,
        line: int | None = None,
        field: str | None = None,
    ) -> None:
        self.file = file
        self.reason = reason
        self.index = index
        self.line = line
        self.field = field
        where = file
        if index is not None:
            where += f": rules[{index}]"
        if line is not None:
            where += f" (line {line})"
        what = f"{field}: {reason}" if field else reason
        super().__init__(f"{where}: {what}")


class _RuleProblem(ValueError):
    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field}: {reason}")
        self.field = field
        self.reason = reason


def _glob_regex(glob: str) -> re.Pattern[str]:
    return re.compile(fnmatch.translate(glob), re.DOTALL)


_MCP_SERVER_GLOB = re.compile(r"[A-Za-z0-9_*?-]+\Z")
_MCP_TOOL_GLOB = re.compile(r"[A-Za-z0-9_.*?-]+\Z")
MCP_RULE_SHAPE = (
    "an MCP tool is mcp__<server> or mcp__<server>__<tool> ('*' and '?' are globs; "
    "server: letters, digits, '_', '-'; tool: also '.'), e.g. mcp__files__delete"
)


def mcp_tool_globs(name: str) -> tuple[str, str]:
    """``(server glob, tool glob)`` of an ``mcp__...`` rule ``tool``; ``ValueError`` if bad."""
    server, sep, tool = name[len(TOOL_PREFIX) :].partition("__")
    if (
        not server
        or "__" in server
        or not _MCP_SERVER_GLOB.match(server)
        or (sep and not _MCP_TOOL_GLOB.match(tool))
    ):
        raise ValueError(MCP_RULE_SHAPE)
    return server, tool or "*"


def _mcp_matches(globs: tuple[str, str], name: str) -> bool:
    parts = split_tool_name(name)
    if parts is None:
        return False
    return fnmatch.fnmatchcase(parts[0], globs[0]) and fnmatch.fnmatchcase(parts[1], globs[1])


@dataclass(frozen=True)
class Rule:
    """One rule. ``source`` says where it came from (``file:rules[i]``)."""

    decision: Decision
    tool: str | None = None
    kind: str | None = None
    pattern: str | None = None
    glob: str | None = None
    reason: str | None = None
    source: str = "<rules>"
    _regex: re.Pattern[str] | None = field(init=False, repr=False, compare=False, default=None)
    _glob: re.Pattern[str] | None = field(init=False, repr=False, compare=False, default=None)
    _mcp: tuple[str, str] | None = field(init=False, repr=False, compare=False, default=None)

    def __post_init__(self) -> None:
        if self.decision not in _STRENGTH:
            raise _RuleProblem("decision", "must be one of allow, ask, deny")
        if self.tool is not None and (not isinstance(self.tool, str) or not self.tool):
            raise _RuleProblem("tool", "must be a non-empty string")
        if self.tool is not None and self.tool.startswith(TOOL_PREFIX):
            try:
                object.__setattr__(self, "_mcp", mcp_tool_globs(self.tool))
            except ValueError as exc:
                raise _RuleProblem("tool", str(exc)) from None
        if self.kind is not None and self.kind not in KINDS:
            raise _RuleProblem("kind", f"must be one of {', '.join(sorted(KINDS))}")
        if self.pattern is not None:
            if not isinstance(self.pattern, str) or not self.pattern:
                raise _RuleProblem("pattern", "must be a non-empty string")
            try:
                regex = re.compile(self.pattern)
            except re.error as exc:
                raise _RuleProblem(
                    "pattern", f"not a valid regular expression ({exc.msg})"
                ) from None
            object.__setattr__(self, "_regex", regex)
        if self.glob is not None:
            if not isinstance(self.glob, str) or not self.glob:
                raise _RuleProblem("glob", "must be a non-empty string")
            object.__setattr__(self, "_glob", _glob_regex(posixpath.normpath(self.glob)))
        if self.reason is not None and not isinstance(self.reason, str):
            raise _RuleProblem("reason", "must be a string")

    def matches(self, tool: Tool, inp: BaseModel) -> bool:
        """Whether this rule applies to the call ``tool(inp)``."""
        if self._mcp is not None:
            if not _mcp_matches(self._mcp, tool.name):
                return False
        elif self.tool is not None and self.tool != tool.name:
            return False
        if self.kind is not None and self.kind != tool.kind:
            return False
        paths = tool.paths(inp)
        if self._regex is not None:
            argument = tool.main_argument(inp)
            if argument in paths:
                argument = posixpath.normpath(argument)
            if not self._regex.search(argument):
                return False
        if self._glob is not None:
            return any(_glob_hits(self._glob, posixpath.normpath(p)) for p in paths)
        return True

    def describe(self) -> str:
        """A short human description, e.g. ``deny shell /rm -rf/ (file.toml:rules[0])``."""
        parts: list[str] = [self.decision]
        if self.tool:
            parts.append(self.tool)
        if self.kind:
            parts.append(f"kind={self.kind}")
        if self.pattern:
            parts.append(f"/{self.pattern}/")
        if self.glob:
            parts.append(f"glob={self.glob}")
        return f"{' '.join(parts)} ({self.source})"


def _glob_hits(glob: re.Pattern[str], path: str) -> bool:
    if glob.match(path):
        return True
    return any(glob.match(path[i + 1 :]) for i, ch in enumerate(path) if ch == "/")


def strongest(rules: Iterable[Rule], tool: Tool, inp: BaseModel) -> Rule | None:
    """The strongest matching rule (deny > ask > allow; first wins a tie), or ``None``."""
    best: Rule | None = None
    for rule in rules:
        if rule.matches(tool, inp) and (
            best is None or _STRENGTH[rule.decision] > _STRENGTH[best.decision]
        ):
            best = rule
    return best


@dataclass(frozen=True)
class HostDecision:
    """One source's decision. ``rule`` is set for ``managed`` and ``rule`` sources."""

    decision: Decision
    source: Literal["managed", "rule", "mode"]
    rule: Rule | None
    reason: str


# -- loading -------------------------------------------------------------------------

_HEADER = re.compile(r"^\s*\[")
_RULES_HEADER = re.compile(r"^\s*\[\[\s*rules\s*\]\]")
_TOML_LINE = re.compile(r"\(at line (\d+), column (\d+)\)")


def _rule_lines(text: str, count: int) -> list[tuple[int, int]] | None:
    """(first, last) line of each ``[[rules]]`` table, if every rule has a header."""
    lines = text.splitlines()
    starts = [i for i, line in enumerate(lines) if _RULES_HEADER.match(line)]
    if len(starts) != count:
        return None
    spans: list[tuple[int, int]] = []
    for start in starts:
        end = next((j for j in range(start + 1, len(lines)) if _HEADER.match(lines[j])), len(lines))
        spans.append((start + 1, end))
    return spans


def _key_line(text: str, span: tuple[int, int] | None, key: str) -> int | None:
    if span is None:
        return None
    lines = text.splitlines()
    key_re = re.compile(rf"^\s*[\"']?{re.escape(key)}[\"']?\s*=")
    for number in range(span[0], span[1] + 1):
        if number - 1 < len(lines) and key_re.match(lines[number - 1]):
            return number
    return span[0]


def _check_host(entry: object) -> str | None:
    """The normalised host entry, or ``None`` if it is not a host name."""
    if not isinstance(entry, str):
        return None
    host = entry.strip().lower().rstrip(".")
    if not host or any(c in host for c in "/@?# \t"):
        return None
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if ":" in host:
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            return None
    return host


@dataclass(frozen=True)
class PermissionsFile:
    """What one permissions file holds."""

    path: str
    rules: tuple[Rule, ...]
    fetch_hosts: tuple[str, ...] | None  # None: the file has no ``fetch_hosts`` key


def load_file(
    path: str | Path,
    *,
    known_tools: Collection[str] | None = None,
) -> PermissionsFile:
    """Read and validate one permissions file (TOML). :class:`PermissionsError` if invalid.

    ``known_tools`` (default: the harness's tools) are the names ``tool =`` may use.
    """
    name = str(path)
    if known_tools is None:
        known_tools = TOOLS.keys()
    try:
        raw = Path(path).read_bytes()
    except OSError as exc:
        raise PermissionsError(name, f"cannot read the file ({exc.strerror or 'error'})") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise PermissionsError(name, "the file is not UTF-8 text") from None
    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        detail = str(exc)
        found = _TOML_LINE.search(detail)
        line = int(found.group(1)) if found else None
        if found:
            detail = detail[: found.start()].rstrip(" (") + f" (column {found.group(2)})"
        raise PermissionsError(name, f"invalid TOML: {detail}", line=line) from None

    for key in document:
        if key not in _FILE_KEYS:
            raise PermissionsError(
                name, f"unknown key {key!r} (allowed: {', '.join(_FILE_KEYS)})", field=key
            )

    fetch_hosts: tuple[str, ...] | None = None
    if "fetch_hosts" in document:
        entries = document["fetch_hosts"]
        if not isinstance(entries, list):
            raise PermissionsError(name, "must be a list of host names", field="fetch_hosts")
        hosts: list[str] = []
        for i, entry in enumerate(entries):
            host = _check_host(entry)
            if host is None:
                raise PermissionsError(
                    name,
                    "must be a host name (no scheme, port or path), e.g. 'localhost'",
                    field=f"fetch_hosts[{i}]",
                )
            hosts.append(host)
        fetch_hosts = tuple(hosts)

    tables = document.get("rules", [])
    if not isinstance(tables, list):
        raise PermissionsError(name, "must be an array of tables ([[rules]])", field="rules")
    spans = _rule_lines(text, len(tables))
    rules: list[Rule] = []
    for index, table in enumerate(tables):
        span = spans[index] if spans else None
        start = span[0] if span else None
        if not isinstance(table, dict):
            raise PermissionsError(name, "each rule must be a table", index=index, line=start)
        rules.append(_load_rule(name, index, table, span, text, known_tools))
    return PermissionsFile(path=name, rules=tuple(rules), fetch_hosts=fetch_hosts)


def _load_rule(
    name: str,
    index: int,
    table: Mapping[str, Any],
    span: tuple[int, int] | None,
    text: str,
    known_tools: Collection[str],
) -> Rule:
    def error(key: str, reason: str) -> PermissionsError:
        return PermissionsError(
            name, reason, index=index, line=_key_line(text, span, key), field=key
        )

    for key in table:
        if key not in _RULE_KEYS:
            raise error(key, f"unknown key (allowed: {', '.join(_RULE_KEYS)})")
    if "decision" not in table:
        raise PermissionsError(
            name,
            "required (allow, ask or deny)",
            index=index,
            line=span[0] if span else None,
            field="decision",
        )
    for key in _RULE_KEYS:
        if key in table and not isinstance(table[key], str):
            raise error(key, "must be a string")
    tool = table.get("tool")
    if tool is not None and tool not in known_tools and not tool.startswith(TOOL_PREFIX):
        raise error("tool", f"unknown tool {tool!r} (known: {', '.join(sorted(known_tools))})")
    try:
        return Rule(
            decision=table["decision"],
            tool=tool,
            kind=table.get("kind"),
            pattern=table.get("pattern"),
            glob=table.get("glob"),
            reason=table.get("reason"),
            source=f"{name}:rules[{index}]",
        )
    except _RuleProblem as problem:
        raise error(problem.field, problem.reason) from None


def load_rules(path: str | Path) -> list[Rule]:
    """The rules of one permissions file (see :func:`load_file`)."""
    return list(load_file(path).rules)


# -- the permissions -----------------------------------------------------------------


def _host_matches(host: str, entries: Iterable[str]) -> bool:
    for entry in entries:
        if entry.startswith("*."):
            if host.endswith(entry[1:]) and host != entry[2:]:
                return True
        elif host == entry:
            return True
    return False


class Permissions:
    """The host's rules, managed rules, mode and fetch hosts (see the module docstring)."""

    def __init__(
        self,
        rules: Sequence[Rule] = (),
        managed: Sequence[Rule] = (),
        mode: Mode = "default",
        fetch_hosts: Sequence[str] = (),
        *,
        managed_fetch_hosts: Sequence[str] | None = None,
    ) -> None:
        if mode not in MODES:
            raise ValueError(f"unknown mode {mode!r} (modes: {', '.join(MODES)})")
        self.rules: tuple[Rule, ...] = tuple(rules)
        self.managed: tuple[Rule, ...] = tuple(managed)
        self.mode: Mode = mode
        self._search_globs = any(
            r.glob is not None and r.decision != "allow" for r in (*self.rules, *self.managed)
        )
        self.fetch_hosts: tuple[str, ...] = tuple(_normalise_hosts(fetch_hosts))
        self.managed_fetch_hosts: tuple[str, ...] | None = (
            None if managed_fetch_hosts is None else tuple(_normalise_hosts(managed_fetch_hosts))
        )

    @classmethod
    def from_files(
        cls,
        path: str | Path | None = None,
        managed_path: str | Path | None = None,
        mode: Mode = "default",
    ) -> Permissions:
        """Load the user file and the managed file (either may be absent)."""
        user = load_file(path) if path is not None else None
        managed = load_file(managed_path) if managed_path is not None else None
        return cls(
            rules=user.rules if user else (),
            managed=managed.rules if managed else (),
            mode=mode,
            fetch_hosts=(user.fetch_hosts or ()) if user else (),
            managed_fetch_hosts=managed.fetch_hosts if managed else None,
        )

    def managed_decision(self, tool: Tool, inp: BaseModel) -> HostDecision | None:
        """The strongest matching managed rule, if any."""
        return self._decide(self.managed, "managed", tool, inp)

    def rule_decision(self, tool: Tool, inp: BaseModel) -> HostDecision | None:
        """The strongest matching user rule (deny > ask > allow), if any."""
        return self._decide(self.rules, "rule", tool, inp)

    def mode_decision(self, tool: Tool, inp: BaseModel, sandbox: Sandbox) -> HostDecision:
        """The mode's default for this call; ``deny`` for anything the sandbox refuses."""
        try:
            sandbox.check(tool, inp)
        except SandboxViolation as violation:
            return HostDecision("deny", "mode", None, violation.reason)
        mode, kind = self.mode, tool.kind
        decision: Decision
        if kind in _READ_KINDS:
            decision, why = "allow", "reads in the workspace are allowed"
        elif kind in _EDIT_KINDS and mode == "accept-edits":
            decision, why = "allow", "writes and edits in the workspace are allowed"
        elif mode == "read-only":
            decision, why = "deny", f"{kind} is denied"
        else:
            decision, why = "ask", f"{kind} needs approval"
        return HostDecision(decision, "mode", None, f"mode {mode}: {why}")

    def hidden_from_search(self, pattern: str, path: str) -> str | None:
        """Why a ``search`` for ``pattern`` must skip the file ``path``, or ``None``.

        Each file a search reads is judged as a ``search`` of that file alone: the
        strongest managed rule if it is ``deny`` or ``ask``, else the strongest user
        rule if it is ``deny`` or ``ask``, hides the file (a prompt per file is not
        offered: an ``ask`` hides it too). ``path`` is the file as the search shows
        it (relative to the first root, or absolute). Only rules with a ``glob`` can
        tell one file from another, so with none this returns ``None`` at once.
        """
        if not self._search_globs:
            return None
        tool = TOOLS["search"]
        inp = SearchInput.model_construct(pattern=pattern, path=path)
        for rules in (self.managed, self.rules):
            rule = strongest(rules, tool, inp)
            if rule is not None and rule.decision != "allow":
                return rule.reason or f"{rule.decision} by {rule.source}"
        return None

    def fetch_allowed(self, host: str) -> bool:
        """Whether ``fetch`` may reach ``host`` (user list, within the managed bound)."""
        normal = _check_host(host)
        if normal is None or not _host_matches(normal, self.fetch_hosts):
            return False
        return self.managed_fetch_hosts is None or _host_matches(normal, self.managed_fetch_hosts)

    @staticmethod
    def _decide(
        rules: Sequence[Rule],
        source: Literal["managed", "rule"],
        tool: Tool,
        inp: BaseModel,
    ) -> HostDecision | None:
        rule = strongest(rules, tool, inp)
        if rule is None:
            return None
        reason = rule.reason or f"{rule.decision} by {rule.source}"
        return HostDecision(rule.decision, source, rule, reason)


def _normalise_hosts(hosts: Iterable[str]) -> list[str]:
    normal: list[str] = []
    for entry in hosts:
        host = _check_host(entry)
        if host is None:
            raise ValueError("fetch hosts must be host names (no scheme, port or path)")
        normal.append(host)
    return normal

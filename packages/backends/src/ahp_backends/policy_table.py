"""The test table of ``ahp-backend policy test``: its format and how it is read.

Owns :data:`TABLE_FORMAT` (the one description of the format: ``--help`` prints it,
the README points to it) and :func:`parse_table`, which reads a table with
:mod:`ahp_backends.toml_lines` (so every error names the file and line) and completes
each partial event with the protocol's own code: :func:`ahp_protocol.cli.complete_event`
(``id``, ``time``, ``source``, ``harness``, as ``ahp-protocol send`` does), then the
harness-facing API (:mod:`ahp_protocol.client.hooks`: the session envelope; a tool
call's ``call.id``, ``path`` and ``tool.origin``), checked against the wire models
before any backend starts. Running a table is :mod:`ahp_backends.policy_tests`.
"""

from __future__ import annotations

import re
import uuid
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal

from ahp_backends.toml_lines import ConfigError, Locator, read_toml

__all__ = ["BACKENDS", "TABLE_FORMAT", "Case", "Expectation", "Table", "parse_table"]

BACKENDS: Final = {"policy": "policy", "denylist": "denylist"}
"""Table key -> the ``ahp-backend`` command that serves that rules file (``--rules FILE``)."""
EXPECTATIONS: Final = ("none", "deny", "ask", "allow", "message")
TOP_KEYS: Final = ("policy", "denylist", "advertise", "cwd", "events", "case")
CASE_KEYS: Final = ("name", "event", "expect", "code", "reason", "reason_contains", "messages")
DEFAULT_ADVERTISE: Final = ("deny", "message")
DEFAULT_CWD: Final = "/repo"

TABLE_FORMAT: Final = """\
test table (TOML): which rules file to run, then one [[case]] table per example event.
Top-level keys:
  policy      a CEL policy file, served by 'ahp-backend policy --rules FILE'
  denylist    or a deny-list rules file, 'ahp-backend denylist --rules FILE'
              (exactly one of the two; a relative path is relative to the table)
  advertise   effects the simulated harness advertises (default ["deny", "message"]);
              a rule whose action is not advertised has no effect, as in production
  cwd         session.cwd of every case's event (default "/repo")
  events      register these event types explicitly, e.g. ["tool.before",
              "tool.permission.request"]; without it the backend's own
              hooks/configuration decides, as when a registration omits subscriptions
Each [[case]]:
  name        (required) what the case shows, e.g. "force push is denied"
  event       (required) a partial event: at least 'type'; 'id', 'time', 'source',
              'harness' and 'session' are filled where missing, and for a tool
              event 'call', 'path' ("native") and tool.origin ("native"); the
              result must be a valid event (checked before anything runs)
  expect      (required) the settled outcome: none (no effect at all), deny, ask,
              allow, or message (no permission effect, at least one message)
  code        the deny code, exact (only with expect = "deny")
  reason      the deny reason, exact; or reason_contains = "text" (only with deny)
  messages    every message, exact and in order (expect = "none" means none already)
A case fails when the outcome differs, or when the backend failed to answer it
(deadline, malformed answer, unadvertised effect: the failure is shown).

example:
  policy = "policy.toml"

  [[case]]
  name = "force push is denied"
  event = { type = "tool.before", tool = { name = "Bash", kind = "shell", \
input = { command = "git push -f" } } }
  expect = "deny"
  code = "com.example.policy.force-push"

  [[case]]
  name = "ls is fine"
  event = { type = "tool.before", tool = { name = "Bash", kind = "shell", \
input = { command = "ls" } } }
  expect = "none"
"""
"""The test-table format, the one place it is written down (``--help`` prints it)."""

Expectation = Literal["none", "deny", "ask", "allow", "message"]


@dataclass(frozen=True, slots=True)
class Case:
    """One row: an event (completed and checked) and what the policy should settle."""

    index: int
    name: str
    line: int | None
    event: dict[str, Any]
    expect: Expectation
    code: str | None = None
    reason: str | None = None
    reason_contains: str | None = None
    messages: tuple[str, ...] | None = None
    notes: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Table:
    """A parsed table: the rules file, how to serve it, and its cases."""

    path: str
    kind: str  # a key of BACKENDS
    rules: Path
    rules_line: int | None
    advertise: tuple[str, ...]
    events: tuple[str, ...] | None
    cases: tuple[Case, ...]
    source: str

    def where(self, line: int | None) -> str:
        return self.path if line is None else f"{self.path}:{line}"


def _top_line(text: str, key: str) -> int | None:
    """The line of a top-level ``key = ...`` (before the first table header), if any."""
    pattern = re.compile(rf"""^\s*(?:{re.escape(key)}|"{re.escape(key)}"|'{re.escape(key)}')\s*=""")
    for number, raw in enumerate(text.splitlines(), start=1):
        if raw.lstrip().startswith("["):
            return None
        if pattern.match(raw):
            return number
    return None


def _strings(value: Any) -> list[str] | None:
    if isinstance(value, list) and all(isinstance(v, str) and v for v in value):
        return list(value)
    return None


def parse_table(path: str, *, source: str | None = None) -> Table:
    """Read and check a table, completing and validating every case's event.

    :class:`~ahp_backends.toml_lines.ConfigError` (``FILE:LINE: where: reason``) when the
    table cannot be used; nothing is started.
    """
    text, document = read_toml(path)

    def top_error(key: str, reason: str) -> ConfigError:
        return ConfigError(path, reason, line=_top_line(text, key), where=key)

    for key in document:
        if key not in TOP_KEYS:
            raise top_error(key, f"unknown top-level key {key!r} (known: {', '.join(TOP_KEYS)})")
    given = [k for k in BACKENDS if k in document]
    if len(given) != 1:
        both = "give only one of" if given else "give one of"
        raise ConfigError(
            path, f"{both} 'policy' (a CEL policy file) or 'denylist' (deny-list rules)"
        )
    kind = given[0]
    rules_name = document[kind]
    if not isinstance(rules_name, str) or not rules_name.strip():
        raise top_error(kind, "must be the path of a rules file (a non-empty string)")
    rules = Path(path).resolve().parent / rules_name
    if not rules.is_file():
        raise top_error(kind, f"no rules file at {rules}")

    advertise = tuple(DEFAULT_ADVERTISE)
    if "advertise" in document:
        listed = _strings(document["advertise"])
        if listed is None:
            raise top_error("advertise", 'must be a list of effect names, e.g. ["deny", "ask"]')
        advertise = tuple(listed)
    cwd = document.get("cwd", DEFAULT_CWD)
    if not isinstance(cwd, str) or not cwd:
        raise top_error("cwd", "must be a non-empty string (the session's working folder)")
    events: tuple[str, ...] | None = None
    if "events" in document:
        from ahp_protocol.wire import catalogue

        listed = _strings(document["events"])
        if not listed:
            raise top_error("events", 'must be a non-empty list, e.g. ["tool.before"]')
        for name in listed:
            if not catalogue.is_interceptable(name):
                raise top_error(
                    "events",
                    f"{name!r} is not an interceptable event "
                    f"(interceptable: {', '.join(catalogue.INTERCEPTABLE)})",
                )
        events = tuple(listed)

    cases = document.get("case")
    if not isinstance(cases, list) or not cases:
        raise ConfigError(path, "no [[case]] tables (a table needs at least one case)")
    source = source or f"urn:uuid:{uuid.uuid4()}"
    loc = Locator(path, text, "case")
    from ahp_protocol.client import DeclarationError

    try:
        session = _session(advertise, cwd, source)
    except DeclarationError as exc:  # an effect name the draft does not know
        detail = str(exc).replace("capabilities['tool.before']", "advertise")
        raise top_error("advertise", detail) from None
    parsed = tuple(_case(loc, i, table, session, source) for i, table in enumerate(cases))
    seen: dict[str, int] = {}
    ids: dict[str, int] = {}
    for case in parsed:
        if case.name in seen:
            raise loc.error(case.index, f"the same name as case[{seen[case.name]}]", "name")
        seen[case.name] = case.index
        event_id = str(case.event["id"])
        if event_id in ids:
            # a backend answers a repeated (source, id) as it answered the first
            raise loc.error(
                case.index,
                f"the same event id as case[{ids[event_id]}]: the backend would answer it as "
                "a duplicate delivery of that event",
                "event",
            )
        ids[event_id] = case.index
    return Table(path, kind, rules, _top_line(text, kind), advertise, events, parsed, source)


def _session(advertise: Sequence[str], cwd: str, source: str) -> Any:
    """The harness-facing API's session: it builds the envelope of every case's event.

    Raises :class:`~ahp_protocol.client.DeclarationError` for an effect name the draft
    does not know.
    """
    from ahp_protocol.client.hooks import Hooks

    hooks = Hooks(
        None,
        harness={"name": "ahp-backend-policy-test", "version": "0"},
        capabilities={"tool.before": {"effects": list(advertise)}},
        source=source,
    )
    return hooks.session(cwd=cwd)


def _complete(partial: Mapping[str, Any], session: Any, source: str) -> dict[str, Any]:
    """A case's event as a harness would send it; the table's fields always win."""
    from ahp_protocol.cli import complete_event

    event = complete_event(partial, source=source)  # id, time, source, harness: as send does
    event_type = str(partial.get("type"))
    event.setdefault("session", session.event(event_type)["session"])
    tool = partial.get("tool")
    if isinstance(tool, Mapping) and isinstance(tool.get("name"), str):
        options = {k: tool[k] for k in ("origin",) if isinstance(tool.get(k), str)}
        if isinstance(partial.get("path"), str):
            options["path"] = partial["path"]
        kind = tool.get("kind") if isinstance(tool.get("kind"), str) else None
        call = session.tool_call(tool["name"], tool.get("input"), kind=kind, **options)
        built = call.event(event_type)
        event.setdefault("call", built["call"])
        event.setdefault("path", built["path"])
        event["tool"] = {**built["tool"], **tool}
    return event


def _case(loc: Locator, i: int, value: Any, session: Any, source: str) -> Case:
    from ahp_protocol.client.hooks import UnknownToolKind
    from ahp_protocol.wire.errors import WireError, WireErrors
    from ahp_protocol.wire.events import parse_event

    table = loc.table(i, value, CASE_KEYS)
    for key in ("name", "event", "expect"):
        if key not in table:
            raise loc.error(i, f"missing required key {key!r}")
    name = loc.text(i, "name", table["name"])
    expect = table["expect"]
    if expect not in EXPECTATIONS:
        raise loc.error(i, f"must be one of {', '.join(EXPECTATIONS)}", "expect")
    for key in ("code", "reason", "reason_contains"):
        if key in table:
            loc.text(i, key, table[key])
            if expect != "deny":
                raise loc.error(i, 'applies only to expect = "deny"', key)
    if "reason" in table and "reason_contains" in table:
        raise loc.error(i, "give 'reason' or 'reason_contains', not both", "reason_contains")
    messages: tuple[str, ...] | None = None
    if "messages" in table:
        listed = table["messages"]
        if not isinstance(listed, list) or not all(isinstance(m, str) for m in listed):
            raise loc.error(i, "must be a list of strings", "messages")
        messages = tuple(listed)
        if expect == "message" and not messages:
            raise loc.error(i, 'expect = "message" needs at least one message', "messages")
        if expect == "none" and messages:
            raise loc.error(
                i, 'expect = "none" is no effect at all: use expect = "message"', "messages"
            )
    partial = table["event"]
    if not isinstance(partial, dict):
        raise loc.error(i, "must be a table (a partial event)", "event")
    if "type" not in partial:
        raise loc.error(i, "needs a 'type', e.g. \"tool.before\"", "event")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", UnknownToolKind)
        event = _complete(partial, session, source)
    notes = tuple(str(w.message) for w in caught if issubclass(w.category, UnknownToolKind))
    try:
        parse_event(event)
    except (WireError, WireErrors) as exc:
        first = exc.first if isinstance(exc, WireErrors) else exc
        where = "" if first.path == "$" else f".{first.path}"
        line = loc.error(i, "", "event").line
        raise ConfigError(
            loc.path,
            f"not a valid event once completed: {first.reason}",
            line=line,
            where=f"case[{i}].event{where}",
        ) from None
    from ahp_protocol.wire import catalogue

    if not catalogue.is_interceptable(str(event["type"])):
        raise loc.error(
            i,
            f"{event['type']} events are only observed: a policy decides interceptable "
            "events (tool.before, tool.permission.request, ...)",
            "event",
        )
    return Case(
        index=i,
        name=name,
        line=loc.error(i, "").line,
        event=event,
        expect=expect,
        code=table.get("code"),
        reason=table.get("reason"),
        reason_contains=table.get("reason_contains"),
        messages=messages,
        notes=notes,
    )

"""``ahp-backend policy --rules FILE``: decide tool calls by CEL rules over the event.

Owns the policy file format, :data:`RULES_FORMAT` (the one description of it: ``--help``
prints it; the README's policy section points to it), parsed and checked in full
before anything is served (every ``when`` is compiled and type-checked; an error
names the file, the line, the rule and what is wrong: the file handling is
:mod:`ahp_backends.toml_lines`, the CEL side :mod:`ahp_backends.policy_cel`); the
decision for one ``tool.before`` or ``tool.permission.request`` event (deny over ask
over allow, each the first matching rule in file order; messages from every matching
``message`` rule); and serving it, reloaded while serving (a broken edit keeps the
last good policy: :mod:`ahp_backends.rules_file`).

``ask`` and ``allow`` are sent only where the request advertises them, like every
effect: an action the request does not accept is skipped, with one note on stderr per
rule. No effect is not permission (the harness's own rules still decide). A rule
whose expression fails at run time (a field it reads is absent, a value of another
type, CEL's comprehension budget spent) is a failure, not a "no": for a ``deny`` or
``ask`` rule (``on_error = "fail"``, their default) the request is answered with a
JSON-RPC error (the server kit's fixed -32004, no exception text) unless a deny
matched anyway, so the subscription's failure policy decides; an ``allow`` or
``message`` rule, or one with ``on_error = "skip"``, does not match. One note on
stderr per rule either way. Never echoes a value of the event in diagnostics. Answers
are remembered by ``(source, event.id)`` (:class:`~ahp_backends.serving.Replies`; a
failure is not remembered). ``ahp-backend policy test ...`` is the test-table runner
(:mod:`ahp_backends.policy_tests`).
"""

from __future__ import annotations

import argparse
import sys
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import IO, TYPE_CHECKING, Any, Final

from ahp_protocol.wire.names import is_reverse_dns

from ahp_backends.denylist import DEFAULT_SUBSCRIPTIONS, EVENTS
from ahp_backends.policy_cel import (
    ITERATION_BUDGET,
    MATCHES_NOTE,
    CelError,
    Compiled,
    Compiler,
    cel_value,
    describe_error,
    describe_exception,
)
from ahp_backends.policy_fields import unknown_read
from ahp_backends.rules_file import RulesFile
from ahp_backends.serving import SERVED_TIMEOUT_MS, Replies, add_transport_arguments, fail, serve
from ahp_backends.toml_lines import ConfigError, Locator, only_key, read_toml

if TYPE_CHECKING:
    from ahp_protocol.server import Backend, InterceptRequest

__all__ = [
    "ACTIONS",
    "NAME",
    "ON_ERROR",
    "RULES_FORMAT",
    "Policy",
    "PolicyServer",
    "Rule",
    "RuleFailed",
    "build_backend",
    "main",
    "parse_policy",
]

NAME: Final = "com.example.ahp.policy"
ACTIONS: Final = ("deny", "message", "ask", "allow")
RULE_KEYS: Final = ("name", "when", "action", "reason", "code", "message", "events", "on_error")
ON_ERROR: Final = ("fail", "skip")
_DEFAULT_ON_ERROR: Final = {"deny": "fail", "ask": "fail", "message": "skip", "allow": "skip"}
"""A rule that cannot be evaluated: a failure where it could have refused or stopped the
call (deny, ask), a non-match where a non-match is the safe way to fail (allow, message)."""
_EVERY_RULE: Final = ("name", "when", "action", "events", "on_error")
_ALLOWED: Final[dict[str, frozenset[str]]] = {
    # The keys each action takes besides those of _EVERY_RULE.
    "deny": frozenset({"reason", "code", "message"}),
    "message": frozenset({"message"}),
    "ask": frozenset({"reason"}),
    "allow": frozenset(),
}

RULES_FORMAT: Final = f"""\
policy file (TOML): one [[rule]] table per rule, each a CEL expression over the
event as delivered (event.tool.kind, event.tool.input.command, event.session.cwd,
...) and an action. Keys:
  name     (required) unique in the file; notes and errors name it
  when     (required) a CEL expression giving bool, compiled and type-checked at load;
           a field the rule's events do not have (event.tool.knid) is refused, naming
           the closest real one (the fields are the draft's event models; tool.input,
           native and extensions take any key)
  action   (required) deny | message | ask | allow
  reason   deny: (required) the deny reason; ask: optional, sent as a message
  code     deny: optional reverse-DNS deny code, e.g. com.example.policy.force-push
  message  message: (required) the text; deny: optional text sent alongside
  events   where the rule applies: tool.before, tool.permission.request (default both)
  on_error what it means when 'when' cannot be evaluated for an event (a field it
           reads is absent, a value of another type, the iteration budget below):
           "fail" (default for deny and ask): the backend answers a JSON-RPC error,
           so the subscription's failure policy decides (fail-closed: the call is
           denied; the harness records a failure), unless a deny matched anyway;
           "skip" (default for message and allow): the rule does not match
Decision: the first matching deny (file order) wins; else the first matching ask;
else the first matching allow; every matching message rule adds its message (the
deny's own message too). An action is sent only when the request advertises it
(capabilities.effects): otherwise it is skipped, with one note on stderr per rule.
No effect is not permission: the harness's own rules still decide.
A rule that cannot be evaluated gets one note on stderr (naming no event value) and
is handled by its on_error. Guard a field that may be absent with has():
  has(event.tool.input.command) && event.tool.input.command.matches("...")
Limits: a rule whose comprehensions (exists, all, map, filter) reach {ITERATION_BUDGET:,}
iterations in one run, all together, fails (cel-cpp's budget: a list of 10,000 items
is too long for exists); a string holding a lone surrogate (JSON's "\\ud800" escape)
reads with U+FFFD in its place.
call, beside event: a tool call's command and paths, read alike for every harness:
  call.command  tool.input.command as one string (a list of strings joined by
                spaces), "" when there is none: no has() needed
  call.paths    every path-like input (the deny-list's: path, file_path, filePath,
                notebook_path, ...), in the kernel's lexical form, also resolved
                against session.cwd and relative to it:
                call.paths.exists(p, glob(p, ".env"))
Helpers beside CEL's standard library (size, contains, startsWith, endsWith, in,
exists, all, has, ...):
  glob(path, pattern)  path glob: '*' and '?' stay within a directory, '**' crosses
                       directories; a pattern without '/' matches the file name;
                       the path is matched in the kernel's lexical form
                       ('//etc/./x/' and '/tmp/../etc/x' are /etc/x; 'a/../b'
                       is 'b'); a relative path stays relative; symlinks are
                       not resolved
  glob(path, pattern, cwd)  the same, a relative path joined to cwd first when cwd
                       is absolute: glob(p, "/etc/**", event.session.cwd)
  {MATCHES_NOTE}
The file is re-read when it changes; a broken edit keeps the last good policy (and
says so on stderr). With --once each process reads the file afresh, so a broken
file fails every event (the subscription's failure policy decides).

example:
  [[rule]]
  name = "no-force-push"
  when = 'event.tool.kind == "shell" && event.tool.input.command.matches("git push.*(-f|--force)")'
  action = "deny"
  reason = "Force pushes rewrite shared history"
  code = "com.example.policy.force-push"
"""
"""The policy format, the one place it is written down (``--help`` prints it)."""


# --------------------------------------------------------------------------- rules


@dataclass(frozen=True, slots=True)
class Rule:
    """One rule as loaded."""

    index: int
    name: str
    action: str
    when: Compiled
    reason: str | None = None
    code: str | None = None
    message: str | None = None
    events: frozenset[str] = frozenset(EVENTS)
    on_error: str = "fail"  # one of ON_ERROR


class RuleFailed(Exception):
    """A request no answer can be given to: a rule with ``on_error = "fail"`` could not
    be evaluated. The server kit answers it with its fixed -32004 and logs only this
    type's name; the policy's own note names the rule and the kind of failure."""


@dataclass(frozen=True, slots=True)
class _Draft:
    """A rule whose structure is checked, its expression scanned but not yet compiled."""

    fields: dict[str, Any]
    when: str
    scanned: tuple[str, list[str], str | None]


def _when(loc: Locator, lines: list[str], i: int, draft: _Draft, compiler: Compiler) -> Compiled:
    name = draft.fields["name"]
    try:
        compiled = compiler.check(draft.scanned)
        events = [e for e in EVENTS if e in draft.fields["events"]]
        unknown = unknown_read(draft.when, events)
        if unknown is not None:
            raise CelError(unknown.describe(events))
        return compiled
    except CelError as exc:
        error = loc.error(i, f"rule {name!r}: {exc.reason}", "when")
        if error.line is not None and exc.line > 1 and error.line <= len(lines):
            # A multi-line string: CEL counts lines from the string's first one, which
            # is the key's line unless the opening quotes end it (TOML drops that newline).
            opening = lines[error.line - 1].rstrip()
            error.line += exc.line - (0 if opening.endswith(("'''", '"""')) else 1)
        raise error from None


def _events(loc: Locator, i: int, value: Any) -> frozenset[str]:
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not items or not all(isinstance(v, str) for v in items):
        raise loc.error(i, "must be a string or a non-empty list of strings", "events")
    for item in items:
        if item not in EVENTS:
            raise loc.error(i, "must be one of " + ", ".join(EVENTS), "events")
    return frozenset(items)


def _draft(loc: Locator, compiler: Compiler, i: int, table: Any, names: dict[str, int]) -> _Draft:
    table = loc.table(i, table, RULE_KEYS)
    for key in ("name", "when", "action"):
        if key not in table:
            raise loc.error(i, f"{key!r} is required")
    name = loc.text(i, "name", table["name"])
    if name in names:
        raise loc.error(i, f"the name is already used by rule[{names[name]}]", "name")
    names[name] = i
    action = table["action"]
    if action not in ACTIONS:
        raise loc.error(i, "must be one of " + ", ".join(ACTIONS), "action")
    for key in table:
        if key not in _EVERY_RULE and key not in _ALLOWED[action]:
            takes = sorted(_ALLOWED[action])
            also = f" (a {action} rule takes: {', '.join(takes)})" if takes else ""
            raise loc.error(i, f"does not apply to a {action} rule{also}", key)
    if action == "deny" and "reason" not in table:
        raise loc.error(i, "'reason' is required for a deny rule (the deny reason)")
    if action == "message" and "message" not in table:
        raise loc.error(i, "'message' is required for a message rule (its text)")
    code = table.get("code")
    if code is not None and not is_reverse_dns(code):
        raise loc.error(i, "must be a reverse-DNS id like com.example.policy.force-push", "code")
    when = table["when"]
    if not isinstance(when, str) or not when.strip():
        raise loc.error(i, "must be a non-empty string (a CEL expression)", "when")
    on_error = table.get("on_error", _DEFAULT_ON_ERROR[action])
    if on_error not in ON_ERROR:
        raise loc.error(i, 'must be "fail" or "skip"', "on_error")
    fields = {
        "index": i,
        "name": name,
        "action": action,
        "reason": loc.text(i, "reason", table["reason"]) if "reason" in table else None,
        "code": code,
        "message": loc.text(i, "message", table["message"]) if "message" in table else None,
        "events": _events(loc, i, table["events"]) if "events" in table else frozenset(EVENTS),
        "on_error": on_error,
    }
    return _Draft(fields, when, compiler.scan(when))


@dataclass(frozen=True)
class Policy:
    """The rules of one version of the file, in order, with one program per event type."""

    rules: tuple[Rule, ...]
    compiler: Compiler = field(default_factory=Compiler, repr=False)
    _programs: dict[str, tuple[tuple[Rule, ...], Any]] = field(default_factory=dict, repr=False)

    def program(self, event_type: str) -> tuple[tuple[Rule, ...], Any]:
        """The rules that apply at ``event_type`` and their combined program (built once)."""
        found = self._programs.get(event_type)
        if found is None:
            rules = tuple(r for r in self.rules if event_type in r.events)
            program = self.compiler.compile_all([r.when for r in rules])
            found = self._programs[event_type] = (rules, program)
        return found

    def evaluate(
        self, event_type: str, event: dict[str, Any]
    ) -> tuple[list[Rule], list[tuple[Rule, str]]]:
        """The rules that match ``event`` and those that could not be evaluated (with why,
        naming no event value), each in file order: one combined run, or rule by rule
        when some rule fails at run time."""
        rules, program = self.program(event_type)
        if program is None:
            return [], []
        data = self.compiler.bindings(event)
        results = _run(program, data)
        if not isinstance(results, list):
            # Some rule failed, or the runtime could not take the event (a lone surrogate
            # or an int beyond int64 anywhere in it would fail every rule): once more with
            # the event made takeable, then rule by rule (a rule alone also has the whole
            # iteration budget, which the combined program's rules share).
            data = self.compiler.bindings(cel_value(event))
            results = _run(program, data)
        if isinstance(results, list):
            return [rule for rule, hit in zip(rules, results, strict=True) if hit is True], []
        matched: list[Rule] = []
        failed: list[tuple[Rule, str]] = []
        for rule in rules:
            try:
                value = rule.when.program.eval(data=data).plain_value()
            except Exception as exc:  # the runtime refusing the run, e.g. its budget
                reason = describe_exception(exc)
            else:
                if value is True:
                    matched.append(rule)
                    continue
                if value is False:
                    continue
                reason = describe_error(value)
            failed.append((rule, reason))
        return matched, failed

    def explain(self, event_type: str, event: dict[str, Any], advertised: Sequence[str]) -> str:
        """Why ``event`` gets no decision from this policy, in one line (for a person
        reading a test report; names rules, never a value of the event)."""
        rules, _ = self.program(event_type)
        if not rules:
            return f"no rule applies at {event_type} (see each rule's events)"
        matched, failed = self.evaluate(event_type, event)
        parts: list[str] = []
        for rule, reason in failed:
            result = "did not match" if rule.on_error == "skip" else "failed the request"
            parts.append(f"rule {rule.name!r} could not be evaluated ({reason}), so it {result}")
        for rule in matched:
            if rule.action not in advertised:
                parts.append(f"rule {rule.name!r} matched, but {rule.action} is not advertised")
        deciding = [r for r in matched if r.action != "message" and r.action in advertised]
        if not parts and not deciding:
            return f"no rule matched ({_count_rules(len(rules))} at {event_type})"
        return "; ".join(parts) if parts else "a rule matched"


def _count_rules(count: int) -> str:
    return "1 rule applies" if count == 1 else f"{count} rules apply"


def parse_policy(path: str, data: bytes | None = None) -> Policy:
    """Read and check a policy file (``data``: its bytes, if already read)."""
    text, document = read_toml(path, data)
    only_key(path, document, "rule")
    if "rule" not in document:
        raise ConfigError(path, "no [[rule]] tables (write 'rule = []' for an empty policy)")
    rules = document["rule"]
    if not isinstance(rules, list):
        raise ConfigError(path, "'rule' must be an array of tables ([[rule]])")
    loc = Locator(path, text, "rule")
    names: dict[str, int] = {}
    compiler = Compiler()
    # Every rule's structure first (which also fixes the program's variables), then
    # every expression, in file order.
    drafts = [_draft(loc, compiler, i, table, names) for i, table in enumerate(rules)]
    lines = text.splitlines()
    checked = []
    for i, draft in enumerate(drafts):
        compiled = _when(loc, lines, i, draft, compiler)
        checked.append(Rule(when=compiled, **draft.fields))
    # Each event type's combined program is built on its first request: it joins rules
    # already checked, and a --once process needs only one of them.
    return Policy(tuple(checked), compiler)


# --------------------------------------------------------------------------- deciding


def _run(program: Any, data: dict[str, Any]) -> Any:
    """A program's plain result (an error value is a string), ``None`` if it raised."""
    try:
        return program.eval(data=data).plain_value()
    except Exception:  # the runtime refusing the data: treated as a failed run
        return None


class PolicyServer:
    """The serving state: the policy in force, its reload, notes, and remembered answers.

    Thread-safe (HTTP runs handlers in worker threads): one lock covers reload,
    decision, notes and the answer memory.
    """

    def __init__(self, path: str, *, stderr: IO[str] | None = None) -> None:
        self.path = path
        self._stderr = stderr
        self._file = RulesFile(path, parse_policy, count=lambda p: len(p.rules), say=self._say)
        self._noted: set[tuple[str, str]] = set()
        self._lock = threading.Lock()
        self.replies = Replies()

    @property
    def policy(self) -> Policy:
        """The policy in force (the last good version of the file)."""
        return self._file.current

    def _say(self, text: str) -> None:
        stream = self._stderr if self._stderr is not None else sys.stderr
        print(f"ahp-backend policy: {text}", file=stream, flush=True)

    def _note(self, rule: Rule, what: str, text: str) -> None:
        """Say ``text`` once per rule (by name) and kind of note, for this process."""
        key = (rule.name, what)
        if key not in self._noted:
            self._noted.add(key)
            self._say(f"note: rule {rule.name!r} (rule[{rule.index}]) {text}")

    def decide(self, request: InterceptRequest) -> list[Any]:
        """The effects for one request (after a reload check), remembered by ``(source, id)``."""
        with self._lock:
            return self.replies.answer(request.event, lambda: self._decide(request))

    def _matches(self, event_type: str, event: dict[str, Any]) -> tuple[list[Rule], list[Rule]]:
        """The rules that match and the rules that could not be evaluated (each failing
        rule noted once, with what its on_error makes of it)."""
        matched, failed = self._file.refresh().evaluate(event_type, event)
        for rule, reason in failed:
            if rule.on_error == "skip":
                self._note(rule, "error", f"did not match at {event_type}: {reason}")
            else:
                self._note(
                    rule,
                    "failed",
                    f"could not be evaluated at {event_type}: {reason}; the request fails "
                    '(on_error = "fail"), so the subscription\'s failure policy decides',
                )
        return matched, [rule for rule, _ in failed]

    def _decide(self, request: InterceptRequest) -> list[Any]:
        from ahp_protocol.wire.effects import AllowEffect, AskEffect, DenyEffect, MessageEffect

        advertised = request.advertised
        deny: Rule | None = None
        ask: Rule | None = None
        allow: Rule | None = None
        messages: list[str] = []
        matched, failed = self._matches(request.event_type, request.event)
        for rule in matched:
            if rule.action not in advertised:
                self._note(
                    rule,
                    "unadvertised",
                    f"matched, but the request does not accept {rule.action}; skipped",
                )
                continue
            if rule.action == "message":
                assert rule.message is not None
                messages.append(rule.message)
            elif rule.action == "deny" and deny is None:
                deny = rule
                if rule.message is not None:
                    messages.append(rule.message)
            elif rule.action == "ask" and ask is None:
                ask = rule
            elif rule.action == "allow" and allow is None:
                allow = rule
        if deny is None and any(
            rule.on_error == "fail" and rule.action in advertised for rule in failed
        ):
            # It might have denied or asked: a failure, for the failure policy to decide.
            # (A deny that matched anyway stands: fail-closed would deny too, and
            # fail-open must not let through what a rule that did run refused.)
            raise RuleFailed
        effects: list[Any] = []
        if deny is not None:
            assert deny.reason is not None
            effects.append(DenyEffect(reason=deny.reason, code=deny.code))
        elif ask is not None:
            effects.append(AskEffect())
            if ask.reason is not None:
                messages.insert(0, ask.reason)
        elif allow is not None:
            effects.append(AllowEffect())
        if "message" in advertised:
            effects.extend(MessageEffect(text=text) for text in messages)
        return effects


def build_backend(server: PolicyServer) -> Backend:
    """The AHP backend serving ``server`` at tool.before and tool.permission.request."""
    from ahp_protocol.server import Backend

    backend = Backend(NAME, configuration=DEFAULT_SUBSCRIPTIONS)
    for event_type in EVENTS:
        backend.intercept(event_type)(server.decide)
    return backend


# --------------------------------------------------------------------------- command


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ahp-backend policy",
        usage="ahp-backend policy [serve] --rules FILE [--check] [transport options]\n"
        "       ahp-backend policy test TABLE... (run policy test tables; see its --help)",
        description=(
            "Decide tool calls by CEL rules over the event (a TOML policy file). Speaks\n"
            "AHP on stdin/stdout by default (one persistent process). Serves\n"
            f"hooks/configuration (intercept tool.before, fail-closed, {SERVED_TIMEOUT_MS} ms,\n"
            "content metadata), so a registration may omit subscriptions."
        ),
        epilog=RULES_FORMAT,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--rules", required=True, metavar="FILE", help="the policy file (TOML)")
    parser.add_argument(
        "--check", action="store_true", help="check the policy file (every rule), report, exit"
    )
    add_transport_arguments(parser)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    if args_list[:1] == ["serve"]:
        args_list = args_list[1:]
    args = _parser().parse_args(args_list)
    path: str = args.rules
    try:
        server = PolicyServer(path)
    except ConfigError as exc:
        return fail(str(exc))
    except OSError as exc:
        return fail(f"{path}: cannot read the policy file ({exc.strerror or 'I/O error'})")
    if args.check:
        print(f"{path}: {len(server.policy.rules)} rules, valid")
        return 0
    return serve(build_backend(server), args)


if __name__ == "__main__":
    sys.exit(main())

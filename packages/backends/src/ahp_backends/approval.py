"""``ahp-backend approval``: an approval service stub, and the commands that manage its grants.

Owns the "requires approval" patterns, the grant store (``--db``: an SQLite file in
WAL mode with a busy timeout, or a PostgreSQL database shared by any number of
servers; the schema, versioned, is :data:`ahp_backends.approval_store.SCHEMA`, opened through
:mod:`ahp_backends.db`; it survives restarts and is safe under concurrent use by the
servers and the ``grant``/``list``/``revoke`` commands, and no process caches a grant),
and the decision for one ``tool.before`` or ``tool.permission.request`` event:

1. a live grant (not expired, not revoked) whose tool is the call's tool (or ``*``)
   and whose ``--match`` regex matches the call's subject *in full* -> ``allow``
   when the request accepts it (allow only suppresses the harness's ordinary
   prompt; it overrides no deny, ask, policy or sandbox), else no effect;
2. else a requirement whose tool matches and whose regex is *found* in the
   subject -> ``ask`` when the request accepts it (plus a ``message`` saying how to
   pre-approve, when accepted), else ``deny`` with a reason that gives the exact
   ``grant`` command line;
3. else no effect (which is not permission: the harness's own rules decide).

With ``--hold-s S`` (> 0), step 2 first holds the call up to S seconds
(:mod:`ahp_backends.approval_queue`, outside the serving lock): approved -> ``allow``
where advertised (only when the receipt's digest is this call's); denied -> ``deny``
(:data:`DENIED_CODE`, naming who and why); expired -> the answer of step 2, from the
grants as they are then. Grants may be scoped to a session id or a project (cwd).

The subject of a call is its main argument: the first string among the input
fields in :data:`SUBJECT_FIELDS`, else the input as compact JSON (sorted keys).

Never decides on anything but the tool name and the subject; never echoes
exception text; times are UTC, ISO 8601. Answers are remembered by
``(source, event.id)`` in the serving process, so a duplicate delivery to the same
process gets the first answer even if a grant was added in between. That memory is
per process: with ``--workers N`` (or after a restart) a duplicate that reaches
another worker is decided again, from the same requirements and the database, which
every worker shares (each opens its own connections after the fork): the same answer
unless a grant was added, revoked or expired in between.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import re
import sys
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Final

from ahp_backends.approval_store import (
    BUSY_TIMEOUT_MS,
    GRANT_COLUMNS,
    SCHEMA,
    SUBJECT_FIELDS,
    Grant,
    insert_grant,
    iso,
    literal_regex,
    row_grant,
    subject_of,
    utcnow,
)
from ahp_backends.db import DatabaseError, Session, is_url, open_database
from ahp_backends.patterns import Pattern, PatternError, compile_pattern
from ahp_backends.serving import (
    SERVED_TIMEOUT_MS,
    Replies,
    add_transport_arguments,
    database_target,
    fail,
    serve,
)
from ahp_backends.toml_lines import ConfigError, Locator, only_key, read_toml

if TYPE_CHECKING:
    from ahp_protocol.server import Backend, InterceptRequest

    from ahp_backends.approval_queue import Queue, Receipt

__all__ = [
    "DEFAULT_SUBSCRIPTIONS",
    "DENIED_CODE",
    "DENY_CODE",
    "HOLD_MARGIN_MS",
    "NAME",
    "SUBJECT_FIELDS",
    "Approvals",
    "Grant",
    "Requirement",
    "Store",
    "StoreError",
    "build_backend",
    "grant_command",
    "insert_grant",
    "literal_regex",
    "load_requirements",
    "main",
    "parse_duration",
    "parse_requirement",
    "print_receipts",
    "read_receipts",
    "served_subscriptions",
    "subject_of",
]

NAME: Final = "com.example.ahp.approval"
DENY_CODE: Final = "com.example.ahp.approval.required"
DENIED_CODE: Final = "com.example.ahp.approval.denied"  # a person denied the held call
# With --hold-s S, the served deadline is S s plus this: the hold always ends (and the
# answer is sent) inside the request's deadline, start-up and the answer included.
HOLD_MARGIN_MS: Final = 3000
EVENTS: Final = ("tool.before", "tool.permission.request")
SUBCOMMANDS: Final = ("serve", "grant", "list", "revoke", "console")
SUGGESTED_EXPIRY: Final = "1h"
SERVING_POOL_SIZE: Final = 2

DEFAULT_SUBSCRIPTIONS: Final[list[dict[str, Any]]] = [
    {
        # The boundary where ask and allow are both possible (tool.permission.request
        # takes no ask); register that event explicitly to have it checked there too.
        "mode": "intercept",
        "events": ["tool.before"],
        "timeoutMs": SERVED_TIMEOUT_MS,
        # An approval gate that cannot answer must not wave calls through.
        "failurePolicy": "fail-closed",
        # The decision reads the tool's name and input only, never message bodies.
        "content": {"default": "metadata"},
    }
]

REQUIRE_HELP: Final = (
    """\
requires approval (PATTERN for --require, or [[require]] tables in --config):
  TOOL            every call of the tool named TOOL (tool.name, exact; '*' any tool)
  TOOL:REGEX      calls of TOOL whose subject contains a match of REGEX (RE2 syntax)
The subject is the call's main argument: the first string input among
"""
    + ", ".join(SUBJECT_FIELDS)
    + """,
else the whole input as compact JSON (sorted keys).

--config FILE (TOML), one table per pattern:
  [[require]]
  tool = "Bash"                   # required; "*" for any tool
  match = "\\\\bgit\\\\s+push\\\\b"     # optional regex, searched in the subject
  reason = "Pushes change the shared repository."   # optional, quoted in the deny

A call that matches a live grant (same tool or '*', --match regex matching the
WHOLE subject, not expired or revoked) gets allow; else a required call gets ask
when the harness accepts ask, otherwise a deny whose reason gives the exact
'ahp-backend approval grant' command line to approve it.

With --hold-s S (S > 0), such a call is first held up to S seconds for a person to
decide (ahp-backend approval console, from any process sharing DB): approved -> allow
(for this call only, or through a grant for its session or project); denied -> a deny
saying who denied it and why; nobody decided -> the answer above. The served deadline
is then S*1000 + %d ms; a registration giving its own timeoutMs must give at least
that. Over stdio one request is served at a time: a held call stalls the ones behind it.

manage grants (safe to use while servers run; --store is another name for --db):
  ahp-backend approval grant  --db DB --tool NAME --match REGEX [--expires 30m]
  ahp-backend approval list   --db DB [--json] [--all]
  ahp-backend approval list   --db DB --receipts [--json] [--limit N]
  ahp-backend approval revoke --db DB ID [ID ...] | --all

DB is a file path (SQLite, created on first use) or a postgresql://USER@HOST/DBNAME
URL (a shared PostgreSQL database; needs ahp-backends[postgres]). Every process using
the same DB sees the same grants at once. A URL in a deny reason loses its password:
give credentials through PGPASSWORD or ~/.pgpass rather than in the URL.
"""
) % HOLD_MARGIN_MS


def _short(moment: datetime | None) -> str:
    return "never" if moment is None else moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw]?)\s*$")
_UNITS: Final = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def parse_duration(text: str) -> timedelta | None:
    """``30s``, ``90`` (seconds), ``0.5s``, ``30m``, ``2h``, ``7d``, ``1w``; ``never`` -> None."""
    if text.strip().lower() == "never":
        return None
    found = _DURATION.match(text)
    if found is None:
        raise ValueError("expected a duration like 30s, 30m, 2h, 7d, 1w (or 'never')")
    seconds = float(found.group(1)) * _UNITS[found.group(2)]
    if seconds <= 0:
        raise ValueError("a duration must be positive")
    return timedelta(seconds=seconds)


def grant_command(store: str, tool: str, subject: str) -> str:
    """The shell command line that approves calls of ``tool`` with exactly ``subject``."""
    import shlex

    return (
        f"ahp-backend approval grant --db {shlex.quote(store)} --tool {shlex.quote(tool)} "
        f"--match {shlex.quote(literal_regex(subject))} --expires {SUGGESTED_EXPIRY}"
    )


# --------------------------------------------------------------------------- requirements


@dataclass(frozen=True, slots=True)
class Requirement:
    """Calls of ``tool`` (``*``: any) whose subject contains a match of ``pattern``."""

    tool: str
    pattern: Pattern | None
    text: str
    reason: str | None = None

    def matches(self, tool: str, subject: str) -> bool:
        if self.tool != "*" and self.tool != tool:
            return False
        return self.pattern is None or self.pattern.search(subject)


def parse_requirement(text: str) -> Requirement:
    """``TOOL`` or ``TOOL:REGEX``; ``ValueError`` says what is wrong."""
    tool, sep, regex = text.partition(":")
    if not tool.strip():
        raise ValueError("expected TOOL or TOOL:REGEX, e.g. 'Bash:git\\s+push'")
    if sep and not regex:
        raise ValueError("empty REGEX after ':' (write just TOOL to require every call)")
    try:
        pattern = compile_pattern(regex) if sep else None
    except PatternError as exc:
        raise ValueError(f"invalid regex: {exc.reason}") from None
    return Requirement(tool.strip(), pattern, text)


REQUIRE_KEYS: Final = ("tool", "match", "reason")


def load_requirements(path: str) -> list[Requirement]:
    """The ``[[require]]`` tables of a TOML file, validated; :class:`ConfigError` if not."""
    text, document = read_toml(path)
    only_key(path, document, "require")
    tables = document.get("require")
    if not isinstance(tables, list) or not tables:
        raise ConfigError(path, "no [[require]] tables: nothing would require approval")
    loc = Locator(path, text, "require")
    out: list[Requirement] = []
    for i, value in enumerate(tables):
        table = loc.table(i, value, REQUIRE_KEYS)
        if "tool" not in table:
            raise loc.error(i, "'tool' is required (a tool name, or \"*\" for any tool)")
        tool = loc.text(i, "tool", table["tool"])
        pattern = loc.regex(i, table["match"], "match") if "match" in table else None
        reason = loc.text(i, "reason", table["reason"]) if "reason" in table else None
        written = tool if pattern is None else f"{tool}:{pattern.pattern}"
        out.append(Requirement(tool.strip(), pattern, written, reason))
    return out


# --------------------------------------------------------------------------- the store


class StoreError(DatabaseError):
    """The store cannot be used (``target: reason``), or an operation on it was refused."""

    @property
    def path(self) -> str:
        return self.target


class Store:
    """The grant store: an SQLite file or a PostgreSQL database. Each call is its own
    transaction, and nothing is cached between calls: every process sharing the
    database (servers, ``grant``/``list``/``revoke``) sees each committed grant at once.

    ``create=False`` refuses a missing file instead of creating it. ``clock`` gives the
    current UTC time (tests inject one). ``pool_size`` > 0: a PostgreSQL connection pool
    (a serving process). Safe to use from several threads.
    """

    def __init__(
        self,
        path: str,
        *,
        create: bool = True,
        clock: Callable[[], datetime] = utcnow,
        pool_size: int = 0,
    ) -> None:
        self.path = path
        self.clock = clock
        try:
            self._db = open_database(
                path, SCHEMA, create=create, pool_size=pool_size, busy_timeout_ms=BUSY_TIMEOUT_MS
            )
        except DatabaseError as exc:
            raise StoreError(exc.target, exc.reason) from None

    @property
    def shown(self) -> str:
        """The store as messages may name it (a URL without its password)."""
        return self._db.shown

    @contextlib.contextmanager
    def _transaction(self, *, write: bool = False) -> Iterator[Session]:
        try:
            with self._db.transaction(write=write) as session:
                yield session
        except StoreError:
            raise
        except DatabaseError as exc:
            raise StoreError(exc.target, exc.reason) from None

    def close(self) -> None:
        self._db.close()

    def add(
        self, tool: str, match: str, expires_in: timedelta | None, note: str | None = None
    ) -> Grant:
        """Record a grant; ``ValueError`` if ``match`` is not a valid regex or tool is empty."""
        if not tool:
            raise ValueError("--tool must not be empty")
        try:
            compile_pattern(match)
        except PatternError as exc:
            raise ValueError(f"--match: invalid regex: {exc.reason}") from None
        created = self.clock()
        expires = None if expires_in is None else created + expires_in
        with self._transaction(write=True) as session:
            return insert_grant(session, tool, match, created, expires, note)

    def grants(self, *, include_revoked: bool = False) -> list[Grant]:
        where = "" if include_revoked else " WHERE revoked IS NULL"
        with self._transaction() as session:
            rows = session.rows(f"SELECT {GRANT_COLUMNS} FROM grants{where} ORDER BY id")
        return [row_grant(row) for row in rows]

    def candidates(self, tool: str) -> list[Grant]:
        """Unrevoked grants for ``tool`` or for any tool (``*``), oldest first."""
        with self._transaction() as session:
            rows = session.rows(
                f"SELECT {GRANT_COLUMNS} FROM grants WHERE revoked IS NULL AND tool IN (?, '*') "
                "ORDER BY id",
                (tool,),
            )
        return [row_grant(row) for row in rows]

    def revoke(self, ids: Iterable[int]) -> list[int]:
        """Revoke the grants ``ids`` (all or none: an unknown or revoked id refuses all)."""
        wanted = sorted(set(ids))
        now = iso(self.clock())
        with self._transaction(write=True) as session:
            for grant_id in wanted:
                # The update itself decides (it locks the row on PostgreSQL): two
                # concurrent revokes of one grant cannot both succeed.
                if session.run(
                    "UPDATE grants SET revoked = ? WHERE id = ? AND revoked IS NULL",
                    (now, grant_id),
                ):
                    continue
                if session.one("SELECT id FROM grants WHERE id = ?", (grant_id,)) is None:
                    raise StoreError(self.shown, f"no grant #{grant_id}")
                raise StoreError(self.shown, f"grant #{grant_id} is already revoked")
        return wanted

    def revoke_all(self) -> int:
        """Revoke every unrevoked grant (expired ones included); how many."""
        with self._transaction(write=True) as session:
            return session.run(
                "UPDATE grants SET revoked = ? WHERE revoked IS NULL", (iso(self.clock()),)
            )


# --------------------------------------------------------------------------- serving


def _text_at(event: Mapping[str, Any], name: str, key: str) -> str | None:
    """``event[name][key]`` when it is a string (``session.cwd``, ``harness.name``)."""
    part = event.get(name)
    value = part.get(key) if isinstance(part, dict) else None
    return value if isinstance(value, str) else None


class Approvals:
    """The serving state: requirements, the store, remembered answers, and (with
    ``queue`` and ``hold_s`` > 0) the calls held for a person to decide (thread-safe).

    A held call waits outside the lock: other requests are decided meanwhile (over
    HTTP; stdio serves one request at a time, so a hold there stalls the stream)."""

    def __init__(
        self,
        store: Store,
        requirements: Sequence[Requirement],
        *,
        store_hint: str | None = None,
        queue: Queue | None = None,
        hold_s: float = 0,
    ) -> None:
        self.store = store
        self.requirements = tuple(requirements)
        self.store_hint = store_hint or (
            store.shown if is_url(store.path) else os.path.abspath(store.path)
        )
        self.replies = Replies()
        self.queue = queue if hold_s > 0 else None
        self.hold = timedelta(seconds=hold_s)
        self._lock = threading.Lock()
        self._holding: dict[tuple[str, str], str] = {}  # (source, event.id) -> held call

    def decide(self, request: InterceptRequest) -> list[Any]:
        """The effects for one request, remembered by ``(source, event.id)``."""
        event, tool, advertised = request.event, request.tool_name, request.advertised
        session_id, cwd = request.session_id, _text_at(event, "session", "cwd")
        key = Replies.key(event)
        with self._lock:
            cached = self.replies.get(event)
            if cached is not None:
                answer: list[Any] = cached
                return answer
            verdict = (
                None if tool is None else self.verdict(tool, request.tool_input, session_id, cwd)
            )
            if self.queue is None or not isinstance(verdict, Requirement):
                effects = self.answer(tool, request.tool_input, advertised, verdict)
                self.replies.put(event, effects)
                return effects
            from ahp_backends.approval_queue import QueueError

            assert tool is not None
            kind = request.tool.get("kind")
            held_id = self._holding.get(key)  # a duplicate delivery waits for the same call
            if held_id is None:
                try:
                    held = self.queue.hold(
                        tool=tool,
                        kind=kind if isinstance(kind, str) else None,
                        input=request.tool_input,
                        session_id=session_id,
                        harness=_text_at(event, "harness", "name"),
                        cwd=cwd,
                        rule=verdict.text,
                        wait=self.hold,
                    )
                except QueueError:
                    _log("a call could not be held (the queue failed); answering without a hold")
                    effects = self.answer(tool, request.tool_input, advertised, verdict)
                    self.replies.put(event, effects)
                    return effects
                held_id = self._holding[key] = held.id
        try:
            effects = self._released(held_id, request, tool, session_id, cwd)
        finally:
            with self._lock:
                self._holding.pop(key, None)
        with self._lock:
            self.replies.put(event, effects)
        return effects

    def _released(
        self,
        held_id: str,
        request: InterceptRequest,
        tool: str,
        session_id: str | None,
        cwd: str | None,
    ) -> list[Any]:
        """The answer once a held call is decided or expired (outside the lock)."""
        from ahp_protocol.wire.effects import AllowEffect, DenyEffect

        from ahp_backends.approval_queue import QueueError, call_digest

        assert self.queue is not None
        advertised, tool_input = request.advertised, request.tool_input
        try:
            held = self.queue.await_decision(held_id)
            receipt = self.queue.receipt_for(held_id) if held.status != "expired" else None
        except QueueError:
            _log("a held call could not be awaited (the queue failed); answering without it")
            held, receipt = None, None
        if held is not None and receipt is not None:
            # Bound to what was approved: the receipt's digest is this very call's.
            if receipt.digest == call_digest(tool, tool_input, session_id):
                if receipt.decision == "approve":
                    return [AllowEffect()] if "allow" in advertised else []
                if "deny" in advertised:
                    reason = f"Denied by {receipt.decided_by}"
                    reason += f": {receipt.reason}" if receipt.reason else "."
                    return [DenyEffect(reason=reason, code=DENIED_CODE)]
            else:
                _log("a receipt does not match its held call; it is ignored")
        # Nobody decided (or the decision cannot apply here): today's answer, from the
        # grants as they are now (one made meanwhile counts).
        with self._lock:
            verdict = self.verdict(tool, tool_input, session_id, cwd)
            return self.answer(tool, tool_input, advertised, verdict)

    def verdict(
        self,
        tool: str,
        tool_input: Mapping[str, Any],
        session_id: str | None = None,
        cwd: str | None = None,
    ) -> Grant | Requirement | None:
        """The live grant that covers the call, else the requirement it meets, else None."""
        subject = subject_of(tool_input)
        now = self.store.clock()
        for grant in self.store.candidates(tool):
            if grant.status(now) == "live" and grant.covers(tool, subject, session_id, cwd):
                return grant
        return next((r for r in self.requirements if r.matches(tool, subject)), None)

    def effects(
        self,
        tool: str | None,
        tool_input: Mapping[str, Any],
        advertised: frozenset[str],
        session_id: str | None = None,
        cwd: str | None = None,
    ) -> list[Any]:
        """What to answer without a hold for a call of ``tool`` (see the module doc)."""
        if tool is None:
            return []
        verdict = self.verdict(tool, tool_input, session_id, cwd)
        return self.answer(tool, tool_input, advertised, verdict)

    def answer(
        self,
        tool: str | None,
        tool_input: Mapping[str, Any],
        advertised: frozenset[str],
        verdict: Grant | Requirement | None,
    ) -> list[Any]:
        """The effects for a verdict, without a hold: allow for a grant; ask, or a deny
        giving the grant command, for a requirement; none otherwise."""
        from ahp_protocol.wire.effects import AllowEffect, AskEffect, DenyEffect, MessageEffect

        if tool is None or verdict is None:
            return []
        if isinstance(verdict, Grant):
            return [AllowEffect()] if "allow" in advertised else []
        required, subject = verdict, subject_of(tool_input)
        command = grant_command(self.store_hint, tool, subject)
        head = f"Approval required ({required.text})"
        if required.reason:
            head += f": {required.reason.strip().rstrip('.')}"
        if "ask" in advertised:
            effects: list[Any] = [AskEffect()]
            if "message" in advertised:
                text = (
                    f"{head}. Approve this {tool} call when asked, or approve it ahead of "
                    f"time: {command}"
                )
                effects.append(MessageEffect(text=text))
            return effects
        if "deny" in advertised:
            reason = f"{head}. No live grant covers this {tool} call; to approve it, run: {command}"
            return [DenyEffect(reason=reason, code=DENY_CODE)]
        _log("a call requires approval, but this request accepts neither ask nor deny")
        return []


def _log(text: str) -> None:
    print(f"ahp-backend approval: {text}", file=sys.stderr, flush=True)


def served_subscriptions(hold_s: float = 0) -> list[dict[str, Any]]:
    """The served ``hooks/configuration`` subscriptions: :data:`DEFAULT_SUBSCRIPTIONS`,
    whose deadline, when calls are held ``hold_s`` seconds, is the hold plus
    :data:`HOLD_MARGIN_MS` (so a hold always ends inside the request's deadline)."""
    if hold_s <= 0:
        return DEFAULT_SUBSCRIPTIONS
    timeout_ms = math.ceil(hold_s * 1000) + HOLD_MARGIN_MS
    return [{**entry, "timeoutMs": timeout_ms} for entry in DEFAULT_SUBSCRIPTIONS]


def build_backend(approvals: Approvals) -> Backend:
    from ahp_protocol.server import Backend

    hold_s = approvals.hold.total_seconds() if approvals.queue is not None else 0
    backend = Backend(NAME, configuration=served_subscriptions(hold_s))
    for event_type in EVENTS:
        backend.intercept(event_type)(approvals.decide)
    return backend


# --------------------------------------------------------------------------- commands


def _store_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--db",
        "--store",
        dest="db",
        required=True,
        type=database_target,
        metavar="DB",
        help="the grant store: a file (SQLite) or a postgresql:// URL (--store: the same)",
    )


def _serve_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ahp-backend approval [serve]",
        description=(
            "An approval service stub. Speaks AHP on stdin/stdout by default (one\n"
            "persistent process). Serves hooks/configuration (intercept tool.before,\n"
            f"fail-closed, {SERVED_TIMEOUT_MS} ms, content metadata), so a registration may\n"
            "omit subscriptions (with --hold-s S: S*1000 + 3000 ms). Subcommands: serve\n"
            "(the default), grant, list, revoke, console."
        ),
        epilog=REQUIRE_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _store_argument(parser)
    parser.add_argument(
        "--require",
        action="append",
        default=[],
        metavar="PATTERN",
        help="TOOL or TOOL:REGEX: calls that require approval (repeatable)",
    )
    parser.add_argument("--config", metavar="FILE", help="requirements file (TOML, [[require]])")
    parser.add_argument(
        "--hold-s",
        type=_hold_seconds,
        default=0.0,
        metavar="SECONDS",
        help="hold a required call without a live grant up to SECONDS for a person to decide "
        "(ahp-backend approval console); default 0: no hold",
    )
    parser.add_argument(
        "--check", action="store_true", help="validate the store and requirements, then exit"
    )
    add_transport_arguments(parser)
    return parser


def _hold_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError("expected a number of seconds, e.g. 120") from None
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError("expected a number of seconds >= 0") from None
    return value


def _serve(argv: list[str]) -> int:
    args = _serve_parser().parse_args(argv)
    requirements: list[Requirement] = []
    for text in args.require:
        try:
            requirements.append(parse_requirement(text))
        except ValueError as exc:
            return fail(f"--require {text!r}: {exc}")
    if args.config:
        try:
            requirements.extend(load_requirements(args.config))
        except ConfigError as exc:
            return fail(str(exc))
    try:
        # A serving process shares one pool among the server's threads (decisions are
        # serialized by Approvals' lock, so two connections are plenty); a one-shot
        # process uses one connection.
        pooled = not (args.check or args.once)
        store = Store(args.db, pool_size=SERVING_POOL_SIZE if pooled else 0)
    except StoreError as exc:
        return fail(str(exc))
    queue = None
    if args.hold_s > 0 and not args.check:
        from ahp_backends.approval_queue import Queue, QueueError

        try:
            queue = Queue(args.db, pool_size=SERVING_POOL_SIZE if pooled else 0)
        except QueueError as exc:
            store.close()
            return fail(str(exc))
    approvals = Approvals(store, requirements, queue=queue, hold_s=args.hold_s)
    if args.check:
        try:
            live = [g for g in store.grants() if g.status(store.clock()) == "live"]
        except StoreError as exc:
            return fail(str(exc))
        finally:
            store.close()
        print(f"{store.shown}: {len(requirements)} requirements, {len(live)} live grants, valid")
        return 0
    try:
        return serve(build_backend(approvals), args)
    finally:
        if queue is not None:
            queue.close()
        store.close()


def _grant_command(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="ahp-backend approval grant",
        description="Record a grant: calls of --tool whose subject fully matches --match get "
        "allow until the grant expires or is revoked.",
    )
    _store_argument(parser)
    parser.add_argument("--tool", required=True, metavar="NAME", help="tool.name ('*': any)")
    parser.add_argument(
        "--match",
        required=True,
        metavar="PATTERN",
        help="regex that must match the call's whole subject (command, path, url, ...)",
    )
    parser.add_argument(
        "--expires",
        metavar="DURATION",
        default="never",
        help="30s, 90 (seconds), 30m, 2h, 7d, 1w or never (default: never)",
    )
    parser.add_argument("--note", help="free text kept with the grant")
    parser.add_argument("--json", action="store_true", help="print the grant as JSON")
    args = parser.parse_args(argv)
    try:
        expires_in = parse_duration(args.expires)
    except ValueError as exc:
        return fail(f"--expires {args.expires!r}: {exc}")
    try:
        store = Store(args.db)
    except StoreError as exc:
        return fail(str(exc))
    try:
        grant = store.add(args.tool, args.match, expires_in, args.note)
    except (ValueError, StoreError) as exc:
        return fail(str(exc))
    finally:
        store.close()
    if args.json:
        print(json.dumps(grant.to_json(store.clock())))
    else:
        print(f"granted #{grant.id}: {grant.tool} {grant.match!r}, expires {_short(grant.expires)}")
    return 0


def _list(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="ahp-backend approval list",
        description="List grants (live and expired; --all adds revoked ones). Times are UTC.",
    )
    _store_argument(parser)
    parser.add_argument("--json", action="store_true", help="print a JSON array")
    parser.add_argument("--all", action="store_true", help="include revoked grants")
    parser.add_argument(
        "--receipts",
        action="store_true",
        help="list the decisions on held calls instead (newest first)",
    )
    parser.add_argument(
        "--limit", type=int, default=100, metavar="N", help="with --receipts: at most N"
    )
    args = parser.parse_args(argv)
    try:
        store = Store(args.db, create=False)
    except StoreError as exc:
        return fail(str(exc))
    if args.receipts:
        store.close()
        return _list_receipts(args.db, args.limit, args.json)
    try:
        grants = store.grants(include_revoked=args.all)
    except StoreError as exc:
        return fail(str(exc))
    finally:
        store.close()
    now = store.clock()
    if args.json:
        print(json.dumps([g.to_json(now) for g in grants], indent=2))
        return 0
    if not grants:
        print("no grants")
        return 0
    rows = [("ID", "TOOL", "MATCH", "CREATED", "EXPIRES", "STATUS", "SCOPE")]
    rows += [
        (
            str(g.id),
            g.tool,
            g.match,
            _short(g.created),
            _short(g.expires),
            g.status(now),
            g.scope,
        )
        for g in grants
    ]
    _print_table(rows)
    return 0


def _print_table(rows: Sequence[Sequence[str]]) -> None:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    for row in rows:
        cells = [cell.ljust(width) for cell, width in zip(row, widths, strict=False)]
        print("  ".join([*cells, row[-1]]).rstrip())


RECEIPT_DIGEST_SHOWN: Final = 12  # hex digits of a receipt's digest in the table


def read_receipts(db: str, *, limit: int, session_id: str | None = None) -> list[Receipt]:
    """The newest receipts of the store ``db`` (never created here); :class:`QueueError`
    in fixed words when it cannot be read."""
    from ahp_backends.approval_queue import Queue

    queue = Queue(db, create=False)
    try:
        return queue.receipts(limit=limit, session_id=session_id)
    finally:
        queue.close()


def print_receipts(receipts: Sequence[Receipt]) -> None:
    """The receipts as the one plain table (``approval list --receipts``, ``audit show
    --approvals``): who decided what, when, in which scope, the digest's prefix, why."""
    if not receipts:
        print("no receipts")
        return
    rows = [("ID", "DECIDED", "BY", "DECISION", "SCOPE", "TOOL", "SUBJECT", "DIGEST", "REASON")]
    rows += [
        (
            str(r.id),
            _short(r.decided_at),
            r.decided_by,
            r.decision,
            r.scope,
            r.tool,
            json.dumps(r.subject, ensure_ascii=False)[1:-1],
            r.digest[:RECEIPT_DIGEST_SHOWN],
            r.reason or "",
        )
        for r in receipts
    ]
    _print_table(rows)


def _list_receipts(db: str, limit: int, as_json: bool) -> int:
    from ahp_backends.approval_queue import QueueError

    try:
        receipts = read_receipts(db, limit=limit)
    except QueueError as exc:
        return fail(str(exc))
    if as_json:
        print(json.dumps([r.to_json() for r in receipts], indent=2, ensure_ascii=False))
        return 0
    print_receipts(receipts)
    return 0


def _revoke(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="ahp-backend approval revoke", description="Revoke grants by id, or all of them."
    )
    _store_argument(parser)
    parser.add_argument("ids", nargs="*", type=int, metavar="ID", help="grant ids (see list)")
    parser.add_argument("--all", action="store_true", help="revoke every grant")
    args = parser.parse_args(argv)
    if bool(args.ids) == bool(args.all):
        parser.error("give grant ids or --all (not both)")
    try:
        store = Store(args.db, create=False)
    except StoreError as exc:
        return fail(str(exc))
    try:
        if args.all:
            print(f"revoked {store.revoke_all()} grants")
        else:
            revoked = store.revoke(args.ids)
            print("revoked " + ", ".join(f"#{i}" for i in revoked))
    except StoreError as exc:
        return fail(str(exc), 1)
    finally:
        store.close()
    return 0


CONSOLE_MODULE: Final = "ahp_backends.approval_console"


def _console(argv: list[str]) -> int:
    """``approval console``: the web console, when it is installed (imported only here)."""
    import importlib

    try:
        module = importlib.import_module(CONSOLE_MODULE)
    except ModuleNotFoundError as exc:
        if exc.name != CONSOLE_MODULE:
            raise
        return fail("the approval console is not installed")
    code = module.main(argv)
    return int(code) if code is not None else 0


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    command = "serve"
    if args and args[0] in SUBCOMMANDS:
        command, args = args[0], args[1:]
    handlers: dict[str, Callable[[list[str]], int]] = {
        "serve": _serve,
        "grant": _grant_command,
        "list": _list,
        "revoke": _revoke,
        "console": _console,
    }
    handler = handlers[command]
    return handler(args)


if __name__ == "__main__":
    sys.exit(main())

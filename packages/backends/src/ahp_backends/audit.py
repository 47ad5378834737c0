"""``ahp-backend audit``: an observer that records every event it is sent, in a database.

``ahp-backend audit [serve] --db FILE`` serves ``hooks/observe`` for ``*`` (any
transport flag of :mod:`ahp_backends.serving`) and answers ``hooks/configuration``
with one observe subscription for ``*``. ``ahp-backend audit show --db FILE``
prints the recorded timeline (a table, or ``--json``); ``--approvals DB`` adds the
approval receipts of that approval store (:mod:`ahp_backends.approval`, read only).

Owns the database (``--db``: an SQLite file, or a ``postgresql://`` URL that any
number of audit processes share; the versioned :data:`SCHEMA` is opened through
:mod:`ahp_backends.db`): one ``events`` row per ``(source, event.id)`` (``INSERT ...
ON CONFLICT DO NOTHING`` on a UNIQUE key, so a duplicate delivery, a retry after a
crash or the same event seen by two workers is recorded once, whatever process
cache there is or is not), with the columns a timeline needs (type, event time,
session, turn, call, tool, parent event, receipt time) and the event JSON as stored.

Durability and bounds (PostgreSQL: each event is one committed transaction, durable
on return with the server's default ``synchronous_commit``; the rest is SQLite's):

- WAL journal, ``synchronous=NORMAL``, ``busy_timeout``. Each event is its own
  transaction, committed before the next message is read, so a ``kill -9``
  loses at most the event being written and never corrupts the file (SQLite's
  atomic commit). In WAL mode ``NORMAL`` survives any crash of *this process*: a
  commit is in the WAL file before the handler returns. Only a power loss or an
  OS crash may roll back the last commits (never corrupt); ``--synchronous full``
  adds an fsync per event for that, at the cost of a disk flush per observation.
- Never blocks or fails the harness: observations are notifications, the handler
  never raises (a write it cannot make is dropped with a one-line stderr note, the
  exception type only), a busy database is waited for at most ``--busy-timeout-ms``.
- Content: by default the auditor asks for ``metadata`` (sizes, kinds, ids; no
  prompt, response or file text) and stores only that view even when a
  registration sends more: an audit trail should say what happened, not hoard
  what people typed. ``--content body`` keeps the bodies. Tool inputs (the
  operation itself: the command, the path) are kept whole, as the draft's
  projection does.

With ``--http ... --workers N`` every worker opens its own connections after the fork
(:mod:`ahp_backends.db`) and writes to the one database; the UNIQUE key, not any
worker, decides that an event posted to two workers is stored once.

Never answers an intercept request (``-32002``: this backend decides nothing),
never sends event content anywhere, never echoes a database error's text.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from ahp_backends.db import DatabaseError, Schema, Session, Step, is_url, open_database, shown
from ahp_backends.serving import add_transport_arguments, database_target, fail, serve

if TYPE_CHECKING:
    from ahp_protocol.server import Backend

__all__ = [
    "BACKEND_ID",
    "SCHEMA",
    "SCHEMA_VERSION",
    "AuditStore",
    "Record",
    "build_backend",
    "configuration",
    "main",
    "read_events",
    "summary",
]

BACKEND_ID: Final = "com.example.ahp.audit"
CONTENT_CHOICES: Final = ("metadata", "body", "omit")
DEFAULT_BUSY_MS: Final = 5000
SERVING_POOL_SIZE: Final = 4  # the HTTP server writes from worker threads
IN_MEMORY: Final = Path(":memory:")  # ``--db :memory:``: SQLite's own name for a private database


def _legacy_version(session: Session, tables: set[str]) -> int | None:
    """The version of an SQLite database made before ``ahp_schema``: its ``user_version``."""
    if session.engine != "sqlite" or "events" not in tables:
        return None
    row = session.one("PRAGMA user_version")
    return int(row[0]) if row is not None and int(row[0]) > 0 else None


# Version 1 is the first release's schema, verbatim for SQLite (which kept the version
# in PRAGMA user_version, still set so that earlier code refuses a newer database).
# PostgreSQL spells the same columns with its types (ts in double precision, like
# SQLite's REAL; PostgreSQL's real has 24 bits, too few for epoch milliseconds).
SCHEMA: Final = Schema(
    app="ahp-audit",
    steps=(
        Step(
            sqlite=(
                "CREATE TABLE IF NOT EXISTS events ("
                " seq INTEGER PRIMARY KEY AUTOINCREMENT,"
                " source TEXT NOT NULL,"
                " event_id TEXT NOT NULL,"
                " type TEXT NOT NULL,"
                " time TEXT,"
                " ts REAL NOT NULL,"
                " session_id TEXT,"
                " turn_id TEXT,"
                " call_id TEXT,"
                " tool TEXT,"
                " parent_event_id TEXT,"
                " received_at TEXT NOT NULL,"
                " event TEXT NOT NULL,"
                " UNIQUE (source, event_id))",
                "CREATE INDEX IF NOT EXISTS events_by_session ON events (session_id, ts)",
                "CREATE INDEX IF NOT EXISTS events_by_type ON events (type, ts)",
                "PRAGMA user_version = 1",
            ),
            postgresql=(
                "CREATE TABLE events ("
                " seq BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,"
                " source TEXT NOT NULL,"
                " event_id TEXT NOT NULL,"
                " type TEXT NOT NULL,"
                " time TEXT,"
                " ts DOUBLE PRECISION NOT NULL,"
                " session_id TEXT,"
                " turn_id TEXT,"
                " call_id TEXT,"
                " tool TEXT,"
                " parent_event_id TEXT,"
                " received_at TEXT NOT NULL,"
                " event TEXT NOT NULL,"
                " UNIQUE (source, event_id))",
                "CREATE INDEX events_by_session ON events (session_id, ts)",
                "CREATE INDEX events_by_type ON events (type, ts)",
            ),
        ),
    ),
    tables=frozenset({"events"}),
    noun="audit database",
    missing="no such database",
    legacy=_legacy_version,
)
SCHEMA_VERSION: Final = SCHEMA.version

_TYPE_FILTER: Final = re.compile(r"^(\*|[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*(\.\*)?)$")


class NotRecorded(Exception):
    """An observed event was not stored (the reason is on stderr already).

    Raised into the server kit, so that over HTTP the answer is ``500``, not ``204``:
    a ``204`` from the audit backend means the record is in the database."""


def _note(message: str) -> None:
    print(f"{BACKEND_ID}: {message}", file=sys.stderr, flush=True)


def _now() -> datetime:
    return datetime.now(UTC)


def _rfc3339(moment: datetime) -> str:
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _timestamp(value: object, fallback: datetime) -> float:
    """Seconds since the epoch of an RFC 3339 time, else of ``fallback``."""
    if isinstance(value, str):
        try:
            moment = datetime.fromisoformat(value)
        except ValueError:
            return fallback.timestamp()
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=UTC)
        return moment.timestamp()
    return fallback.timestamp()


def _get(event: Mapping[str, Any], *path: str) -> str | None:
    node: Any = event
    for key in path:
        if not isinstance(node, Mapping):
            return None
        node = node.get(key)
    return node if isinstance(node, str) else None


class AuditStore:
    """The audit database (an SQLite file or PostgreSQL): one committed transaction per
    event, and exactly one row per ``(source, event.id)``, which the database's UNIQUE
    key enforces (``ON CONFLICT DO NOTHING``), so any number of processes may write.

    Safe to share between threads (SQLite: one connection behind a lock; PostgreSQL: a
    pool when ``pool_size`` > 0) and between processes (SQLite in WAL; per_event runs
    one process per event, all writing to the same file). Raises
    :class:`~ahp_backends.db.DatabaseError` when it cannot be opened or written.
    """

    def __init__(
        self,
        path: str | Path,
        *,
        synchronous: str = "normal",
        busy_timeout_ms: int = DEFAULT_BUSY_MS,
        pool_size: int = 0,
    ) -> None:
        if synchronous not in ("normal", "full"):
            raise ValueError("synchronous must be 'normal' or 'full'")
        self.path = os.fspath(path)
        self._db = open_database(
            self.path,
            SCHEMA,
            pool_size=pool_size,
            busy_timeout_ms=busy_timeout_ms,
            synchronous=synchronous,
        )

    def add(self, event: Mapping[str, Any], *, received: datetime | None = None) -> bool:
        """Record one event (committed on return); ``False`` when it was already there."""
        received = received or _now()
        source = event.get("source")
        event_id = event.get("id")
        kind = event.get("type")
        if not (isinstance(source, str) and isinstance(event_id, str) and isinstance(kind, str)):
            raise ValueError("an event needs string source, id and type")
        text = json.dumps(event, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
        row = (
            source,
            event_id,
            kind,
            _get(event, "time"),
            _timestamp(event.get("time"), received),
            _get(event, "session", "id"),
            _get(event, "turn", "id"),
            _get(event, "call", "id"),
            _get(event, "tool", "name"),
            _get(event, "parentEventId"),
            _rfc3339(received),
            text,
        )
        with self._db.transaction(write=True) as session:
            return (
                session.run(
                    "INSERT INTO events (source, event_id, type, time, ts, session_id,"
                    " turn_id, call_id, tool, parent_event_id, received_at, event)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
                    " ON CONFLICT (source, event_id) DO NOTHING",
                    row,
                )
                == 1
            )

    def count(self) -> int:
        with self._db.transaction() as session:
            found = session.one("SELECT count(*) FROM events")
        return 0 if found is None else int(found[0])

    def close(self) -> None:
        self._db.close()


def configuration(content: str = "metadata") -> list[dict[str, Any]]:
    """The subscriptions answered to ``hooks/configuration``: observe everything."""
    return [{"events": ["*"], "mode": "observe", "content": {"default": content}}]


def build_backend(store: AuditStore, *, content: str = "metadata") -> Backend:
    """The observer: every event goes into ``store``, reduced to ``content`` first."""
    from ahp_protocol.server import Backend  # only when serving (start-up speed of show)

    if content not in CONTENT_CHOICES:
        raise ValueError("content must be one of " + ", ".join(CONTENT_CHOICES))
    backend = Backend(BACKEND_ID, configuration=configuration(content))
    selection = {"default": content}

    @backend.observe("*")
    def record(event: dict[str, Any]) -> None:
        try:
            kept = event
            if content != "body":
                from ahp_protocol.wire.content import project_event

                kept = project_event(event, selection)
            store.add(kept)
        except DatabaseError as exc:  # a fixed reason, naming the engine error's type
            _note(f"event not recorded: {exc.reason}")
            raise NotRecorded from None  # the server kit answers 500 over HTTP, not 204
        except Exception as exc:  # never echo the text
            _note(f"event not recorded ({type(exc).__name__})")
            raise NotRecorded from None

    return backend


# -- reading -----------------------------------------------------------------------------


class Record:
    """One recorded event as ``show`` reads it."""

    __slots__ = ("event", "received_at", "seq")

    def __init__(self, seq: int, received_at: str, event: dict[str, Any]) -> None:
        self.seq = seq
        self.received_at = received_at
        self.event = event


def _type_clause(types: Sequence[str]) -> tuple[str, list[object]]:
    clauses: list[str] = []
    params: list[object] = []
    for selector in types:
        if selector == "*":
            return "", []
        if selector.endswith(".*"):
            prefix = selector[:-1]  # "tool." for "tool.*"
            clauses.append("substr(type, 1, ?) = ?")
            params += [len(prefix), prefix]
        else:
            clauses.append("type = ?")
            params.append(selector)
    return ("(" + " OR ".join(clauses) + ")", params) if clauses else ("", [])


def read_events(
    path: str | Path, *, session: str | None = None, types: Sequence[str] = ()
) -> list[Record]:
    """Recorded events in timeline order (event time, then receipt), filtered.

    ``path`` is an SQLite file or a PostgreSQL URL. ``types`` holds exact event types or
    ``family.*`` selectors (any matches). Raises ``FileNotFoundError`` when there is no
    database file at ``path``, :class:`~ahp_backends.db.DatabaseError` (a fixed reason)
    when the database cannot be read: one that is not an audit database, newer than this
    code, an unreachable server.
    """
    target = os.fspath(path)
    if not is_url(target) and not os.path.isfile(target):
        raise FileNotFoundError(target)
    where: list[str] = []
    params: list[object] = []
    if session is not None:
        where.append("session_id = ?")
        params.append(session)
    clause, extra = _type_clause(types)
    if clause:
        where.append(clause)
        params += extra
    sql = "SELECT seq, received_at, event FROM events"
    if where:
        sql += " WHERE " + " AND ".join(where)
    sql += " ORDER BY ts, seq"
    db = open_database(target, SCHEMA, create=False, busy_timeout_ms=DEFAULT_BUSY_MS)
    try:
        with db.transaction() as reading:
            rows = reading.rows(sql, params)
    finally:
        db.close()
    return [Record(int(seq), str(received), json.loads(text)) for seq, received, text in rows]


def _short(value: object, limit: int = 60) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _main_argument(tool_input: object) -> str:
    if isinstance(tool_input, Mapping):
        for key in ("command", "path", "url", "pattern", "query"):
            value = tool_input.get(key)
            if isinstance(value, str):
                return value
        return _short(dict(tool_input))
    return "" if tool_input is None else _short(tool_input)


def summary(event: Mapping[str, Any]) -> str:
    """One readable line about what the event says happened (no content bodies)."""
    kind = event.get("type")
    tool = event.get("tool") if isinstance(event.get("tool"), Mapping) else {}
    assert isinstance(tool, Mapping)
    if kind == "tool.before":
        return f"proposed: {_short(_main_argument(tool.get('input')))}"
    if kind == "tool.after":
        execution = event.get("execution") if isinstance(event.get("execution"), Mapping) else {}
        assert isinstance(execution, Mapping)
        status = execution.get("status", "?")
        text = f"outcome {event.get('outcome', '?')}, {status}"
        if execution.get("reason"):
            text += f" ({execution['reason']})"
        error = event.get("error")
        if isinstance(error, Mapping) and error.get("class"):
            text += f", error {error['class']}"
        return text
    if kind == "tool.permission.request":
        return f"approval asked: {_short(_main_argument(tool.get('input')))}"
    if kind == "tool.permission.resolved":
        return f"{event.get('decision', '?')} (decided by {event.get('decidedBy', '?')})"
    if kind == "hook.failure":
        failure = event.get("failure") if isinstance(event.get("failure"), Mapping) else {}
        assert isinstance(failure, Mapping)
        return (
            f"backend {failure.get('backendId', '?')} failed: "
            f"{failure.get('reason', '?')} ({failure.get('policy', '?')})"
        )
    if kind == "file.changed":
        changes = event.get("changes")
        if isinstance(changes, list):
            return ", ".join(
                f"{c.get('operation', '?')} {c.get('path', '?')}"
                for c in changes
                if isinstance(c, Mapping)
            )
    if kind == "session.start":
        return f"trigger {event.get('trigger', '?')}, mode {event.get('permissionMode', '?')}"
    if kind in ("session.end", "turn.end"):
        reason = f" ({event['reason']})" if isinstance(event.get("reason"), str) else ""
        return f"outcome {event.get('outcome', '?')}{reason}"
    if kind == "turn.start":
        return f"trigger {event.get('trigger', '?')}"
    if kind in ("model.request.before", "model.response.after"):
        model = event.get("model") if isinstance(event.get("model"), Mapping) else {}
        assert isinstance(model, Mapping)
        text = f"model {model.get('id', '?')}"
        if isinstance(event.get("finishReason"), str):
            text += f", finish {event['finishReason']}"
        return text
    return ""


def _tool_and_call(event: Mapping[str, Any]) -> str:
    tool = _get(event, "tool", "name")
    call = _get(event, "call", "id")
    parts = [p for p in (tool, call) if p]
    return " ".join(parts)


def _clock(event: Mapping[str, Any]) -> str:
    value = event.get("time")
    if not isinstance(value, str):
        return "?"
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        return value
    if moment.tzinfo is not None:
        moment = moment.astimezone(UTC)
    return moment.strftime("%H:%M:%S.") + f"{moment.microsecond // 1000:03d}"


def shown_literally(value: str) -> str:
    """``value`` with control characters (C0, DEL, C1) written as visible escapes.

    Recorded events are what a harness (or anyone reaching the backend) sent: a terminal
    escape sequence in a command must be shown, never interpreted by the terminal.
    """
    return _CONTROL.sub(lambda m: repr(m.group())[1:-1], value)


_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def _print_table(records: Iterable[Record], title: str) -> None:
    # rich only for show's table (start-up speed of the backend itself).
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    def cell(value: str) -> Text:  # Text is literal: "[home]" is not rich markup
        return Text(shown_literally(value))

    table = Table(title=cell(title), title_justify="left", show_lines=False)
    table.add_column("time (UTC)", no_wrap=True)
    table.add_column("type", no_wrap=True)
    table.add_column("session", no_wrap=True)
    table.add_column("tool / call")
    table.add_column("what happened")
    for record in records:
        event = record.event
        session = _get(event, "session", "id") or ""
        table.add_row(
            cell(_clock(event)),
            cell(str(event.get("type"))),
            cell(session[-12:]),
            cell(_tool_and_call(event)),
            cell(summary(event)),
        )
    Console(highlight=False, soft_wrap=False).print(table)


# -- the command --------------------------------------------------------------------------


def _serve_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ahp-backend audit",
        description=(
            "Record every observed AHP event once per (source, event id), in an SQLite "
            "file (WAL) or a shared PostgreSQL database. 'ahp-backend audit show --db DB' "
            "prints the timeline."
        ),
        epilog=(
            "commands: 'ahp-backend audit [serve] --db DB ...' serves (the default); "
            "'ahp-backend audit show --db DB [--session ID] [--type TYPE] [--json]' prints "
            "what was recorded; 'ahp-backend audit replay --db DB --registration NEW.json' "
            "reports the recorded tool calls a new registration would decide differently "
            "(see its --help). DB is a file path (SQLite) or a postgresql://USER@HOST/DBNAME "
            "URL (needs ahp-backends[postgres]); any number of processes may record into one "
            "DB, each event is stored once. Each event is committed before the next is read: "
            "a kill -9 loses at most the event being written and never corrupts the database."
        ),
    )
    parser.add_argument(
        "--db",
        required=True,
        type=database_target,
        metavar="DB",
        help="a file (SQLite; ':memory:' keeps the record in this process only) or a "
        "postgresql:// URL",
    )
    parser.add_argument(
        "--content",
        choices=CONTENT_CHOICES,
        default="metadata",
        help="content to ask for and to keep (default: metadata, no prompt or file text)",
    )
    parser.add_argument(
        "--synchronous",
        choices=("normal", "full"),
        default="normal",
        help="SQLite synchronous mode (normal survives a crash of this process; "
        "full also a power loss, at one fsync per event); PostgreSQL commits durably",
    )
    parser.add_argument(
        "--busy-timeout-ms",
        type=int,
        default=DEFAULT_BUSY_MS,
        metavar="MS",
        help="longest wait for a busy database (SQLite's busy timeout, PostgreSQL's "
        f"statement_timeout; default {DEFAULT_BUSY_MS})",
    )
    add_transport_arguments(parser)
    return parser


RECEIPTS_SHOWN: Final = 100  # approval receipts ``show --approvals`` prints, newest first


def _show_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ahp-backend audit show",
        description="Print the recorded events as a timeline (or JSON).",
    )
    parser.add_argument(
        "--db",
        required=True,
        type=database_target,
        metavar="DB",
        help="a file (SQLite) or a postgresql:// URL",
    )
    parser.add_argument("--session", metavar="ID", help="only this session's events")
    parser.add_argument(
        "--type",
        action="append",
        default=[],
        metavar="TYPE",
        help="only this event type, or a family such as 'tool.*' (repeatable)",
    )
    parser.add_argument("--json", action="store_true", help="print a JSON list of the events")
    parser.add_argument(
        "--approvals",
        type=database_target,
        metavar="DB",
        help="also the approval receipts of this approval store (ahp-backend approval --db), "
        'of --session when given; with --json: {"events": [...], "receipts": [...]}',
    )
    return parser


def _serve(argv: Sequence[str]) -> int:
    args = _serve_parser().parse_args(argv)
    if args.busy_timeout_ms < 0:
        return fail("--busy-timeout-ms must not be negative")
    url = is_url(args.db)
    if not url and Path(args.db) == IN_MEMORY and (args.workers or 1) > 1:
        return fail("--db :memory: is private to one process; --workers needs a file or a URL")
    if not url and Path(args.db) == IN_MEMORY:
        print(
            "ahp-backend audit: --db :memory: keeps the record in memory; it is gone at exit",
            file=sys.stderr,
            flush=True,
        )
    elif not url:
        try:
            Path(args.db).parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            return fail(
                f"--db {shown(args.db)}: cannot create its directory ({type(exc).__name__})"
            )
    try:
        store = AuditStore(
            args.db,
            synchronous=args.synchronous,
            busy_timeout_ms=args.busy_timeout_ms,
            pool_size=0 if args.once else SERVING_POOL_SIZE,
        )
    except DatabaseError as exc:
        return fail(f"--db {exc}")
    try:
        return serve(build_backend(store, content=args.content), args)
    finally:
        store.close()


def _show(argv: Sequence[str]) -> int:
    args = _show_parser().parse_args(argv)
    for selector in args.type:
        if not _TYPE_FILTER.match(selector):
            return fail(f"--type {selector!r}: use an event type such as tool.before, or tool.*")
    try:
        records = read_events(args.db, session=args.session, types=args.type)
    except FileNotFoundError:
        return fail(f"--db {shown(args.db)}: no such database")
    except DatabaseError as exc:
        return fail(f"--db {exc}")
    receipts: list[Any] | None = None
    if args.approvals is not None:
        from ahp_backends.approval import read_receipts
        from ahp_backends.approval_queue import QueueError

        try:
            receipts = read_receipts(args.approvals, limit=RECEIPTS_SHOWN, session_id=args.session)
        except QueueError as exc:
            return fail(f"--approvals: {exc}")
    where = shown(args.db)
    try:
        if args.json:
            events = [r.event for r in records]
            document: Any = (
                events
                if receipts is None
                else {"events": events, "receipts": [r.to_json() for r in receipts]}
            )
            print(json.dumps(document, ensure_ascii=False, indent=2))
        else:
            if not records:
                filtered = " (with these filters)" if args.session or args.type else ""
                print(f"no events recorded in {where}{filtered}")
            else:
                _print_table(records, f"{len(records)} events in {where}")
            if receipts is not None:
                from ahp_backends.approval import print_receipts

                print(f"\napproval receipts in {shown(args.approvals)} (newest first):")
                print_receipts(receipts)
        sys.stdout.flush()
    except BrokenPipeError:  # `... | head`: the reader left; that is not an error
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """``ahp-backend audit [serve] ...`` or ``audit show ...``.

    ``audit replay`` is :mod:`ahp_backends.replay` (a harness-side tool, which reads this
    module's database), routed there by :mod:`ahp_backends.cli`.
    """
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["show"]:
        return _show(args[1:])
    if args[:1] == ["serve"]:
        args = args[1:]
    return _serve(args)


if __name__ == "__main__":
    sys.exit(main())

"""The held calls, the decisions and their receipts, and the notifications that wake a
waiting call: what ``ahp-backend approval --hold-s S`` and the approval console share.

Lives in the approval store (the same ``--db`` as the grants: tables ``held`` and
``receipts``, version 3 of :data:`ahp_backends.approval_store.SCHEMA`, SQLite or PostgreSQL).
A call that requires approval is *held* (:meth:`Queue.hold`: a pending row with an
``expires``); its request waits (:meth:`Queue.await_decision`) until a person decides
(:meth:`Queue.decide`, from any process) or ``expires`` passes, when the row is marked
``expired`` (only if still pending: a decision and an expiry never both win).

A decision is one transaction: the conditional update of a pending, unexpired row, its
:class:`Receipt` (who, when, what, the call's digest), and for the scopes ``session``
and ``project`` a grant for the same tool and exactly this subject, limited to that
session id or that project's cwd, expiring after ``grant_for``. ``once`` releases only
the held call: a later identical call is held again.

Binding: a held call's ``digest`` is :func:`call_digest` (SHA-256 of the canonical JSON
of tool, input and session id); the receipt copies it, and the waiting call answers
allow only when the receipt's digest is its own.

Notifications: every change is announced (PostgreSQL ``NOTIFY``, delivered on commit; on
SQLite a commit by any connection changes ``PRAGMA data_version``). One watcher thread
per process (started at the first wait, on a dedicated connection: ``LISTEN``, or a
poll of ``data_version`` every :data:`POLL_S` while someone waits) wakes every waiter;
waiters re-read the row, and wait at most :data:`RECHECK_S` between reads, so a lost
notification (a broken connection) costs a delay, never a decision.

Times are UTC (the clock is injectable). Never echoes a database's exception text: a
:class:`QueueError` says what happened, in fixed words.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import threading
import uuid
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Final

from ahp_backends.approval_store import (
    BUSY_TIMEOUT_MS,
    SCHEMA,
    insert_grant,
    iso,
    literal_regex,
    parse_iso,
    subject_of,
    utcnow,
)
from ahp_backends.db import Database, DatabaseError, Session, open_database

__all__ = [
    "CHANNEL",
    "DECISIONS",
    "POLL_S",
    "RECHECK_S",
    "SCOPES",
    "STATUSES",
    "Held",
    "Queue",
    "QueueError",
    "Receipt",
    "call_digest",
    "canonical_json",
]

CHANNEL: Final = "ahp_approval_queue"  # PostgreSQL NOTIFY channel
POLL_S: Final = 0.1  # SQLite: how often the watcher reads data_version while someone waits
RECHECK_S: Final = 1.0  # a waiting call re-reads its row at least this often
RETRY_S: Final = 1.0  # a watcher whose connection failed opens another after this
STATUSES: Final = ("pending", "approved", "denied", "expired")
DECISIONS: Final = ("approve", "deny")
SCOPES: Final = ("once", "session", "project")


class QueueError(Exception):
    """A refused or failed queue operation; the message says what happened."""


def canonical_json(value: Any) -> str:
    """The one canonical JSON text: sorted keys, no spaces, UTF-8 kept."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def call_digest(tool: str, tool_input: Any, session_id: str | None) -> str:
    """What binds a decision to a call: SHA-256 hex of the canonical JSON of
    ``{"tool", "input", "session"}``."""
    text = canonical_json({"tool": tool, "input": tool_input, "session": session_id})
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class Held:
    """One held call. ``status`` is as of reading: a pending row past ``expires`` reads
    ``expired`` even before its waiting call marked it so."""

    id: str
    created: datetime
    expires: datetime
    tool: str
    kind: str | None
    input: Any
    input_json: str
    subject: str
    session_id: str | None
    harness: str | None
    cwd: str | None
    rule: str
    digest: str
    status: str  # "pending" | "approved" | "denied" | "expired"
    decided_by: str | None
    decided_at: datetime | None
    reason: str | None

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "created": iso(self.created),
            "expires": iso(self.expires),
            "tool": self.tool,
            "kind": self.kind,
            "input": self.input,
            "subject": self.subject,
            "session": self.session_id,
            "harness": self.harness,
            "cwd": self.cwd,
            "rule": self.rule,
            "digest": self.digest,
            "status": self.status,
            "decidedBy": self.decided_by,
            "decidedAt": None if self.decided_at is None else iso(self.decided_at),
            "reason": self.reason,
        }


@dataclass(frozen=True)
class Receipt:
    """The record of one decision on one held call."""

    id: int
    held_id: str
    decided_at: datetime
    decided_by: str
    decision: str  # "approve" | "deny"
    scope: str  # "once" | "session" | "project"
    grant_id: int | None
    grant_expires: datetime | None
    reason: str | None
    digest: str
    tool: str
    subject: str
    session_id: str | None

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "held": self.held_id,
            "decidedAt": iso(self.decided_at),
            "decidedBy": self.decided_by,
            "decision": self.decision,
            "scope": self.scope,
            "grant": self.grant_id,
            "grantExpires": None if self.grant_expires is None else iso(self.grant_expires),
            "reason": self.reason,
            "digest": self.digest,
            "tool": self.tool,
            "subject": self.subject,
            "session": self.session_id,
        }


_HELD_COLUMNS: Final = (
    "id, created, expires, tool, kind, input_json, subject, session_id, harness, cwd, rule,"
    " digest, status, decided_by, decided_at, reason"
)
_RECEIPT_COLUMNS: Final = (
    "id, held_id, decided_at, decided_by, decision, scope, grant_id, grant_expires, reason,"
    " digest, tool, subject, session_id"
)


def _when(text: str) -> datetime:
    return datetime.fromisoformat(text)


def _input(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return None  # a corrupt row shows no input (and its digest binds nothing new)


class Queue:
    """The held calls of one approval store (see the module doc). Thread-safe; one
    instance per process (it never crosses a fork: the watcher starts at the first
    wait, and a forked child starts its own).

    ``create=False`` refuses a missing store; ``pool_size`` > 0 serves PostgreSQL from
    a pool (a serving process)."""

    def __init__(
        self,
        db: str,
        *,
        clock: Callable[[], datetime] = utcnow,
        create: bool = True,
        pool_size: int = 0,
    ) -> None:
        self.clock = clock
        try:
            self._db: Database = open_database(
                db, SCHEMA, create=create, pool_size=pool_size, busy_timeout_ms=BUSY_TIMEOUT_MS
            )
        except DatabaseError as exc:
            raise QueueError(str(exc)) from None
        self.shown = self._db.shown
        self._changed = threading.Condition()
        self._generation = 0
        self._waiters = 0
        self._closed = False
        self._watcher: threading.Thread | None = None
        self._watcher_pid: int | None = None
        _QUEUES.add(self)

    def _after_fork_in_child(self) -> None:
        """A child has no watcher thread, and its lock may have been held at the fork."""
        self._changed = threading.Condition()
        self._waiters = 0
        self._watcher = None
        self._watcher_pid = None

    # -- transactions -------------------------------------------------------------------

    @contextlib.contextmanager
    def _transaction(self, *, write: bool = False) -> Iterator[Session]:
        try:
            with self._db.transaction(write=write) as session:
                yield session
        except DatabaseError as exc:
            raise QueueError(str(exc)) from None

    def _announce(self, session: Session, what: str) -> None:
        """Wake every waiter once this transaction commits (PostgreSQL: NOTIFY)."""
        if session.engine == "postgresql":
            session.one("SELECT pg_notify(?, ?)", (CHANNEL, what))

    def _bump(self) -> None:
        with self._changed:
            self._generation += 1
            self._changed.notify_all()

    def close(self) -> None:
        with self._changed:
            self._closed = True
            self._changed.notify_all()
        watcher = self._watcher
        if watcher is not None and self._watcher_pid == os.getpid():
            watcher.join(timeout=2 * RETRY_S)
        self._db.close()

    # -- rows ---------------------------------------------------------------------------

    def _held(self, row: Sequence[Any], now: datetime) -> Held:
        expires = _when(row[2])
        status = str(row[12])
        if status == "pending" and now >= expires:
            status = "expired"
        return Held(
            id=row[0],
            created=_when(row[1]),
            expires=expires,
            tool=row[3],
            kind=row[4],
            input=_input(row[5]),
            input_json=row[5],
            subject=row[6],
            session_id=row[7],
            harness=row[8],
            cwd=row[9],
            rule=row[10],
            digest=row[11],
            status=status,
            decided_by=row[13],
            decided_at=parse_iso(row[14]),
            reason=row[15],
        )

    @staticmethod
    def _receipt(row: Sequence[Any]) -> Receipt:
        return Receipt(
            id=int(row[0]),
            held_id=row[1],
            decided_at=_when(row[2]),
            decided_by=row[3],
            decision=row[4],
            scope=row[5],
            grant_id=None if row[6] is None else int(row[6]),
            grant_expires=parse_iso(row[7]),
            reason=row[8],
            digest=row[9],
            tool=row[10],
            subject=row[11],
            session_id=row[12],
        )

    # -- holding ------------------------------------------------------------------------

    def hold(
        self,
        *,
        tool: str,
        kind: str | None,
        input: Any,
        session_id: str | None,
        harness: str | None,
        cwd: str | None,
        rule: str,
        wait: timedelta,
    ) -> Held:
        """Record a pending held call, expiring ``wait`` after it is created (one clock
        reading for both), and announce it."""
        input_json = canonical_json(input)
        subject = subject_of(input) if isinstance(input, Mapping) else input_json
        held_id = uuid.uuid4().hex
        created = self.clock()
        expires = created + wait
        digest = call_digest(tool, input, session_id)
        with self._transaction(write=True) as session:
            session.run(
                f"INSERT INTO held ({_HELD_COLUMNS})"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'pending', NULL, NULL, NULL)",
                (
                    held_id,
                    iso(created),
                    iso(expires),
                    tool,
                    kind,
                    input_json,
                    subject,
                    session_id,
                    harness,
                    cwd,
                    rule,
                    digest,
                ),
            )
            self._announce(session, held_id)
        self._bump()
        row = self._get_row(held_id)
        assert row is not None
        return self._held(row, created)

    def _get_row(self, held_id: str) -> tuple[Any, ...] | None:
        with self._transaction() as session:
            return session.one(f"SELECT {_HELD_COLUMNS} FROM held WHERE id = ?", (held_id,))

    def get(self, held_id: str) -> Held | None:
        row = self._get_row(held_id)
        return None if row is None else self._held(row, self.clock())

    def await_decision(self, held_id: str) -> Held:
        """Block until the call is decided or its ``expires`` passes (then mark it
        expired, only if still pending); the final row. ``QueueError`` if unknown."""
        while True:
            seen = self._watch_generation()
            held = self.get(held_id)
            if held is None:
                raise QueueError("no such held call")
            if held.status != "pending":
                break
            left = (held.expires - self.clock()).total_seconds()
            self._wait(seen, min(max(left, 0.0), RECHECK_S))
        if held.status == "expired":
            with self._transaction(write=True) as session:
                if session.run(
                    "UPDATE held SET status = 'expired' WHERE id = ? AND status = 'pending'",
                    (held_id,),
                ):
                    self._announce(session, held_id)
            self._bump()
            final = self.get(held_id)
            assert final is not None
            return final
        return held

    def pending(self) -> list[Held]:
        """The pending calls not yet expired, oldest first."""
        now = self.clock()
        with self._transaction() as session:
            rows = session.rows(
                f"SELECT {_HELD_COLUMNS} FROM held WHERE status = 'pending' AND expires > ?"
                " ORDER BY created, id",
                (iso(now),),
            )
        return [self._held(row, now) for row in rows]

    def session_calls(self, session_id: str) -> list[Held]:
        """Every held call of the session, oldest first."""
        now = self.clock()
        with self._transaction() as session:
            rows = session.rows(
                f"SELECT {_HELD_COLUMNS} FROM held WHERE session_id = ? ORDER BY created, id",
                (session_id,),
            )
        return [self._held(row, now) for row in rows]

    # -- deciding -----------------------------------------------------------------------

    def decide(
        self,
        held_id: str,
        *,
        approve: bool,
        by: str,
        reason: str | None = None,
        scope: str = "once",
        grant_for: timedelta | None = None,
    ) -> Receipt:
        """Decide a pending, unexpired call (one transaction: the row, the receipt, the
        scope's grant); ``QueueError`` says why not."""
        by = by.strip() if isinstance(by, str) else ""
        if not by:
            raise QueueError("who decides is required (by)")
        if scope not in SCOPES:
            raise QueueError(f"unknown scope {scope!r} (once, session or project)")
        if scope != "once" and not approve:
            raise QueueError("a denial is for this call only (scope 'once')")
        if scope != "once" and (grant_for is None or grant_for <= timedelta(0)):
            raise QueueError(f"an approval for the {scope} needs a positive grant_for")
        reason = (reason.strip() or None) if isinstance(reason, str) else None
        now = self.clock()
        status, decision = ("approved", "approve") if approve else ("denied", "deny")
        with self._transaction(write=True) as session:
            changed = session.run(
                "UPDATE held SET status = ?, decided_by = ?, decided_at = ?, reason = ?"
                " WHERE id = ? AND status = 'pending' AND expires > ?",
                (status, by, iso(now), reason, held_id, iso(now)),
            )
            row = session.one(f"SELECT {_HELD_COLUMNS} FROM held WHERE id = ?", (held_id,))
            if row is None:
                raise QueueError("no such held call")
            held = self._held(row, now)
            if not changed:
                if held.status in ("approved", "denied"):
                    raise QueueError(f"already decided by {held.decided_by}")
                raise QueueError("expired")
            grant_id = grant_expires = None
            if scope != "once":
                target = held.session_id if scope == "session" else held.cwd
                if target is None:
                    what = "session id" if scope == "session" else "project (cwd)"
                    raise QueueError(f"the call has no {what} to scope a grant to")
                assert grant_for is not None
                grant = insert_grant(
                    session,
                    held.tool,
                    literal_regex(held.subject),
                    now,
                    now + grant_for,
                    f"approved by {by} (held call {held.id})",
                    session_id=target if scope == "session" else None,
                    project=target if scope == "project" else None,
                )
                grant_id, grant_expires = grant.id, grant.expires
            receipt_row = session.one(
                "INSERT INTO receipts (held_id, decided_at, decided_by, decision, scope,"
                " grant_id, grant_expires, reason, digest, tool, subject, session_id)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
                (
                    held.id,
                    iso(now),
                    by,
                    decision,
                    scope,
                    grant_id,
                    None if grant_expires is None else iso(grant_expires),
                    reason,
                    held.digest,
                    held.tool,
                    held.subject,
                    held.session_id,
                ),
            )
            assert receipt_row is not None
            self._announce(session, held.id)
        self._bump()
        return Receipt(
            id=int(receipt_row[0]),
            held_id=held.id,
            decided_at=_when(iso(now)),
            decided_by=by,
            decision=decision,
            scope=scope,
            grant_id=grant_id,
            grant_expires=None if grant_expires is None else _when(iso(grant_expires)),
            reason=reason,
            digest=held.digest,
            tool=held.tool,
            subject=held.subject,
            session_id=held.session_id,
        )

    def receipt_for(self, held_id: str) -> Receipt | None:
        """The receipt of a decided call (None: undecided, expired or unknown)."""
        with self._transaction() as session:
            row = session.one(
                f"SELECT {_RECEIPT_COLUMNS} FROM receipts WHERE held_id = ?", (held_id,)
            )
        return None if row is None else self._receipt(row)

    def receipts(self, *, limit: int = 100, session_id: str | None = None) -> list[Receipt]:
        """The newest ``limit`` receipts (of one session, if given), newest first."""
        where, params = "", tuple[str, ...]()
        if session_id is not None:
            where, params = "WHERE session_id = ? ", (session_id,)
        with self._transaction() as session:
            rows = session.rows(
                f"SELECT {_RECEIPT_COLUMNS} FROM receipts {where}ORDER BY id DESC LIMIT ?",
                (*params, max(0, int(limit))),
            )
        return [self._receipt(row) for row in rows]

    # -- notifications ------------------------------------------------------------------

    def _watch_generation(self) -> int:
        """The change counter now (read it before the row, then wait from it)."""
        self._ensure_watcher()
        with self._changed:
            return self._generation

    def wait_for_change(self, timeout_s: float) -> bool:
        """Wait until a held call or a receipt changes (in any process sharing the
        store): True, or False after ``timeout_s``. A True may be spurious (another
        change of the store): re-read what you wait for."""
        return self._wait(self._watch_generation(), timeout_s)

    def _wait(self, since: int, timeout_s: float) -> bool:
        with self._changed:
            self._waiters += 1
            self._changed.notify_all()  # a paused SQLite watcher resumes
            try:
                return (
                    self._changed.wait_for(
                        lambda: self._generation != since or self._closed, max(0.0, timeout_s)
                    )
                    and not self._closed
                )
            finally:
                self._waiters -= 1

    def _ensure_watcher(self) -> None:
        pid = os.getpid()
        with self._changed:
            if self._closed:
                raise QueueError("the queue is closed")
            if self._watcher is not None and self._watcher_pid == pid:
                return
            # None yet, or inherited across a fork (its thread did not come along, and
            # its connection is the parent's: never touched here).
            self._watcher_pid = pid
            self._watcher = threading.Thread(
                target=self._watch, name="ahp-approval-queue-watcher", daemon=True
            )
            self._watcher.start()

    def _stopping(self) -> bool:
        with self._changed:
            return self._closed or self._watcher_pid != os.getpid()

    def _watch(self) -> None:
        while not self._stopping():
            try:
                connection = self._db.dedicated_connection()
            except DatabaseError:
                with self._changed:
                    self._changed.wait(RETRY_S)
                continue
            try:
                if self._db.engine == "postgresql":
                    self._listen(connection)
                else:
                    self._poll(connection)
            except Exception:  # a lost connection: waiters re-read on their own meanwhile
                self._bump()
            finally:
                with contextlib.suppress(Exception):
                    connection.close()
            if not self._stopping():
                with self._changed:
                    self._changed.wait(RETRY_S)

    def _listen(self, connection: Any) -> None:
        connection.execute(f"LISTEN {CHANNEL}")
        self._bump()  # whatever was announced before LISTEN: waiters re-read
        while not self._stopping():
            for _ in connection.notifies(timeout=RECHECK_S, stop_after=1):
                self._bump()

    def _poll(self, connection: Any) -> None:
        def version() -> int:
            return int(connection.execute("PRAGMA data_version").fetchone()[0])

        last = version()
        self._bump()  # whatever was committed before the first read: waiters re-read
        while True:
            with self._changed:
                while self._waiters == 0 and not self._closed:
                    self._changed.wait()  # nobody waits: no polling
                if self._closed:
                    return
            current = version()
            if current != last:
                last = current
                self._bump()
            with self._changed:
                if self._changed.wait_for(lambda: self._closed, POLL_S):
                    return


_QUEUES: weakref.WeakSet[Queue] = weakref.WeakSet()


def _reset_in_child() -> None:
    for queue in list(_QUEUES):
        queue._after_fork_in_child()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_in_child)

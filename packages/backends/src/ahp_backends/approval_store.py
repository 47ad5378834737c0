"""The approval store's shared parts: its schema (:data:`SCHEMA`, versioned, opened
through :mod:`ahp_backends.db`), the grant row (:class:`Grant`, :func:`insert_grant`), the
subject of a call (:func:`subject_of`) and the UTC time format (:func:`iso`).

Imported by :mod:`ahp_backends.approval` (the grants and their decision) and by
:mod:`ahp_backends.approval_queue` (the held calls and their receipts), which both
read and write the same database; it imports neither. Never opens a database itself,
never caches a row; times are UTC.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final

from ahp_backends.db import Schema, Session, Step
from ahp_backends.patterns import PatternError, compile_pattern

__all__ = [
    "BUSY_TIMEOUT_MS",
    "GRANT_COLUMNS",
    "SCHEMA",
    "SCHEMA_VERSION",
    "SUBJECT_FIELDS",
    "Grant",
    "insert_grant",
    "iso",
    "literal_regex",
    "parse_iso",
    "row_grant",
    "subject_of",
    "utcnow",
]

SUBJECT_FIELDS: Final = (
    "command",
    "cmd",
    "path",
    "file_path",
    "filePath",
    "url",
    "uri",
    "pattern",
    "query",
)


BUSY_TIMEOUT_MS: Final = 10_000


def utcnow() -> datetime:
    return datetime.now(UTC)


def iso(moment: datetime) -> str:
    """UTC ISO 8601 with milliseconds and ``Z``."""
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def subject_of(tool_input: Mapping[str, Any]) -> str:
    """The call's main argument (see :data:`SUBJECT_FIELDS`), else the input as JSON."""
    for name in SUBJECT_FIELDS:
        value = tool_input.get(name)
        if isinstance(value, str):
            return value
    if not tool_input:
        return ""
    return json.dumps(tool_input, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def literal_regex(text: str) -> str:
    """``text`` as a regex matching exactly it (only regex syntax is escaped, not spaces)."""
    return re.sub(r"([\\.^$*+?{}\[\]|()])", r"\\\1", text)


@dataclass(frozen=True, slots=True)
class Grant:
    """One recorded grant. ``match`` is a regex over the whole subject. A scoped grant
    covers only the calls of one session (``session_id``) or of one project (``project``:
    the event's ``session.cwd``, exactly); neither: every call."""

    id: int
    tool: str
    match: str
    created: datetime
    expires: datetime | None
    revoked: datetime | None = None
    note: str | None = None
    session_id: str | None = None
    project: str | None = None

    def status(self, now: datetime) -> str:
        """``revoked``, ``expired`` or ``live``."""
        if self.revoked is not None:
            return "revoked"
        if self.expires is not None and now >= self.expires:
            return "expired"
        return "live"

    @property
    def scope(self) -> str:
        """``session ID``, ``project CWD`` or ``any``."""
        if self.session_id is not None:
            return f"session {self.session_id}"
        if self.project is not None:
            return f"project {self.project}"
        return "any"

    def covers(
        self, tool: str, subject: str, session_id: str | None = None, cwd: str | None = None
    ) -> bool:
        if self.tool != "*" and self.tool != tool:
            return False
        if self.session_id is not None and self.session_id != session_id:
            return False
        if self.project is not None and self.project != cwd:
            return False
        try:
            return compile_pattern(self.match).fullmatch(subject)
        except PatternError:
            return False  # a corrupt row never grants anything

    def to_json(self, now: datetime) -> dict[str, Any]:
        return {
            "id": self.id,
            "tool": self.tool,
            "match": self.match,
            "created": iso(self.created),
            "expires": None if self.expires is None else iso(self.expires),
            "revoked": None if self.revoked is None else iso(self.revoked),
            "status": self.status(now),
            "note": self.note,
            "session": self.session_id,
            "project": self.project,
        }


def _legacy_version(session: Session, tables: set[str]) -> int | None:
    """The version of an SQLite store made before ``ahp_schema``: its ``meta`` rows."""
    if "meta" not in tables:
        return None
    meta = dict(session.rows("SELECT key, value FROM meta"))
    if meta.get("app") != "ahp-approval":
        return None
    version = str(meta.get("schema"))
    return int(version) if version.isdigit() else None


# Version 1 is the schema of the first release, verbatim for SQLite (a ``meta`` table
# held its version). Version 2 keeps the version in ``ahp_schema`` (that ``meta`` row now
# says so, which older code refuses as an unsupported version) and indexes exactly what
# candidates() reads: the unrevoked grants of a tool, in id order.
_GRANTS_PG: Final = (
    "CREATE TABLE grants ("
    " id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,"
    " tool TEXT NOT NULL,"
    " match TEXT NOT NULL,"
    " created TEXT NOT NULL,"
    " expires TEXT,"
    " revoked TEXT,"
    " note TEXT)"
)
_PG_ID: Final = "BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY"


def _step3(id_column: str) -> tuple[str, ...]:
    """Version 3: grants gain a scope (a session id, or a project's cwd; both NULL: any
    call), and the held calls and their receipts (:mod:`ahp_backends.approval_queue`)."""
    return (
        "ALTER TABLE grants ADD COLUMN session_id TEXT",
        "ALTER TABLE grants ADD COLUMN project TEXT",
        "CREATE TABLE held ("
        " id TEXT PRIMARY KEY,"
        " created TEXT NOT NULL,"
        " expires TEXT NOT NULL,"
        " tool TEXT NOT NULL,"
        " kind TEXT,"
        " input_json TEXT NOT NULL,"
        " subject TEXT NOT NULL,"
        " session_id TEXT,"
        " harness TEXT,"
        " cwd TEXT,"
        " rule TEXT NOT NULL,"
        " digest TEXT NOT NULL,"
        " status TEXT NOT NULL,"
        " decided_by TEXT,"
        " decided_at TEXT,"
        " reason TEXT)",
        "CREATE INDEX held_pending ON held (status, created)",
        "CREATE INDEX held_session ON held (session_id, created)",
        "CREATE TABLE receipts ("
        f" id {id_column},"
        " held_id TEXT NOT NULL UNIQUE,"
        " decided_at TEXT NOT NULL,"
        " decided_by TEXT NOT NULL,"
        " decision TEXT NOT NULL,"
        " scope TEXT NOT NULL,"
        " grant_id BIGINT,"
        " grant_expires TEXT,"
        " reason TEXT,"
        " digest TEXT NOT NULL,"
        " tool TEXT NOT NULL,"
        " subject TEXT NOT NULL,"
        " session_id TEXT)",
        "CREATE INDEX receipts_session ON receipts (session_id, id)",
    )


SCHEMA: Final = Schema(
    app="ahp-approval",
    steps=(
        Step(
            sqlite=(
                "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
                "CREATE TABLE IF NOT EXISTS grants ("
                " id INTEGER PRIMARY KEY AUTOINCREMENT,"
                " tool TEXT NOT NULL,"
                " match TEXT NOT NULL,"
                " created TEXT NOT NULL,"
                " expires TEXT,"
                " revoked TEXT,"
                " note TEXT)",
                "CREATE INDEX IF NOT EXISTS grants_by_tool ON grants (tool, revoked)",
                "INSERT OR IGNORE INTO meta (key, value) VALUES ('app', 'ahp-approval')",
                "INSERT OR IGNORE INTO meta (key, value) VALUES ('schema', '1')",
            ),
            postgresql=(_GRANTS_PG, "CREATE INDEX grants_by_tool ON grants (tool, revoked)"),
        ),
        Step(
            sqlite=(
                "UPDATE meta SET value = 'see ahp_schema' WHERE key = 'schema'",
                "DROP INDEX IF EXISTS grants_by_tool",
                "CREATE INDEX grants_live ON grants (tool, id) WHERE revoked IS NULL",
            ),
            postgresql=(
                "DROP INDEX IF EXISTS grants_by_tool",
                "CREATE INDEX grants_live ON grants (tool, id) WHERE revoked IS NULL",
            ),
        ),
        Step(sqlite=_step3("INTEGER PRIMARY KEY AUTOINCREMENT"), postgresql=_step3(_PG_ID)),
    ),
    tables=frozenset({"grants", "held", "receipts"}),
    noun="approval store",
    missing="no approval store here (a 'grant' creates one)",
    legacy=_legacy_version,
)
SCHEMA_VERSION: Final = str(SCHEMA.version)
GRANT_COLUMNS: Final = "id, tool, match, created, expires, revoked, note, session_id, project"


def parse_iso(text: str | None) -> datetime | None:
    """A stored time (ISO 8601) as a datetime; None stays None."""
    return None if text is None else datetime.fromisoformat(text)


def row_grant(row: Sequence[Any]) -> Grant:
    created = parse_iso(row[3])
    assert created is not None
    return Grant(
        int(row[0]), row[1], row[2], created, parse_iso(row[4]), parse_iso(row[5]), *row[6:9]
    )


def insert_grant(
    session: Session,
    tool: str,
    match: str,
    created: datetime,
    expires: datetime | None,
    note: str | None = None,
    *,
    session_id: str | None = None,
    project: str | None = None,
) -> Grant:
    """Record a grant inside ``session`` (the one insert, for ``grant`` and a decision)."""
    row = session.one(
        "INSERT INTO grants (tool, match, created, expires, note, session_id, project)"
        " VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING id",
        (
            tool,
            match,
            iso(created),
            None if expires is None else iso(expires),
            note,
            session_id,
            project,
        ),
    )
    assert row is not None
    return Grant(int(row[0]), tool, match, created, expires, None, note, session_id, project)

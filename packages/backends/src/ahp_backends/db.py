"""The database layer approval and audit share: a file path (SQLite) or a PostgreSQL URL.

Owns opening a ``--db`` target (a path: SQLite, the embedded default; a
``postgresql://`` or ``postgres://`` URL: a shared server, through psycopg 3, imported
only then), transactions on either engine, the placeholder rule, and the versioned
schema: one ``ahp_schema`` row per application (``app``, ``version``), created and
upgraded by one ordered list of :class:`Step` s, each upgrading version ``i`` to
``i + 1``, run inside one transaction that every other opener waits for (SQLite
``BEGIN IMMEDIATE``; PostgreSQL a transaction-scoped advisory lock). A database whose
version is newer than the code is refused; so is one that holds other tables but no
``ahp_schema`` (it is someone else's).

SQL is written once with ``?`` placeholders (turned into ``%s`` for psycopg, so the
statements themselves never contain ``?`` or ``%``); only DDL differs per engine, and
each :class:`Step` spells both. Every operation is one transaction
(:meth:`Database.transaction`); SQLite runs them on one connection behind a lock (WAL,
busy timeout), PostgreSQL on a single connection for one-shot commands or a
``psycopg_pool.ConnectionPool`` for a serving process. Nothing is cached across
transactions, so every process sharing a database sees every committed change.

A database never crosses a fork (a pre-fork server's workers, ``--workers N``): just
before any ``os.fork()`` the process's open databases (not ``:memory:`` ones) release
their connections and pool threads, and each process, the parent and every child,
opens its own again at its next transaction (the schema check included), with the
parameters it was opened with. So a server validates its ``--db`` once, reports a bad
one before forking, and its workers never share a connection or a pool.

Never echoes a database error's text (it may carry a host, a user, a query): a
:class:`DatabaseError` says which target (a URL without its password) and a fixed
reason, naming at most the exception's type. Connecting is bounded
(``connect_timeout``, default :data:`CONNECT_TIMEOUT_S`, unless the URL sets one).
"""

from __future__ import annotations

import contextlib
import os
import re
import threading
import urllib.parse
import weakref
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    import sqlite3

__all__ = [
    "CONNECT_TIMEOUT_S",
    "IN_MEMORY",
    "Database",
    "DatabaseError",
    "Schema",
    "Session",
    "Step",
    "check_target",
    "is_conninfo",
    "is_url",
    "open_database",
    "shown",
]

URL_SCHEMES: Final = ("postgresql://", "postgres://")
IN_MEMORY: Final = ":memory:"  # SQLite's own name for a private database
CONNECT_TIMEOUT_S: Final = 10
INSTALL_HINT: Final = "PostgreSQL needs psycopg: pip install 'ahp-backends[postgres]'"
VERSION_TABLE: Final = "ahp_schema"
# The key of the advisory lock every creator and upgrader of a PostgreSQL schema takes
# (any constant; "ahp_schema" in ASCII, so that it is recognisable in pg_locks).
_PG_LOCK_KEY: Final = 0x6168705F736368


class DatabaseError(Exception):
    """A database cannot be used, or an operation on it was refused (``target: reason``)."""

    def __init__(self, target: str, reason: str) -> None:
        super().__init__(reason)
        self.target = target
        self.reason = reason

    def __str__(self) -> str:
        return f"{self.target}: {self.reason}"


def is_url(target: str | os.PathLike[str]) -> bool:
    """Whether ``target`` names a PostgreSQL server (else it is an SQLite file path)."""
    return isinstance(target, str) and target.lower().startswith(URL_SCHEMES)


def is_conninfo(target: str | os.PathLike[str]) -> bool:
    """Whether ``target`` reads as libpq's ``key=value`` connection string (not accepted)."""
    return isinstance(target, str) and not is_url(target) and bool(_CONNINFO.match(target))


def check_target(target: str | os.PathLike[str]) -> None:
    """Refuse a ``--db`` that is neither a path nor a URL (:class:`DatabaseError`).

    A ``key=value`` connection string (``host=db password=...``) would otherwise be
    taken for an SQLite file of that name, created beside the command."""
    if is_conninfo(target):
        raise DatabaseError(
            shown(target),
            "a key=value connection string is not accepted; give a postgresql:// URL "
            "(the password in PGPASSWORD or ~/.pgpass), or ./NAME for a file of that name",
        )


def shown(target: str | os.PathLike[str]) -> str:
    """``target`` as messages and deny reasons may show it: without its credentials.

    The one redaction of a ``--db``. A URL loses the password of its user info (parsed
    as libpq does, but to the last ``@`` before any ``/``) and every
    query parameter whose name, percent-decoded, contains ``pass`` or ``secret``
    (``password``, ``sslpassword``, ``pass%77ord``, ``oauth_client_secret``, ...); a
    ``key=value`` string loses the same keys with their values (quoted ones included),
    and anything after a part it cannot read. A path is shown as it is."""
    text = os.fspath(target)
    if is_conninfo(text):
        return _conninfo_shown(text)
    if not is_url(text):
        return text
    scheme, _, rest = text.partition("://")
    # libpq ends the user info at an "@" before any "/"; the last one hides the most
    slash = rest.find("/")
    credentials_end = rest.rfind("@", 0, slash if slash >= 0 else len(rest))
    if credentials_end >= 0:
        user = rest[:credentials_end].partition(":")[0]
        host_and_rest = rest[credentials_end + 1 :]
        rest = f"{user}@{host_and_rest}" if user else host_and_rest
    head, mark, query = rest.partition("?")
    if mark:  # libpq also takes credentials as query parameters
        kept = [p for p in query.split("&") if not _is_secret(p.partition("=")[0])]
        rest = head + ("?" + "&".join(kept) if kept else "")
    return f"{scheme}://{rest}"


_SECRET_WORDS: Final = ("pass", "secret")
_CONNINFO: Final = re.compile(r"\s*[A-Za-z_][A-Za-z0-9_]*\s*=")


def _is_secret(name: str) -> bool:
    decoded = urllib.parse.unquote(name).lower()
    return any(word in decoded for word in _SECRET_WORDS)


def _conninfo_shown(text: str) -> str:
    """A ``key=value`` string without its secret pairs (libpq's quoting, read linearly)."""
    kept: list[str] = []
    i, n = 0, len(text)
    while True:
        while i < n and text[i].isspace():
            i += 1
        if i == n:
            return " ".join(kept)
        key = _CONNINFO.match(text, i)
        if key is None:
            return " ".join([*kept, "..."])
        name = key.group().strip().rstrip("=").strip()
        i = key.end()
        while i < n and text[i].isspace():
            i += 1
        start, quoted = i, i < n and text[i] == "'"
        i += quoted
        while i < n and (text[i] != "'" if quoted else not text[i].isspace()):
            i += 2 if text[i] == "\\" else 1
        if quoted and i >= n:  # an unterminated quote: show nothing of it
            return " ".join([*kept, "..."])
        i = min(i + quoted, n)
        if not _is_secret(name):
            kept.append(f"{name}={text[start:i]}")


# --------------------------------------------------------------------------- schema


@dataclass(frozen=True, slots=True)
class Step:
    """One schema upgrade (from the version before it to its own), spelled per engine."""

    sqlite: tuple[str, ...]
    postgresql: tuple[str, ...]

    def statements(self, engine: str) -> tuple[str, ...]:
        return self.sqlite if engine == "sqlite" else self.postgresql


@dataclass(frozen=True, slots=True)
class Schema:
    """An application's tables: ``steps[i]`` upgrades version ``i`` to ``i + 1``.

    ``tables`` are the tables the application owns (how its own data is told from
    someone else's). ``legacy`` reads the version of a database made before
    ``ahp_schema`` existed (None: not one of ours). ``noun`` names the database in
    messages ("approval store"); ``missing`` is the reason given when ``create=False``
    and the file is absent.
    """

    app: str
    steps: tuple[Step, ...]
    tables: frozenset[str]
    noun: str
    missing: str
    legacy: Callable[[Session, set[str]], int | None] | None = None

    @property
    def version(self) -> int:
        return len(self.steps)


# --------------------------------------------------------------------------- sessions


class Session:
    """One transaction on either engine: statements with ``?`` placeholders."""

    def __init__(self, engine: str, cursor: Any) -> None:
        self.engine = engine
        self._cursor = cursor

    def _run(self, sql: str, params: Sequence[object]) -> Any:
        if self.engine == "postgresql":
            sql = sql.replace("?", "%s")
        return self._cursor.execute(sql, tuple(params))

    def rows(self, sql: str, params: Sequence[object] = ()) -> list[tuple[Any, ...]]:
        """All rows of a query."""
        return [tuple(row) for row in self._run(sql, params).fetchall()]

    def one(self, sql: str, params: Sequence[object] = ()) -> tuple[Any, ...] | None:
        """The first row of a query, or None."""
        row = self._run(sql, params).fetchone()
        return None if row is None else tuple(row)

    def run(self, sql: str, params: Sequence[object] = ()) -> int:
        """Run a statement; the number of rows it changed."""
        return int(self._run(sql, params).rowcount)

    def tables(self) -> set[str]:
        """The tables of the database (PostgreSQL: of the current schema)."""
        if self.engine == "sqlite":
            found = self.rows("SELECT name FROM sqlite_master WHERE type = 'table'")
            return {str(r[0]) for r in found if not str(r[0]).startswith("sqlite_")}
        found = self.rows("SELECT tablename FROM pg_tables WHERE schemaname = current_schema()")
        return {str(r[0]) for r in found}


# --------------------------------------------------------------------------- the database


class Database:
    """An open database (see :func:`open_database`); each transaction is independent."""

    def __init__(self, target: str, engine: str, schema: Schema) -> None:
        self.target = target
        self.shown = shown(target)
        self.engine = engine
        self.schema = schema
        self._lock = threading.Lock()
        self._sqlite: sqlite3.Connection | None = None
        self._pg: Any = None  # one psycopg connection (used behind the lock)
        self._pool: Any = None  # or a psycopg_pool.ConnectionPool
        self._wait_s = CONNECT_TIMEOUT_S
        self._engine_errors: tuple[type[Exception], ...] = ()
        self._create = True
        self._opener: Callable[[], None] | None = None  # opens it again after a fork
        self._released = False
        self._reopening = threading.Lock()
        self._opening: int | None = None  # the thread running the opener (its schema check)
        self._conninfo: str | None = None  # PostgreSQL: what a dedicated connection uses
        self._busy_timeout_ms = 10_000

    def error(self, reason: str) -> DatabaseError:
        return DatabaseError(self.shown, reason)

    @contextlib.contextmanager
    def transaction(self, *, write: bool = False) -> Iterator[Session]:
        """One transaction: committed when the block ends, rolled back if it raises.

        ``write`` takes SQLite's write lock at the start (``BEGIN IMMEDIATE``), so a
        read-then-write never meets a busy error half-way; PostgreSQL needs no hint.
        An engine's error (a lost server, a busy file, a closed database) becomes a
        :class:`DatabaseError` naming only its type; anything else the block raises
        passes through unchanged.
        """
        try:
            with self._transaction(write) as session:
                yield session
        except self._engine_errors as exc:
            raise self.error(f"the database failed ({type(exc).__name__})") from None

    @contextlib.contextmanager
    def _transaction(self, write: bool) -> Iterator[Session]:
        if self._released and self._opening != threading.get_ident():
            self._reopen()
        if self._sqlite is not None:
            with self._lock:
                db = self._sqlite
                db.execute("BEGIN IMMEDIATE" if write else "BEGIN")
                try:
                    yield Session("sqlite", db.cursor())
                except BaseException:
                    with contextlib.suppress(Exception):  # the error raised is the one to see
                        db.execute("ROLLBACK")
                    raise
                db.execute("COMMIT")
        elif self._pool is not None:
            with self._pool.connection(timeout=self._wait_s) as conn, conn.transaction():
                yield Session("postgresql", conn.cursor())
        else:
            with self._lock:
                if self._pg is None:
                    raise self.error("the database is closed")
                with self._pg.transaction():
                    yield Session("postgresql", self._pg.cursor())

    def close(self) -> None:
        _OPEN.discard(self)
        self._opener = None
        with self._lock:
            if self._sqlite is not None:
                self._sqlite.close()
            if self._pg is not None:
                self._pg.close()
                self._pg = None
            if self._pool is not None:
                self._pool.close()

    def _release(self) -> None:
        """Close the connections (and pool threads) before a fork; reopened on next use."""
        if self._opener is None or self.target == IN_MEMORY:
            return
        with self._reopening, self._lock:
            if self._sqlite is not None:
                self._sqlite.close()
                self._sqlite = None
            if self._pg is not None:
                self._pg.close()
                self._pg = None
            if self._pool is not None:
                self._pool.close()
                self._pool = None
            self._released = True

    def _reopen(self) -> None:
        """Open it again after a fork; every transaction meanwhile waits for this one.

        ``_released`` turns false only once the connection (or pool) is open and the
        schema checked: a transaction that starts while another thread is reopening
        waits here, never sees a half-open database ("closed")."""
        with self._reopening:
            opener = self._opener
            if not self._released or opener is None:
                return
            self._opening = threading.get_ident()  # its own schema check runs as usual
            try:
                opener()
            finally:
                self._opening = None
            self._released = False

    def dedicated_connection(self) -> Any:
        """A new connection of its own to the same database, outside every transaction,
        lock and pool, in autocommit mode (the caller uses it from one thread and closes
        it): a PostgreSQL ``LISTEN``, or a watch on SQLite's ``PRAGMA data_version``.
        It is not released before a fork: open it only in the process that uses it.
        Raises :class:`DatabaseError` (a fixed reason) when it cannot connect."""
        if self.engine == "sqlite":
            import sqlite3

            try:
                return sqlite3.connect(
                    self.target,
                    timeout=self._busy_timeout_ms / 1000,
                    isolation_level=None,
                    check_same_thread=False,
                )
            except sqlite3.Error:
                raise self.error(f"cannot open the {self.schema.noun}") from None
        import psycopg

        if self._conninfo is None:
            raise self.error("the database is closed")
        try:
            return psycopg.connect(self._conninfo, autocommit=True)
        except psycopg.Error as exc:
            raise self.error(f"cannot connect ({type(exc).__name__})") from None

    # -- opening ------------------------------------------------------------------------

    def _open_sqlite(self, *, create: bool, busy_timeout_ms: int, synchronous: str) -> None:
        import sqlite3

        path, noun = self.target, self.schema.noun
        if path != IN_MEMORY:
            if os.path.isdir(path):
                raise self.error(f"is a directory, not an {noun}")
            if not create and not os.path.exists(path):
                raise self.error(self.schema.missing)
            if not os.path.isdir(os.path.dirname(os.path.abspath(path))):
                raise self.error("the directory does not exist")
        try:
            db = sqlite3.connect(
                path,
                timeout=busy_timeout_ms / 1000,
                isolation_level=None,  # transactions are explicit (see transaction())
                check_same_thread=False,  # used from the server's threads, behind the lock
            )
        except sqlite3.Error:
            raise self.error(f"cannot open the {noun}") from None
        self._sqlite = db
        self._busy_timeout_ms = busy_timeout_ms
        try:
            db.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
            db.execute(f"PRAGMA synchronous = {synchronous.upper()}")
            self._setup()
            mode = db.execute("PRAGMA journal_mode").fetchone()[0]
            if path != IN_MEMORY and str(mode).lower() != "wal":
                # Readers then never block the writer (and the reverse). Switching needs a
                # moment alone with the file; if another process holds it, it switches later.
                with contextlib.suppress(sqlite3.OperationalError):
                    db.execute("PRAGMA journal_mode = WAL")
        except DatabaseError:
            db.close()
            raise
        except sqlite3.DatabaseError as exc:
            db.close()
            text = str(exc)
            reason = "not an SQLite database" if "not a database" in text else type(exc).__name__
            raise self.error(f"cannot use the {noun} ({reason})") from None
        self._engine_errors = (sqlite3.Error,)  # from now on (setup reports its own)

    def _open_postgresql(self, *, pool_size: int, busy_timeout_ms: int) -> None:
        try:
            import psycopg
            from psycopg.conninfo import conninfo_to_dict, make_conninfo
        except ImportError:
            raise self.error(INSTALL_HINT) from None
        try:
            params = conninfo_to_dict(self.target)
        except psycopg.Error:
            raise self.error("not a valid PostgreSQL URL (postgresql://USER@HOST/DB)") from None
        params.setdefault("connect_timeout", CONNECT_TIMEOUT_S)
        with contextlib.suppress(TypeError, ValueError):
            self._wait_s = max(2, int(str(params["connect_timeout"])))
        conninfo = make_conninfo("", **params)
        self._conninfo = conninfo
        statement_timeout = f"SET statement_timeout = {int(busy_timeout_ms)}"
        try:
            conn = psycopg.connect(conninfo, autocommit=True)
        except psycopg.Error as exc:
            raise self.error(
                f"cannot connect ({type(exc).__name__}; is the server running, "
                "and do the URL's host, port, user and database exist?)"
            ) from None
        try:
            if busy_timeout_ms:
                conn.execute(statement_timeout)
            self._pg = conn
            self._setup()
        except DatabaseError:
            conn.close()
            raise
        except psycopg.Error as exc:
            conn.close()
            raise self.error(f"cannot use the {self.schema.noun} ({type(exc).__name__})") from None
        self._engine_errors = (psycopg.Error,)  # from now on (setup reports its own)
        if pool_size <= 0:
            return
        from psycopg_pool import ConnectionPool

        def configure(connection: Any) -> None:
            if busy_timeout_ms:
                connection.execute(statement_timeout)

        # The checked connection starts the pool, so a serving process never waits for
        # the pool's first background connection.
        pool: Any = ConnectionPool(
            conninfo,
            min_size=1,
            max_size=pool_size,
            kwargs={"autocommit": True},
            configure=configure,
            check=ConnectionPool.check_connection,  # a server restart costs no request
            timeout=self._wait_s,
            open=False,
            name=self.schema.app,
        )
        conn.close()
        self._pg = None
        try:
            pool.open(wait=True, timeout=self._wait_s)
        except Exception as exc:
            pool.close()
            raise self.error(f"cannot connect ({type(exc).__name__})") from None
        self._pool = pool

    # -- the schema ---------------------------------------------------------------------

    def _version(self, session: Session, tables: set[str]) -> int:
        """The schema version found, 0 for an empty database; refuses a foreign one."""
        schema = self.schema
        if VERSION_TABLE in tables:
            row = session.one(f"SELECT version FROM {VERSION_TABLE} WHERE app = ?", (schema.app,))
            if row is not None:
                return int(row[0])
        legacy = schema.legacy(session, tables) if schema.legacy is not None else None
        if legacy is not None:
            return legacy
        if tables & schema.tables:
            raise self.error(f"tables named like an {schema.noun}'s, but no schema version")
        # Other tables beside ahp_schema are another application's of this kit (approval
        # and audit may share one database); without ahp_schema they are a stranger's.
        if VERSION_TABLE not in tables and tables:
            kind = "an SQLite database" if self.engine == "sqlite" else "a database"
            raise self.error(f"{kind} that is not an {schema.noun} (it has other tables)")
        return 0

    def _check(self, version: int) -> None:
        if version > self.schema.version:
            raise self.error(
                f"the {self.schema.noun} has schema version {version}, newer than this "
                f"ahp-backends knows ({self.schema.version}): upgrade ahp-backends"
            )

    def _setup(self) -> None:
        """Create or upgrade the schema; other openers wait, then find it done."""
        with self.transaction() as session:  # the common case: already current
            version = self._version(session, session.tables())
        self._check(version)
        if version == self.schema.version:
            return
        if version == 0 and not self._create:
            raise self.error(self.schema.missing)
        with self.transaction(write=True) as session:
            if self.engine == "postgresql":
                session.one("SELECT pg_advisory_xact_lock(?)", (_PG_LOCK_KEY,))
            tables = session.tables()  # another process may have upgraded it meanwhile
            version = self._version(session, tables)
            self._check(version)
            if VERSION_TABLE not in tables:
                session.run(
                    f"CREATE TABLE {VERSION_TABLE} (app TEXT PRIMARY KEY, version INTEGER NOT NULL)"
                )
            for step in self.schema.steps[version:]:
                for statement in step.statements(self.engine):
                    session.run(statement)
            changed = session.run(
                f"UPDATE {VERSION_TABLE} SET version = ? WHERE app = ?",
                (self.schema.version, self.schema.app),
            )
            if not changed:
                session.run(
                    f"INSERT INTO {VERSION_TABLE} (app, version) VALUES (?, ?)",
                    (self.schema.app, self.schema.version),
                )


def open_database(
    target: str | os.PathLike[str],
    schema: Schema,
    *,
    create: bool = True,
    pool_size: int = 0,
    busy_timeout_ms: int = 10_000,
    synchronous: str = "normal",
) -> Database:
    """Open ``target`` (a path or a PostgreSQL URL) with ``schema`` created or upgraded.

    ``create=False`` refuses a missing SQLite file, or a database without the schema,
    instead of creating it (a PostgreSQL database must exist either way; ``True``
    creates its tables). ``pool_size`` > 0 serves
    PostgreSQL from a connection pool of at most that many connections (a serving
    process); else one connection is used. ``busy_timeout_ms`` bounds a wait for a
    busy database (SQLite's busy timeout; PostgreSQL's ``statement_timeout``).
    ``synchronous`` is SQLite's (``normal`` or ``full``). Raises :class:`DatabaseError`.
    """
    text = os.fspath(target)
    check_target(text)
    if synchronous not in ("normal", "full"):
        raise ValueError("synchronous must be 'normal' or 'full'")
    database = Database(text, "postgresql" if is_url(text) else "sqlite", schema)
    database._create = create

    def opener() -> None:
        if database.engine == "postgresql":
            database._open_postgresql(pool_size=pool_size, busy_timeout_ms=busy_timeout_ms)
        else:
            database._open_sqlite(
                create=create, busy_timeout_ms=busy_timeout_ms, synchronous=synchronous
            )

    opener()
    database._opener = opener
    _OPEN.add(database)
    return database


_OPEN: weakref.WeakSet[Database] = weakref.WeakSet()
"""The databases open in this process, released before a fork (see the module doc)."""


def _release_before_fork() -> None:
    for database in list(_OPEN):
        with contextlib.suppress(Exception):  # a fork must not fail for a closing socket
            database._release()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(before=_release_before_fork)

"""``ahp_backends.db``: one database layer, SQLite or PostgreSQL, versioned, refusing clearly.

What this file shows, on both engines where the point is not one engine's (``database``
in ``conftest.py``: a fresh SQLite file or a fresh database on a real PostgreSQL server
the tests start themselves):

- upgrades: an approval store of schema version 1 (the first release's tables, made
  here with that release's statements) opens with this code, keeps its grants, and
  is at version 2 afterwards; an audit database of the first release opens, keeps its
  events and still refuses duplicates;
- a database of a newer schema version is refused by every command, with the version
  found and the one known;
- a database that holds someone else's tables is refused; approval and audit may share
  one database (each has its own ``ahp_schema`` row);
- first use by many processes at once: every ``grant`` on a fresh database succeeds,
  ids 1..N (the schema is created once, the others wait for it);
- bad URLs, an unreachable server, a server that never answers, a database that does
  not exist, a missing driver: exit 2 with a one-line reason, no traceback, no password
  echoed, no hang (the connect timeout is bounded);
- an SQLite user never imports psycopg.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from ahp_backends import approval, audit, db

Run = Callable[..., subprocess.CompletedProcess[bytes]]
Query = Callable[..., list[tuple[Any, ...]]]

# The first release's approval store, verbatim (approval.py's _SCHEMA, schema "1").
APPROVAL_V1_SQLITE = (
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
)
# The first release's audit database, verbatim (audit.py's _SCHEMA, user_version 1).
AUDIT_V1_SQLITE = (
    "CREATE TABLE IF NOT EXISTS events ("
    " seq INTEGER PRIMARY KEY AUTOINCREMENT, source TEXT NOT NULL, event_id TEXT NOT NULL,"
    " type TEXT NOT NULL, time TEXT, ts REAL NOT NULL, session_id TEXT, turn_id TEXT,"
    " call_id TEXT, tool TEXT, parent_event_id TEXT, received_at TEXT NOT NULL,"
    " event TEXT NOT NULL, UNIQUE (source, event_id))",
    "CREATE INDEX IF NOT EXISTS events_by_session ON events (session_id, ts)",
    "CREATE INDEX IF NOT EXISTS events_by_type ON events (type, ts)",
    "PRAGMA user_version = 1",
)
GRANTS_V1 = [
    ("Bash", "git push origin main", "2026-08-24T08:00:00.000Z", None, None, "kept"),
    ("Read", ".*", "2026-08-24T08:01:00.000Z", "2126-08-24T08:01:00.000Z", None, None),
    ("Bash", "rm -rf /", "2026-08-24T08:02:00.000Z", None, "2026-08-24T08:03:00.000Z", None),
]


def execute(target: str, statements: tuple[str, ...] | list[str]) -> None:
    """Run statements in one transaction with the engine's own driver (not our layer)."""
    if db.is_url(target):
        import psycopg

        with psycopg.connect(target) as conn:
            for statement in statements:
                conn.execute(statement)
        return
    import sqlite3

    conn = sqlite3.connect(target)
    try:
        with conn:
            for statement in statements:
                conn.execute(statement)
    finally:
        conn.close()


def approval_v1(target: str) -> None:
    """An approval store as the first release made it, with three grants."""
    if db.is_url(target):  # no release wrote PostgreSQL v1; the v1 step is its v1
        statements = list(approval.SCHEMA.steps[0].postgresql)
        statements += [
            "CREATE TABLE ahp_schema (app TEXT PRIMARY KEY, version INTEGER NOT NULL)",
            "INSERT INTO ahp_schema VALUES ('ahp-approval', 1)",
        ]
    else:
        statements = list(APPROVAL_V1_SQLITE)
    for tool, match, created, expires, revoked, note in GRANTS_V1:
        values = ", ".join(
            "NULL" if v is None else "'" + v.replace("'", "''") + "'"
            for v in (tool, match, created, expires, revoked, note)
        )
        statements.append(
            f"INSERT INTO grants (tool, match, created, expires, revoked, note) VALUES ({values})"
        )
    execute(target, statements)


def refused(done: subprocess.CompletedProcess[bytes], *fragments: str) -> str:
    err = done.stderr.decode()
    assert done.returncode == 2, (done.returncode, err)
    assert done.stdout == b""
    assert "Traceback" not in err
    assert err.startswith("error: ") and err.count("\n") == 1, err
    for fragment in fragments:
        assert fragment in err, (fragment, err)
    return err


# --------------------------------------------------------------------------- versions


def test_an_approval_store_of_version_1_is_upgraded_and_keeps_its_grants(
    database: str, query: Query, run_backend: Run
) -> None:
    approval_v1(database)
    store = approval.Store(database)
    try:
        grants = store.grants(include_revoked=True)
        assert [(g.id, g.tool, g.match, g.note) for g in grants] == [
            (1, "Bash", "git push origin main", "kept"),
            (2, "Read", ".*", None),
            (3, "Bash", "rm -rf /", None),
        ]
        assert [g.status(approval.utcnow()) for g in grants] == ["live", "live", "revoked"]
        assert [g.id for g in store.candidates("Bash")] == [1]  # the new index serves this
        assert store.add("Bash", "make", None).id == 4  # the id sequence continued
    finally:
        store.close()
    assert query(database, "SELECT app, version FROM ahp_schema") == [
        ("ahp-approval", approval.SCHEMA.version)
    ]
    if not db.is_url(database):
        # The first release reads this row, and refuses the store as a version it does not
        # know, instead of writing to tables it no longer understands.
        assert query(database, "SELECT value FROM meta WHERE key = 'schema'") == [
            ("see ahp_schema",)
        ]
    listed = json.loads(run_backend("approval", "list", "--db", database, "--json").stdout)
    assert [g["id"] for g in listed] == [1, 2, 4]


def test_an_audit_database_of_the_first_release_opens_with_its_events(
    tmp_path: Any, query: Query
) -> None:
    # SQLite only: the first release wrote nothing else (it had no PostgreSQL).
    path = str(tmp_path / "audit.db")
    execute(path, AUDIT_V1_SQLITE)
    event = {
        "id": "evt_1",
        "source": "urn:s",
        "type": "session.end",
        "time": "2026-08-24T08:00:00Z",
    }
    execute(
        path,
        [
            "INSERT INTO events (source, event_id, type, time, ts, received_at, event) VALUES "
            f"('urn:s', 'evt_1', 'session.end', '{event['time']}', 1.0, 'x', "
            f"'{json.dumps(event)}')"
        ],
    )
    store = audit.AuditStore(path)
    try:
        assert store.add(event) is False  # the UNIQUE key of version 1 still decides
        assert store.add({**event, "id": "evt_2"}) is True
        assert store.count() == 2
    finally:
        store.close()
    assert [r.event["id"] for r in audit.read_events(path)] == ["evt_1", "evt_2"]
    assert query(path, "PRAGMA user_version") == [(1,)]


@pytest.mark.parametrize("app", ["approval", "audit"])
def test_a_newer_schema_is_refused_by_every_command(
    app: str, database: str, run_backend: Run
) -> None:
    if app == "approval":
        approval.Store(database).close()
        noun, known = "approval store", approval.SCHEMA.version
    else:
        audit.AuditStore(database).close()
        noun, known = "audit database", audit.SCHEMA.version
    name = f"ahp-{app}"
    execute(database, [f"UPDATE ahp_schema SET version = 99 WHERE app = '{name}'"])
    reason = f"the {noun} has schema version 99, newer than this ahp-backends knows ({known})"
    if app == "approval":
        commands = [
            ("list", "--db", database),
            ("grant", "--db", database, "--tool", "A", "--match", "x"),
            ("revoke", "--db", database, "--all"),
            ("--db", database, "--once"),
        ]
    else:
        commands = [("show", "--db", database), ("--db", database, "--once")]
    for args in commands:
        refused(run_backend(app, *args), reason, "upgrade ahp-backends")
    with pytest.raises(db.DatabaseError, match="newer than this ahp-backends knows"):
        audit.read_events(database) if app == "audit" else approval.Store(database)


def test_someone_elses_database_is_refused_and_ours_are_shared(
    database: str, run_backend: Run, query: Query
) -> None:
    execute(database, ["CREATE TABLE accounts (id INTEGER)"])
    refused(
        run_backend("approval", "grant", "--db", database, "--tool", "A", "--match", "x"),
        "that is not an approval store (it has other tables)",
    )
    refused(run_backend("audit", "--db", database, "--once"), "that is not an audit database")
    execute(database, ["DROP TABLE accounts"])
    # One database for both backends: each keeps its own tables and version row.
    assert (
        "granted #1"
        in run_backend(
            "approval", "grant", "--db", database, "--tool", "A", "--match", "x"
        ).stdout.decode()
    )
    store = audit.AuditStore(database)
    try:
        assert store.add({"id": "e", "source": "urn:s", "type": "session.end"}) is True
    finally:
        store.close()
    assert sorted(query(database, "SELECT app, version FROM ahp_schema")) == [
        ("ahp-approval", approval.SCHEMA.version),
        ("ahp-audit", audit.SCHEMA.version),
    ]
    listed = json.loads(run_backend("approval", "list", "--db", database, "--json").stdout)
    assert [g["match"] for g in listed] == ["x"]
    assert [r.event["id"] for r in audit.read_events(database)] == ["e"]


@pytest.mark.timeout(120)
def test_first_use_by_many_processes_at_once(
    database: str, backend_argv: Callable[..., list[str]], query: Query
) -> None:
    count = 6

    def grant(i: int) -> subprocess.CompletedProcess[bytes]:
        argv = backend_argv("approval", "grant", "--db", database, "--tool", "T")
        return subprocess.run([*argv, "--match", f"m{i}", "--json"], capture_output=True)

    with ThreadPoolExecutor(max_workers=count) as pool:
        done = list(pool.map(grant, range(count)))
    assert [d.returncode for d in done] == [0] * count, [d.stderr for d in done]
    assert sorted(json.loads(d.stdout)["id"] for d in done) == list(range(1, count + 1))
    assert query(database, "SELECT app, version FROM ahp_schema") == [
        ("ahp-approval", approval.SCHEMA.version)
    ]


# --------------------------------------------------------------------------- bad targets


@pytest.fixture
def silent_server() -> Iterator[int]:
    """A loopback port that accepts connections and never says a word."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    try:
        yield int(listener.getsockname()[1])
    finally:
        listener.close()


def test_bad_urls_and_unreachable_servers_are_clear_errors(
    postgres_server: Any, silent_server: int, run_backend: Run
) -> None:
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    closed_port = int(closed.getsockname()[1])
    closed.close()  # nothing listens there now: connection refused
    secret = "s3cret-pass"
    cases = [
        ("postgresql://[bad", "not a valid PostgreSQL URL"),
        ("postgresql://u@127.0.0.1/x?nonsense=1", "not a valid PostgreSQL URL"),
        (f"postgresql://app:{secret}@127.0.0.1:{closed_port}/x", "cannot connect"),
        (
            f"postgresql://app:{secret}@127.0.0.1:{silent_server}/x?connect_timeout=2",
            "cannot connect",
        ),
        (postgres_server.get_uri("no_such_database"), "cannot connect"),
        (
            f"postgresql://app@127.0.0.1:{closed_port}/x?sslpassword={secret}"
            f"&pass%77ord={secret}&oauth_client_secret={secret}",
            "cannot connect",
        ),
    ]
    commands = [
        ("approval", ("list", "--db")),
        ("audit", ("--once", "--db")),
        ("approval", ("--once", "--db")),
        ("audit", ("show", "--db")),
    ]
    for i, (url, reason) in enumerate(cases):
        # Each URL through two commands, each command through several URLs (every
        # process pays the driver's import: the pairs keep this test short).
        for app, args in (commands[i % 4], commands[(i + 1) % 4]):
            err = refused(run_backend(app, *args, url, timeout=30), reason)
            assert secret not in err
    # The URL is named without its password.
    err = refused(
        run_backend(
            "approval", "list", "--db", f"postgresql://app:{secret}@127.0.0.1:{closed_port}/x"
        )
    )
    assert f"postgresql://app@127.0.0.1:{closed_port}/x: cannot connect" in err


def test_an_empty_postgresql_database_is_no_store_for_list_and_show(
    postgres_url: str, run_backend: Run, query: Query
) -> None:
    refused(run_backend("approval", "list", "--db", postgres_url), "no approval store here")
    refused(run_backend("approval", "revoke", "--db", postgres_url, "1"), "no approval store")
    refused(run_backend("audit", "show", "--db", postgres_url), "no such database")
    assert query(postgres_url, "SELECT tablename FROM pg_tables WHERE schemaname = 'public'") == []


def test_shown_drops_every_credential_and_only_those() -> None:
    assert db.shown("postgresql://u:p@h:5/d?x=1") == "postgresql://u@h:5/d?x=1"
    assert db.shown("postgres://:p@h/d") == "postgres://h/d"
    assert db.shown("postgresql://u@h/d") == "postgresql://u@h/d"
    assert db.shown("postgresql:///d?host=/tmp") == "postgresql:///d?host=/tmp"
    assert db.shown("postgresql://h/d?password=p&sslmode=require") == (
        "postgresql://h/d?sslmode=require"
    )
    assert db.shown("postgresql://h/d?PASSWORD=p") == "postgresql://h/d"
    assert db.shown("/tmp/a:b@c.db") == "/tmp/a:b@c.db"  # a path is not a URL
    # every parameter libpq reads a secret from, however its name is spelled
    assert db.shown(
        "postgresql://u@h/d?sslpassword=S1&pass%77ord=S2&oauth_client_secret=S3"
        "&Password=S4&application_name=a@b&sslmode=require"
    ) == ("postgresql://u@h/d?application_name=a@b&sslmode=require")
    # user info ends before the first "/"; an "@" or "?" inside a password hides it all
    assert db.shown("postgresql://u:p@w@h/d") == "postgresql://u@h/d"
    assert db.shown("postgresql://u:p?w@h/d") == "postgresql://u@h/d"
    # libpq's key=value form (refused as a --db, but never shown with its secrets)
    assert db.shown("host=h password='a b\\' c' user=u sslpassword=x") == "host=h user=u"
    assert db.shown("host=h  password = s dbname=d") == "host=h dbname=d"
    assert db.shown("host=h password='unterminated s3cret") == "host=h ..."
    assert db.shown("./host=h.db") == "./host=h.db"  # a path that holds a "=" is a path


def test_a_key_value_connection_string_is_refused_naming_no_secret(
    tmp_path: Path, backend_argv: Callable[..., list[str]]
) -> None:
    target = "host=127.0.0.1 dbname=ahp password='s3cret pw'"
    for app, args in (("approval", ("--once", "--db")), ("audit", ("show", "--db"))):
        done = subprocess.run(
            backend_argv(app, *args, target), capture_output=True, timeout=30, cwd=tmp_path
        )
        err = done.stderr.decode()
        assert done.returncode == 2 and done.stdout == b"" and "Traceback" not in err, err
        assert "argument --db" in err and "a key=value connection string is not accepted" in err
        assert "s3cret" not in err and "host=127.0.0.1 dbname=ahp" in err
    assert list(tmp_path.iterdir()) == []  # no SQLite file (or directory) of that name
    with pytest.raises(db.DatabaseError, match="key=value"):
        db.open_database(target, audit.SCHEMA)


# --------------------------------------------------------------------------- the driver


def test_sqlite_never_imports_psycopg(tmp_path: Any) -> None:
    code = (
        "import sys\n"
        "from ahp_backends import approval, audit\n"
        f"store = approval.Store({str(tmp_path / 'a.db')!r})\n"
        "store.add('Bash', 'x', None); store.grants(); store.close()\n"
        f"events = audit.AuditStore({str(tmp_path / 'e.db')!r})\n"
        "events.add({'id': 'e', 'source': 's', 'type': 't'}); events.close()\n"
        f"audit.read_events({str(tmp_path / 'e.db')!r})\n"
        "print(sorted(m for m in sys.modules if m.startswith('psycopg')))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=30)
    assert done.returncode == 0, done.stderr.decode()
    assert done.stdout.decode().strip() == "[]"


def test_a_missing_driver_says_what_to_install(postgres_url: str) -> None:
    code = (
        "import sys\n"
        "sys.modules['psycopg'] = None  # as if ahp-backends[postgres] were not installed\n"
        "from ahp_backends.cli import main\n"
        f"sys.exit(main(['approval', 'list', '--db', {postgres_url!r}]))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=30)
    assert done.returncode == 2
    assert "pip install 'ahp-backends[postgres]'" in done.stderr.decode()
    assert "Traceback" not in done.stderr.decode()

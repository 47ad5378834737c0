"""``ahp-backend audit``: every observed event exactly once, across transports and crashes.

The backend runs as a real process (``python -m ahp_backends.cli audit ...``) over
stdio persistent, stdio per_event and loopback HTTP, fed through our client
(:class:`~ahp_protocol.client.Dispatcher`, or the stdio transport) or raw NDJSON.

What this file shows:

Every test that is about the store runs on both engines (``db``: an SQLite file or a
fresh database on a real PostgreSQL server, see ``conftest.py``); the few about
SQLite's file (integrity after ``kill -9`` on stdio, WAL, a file that is not a
database) run on SQLite only and say so.

- N distinct events delivered with duplicates (and one id reused by another source)
  give exactly N (+1) rows, on each transport, with concurrent per_event writers, and
  with two servers recording the same events into one database;
- ``kill -9`` mid-stream: the file passes ``PRAGMA integrity_check``; over HTTP, where
  a ``204`` is sent only after the commit, every acknowledged event is present and at
  most the one in flight is extra; over stdio (no acknowledgement for notifications)
  a ``hooks/configuration`` answer is the barrier (the server is serial), every event
  before it is present and the rows form a prefix of the stream (nothing skipped);
  a redelivery of everything after the crash still gives each event once;
- content: metadata by default (no text bodies stored), ``--content body`` keeps them;
- ``show``: a readable timeline and ``--json``, filtered by session and type.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import IO, Any

import anyio
import httpx
import pytest
from ahp_backends import audit
from ahp_backends.db import is_url
from ahp_protocol.client import Dispatcher
from ahp_protocol.client.transports.stdio import StdioTransport
from ahp_protocol.wire.registration import parse_registration

PY = sys.executable
AUDIT = [PY, "-m", "ahp_backends.cli", "audit"]
DEADLINE = 30.0
HARNESS = {"name": "audit-tests", "version": "1"}
SOURCE = "urn:uuid:3d1c2f4e-1111-4a8e-9d0b-2b9c8e6e4a10"


# -- events ------------------------------------------------------------------------------


def envelope(kind: str, n: int, *, source: str = SOURCE, session: str = "sess_a") -> dict[str, Any]:
    return {
        "id": f"evt_{n:05d}",
        "source": source,
        "type": kind,
        "time": f"2026-08-24T08:{n // 60 % 60:02d}:{n % 60:02d}.000Z",
        "harness": dict(HARNESS),
        "session": {"id": session, "cwd": "/repo"},
    }


def tool_before(n: int, command: str = "ls", **kw: Any) -> dict[str, Any]:
    event = envelope("tool.before", n, **kw)
    event.update(
        tool={"name": "shell", "kind": "shell", "input": {"command": command}, "origin": "native"},
        call={"id": f"call_{n}"},
        path="native",
    )
    return event


def tool_after(n: int, text: str = "file.txt", **kw: Any) -> dict[str, Any]:
    event = envelope("tool.after", n, **kw)
    event.update(
        tool={"name": "shell", "kind": "shell", "input": {"command": "ls"}, "origin": "native"},
        call={"id": f"call_{n}"},
        path="native",
        outcome="ok",
        execution={"status": "executed"},
        items=[
            {
                "id": f"msg_{n}",
                "role": "tool",
                "parts": [
                    {
                        "id": f"part_{n}",
                        "kind": "text",
                        "mediaType": "text/plain",
                        "selection": "body",
                        "text": text,
                    }
                ],
            }
        ],
    )
    return event


def session_end(n: int, **kw: Any) -> dict[str, Any]:
    event = envelope("session.end", n, **kw)
    event.update(outcome="completed", reason="done")
    return event


def hook_failure(n: int, **kw: Any) -> dict[str, Any]:
    event = envelope("hook.failure", n, **kw)
    event.update(
        parentEventId="evt_parent",
        failure={"backendId": "com.example.guard", "reason": "timeout", "policy": "fail-closed"},
    )
    return event


def mixed(count: int, *, start: int = 0, session: str = "sess_a") -> list[dict[str, Any]]:
    makers = (tool_before, tool_after, session_end, hook_failure)
    return [makers[i % 4](start + i, session=session) for i in range(count)]


def observe(event: dict[str, Any]) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "method": "hooks/observe",
        "params": {"protocolVersion": "draft", "event": event},
    }


def configuration_request(rid: str) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": rid,
        "method": "hooks/configuration",
        "params": {"protocolVersion": "draft"},
    }


def line(message: dict[str, Any]) -> bytes:
    return json.dumps(message, separators=(",", ":")).encode() + b"\n"


# -- the database ------------------------------------------------------------------------

SQLITE_ONLY = pytest.mark.parametrize("engine", ["sqlite"])  # about SQLite's file itself


def select(db: str, sql: str) -> list[tuple[Any, ...]]:
    """Rows of ``sql`` read with the engine's own driver, not through the code under test."""
    if is_url(db):
        import psycopg

        with psycopg.connect(db, autocommit=True) as conn:
            return [tuple(r) for r in conn.execute(sql).fetchall()]
    conn = sqlite3.connect(db, timeout=DEADLINE)
    try:
        return [tuple(r) for r in conn.execute(sql).fetchall()]
    finally:
        conn.close()


def execute(db: str, sql: str) -> None:
    """``sql`` run with the engine's own driver, behind the back of the code under test."""
    if is_url(db):
        import psycopg

        with psycopg.connect(db, autocommit=True) as conn:
            conn.execute(sql)
        return
    conn = sqlite3.connect(db, timeout=DEADLINE, isolation_level=None)
    try:
        conn.execute(sql)
    finally:
        conn.close()


def rows(db: str) -> list[tuple[str, str]]:
    return [(s, e) for s, e in select(db, "SELECT source, event_id FROM events")]


def integrity(db: str) -> str:
    """SQLite's own check of the file (PostgreSQL keeps its files to itself)."""
    assert not is_url(db)
    return str(select(db, "PRAGMA integrity_check")[0][0])


def stored(db: str) -> dict[str, dict[str, Any]]:
    return {e: json.loads(t) for e, t in select(db, "SELECT event_id, event FROM events")}


def prepare(db: str) -> str:
    """The directory of an SQLite file made (the serving command makes it itself)."""
    if not is_url(db):
        os.makedirs(os.path.dirname(db), exist_ok=True)
    return db


def keys(events: list[dict[str, Any]]) -> set[tuple[str, str]]:
    return {(e["source"], e["id"]) for e in events}


# -- processes ---------------------------------------------------------------------------


class HttpServer:
    """``ahp-backend audit --http 127.0.0.1:0``; ready when it prints its address."""

    def __init__(self, db: str) -> None:
        self.process = subprocess.Popen(
            [*AUDIT, "--db", db, "--http", "127.0.0.1:0"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        assert self.process.stderr is not None
        self.lines: queue.Queue[str] = queue.Queue()
        self.pump = threading.Thread(target=self._pump, args=(self.process.stderr,), daemon=True)
        self.pump.start()
        while True:
            try:
                text = self.lines.get(timeout=DEADLINE)
            except queue.Empty:
                self.process.kill()
                raise AssertionError("the audit backend printed no address") from None
            if not text:
                raise AssertionError("the audit backend exited before listening")
            if "listening on " in text:
                self.url = text.split("listening on ", 1)[1].strip()
                return

    def _pump(self, stream: IO[bytes]) -> None:
        for raw in iter(stream.readline, b""):
            self.lines.put(raw.decode("utf-8", "replace"))
        self.lines.put("")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
        try:
            self.process.wait(timeout=DEADLINE)
        finally:
            self.process.kill()
            self.process.wait()
            self.pump.join(DEADLINE)
            if self.process.stderr is not None:
                self.process.stderr.close()


@pytest.fixture
def db(engine: str, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    """A fresh audit database on ``engine`` (SQLite: a file in a directory not made yet)."""
    if engine == "sqlite":
        return str(tmp_path / "audit" / "events.db")
    url: str = request.getfixturevalue("postgres_url")
    return url


@pytest.fixture
def http_server(db: str) -> Iterator[HttpServer]:
    server = HttpServer(db)
    try:
        yield server
    finally:
        server.stop()


# -- exactly once, per transport ---------------------------------------------------------


@pytest.mark.anyio
async def test_stdio_persistent_records_each_event_once(db: str) -> None:
    events = mixed(40)
    other_source = session_end(0, source="urn:test:another-harness")  # same id, other source
    transport = StdioTransport(PY, ["-m", "ahp_backends.cli", "audit", "--db", db])
    try:
        for event in [*events, *events[::3], other_source, other_source, *events[::-1]]:
            await transport.notify(observe(event))
        # The server is serial: its answer to a request means every earlier line is done.
        with anyio.fail_after(DEADLINE):
            answer = await transport.request(configuration_request("barrier"))
    finally:
        await transport.aclose()
    assert answer["result"]["configuration"]["subscriptions"] == audit.configuration("metadata")
    recorded = rows(db)
    assert len(recorded) == len(events) + 1
    assert set(recorded) == keys(events) | {("urn:test:another-harness", "evt_00000")}
    if not is_url(db):  # SQLite's own check of its file (PostgreSQL's files are its own)
        assert integrity(db) == "ok"


@pytest.mark.anyio
async def test_http_through_the_dispatcher_records_each_event_once(
    db: str, http_server: HttpServer
) -> None:
    registration = parse_registration(
        {
            "protocolVersion": "draft",
            "hooks": [
                {
                    "id": "com.example.ahp.audit",
                    "transport": {"type": "http", "url": http_server.url + "/"},
                    "subscriptions": [
                        {"events": ["*"], "mode": "observe", "content": {"default": "metadata"}}
                    ],
                }
            ],
        }
    )
    events = mixed(30)
    async with Dispatcher(registration, capabilities={}, observe_timeout=DEADLINE) as hooks:
        diagnostics = []
        # Concurrent deliveries, every event twice: the server writes from worker threads.
        async with anyio.create_task_group() as tg:
            for event in events + events:

                async def deliver(e: dict[str, Any] = event) -> None:
                    diagnostics.extend(await hooks.observe(e))

                tg.start_soon(deliver)
    assert [d.outcome for d in diagnostics] == ["delivered"] * 60
    # Over HTTP the 204 is sent after the commit: everything is on disk now.
    assert sorted(rows(db)) == sorted(keys(events))
    if not is_url(db):  # SQLite's own check of its file (PostgreSQL's files are its own)
        assert integrity(db) == "ok"


def test_per_event_processes_write_concurrently_once(db: str) -> None:
    events = mixed(6)
    deliveries = events + events[::-1]  # every event twice, in separate processes

    def run_once(event: dict[str, Any]) -> int:
        done = subprocess.run(
            [*AUDIT, "--db", db, "--once"],
            input=line(observe(event)),
            capture_output=True,
            timeout=DEADLINE,
        )
        assert done.stdout == b""  # a notification is never answered
        return done.returncode

    with ThreadPoolExecutor(max_workers=4) as pool:
        codes = list(pool.map(run_once, deliveries))
    assert codes == [0] * len(deliveries)
    assert sorted(rows(db)) == sorted(keys(events))
    if not is_url(db):  # SQLite's own check of its file (PostgreSQL's files are its own)
        assert integrity(db) == "ok"


def test_two_servers_recording_the_same_events_store_each_once(db: str) -> None:
    # Two workers behind one load balancer: a harness's retry may reach the other one,
    # or both may see one event. The database's UNIQUE key decides, not a process cache.
    events = mixed(16)
    servers = [HttpServer(db), HttpServer(db)]
    try:
        deliveries = [
            (server, event) for event in events + events[::-1] for server in servers
        ]  # every event 4 times: twice to each server

        def post(delivery: tuple[HttpServer, dict[str, Any]]) -> int:
            server, event = delivery
            response = httpx.post(
                server.url + "/",
                content=line(observe(event)),
                headers={"content-type": "application/json"},
                timeout=DEADLINE,
            )
            return response.status_code

        with ThreadPoolExecutor(max_workers=4) as pool:
            codes = list(pool.map(post, deliveries))
    finally:
        for server in servers:
            server.stop()
    assert codes == [204] * len(deliveries)  # each 204 follows the commit (or the no-op)
    assert sorted(rows(db)) == sorted(keys(events))
    if not is_url(db):
        assert integrity(db) == "ok"


# -- kill -9 -----------------------------------------------------------------------------


def test_kill_9_over_http_keeps_every_acknowledged_event(db: str, http_server: HttpServer) -> None:
    events = [session_end(n) for n in range(5000)]
    acknowledged: list[str] = []
    attempted: list[str] = []
    enough = threading.Event()

    def post_all() -> None:
        with httpx.Client(timeout=DEADLINE) as client:
            for event in events:
                attempted.append(event["id"])
                try:
                    response = client.post(
                        http_server.url + "/",
                        content=line(observe(event)),
                        headers={"content-type": "application/json"},
                    )
                except httpx.HTTPError:
                    break
                if response.status_code != 204:
                    break
                acknowledged.append(event["id"])
                if len(acknowledged) == 200:
                    enough.set()
        enough.set()

    poster = threading.Thread(target=post_all)
    poster.start()
    assert enough.wait(DEADLINE)
    os.kill(http_server.process.pid, signal.SIGKILL)
    poster.join(DEADLINE)
    assert not poster.is_alive()
    assert http_server.process.wait(DEADLINE) == -signal.SIGKILL
    assert len(acknowledged) < len(events)  # the kill really was mid-stream

    if not is_url(db):  # SQLite's own check of its file (PostgreSQL's files are its own)
        assert integrity(db) == "ok"
    recorded = {e for _, e in rows(db)}
    assert set(acknowledged) <= recorded  # every acknowledged event survived
    assert recorded <= set(attempted)
    assert len(recorded - set(acknowledged)) <= 1  # at most the one in flight


@SQLITE_ONLY  # the file after a kill -9 (the HTTP kill -9 test runs on both engines)
def test_kill_9_over_stdio_leaves_a_prefix_and_no_damage(db: str) -> None:
    before = [tool_before(n, command=f"echo {n}") for n in range(300)]
    after = [session_end(n) for n in range(300, 8300)]
    process = subprocess.Popen(
        [*AUDIT, "--db", db],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    assert process.stdin is not None and process.stdout is not None
    try:
        process.stdin.write(b"".join(line(observe(e)) for e in before))
        process.stdin.write(line(configuration_request("barrier")))
        process.stdin.flush()
        answer = json.loads(process.stdout.readline())
        assert answer["id"] == "barrier"

        stream = b"".join(line(observe(e)) for e in after)
        stdin = process.stdin

        def write_stream() -> None:
            try:
                stdin.write(stream)
                stdin.flush()
            except (BrokenPipeError, ValueError, OSError):
                pass

        writer = threading.Thread(target=write_stream, daemon=True)
        writer.start()
        # Kill while the stream is being written: as soon as rows past the barrier exist.
        with sqlite3.connect(db, timeout=DEADLINE) as watch:
            for _ in range(100_000):
                count = watch.execute("SELECT count(*) FROM events").fetchone()[0]
                if count > len(before) + 50:
                    break
            else:
                raise AssertionError("the backend recorded nothing after the barrier")
        process.send_signal(signal.SIGKILL)
        assert process.wait(DEADLINE) == -signal.SIGKILL
        writer.join(DEADLINE)
    finally:
        process.kill()
        process.wait()
        for stream_ in (process.stdin, process.stdout):
            if stream_ is not None:
                stream_.close()

    if not is_url(db):  # SQLite's own check of its file (PostgreSQL's files are its own)
        assert integrity(db) == "ok"
    recorded = {e for _, e in rows(db)}
    assert len(recorded) == len(rows(db))  # no duplicates
    assert {e["id"] for e in before} <= recorded  # all before the barrier are there
    later = [e["id"] for e in after]
    survived = [i for i, event_id in enumerate(later) if event_id in recorded]
    assert survived == list(range(len(survived)))  # a prefix: nothing skipped, nothing reordered
    assert 50 < len(survived) < len(later)  # killed mid-stream

    # Redeliver everything (a harness retrying after the crash): each event still once.
    everything = before + after
    redo = subprocess.run(
        [*AUDIT, "--db", db],
        input=b"".join(line(observe(e)) for e in everything),
        capture_output=True,
        timeout=120,
    )
    assert redo.returncode == 0
    assert sorted(rows(db)) == sorted(keys(everything))
    if not is_url(db):  # SQLite's own check of its file (PostgreSQL's files are its own)
        assert integrity(db) == "ok"


# -- content, configuration, refusals ----------------------------------------------------


def _feed(db: str, events: list[dict[str, Any]], *extra: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [*AUDIT, "--db", db, *extra],
        input=b"".join(line(observe(e)) for e in events),
        capture_output=True,
        timeout=DEADLINE,
    )


def test_metadata_by_default_keeps_no_text(db: str) -> None:
    secret = "the prompt text nobody should hoard"
    done = _feed(db, [tool_after(1, text=secret)])
    assert done.returncode == 0
    (event,) = stored(db).values()
    part = event["items"][0]["parts"][0]
    assert part["selection"] == "metadata"
    assert part["size"] == len(secret.encode())
    assert "text" not in part
    assert secret not in json.dumps(event)
    assert event["tool"]["input"] == {"command": "ls"}  # the operation is kept whole


def test_content_body_keeps_text(db: str) -> None:
    done = _feed(db, [tool_after(1, text="kept on request")], "--content", "body")
    assert done.returncode == 0
    (event,) = stored(db).values()
    assert event["items"][0]["parts"][0]["text"] == "kept on request"
    request = configuration_request("c")
    answer = subprocess.run(
        [*AUDIT, "--db", db, "--content", "body"],
        input=line(request),
        capture_output=True,
        timeout=DEADLINE,
    )
    (subscription,) = json.loads(answer.stdout)["result"]["configuration"]["subscriptions"]
    assert subscription == {"events": ["*"], "mode": "observe", "content": {"default": "body"}}


def test_intercept_is_not_offered_and_invalid_events_are_not_recorded(db: str) -> None:
    event = tool_before(1)
    request = {
        "jsonrpc": "2.0",
        "id": event["id"],
        "method": "hooks/intercept",
        "params": {"protocolVersion": "draft", "event": event, "capabilities": {"effects": []}},
    }
    invalid = dict(tool_before(2))
    del invalid["tool"]
    done = subprocess.run(
        [*AUDIT, "--db", db],
        input=line(request) + line(observe(invalid)) + line(observe(tool_before(3))),
        capture_output=True,
        timeout=DEADLINE,
    )
    (answer,) = [json.loads(x) for x in done.stdout.splitlines()]
    assert answer["error"]["code"] == -32002
    assert rows(db) == [(SOURCE, "evt_00003")]


def test_over_http_204_means_stored_and_a_failed_write_is_500(
    db: str, http_server: HttpServer
) -> None:
    def post(n: int) -> int:
        with httpx.Client(timeout=DEADLINE) as client:
            response = client.post(
                http_server.url + "/",
                content=line(observe(session_end(n))),
                headers={"content-type": "application/json"},
            )
        return response.status_code

    assert post(1) == 204
    assert rows(db) == [(SOURCE, "evt_00001")]
    execute(db, "ALTER TABLE events RENAME TO moved_away")  # every write now fails
    assert post(2) == 500  # not 204: the event is not in the database
    notes = []
    while not any("event not recorded" in text for text in notes):
        notes.append(http_server.lines.get(timeout=DEADLINE))
    execute(db, "ALTER TABLE moved_away RENAME TO events")
    assert rows(db) == [(SOURCE, "evt_00001")]
    assert http_server.process.poll() is None  # a failed write never ends the server
    assert post(3) == 204
    assert sorted(rows(db)) == [(SOURCE, "evt_00001"), (SOURCE, "evt_00003")]


def test_a_failing_write_is_noted_and_reported_to_the_kit(
    db: str, capsys: pytest.CaptureFixture[str]
) -> None:
    store = audit.AuditStore(prepare(db))
    backend = audit.build_backend(store)
    store.close()  # every write now fails
    reply = backend.respond_sync(line(observe(session_end(1))))
    assert reply.body is None and reply.unprocessed  # HTTP answers 500, stdio stays silent
    err = capsys.readouterr().err
    if is_url(db):
        assert "event not recorded: the database is closed" in err
    else:
        assert "event not recorded: the database failed (ProgrammingError)" in err


def test_store_add_reports_duplicates(db: str) -> None:
    store = audit.AuditStore(prepare(db))
    try:
        assert store.add(session_end(1)) is True
        assert store.add(session_end(1)) is False
        assert store.add(session_end(1, source="urn:test:other")) is True
        assert store.count() == 2
    finally:
        store.close()
    if not is_url(db):  # SQLite's journal: WAL, so readers never block the writer
        assert select(db, "PRAGMA journal_mode") == [("wal",)]


def test_unusable_database_is_a_clear_error(tmp_path: Path) -> None:
    bogus = tmp_path / "not-a-db"
    bogus.write_bytes(b"this is not sqlite " * 100)
    done = subprocess.run(
        [*AUDIT, "--db", str(bogus)], input=b"", capture_output=True, timeout=DEADLINE
    )
    assert done.returncode == 2
    assert done.stderr.decode() == (
        f"error: --db {bogus}: cannot use the audit database (not an SQLite database)\n"
    )


# -- show --------------------------------------------------------------------------------


@pytest.fixture
def populated(db: str) -> str:
    store = audit.AuditStore(prepare(db))
    try:
        for event in mixed(8, session="sess_one") + mixed(4, start=100, session="sess_two"):
            store.add(event)
    finally:
        store.close()
    return db


def show(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*AUDIT, "show", *args],
        capture_output=True,
        text=True,
        timeout=DEADLINE,
        env={**os.environ, "COLUMNS": "200"},
    )


def test_show_prints_a_timeline(populated: str) -> None:
    done = show("--db", populated)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "12 events" in out
    for text in (
        "tool.before",
        "proposed: ls",
        "outcome ok, executed",
        "backend com.example.guard failed: timeout (fail-closed)",
        "outcome completed (done)",
        "sess_one",
        "shell call_0",
    ):
        assert text in out


def test_show_json_filters_by_session_and_type(populated: str) -> None:
    done = show("--db", populated, "--json", "--session", "sess_one", "--type", "tool.*")
    assert done.returncode == 0, done.stderr
    events = json.loads(done.stdout)
    assert [e["type"] for e in events] == ["tool.before", "tool.after"] * 2
    assert {e["session"]["id"] for e in events} == {"sess_one"}
    times = [e["time"] for e in events]
    assert times == sorted(times)  # timeline order

    exact = json.loads(show("--db", populated, "--json", "--type", "hook.failure").stdout)
    assert [e["id"] for e in exact] == ["evt_00003", "evt_00007", "evt_00103"]
    two = json.loads(
        show("--db", populated, "--json", "--type", "session.end", "--type", "hook.failure").stdout
    )
    assert len(two) == 6
    none = show("--db", populated, "--session", "sess_nobody")
    assert "no events recorded" in none.stdout


def test_show_refuses_what_it_cannot_read(tmp_path: Path, populated: str) -> None:
    missing = show("--db", str(tmp_path / "nope.db"))
    assert missing.returncode == 2
    assert "no such database" in missing.stderr
    assert not (tmp_path / "nope.db").exists()  # show never creates a database
    bad = show("--db", populated, "--type", "tool.%")
    assert bad.returncode == 2
    assert "--type" in bad.stderr


def test_summary_never_shows_content() -> None:
    event = tool_after(1, text="private words")
    assert "private" not in audit.summary(event)
    assert audit.summary(tool_before(2, command="git push")) == "proposed: git push"


def test_show_prints_event_text_literally(db: str) -> None:
    # Event text is whatever a harness sent: rich markup in it must not be interpreted
    # ("[/x]" made show exit 1 with a MarkupError, "[home]" vanished), nor may a terminal
    # escape sequence reach the terminal raw.
    store = audit.AuditStore(prepare(db))
    commands = ["echo hi [/x]", "cd [home]", "printf '\x1b[31mred\x1b[0m'"]
    try:
        for n, command in enumerate(commands):
            store.add(tool_before(n, command=command))
    finally:
        store.close()
    done = show("--db", db)
    assert done.returncode == 0, done.stderr
    assert "proposed: echo hi [/x]" in done.stdout
    assert "proposed: cd [home]" in done.stdout
    assert "\x1b" not in done.stdout
    assert "proposed: printf '\\x1b[31mred\\x1b[0m'" in done.stdout

"""approval and audit served by ``--workers 2``: every worker sees the same database.

Which worker answered a request is read from the kernel (the connection's accepted
socket in ``/proc/net/tcp``, and the worker holding it in ``/proc/PID/fd``), so the
tests drive each worker on purpose instead of hoping. Both engines (``database``):
an SQLite file and a real PostgreSQL server. Linux, as ``--workers`` is POSIX only.
"""

from __future__ import annotations

import http.client
import json
import os
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from kit_testing import intercept_request

pytestmark = pytest.mark.timeout(60)
ATTEMPTS = 300
EFFECTS = ["allow", "ask", "deny", "message"]


class Workers:
    """A running ``--workers 2`` backend: post on fresh connections, see who answered."""

    def __init__(self, server: Any, owner: Callable[[list[int], int, int], int | None]) -> None:
        self.server, self.owner = server, owner
        listed = server.wait_for_stderr(" workers: ")
        self.pids = [int(p) for p in listed.split("workers: ", 1)[1].split(", ")]
        address = server.url.split("http://", 1)[1].rstrip("/")
        host, _, port = address.rpartition(":")
        self.host, self.port = host, int(port)

    def post(self, message: dict[str, Any]) -> tuple[int, int, bytes]:
        """(worker pid, status, body) of one POST on a fresh connection."""
        conn = http.client.HTTPConnection(self.host, self.port, timeout=30)
        try:
            conn.connect()
            client_port = conn.sock.getsockname()[1]
            conn.request("POST", "/", json.dumps(message), {"Content-Type": "application/json"})
            response = conn.getresponse()
            body = response.read()
            pid = self.owner(self.pids, self.port, client_port)
        finally:
            conn.close()
        assert pid is not None, "no worker holds the connection"
        return pid, response.status, body

    def on_every_worker(self, make: Callable[[int], dict[str, Any]]) -> Iterator[tuple[int, Any]]:
        """Post ``make(i)`` until every worker has answered one; yields (pid, status, body)."""
        seen: set[int] = set()
        for i in range(ATTEMPTS):
            pid, status, body = self.post(make(i))
            seen.add(pid)
            yield pid, (status, body)
            if seen == set(self.pids):
                return
        raise AssertionError(f"after {ATTEMPTS} connections only workers {seen} answered")


def _intercept(clients: Any, command: str) -> dict[str, Any]:
    event = clients.tool_event(
        clients.Case("push", {"name": "Bash", "input": {"command": command}, "origin": "native"}),
        clients.SOURCE_OURS,
    )
    return intercept_request(event, EFFECTS)


def _effects(answer: tuple[int, bytes]) -> list[str]:
    status, body = answer
    assert status == 200, body
    return [effect["type"] for effect in json.loads(body)["result"]["effects"]]


def test_a_grant_is_seen_by_every_worker(
    database: str, http_backend: Any, run_backend: Any, clients: Any, connection_owner: Any
) -> None:
    server = Workers(http_backend("approval", "--db", database, "--require", r"Bash:\bgit\s+push\b",
                                  "--workers", "2"), connection_owner)  # fmt: skip
    push = "git push origin main"
    before = list(server.on_every_worker(lambda i: _intercept(clients, push)))
    assert {pid for pid, _ in before} == set(server.pids)
    assert all(_effects(answer)[0] == "ask" for _, answer in before)
    granted = run_backend("approval", "grant", "--db", database, "--tool", "Bash", "--match", push)
    assert granted.returncode == 0, granted.stderr
    after = list(server.on_every_worker(lambda i: _intercept(clients, push)))
    assert all(_effects(answer) == ["allow"] for _, answer in after)
    assert "Traceback" not in server.server.stop()


def test_an_event_posted_to_two_workers_is_stored_once(
    database: str, http_backend: Any, query: Any, clients: Any, connection_owner: Any
) -> None:
    server = Workers(http_backend("audit", "--db", database, "--workers", "2"), connection_owner)
    event = _intercept(clients, "ls")["params"]["event"]
    notification = {
        "jsonrpc": "2.0",
        "method": "hooks/observe",
        "params": {"protocolVersion": "draft", "event": event},
    }
    posted = list(server.on_every_worker(lambda i: notification))
    assert {pid for pid, _ in posted} == set(server.pids)  # the same event, on both workers
    assert all(answer == (204, b"") for _, answer in posted)
    other = dict(event, id=f"evt_{uuid.uuid4().hex}")
    _, status, _ = server.post(
        {**notification, "params": {**notification["params"], "event": other}}
    )
    assert status == 204
    rows = query(database, "SELECT event_id, count(*) FROM events GROUP BY event_id")
    assert sorted(rows) == sorted([(event["id"], 1), (other["id"], 1)])
    assert "Traceback" not in server.server.stop()


def test_no_database_connection_crosses_a_fork(database: str) -> None:
    """Each process opens its own connection after a fork (the parent's is released)."""
    from ahp_backends.audit import SCHEMA
    from ahp_backends.db import open_database

    db = open_database(database, SCHEMA, pool_size=2)
    session_id = "SELECT pg_backend_pid()" if database.startswith("postgresql://") else "SELECT 1"

    def handle() -> object:
        return db._pool or db._pg or db._sqlite  # the connection (or pool) in use

    def who() -> tuple[bool, int]:
        """(whether the pre-fork connection was used, which server session)."""
        with db.transaction() as session:
            row = session.one(session_id)
        assert row is not None
        return handle() is inherited, int(row[0])

    inherited = handle()  # held here, so that its identity is never reused
    before = who()
    assert before[0]
    read_r, write_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report what it uses, never return into pytest
        code = 1
        try:
            os.close(read_r)
            os.write(write_w, json.dumps(who()).encode())
            code = 0
        finally:
            os._exit(code)
    os.close(write_w)
    with os.fdopen(read_r, "rb") as reader:
        child = tuple(json.loads(reader.read() or b"null") or ())
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    parent_after = who()
    try:
        assert child and not child[0]  # not the inherited connection or pool
        assert not parent_after[0]  # the parent released it too, and reopened
        if database.startswith("postgresql://"):  # separate server sessions
            assert len({before[1], child[1], parent_after[1]}) == 3
    finally:
        db.close()


@pytest.mark.parametrize(
    ("command", "args", "needle"),
    [
        ("audit", ["--db", ":memory:", "--http", "127.0.0.1:0", "--workers", "2"],
         "--db :memory: is private to one process; --workers needs a file or a URL"),
        ("approval", ["--require", "Bash", "--workers", "2"], "--workers applies to --http only"),
        ("audit", ["--http", "127.0.0.1:0", "--workers", "0"], "--workers 0: must be at least 1"),
        ("denylist", ["--rules", "examples/backends/denylist.toml", "--once", "--workers", "2"],
         "--workers applies to --http only"),
    ],
)  # fmt: skip
def test_bad_workers_are_refused(
    command: str, args: list[str], needle: str, run_backend: Any, tmp_path: Path
) -> None:
    if "--db" not in args and command != "denylist":
        args = ["--db", str(tmp_path / "x.db"), *args]
    done = run_backend(command, *args)
    assert done.returncode == 2, done.stderr
    assert needle in done.stderr.decode()
    assert b"listening" not in done.stderr


def test_a_bad_db_is_reported_before_any_fork(run_backend: Any, tmp_path: Path) -> None:
    target = str(tmp_path / "no" / "such" / "dir" / "grants.db")
    done = run_backend("approval", "--db", target, "--http", "127.0.0.1:0", "--workers", "2")
    assert done.returncode == 2
    assert "the directory does not exist" in done.stderr.decode()
    assert b"workers" not in done.stderr and b"listening" not in done.stderr


BURST = 48


def _burst(server: Workers, event: dict[str, Any], tag: str) -> list[tuple[str, int | str]]:
    """``(event id, HTTP status or the error's type)`` of BURST notifications, 16 at a time."""
    from concurrent.futures import ThreadPoolExecutor

    def post(i: int) -> tuple[str, int | str]:
        eid = f"evt_{tag}_{i}_{uuid.uuid4().hex[:8]}"
        params = {"protocolVersion": "draft", "event": dict(event, id=eid)}
        body = json.dumps({"jsonrpc": "2.0", "method": "hooks/observe", "params": params})
        conn = http.client.HTTPConnection(server.host, server.port, timeout=30)
        try:
            conn.request("POST", "/", body, {"Content-Type": "application/json"})
            response = conn.getresponse()
            response.read()
            return eid, response.status
        except OSError as exc:
            return eid, type(exc).__name__
        finally:
            conn.close()

    with ThreadPoolExecutor(16) as pool:
        return list(pool.map(post, range(BURST)))


def test_a_204_means_stored_on_fresh_and_replaced_workers(
    database: str, http_backend: Any, query: Any, clients: Any, connection_owner: Any
) -> None:
    """A burst at workers that have just forked (their database not yet reopened), then
    at a worker that replaced a SIGKILLed one: every event answered 204 is in the
    database, and none is refused (a worker waits for its database, never answers
    "closed")."""
    import signal

    server = Workers(http_backend("audit", "--db", database, "--workers", "2"), connection_owner)
    event = _intercept(clients, "ls")["params"]["event"]
    fresh = _burst(server, event, "fresh")
    killed = server.pids[0]
    os.kill(killed, signal.SIGKILL)
    line = server.server.wait_for_stderr(f"worker {killed} ")
    replacement = int(line.rsplit("started worker ", 1)[1].split()[0])
    server.pids = [server.pids[1], replacement]
    replaced = _burst(server, event, "replaced")
    stored = {str(r[0]) for r in query(database, "SELECT event_id FROM events")}
    for name, burst in (("fresh", fresh), ("replaced", replaced)):
        assert [s for _, s in burst] == [204] * BURST, (name, burst)
        assert {eid for eid, _ in burst} <= stored, name
    assert "not recorded" not in server.server.stop()

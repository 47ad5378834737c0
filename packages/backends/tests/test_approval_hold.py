"""``ahp-backend approval --hold-s S``: calls held for a person to decide, bound to what
was approved, with receipts (issue #30).

Real processes and real loopback HTTP (fixtures in ``conftest.py``): the server runs
``--http 127.0.0.1:0``; each call is one raw ``hooks/intercept`` POST on its own
connection, its answer read on a thread while the test, as the console would, waits for
the held call (:meth:`Queue.wait_for_change`, never a sleep) and decides it with its
own :class:`Queue` on the same ``--db``:

- approve once -> allow, and the next identical call is held again; deny with a
  reason -> the deny names who and why; receipts carry who, when and the call's digest,
  and ``approval list --receipts`` and ``audit show --approvals`` show them; on both
  engines (``database``);
- approve for the session -> the session's next identical call passes without a hold,
  another session's and a changed input are held; ``approval list`` shows the scope;
- nobody decides -> today's answer (ask where advertised, else the deny with the grant
  command); a decision on an expired, decided or unknown call is refused;
- two held calls decided out of order each get their own answer;
- PostgreSQL, ``--workers 2``: a call held in each worker (which worker holds a
  connection is read from ``/proc``), both released by decisions from this process;
- units: the digest's canonical JSON, a v2 store migrating to v3, the served deadline.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from ahp_backends.approval import (
    HOLD_MARGIN_MS,
    SCHEMA,
    Store,
    served_subscriptions,
)
from ahp_backends.approval_queue import Held, Queue, QueueError, call_digest, canonical_json
from ahp_backends.audit import AuditStore
from ahp_backends.db import Schema, open_database
from ahp_protocol.testing.events import tool_before

from kit_testing import HeldCall, intercept_request

pytestmark = pytest.mark.timeout(60)
PUSH = "Bash:git push"
FULL = ("allow", "ask", "deny", "message")
DENY_ONLY = ("allow", "deny")
DENIED_CODE = "com.example.ahp.approval.denied"
DEADLINE = 30.0
Run = Callable[..., subprocess.CompletedProcess[bytes]]


HARNESS = {"name": "backends-tests", "version": "1.0"}


def event(command: str, session: str = "sess_a", cwd: str = "/repo") -> dict[str, Any]:
    return tool_before(command, harness=HARNESS, session={"id": session, "cwd": cwd})


def post(server: Any, command: str, effects: tuple[str, ...] = FULL, **where: str) -> HeldCall:
    return HeldCall(server.url, intercept_request(event(command, **where), effects), DEADLINE)


def held(queue: Queue, count: int, *, besides: tuple[str, ...] = ()) -> list[Held]:
    """Wait (on the queue's notifications) until ``count`` calls not in ``besides`` are
    pending; them, oldest first."""
    deadline = time.monotonic() + DEADLINE
    while True:
        found = [h for h in queue.pending() if h.id not in besides]
        if len(found) >= count:
            return found
        assert time.monotonic() < deadline, f"{len(found)} of {count} calls held in time"
        queue.wait_for_change(1.0)


@pytest.fixture
def queues() -> Iterator[Callable[[str], Queue]]:
    opened: list[Queue] = []

    def open_queue(db: str) -> Queue:
        queue = Queue(db)
        opened.append(queue)
        return queue

    yield open_queue
    for queue in opened:
        queue.close()


def serve(http_backend: Any, db: str, hold_s: float, *extra: str) -> Any:
    return http_backend("approval", "--db", db, "--require", PUSH, "--hold-s", str(hold_s), *extra)


def ok(done: subprocess.CompletedProcess[bytes]) -> str:
    assert done.returncode == 0, done.stderr.decode()
    return done.stdout.decode()


# --------------------------------------------------------------------------- processes


def test_approve_once_deny_with_a_reason_and_the_receipts(
    database: str,
    http_backend: Any,
    queues: Callable[[str], Queue],
    run_backend: Run,
    tmp_path: Path,
) -> None:
    server = serve(http_backend, database, 5)
    queue = queues(database)
    first = post(server, "git push origin main")
    (call,) = held(queue, 1)
    inputs = {"command": "git push origin main"}
    assert (call.tool, call.kind, call.input) == ("Bash", "shell", inputs)
    assert call.subject == "git push origin main"
    assert (call.session_id, call.cwd, call.harness, call.rule) == (
        "sess_a",
        "/repo",
        "backends-tests",
        PUSH,
    )
    assert call.digest == call_digest("Bash", inputs, "sess_a")
    assert call.status == "pending" and call.expires - call.created == timedelta(seconds=5)
    approved = queue.decide(call.id, approve=True, by="ann")
    assert first.effects() == [{"type": "allow"}]
    assert first.took() < 5  # released by the decision, not by the timeout
    # Once: an identical call is held again; this time it is denied, with a reason.
    second = post(server, "git push origin main")
    (again,) = held(queue, 1)
    assert again.id != call.id and again.digest == call.digest
    denied = queue.decide(again.id, approve=False, by="bob", reason="not before the release")
    assert second.effects() == [
        {"type": "deny", "reason": "Denied by bob: not before the release", "code": DENIED_CODE}
    ]
    final = queue.get(again.id)
    assert final is not None and (final.status, final.decided_by) == ("denied", "bob")
    # The receipts: newest first, who, when, what, and the digest of the call decided.
    receipts = queue.receipts()
    assert receipts == [denied, approved]
    assert [(r.decided_by, r.decision, r.scope, r.digest) for r in receipts] == [
        ("bob", "deny", "once", call.digest),
        ("ann", "approve", "once", call.digest),
    ]
    assert approved.decided_at <= denied.decided_at and approved.grant_id is None
    listed = json.loads(
        ok(run_backend("approval", "list", "--db", database, "--receipts", "--json"))
    )
    assert [(r["decidedBy"], r["decision"], r["digest"], r["reason"]) for r in listed] == [
        ("bob", "deny", call.digest, "not before the release"),
        ("ann", "approve", call.digest, None),
    ]
    assert listed[0]["decidedAt"].endswith("Z") and listed[0]["held"] == again.id
    table = ok(run_backend("approval", "list", "--db", database, "--receipts")).splitlines()
    assert table[0].split() == [
        "ID", "DECIDED", "BY", "DECISION", "SCOPE", "TOOL", "SUBJECT", "DIGEST", "REASON"
    ]  # fmt: skip
    assert table[1].split()[2:6] == ["bob", "deny", "once", "Bash"]
    assert call.digest[:12] in table[1] and "not before the release" in table[1]
    # audit show --approvals: the same receipts beside the audit timeline (here empty).
    audit_db = str(tmp_path / "audit.db")
    AuditStore(audit_db).close()
    shown = ok(run_backend("audit", "show", "--db", audit_db, "--approvals", database))
    lines = shown.splitlines()
    start = lines.index(next(x for x in lines if x.startswith("approval receipts in ")))
    assert lines[start + 1 :] == table
    documented = json.loads(
        ok(run_backend("audit", "show", "--db", audit_db, "--approvals", database, "--json"))
    )
    assert documented == {"events": [], "receipts": listed}
    other = ok(
        run_backend("audit", "show", "--db", audit_db, "--approvals", database, "--session", "x")
    )
    assert other.splitlines()[-1] == "no receipts"  # --session filters the receipts too
    assert "Traceback" not in server.stop()


def test_a_grant_for_the_session_is_bound_to_the_session_and_the_input(
    tmp_path: Path, http_backend: Any, queues: Callable[[str], Queue], run_backend: Run
) -> None:
    db = str(tmp_path / "store.db")
    server = serve(http_backend, db, 5)
    queue = queues(db)
    first = post(server, "git push origin main", session="sess_a")
    (call,) = held(queue, 1)
    receipt = queue.decide(
        call.id, approve=True, by="ann", scope="session", grant_for=timedelta(minutes=10)
    )
    assert first.effects() == [{"type": "allow"}]
    assert receipt.grant_id is not None and receipt.grant_expires is not None
    # The session's next identical call passes at once, never held.
    again = post(server, "git push origin main", session="sess_a")
    assert again.effects() == [{"type": "allow"}]
    assert [h.id for h in queue.session_calls("sess_a")] == [call.id]
    # Another session, and a changed input in the same session, are held.
    other = post(server, "git push origin main", session="sess_b")
    changed = post(server, "git push origin main --force", session="sess_a")
    waiting = held(queue, 2)
    by_session = {h.session_id: h for h in waiting}
    assert by_session["sess_a"].subject == "git push origin main --force"
    queue.decide(by_session["sess_b"].id, approve=False, by="ann")
    queue.decide(by_session["sess_a"].id, approve=False, by="ann", reason="no force pushes")
    assert other.effects() == [{"type": "deny", "reason": "Denied by ann.", "code": DENIED_CODE}]
    assert changed.effects()[0]["reason"] == "Denied by ann: no force pushes"
    timeline = queue.session_calls("sess_a")
    assert [h.status for h in timeline] == ["approved", "denied"]
    grants = json.loads(ok(run_backend("approval", "list", "--db", db, "--json")))
    assert [(g["match"], g["session"], g["project"]) for g in grants] == [
        ("git push origin main", "sess_a", None)
    ]
    assert "session sess_a" in ok(run_backend("approval", "list", "--db", db)).splitlines()[1]
    assert "Traceback" not in server.stop()


def test_nobody_decides_then_todays_answer_and_late_decisions_are_refused(
    tmp_path: Path, http_backend: Any, queues: Callable[[str], Queue]
) -> None:
    db = str(tmp_path / "store.db")
    server = serve(http_backend, db, 1)
    queue = queues(db)
    asking = post(server, "git push origin a", FULL)
    denying = post(server, "git push origin b", DENY_ONLY)
    calls = held(queue, 2)
    ask = asking.effects()
    assert [e["type"] for e in ask] == ["ask", "message"]
    assert "ahp-backend approval grant" in ask[1]["text"]
    (deny,) = denying.effects()
    assert deny["type"] == "deny" and deny["code"] == "com.example.ahp.approval.required"
    assert "to approve it, run: ahp-backend approval grant" in deny["reason"]
    assert 1 <= asking.took() < 1 + HOLD_MARGIN_MS / 1000
    assert [queue.get(h.id).status for h in calls] == ["expired", "expired"]  # type: ignore[union-attr]
    with pytest.raises(QueueError, match=r"^expired$"):
        queue.decide(calls[0].id, approve=True, by="ann")
    # A decided call cannot be decided again (held long enough to decide it twice).
    server.stop()
    server = serve(http_backend, db, 5)
    late = post(server, "git push origin c")
    (call,) = held(queue, 1)
    queue.decide(call.id, approve=True, by="ann")
    with pytest.raises(QueueError, match=r"^already decided by ann$"):
        queue.decide(call.id, approve=False, by="bob")
    with pytest.raises(QueueError, match=r"^no such held call$"):
        queue.decide("nope", approve=True, by="bob")
    with pytest.raises(QueueError, match="by"):
        queue.decide(call.id, approve=True, by=" ")
    assert late.effects() == [{"type": "allow"}]
    assert len(queue.receipts()) == 1  # nothing refused left a receipt
    assert "Traceback" not in server.stop()


def test_two_held_calls_decided_out_of_order(
    tmp_path: Path, http_backend: Any, queues: Callable[[str], Queue]
) -> None:
    db = str(tmp_path / "store.db")
    server = serve(http_backend, db, 5)
    queue = queues(db)
    one = post(server, "git push origin one")
    (first,) = held(queue, 1)
    two = post(server, "git push origin two")
    (second,) = held(queue, 1, besides=(first.id,))
    queue.decide(second.id, approve=False, by="ann", reason="two is wrong")
    assert two.effects()[0]["reason"] == "Denied by ann: two is wrong"
    assert not one.done()  # still held while the other was answered
    queue.decide(first.id, approve=True, by="ann")
    assert one.effects() == [{"type": "allow"}]
    assert "Traceback" not in server.stop()


def test_two_workers_on_postgresql_release_calls_held_in_each(
    postgres_url: str,
    http_backend: Any,
    queues: Callable[[str], Queue],
    connection_owner: Callable[[list[int], int, int], int | None],
) -> None:
    server = serve(http_backend, postgres_url, 5, "--workers", "2")
    listed = server.wait_for_stderr(" workers: ")
    pids = [int(p) for p in listed.split("workers: ", 1)[1].split(", ")]
    queue = queues(postgres_url)
    calls: dict[str, tuple[HeldCall, int]] = {}  # held id -> (the call, the worker holding it)
    for i in range(12):  # until a call is held in each worker
        call = post(server, f"git push origin b{i}")
        (found,) = held(queue, 1, besides=tuple(calls))
        owner = connection_owner(pids, call.server_port, call.client_port)
        assert owner is not None
        calls[found.id] = (call, owner)
        if {pid for _, pid in calls.values()} == set(pids):
            break
    assert {pid for _, pid in calls.values()} == set(pids), "every call reached one worker"
    for held_id, (call, _) in calls.items():
        queue.decide(held_id, approve=True, by="ann")
        assert call.effects() == [{"type": "allow"}]
        assert call.took() < 5
    assert "Traceback" not in server.stop()


def test_the_served_deadline_covers_the_hold(http_backend: Any, tmp_path: Path) -> None:
    server = serve(http_backend, str(tmp_path / "store.db"), 2.5)
    answer = server.post(
        {
            "jsonrpc": "2.0",
            "id": "c",
            "method": "hooks/configuration",
            "params": {"protocolVersion": "draft"},
        }
    )
    (subscription,) = answer["result"]["configuration"]["subscriptions"]
    assert subscription["timeoutMs"] == 2500 + HOLD_MARGIN_MS == 5500
    assert subscription["failurePolicy"] == "fail-closed"
    assert served_subscriptions(0) == served_subscriptions() != served_subscriptions(1)
    assert "Traceback" not in server.stop()


def test_the_console_subcommand_says_when_it_is_not_installed(run_backend: Run) -> None:
    done = run_backend("approval", "console", "--help")
    try:
        import ahp_backends.approval_console  # noqa: F401
    except ModuleNotFoundError:
        assert done.returncode == 2
        assert b"the approval console is not installed" in done.stderr
    else:
        assert done.returncode == 0, done.stderr  # the console's own --help


# --------------------------------------------------------------------------- units


def test_the_digest_is_sha256_of_the_canonical_json() -> None:
    value = {"tool": "Bash", "input": {"b": [1, 2], "a": "é ü"}, "session": "s"}
    assert canonical_json(value) == '{"input":{"a":"é ü","b":[1,2]},"session":"s","tool":"Bash"}'
    expected = hashlib.sha256(canonical_json(value).encode("utf-8")).hexdigest()
    assert call_digest("Bash", {"a": "é ü", "b": [1, 2]}, "s") == expected
    assert call_digest("Bash", {"b": [1, 2], "a": "é ü"}, "s") == expected  # key order
    others = {
        call_digest("Bash", {"a": "é ü", "b": [1, 2]}, None),
        call_digest("Bash", {"a": "é ü", "b": [2, 1]}, "s"),
        call_digest("Read", {"a": "é ü", "b": [1, 2]}, "s"),
        call_digest("Bash", {"a": "é ü ", "b": [1, 2]}, "s"),
    }
    assert expected not in others and len(others) == 4


def test_a_version_2_store_migrates_and_keeps_its_grants(database: str) -> None:
    old = Schema(**{**{f: getattr(SCHEMA, f) for f in SCHEMA.__dataclass_fields__},
                    "steps": SCHEMA.steps[:2]})  # fmt: skip
    db = open_database(database, old)
    with db.transaction(write=True) as session:
        session.run(
            "INSERT INTO grants (tool, match, created) VALUES (?, ?, ?)",
            ("Bash", "make", "2026-08-24T08:00:00.000Z"),
        )
    db.close()
    store = Store(database)
    try:
        (grant,) = store.grants()
        assert (grant.tool, grant.match, grant.scope) == ("Bash", "make", "any")
        assert grant.covers("Bash", "make", "any-session", "/anywhere")
    finally:
        store.close()
    queue = Queue(database)
    try:
        assert queue.pending() == [] and queue.receipts() == []
    finally:
        queue.close()


def test_a_decision_on_the_injected_clock(tmp_path: Path) -> None:
    from datetime import UTC, datetime

    now = [datetime(2026, 8, 24, 8, 0, tzinfo=UTC)]
    queue = Queue(str(tmp_path / "store.db"), clock=lambda: now[0])
    try:
        call = queue.hold(tool="Bash", kind=None, input={"command": "git push"},
                          session_id=None, harness=None, cwd="/p", rule=PUSH,
                          wait=timedelta(seconds=30))  # fmt: skip
        assert [h.id for h in queue.pending()] == [call.id]
        with pytest.raises(QueueError, match="session id"):
            queue.decide(call.id, approve=True, by="a", scope="session", grant_for=timedelta(1))
        with pytest.raises(QueueError, match="grant_for"):
            queue.decide(call.id, approve=True, by="a", scope="project")
        receipt = queue.decide(
            call.id, approve=True, by="a", scope="project", grant_for=timedelta(hours=1)
        )
        assert receipt.decided_at == now[0] and receipt.grant_expires == now[0] + timedelta(hours=1)
        store = Store(str(tmp_path / "store.db"), clock=lambda: now[0])
        (grant,) = store.grants()
        assert grant.covers("Bash", "git push", None, "/p")
        assert not grant.covers("Bash", "git push", None, "/q")
        assert not grant.covers("Bash", "git push --force", None, "/p")
        store.close()
        later = queue.hold(tool="Bash", kind=None, input={"command": "x"}, session_id=None,
                           harness=None, cwd=None, rule=PUSH,
                           wait=timedelta(seconds=30))  # fmt: skip
        now[0] += timedelta(seconds=31)
        assert queue.pending() == []
        assert queue.await_decision(later.id).status == "expired"  # at once: the clock says so
        with pytest.raises(QueueError, match=r"^expired$"):
            queue.decide(later.id, approve=False, by="a")
    finally:
        queue.close()

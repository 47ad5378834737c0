"""``ahp-backend audit replay``: a recorded demo session through other registrations.

The trail is real: ``ahp-harness demo --dir`` runs once for the module (its audit
backend writes the database). Every replay runs ``ahp-backend audit replay`` as a
process, and its chains are real backend processes: the sample deny-list and approval
backends, the audit backend, and a small recorder backend (written here) that logs
every message it receives, so the test sees what a backend got (methods, ids,
capabilities) rather than what the replay says it sent.

The demo's six calls (``call_2`` ... ``call_7``): read README.md and ``ls`` ran; ``rm
-rf build`` the deny-list refused; ``git push`` the approval backend refused; the
``write_file`` under ``notes/`` ran on a grant; reading ``.env`` the host's managed
rule refused (every backend gave no effect).
"""

from __future__ import annotations

import json
import os
import pty
import select
import sqlite3
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

PY = sys.executable
TIMEOUT = 120
SUB = {
    "events": ["tool.before"],
    "mode": "intercept",
    "timeoutMs": 15000,
    "failurePolicy": "fail-closed",
    "content": {"default": "metadata"},
}
STRICTER_RULES = """
[[rules]]
reason = "Listing the workspace is not allowed."
code = "com.example.strict.ls"
kind = "shell"
[rules.input]
command = '^ls\\b'

[[rules]]
reason = "Pushes are not allowed at all."
code = "com.example.strict.push"
kind = "shell"
[rules.input]
command = '\\bgit\\s+push\\b'

[[rules]]
reason = "The agent writes no notes."
code = "com.example.strict.notes"
tool = "write_file"
"""
RECORDER = """
import json, sys
from ahp_protocol.server import Backend

LOG = sys.argv.pop(1)
backend = Backend("com.example.tests.recorder")


def log(method, event, capabilities=None):
    with open(LOG, "a", encoding="utf-8") as out:
        out.write(json.dumps({"method": method, "type": event.get("type"),
                              "id": event.get("id"), "source": event.get("source"),
                              "call": (event.get("call") or {}).get("id"),
                              "capabilities": capabilities}) + "\\n")


@backend.intercept("tool.before")
def before(request):
    log("hooks/intercept", request.event, request.capabilities)
    return None


@backend.observe("*")
def seen(event):
    log("hooks/observe", event)


backend.run(sys.argv[1:])
"""


@dataclass
class Demo:
    """The recorded session: its folder, audit database and the demo's own files."""

    work: Path
    db: Path
    files: Path

    def events(self, kind: str) -> list[dict[str, Any]]:
        with sqlite3.connect(self.db) as conn:
            rows = conn.execute("SELECT event FROM events WHERE type = ? ORDER BY ts", (kind,))
            return [json.loads(text) for (text,) in rows]


def record_demo(work: Path) -> Demo:
    done = subprocess.run(
        [PY, "-m", "ahp_harness.cli", "demo", "--dir", str(work)],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        stdin=subprocess.DEVNULL,
        env={**os.environ, "NO_COLOR": "1", "COLUMNS": "200"},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    recorded = Demo(work, work / "audit.db", work / "files")
    calls = sorted(e["call"]["id"] for e in recorded.events("tool.before"))
    assert calls == [f"call_{n}" for n in range(2, 8)], calls
    (work / "recorded").touch()
    return recorded


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> Demo:
    """One recorded demo session for the whole run (the workers share it: the tests only
    read its files, and its grant store is made for concurrent use)."""
    if worker_id == "master":
        return record_demo(tmp_path_factory.mktemp("replay") / "demo")
    from filelock import FileLock

    shared = tmp_path_factory.getbasetemp().parent  # this run's folder, beside each worker's
    work = shared / "replay-demo"
    with FileLock(str(shared / "replay-demo.lock")):
        if (work / "recorded").exists():
            return Demo(work, work / "audit.db", work / "files")
        return record_demo(work)


def backend(*args: str) -> dict[str, Any]:
    return {"type": "stdio", "command": PY, "args": ["-m", "ahp_backends.cli", *args]}


def hooks_for(demo: Demo, rules: Path, *extra: dict[str, Any]) -> list[dict[str, Any]]:
    """The demo's chain as stdio processes now (the demo's HTTP approval server is gone):
    the deny-list with ``rules``, then the approval backend on the demo's grant store."""
    return [
        {
            "id": "com.example.ahp.denylist",
            "transport": {**backend("denylist", "--rules", str(rules)), "lifecycle": "persistent"},
            "subscriptions": [SUB],
        },
        {
            "id": "com.example.ahp.approval",
            "transport": {
                **backend(
                    "approval",
                    "--store",
                    str(demo.work / "grants.db"),
                    "--config",
                    str(demo.files / "approval.toml"),
                ),
                "lifecycle": "persistent",
            },
            # as a real registration would: it also answers the approval prompt (the replay
            # keeps only what intercepts tool.before, checked against the recorded manifest)
            "subscriptions": [{**SUB, "events": ["tool.before", "tool.permission.request"]}],
        },
        *extra,
    ]


def write_registration(path: Path, hooks: Sequence[dict[str, Any]]) -> Path:
    path.write_text(json.dumps({"protocolVersion": "draft", "hooks": list(hooks)}, indent=2))
    return path


@pytest.fixture
def original(demo: Demo, tmp_path: Path) -> Path:
    return write_registration(
        tmp_path / "original.json", hooks_for(demo, demo.files / "denylist.toml")
    )


@pytest.fixture
def stricter(demo: Demo, tmp_path: Path) -> Path:
    rules = tmp_path / "stricter.toml"
    rules.write_text((demo.files / "denylist.toml").read_text() + STRICTER_RULES)
    return write_registration(tmp_path / "stricter.json", hooks_for(demo, rules))


@dataclass
class Replay:
    code: int
    out: str
    err: str

    @property
    def report(self) -> dict[str, Any]:
        decoded: dict[str, Any] = json.loads(self.out)
        return decoded

    def changes(self) -> dict[str, str]:
        return {c["call"]: c["change"] for c in self.report["changes"]}

    def undetermined(self) -> set[str]:
        return {c["call"] for c in self.report["undetermined"]}


def replay_of(*args: str | Path, cwd: Path | None = None) -> Replay:
    done = subprocess.run(
        [PY, "-m", "ahp_backends.cli", "audit", "replay", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        stdin=subprocess.DEVNULL,
        cwd=cwd,
        env={**os.environ, "NO_COLOR": "1", "COLUMNS": "200"},
    )
    return Replay(done.returncode, done.stdout, done.stderr)


@pytest.fixture
def replay() -> Callable[..., Replay]:
    return replay_of


# -- the test: a stricter policy reports exactly the calls that change -------------


def test_a_stricter_policy_reports_exactly_the_calls_that_change(
    demo: Demo, stricter: Path, replay: Callable[..., Replay]
) -> None:
    run = replay("--db", demo.db, "--registration", stricter, "--json")
    assert run.code == 1, run.err
    report = run.report
    assert report["replayed"] == 6
    # ls and the note ran then; the stricter deny-list refuses both now. The push was
    # refused then and now (by another backend: the record has no code to compare);
    # rm -rf as before; README as before; .env: see the undetermined test.
    assert run.changes() == {"call_3": "newly denied", "call_6": "newly denied"}
    assert report["changed"] == 2
    by_call = {c["call"]: c for c in report["changes"]}
    assert by_call["call_3"]["replayed"]["code"] == "com.example.strict.ls"
    assert by_call["call_3"]["replayed"]["backend"] == "com.example.ahp.denylist"
    assert by_call["call_3"]["recorded"] == {
        "passed": True,
        "outcome": "ran: ok",
        "chainRefusal": None,
    }
    assert by_call["call_6"]["replayed"]["code"] == "com.example.strict.notes"
    assert by_call["call_6"]["replayed"]["reason"] == "The agent writes no notes."
    assert run.undetermined() == {"call_7"}


def test_the_original_policy_reports_nothing(
    demo: Demo, original: Path, replay: Callable[..., Replay]
) -> None:
    run = replay("--db", demo.db, "--registration", original, "--json")
    assert run.code == 0, run.out + run.err
    assert run.report["replayed"] == 6
    assert run.report["changes"] == []
    # .env: refused then (by the host's managed rule), passed by every backend now. The
    # trail cannot say who refused it, so it is listed, never counted as a change.
    undetermined = run.report["undetermined"]
    assert [(c["call"], c["recorded"]["outcome"]) for c in undetermined] == [("call_7", "refused")]
    assert undetermined[0]["replayed"]["verdict"] == "pass"


def test_a_baseline_compares_the_two_chains_codes_and_reasons_included(
    demo: Demo, original: Path, stricter: Path, replay: Callable[..., Replay]
) -> None:
    run = replay("--db", demo.db, "--baseline", original, "--registration", stricter, "--json")
    assert run.code == 1, run.err
    assert run.changes() == {
        "call_3": "newly denied",
        "call_5": "different deny code",  # approval.required then, strict.push now
        "call_6": "newly denied",
    }
    push = next(c for c in run.report["changes"] if c["call"] == "call_5")
    assert push["baseline"]["code"] == "com.example.ahp.approval.required"
    assert push["replayed"]["code"] == "com.example.strict.push"
    assert run.undetermined() == set()  # the baseline says the chain passed .env then too
    # The same backend id with other rules answered differently: the two chains are
    # separate processes (neither answers from the other's memory of these event ids).

    # A baseline that is not what ran then: no change between the chains, and a note
    # that the baseline refuses calls the record shows ran.
    drift = replay("--db", demo.db, "--baseline", stricter, "--registration", stricter, "--json")
    assert drift.code == 0, drift.err
    assert drift.report["changes"] == []
    assert [n for n in drift.report["notes"] if "does not reproduce" in n] == [
        "the baseline does not reproduce the record for 2 call(s) (call_3, call_6): it is "
        "not the registration of then, or its backends' state (grants, the clock) has "
        "changed since"
    ]


def test_a_looser_policy_through_a_baseline_is_no_longer_denied(
    demo: Demo, original: Path, tmp_path: Path, replay: Callable[..., Replay]
) -> None:
    rules = tmp_path / "looser.toml"
    shipped = (demo.files / "denylist.toml").read_text()
    assert shipped.count("'\\brm(") == 1  # the recursive-delete rule, made to match nothing
    rules.write_text(shipped.replace("'\\brm(", "'\\bnever-rm("))
    looser = write_registration(tmp_path / "looser.json", hooks_for(demo, rules))
    run = replay("--db", demo.db, "--baseline", original, "--registration", looser, "--json")
    assert run.code == 1, run.err
    assert run.changes() == {"call_4": "no longer denied"}
    # Against the record alone the same change is undetermined, beside .env's.
    alone = replay("--db", demo.db, "--registration", looser, "--json")
    assert alone.code == 0, alone.err
    assert alone.report["changes"] == []
    assert alone.undetermined() == {"call_4", "call_7"}


def test_the_readable_report_names_each_change(
    demo: Demo, stricter: Path, replay: Callable[..., Replay]
) -> None:
    run = replay("--db", demo.db, "--registration", stricter)
    assert run.code == 1, run.err
    assert "2 of 6 replayed calls would change (against the record)" in run.out
    for text in ("call_3", "call_6", "newly denied", "com.example.strict.ls", "undetermined"):
        assert text in run.out
    changed = run.out.split("undetermined", 1)[0]
    for unchanged in ("call_2", "call_4", "call_5"):
        assert unchanged not in changed
    assert "progress" not in run.err.lower() and "━" not in run.err  # stderr is no terminal


# -- what the backends receive -------------------------------------------------------------


def test_no_observer_receives_anything_and_every_event_keeps_its_ids(
    demo: Demo, tmp_path: Path, replay: Callable[..., Replay]
) -> None:
    script = tmp_path / "recorder.py"
    script.write_text(RECORDER)
    log = tmp_path / "recorder.jsonl"
    observed_db = tmp_path / "observed.db"
    recorder = {
        "id": "com.example.tests.recorder",
        "transport": {
            "type": "stdio",
            "command": PY,
            "args": [str(script), str(log)],
            "lifecycle": "persistent",
        },
        # after the deny-list: a denied call would reach it as a short-circuit observation
        "subscriptions": [
            SUB,
            {"events": ["*"], "mode": "observe", "content": {"default": "body"}},
        ],
    }
    auditor = {
        "id": "com.example.ahp.audit",
        "transport": {**backend("audit", "--db", str(observed_db)), "lifecycle": "persistent"},
        "subscriptions": [{"events": ["*"], "mode": "observe", "content": {"default": "body"}}],
    }
    hooks = hooks_for(demo, demo.files / "denylist.toml")
    registration = write_registration(tmp_path / "watched.json", [hooks[0], recorder, auditor])
    run = replay("--db", demo.db, "--registration", registration, "--json")
    assert run.code == 0, run.out + run.err

    received = [json.loads(line) for line in log.read_text().splitlines()]
    assert {r["method"] for r in received} == {"hooks/intercept"}  # not one hooks/observe
    assert not observed_db.exists()  # the observer never even started
    recorded = {e["id"]: e for e in demo.events("tool.before")}
    # rm -rf (call_4) stops at the deny-list: the recorder is not asked, and not told
    assert sorted(r["call"] for r in received) == ["call_2", "call_3", "call_5", "call_6", "call_7"]
    for r in received:
        original = recorded[r["id"]]
        assert (r["type"], r["source"], r["call"]) == (
            "tool.before",
            original["source"],
            original["call"]["id"],
        )
        # the grant is the recorded manifest's tool.before declaration, as then
        # (non-interactive: no ask), narrowed by the dispatcher for a metadata subscriber
        assert "deny" in r["capabilities"]["effects"]
        assert "ask" not in r["capabilities"]["effects"]
    manifest = demo.events("session.start")[0]["manifest"]
    declared = next(e for e in manifest["events"] if e["event"] == "tool.before")
    assert set(received[0]["capabilities"]["effects"]) == set(declared["capabilities"]["effects"])


# -- filters ---------------------------------------------------------------------------------


def test_filters_by_tool_and_session(
    demo: Demo, stricter: Path, replay: Callable[..., Replay]
) -> None:
    base = ("--db", demo.db, "--registration", stricter, "--json")
    shell = replay(*base, "--tool", "shell")
    assert shell.code == 1, shell.err
    assert shell.report["replayed"] == 3  # ls, rm -rf, git push
    assert shell.changes() == {"call_3": "newly denied"}

    other = replay(*base, "--session", "sess_nobody", "--tool", "shell")
    assert (other.code, other.report["replayed"], other.report["changes"]) == (0, 0, [])


def test_the_selection_by_time_tool_and_session(demo: Demo) -> None:
    """What is replayed, read from the real database by the command's own functions."""
    from datetime import UTC, datetime, timedelta

    from ahp_backends.audit import read_events
    from ahp_backends.trail import TRAIL_TYPES, parse_moment, replayable

    def calls(session: str | None = None, **filters: Any) -> list[str]:
        records = read_events(demo.db, session=session, types=TRAIL_TYPES)
        chosen, _notes = replayable(records, **filters)
        return [c.event["call"]["id"] for c in chosen]

    everything = [f"call_{n}" for n in range(2, 8)]
    assert calls() == everything
    session = demo.events("session.start")[0]["session"]["id"]
    assert calls(session) == everything
    assert calls("sess_nobody") == []
    assert calls(tool="read_file") == ["call_2", "call_7"]
    assert calls(since=parse_moment("1d")) == everything
    assert calls(until=parse_moment("2000-01-01T00:00:00Z")) == []
    times = sorted(e["time"] for e in demo.events("tool.before"))
    assert calls(since=parse_moment(times[3])) == ["call_5", "call_6", "call_7"]
    assert calls(until=parse_moment(times[1])) == ["call_2", "call_3"]
    assert calls(since=parse_moment(times[1]), until=parse_moment(times[2]), tool="shell") == [
        "call_3",
        "call_4",
    ]

    # Without the session's session.start there is no manifest: the draft's minimum grant.
    records = read_events(demo.db, types=[t for t in TRAIL_TYPES if t != "session.start"])
    chosen, notes = replayable(records)
    assert {json.dumps(c.capabilities) for c in chosen} == {
        '{"tool.before": {"effects": ["deny"]}}'
    }
    assert any("no recorded session.start" in n for n in notes)
    with_manifest, notes = replayable(read_events(demo.db, types=TRAIL_TYPES))
    assert notes == []
    assert set(with_manifest[0].capabilities) >= {"tool.before", "tool.permission.request"}

    now = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)
    assert parse_moment("7d", now) == now - timedelta(days=7)
    assert parse_moment("90m", now) == now - timedelta(minutes=90)
    assert parse_moment("2026-12-01T08:00:00+01:00") == datetime(2026, 12, 1, 7, 0, tzinfo=UTC)
    assert parse_moment("2026-12-01") == datetime(2026, 12, 1, tzinfo=UTC)  # no offset: UTC
    for bad in ("last tuesday", "7 days", "-3d", ""):
        with pytest.raises(ValueError):
            parse_moment(bad)


# -- bad input -------------------------------------------------------------------------------


def test_bad_input_exits_2_naming_what_to_fix(
    demo: Demo,
    original: Path,
    tmp_path: Path,
    replay: Callable[..., Replay],
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Through the command once; the other cases stop before any backend starts, so they
    # run in this process (the same main(), without an interpreter start per case).
    missing = replay("--db", tmp_path / "nope.db", "--registration", original)
    assert missing.code == 2
    assert "--db" in missing.err and "nope.db" in missing.err and "no such" in missing.err
    assert "Traceback" not in missing.err

    from ahp_backends.replay import main

    def here(*args: str | Path) -> Replay:
        code = main([str(a) for a in args])
        out, err = capsys.readouterr()
        return Replay(code, out, err)

    not_db = tmp_path / "notes.txt"
    not_db.write_text("this is not a database\n" * 100)
    run = here("--db", not_db, "--registration", original)
    assert run.code == 2
    assert "notes.txt" in run.err and "not an SQLite database" in run.err

    # a server that is not there: said without the URL's password
    run = here(
        "--db", "postgresql://replay:s3cret-pw@127.0.0.1:9/audit", "--registration", original
    )
    assert run.code == 2 and "postgresql://replay@127.0.0.1:9/audit" in run.err
    assert "s3cret-pw" not in run.err + run.out

    broken = dict(SUB)
    del broken["timeoutMs"]
    hooks = hooks_for(demo, demo.files / "denylist.toml")
    hooks[1]["subscriptions"] = [broken]
    bad = write_registration(tmp_path / "bad.json", hooks)
    run = here("--db", demo.db, "--registration", bad)
    assert run.code == 2
    assert "bad.json" in run.err and "hooks[1].subscriptions[0]" in run.err
    assert "timeoutMs" in run.err

    not_json = tmp_path / "broken.json"
    not_json.write_text('{"protocolVersion": "draft",\n "hooks": [}\n')
    run = here("--db", demo.db, "--registration", not_json)
    assert run.code == 2 and "broken.json" in run.err and "line 2" in run.err

    run = here("--db", demo.db, "--registration", original, "--baseline", tmp_path / "gone.json")
    assert run.code == 2 and "--baseline" in run.err and "gone.json" in run.err

    unset = hooks_for(demo, demo.files / "denylist.toml")
    unset.append(
        {
            "id": "com.example.tests.remote",
            "transport": {"type": "http", "url": "http://127.0.0.1:9/"},
            "authentication": {"type": "bearer", "tokenEnv": "AHP_REPLAY_TEST_UNSET_TOKEN"},
            "subscriptions": [SUB],
        }
    )
    unresolvable = write_registration(tmp_path / "t.json", unset)
    run = here("--db", demo.db, "--registration", unresolvable)
    assert run.code == 2 and "AHP_REPLAY_TEST_UNSET_TOKEN" in run.err and "t.json" in run.err
    run = here("--db", demo.db, "--registration", unresolvable, "--session", "sess_nobody")
    assert run.code == 2 and "AHP_REPLAY_TEST_UNSET_TOKEN" in run.err  # even with no call

    for option, value in (("--since", "last tuesday"), ("--until", "7 days")):
        run = here("--db", demo.db, "--registration", original, option, value)
        assert run.code == 2 and option in run.err and "RFC 3339" in run.err

    with pytest.raises(SystemExit) as exited:  # argparse: a required option is missing
        main(["--db", str(demo.db)])
    assert exited.value.code == 2
    assert "--registration" in capsys.readouterr().err


def test_a_backend_that_fails_leaves_every_call_undecided_under_either_policy(
    demo: Demo, tmp_path: Path, replay: Callable[..., Replay]
) -> None:
    # #26: a failure is not a decision. Before, fail-closed read as three "newly denied"
    # (exit 1: synthetic denials compared as the backend's), and fail-open and a backend
    # skipped at hooks/configuration as "nothing changes" (exit 0).
    hooks = hooks_for(demo, tmp_path / "missing-rules.toml")  # the deny-list cannot start
    everything = {f"call_{n}" for n in range(2, 8)}
    for label, subscriptions, said in (
        ("closed", [SUB], "(fail-closed)"),
        ("open", [{**SUB, "failurePolicy": "fail-open"}], "(fail-open)"),
        ("discovered", None, "(at hooks/configuration, skipped)"),
    ):
        if subscriptions is None:
            hooks[0].pop("subscriptions")
        else:
            hooks[0]["subscriptions"] = subscriptions
        registration = write_registration(tmp_path / f"failing-{label}.json", hooks)
        run = replay("--db", demo.db, "--registration", registration, "--json")
        assert run.code == 3, (label, run.out + run.err)
        report = run.report
        assert (report["changes"], report["changed"], report["undetermined"]) == ([], 0, [])
        assert {c["call"] for c in report["undecided"]} == everything, label
        for call in report["undecided"]:
            [failure] = call["undecided"]
            assert failure == f"com.example.ahp.denylist: abnormal_exit {said}", failure
            assert call["change"] is None and call["undetermined"] is False
        notes = [n for n in report["notes"] if n.startswith("backend failure")]
        assert len(notes) == 1 and f"{said}: 6 time(s); each such call is undecided" in notes[0]
        assert not [n for n in report["notes"] if "deny code" in n]  # nothing was compared


STALLING = """
import sys, threading
from ahp_protocol.server import Backend

backend = Backend("com.example.tests.stalling")


@backend.intercept("tool.before")
def before(request):
    if (request.event["tool"].get("input") or {}).get("command") == "ls":
        threading.Event().wait()  # this one command never gets an answer
    return None


backend.run(sys.argv[1:])
"""


def test_a_call_whose_backend_stalls_is_undecided_and_the_replay_exits_3(
    demo: Demo, tmp_path: Path, replay: Callable[..., Replay]
) -> None:
    # #26: one stalled command used to read "6 calls replayed: no decision would change",
    # exit 0 (fail-open: the chain went on without the backend, so it "passed" as then).
    script = tmp_path / "stalling.py"
    script.write_text(STALLING)
    stalling = {
        "id": "com.example.tests.stalling",
        "transport": {"type": "stdio", "command": PY, "args": [str(script)]},
        "subscriptions": [{**SUB, "timeoutMs": 1000, "failurePolicy": "fail-open"}],
    }
    stalling["transport"]["lifecycle"] = "persistent"
    registration = write_registration(tmp_path / "stalling.json", [stalling])
    run = replay("--db", demo.db, "--registration", registration)
    assert run.code == 3, run.out + run.err
    assert "no decision would change" not in run.out
    assert "6 calls replayed: 1 undecided (a backend failed), no decided call would change" in (
        run.out
    )
    undecided = run.out.split("undecided: a backend failed", 1)[1].split("undetermined", 1)[0]
    assert "call_3" in undecided and "ls" in undecided
    assert "com.example.tests.stalling: deadline_exceeded (fail-open)" in undecided
    for answered in ("call_2", "call_4", "call_5", "call_6", "call_7"):
        assert answered not in undecided  # the next call had a fresh process, and an answer
    assert "Traceback" not in run.err


# -- a long replay shows progress on a terminal -----------------------------------------------


def test_a_long_replay_shows_a_progress_bar_on_a_terminal_only(
    demo: Demo, original: Path, tmp_path: Path
) -> None:
    from ahp_backends.audit import AuditStore

    # A longer trail: the demo's session twice over (new session and event ids).
    db = tmp_path / "long.db"
    store = AuditStore(db)
    with sqlite3.connect(demo.db) as conn:
        rows = [json.loads(t) for (t,) in conn.execute("SELECT event FROM events ORDER BY seq")]
    for copy in range(2):
        for event in rows:
            session = {**event["session"], "id": f"{event['session']['id']}_{copy}"}
            store.add({**event, "id": f"{event['id']}_{copy}", "session": session})
    store.close()

    argv = [PY, "-m", "ahp_backends.cli", "audit", "replay", "--db", str(db)]
    argv += ["--registration", str(original), "--json"]
    leader, follower = pty.openpty()
    try:
        process = subprocess.Popen(
            argv, stdout=subprocess.PIPE, stderr=follower, stdin=subprocess.DEVNULL
        )
        os.close(follower)
        seen = b""
        while True:
            ready, _, _ = select.select([leader], [], [], TIMEOUT)
            assert ready, "no output on the terminal in time"
            try:
                chunk = os.read(leader, 4096)
            except OSError:  # the process closed its end
                break
            if not chunk:
                break
            seen += chunk
        out, _ = process.communicate(timeout=TIMEOUT)
    finally:
        os.close(leader)
    assert process.returncode == 0, seen
    assert json.loads(out)["replayed"] == 12
    assert b"replaying tool.before" in seen


HANGING = """
import os, sys, time
from ahp_protocol.server import Backend

FIFO = sys.argv.pop(1)
backend = Backend("com.example.tests.hanging")


@backend.intercept("tool.before")
def before(request):
    with open(FIFO, "w") as signal:  # tells the test this process is answering, and its pid
        signal.write(f"{os.getpid()}\\n")
    time.sleep(120)
    return None


backend.run(sys.argv[1:])
"""


def test_an_interrupted_replay_exits_130_and_leaves_no_backend_running(
    demo: Demo, tmp_path: Path
) -> None:
    import signal

    script = tmp_path / "hanging.py"
    script.write_text(HANGING)
    fifo = tmp_path / "answering"
    os.mkfifo(fifo)
    hanging = {
        "id": "com.example.tests.hanging",
        "transport": {
            "type": "stdio",
            "command": PY,
            "args": [str(script), str(fifo)],
            "lifecycle": "persistent",
        },
        "subscriptions": [{**SUB, "timeoutMs": 100000}],
    }
    registration = write_registration(tmp_path / "hanging.json", [hanging])
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    argv = [PY, "-m", "ahp_backends.cli", "audit", "replay", "--db", str(demo.db)]
    process = subprocess.Popen(
        [*argv, "--registration", str(registration)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
        # Ctrl-C as a terminal delivers it: a suite started in the background (a
        # non-interactive shell's `&`) has SIGINT ignored, and a child would inherit that.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        ready, _, _ = select.select([reader], [], [], TIMEOUT)
        assert ready, "the backend never received a replayed event"
        pid = int(os.read(reader, 100).decode().split()[0])
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=30)
    finally:
        os.close(reader)
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 130, err
    assert "interrupted" in err and "Traceback" not in err
    assert out == ""
    with pytest.raises(ProcessLookupError):  # the backend did not outlive the replay
        os.kill(pid, 0)


# -- what the record says, and what counts as a change (the command's own functions) -------


def _decision(verdict: str = "pass", **fields: Any) -> Any:
    from ahp_backends.trail import Decision

    permission = fields.pop("permission", "deny" if verdict == "deny" else "none")
    return Decision(verdict, permission, **fields)  # type: ignore[arg-type]


DENY_A = {"code": "com.example.a", "reason": "A.", "backend": "com.example.one"}


@pytest.mark.parametrize(
    ("old", "new", "change"),
    [
        (_decision(), _decision(), None),
        (_decision(), _decision("deny", **DENY_A), "newly denied"),
        (_decision("deny", **DENY_A), _decision(), "no longer denied"),
        (_decision("stop", reason="s"), _decision(), "no longer denied"),
        (_decision("deny", **DENY_A), _decision("deny", **DENY_A), None),
        (
            _decision("deny", **DENY_A),
            _decision("deny", **{**DENY_A, "code": "com.example.b"}),
            "different deny code",
        ),
        (
            _decision("deny", **DENY_A),
            _decision("deny", **{**DENY_A, "reason": "B."}),
            "different deny reason",
        ),
        (
            _decision("deny", **DENY_A),
            _decision("deny", **{**DENY_A, "backend": "com.example.two"}),
            "denied by another backend",
        ),
        (_decision("deny", **DENY_A), _decision("stop", reason="A."), "different refusal"),
        (
            _decision("deny", **DENY_A),
            _decision("deny", reason="r", backend="com.example.one", synthetic=True),
            "different refusal",
        ),
        (_decision(permission="allow"), _decision(), "permission changed"),
        (_decision(input={"a": 1}), _decision(input={"a": 2}), "input modified"),
        (_decision(), _decision(supplied=True), "input modified"),
    ],
)
def test_two_chains_differ_in_exactly_these_ways(old: Any, new: Any, change: str | None) -> None:
    from ahp_backends.trail import Recorded, judge

    for recorded in (Recorded(True, "ran: ok"), Recorded(False, "refused")):
        assert judge(recorded, new, old) == (change, False)  # the record does not matter


@pytest.mark.parametrize(
    ("recorded", "new", "expected"),
    [
        (("passed", None), _decision(), (None, False)),
        (("passed", None), _decision("deny", **DENY_A), ("newly denied", False)),
        (("passed", None), _decision("stop", reason="s"), ("newly denied", False)),
        (("passed", None), _decision(input_changed=True), ("input modified", False)),
        (("refused", None), _decision("deny", **DENY_A), (None, False)),
        (("refused", None), _decision(), (None, True)),  # by a backend or by the host?
        (("refused", "com.example.one"), _decision(), ("no longer denied", False)),
        (
            ("refused", "com.example.one"),
            _decision("deny", reason="r", backend="com.example.one", synthetic=True),
            (None, False),
        ),
        (("refused", "com.example.one"), _decision("deny", **DENY_A), ("different refusal", False)),
        (("unknown", None), _decision("deny", **DENY_A), (None, False)),
    ],
)
def test_against_the_record_only_what_it_can_tell(
    recorded: tuple[str, str | None], new: Any, expected: tuple[str | None, bool]
) -> None:
    from ahp_backends.trail import Recorded, judge

    passed = {"passed": True, "refused": False, "unknown": None}[recorded[0]]
    assert judge(Recorded(passed, recorded[0], recorded[1]), new) == expected


def test_what_the_record_says_about_each_call(tmp_path: Path) -> None:
    """A trail written by the audit store itself: prompts, supplied results, a second
    tool.before for a changed input, a fail-closed failure, a call with no outcome."""
    from ahp_backends.audit import AuditStore, read_events
    from ahp_backends.trail import TRAIL_TYPES, replayable

    source = "urn:uuid:00000000-0000-4000-8000-000000000001"
    session = {"id": "sess_1", "cwd": "/w"}
    harness = {"name": "h", "version": "1"}
    counter = iter(range(1000))

    def event(kind: str, call: str, **fields: Any) -> dict[str, Any]:
        n = next(counter)
        return {
            "id": f"evt_{n}",
            "source": source,
            "type": kind,
            "time": f"2026-12-01T10:00:{n:02d}Z",
            "harness": harness,
            "session": session,
            "tool": {"name": "shell", "input": {"command": call}, "origin": "native"},
            "call": {"id": call},
            "path": "native",
            **fields,
        }

    denied = {"outcome": "denied", "execution": {"status": "skipped", "reason": "policy"}}
    trail = [
        event("tool.before", "ran"),
        event("tool.after", "ran", outcome="ok", execution={"status": "executed"}),
        event("tool.before", "supplied"),
        event(
            "tool.after",
            "supplied",
            outcome="ok",
            execution={"status": "skipped", "reason": "supplied_result"},
        ),
        event("tool.before", "prompted"),
        event("tool.permission.request", "prompted", suggestions=[], sandboxBypass=False),
        event("tool.after", "prompted", **denied),
        event("tool.before", "changed"),
        event("tool.permission.request", "changed", suggestions=[], sandboxBypass=False),
        event("tool.before", "changed"),
        event("tool.after", "changed", outcome="ok", execution={"status": "executed"}),
        event("tool.before", "failed"),
        event("tool.after", "failed", **denied),
        event("tool.before", "refused"),
        event("tool.after", "refused", **denied),
        event("tool.before", "lost"),
    ]
    failed_before = trail[11]
    failure = {
        "id": "evt_failure",
        "source": source,
        "type": "hook.failure",
        "time": failed_before["time"],
        "harness": harness,
        "session": session,
        "parentEventId": failed_before["id"],
        "failure": {
            "backendId": "com.example.gate",
            "reason": "deadline_exceeded",
            "policy": "fail-closed",
        },
    }
    store = AuditStore(tmp_path / "trail.db")
    for item in [*trail, failure]:
        store.add(item)
    store.close()
    calls, _notes = replayable(read_events(tmp_path / "trail.db", types=TRAIL_TYPES))
    said = [(c.event["call"]["id"], c.recorded.passed, c.recorded.outcome) for c in calls]
    assert said == [
        ("ran", True, "ran: ok"),
        ("supplied", True, "result supplied"),
        ("prompted", True, "refused at the approval prompt"),
        ("changed", True, "passed; its changed input was judged again"),
        ("changed", True, "ran: ok"),
        ("failed", False, "refused: com.example.gate failed (deadline_exceeded, fail-closed)"),
        ("refused", False, "refused"),
        ("lost", None, "no outcome recorded"),
    ]
    assert [c.recorded.chain_refusal for c in calls][5:7] == ["com.example.gate", None]


# -- other transports and effects -----------------------------------------------------------


MODIFIER = """
import sys
from ahp_protocol.server import Backend
from ahp_protocol.wire.effects import ModifyEffect

backend = Backend("com.example.tests.modifier")


@backend.intercept("tool.before")
def before(request):
    if request.tool_name == "shell":  # every shell command runs in a dry-run mode now
        return ModifyEffect(target="input", operation="merge", value={"dryRun": True})
    return None


backend.run(sys.argv[1:])
"""


def test_over_http_and_with_a_modifying_backend(
    demo: Demo,
    tmp_path: Path,
    http_backend: Callable[..., Any],
    replay: Callable[..., Replay],
) -> None:
    served = http_backend("denylist", "--rules", str(demo.files / "denylist.toml"))
    script = tmp_path / "modifier.py"
    script.write_text(MODIFIER)
    hooks: list[dict[str, Any]] = [
        {"id": "com.example.ahp.denylist", "transport": {"type": "http", "url": served.url}},
        {
            "id": "com.example.tests.modifier",
            "transport": {"type": "stdio", "command": PY, "args": [str(script)]},
            "subscriptions": [SUB],
        },
    ]
    hooks[0]["subscriptions"] = [SUB]
    hooks[1]["transport"]["lifecycle"] = "persistent"
    registration = write_registration(tmp_path / "http.json", hooks)
    run = replay("--db", demo.db, "--registration", registration, "--json")
    assert run.code == 1, run.err
    # ls ran then; now it would run with a changed input. rm -rf is still denied (over
    # HTTP, before the modifier is asked); git push was refused then and passes now, so
    # it is undetermined, as .env is.
    assert run.changes() == {"call_3": "input modified"}
    modified = run.report["changes"][0]["replayed"]
    assert modified["input"] == {"command": "ls", "dryRun": True}
    assert run.undetermined() == {"call_5", "call_7"}
    assert any("com.example.ahp.denylist is an HTTP service" in n for n in run.report["notes"]), (
        run.report["notes"]
    )


def test_a_trail_in_postgresql_replays_as_the_same_trail_in_sqlite(
    demo: Demo, stricter: Path, postgres_url: str, replay: Callable[..., Replay]
) -> None:
    from ahp_backends.audit import AuditStore

    store = AuditStore(postgres_url)
    with sqlite3.connect(demo.db) as conn:
        for (text,) in conn.execute("SELECT event FROM events ORDER BY seq"):
            store.add(json.loads(text))
    store.close()
    run = replay("--db", postgres_url, "--registration", stricter, "--json")
    assert run.code == 1, run.err
    assert run.report["replayed"] == 6
    assert run.changes() == {"call_3": "newly denied", "call_6": "newly denied"}
    assert run.undetermined() == {"call_7"}


def test_the_table_shows_a_recorded_escape_sequence_never_sends_it(
    demo: Demo,
    stricter: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from ahp_backends.audit import AuditStore
    from ahp_backends.replay import main

    before = next(e for e in demo.events("tool.before") if e["call"]["id"] == "call_3")
    after = next(e for e in demo.events("tool.after") if e["call"]["id"] == "call_3")
    hostile = {"command": "ls \x1b[2J\x1b]0;owned\x07"}
    db = tmp_path / "hostile.db"
    store = AuditStore(db)
    for event in (before, after):
        store.add({**event, "tool": {**event["tool"], "input": hostile}})
    store.close()
    monkeypatch.setenv("COLUMNS", "250")  # one line per row: the escape is not wrapped
    code = main(["--db", str(db), "--registration", str(stricter)])
    out = capsys.readouterr().out
    assert code == 1, out
    assert "\x1b" not in out and "\x07" not in out
    assert "\\x1b[2J" in out and "newly denied" in out


def test_help_names_every_option_and_the_exit_status(replay: Callable[..., Replay]) -> None:
    run = replay("--help")
    assert run.code == 0, run.err
    for option in ("--db", "--registration", "--baseline", "--session", "--tool"):
        assert option in run.out
    for option in ("--since", "--until", "--json"):
        assert option in run.out
    assert (
        "exit status: 0 no decision changes, 1 some would change, 2 bad input, 3 some call "
        "undecided (a backend timed out or failed on it"
    ) in " ".join(run.out.split())

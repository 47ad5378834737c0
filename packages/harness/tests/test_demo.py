"""``ahp-harness demo``: the scripted session against the three sample backends, end to end.

Runs ``ahp-harness demo`` as a subprocess from an empty folder outside the repository,
with no ``--dir`` (the default: a new temporary folder) and checks what it claims
against the evidence it leaves: its summary, the audit database written by the audit
backend (a separate process), the harness's transcript and log, and the workspace on
disk (the denied calls never ran); the folder it ran from stays empty. Also: the approval
backend it started is gone afterwards, and the demo's registrations (package data in
``ahp_harness/demo_files``) are made runnable without changing their meaning, and run by
hand write nothing the user did not name.
"""

from __future__ import annotations

import json
import os
import re
import socket
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from ahp_harness import demo

REPO = Path(__file__).resolve().parents[3]
DEMO_FILES = REPO / "packages" / "harness" / "src" / "ahp_harness" / "demo_files"
CALLS = {
    "call_2": ("read_file", "README.md"),
    "call_3": ("shell", "ls"),
    "call_4": ("shell", "rm -rf build"),
    "call_5": ("shell", "git push origin main"),
    "call_6": ("write_file", "notes/summary.txt"),
    "call_7": ("read_file", ".env"),
}


class Run:
    def __init__(
        self, work: Path, done: subprocess.CompletedProcess[str], *, cwd: Path, temp: Path
    ) -> None:
        self.work = work
        self.done = done
        self.out = done.stdout
        self.cwd = cwd
        self.temp = temp

    def transcript(self) -> dict[str, dict[str, Any]]:
        lines = (self.work / "transcript.jsonl").read_text().splitlines()
        return {r["call_id"]: r for r in map(json.loads, lines)}

    def harness_log(self) -> list[dict[str, Any]]:
        return [json.loads(x) for x in (self.work / "harness-audit.jsonl").read_text().splitlines()]

    def audit(self, sql: str, *params: Any) -> list[tuple[Any, ...]]:
        with sqlite3.connect(self.work / "audit.db") as conn:
            return conn.execute(sql, params).fetchall()


def play(root: Path, *options: str) -> Run:
    """``ahp-harness demo OPTIONS`` from an empty folder, TMPDIR in ``root``."""
    cwd, temp = root / "cwd", root / "tmp"
    cwd.mkdir()
    temp.mkdir()
    env = {**os.environ, "COLUMNS": "220", "NO_COLOR": "1", "TMPDIR": str(temp)}
    done = subprocess.run(
        [sys.executable, "-m", "ahp_harness.cli", "demo", *options],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=150,
        env=env,
        stdin=subprocess.DEVNULL,
    )
    found = re.search(r"work folder: (\S+)", done.stdout)
    assert found is not None, f"{done.stdout}\n{done.stderr}"
    return Run(Path(found.group(1)), done, cwd=cwd, temp=temp)


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    yield play(tmp_path_factory.mktemp("demo"))


def test_the_demo_writes_nothing_where_it_is_run(run: Run) -> None:
    """No --dir: a new temporary folder (printed), nothing in the current folder."""
    assert run.done.returncode == 0, f"{run.out}\n{run.done.stderr}"
    assert list(run.cwd.iterdir()) == []
    assert run.work.parent == run.temp.resolve()
    assert (run.work / "files" / "session.json").is_file()  # the demo's files, copied
    assert f"remove the demo's files: rm -rf {run.work}" in run.out


@pytest.mark.timeout(180)
def test_the_demo_runs_and_says_what_happened(run: Run) -> None:
    assert run.done.returncode == 0, f"{run.out}\n{run.done.stderr}"
    rows = {
        "read_file README.md": ("no effect", "no effect", "allow (mode)", "ran: ok"),
        "shell ls": ("no effect", "no effect", "allow (user rule)", "ran: ok"),
        "shell rm -rf build": ("deny", "not asked (already denied)", "not reached", "refused"),
        "shell git push origin main": ("no effect", "deny", "not reached", "refused"),
        "write_file notes/summary.txt": ("no effect", "allow", "allow (mode)", "ran: ok"),
        "read_file .env": ("no effect", "no effect", "deny (managed rule)", "refused"),
    }
    lines = run.out.splitlines()
    for call, cells in rows.items():
        (row,) = [x for x in lines if x.startswith("│") and f" {call} " in x]
        found = [c.strip() for c in row.strip("│").split("│")]
        assert found[0] == call
        assert tuple(found[1:4]) == cells[:3], row
        assert found[4].startswith(cells[3]), row
        assert found[5] == "2 events", row  # tool.before and tool.after, in the audit database
    assert "HTTP at http://127.0.0.1:" in run.out  # two transports: stdio and HTTP
    assert "stdio, persistent" in run.out
    assert "no effect is not permission" in run.out
    assert "ahp-backend approval grant --db" in run.out  # how to approve the push
    assert "build/ is still there" in run.out
    db = run.work / "audit.db"
    assert f"audit database: {db}" in run.out
    assert f"ahp-backend audit show --db {db}" in run.out  # the command found, where it is
    assert f"transcript:     {run.work / 'transcript.jsonl'}" in run.out


def test_the_audit_database_holds_every_event_once(run: Run) -> None:
    assert run.audit("PRAGMA integrity_check") == [("ok",)]
    total = run.audit("SELECT count(*) FROM events")[0][0]
    distinct = run.audit("SELECT count(DISTINCT source || ' ' || event_id) FROM events")[0][0]
    assert total == distinct
    assert re.search(rf"audit database: .*\({total} events\)", run.out)
    types = dict(run.audit("SELECT type, count(*) FROM events GROUP BY type"))
    assert types["tool.before"] == types["tool.after"] == 6
    for kind in ("session.start", "turn.start", "turn.end", "session.end", "file.changed"):
        assert types[kind] == 1, kind
    assert "hook.failure" not in types  # no backend failed
    per_call = dict(
        run.audit(
            "SELECT call_id, group_concat(type) FROM events WHERE call_id IS NOT NULL "
            "GROUP BY call_id"
        )
    )
    assert {k: sorted(v.split(",")) for k, v in per_call.items()} == {
        call: ["tool.after", "tool.before"] for call in CALLS
    }
    (after,) = run.audit(
        "SELECT event FROM events WHERE type = 'tool.after' AND call_id = 'call_4'"
    )
    event = json.loads(after[0])
    assert event["outcome"] == "denied"
    assert event["execution"] == {"status": "skipped", "reason": "policy"}
    # Metadata by default: what the tools read is not hoarded by the auditor.
    text = " ".join(row[0] for row in run.audit("SELECT event FROM events"))
    assert "A tiny project the demo agent works in" not in text
    assert "not-a-real-secret" not in text


def test_the_transcript_and_the_disk_agree(run: Run) -> None:
    calls = run.transcript()
    assert {
        k: (v["tool"], v["input"].get("command") or v["input"].get("path"))
        for k, v in calls.items()
    } == CALLS
    for ok in ("call_2", "call_3", "call_6"):
        assert calls[ok]["executed"] and calls[ok]["outcome"] == "ok"
    rm = calls["call_4"]
    assert rm["denied_by"] == demo.DENYLIST_ID and not rm["synthetic_denial"]
    assert (rm["executed"], rm["host_stage"]) == (False, "ahp")
    push = calls["call_5"]
    assert push["denied_by"] == demo.APPROVAL_ID and not push["executed"]
    assert "ahp-backend approval grant" in push["reason"]
    note = calls["call_6"]
    assert (note["hook_permission"], note["host_stage"]) == ("allow", "mode")
    env = calls["call_7"]
    assert (env["hook_permission"], env["denied_by"]) == ("none", None)  # no backend objected
    assert (env["host_decision"], env["host_stage"], env["executed"]) == ("deny", "managed", False)

    workspace = run.work / "workspace"
    assert (workspace / "build" / "output.txt").is_file()  # the denied rm -rf never ran
    assert (workspace / "notes" / "summary.txt").read_text().startswith("Read the README")
    assert "not-a-real-secret" not in (run.work / "transcript.jsonl").read_text()

    exchanges = [r for r in run.harness_log() if r.get("kind") == "exchange"]
    by = {(r["callId"], r["backend"], r["mode"]): r["outcome"] for r in exchanges}
    assert by[("call_4", demo.DENYLIST_ID, "intercept")] == "denied"
    assert by[("call_4", demo.APPROVAL_ID, "short-circuit")] == "delivered"
    assert by[("call_5", demo.APPROVAL_ID, "intercept")] == "denied"
    assert by[("call_6", demo.APPROVAL_ID, "intercept")] == "accepted"
    assert not [r for r in exchanges if r["outcome"] == "failed"]


def test_the_approval_backend_is_stopped_afterwards(run: Run) -> None:
    found = re.search(r"HTTP at http://127\.0\.0\.1:(\d+)/", run.out)
    assert found is not None
    with pytest.raises(OSError), socket.create_connection(("127.0.0.1", int(found.group(1))), 2):
        pass
    assert "listening on" in (run.work / "approval-backend.log").read_text()


def test_a_non_empty_folder_is_refused(tmp_path: Path) -> None:
    (tmp_path / "mine.txt").write_text("keep")
    done = subprocess.run(
        [sys.executable, "-m", "ahp_harness.cli", "demo", "--dir", str(tmp_path)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert "not an empty folder" in done.stderr
    assert [p.name for p in tmp_path.iterdir()] == ["mine.txt"]


def test_localize_keeps_the_meaning_of_the_example(tmp_path: Path) -> None:
    paths = demo.DemoPaths(tmp_path)
    demo.copy_demo_files(paths)
    template = json.loads((paths.files / "registration.json").read_text())
    assert template == json.loads((DEMO_FILES / "registration.json").read_text())  # one copy
    backend = ["/opt/bin/ahp-backend"]
    local = demo.localize(
        template, backend=backend, paths=paths, approval_url="http://127.0.0.1:4242/"
    )
    denylist, approval, audit = local["hooks"]
    assert denylist["transport"]["command"] == "/opt/bin/ahp-backend"
    rules = str(paths.files / "denylist.toml")
    assert denylist["transport"]["args"] == ["denylist", "--rules", rules]
    assert approval["transport"] == {"type": "http", "url": "http://127.0.0.1:4242/"}
    assert audit["transport"]["args"] == ["audit", "--db", str(tmp_path / "audit.db")]
    for before, after in zip(template["hooks"], local["hooks"], strict=True):
        assert before["id"] == after["id"]
        assert before["subscriptions"] == after["subscriptions"]
    module = demo.localize(
        template, backend=[sys.executable, "-m", "ahp_backends.cli"], paths=paths, approval_url="x"
    )
    assert module["hooks"][0]["transport"]["args"][:3] == ["-m", "ahp_backends.cli", "denylist"]


def harness_argv(paths: demo.DemoPaths, registration: Path | str) -> list[str]:
    """``ahp-harness run`` as the demo plays it, with ``registration``."""
    files = paths.files
    return [
        "run",
        "--workspace",
        str(paths.workspace),
        "--registration",
        str(registration),
        "--permissions",
        str(files / "permissions.toml"),
        "--managed",
        str(files / "managed.toml"),
        "--model",
        f"script:{files / 'session.json'}",
        "--non-interactive",
        "--approve",
        "never",
        "--transcript",
        str(paths.transcript),
        "--audit-log",
        str(paths.harness_log),
    ]


@pytest.mark.timeout(180)
@pytest.mark.parametrize("example", ["registration-per-event.json", "registration-discovered.json"])
def test_the_other_example_registrations_tell_the_same_story(tmp_path: Path, example: str) -> None:
    """per_event processes, and subscriptions discovered with hooks/configuration."""
    paths = demo.DemoPaths(tmp_path)
    backend = demo.backend_command()
    demo.copy_demo_files(paths)
    demo.prepare_workspace(paths)
    demo.grant(backend, paths)
    template = json.loads((paths.files / example).read_text())
    registration = demo.localize(template, backend=backend, paths=paths, approval_url="unused")
    paths.registration.write_text(json.dumps(registration))
    done = subprocess.run(
        [sys.executable, "-m", "ahp_harness.cli", *harness_argv(paths, paths.registration)],
        capture_output=True,
        text=True,
        timeout=150,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, done.stderr
    lines = (paths.transcript).read_text().splitlines()
    calls = {r["call_id"]: r for r in map(json.loads, lines)}
    story = {k: (v["denied_by"], v["hook_permission"], v["executed"]) for k, v in calls.items()}
    assert story == {
        "call_2": (None, "none", True),
        "call_3": (None, "none", True),
        "call_4": (demo.DENYLIST_ID, "deny", False),
        "call_5": (demo.APPROVAL_ID, "deny", False),
        "call_6": (None, "allow", True),
        "call_7": (None, "none", False),
    }
    assert (paths.workspace / "build" / "output.txt").is_file()
    with sqlite3.connect(paths.audit_db) as conn:
        types = dict(conn.execute("SELECT type, count(*) FROM events GROUP BY type").fetchall())
    assert types["tool.before"] == types["tool.after"] == 6
    assert types["session.end"] == 1


@pytest.mark.timeout(180)
@pytest.mark.parametrize(
    "example", ["registration.json", "registration-per-event.json", "registration-discovered.json"]
)
def test_the_example_registrations_write_nothing_the_user_did_not_name(
    tmp_path: Path, example: str
) -> None:
    """Run by hand, as examples/demo/README.md says (from any folder, the backends on
    PATH): the session writes only to the workspace, transcript and log it was given;
    the backends run in the registration's folder (the package's demo files), and
    nothing lands there either. (The audit database used to land in the working
    folder as ``demo-audit.db``.)"""
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    work = tmp_path / "named"
    paths = demo.DemoPaths(work)
    demo.copy_demo_files(paths)
    demo.prepare_workspace(paths)
    argv = harness_argv(paths, DEMO_FILES / example)
    bin_dir = str(Path(sys.executable).parent)  # where `ahp-backend` is installed
    before = sorted(p.name for p in work.iterdir())
    shipped = sorted(p.name for p in DEMO_FILES.iterdir())
    done = subprocess.run(
        [sys.executable, "-m", "ahp_harness.cli", *argv],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=150,
        stdin=subprocess.DEVNULL,
        env={**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"},
    )
    assert done.returncode == 0, done.stderr
    assert list(cwd.iterdir()) == []
    assert sorted(p.name for p in DEMO_FILES.iterdir()) == shipped
    assert sorted(p.name for p in work.iterdir()) == sorted(
        {*before, paths.transcript.name, paths.harness_log.name}
    )
    calls = [json.loads(line) for line in paths.transcript.read_text().splitlines()]
    assert len(calls) == len(CALLS)  # the session really ran against the backends
    if example != "registration.json":  # (that one needs the approval service running)
        denied = {c["call_id"]: c["denied_by"] for c in calls}
        assert denied["call_4"] == demo.DENYLIST_ID  # the rules file was found and read
    assert not (REPO / "demo-audit.db").exists()


# Fields of a transcript call that make its outcome (the guard's id aside).
OUTCOME_FIELDS = (
    "tool",
    "input",
    "executed",
    "outcome",
    "hook_permission",
    "host_stage",
    "host_decision",
    "reason",
    "synthetic_denial",
)


@pytest.mark.timeout(180)
def test_the_cel_policy_guard_has_the_same_outcomes(
    run: Run, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """``--guard policy``: the CEL policy backend in place of the deny-list, same story."""
    policy = play(tmp_path_factory.mktemp("demo-policy"), "--guard", "policy")
    assert policy.done.returncode == 0, f"{policy.out}\n{policy.done.stderr}"
    assert run.done.returncode == 0
    ours, theirs = policy.transcript(), run.transcript()
    assert sorted(ours) == sorted(theirs) == sorted(CALLS)
    guards = {demo.DENYLIST_ID: "guard", demo.POLICY_ID: "guard"}
    for call_id in CALLS:
        a, b = ours[call_id], theirs[call_id]
        # The approval backend's reason names the grants store, in each run's own folder.
        mine = json.dumps({f: a.get(f) for f in OUTCOME_FIELDS}).replace(str(policy.work), "W")
        other = json.dumps({f: b.get(f) for f in OUTCOME_FIELDS}).replace(str(run.work), "W")
        assert json.loads(mine) == json.loads(other), call_id
        assert guards.get(a["denied_by"], a["denied_by"]) == guards.get(
            b["denied_by"], b["denied_by"]
        ), call_id
    assert ours["call_4"]["denied_by"] == demo.POLICY_ID  # the policy, not the deny-list
    assert (policy.work / "workspace" / "build" / "output.txt").is_file()
    registration = json.loads((policy.work / "registration.json").read_text())
    guard = registration["hooks"][0]
    assert guard["id"] == demo.POLICY_ID
    assert guard["transport"]["args"][-3:] == [
        "policy",
        "--rules",
        str(policy.work / "files" / "policy.toml"),
    ]
    assert "CEL policy   com.example.ahp.policy: stdio, persistent" in policy.out
    assert "the CEL policy refused it (Recursive deletes are not allowed" in policy.out
    assert demo.DENYLIST_ID not in policy.out


def test_the_demo_policy_is_the_deny_list_in_cel() -> None:
    """The two demo rule files deny the same calls with the same reasons and codes."""
    import tomllib

    denylist = tomllib.loads((DEMO_FILES / "denylist.toml").read_text())["rules"]
    policy = tomllib.loads((DEMO_FILES / "policy.toml").read_text())["rule"]
    assert [(r["reason"], r["code"]) for r in denylist] == [
        (r["reason"], r["code"]) for r in policy
    ]
    for deny_rule, cel_rule in zip(denylist, policy, strict=True):
        assert deny_rule["kind"] == "shell" and 'event.tool.kind == "shell"' in cel_rule["when"]
        assert f'matches(r"{deny_rule["input"]["command"]}")' in cel_rule["when"]


def test_an_unknown_guard_is_refused() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "ahp_harness.cli", "demo", "--guard", "opa"],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 2
    assert "--guard" in done.stderr and "'denylist', 'policy'" in done.stderr


@pytest.mark.timeout(120)
def test_the_demo_shows_the_approval_center_and_a_person_denies_the_push(
    tmp_path: Path,
) -> None:
    """``ahp-harness demo --console 20``: the approval center's URL and login secret are
    printed, the push is held there (seen in headless Chromium, Debian's ``chromium``
    through Playwright), a person denies it with a reason, and the session goes on: the
    push never ran, the deny names who and why, and the summary says so."""
    import shutil

    executable = shutil.which("chromium")
    if executable is None:
        pytest.fail(
            "this test needs Debian's chromium: "
            "apt-get update && apt-get install -y --no-install-recommends chromium"
        )
    from playwright.sync_api import expect, sync_playwright

    work = tmp_path / "work"
    env = {**os.environ, "COLUMNS": "220", "NO_COLOR": "1"}
    demo_process = subprocess.Popen(
        [sys.executable, "-m", "ahp_harness.cli", "demo", "--dir", str(work), "--console", "20"],
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert demo_process.stdout is not None
        printed: list[str] = []
        for line in demo_process.stdout:
            printed.append(line)
            found = re.search(r"approval center: (http://\S+) \(login secret: (\S+)\)", line)
            if found:
                url, secret = found.groups()
                break
        else:
            raise AssertionError("".join(printed) + demo_process.communicate()[1])
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=executable, headless=True)
            try:
                page = browser.new_page()
                page.set_default_timeout(30_000)
                page.goto(url + "login")
                page.fill("input[name=name]", "Demo Tester")
                page.fill("input[name=secret]", secret)
                page.click("button[type=submit]")
                held = page.locator("article.held", has_text="git push origin main")
                expect(held).to_be_visible()  # the session waits on it
                held.locator("input[name=reason]").fill("not from the demo")
                held.get_by_role("button", name="Deny").click()
                expect(page.locator(".flash")).to_be_visible()
            finally:
                browser.close()
        out, err = demo_process.communicate(timeout=90)
    finally:
        if demo_process.poll() is None:
            demo_process.kill()
            demo_process.wait()
    out = "".join(printed) + out
    assert demo_process.returncode == 0, f"{out}\n{err}"
    lines = (work / "transcript.jsonl").read_text().splitlines()
    push = {r["call_id"]: r for r in map(json.loads, lines)}["call_5"]
    assert push["denied_by"] == demo.APPROVAL_ID and push["executed"] is False
    assert push["reason"] == "Denied by Demo Tester: not from the demo"
    assert "a person denied it in the approval center: Denied by Demo Tester" in out

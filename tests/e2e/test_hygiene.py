"""Hygiene: no process is left behind, and a killed backend is replaced or handled by policy.

1. 200 ``read_file`` calls in one ``ahp-harness run``, each through a stdio ``per_event``
   backend (``misbehave.py --once``: one process per call); 20 through a ``per_event``
   backend that forks a sleeping grandchild into its process group on every call; 40
   with, besides, a ``per_event`` observer whose every process hangs (never reads, never
   exits). While the harness runs, a watcher scans ``/proc``: the harness never has
   more than a couple of children alive or unreaped at once (the observer's lingering
   processes within their bound). Afterwards no process started for the run is alive
   (none of the recorded backend, grandchild or observer pids, no process at all whose
   command line names this test's folder), and every call was answered by its own
   process (the record files hold one ``start`` per call).
2. A persistent backend (``backends/b_dying.py``) killed with SIGKILL mid-session:
   in the middle of a call (once: the call is retried on a fresh process, which
   answers; twice: the call fails and its subscription's failure policy decides,
   a synthetic denial under fail-closed, the host's own rules under fail-open) or
   between two calls. In every case the later calls are answered by a new process
   (a new pid in the backend's record), the backend's own deny still stops the call
   it denies, and the transcript and the audit log say what happened.
3. ``ahp-harness run`` stopped by a signal mid-session (a ``shell`` call running, a
   persistent observer that never reads nor exits): after SIGINT (Ctrl-C) and after
   SIGTERM (``kill PID``, ``timeout``, ``docker stop``) neither the backend nor the
   tool's processes outlive the harness. (SIGTERM fails today: ``ahp_harness.cli``
   handles no SIGTERM, so the session's clean-up, ``Dispatcher.aclose()`` and the shell
   tool's group kill, never runs.)
4. Processes that leave their process group (``setsid``, a setsid shell with a child of
   its own, a double fork) do not outlive the harness: started by a ``shell`` command,
   or by a persistent stdio backend (``backends/b_detacher.py``), at the session's end
   and after SIGTERM. (They all survived before the harness became a child subreaper
   that kills and reaps its adopted orphans at close, ``ahp_harness.lifetime``.)
5. A process that ignores SIGTERM and forks a new pid every millisecond (each parent
   exiting at once), in the tool's group and after ``setsid``, does not outlive the
   harness, three runs in a row. (The ``setsid`` one survived 3 of 3 while the close
   sent SIGKILL only to a pid it had already sent SIGTERM to: a hopping pid is never seen
   twice. Now every sweep past the grace kills each child's whole group,
   ``ahp_protocol.descendants``.)
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent
DYING = HERE / "backends" / "b_dying.py"
OBSERVER = HERE / "backends" / "b_observer.py"
BACKEND = "com.example.e2e.backend"
# per_event: one call at a time, each child reaped before the next is spawned; one /proc
# scan is not atomic, so it may see a child that is going and the next one as well.
SCAN_SLACK = 2
MAX_CHILDREN = 1 + SCAN_SLACK
MAX_LINGERING = 16  # per_event notification children alive at once (ahp_protocol's bound)


# -- watching processes ---------------------------------------------------------------------


def proc_stat(pid: str) -> tuple[str, int] | None:
    """``(state, ppid)`` of a process, or ``None`` when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return fields[0], int(fields[1])
    except (OSError, IndexError, ValueError):
        return None


def cmdline(pid: str) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode("utf-8", "replace")
    except OSError:
        return ""


def living(marker: str) -> list[int]:
    """Pids of live (not zombie) processes whose command line contains ``marker``."""
    out = []
    for pid in os.listdir("/proc"):
        if pid.isdigit() and int(pid) != os.getpid() and marker in cmdline(pid):
            stat = proc_stat(pid)
            if stat is not None and stat[0] != "Z":
                out.append(int(pid))
    return out


def alive(pid: int) -> bool:
    stat = proc_stat(str(pid))
    return stat is not None and stat[0] != "Z"


@dataclass
class Watch:
    """Scans ``/proc`` while the harness runs: its children, alive and unreaped, at most."""

    marker: str  # in the harness's command line (its workspace path)
    max_children: int = 0
    max_zombies: int = 0
    scans: int = 0
    harness_seen: bool = False
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def __enter__(self) -> Watch:
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        assert self._thread is not None
        self._thread.join(timeout=10)

    def _run(self) -> None:
        while not self._stop.wait(0.02):
            pids = [p for p in os.listdir("/proc") if p.isdigit()]
            harness = {
                int(p)
                for p in pids
                if "ahp_harness.cli" in cmdline(p) and self.marker in cmdline(p)
            }
            if not harness:
                continue
            self.harness_seen = True
            children = zombies = 0
            for pid in pids:
                stat = proc_stat(pid)
                if stat is not None and stat[1] in harness:
                    children += 1
                    zombies += stat[0] == "Z"
            self.scans += 1
            self.max_children = max(self.max_children, children)
            self.max_zombies = max(self.max_zombies, zombies)


# -- 1. per_event: nothing left behind -----------------------------------------------------


@dataclass(frozen=True)
class Spawns:
    name: str
    mode: str  # misbehave.py's mode for the intercepting backend
    calls: int
    hanging_observer: bool = False  # also a per_event observer of tool.after that never exits
    max_children: int = MAX_CHILDREN


SPAWNS = [
    Spawns("plain", "ok", 200),
    Spawns("grandchildren", "grandchild", 20),
    Spawns(
        "hanging-observer",
        "ok",
        40,
        hanging_observer=True,
        max_children=MAX_LINGERING + 2 + SCAN_SLACK,
    ),
]


@pytest.mark.parametrize("case", SPAWNS, ids=[c.name for c in SPAWNS])
def test_per_event_calls_leave_no_process_behind(e2e: Any, case: Spawns) -> None:
    (e2e.workspace / "a.txt").write_text("a\n", "utf-8")
    command = e2e.misbehave(case.mode, record="backend.jsonl")
    hooks = [e2e.hook(BACKEND, command, "per_event", [e2e.intercept("tool.before")])]
    observer_record = e2e.path("observer.jsonl")
    if case.hanging_observer:
        argv = [str(OBSERVER), "hang", "--record", str(observer_record), "--once"]
        transport = {"type": "stdio", "command": sys.executable, "args": argv}
        hooks.append(
            {
                "id": "com.example.e2e.observer",
                "transport": {**transport, "lifecycle": "per_event"},
                "subscriptions": [e2e.observe("tool.after")],
            }
        )
    steps = [{"tool": "read_file", "input": {"path": "a.txt"}}] * case.calls
    with Watch(str(e2e.workspace)) as watch:
        run = e2e.run(registration=e2e.registration(*hooks), steps=steps, timeout=120).ok()

    transcript = run.transcript
    assert len(transcript) == case.calls, run.explain()
    assert all(c["outcome"] == "ok" and c["synthetic_denial"] is False for c in transcript)
    assert not [x for x in run.exchanges() if x["mode"] == "intercept" and x["outcome"] == "failed"]
    record = e2e.json_lines(e2e.path("backend.jsonl"))
    started = [r["pid"] for r in record if r.get("event") == "start"]
    assert len(started) == len(set(started)) == case.calls  # one process per call
    grandchildren = [r["grandchild"] for r in record if r.get("event") == "grandchild"]
    assert len(grandchildren) == (case.calls if case.mode == "grandchild" else 0)
    observers = [r["pid"] for r in e2e.json_lines(observer_record) if r.get("event") == "start"]
    assert len(observers) == (case.calls if case.hanging_observer else 0)

    # During the run: the harness never held on to its children.
    assert watch.harness_seen and watch.scans > 0
    if case.calls >= 100:
        assert watch.max_children >= 1, watch  # the watch does see the children
    assert watch.max_children <= case.max_children, watch
    assert watch.max_zombies <= case.max_children, watch
    # After the run: nothing it started is alive.
    assert not [pid for pid in started + grandchildren + observers if alive(pid)]
    assert living(str(e2e.tmp)) == []


# -- 2. a persistent backend killed mid-session --------------------------------------------


@dataclass(frozen=True)
class Kill:
    name: str
    args: tuple[str, ...]  # b_dying.py's --die / --die-after
    policy: str
    call_2: tuple[str, str | None, bool, bool]  # hook_permission, denied_by, synthetic, executed
    failure: str | None  # the failure class of call_2's exchange, if it failed
    processes: int  # backend processes started in the session


# Steps: read a.txt, read secret.txt (the backend denies it), read a.txt, read secret.txt.
# Counter: step 1 is call 0, step 2 is call 1 (and its retry, if any, call 2), ...
KILLS = [
    Kill("mid-call-once", ("--die", "1"), "fail-closed", ("deny", BACKEND, False, False), None, 2),
    Kill(
        "mid-call-twice-closed",
        ("--die", "1,2"),
        "fail-closed",
        ("deny", BACKEND, True, False),
        "abnormal_exit",
        3,
    ),
    Kill(
        "mid-call-twice-open",
        ("--die", "1,2"),
        "fail-open",
        ("none", None, False, True),
        "abnormal_exit",
        3,
    ),
    Kill(
        "between-calls",
        ("--die-after", "0"),
        "fail-closed",
        ("deny", BACKEND, False, False),
        None,
        2,
    ),
]


@pytest.mark.parametrize("kill", KILLS, ids=[k.name for k in KILLS])
def test_a_killed_persistent_backend_is_replaced_or_its_call_handled_by_policy(
    e2e: Any, kill: Kill
) -> None:
    (e2e.workspace / "a.txt").write_text("a\n", "utf-8")
    (e2e.workspace / "secret.txt").write_text("secret\n", "utf-8")
    record = e2e.path("dying.jsonl")
    hook = {
        "id": BACKEND,
        "transport": {
            "type": "stdio",
            "command": sys.executable,
            "args": [
                str(DYING),
                "--counter",
                str(e2e.path("counter")),
                "--record",
                str(record),
                "--deny-path",
                "secret.txt",
                *kill.args,
            ],
            "lifecycle": "persistent",
        },
        "subscriptions": [e2e.intercept("tool.before", policy=kill.policy)],
    }
    steps = [
        {"tool": "read_file", "input": {"path": path}}
        for path in ("a.txt", "secret.txt", "a.txt", "secret.txt")
    ]
    run = e2e.run(registration=e2e.registration(hook), steps=steps).ok()

    def verdict(call_id: str) -> tuple[Any, ...]:
        c = run.call(call_id)
        return c["hook_permission"], c["denied_by"], c["synthetic_denial"], c["executed"]

    assert verdict("call_1") == ("none", None, False, True), run.explain()
    assert verdict("call_2") == kill.call_2, run.explain()
    assert verdict("call_3") == ("none", None, False, True), run.explain()
    assert verdict("call_4") == ("deny", BACKEND, False, False), run.explain()
    if kill.call_2[2]:  # a synthetic denial says whose failure it was, not a reason of theirs
        assert "b_dying" not in run.call("call_2")["reason"]
    failures = [
        (x["failure"], x["policy"]) for x in run.exchanges("call_2") if x["outcome"] == "failed"
    ]
    assert failures == ([(kill.failure, kill.policy)] if kill.failure else []), run.explain()
    assert not [x for x in run.exchanges() if x["outcome"] == "failed" and x["callId"] != "call_2"]

    entries = e2e.json_lines(record)
    starts = [e["pid"] for e in entries if e["event"] == "start"]
    assert len(starts) == len(set(starts)) == kill.processes, entries
    dead = {e["pid"] for e in entries if e["event"] == "dying"}
    answered = {e["call"]: e["pid"] for e in entries if e["event"] == "call"}
    first = starts[0]
    assert answered[0] == first
    later = [pid for call, pid in answered.items() if call >= max(answered) - 1]
    assert all(pid not in dead and pid != first for pid in later), entries  # a new process
    assert not [pid for pid in starts if alive(pid)]  # all gone after the session


# -- 3. the harness stopped by a signal mid-session ----------------------------------------


def harness_argv(e2e: Any, registration: dict[str, Any], steps: list[dict[str, Any]]) -> list[str]:
    """``ahp-harness run`` as the ``e2e`` fixture runs it (here started by hand: it is stopped
    by a signal mid-session, which ``e2e.run`` cannot do)."""
    reg = e2e.write("signal-registration.json", registration)
    script = e2e.write("signal-script.json", steps)
    return [
        sys.executable,
        "-m",
        "ahp_harness.cli",
        "run",
        "--workspace",
        str(e2e.workspace),
        "--registration",
        str(reg),
        "--model",
        f"script:{script}",
        "--non-interactive",
        "--approve",
        "always",
        "--transcript",
        str(e2e.path("signal-transcript.jsonl")),
    ]


def default_sigint() -> None:
    """In the child before exec: SIGINT as an interactive shell leaves it (a background
    job's inherited "ignore" would hide what Ctrl-C does to the harness)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def wait_for_line(fifo: Path, timeout: float) -> str:
    """The first line written to ``fifo`` (blocking open and read on a thread, bounded)."""
    got: list[str] = []

    def read() -> None:
        with fifo.open("r", encoding="utf-8") as f:
            got.append(f.readline())

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(timeout)
    if reader.is_alive():  # release the blocked open, then fail
        with contextlib.suppress(OSError):
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        reader.join(5)
        raise AssertionError(f"nothing written to {fifo.name} in {timeout}s")
    return got[0]


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_harness_stopped_by_a_signal_leaves_no_process_behind(e2e: Any, signum: int) -> None:
    token = f"{secrets.randbelow(10**6):06d}"
    marker = e2e.path("observer.jsonl")
    fifo = e2e.workspace / "started.fifo"
    os.mkfifo(fifo)
    observer = {
        "id": "com.example.e2e.observer",
        "transport": {
            "type": "stdio",
            "command": sys.executable,
            "args": [str(OBSERVER), "hang", "--record", str(marker)],  # never reads, never exits
            "lifecycle": "persistent",
        },
        "subscriptions": [e2e.observe("tool.before", "tool.after")],
    }
    # The shell call's tool.before starts the observer; the command then says "started".
    steps = [
        {"tool": "shell", "input": {"command": f"echo started > started.fifo; sleep 29.{token}"}}
    ]
    argv = harness_argv(e2e, e2e.registration(observer), steps)
    env = {**os.environ, "NO_COLOR": "1"}
    harness = subprocess.Popen(
        argv,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        cwd=e2e.tmp,
        env=env,
        start_new_session=True,  # a signal to the harness alone, as `kill PID` sends
        preexec_fn=default_sigint,
    )
    try:
        assert wait_for_line(fifo, 30.0).strip() == "started"  # mid-session: the tool runs
        harness.send_signal(signum)
        assert harness.wait(timeout=15) == 128 + signum  # ended by the signal, cleanly
        leftovers = living(str(e2e.tmp)) + living(f"29.{token}")
        shown = {pid: cmdline(str(pid)) for pid in leftovers}
        assert leftovers == [], f"alive after the harness got {signum!r}: {shown}"
    finally:
        if harness.poll() is None:
            os.killpg(harness.pid, signal.SIGKILL)
            harness.wait(timeout=10)
        # Ours only: their command lines name this test's folder or its random token.
        for pid in living(str(e2e.tmp)) + living(f"29.{token}"):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)


# -- 4. processes that leave their group (setsid) do not outlive the harness ---------------

DETACHER = HERE / "backends" / "b_detacher.py"
GONE_WITHIN_S = 10.0  # after the harness exits; polled, never slept on


def wait_gone(pids: list[int], marker: str) -> list[int]:
    """``pids`` and processes naming ``marker`` still alive after ``GONE_WITHIN_S``, if any."""
    deadline = time.monotonic() + GONE_WITHIN_S
    while True:
        left = sorted({p for p in pids if alive(p)} | set(living(marker)))
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.05)


def kill_marked(marker: str) -> None:
    for pid in living(marker):  # ours only: their command lines hold this test's token
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)


# The command waits (on FIFOs, not a timer) until each sleeper runs and said its pid.
DETACHING_COMMAND = (
    "mkfifo r1 r2 r3; "
    # a setsid child
    "setsid sh -c 'echo $$ > r1; exec sleep 1000.TOKEN' </dev/null >/dev/null 2>&1 & "
    # a setsid shell that keeps a child of its own
    "setsid sh -c 'sleep 1000.TOKEN & echo $! > r2; wait' </dev/null >/dev/null 2>&1 & "
    # a double fork: the intermediate subshell exits at once
    "( setsid sh -c 'echo $$ > r3; exec sleep 1000.TOKEN' </dev/null >/dev/null 2>&1 & ); "
    "read a < r1; read b < r2; read c < r3; echo $a $b $c > pids.txt"
)


def test_a_shell_command_that_leaves_its_group_does_not_outlive_the_harness(e2e: Any) -> None:
    token = f"{secrets.randbelow(10**6):06d}"
    marker = f"1000.{token}"
    steps = [{"tool": "shell", "input": {"command": DETACHING_COMMAND.replace("TOKEN", token)}}]
    try:
        run = e2e.run(steps=steps, approve="always").ok()
        assert run.call("call_1")["outcome"] == "ok", run.explain()
        pids = [int(p) for p in (e2e.workspace / "pids.txt").read_text("utf-8").split()]
        assert len(pids) == 3, pids
        left = wait_gone(pids, marker)
        shown = {pid: cmdline(str(pid)) for pid in left}
        assert left == [], f"alive after the harness exited: {shown}"
    finally:
        kill_marked(marker)


@pytest.mark.parametrize("signum", [None, signal.SIGTERM], ids=["session-end", "SIGTERM"])
def test_a_backends_setsid_descendants_do_not_outlive_the_harness(
    e2e: Any, signum: int | None
) -> None:
    token = f"{secrets.randbelow(10**6):06d}"
    marker = f"1000.{token}"
    record = e2e.path("detacher.jsonl")
    fifo = e2e.workspace / "ready.fifo"
    os.mkfifo(fifo)
    args = [str(DETACHER), "--record", str(record), "--ready", str(fifo), "--token", token]
    backend = {
        "id": "com.example.e2e.detacher",
        "transport": {
            "type": "stdio",
            "command": sys.executable,
            "args": args,
            "lifecycle": "persistent",
        },
        "subscriptions": [e2e.observe("tool.before")],
    }
    # tool.before starts the backend; the command returns once it has started its sleepers.
    wait = "read line < ready.fifo; echo $line"
    if signum is not None:
        wait += f"; sleep 29.{token}"  # still running when the signal comes
    steps = [{"tool": "shell", "input": {"command": wait}}]
    try:
        if signum is None:
            run = e2e.run(registration=e2e.registration(backend), steps=steps, approve="always")
            assert run.ok().call("call_1")["outcome"] == "ok", run.explain()
        else:
            argv = harness_argv(e2e, e2e.registration(backend), steps)
            harness = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                cwd=e2e.tmp,
                start_new_session=True,
            )
            try:
                deadline = time.monotonic() + 30
                while len(e2e.json_lines(record)) < 3:  # the sleepers are running
                    assert harness.poll() is None and time.monotonic() < deadline
                    time.sleep(0.05)
                harness.send_signal(signum)
                assert harness.wait(timeout=15) == 128 + signum
            finally:
                if harness.poll() is None:
                    os.killpg(harness.pid, signal.SIGKILL)
                    harness.wait(timeout=10)
        sleepers = {r["role"]: r["pid"] for r in e2e.json_lines(record)}
        assert set(sleepers) == {"leader", "nested", "double-fork"}, sleepers
        left = wait_gone(list(sleepers.values()), marker) + wait_gone([], f"29.{token}")
        shown = {pid: cmdline(str(pid)) for pid in left}
        assert left == [], f"alive after the harness exited: {shown}"
    finally:
        kill_marked(marker)
        kill_marked(f"29.{token}")


# -- 5. a pid-hopping process that ignores SIGTERM does not outlive the harness -------------

# Ignores SIGTERM and forks without end, each parent exiting at once (a new pid every
# millisecond or so); ``setsid`` first when asked, so it also leaves the tool's group.
# After 20 hops it says its process group on the FIFO it is given (a scan of ``/proc`` can
# miss a process whose pid changes while it reads; its group stays and can be probed); it
# stops by itself after 20 s
# (a failing test must not leave a fork bomb on the machine). No single quote in it: the
# shell command below quotes it with them.
HOPPER = (
    "import os, signal, sys, time\n"
    "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
    'if sys.argv[2] == "setsid":\n'
    "    os.setsid()\n"
    "end = time.monotonic() + 20\n"
    "hops = 0\n"
    "while time.monotonic() < end:\n"
    "    if os.fork():\n"
    "        os._exit(0)\n"
    "    hops += 1\n"
    "    if hops == 20:\n"
    '        with open(sys.argv[3], "w") as ready:\n'
    "            ready.write(str(os.getpgrp()))\n"
    "    time.sleep(0.001)\n"
)


def group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def wait_groups_gone(groups: list[int], marker: str) -> list[str]:
    """Groups of ``groups`` and processes naming ``marker`` alive after ``GONE_WITHIN_S``."""
    deadline = time.monotonic() + GONE_WITHIN_S
    while True:
        left = [f"group {g}" for g in groups if group_alive(g)]
        left += [f"pid {p}: {cmdline(str(p))}" for p in living(marker)]
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.05)


def kill_hoppers(groups: list[int], marker: str, within_s: float = 10.0) -> None:
    """Kill the hoppers' groups, and every process naming ``marker``, until none is left."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        live = [g for g in groups if group_alive(g)]
        marked = living(marker)
        if not live and not marked:
            return
        for pgid in live:
            with contextlib.suppress(OSError):
                os.killpg(pgid, signal.SIGKILL)
        for pid in marked:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.01)


@pytest.mark.parametrize("attempt", [1, 2, 3])
def test_a_pid_hopping_process_that_ignores_sigterm_does_not_outlive_the_harness(
    e2e: Any, attempt: int
) -> None:
    token = f"{secrets.randbelow(10**6):06d}"
    marker = f"hopper.{token}"
    hopper = f'{sys.executable} -c "$HOPPER" {marker}'
    command = (
        "mkfifo h1 h2; "
        f"{hopper} plain h1 </dev/null >/dev/null 2>&1 & "
        f"{hopper} setsid h2 </dev/null >/dev/null 2>&1 & "
        "read a < h1; read b < h2; echo $a $b > groups.txt"
    )
    steps = [{"tool": "shell", "input": {"command": f"HOPPER='{HOPPER}'; {command}"}}]
    groups: list[int] = []
    try:
        run = e2e.run(steps=steps, approve="always").ok()
        groups = [int(g) for g in (e2e.workspace / "groups.txt").read_text("utf-8").split()]
        assert run.call("call_1")["outcome"] == "ok", run.explain()
        assert len(groups) == 2 and groups[0] != groups[1], groups  # one left the tool's group
        left = wait_groups_gone(groups, marker)
        assert left == [], f"alive after the harness exited (attempt {attempt}): {left}"
    finally:
        kill_hoppers(groups, marker)

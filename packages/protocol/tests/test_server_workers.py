"""``--http ... --workers N``: the pre-fork supervisor of the server kit, in real processes.

A test backend answers every intercept with a message naming its pid, so the tests see
which worker answered. Waits are on signals (a stderr line, a process exit through a
pidfd), never on sleeps. POSIX (Linux: pidfds and ``/proc``), as the feature is.
"""

from __future__ import annotations

import contextlib
import http.client
import io
import json
import os
import select
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent / "backends"))
from kit_messages import intercept, tool_before

from kit_testing import StderrLines

BACKEND = Path(__file__).parent / "backends" / "kit_pid.py"
DEADLINE = 20.0
ATTEMPTS = 400  # fresh connections tried before giving up on reaching a worker

pytestmark = pytest.mark.timeout(60)


class Supervised:
    """``kit_pid.py --http 127.0.0.1:0 --workers N``, its stderr read on a thread."""

    def __init__(self, *args: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(BACKEND), "--http", "127.0.0.1:0", *args],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        assert self.proc.stderr is not None
        self.stderr = StderrLines(self.proc.stderr, DEADLINE)
        address = self.stderr.wait_for("listening on http://").split("http://", 1)[1].strip()
        host, _, port = address.rpartition(":")
        self.host, self.port = host, int(port)
        listed = self.stderr.wait_for(" workers: ")
        self.workers = [int(p) for p in listed.split("workers: ", 1)[1].split(", ")]

    def answer(self, event_id: str) -> int:
        """The pid of the worker that answered one request on a fresh connection."""
        conn = http.client.HTTPConnection(self.host, self.port, timeout=DEADLINE)
        try:
            body = json.dumps(intercept(tool_before(event_id), ["message"]))
            conn.request("POST", "/", body, {"Content-Type": "application/json"})
            response = conn.getresponse()
            assert response.status == 200
            message: dict[str, Any] = json.loads(response.read())
        finally:
            conn.close()
        text = message["result"]["effects"][0]["text"]
        assert text.startswith("pid ")
        return int(text.split()[1])

    def reach(self, wanted: set[int]) -> set[int]:
        """Send requests on fresh connections until every pid in ``wanted`` has answered."""
        seen: set[int] = set()
        for i in range(ATTEMPTS):
            seen.add(self.answer(f"evt_{i}"))
            if wanted <= seen:
                return seen
        raise AssertionError(f"after {ATTEMPTS} requests only {seen} answered, not {wanted}")


@contextlib.contextmanager
def supervised(*args: str) -> Iterator[Supervised]:
    server = Supervised(*args)
    try:
        yield server
    finally:
        if server.proc.poll() is None:
            server.proc.kill()
        server.proc.wait(timeout=DEADLINE)
        for pid in server.workers:  # never leave a worker behind, whatever failed
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def wait_gone(pid: int) -> None:
    """Block (bounded) until process ``pid`` (not our child) has exited."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    try:
        ready, _, _ = select.select([fd], [], [], DEADLINE)
        assert ready, f"process {pid} still running after {DEADLINE} s"
    finally:
        os.close(fd)


def parent_of(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def test_two_workers_answer_and_sigterm_stops_them_all() -> None:
    with supervised("--workers", "2") as server:
        assert len(server.workers) == 2
        assert all(parent_of(pid) == server.proc.pid for pid in server.workers)
        assert server.reach(set(server.workers)) == set(server.workers)
        server.proc.send_signal(signal.SIGTERM)
        assert server.proc.wait(timeout=DEADLINE) == 0
        for pid in server.workers:
            wait_gone(pid)
            assert not Path(f"/proc/{pid}").exists()
        assert "all workers stopped" in "".join(server.stderr.lines)
        assert "Traceback" not in "".join(server.stderr.lines)


def test_a_killed_worker_is_replaced_and_service_continues() -> None:
    with supervised("--workers", "2") as server:
        victim, survivor = server.workers
        os.kill(victim, signal.SIGKILL)
        line = server.stderr.wait_for(f"worker {victim} killed by SIGKILL; started worker ")
        replacement = int(line.rsplit(" ", 1)[1])
        server.workers.append(replacement)
        assert parent_of(replacement) == server.proc.pid
        assert server.reach({survivor, replacement}) == {survivor, replacement}
        server.proc.send_signal(signal.SIGINT)
        assert server.proc.wait(timeout=DEADLINE) == 0
        for pid in (survivor, replacement):
            wait_gone(pid)


def test_workers_die_with_a_killed_supervisor() -> None:
    with supervised("--workers", "2") as server:
        server.proc.kill()  # no chance to clean up: the kernel's death signal does it
        server.proc.wait(timeout=DEADLINE)
        for pid in server.workers:
            wait_gone(pid)


def test_one_worker_is_this_process() -> None:
    proc = subprocess.Popen(
        [sys.executable, str(BACKEND), "--http", "127.0.0.1:0", "--workers", "1"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline().decode()
        assert "listening on http://" in line
        host, _, port = line.split("http://", 1)[1].strip().rpartition(":")
        conn = http.client.HTTPConnection(host, int(port), timeout=DEADLINE)
        body = json.dumps(intercept(tool_before("evt_one"), ["message"]))
        conn.request("POST", "/", body, {"Content-Type": "application/json"})
        answer = json.loads(conn.getresponse().read())
        conn.close()
        assert answer["result"]["effects"][0]["text"] == f"pid {proc.pid}"
    finally:
        proc.terminate()
        proc.wait(timeout=DEADLINE)


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--http", "127.0.0.1:0", "--workers", "0"], "--workers 0: must be at least 1"),
        (["--http", "127.0.0.1:0", "--workers", "-3"], "--workers -3: must be at least 1"),
        (["--workers", "2"], "--workers applies to --http only"),
        (["--once", "--workers", "2"], "--workers applies to --http only"),
        (["--http", "127.0.0.1:0", "--workers", "two"], "invalid int value: 'two'"),
    ],
)
def test_bad_workers_are_a_clear_usage_error(args: list[str], needle: str) -> None:
    done = subprocess.run(
        [sys.executable, str(BACKEND), *args],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=DEADLINE,
    )
    assert done.returncode == 2
    assert needle in done.stderr.decode()
    assert b"listening" not in done.stderr


def test_workers_that_die_at_start_make_the_supervisor_give_up() -> None:
    script = (
        "import os, sys; sys.path.insert(0, sys.argv[1]); from kit_pid import backend; "
        "os.register_at_fork(after_in_child=lambda: os._exit(3)); "
        "backend.run(['--http', '127.0.0.1:0', '--workers', '2'])"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, str(BACKEND.parent)],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=DEADLINE,
    )
    err = done.stderr.decode()
    assert done.returncode == 1, err
    assert "exited with status 3; started worker" in err
    assert "workers in a row ended within 2 s of starting; giving up" in err
    assert "Traceback" not in err


def test_a_worker_that_ignores_sigterm_is_killed_after_the_stop_timeout() -> None:
    script = (
        "import os, signal, sys; from ahp_protocol.server.workers import supervise\n"
        "def serve():\n"
        "    signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        # One write per line: two workers share the pipe, and print() writes the newline
        # separately when stdout is unbuffered (PYTHONUNBUFFERED), so lines could mix.
        "    os.write(1, b'%d\\n' % os.getpid())\n"
        "    signal.pause()\n"
        "supervise(2, serve, name='stubborn', stop_timeout=0.5)\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", script],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,  # so that the finally can kill the group, workers included
    )
    assert proc.stdout is not None
    workers: list[int] = []
    try:  # inside the try: a bad line must not leak the supervisor and its stubborn workers
        for _ in range(2):
            workers.append(int(proc.stdout.readline()))  # both ignore SIGTERM now
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=DEADLINE)
        assert proc.returncode == 0, err
        assert b"stubborn: all workers stopped" in err
        for pid in workers:
            wait_gone(pid)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)  # the workers ignore SIGTERM, even a parent's death
        proc.wait(timeout=DEADLINE)
        for pid in workers:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def test_a_supervisor_note_is_one_write_of_a_whole_line(monkeypatch: pytest.MonkeyPatch) -> None:
    # The workers write to the supervisor's stderr too: a note written in pieces (print()
    # writes the newline apart) can have a worker's line land inside it.
    from ahp_protocol.server import workers

    writes: list[str] = []

    class Recorder(io.StringIO):
        def write(self, text: str) -> int:
            writes.append(text)
            return len(text)

    monkeypatch.setattr(sys, "stderr", Recorder())
    workers._note("com.example.notes", "2 workers: 101, 102")
    assert writes == ["com.example.notes: 2 workers: 101, 102\n"]

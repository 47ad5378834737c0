"""Ctrl-C in an interactive session (:mod:`ahp_harness.interrupt`): the first stops the
running tool (its process is killed, the call ends as ``cancelled``, the session goes
on), the second ends the session.

Through a real ``ahp-harness run`` on a pseudo-terminal, the keys typed as a user types
them (Ctrl-C is the terminal's SIGINT). The tool says it is running through a FIFO
(its pid), never a sleep; every wait is bounded, far below the shell tool's 30 s.
"""

from __future__ import annotations

import contextlib
import os
import pty
import select
import signal
import sys
import time
from pathlib import Path

import anyio.lowlevel
import pytest
from ahp_harness.interrupt import Interrupts, ends_session, stoppable

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="a pseudo-terminal")

HARNESS = Path(sys.executable).with_name("ahp-harness")
DEADLINE = 20.0


class Terminal:
    """``ahp-harness run`` on a pseudo-terminal: type keys, wait for text."""

    def __init__(self, workspace: Path) -> None:
        self.pid, self.fd = pty.fork()
        if self.pid == 0:  # the child: the harness, as a terminal starts it
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            os.execv(str(HARNESS), [str(HARNESS), "run", "--workspace", str(workspace)])
        self.seen = b""

    def type(self, keys: str) -> None:
        os.write(self.fd, keys.encode())

    def wait_for(self, text: str) -> None:
        deadline = time.monotonic() + DEADLINE
        while text.encode() not in self.seen:
            left = deadline - time.monotonic()
            assert left > 0, f"no {text!r} within {DEADLINE}s; screen: {self.seen[-2000:]!r}"
            if select.select([self.fd], [], [], left)[0]:
                try:
                    chunk = os.read(self.fd, 65536)
                except OSError:  # EIO: the harness closed the terminal
                    chunk = b""
                assert chunk, f"the harness exited before {text!r}: {self.seen[-2000:]!r}"
                self.seen += chunk
        self.seen = self.seen.split(text.encode(), 1)[1]

    def exit_status(self) -> int:
        deadline = time.monotonic() + DEADLINE
        while time.monotonic() < deadline:
            with_output = select.select([self.fd], [], [], 0.2)[0]
            if with_output:
                with contextlib.suppress(OSError):  # EIO once the harness is gone
                    self.seen += os.read(self.fd, 65536)
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                return os.waitstatus_to_exitcode(status)
        raise AssertionError("the harness did not exit")

    def close(self) -> None:
        with contextlib.suppress(ProcessLookupError, ChildProcessError):
            os.kill(self.pid, signal.SIGKILL)
            os.waitpid(self.pid, 0)
        os.close(self.fd)


def test_ctrl_c_stops_the_running_tool_and_a_second_ends_the_session(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    fifo = workspace / "running"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDWR | os.O_NONBLOCK)  # never blocks the tool's write
    term = Terminal(workspace)
    try:
        term.wait_for("you>")
        term.type("stop a long command\r")
        term.wait_for("model>")
        term.type("/shell echo $$ > running; exec sleep 30\r")
        term.wait_for("allow? [y/N]")
        term.type("y\r")
        assert select.select([reader], [], [], DEADLINE)[0], "the command never started"
        tool_pid = int(os.read(reader, 64).decode().strip())

        term.type("\x03")  # Ctrl-C while the command runs
        term.wait_for("the running tool was stopped")
        term.wait_for("→ cancelled")
        term.wait_for("stopped by the user (Ctrl-C)")  # what the model is told
        term.wait_for("model>")  # the session goes on
        with pytest.raises(ProcessLookupError):  # killed and reaped, not left to its 30 s
            os.kill(tool_pid, 0)

        term.type("\x03")  # the second Ctrl-C ends the session
        assert term.exit_status() == 0
        assert b"session over: 1 tool calls" in term.seen
    finally:
        os.close(reader)
        term.close()


@pytest.mark.anyio
async def test_only_tool_runs_are_stopped_and_only_once() -> None:
    interrupts = Interrupts()
    assert not interrupts.interrupt()  # nothing running: the session ends
    with interrupts.installed():
        assert not ends_session()
        with stoppable() as scope:
            assert interrupts.interrupt()  # the first Ctrl-C stops the run
            assert not interrupts.interrupt()  # the next, while it stops, ends the session
            await anyio.lowlevel.checkpoint()
        assert scope.cancelled_caught
        assert ends_session()  # Ctrl-C at the prompt after it ends the session
        with stoppable():
            assert not ends_session()  # a new run: a Ctrl-C stops it first
    with stoppable() as scope:  # not installed: nothing stops it
        assert not interrupts.interrupt()
    assert not scope.cancelled_caught

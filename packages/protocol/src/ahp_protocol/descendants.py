"""No descendant outlives the process that owns it: a child subreaper that converges.

Owns, for a whole process that starts others (``ahp-harness run``, ``ahp-conformance
backend``), the rule for ending every process it started and every process those
started, on Linux:

* **Adoption.** :class:`Descendants` makes the process a *child subreaper*
  (``prctl(PR_SET_CHILD_SUBREAPER, 1)``, no privilege needed): a descendant that lost
  its parent, ``setsid`` or double fork included, becomes this process's child instead
  of ``init``'s, so it can be found (``/proc/self/task/*/children``, a list the kernel
  keeps, not a racy scan of ``/proc``) and killed.
* **Reaping while running.** :meth:`Descendants.reap` reaps adopted orphans that have
  exited, only those that cannot be a child the owner spawned itself (not a session
  leader, not in the owner's session: every tool and backend is started in a new
  session), so no one else's ``wait`` is ever stolen. :meth:`Descendants.watch` (async)
  and :meth:`Descendants.reap_on_sigchld` (sync, main thread) do it on every
  ``SIGCHLD``.
* **Convergence at close.** :meth:`Descendants.aclose` / :meth:`Descendants.close`
  (after every tool and transport is closed) repeat one sweep until no child is left:
  every exited child is reaped; every living one gets ``SIGTERM`` once, and, from
  ``grace`` seconds on, ``SIGKILL`` at every sweep, with the whole process group it is
  in when that group is not the owner's (a group in another session holds only
  descendants; ``kill`` of a group is atomic against ``fork``, so a process that forks a
  new pid every millisecond and ignores ``SIGTERM`` is killed with all its pids at
  once). Killing a child re-parents its own children to the owner, so the next sweep
  finds them. After ``bound`` seconds it gives up and returns the pids still alive
  (the caller says so on stderr).

What remains: a descendant that calls ``setsid`` on every hop *and* forks faster than a
sweep (a new session and group per pid) is killed one pid at a time and may outrun the
sweeps until ``bound``; a process started by a descendant while the owner is not a
subreaper (another operating system, ``prctl`` refused, or a caller's ``main(argv)``
inside a bigger process, where nothing here is switched on) re-parents to ``init`` and
is out of reach once it leaves its group; an owner killed with ``SIGKILL`` cleans up
nothing. Elsewhere than Linux nothing here does anything.

Never does: kill or reap a process that is not the owner's child (or in the group of
one outside the owner's session); block an event loop longer than one scan of its
children.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from types import FrameType
from typing import Final

__all__ = ["Descendants", "prctl"]

_PR_SET_CHILD_SUBREAPER: Final = 36
_SWEEP_S: Final = 0.02
"""Between two sweeps while nothing is being killed."""
_CHASE_S: Final = 0.002
"""Between two sweeps once ``SIGKILL`` is being sent: a hopping pid is chased at once."""


def _linux() -> bool:
    return sys.platform.startswith("linux")


def prctl(option: int, value: int) -> bool:
    """``prctl(option, value)`` through libc; False when unavailable or refused."""
    if not _linux():
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(option, value, 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


@dataclass(frozen=True)
class _Child:
    pid: int
    state: str
    pgrp: int
    session: int


def _stat(pid: int) -> _Child | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        return _Child(pid, fields[0].decode("ascii", "replace"), int(fields[2]), int(fields[3]))
    except (OSError, IndexError, ValueError):
        return None


def _child_pids() -> set[int]:
    """Pids whose parent is this process (its threads' ``children`` lists, else a scan)."""
    me = os.getpid()
    pids: set[int] = set()
    try:
        tasks = os.listdir(f"/proc/{me}/task")
        for tid in tasks:
            with open(f"/proc/{me}/task/{tid}/children", "rb") as f:
                pids.update(int(p) for p in f.read().split())
        return pids
    except (OSError, ValueError):
        pass
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                if int(f.read().rsplit(b")", 1)[1].split()[1]) == me:
                    pids.add(int(entry))
        except (OSError, IndexError, ValueError):
            continue
    return pids


def _children() -> list[_Child]:
    return [c for c in map(_stat, sorted(_child_pids())) if c is not None]


def _reap(pid: int) -> None:
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, os.WNOHANG)


class Descendants:
    """This process as a child subreaper: orphans are adopted, reaped, and killed at close."""

    def __init__(self, *, grace: float = 1.0, bound: float = 5.0) -> None:
        self.grace = grace
        self.bound = bound
        self.active = prctl(_PR_SET_CHILD_SUBREAPER, 1)
        self._session = os.getsid(0) if self.active else 0
        self._group = os.getpgid(0) if self.active else 0
        self._on_sigchld: Callable[[int, FrameType | None], object] | None = None

    def reap(self) -> int:
        """Reap exited orphans that this process did not spawn itself; how many."""
        if not self.active:
            return 0
        reaped = 0
        for child in _children():
            adopted = child.session not in (child.pid, self._session)
            if child.state == "Z" and adopted:
                _reap(child.pid)
                reaped += 1
        return reaped

    async def watch(self) -> None:
        """Reap on every ``SIGCHLD`` until cancelled (run it in the owner's task group)."""
        if not self.active:
            return
        import anyio

        with anyio.open_signal_receiver(signal.SIGCHLD) as signals:
            self.reap()
            async for _ in signals:
                self.reap()

    def reap_on_sigchld(self) -> None:
        """Reap on every ``SIGCHLD`` from now on (a synchronous owner; main thread only)."""
        if self.active:
            self._on_sigchld = lambda *_: self.reap()
            signal.signal(signal.SIGCHLD, self._on_sigchld)

    def _signal(self, child: _Child, signum: int) -> None:
        group = child.pgrp != self._group and (
            child.pgrp == child.pid or child.session != self._session
        )
        if group:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(child.pgrp, signum)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(child.pid, signum)

    def _sweep(self, late: bool, terminated: set[int]) -> bool:
        """One pass over the children: reap the exited, signal the living; any child seen?

        A zombie counts: its children were re-parented to us as it exited, maybe onto a
        thread whose list this pass had already read, so only a pass that sees no child
        at all says nothing is left."""
        children = _children()
        for child in children:
            if child.state == "Z":
                _reap(child.pid)
            elif late:
                self._signal(child, signal.SIGKILL)
            elif child.pid not in terminated:
                terminated.add(child.pid)
                self._signal(child, signal.SIGTERM)
        return bool(children)

    def _sweeps(self) -> Iterator[float]:
        """Sweep until two passes in a row see no child, or ``bound`` passes; yields the
        pause before the next pass."""
        terminated: set[int] = set()
        start = time.monotonic()
        empty = 0
        while (elapsed := time.monotonic() - start) < self.bound:
            late = elapsed >= self.grace
            empty = 0 if self._sweep(late, terminated) else empty + 1
            if empty == 2:
                return
            yield _CHASE_S if late else _SWEEP_S

    def _left(self) -> list[int]:
        return [c.pid for c in _children() if c.state != "Z"]

    async def aclose(self) -> list[int]:
        """Kill and reap every child until none is left (after every tool and transport is
        closed); ``SIGKILL`` from ``grace`` seconds on; gives up after ``bound`` seconds.
        Returns the pids still alive then (empty when it converged)."""
        if not self.active:
            return []
        import anyio

        with anyio.CancelScope(shield=True):
            for pause in self._sweeps():
                await anyio.sleep(pause)
        return self._left()

    def close(self) -> list[int]:
        """:meth:`aclose` for a synchronous owner (blocks for at most ``bound`` seconds)."""
        if not self.active:
            return []
        if self._on_sigchld is not None and signal.getsignal(signal.SIGCHLD) is self._on_sigchld:
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # the sweeps alone reap from now
        for pause in self._sweeps():
            time.sleep(pause)
        return self._left()

"""A pre-fork supervisor: N worker processes serving one listening socket (POSIX only).

:func:`supervise` is what ``serve_http(..., workers=N)`` runs for N > 1. The parent has
bound and is listening on the socket already; it forks ``count`` workers, each of which
calls ``serve()`` (uvicorn on the inherited socket), so every worker can answer any
connection (the kernel hands each new connection to one of them). The parent serves
nothing: it replaces a worker that exits or is killed (SIGKILL included) with a fresh
fork, and on SIGTERM or SIGINT sends SIGTERM to every worker, waits for them (at most
``stop_timeout`` seconds, then SIGKILL) and returns. It never leaves a worker behind:
every path out of :func:`supervise`, an exception included, stops and reaps them, and
on Linux each worker asks the kernel for SIGTERM should the parent die without
cleaning up (``PR_SET_PDEATHSIG``).

A worker that dies within ``crash_window`` seconds of its start, ``max_crashes`` times
in a row, is not replaced again: :func:`supervise` stops the others and raises
:class:`WorkersFailed` (a worker that cannot start would otherwise be forked forever).

What crosses the fork is the caller's business: state that holds threads or
connections (a database pool) must be opened in each worker, or released before the
fork (``ahp_backends.db`` does the latter for its databases). Never forks with
``count`` < 2 (one worker is the caller's own process) and never on Windows.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import sys
import time
from collections.abc import Callable
from typing import Final

__all__ = ["STOP_TIMEOUT_S", "WorkersFailed", "check_workers", "supervise"]

STOP_TIMEOUT_S: Final = 10.0
"""Seconds workers get to finish after SIGTERM before they are killed."""
CRASH_WINDOW_S: Final = 2.0
MAX_CRASHES: Final = 5
_PR_SET_PDEATHSIG: Final = 1
_STOP_SIGNALS: Final = (signal.SIGTERM, signal.SIGINT)


class WorkersFailed(RuntimeError):
    """Workers kept dying as soon as they started; the supervisor gave up."""


def check_workers(count: int) -> None:
    """``ValueError`` saying what to fix unless ``count`` workers can be run here."""
    if count < 1:
        raise ValueError(f"--workers {count}: must be at least 1")
    if count > 1 and (sys.platform == "win32" or not hasattr(os, "fork")):
        raise ValueError(
            f"--workers {count}: several worker processes need POSIX fork(); "
            "on this platform run one process per port (--workers 1)"
        )


def _note(name: str, text: str) -> None:
    # One write per line: the workers share this stderr, and print() writes the newline
    # apart when stderr is unbuffered (PYTHONUNBUFFERED), letting a worker's line in.
    sys.stderr.write(f"{name}: {text}\n")
    sys.stderr.flush()


def _die_with_parent() -> None:
    """Linux: SIGTERM this process when its parent dies (best effort elsewhere: none)."""
    if not sys.platform.startswith("linux"):
        return
    with contextlib.suppress(Exception):
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)


def _describe(status: int) -> str:
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        with contextlib.suppress(ValueError):
            return f"killed by {signal.Signals(number).name}"
        return f"killed by signal {number}"
    return f"exited with status {os.waitstatus_to_exitcode(status)}"


def supervise(
    count: int,
    serve: Callable[[], None],
    *,
    name: str = "ahp",
    stop_timeout: float = STOP_TIMEOUT_S,
    crash_window: float = CRASH_WINDOW_S,
    max_crashes: int = MAX_CRASHES,
) -> None:
    """Run ``serve()`` in ``count`` forked workers until SIGTERM/SIGINT (see the module doc).

    ``name`` prefixes the lines written to stderr (a worker started, replaced, stopped).
    """
    check_workers(count)
    if count < 2:
        raise ValueError("supervise() forks two workers or more; serve in-process for one")
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_r, False)
    os.set_blocking(wake_w, False)
    watched = (signal.SIGCHLD, *_STOP_SIGNALS)
    previous = {sig: signal.getsignal(sig) for sig in watched}
    old_wakeup = signal.set_wakeup_fd(wake_w)
    for sig in watched:  # a Python handler, so that the wakeup fd is written
        signal.signal(sig, lambda number, frame: None)
    parent = os.getpid()
    workers: dict[int, float] = {}  # pid -> start time

    def spawn() -> int:
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid:
            workers[pid] = time.monotonic()
            return pid
        code = 1
        try:  # the worker: no supervisor state, default signals, then serve
            signal.set_wakeup_fd(-1)
            for sig in watched:
                signal.signal(sig, signal.SIG_DFL)
            os.close(wake_r)
            os.close(wake_w)
            _die_with_parent()
            if os.getppid() != parent:  # the parent died before the request took effect
                os._exit(0)
            serve()
            code = 0
        except BaseException as exc:  # never return into the parent's code
            _note(name, f"worker {os.getpid()} failed ({type(exc).__name__})")
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)

    crashes = 0
    try:
        for _ in range(count):
            spawn()
        _note(name, f"{count} workers: " + ", ".join(str(p) for p in workers))
        while True:
            for pid, status, started in _reap(workers):
                quick = time.monotonic() - started < crash_window
                crashes = crashes + 1 if quick else 0
                if crashes >= max_crashes:
                    raise WorkersFailed(
                        f"{crashes} workers in a row ended within {crash_window:g} s of "
                        "starting; giving up"
                    )
                _note(name, f"worker {pid} {_describe(status)}; started worker {spawn()}")
            received = _wait(wake_r, None)
            if any(sig in received for sig in _STOP_SIGNALS):
                break
    finally:
        _stop_all(workers, stop_timeout, wake_r)
        signal.set_wakeup_fd(old_wakeup)
        for sig, handler in previous.items():
            signal.signal(sig, handler if handler is not None else signal.SIG_DFL)
        os.close(wake_r)
        os.close(wake_w)
    _note(name, "all workers stopped")


def _reap(workers: dict[int, float]) -> list[tuple[int, int, float]]:
    """``(pid, wait status, start time)`` of each worker that has ended, now unlisted."""
    ended = []
    for pid in list(workers):
        try:
            done, status = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:  # reaped already: gone all the same
            done, status = pid, 0
        if done:
            ended.append((pid, status, workers.pop(pid)))
    return ended


def _wait(wake_r: int, timeout: float | None) -> bytes:
    """Block until a signal arrives (SIGCHLD included) or ``timeout``; the signal numbers."""
    with contextlib.suppress(InterruptedError):
        select.select([wake_r], [], [], timeout)
    with contextlib.suppress(BlockingIOError):
        return os.read(wake_r, 512)
    return b""


def _stop_all(workers: dict[int, float], stop_timeout: float, wake_r: int) -> None:
    """SIGTERM the workers still running, wait for them, SIGKILL the stragglers after
    ``stop_timeout`` seconds; reap them all."""
    for pid in workers:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + stop_timeout
    while True:
        _reap(workers)
        if not workers:
            return
        left = deadline - time.monotonic()
        if left <= 0:
            for pid in workers:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            for pid in workers:
                with contextlib.suppress(ChildProcessError):
                    os.waitpid(pid, 0)
            workers.clear()
            return
        _wait(wake_r, left)

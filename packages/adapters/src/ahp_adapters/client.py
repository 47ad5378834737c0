"""The hook's side of the warm daemon: find it, start it on first use, ask it one thing.

Owns the socket exchange (one JSON line out, one JSON line back, bounded by
the hook's deadline) and the start-up of a daemon that is not running: under
an exclusive lock (so concurrent hooks start one daemon), a detached
``python -P -m ahp_adapters daemon`` is spawned (``-P``: never from the hook's
working folder, the agent's project; ``-I`` instead when the hook itself runs
isolated) and the hook waits on a pipe for
its "ready" line (a signal, not a sleep). A hook that finds the lock taken
waits for it: another hook is starting the daemon, and it then uses that one
(the connection it probes with is the one it sends on). How long a hook keeps
waiting for a daemon being started is the caller's ``start_until`` (the hook
gives it a share of its budget when it can run the chain itself, all of it
otherwise).

Two failures, kept apart because they mean different things:
:class:`DaemonUnreachable` (nothing was sent: the caller may run the chain
itself) and :class:`DaemonFailed` (the request may have reached backends: the
caller applies the failure policy, it does not retry). Standard library only;
the hook process that uses it never imports pydantic or anyio.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import select
import socket
import sys
import time
from collections.abc import Mapping
from typing import Any

from ahp_adapters.rundir import UnsafeRuntimeDir, daemon_files

LOCK_POLL_S = (0.005, 0.05)
"""The start lock is polled from the first to the second interval (doubling in between)."""
DEFAULT_IDLE_S = 900.0
MAX_ANSWER_BYTES = 1024 * 1024
LOG_ROTATE_BYTES = 1024 * 1024


class DaemonUnreachable(Exception):
    """No daemon answered and nothing was sent."""


class DaemonFailed(Exception):
    """The request was sent (or may have been) and no complete answer came back."""


def _remaining(deadline: float) -> float:
    return deadline - time.monotonic()


def _connect(path: str, deadline: float) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(max(_remaining(deadline), 0.001))
        sock.connect(path)
    except OSError:
        sock.close()
        raise
    return sock


def exchange(sock: socket.socket, message: Mapping[str, Any], deadline: float) -> dict[str, Any]:
    """Send one line, read one line (bounded in time and size); :class:`DaemonFailed` otherwise."""
    data = json.dumps(message, separators=(",", ":"), ensure_ascii=False).encode("utf-8") + b"\n"
    try:
        sock.settimeout(max(_remaining(deadline), 0.001))
        sock.sendall(data)
        buffer = b""
        while b"\n" not in buffer:
            sock.settimeout(max(_remaining(deadline), 0.001))
            chunk = sock.recv(65536)
            if not chunk:
                raise DaemonFailed("the daemon closed the connection without an answer")
            buffer += chunk
            if len(buffer) > MAX_ANSWER_BYTES:
                raise DaemonFailed("the daemon's answer is too large")
    except TimeoutError:
        raise DaemonFailed("no answer from the daemon in time") from None
    except OSError:
        raise DaemonFailed("the daemon connection failed") from None
    try:
        answer = json.loads(buffer.split(b"\n", 1)[0])
    except ValueError:
        raise DaemonFailed("the daemon's answer is not JSON") from None
    if not isinstance(answer, dict):
        raise DaemonFailed("the daemon's answer is not an object")
    return answer


def _lock(path: str, until: float) -> int:
    """The start lock, waited for until ``until`` (its holder is starting the daemon)."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    pause = LOCK_POLL_S[0]
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return fd
        except BlockingIOError:
            if _remaining(until) <= 0:
                os.close(fd)
                raise DaemonUnreachable("another hook is starting the daemon") from None
            time.sleep(min(pause, max(_remaining(until), 0.001)))
            pause = min(pause * 2, LOCK_POLL_S[1])


def _open_log(path: str) -> int:
    with contextlib.suppress(OSError):
        if os.stat(path).st_size > LOG_ROTATE_BYTES:
            os.replace(path, path + ".1")
    return os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)


def _spawn(
    registration: str,
    socket_path: str,
    log_path: str,
    *,
    idle_timeout: float,
    handed: tuple[str, int],
    prepare: str | None = None,
) -> None:
    """Start a detached daemon; ``handed``: the option and the descriptor it inherits."""
    import subprocess

    option, fd = handed
    log_fd = _open_log(log_path)
    try:
        subprocess.Popen(
            [
                # -P: the hook runs in the agent's project, and "-m" would put that
                # folder first on sys.path (a planted ahp_adapters/ would run in the
                # enforcement process). The daemon imports what this hook imported:
                # so -I only when this hook was started with -I (it then ignores
                # PYTHONPATH and the user site, and so must its daemon); otherwise -I
                # would guard nothing this process is not already exposed to, and
                # could leave every call on the slower in-process path.
                sys.executable,
                "-I" if sys.flags.isolated else "-P",
                "-m",
                "ahp_adapters",
                "daemon",
                "run",
                "--registration",
                registration,
                "--socket",
                socket_path,
                option,
                str(fd),
                "--idle-timeout",
                str(idle_timeout),
                *(("--prepare", prepare) if prepare else ()),
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=log_fd,
            pass_fds=(fd,),
            start_new_session=True,
            close_fds=True,
        )
    except OSError:
        raise DaemonUnreachable("the daemon could not be started") from None
    finally:
        os.close(log_fd)


def start_daemon(
    registration: str,
    socket_path: str,
    lock_path: str,
    log_path: str,
    *,
    until: float,
    idle_timeout: float,
) -> socket.socket:
    """A connection to the daemon of ``registration``, started unless one answers.

    Waits (until ``until``) for the start lock, then for the daemon it started
    to say "ready"; :class:`DaemonUnreachable` if either takes longer.
    """
    lock = _lock(lock_path, until)
    try:
        with contextlib.suppress(OSError):
            return _connect(socket_path, until)  # another hook started it while we waited
        # A stale socket file is the daemon's to remove: it does so once it owns the path.
        read_fd, write_fd = os.pipe()
        try:
            _spawn(
                registration,
                socket_path,
                log_path,
                idle_timeout=idle_timeout,
                handed=("--ready-fd", write_fd),
            )
        except DaemonUnreachable:
            os.close(read_fd)
            raise
        finally:
            os.close(write_fd)
        try:
            if not _wait_ready(read_fd, until):
                raise DaemonUnreachable("the daemon did not become ready in time")
        finally:
            os.close(read_fd)
        try:
            return _connect(socket_path, until)
        except OSError:
            raise DaemonUnreachable("the daemon is not reachable") from None
    finally:
        os.close(lock)


PREPARE_S = 1.0
"""How long a session-start hook gives a running daemon to take ``prepare``."""


def prepare(
    registration: str, dialect: str, *, idle_timeout: float = DEFAULT_IDLE_S, cwd: str | None = None
) -> str:
    """Have this registration's daemon prepare ``dialect``'s chain, without waiting for it.

    A running daemon is asked (it prepares in the background); otherwise one is
    started with ``--prepare`` and handed the start lock, which it releases once it
    accepts, so the hooks that come meanwhile wait for it rather than start another.
    Returns what was done, for the hook's log; :class:`DaemonUnreachable` if nothing
    could be done.
    """
    try:
        socket_path, lock_path, log_path = daemon_files(registration, cwd or os.getcwd())
    except (UnsafeRuntimeDir, OSError):
        raise DaemonUnreachable("no safe runtime directory") from None
    deadline = time.monotonic() + PREPARE_S
    try:
        sock = _connect(socket_path, deadline)
    except OSError as exc:
        if exc.errno not in (errno.ENOENT, errno.ECONNREFUSED, errno.ENOTSOCK):
            raise DaemonUnreachable("the daemon is not running") from None
        try:
            lock = _lock(lock_path, time.monotonic())
        except DaemonUnreachable:
            return "the daemon is being started"
        try:
            with contextlib.suppress(OSError):
                _connect(socket_path, deadline).close()
                return "the daemon was started meanwhile"
            _spawn(
                registration,
                socket_path,
                log_path,
                idle_timeout=idle_timeout,
                handed=("--start-lock-fd", lock),
                prepare=dialect,
            )
        finally:
            os.close(lock)  # the daemon holds the lock now, until it accepts
        return "the daemon is starting"
    with sock:
        answer = exchange(sock, {"op": "prepare", "dialect": dialect}, deadline)
    return "the daemon is preparing the chain" if answer.get("ok") is True else "prepare refused"


def _wait_ready(fd: int, until: float) -> bool:
    buffer = b""
    while _remaining(until) > 0:
        ready, _, _ = select.select([fd], [], [], _remaining(until))
        if not ready:
            return False
        chunk = os.read(fd, 64)
        if not chunk:
            return False
        buffer += chunk
        if b"ready\n" in buffer:
            return True
    return False


def call(
    message: Mapping[str, Any],
    *,
    registration: str,
    deadline: float,
    autostart: bool = True,
    idle_timeout: float = DEFAULT_IDLE_S,
    cwd: str | None = None,
    start_until: float | None = None,
) -> dict[str, Any]:
    """Send ``message`` to this registration's daemon (started if asked); its answer.

    ``start_until``: how long to wait for a daemon that is being started, by this
    hook or another (default and at most: ``deadline``).
    """
    try:
        socket_path, lock_path, log_path = daemon_files(registration, cwd or os.getcwd())
    except (UnsafeRuntimeDir, OSError):
        raise DaemonUnreachable("no safe runtime directory") from None
    try:
        sock = _connect(socket_path, deadline)
    except OSError as exc:
        if not autostart or exc.errno not in (errno.ENOENT, errno.ECONNREFUSED, errno.ENOTSOCK):
            raise DaemonUnreachable("the daemon is not running") from None
        sock = start_daemon(
            registration,
            socket_path,
            lock_path,
            log_path,
            until=deadline if start_until is None else min(start_until, deadline),
            idle_timeout=idle_timeout,
        )
    with sock:
        return exchange(sock, message, deadline)

"""``ahp-adapter daemon``: keep one registration's backends warm for short-lived hooks.

A native hook is a new process per tool call; without this, every call would
spawn (and kill) the registration's persistent stdio backends and reconnect to
its HTTP ones. The daemon holds one :class:`~ahp_adapters.engine.Engine` and
serves hook processes over a Unix socket:

- **Where:** ``<runtime dir>/d-<key>.sock`` (see :mod:`ahp_adapters.rundir`:
  a 0700 directory of the user), the socket itself 0600; a peer whose uid is
  not ours (``SO_PEERCRED``, Linux) is refused.
- **Wire:** one JSON line per connection, one JSON line back. ``{"op":
  "intercept"|"observe", "event", "capabilities", "budget"}`` gets a
  :class:`~ahp_adapters.decision.Verdict`; ``ping`` gets the daemon's status;
  ``stop`` ends it. A request larger than :data:`MAX_REQUEST_BYTES` is refused.
- **Reload:** the registration file is checked (size, mtime, inode) on each
  request; a change builds a new engine (requests in flight finish on the old
  one, which is then closed). An invalid new file answers failures with the
  file's fail policy until it is fixed.
- **Lifetime:** exits after ``--idle-timeout`` seconds without requests, on
  SIGTERM/SIGINT, or on ``stop``; it closes every backend and removes its socket.

Never answers a hook with backend output or exception text (verdicts carry fixed
phrases); logs go to stderr (the log file the hook opened for it).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import socket
import struct
import sys
import time
from collections.abc import Mapping
from typing import Any

import anyio
from anyio.abc import SocketAttribute, SocketStream
from anyio.streams.buffered import BufferedByteReceiveStream

from ahp_adapters.decision import Verdict, read_policy
from ahp_adapters.engine import Engine, EngineError

log = logging.getLogger("ahp_adapters.daemon")

MAX_REQUEST_BYTES = 8 * 1024 * 1024
READ_TIMEOUT_S = 5.0
STOP_GRACE_S = 2.0


def _signature(path: str) -> tuple[int, int, int] | None:
    try:
        info = os.stat(path)
    except OSError:
        return None
    return info.st_mtime_ns, info.st_size, info.st_ino


def _peer_uid(stream: SocketStream) -> int | None:
    raw: socket.socket = stream.extra(SocketAttribute.raw_socket)
    option = getattr(socket, "SO_PEERCRED", None)
    if option is None:
        return None
    try:
        data = raw.getsockopt(socket.SOL_SOCKET, option, struct.calcsize("3i"))
    except OSError:
        return None
    _pid, uid, _gid = struct.unpack("3i", data)
    return int(uid)


class _Generation:
    """One loaded registration (an engine) and the requests still using it."""

    def __init__(self, engine: Engine | None, signature: tuple[int, int, int] | None) -> None:
        self.engine = engine
        self.signature = signature
        self.inflight = 0
        self.retired = False


class Daemon:
    def __init__(self, registration: str, socket_path: str, idle_timeout: float) -> None:
        self.registration = registration
        self.socket_path = socket_path
        self.idle_timeout = idle_timeout
        self.started = time.time()
        self.requests = 0
        self.inflight = 0
        self.last_activity = time.monotonic()
        self._current: _Generation | None = None
        self._stop = anyio.Event()
        self._closers: list[Engine] = []

    # -- the registration ----------------------------------------------------------

    def _generation(self) -> _Generation:
        signature = _signature(self.registration)
        current = self._current
        if current is not None and current.signature == signature:
            return current
        try:
            engine: Engine | None = Engine(self.registration)
        except EngineError as exc:
            log.warning("registration rejected: %s", exc)
            engine = None
        fresh = _Generation(engine, signature)
        if current is not None:
            current.retired = True
            self._retire(current)
        self._current = fresh
        return fresh

    def _retire(self, generation: _Generation) -> None:
        if generation.retired and generation.inflight == 0 and generation.engine is not None:
            self._closers.append(generation.engine)
            generation.engine = None

    async def _close_retired(self) -> None:
        closers, self._closers = self._closers, []
        for engine in closers:
            await engine.aclose()

    # -- requests ------------------------------------------------------------------

    async def handle(self, request: Mapping[str, Any]) -> dict[str, Any]:
        op = request.get("op")
        if op == "ping":
            return {
                "ok": True,
                "pid": os.getpid(),
                "registration": self.registration,
                "requests": self.requests,
                "started": self.started,
            }
        if op == "stop":
            self._stop.set()
            return {"ok": True, "pid": os.getpid()}
        if op not in ("intercept", "observe"):
            return {"ok": False, "error": "unknown op"}
        event = request.get("event")
        capabilities = request.get("capabilities")
        budget = request.get("budget")
        if (
            not isinstance(event, dict)
            or not isinstance(capabilities, dict)
            or not isinstance(budget, (int, float))
        ):
            return {"ok": False, "error": "bad request"}
        self.requests += 1
        generation = self._generation()
        engine = generation.engine
        if engine is None:
            verdict = Verdict(
                "failure", policy=read_policy(self.registration), detail="registration rejected"
            )
            return {"ok": True, **verdict.to_json()}
        generation.inflight += 1
        try:
            if op == "observe":
                delivered = await engine.observe(event, capabilities, float(budget))
                return {"ok": True, "delivered": delivered}
            verdict = await engine.intercept(event, capabilities, float(budget))
            return {"ok": True, **verdict.to_json()}
        finally:
            generation.inflight -= 1
            self._retire(generation)

    async def serve_connection(self, stream: SocketStream) -> None:
        async with stream:
            uid = _peer_uid(stream)
            if uid is not None and hasattr(os, "getuid") and uid != os.getuid():
                log.warning("refused a connection from uid %s", uid)
                return
            self.inflight += 1
            self.last_activity = time.monotonic()
            try:
                buffered = BufferedByteReceiveStream(stream)
                try:
                    with anyio.fail_after(READ_TIMEOUT_S):
                        line = await buffered.receive_until(b"\n", MAX_REQUEST_BYTES)
                    request = json.loads(line)
                except (anyio.DelimiterNotFound, anyio.EndOfStream, TimeoutError, ValueError):
                    answer: dict[str, Any] = {"ok": False, "error": "unreadable request"}
                else:
                    if isinstance(request, dict):
                        answer = await self.handle(request)
                    else:
                        answer = {"ok": False, "error": "bad request"}
                data = json.dumps(answer, separators=(",", ":"), ensure_ascii=False)
                with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
                    await stream.send(data.encode("utf-8") + b"\n")
                await self._close_retired()  # after the answer: closing backends takes time
            finally:
                self.inflight -= 1
                self.last_activity = time.monotonic()

    # -- lifetime ------------------------------------------------------------------

    async def _idle_watch(self) -> None:
        tick = max(0.05, min(1.0, self.idle_timeout / 4))
        while not self._stop.is_set():
            with anyio.move_on_after(tick):
                await self._stop.wait()
            idle = time.monotonic() - self.last_activity
            if self.inflight == 0 and idle >= self.idle_timeout:
                log.info("idle for %.0f s: exiting", idle)
                self._stop.set()

    async def _signals(self) -> None:
        with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
            async for _ in signals:
                self._stop.set()
                return

    async def run(self, ready_fd: int | None) -> None:
        previous = os.umask(0o077)
        try:
            listener = await anyio.create_unix_listener(self.socket_path, mode=0o600)
        finally:
            os.umask(previous)
        try:
            self._generation()  # load now: the first hook should not pay for it
            if ready_fd is not None:
                with contextlib.suppress(OSError):
                    os.write(ready_fd, b"ready\n")
                    os.close(ready_fd)
            log.info("serving %s on %s", self.registration, self.socket_path)
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._idle_watch)
                tg.start_soon(self._signals)
                tg.start_soon(listener.serve, self.serve_connection, tg)
                await self._stop.wait()
                with anyio.move_on_after(STOP_GRACE_S):
                    while self.inflight:  # let answers already being written go out
                        await anyio.sleep(0.01)
                tg.cancel_scope.cancel()
        finally:
            with anyio.CancelScope(shield=True):
                await listener.aclose()
                with contextlib.suppress(OSError):
                    os.unlink(self.socket_path)
                current, self._current = self._current, None
                if current is not None and current.engine is not None:
                    self._closers.append(current.engine)
                await self._close_retired()


def _socket_is_live(path: str) -> bool:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(1.0)
        sock.connect(path)
    except OSError:
        return False
    finally:
        sock.close()
    return True


def run(registration: str, socket_path: str, *, ready_fd: int | None, idle_timeout: float) -> int:
    """Serve until idle, stopped or signalled. Exit 0; 1 if the socket cannot be bound."""
    logging.basicConfig(
        level=logging.INFO, stream=sys.stderr, format="%(asctime)s ahp-adapter daemon: %(message)s"
    )
    if os.path.exists(socket_path):
        if _socket_is_live(socket_path):
            log.info("a daemon already serves %s", socket_path)
            if ready_fd is not None:
                with contextlib.suppress(OSError):
                    os.write(ready_fd, b"ready\n")
            return 0
        with contextlib.suppress(OSError):
            os.unlink(socket_path)
    daemon = Daemon(registration, socket_path, idle_timeout)
    try:
        anyio.run(daemon.run, ready_fd)
    except OSError as exc:
        log.error("cannot serve on %s (%s)", socket_path, type(exc).__name__)
        return 1
    return 0

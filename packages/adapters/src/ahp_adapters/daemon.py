"""``ahp-adapter daemon``: keep one registration's backends warm for short-lived hooks.

A native hook is a new process per tool call; without this, every call would
spawn (and kill) the registration's persistent stdio backends and reconnect to
its HTTP ones. The daemon holds one :class:`~ahp_adapters.engine.Engine` and
serves hook processes over a Unix socket:

- **Where:** ``<runtime dir>/d-<key>.sock`` (see :mod:`ahp_adapters.rundir`:
  a 0700 directory of the user), the socket itself 0600; a peer whose uid is
  not ours (``SO_PEERCRED``, Linux) is refused.
- **Wire:** one request per connection, one answer back. A thin hook sends a
  :mod:`~ahp_adapters.frame` (its arguments and the native payload as it came)
  and gets the native answer, rendered here by the hook's own functions
  (:func:`~ahp_adapters.hook.read_call`, :func:`~ahp_adapters.hook.answer_for`).
  Everything else is one JSON line: ``{"op": "intercept"|"observe", "event",
  "capabilities", "budget"}`` (the full hook, which built the event itself)
  gets a :class:`~ahp_adapters.decision.NativeDecision`; ``{"op": "prepare",
  "dialect"}`` starts, in the background, the chain for that dialect's pre-tool
  events (discovery done, persistent backends spawned) and is answered at once;
  ``ping`` gets the daemon's status; ``stop`` ends it. A request larger than
  :data:`MAX_REQUEST_BYTES` is refused.
- **Reload:** the registration file is checked (size, mtime, inode) on each
  request; a change builds a new engine (requests in flight finish on the old
  one, which is then closed). An invalid new file answers failures with the
  file's fail policy until it is fixed.
- **One connection, one task:** whatever goes wrong on a connection (closed
  before a full line, as the hooks' liveness probe does; reset; garbage,
  invalid UTF-8, nesting past the recursion limit, a line past the limit; a
  trickle slower than :data:`READ_TIMEOUT_S`; a client that leaves or does not
  read its answer within :data:`WRITE_TIMEOUT_S`; a handler that raises) ends
  that connection only, never the daemon or another connection. A failed
  ``accept`` is retried.
- **One daemon per socket:** a daemon holds an exclusive lock on its pid file
  (``d-<key>.pid`` beside ``d-<key>.sock``) for life. A second daemon for the
  same socket waits for it (at most :data:`CLAIM_WAIT_S`): if it serves, the
  second signals "ready" and exits 0; if it exits, the second takes over. Only
  the owner removes a stale socket file, and a daemon removes only its own.
- **Prepared at session start:** a harness's session-start hook asks for the
  chain to be prepared (a running daemon gets ``prepare``; otherwise the hook
  starts one with ``--prepare DIALECT`` and returns without waiting, handing it
  the start lock, which the daemon releases once it accepts: hooks that come
  meanwhile wait for this daemon instead of starting another). So the session's
  first tool call finds its backends started.
- **Lifetime:** exits after ``--idle-timeout`` seconds without requests, on
  SIGTERM/SIGINT, or on ``stop``: it stops accepting and removes its socket
  first (a hook that comes now starts a new daemon), lets answers in flight
  go out (at most :data:`STOP_GRACE_S`), then closes every backend.

Never answers a hook with backend output or exception text (decisions carry fixed
phrases); logs go to stderr (the log file the hook opened for it). Its own lines
about a connection name the error's type, never what the connection sent.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import signal
import socket
import struct
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import anyio
from anyio.abc import SocketAttribute, SocketStream, TaskGroup
from anyio.streams.buffered import BufferedByteReceiveStream

from ahp_adapters import frame
from ahp_adapters.decision import NativeDecision, read_policy
from ahp_adapters.engine import Engine, EngineError

if TYPE_CHECKING:
    from ahp_adapters.dialects.base import Dialect

log = logging.getLogger("ahp_adapters.daemon")

MAX_REQUEST_BYTES = 8 * 1024 * 1024
READ_TIMEOUT_S = 5.0
WRITE_TIMEOUT_S = 5.0
ACCEPT_BACKOFF_S = 0.1
CLAIM_WAIT_S = 10.0
"""Longest a new daemon waits for the one that owns its socket to exit (or to serve)."""
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
        self._tasks: TaskGroup | None = None

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
        if op == "prepare":
            dialect = request.get("dialect")
            if not isinstance(dialect, str) or not self.prepare_soon(dialect):
                return {"ok": False, "error": "unknown dialect"}
            return {"ok": True}
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
        if op == "observe":
            return {"ok": True, "delivered": await self.observe(event, capabilities, budget)}
        return {"ok": True, **(await self.intercept(event, capabilities, budget)).to_json()}

    @contextlib.contextmanager
    def _engine(self, *, counted: bool = True) -> Iterator[Engine | None]:
        """The current registration's engine (``None``: rejected), held for one request: a
        reload meanwhile closes the old engine only once its requests are done."""
        self.requests += counted
        generation = self._generation()
        if generation.engine is None:
            yield None
            return
        generation.inflight += 1
        try:
            yield generation.engine
        finally:
            generation.inflight -= 1
            self._retire(generation)

    def prepare_soon(self, dialect: str | Dialect) -> bool:
        """Prepare the chain for ``dialect``'s pre-tool events in the background
        (``False``: no such dialect). A request meanwhile waits for the same start."""
        from ahp_adapters import dialects

        if isinstance(dialect, str):
            try:
                dialect = dialects.get(dialect)
            except dialects.UnknownDialect:
                return False
        if self._tasks is not None:
            self._tasks.start_soon(self._prepare, dialect.pre_tool_capabilities())
        return True

    async def _prepare(self, declarations: list[dict[str, Any]]) -> None:
        from ahp_adapters import events, hook  # noqa: F401  (what answering a hook imports)

        with self._engine(counted=False) as engine:
            if engine is not None:
                await engine.prepare(declarations)

    async def intercept(
        self, event: dict[str, Any], capabilities: dict[str, Any], budget: float
    ) -> NativeDecision:
        """One ``tool.before`` through the current registration's chain."""
        with self._engine() as engine:
            if engine is None:
                policy = read_policy(self.registration)
                return NativeDecision("failure", policy=policy, detail="registration rejected")
            decided = await engine.intercept(event, capabilities, float(budget))
        for line in decided.failures:  # the operator's stream: the hook's stderr, and here
            log.warning("%s", line)
        return decided

    async def observe(
        self, event: dict[str, Any], capabilities: dict[str, Any], budget: float
    ) -> bool:
        """One observation to the current registration's observers; delivered?"""
        with self._engine() as engine:
            return engine is not None and await engine.observe(event, capabilities, float(budget))

    async def hook(self, head: bytes, payload: bytes) -> bytes:
        """A thin hook's frame: the native answer, as the hook would have written it."""
        remaining, debug, argv = frame.request_head(head)
        exit_code, stdout, stderr = await self.native_answer(argv, remaining, debug, payload)
        return frame.answer(exit_code, stdout, stderr)

    async def native_answer(
        self, argv: list[str], remaining: float, debug: bool, payload: bytes
    ) -> tuple[int, bytes, bytes]:
        """What ``ahp-adapter hook ARGV`` writes for ``payload`` (exit code, stdout, stderr),
        run here: the hook's own steps (:func:`~ahp_adapters.hook.read_call`,
        :func:`~ahp_adapters.hook.answer_for`) with this daemon's warm chain."""
        from ahp_adapters import dialects, hook, invocation

        try:
            options = invocation.parse(argv)
            dialect = dialects.get(options.dialect)
        except (invocation.Usage, dialects.UnknownDialect) as exc:
            return 1, b"", f"ahp-adapter: {exc}\n".encode()
        log = hook.Log(dialect.stderr_ok or debug)
        call = hook.read_call(options, payload, log)
        if call.prepares:
            self.prepare_soon(call.dialect)
        answer = call.answer
        if answer is None and call.intercepts:
            decided = await self.intercept(call.event, call.capabilities, remaining)
            answer = hook.answer_for(call, decided, log)
        elif answer is None:
            budget = min(hook.OBSERVE_BUDGET_S, remaining)
            if not await self.observe(call.event, call.capabilities, budget):
                log("observation not delivered")
            answer = call.dialect.render_nothing(call.native_event)
        stdout, stderr = hook.output(answer, log)
        return answer.exit_code, stdout, stderr

    async def serve_connection(self, stream: SocketStream) -> None:
        """Serve one connection; whatever goes wrong on it ends only this connection."""
        try:
            await self._serve(stream)
        except Exception as exc:  # contained here, never the task group's
            log.warning("a connection failed (%s)", type(exc).__name__)

    async def _serve(self, stream: SocketStream) -> None:
        async with stream:
            uid = _peer_uid(stream)
            if uid is not None and hasattr(os, "getuid") and uid != os.getuid():
                log.warning("refused a connection from uid %s", uid)
                return
            self.inflight += 1
            self.last_activity = time.monotonic()
            try:
                data = await self._answer(stream)
                if data is None:
                    return  # closed before a complete line (a liveness probe): nobody to answer
                try:
                    with anyio.fail_after(WRITE_TIMEOUT_S):  # a client that never reads
                        await stream.send(data)
                except (anyio.BrokenResourceError, anyio.ClosedResourceError, TimeoutError) as exc:
                    log.info("a client left before its answer (%s)", type(exc).__name__)
                await self._close_retired()  # after the answer: closing backends takes time
            finally:
                self.inflight -= 1
                self.last_activity = time.monotonic()

    async def _answer(self, stream: SocketStream) -> bytes | None:
        """The answer to the connection's one request; ``None`` if it closed before one."""
        buffered = BufferedByteReceiveStream(stream)
        try:
            with anyio.fail_after(READ_TIMEOUT_S):
                line = await buffered.receive_until(b"\n", MAX_REQUEST_BYTES)
                if line.startswith(frame.REQUEST_PREFIX):
                    head_size, payload_size = frame.request_sizes(line)
                    if head_size + payload_size > MAX_REQUEST_BYTES:
                        raise frame.FrameError("frame larger than the daemon accepts")
                    head = await buffered.receive_exactly(head_size)
                    payload = await buffered.receive_exactly(payload_size)
                    return await self._hook(head, payload)
        except (anyio.IncompleteRead, anyio.EndOfStream, anyio.BrokenResourceError) as exc:
            if buffered.buffer:  # nothing at all is a liveness probe: not worth a line
                log.info("a connection closed mid-request (%s)", type(exc).__name__)
            return None
        except (anyio.DelimiterNotFound, TimeoutError, frame.FrameError) as exc:
            log.warning("unreadable request (%s)", type(exc).__name__)
            return _line({"ok": False, "error": "unreadable request"})
        try:
            request = json.loads(line)
        except (ValueError, RecursionError) as exc:  # invalid UTF-8 is a ValueError too
            log.warning("unreadable request (%s)", type(exc).__name__)
            return _line({"ok": False, "error": "unreadable request"})
        if not isinstance(request, dict):
            return _line({"ok": False, "error": "bad request"})
        try:
            return _line(await self.handle(request))
        except Exception as exc:  # a fixed answer, never the exception's text
            log.warning("a request failed inside the daemon (%s)", type(exc).__name__)
            return _line({"ok": False, "error": "internal error"})

    async def _hook(self, head: bytes, payload: bytes) -> bytes:
        try:
            return await self.hook(head, payload)
        except frame.FrameError as exc:
            log.warning("unreadable request (%s)", type(exc).__name__)
        except Exception as exc:  # a fixed answer, never the exception's text
            log.warning("a hook frame failed inside the daemon (%s)", type(exc).__name__)
        return _line({"ok": False, "error": "internal error"})  # not a frame: the hook fails

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

    async def _accept(self, listener: Any, tg: TaskGroup, scope: anyio.CancelScope) -> None:
        """Accept until ``scope`` is cancelled; a failed accept (say, out of descriptors) is
        logged and retried, never the end of the daemon."""
        with scope:
            while True:
                try:
                    stream = await listener.accept()
                except anyio.BrokenResourceError as exc:
                    log.warning("accept failed (%s)", type(exc.__cause__ or exc).__name__)
                    await anyio.sleep(ACCEPT_BACKOFF_S)
                    continue
                tg.start_soon(self.serve_connection, stream)

    def _unlink_socket(self, inode: int) -> None:
        """Remove the socket file if it is still ours (never another daemon's)."""
        with contextlib.suppress(OSError):
            if os.stat(self.socket_path).st_ino == inode:
                os.unlink(self.socket_path)

    async def run(
        self, ready_fd: int | None, start_lock_fd: int | None = None, prepare: Sequence[str] = ()
    ) -> None:
        """Serve; ``ready_fd``: written "ready" once accepting; ``start_lock_fd``: the
        hooks' start lock, closed (released) then; ``prepare``: dialects whose chain
        is prepared at once."""
        previous = os.umask(0o077)
        try:
            listener = await anyio.create_unix_listener(self.socket_path, mode=0o600)
        finally:
            os.umask(previous)
        inode = os.stat(self.socket_path).st_ino
        try:
            self._generation()  # load now: the first hook should not pay for it
            for fd, signal_ in ((ready_fd, b"ready\n"), (start_lock_fd, b"")):
                if fd is not None:
                    with contextlib.suppress(OSError):
                        if signal_:
                            os.write(fd, signal_)
                        os.close(fd)
            log.info("serving %s on %s", self.registration, self.socket_path)
            async with anyio.create_task_group() as tg:
                self._tasks = tg
                for dialect in prepare:
                    if not self.prepare_soon(dialect):
                        log.warning("not prepared: unknown dialect %r", dialect)
                tg.start_soon(self._idle_watch)
                tg.start_soon(self._signals)
                accepting = anyio.CancelScope()
                tg.start_soon(self._accept, listener, tg, accepting)
                await self._stop.wait()
                accepting.cancel()
                await listener.aclose()  # a hook that comes now finds no daemon: it starts one
                self._unlink_socket(inode)
                with anyio.move_on_after(STOP_GRACE_S):
                    while self.inflight:  # let answers already being written go out
                        await anyio.sleep(0.01)
                tg.cancel_scope.cancel()
        finally:
            with anyio.CancelScope(shield=True):
                await listener.aclose()
                self._unlink_socket(inode)
                await self.aclose()

    async def aclose(self) -> None:
        """Close every engine, current and retired (no backend child outlives this)."""
        with anyio.CancelScope(shield=True):
            current, self._current = self._current, None
            if current is not None and current.engine is not None:
                self._closers.append(current.engine)
            await self._close_retired()


def _line(answer: Mapping[str, Any]) -> bytes:
    return json.dumps(answer, separators=(",", ":"), ensure_ascii=False).encode("utf-8") + b"\n"


def _socket_is_live(path: str) -> bool:
    """Does a daemon accept on ``path``? (Connect, then close: a daemon ignores such probes.)"""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(1.0)
        sock.connect(path)
    except OSError:
        return False
    finally:
        sock.close()
    return True


def owner_path(socket_path: str) -> str:
    """The pid file whose lock the daemon serving ``socket_path`` holds: ``d-<key>.pid``."""
    root, ext = os.path.splitext(socket_path)
    return (root if ext == ".sock" else socket_path) + ".pid"


def _claim(socket_path: str) -> int | None:
    """Become the one daemon of ``socket_path``: the descriptor of its locked pid file, held
    for life; ``None`` if another daemon serves there. Waits (at most :data:`CLAIM_WAIT_S`)
    while the owner is starting or exiting; :class:`TimeoutError` after that."""
    fd = os.open(owner_path(socket_path), os.O_RDWR | os.O_CREAT, 0o600)
    until = time.monotonic() + CLAIM_WAIT_S
    try:
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if _socket_is_live(socket_path):
                    os.close(fd)
                    return None
                if time.monotonic() >= until:
                    raise TimeoutError("another daemon holds the socket") from None
                time.sleep(0.02)
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode("ascii"))
    except BaseException:
        with contextlib.suppress(OSError):
            os.close(fd)
        raise
    return fd


def run(
    registration: str,
    socket_path: str,
    *,
    ready_fd: int | None,
    idle_timeout: float,
    start_lock_fd: int | None = None,
    prepare: Sequence[str] = (),
) -> int:
    """Serve until idle, stopped or signalled. Exit 0 (also when another daemon already
    serves ``socket_path``: "ready" is signalled for it); 1 if the socket cannot be had."""
    logging.basicConfig(
        level=logging.INFO, stream=sys.stderr, format="%(asctime)s ahp-adapter daemon: %(message)s"
    )
    try:
        owner = _claim(socket_path)
    except OSError as exc:  # TimeoutError included
        log.error("cannot own %s (%s)", socket_path, type(exc).__name__)
        return 1
    if owner is None:
        log.info("a daemon already serves %s", socket_path)
        if ready_fd is not None:
            with contextlib.suppress(OSError):
                os.write(ready_fd, b"ready\n")
        return 0
    try:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(socket_path)  # we own it: whatever is there is a dead daemon's
        daemon = Daemon(registration, socket_path, idle_timeout)
        anyio.run(daemon.run, ready_fd, start_lock_fd, prepare)
    except OSError as exc:
        log.error("cannot serve on %s (%s)", socket_path, type(exc).__name__)
        return 1
    finally:
        os.close(owner)
    return 0

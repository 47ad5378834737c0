"""The stdio transport: NDJSON JSON-RPC over a backend process's stdin and stdout.

Owns the child processes of one stdio backend: spawning them (``command`` +
``args`` exec'd directly, never through a shell, each in a new session so its whole
process group can be killed), their environment (:func:`child_environment`),
framing (one UTF-8 JSON-RPC object per ``\\n``-terminated line, at most
``max_frame_bytes``, an over-long frame failed as soon as the limit is passed),
correlation by id, and killing and reaping every child. Two lifecycles (draft §8.1):

- ``persistent``: one child, spawned on first use and replaced on the next use after
  it exits or fails. One request at a time (draft §8.1: at most one outstanding
  intercept per backend); a notification is written without waiting. A response with
  another id is discarded, as the stdio binding says (its size logged and counted in
  the request's :class:`~ahp_protocol.client.transports.exchange.Exchange`, never its
  content) and the request keeps waiting within the
  caller's deadline; more than :data:`MAX_UNCORRELATED` of them is ``ID_MISMATCH``.
  A request the caller gives up on (its deadline, an interruption) is still
  outstanding in the child, which may stay busy with it for as long as it likes: the
  child and its process group are killed and reaped at once, before the cancellation
  propagates, and the next use starts a fresh one. So no later request waits behind
  an expired one, and a late answer is never read at all (notifications the old child
  had not read yet are lost with it). Malformed output (not UTF-8, not JSON, not a
  response, a multi-line object, an over-long or unterminated frame) is
  ``MALFORMED_OUTPUT``; EOF is ``ABNORMAL_EXIT``; blank lines are skipped.
- ``per_event``: one child per message: one line, then EOF. The one response must
  carry the request's id (else ``ID_MISMATCH``) and the child must then exit 0
  (else ``ABNORMAL_EXIT``, even after a valid answer); one still running after
  ``exit_grace`` is killed and its answer counts. A notification child is not
  awaited; it is killed past ``notify_grace``, beyond :data:`MAX_LINGERING`, or by
  :meth:`StdioTransport.aclose`.

Never: implements a deadline (the caller wraps calls in ``anyio.fail_after``); puts
backend output, stderr or exception text in a failure (a spawn failure names only the
command, its working folder and, for a bare name, the ``PATH`` searched); logs frame
content or environment values. Child stderr is drained by a thread per child (a
chatty child never blocks) and only a bounded tail is kept, for the operator
(:meth:`StdioTransport.stderr_tail`).
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import threading
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

import anyio
from anyio.abc import Process
from anyio.streams.buffered import BufferedByteReceiveStream

from ahp_protocol.client._failures import NOT_ON_PATH, FailureClass, OperationalFailure
from ahp_protocol.client.transports._framing import (
    decode_answer,
    decode_response,
    id_key,
    request_key,
)
from ahp_protocol.client.transports.exchange import Exchange
from ahp_protocol.wire import jsonrpc

if TYPE_CHECKING:
    from ahp_protocol.wire.registration import Lifecycle

_log = logging.getLogger(__name__)

ENV_ALLOWLIST: Final = (
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "LANG",
    "LC_ALL",
    "TZ",
    "TMPDIR",
    "TEMP",
    "TMP",
)
"""Host variables a stdio child inherits (plus every ``LC_*``), draft §8.1."""

WINDOWS_ENV_ALLOWLIST: Final = (
    "SYSTEMROOT",
    "WINDIR",
    "COMSPEC",
    "PATHEXT",
    "USERPROFILE",
    "APPDATA",
    "LOCALAPPDATA",
    "PROGRAMDATA",
)
"""The Windows system variables a child needs to start at all (Windows only)."""

STDERR_TAIL_BYTES: Final = 8192
"""How much of the children's stderr one transport keeps (the most recent bytes)."""
EXIT_GRACE_S: Final = 1.0
"""per_event: how long a child that has answered may take to exit before it is killed."""
NOTIFY_GRACE_S: Final = 5.0
"""per_event: how long a notification child may live before a later call kills it."""
MAX_LINGERING: Final = 16
"""per_event: notification children alive at once; the oldest is killed beyond this."""
MAX_UNCORRELATED: Final = 64
"""persistent: uncorrelated responses discarded while one request waits; one more fails it."""
CLOSE_GRACE_S: Final = 0.5
"""aclose(): how long children get to exit after their stdin is closed before SIGKILL."""
NOTIFY_DELIVERY_S: Final = 2.0
"""aclose(): a child sent a notification may finish within this long of its start."""

_READ_CHUNK: Final = 65536


def is_path_command(command: str) -> bool:
    """Whether ``command`` names a file (it holds a path separator), not a program on
    ``PATH``: the one test, for the spawn and for :func:`~ahp_protocol.client.hooks.anchored`."""
    return os.sep in command or bool(os.altsep and os.altsep in command)


def child_environment(
    environ: Mapping[str, str],
    env: Mapping[str, str] | None = None,
    *,
    windows: bool | None = None,
) -> dict[str, str]:
    """The environment of a stdio child: the allowlisted part of ``environ``, then ``env``.

    ``env`` entries are literal and override inherited values (never interpolated).
    On Windows variable names compare case-insensitively.
    """
    windows = os.name == "nt" if windows is None else windows
    allowed = set(ENV_ALLOWLIST) | (set(WINDOWS_ENV_ALLOWLIST) if windows else set())
    result: dict[str, str] = {}
    for name, value in environ.items():
        key = name.upper() if windows else name
        if key in allowed or key.startswith("LC_"):
            result[name] = value
    for name, value in (env or {}).items():
        if not isinstance(name, str) or not isinstance(value, str):
            raise TypeError("stdio env names and values must be strings")
        if windows:
            for existing in [k for k in result if k.upper() == name.upper()]:
                del result[existing]
        result[name] = value
    return result


# -- one child process ---------------------------------------------------------------


class _StderrTail:
    """The most recent stderr bytes of a transport's children (bounded)."""

    def __init__(self, limit: int = STDERR_TAIL_BYTES) -> None:
        self._limit = limit
        self._tail = bytearray()
        self._lock = threading.Lock()  # the drain threads add, the event loop reads

    def add(self, chunk: bytes) -> None:
        with self._lock:
            self._tail += chunk[-self._limit :]
            del self._tail[: -self._limit]

    def value(self) -> bytes:
        with self._lock:
            return bytes(self._tail)


def _drain(fd: int, tail: _StderrTail) -> None:
    """Read a child's stderr until EOF (every writer gone), keeping only the tail."""
    try:
        while True:
            try:
                chunk = os.read(fd, _READ_CHUNK)
            except InterruptedError:
                continue
            except OSError:
                return
            if not chunk:
                return
            tail.add(chunk)
    finally:
        os.close(fd)


class _Child:
    """One spawned backend process, its framed stdout and its stderr drain."""

    def __init__(self, process: Process, stderr_fd: int, tail: _StderrTail) -> None:
        self.process = process
        self.stdout = (
            BufferedByteReceiveStream(process.stdout) if process.stdout is not None else None
        )
        self.started = anyio.current_time()
        self.notified = False  # a notification was written to it (aclose lets it land)
        self._closing = False
        self._closed = anyio.Event()
        self._drain = threading.Thread(
            target=_drain, args=(stderr_fd, tail), name="ahp-stdio-stderr", daemon=True
        )
        self._drain.start()

    @property
    def alive(self) -> bool:
        return not self._closing and self.process.returncode is None

    def kill(self) -> None:
        """SIGKILL the whole process group (the child runs in its own session)."""
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except (OSError, AttributeError):  # gone, not ours to signal, or no killpg
            with contextlib.suppress(OSError):
                self.process.kill()

    async def close(self) -> None:
        """Kill the group, reap the child, close its pipes, join the drain. Idempotent."""
        with anyio.CancelScope(shield=True):
            if self._closing:
                await self._closed.wait()
                return
            self._closing = True
            try:
                self.kill()
                await self.process.wait()
                await self.process.aclose()
                if self._drain.is_alive():
                    await anyio.to_thread.run_sync(self._drain.join, EXIT_GRACE_S)
            finally:
                self._closed.set()

    async def shutdown(self, grace: float) -> None:
        """Close stdin (EOF), give the child ``grace`` seconds to exit, then :meth:`close`."""
        with anyio.CancelScope(shield=True):
            if not self._closing and self.process.returncode is None:
                stdin = self.process.stdin
                if stdin is not None:
                    with contextlib.suppress(Exception):
                        await stdin.aclose()
                with anyio.move_on_after(grace):
                    await self.process.wait()
            await self.close()

    async def send(self, data: bytes, *, close_input: bool = False) -> None:
        """Write ``data`` to stdin; a closed pipe is ``ABNORMAL_EXIT``."""
        stdin = self.process.stdin
        assert stdin is not None
        try:
            await stdin.send(data)
            if close_input:
                await stdin.aclose()
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            raise OperationalFailure(
                FailureClass.ABNORMAL_EXIT, "backend process closed its input"
            ) from None

    async def read_frame(self, max_bytes: int) -> bytes | None:
        """The next non-blank line (without ``\\n``), or ``None`` on a clean EOF."""
        stream = self.stdout
        assert stream is not None
        while True:
            try:
                frame = await stream.receive_until(b"\n", max_bytes + 1)
            except anyio.DelimiterNotFound:
                raise OperationalFailure(
                    FailureClass.MALFORMED_OUTPUT, "backend frame exceeds the size limit"
                ) from None
            except anyio.IncompleteRead:
                if stream.buffer.strip():
                    raise OperationalFailure(
                        FailureClass.MALFORMED_OUTPUT, "backend output ended inside a frame"
                    ) from None
                return None
            except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
                return None
            if len(frame) > max_bytes:
                raise OperationalFailure(
                    FailureClass.MALFORMED_OUTPUT, "backend frame exceeds the size limit"
                )
            if frame.strip():
                return frame

    async def finish(self, grace: float) -> int | None:
        """per_event, after the answer: the exit status, or ``None`` if still running after
        ``grace`` seconds. More output after the answer is ``MALFORMED_OUTPUT``."""
        stream = self.stdout
        assert stream is not None
        with anyio.move_on_after(grace):
            while True:
                try:
                    extra = await stream.receive()
                except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
                    break
                if extra.strip():
                    raise OperationalFailure(
                        FailureClass.MALFORMED_OUTPUT, "backend wrote more than one response"
                    )
            return await self.process.wait()
        return None


def correlate(
    frame: bytes, key: tuple[str, object], exchange: Exchange, max_bytes: int
) -> dict[str, Any] | None:
    """One frame read while a persistent request keyed ``key`` waits: its response, or
    ``None`` when the frame answered another id (discarded unread: its size logged and
    recorded in ``exchange``), or ``MALFORMED_OUTPUT``, or ``ID_MISMATCH`` past
    :data:`MAX_UNCORRELATED` discarded frames."""
    response = decode_response(frame, max_bytes)
    if id_key(response.get("id")) == key:
        exchange.received(len(frame))
        return response
    if len(exchange.discarded) >= MAX_UNCORRELATED:
        raise OperationalFailure(FailureClass.ID_MISMATCH, "too many responses with another id")
    _log.info("AHP stdio discarded an uncorrelated response (%d bytes)", len(frame))
    exchange.discard(len(frame))
    return None


# -- the transport -------------------------------------------------------------------


class StdioTransport:
    """A stdio backend (``persistent`` or ``per_event``), see the module docstring."""

    def __init__(
        self,
        command: str,
        args: Sequence[str] = (),
        *,
        lifecycle: Lifecycle = "persistent",
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        environ: Mapping[str, str] | None = None,
        max_frame_bytes: int = jsonrpc.MAX_FRAME_BYTES,
        exit_grace: float = EXIT_GRACE_S,
        notify_grace: float = NOTIFY_GRACE_S,
        close_grace: float = CLOSE_GRACE_S,
    ) -> None:
        if lifecycle not in ("persistent", "per_event"):
            raise ValueError("stdio lifecycle must be 'persistent' or 'per_event'")
        if not isinstance(command, str) or not command:
            raise ValueError("stdio command must be a non-empty string")
        if max_frame_bytes < 1:
            raise ValueError("max_frame_bytes must be positive")
        self.command = command
        self.args = tuple(args)
        self.lifecycle: Lifecycle = lifecycle
        self.cwd = cwd
        self._env = dict(env or {})
        child_environment({}, self._env)  # type-check the entries now
        self._environ: Mapping[str, str] = os.environ if environ is None else environ
        self.max_frame_bytes = max_frame_bytes
        self.exit_grace = exit_grace
        self.notify_grace = notify_grace
        self.close_grace = close_grace
        self._tail = _StderrTail()
        self._children: set[_Child] = set()
        self._child: _Child | None = None  # persistent only
        self._lingering: list[_Child] = []  # per_event notifications
        self._request_lock = anyio.Lock(fast_acquire=True)
        self._write_lock = anyio.Lock(fast_acquire=True)
        self._closed = False

    def __repr__(self) -> str:  # never the env values or args (they may be sensitive)
        return f"StdioTransport(command={self.command!r}, lifecycle={self.lifecycle!r})"

    def stderr_tail(self) -> bytes:
        """The last :data:`STDERR_TAIL_BYTES` the children wrote to stderr (debugging only)."""
        return self._tail.value()

    @property
    def pids(self) -> list[int]:
        """The process ids of the children currently owned (diagnostics and tests)."""
        return sorted(child.process.pid for child in self._children)

    # -- the Transport contract ---------------------------------------------------

    async def request(
        self, message: dict[str, Any], exchange: Exchange | None = None
    ) -> dict[str, Any]:
        key = request_key(message)
        data = jsonrpc.encode(message)
        record = Exchange() if exchange is None else exchange
        record.sent(len(data))
        if self.lifecycle == "persistent":
            return await self._persistent_request(key, data, record)
        return await self._per_event_request(key, data, record)

    async def notify(self, message: dict[str, Any]) -> None:
        data = jsonrpc.encode(message)
        if self.lifecycle == "persistent":
            async with self._write_lock:
                child = await self._ready()
                await self._write(child, data)
                child.notified = True
            return
        await self._sweep()
        child = await self._spawn(capture_stdout=False)
        try:
            await child.send(data, close_input=True)
        except BaseException:
            await self._retire(child)
            raise
        child.notified = True
        self._lingering.append(child)

    async def prepare(self) -> None:
        if self.lifecycle != "persistent":
            return  # a per_event child is started for its one event
        with contextlib.suppress(OperationalFailure):
            async with self._write_lock:
                await self._ready()

    async def aclose(self) -> None:
        """End every child this transport started: stdin closed (so queued notifications
        are still read), ``close_grace`` seconds to exit (a child that was sent a
        notification: up to ``NOTIFY_DELIVERY_S`` from its start), then SIGKILL to the
        process group; all reaped before this returns. Idempotent."""
        with anyio.CancelScope(shield=True):
            self._closed = True
            children = list(self._children)
            self._children.clear()
            self._child = None
            # A child started just now for a notification (a per_event one, or a
            # persistent observer whose first event is the session's last) may still be
            # importing: it gets its delivery time, or the session's last events are lost.
            now = anyio.current_time()
            budget = min(self.notify_grace, NOTIFY_DELIVERY_S)
            self._lingering = []
            async with anyio.create_task_group() as tg:
                for child in children:
                    grace = self.close_grace
                    if child.notified:
                        grace = max(grace, budget - (now - child.started))
                    tg.start_soon(child.shutdown, grace)

    # -- children ------------------------------------------------------------------

    async def _spawn(self, *, capture_stdout: bool) -> _Child:
        if self._closed:
            raise OperationalFailure(FailureClass.SPAWN_FAILED, "transport is closed")
        env = child_environment(self._environ, self._env)
        read_fd, write_fd = os.pipe()
        try:
            with anyio.CancelScope(shield=True):  # a spawned child is never lost to a cancel
                process = await anyio.open_process(
                    [self.command, *self.args],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE if capture_stdout else subprocess.DEVNULL,
                    stderr=write_fd,
                    cwd=self.cwd,
                    env=env,
                    start_new_session=True,
                )
        except (OSError, ValueError, subprocess.SubprocessError) as exc:
            os.close(read_fd)
            raise OperationalFailure(
                FailureClass.SPAWN_FAILED, self._spawn_detail(exc, env)
            ) from None
        finally:
            os.close(write_fd)
        child = _Child(process, read_fd, self._tail)
        self._children.add(child)
        if self._closed:  # aclose() ran while we were spawning
            await self._retire(child)
            raise OperationalFailure(FailureClass.SPAWN_FAILED, "transport is closed")
        return child

    def _spawn_detail(self, exc: BaseException, env: Mapping[str, str]) -> str:
        """Why the backend could not be started: the command, its working folder and, for
        a bare name, the child's ``PATH``; never an argument, another environment value
        or exception text."""
        where = f" (working folder {self.cwd!r})" if self.cwd else ""
        if self.cwd and not os.path.isdir(self.cwd):
            return f"working folder {self.cwd!r} does not exist"
        if isinstance(exc, FileNotFoundError):
            if is_path_command(self.command):
                return f"command {self.command!r} not found{where}"
            path = env.get("PATH", "")
            return f"{self.command!r} {NOT_ON_PATH} (the backend's PATH is {path!r})"
        if isinstance(exc, PermissionError):
            return f"command {self.command!r} is not executable{where}"
        return f"command {self.command!r} could not be started ({type(exc).__name__}){where}"

    async def _retire(self, child: _Child) -> None:
        if self._child is child:
            self._child = None
        self._children.discard(child)
        await child.close()

    # -- persistent ----------------------------------------------------------------

    async def _ready(self) -> _Child:
        """The persistent child, (re)spawned if absent or dead. Under the write lock."""
        child = self._child
        if child is not None and not child.alive:
            await self._retire(child)
            child = None
        if child is None:
            child = await self._spawn(capture_stdout=True)
            self._child = child
        return child

    async def _write(self, child: _Child, data: bytes) -> None:
        try:
            await child.send(data)
        except BaseException:
            # A closed pipe, or a cancel mid-write (the frame may be cut): never reuse it.
            await self._retire(child)
            raise

    async def _persistent_request(
        self, key: tuple[str, object], data: bytes, exchange: Exchange
    ) -> dict[str, Any]:
        async with self._request_lock:
            async with self._write_lock:
                child = await self._ready()
                await self._write(child, data)
            try:
                while True:
                    frame = await child.read_frame(self.max_frame_bytes)
                    if frame is None:
                        raise OperationalFailure(
                            FailureClass.ABNORMAL_EXIT, "backend process exited or closed stdout"
                        )
                    response = correlate(frame, key, exchange, self.max_frame_bytes)
                    if response is not None:
                        return response
            except BaseException:
                # A failure, or the caller's deadline or interruption: the child may still
                # be busy with this request; never send it another (one outstanding request
                # per backend). Killed and reaped now, replaced on the next use.
                await self._retire(child)
                raise

    # -- per_event -----------------------------------------------------------------

    async def _per_event_request(
        self, key: tuple[str, object], data: bytes, exchange: Exchange
    ) -> dict[str, Any]:
        await self._sweep()
        child = await self._spawn(capture_stdout=True)
        try:
            await child.send(data, close_input=True)
            frame = await child.read_frame(self.max_frame_bytes)
            if frame is None:
                raise OperationalFailure(
                    FailureClass.ABNORMAL_EXIT, "backend process exited without a response"
                )
            exchange.received(len(frame))
            response = decode_answer(frame, self.max_frame_bytes, key)
            status = await child.finish(self.exit_grace)
            if status not in (0, None):
                raise OperationalFailure(
                    FailureClass.ABNORMAL_EXIT, "backend process exited with a nonzero status"
                )
            return response
        finally:
            await self._retire(child)

    async def _sweep(self) -> None:
        """Reap finished notification children; kill those past their grace or the cap."""
        if not self._lingering:
            return
        now = anyio.current_time()
        keep: list[_Child] = []
        done: list[_Child] = []
        for child in self._lingering:
            expired = now - child.started > self.notify_grace
            (done if expired or not child.alive else keep).append(child)
        while len(keep) > MAX_LINGERING:
            done.append(keep.pop(0))
        self._lingering = keep
        for child in done:
            await self._retire(child)

"""Talking raw to a backend under test: bytes in, bytes out, bounded in size and time.

Three ways to reach a backend, each returning what came back *as it came*, never
interpreted (judging is the rest of :mod:`ahp_conformance.backend`'s job):

- :class:`StdioProcess`: one long-lived process (``persistent``). Writes go through a
  writer thread (so a backend that stops reading cannot block the judge), stdout is
  split into lines by a reader thread, stderr is kept (its last :data:`STDERR_KEEP`
  bytes) for evidence. :meth:`StdioProcess.next_line` waits for one line until a
  deadline.
- :func:`run_once` (``per_event``): one process per message: the message on stdin,
  then EOF; every stdout line until EOF or the deadline; the exit status.
- :class:`HttpPeer`: one ``POST`` (or any method) per message over loopback HTTP
  (httpx, no redirects followed, a fresh connection each), the body read up to a bound,
  the whole exchange (connect, head and body) within its deadline.

Bounds: a stdout line or HTTP body longer than :data:`FRAME_LIMIT` (the SDK's 4 MiB
frame cap) is not kept: its first :data:`HEAD_KEEP` bytes are, marked ``oversized``,
and the rest is discarded up to the next newline. Every wait has a deadline. Every
process is started in its own process group and the whole group is ended (SIGTERM,
then SIGKILL) when the peer is closed; what left the group (``setsid``) is the judge's
to end (:mod:`ahp_conformance.backend_judge`, :mod:`ahp_protocol.descendants`).
"""

from __future__ import annotations

import contextlib
import os
import queue
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import IO

FRAME_LIMIT = 4 * 1024 * 1024
"""A frame larger than this (newline excluded) is oversized (the SDK's cap)."""
HEAD_KEEP = 2048
"""Bytes kept of an oversized frame, for evidence."""
STDERR_KEEP = 16 * 1024
"""Bytes of a process's stderr kept for evidence (the last ones)."""
_CHUNK = 64 * 1024


@dataclass(frozen=True, slots=True)
class Line:
    """One line the backend wrote on stdout (without its newline)."""

    data: bytes
    oversized: bool = False
    """The line was longer than :data:`FRAME_LIMIT`; ``data`` holds its first bytes."""
    unterminated: bool = False
    """EOF came before the newline."""


class _Lines:
    """Splits a byte stream into :class:`Line` items on a queue; ``None`` marks EOF."""

    def __init__(self, stream: IO[bytes]) -> None:
        self.queue: queue.Queue[Line | None] = queue.Queue()
        self._fd = stream.fileno()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        buffer = bytearray()
        skipping = False  # inside an oversized line: discard up to the newline
        while True:
            try:
                chunk = os.read(self._fd, _CHUNK)
            except OSError:
                chunk = b""
            if not chunk:
                break
            start = 0
            while True:
                end = chunk.find(b"\n", start)
                piece = chunk[start:] if end < 0 else chunk[start:end]
                if not skipping:
                    buffer += piece
                    if len(buffer) > FRAME_LIMIT:
                        self.queue.put(Line(bytes(buffer[:HEAD_KEEP]), oversized=True))
                        buffer.clear()
                        skipping = True
                if end < 0:
                    break
                if skipping:
                    skipping = False
                else:
                    self.queue.put(Line(bytes(buffer)))
                    buffer.clear()
                start = end + 1
        if buffer:
            self.queue.put(Line(bytes(buffer), unterminated=True))
        self.queue.put(None)


class _Tail:
    """Keeps the last :data:`STDERR_KEEP` bytes of a stream (read on a thread)."""

    def __init__(self, stream: IO[bytes]) -> None:
        self._data = bytearray()
        self._lock = threading.Lock()
        self._fd = stream.fileno()
        self._thread = threading.Thread(target=self._pump, daemon=True)
        self._thread.start()

    def _pump(self) -> None:
        while True:
            try:
                chunk = os.read(self._fd, _CHUNK)
            except OSError:
                return
            if not chunk:
                return
            with self._lock:
                self._data += chunk
                del self._data[:-STDERR_KEEP]

    def text(self) -> str:
        with self._lock:
            return self._data.decode("utf-8", "replace")

    def join(self, timeout: float) -> None:
        self._thread.join(timeout)


def _spawn(argv: Sequence[str], cwd: str | None) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        list(argv),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=cwd,
        start_new_session=True,
        bufsize=0,
    )


def _end_group(proc: subprocess.Popen[bytes], grace: float = 1.0) -> None:
    """End the process and everything in its process group: SIGTERM, then SIGKILL."""
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, sig)
        try:
            proc.wait(timeout=wait)
        except subprocess.TimeoutExpired:
            continue
        # The leader is gone; members of its group may remain.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        return


class StdioProcess:
    """One persistent backend process: write frames, read stdout lines until a deadline."""

    def __init__(self, argv: Sequence[str], cwd: str | None = None) -> None:
        self.argv = list(argv)
        self.proc = _spawn(self.argv, cwd)
        assert self.proc.stdin and self.proc.stdout and self.proc.stderr
        self._lines = _Lines(self.proc.stdout)
        self._stderr = _Tail(self.proc.stderr)
        self._writes: queue.Queue[bytes | None] = queue.Queue()
        self.write_error: str | None = None
        self._written = threading.Event()
        self._written.set()
        threading.Thread(target=self._writer, daemon=True).start()
        self.eof = False

    def _writer(self) -> None:
        stdin = self.proc.stdin
        assert stdin is not None
        while True:
            data = self._writes.get()
            if data is None:
                with contextlib.suppress(OSError):
                    stdin.close()
                return
            try:
                stdin.write(data)
                stdin.flush()
            except OSError as exc:
                self.write_error = f"writing to the backend's stdin failed: {exc.strerror or exc}"
            finally:
                self._written.set()

    def write(self, data: bytes) -> None:
        """Queue ``data`` for stdin (never blocks; a broken pipe is noted in ``write_error``)."""
        self._written.clear()
        self._writes.put(data)

    def written(self, deadline: float) -> bool:
        """Whether everything queued was written (or failed) before ``deadline``."""
        return self._written.wait(max(0.0, deadline - time.monotonic()))

    def next_line(self, deadline: float) -> Line | None:
        """The next stdout line, or ``None`` at EOF or when ``deadline`` passes (see ``eof``)."""
        if self.eof:
            return None
        try:
            item = self._lines.queue.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            return None
        if item is None:
            self.eof = True
        return item

    def exit_status(self, wait: float = 0.0) -> int | None:
        try:
            return self.proc.wait(timeout=wait) if wait > 0 else self.proc.poll()
        except subprocess.TimeoutExpired:
            return None

    def stderr_text(self, wait: float = 0.0) -> str:
        """What the process wrote on stderr (the last bytes). ``wait``: for a process
        that has ended, up to how long to let the reader reach the end of the pipe
        first (its last words are often read after the exit is seen)."""
        if wait > 0:
            self._stderr.join(wait)
        return self._stderr.text()

    def close(self) -> None:
        """Close stdin, give the process a moment to exit, then end its process group."""
        self._writes.put(None)
        if self.exit_status(wait=0.5) is None:
            _end_group(self.proc)
        else:
            _end_group(self.proc, grace=0.1)
        self._stderr.join(1.0)


@dataclass
class OnceResult:
    """What one per-event process did with one message."""

    lines: list[Line] = field(default_factory=list)
    exit_status: int | None = None
    timed_out: bool = False
    """The process did not close stdout (exit) before the deadline; it was ended."""
    stderr: str = ""
    spawn_error: str | None = None


def run_once(argv: Sequence[str], message: bytes, deadline: float, cwd: str | None) -> OnceResult:
    """Start one process, give it ``message`` then EOF, collect stdout until it exits."""
    try:
        proc = _spawn(argv, cwd)
    except OSError as exc:
        return OnceResult(spawn_error=f"cannot start {argv[0]!r}: {exc.strerror or exc}")
    assert proc.stdin and proc.stdout and proc.stderr
    lines = _Lines(proc.stdout)
    tail = _Tail(proc.stderr)
    stdin = proc.stdin

    def feed() -> None:
        with contextlib.suppress(OSError):
            stdin.write(message)
        with contextlib.suppress(OSError):
            stdin.close()

    threading.Thread(target=feed, daemon=True).start()
    out = OnceResult()
    try:
        while True:
            try:
                item = lines.queue.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                out.timed_out = True
                break
            if item is None:
                break
            out.lines.append(item)
        if not out.timed_out:
            try:
                out.exit_status = proc.wait(timeout=max(0.05, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                out.timed_out = True
    finally:
        _end_group(proc, grace=0.2)
        tail.join(1.0)
        out.stderr = tail.text()
    return out


@dataclass
class HttpReply:
    """One HTTP exchange: status, headers, body (bounded), or why there was none."""

    status: int | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    body: bytes = b""
    oversized: bool = False
    error: str | None = None
    timed_out: bool = False


class _Deadline:
    """One exchange's wall-clock bound: when it passes, the connection's socket is shut
    down, so a read blocked on a backend that dribbles its head or body (httpx's read
    timeout restarts at every byte) returns at once. The socket comes from httpcore's
    ``trace`` extension as the connection is made."""

    def __init__(self, timeout_s: float) -> None:
        self.expired = False
        self._socket: socket.socket | None = None
        self._lock = threading.Lock()
        self._timer = threading.Timer(timeout_s, self._expire)
        self._timer.daemon = True
        self._timer.start()

    def trace(self, event: str, info: Mapping[str, object]) -> None:
        if event != "connection.connect_tcp.complete":
            return
        stream = info.get("return_value")
        sock = getattr(stream, "get_extra_info", lambda _: None)("socket")
        if isinstance(sock, socket.socket):
            with self._lock:
                self._socket = sock
                if self.expired:
                    self._shut()

    def _expire(self) -> None:
        with self._lock:
            self.expired = True
            self._shut()

    def _shut(self) -> None:
        if self._socket is not None:
            with contextlib.suppress(OSError):
                self._socket.shutdown(socket.SHUT_RDWR)

    def cancel(self) -> None:
        self._timer.cancel()


class HttpPeer:
    """One loopback HTTP endpoint; every message is one request (no redirects followed)."""

    def __init__(self, url: str, token: str | None = None) -> None:
        import httpx  # here: judging a stdio backend never pays for importing it

        self.url = url
        self.token = token
        # A fresh connection per message: the deadline must know the socket it ends.
        self._client = httpx.Client(
            follow_redirects=False,
            trust_env=False,
            limits=httpx.Limits(max_keepalive_connections=0),
        )

    def send(
        self,
        body: bytes,
        timeout_s: float,
        *,
        method: str = "POST",
        content_type: str | None = "application/json",
        authorization: str | bool | None = True,
    ) -> HttpReply:
        """``authorization``: True sends the configured token (if any), a string sends that
        header value, ``None``/False sends none."""
        import httpx

        headers = {"Accept": "application/json"}
        if content_type is not None:
            headers["Content-Type"] = content_type
        if authorization is True:
            if self.token is not None:
                headers["Authorization"] = f"Bearer {self.token}"
        elif isinstance(authorization, str):
            headers["Authorization"] = authorization
        deadline = _Deadline(timeout_s)
        try:
            with self._client.stream(
                method,
                self.url,
                content=body if method == "POST" else None,
                headers=headers,
                timeout=httpx.Timeout(timeout_s),
                extensions={"trace": deadline.trace},
            ) as response:
                data = bytearray()
                oversized = False
                for chunk in response.iter_bytes():
                    data += chunk
                    if len(data) > FRAME_LIMIT:
                        oversized = True
                        del data[HEAD_KEEP:]
                        break
                return HttpReply(
                    status=response.status_code,
                    headers={k.lower(): v for k, v in response.headers.items()},
                    body=bytes(data),
                    oversized=oversized,
                )
        except httpx.HTTPError as exc:
            if deadline.expired or isinstance(exc, httpx.TimeoutException):
                return HttpReply(
                    error=f"no HTTP response within {timeout_s * 1000:.0f} ms", timed_out=True
                )
            return HttpReply(error=f"HTTP exchange failed: {type(exc).__name__}")
        finally:
            deadline.cancel()

    def close(self) -> None:
        self._client.close()

"""Serve a :class:`~ahp_protocol.server.Backend` over stdio: one JSON-RPC object per line.

Two lifecycles (AHP-STDIO-001):

- :func:`serve_persistent` reads lines until EOF and answers each in order
  (evaluation is serial, responses are written and flushed one line at a time).
- :func:`serve_once` (``per_event``) reads exactly one message, answers it, and
  returns at once: it never waits for an EOF that may not come (the official SDK
  harness keeps stdin open until the process exits).

Bounds and framing: a line longer than ``max_frame_bytes`` (default: the backend's,
4 MiB) is answered with -32700 (``id: null``) and its rest is discarded up to the
next newline without being buffered. Blank lines are skipped. A final record that
EOF cuts off before its newline is a framing error in both lifecycles: it is not
dispatched, and when it holds anything but whitespace it is answered with -32700
(``id: null``, which a harness discards as uncorrelated) and a stderr diagnostic.

Stdout carries protocol only. When serving the process's own stdout, the protocol
stream is moved to a private duplicate of file descriptor 1, and descriptor 1 and
``sys.stdout`` are pointed at stderr while serving: a stray ``print()`` in a
handler, or a child process it starts, lands on stderr and cannot corrupt the
stream. Diagnostics go to stderr. A closed stdout (harness gone) ends serving.

A persistent backend with no request waiting when it starts builds what judging the
first event needs (:meth:`~ahp_protocol.server.Backend.warm`) before it reads: it
is idle then anyway, and the session's first tool call does not pay for it.

Sync-only backends are served by a plain blocking loop with no event loop at all;
a backend with ``async def`` handlers is served inside one ``anyio.run``. Reads
block the loop between messages, which is harmless because evaluation is serial.
"""

from __future__ import annotations

import gc
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from typing import IO, TYPE_CHECKING

from ahp_protocol.server._codec import parse_error_reply
from ahp_protocol.server._core import log

if TYPE_CHECKING:
    from ahp_protocol.server.backend import Backend

__all__ = ["serve_once", "serve_persistent"]

_DISCARD_CHUNK = 64 * 1024


def _move_stdout() -> int | None:
    """Point fd 1 at stderr; return a private duplicate of the old fd 1 (or None)."""
    try:
        if sys.stdout is not None:
            sys.stdout.flush()
        private = os.dup(1)
    except (OSError, ValueError):
        return None
    try:
        os.dup2(2, 1)
    except OSError:
        os.close(private)
        return None
    return private


@contextmanager
def _protocol_stdout(stdout: IO[bytes] | None) -> Iterator[IO[bytes]]:
    """The stream protocol lines go to; guards the process stdout while serving."""
    if stdout is not None:
        yield stdout
        return
    private = _move_stdout()
    if private is None:
        yield sys.stdout.buffer
        return
    saved = sys.stdout
    sys.stdout = sys.stderr
    out = open(private, "wb", closefd=True)  # noqa: SIM115 - closed in finally
    try:
        yield out
    finally:
        sys.stdout = saved
        with suppress(OSError):
            out.flush()
        with suppress(OSError, ValueError):
            if saved is not None:
                saved.flush()  # what a handler wrote through an old reference: stderr
            os.dup2(private, 1)
        with suppress(OSError):
            out.close()


class _Lines:
    """Bounded line reading from a binary stream."""

    def __init__(self, stdin: IO[bytes], limit: int) -> None:
        self.stdin = stdin
        self.limit = limit

    def next(self, line: bytes | None = None) -> bytes | str | None:
        """A complete non-blank line (with its newline, which the core ignores),
        ``None`` at EOF, or a framing error: ``"oversize"`` or ``"truncated"`` (EOF
        inside a record). ``line`` is a read already made (the first one judged)."""
        while True:
            if line is None:
                line = self.stdin.readline(self.limit + 1)
            if not line:
                return None
            if not line.endswith(b"\n"):
                if len(line) > self.limit:
                    return "oversize"
                return None if line.isspace() else "truncated"
            if not line.isspace():  # a line of only "\n" is blank too
                return line
            line = None

    def discard_rest(self) -> None:
        """Skip the rest of an oversized line, a bounded chunk at a time."""
        while True:
            chunk = self.stdin.readline(_DISCARD_CHUNK)
            if not chunk or chunk.endswith(b"\n"):
                return


def _write(out: IO[bytes], line: bytes) -> bool:
    try:
        out.write(line)
        out.flush()
    except (BrokenPipeError, ConnectionResetError):
        return False
    return True


def _read(
    backend: Backend, lines: _Lines, out: IO[bytes], once: bool, line: bytes | None = None
) -> bytes | None:
    """The next message to dispatch, or ``None`` when serving should stop. ``line`` is a
    read already made."""
    while True:
        item = lines.next(line)
        line = None
        if item is None or isinstance(item, bytes):
            return item
        log("%s: stdio framing error (%s record)", backend.name, item)
        if item == "oversize" and not once:
            lines.discard_rest()
        reason = "frame too large" if item == "oversize" else "record cut off by end of input"
        body = parse_error_reply(reason).body
        assert body is not None
        if not _write(out, body) or once or item == "truncated":
            return None


def _idle(stdin: IO[bytes]) -> bool:
    """Nothing to read on ``stdin`` yet (``False`` when that cannot be told)."""
    import select

    try:
        return not select.select([stdin.fileno()], [], [], 0)[0]
    except (OSError, ValueError, AttributeError):  # io.UnsupportedOperation is an OSError
        return False


def _serve(
    backend: Backend,
    stdin: IO[bytes] | None,
    stdout: IO[bytes] | None,
    max_frame_bytes: int | None,
    *,
    once: bool,
) -> bool:
    limit = backend.max_frame_bytes if max_frame_bytes is None else max_frame_bytes
    if limit < 1:
        raise ValueError("max_frame_bytes must be positive")
    lines = _Lines(sys.stdin.buffer if stdin is None else stdin, limit)
    if not once and _idle(lines.stdin):
        backend.warm()  # a persistent backend waits for its first request: build now
    with _protocol_stdout(stdout) as out:
        if not backend.needs_event_loop:
            return _serve_sync(backend, lines, out, once)

        async def main() -> bool:
            while (message := _read(backend, lines, out, once)) is not None:
                reply = await backend.respond(message, limit)
                if reply.body is not None and not _write(out, reply.body):
                    return False
                if once:
                    return True
            return False

        import anyio

        return anyio.run(main)


def _serve_sync(backend: Backend, lines: _Lines, out: IO[bytes], once: bool) -> bool:
    """The loop without an event loop. A complete line, the usual read, goes straight
    to the core (per-request cost is mostly Python calls); anything else (EOF, a
    blank, oversized or cut-off line) is judged by ``_read``."""
    readline, size, limit = lines.stdin.readline, lines.limit + 1, lines.limit
    respond, write, flush = backend.respond_sync, out.write, out.flush
    while True:
        message = readline(size)
        if not message.endswith(b"\n") or message.isspace():
            judged = _read(backend, lines, out, once, message)
            if judged is None:
                return False
            message = judged
        body = respond(message, limit).body
        if body is not None:
            try:
                write(body)
                flush()
            except (BrokenPipeError, ConnectionResetError):
                return False
        if once:
            return True


def serve_persistent(
    backend: Backend,
    stdin: IO[bytes] | None = None,
    stdout: IO[bytes] | None = None,
    *,
    max_frame_bytes: int | None = None,
) -> None:
    """Answer every line of ``stdin`` (default: the process's) until EOF."""
    _serve(backend, stdin, stdout, max_frame_bytes, once=False)


def serve_once(
    backend: Backend,
    stdin: IO[bytes] | None = None,
    stdout: IO[bytes] | None = None,
    *,
    max_frame_bytes: int | None = None,
) -> bool:
    """Read one message, answer it (unless it is a notification) and return.

    Returns ``True`` when a complete message was read and handled, ``False`` when
    input ended first or the record was oversized or cut off (answered -32700).

    The cyclic garbage collector is paused meanwhile (and restored): answering the
    first message creates and builds the wire models, when it would run often for
    nothing, and a per-event process exits right after.
    """
    collecting = gc.isenabled()
    gc.disable()
    try:
        return _serve(backend, stdin, stdout, max_frame_bytes, once=True)
    finally:
        if collecting:
            gc.enable()

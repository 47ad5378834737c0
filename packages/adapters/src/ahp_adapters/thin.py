"""The thin hook client: what ``ahp-adapter hook <dialect>`` runs on every tool call.

A native harness starts a new process for every tool call, so this module is
the adapter's hot path. When the registration's warm daemon is running, it
reads the native payload from stdin, hands it to the daemon in one
:mod:`~ahp_adapters.frame` over the daemon's Unix socket, and writes the
native answer the daemon rendered: nothing is parsed here, and nothing but
``os``-level modules is imported (no ``json``, ``socket``, ``pathlib``,
``hashlib``, ``argparse``, no pydantic or anyio, and of ``ahp_protocol`` only its
bare package and ``_version``: the kit's version is part of the daemon's key).

Everything else is the full hook's (:mod:`ahp_adapters.hook`), run in this
process with what was already read: no daemon yet (the full hook starts one,
or runs the chain itself), ``--daemon off``, a stdin that does not reach EOF
in time, an unsafe runtime directory. A daemon that fails after the request
was sent (it may have reached backends) is never asked again: the full hook
applies the failure policy. So every promise of the hook holds on this path
too: an answer inside the budget, fail-closed where the registration says so,
stdout carrying only the native answer.

The hook's options, its bounded stdin and its budget are
:mod:`ahp_adapters.invocation`'s, shared with the full hook and the daemon.
"""

from __future__ import annotations

import _socket  # the C module: ``socket`` builds enums at import, which costs milliseconds
import os
import sys
import time

from ahp_adapters import frame
from ahp_adapters.invocation import (
    EXIT_RESERVE_S,
    USAGE,
    HookOptions,
    InputTimeout,
    InputTooLarge,
    Usage,
    parse,
    read_input,
)
from ahp_adapters.rundir import daemon_files, registration_path

MAX_ANSWER_LINE = 64
"""An answer frame's first line is ``answer`` and three numbers: longer is not a frame."""


class DaemonFailed(Exception):
    """The frame was sent (it may have reached backends) and no complete answer came back."""


def _receive(sock: _socket.socket, size: int, deadline: float, buffer: bytes) -> bytes:
    """``buffer`` grown to ``size`` bytes from ``sock`` by ``deadline``."""
    while len(buffer) < size:
        sock.settimeout(max(deadline - time.monotonic(), 0.001))
        chunk = sock.recv(max(size - len(buffer), 65536))
        if not chunk:
            raise DaemonFailed("the daemon closed the connection without an answer")
        buffer += chunk
    return buffer


def exchange(sock: _socket.socket, request: bytes, deadline: float) -> tuple[int, bytes, bytes]:
    """Send one request frame, read one answer frame: (exit code, stdout, stderr)."""
    try:
        sock.settimeout(max(deadline - time.monotonic(), 0.001))
        sock.sendall(request)
        buffer = b""
        while b"\n" not in buffer[:MAX_ANSWER_LINE]:
            if len(buffer) > MAX_ANSWER_LINE:
                raise DaemonFailed("the daemon's answer is not a frame")
            buffer = _receive(sock, len(buffer) + 1, deadline, buffer)
        line, _, rest = buffer.partition(b"\n")
        code, out, err = frame.answer_sizes(line)
        body = _receive(sock, out + err, deadline, rest)
    except TimeoutError:
        raise DaemonFailed("no answer from the daemon in time") from None
    except frame.FrameError:
        raise DaemonFailed("the daemon's answer is not a frame") from None
    except OSError:
        raise DaemonFailed("the daemon connection failed") from None
    return code, body[:out], body[out : out + err]


def connect(path: str, deadline: float) -> _socket.socket:
    """A connection to the daemon socket at ``path`` (``OSError`` if none answers)."""
    sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        sock.settimeout(max(deadline - time.monotonic(), 0.001))
        sock.connect(path)
    except OSError:
        sock.close()
        raise
    return sock


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def full(options: HookOptions, started: float) -> int:
    """The full hook in this process, reading stdin itself (it imports the chain's machinery)."""
    # Imported only when the daemon cannot answer (start-up speed: json, the dialects, the
    # chain); the full hook imports nothing of this module.
    from ahp_adapters.hook import run

    return run(options, started=started)


def full_with(options: HookOptions, started: float, raw: bytes | None, failed: str = "") -> int:
    """The full hook for a payload already read (``None``: stdin was not readable in time);
    ``failed``: the daemon failed with the request, so apply the failure policy."""
    from ahp_adapters.hook import answer_read  # only when the daemon cannot answer (as above)

    return answer_read(options, raw, started, failed=failed)


def main(argv: list[str]) -> int:
    """``ahp-adapter hook``: the exit code; the native answer is on stdout."""
    started = time.monotonic()
    try:
        options = parse(argv)
    except Usage as exc:
        # Exit 1: every harness reads it as a non-blocking error (not a decision).
        sys.stderr.write(f"{USAGE}ahp-adapter hook: error: {exc}\n")
        return 1
    if options.daemon == "off":
        return full(options, started)
    try:
        raw: bytes | None = read_input(0, started + options.budget / 2)
    except (InputTimeout, InputTooLarge, OSError):
        raw = None
    if raw is None:
        return full_with(options, started, None)
    deadline = started + options.budget
    try:
        path = daemon_files(registration_path(options.registration), os.getcwd())[0]
        sock = connect(path, deadline)
    except OSError:  # no daemon yet, or an unsafe runtime directory: the full hook sees to it
        return full_with(options, started, raw)
    debug = bool(os.environ.get("AHP_ADAPTER_DEBUG"))
    remaining = deadline - time.monotonic() - EXIT_RESERVE_S
    request = frame.request(argv, max(remaining, 0.001), debug, raw)
    try:
        code, out, err = exchange(sock, request, deadline - EXIT_RESERVE_S / 2)
    except DaemonFailed as exc:
        return full_with(options, started, raw, failed=str(exc))
    finally:
        sock.close()
    try:
        if out:
            _write_all(1, out)
        if err:
            _write_all(2, err)
    except OSError:
        pass
    return code

"""The thin hook client: what ``ahp-adapter hook <dialect>`` runs on every tool call.

A native harness starts a new process for every tool call, so this module is
the adapter's hot path. When the registration's warm daemon is running, it
reads the native payload from stdin, hands it to the daemon in one
:mod:`~ahp_adapters.frame` over the daemon's Unix socket, and writes the
native answer the daemon rendered: nothing is parsed here, and nothing but
``os``-level modules is imported (no ``json``, ``socket``, ``pathlib``,
``hashlib``, ``argparse``, and none of ``ahp_protocol``, pydantic or anyio).

Everything else is the full hook's (:mod:`ahp_adapters.hook`), run in this
process with what was already read: no daemon yet (the full hook starts one,
or runs the chain itself), ``--daemon off``, a stdin that does not reach EOF
in time, an unsafe runtime directory. A daemon that fails after the request
was sent (it may have reached backends) is never asked again: the full hook
applies the failure policy. So every promise of the hook holds on this path
too: an answer inside the budget, fail-closed where the registration says so,
stdout carrying only the native answer.

Also owns the hook's options (:class:`HookOptions` and :func:`parse`, the one
parser of ``ahp-adapter hook`` arguments, also used by the daemon to read a
frame), bounded stdin reading, and the time the hook keeps back for itself.
"""

from __future__ import annotations

import _socket  # the C module: ``socket`` builds enums at import, which costs milliseconds
import os
import select
import sys
import time

from ahp_adapters import frame
from ahp_adapters.rundir import daemon_files, registration_path

DEFAULT_BUDGET_S = 10.0
DEFAULT_IDLE_S = 900.0
MAX_INPUT_BYTES = 8 * 1024 * 1024
EXIT_RESERVE_S = 0.25
"""Kept back from the budget for rendering, writing and exiting."""
DAEMON_MODES = ("auto", "off", "require")
USAGE = (
    "usage: ahp-adapter hook DIALECT --registration FILE [--event NAME] [--budget SECONDS]\n"
    "       [--daemon {auto,off,require}] [--skip-shell-mcp] [--harness-version VERSION]\n"
    "       [--idle-timeout SECONDS]\n"
)


class HookOptions:
    """How one ``ahp-adapter hook`` invocation was asked to run."""

    __slots__ = (
        "budget",
        "daemon",
        "dialect",
        "event",
        "harness_version",
        "idle_timeout",
        "registration",
        "skip_shell_mcp",
    )

    def __init__(
        self,
        dialect: str,
        registration: str,
        event: str | None = None,
        budget: float = DEFAULT_BUDGET_S,
        daemon: str = "auto",
        skip_shell_mcp: bool = False,
        harness_version: str | None = None,
        idle_timeout: float = DEFAULT_IDLE_S,
    ) -> None:
        self.dialect = dialect
        self.registration = registration
        self.event = event
        self.budget = budget
        self.daemon = daemon
        self.skip_shell_mcp = skip_shell_mcp
        self.harness_version = harness_version
        self.idle_timeout = idle_timeout

    def __repr__(self) -> str:
        fields = ", ".join(f"{name}={getattr(self, name)!r}" for name in self.__slots__)
        return f"HookOptions({fields})"


class Usage(ValueError):
    """The hook's command line is wrong (the message says what to fix)."""


def _seconds(option: str, value: str, low: float, high: float) -> float:
    try:
        seconds = float(value)
    except ValueError:
        raise Usage(f"argument {option}: expected seconds, e.g. 10") from None
    if not low <= seconds <= high:
        raise Usage(f"argument {option}: must be between {low:g} and {high:g} seconds")
    return seconds


_VALUED = (
    "--registration",
    "--event",
    "--budget",
    "--daemon",
    "--harness-version",
    "--idle-timeout",
)


def parse(argv: list[str]) -> HookOptions:
    """The options of ``ahp-adapter hook`` (``argv`` after ``hook``); :class:`Usage` if wrong."""
    values: dict[str, str] = {}
    positional: list[str] = []
    skip = False
    i = 0
    while i < len(argv):
        arg = argv[i]
        i += 1
        if arg == "--skip-shell-mcp":
            skip = True
            continue
        name, eq, value = arg.partition("=")
        if name in _VALUED:
            if not eq:
                if i >= len(argv):
                    raise Usage(f"argument {name}: expected one argument")
                value = argv[i]
                i += 1
            values[name] = value
            continue
        if arg.startswith("-") and arg != "-":
            raise Usage(f"unrecognized argument: {arg}")
        positional.append(arg)
    if len(positional) != 1:
        raise Usage("expected one DIALECT" if not positional else f"unrecognized: {positional[1]}")
    if "--registration" not in values:
        raise Usage("the following arguments are required: --registration")
    daemon = values.get("--daemon", "auto")
    if daemon not in DAEMON_MODES:
        raise Usage(f"argument --daemon: invalid choice {daemon!r} (auto, off or require)")
    return HookOptions(
        dialect=positional[0],
        registration=values["--registration"],
        event=values.get("--event") or None,
        budget=_seconds("--budget", values.get("--budget", "10"), 0.1, 600.0),
        daemon=daemon,
        skip_shell_mcp=skip,
        harness_version=values.get("--harness-version") or None,
        idle_timeout=_seconds("--idle-timeout", values.get("--idle-timeout", "900"), 0.1, 1e9),
    )


class InputTimeout(Exception):
    """Stdin did not reach EOF within the budget."""


class InputTooLarge(Exception):
    """Stdin holds more than the adapter accepts."""


def read_input(fd: int, deadline: float, limit: int = MAX_INPUT_BYTES) -> bytes:
    """Everything on ``fd`` until EOF, bounded in time and size."""
    chunks: list[bytes] = []
    size = 0
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise InputTimeout
        ready, _, _ = select.select([fd], [], [], remaining)
        if not ready:
            raise InputTimeout
        chunk = os.read(fd, 65536)
        if not chunk:
            return b"".join(chunks)
        size += len(chunk)
        if size > limit:
            raise InputTooLarge
        chunks.append(chunk)


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
    from ahp_adapters.hook import run

    return run(options, started=started)


def full_with(options: HookOptions, started: float, raw: bytes | None, failed: str = "") -> int:
    """The full hook for a payload already read (``None``: stdin was not readable in time);
    ``failed``: the daemon failed with the request, so apply the failure policy."""
    from ahp_adapters.hook import answer_read

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

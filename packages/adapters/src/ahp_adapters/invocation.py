"""One ``ahp-adapter hook`` invocation: its options, its stdin, its time budget.

Owns :class:`HookOptions` and :func:`parse` (the one parser of ``ahp-adapter hook``
arguments: the thin client's, the full hook's, and the daemon's when it reads a
frame), bounded stdin reading (:func:`read_input`), and the budget's numbers: the
default, and the time the hook keeps back for itself (:data:`EXIT_RESERVE_S`).

Imports only ``os``, ``select`` and ``time``: the thin hook client imports this module
on every tool call (:mod:`ahp_adapters.thin`).
"""

from __future__ import annotations

import os
import select
import time

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

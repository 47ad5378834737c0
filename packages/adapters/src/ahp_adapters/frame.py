"""The hook frame: a thin hook hands the daemon its native payload and gets the native answer.

The warm daemon speaks one JSON line per connection (``ping``, ``stop``,
``intercept``, ``observe``: see :mod:`ahp_adapters.daemon`). A thin hook
(:mod:`ahp_adapters.thin`) must not pay for importing ``json`` on every tool
call, so it speaks this frame instead, on the same socket. It carries bytes
the client never needs to parse:

- request: ``hook 1 <head length> <payload length>\\n``, then the head (the
  hook's remaining budget in seconds, ``1``/``0`` for debug output, and the
  hook's own arguments after ``hook``, joined by NUL: arguments cannot hold
  one), then the native payload exactly as the harness wrote it on stdin;
- answer: ``answer <exit code> <stdout length> <stderr length>\\n``, then what
  the hook writes on stdout and on stderr, byte for byte.

The daemon reads the payload, runs the chain and renders the native answer
with the same functions the hook uses in-process (:mod:`ahp_adapters.hook`),
so there is one rule for what a native answer is. Anything that is not a
complete answer frame is a failure of the daemon (the caller applies the
failure policy). Standard library only, and only ``os``-level imports.
"""

from __future__ import annotations

VERSION = b"1"
REQUEST_PREFIX = b"hook "
ANSWER_PREFIX = b"answer "
MAX_HEAD_BYTES = 64 * 1024
MAX_ANSWER_BYTES = 1024 * 1024


class FrameError(ValueError):
    """Not a frame this side accepts (a fixed reason; never the frame's content)."""


def request(argv: list[str], remaining: float, debug: bool, payload: bytes) -> bytes:
    """The request frame for one hook invocation (``argv``: the hook's arguments)."""
    fields = [repr(remaining), "1" if debug else "0", *argv]
    head = "\0".join(fields).encode("utf-8", "surrogateescape")
    return b"hook %s %d %d\n" % (VERSION, len(head), len(payload)) + head + payload


def request_sizes(line: bytes) -> tuple[int, int]:
    """(head length, payload length) from a request's first line (without its newline)."""
    parts = line.split(b" ")
    if len(parts) != 4 or parts[0] != b"hook" or parts[1] != VERSION:
        raise FrameError("not a hook frame of this version")
    try:
        head, payload = int(parts[2]), int(parts[3])
    except ValueError:
        raise FrameError("frame lengths are not numbers") from None
    if not 0 <= head <= MAX_HEAD_BYTES or payload < 0:
        raise FrameError("frame lengths out of range")
    return head, payload


def request_head(head: bytes) -> tuple[float, bool, list[str]]:
    """(remaining seconds, debug, the hook's arguments) from a request's head."""
    fields = head.decode("utf-8", "surrogateescape").split("\0")
    if len(fields) < 2:
        raise FrameError("frame head too short")
    try:
        remaining = float(fields[0])
    except ValueError:
        raise FrameError("remaining budget is not a number") from None
    return remaining, fields[1] == "1", fields[2:]


def answer(exit_code: int, stdout: bytes, stderr: bytes) -> bytes:
    """The answer frame: what the hook writes, and how it exits."""
    return b"answer %d %d %d\n" % (exit_code, len(stdout), len(stderr)) + stdout + stderr


def answer_sizes(line: bytes) -> tuple[int, int, int]:
    """(exit code, stdout length, stderr length) from an answer's first line."""
    parts = line.split(b" ")
    if len(parts) != 4 or parts[0] != b"answer":
        raise FrameError("not an answer frame")
    try:
        code, out, err = int(parts[1]), int(parts[2]), int(parts[3])
    except ValueError:
        raise FrameError("answer lengths are not numbers") from None
    if not (0 <= code <= 255 and out >= 0 and err >= 0 and out + err <= MAX_ANSWER_BYTES):
        raise FrameError("answer lengths out of range")
    return code, out, err

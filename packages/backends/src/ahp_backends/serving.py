"""What every sample backend shares: its transport options and duplicate deliveries.

Owns the serving flags (stdio persistent by default, ``--once`` for one event
per process, ``--http HOST:PORT`` on uvicorn, loopback only unless
``--allow-remote``), and :class:`Replies`, the memory of answers by
``(source, event.id)`` that makes a duplicate delivery get the same answer.
Never decides anything about a tool call.
"""

from __future__ import annotations

import argparse
import ipaddress
import sys
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from ahp_protocol.server import Backend

T = TypeVar("T")


def add_transport_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("transport (default: stdio, one persistent process)")
    group.add_argument(
        "--once", action="store_true", help="per_event: answer one message on stdin, then exit"
    )
    group.add_argument(
        "--http", metavar="HOST:PORT", help="serve HTTP on HOST:PORT (uvicorn; port 0 picks one)"
    )
    group.add_argument(
        "--allow-remote",
        action="store_true",
        help="allow --http on a non-loopback address (put TLS in front of it)",
    )


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def parse_http(value: str, *, allow_remote: bool) -> tuple[str, int]:
    """``HOST:PORT`` checked: a port number, and loopback unless ``allow_remote``."""
    host, sep, port = value.rpartition(":")
    if not sep or not host or not port.isdigit() or int(port) > 65535:
        raise ValueError(f"--http {value!r}: expected HOST:PORT, e.g. 127.0.0.1:8765")
    host = host.strip("[]")
    if not _is_loopback(host):
        if not allow_remote:
            raise ValueError(
                f"--http {value!r}: refusing a non-loopback address; pass --allow-remote "
                "to serve on it (and put TLS in front of it: AHP requires https remotely)"
            )
        print(
            f"warning: serving plain HTTP on {host}; AHP requires TLS for remote endpoints, "
            "so put a TLS-terminating proxy in front of this backend",
            file=sys.stderr,
        )
    return host, int(port)


def serve(backend: Backend, args: argparse.Namespace) -> int:
    """Run ``backend`` on the transport the flags chose; the process exit code."""
    argv: list[str] = []
    if args.once:
        argv.append("--once")
    if args.http:
        try:
            host, port = parse_http(args.http, allow_remote=args.allow_remote)
        except ValueError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        argv += ["--http", f"{host}:{port}"]
    try:
        backend.run(argv)
    except SystemExit as exit_:
        code = exit_.code
        return code if isinstance(code, int) else (0 if code is None else 1)
    return 0


class Replies:
    """Answers remembered by ``(source, event id)``, newest kept (bounded, in memory).

    A persistent or HTTP backend answers a duplicate delivery exactly as it
    answered the first; a per_event process starts empty, so the backends keep
    their decisions deterministic for the same event and configuration.
    """

    def __init__(self, size: int = 4096) -> None:
        self.size = size
        self._answers: OrderedDict[Hashable, Any] = OrderedDict()

    @staticmethod
    def key(event: dict[str, Any]) -> tuple[str, str]:
        return str(event.get("source")), str(event.get("id"))

    def answer(self, event: dict[str, Any], compute: Callable[[], T]) -> T:
        key = self.key(event)
        if key in self._answers:
            self._answers.move_to_end(key)
            cached: T = self._answers[key]
            return cached
        value = compute()
        self._answers[key] = value
        if len(self._answers) > self.size:
            self._answers.popitem(last=False)
        return value


def fail(message: str, code: int = 2) -> int:
    """Print ``error: message`` on stderr; return the exit code."""
    print(f"error: {message}", file=sys.stderr)
    return code

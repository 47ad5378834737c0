"""What every sample backend shares: its transport options and duplicate deliveries.

Owns the serving flags (stdio persistent by default, ``--once`` for one event
per process, ``--http HOST:PORT`` on uvicorn, loopback only unless
``--allow-remote``, ``--bearer-token-env VAR`` to answer only callers that send
``Authorization: Bearer`` with the token in ``VAR``, ``--allow-host NAME`` /
``--allow-origin ORIGIN`` to answer more ``Host`` / ``Origin`` values than a loopback
server's own, ``--workers N`` to serve HTTP from N forked processes), and
:class:`Replies`, the memory of answers by ``(source, event.id)`` that makes a
duplicate delivery get the same answer. Never decides anything about a tool call. The
rules behind the HTTP flags (which addresses may be bound, how the token is read and
checked, which ``Host`` and ``Origin`` are answered) are the server kit's
(``ahp_protocol.server.asgi``): the samples pass the flags on to
``Backend.run`` and report the kit's verdict in their own words.
"""

from __future__ import annotations

import argparse
import sys
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import TYPE_CHECKING, Any, Final, TypeVar

from ahp_backends.db import DatabaseError, check_target

if TYPE_CHECKING:
    from ahp_protocol.server import Backend

T = TypeVar("T")

# The samples' served intercept deadline. It bounds how long a stalled backend may
# hold a tool call, not how fast an answer is expected: a warm answer takes well under
# a millisecond, but a per_event Python backend pays 0.4-0.6 s to start on a small
# machine, and 2 s (the earlier value) left too little headroom on a busy one, where a
# fail-closed gate then denied calls it would have let through.
SERVED_TIMEOUT_MS: Final = 5000


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
    group.add_argument(
        "--bearer-token-env",
        metavar="VAR",
        help="with --http: answer only requests with 'Authorization: Bearer <token>', the "
        "token being the value of environment variable VAR (others get 401)",
    )
    group.add_argument(
        "--allow-host",
        action="append",
        default=[],
        metavar="NAME",
        help="with --http: also answer requests whose Host header is NAME (NAME or "
        "NAME:PORT; repeatable). On a loopback address only 127.0.0.1, localhost and "
        "[::1] are answered (others get 421), so a web page cannot reach it by DNS rebinding",
    )
    group.add_argument(
        "--allow-origin",
        action="append",
        default=[],
        metavar="ORIGIN",
        help="with --http: also answer browser requests from ORIGIN (e.g. "
        "https://dashboard.example; repeatable). On a loopback address a request whose "
        "Origin is not the server's own gets 403",
    )
    group.add_argument(
        "--workers",
        type=int,
        metavar="N",
        help="with --http: N worker processes on the one socket, sharing the database "
        "(POSIX; default 1: this process only)",
    )


def http_argv(args: argparse.Namespace) -> list[str]:
    """The ``Backend.run`` flags for ``args``' transport, checked by the kit's rules
    (``ValueError`` with the kit's message when they are refused)."""
    from ahp_protocol.server.asgi import RebindingGuard, bearer_token_from_env, http_address
    from ahp_protocol.server.workers import check_workers

    workers = getattr(args, "workers", None)
    hosts, origins = getattr(args, "allow_host", []), getattr(args, "allow_origin", [])
    if not args.http:
        if args.bearer_token_env is not None:
            raise ValueError("--bearer-token-env applies to --http only")
        if hosts or origins:
            raise ValueError("--allow-host and --allow-origin apply to --http only")
        if workers is not None:
            raise ValueError("--workers applies to --http only")
        return ["--once"] if args.once else []
    if args.once:
        raise ValueError("--once and --http cannot be combined")
    if workers is not None:
        check_workers(workers)
    host, port = http_address(args.http, allow_remote=args.allow_remote)
    argv = ["--http", f"[{host}]:{port}" if ":" in host else f"{host}:{port}"]
    if workers is not None and workers != 1:
        argv += ["--workers", str(workers)]
    if args.allow_remote:
        argv.append("--allow-remote")
    if args.bearer_token_env is not None:
        bearer_token_from_env(args.bearer_token_env)  # a clear error before anything starts
        argv += ["--bearer-token-env", args.bearer_token_env]
    RebindingGuard(hosts, origins)  # the kit's verdict on the names, before anything starts
    for name in hosts:
        argv += ["--allow-host", name]
    for origin in origins:
        argv += ["--allow-origin", origin]
    return argv


def serve(backend: Backend, args: argparse.Namespace) -> int:
    """Run ``backend`` on the transport the flags chose; the process exit code."""
    try:
        argv = http_argv(args)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
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


def database_target(text: str) -> str:
    """The ``type`` of every ``--db``: a path or a URL; anything else is a usage error."""
    try:
        check_target(text)
    except DatabaseError as exc:  # its message never holds a credential (db.shown)
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def fail(message: str, code: int = 2) -> int:
    """Print ``error: message`` on stderr; return the exit code."""
    print(f"error: {message}", file=sys.stderr)
    return code

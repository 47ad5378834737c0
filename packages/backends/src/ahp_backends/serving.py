"""What every sample backend shares: its transport options and duplicate deliveries.

Owns how the samples serve: the serving flags, declared once by the kit
(:func:`ahp_protocol.cli_kit.add_serving_arguments`: stdio persistent by default,
``--once``, ``--http HOST:PORT``, ``--allow-remote``, ``--bearer-token-env VAR``,
``--oauth-issuer URL --oauth-resource URL [--oauth-scope S]``, ``--allow-host NAME``,
``--allow-origin ORIGIN``, ``--workers N``) turned into ``Backend.run``'s arguments
(:func:`http_argv`), and :class:`Replies`, the memory of answers by ``(source,
event.id)`` that makes a duplicate delivery get the same answer.
Never decides anything about a tool call. The rules behind the HTTP flags (which
addresses may be bound, how the token is read and checked, which ``Host`` and ``Origin``
are answered) are the server kit's (``ahp_protocol.server.asgi``): the samples check
them before anything starts and report the kit's verdict.
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
    """The kit's serving flags (:func:`ahp_protocol.cli_kit.add_serving_arguments`)."""
    from ahp_protocol.cli_kit import add_serving_arguments

    add_serving_arguments(parser, workers_note=", sharing the database")


def http_argv(args: argparse.Namespace) -> list[str]:
    """The ``Backend.run`` flags for ``args``' transport, checked by the kit's rules
    (``ValueError`` with the kit's message when they are refused)."""
    from ahp_protocol.cli_kit import serving_problem
    from ahp_protocol.server.asgi import RebindingGuard, bearer_token_from_env, http_address
    from ahp_protocol.server.workers import check_workers

    workers, hosts, origins = args.workers, args.allow_host, args.allow_origin
    problem = serving_problem(args)
    if problem is not None:
        raise ValueError(problem)
    if not args.http:
        return ["--once"] if args.once else []
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
    if args.oauth_issuer is not None:
        from ahp_protocol.server.oauth import ResourceServer

        # the kit's verdict on the URLs before anything starts
        ResourceServer(resource=args.oauth_resource, issuer=args.oauth_issuer)
        argv += ["--oauth-issuer", args.oauth_issuer, "--oauth-resource", args.oauth_resource]
        for scope in args.oauth_scope:
            argv += ["--oauth-scope", scope]
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
        self.put(event, value)
        return value

    def get(self, event: dict[str, Any]) -> Any:
        """The answer remembered for ``event``, or None."""
        key = self.key(event)
        if key not in self._answers:
            return None
        self._answers.move_to_end(key)
        return self._answers[key]

    def put(self, event: dict[str, Any], value: Any) -> None:
        """Remember ``value`` (not None) as the answer for ``event``."""
        self._answers[self.key(event)] = value
        if len(self._answers) > self.size:
            self._answers.popitem(last=False)


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

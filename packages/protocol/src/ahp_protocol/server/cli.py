"""``Backend.run``: serve a backend from the command line, then exit.

No arguments: stdio ``persistent`` (until EOF). ``--once``: stdio ``per_event`` (one
message, then exit). ``--http HOST:PORT``: HTTP via uvicorn
(:mod:`ahp_protocol.server.asgi`), on a loopback address unless ``--allow-remote``;
with ``--bearer-token-env VAR``, only callers sending ``Authorization: Bearer`` with
the token in environment variable ``VAR`` are answered (401 otherwise).
``--max-frame-bytes N`` changes the frame limit. The two usual forms skip argparse,
so a per-event process starts light.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, NoReturn

if TYPE_CHECKING:
    import argparse

    from ahp_protocol.server.backend import Backend


def run(backend: Backend, argv: list[str] | None = None) -> NoReturn:
    """Serve ``backend`` as ``argv`` (default ``sys.argv[1:]``) says; ``SystemExit``."""
    args = sys.argv[1:] if argv is None else list(argv)
    if args == ["--once"]:
        _once(backend, None)
    if args:
        raise SystemExit(_parsed(backend, args))
    from ahp_protocol.server.stdio import serve_persistent

    serve_persistent(backend)
    raise SystemExit(0)


def _parser(backend: Backend) -> argparse.ArgumentParser:
    import argparse

    parser = argparse.ArgumentParser(
        description=(
            f"AHP backend {backend.name}. Speaks the Agent Hooks Protocol (draft) on "
            "stdin/stdout by default (persistent: until EOF; stdout carries protocol "
            "only, diagnostics go to stderr)."
        ),
    )
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument(
        "--once", action="store_true", help="per_event stdio: answer exactly one message, then exit"
    )
    mode.add_argument(
        "--http",
        metavar="HOST:PORT",
        help="serve HTTP POST on HOST:PORT (port 0 picks a free port; the address "
        "is printed on stderr)",
    )
    parser.add_argument(
        "--allow-remote",
        action="store_true",
        help="allow --http on a non-loopback address (put TLS in front of it: AHP "
        "requires https remotely)",
    )
    parser.add_argument(
        "--bearer-token-env",
        metavar="VAR",
        help="with --http: answer only requests with 'Authorization: Bearer <token>', "
        "the token being the value of environment variable VAR (401 otherwise)",
    )
    parser.add_argument(
        "--max-frame-bytes",
        type=int,
        default=backend.max_frame_bytes,
        metavar="N",
        help=f"largest message accepted or sent, in bytes (default {backend.max_frame_bytes})",
    )
    return parser


def _parsed(backend: Backend, args: list[str]) -> int:
    parser = _parser(backend)
    ns = parser.parse_args(args)
    limit: int = ns.max_frame_bytes
    if limit < 1:
        parser.error("--max-frame-bytes must be positive")
    if ns.http is None and (ns.allow_remote or ns.bearer_token_env is not None):
        parser.error("--allow-remote and --bearer-token-env apply to --http only")
    if ns.http is not None:
        from ahp_protocol.server.asgi import bearer_token_from_env, http_address, serve_http

        try:
            host, port = http_address(str(ns.http), allow_remote=ns.allow_remote)
            env = ns.bearer_token_env
            token = None if env is None else bearer_token_from_env(env)
        except ValueError as exc:
            parser.error(str(exc))
        serve_http(backend, host, port, max_frame_bytes=limit, bearer_token=token)
        return 0
    if ns.once:
        _once(backend, limit)
    from ahp_protocol.server.stdio import serve_persistent

    serve_persistent(backend, max_frame_bytes=limit)
    return 0


def _once(backend: Backend, limit: int | None) -> NoReturn:
    """``per_event``: answer one message, then exit. The cyclic garbage collector
    stays off until exit (``serve_once`` pauses it, and a collection put off until
    it is back would only delay the exit)."""
    import gc

    from ahp_protocol.server.stdio import serve_once

    gc.disable()
    raise SystemExit(0 if serve_once(backend, max_frame_bytes=limit) else 1)

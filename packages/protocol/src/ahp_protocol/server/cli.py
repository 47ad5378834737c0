"""``Backend.run``: serve a backend as its command line says, then exit.

No arguments: stdio ``persistent`` (until EOF). ``--once``: stdio ``per_event`` (one
message, then exit). ``--http HOST:PORT``: HTTP via uvicorn, on a loopback address
unless ``--allow-remote``; with ``--bearer-token-env VAR``, only callers sending the
token in environment variable ``VAR`` as ``Authorization: Bearer`` are answered;
``--allow-host NAME`` and ``--allow-origin ORIGIN`` (repeatable) add to the ``Host``
and ``Origin`` values a loopback server answers (:class:`~ahp_protocol.server.asgi.RebindingGuard`).
``--workers N`` (with ``--http``, POSIX only) serves from N forked worker processes
on one socket (:mod:`ahp_protocol.server.workers`); 1, the default, is one process,
no fork. ``--max-frame-bytes N`` changes the frame limit. The two usual forms never import
argparse, so a per-event process starts light.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, NoReturn

if TYPE_CHECKING:
    from ahp_protocol.server.backend import Backend


def run(backend: Backend, argv: list[str] | None = None) -> NoReturn:
    """Serve ``backend`` as ``argv`` (default ``sys.argv[1:]``) says; ``SystemExit``."""
    args = sys.argv[1:] if argv is None else list(argv)
    once, limit = (args == ["--once"], None) if args in ([], ["--once"]) else _parsed(backend, args)
    if once:
        _once(backend, limit)
    from ahp_protocol.server.stdio import serve_persistent

    serve_persistent(backend, max_frame_bytes=limit)
    raise SystemExit(0)


def _parsed(backend: Backend, args: list[str]) -> tuple[bool, int]:
    """``(once, frame limit)`` for stdio; serves HTTP itself, then ``SystemExit``."""
    import argparse

    parser = argparse.ArgumentParser(
        description=f"AHP backend {backend.name}. Speaks the Agent Hooks Protocol (draft) "
        "on stdin/stdout by default (persistent: until EOF; stdout carries protocol only, "
        "diagnostics go to stderr).",
    )
    mode, limit = parser.add_mutually_exclusive_group(), backend.max_frame_bytes
    once = "per_event stdio: answer exactly one message, then exit"
    mode.add_argument("--once", action="store_true", help=once)
    http = "serve HTTP POST on HOST:PORT (port 0 picks a free port, printed on stderr)"
    mode.add_argument("--http", metavar="HOST:PORT", help=http)
    remote = "allow --http on a non-loopback address (put TLS in front: AHP requires https)"
    parser.add_argument("--allow-remote", action="store_true", help=remote)
    token = "with --http: answer only 'Authorization: Bearer <token>', the token being \
the value of environment variable VAR (401 otherwise)"
    parser.add_argument("--bearer-token-env", metavar="VAR", help=token)
    host = "with --http: also answer requests whose Host header is NAME (NAME or NAME:PORT; \
repeatable). On a loopback address only 127.0.0.1, localhost and [::1] are answered (421 \
otherwise), against DNS rebinding"
    parser.add_argument("--allow-host", action="append", default=[], metavar="NAME", help=host)
    origin = "with --http: also answer browser requests from ORIGIN (e.g. \
https://dashboard.example; repeatable). On a loopback address a request with another \
Origin than the server's own gets 403"
    parser.add_argument(
        "--allow-origin", action="append", default=[], metavar="ORIGIN", help=origin
    )
    many = "with --http: serve from N worker processes on the one socket (POSIX; \
default 1: this process only)"
    parser.add_argument("--workers", type=int, default=None, metavar="N", help=many)
    frame = f"largest message accepted or sent, in bytes (default {limit})"
    parser.add_argument("--max-frame-bytes", type=int, default=limit, metavar="N", help=frame)
    ns = parser.parse_args(args)
    limit = ns.max_frame_bytes
    if limit < 1:
        parser.error("--max-frame-bytes must be positive")
    if ns.http is None and (
        ns.allow_remote or ns.bearer_token_env is not None or ns.allow_host or ns.allow_origin
    ):
        parser.error(
            "--allow-remote, --bearer-token-env, --allow-host and --allow-origin "
            "apply to --http only"
        )
    if ns.http is None and ns.workers is not None:
        parser.error("--workers applies to --http only")
    if ns.http is None:
        return bool(ns.once), limit
    from ahp_protocol.server.asgi import (
        RebindingGuard,
        ServeFailed,
        bearer_token_from_env,
        http_address,
        serve_http,
    )
    from ahp_protocol.server.workers import WorkersFailed, check_workers

    workers = 1 if ns.workers is None else int(ns.workers)
    try:
        check_workers(workers)
        host, port = http_address(str(ns.http), allow_remote=ns.allow_remote)
        env = ns.bearer_token_env
        bearer = None if env is None else bearer_token_from_env(env)
        RebindingGuard(ns.allow_host, ns.allow_origin)  # a clear error before binding
    except ValueError as exc:
        parser.error(str(exc))
    try:
        serve_http(
            backend, host, port, max_frame_bytes=limit, bearer_token=bearer, workers=workers,
            allow_hosts=ns.allow_host, allow_origins=ns.allow_origin,
        )  # fmt: skip
    except ServeFailed as exc:  # the address is taken or refused, or uvicorn is missing
        print(f"{backend.name}: error: {exc}", file=sys.stderr, flush=True)
        raise SystemExit(2) from None
    except WorkersFailed as exc:
        print(f"{backend.name}: error: {exc}", file=sys.stderr, flush=True)
        raise SystemExit(1) from None
    raise SystemExit(0)


def _once(backend: Backend, limit: int | None) -> NoReturn:
    """``per_event``: answer one message, then exit. The cyclic garbage collector
    stays off until exit (``serve_once`` pauses it, and a collection put off until
    it is back would only delay the exit)."""
    import gc

    from ahp_protocol.server.stdio import serve_once

    gc.disable()
    raise SystemExit(0 if serve_once(backend, max_frame_bytes=limit) else 1)

"""``Backend.run``: serve a backend as its command line says, then exit.

No arguments: stdio ``persistent`` (until EOF). ``--once``: stdio ``per_event`` (one
message, then exit). ``--http HOST:PORT``: HTTP via uvicorn, on a loopback address
unless ``--allow-remote``; with ``--bearer-token-env VAR``, only callers sending the
token in environment variable ``VAR`` as ``Authorization: Bearer`` are answered;
with ``--oauth-issuer URL --oauth-resource URL [--oauth-scope S]``, only callers with
that issuer's access tokens for that resource
(:class:`~ahp_protocol.server.oauth.ResourceServer`);
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

    from ahp_protocol.cli_kit import add_serving_arguments, serving_problem

    parser = argparse.ArgumentParser(
        description=f"AHP backend {backend.name}. Speaks the Agent Hooks Protocol (draft) "
        "on stdin/stdout by default (persistent: until EOF; stdout carries protocol only, "
        "diagnostics go to stderr).",
    )
    limit = backend.max_frame_bytes
    add_serving_arguments(parser)
    frame = f"largest message accepted or sent, in bytes (default {limit})"
    parser.add_argument("--max-frame-bytes", type=int, default=limit, metavar="N", help=frame)
    ns = parser.parse_args(args)
    limit = ns.max_frame_bytes
    if limit < 1:
        parser.error("--max-frame-bytes must be positive")
    problem = serving_problem(ns)
    if problem is not None:
        parser.error(problem)
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
        oauth = None
        if ns.oauth_issuer is not None:
            import os

            from ahp_protocol.server.oauth import ResourceServer

            oauth = ResourceServer(
                resource=ns.oauth_resource,
                issuer=ns.oauth_issuer,
                scopes=ns.oauth_scope,
                ca_bundle=os.environ.get("AHP_CA_BUNDLE"),
            )
        RebindingGuard(ns.allow_host, ns.allow_origin)  # a clear error before binding
    except ValueError as exc:
        parser.error(str(exc))
    try:
        serve_http(
            backend, host, port, max_frame_bytes=limit, bearer_token=bearer, workers=workers,
            allow_hosts=ns.allow_host, allow_origins=ns.allow_origin, oauth=oauth,
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

"""One way to build the kit's five commands: lazy subcommands, ``--version``, serving flags.

- :func:`run_command`: a command table, name -> ``(module, help)``; only the chosen
  module is imported (a backend started once per event pays for nothing else) and its
  ``main(argv) -> int`` runs. ``-h``/``--help`` lists the table, ``--version`` prints
  the version, an unknown name is a usage error (exit 2) naming the closest one.
- :func:`add_version`: ``--version`` on an ``argparse`` parser, from the one version
  (:mod:`ahp_protocol._version`).
- :func:`add_serving_arguments` and :func:`serving_problem`: THE serving flags
  (``--once``, ``--http HOST:PORT``, ``--allow-remote``, ``--bearer-token-env VAR``,
  ``--oauth-issuer URL``/``--oauth-resource URL``/``--oauth-scope S``,
  ``--allow-host NAME``, ``--allow-origin ORIGIN``, ``--workers N``), declared once for
  ``Backend.run`` (:mod:`ahp_protocol.server.cli`) and the sample backends
  (``ahp_backends.serving``); ``ahp-adapter serve`` takes the two guard flags
  (:func:`add_guard_arguments`). Their rules (which address, which token, which names)
  are :mod:`ahp_protocol.server.asgi`'s; this module only declares and words them.

Conventions every command follows: each flag has help text (a test walks every parser),
durations on the command line are seconds (``--budget``, ``--header-timeout``; wire
durations stay milliseconds, ``timeoutMs``), and bad input is one ``error:`` line and
exit 2, never a traceback. Importing this module imports neither argparse nor anything
else beyond the standard library's ``importlib`` and ``sys``.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from ahp_protocol._version import __version__

if TYPE_CHECKING:
    import argparse

__all__ = [
    "Commands",
    "add_guard_arguments",
    "add_serving_arguments",
    "add_version",
    "run_command",
    "serving_problem",
]

Commands = Mapping[str, tuple[str, str]]
"""A command table: name -> (the module whose ``main(argv)`` runs it, its one-line help)."""


def add_version(parser: argparse.ArgumentParser, prog: str) -> None:
    """``--version``: print ``PROG VERSION`` (the kit's one version) and exit 0."""
    parser.add_argument(
        "--version",
        action="version",
        version=f"{prog} {__version__}",
        help="print the version and exit",
    )


def _help(prog: str, description: str, commands: Commands) -> str:
    width = max(map(len, commands)) + 2
    lines = [f"usage: {prog} [--version] {{{','.join(commands)}}} ...", "", description, ""]
    lines += ["commands:"] + [f"  {name:<{width}}{text}" for name, (_, text) in commands.items()]
    lines += ["", "options:", "  -h, --help  show this help and exit"]
    lines += ["  --version   print the version and exit", ""]
    lines.append(f"Run '{prog} COMMAND --help' for a command's options.")
    return "\n".join(lines)


def run_command(
    prog: str,
    description: str,
    commands: Commands,
    argv: Sequence[str] | None = None,
    *,
    subcommands: Mapping[tuple[str, str], str] | None = None,
) -> int:
    """Run ``argv`` (default ``sys.argv[1:]``) through the command table; the exit code.

    ``subcommands`` routes ``(command, its first argument)`` to a module of its own
    (``audit replay``), which then gets the arguments after both.
    """
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        print(_help(prog, description, commands))
        return 0 if args else 2
    if args[0] == "--version":
        print(f"{prog} {__version__}")
        return 0
    entry = commands.get(args[0])
    if entry is None:
        import difflib

        close = difflib.get_close_matches(args[0], list(commands), n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else f"; one of {', '.join(commands)}"
        print(f"{prog}: error: unknown command {args[0]!r}{hint}", file=sys.stderr)
        return 2
    routed = (subcommands or {}).get((args[0], args[1] if len(args) > 1 else ""))
    module = importlib.import_module(routed or entry[0])
    code: int = module.main(args[2:] if routed else args[1:])
    return code


# --------------------------------------------------------------------------- serving


def add_guard_arguments(group: argparse._ActionsContainer, *, prefix: str = "") -> None:
    """``--allow-host`` and ``--allow-origin`` (repeatable): more ``Host`` and ``Origin``
    values a loopback server answers (``RebindingGuard``). ``prefix`` starts each help."""
    group.add_argument(
        "--allow-host",
        action="append",
        default=[],
        metavar="NAME",
        help=f"{prefix}also answer requests whose Host header is NAME (NAME or NAME:PORT; "
        "repeatable). On a loopback address only 127.0.0.1, localhost and [::1] are "
        "answered (others get 421), so a web page cannot reach it by DNS rebinding",
    )
    group.add_argument(
        "--allow-origin",
        action="append",
        default=[],
        metavar="ORIGIN",
        help=f"{prefix}also answer browser requests from ORIGIN (e.g. "
        "https://dashboard.example; repeatable). On a loopback address a request whose "
        "Origin is not the server's own gets 403",
    )


def add_serving_arguments(
    parser: argparse.ArgumentParser,
    *,
    title: str = "transport (default: stdio, one persistent process until EOF)",
    workers_note: str = "",
) -> None:
    """THE serving flags, as one argument group (``--once`` and ``--http`` exclusive).

    ``workers_note`` adds to ``--workers``' help what the workers share (a database).
    """
    group = parser.add_argument_group(title)
    mode = group.add_mutually_exclusive_group()
    mode.add_argument(
        "--once",
        action="store_true",
        help="per_event stdio: answer exactly one message on stdin, then exit",
    )
    mode.add_argument(
        "--http",
        metavar="HOST:PORT",
        help="serve HTTP POST on HOST:PORT (uvicorn; port 0 picks a free port, printed on stderr)",
    )
    group.add_argument(
        "--allow-remote",
        action="store_true",
        help="allow --http on a non-loopback address (put TLS in front of it: AHP requires "
        "https remotely)",
    )
    group.add_argument(
        "--bearer-token-env",
        metavar="VAR",
        help="with --http: answer only requests with 'Authorization: Bearer <token>', the "
        "token being the value of environment variable VAR (others get 401)",
    )
    group.add_argument(
        "--oauth-issuer",
        metavar="URL",
        help="with --http: answer only requests with an OAuth access token (a JWT) of this "
        "issuer for --oauth-resource (others get 401 with the RFC 9728 challenge); the "
        "issuer's CAs: AHP_CA_BUNDLE or the system's",
    )
    group.add_argument(
        "--oauth-resource",
        metavar="URL",
        help="with --oauth-issuer: this backend's resource identifier, its URL as callers "
        "use it (e.g. http://127.0.0.1:8765/ahp; give a fixed port)",
    )
    group.add_argument(
        "--oauth-scope",
        metavar="SCOPE",
        action="append",
        default=[],
        help="with --oauth-issuer: a scope every token must carry (repeatable)",
    )
    add_guard_arguments(group, prefix="with --http: ")
    group.add_argument(
        "--workers",
        type=int,
        metavar="N",
        help="with --http: serve from N worker processes on the one socket"
        f"{workers_note} (POSIX; default 1: this process only)",
    )


def serving_problem(args: argparse.Namespace) -> str | None:
    """Why the serving flags in ``args`` do not go together (a flag that needs ``--http``
    without it), or ``None``."""
    oauth = getattr(args, "oauth_issuer", None)
    if oauth is not None and args.bearer_token_env is not None:
        return "give --bearer-token-env or --oauth-issuer, not both"
    if (oauth is None) != (getattr(args, "oauth_resource", None) is None):
        return "--oauth-issuer and --oauth-resource go together"
    if getattr(args, "oauth_scope", None) and oauth is None:
        return "--oauth-scope needs --oauth-issuer"
    if args.http:
        return None
    if oauth is not None:
        return "--oauth-issuer applies to --http only"
    if args.allow_remote:
        return "--allow-remote applies to --http only"
    if args.bearer_token_env is not None:
        return "--bearer-token-env applies to --http only"
    if args.allow_host or args.allow_origin:
        return "--allow-host and --allow-origin apply to --http only"
    if args.workers is not None:
        return "--workers applies to --http only"
    return None

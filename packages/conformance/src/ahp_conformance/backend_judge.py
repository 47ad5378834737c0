"""``ahp-conformance backend``: judge any AHP backend against the draft, requirement by requirement.

Reaches the backend the way a harness does: ``-- CMD ARGS...`` (stdio, one persistent
process), ``--per-event -- CMD ARGS...`` (stdio, one process per message) or ``--url
URL`` (HTTP, ``--bearer-token-env VAR`` for a bearer token, or ``--oauth-client-id ID``
for a backend that requires OAuth). It sends what the draft
allows and what it forbids, as raw bytes (:mod:`ahp_conformance.backend.peer`), and judges every
answer; each :class:`~ahp_conformance.report.Check` names the requirement ids it shows
and the binding it ran over, with evidence (what was sent, what came back) for a
failure. A check that cannot run (the backend died or stopped answering) fails, with
that as its evidence; it is never skipped.

Groups, in order (``--per-event`` runs discovery, two decisions, a notification and a
parse error only, since every message starts a process):

- discovery: ``hooks/capabilities`` and ``hooks/configuration`` (a result or -32601);
  events the backend declares it intercepts must then not be answered -32002;
- tool.before decisions: inputs that provoke policies (``rm -rf /``, an SSH key, ``curl |
  sh``, a force push, ...) under a grant narrowed to ``deny``, then ``deny``+``message``,
  then every effect: each a result with ``protocolVersion`` (AHP-VER-001), an ``effects``
  array of valid effects (AHP-DEC-001), only advertised ones (AHP-CAP-001), or -32002
  for a backend that does not intercept tool.before (then ``unsupported``);
- tolerance: unknown envelope/params/event/session/capabilities fields (AHP-CORE-003)
  and reverse-DNS extension keys (AHP-EXT-001) change no answer; the same request twice
  gets the same answer (AHP-CORE-004);
- JSON-RPC: -32700, -32600 (batch, non-object, bad ``jsonrpc``/id), -32601, string and
  integer ids echoed; -32001 with ``data.supported``; -32002 for unknown, removed and
  observe-only events; -32602 for invalid params and a request id other than
  ``event.id``; no answer to any notification, valid or not;
- an oversize frame (above 4 MiB) is refused or survived; HTTP: a wrong Content-Type,
  GET, 401 without or with a wrong bearer token;
- every request and notification of the official fixtures (``harness`` added where an
  event lacks it): a valid request gets a valid result (or -32002), an invalid one the
  right error, a notification nothing;
- run-wide: every frame UTF-8 JSON-RPC with its request's id (AHP-RPC-001), every request
  answered in time (AHP-RPC-002), stdout protocol lines only, one per line
  (AHP-STDIO-001) or 200 + JSON bodies (AHP-HTTP-001), and no exception text in any
  error, -32004 included.

Limits: -32004 cannot be provoked in a well-behaved backend, so exception text is judged
in whatever errors come back; decisions are probed on tool.before only (other events
through the fixtures); content, edit, registration and harness-side requirements are
not a backend's to show here (``not checked`` in the report); TLS is not judged. OAuth is
judged with ``--oauth-client-id`` (:mod:`ahp_conformance.backend.oauth`: the 401 challenge,
the protected-resource metadata, discovery, a token accepted, forged and other-resource
tokens refused; the run then sends the token); expiry and scope enforcement are not.
A backend's content upload receiver is judged with ``--upload-endpoint URL``
(:mod:`ahp_conformance.backend.uploads`: 201 with a matching receipt and an opaque ref,
400 for a digest mismatch and for bad framing, 401 without ``--upload-token-env``'s token).

What is judged where (one rule, one place): envelopes with ``ahp_protocol.wire.jsonrpc``
(``decode``/``classify``), effects with ``ahp_protocol.wire.effects.check_effects``
against the request's grant; the judge only decides what to send and which requirement
an answer shows. This module is the command line; the judge itself is the package
:mod:`ahp_conformance.backend`, one module per check group above (its docstring is the
map).

Timing: every request has a deadline (``--timeout-ms``, default 2000) for its whole
answer (over HTTP connect, head and body, wall clock: a dribbled body cannot stretch
it). The first message to a process just started (a ``hooks/capabilities`` discovery
request, which also warms it up) gets ``--startup-ms`` more (default 10000), and in ``--per-event``
mode every message does, since each starts a process. A persistent process that times
out is replaced (its stream is out of step), and so is one that exits; after
:data:`~ahp_conformance.backend.judge.MAX_TIMEOUTS` timeouts,
:data:`~ahp_conformance.backend.judge.MAX_EXITS` exits, a command that cannot start or a
process that exits before answering anything, the backend is given up on and every
check left fails with that as its evidence (the exit status and the tail of its stderr).

Processes: as the whole process (the command line, not a caller's ``main(argv)``), the
judge is a child subreaper on Linux (:mod:`ahp_protocol.descendants`): what a judged
backend started and left behind (``setsid``, a double fork) is adopted, and killed when
the run ends; what still runs after that bound is named on stderr.
"""

from __future__ import annotations

import argparse
import os
import sys

from ahp_protocol.descendants import Descendants

from ahp_conformance.backend.decisions import decisions, tolerance
from ahp_conformance.backend.discovery import discovery
from ahp_conformance.backend.fixture_cases import fixture_cases
from ahp_conformance.backend.http_rules import http_rules
from ahp_conformance.backend.jsonrpc import jsonrpc, notifications, oversize, versions_and_params
from ahp_conformance.backend.judge import Judge
from ahp_conformance.backend.links import HttpLink, Link, PerEventLink, StdioLink
from ahp_conformance.backend.peer import HttpPeer
from ahp_conformance.backend.per_event import per_event
from ahp_conformance.backend.probes import GRANTS, Messages
from ahp_conformance.backend.run import Run
from ahp_conformance.backend.summary import summary
from ahp_conformance.fixtures import (
    FixturesMissing,
    draft_dir,
    interop_dir,
    load_catalogue,
    load_json,
)
from ahp_conformance.report import Report, add_output_arguments, emit

__all__ = ["GRANTS", "Messages", "add_arguments", "main", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.description = (
        "Judge any AHP backend against the draft, requirement by requirement.\n\n"
        "  ahp-conformance backend -- CMD ARGS...            stdio, one persistent process\n"
        "  ahp-conformance backend --per-event -- CMD ARGS... stdio, one process per message\n"
        "  ahp-conformance backend --url URL [--bearer-token-env VAR]   HTTP\n\n"
        "Sends what the draft allows and what it forbids and judges every answer: framing and\n"
        "JSON-RPC errors (-32700, -32600, -32601, -32602), versions (-32001 with\n"
        "data.supported), unsupported events (-32002), id echo, silence on every\n"
        "notification, stdout discipline (stdio) or HTTP status codes and media types,\n"
        "tool.before decisions under narrowed grants (only advertised, valid effects, with\n"
        "protocolVersion), unknown fields and extension keys tolerated, duplicate delivery,\n"
        "an oversize frame, exception text in errors, and the official fixtures' requests.\n"
        "--per-event runs only what that lifecycle changes (one process per message:\n"
        "decisions, a notification, a parse error, stdout and exit status), since every\n"
        "message starts a process.\n\n"
        "Exit status: 0 when every applicable check passed, 1 when one failed, 2 for a usage\n"
        "error or missing official fixtures. Example (the kit's deny-list backend):\n"
        "  ahp-conformance backend -- ahp-backend denylist --rules examples/backends/denylist.toml"
    )
    parser.add_argument(
        "--per-event",
        action="store_true",
        help="stdio per_event: one process per message (a reduced check set)",
    )
    parser.add_argument("--url", help="the backend's HTTP URL (loopback or https)")
    parser.add_argument(
        "--bearer-token-env",
        metavar="VAR",
        help="with --url: environment variable holding the bearer token the backend expects "
        "(also checks that requests without it, or with a wrong one, get 401)",
    )
    parser.add_argument(
        "--oauth-client-id",
        metavar="ID",
        help="with --url: the backend requires OAuth; judge its challenge, metadata and token "
        "checks as a client-credentials client ID of its authorization server (trusting "
        "the CAs of AHP_CA_BUNDLE when set), then send that token",
    )
    parser.add_argument(
        "--oauth-client-secret-env",
        metavar="VAR",
        help="with --oauth-client-id: environment variable holding the client secret",
    )
    parser.add_argument(
        "--oauth-scope",
        metavar="SCOPE",
        action="append",
        default=[],
        help="with --oauth-client-id: a scope to ask for (repeatable)",
    )
    parser.add_argument(
        "--timeout-ms",
        type=int,
        default=2000,
        help="deadline for each whole answer, wall clock (HTTP: connect, head and body; "
        "default 2000)",
    )
    parser.add_argument(
        "--startup-ms",
        type=int,
        default=10000,
        help="extra time for a process just started to answer its first message (default 10000)",
    )
    parser.add_argument("--cwd", help="working folder for the backend command")
    parser.add_argument(
        "--upload-endpoint",
        metavar="URL",
        help="the backend's content upload receiver, judged too (upload.*; loopback or https)",
    )
    parser.add_argument(
        "--upload-token-env",
        metavar="NAME",
        help="environment variable holding the upload receiver's bearer token",
    )
    add_output_arguments(parser)
    parser.add_argument(
        "command",
        nargs=argparse.REMAINDER,
        metavar="-- CMD ARGS",
        help="the backend command (stdio)",
    )


def _usage(text: str) -> int:
    print(f"ahp-conformance backend: {text}", file=sys.stderr)
    return 2


def run(args: argparse.Namespace) -> int:
    command = list(args.command or [])
    if command[:1] == ["--"]:
        command = command[1:]
    if args.url and command:
        return _usage("give either --url URL or -- CMD ARGS..., not both")
    if not args.url and not command:
        return _usage("give the backend: -- CMD ARGS... (stdio) or --url URL (HTTP)")
    if args.per_event and args.url:
        return _usage("--per-event is for stdio backends (-- CMD ARGS...)")
    if args.bearer_token_env and not args.url:
        return _usage("--bearer-token-env is for HTTP backends (--url)")
    if args.oauth_client_id and (not args.url or args.bearer_token_env):
        return _usage("--oauth-client-id is for HTTP backends (--url), without --bearer-token-env")
    if (args.oauth_client_secret_env or args.oauth_scope) and not args.oauth_client_id:
        return _usage("--oauth-client-secret-env and --oauth-scope need --oauth-client-id")
    if args.timeout_ms <= 0 or args.startup_ms < 0:
        return _usage("--timeout-ms must be positive and --startup-ms not negative")
    token = None
    if args.bearer_token_env:
        token = os.environ.get(args.bearer_token_env)
        if not token:
            return _usage(f"environment variable {args.bearer_token_env} is not set or empty")
    oauth = None
    if args.oauth_client_id:
        from ahp_conformance.backend.oauth import OAuthClient

        secret = None
        if args.oauth_client_secret_env:
            secret = os.environ.get(args.oauth_client_secret_env)
            if not secret:
                return _usage(
                    f"environment variable {args.oauth_client_secret_env} is not set or empty"
                )
        oauth = OAuthClient(args.oauth_client_id, secret, tuple(args.oauth_scope))
    upload_token = None
    if args.upload_token_env:
        upload_token = os.environ.get(args.upload_token_env)
        if not upload_token or not args.upload_endpoint:
            return _usage("--upload-token-env needs --upload-endpoint and a set variable")
    catalogue = load_catalogue(args.fixtures)
    fixtures = draft_dir(args.fixtures)
    binding = "http" if args.url else "stdio"
    judge = Judge(binding, args.timeout_ms / 1000, args.startup_ms / 1000)
    msgs = Messages(os.path.abspath(args.cwd or os.getcwd()))
    link: Link
    if args.url:
        link = HttpLink(judge, HttpPeer(args.url, token))
        subject = args.url
    elif args.per_event:
        link = PerEventLink(judge, command, args.cwd)
        subject = "per_event: " + " ".join(command)
    else:
        link = StdioLink(judge, command, args.cwd, msgs)
        subject = "persistent: " + " ".join(command)
    run_ = Run(judge, link, msgs, fixtures, args.per_event, catalogue)
    run_.quiet = bool(args.json)
    # The whole process is the judge: what a judged backend started and left (setsid, a
    # double fork) becomes our child, and is killed when the run ends.
    descendants = Descendants() if getattr(args, "whole_process", False) else None
    if descendants is not None:
        descendants.reap_on_sigchld()
    try:
        if oauth is not None and isinstance(link, HttpLink):
            from ahp_conformance.backend.oauth import oauth_checks

            oauth_checks(run_, link, oauth)
        discovery(run_)
        if args.per_event:
            per_event(run_)
        else:
            decisions(run_)
            tolerance(run_)
            jsonrpc(run_)
            versions_and_params(run_)
            notifications(run_)
            oversize(run_)
            if isinstance(link, HttpLink):
                http_rules(run_, link, token is not None or link.peer.token is not None)
            fixture_cases(run_)
        if args.upload_endpoint:
            from ahp_conformance.backend.uploads import lifecycle_upload_checks, upload_checks

            upload_checks(judge, args.upload_endpoint, upload_token)
            try:  # the contract's files beside the fixtures, when present
                lifecycle = interop_dir(args.fixtures) / "lifecycle-scenarios.json"
                scenarios = load_json(lifecycle).get("scenarios", [])
            except FixturesMissing:
                scenarios = []
            lifecycle_upload_checks(judge, args.upload_endpoint, upload_token, scenarios)
        summary(run_, stdio=not args.url)
    finally:
        link.close()
        if descendants is not None and (left := descendants.close()):
            print(
                f"ahp-conformance backend: {len(left)} process(es) the backend started still "
                f"running after {descendants.bound:g}s of killing: pid "
                + ", ".join(map(str, left)),
                file=sys.stderr,
            )
    report = Report(
        role="backend",
        subject=subject,
        catalogue=catalogue,
        bindings=(binding,),
        checks=judge.checks,
        secrets=([token] if token else [])
        + ([upload_token] if upload_token else [])
        + ([] if oauth is None else [*oauth.secrets, *([oauth.secret] if oauth.secret else [])]),
        implements=frozenset(
            ["tool-interception"] * bool(run_.supports_tool_before)
            + ["lifecycle-observation"] * bool(run_.observes)
        ),
    )
    return emit(report, args)


if __name__ == "__main__":  # the same command as ``ahp-conformance backend``
    from ahp_conformance.cli import main

    sys.exit(main(["backend", *sys.argv[1:]], whole_process=True))

"""The ``ahp-adapter`` command: ``hook``, ``daemon``, ``install``, ``uninstall``, ``doctor``,
``verify``.

Owns argument parsing and exit codes. Each subcommand imports only what it
needs: ``hook`` runs once per tool call, so it goes straight to the thin hook
client (:mod:`ahp_adapters.thin`, which parses its own arguments) before
``argparse`` is even imported. Usage errors exit 2, except for ``hook``, whose
usage errors exit 1 (every harness reads exit 1 as a non-blocking error, and a
broken command line must not look like a decision).
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False  # not ``typing``'s: importing typing costs the hook milliseconds
if TYPE_CHECKING:
    import argparse
    from collections.abc import Sequence
    from pathlib import Path

DIALECT_HELP = (
    "claude-code, codex, gemini, cursor, kimi, copilot or qwen-code "
    "(aliases: claude, gemini-cli, kimi-cli, copilot-cli, qwen)"
)
"""Written out (the hook's start imports no dialect table); a test keeps it complete."""

REGISTRATION_HELP = "the AHP registration document (JSON) whose backends answer"
BUDGET_HELP = "answer within this many seconds whatever happens (default 10)"
IDLE = "the warm daemon exits after SECONDS without a call (default 900)"


def _budget(value: str) -> float:
    import argparse

    try:
        seconds = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError("expected seconds, e.g. 10") from None
    if not 0.1 <= seconds <= 600:
        raise argparse.ArgumentTypeError("must be between 0.1 and 600 seconds")
    return seconds


def _parser() -> argparse.ArgumentParser:
    import argparse

    from ahp_protocol.cli_kit import add_guard_arguments, add_version

    parser = argparse.ArgumentParser(
        prog="ahp-adapter",
        description="Run AHP backends from the native hooks of existing agent harnesses.",
    )
    add_version(parser, "ahp-adapter")
    sub = parser.add_subparsers(dest="command", required=True)

    hook = sub.add_parser(
        "hook",
        help="what the native harness runs as its hook (payload on stdin)",
        description="Read one native hook payload on stdin, run the registration's chain, "
        "answer in the dialect's own form (its blocking answer on a deny, nothing otherwise).",
    )
    hook.add_argument("dialect", help=DIALECT_HELP)
    hook.add_argument("--registration", required=True, metavar="FILE", help=REGISTRATION_HELP)
    hook.add_argument(
        "--event",
        metavar="NAME",
        help="the native hook event (used when the payload is unreadable)",
    )
    hook.add_argument(
        "--budget",
        type=_budget,
        default=10.0,
        metavar="SECONDS",
        help=BUDGET_HELP,
    )
    hook.add_argument(
        "--daemon",
        choices=("auto", "off", "require"),
        default="auto",
        help="auto: use (and start) the warm daemon, else run in-process; off: always "
        "in-process; require: daemon or failure policy (default auto)",
    )
    hook.add_argument(
        "--skip-shell-mcp",
        action="store_true",
        help="cursor: ignore Shell and MCP calls in preToolUse (they have their own hooks)",
    )
    hook.add_argument(
        "--harness-version",
        metavar="VERSION",
        help="the events' harness.version when the payload carries none (default: "
        "$AHP_ADAPTER_HARNESS_VERSION, else what the harness exports, else unknown)",
    )
    hook.add_argument("--idle-timeout", type=float, default=900.0, metavar="SECONDS", help=IDLE)

    daemon = sub.add_parser(
        "daemon",
        help="keep a registration's backends warm for hooks (started by hooks on first use)",
    )
    daemon.add_argument("action", nargs="?", choices=("run", "status", "stop"), default="run")
    daemon.add_argument("--registration", required=True, metavar="FILE", help=REGISTRATION_HELP)
    daemon.add_argument("--socket", metavar="PATH", help="default: in the private runtime dir")
    daemon.add_argument("--ready-fd", type=int, metavar="FD", help=argparse.SUPPRESS)
    daemon.add_argument("--start-lock-fd", type=int, metavar="FD", help=argparse.SUPPRESS)
    daemon.add_argument(
        "--prepare",
        action="append",
        default=[],
        metavar="DIALECT",
        help="run: start the chain for DIALECT's pre-tool events at once (repeatable)",
    )
    daemon.add_argument("--idle-timeout", type=float, default=900.0, metavar="SECONDS", help=IDLE)

    serve = sub.add_parser(
        "serve",
        help="answer Claude Code http hooks on loopback (no process per tool call)",
        description="Serve a registration's chain to Claude Code http hooks: POST "
        "/claude-code/<Event> with the per-install secret header gets the native answer. "
        "Claude Code treats an http hook that cannot be reached as non-blocking (fail-open).",
    )
    serve.add_argument("dialect", help="claude-code (the one harness with http hooks)")
    serve.add_argument("--registration", required=True, metavar="FILE", help=REGISTRATION_HELP)
    serve.add_argument("--http", required=True, metavar="HOST:PORT", help="a loopback address")
    serve.add_argument(
        "--secret-file",
        metavar="FILE",
        help="the secret requests must carry (default: the one install --transport http wrote)",
    )
    serve.add_argument("--budget", type=_budget, default=10.0, metavar="SECONDS", help=BUDGET_HELP)
    serve.add_argument(
        "--header-timeout",
        type=_budget,
        default=10.0,
        metavar="SECONDS",
        help="close a connection that has not sent a complete request head within SECONDS "
        "of opening or of its previous answer (default 10)",
    )
    add_guard_arguments(serve)

    for name, text in (("install", "merge our hooks into"), ("uninstall", "remove our hooks from")):
        cmd = sub.add_parser(name, help=f"{text} the dialect's hook configuration")
        cmd.add_argument("dialect", help=DIALECT_HELP)
        if name == "install":
            cmd.add_argument(
                "--registration", required=True, metavar="FILE", help=REGISTRATION_HELP
            )
            cmd.add_argument(
                "--budget",
                type=_budget,
                default=10.0,
                metavar="SECONDS",
                help="the budget the installed hooks answer within (--budget of 'hook'; "
                "default 10)",
            )
            cmd.add_argument(
                "--surface",
                choices=("pretool", "split"),
                default="pretool",
                help="cursor: preToolUse for everything (default), or the shell and MCP "
                "hooks plus preToolUse for the rest (no double firing either way)",
            )
            cmd.add_argument(
                "--command",
                dest="adapter_command",
                metavar="CMD",
                help="how the harness starts the adapter (default: this ahp-adapter, absolute)",
            )
            cmd.add_argument("--pre-tool-only", action="store_true", help="only the pre-tool hook")
            cmd.add_argument(
                "--transport",
                choices=("command", "http"),
                default="command",
                help="claude-code: 'http' posts to 'ahp-adapter serve' instead of starting a "
                "process per call; only for registrations whose tool.before interceptors are "
                "all fail-open (default: command)",
            )
            cmd.add_argument(
                "--http",
                default="127.0.0.1:8765",
                metavar="HOST:PORT",
                help="with --transport http: the loopback address 'serve' listens on",
            )
            cmd.add_argument(
                "--trust",
                action="store_true",
                help="codex, copilot with --project: also trust the project in the harness "
                "(its whole configuration, not only our hooks); without it, install refuses "
                "a project whose hooks the harness would skip",
            )
            cmd.add_argument(
                "--no-trust",
                action="store_true",
                help="codex: write the hooks without trusting them (Codex skips them until "
                "you trust them in /hooks)",
            )
        cmd.add_argument(
            "--harness-bin",
            metavar="PATH",
            help=(
                "codex: the codex binary whose app-server records the trust "
                if name == "install"
                else "codex: the codex binary whose app-server removes our hooks' trust "
            )
            + "(default: codex on PATH)",
        )
        cmd.add_argument("--project", metavar="DIR", help="project scope (default: user scope)")
        cmd.add_argument("--config", metavar="FILE", help="this config file instead")
        cmd.add_argument(
            "--print", action="store_true", help="show the resulting file; write nothing"
        )

    doctor = sub.add_parser(
        "doctor",
        help="check, as the harness would run them, that the installed hooks enforce a deny",
        description="Check the hook file, the registration, the harness's trust, the commands "
        "and a probe call of the installed hook; exit 0 only when a deny would hold.",
    )
    doctor.add_argument("dialect", metavar="HARNESS", help=DIALECT_HELP)
    doctor.add_argument("--project", metavar="DIR", help="project scope (default: user scope)")
    doctor.add_argument("--config", metavar="FILE", help="this config file instead")
    doctor.add_argument(
        "--harness-bin", metavar="PATH", help="codex: the codex binary to ask (default: on PATH)"
    )
    doctor.add_argument(
        "--hook-path",
        metavar="PATHSTR",
        help="the PATH the harness gives its hooks (default: this shell's PATH)",
    )
    doctor.add_argument("--json", action="store_true", help="one JSON object on stdout")

    from ahp_adapters.live import verify

    verify.add_parser(sub)
    return parser


def _daemon(args: argparse.Namespace) -> int:
    import os
    import time

    from ahp_adapters.decision import registration_path

    registration = registration_path(args.registration)
    if args.socket:
        socket_path = args.socket
    else:
        from ahp_adapters.rundir import daemon_files

        socket_path = os.fspath(daemon_files(registration, os.getcwd())[0])
    if args.action == "run":
        from ahp_adapters import daemon

        return daemon.run(
            registration,
            socket_path,
            ready_fd=args.ready_fd,
            idle_timeout=args.idle_timeout,
            start_lock_fd=args.start_lock_fd,
            prepare=args.prepare,
        )
    import json
    import socket

    from ahp_adapters import client

    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(2.0)
        sock.connect(socket_path)
    except OSError:
        sock.close()
        print(f"no daemon on {socket_path}", file=sys.stderr)
        return 3
    with sock:
        try:
            answer = client.exchange(
                sock, {"op": args.action.replace("status", "ping")}, time.monotonic() + 5.0
            )
        except client.DaemonFailed as exc:
            print(f"daemon did not answer: {exc}", file=sys.stderr)
            return 1
    print(json.dumps(answer, indent=2))
    return 0


def _serve(args: argparse.Namespace) -> int:
    from ahp_protocol.server.asgi import ServeFailed, cannot_listen

    from ahp_adapters import dialects, http_hook

    try:
        return http_hook.serve(
            dialects.canonical_name(args.dialect),
            args.registration,
            args.http,
            secret_file=args.secret_file,
            budget=args.budget,
            header_timeout=args.header_timeout,
            allow_hosts=args.allow_host,
            allow_origins=args.allow_origin,
        )
    except (dialects.UnknownDialect, http_hook.ServeError, ServeFailed) as exc:
        print(f"ahp-adapter serve: error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:  # the bind: the kit's line for it, as every backend says it
        host, port = http_hook.loopback_address(args.http)
        print(f"ahp-adapter serve: error: {cannot_listen(host, port, exc)}", file=sys.stderr)
        return 2


def _install(args: argparse.Namespace) -> int:
    import shlex

    from ahp_adapters import dialects, install

    try:
        dialect = dialects.canonical_name(args.dialect)
        if args.command == "install":
            warnings = install.check_registration(args.registration, args.budget)
            plan = install.plan_install(
                dialect,
                args.registration,
                project=args.project,
                config=args.config,
                budget=args.budget,
                surface=args.surface,
                command=shlex.split(args.adapter_command) if args.adapter_command else None,
                pre_tool_only=args.pre_tool_only,
                transport=args.transport,
                http=args.http,
            )
        else:
            warnings = []
            plan = install.plan_uninstall(dialect, project=args.project, config=args.config)
    except (dialects.UnknownDialect, install.InstallError) as exc:
        print(f"ahp-adapter {args.command}: error: {exc}", file=sys.stderr)
        return 2
    for warning in warnings:
        print(f"warning: {warning}", file=sys.stderr)
    if args.print:
        sys.stdout.write(plan.text())
        return 0
    if args.command == "install":
        refusal = _trust_refusal(dialect, args)
        if refusal:
            print(f"ahp-adapter install: error: {refusal}; nothing written", file=sys.stderr)
            return 2
    if args.command == "uninstall" and plan.removed_total == 0:
        print(f"no ahp-adapter hooks in {plan.path}", file=sys.stderr)
        return 0
    trusted = _codex_trusted_keys(dialect, args, plan.path) if args.command == "uninstall" else []
    try:
        install.write(plan)
    except OSError as exc:
        print(
            f"ahp-adapter {args.command}: cannot write {plan.path} ({exc.strerror})",
            file=sys.stderr,
        )
        return 1
    verb = "installed" if args.command == "install" else "removed"
    count = plan.added if args.command == "install" else plan.removed
    print(f"{verb} {count} hook entries in {plan.path}", file=sys.stderr)
    for other in plan.also:
        print(f"removed {other.removed} earlier hook entries in {other.path}", file=sys.stderr)
    for note in plan.notes:
        print(f"note: {note}", file=sys.stderr)
    if args.command == "install":
        return _trust(dialect, args, plan.path)
    return _forget_trust(dialect, args, trusted)


def _codex_binary(args: argparse.Namespace) -> str | None:
    import shutil

    found: str | None = args.harness_bin or shutil.which("codex")
    return found


def _codex_cwd(args: argparse.Namespace) -> Path:
    from pathlib import Path

    return Path(args.project).resolve() if args.project else Path.cwd()


def _codex_trusted_keys(dialect: str, args: argparse.Namespace, hooks_file: Path) -> list[str]:
    """Before uninstall: the keys under which Codex trusts our entries of ``hooks_file``."""
    from ahp_adapters import trust

    codex = _codex_binary(args)
    if dialect != "codex" or codex is None:
        if dialect == "codex":
            print(
                "note: the trust Codex recorded for the removed hooks stays in its "
                "config.toml ([hooks.state]; it names hooks that are gone): pass "
                "--harness-bin PATH to remove it too",
                file=sys.stderr,
            )
        return []
    try:
        status = trust.codex_hook_status(hooks_file, _codex_cwd(args), codex)
    except trust.TrustError as exc:
        print(f"note: Codex's trust of the removed hooks is left as is ({exc})", file=sys.stderr)
        return []
    return sorted(key for key, state in status.items() if state == "trusted")


def _forget_trust(dialect: str, args: argparse.Namespace, keys: list[str]) -> int:
    from ahp_adapters import trust

    codex = _codex_binary(args)
    if not keys or codex is None:
        return 0
    try:
        trust.forget_codex_trust(keys, codex)
    except trust.TrustError as exc:
        print(
            f"ahp-adapter uninstall: error: hooks removed, but their trust stays in Codex's "
            f"config ({exc})",
            file=sys.stderr,
        )
        return 1
    print(f"removed Codex's trust of {len(keys)} hook entries", file=sys.stderr)
    return 0


def _trust_refusal(dialect: str, args: argparse.Namespace) -> str | None:
    """Why install would leave hooks the harness skips, checked before writing anything."""
    from pathlib import Path

    from ahp_adapters import trust

    if (
        dialect == "copilot"
        and args.project
        and not (args.trust or args.config)
        and not trust.copilot_trusts(Path(args.project))
    ):
        return (
            f"Copilot skips .github/hooks in a folder it does not trust, and "
            f"{Path(args.project).resolve()} is not in trustedFolders of "
            f"{trust.copilot_config_path()}: re-run with --trust to add it, trust it in "
            "Copilot, or install in user scope (without --project)"
        )
    if dialect == "codex" and not (args.no_trust or _codex_binary(args)):
        return (
            "Codex runs a hook only once it is trusted, and trusting ours takes the codex "
            "binary (not on PATH): pass --harness-bin PATH, or --no-trust and trust the "
            "hooks yourself in Codex's /hooks"
        )
    return None


def _trust(dialect: str, args: argparse.Namespace, hooks_file: Path) -> int:
    from pathlib import Path

    from ahp_adapters import trust

    try:
        if dialect == "copilot" and args.project and args.trust:
            written = trust.trust_copilot_folder(Path(args.project))
            print(f"trusted {Path(args.project).resolve()} in {written}", file=sys.stderr)
        if dialect == "codex":
            if args.no_trust:
                print(
                    "note: NOT ENFORCED yet: Codex skips these hooks until you trust them in "
                    "/hooks",
                    file=sys.stderr,
                )
                return 0
            project = Path(args.project).resolve() if args.project else None
            keys = trust.trust_codex(
                hooks_file,
                _codex_cwd(args),
                _codex_binary(args) or "codex",
                project=project,
                trust_project=args.trust,
            )
            print(f"trusted {len(keys)} hook entries in Codex's config", file=sys.stderr)
    except trust.TrustError as exc:
        print(f"ahp-adapter install: error: hooks written but NOT ENFORCED: {exc}", file=sys.stderr)
        return 1
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    if args_list and args_list[0] == "hook" and not {"-h", "--help"} & set(args_list):
        from ahp_adapters.thin import main as hook

        return hook(args_list[1:])  # the hot path: no argparse, nothing heavy
    args = _parser().parse_args(args_list)
    if args.command == "daemon":
        return _daemon(args)
    if args.command == "serve":
        return _serve(args)
    if args.command == "doctor":
        from ahp_adapters import doctor

        return doctor.main(args)
    if args.command == "verify":
        from ahp_adapters.live import verify

        return verify.main(args)
    return _install(args)


if __name__ == "__main__":
    sys.exit(main())

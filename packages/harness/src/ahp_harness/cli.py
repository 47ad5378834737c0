"""The ``ahp-harness`` command.

``ahp-harness run`` plays one session: a model driver proposes tool calls,
each goes through AHP (when ``--registration`` is given) and the host's own
permissions and sandbox. ``ahp-harness manifest`` prints the manifest served
for ``hooks/capabilities``. Exit codes: 0 when the session ran, 2 on a usage
or configuration error (each message names the file, the JSON path or field,
and the reason).
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

MODES = ("default", "accept-edits", "read-only")


class UsageError(Exception):
    """A bad command line or configuration file; the message says what to fix."""


def _load_registration(path: str, *, interactive: bool) -> Any:
    from ahp_protocol.client import Dispatcher, RegistrationError
    from ahp_protocol.wire.errors import WireError, WireErrors
    from ahp_protocol.wire.registration import load_registration

    from ahp_harness.hooks import HARNESS
    from ahp_harness.manifest import capabilities

    try:
        registration = load_registration(path)
        return Dispatcher(
            registration,
            capabilities=capabilities(interactive=interactive),
            source=f"urn:uuid:{uuid.uuid4()}",
            harness=HARNESS,
        )
    except WireErrors as exc:
        raise UsageError(f"{path}: {exc.first}") from None
    except (WireError, RegistrationError) as exc:
        raise UsageError(f"{path}: {exc}") from None


def _load_permissions(args: argparse.Namespace) -> Any:
    from ahp_harness.permissions import Permissions, PermissionsError

    try:
        return Permissions.from_files(args.permissions, args.managed, mode=args.mode)
    except PermissionsError as exc:
        raise UsageError(str(exc)) from None


async def _run(args: argparse.Namespace) -> int:
    import anyio

    from ahp_harness.audit import AuditLog, Transcript
    from ahp_harness.hooks import Envelope, Gate
    from ahp_harness.lifetime import Descendants
    from ahp_harness.models import load_driver
    from ahp_harness.sandbox import Sandbox
    from ahp_harness.session import Session
    from ahp_harness.ui import FixedApprover, PromptApprover, TerminalUI

    workspace = Path(args.workspace)
    if not workspace.is_dir():
        raise UsageError(f"--workspace {args.workspace}: not a directory")
    interactive = not args.non_interactive
    if args.model == "manual" and not interactive:
        raise UsageError("--model manual needs an interactive session (drop --non-interactive)")
    permissions = _load_permissions(args)
    sandbox = Sandbox(
        [workspace],
        fetch_hosts=permissions.fetch_allowed,
        search_hides=permissions.hidden_from_search,
    )
    try:
        options: dict[str, Any] = {}
        if args.model.startswith("openai"):
            options = {"base_url": args.base_url, "model": args.model_name}
            options["api_key_env"] = args.api_key_env
        driver = load_driver(args.model, **options)
    except (ValueError, OSError) as exc:
        raise UsageError(f"--model {args.model}: {exc}") from None
    ui = TerminalUI()
    dispatcher = None
    if args.registration:
        dispatcher = _load_registration(args.registration, interactive=interactive)
    else:
        ui.note("no --registration: running with no AHP step at all (host permissions only)")
    audit = AuditLog(args.audit_log)
    transcript = Transcript(args.transcript)
    source = dispatcher.source if dispatcher is not None else f"urn:uuid:{uuid.uuid4()}"
    envelope = Envelope(
        source=source,
        session_id=f"sess_{uuid.uuid4().hex}",
        cwd=str(sandbox.roots[0]),
        roots=[str(r) for r in sandbox.roots],
    )
    approve = PromptApprover(ui.console) if interactive else FixedApprover(args.approve == "always")
    gate = Gate(
        envelope=envelope,
        permissions=permissions,
        sandbox=sandbox,
        approve=approve,
        dispatcher=dispatcher,
        audit=audit.record,
        reporter=ui,
    )
    session = Session(
        gate=gate,
        driver=driver,
        transcript=transcript,
        interactive=interactive,
        permission_mode=args.mode,
        ui=ui,
    )
    stopped_by: int | None = None
    # The whole process is the harness (not a caller's main(argv)): orphans of its tools
    # and backends become its children, and none outlives it (ahp_harness.lifetime).
    descendants = Descendants() if args.whole_process else None

    async def stop_on_signal(scope: anyio.CancelScope) -> None:
        # Ctrl-C (SIGINT), SIGTERM and SIGHUP end the session by cancelling it: every
        # backend and tool process is closed by the ``finally`` below, none outlives
        # the harness. SIGINT is taken here too, not left to the event loop's own
        # handler: that one cancels the main task natively, which can cut a shielded
        # clean-up short and leave the loop waiting for a child nobody reaps.
        nonlocal stopped_by
        with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM, signal.SIGHUP) as signals:
            async for signum in signals:
                stopped_by = signum
                scope.cancel()
                return

    summary = None
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(stop_on_signal, tg.cancel_scope)
            if descendants is not None:
                tg.start_soon(descendants.watch)
            if dispatcher is not None:
                await dispatcher.start()
                for d in dispatcher.configuration_diagnostics:
                    ui.note(f"warning: backend {d.backend}: {d.detail}")
            summary = await session.run(args.prompt)
            tg.cancel_scope.cancel()
    finally:
        with anyio.CancelScope(shield=True):
            if dispatcher is not None:
                await dispatcher.aclose()
            await driver.aclose()
            if descendants is not None:
                await descendants.aclose()
        audit.close()
        transcript.close()
        sandbox.close()
    if stopped_by is not None or summary is None:
        ui.note("session ended by a signal")
        return 128 + (stopped_by or signal.SIGTERM)
    refused = sum(1 for c in summary.calls if c.outcome == "denied")
    ui.note(f"session over: {len(summary.calls)} tool calls, {refused} refused")
    if summary.stopped:
        ui.note(f"stopped: {summary.stopped}")
    return 0


def _manifest(args: argparse.Namespace) -> int:
    from ahp_harness.manifest import manifest

    print(json.dumps(manifest(interactive=not args.non_interactive), indent=2))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ahp-harness",
        description="A small agent harness that implements the Agent Hooks Protocol natively.",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    run = commands.add_parser(
        "run",
        help="play one session in a workspace",
        description=(
            "Play one session: the model proposes tool calls; each goes through AHP "
            "(with --registration) and the host's own permissions and sandbox."
        ),
    )
    run.add_argument("--workspace", required=True, metavar="DIR", help="the workspace root")
    run.add_argument("--registration", metavar="FILE", help="AHP registration (none: no AHP)")
    run.add_argument("--permissions", metavar="FILE", help="user permission rules (TOML)")
    run.add_argument("--managed", metavar="FILE", help="managed rules nothing can relax (TOML)")
    run.add_argument("--mode", choices=MODES, default="default", help="permission mode")
    run.add_argument(
        "--model",
        default="manual",
        metavar="script:FILE|manual|openai",
        help="model driver (default: manual, you type the tool calls)",
    )
    run.add_argument("--non-interactive", action="store_true", help="never prompt")
    run.add_argument(
        "--approve",
        choices=("never", "always"),
        default="never",
        help="answer to every approval prompt with --non-interactive (default: never)",
    )
    run.add_argument("--transcript", metavar="FILE", help="append one JSON line per tool call")
    run.add_argument("--audit-log", metavar="FILE", help="append every decision and exchange")
    run.add_argument("--prompt", help="the user's request (for the openai model)")
    run.add_argument("--base-url", help="openai: base URL of the chat-completions API")
    run.add_argument("--model-name", help="openai: model name")
    run.add_argument(
        "--api-key-env",
        default="OPENAI_API_KEY",
        help="openai: environment variable holding the API key",
    )
    run.set_defaults(func=_run_command, whole_process=False)
    show = commands.add_parser("manifest", help="print the manifest served for hooks/capabilities")
    show.add_argument("--non-interactive", action="store_true", help="as for a non-interactive run")
    show.set_defaults(func=_manifest)
    demo = commands.add_parser(
        "demo",
        help="play the scripted demo against the three sample backends",
        description="Play examples/demo/session.json against the deny-list, approval and "
        "audit backends (separate processes, stdio and HTTP), then print what happened.",
    )
    demo.add_argument(
        "--dir", "--keep", dest="dir", metavar="DIR", help="where to keep the demo's files"
    )
    demo.set_defaults(func=_demo_command)
    return parser


def _demo_command(args: argparse.Namespace) -> int:
    from ahp_harness.demo import command

    return command(args)


def _run_command(args: argparse.Namespace) -> int:
    import anyio

    code: int = anyio.run(_run, args)
    return code


def main(argv: Sequence[str] | None = None) -> int:
    """The command. With ``argv`` None this process is the harness: on Linux ``run``
    re-executes itself once with its secrets out of ``/proc/<pid>/environ`` and makes
    itself non-dumpable and a child subreaper (see :mod:`ahp_harness.lifetime`)."""
    from ahp_harness import lifetime

    whole_process = argv is None
    if whole_process:
        lifetime.restore_environment()
    args = build_parser().parse_args(argv)
    if whole_process and args.command == "run":
        lifetime.protect_secrets()  # may re-execute this process once (same pid, same argv)
        args.whole_process = True
    try:
        code: int = args.func(args)
    except UsageError as exc:
        print(f"ahp-harness: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    return code


if __name__ == "__main__":
    sys.exit(main())

"""The ``ahp-harness`` command.

``ahp-harness run`` plays one session of one or more turns through the public
session API (:func:`ahp_harness.harness.open_harness`): a model driver proposes
tool calls, each goes through AHP (when ``--registration`` is given) and the host's
own permissions and sandbox. The turns: one per ``--prompt``; else one per turn of a
``script:FILE`` model; else, interactive with the manual or openai model, one per line
typed at ``you>`` until Ctrl-D or ``/quit``; else one turn without a prompt.
``ahp-harness manifest`` prints the manifest served for ``hooks/capabilities``;
``ahp-harness demo`` plays the demo (:mod:`ahp_harness.demo`, imported only then).
Nothing is written unless named: ``--transcript`` and ``--audit-log`` (none by
default); the end of the run says which records were kept. Exit codes: 0 when the
session ran, 2 on a usage or configuration error (each message names the file, the
JSON path or field, and the reason).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import signal
import sys
from collections.abc import AsyncIterator, Sequence
from typing import Any


class UsageError(Exception):
    """A bad command line or configuration file; the message says what to fix."""


def _driver(args: argparse.Namespace) -> Any:
    from ahp_harness.models import load_driver

    try:
        options: dict[str, Any] = {}
        if args.model.startswith("openai"):
            options = {"base_url": args.base_url, "model": args.model_name}
            options["api_key_env"] = args.api_key_env
        return load_driver(args.model, **options)
    except (ValueError, OSError) as exc:
        raise UsageError(f"--model {args.model}: {exc}") from None


async def _prompts(
    args: argparse.Namespace, driver: Any, interactive: bool
) -> AsyncIterator[str | None]:
    """The session's turns, one prompt each: every ``--prompt``; else the script's turns;
    else, interactive with a conversational model, what the user types at ``you>``
    (Ctrl-D or ``/quit`` ends the session); else one turn without a prompt."""
    from ahp_harness.models.scripted import ScriptedDriver

    if args.prompt:
        for prompt in args.prompt:
            yield prompt
    elif isinstance(driver, ScriptedDriver):
        for prompt in driver.prompts:
            yield prompt
    elif interactive:
        from ahp_harness.ui import TerminalPrompts

        reader = TerminalPrompts()
        while (prompt := await reader.read()) is not None:
            yield prompt
    else:
        yield None


async def _run(args: argparse.Namespace) -> int:
    import anyio

    from ahp_harness.harness import ConfigError, open_harness
    from ahp_harness.interrupt import Interrupts
    from ahp_harness.lifetime import Descendants
    from ahp_harness.ui import FixedApprover, PromptApprover, TerminalUI

    interactive = not args.non_interactive
    if args.model == "manual" and not interactive:
        raise UsageError("--model manual needs an interactive session (drop --non-interactive)")
    driver = _driver(args)
    ui = TerminalUI()
    approve = PromptApprover(ui.console) if interactive else FixedApprover(args.approve == "always")
    stopped_by: int | None = None
    # The whole process is the harness (not a caller's main(argv)): orphans of its tools
    # and backends become its children, and none outlives it (ahp_harness.lifetime).
    descendants = Descendants() if args.whole_process else None
    # Interactive: the first Ctrl-C stops the running tool, the next ends the session.
    interrupts = Interrupts() if interactive else None

    async def stop_on_signal(scope: anyio.CancelScope) -> None:
        # SIGTERM, SIGHUP and Ctrl-C (SIGINT) with no tool left to stop end the session
        # by cancelling it: every backend and tool process is closed when open_harness
        # exits, none outlives the harness. SIGINT is taken here too, not left to the
        # event loop's own handler: that one cancels the main task natively, which can
        # cut a shielded clean-up short and leave the loop waiting for a child nobody
        # reaps (and the prompts never take it: handle_sigint=False).
        nonlocal stopped_by
        with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM, signal.SIGHUP) as signals:
            async for signum in signals:
                if signum == signal.SIGINT and interrupts is not None and interrupts.interrupt():
                    ui.note("Ctrl-C: the running tool was stopped (Ctrl-C again ends the session)")
                    continue
                stopped_by = signum
                scope.cancel()
                return

    summary = None
    problem: str | None = None
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(stop_on_signal, tg.cancel_scope)
            if descendants is not None:
                tg.start_soon(descendants.watch)
            with interrupts.installed() if interrupts else contextlib.nullcontext():
                async with open_harness(
                    args.workspace,
                    driver=driver,
                    registration=args.registration,
                    permissions=args.permissions,
                    managed=args.managed,
                    mode=args.mode,
                    interactive=interactive,
                    approver=approve,
                    ui=ui,
                    reporter=ui,
                    transcript=args.transcript,
                    audit_log=args.audit_log,
                    mcp_config=args.mcp_config,
                    trust_uploads=args.trust_uploads,
                ) as harness:
                    if harness.dispatcher is None:
                        ui.note(
                            "no --registration: running with no AHP step at all (host rules only)"
                        )
                    async for prompt in _prompts(args, driver, interactive):
                        turn = await harness.turn(prompt)
                        for line in harness.failures(turn):
                            ui.note(line)
                        if turn.stopped:
                            ui.note(f"turn stopped: {turn.stopped}")
                        if turn.end_session:
                            break
                    summary = harness.summary
            tg.cancel_scope.cancel()
    except* ConfigError as group:  # raised in the task group: one of them says it
        config = group.exceptions[0]
        assert isinstance(config, ConfigError)
        problem = f"--{config.option} {config}" if config.option else str(config)
    finally:
        if descendants is not None:
            with anyio.CancelScope(shield=True):
                left = await descendants.aclose()
            if left:  # on stderr: the one thing the harness could not clean up
                pids = ", ".join(map(str, left))
                print(
                    f"ahp-harness: {len(left)} descendant process(es) still running after "
                    f"{descendants.bound:g}s of killing: pid {pids}",
                    file=sys.stderr,
                )
    if problem is not None:
        raise UsageError(problem)
    if stopped_by is not None or summary is None:
        ui.note("session ended by a signal")
        return 128 + (stopped_by or signal.SIGTERM)
    refused = sum(1 for c in summary.calls if c.outcome == "denied")
    turns = len(summary.turns)
    ui.note(
        f"session over: {len(summary.calls)} tool calls, {refused} refused, "
        f"{turns} turn{'s' if turns != 1 else ''}"
    )
    if summary.stopped:
        ui.note(f"stopped: {summary.stopped}")
    kept = [
        f"{name} {path}"
        for name, path in (("transcript", args.transcript), ("audit log", args.audit_log))
        if path
    ]
    ui.note("records: " + (", ".join(kept) if kept else "none kept (--transcript, --audit-log)"))
    return 0


def _manifest(args: argparse.Namespace) -> int:
    from ahp_harness.manifest import manifest

    print(json.dumps(manifest(interactive=not args.non_interactive), indent=2))
    return 0


def build_parser() -> argparse.ArgumentParser:
    from ahp_protocol.cli_kit import add_version

    from ahp_harness.modes import MODES  # not permissions: nothing heavy before re-exec

    parser = argparse.ArgumentParser(
        prog="ahp-harness",
        description="A small agent harness that implements the Agent Hooks Protocol natively.",
    )
    add_version(parser, "ahp-harness")
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
        "--mcp-config",
        metavar="FILE",
        help='MCP servers ({"mcpServers": {...}} JSON): their tools are offered as '
        "mcp__<server>__<tool>, through the same gate",
    )
    run.add_argument(
        "--trust-uploads",
        action="append",
        default=[],
        metavar="BACKEND",
        help="accept a configuration BACKEND discovers that uploads content to an endpoint "
        "of its choosing (repeatable; default: such a configuration is refused)",
    )
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
    run.add_argument(
        "--prompt",
        action="append",
        help="the user's request: one turn (repeat for more turns, in one session)",
    )
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
        description="Play the demo's scripted session (shipped with ahp-harness) against the "
        "deny-list, approval and audit backends (separate processes, stdio and HTTP), then "
        "print what happened.",
    )
    demo.add_argument(  # defined here: the demo module is imported only to run it
        "--dir",
        "--keep",
        dest="dir",
        metavar="DIR",
        help="where to put the demo's files (new or empty; default: a new temporary folder, kept)",
    )
    demo.add_argument(
        "--guard",
        choices=("denylist", "policy"),
        default="denylist",
        help="the backend that guards tool calls: denylist (ahp-backend denylist, regex "
        "rules; the default) or policy (ahp-backend policy, the same rules in CEL); the "
        "outcomes are the same",
    )
    demo.add_argument(
        "--console",
        type=float,
        default=0,
        metavar="SECONDS",
        help="also run the approval center (ahp-backend approval console; needs "
        "ahp-backends[console]): its URL and login secret are printed, and the push is "
        "held there up to SECONDS for you to decide (nobody deciding: the usual deny)",
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

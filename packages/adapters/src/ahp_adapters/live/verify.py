"""``ahp-adapter verify HARNESS``: the live tier's scenarios against the harness you have.

Runs each scenario of :mod:`ahp_adapters.live.scenarios` against the harness binary on
this machine (``--bin PATH``, else the one on ``PATH``): a scratch home and workspace,
hooks written by ``ahp-adapter install``, and the fake model on 127.0.0.1, so nothing
of yours is read or changed and no model provider is called. Run it after upgrading a
harness, before trusting the new version with your hooks: a new version that stops
running hooks, or reads their answers differently, fails here first.

Exit 0 when every scenario held (a scenario a harness has no mode for is reported and
counted as not applicable), 1 when one did not, 2 for usage errors.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

from ahp_adapters import dialects
from ahp_adapters.live.harnesses import DRIVERS, HARNESSES
from ahp_adapters.live.scenarios import SCENARIOS, run


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    verify = sub.add_parser(
        "verify",
        help="run the live checks against the harness binary installed on this machine",
        description="Drive the real harness against a fake model on 127.0.0.1, in a scratch "
        "home, with hooks written by install: deny held, a harmless call ran, the harness's "
        "own refusal stood, fail-closed (missing and crashing backend), fail-open.",
    )
    verify.add_argument(
        "dialect", metavar="HARNESS", help=f"one of: {', '.join(sorted(HARNESSES))}"
    )
    verify.add_argument("--bin", metavar="PATH", help="the harness binary (default: on PATH)")
    verify.add_argument(
        "--scenario",
        action="append",
        choices=sorted(SCENARIOS),
        metavar="NAME",
        help=f"only this scenario (repeatable; default: all of {', '.join(SCENARIOS)})",
    )
    verify.add_argument(
        "--transport",
        choices=("command", "http"),
        default="command",
        help="how the hooks reach the adapter (http: claude-code only, fail-open scenarios)",
    )
    verify.add_argument(
        "--keep", action="store_true", help="keep the scratch folders and print where they are"
    )


def main(args: argparse.Namespace) -> int:
    try:
        name = dialects.canonical_name(args.dialect)
    except dialects.UnknownDialect as exc:
        print(f"ahp-adapter verify: error: {exc}", file=sys.stderr)
        return 2
    harness = DRIVERS.get(name if args.transport == "command" else f"{name}-{args.transport}")
    if harness is None:
        print(
            f"ahp-adapter verify: error: no live driver for {name} over {args.transport} yet "
            f"(drivers: {', '.join(sorted(DRIVERS))})",
            file=sys.stderr,
        )
        return 2
    binary = args.bin or harness.find()
    if not binary or not Path(binary).exists():
        where = args.bin or f"{harness.binary} on PATH"
        print(f"ahp-adapter verify: error: {where} not found: pass --bin PATH", file=sys.stderr)
        return 2
    version = harness.version(binary)
    print(f"{name} {version} ({binary})", flush=True)
    failed = skipped = 0
    for scenario in args.scenario or list(SCENARIOS):
        root = Path(tempfile.mkdtemp(prefix=f"ahp-verify-{scenario}-"))
        try:
            outcome = run(harness, binary, SCENARIOS[scenario], root / "run")
        finally:
            if not args.keep:
                shutil.rmtree(root, ignore_errors=True)
        skipped += outcome.skipped
        mark = "n/a " if outcome.skipped else "ok  " if outcome.ok else "FAIL"
        print(f"{mark} {scenario} ({outcome.seconds:.1f} s): {outcome.detail}", flush=True)
        if not outcome.ok:
            failed += 1
            for label, text in (("stdout", outcome.stdout), ("stderr", outcome.stderr)):
                tail = text.strip().splitlines()[-15:]
                if tail:
                    print(f"     {label}:", *(f"     | {line}" for line in tail), sep="\n")
        if args.keep:
            print(f"     kept: {root}")
    total = len(args.scenario or SCENARIOS) - skipped  # what applies to this harness
    print(
        f"{name} {version}: {total - failed} of {total} held"
        + ("" if failed == 0 else f"; {failed} did not: do not rely on these hooks yet")
    )
    return 1 if failed else 0

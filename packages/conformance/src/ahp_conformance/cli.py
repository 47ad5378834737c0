"""``ahp-conformance``: judge a backend, judge a harness, run a fake backend, run the matrix.

Each subcommand lives in its own module, which provides ``add_arguments(parser)`` and
``run(args) -> int``; this file only wires them. Exit status: 0 when every applicable
check passed, 1 when one failed, 2 for a usage error or missing official data.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from ahp_protocol.cli_kit import add_version

from ahp_conformance.contract import ContractError
from ahp_conformance.fixtures import FixturesMissing
from ahp_conformance.scenarios import ScenarioError

COMMANDS = {
    "backend": (
        "ahp_conformance.backend_judge",
        "judge any backend (stdio: -- CMD ARGS..., HTTP: --url URL) against the draft",
    ),
    "harness": (
        "ahp_conformance.harness_judge",
        "judge any harness or client library through its interop client adapter",
    ),
    "promises": (
        "ahp_conformance.promises",
        "judge the four promises on any harness, black-box: -- CMD ARGS... (AHP_PROBE)",
    ),
    "fake-backend": (
        "ahp_conformance.fake_backend",
        "a scripted backend: replay scenario responses or misbehave in a named fault mode",
    ),
    "matrix": (
        "ahp_conformance.matrix",
        "run every client x server pairing of interop adapters over stdio and HTTP",
    ),
}


def parser(chosen: str | None = None) -> argparse.ArgumentParser:
    """The whole command; with ``chosen``, only that subcommand's module is imported (its
    options added): the others stay listed, with their help line."""
    top = argparse.ArgumentParser(
        prog="ahp-conformance",
        description="Judge an Agent Hooks Protocol backend or harness against the draft, "
        "requirement by requirement, and run the official interop matrix.",
    )
    add_version(top, "ahp-conformance")
    sub = top.add_subparsers(dest="subcommand", required=True, metavar="COMMAND")
    for name, (module, help_text) in COMMANDS.items():
        command = sub.add_parser(name, help=help_text, description=help_text)
        command.set_defaults(module=module)
        if chosen in (None, name):
            importlib.import_module(module).add_arguments(command)
    return top


def _chosen(argv: list[str]) -> str | None:
    """The subcommand ``argv`` names (its first word that is one), else ``None``."""
    return next((word for word in argv if word in COMMANDS), None)


def main(argv: list[str] | None = None, *, whole_process: bool | None = None) -> int:
    """Run one subcommand. ``whole_process`` (default: ``argv is None``, the command line
    itself) says this process is the command, not a caller's ``main(argv)``: then it may
    take process-wide measures (``backend`` becomes a child subreaper)."""
    words = sys.argv[1:] if argv is None else argv
    args = parser(_chosen(words)).parse_args(words)
    args.whole_process = argv is None if whole_process is None else whole_process
    try:
        status: int = importlib.import_module(args.module).run(args)
    except (FixturesMissing, ContractError, ScenarioError) as exc:
        print(f"ahp-conformance {args.subcommand}: {exc}", file=sys.stderr)
        return 2
    return status


if __name__ == "__main__":
    sys.exit(main())

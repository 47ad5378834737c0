"""The ``ahp-backend`` command: one subcommand per sample backend.

Only the chosen subcommand's module is imported, so a backend started once per
event pays for nothing else. Each module has ``main(argv) -> int``.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence

COMMANDS = {
    "denylist": ("ahp_backends.denylist", "deny tool calls that match rules (TOML)"),
    "policy": ("ahp_backends.policy", "decide tool calls by CEL rules; test a policy"),
    "approval": ("ahp_backends.approval", "require approval for matching calls; manage grants"),
    "audit": ("ahp_backends.audit", "record every observed event; show the timeline; replay it"),
    "new": ("ahp_backends.template", "create a ready-to-run backend project"),
    "try-postgres": ("ahp_backends.try_postgres", "start a throwaway PostgreSQL; print its URL"),
}

#: A subcommand served by a module of its own: ``audit replay`` is a harness-side tool
#: that reads the audit database, and the audit backend's processes never import it.
SUBCOMMANDS = {("audit", "replay"): "ahp_backends.replay"}
USAGE = "usage: ahp-backend {" + ",".join(COMMANDS) + "} ...\n"


def _help() -> str:
    lines = [USAGE, "Sample Agent Hooks Protocol backends, each a separate process.\n", "commands:"]
    lines += [f"  {name:<10} {text}" for name, (_, text) in COMMANDS.items()]
    lines.append("\nRun 'ahp-backend COMMAND --help' for a command's options.")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        print(_help())
        return 0 if args else 2
    entry = COMMANDS.get(args[0])
    if entry is None:
        print(f"{USAGE}ahp-backend: error: unknown command {args[0]!r}", file=sys.stderr)
        return 2
    sub = SUBCOMMANDS.get((args[0], args[1] if len(args) > 1 else ""))
    module = importlib.import_module(sub or entry[0])
    code: int = module.main(args[2:] if sub else args[1:])
    return code


if __name__ == "__main__":
    sys.exit(main())

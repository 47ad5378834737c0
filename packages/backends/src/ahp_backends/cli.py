"""The ``ahp-backend`` command: one subcommand per sample backend.

Only the chosen subcommand's module is imported, so a backend started once per
event pays for nothing else. Each module has ``main(argv) -> int``; the table is run
by the kit's one way of building a command (:func:`ahp_protocol.cli_kit.run_command`).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from ahp_protocol.cli_kit import run_command

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
SUBCOMMANDS = {
    ("audit", "replay"): "ahp_backends.replay",
    ("policy", "test"): "ahp_backends.policy_tests",  # it loads policies: policy never imports it
}


def main(argv: Sequence[str] | None = None) -> int:
    return run_command(
        "ahp-backend",
        "Sample Agent Hooks Protocol backends, each a separate process.",
        COMMANDS,
        argv,
        subcommands=SUBCOMMANDS,
    )


if __name__ == "__main__":
    sys.exit(main())

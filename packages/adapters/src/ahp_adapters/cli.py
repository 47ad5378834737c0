"""The ``ahp-adapter`` command (subcommands are added as dialects land)."""

from __future__ import annotations

import sys
from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> int:
    print("ahp-adapter: no subcommands yet", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())

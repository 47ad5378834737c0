"""The permission modes, by name (standard library only).

A mode is the host's default for a call no rule decides: ``default`` (reads allowed,
everything else asks), ``accept-edits`` (file edits allowed too) or ``read-only``
(writes, edits, shell and fetch refused); :mod:`ahp_harness.permissions` gives each
its meaning. The names live here, apart from that module, so the command line can offer
them without importing the tools: ``ahp-harness run`` parses its arguments before it
re-executes itself (:mod:`ahp_harness.lifetime`), and whatever it imports by then is
imported twice.
"""

from typing import Final, Literal, get_args

Mode = Literal["default", "accept-edits", "read-only"]
MODES: Final[tuple[Mode, ...]] = get_args(Mode)

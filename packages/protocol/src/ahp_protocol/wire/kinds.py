"""The tool-kind vocabulary of the draft: what ``tool.kind`` says a tool call is.

Owns :data:`TOOL_KINDS` (the nine kinds the draft names, in its order), :data:`TOOL_KIND_SET`
and :func:`is_known_kind`: every layer that reads or writes ``tool.kind`` takes the
vocabulary from here. ``tool.kind`` is descriptive and optional (ahp-draft.md §tool,
native-dialects.md §0.1/§0.2): an unknown kind is accepted and never blocks, but must be
reported (a note from ``ahp-protocol validate``, a warning from the harness-facing API),
because a rule keyed on a kind (``kind = "shell"``) silently misses a harness that says
``"bash"``. Standard library only, no I/O.
"""

from __future__ import annotations

from typing import Final

__all__ = ["TOOL_KINDS", "TOOL_KIND_SET", "is_known_kind"]

TOOL_KINDS: Final[tuple[str, ...]] = (
    "shell",
    "file_read",
    "file_write",
    "file_edit",
    "search",
    "fetch",
    "task",
    "mcp",
    "other",
)
"""Every tool kind the draft defines, in the draft's order (``other``: none of the rest)."""

TOOL_KIND_SET: Final[frozenset[str]] = frozenset(TOOL_KINDS)


def is_known_kind(kind: object) -> bool:
    """Whether ``kind`` is one of :data:`TOOL_KINDS` (exact, case-sensitive; non-strings: no)."""
    return isinstance(kind, str) and kind in TOOL_KIND_SET

"""The tool-kind vocabulary of the draft: what ``tool.kind`` says a tool call is.

Owns :data:`TOOL_KINDS` (the nine kinds the draft names, in its order),
:data:`TOOL_KIND_SET` and :func:`is_known_kind`; every layer that reads or writes
``tool.kind`` (the harness's tool table, the adapters' native-name tables, the
deny-list's rules, ``ahp-protocol validate``, the harness-facing API) takes the
vocabulary from here, so there is one list.

What the draft says (ahp-draft.md §tool, native-dialects.md §0.1/§0.2):

- ``tool.kind`` is **descriptive only** and **optional**; on the wire it is a
  free-form string. An adapter assigns a kind the protocol revision defines, or
  ``other``; ``tool.name`` stays the native name, verbatim.
- An **unknown kind is accepted** (the event stays valid) **and never blocks**
  processing, but it must be **reported**: a note from ``ahp-protocol validate``,
  a warning from the harness-facing API. Registration ``filters.toolKinds`` are
  hints only and never justify dropping a call of an unknown kind.
- Why reporting matters: a rule keyed on kind matches the vocabulary, not the
  spirit. A harness that says ``"kind": "bash"`` for its shell tool never meets a
  deny-list rule ``kind = "shell"``: the call is not denied, and nothing says why.
  That silent policy bypass is what the report exists to surface.

Standard library only, with no pydantic import, so the adapters' hook path and a
backend's start-up can import it for the price of a tuple. No I/O.
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

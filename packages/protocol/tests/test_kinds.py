"""``wire.kinds``: the draft's tool-kind vocabulary, and what an unknown kind means on the wire."""

from __future__ import annotations

import pytest
from ahp_protocol.wire.events import Tool
from ahp_protocol.wire.kinds import TOOL_KIND_SET, TOOL_KINDS, is_known_kind


def test_the_vocabulary_is_the_drafts_in_its_order() -> None:
    # As native-dialects.md §0.2 and the draft's tool descriptor list them.
    draft = "shell file_read file_write file_edit search fetch task mcp other"
    assert draft.split() == list(TOOL_KINDS)
    assert frozenset(TOOL_KINDS) == TOOL_KIND_SET
    assert isinstance(TOOL_KIND_SET, frozenset)


@pytest.mark.parametrize("kind", TOOL_KINDS)
def test_every_kind_is_known(kind: str) -> None:
    assert is_known_kind(kind)


@pytest.mark.parametrize(
    "kind", ["bash", "Shell", "SHELL", " shell", "shell ", "", "file-read", None, 1, ["shell"], {}]
)
def test_anything_else_is_unknown(kind: object) -> None:
    assert is_known_kind(kind) is False


@pytest.mark.parametrize("kind", ["bash", "com.example.custom", "Shell"])
def test_an_unknown_kind_is_accepted_on_the_wire(kind: str) -> None:
    """Kind is descriptive and free-form: the tool descriptor stays valid (reported elsewhere)."""
    tool = {"name": "Bash", "kind": kind, "input": {"command": "ls"}, "origin": "native"}
    assert Tool.model_validate(tool).kind == kind

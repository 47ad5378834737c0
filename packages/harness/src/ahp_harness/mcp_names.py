"""The names the model calls MCP tools by: ``mcp__<server>__<tool>``, the one place.

A server id never holds ``__`` (:mod:`ahp_harness.mcp_config` refuses one), so a name
splits at its first ``__`` after the prefix; the tool part keeps any ``__`` of its own.
Standard library only and nothing compiled at import: :mod:`ahp_harness.permissions`
imports it on every run.
"""

from __future__ import annotations

import re
from typing import Final

__all__ = ["TOOL_PREFIX", "split_tool_name", "tool_name", "valid_mcp_tool_name"]

TOOL_PREFIX: Final = "mcp__"
_MCP_TOOL_NAME: Final = r"[A-Za-z0-9_.-]{1,128}\Z"


def tool_name(server_id: str, mcp_tool: str) -> str:
    """The name the model calls an MCP tool by: ``mcp__<server>__<tool>``."""
    return f"{TOOL_PREFIX}{server_id}__{mcp_tool}"


def split_tool_name(name: str) -> tuple[str, str] | None:
    """``(server, tool)`` of an ``mcp__<server>__<tool>`` name, or ``None``."""
    if not name.startswith(TOOL_PREFIX):
        return None
    server, sep, tool = name[len(TOOL_PREFIX) :].partition("__")
    if not sep or not server or not tool:
        return None
    return server, tool


def valid_mcp_tool_name(name: object) -> bool:
    """Whether a server's tool name can be offered (MCP's ``[A-Za-z0-9_.-]{1,128}``)."""
    return isinstance(name, str) and re.match(_MCP_TOOL_NAME, name) is not None

"""The harness's six tools, by name.

=============  ==============  ==============================  ===================
name           kind            input                           main argument
=============  ==============  ==============================  ===================
``shell``      ``shell``       ``{"command"}``                 ``command``
``read_file``  ``file_read``   ``{"path"}``                    ``path``
``write_file`` ``file_write``  ``{"path", "content"}``         ``path``
``edit_file``  ``file_edit``   ``{"path", "old", "new"}``      ``path``
``search``     ``search``      ``{"pattern", "path"?}``        ``pattern``
``fetch``      ``fetch``       ``{"url"}``                     ``url``
=============  ==============  ==============================  ===================

The input names are what hook backends see and match on. Tools are stateless;
one instance of each serves every call. This package never imports AHP, except
the kind vocabulary: :data:`KINDS` is :data:`ahp_protocol.wire.kinds.TOOL_KIND_SET`
(standard library only), so the harness's kinds are the wire's, one list.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from ahp_protocol.wire.kinds import TOOL_KIND_SET

from ahp_harness.tools.base import FileChange, Tool, ToolInputError, ToolResult
from ahp_harness.tools.fetch import FetchTool
from ahp_harness.tools.files import EditFileTool, ReadFileTool, WriteFileTool
from ahp_harness.tools.search import SearchTool
from ahp_harness.tools.shell import ShellTool

__all__ = [
    "KINDS",
    "TOOLS",
    "FileChange",
    "Tool",
    "ToolInputError",
    "ToolResult",
    "get_tool",
]

TOOLS: Mapping[str, Tool] = MappingProxyType(
    {
        tool.name: tool
        for tool in (
            ShellTool(),
            ReadFileTool(),
            WriteFileTool(),
            EditFileTool(),
            SearchTool(),
            FetchTool(),
        )
    }
)

#: Every tool kind the AHP draft names (the six above plus ``task``, ``mcp``, ``other``).
KINDS: frozenset[str] = TOOL_KIND_SET


def get_tool(name: str) -> Tool | None:
    """The tool called ``name``, or ``None``."""
    return TOOLS.get(name)

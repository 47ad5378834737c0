"""A backend written on the official SDK's server (``agenthooksprotocol``, test-only).

``python sdk_backend.py``: the SDK's stdio server (persistent) with one tool.before
handler that denies ``rm -rf`` and returns no effect otherwise. The judge's tests run it
to show where the SDK 0.10.1 server itself deviates from the draft.
"""

from __future__ import annotations

from typing import Any

import anyio
from agenthooksprotocol import DenyEffect
from agenthooksprotocol.server import serve
from agenthooksprotocol.server.hooks import Handlers, InterceptHandlers, ToolBeforeReply


def before_tool(context: Any) -> ToolBeforeReply:
    command = context.event.tool.input.get("command")
    if isinstance(command, str) and "rm -rf" in command:
        deny = DenyEffect(type="deny", reason="no recursive deletes", code="org.example.sdk.rm")
        return ToolBeforeReply(effects=(deny,))
    return ToolBeforeReply(effects=())


if __name__ == "__main__":
    anyio.run(serve, Handlers(intercept=InterceptHandlers(tool_before=before_tool)))

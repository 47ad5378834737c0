"""An async test backend for the server kit: the same verdicts as kit_denylist, async def."""

from __future__ import annotations

import sys
from typing import Any

import anyio
from ahp_protocol.server import Backend, InterceptRequest

backend = Backend("com.example.kit.async")


@backend.intercept("tool.*")
async def guard(request: InterceptRequest) -> Any:
    await anyio.sleep(0)
    command = str(request.tool_input.get("command", ""))
    if command == "boom":
        raise RuntimeError("async secret sk-async-SECRET")
    if "rm -rf" in command:
        return [{"type": "deny", "reason": "No recursive deletes (async)."}]
    return None


@backend.observe("session.*")
async def record(event: dict[str, Any]) -> None:
    await anyio.sleep(0)
    print(f"observed {event.get('type')} {event.get('id')}", file=sys.stderr, flush=True)


if __name__ == "__main__":
    backend.run()

"""A stdlib-only AHP backend that never answers an intercept whose tool input holds MARKER.

    hang_on.py MARKER

Persistent stdio. Every other ``hooks/intercept`` gets no effect; notifications are
never answered. It is how a test makes only the *second* ``tool.before`` of one call
(the one for an input rewritten at ``tool.permission.request``) miss its deadline.
It keeps reading while it withholds an answer and exits when stdin closes.
"""

from __future__ import annotations

import json
import sys


def main(marker: str) -> None:
    for raw in sys.stdin.buffer:
        message = json.loads(raw)
        if not isinstance(message, dict) or "id" not in message:
            continue
        tool = message.get("params", {}).get("event", {}).get("tool", {})
        if marker in json.dumps(tool.get("input")):
            continue  # withhold the answer: the harness's deadline decides
        result = {"protocolVersion": "draft", "effects": []}
        sys.stdout.buffer.write(
            json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result}).encode() + b"\n"
        )
        sys.stdout.buffer.flush()


if __name__ == "__main__":
    main(sys.argv[1])

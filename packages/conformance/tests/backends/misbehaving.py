"""A small stdio backend that breaks one rule on purpose, for the judge's tests.

``python misbehaving.py MODE``: every message is answered by the kit's server kit (a
well-behaved backend whose tool.before handler denies ``rm -rf``), except for the one
fault ``MODE`` names, which the kit would never commit and so is done here by hand:

- ``notifications``: every notification gets a response too (id null);
- ``leak``: every valid intercept gets -32004 whose message and data hold the
  traceback of a real exception;
- ``unadvertised``: every valid intercept gets ``ask``, whatever the grant says;
- ``declared-unsupported``: its ``hooks/configuration`` subscribes to tool.before, yet
  every valid intercept gets -32002 (unsupported event).

Protocol on stdout, one line per message; nothing else.
"""

from __future__ import annotations

import json
import sys
import traceback

from ahp_protocol.server import Backend, InterceptRequest
from ahp_protocol.wire.effects import DenyEffect

MODES = ("notifications", "leak", "unadvertised", "declared-unsupported")
SUBSCRIPTION = {
    "mode": "intercept",
    "events": ["tool.before"],
    "timeoutMs": 2000,
    "failurePolicy": "fail-closed",
    "content": {"default": "metadata"},
}

backend = Backend("org.example.misbehaving", configuration=[SUBSCRIPTION])


@backend.intercept("tool.before")
def before_tool(request: InterceptRequest) -> DenyEffect | None:
    command = request.tool_input.get("command")
    if isinstance(command, str) and "rm -rf" in command:
        return DenyEffect(reason="no recursive deletes", code="org.example.misbehaving.rm")
    return None


def traceback_text() -> str:
    try:
        {}["policy"]  # a real exception, for its traceback
    except KeyError:
        return traceback.format_exc()
    return ""


def answer(mode: str, raw: bytes) -> bytes | None:
    try:
        message = json.loads(raw)
    except ValueError:
        message = None
    reply = backend.handle_sync(raw)
    if isinstance(message, dict) and "id" not in message and "method" in message:
        if mode == "notifications":
            body = {
                "jsonrpc": "2.0",
                "id": None,
                "result": {"protocolVersion": "draft", "effects": []},
            }
            return json.dumps(body).encode()
        return None
    if reply is None:
        return None
    reply = reply.rstrip(b"\n")
    decoded = json.loads(reply)
    valid_intercept = (
        isinstance(message, dict)
        and message.get("method") == "hooks/intercept"
        and "result" in decoded
    )
    if valid_intercept and mode == "leak":
        text = traceback_text()
        error = {"code": -32004, "message": text.splitlines()[-1], "data": {"detail": text}}
        return json.dumps({"jsonrpc": "2.0", "id": decoded["id"], "error": error}).encode()
    if valid_intercept and mode == "declared-unsupported":
        error = {"code": -32002, "message": "unsupported_event"}
        return json.dumps({"jsonrpc": "2.0", "id": decoded["id"], "error": error}).encode()
    if valid_intercept and mode == "unadvertised":
        result = {"protocolVersion": "draft", "effects": [{"type": "ask"}]}
        return json.dumps({"jsonrpc": "2.0", "id": decoded["id"], "result": result}).encode()
    return reply


def main() -> int:
    mode = sys.argv[1] if len(sys.argv) > 1 else ""
    if mode not in MODES:
        print(f"usage: misbehaving.py {{{','.join(MODES)}}}", file=sys.stderr)
        return 2
    out = sys.stdout.buffer
    for line in sys.stdin.buffer:
        if not line.strip():
            continue
        reply = answer(mode, line.rstrip(b"\r\n"))
        if reply is not None:
            out.write(reply + b"\n")
            out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""A well-behaved stdio backend (the server kit's) whose results lack ``protocolVersion``.

Every answer is the kit's own, then ``protocolVersion`` is taken out of each result: one
missing field (AHP-VER-001), which the judge's report must name in one line, not once
per check. Notifications get nothing, errors stay as the kit wrote them.
"""

import json
import sys

from ahp_protocol.server import Backend

backend = Backend("org.example.no-version")


@backend.intercept("tool.before")
def decide(request: object) -> list[dict[str, str]]:
    return []


for line in sys.stdin.buffer:
    if not line.strip():
        continue
    reply = backend.handle_sync(line.rstrip(b"\r\n"))
    if reply is None:
        continue
    try:
        message = json.loads(reply)
    except ValueError:
        sys.stdout.buffer.write(reply)
        sys.stdout.flush()
        continue
    if isinstance(message, dict) and isinstance(message.get("result"), dict):
        message["result"].pop("protocolVersion", None)
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()

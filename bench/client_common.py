"""What the client benchmarks share: the backend, the event and the request they time.

Imported by ``client_stdio.py`` and ``client_http.py`` (run from the repository as
``uv run python bench/<script>.py``; this folder is then on ``sys.path``).
"""

from __future__ import annotations

import json
import math
import statistics
import uuid
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
BACKEND = REPO / "packages" / "protocol" / "tests" / "backends" / "kit_denylist.py"
SOURCE = "urn:uuid:5b7de29e-a9e0-41a8-bf26-d94b05f0656d"
HARNESS = {"name": "bench-harness", "version": "1.0"}
CAPABILITIES = {"tool.before": {"effects": ["deny", "allow"]}}
DENY_REASON = "No recursive deletes."
TIMEOUT_S = 60.0


def command(index: int) -> str:
    return "rm -rf /tmp/build" if index % 2 else "ls -la /repo"


def tool_event(index: int) -> dict[str, Any]:
    return {
        "id": f"evt_{index:06d}_{uuid.uuid4().hex[:8]}",
        "source": SOURCE,
        "type": "tool.before",
        "time": "2026-08-24T08:51:14Z",
        "harness": HARNESS,
        "session": {"id": "sess_123", "cwd": "/repo", "workspaceRoots": ["/repo"]},
        "tool": {
            "name": "Bash",
            "kind": "shell",
            "input": {"command": command(index), "timeout": 120000},
            "origin": "native",
        },
        "call": {"id": f"call_{index:06d}"},
        "path": "native",
    }


def request_body(event: dict[str, Any]) -> bytes:
    message = {
        "jsonrpc": "2.0",
        "id": event["id"],
        "method": "hooks/intercept",
        "params": {
            "protocolVersion": "draft",
            "event": event,
            "capabilities": CAPABILITIES["tool.before"],
            "state": {"permission": "none", "candidate": None, "flow": "none"},
        },
    }
    return json.dumps(message, separators=(",", ":")).encode()


def verdict(name: str, event: dict[str, Any], body: bytes) -> bool:
    reply = json.loads(body)
    if reply.get("id") != event["id"]:
        raise SystemExit(f"{name}: reply id {reply.get('id')!r} for {event['id']!r}")
    return any(e.get("type") == "deny" for e in reply["result"]["effects"])


def summary(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    p90 = ordered[max(0, math.ceil(0.9 * len(ordered)) - 1)]
    return {"n": len(values), "median": statistics.median(ordered), "p90": p90}

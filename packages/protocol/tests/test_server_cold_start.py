"""A per-event backend that only answers ``hooks/configuration`` never imports pydantic.

Per-event backends start a process per message; importing pydantic-core costs tens of
milliseconds there. The kit decodes with the standard library until it first needs the
wire models (an event to validate), and with pydantic-core's faster decoder after that.
Run in a fresh interpreter, as a per-event backend is.
"""

from __future__ import annotations

import json
import subprocess
import sys

SCRIPT = r"""
import json, sys
from ahp_protocol.server import Backend

backend = Backend(
    "com.example.cold",
    configuration=[{"mode": "intercept", "events": ["tool.before"], "timeoutMs": 1000,
                    "failurePolicy": "fail-open", "content": {"default": "body"}}],
)

@backend.intercept("tool.before")
def allow_all(request):
    return None

out = {}
reply = backend.respond_sync(json.dumps({"jsonrpc": "2.0", "id": "c1",
    "method": "hooks/configuration", "params": {"protocolVersion": "draft"}}).encode())
out["configuration"] = json.loads(reply.body)
out["pydantic_after_configuration"] = "pydantic_core" in sys.modules
print(json.dumps(out))
"""


def test_answering_configuration_imports_no_pydantic() -> None:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=60, check=True
    )
    out = json.loads(done.stdout)
    assert out["configuration"]["id"] == "c1"
    assert (
        out["configuration"]["result"]["configuration"]["subscriptions"][0]["mode"] == "intercept"
    )
    assert out["pydantic_after_configuration"] is False

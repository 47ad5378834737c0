"""A kit test backend that advertises its own subscriptions (``hooks/configuration``).

Policy, shared with ``sdk_backend.py`` so the two are interchangeable in interop
tests and benchmarks: ``tool.before`` whose ``tool.input.command`` matches
``rm\\s+-rf`` -> deny (reason and code below); anything else -> no effect.

Default subscriptions: intercept ``tool.before`` (fail-closed, 2 s) and observe
``session.*``. Serves like any kit backend: no arguments for stdio persistent,
``--once`` for stdio per_event, ``--http HOST:PORT`` for HTTP.
"""

from __future__ import annotations

import re

from ahp_protocol.server import Backend, InterceptRequest
from ahp_protocol.wire.effects import DenyEffect

DENY_REASON = "Recursive deletes are not allowed (kit)."
DENY_CODE = "com.example.kit.rm_rf"
RM_RF = re.compile(r"rm\s+-rf")

backend = Backend(
    "com.example.kit.configured",
    configuration=[
        {
            "mode": "intercept",
            "events": ["tool.before"],
            "timeoutMs": 2000,
            "failurePolicy": "fail-closed",
            "content": {"default": "body"},
        },
        {"mode": "observe", "events": ["session.*"], "content": {"default": "metadata"}},
    ],
)


@backend.intercept("tool.before")
def guard(request: InterceptRequest) -> DenyEffect | None:
    if RM_RF.search(str(request.tool_input.get("command", ""))):
        return DenyEffect(reason=DENY_REASON, code=DENY_CODE)
    return None


if __name__ == "__main__":
    backend.run()

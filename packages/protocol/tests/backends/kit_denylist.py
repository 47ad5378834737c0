"""A sync test backend for the server kit, run as a process by the transport tests.

tool.before: "rm -rf" -> deny; "boom" -> the handler raises (with secret text);
"chatty" -> print() and a child process writing to stdout (must land on stderr);
"allow-me" -> an allow effect (only legal when advertised); anything else -> no effect.
Every observed event is reported on stderr. With AHP_TEST_REPORT_MODULES=1 the
process reports at exit whether anyio/uvicorn were imported.
"""

from __future__ import annotations

import atexit
import os
import subprocess
import sys
from typing import Any

from ahp_protocol.server import Backend, InterceptRequest
from ahp_protocol.wire.effects import AllowEffect, DenyEffect

SECRET = "sk-live-SECRET-do-not-echo"

backend = Backend(
    "com.example.kit.denylist",
    configuration=[
        {
            "mode": "intercept",
            "events": ["tool.before"],
            "timeoutMs": 2000,
            "failurePolicy": "fail-closed",
            "content": {"default": "metadata"},
        },
        {"mode": "observe", "events": ["*"], "content": {"default": "omit"}},
    ],
)


@backend.intercept("tool.before")
def guard(request: InterceptRequest) -> Any:
    command = str(request.tool_input.get("command", ""))
    if command == "boom":
        raise RuntimeError(f"failed while holding {SECRET}")
    if command == "chatty":
        print("stray print from a handler")
        subprocess.run(
            [sys.executable, "-c", "print('stray output from a child process')"], check=True
        )
        return None
    if command == "allow-me":
        return AllowEffect()
    if "rm -rf" in command:
        return DenyEffect(reason="No recursive deletes.", code="com.example.rm_rf")
    return None


@backend.observe("*")
def record(event: dict[str, Any]) -> None:
    if event.get("type") == "session.end" and event.get("extensions", {}).get(
        "com.example.test", {}
    ).get("raise"):
        raise RuntimeError(SECRET)
    print(f"observed {event.get('type')} {event.get('id')}", file=sys.stderr, flush=True)


if os.environ.get("AHP_TEST_REPORT_MODULES") == "1":

    @atexit.register
    def _report() -> None:
        loaded = [m for m in ("anyio", "uvicorn", "httpx") if m in sys.modules]
        print(f"modules-loaded: {','.join(loaded) or 'none'}", file=sys.stderr, flush=True)


if __name__ == "__main__":
    backend.run()

"""A tiny raw interop client adapter with the kit's registration extension (stdlib only).

    raw_client.py [--bug lets-failure-through|no-short-circuit|no-deadline] --config FILE

Only the registration extension (``"registration": PATH`` in the client config): every
scenario's ``request`` is sent to each hook of the registration in order (stdio,
persistent; one process per hook), lines of another id are discarded, and the answer is
folded the simplest correct way: a ``deny`` ends the chain; an operational failure
(deadline, exit, bad bytes, bad JSON, JSON-RPC error, a result that is not a version and
an array of known, advertised effects) ends it with a denial under ``fail-closed`` and is
ignored under ``fail-open``. ``actual`` is ``{decision, executed, input, messages}``.

Each ``--bug`` breaks exactly one rule, so ``ahp-conformance harness`` can be shown to
catch it:

- ``lets-failure-through``: every failure is treated as fail-open (a failure becomes
  "no objection", so a fail-closed failure lets the call through);
- ``no-short-circuit``: after a deny the remaining interceptors are still called;
- ``no-deadline``: waits for an answer without any deadline.
"""

from __future__ import annotations

import argparse
import json
import os
import selectors
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

KNOWN = {"deny", "allow", "ask", "modify", "message", "return", "flow", "inject"}
LIMIT = 4 * 1024 * 1024


class Failure(Exception):
    pass


class Backend:
    def __init__(self, hook: dict[str, Any]) -> None:
        transport = hook["transport"]
        self.process = subprocess.Popen(
            [transport["command"], *transport.get("args", [])],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            cwd=transport.get("cwd"),
        )
        self.selector = selectors.DefaultSelector()
        assert self.process.stdout is not None
        self.selector.register(self.process.stdout, selectors.EVENT_READ)
        self.buffer = b""

    def line(self, deadline: float | None) -> bytes:
        assert self.process.stdout is not None
        while b"\n" not in self.buffer:
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and (remaining <= 0 or not self.selector.select(remaining)):
                raise Failure("deadline exceeded")
            chunk = os.read(self.process.stdout.fileno(), 65536)
            if not chunk:
                raise Failure("the backend exited")
            self.buffer += chunk
            if len(self.buffer) > LIMIT + 1 and b"\n" not in self.buffer:
                raise Failure("oversized frame")
        raw, _, self.buffer = self.buffer.partition(b"\n")
        if len(raw) > LIMIT:
            raise Failure("oversized frame")
        return raw

    def ask(self, request: dict[str, Any], timeout_ms: int | None) -> dict[str, Any]:
        assert self.process.stdin is not None
        try:
            self.process.stdin.write(json.dumps(request).encode() + b"\n")
            self.process.stdin.flush()
        except OSError:
            raise Failure("the backend is gone") from None
        deadline = None if timeout_ms is None else time.monotonic() + timeout_ms / 1000
        while True:
            raw = self.line(deadline)
            try:
                message = json.loads(raw.decode("utf-8"))
            except (UnicodeDecodeError, ValueError):
                raise Failure("malformed output") from None
            if isinstance(message, dict) and message.get("id") == request["id"]:
                return message
            # another id: uncorrelated, discarded (persistent stdio)

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()


def effects_of(reply: dict[str, Any], advertised: list[str]) -> list[dict[str, Any]]:
    if "error" in reply:
        raise Failure("JSON-RPC error")
    result = reply.get("result")
    if not isinstance(result, dict) or result.get("protocolVersion") != "draft":
        raise Failure("invalid result")
    effects = result.get("effects")
    if not isinstance(effects, list):
        raise Failure("invalid result")
    for effect in effects:
        kind = effect.get("type") if isinstance(effect, dict) else None
        if kind not in KNOWN or kind not in advertised:
            raise Failure("unknown or unadvertised effect")
    return effects


def run(config: dict[str, Any], bug: str | None) -> dict[str, Any]:
    registration = json.loads(Path(config["registration"]).read_text())
    document = json.loads(Path(config["scenarioFile"]).read_text())
    backends: dict[str, Backend] = {}
    results = []
    try:
        for scenario in document["scenarios"]:
            request = scenario["request"]
            params = request["params"]
            advertised = params["capabilities"]["effects"]
            decision = "allow"
            for hook in registration["hooks"]:
                for subscription in hook.get("subscriptions", []):
                    if subscription.get("mode") != "intercept":
                        continue
                    if params["event"]["type"] not in subscription["events"]:
                        continue
                    if decision == "deny" and bug != "no-short-circuit":
                        break
                    backend = backends.get(hook["id"]) or backends.setdefault(
                        hook["id"], Backend(hook)
                    )
                    timeout = None if bug == "no-deadline" else subscription["timeoutMs"]
                    try:
                        effects = effects_of(backend.ask(request, timeout), advertised)
                    except Failure:
                        policy = subscription["failurePolicy"]
                        if policy == "fail-closed" and bug != "lets-failure-through":
                            decision = "deny"
                        continue
                    if any(e["type"] == "deny" for e in effects):
                        decision = "deny"
            actual = {
                "decision": decision,
                "executed": decision == "allow",
                "input": params["event"].get("tool", {}).get("input"),
                "messages": [],
            }
            expected = scenario.get("expected") or {}
            passed = all(actual.get(k) == v for k, v in expected.items())
            results.append(
                {"id": scenario["id"], "status": "passed" if passed else "failed", "actual": actual}
            )
    finally:
        for backend in backends.values():
            backend.close()
    return {"language": f"raw-client{'-' + bug if bug else ''}", "results": results}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument(
        "--bug", choices=["lets-failure-through", "no-short-circuit", "no-deadline"]
    )
    parser.add_argument("--config", required=True)
    args = parser.parse_args()
    config = json.loads(Path(args.config).read_text())
    if "registration" not in config:
        print("raw_client: only the registration extension is implemented", file=sys.stderr)
        return 2
    report = run(config, args.bug)
    Path(config["reportFile"]).write_text(json.dumps(report))
    return int(any(r["status"] == "failed" for r in report["results"]))


if __name__ == "__main__":
    sys.exit(main())

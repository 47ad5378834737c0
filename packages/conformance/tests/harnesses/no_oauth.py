"""A raw interop client adapter that ignores ``authentication`` (stdlib only): each HTTP
hook of the registration gets the scenario's request with no ``Authorization`` header,
whatever its binding says, and a failure is settled by the subscription's policy. So
``ahp-conformance harness``'s OAuth runs can be shown to catch unauthenticated delivery.

    no_oauth.py --config FILE
"""

from __future__ import annotations

import argparse
import json
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any


def decide(request: dict[str, Any], hook: dict[str, Any], policy: str) -> str:
    data = json.dumps(request).encode()
    post = urllib.request.Request(
        hook["transport"]["url"], data=data, headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(post, timeout=10) as response:
            effects = json.loads(response.read())["result"]["effects"]
    except (urllib.error.URLError, OSError, ValueError, KeyError):
        return "deny" if policy == "fail-closed" else "allow"
    return "deny" if any(e.get("type") == "deny" for e in effects) else "allow"


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--config", required=True)
    config = json.loads(Path(parser.parse_args().config).read_text())
    registration = json.loads(Path(config["registration"]).read_text())
    scenarios = json.loads(Path(config["scenarioFile"]).read_text())["scenarios"]
    results = []
    for scenario in scenarios:
        request = scenario["request"]
        decision = "allow"
        for hook in registration["hooks"]:
            for sub in hook.get("subscriptions", []):
                if sub.get("mode") == "intercept" and decision == "allow":
                    decision = decide(request, hook, sub["failurePolicy"])
        actual = {
            "decision": decision,
            "executed": decision == "allow",
            "input": request["params"]["event"]["tool"]["input"],
            "messages": [],
        }
        passed = all(actual.get(k) == v for k, v in (scenario.get("expected") or {}).items())
        results.append({"id": scenario["id"], "status": "passed" if passed else "failed",
                        "actual": actual})  # fmt: skip
    report = {"language": "no-oauth", "results": results}
    Path(config["reportFile"]).write_text(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())

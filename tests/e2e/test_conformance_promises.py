"""The README's one command judges ``ahp-harness``: ``ahp-conformance promises -- python -m
ahp_harness.probe`` passes every scenario (deny over each transport, no effect and allow
against the host's refusal, the failure classes under both policies, secrets).

Real processes throughout: the judge runs ``python -m ahp_harness.probe`` once per scenario
(which becomes ``ahp-harness run`` on a one-step script), the kit's scripted backend over
stdio (persistent, per_event) and loopback HTTP.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[2] / "README.md"
JUDGE = (sys.executable, "-m", "ahp_conformance.cli", "promises", "--json")
COMMAND = "ahp-conformance promises -- python -m ahp_harness.probe"


@pytest.mark.timeout(240)
def test_ahp_harness_keeps_the_four_promises_judged_black_box(tmp_path: Path) -> None:
    assert COMMAND in README.read_text("utf-8"), "the README shows the command"
    done = subprocess.run(
        [*JUDGE, "--", sys.executable, "-m", "ahp_harness.probe"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=220,
        check=False,
    )
    report = json.loads(done.stdout)
    failed = [(c["id"], c.get("detail")) for c in report["checks"] if c["status"] != "pass"]
    assert done.returncode == 0 and not failed, failed
    ids = {c["id"] for c in report["checks"]}
    for transport in ("stdio", "per_event", "http"):
        assert {f"control.{transport}", f"deny.{transport}"} <= ids
    assert {"no-effect.refuse", "allow.refuse.stdio", "allow.refuse.http"} <= ids
    assert {"failure.hang.http.fail-open.deadline", "failure.crash.stdio.fail-open.refuse"} <= ids
    assert {"secret.http", "secret.leak", "requests.valid"} <= ids
    for requirement in ("AHP-DEC-002", "AHP-DEC-003", "AHP-FAIL-001", "AHP-FAIL-002"):
        assert report["requirements"][requirement]["status"] == "pass", requirement

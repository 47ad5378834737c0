"""``ahp-conformance promises``: a harness judged black-box, as real processes.

The bad harness (``harnesses/ignores_deny.py``) asks its backends and then ignores a deny:
the judge must fail it, naming AHP-DEC-002, while the promises it keeps pass. The kit's
own harness passing every scenario is ``tests/e2e/test_conformance_promises.py``; the
toy harness of ``docs/integrating.md`` is ``tests/docs/test_integrating.py``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

BAD = Path(__file__).with_name("harnesses") / "ignores_deny.py"
JUDGE = (sys.executable, "-m", "ahp_conformance.cli", "promises")


def promises(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*JUDGE, *args], cwd=cwd, capture_output=True, text=True, timeout=150, check=False
    )


def statuses(report: dict[str, Any]) -> dict[str, str]:
    return {c["id"]: c["status"] for c in report["checks"]}


@pytest.mark.timeout(180)
def test_a_harness_that_ignores_a_deny_fails_with_the_requirement_id(tmp_path: Path) -> None:
    chosen = "control.stdio,control.http,deny,failure.crash.stdio,no-effect"
    done = promises("--json", "--scenarios", chosen, "--", sys.executable, str(BAD), cwd=tmp_path)
    assert done.returncode == 1, done.stderr[-2000:]
    report = json.loads(done.stdout)
    seen = statuses(report)
    assert seen["deny.stdio"] == seen["deny.http"] == "fail"
    assert seen["failure.crash.stdio.fail-closed"] == "fail"  # its synthetic denial ignored
    for kept in ("control.stdio", "control.http", "no-effect.refuse"):
        assert seen[kept] == "pass", kept
    assert seen["failure.crash.stdio.fail-open"] == "pass"
    assert report["requirements"]["AHP-DEC-002"]["status"] == "fail"
    deny = next(c for c in report["checks"] if c["id"] == "deny.stdio")
    assert "the call ran (the marker exists)" in deny["detail"]

    human = promises(
        "--scenarios", "control.stdio,deny.stdio", "--", sys.executable, str(BAD), cwd=tmp_path
    )
    assert human.returncode == 1
    assert "AHP-DEC-002" in "\n".join(human.stdout.splitlines()[:8]), human.stdout


@pytest.mark.timeout(60)
def test_a_harness_command_that_cannot_start_is_one_line(tmp_path: Path) -> None:
    done = promises("--scenarios", "control,deny", "--", "no-such-harness-xyz", cwd=tmp_path)
    assert done.returncode == 1
    lines = done.stdout.splitlines()
    assert len(lines) <= 25, done.stdout
    assert "cannot start no-such-harness-xyz" in "\n".join(lines[:5]), done.stdout

"""The backend judge's upload receiver checks (``upload.*``, AHP-CONTENT-002) against a
real receiver process: the kit's ``UploadReceiver`` passes them, scripted receivers that
answer 202 or a receipt with another digest fail them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from ahp_conformance.backend.judge import Judge
from ahp_conformance.backend.uploads import upload_checks

from kit_testing import StderrLines

BACKEND = Path(__file__).parents[2] / "protocol" / "tests" / "backends" / "upload_backend.py"
TOKEN = "judge-upload-token"

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(scope="module")
def receiver() -> Iterator[str]:
    proc = subprocess.Popen(
        [sys.executable, str(BACKEND)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env={**os.environ, "KIT_UPLOAD_TOKEN": TOKEN},
    )
    try:
        assert proc.stderr is not None
        line = StderrLines(proc.stderr, 20.0).wait_for("listening on http://")
        yield line.split("listening on ", 1)[1].strip()
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def judged(url: str, token: str | None) -> dict[str, str]:
    judge = Judge("http", 2.0, 0.0)
    upload_checks(judge, url, token)
    return {c.id: c.status for c in judge.checks}


def test_the_kits_receiver_passes(receiver: str) -> None:
    assert judged(f"{receiver}/content", TOKEN) == {
        "upload.confirmed": "pass",
        "upload.hash-mismatch": "pass",
        "upload.framing": "pass",
        "upload.framing.chunked": "pass",
        "upload.auth": "pass",
    }
    assert judged(f"{receiver}/content", None)["upload.auth"] == "n/a"


@pytest.mark.parametrize("mode", ["202", "bad-hash"])
def test_a_receiver_that_does_not_confirm_properly_fails(receiver: str, mode: str) -> None:
    statuses = judged(f"{receiver}/fake/{mode}", None)
    assert statuses["upload.confirmed"] == "fail"
    assert statuses["upload.hash-mismatch"] == "fail"  # it never says 400


def _lifecycle() -> list[dict[str, Any]]:
    from ahp_conformance.fixtures import interop_dir

    path = interop_dir() / "lifecycle-scenarios.json"
    return list(json.loads(path.read_text("utf-8"))["scenarios"])


def test_the_lifecycle_upload_steps_get_their_expected_statuses(receiver: str) -> None:
    from ahp_conformance.backend.uploads import lifecycle_upload_checks

    judge = Judge("http", 2.0, 0.0)
    lifecycle_upload_checks(judge, f"{receiver}/content", TOKEN, _lifecycle())
    statuses = {c.id: c.status for c in judge.checks}
    assert {
        "upload.scenario.intercept-content-upload-before-send",
        "upload.scenario.upload-integrity-rejection",
        "upload.scenario.immutable-upload-and-subscription-views",
    } <= set(statuses)
    assert set(statuses.values()) == {"pass"}, judge.checks
    # a receiver that confirms everything fails the integrity scenario
    judge = Judge("http", 2.0, 0.0)
    lifecycle_upload_checks(judge, f"{receiver}/fake/auth", None, _lifecycle())
    failed = {c.id for c in judge.checks if c.status == "fail"}
    assert "upload.scenario.upload-integrity-rejection" in failed


def test_the_backend_judge_cli_reports_uploads_by_requirement(receiver: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "ahp_conformance.cli", "backend", "--json", "--url",
         f"{receiver}/", "--upload-endpoint", f"{receiver}/content",
         "--upload-token-env", "JUDGE_UPLOAD_TOKEN"],
        capture_output=True, text=True, timeout=120,
        env={**os.environ, "JUDGE_UPLOAD_TOKEN": TOKEN},
    )  # fmt: skip
    report = json.loads(done.stdout)
    uploads = [c for c in report["checks"] if c["id"].startswith("upload.")]
    assert len(uploads) >= 8 and all(c["status"] == "pass" for c in uploads), uploads
    assert report["requirements"]["AHP-CONTENT-002"]["status"] == "pass"
    assert TOKEN not in done.stdout + done.stderr

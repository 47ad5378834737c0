"""The backend judge's upload receiver checks (``upload.*``, AHP-CONTENT-002) against a
real receiver process: the kit's ``UploadReceiver`` passes them, scripted receivers that
answer 202 or a receipt with another digest fail them."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

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

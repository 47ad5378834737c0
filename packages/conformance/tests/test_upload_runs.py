"""The harness judge's upload checks (AHP-CONTENT-001/002): the kit's client passes
them; a client that trusts any receipt (``harnesses/ignores_receipts.py``) fails the
bad-receipt check; a client that ignores uploads is ``unsupported``. Each run is a real
client process, a real fake backend and the judge's own loopback receiver."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from ahp_conformance import contract
from ahp_conformance.harness.upload_runs import CHECKS, PASSED_THROUGH, upload_checks

HERE = Path(__file__).parent
KIT_CLIENT = (sys.executable, "-m", "ahp_conformance.kit_client")
TRUSTING = (sys.executable, str(HERE / "harnesses" / "ignores_receipts.py"))
RAW = (sys.executable, str(HERE / "harnesses" / "raw_client.py"))

pytestmark = pytest.mark.timeout(120)


def adapter(command: tuple[str, ...]) -> contract.Adapter:
    extensions = frozenset({contract.REGISTRATION_EXTENSION})
    return contract.Adapter("python", None, command, Path.cwd(), extensions)


def test_the_kits_client_passes_every_upload_check(tmp_path: Path) -> None:
    checks = upload_checks(adapter(KIT_CLIENT), tmp_path, 60.0)
    assert {c.id for c in checks} == set(CHECKS)
    assert all(c.status == "pass" for c in checks), [c for c in checks if c.status != "pass"]
    assert all(set(c.requirements) == {"AHP-CONTENT-001", "AHP-CONTENT-002"} for c in checks)


def test_a_client_that_trusts_any_receipt_fails_the_bad_receipt_check(tmp_path: Path) -> None:
    checks = {c.id: c for c in upload_checks(adapter(TRUSTING), tmp_path, 60.0)}
    assert checks["upload.bad-receipt"].status == "fail"
    assert checks["upload.bad-receipt"].detail == "the event carries the unconfirmed ref"
    assert checks["upload.confirmed"].status == "pass"
    assert checks["upload.not-confirmed"].status == "pass"  # a 202 is refused before the receipt


def test_a_client_without_uploads_is_unsupported(tmp_path: Path) -> None:
    checks = upload_checks(adapter(RAW), tmp_path, 60.0)
    assert {c.status for c in checks} == {"unsupported"}
    assert {c.detail for c in checks} == {PASSED_THROUGH}


def test_a_client_that_drops_the_upload_credentials_fails_them(tmp_path: Path) -> None:
    client = (sys.executable, str(HERE / "harnesses" / "no_upload_auth.py"))
    checks = {c.id: c for c in upload_checks(adapter(client), tmp_path, 60.0)}
    assert checks["upload.credentials"].status == "fail"
    assert checks["upload.credentials"].detail == "the upload did not carry its own bearer token"
    assert checks["upload.confirmed"].status == "pass"  # this receiver confirms anyway


def test_the_kits_client_passes_them_over_http_hooks_too(tmp_path: Path) -> None:
    checks = upload_checks(adapter(KIT_CLIENT), tmp_path, 60.0, ("http",))
    assert {c.id for c in checks} == set(CHECKS)
    assert {(c.status, c.binding) for c in checks} == {("pass", "http")}, checks

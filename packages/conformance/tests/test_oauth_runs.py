"""The harness judge's OAuth runs (AHP-AUTH-001): the kit's client passes them; a client
that ignores ``authentication`` (``harnesses/no_oauth.py``) fails them, above all by
sending to the backend without a token. Each run is a real client process, a real
authorization server (``ahp_protocol.testing.oauth_server``, HTTPS from the judge's own
CA) and the judge's OAuth-protected backend."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from ahp_conformance import contract
from ahp_conformance.harness.oauth_runs import RUNS, TITLES, oauth_checks

HERE = Path(__file__).parent
KIT_CLIENT = (sys.executable, "-m", "ahp_conformance.kit_client")
NO_OAUTH = (sys.executable, str(HERE / "harnesses" / "no_oauth.py"))

pytestmark = pytest.mark.timeout(120)


def adapter(command: tuple[str, ...]) -> contract.Adapter:
    extensions = frozenset({contract.REGISTRATION_EXTENSION})
    return contract.Adapter("python", None, command, Path.cwd(), extensions)


def test_the_kits_client_passes_every_oauth_run(tmp_path: Path) -> None:
    checks = oauth_checks(adapter(KIT_CLIENT), tmp_path, 60.0)
    assert [c.id for c in checks] == [run[0] for run in RUNS] == list(TITLES)
    assert all(c.status == "pass" for c in checks), [c for c in checks if c.status != "pass"]
    assert all("AHP-AUTH-001" in c.requirements for c in checks)


def test_a_client_that_ignores_authentication_fails(tmp_path: Path) -> None:
    checks = {c.id: c for c in oauth_checks(adapter(NO_OAUTH), tmp_path, 60.0)}
    assert checks["oauth.preset"].status == "fail"  # 401: fail-closed denial, not allowed
    fell_back = checks["oauth.bad-secret.fail-open"]
    assert fell_back.status == "fail", fell_back
    assert fell_back.detail == "a request reached the backend without a token"
    assert all(c.status == "fail" for c in checks.values()), checks

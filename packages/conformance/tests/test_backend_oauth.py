"""``ahp-conformance backend --oauth-client-id``: the OAuth checks against real processes.

The kit's resource-server backend and a real authorization server (Authlib, HTTPS from a
test CA; ``packages/protocol/tests/backends``) pass; a backend that takes only a static
bearer token fails the discovery checks (its 401 has no usable challenge or metadata).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import kit_testing

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO / "packages" / "protocol" / "tests" / "backends"))
from oauth_testing import SECRET, Proc, auth_server, kit_backend, make_pki  # noqa: E402

JUDGE = (sys.executable, "-m", "ahp_conformance.cli", "backend", "--json")
RUN_S = 45.0

pytestmark = pytest.mark.skipif(
    not (kit_testing.fixtures_root() / "manifest.json").is_file(),
    reason=f"official fixtures not found at {kit_testing.fixtures_root()} (set AHP_FIXTURES_DIR)",
)


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def issuer(pki: dict[str, str]) -> Iterator[str]:
    with auth_server(pki) as proc:
        yield f"{proc.url}/good"


def judge(pki: dict[str, str], *args: str, env: dict[str, str] | None = None) -> Any:
    done = subprocess.run(
        [*JUDGE, *args],
        capture_output=True,
        text=True,
        timeout=RUN_S,
        env={
            **os.environ,
            "AHP_FIXTURES_DIR": str(kit_testing.fixtures_root()),
            "AHP_CA_BUNDLE": pki["ca"],
            "AHPC_SECRET": SECRET,
            **(env or {}),
        },
        cwd=REPO,
        stdin=subprocess.DEVNULL,
    )
    assert done.stdout.strip(), done.stderr[-2000:]
    return done.returncode, json.loads(done.stdout), done.stdout + done.stderr


def checks(report: dict[str, Any]) -> dict[str, str]:
    return {c["id"]: c["status"] for c in report["checks"] if c["id"].startswith("oauth.")}


OAUTH = ("--oauth-client-id", "harness", "--oauth-client-secret-env", "AHPC_SECRET",
         "--oauth-scope", "ahp.hooks")  # fmt: skip


def test_the_kit_resource_server_passes(issuer: str, pki: dict[str, str]) -> None:
    with kit_backend(issuer, pki) as backend:
        status, report, text = judge(pki, "--url", backend.url, *OAUTH)
    assert checks(report) == {
        "oauth.challenge": "pass",
        "oauth.resource-metadata": "pass",
        "oauth.authorization-server": "pass",
        "oauth.accepted": "pass",
        "oauth.invalid-token": "pass",
        "oauth.wrong-resource": "pass",
    }, [c for c in report["checks"] if c["id"].startswith("oauth.")]
    failed = [c for c in report["checks"] if c["status"] == "fail"]
    assert status == 0 and failed == [], failed
    assert report["requirements"]["AHP-AUTH-001"]["status"] == "pass"
    assert SECRET not in text and "eyJ" not in text  # no secret, no token in the report


def test_a_static_bearer_backend_fails_discovery(pki: dict[str, str], issuer: str) -> None:
    backend_script = REPO / "packages" / "protocol" / "tests" / "backends" / "kit_http_limits.py"
    env = {**os.environ, "KIT_TOKEN_ENV": "KIT_TOKEN", "KIT_TOKEN": "static-token"}
    proc = Proc([str(backend_script)], env, "stderr")
    try:
        status, report, _ = judge(pki, "--url", proc.url + "/", *OAUTH)
    finally:
        proc.stop()
    assert status == 1
    found = checks(report)
    assert found["oauth.challenge"] == "pass"  # a bare Bearer challenge is a challenge
    assert found["oauth.resource-metadata"] == "fail"  # but there is nothing to discover
    assert "oauth.accepted" not in found

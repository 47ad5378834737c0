"""A sample backend served as an OAuth resource server from its command line
(``--oauth-issuer``, ``--oauth-resource``, ``--oauth-scope``): the kit's client with the
``oauth`` preset gets the deny-list's own verdict, a request without a token gets the
RFC 9728 challenge, and the flags that do not go together are usage errors (exit 2)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO / "packages" / "protocol" / "tests" / "backends"))
from oauth_testing import SCOPE, SECRET, Proc, auth_server, free_port, make_pki  # noqa: E402

RULES = REPO / "examples" / "backends" / "denylist.toml"
BACKEND = ["-m", "ahp_backends.cli", "denylist", "--rules", str(RULES)]


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def served(pki: dict[str, str]) -> Iterator[tuple[str, str]]:
    with auth_server(pki) as issuer_proc:
        issuer = f"{issuer_proc.url}/good"
        port = free_port()
        url = f"http://127.0.0.1:{port}/ahp"
        argv = [*BACKEND, "--http", f"127.0.0.1:{port}", "--oauth-issuer", issuer,
                "--oauth-resource", url, "--oauth-scope", SCOPE]  # fmt: skip
        backend = Proc(argv, {**os.environ, "AHP_CA_BUNDLE": pki["ca"]}, "stderr")
        try:
            yield url, issuer
        finally:
            backend.stop()


def test_the_kit_client_gets_the_backends_verdict(served: tuple[str, str], pki: Any) -> None:
    from ahp_protocol.client import Dispatcher
    from ahp_protocol.testing import tool_before
    from ahp_protocol.wire.registration import parse_registration

    url, issuer = served
    registration = parse_registration(
        {
            "protocolVersion": "draft",
            "hooks": [
                {
                    "id": "com.example.denylist",
                    "transport": {"type": "http", "url": url},
                    "authentication": {
                        "type": "oauth", "resource": url, "issuer": issuer,
                        "clientId": "harness", "flow": "client_credentials",
                        "scopes": [SCOPE], "clientSecretRef": "env:SECRET",
                    },
                    "subscriptions": [
                        {"mode": "intercept", "events": ["tool.before"], "timeoutMs": 5000,
                         "failurePolicy": "fail-closed", "content": {"default": "body"}}
                    ],
                }
            ],
        }
    )  # fmt: skip
    env = {"SECRET": SECRET, "AHP_CA_BUNDLE": pki["ca"]}

    async def main() -> Any:
        caps = {"tool.before": {"effects": ["deny"]}}
        async with Dispatcher(registration, capabilities=caps, environ=env) as hooks:
            return await hooks.intercept(tool_before("rm -rf /"))

    result = anyio.run(main)
    assert result.permission == "deny" and not result.synthetic_denial, result.to_json()


def test_without_a_token_the_challenge(served: tuple[str, str]) -> None:
    url, _ = served
    with httpx.Client(timeout=20) as c:
        answer = c.post(url, content=b"{}", headers={"content-type": "application/json"})
        document = c.get(url.rsplit("/", 1)[0] + "/.well-known/oauth-protected-resource/ahp")
    assert answer.status_code == 401
    assert 'resource_metadata="' in answer.headers["www-authenticate"]
    assert json.loads(document.text)["resource"] == url


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--oauth-issuer", "https://as.example", "--oauth-resource", "http://127.0.0.1:1/"],
         "--oauth-issuer applies to --http only"),
        (["--http", "127.0.0.1:0", "--oauth-issuer", "https://as.example"],
         "--oauth-issuer and --oauth-resource go together"),
        (["--http", "127.0.0.1:0", "--bearer-token-env", "T", "--oauth-issuer",
          "https://as.example", "--oauth-resource", "http://127.0.0.1:1/"],
         "not both"),
        (["--http", "127.0.0.1:0", "--oauth-issuer", "http://as.example",
          "--oauth-resource", "http://127.0.0.1:1/"], "the OAuth issuer must use https"),
        (["--http", "127.0.0.1:0", "--oauth-issuer", "https://as.example",
          "--oauth-resource", "http://hooks.example/"], "the OAuth resource"),
    ],
)  # fmt: skip
def test_flags_that_do_not_go_together(flags: list[str], message: str) -> None:
    done = subprocess.run(
        [sys.executable, *BACKEND, *flags],
        capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL,
        env={**os.environ, "T": "tok"},
    )  # fmt: skip
    assert done.returncode == 2 and message in done.stderr, done.stderr

"""An upload's own ``oauth`` binding (issue 31, part 3 with part 2): the upload gets a
resource-bound token from a real authorization server (``backends/oauth_server.py``,
HTTPS from a test CA) through ``ahp_protocol.client.oauth.authorization``, independent
of any event credential; an untrusted issuer sends nothing."""

from __future__ import annotations

import base64
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from ahp_protocol.client import OperationalFailure
from ahp_protocol.client._failures import FailureClass
from ahp_protocol.client.uploads import Attachment, Uploads, upload
from ahp_protocol.wire.registration import Upload

sys.path.insert(0, str(Path(__file__).parent / "backends"))
from oauth_testing import SCOPE, SECRET, Proc, make_pki
from oauth_testing import auth_server as start_auth_server

sys.path.insert(0, str(Path(__file__).parent))
from test_http_hardening import Server

BACKENDS = Path(__file__).parent / "backends"
PNG = b"\x89PNG\r\n\x1a\n\x00oauth upload"

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def auth_server(pki: dict[str, str]) -> Iterator[Proc]:
    with start_auth_server(pki) as proc:
        yield proc


@pytest.fixture(scope="module")
def receiver() -> Iterator[Server]:
    srv = Server([str(BACKENDS / "upload_backend.py")])
    try:
        yield srv
    finally:
        srv.stop()


@pytest.fixture(autouse=True)
def fresh_tokens() -> Iterator[None]:
    from ahp_protocol.client.oauth import TOKENS

    TOKENS.clear()
    yield
    TOKENS.clear()


def spec(endpoint: str, issuer: str) -> Upload:
    return Upload.model_validate(
        {
            "endpoint": endpoint,
            "timeoutMs": 10000,
            "maxBytes": 1024,
            "auth": {
                "type": "oauth",
                "resource": endpoint,
                "issuer": issuer,
                "clientId": "harness",
                "flow": "client_credentials",
                "scopes": [SCOPE],
                "clientSecretRef": "env:AHP_CLIENT_SECRET",
            },
        }
    )


def seen(receiver: Server) -> list[Any]:
    return list(httpx.post(f"{receiver.url}/fake/auth-seen").json())


async def test_an_upload_gets_its_own_resource_bound_token(
    auth_server: Proc, receiver: Server, pki: dict[str, str]
) -> None:
    endpoint = f"{receiver.url}/fake/auth"
    environ = {"AHP_CLIENT_SECRET": SECRET, "AHP_CA_BUNDLE": pki["ca"]}
    before = len(seen(receiver))
    async with Uploads.client(environ) as client:
        ref = await upload(
            client, spec(endpoint, f"{auth_server.url}/good"), Attachment(PNG, "image/png"),
            environ=environ,
        )  # fmt: skip
    assert ref == "urn:uuid:auth"
    (value,) = seen(receiver)[before:]
    scheme, token = value.split(" ", 1)
    assert scheme == "Bearer"
    payload = token.split(".")[1]
    claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    assert claims["aud"] == endpoint  # RFC 8707: bound to the upload endpoint, not an event's


async def test_an_untrusted_issuer_sends_no_upload(
    auth_server: Proc, receiver: Server, pki: dict[str, str]
) -> None:
    endpoint = f"{receiver.url}/fake/auth"
    environ = {"AHP_CLIENT_SECRET": SECRET, "AHP_CA_BUNDLE": pki["ca"]}
    before = len(seen(receiver))
    async with Uploads.client(environ) as client:
        with pytest.raises(OperationalFailure) as caught:
            await upload(
                client, spec(endpoint, f"{auth_server.url}/liar"), Attachment(PNG, "image/png"),
                environ=environ,
            )  # fmt: skip
    assert caught.value.failure == FailureClass.AUTH_FAILED
    assert SECRET not in caught.value.detail
    assert len(seen(receiver)) == before

"""OAuth end to end on loopback: a real authorization server process (Authlib's server
side, HTTPS with a certificate from a test CA), the server kit as a resource server in a
real process, and the client's ``oauth`` preset through ``open_transport``.

One AS process and one backend process per module; every refusal is a short test.
"""

from __future__ import annotations

import json
import ssl
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

sys.path.insert(0, str(Path(__file__).parent / "backends"))
from kit_messages import intercept, observe, tool_before
from oauth_testing import DEADLINE, HS256, SCOPE, SECRET, Proc, kit_backend, make_pki
from oauth_testing import auth_server as start_auth_server

BACKENDS = Path(__file__).parent / "backends"

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def auth_server(pki: dict[str, str]) -> Iterator[Proc]:
    with start_auth_server(pki) as proc:
        yield proc


@pytest.fixture(scope="module")
def backend(auth_server: Proc, pki: dict[str, str]) -> Iterator[Proc]:
    with kit_backend(f"{auth_server.url}/good", pki) as proc:
        yield proc


@pytest.fixture(autouse=True)
def fresh_tokens() -> Iterator[None]:
    from ahp_protocol.client.oauth import TOKENS

    TOKENS.clear()
    yield
    TOKENS.clear()


def as_log(auth_server: Proc, pki: dict[str, str]) -> list[dict[str, Any]]:
    with httpx.Client(verify=ssl.create_default_context(cafile=pki["ca"]), timeout=DEADLINE) as c:
        return list(c.get(f"{auth_server.url}/log").json())


def hook(url: str, issuer: str, *, client: str = "harness", scopes: list[str] | None = None,
         headers: dict[str, Any] | None = None) -> Any:  # fmt: skip
    from ahp_protocol.wire.registration import Hook

    transport: dict[str, Any] = {"type": "http", "url": url}
    if headers:
        transport["headers"] = headers
    return Hook.model_validate(
        {
            "id": "com.example.oauth",
            "transport": transport,
            "authentication": {
                "type": "oauth",
                "resource": url,
                "issuer": issuer,
                "clientId": client,
                "flow": "client_credentials",
                "scopes": [SCOPE] if scopes is None else scopes,
                "clientSecretRef": "env:AHP_CLIENT_SECRET",
            },
        }
    )


def environ(pki: dict[str, str], **extra: str) -> dict[str, str]:
    return {"AHP_CLIENT_SECRET": SECRET, "AHP_CA_BUNDLE": pki["ca"], **extra}


async def call(transport: Any, message: dict[str, Any] | None = None,
               timeout: float = 5.0) -> tuple[Any, Any]:  # fmt: skip
    """(response or the OperationalFailure, exchange)."""
    from ahp_protocol.client import OperationalFailure
    from ahp_protocol.client.transports import Exchange

    exchange = Exchange()
    try:
        with anyio.fail_after(timeout):
            return await transport.request(message or intercept(tool_before()), exchange), exchange
    except OperationalFailure as failure:
        return failure, exchange


def no_secret(*texts: object) -> None:
    for text in texts:
        assert SECRET not in str(text) and "eyJ" not in str(text), text


# -- the client: the preset against the kit's resource server -------------------------


async def test_client_credentials_token_reaches_the_resource(
    backend: Proc, auth_server: Proc, pki: dict[str, str]
) -> None:
    from ahp_protocol.client.transports import open_transport

    before = len(as_log(auth_server, pki))
    transport = open_transport(hook(backend.url, f"{auth_server.url}/good"), environ=environ(pki))
    try:
        first, _ = await call(transport)
        second, _ = await call(transport)
        await transport.notify(observe(tool_before()))
    finally:
        await transport.aclose()
    assert "result" in first and "result" in second, (first, second)
    requests = as_log(auth_server, pki)[before:]
    # one token request, cached for the next calls; RFC 8707 resource and the scopes sent
    assert requests == [
        {
            "tenant": "good",
            "grant_type": "client_credentials",
            "resource": backend.url,
            "audience": None,
            "scope": SCOPE,
            "client_secret": True,
        }
    ]
    no_secret(repr(transport), repr(transport.oauth))


async def test_a_refused_cached_token_is_replaced_once(
    backend: Proc, auth_server: Proc, pki: dict[str, str]
) -> None:
    from ahp_protocol.client.oauth import TOKENS, _Token
    from ahp_protocol.client.transports import open_transport

    transport = open_transport(hook(backend.url, f"{auth_server.url}/good"), environ=environ(pki))
    TOKENS.put(transport.oauth._key, _Token("revoked-token", None))
    try:
        answer, exchange = await call(transport)
    finally:
        await transport.aclose()
    assert "result" in answer and exchange.attempts == 2


async def test_a_notification_never_replays(
    backend: Proc, auth_server: Proc, pki: dict[str, str]
) -> None:
    from ahp_protocol.client import FailureClass, OperationalFailure
    from ahp_protocol.client.oauth import TOKENS, _Token
    from ahp_protocol.client.transports import open_transport

    transport = open_transport(hook(backend.url, f"{auth_server.url}/good"), environ=environ(pki))
    TOKENS.put(transport.oauth._key, _Token("revoked-token", None))
    try:
        with pytest.raises(OperationalFailure) as failed:
            await transport.notify(observe(tool_before()))
        assert failed.value.failure == FailureClass.AUTH_FAILED
        await transport.notify(observe(tool_before()))  # the refused token was dropped
    finally:
        await transport.aclose()


@pytest.mark.parametrize(
    ("issuer", "client", "scopes", "why"),
    [
        ("liar", "harness", None, "names another issuer"),  # untrusted issuer
        ("redirect", "harness", None, "token endpoint redirected"),  # token endpoint redirect
        ("otheraud", "harness", None, "trusts another authorization server"),  # wrong aud
        ("expired", "harness", None, "trusts another authorization server"),  # expired token
        ("good", "narrow", [], "refused the request's authentication"),  # insufficient scope
    ],
)
async def test_refusals_are_auth_failures_without_fallback(
    backend: Proc, auth_server: Proc, pki: dict[str, str], issuer: str, client: str,
    scopes: list[str] | None, why: str,
) -> None:  # fmt: skip
    from ahp_protocol.client import FailureClass, OperationalFailure
    from ahp_protocol.client.transports import open_transport

    transport = open_transport(
        hook(backend.url, f"{auth_server.url}/{issuer}", client=client, scopes=scopes),
        environ=environ(pki),
    )
    try:
        failure, exchange = await call(transport)
    finally:
        await transport.aclose()
    assert isinstance(failure, OperationalFailure), failure
    assert failure.failure == FailureClass.AUTH_FAILED and why in failure.detail
    assert exchange.attempts <= 1  # never a second (another identity's, or anonymous) send
    no_secret(failure.detail)


async def test_a_bad_client_secret_sends_nothing(
    backend: Proc, auth_server: Proc, pki: dict[str, str]
) -> None:
    from ahp_protocol.client import FailureClass
    from ahp_protocol.client.transports import open_transport

    transport = open_transport(
        hook(backend.url, f"{auth_server.url}/good"),
        environ=environ(pki, AHP_CLIENT_SECRET="wrong-" + SECRET),
    )
    try:
        failure, exchange = await call(transport)
    finally:
        await transport.aclose()
    assert failure.failure == FailureClass.AUTH_FAILED and exchange.attempts == 0
    no_secret(failure.detail)


async def test_an_untrusted_tls_certificate_is_refused(
    backend: Proc, auth_server: Proc, pki: dict[str, str]
) -> None:
    from ahp_protocol.client import FailureClass
    from ahp_protocol.client.transports import open_transport

    before = len(as_log(auth_server, pki))
    transport = open_transport(
        hook(backend.url, f"{auth_server.url}/good"),
        environ=environ(pki, AHP_CA_BUNDLE=pki["other"]),
    )
    try:
        failure, exchange = await call(transport)
    finally:
        await transport.aclose()
    assert failure.failure == FailureClass.AUTH_FAILED and exchange.attempts == 0
    assert "verified TLS" in failure.detail
    assert as_log(auth_server, pki)[before:] == []  # no token request went out


async def test_the_deadline_covers_discovery(
    backend: Proc, auth_server: Proc, pki: dict[str, str]
) -> None:
    from ahp_protocol.client.transports import open_transport

    transport = open_transport(hook(backend.url, f"{auth_server.url}/slow"), environ=environ(pki))
    started = anyio.current_time()
    try:
        with pytest.raises(TimeoutError):
            await call(transport, timeout=0.5)
    finally:
        await transport.aclose()
    assert anyio.current_time() - started < 2.0  # the slow AS answers after 3 s


async def test_an_authorization_header_suppresses_oauth(
    backend: Proc, auth_server: Proc, pki: dict[str, str]
) -> None:
    from ahp_protocol.client import FailureClass
    from ahp_protocol.client.transports import open_transport

    before = len(as_log(auth_server, pki))
    transport = open_transport(
        hook(backend.url, f"{auth_server.url}/good", headers={"Authorization": "Bearer nope"}),
        environ=environ(pki),
    )
    try:
        failure, exchange = await call(transport)
    finally:
        await transport.aclose()
    # the explicit header is used as is: a plain 401, no token request, no retry
    assert failure.failure == FailureClass.HTTP_STATUS and exchange.attempts == 1
    assert as_log(auth_server, pki)[before:] == []


async def test_authorization_for_other_callers(auth_server: Proc, pki: dict[str, str]) -> None:
    from ahp_protocol.client import FailureClass, OperationalFailure
    from ahp_protocol.client.oauth import authorization
    from ahp_protocol.client.transports.http import tls_verify

    good = hook("http://127.0.0.1:1/up", f"{auth_server.url}/good").authentication
    async with httpx.AsyncClient(verify=tls_verify(pki["ca"]), follow_redirects=False) as http:
        value = await authorization(
            good, http, deadline=anyio.current_time() + 5, environ=environ(pki)
        )
        assert value.startswith("Bearer ey")
        slow = hook("http://127.0.0.1:1/up", f"{auth_server.url}/slow").authentication
        with pytest.raises(OperationalFailure) as failed:
            await authorization(
                slow, http, deadline=anyio.current_time() + 0.3, environ=environ(pki)
            )
    assert failed.value.failure == FailureClass.DEADLINE_EXCEEDED


# -- the resource server, seen from a plain HTTP client ------------------------------


def token(auth_server: Proc, pki: dict[str, str], tenant: str, resource: str,
          client: str = "harness", scope: str = SCOPE) -> str:  # fmt: skip
    with httpx.Client(verify=ssl.create_default_context(cafile=pki["ca"]), timeout=DEADLINE) as c:
        answer = c.post(
            f"{auth_server.url}/{tenant}/token",
            auth=(client, SECRET),
            data={"grant_type": "client_credentials", "resource": resource, "scope": scope},
        )
    assert answer.status_code == 200, answer.text
    return str(answer.json()["access_token"])


def post(url: str, value: str | None) -> httpx.Response:
    headers = {"content-type": "application/json"}
    if value is not None:
        headers["authorization"] = value
    with httpx.Client(timeout=DEADLINE) as c:
        return c.post(url, content=json.dumps(intercept(tool_before())), headers=headers)


def test_resource_server_metadata_and_challenge(backend: Proc, auth_server: Proc) -> None:
    root = backend.url.rsplit("/", 1)[0]
    with httpx.Client(timeout=DEADLINE) as c:
        document = c.get(f"{root}/.well-known/oauth-protected-resource/ahp").json()
    assert document == {
        "resource": backend.url,
        "authorization_servers": [f"{auth_server.url}/good"],
        "bearer_methods_supported": ["header"],
        "scopes_supported": [SCOPE],
    }
    missing = post(backend.url, None)
    assert missing.status_code == 401
    assert missing.headers["www-authenticate"] == (
        f'Bearer resource_metadata="{root}/.well-known/oauth-protected-resource/ahp", '
        f'scope="{SCOPE}"'
    )


@pytest.mark.parametrize(
    ("tenant", "client", "scope", "status", "error"),
    [
        ("good", "harness", SCOPE, 200, None),
        ("expired", "harness", SCOPE, 401, "invalid_token"),  # expired
        ("otheraud", "harness", SCOPE, 401, "invalid_token"),  # another audience
        ("liar", "harness", SCOPE, 401, "invalid_token"),  # another issuer (same key)
        ("good", "narrow", "", 403, "insufficient_scope"),
    ],
)
def test_resource_server_validates_tokens(
    backend: Proc, auth_server: Proc, pki: dict[str, str], tenant: str, client: str,
    scope: str, status: int, error: str | None,
) -> None:  # fmt: skip
    answer = post(
        backend.url, "Bearer " + token(auth_server, pki, tenant, backend.url, client, scope)
    )
    assert answer.status_code == status, answer.text
    if error is not None:
        assert f'error="{error}"' in answer.headers["www-authenticate"]
        assert "resource_metadata=" in answer.headers["www-authenticate"]


@pytest.mark.parametrize(
    "value",
    [
        "Bearer not-a-jwt",
        "Bearer eyJhbGciOiJub25lIn0.eyJpc3MiOiJ4In0.",  # alg none
        "Basic aGFybmVzczpzZWNyZXQ=",
    ],
)
def test_resource_server_refuses_garbage(backend: Proc, value: str) -> None:
    answer = post(backend.url, value)
    assert answer.status_code == 401
    assert "eyJ" not in answer.text and "Basic" not in answer.text


# -- through the dispatcher: the subscription's failure policy and deadline -----------


def registration(url: str, issuer: str, policy: str, timeout_ms: int = 3000) -> Any:
    from ahp_protocol.wire.registration import parse_registration

    auth = hook(url, issuer).authentication.model_dump(by_alias=True, exclude_none=True)
    return parse_registration(
        {
            "protocolVersion": "draft",
            "hooks": [
                {
                    "id": "com.example.oauth",
                    "transport": {"type": "http", "url": url},
                    "authentication": auth,
                    "subscriptions": [
                        {
                            "mode": "intercept",
                            "events": ["tool.before"],
                            "timeoutMs": timeout_ms,
                            "failurePolicy": policy,
                            "content": {"default": "body"},
                        }
                    ],
                }
            ],
        }
    )


@pytest.mark.parametrize(
    ("issuer", "secret", "policy", "timeout_ms", "outcome", "failure", "permission"),
    [
        ("good", SECRET, "fail-closed", 3000, "denied", None, "deny"),  # rm -rf: the backend
        ("good", "wrong", "fail-closed", 3000, "failed", "auth_failed", "deny"),
        ("good", "wrong", "fail-open", 3000, "failed", "auth_failed", "none"),
        ("slow", SECRET, "fail-closed", 400, "failed", "deadline_exceeded", "deny"),
    ],
)
async def test_failure_policy_and_deadline_through_the_dispatcher(
    backend: Proc, auth_server: Proc, pki: dict[str, str], issuer: str, secret: str,
    policy: str, timeout_ms: int, outcome: str, failure: str | None, permission: str,
) -> None:  # fmt: skip
    from ahp_protocol.client import Dispatcher

    reg = registration(backend.url, f"{auth_server.url}/{issuer}", policy, timeout_ms)
    caps = {"tool.before": {"effects": ["deny"]}}
    env = environ(pki, AHP_CLIENT_SECRET=secret)
    started = anyio.current_time()
    async with Dispatcher(reg, capabilities=caps, environ=env) as hooks:
        result = await hooks.intercept(tool_before(command="rm -rf /"))
    (first,) = [d for d in result.diagnostics if d.mode == "intercept"]
    assert (first.outcome, first.failure, result.permission) == (outcome, failure, permission)
    assert result.synthetic_denial == (failure is not None and policy == "fail-closed")
    assert anyio.current_time() - started < 2.5  # the slow AS answers after 3 s
    no_secret(json.dumps(result.to_json()), repr(result))


# -- interop with the official SDK (a test-only peer), both directions ----------------


@pytest.fixture(scope="module")
def sdk_server(auth_server: Proc, pki: dict[str, str]) -> Iterator[dict[str, str]]:
    """The SDK's interop adapter over HTTP with ``auth.mode: oauth`` (HS256 tokens of the
    AS's ``/sdk`` issuer for one audience), answering one scenario: deny."""
    where = Path(pki["dir"])
    audience = "https://hooks.example/sdk"
    scenario = {
        "id": "evt_sdk_oauth",
        "request": intercept(tool_before("evt_sdk_oauth", "rm -rf /")),
        "response": {"result": {"effects": [{"type": "deny", "reason": "sdk says no"}]}},
    }
    (where / "scenarios.json").write_text(json.dumps({"scenarios": [scenario]}))
    config = {
        "transport": "http",
        "scenarioFile": str(where / "scenarios.json"),
        "readinessFile": str(where / "ready.json"),
        "auth": {
            "mode": "oauth",
            "signingKey": HS256,
            "issuer": f"{auth_server.url}/sdk",
            "audience": audience,
        },
    }
    (where / "sdk.json").write_text(json.dumps(config))
    log = (where / "sdk.err").open("wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "agenthooksprotocol.interop", "server", "--config",
         str(where / "sdk.json")],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log,
    )  # fmt: skip
    try:
        ready = where / "ready.json"
        until = time.monotonic() + DEADLINE
        while not ready.exists():  # the SDK's readiness signal: it writes this file
            assert proc.poll() is None and time.monotonic() < until, "the SDK server did not start"
            time.sleep(0.02)
        yield {"endpoint": json.loads(ready.read_text())["endpoint"], "audience": audience}
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=DEADLINE)
        finally:
            proc.kill()
            proc.wait()
            log.close()
    assert b"Traceback" not in (where / "sdk.err").read_bytes()


async def test_kit_client_against_the_sdk_server(
    sdk_server: dict[str, str], auth_server: Proc, pki: dict[str, str]
) -> None:
    from ahp_protocol.client.transports import open_transport
    from ahp_protocol.wire.registration import Hook

    before = len(as_log(auth_server, pki))
    hook = Hook.model_validate(
        {
            "id": "com.example.sdk",
            "transport": {"type": "http", "url": sdk_server["endpoint"]},
            "authentication": {
                "type": "oauth",
                "resource": sdk_server["audience"],
                "issuer": f"{auth_server.url}/sdk",
                "clientId": "harness",
                "flow": "client_credentials",
                "clientSecretRef": "env:AHP_CLIENT_SECRET",
            },
        }
    )
    transport = open_transport(hook, environ=environ(pki))
    try:
        answer, exchange = await call(
            transport, intercept(tool_before("evt_sdk_oauth", "rm -rf /"))
        )
    finally:
        await transport.aclose()
    assert answer["result"]["effects"] == [{"type": "deny", "reason": "sdk says no"}], answer
    assert exchange.attempts == 1
    (request,) = as_log(auth_server, pki)[before:]
    assert request["resource"] == sdk_server["audience"] and request["audience"] is None


async def test_sdk_client_against_the_kit_resource_server(
    backend: Proc, auth_server: Proc, pki: dict[str, str]
) -> None:
    """The SDK's AuthenticatedHTTPTransport with a host AuthProvider (the SDK leaves token
    acquisition to the host): a stale token gets the kit's 401 challenge, the provider
    follows resource_metadata to the kit's RFC 9728 document and gets a token for that
    resource, and the SDK retries once; a notification is never retried."""
    import re

    from agenthooksprotocol.auth import AuthenticatedHTTPTransport, BearerCredential
    from agenthooksprotocol.runtime import ProtocolError

    challenges: list[str] = []

    class Provider:
        async def credential(self, context: Any) -> Any:
            return BearerCredential("stale-token")

        async def challenge(self, context: Any, challenge: Any) -> Any:
            headers = {k.lower(): v for k, v in challenge.headers.items()}
            challenges.append(headers.get("www-authenticate", ""))
            if not challenge.retry_allowed:
                return None
            found = re.search(r'resource_metadata="([^"]+)"', challenges[-1])
            assert found is not None
            with httpx.Client(timeout=DEADLINE) as c:
                metadata = c.get(found.group(1)).json()
            assert metadata["authorization_servers"] == [f"{auth_server.url}/good"]
            value = await anyio.to_thread.run_sync(
                token, auth_server, pki, "good", metadata["resource"]
            )
            return BearerCredential(value)

    binding = hook(backend.url, f"{auth_server.url}/good").authentication
    registration = {
        "id": "com.example.kit",
        "transport": {"type": "http", "url": backend.url},
        "authentication": binding.model_dump(by_alias=True, exclude_none=True),
    }
    transport = AuthenticatedHTTPTransport(
        backend.url, backend=registration, auth_provider=Provider()
    )
    try:
        with anyio.fail_after(DEADLINE):
            deny = await transport.request(intercept(tool_before("sdk_oauth_1", "rm -rf /")))
            assert deny["result"]["effects"][0]["type"] == "deny"
            with pytest.raises(ProtocolError):
                await transport.notify(observe(tool_before("sdk_oauth_2")))
    finally:
        await transport.aclose()
    assert len(challenges) == 2 and all("resource_metadata=" in c for c in challenges)


# -- no binding: 401 -> discovery -> dynamic registration -> one retry ---------------


def bare_hook(url: str) -> Any:
    from ahp_protocol.wire.registration import Hook

    return Hook.model_validate(
        {"id": "com.example.bare", "transport": {"type": "http", "url": url}}
    )


async def test_no_binding_discovers_registers_and_retries_once(
    backend: Proc, auth_server: Proc, pki: dict[str, str]
) -> None:
    from ahp_protocol.client.transports import open_transport

    before = len(as_log(auth_server, pki))
    transport = open_transport(bare_hook(backend.url), environ={"AHP_CA_BUNDLE": pki["ca"]})
    try:
        first, one = await call(transport)
        second, two = await call(transport)
        await transport.notify(observe(tool_before()))  # with the token from the start
    finally:
        await transport.aclose()
    assert "result" in first and "result" in second, (first, second)
    assert (one.attempts, two.attempts) == (2, 1)
    log = as_log(auth_server, pki)[before:]
    assert [sorted(e) for e in log] == [["registered", "tenant"], sorted(log[1])]
    assert (log[1]["resource"], log[1]["scope"]) == (backend.url, SCOPE)  # the challenge's
    no_secret(repr(transport), repr(transport.oauth))


async def test_no_binding_refuses_metadata_for_another_resource(
    backend: Proc, auth_server: Proc, pki: dict[str, str]
) -> None:
    from ahp_protocol.client import FailureClass
    from ahp_protocol.client.transports import open_transport

    other = backend.url.rsplit("/", 1)[0] + "/other"  # same server, not the resource
    transport = open_transport(bare_hook(other), environ={"AHP_CA_BUNDLE": pki["ca"]})
    try:
        failure, exchange = await call(transport)
        with pytest.raises(Exception) as told:
            await transport.notify(observe(tool_before()))
    finally:
        await transport.aclose()
    assert failure.failure == FailureClass.AUTH_FAILED and exchange.attempts == 1
    assert "another resource" in failure.detail
    assert getattr(told.value, "failure", None) == FailureClass.AUTH_FAILED  # never replayed


async def test_no_binding_without_registration_fails(
    auth_server: Proc, pki: dict[str, str]
) -> None:
    from ahp_protocol.client import FailureClass
    from ahp_protocol.client.transports import open_transport

    with kit_backend(f"{auth_server.url}/expired", pki) as backend:  # no registration there
        transport = open_transport(bare_hook(backend.url), environ={"AHP_CA_BUNDLE": pki["ca"]})
        try:
            failure, exchange = await call(transport)
        finally:
            await transport.aclose()
    assert failure.failure == FailureClass.AUTH_FAILED and exchange.attempts == 1
    assert "no client registration" in failure.detail


async def test_a_token_is_fetched_again_when_it_is_due(
    backend: Proc, auth_server: Proc, pki: dict[str, str]
) -> None:
    """Cached until its refresh time (``expires_in`` less a tenth, 5 to 60 s), then a new
    token request before the next send; the send itself is not refused first."""
    import time as clock

    from ahp_protocol.client.oauth import TOKENS
    from ahp_protocol.client.transports import open_transport

    before = len(as_log(auth_server, pki))
    transport = open_transport(hook(backend.url, f"{auth_server.url}/good"), environ=environ(pki))
    try:
        await call(transport)
        cached = TOKENS.get(transport.oauth._key)
        assert cached is not None and cached.refresh_at is not None
        # the AS says expires_in 864000: refreshed 60 s (the margin's cap) before that
        assert 864000 - 61 < cached.refresh_at - clock.monotonic() < 864000 - 59
        await call(transport)
        assert len(as_log(auth_server, pki)) - before == 1  # still cached
        cached.refresh_at = clock.monotonic() - 1  # its time has come
        answer, exchange = await call(transport)
    finally:
        await transport.aclose()
    assert "result" in answer and exchange.attempts == 1  # fetched before sending
    assert len(as_log(auth_server, pki)) - before == 2
    assert TOKENS.get(transport.oauth._key) is not cached


# -- authorization_code_pkce: a person, a loopback redirect ----------------------------


def pkce_hook(url: str, issuer: str) -> Any:
    from ahp_protocol.wire.registration import Hook

    return Hook.model_validate(
        {
            "id": "com.example.pkce",
            "transport": {"type": "http", "url": url},
            "authentication": {
                "type": "oauth",
                "resource": url,
                "issuer": issuer,
                "clientId": "person-app",
                "flow": "authorization_code_pkce",
                "scopes": [SCOPE],
            },
        }
    )


class Person:
    """Opens the authorization URL in a thread, as a browser would (the AS approves at
    once and redirects to the loopback listener); first a stray callback with another
    state, which the listener must ignore."""

    def __init__(self, pki: dict[str, str]) -> None:
        self.ca = ssl.create_default_context(cafile=pki["ca"])
        self.urls: list[str] = []
        self.answers: list[int] = []
        self.threads: list[Any] = []

    def __call__(self, url: str) -> None:
        import threading

        self.urls.append(url)
        thread = threading.Thread(target=self._browse, args=(url,), daemon=True)
        thread.start()
        self.threads.append(thread)

    def _browse(self, url: str) -> None:
        from urllib.parse import parse_qs, urlsplit

        redirect = parse_qs(urlsplit(url).query)["redirect_uri"][0]
        with httpx.Client(timeout=DEADLINE) as plain:
            self.answers.append(
                plain.get(redirect, params={"code": "x", "state": "no"}).status_code
            )
        with httpx.Client(verify=self.ca, timeout=DEADLINE) as browser:
            approved = browser.get(url)
            assert approved.status_code == 302, approved.text
            location = approved.headers["location"]
        with httpx.Client(timeout=DEADLINE) as plain:
            self.answers.append(plain.get(location).status_code)

    def join(self) -> None:
        for thread in self.threads:
            thread.join(DEADLINE)


async def test_pkce_signs_a_person_in_through_a_loopback_redirect(
    backend: Proc, auth_server: Proc, pki: dict[str, str]
) -> None:
    from urllib.parse import parse_qs, urlsplit

    from ahp_protocol.client.transports import open_transport

    before = len(as_log(auth_server, pki))
    person = Person(pki)
    hook = pkce_hook(backend.url, f"{auth_server.url}/good")
    transport = open_transport(hook, environ=environ(pki), interaction=person)
    try:
        answer, exchange = await call(transport, timeout=10.0)
        again, _ = await call(transport)  # the token is cached: no second sign-in
    finally:
        await transport.aclose()
        person.join()
    assert "result" in answer and "result" in again and exchange.attempts == 1, answer
    (url,) = person.urls
    query = parse_qs(urlsplit(url).query)
    redirect = urlsplit(query["redirect_uri"][0])
    assert (redirect.scheme, redirect.hostname, redirect.path) == ("http", "127.0.0.1", "/callback")
    assert query["code_challenge_method"] == ["S256"] and len(query["code_challenge"][0]) == 43
    assert query["resource"] == [backend.url] and query["response_type"] == ["code"]
    assert person.answers == [400, 200]  # the stray callback was refused, the real one taken
    token = [e for e in as_log(auth_server, pki)[before:] if "grant_type" in e]
    assert [(e["grant_type"], e["resource"], e["client_secret"]) for e in token] == [
        ("authorization_code", backend.url, False)
    ]


async def test_pkce_needs_an_interactive_host(
    backend: Proc, auth_server: Proc, pki: dict[str, str]
) -> None:
    from ahp_protocol.client import FailureClass
    from ahp_protocol.client.transports import open_transport

    transport = open_transport(pkce_hook(backend.url, f"{auth_server.url}/good"), environ={})
    try:
        failure, exchange = await call(transport)
    finally:
        await transport.aclose()
    assert failure.failure == FailureClass.AUTH_FAILED and exchange.attempts == 0
    assert "non-interactive" in failure.detail


async def test_pkce_refuses_an_authorization_endpoint_it_may_not_send_a_person_to(
    backend: Proc, auth_server: Proc, pki: dict[str, str]
) -> None:
    from ahp_protocol.client import FailureClass
    from ahp_protocol.client.transports import open_transport

    person = Person(pki)
    hook = pkce_hook(backend.url, f"{auth_server.url}/plainauth")
    transport = open_transport(hook, environ=environ(pki), interaction=person)
    try:
        failure, exchange = await call(transport)
    finally:
        await transport.aclose()
    assert failure.failure == FailureClass.AUTH_FAILED and exchange.attempts == 0
    assert "not an allowed destination" in failure.detail and person.urls == []


async def test_pkce_through_the_dispatcher_only_with_an_interaction(
    backend: Proc, auth_server: Proc, pki: dict[str, str]
) -> None:
    from ahp_protocol.client import Dispatcher, RegistrationError
    from ahp_protocol.wire.registration import parse_registration

    entry = pkce_hook(backend.url, f"{auth_server.url}/good").model_dump(
        by_alias=True, exclude_none=True
    )
    entry["subscriptions"] = [
        {"mode": "intercept", "events": ["tool.before"], "timeoutMs": 8000,
         "failurePolicy": "fail-closed", "content": {"default": "body"}}
    ]  # fmt: skip
    reg = parse_registration({"protocolVersion": "draft", "hooks": [entry]})
    caps = {"tool.before": {"effects": ["deny"]}}
    with pytest.raises(RegistrationError) as refused:  # a non-interactive host: at load
        Dispatcher(reg, capabilities=caps, environ=environ(pki))
    assert "interactive" in str(refused.value)
    person = Person(pki)
    try:
        async with Dispatcher(
            reg, capabilities=caps, environ=environ(pki), interaction=person
        ) as hooks:
            result = await hooks.intercept(tool_before(command="rm -rf /"))
    finally:
        person.join()
    assert result.permission == "deny" and not result.synthetic_denial  # the backend's deny
    assert len(person.urls) == 1

"""OAuth rules in memory: challenge parsing, the discovery URL orders, the destination
rule, the harness's load-time checks of an ``oauth`` binding, and secret-free reprs.
(The behaviour over the network is ``test_oauth_http.py``'s.)"""

from __future__ import annotations

from typing import Any

import pytest
from ahp_protocol.client import FailureClass, OperationalFailure, RegistrationError
from ahp_protocol.client._checks import check_registration
from ahp_protocol.client.oauth import (
    TokenCache,
    _Token,
    authorization_server_metadata_urls,
    check_destination,
    parse_bearer_challenge,
    protected_resource_metadata_urls,
    resolve_secret_ref,
)
from ahp_protocol.wire.registration import parse_registration

SECRET = "cs-SECRET-do-not-echo"


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        ("Bearer", {}),
        ('Bearer resource_metadata="https://r.example/.well-known/x"',
         {"resource_metadata": "https://r.example/.well-known/x"}),
        ('Bearer error="invalid_token", error_description="a \\"quoted\\" text"',
         {"error": "invalid_token", "error_description": 'a "quoted" text'}),
        ('Basic realm="x", Bearer scope="a b", resource_metadata=https://r/m',
         {"scope": "a b", "resource_metadata": "https://r/m"}),
        ('Bearer realm="a", Basic realm="b"', {"realm": "a"}),
        ('bearer error=insufficient_scope', {"error": "insufficient_scope"}),
        ('Basic realm="x"', None),
        ("", None),
        ('Negotiate abc==', None),
    ],
)  # fmt: skip
def test_bearer_challenge(header: str, expected: dict[str, str] | None) -> None:
    assert parse_bearer_challenge(header) == expected


def test_authorization_server_metadata_order() -> None:
    assert authorization_server_metadata_urls("https://as.example") == [
        "https://as.example/.well-known/oauth-authorization-server",
        "https://as.example/.well-known/openid-configuration",
    ]
    assert authorization_server_metadata_urls("https://as.example/tenant/1/") == [
        "https://as.example/.well-known/oauth-authorization-server/tenant/1",
        "https://as.example/.well-known/openid-configuration/tenant/1",
        "https://as.example/tenant/1/.well-known/openid-configuration",
    ]


def test_protected_resource_metadata_order() -> None:
    assert protected_resource_metadata_urls("https://r.example/hooks/ahp?x=1") == [
        "https://r.example/.well-known/oauth-protected-resource/hooks/ahp",
        "https://r.example/.well-known/oauth-protected-resource",
    ]
    assert protected_resource_metadata_urls("https://r.example") == [
        "https://r.example/.well-known/oauth-protected-resource"
    ]


@pytest.mark.parametrize(
    "url",
    [
        "http://as.example/token",  # plain http to a remote host
        "https://user:pw@as.example/token",  # userinfo
        "ftp://as.example/x",
        "https://as.example/token#frag",
        "file:///etc/passwd",
    ],
)
def test_destination_rule_refuses(url: str) -> None:
    with pytest.raises(OperationalFailure) as failed:
        check_destination(url)
    assert failed.value.failure == FailureClass.AUTH_FAILED


@pytest.mark.parametrize("url", ["https://as.example/t", "http://127.0.0.1:8/t", "http://[::1]/"])
def test_destination_rule_allows(url: str) -> None:
    assert check_destination(url) == url


def test_secret_references() -> None:
    env = {"S": SECRET}
    assert resolve_secret_ref("env:S", env) == SECRET
    assert resolve_secret_ref("env:T", env) is None
    assert resolve_secret_ref("vault://x", env) is None


def doc(**auth: Any) -> Any:
    base = {
        "type": "oauth",
        "resource": "https://r.example/ahp",
        "issuer": "https://as.example",
        "clientId": "harness",
        "flow": "client_credentials",
        "clientSecretRef": "env:SECRET",
    }
    base.update(auth)
    return parse_registration(
        {
            "protocolVersion": "draft",
            "hooks": [
                {
                    "id": "com.example.o",
                    "transport": {"type": "http", "url": "https://r.example/ahp"},
                    "authentication": {k: v for k, v in base.items() if v is not None},
                    "subscriptions": [
                        {
                            "mode": "intercept",
                            "events": ["tool.before"],
                            "timeoutMs": 1000,
                            "failurePolicy": "fail-closed",
                            "content": {"default": "body"},
                        }
                    ],
                }
            ],
        }
    )


DECLARED = {"tool.before": {"effects": ["deny"]}}


@pytest.mark.parametrize(
    ("auth", "env", "message"),
    [
        ({"flow": "authorization_code_pkce"}, {"SECRET": SECRET},
         "hooks[0].authentication.flow: authorization_code_pkce is interactive"),
        ({"clientSecretRef": "vault://kv/x"}, {},
         "hooks[0].authentication.clientSecretRef: this harness resolves only env:NAME"),
        ({}, {}, "hooks[0].authentication.clientSecretRef: environment variable SECRET is not set"),
        ({}, {"SECRET": SECRET, "AHP_CA_BUNDLE": "/nonexistent/ca.pem"},
         "AHP_CA_BUNDLE: the CA bundle it names cannot be loaded"),
    ],
)  # fmt: skip
def test_load_time_refusals(auth: dict[str, Any], env: dict[str, str], message: str) -> None:
    with pytest.raises(RegistrationError) as refused:
        check_registration(doc(**auth), env, DECLARED)
    assert str(refused.value).startswith(message), str(refused.value)
    assert SECRET not in str(refused.value)


def test_a_usable_binding_passes() -> None:
    check_registration(doc(), {"SECRET": SECRET}, DECLARED)
    check_registration(doc(clientSecretRef=None), {}, DECLARED)  # a public client


def test_reprs_hold_no_secret() -> None:
    from ahp_protocol.client.oauth import OAuthSession
    from ahp_protocol.client.transports import open_transport

    cache = TokenCache()
    cache.put(("i", "c", "r", ()), _Token("eyJ-token-value", None, "refresh-value"))
    hook = doc().hooks[0]
    session = OAuthSession(hook.authentication, environ={"SECRET": SECRET}, cache=cache)
    transport = open_transport(hook, environ={"SECRET": SECRET})
    shown = repr(cache) + repr(cache.get(("i", "c", "r", ()))) + repr(session) + repr(transport)
    for secret in ("eyJ-token-value", "refresh-value", SECRET):
        assert secret not in shown


def test_resource_server_configuration() -> None:
    from ahp_protocol.server.oauth import ResourceServer

    rs = ResourceServer(resource="https://r.example/hooks/ahp", issuer="https://as.example/t")
    assert rs.metadata_path == "/.well-known/oauth-protected-resource/hooks/ahp"
    assert rs.metadata_url == "https://r.example/.well-known/oauth-protected-resource/hooks/ahp"
    for bad in (
        {"resource": "https://r.example/", "issuer": "http://as.example"},  # issuer not https
        {"resource": "http://r.example/", "issuer": "https://as.example"},  # remote http
        {"resource": "https://r.example/#x", "issuer": "https://as.example"},
    ):
        with pytest.raises(ValueError):
            ResourceServer(**bad)


def test_pkce_is_accepted_in_an_interactive_host() -> None:
    check_registration(doc(flow="authorization_code_pkce"), {"SECRET": SECRET}, DECLARED,
                       interactive=True)  # fmt: skip

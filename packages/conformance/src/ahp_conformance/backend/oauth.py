"""Check group ``oauth.*`` (HTTP, with ``--oauth-client-id``): a backend that requires OAuth.

The judge acts as a harness with no binding would (draft §8.2, capability-auth.md):

1. ``oauth.challenge``: a request without credentials gets ``401`` with a ``Bearer``
   ``WWW-Authenticate`` challenge (never a result);
2. ``oauth.resource-metadata``: the RFC 9728 document (the challenge's
   ``resource_metadata``, else the path-specific then the root well-known URL) names this
   URL as its ``resource`` (a trailing ``/`` aside) and at least one authorization server;
3. ``oauth.authorization-server``: the first one's RFC 8414 / OpenID metadata is found
   and names that issuer exactly (https; every URL https or loopback http);
4. ``oauth.accepted``: a client-credentials token for the resource (RFC 8707, with the
   ``--oauth-scope`` scopes, the client secret from ``--oauth-client-secret-env``) gets a
   result; the rest of the run then sends it, as a harness would;
5. ``oauth.invalid-token``: the same token with its signature altered gets ``401`` with
   ``error="invalid_token"``;
6. ``oauth.wrong-resource``: a token the authorization server issues for another resource
   (this URL with ``/not-this-backend`` appended) gets ``401``; ``n/a`` when the server
   will not issue one.

Each check shows AHP-AUTH-001. The discovery and destination rules are the kit client's
(:mod:`ahp_protocol.client.oauth`, one rule, one place); TLS to the authorization server
is verified against the default CAs or ``AHP_CA_BUNDLE``. Tokens and the secret are handed
to the report as secrets (redacted wherever they would appear). Not judged: expiry and
scope enforcement (the judge cannot mint an expired or narrower token an arbitrary
authorization server would sign).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ahp_conformance.backend.links import HttpLink
from ahp_conformance.backend.probes import frame
from ahp_conformance.backend.run import Run
from ahp_conformance.report import Evidence

REQ = ["AHP-AUTH-001"]


@dataclass
class OAuthClient:
    """What the judge authenticates with: a client registered at the backend's issuer."""

    client_id: str
    secret: str | None = field(default=None, repr=False)
    scopes: Sequence[str] = ()
    secrets: list[str] = field(default_factory=list, repr=False)
    """Every token and secret seen, for the report to redact."""


def _header(headers: Any, name: str) -> str:
    for key, value in dict(headers or {}).items():
        if str(key).lower() == name:
            return str(value)
    return ""


def _async(fn: Any, *args: Any) -> Any:
    import anyio

    return anyio.run(fn, *args)


async def _discover(url: str, challenge: dict[str, str]) -> tuple[dict[str, Any], dict[str, Any]]:
    import httpx
    from ahp_protocol.client.oauth import discover_authorization_server, discover_protected_resource
    from ahp_protocol.client.transports.http import tls_verify

    async with httpx.AsyncClient(
        verify=tls_verify(os.environ.get("AHP_CA_BUNDLE")),
        trust_env=False,
        follow_redirects=False,
        timeout=10.0,
    ) as http:
        resource = await discover_protected_resource(http, url, challenge)
        servers = resource["authorization_servers"]
        if not servers:
            return resource, {}
        return resource, await discover_authorization_server(http, servers[0])


async def _token(client: OAuthClient, issuer: str, resource: str) -> str | None:
    import httpx
    from ahp_protocol.client._failures import OperationalFailure
    from ahp_protocol.client.oauth import OAuthSession, TokenCache
    from ahp_protocol.client.transports.http import tls_verify
    from ahp_protocol.wire.registration import OAuthAuthentication

    auth = OAuthAuthentication(
        resource=resource,
        issuer=issuer,
        client_id=client.client_id,
        flow="client_credentials",
        scopes=list(client.scopes) or None,
        client_secret_ref=None if client.secret is None else "env:SECRET",
    )
    env = {} if client.secret is None else {"SECRET": client.secret}
    verify = tls_verify(os.environ.get("AHP_CA_BUNDLE"))
    session = OAuthSession(auth, environ=env, verify=verify, cache=TokenCache())
    async with httpx.AsyncClient(verify=verify, trust_env=False, follow_redirects=False) as http:
        try:
            value = await session.authorization(http)
        except OperationalFailure:
            return None
    token = value.removeprefix("Bearer ")
    client.secrets.append(token)
    return token


def oauth_checks(run: Run, link: HttpLink, client: OAuthClient) -> None:
    """The ``oauth.*`` checks; on success the link sends the token from then on."""
    from ahp_protocol.client._failures import OperationalFailure
    from ahp_protocol.client.oauth import parse_bearer_challenge

    run.progress("OAuth: challenge, protected-resource metadata, token, refusals")
    url = link.peer.url
    _rid, probe = run.msgs.probe("oauth.challenge")
    outcome = link.post(frame(probe), authorization=None)
    status = outcome.http.status if outcome.http else None
    www = _header(outcome.http.headers if outcome.http else {}, "www-authenticate")
    challenge = parse_bearer_challenge(www)
    title = "a request without credentials gets 401 with a Bearer challenge"
    if status == 401 and challenge is not None:
        shown = "resource_metadata given" if "resource_metadata" in challenge else "no parameters"
        run.judge.check("oauth.challenge", title, REQ, "pass", f"HTTP 401 ({shown})")
    else:
        detail = outcome.failure or f"HTTP {status}, WWW-Authenticate {www!r}"
        run.judge.check("oauth.challenge", title, REQ, "fail", detail, outcome.evidence)
        challenge = challenge or {}
    try:
        resource_doc, server_doc = _async(_discover, url, challenge)
    except OperationalFailure as failure:
        run.judge.check(
            "oauth.resource-metadata",
            "the protected-resource metadata names this resource and its authorization server",
            REQ,
            "fail",
            failure.detail,
        )
        return
    resource = resource_doc["resource"]
    title = "the protected-resource metadata names this resource and its authorization server"
    if resource.rstrip("/") == url.rstrip("/") and resource_doc["authorization_servers"]:
        run.judge.check("oauth.resource-metadata", title, REQ, "pass", resource)
    else:
        run.judge.check(
            "oauth.resource-metadata",
            title,
            REQ,
            "fail",
            f"resource {resource!r} for {url!r}, authorization servers "
            f"{resource_doc['authorization_servers']!r}",
            Evidence.of(None, resource_doc),
        )
        return
    issuer = server_doc.get("issuer", "")
    run.judge.check(
        "oauth.authorization-server",
        "the authorization server's metadata is found and names that issuer",
        REQ,
        "pass",
        issuer,
    )
    token = _async(_token, client, issuer, resource)
    title = "a request with a token for this resource gets a result"
    if token is None:
        run.judge.check(
            "oauth.accepted",
            title,
            REQ,
            "fail",
            "the authorization server issued no token to --oauth-client-id (check the client "
            "and its secret); the rest of the run sends no token",
        )
        return
    _rid, probe = run.msgs.probe("oauth.accepted")
    outcome = link.post(frame(probe), authorization="Bearer " + token)
    status = outcome.http.status if outcome.http else None
    if status == 200 and any("result" in r for r in outcome.responses):
        run.judge.check("oauth.accepted", title, REQ, "pass")
        link.peer.token = token
    else:
        run.judge.check(
            "oauth.accepted", title, REQ, "fail", outcome.failure or f"HTTP {status}",
            outcome.evidence,
        )  # fmt: skip
        return
    head, _, signature = token.rpartition(".")
    forged = head + "." + ("A" if signature[:1] != "A" else "B") + signature[1:]
    _rid, probe = run.msgs.probe("oauth.invalid-token")
    outcome = link.post(frame(probe), authorization="Bearer " + forged)
    status = outcome.http.status if outcome.http else None
    www = _header(outcome.http.headers if outcome.http else {}, "www-authenticate")
    error = (parse_bearer_challenge(www) or {}).get("error")
    title = 'a token with a bad signature gets 401 with error="invalid_token"'
    if status == 401 and error == "invalid_token":
        run.judge.check("oauth.invalid-token", title, REQ, "pass")
    else:
        detail = outcome.failure or f"HTTP {status}, WWW-Authenticate {www!r}"
        run.judge.check("oauth.invalid-token", title, REQ, "fail", detail, outcome.evidence)
    other = _async(_token, client, issuer, url.rstrip("/") + "/not-this-backend")
    title = "a token for another resource gets 401"
    if other is None:
        run.judge.check(
            "oauth.wrong-resource", title, REQ, "n/a",
            "the authorization server issues no token for another resource",
        )  # fmt: skip
        return
    _rid, probe = run.msgs.probe("oauth.wrong-resource")
    outcome = link.post(frame(probe), authorization="Bearer " + other)
    status = outcome.http.status if outcome.http else None
    if status == 401:
        run.judge.check("oauth.wrong-resource", title, REQ, "pass")
    else:
        detail = outcome.failure or f"HTTP {status}"
        run.judge.check("oauth.wrong-resource", title, REQ, "fail", detail, outcome.evidence)

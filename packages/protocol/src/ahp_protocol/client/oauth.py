"""OAuth for HTTP backends: the draft's ``oauth`` preset and the 401 discovery (§8.2).

Owns :class:`OAuthSession` (one per backend binding: acquire, cache, refresh and
re-acquire a resource-bound access token; handle a ``401`` challenge),
:func:`authorization` (the one call other code uses for an ``Authorization`` value,
e.g. an upload's own ``auth``), the discovery steps (RFC 9728 protected-resource
metadata, RFC 8414 / OpenID authorization-server metadata, in the order MCP 2025-11-25
uses), the destination rule for every discovered URL and the client-secret reference
rule. Authlib does the token requests; it is imported only here, and this module only
when a binding uses OAuth.

The procedure, all inside the caller's deadline (no step resets or extends it; the
transport's caller wraps the whole exchange in ``anyio.fail_after``, and
:func:`authorization` takes an absolute ``deadline``):

1. authorization-server metadata of the configured ``issuer``: ``/.well-known/
   oauth-authorization-server`` (path inserted after the host), then the OpenID
   ``openid-configuration`` forms. The document's ``issuer`` must equal the configured
   one exactly, its ``token_endpoint`` must pass the destination rule;
2. a token request to that endpoint (``client_credentials``, the secret sent only
   there with ``client_secret_basic``, or none without ``clientSecretRef``) with
   ``resource=<resource>`` (RFC 8707) and the configured ``scopes``;
3. the token is cached per (issuer, clientId, resource, scopes) in :data:`TOKENS` and
   used until shortly before ``expires_in`` runs out (a tenth of its life, at least 5 s,
   at most 60 s), then re-acquired (with its refresh token when the server gave one);
4. on a ``401`` with a ``Bearer`` challenge (the transport decides whether the message
   may be retried: only intercept and configuration requests, once) the
   protected-resource metadata is read (the challenge's ``resource_metadata``, else the
   path-specific then the root well-known URL of the endpoint); its ``resource`` must
   equal the configured ``resource`` and its ``authorization_servers`` must name the
   configured issuer, else the challenge is refused: a backend never switches the
   client to another identity, issuer or resource. The cached token is dropped and a
   new one acquired.

Destination rule (:func:`check_destination`, the endpoint rule of the HTTP transport):
``https``, or plain ``http`` to a loopback host only; no userinfo. Redirects are never
followed (a ``3xx`` at any step is a refusal). TLS is verified against the system's
CAs, or only against the PEM bundle named by ``AHP_CA_BUNDLE`` (:data:`CA_BUNDLE_ENV`)
in the host environment when set; verification is never disabled.

Client secrets: ``clientSecretRef`` is a reference, ``env:NAME`` (environment variable
``NAME`` of the host environment) unless the host passes its own ``resolve_secret``.

Every problem is an ``OperationalFailure(AUTH_FAILED, <fixed phrase>)``; a token,
secret, authorization code or server-supplied text appears in no failure, log or
``repr``. Never: falls back to another binding or to no authentication, retries on its
own, follows a redirect, or asks for scopes the binding did not name.

``authorization_code_pkce`` (a person signs in): given an ``interaction`` (a host that
can show a person a URL), the session listens on a loopback port (``127.0.0.1``, the
only redirect it ever names: ``http://127.0.0.1:PORT/callback``), shows the authorization
URL (the metadata's ``authorization_endpoint``, which must pass the destination rule and
offer ``S256``; PKCE S256, a fresh ``state``, ``resource`` and ``scope``), takes the one
callback that carries its ``state`` (others get ``400``) and exchanges the code with its
verifier. Without an ``interaction`` it fails (the harness refuses such a registration
when it loads, draft §9 item 6). The wait for the person is inside the deadline too.
"""

from __future__ import annotations

import ssl
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import urlsplit

import httpx

from ahp_protocol import oauth_metadata as _m
from ahp_protocol.client._failures import FailureClass, OperationalFailure
from ahp_protocol.endpoints import CA_BUNDLE_ENV
from ahp_protocol.oauth_metadata import (
    authorization_server_metadata_urls,
    parse_bearer_challenge,
    protected_resource_metadata_urls,
)

if TYPE_CHECKING:
    from ahp_protocol.wire.registration import OAuthAuthentication

__all__ = [
    "CA_BUNDLE_ENV",
    "TOKENS",
    "DiscoverySession",
    "Interaction",
    "OAuthSession",
    "SecretResolver",
    "TokenCache",
    "authorization",
    "authorization_server_metadata_urls",
    "check_destination",
    "parse_bearer_challenge",
    "protected_resource_metadata_urls",
    "resolve_secret_ref",
    "verify_setting",
]

SecretResolver = Callable[[str], "str | Awaitable[str | None] | None"]
Interaction = Callable[[str], "Awaitable[None] | None"]
"""Shows a person an authorization URL to open (``authorization_code_pkce``)."""
"""Resolves a ``clientSecretRef``; ``None`` means unresolvable (nothing is sent)."""

_REFRESH_MARGIN_MIN_S: Final = 5.0
_REFRESH_MARGIN_MAX_S: Final = 60.0


def _fail(detail: str) -> OperationalFailure:
    return OperationalFailure(FailureClass.AUTH_FAILED, detail)


# --------------------------------------------------------------------------- rules


def resolve_secret_ref(ref: str, environ: Mapping[str, str]) -> str | None:
    """The default ``clientSecretRef`` rule: ``env:NAME`` is environment variable ``NAME``
    (``None`` when unset, empty or another form of reference)."""
    if not ref.startswith("env:"):
        return None
    return environ.get(ref[4:]) or None


def verify_setting(environ: Mapping[str, str]) -> ssl.SSLContext | bool:
    """What httpx ``verify`` is for this host: the ``AHP_CA_BUNDLE`` CAs when set, else
    the default (``True``); ``AUTH_FAILED`` when it cannot be loaded
    (:func:`ahp_protocol.endpoints.tls_verify`)."""
    from ahp_protocol.endpoints import tls_verify

    try:
        return tls_verify(environ.get(CA_BUNDLE_ENV))
    except ValueError as exc:
        raise _fail(str(exc)) from None


def check_destination(url: str) -> str:
    """``url`` if it may be contacted (https, or http to loopback; no userinfo), else
    ``AUTH_FAILED`` (:func:`ahp_protocol.oauth_metadata.check_destination`)."""
    try:
        return _m.check_destination(url)
    except _m.MetadataError as exc:
        raise _fail(exc.detail) from None


async def _get_json(http: httpx.AsyncClient, url: str) -> dict[str, Any] | None:
    try:
        return await _m.get_json(http, url)
    except _m.MetadataError as exc:
        raise _fail(exc.detail) from None


async def discover_authorization_server(http: httpx.AsyncClient, issuer: str) -> dict[str, Any]:
    """The metadata of ``issuer`` (issuer equal, token endpoint allowed), or ``AUTH_FAILED``."""
    try:
        return await _m.discover_authorization_server(http, issuer)
    except _m.MetadataError as exc:
        raise _fail(exc.detail) from None


async def discover_protected_resource(
    http: httpx.AsyncClient, endpoint: str, challenge: Mapping[str, str]
) -> dict[str, Any]:
    """The endpoint's RFC 9728 metadata (see :mod:`ahp_protocol.oauth_metadata`), or
    ``AUTH_FAILED``."""
    try:
        return await _m.discover_protected_resource(http, endpoint, challenge)
    except _m.MetadataError as exc:
        raise _fail(exc.detail) from None


# --------------------------------------------------------------------------- tokens


@dataclass
class _Token:
    value: str = field(repr=False)
    refresh_at: float | None
    refresh_token: str | None = field(default=None, repr=False)


class TokenCache:
    """Access tokens by (issuer, clientId, resource, scopes); values never shown."""

    def __init__(self) -> None:
        self._tokens: dict[tuple[str, str, str, tuple[str, ...]], _Token] = {}

    def __repr__(self) -> str:
        return f"TokenCache({len(self._tokens)} tokens)"

    def get(self, key: tuple[str, str, str, tuple[str, ...]]) -> _Token | None:
        return self._tokens.get(key)

    def put(self, key: tuple[str, str, str, tuple[str, ...]], token: _Token) -> None:
        self._tokens[key] = token

    def drop(self, key: tuple[str, str, str, tuple[str, ...]]) -> None:
        self._tokens.pop(key, None)

    def clear(self) -> None:
        self._tokens.clear()


TOKENS: Final = TokenCache()
"""The process's token cache (the default of every :class:`OAuthSession`)."""


def _is_token(value: object) -> bool:
    return (
        isinstance(value, str)
        and 0 < len(value) <= 16384
        and value.isascii()
        and (value.isprintable() and " " not in value)
    )


class OAuthSession:
    """One OAuth binding's tokens (see the module docstring); safe to share by tasks."""

    def __init__(
        self,
        auth: OAuthAuthentication,
        *,
        environ: Mapping[str, str],
        resolve_secret: SecretResolver | None = None,
        verify: ssl.SSLContext | bool | None = None,
        cache: TokenCache = TOKENS,
        interaction: Interaction | None = None,
    ) -> None:
        self.auth = auth
        self.interaction = interaction
        """Shows a person the authorization URL (``authorization_code_pkce``); ``None``: a
        non-interactive host, where that flow fails."""
        self._environ = environ
        self._resolve_secret = resolve_secret
        self._verify = verify
        """TLS trust of the token request (default: ``AHP_CA_BUNDLE`` of ``environ``)."""
        self._cache = cache
        scopes = tuple(sorted(set(auth.scopes or ())))
        self._key = (auth.issuer, auth.client_id, auth.resource, scopes)
        self._scopes = scopes
        self._metadata: dict[str, Any] | None = None
        import anyio

        self._lock = anyio.Lock()

    def __repr__(self) -> str:
        a = self.auth
        return (
            f"OAuthSession(issuer={a.issuer!r}, client_id={a.client_id!r}, resource={a.resource!r})"
        )

    async def authorization(self, http: httpx.AsyncClient) -> str:
        """``Bearer <token>`` for the binding, from the cache or newly acquired."""
        async with self._lock:
            token = self._cache.get(self._key)
            if token is not None and (
                token.refresh_at is None or time.monotonic() < token.refresh_at
            ):
                return "Bearer " + token.value
            token = await self._acquire(http, token)
            self._cache.put(self._key, token)
            return "Bearer " + token.value

    def invalidate(self) -> None:
        """Forget the cached token (the backend refused it)."""
        self._cache.drop(self._key)

    async def challenged(
        self, http: httpx.AsyncClient, endpoint: str, www_authenticate: str
    ) -> None:
        """A ``401`` from ``endpoint``: accept the challenge (the caller may retry once with
        a new token) or raise ``AUTH_FAILED``. Never switches identity or resource."""
        self.invalidate()
        challenge = parse_bearer_challenge(www_authenticate)
        if challenge is None:
            raise _fail("the backend refused the request without a Bearer challenge")
        if challenge.get("error") == "insufficient_scope":
            raise _fail("the backend needs scopes the binding does not grant")
        document = await discover_protected_resource(http, endpoint, challenge)
        if document["resource"] != self.auth.resource:
            raise _fail("the backend's protected resource metadata names another resource")
        if self.auth.issuer not in document["authorization_servers"]:
            raise _fail("the backend trusts another authorization server than the binding names")

    # -- internals ---------------------------------------------------------------

    async def _secret(self) -> str | None:
        ref = self.auth.client_secret_ref
        if ref is None:
            return None
        import inspect

        try:
            if self._resolve_secret is None:
                value: object = resolve_secret_ref(ref, self._environ)
            else:
                value = self._resolve_secret(ref)
                if inspect.isawaitable(value):
                    value = await value
        except Exception:
            raise _fail("the client secret reference cannot be resolved") from None
        if not isinstance(value, str) or not value:
            raise _fail("the client secret reference cannot be resolved")
        return value

    async def _acquire(self, http: httpx.AsyncClient, old: _Token | None) -> _Token:
        interactive = self.auth.flow == "authorization_code_pkce"
        if interactive and self.interaction is None:
            raise _fail("interactive OAuth needs a person, and this host is non-interactive")
        secret = await self._secret()
        verify = verify_setting(self._environ) if self._verify is None else self._verify
        if self._metadata is None:
            self._metadata = await discover_authorization_server(http, self.auth.issuer)
        endpoint = self._metadata["token_endpoint"]
        params: dict[str, Any] = {"resource": self.auth.resource}
        if self._scopes:
            params["scope"] = list(self._scopes)
        async with httpx.AsyncClient(
            verify=verify, trust_env=False, follow_redirects=False, timeout=httpx.Timeout(None)
        ) as client:
            if old is not None and old.refresh_token:
                reply = await self._token_request(
                    client, endpoint, secret, "refresh_token", params, old.refresh_token
                )
                if reply is not None:
                    return self._token(reply, old)
            if interactive:
                code, redirect_uri = await self._authorize(self._metadata, params)
                extra = {**params, "code": code, "code_verifier": self._verifier}
                reply = await self._token_request(
                    client, endpoint, secret, "authorization_code", extra,
                    redirect_uri=redirect_uri,
                )  # fmt: skip
            else:
                reply = await self._token_request(
                    client, endpoint, secret, "client_credentials", params
                )
        if reply is None:
            raise _fail("the authorization server did not issue a token")
        return self._token(reply, None)

    async def _token_request(
        self,
        client: httpx.AsyncClient,
        endpoint: str,
        secret: str | None,
        grant: str,
        params: dict[str, Any],
        refresh_token: str | None = None,
        redirect_uri: str | None = None,
    ) -> dict[str, Any] | None:
        """One token request (Authlib encodes it and the client authentication); the
        JSON reply of a ``200``, else ``None``. Redirects and transport errors fail."""
        try:
            from authlib.oauth2.auth import ClientAuth  # type: ignore[import-untyped]
            from authlib.oauth2.rfc6749.parameters import (  # type: ignore[import-untyped]
                prepare_token_request,
            )
        except ImportError:
            raise _fail("OAuth needs the oauth extra: pip install 'ahp-protocol[oauth]'") from None

        extra = dict(params)
        if refresh_token is not None:
            extra["refresh_token"] = refresh_token
        body = prepare_token_request(grant, redirect_uri=redirect_uri, **extra)
        method = "client_secret_basic" if secret else "none"
        headers = {
            "Content-Type": "application/x-www-form-urlencoded",
            "Accept": "application/json",
        }
        _, headers, body = ClientAuth(self.auth.client_id, secret, method).prepare(
            "POST", endpoint, headers, body
        )
        try:
            response = await client.post(endpoint, content=body.encode(), headers=headers)
        except httpx.HTTPError:
            raise _fail("the token endpoint could not be reached over verified TLS") from None
        if 300 <= response.status_code < 400:
            raise _fail("the token endpoint redirected (not followed)")
        if response.status_code != 200 or len(response.content) > _m.MAX_METADATA_BYTES:
            return None  # error bodies may quote the request: never read into a failure
        try:
            reply = response.json()
        except ValueError:
            return None
        return reply if isinstance(reply, dict) else None

    async def _authorize(
        self, metadata: Mapping[str, Any], params: Mapping[str, Any]
    ) -> tuple[str, str]:
        """The authorization code grant with PKCE (RFC 7636, S256): a loopback redirect
        listener on ``127.0.0.1`` (RFC 8252 §7.3, a port of the system's choosing), the
        authorization URL shown to the person (:attr:`interaction`), the one callback with
        this attempt's ``state`` taken; (code, redirect URI). Inside the caller's deadline."""
        import inspect

        import anyio
        from authlib.common.security import generate_token  # type: ignore[import-untyped]
        from authlib.oauth2.rfc6749.parameters import (
            prepare_grant_uri,
        )
        from authlib.oauth2.rfc7636 import (  # type: ignore[import-untyped]
            create_s256_code_challenge,
        )

        endpoint = metadata.get("authorization_endpoint")
        if not isinstance(endpoint, str):
            raise _fail("the authorization server has no authorization endpoint")
        check_destination(endpoint)
        if "S256" not in (metadata.get("code_challenge_methods_supported") or ()):
            raise _fail("the authorization server does not support PKCE with S256")
        self._verifier = generate_token(64)
        state = generate_token(32)
        listener = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=0)
        async with listener:
            port = listener.extra(anyio.abc.SocketAttribute.local_port)
            redirect_uri = f"http://127.0.0.1:{port}/callback"
            url = prepare_grant_uri(
                endpoint,
                self.auth.client_id,
                "code",
                redirect_uri=redirect_uri,
                scope=params.get("scope"),
                state=state,
                code_challenge=create_s256_code_challenge(self._verifier),
                code_challenge_method="S256",
                resource=params["resource"],
            )
            assert self.interaction is not None
            shown = self.interaction(url)
            if inspect.isawaitable(shown):
                await shown
            code = await _callback(listener, state)
        return code, redirect_uri

    @staticmethod
    def _token(reply: Mapping[str, Any], old: _Token | None) -> _Token:
        value = reply.get("access_token")
        if not _is_token(value) or str(reply.get("token_type", "")).lower() != "bearer":
            raise _fail("the authorization server answered without a bearer access token")
        expires_in = reply.get("expires_in")
        refresh_at: float | None = None
        if isinstance(expires_in, (int, float)) and not isinstance(expires_in, bool):
            margin = min(max(expires_in / 10, _REFRESH_MARGIN_MIN_S), _REFRESH_MARGIN_MAX_S)
            refresh_at = time.monotonic() + float(expires_in) - margin
        refresh = reply.get("refresh_token")
        if not _is_token(refresh):
            refresh = old.refresh_token if old is not None else None
        return _Token(str(value), refresh_at, refresh if isinstance(refresh, str) else None)


_DONE_PAGE: Final = (
    b"HTTP/1.1 200 OK\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n"
    b"Content-Length: 48\r\n\r\nSigned in: you can close this window now. (AHP)\n"
)
_NOT_THIS: Final = (
    b"HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain\r\nConnection: close\r\n"
    b"Content-Length: 25\r\n\r\nnot the expected callback"
)


async def _callback(listener: Any, state: str) -> str:
    """The ``code`` of the first request to ``/callback`` carrying ``state``; any other
    request gets ``400`` and is ignored; an ``error`` with that state fails."""
    from urllib.parse import parse_qs

    import anyio

    found: list[str] = []
    failed: list[str] = []

    async def one(stream: Any) -> None:
        async with stream:
            head = b""
            with anyio.move_on_after(10):
                while b"\r\n\r\n" not in head and len(head) < 16384:
                    chunk = await stream.receive(4096)
                    if not chunk:
                        break
                    head += chunk
            line = head.split(b"\r\n", 1)[0].decode("latin-1", "replace").split(" ")
            target = urlsplit(line[1]) if len(line) == 3 and line[0] == "GET" else None
            query = parse_qs(target.query) if target is not None else {}
            if target is None or target.path != "/callback" or query.get("state") != [state]:
                await stream.send(_NOT_THIS)
                return
            await stream.send(_DONE_PAGE)
            if "code" in query:
                found.append(query["code"][0])
            else:
                failed.append("refused")
            tasks.cancel_scope.cancel()

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(listener.serve, one)
    if found:
        return found[0]
    raise _fail("the person or the authorization server refused the authorization")


_REGISTERED: dict[str, tuple[str, str | None]] = {}
"""Clients this process registered dynamically (RFC 7591), by token endpoint."""


class DiscoverySession:
    """A hook with no ``authentication`` whose backend answered ``401`` (draft §8.2 "No
    binding"): the protected-resource metadata (challenge, then well-known URLs) must name
    a resource that covers the endpoint (equal, or a path prefix of it) and an
    authorization server, whose metadata is discovered as for the preset; the client is
    registered there dynamically (RFC 7591, the metadata's ``registration_endpoint``,
    ``client_credentials`` with ``client_secret_basic``; once per server and process;
    without a registration endpoint the request fails: there is no client to use), and
    a token is requested for that resource with the challenge's ``scope`` (else the
    metadata's ``scopes_supported``). From then on it is an :class:`OAuthSession` for
    that resource and issuer: a later challenge that names another one is refused."""

    def __init__(
        self,
        endpoint: str,
        *,
        environ: Mapping[str, str],
        verify: ssl.SSLContext | bool | None = None,
        cache: TokenCache = TOKENS,
    ) -> None:
        self.endpoint = endpoint
        self._environ = environ
        self._verify = verify
        self._cache = cache
        self._session: OAuthSession | None = None

    def __repr__(self) -> str:
        return f"DiscoverySession(endpoint={self.endpoint!r}, bound={self._session is not None})"

    async def authorization(self, http: httpx.AsyncClient) -> str | None:
        """The token's header value once discovery has run, else ``None`` (send none)."""
        if self._session is None:
            return None
        return await self._session.authorization(http)

    def invalidate(self) -> None:
        if self._session is not None:
            self._session.invalidate()

    async def challenged(
        self, http: httpx.AsyncClient, endpoint: str, www_authenticate: str
    ) -> None:
        if self._session is not None:
            await self._session.challenged(http, endpoint, www_authenticate)
            return
        from ahp_protocol.wire.registration import OAuthAuthentication

        challenge = parse_bearer_challenge(www_authenticate)
        if challenge is None:
            raise _fail("the backend refused the request without a Bearer challenge")
        document = await discover_protected_resource(http, endpoint, challenge)
        resource = document["resource"]
        if not _covers(resource, endpoint):
            raise _fail("the backend's protected resource metadata names another resource")
        servers = document["authorization_servers"]
        if not servers:
            raise _fail("the backend's protected resource metadata names no authorization server")
        issuer = servers[0]
        metadata = await discover_authorization_server(http, issuer)
        verify = verify_setting(self._environ) if self._verify is None else self._verify
        client_id, secret = await _register(metadata, verify)
        scopes = (challenge.get("scope") or "").split() or [
            s for s in document.get("scopes_supported") or () if isinstance(s, str)
        ]
        auth = OAuthAuthentication(
            resource=resource,
            issuer=issuer,
            client_id=client_id,
            flow="client_credentials",
            scopes=scopes or None,
            client_secret_ref=None if secret is None else "registered",
        )
        session = OAuthSession(
            auth,
            environ=self._environ,
            resolve_secret=lambda _ref: secret,
            verify=verify,
            cache=self._cache,
        )
        session._metadata = metadata
        session.invalidate()
        self._session = session


def _covers(resource: str, endpoint: str) -> bool:
    r, e = urlsplit(resource), urlsplit(endpoint)
    if (r.scheme.lower(), r.netloc.lower()) != (e.scheme.lower(), e.netloc.lower()):
        return False
    base, path = r.path.rstrip("/"), e.path.rstrip("/")
    return not r.query and (path == base or path.startswith(base + "/"))


async def _register(
    metadata: Mapping[str, Any], verify: ssl.SSLContext | bool
) -> tuple[str, str | None]:
    """A client registered at the server's ``registration_endpoint`` (cached)."""
    token_endpoint = str(metadata["token_endpoint"])
    known = _REGISTERED.get(token_endpoint)
    if known is not None:
        return known
    endpoint = metadata.get("registration_endpoint")
    if not isinstance(endpoint, str):
        raise _fail(
            "the backend's authorization server offers no client registration and no client "
            "is configured for it (add an oauth binding)"
        )
    check_destination(endpoint)
    request = {
        "client_name": "ahp-protocol harness",
        "grant_types": ["client_credentials"],
        "token_endpoint_auth_method": "client_secret_basic",
    }
    try:
        async with httpx.AsyncClient(
            verify=verify, trust_env=False, follow_redirects=False, timeout=httpx.Timeout(None)
        ) as http:
            response = await http.post(endpoint, json=request)
    except httpx.HTTPError:
        raise _fail("the registration endpoint could not be reached over verified TLS") from None
    if 300 <= response.status_code < 400:
        raise _fail("the registration endpoint redirected (not followed)")
    try:
        reply = response.json() if response.status_code in (200, 201) else None
    except ValueError:
        reply = None
    client_id = reply.get("client_id") if isinstance(reply, dict) else None
    if not isinstance(client_id, str) or not client_id:
        raise _fail("the authorization server did not register a client")
    secret = reply.get("client_secret") if isinstance(reply, dict) else None
    registered = (client_id, secret if isinstance(secret, str) and secret else None)
    _REGISTERED[token_endpoint] = registered
    return registered


async def authorization(
    auth: OAuthAuthentication,
    http: httpx.AsyncClient,
    *,
    deadline: float | None = None,
    environ: Mapping[str, str] | None = None,
    resolve_secret: SecretResolver | None = None,
) -> str:
    """The ``Authorization`` header value (``Bearer …``) for an ``oauth`` binding.

    ``http`` is used for metadata discovery only (give it the destination's TLS
    settings and ``follow_redirects=False``); tokens come from :data:`TOKENS` or a new
    token request. ``deadline`` is an absolute :func:`anyio.current_time` value: past
    it, ``OperationalFailure(DEADLINE_EXCEEDED)``. ``environ`` (default ``os.environ``)
    resolves ``env:`` secret references and ``AHP_CA_BUNDLE``. Any other problem is
    ``OperationalFailure(AUTH_FAILED)`` with a fixed, credential-free detail. Stable
    signature (used by uploads, which authenticate independently of their event).
    """
    import os

    import anyio

    env = os.environ if environ is None else environ
    session = OAuthSession(
        auth, environ=env, resolve_secret=resolve_secret, verify=verify_setting(env)
    )
    if deadline is None:
        return await session.authorization(http)
    try:
        with anyio.fail_after(max(0.0, deadline - anyio.current_time())):
            return await session.authorization(http)
    except TimeoutError:
        raise OperationalFailure(
            FailureClass.DEADLINE_EXCEEDED, "authentication did not finish before the deadline"
        ) from None

"""The server kit as an OAuth resource server: JWT access tokens of one issuer (RFC 9068),
the RFC 6750 challenge and the RFC 9728 protected-resource metadata.

Owns :class:`ResourceServer`, which :class:`~ahp_protocol.server.asgi.App` consults
(``App(..., oauth=ResourceServer(...))``) before it reads a body:

- ``GET`` of :attr:`ResourceServer.metadata_path` (``/.well-known/
  oauth-protected-resource`` plus the resource's path) answers ``200`` with
  ``{"resource", "authorization_servers": [issuer], "bearer_methods_supported":
  ["header"], "scopes_supported"}``;
- a request without exactly one ``Authorization: Bearer <token>`` gets ``401`` with
  ``WWW-Authenticate: Bearer resource_metadata="<metadata URL>"`` (and ``scope`` when
  scopes are required); a token that does not verify gets the same with
  ``error="invalid_token"``; a valid token without every required scope gets ``403``
  with ``error="insufficient_scope"`` and the ``scope`` needed (RFC 6750 §3.1);
- a token verifies when its JWS signature checks against the issuer's JWKS (an
  asymmetric algorithm: RS256/384/512, PS256/384/512, ES256/384/512, EdDSA), ``iss`` is
  the issuer exactly, ``aud`` is (or contains) the resource, ``exp`` is present and not
  past and ``nbf``/``iat`` not in the future, each with ``leeway`` seconds (default 30);
  scopes come from ``scope`` (space-separated) or ``scp`` (a list).

The JWKS is found through the issuer's metadata (RFC 8414 / OpenID discovery, the rule
the client uses too, :mod:`ahp_protocol.oauth_metadata`: ``issuer`` equal, every URL
https or loopback http, no redirects), fetched
on first use, kept ``jwks_ttl`` seconds (default 300) and fetched again early, at most
once per 30 s, when a token names an unknown ``kid``. When the keys cannot be fetched
the request gets ``503`` (the backend cannot decide, it does not refuse). TLS to the
issuer is verified against the default CAs or ``ca_bundle`` (a PEM file).

Never: logs or echoes a token or a claim, accepts ``alg: none`` or a symmetric key, or
lets a token for another resource or issuer in. joserfc and httpx are imported only when
a ``ResourceServer`` is made (the ``oauth`` extra).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Sequence
from typing import Any, Final
from urllib.parse import urlsplit, urlunsplit

__all__ = ["ResourceServer"]

ALGORITHMS: Final = (
    "RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA",
)  # fmt: skip
_REFETCH_AFTER_S: Final = 30.0

Refusal = tuple[int, str, list[tuple[bytes, bytes]]]


def _kid(token: str) -> object:
    """The ``kid`` of a compact JWS's header (``None`` when absent or unreadable)."""
    import base64

    head = token.split(".", 1)[0]
    try:
        header = json.loads(base64.urlsafe_b64decode(head + "=" * (-len(head) % 4)))
    except (ValueError, UnicodeDecodeError):
        return None
    return header.get("kid") if isinstance(header, dict) else None


def _quote(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


class ResourceServer:
    """Validates one issuer's access tokens for ``resource`` (see the module docstring)."""

    def __init__(
        self,
        *,
        resource: str,
        issuer: str,
        scopes: Iterable[str] = (),
        ca_bundle: str | None = None,
        leeway: int = 30,
        jwks_ttl: float = 300.0,
    ) -> None:
        from ahp_protocol.endpoints import check_endpoint_url

        if urlsplit(issuer).scheme != "https":
            raise ValueError(f"the OAuth issuer must use https, not {issuer!r}")
        for what, url in (("resource", resource), ("issuer", issuer)):
            try:
                check_endpoint_url(url)
            except ValueError as exc:
                raise ValueError(f"the OAuth {what} {url!r}: {exc}") from None
        if urlsplit(resource).query or urlsplit(resource).fragment:
            raise ValueError("the resource identifier must not have a query or fragment")
        if leeway < 0 or jwks_ttl <= 0:
            raise ValueError("leeway must be >= 0 and jwks_ttl > 0")
        self.resource = resource
        self.issuer = issuer
        self.scopes: tuple[str, ...] = tuple(dict.fromkeys(scopes))
        self.ca_bundle = ca_bundle
        self.leeway = leeway
        self.jwks_ttl = jwks_ttl
        parts = urlsplit(resource)
        self.metadata_path = "/.well-known/oauth-protected-resource" + parts.path.rstrip("/")
        self.metadata_url = urlunsplit((parts.scheme, parts.netloc, self.metadata_path, "", ""))
        self._keys: Any = None
        self._fetched = 0.0
        import anyio

        self._lock = anyio.Lock()
        challenge = f"Bearer resource_metadata={_quote(self.metadata_url)}"
        if self.scopes:
            challenge += f", scope={_quote(' '.join(self.scopes))}"
        self._missing: Refusal = (
            401,
            "authentication required: send an OAuth access token (Authorization: Bearer)\n",
            [(b"www-authenticate", challenge.encode("latin-1"))],
        )
        invalid = f'Bearer error="invalid_token", resource_metadata={_quote(self.metadata_url)}'
        self._invalid: Refusal = (
            401,
            "the access token was not accepted\n",
            [(b"www-authenticate", invalid.encode("latin-1"))],
        )
        scope = _quote(" ".join(self.scopes))
        insufficient = (
            f'Bearer error="insufficient_scope", scope={scope}, '
            f"resource_metadata={_quote(self.metadata_url)}"
        )
        self._insufficient: Refusal = (
            403,
            "the access token lacks a required scope\n",
            [(b"www-authenticate", insufficient.encode("latin-1"))],
        )

    def __repr__(self) -> str:
        return f"ResourceServer(resource={self.resource!r}, issuer={self.issuer!r})"

    def metadata_document(self) -> bytes:
        """The RFC 9728 document served at :attr:`metadata_path`."""
        document: dict[str, Any] = {
            "resource": self.resource,
            "authorization_servers": [self.issuer],
            "bearer_methods_supported": ["header"],
        }
        if self.scopes:
            document["scopes_supported"] = list(self.scopes)
        return json.dumps(document).encode()

    async def refusal(self, authorization: Sequence[bytes]) -> Refusal | None:
        """``None`` when the request's ``Authorization`` values carry an acceptable
        token, else the (status, text, headers) to answer with."""
        if not authorization:
            return self._missing
        if len(authorization) != 1:
            return self._invalid
        scheme, _, token_bytes = bytes(authorization[0]).strip(b" \t").partition(b" ")
        if scheme.lower() != b"bearer":
            return self._missing
        try:
            token = token_bytes.strip(b" \t").decode("ascii")
        except UnicodeDecodeError:
            return self._invalid
        claims = await self._verify(token)
        if claims is None:
            return self._invalid if self._keys is not None else _UNAVAILABLE
        granted = claims.get("scope")
        have = set(granted.split()) if isinstance(granted, str) else set()
        scp = claims.get("scp")
        if isinstance(scp, list):
            have |= {s for s in scp if isinstance(s, str)}
        if not set(self.scopes) <= have:
            return self._insufficient
        return None

    # -- internals -----------------------------------------------------------------

    async def _verify(self, token: str) -> dict[str, Any] | None:
        from joserfc import jwt
        from joserfc.errors import JoseError

        keys = await self._keyset(refresh=False)
        if keys is not None and _kid(token) not in {k.kid for k in keys.keys}:
            keys = await self._keyset(refresh=True)  # an unknown kid: keys may have rotated
        if keys is None:
            return None
        try:
            decoded = jwt.decode(token, keys, algorithms=list(ALGORITHMS))
        except (JoseError, ValueError, TypeError, KeyError):
            return None
        registry = jwt.JWTClaimsRegistry(
            leeway=self.leeway,
            iss={"essential": True, "value": self.issuer},
            aud={"essential": True, "value": self.resource},
            exp={"essential": True},
        )
        try:
            registry.validate(decoded.claims)
        except (JoseError, ValueError, TypeError):
            return None
        return dict(decoded.claims)

    async def _keyset(self, *, refresh: bool) -> Any:
        now = time.monotonic()
        async with self._lock:
            stale = self._keys is None or now - self._fetched > self.jwks_ttl
            early = refresh and now - self._fetched > _REFETCH_AFTER_S
            if stale or early:
                keys = await self._fetch_keys()
                if keys is not None:
                    self._keys, self._fetched = keys, now
                elif stale:
                    self._keys = None
            return self._keys

    async def _fetch_keys(self) -> Any:
        import httpx
        from joserfc.jwk import KeySet

        from ahp_protocol.endpoints import tls_verify
        from ahp_protocol.oauth_metadata import (
            MetadataError,
            check_destination,
            discover_authorization_server,
            get_json,
        )

        try:
            async with httpx.AsyncClient(
                verify=tls_verify(self.ca_bundle),
                trust_env=False,
                follow_redirects=False,
                timeout=10.0,
            ) as http:
                metadata = await discover_authorization_server(http, self.issuer)
                uri = metadata.get("jwks_uri")
                if not isinstance(uri, str):
                    return None
                document = await get_json(http, check_destination(uri))
            if document is None:
                return None
            keys = KeySet.import_key_set(document)  # type: ignore[arg-type]
        except (MetadataError, ValueError, TypeError, KeyError):
            return None
        except Exception:  # joserfc errors for a malformed key set
            return None
        return keys


_UNAVAILABLE: Final[Refusal] = (
    503,
    "the authorization server's keys are unavailable; try again later\n",
    [(b"retry-after", b"5")],
)

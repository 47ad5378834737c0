"""OAuth discovery and challenge rules shared by the client and the server kit (which
imports nothing of the client): the ``WWW-Authenticate`` ``Bearer`` challenge parser, the
metadata URLs in the order MCP 2025-11-25 uses (RFC 8414 / OpenID for an issuer, RFC 9728
path-specific then root for a protected resource), the destination rule for every URL
met on the way (:func:`ahp_protocol.endpoints.check_endpoint_url`, no fragment), and the
metadata fetches (``GET``, no redirects followed, at most 64 KiB, a JSON object; the
issuer's metadata must name that issuer exactly and a token endpoint that passes the
destination rule). Every problem is a :class:`MetadataError` with a fixed, credential-free
``detail``. httpx is imported with this module (only when OAuth is used).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any, Final
from urllib.parse import urlsplit, urlunsplit

import httpx

from ahp_protocol.endpoints import check_endpoint_url

__all__ = [
    "MetadataError",
    "authorization_server_metadata_urls",
    "check_destination",
    "discover_authorization_server",
    "discover_protected_resource",
    "get_json",
    "parse_bearer_challenge",
    "protected_resource_metadata_urls",
]

MAX_METADATA_BYTES: Final = 64 * 1024


class MetadataError(Exception):
    """An OAuth discovery step that failed; ``detail`` is a fixed phrase."""

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


def _fail(detail: str) -> MetadataError:
    return MetadataError(detail)


def check_destination(url: str) -> str:
    """``url`` if it may be contacted (https, or http to loopback; no userinfo, no
    fragment), else :class:`MetadataError`. The transport's endpoint rule."""
    try:
        check_endpoint_url(url)
    except ValueError:
        raise _fail("a discovered OAuth URL is not an allowed destination") from None
    if urlsplit(url).fragment:
        raise _fail("a discovered OAuth URL is not an allowed destination")
    return url


_TOKEN: Final = r"[!#$%&'*+.^_`|~0-9A-Za-z-]+"
_PARAM: Final = re.compile(rf'\s*({_TOKEN})\s*=\s*("(?:[^"\\]|\\.)*"|[^\s,]*)\s*', re.S)
_SCHEME: Final = re.compile(rf"\s*({_TOKEN})(?:\s+(.*))?", re.S)


def _split_commas(text: str) -> list[str]:
    parts: list[str] = []
    current: list[str] = []
    quoted = escaped = False
    for ch in text:
        if escaped:
            escaped = False
        elif quoted and ch == "\\":
            escaped = True
        elif ch == '"':
            quoted = not quoted
        elif ch == "," and not quoted:
            parts.append("".join(current))
            current = []
            continue
        current.append(ch)
    parts.append("".join(current))
    return [p for p in parts if p.strip()]


def _unquote(value: str) -> str:
    if len(value) >= 2 and value[0] == value[-1] == '"':
        return re.sub(r"\\(.)", r"\1", value[1:-1])
    return value


def parse_bearer_challenge(header: str) -> dict[str, str] | None:
    """The parameters of the first ``Bearer`` challenge in a ``WWW-Authenticate`` value
    (names lower-cased, values unquoted), or ``None`` when there is none. Other schemes
    before or after it, and their parameters, are skipped (RFC 9110 §11.6.1)."""
    found: dict[str, str] | None = None
    current: dict[str, str] | None = None
    for part in _split_commas(header):
        param = _PARAM.fullmatch(part)
        if param is None:
            scheme = _SCHEME.fullmatch(part)
            if scheme is None:
                current = None
                continue
            is_bearer = scheme.group(1).lower() == "bearer" and found is None
            current = {} if is_bearer else None
            if current is not None:
                found = current
            rest = scheme.group(2) or ""
            param = _PARAM.fullmatch(rest) if rest else None
            if param is None:
                continue  # nothing, or a token68 (not Bearer's)
        if current is not None:
            current.setdefault(param.group(1).lower(), _unquote(param.group(2)))
    return found


def _origin_and_path(url: str) -> tuple[str, str, str]:
    parts = urlsplit(url)
    return parts.scheme, parts.netloc, parts.path.rstrip("/")


def authorization_server_metadata_urls(issuer: str) -> list[str]:
    """Where an issuer's metadata is looked for, in order (MCP 2025-11-25): RFC 8414
    with the path inserted, then OpenID Connect with it inserted, then appended."""
    scheme, netloc, path = _origin_and_path(issuer)

    def at(p: str) -> str:
        return urlunsplit((scheme, netloc, p, "", ""))

    if not path:
        return [
            at("/.well-known/oauth-authorization-server"),
            at("/.well-known/openid-configuration"),
        ]
    return [
        at(f"/.well-known/oauth-authorization-server{path}"),
        at(f"/.well-known/openid-configuration{path}"),
        at(f"{path}/.well-known/openid-configuration"),
    ]


def protected_resource_metadata_urls(endpoint: str) -> list[str]:
    """RFC 9728 well-known URLs for ``endpoint``: path-specific, then the root."""
    scheme, netloc, path = _origin_and_path(endpoint)
    root = urlunsplit((scheme, netloc, "/.well-known/oauth-protected-resource", "", ""))
    if not path:
        return [root]
    return [
        urlunsplit((scheme, netloc, f"/.well-known/oauth-protected-resource{path}", "", "")),
        root,
    ]


async def get_json(http: httpx.AsyncClient, url: str) -> dict[str, Any] | None:
    """GET a metadata document: the JSON object, ``None`` for 404/410 (try the next
    place), else ``AUTH_FAILED`` (a redirect, another status, a bad or large body)."""
    check_destination(url)
    try:
        async with http.stream(
            "GET", url, headers={"Accept": "application/json"}, follow_redirects=False
        ) as response:
            if 300 <= response.status_code < 400:
                raise _fail("an OAuth metadata request was redirected (not followed)")
            if response.status_code in (404, 410):
                return None
            if response.status_code != 200:
                raise _fail("an OAuth metadata request failed")
            body = bytearray()
            async for chunk in response.aiter_bytes():
                body += chunk
                if len(body) > MAX_METADATA_BYTES:
                    raise _fail("an OAuth metadata document is too large")
    except httpx.HTTPError:
        raise _fail("an OAuth metadata server could not be reached over verified TLS") from None
    try:
        document = json.loads(bytes(body))
    except (ValueError, UnicodeDecodeError):
        raise _fail("an OAuth metadata document is not JSON") from None
    if not isinstance(document, dict):
        raise _fail("an OAuth metadata document is not a JSON object")
    return document


async def discover_authorization_server(http: httpx.AsyncClient, issuer: str) -> dict[str, Any]:
    """The metadata of ``issuer`` (issuer equal, token endpoint allowed), or ``AUTH_FAILED``."""
    check_destination(issuer)
    if urlsplit(issuer).scheme != "https":
        raise _fail("an OAuth issuer must use https")
    for url in authorization_server_metadata_urls(issuer):
        document = await get_json(http, url)
        if document is None:
            continue
        if document.get("issuer") != issuer:
            raise _fail("the authorization server metadata names another issuer")
        endpoint = document.get("token_endpoint")
        if not isinstance(endpoint, str):
            raise _fail("the authorization server metadata has no token endpoint")
        check_destination(endpoint)
        return document
    raise _fail("no authorization server metadata found for the issuer")


async def discover_protected_resource(
    http: httpx.AsyncClient, endpoint: str, challenge: Mapping[str, str]
) -> dict[str, Any]:
    """The endpoint's RFC 9728 metadata: the challenge's ``resource_metadata`` URL, else
    the well-known URLs; ``AUTH_FAILED`` when there is none or it is not usable."""
    given = challenge.get("resource_metadata")
    urls = [given] if given else protected_resource_metadata_urls(endpoint)
    for url in urls:
        document = await get_json(http, url)
        if document is None:
            continue
        resource = document.get("resource")
        servers = document.get("authorization_servers")
        if not isinstance(resource, str) or not (
            isinstance(servers, list) and all(isinstance(s, str) for s in servers)
        ):
            raise _fail("the protected resource metadata is malformed")
        return document
    raise _fail("the backend asks for OAuth but publishes no protected resource metadata")

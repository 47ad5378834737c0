"""The HTTP transport: one JSON-RPC message per ``POST`` (draft §8.2), over httpx.

Owns one ``httpx.AsyncClient`` per backend (keep-alive; redirects never followed;
``trust_env=False``: no proxy, netrc or CA variables apply; no cookies), the request
headers, and what counts as an answer:

- a request: ``200``, ``Content-Type: application/json``, an uncompressed body of at
  most ``max_frame_bytes`` (checked while streaming) holding one JSON-RPC response
  with the request's id. Any other status (``3xx`` too) is ``HTTP_STATUS``, a wrong
  type or body ``MALFORMED_OUTPUT``, another id ``ID_MISMATCH``; JSON-RPC errors are
  returned for the caller to classify;
- a notification: ``202`` or ``204`` with an empty body (a body is
  ``MALFORMED_OUTPUT``, another status ``HTTP_STATUS``);
- a refused, reset or lost connection: ``CONNECT_FAILED``.

Credentials are resolved from ``environ`` at each send: the bearer ``tokenEnv``
(``Authorization: Bearer …``), then the registration headers (literal or
``valueEnv``; no ``valueRef``) merged last, ignoring case, so a registration
``Authorization`` header replaces the bearer binding. One that cannot be resolved is
``AUTH_FAILED`` and nothing is sent; values never appear in failures, logs or ``repr``.

With an ``oauth`` binding (an :class:`~ahp_protocol.client.oauth.OAuthSession`, unless
a registration ``Authorization`` header replaces it) each POST carries the session's
access token; a ``401`` with a ``Bearer`` challenge to an intercept or configuration
request is handed to the session (which checks the protected-resource metadata and
drops the token) and the request is sent once more with a new token; any other
``401``/``403``, and every one to a notification (never replayed), is ``AUTH_FAILED``.
A hook with no binding (``discover_oauth``) sends no credentials; its first ``401``
starts a :class:`~ahp_protocol.client.oauth.DiscoverySession` (the draft's "no binding"
procedure), handled the same way from then on.

Plain ``http`` only to a loopback host (``localhost``, ``127.0.0.0/8``, ``::1``); any
other ``http`` URL is a ``ValueError`` at construction (:func:`check_endpoint_url`, the
rule OAuth discovery applies to every URL it meets). TLS is verified against the
default CAs, or only those of ``ca_bundle`` (``AHP_CA_BUNDLE``, :func:`tls_verify`).
Never implements a deadline (the caller wraps calls in ``anyio.fail_after``, which
covers OAuth discovery and token requests too), never retries except that one OAuth
retry. httpx comes
with the ``http`` extra (``pip install 'ahp-protocol[http]'``); without it this
module's ``ImportError`` says so, and stdio backends still work.
"""

from __future__ import annotations

import contextlib
import os
import re
import ssl
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from http.cookiejar import CookieJar, DefaultCookiePolicy
from typing import TYPE_CHECKING, Any, Final, Literal, Protocol

try:
    import httpx
except ImportError as exc:  # a stdio-only install: say what to add, not just "no httpx"
    raise ImportError(
        "an HTTP backend needs httpx: install the http extra, pip install 'ahp-protocol[http]'"
    ) from exc

from ahp_protocol.client._failures import FailureClass, OperationalFailure
from ahp_protocol.client.transports._framing import decode_answer, request_key
from ahp_protocol.client.transports.exchange import Exchange
from ahp_protocol.endpoints import CA_BUNDLE_ENV, check_endpoint_url
from ahp_protocol.endpoints import tls_verify as _tls_verify
from ahp_protocol.wire import jsonrpc
from ahp_protocol.wire.names import HEADER_NAME, is_loopback_host

if TYPE_CHECKING:
    from ahp_protocol.client.oauth import DiscoverySession, OAuthSession

__all__ = [
    "CA_BUNDLE_ENV",
    "AuthUnsupported",
    "HeaderSource",
    "HeaderValue",
    "HttpTransport",
    "check_endpoint_url",
    "is_loopback_host",
    "tls_verify",
]

_RETRYABLE: Final = frozenset({"hooks/intercept", "hooks/configuration"})

AuthUnsupported = Literal["token_ref", "oauth"]

# RFC 9110 field-value: visible ASCII or obs-text, inner spaces/tabs, no leading/trailing blank.
_VCHAR: Final = r"[\x21-\x7e\x80-\xff]"
_HEADER_VALUE: Final = re.compile(rf"(?:{_VCHAR}(?:[\x20\x09\x21-\x7e\x80-\xff]*{_VCHAR})?)?")
_MANAGED_HEADERS: Final = frozenset({"content-length", "transfer-encoding", "host", "connection"})

_AUTH_DETAILS: Final[Mapping[str, str]] = {
    "token_ref": "bearer token references are not supported by this transport",
    "oauth": "oauth authentication is not supported by this transport",
}


class HeaderSource(Protocol):
    """A header value resolved at send time (registration ``{valueEnv}`` / ``{valueRef}``)."""

    @property
    def value_env(self) -> str | None: ...

    @property
    def value_ref(self) -> str | None: ...


@dataclass(frozen=True)
class HeaderValue:
    """A plain :class:`HeaderSource`: exactly one of ``value_env`` and ``value_ref``."""

    value_env: str | None = None
    value_ref: str | None = None

    def __repr__(self) -> str:
        which = "value_env" if self.value_env is not None else "value_ref"
        return f"HeaderValue({which}=...)"


def tls_verify(ca_bundle: str | None) -> ssl.SSLContext | bool:
    """httpx ``verify`` for ``ca_bundle`` (:func:`ahp_protocol.endpoints.tls_verify`, THE
    TLS trust rule); a bundle that cannot be loaded is ``CONNECT_FAILED``."""
    try:
        return _tls_verify(ca_bundle)
    except ValueError as exc:
        raise OperationalFailure(FailureClass.CONNECT_FAILED, str(exc)) from None


def _header_bytes(value: str) -> bytes | None:
    """``value`` as header bytes (surrounding blanks dropped, as HTTP does), or ``None`` if
    it is not a valid field value (control characters, not latin-1)."""
    value = value.strip(" \t")
    if not _HEADER_VALUE.fullmatch(value):
        return None
    try:
        return value.encode("latin-1")
    except UnicodeEncodeError:
        return None


def _credential_bytes(value: str) -> bytes:
    """A resolved credential as a header value, or ``AUTH_FAILED`` (value never echoed)."""
    raw = _header_bytes(value)
    if raw is None:
        raise OperationalFailure(FailureClass.AUTH_FAILED, "credential is not a valid header value")
    return raw


class HttpTransport:
    """An HTTP backend, see the module docstring."""

    def __init__(
        self,
        url: str,
        *,
        headers: Mapping[str, str | HeaderSource] | None = None,
        bearer_env: str | None = None,
        auth_unsupported: AuthUnsupported | None = None,
        environ: Mapping[str, str] | None = None,
        max_frame_bytes: int = jsonrpc.MAX_FRAME_BYTES,
        oauth: OAuthSession | None = None,
        ca_bundle: str | None = None,
        discover_oauth: bool = False,
    ) -> None:
        check_endpoint_url(url)
        if sum(x is not None for x in (bearer_env, auth_unsupported, oauth)) > 1:
            raise ValueError("give at most one of bearer_env, auth_unsupported and oauth")
        if auth_unsupported is not None and auth_unsupported not in _AUTH_DETAILS:
            raise ValueError("auth_unsupported must be 'token_ref' or 'oauth'")
        if max_frame_bytes < 1:
            raise ValueError("max_frame_bytes must be positive")
        self.url = url
        self.bearer_env = bearer_env
        self.auth_unsupported = auth_unsupported
        self.oauth: OAuthSession | DiscoverySession | None = oauth
        self.discover_oauth = discover_oauth and oauth is None and bearer_env is None
        self.ca_bundle = ca_bundle or None
        self.max_frame_bytes = max_frame_bytes
        self._environ: Mapping[str, str] = os.environ if environ is None else environ
        self._headers: list[tuple[str, str | HeaderSource]] = []
        seen: set[str] = set()
        for name, value in (headers or {}).items():
            if not isinstance(name, str) or not HEADER_NAME.fullmatch(name):
                raise ValueError(f"header name {name!r} is not a valid HTTP token")
            lower = name.lower()
            if lower in seen:
                raise ValueError(f"header {name!r} is given twice (names ignore case)")
            if lower in _MANAGED_HEADERS:
                raise ValueError(f"header {name!r} is managed by the transport")
            seen.add(lower)
            if isinstance(value, str):
                if _header_bytes(value) is None:
                    raise ValueError(
                        f"the literal value of header {name!r} is not a valid HTTP field value"
                    )
            elif (value.value_env is None) == (value.value_ref is None):
                raise ValueError(f"header {name!r} needs exactly one of valueEnv and valueRef")
            self._headers.append((name, value))
        self._explicit_authorization = "authorization" in seen
        self._client: httpx.AsyncClient | None = None
        self._closed = False

    def __repr__(self) -> str:  # header names only: literal values may be credentials
        names = [name for name, _ in self._headers]
        return (
            f"HttpTransport(url={self.url!r}, headers={names!r}, bearer_env={self.bearer_env!r}"
            f", oauth={self.oauth is not None})"
        )

    # -- the Transport contract ---------------------------------------------------

    async def request(
        self, message: dict[str, Any], exchange: Exchange | None = None
    ) -> dict[str, Any]:
        key = request_key(message)
        record = Exchange() if exchange is None else exchange
        retry = message.get("method") in _RETRYABLE
        while True:
            async with self._post(message, record) as response:
                if not await self._challenged(response, retry):
                    return await self._response(response, key, record)
            retry = False  # one bounded retry, with the token the challenge led to

    async def notify(self, message: dict[str, Any]) -> None:
        async with self._post(message) as response:
            await self._challenged(response, False)  # a notification never replays
            if response.status_code not in (202, 204):
                raise OperationalFailure(
                    FailureClass.HTTP_STATUS, "notification was not acknowledged with 202/204"
                )
            async for chunk in response.aiter_raw():
                if chunk:
                    raise OperationalFailure(
                        FailureClass.MALFORMED_OUTPUT, "notification acknowledgment has a body"
                    )

    async def prepare(self) -> None:
        with contextlib.suppress(OperationalFailure):
            self._ready()

    def _uses_oauth(self) -> bool:
        return self.oauth is not None and not self._explicit_authorization

    async def _challenged(self, response: httpx.Response, retry: bool) -> bool:
        """Whether to send the request again after an OAuth refusal (``401`` with a
        ``Bearer`` challenge the session accepts, when ``retry``); ``AUTH_FAILED`` for
        any other ``401``/``403`` of an OAuth binding. Without OAuth: ``False``."""
        if self._explicit_authorization or response.status_code not in (401, 403):
            return False
        if self.oauth is None:
            if not self.discover_oauth or response.status_code != 401:
                return False
            from ahp_protocol.client.oauth import DiscoverySession

            self.oauth = DiscoverySession(
                self.url, environ=self._environ, verify=tls_verify(self.ca_bundle)
            )
        oauth = self.oauth
        if response.status_code == 403 or not retry:
            oauth.invalidate()
            raise OperationalFailure(
                FailureClass.AUTH_FAILED, "the backend refused the request's authentication"
            )
        challenge = response.headers.get("www-authenticate", "")
        await oauth.challenged(self._ready(), self.url, challenge)
        return True

    async def aclose(self) -> None:
        self._closed = True
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()

    # -- internals -----------------------------------------------------------------

    def _resolve_headers(self) -> list[tuple[bytes, bytes]]:
        """The headers of the next POST, resolved now; ``AUTH_FAILED`` if one cannot be."""
        merged: dict[str, tuple[str, bytes]] = {}

        def put(name: str, value: bytes) -> None:
            merged[name.lower()] = (name, value)

        put("Content-Type", b"application/json")
        put("Accept", b"application/json")
        put("Accept-Encoding", b"identity")
        if not self._explicit_authorization:
            if self.auth_unsupported is not None:
                raise OperationalFailure(
                    FailureClass.AUTH_FAILED, _AUTH_DETAILS[self.auth_unsupported]
                )
            if self.bearer_env is not None:
                token = self._environ.get(self.bearer_env)
                if not token:
                    raise OperationalFailure(
                        FailureClass.AUTH_FAILED, "bearer token environment variable is unset"
                    )
                put("Authorization", b"Bearer " + _credential_bytes(token))
        for name, value in self._headers:
            if isinstance(value, str):
                put(name, _header_bytes(value) or b"")
            elif value.value_env is not None:
                resolved = self._environ.get(value.value_env)
                if not resolved:
                    raise OperationalFailure(
                        FailureClass.AUTH_FAILED, "header environment variable is unset"
                    )
                put(name, _credential_bytes(resolved))
            else:
                raise OperationalFailure(
                    FailureClass.AUTH_FAILED,
                    "header secret references are not supported by this transport",
                )
        return [(name.encode("ascii"), value) for name, value in merged.values()]

    def _ready(self) -> httpx.AsyncClient:
        if self._closed:
            raise OperationalFailure(FailureClass.CONNECT_FAILED, "transport is closed")
        if self._client is None:
            self._client = httpx.AsyncClient(
                verify=tls_verify(self.ca_bundle),
                follow_redirects=False,
                trust_env=False,
                timeout=httpx.Timeout(None),
                cookies=CookieJar(policy=DefaultCookiePolicy(allowed_domains=[])),
            )
        return self._client

    @contextlib.asynccontextmanager
    async def _post(
        self, message: dict[str, Any], exchange: Exchange | None = None
    ) -> AsyncIterator[httpx.Response]:
        """One streamed POST of ``message``; httpx errors become ``CONNECT_FAILED``."""
        headers = self._resolve_headers()  # before anything is sent
        client = self._ready()
        if self.oauth is not None and self._uses_oauth():
            value = await self.oauth.authorization(client)
            if value is not None:  # None: a discovery session before any challenge
                headers.insert(0, (b"Authorization", _credential_bytes(value)))
        body = jsonrpc.encode(message)[:-1]
        if exchange is not None:
            exchange.sent(len(body))
        request = client.build_request("POST", self.url, headers=headers, content=body)
        try:
            response = await client.send(request, stream=True)
        except httpx.ConnectError:
            raise OperationalFailure(
                FailureClass.CONNECT_FAILED, "connection refused or not established"
            ) from None
        except (httpx.HTTPError, OSError):
            raise OperationalFailure(FailureClass.CONNECT_FAILED, "connection lost") from None
        try:
            yield response
        except (httpx.HTTPError, OSError):
            raise OperationalFailure(FailureClass.CONNECT_FAILED, "connection lost") from None
        finally:
            with contextlib.suppress(httpx.HTTPError, OSError):
                await response.aclose()

    async def _response(
        self, response: httpx.Response, key: tuple[str, object], exchange: Exchange
    ) -> dict[str, Any]:
        if response.status_code != 200:
            detail = (
                "redirect not followed"
                if 300 <= response.status_code < 400
                else "backend answered with a non-success HTTP status"
            )
            raise OperationalFailure(FailureClass.HTTP_STATUS, detail)
        media = response.headers.get("content-type", "").split(";", 1)[0].strip().lower()
        if media != "application/json":
            raise OperationalFailure(
                FailureClass.MALFORMED_OUTPUT, "response content type is not application/json"
            )
        encoding = response.headers.get("content-encoding", "identity").strip().lower()
        if encoding not in ("", "identity"):
            raise OperationalFailure(FailureClass.MALFORMED_OUTPUT, "response body is encoded")
        length = response.headers.get("content-length")
        if length is not None and length.strip().isdigit() and int(length) > self.max_frame_bytes:
            raise OperationalFailure(
                FailureClass.MALFORMED_OUTPUT, "response exceeds the frame size limit"
            )
        body = bytearray()
        async for chunk in response.aiter_raw():
            body += chunk
            exchange.received(len(chunk))
            if len(body) > self.max_frame_bytes:
                raise OperationalFailure(
                    FailureClass.MALFORMED_OUTPUT, "response exceeds the frame size limit"
                )
        return decode_answer(bytes(body), self.max_frame_bytes, key)

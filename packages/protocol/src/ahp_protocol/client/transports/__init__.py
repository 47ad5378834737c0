"""Client transports: how one JSON-RPC message reaches a backend and its answer comes back.

Owns the :class:`Transport` contract the dispatcher uses and :func:`open_transport`,
which maps a registration ``Hook`` onto :class:`StdioTransport` or
:class:`HttpTransport`. A transport moves bytes and checks framing, the envelope and
id correlation; every problem is an :class:`~ahp_protocol.client.OperationalFailure`
with a fixed detail. Never: decides what a response means (errors, versions and
effects are the caller's), implements the deadline (a call cancelled by the caller's
leaves the transport usable), or leaves a child or connection behind ``aclose()``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

from ahp_protocol.client.transports.exchange import Exchange
from ahp_protocol.client.transports.stdio import StdioTransport, child_environment
from ahp_protocol.wire.jsonrpc import MAX_FRAME_BYTES

if TYPE_CHECKING:
    from ahp_protocol.client.oauth import Interaction, SecretResolver
    from ahp_protocol.client.transports.http import (
        AuthUnsupported,
        HeaderSource,
        HeaderValue,
        HttpTransport,
    )
    from ahp_protocol.wire.registration import Hook

_HTTP_NAMES = frozenset({"AuthUnsupported", "HeaderSource", "HeaderValue", "HttpTransport"})


def __getattr__(name: str) -> Any:
    # httpx is imported only by harnesses that talk HTTP.
    if name in _HTTP_NAMES:
        from ahp_protocol.client.transports import http

        return getattr(http, name)
    raise AttributeError(name)


__all__ = [
    "Exchange",
    "HeaderSource",
    "HeaderValue",
    "HttpTransport",
    "StdioTransport",
    "Transport",
    "child_environment",
    "open_transport",
]


class Transport(Protocol):
    """One backend connection, as the dispatcher uses it."""

    async def request(
        self, message: dict[str, Any], exchange: Exchange | None = None
    ) -> dict[str, Any]:
        """Send one request; return the decoded response (envelope and id checked),
        JSON-RPC errors included, or raise ``OperationalFailure``. No deadline of its own:
        a cancellation (the caller's deadline) leaves the transport consistent. What the
        exchange did on the wire (bytes, discarded frames, attempts) is added to
        ``exchange`` as it goes, so it holds even after a failure or a cancellation."""
        ...

    async def notify(self, message: dict[str, Any]) -> None:
        """Send one notification (no answer awaited); raise ``OperationalFailure``."""
        ...

    async def prepare(self) -> None:
        """Get ready to send without sending anything (a persistent stdio backend is
        started, an HTTP client built), so the first request does not pay for it. Never
        raises: a failure here is the next request's to report."""
        ...

    async def aclose(self) -> None:
        """Release everything (kill and reap every child, close the client). Idempotent."""
        ...


def open_transport(
    hook: Hook,
    *,
    environ: Mapping[str, str] | None = None,
    max_frame_bytes: int = MAX_FRAME_BYTES,
    resolve_secret: SecretResolver | None = None,
    interaction: Interaction | None = None,
) -> Transport:
    """The transport for ``hook``; nothing is spawned or connected until first use.

    ``environ`` (default ``os.environ``) is the host environment: the stdio allowlist,
    HTTP credentials (``tokenEnv``, ``valueEnv``, read at each send), an OAuth
    ``clientSecretRef`` of the form ``env:NAME`` (unless ``resolve_secret`` resolves
    references) and ``AHP_CA_BUNDLE`` (the CAs trusted for https backends and their
    OAuth servers) come from it. An ``oauth`` binding gets an
    :class:`~ahp_protocol.client.oauth.OAuthSession` (tokens shared process-wide by
    issuer, client, resource and scopes); ``interaction`` shows a person the authorization
    URL of an ``authorization_code_pkce`` binding (without it that flow fails). A bearer
    ``tokenRef`` fails every send with
    ``AUTH_FAILED``. A registration ``Authorization`` header replaces any binding.
    """
    import os

    from ahp_protocol.wire import registration as reg

    spec = hook.transport
    auth = hook.authentication
    if isinstance(spec, reg.StdioTransportConfig):
        if auth is not None:
            raise ValueError("authentication is not allowed on a stdio backend")
        return StdioTransport(
            spec.command,
            spec.args,
            lifecycle=spec.lifecycle,
            cwd=spec.cwd,
            env=spec.env,
            environ=environ,
            max_frame_bytes=max_frame_bytes,
        )
    from ahp_protocol.client.transports.http import CA_BUNDLE_ENV, HttpTransport

    env = os.environ if environ is None else environ
    bearer_env = (auth.token_env or None) if isinstance(auth, reg.BearerAuthentication) else None
    unsupported: AuthUnsupported | None = None
    oauth = None
    if isinstance(auth, reg.OAuthAuthentication):
        from ahp_protocol.client.oauth import OAuthSession

        oauth = OAuthSession(
            auth, environ=env, resolve_secret=resolve_secret, interaction=interaction
        )
    elif auth is not None and bearer_env is None:
        unsupported = "token_ref"
    return HttpTransport(
        spec.url,
        headers=spec.headers,
        bearer_env=bearer_env,
        auth_unsupported=unsupported,
        environ=environ,
        max_frame_bytes=max_frame_bytes,
        oauth=oauth,
        ca_bundle=env.get(CA_BUNDLE_ENV),
        discover_oauth=auth is None,
    )

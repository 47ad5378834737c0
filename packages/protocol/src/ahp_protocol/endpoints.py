"""Where the kit may send HTTP, and whom it trusts there: shared by the client and the
server kit (which imports nothing of the client).

Owns :func:`check_endpoint_url` (THE URL rule for an AHP HTTP endpoint and for every
OAuth URL either side discovers: ``https``, or plain ``http`` to a loopback host only; a
host; no userinfo) and :func:`tls_verify` (THE TLS trust rule: the default CAs, or only
those of the PEM bundle named by ``AHP_CA_BUNDLE``, :data:`CA_BUNDLE_ENV`; verification
is never turned off). Pure: no I/O but reading the bundle; errors are ``ValueError``
with a fixed message naming no credential.
"""

from __future__ import annotations

import functools
import ssl
from typing import Final
from urllib.parse import urlsplit

from ahp_protocol.wire.names import is_loopback_host

__all__ = ["CA_BUNDLE_ENV", "check_endpoint_url", "tls_verify"]

CA_BUNDLE_ENV: Final = "AHP_CA_BUNDLE"
"""Host environment variable naming a PEM file of CA certificates that *replaces* the
default trust store for https backends and the OAuth servers they use (a private or test
CA). Verification is never disabled."""


def check_endpoint_url(url: str) -> None:
    """THE URL rule for an HTTP endpoint (and every OAuth URL discovered on the way):
    https, or http to a loopback host; a host; no userinfo. ``ValueError`` otherwise."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https"):
        raise ValueError("an AHP HTTP endpoint URL must use https (or http to a loopback host)")
    if parts.username is not None or parts.password is not None:
        raise ValueError("an AHP HTTP endpoint URL must not carry credentials")
    host = parts.hostname
    if not host:
        raise ValueError("an AHP HTTP endpoint URL needs a host")
    _ = parts.port  # raises ValueError for a bad port
    if scheme == "http" and not is_loopback_host(host):
        raise ValueError(
            f"plain http is allowed only to a loopback host, not {host!r}: "
            "a remote AHP endpoint must use https"
        )


@functools.lru_cache(maxsize=8)
def _ssl_context(cafile: str) -> ssl.SSLContext:
    return ssl.create_default_context(cafile=cafile)


def tls_verify(ca_bundle: str | None) -> ssl.SSLContext | bool:
    """httpx ``verify`` for ``ca_bundle`` (a PEM path; ``None``: the default store).
    ``ValueError`` when the bundle cannot be loaded."""
    if not ca_bundle:
        return True
    try:
        return _ssl_context(ca_bundle)
    except (OSError, ssl.SSLError):
        raise ValueError(f"the CA bundle named by {CA_BUNDLE_ENV} cannot be loaded") from None

"""The protocol's naming rules, once: reverse-DNS, header and env names, loopback hosts.

Backend ids, deny codes, extension keys and extension effect names are
reverse-DNS names (``com.example.policy``): at least two dot-separated labels,
each starting with a letter, then letters, digits, ``_`` or ``-``. Standard
library only: the adapters, the backends and the template use it too.
"""

from __future__ import annotations

import ipaddress
import re
from typing import Final

REVERSE_DNS: Final = re.compile(r"^(?:[A-Za-z][A-Za-z0-9_-]*\.)+[A-Za-z][A-Za-z0-9_-]*$")
"""A reverse-DNS name. The anchors are for a pydantic ``pattern`` (``REVERSE_DNS.pattern``,
where ``$`` is the end of the text); in Python use ``fullmatch``: there ``$`` also matches
before a trailing newline."""

HEADER_NAME: Final = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
"""An HTTP header name, the RFC 9110 ``token`` (use ``fullmatch``)."""

ENV_NAME: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
"""An environment variable name (use ``fullmatch``)."""


def is_reverse_dns(value: object) -> bool:
    """Whether ``value`` is a string that is a reverse-DNS name."""
    return isinstance(value, str) and REVERSE_DNS.fullmatch(value) is not None


def is_loopback_host(host: str) -> bool:
    """``localhost``, an address in ``127.0.0.0/8`` or ``::1`` (brackets allowed, any case):
    where plain ``http`` is allowed, for the client's endpoints and the server's listener."""
    host = host.strip("[]").lower()
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False

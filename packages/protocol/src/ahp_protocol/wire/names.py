"""The protocol's naming rules, once: what a reverse-DNS name is.

Backend ids, deny codes, extension keys and extension effect names are
reverse-DNS names (``com.example.policy``): at least two dot-separated labels,
each starting with a letter, then letters, digits, ``_`` or ``-``. Standard
library only: the adapters, the backends and the template use it too.
"""

from __future__ import annotations

import re
from typing import Final

REVERSE_DNS: Final = re.compile(r"^(?:[A-Za-z][A-Za-z0-9_-]*\.)+[A-Za-z][A-Za-z0-9_-]*$")
"""A reverse-DNS name (a pydantic ``pattern`` may use ``REVERSE_DNS.pattern``)."""

REVERSE_DNS_REASON: Final = "must be a reverse-DNS name (e.g. com.example.policy)"
"""The reason every check of a reverse-DNS name gives."""


def is_reverse_dns(value: object) -> bool:
    """Whether ``value`` is a string that is a reverse-DNS name."""
    return isinstance(value, str) and REVERSE_DNS.match(value) is not None

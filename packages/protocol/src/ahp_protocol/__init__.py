"""ahp-protocol: the Agent Hooks Protocol (wire version ``"draft"``) for Python.

- :mod:`ahp_protocol.wire` — what travels: JSON-RPC, events, content, effects,
  capabilities, the registration document. Pure functions and pydantic models.
- :mod:`ahp_protocol.server` — the backend side: write a handler per event, serve
  it over stdio (persistent or per event) or HTTP (ASGI).
- :mod:`ahp_protocol.client` — the harness side: run one event through a
  registration's subscriptions.

Importing this package imports nothing else: per-event backends pay only for
what they use.
"""

from ahp_protocol.wire.jsonrpc import PROTOCOL_VERSION

__version__ = "0.1.0"
__all__ = ["PROTOCOL_VERSION", "__version__"]

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

from ahp_protocol._version import __version__

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing
if TYPE_CHECKING:
    from ahp_protocol.wire.jsonrpc import PROTOCOL_VERSION
else:

    def __getattr__(name: str) -> object:
        # Lazy: the wire imports json and typing, and the adapters' hook client imports
        # this package for the version alone.
        if name == "PROTOCOL_VERSION":
            from ahp_protocol.wire.jsonrpc import PROTOCOL_VERSION

            return PROTOCOL_VERSION
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["PROTOCOL_VERSION", "__version__"]

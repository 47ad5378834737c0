"""The exchange record: what one request did on the wire, reported by the transport.

Owns :class:`Exchange`. The caller creates one per request and passes it to
``Transport.request``; the transport fills it in *as the exchange goes*, so what it
holds survives a failure and the caller's deadline (the request that timed out after
three uncorrelated frames still reports them). It holds sizes and counts only: never
frame content, headers or stderr.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(slots=True)
class Exchange:
    """Bytes out, bytes in, discarded frames and attempts of one request (all sends of it:
    a retry adds to the same record)."""

    attempts: int = 0
    """How many times the request was sent (2 after a retry)."""
    sent_bytes: int = 0
    """Request bytes written (the encoded frame, each attempt)."""
    received_bytes: int = 0
    """Response bytes read: every frame read for this request, discarded ones included."""
    discarded: list[int] = field(default_factory=list)
    """The size of each response with another id a persistent stdio backend sent while
    this request waited (dropped unread, as the stdio binding says)."""

    def sent(self, size: int) -> None:
        self.attempts += 1
        self.sent_bytes += size

    def received(self, size: int) -> None:
        self.received_bytes += size

    def discard(self, size: int) -> None:
        self.received_bytes += size
        self.discarded.append(size)

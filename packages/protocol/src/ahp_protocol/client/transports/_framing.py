"""What both transports check of a response: its id and its envelope (no I/O).

Owns the correlation key of a JSON-RPC id (``1`` and ``"1"`` stay distinct, ``null``
never matches), the decoding of one frame that must be a JSON-RPC response, and the
rule for the one answer no other can follow (HTTP, per_event stdio). Every problem is
an :class:`~ahp_protocol.client.OperationalFailure` with a fixed detail. The decoder is
the wire's :func:`~ahp_protocol.wire.jsonrpc.decode_frame`, the server kit's too: the
same limits on both sides (frame size, UTF-8, JSON, ``MAX_NESTING``), so a backend's
answer can neither crash nor stall the harness that reads it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ahp_protocol.client._failures import FailureClass, OperationalFailure
from ahp_protocol.wire import jsonrpc

jsonrpc.accelerate()  # the client imports pydantic anyway: its parser, same verdicts


def id_key(value: object) -> tuple[str, object]:
    """A correlation key that keeps ``1`` and ``"1"`` distinct (and never matches ``null``)."""
    return (type(value).__name__, value)


def request_key(message: Mapping[str, Any]) -> tuple[str, object]:
    """The key of a request's id; ``ValueError`` if the message is not a request."""
    rid = jsonrpc.recoverable_id(message)
    if rid is None or "method" not in message:
        raise ValueError("request() needs a JSON-RPC request with a string or integer id")
    return id_key(rid)


def decode_response(data: bytes, max_bytes: int) -> dict[str, Any]:
    """Decode one frame that must be a JSON-RPC response, or raise ``MALFORMED_OUTPUT``."""
    try:
        message = jsonrpc.decode_frame(data, max_bytes=max_bytes)
        kind = jsonrpc.classify(message)
    except jsonrpc.DecodeError:
        raise OperationalFailure(
            FailureClass.MALFORMED_OUTPUT, "backend output is not a JSON-RPC message"
        ) from None
    if kind != "success" and kind != "error":
        raise OperationalFailure(
            FailureClass.MALFORMED_OUTPUT, "backend sent a request where a response was due"
        )
    return message


def decode_answer(data: bytes, max_bytes: int, key: tuple[str, object]) -> dict[str, Any]:
    """The one response a request keyed ``key`` gets where no other can follow, or raise
    ``MALFORMED_OUTPUT`` (see :func:`decode_response`) or ``ID_MISMATCH`` (another id)."""
    response = decode_response(data, max_bytes)
    if id_key(response.get("id")) != key:
        raise OperationalFailure(FailureClass.ID_MISMATCH, "response id is not the request id")
    return response

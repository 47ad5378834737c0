"""The server kit's JSON codec: one frame in as a dict, one reply out as one line.

Owns the reply a frame that cannot be decoded gets (-32700 with ``id: null`` and the
decoder's fixed reason, or -32600 for a batch or a non-object), the exact key the
memos are keyed by, and encoding a reply as one compact UTF-8 line. Decoding is the
wire's :func:`~ahp_protocol.wire.jsonrpc.decode_frame`, the client transports' too (one
decoder, one set of limits: frame size, UTF-8, JSON, ``MAX_NESTING``); writing is the
wire's :func:`~ahp_protocol.wire.jsonrpc.json_bytes` (lone surrogates escaped rather
than failing). The message shapes, codes and envelope rules are
:mod:`ahp_protocol.wire.jsonrpc`'s; this module only adds what a server needs to be
fast: pydantic-core's parser and key writer, switched on once (:meth:`Codec.accelerate`),
so importing the kit imports no pydantic. No I/O.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from typing import Any, Final, NamedTuple

from ahp_protocol.wire import jsonrpc
from ahp_protocol.wire.jsonrpc import MAX_NESTING as MAX_NESTING  # the decoder's limit
from ahp_protocol.wire.jsonrpc import PROTOCOL_VERSION, ErrorCode, RequestId
from ahp_protocol.wire.jsonrpc import encode as encode  # one compact JSON line
from ahp_protocol.wire.jsonrpc import error as rpc_error
from ahp_protocol.wire.jsonrpc import json_bytes as json_bytes  # the one JSON writer
from ahp_protocol.wire.jsonrpc import too_deep as too_deep  # the nesting rule, decoded


class Reply(NamedTuple):
    """What the core decided: the encoded line (``None``: stay silent).

    ``parse_error`` is true when the bytes were not one decodable JSON value
    within the frame limit (-32700); HTTP maps that to status 400. ``unprocessed`` is
    true when a notification's handler raised (HTTP answers 500, not 204, so that a
    ``204`` means the notification was processed); stdio stays silent either way.
    """

    body: bytes | None
    parse_error: bool = False
    unprocessed: bool = False


SILENT: Final = Reply(None)
UNPROCESSED: Final = Reply(None, unprocessed=True)


class Codec:
    """The kit's JSON decoder and exact key: the standard library's until
    :meth:`accelerate`, then pydantic-core's (about twice as fast). The kit accelerates
    when it first builds the wire models, which import pydantic anyway: a per-event
    process that only answers ``hooks/configuration`` never pays for importing it."""

    __slots__ = ("exact_key",)

    def __init__(self) -> None:
        self.exact_key: Callable[[Any], str | bytes] = _stdlib_key
        """A text that differs whenever decoded JSON differs (``1``, ``1.0`` and
        ``True`` do); raises on what it cannot write (a lone surrogate)."""

    def accelerate(self) -> None:
        """Decode and key with pydantic-core from now on (same verdicts, faster)."""
        if self.exact_key is _stdlib_key:
            from pydantic_core import to_json

            jsonrpc.accelerate()
            self.exact_key = to_json

    def decode(self, message: bytes, limit: int) -> Reply | dict[str, Any]:
        """One frame (the message without one final newline, at most ``limit``
        bytes) as a dict, or the error reply."""
        try:
            return jsonrpc.decode_frame(message, max_bytes=limit)
        except jsonrpc.DecodeError as exc:
            if exc.code == ErrorCode.PARSE_ERROR:
                return parse_error_reply(exc.reason)
            return error_reply(None, exc.code, exc.reason)


def _stdlib_key(value: Any) -> str:
    return json.dumps(value, ensure_ascii=True, separators=(",", ":"), allow_nan=False)


@functools.cache
def codec() -> Codec:
    """The codec, built on first use (importing the kit imports no pydantic)."""
    return Codec()


def json_copy(value: Any) -> Any:
    """A deep copy of decoded JSON (dicts, lists and scalars), faster than deepcopy."""
    if isinstance(value, dict):
        return {k: json_copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [json_copy(v) for v in value]
    return value


_RESULT_HEAD: Final = b'{"jsonrpc":"2.0","id":'
_RESULT_MIDDLE: Final = (
    b',"result":{"protocolVersion":"' + PROTOCOL_VERSION.encode() + b'","effects":'
)


def encode_result(id: RequestId, effects: bytes) -> bytes:
    """The intercept success line for ``id`` with the encoded ``effects`` array: the
    bytes :func:`encode` would write, without encoding the constant frame each time."""
    return b"".join((_RESULT_HEAD, json_bytes(id), _RESULT_MIDDLE, effects, b"}}\n"))


def error_reply(
    id: RequestId | None, code: ErrorCode, reason: str | None = None, *, parse: bool = False
) -> Reply:
    data = {"reason": reason} if reason is not None else None
    return Reply(encode(rpc_error(id, code, data=data)), parse_error=parse)


def parse_error_reply(reason: str) -> Reply:
    """-32700 with ``id: null`` and a fixed ``reason`` (a transport's framing error)."""
    return error_reply(None, ErrorCode.PARSE_ERROR, reason, parse=True)

"""The server kit's JSON codec: one frame in as a dict, one reply out as one line.

Owns decoding one frame (bounded size and nesting; -32700 with a fixed reason for
oversize, invalid UTF-8 or JSON, too deep; -32600 for a batch or a non-object), the
exact key the memos are keyed by, and encoding a reply as one compact UTF-8 line
(the wire's :func:`~ahp_protocol.wire.jsonrpc.json_bytes`, the client's too: lone
surrogates escaped rather than failing). The message shapes, codes and
envelope rules are :mod:`ahp_protocol.wire.jsonrpc`'s; this module only adds what a
server needs to be fast and total, which the wire codec does not promise: the
pydantic-core decoder and key writer, and an encoder that never raises on a string.

The codec is chosen once, on first use (:func:`codec`), so importing the kit
imports no pydantic. No I/O.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from typing import Any, Final, NamedTuple

from ahp_protocol.wire.jsonrpc import PROTOCOL_VERSION, ErrorCode, RequestId
from ahp_protocol.wire.jsonrpc import encode as encode  # one compact JSON line
from ahp_protocol.wire.jsonrpc import error as rpc_error
from ahp_protocol.wire.jsonrpc import json_bytes as json_bytes  # the one JSON writer

MAX_NESTING: Final = 200
"""No value in a frame may sit inside more than this many arrays or objects; a deeper
frame is -32700 (``"nested too deeply"``). It is the limit of the fast decoder
(``pydantic_core.from_json``, a test checks), applied by :func:`too_deep` where the
stdlib decodes instead, so the same frames are accepted on every path, and nothing
after decoding (the wire models, copies of the grant, handlers) recurses deeper."""


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

    __slots__ = ("exact_key", "loads")

    def __init__(self) -> None:
        self.loads: Callable[[bytes], Any] = _refuse
        """Decodes a frame, or raises and the stdlib judges it (it refuses lone
        surrogates, deep nesting and ``NaN``; where it accepts, it agrees with it)."""
        self.exact_key: Callable[[Any], str | bytes] = _stdlib_key
        """A text that differs whenever decoded JSON differs (``1``, ``1.0`` and
        ``True`` do); raises on what it cannot write (a lone surrogate)."""

    def accelerate(self) -> None:
        """Decode and key with pydantic-core from now on (same verdicts, faster)."""
        if self.loads is _refuse:
            from pydantic_core import from_json, to_json

            self.loads = functools.partial(from_json, allow_inf_nan=False)
            self.exact_key = to_json

    def decode(self, message: bytes, limit: int) -> Reply | dict[str, Any]:
        """One frame (the message without one final newline, at most ``limit``
        bytes) as a dict, or the error reply."""
        raw = message if type(message) is bytes else bytes(message)
        if len(raw) - raw.endswith(b"\n") > limit:  # JSON ignores that newline: no slice
            return parse_error_reply("frame too large")
        try:
            msg = self.loads(raw)
        except Exception:  # refused by the fast decoder: the stdlib judges it
            try:
                msg = _DECODER.decode(raw.decode("utf-8"))
            except UnicodeDecodeError:
                return parse_error_reply("not UTF-8")
            except RecursionError:
                return parse_error_reply("nested too deeply")
            except ValueError:
                return parse_error_reply("not JSON")
            if too_deep(msg):  # the fast decoder refuses these itself
                return parse_error_reply("nested too deeply")
        if type(msg) is dict:
            return msg
        reason = "batches are not allowed" if type(msg) is list else "a message must be an object"
        return error_reply(None, ErrorCode.INVALID_REQUEST, reason)


def _refuse(raw: bytes) -> Any:
    raise ValueError("judged by the standard library")


def _stdlib_key(value: Any) -> str:
    return json.dumps(value, ensure_ascii=True, separators=(",", ":"), allow_nan=False)


@functools.cache
def codec() -> Codec:
    """The codec, built on first use (importing the kit imports no pydantic)."""
    return Codec()


def too_deep(value: Any) -> bool:
    """Whether some value in decoded JSON sits inside more than ``MAX_NESTING`` arrays
    or objects. Iterative: linear in the size of ``value``, whatever its depth."""
    if type(value) is not dict and type(value) is not list:
        return False
    stack: list[tuple[Any, int]] = [(value, 0)]
    pop, push = stack.pop, stack.append
    while stack:
        node, depth = pop()  # a container inside ``depth`` others
        children = node.values() if type(node) is dict else node
        if depth >= MAX_NESTING and children:
            return True
        for child in children:
            if type(child) is dict or type(child) is list:
                push((child, depth + 1))
    return False


def json_copy(value: Any) -> Any:
    """A deep copy of decoded JSON (dicts, lists and scalars), faster than deepcopy."""
    if isinstance(value, dict):
        return {k: json_copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [json_copy(v) for v in value]
    return value


def _reject_constant(name: str) -> Any:
    raise ValueError("not JSON")


# Built once: ``json.loads`` with options builds a decoder per call.
_DECODER: Final = json.JSONDecoder(parse_constant=_reject_constant)


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

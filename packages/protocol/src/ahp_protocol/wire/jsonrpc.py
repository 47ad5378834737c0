"""JSON-RPC 2.0 as AHP uses it: codes, methods, decoding and encoding one message.

Owns the error codes (standard and AHP's -32001..-32004), the four AHP method names,
decoding one frame into a plain ``dict`` (:func:`decode_frame`: the one decoder of the
client transports and the server kit, with one set of limits: ``max_bytes``, strict
UTF-8, JSON without ``NaN``/``Infinity``, at most ``MAX_NESTING`` levels of nesting; no
batches), classifying it (request, notification, success or error response), and
encoding a message as exactly one compact line. :func:`json_bytes` is the one way the
kit writes JSON as UTF-8 (client and server frames, the harness's records): a lone
surrogate is written escaped (``\\ud800``), never an error.

Decoding costs linear time and never recurses deeper than ``MAX_NESTING`` levels,
whatever the frame and the recursion limit: a hostile peer cannot crash or stall its
reader. Duplicate member names are not refused (the last one wins, as in both parsers;
the draft asks only for JSON). No I/O, standard library only until :func:`accelerate`
(pydantic-core's parser, same verdicts): it is on the path of every backend and client,
and of per-event processes whose start-up cost matters.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable, Mapping
from enum import IntEnum
from itertools import accumulate
from typing import Any, Final, Literal

PROTOCOL_VERSION: Final = "draft"
SUPPORTED_VERSIONS: Final = (PROTOCOL_VERSION,)

INTERCEPT: Final = "hooks/intercept"
OBSERVE: Final = "hooks/observe"
CAPABILITIES: Final = "hooks/capabilities"
CONFIGURATION: Final = "hooks/configuration"
METHODS: Final = frozenset({INTERCEPT, OBSERVE, CAPABILITIES, CONFIGURATION})

MAX_FRAME_BYTES: Final = 4 * 1024 * 1024
"""Default frame limit on every transport (one message, framing newline excluded)."""

MAX_NESTING: Final = 200
"""No value in a frame may sit inside more than this many arrays or objects; a deeper
frame is -32700 (``"nested too deeply"``). It is the limit of pydantic-core's parser
(``from_json``, a test checks), so the same frames are accepted with or without
:func:`accelerate`, and nothing after decoding (the wire models, copies of the grant,
handlers) recurses deeper."""


class ErrorCode(IntEnum):
    """JSON-RPC error codes, standard and AHP-reserved."""

    PARSE_ERROR = -32700
    INVALID_REQUEST = -32600
    METHOD_NOT_FOUND = -32601
    INVALID_PARAMS = -32602
    INTERNAL_ERROR = -32603
    UNSUPPORTED_PROTOCOL_VERSION = -32001
    UNSUPPORTED_EVENT = -32002
    BACKEND_UNAVAILABLE = -32003
    BACKEND_INTERNAL_ERROR = -32004


ERROR_MESSAGES: Final[Mapping[int, str]] = {
    ErrorCode.PARSE_ERROR: "Parse error",
    ErrorCode.INVALID_REQUEST: "Invalid request",
    ErrorCode.METHOD_NOT_FOUND: "Method not found",
    ErrorCode.INVALID_PARAMS: "Invalid params",
    ErrorCode.INTERNAL_ERROR: "Internal error",
    ErrorCode.UNSUPPORTED_PROTOCOL_VERSION: "unsupported_protocol_version",
    ErrorCode.UNSUPPORTED_EVENT: "unsupported_event",
    ErrorCode.BACKEND_UNAVAILABLE: "backend_unavailable",
    ErrorCode.BACKEND_INTERNAL_ERROR: "backend_internal_error",
}
"""Fixed, credential-free messages. Never put exception text in an error."""

Kind = Literal["request", "notification", "success", "error"]
RequestId = str | int


class DecodeError(ValueError):
    """A message that is not a usable JSON-RPC 2.0 object.

    ``code`` is -32700 (bytes, UTF-8 or JSON) or -32600 (not a valid envelope); ``id`` the
    request id when one could be recovered (for the error response), else ``None``;
    ``reason`` a fixed description that never contains message content.
    """

    def __init__(self, code: ErrorCode, reason: str, id: RequestId | None = None) -> None:
        super().__init__(reason)
        self.code = code
        self.reason = reason
        self.id = id


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


# Built once: ``json.loads`` with options builds a decoder per call.
_DECODER: Final = json.JSONDecoder(parse_constant=_reject_constant)

_fast_loads: Callable[[bytes], Any] | None = None
"""pydantic-core's parser once :func:`accelerate` ran; it refuses what the standard
library refuses (and more: lone surrogates, deep nesting), and where it accepts, it
agrees with it (a test checks)."""


def accelerate() -> None:
    """Decode with pydantic-core's parser from now on, in this process (about twice as
    fast; what it refuses, the standard library judges, so every verdict stays the same).
    Imports pydantic-core: callers that import pydantic anyway call it."""
    global _fast_loads
    if _fast_loads is None:
        from pydantic_core import from_json

        _fast_loads = functools.partial(from_json, allow_inf_nan=False)


def decode_frame(
    data: bytes | bytearray | memoryview | str, *, max_bytes: int = MAX_FRAME_BYTES
) -> dict[str, Any]:
    """Decode one frame (one message; a final newline is framing, not counted) into a
    JSON object, the envelope unchecked (see :func:`decode`).

    Raises :class:`DecodeError` with a fixed reason: -32700 when the frame exceeds
    ``max_bytes`` (``"frame too large"``), is not UTF-8 (``"not UTF-8"``), not JSON
    (``"not JSON"``: ``NaN`` and ``Infinity`` included) or nested deeper than
    ``MAX_NESTING`` (``"nested too deeply"``); -32600 for a batch or a non-object.
    """
    raw = data if type(data) is bytes else _as_bytes(data)
    if len(raw) - raw.endswith(b"\n") > max_bytes:  # JSON ignores that newline: no slice
        raise DecodeError(ErrorCode.PARSE_ERROR, "frame too large")
    fast = _fast_loads
    if fast is None:
        value = _judge(raw)
    else:
        try:
            value = fast(raw)
        except Exception:  # refused: the standard library judges it, and says why
            value = _judge(raw)
    if type(value) is dict:
        return value
    if type(value) is list:
        raise DecodeError(ErrorCode.INVALID_REQUEST, "batches are not allowed")
    raise DecodeError(ErrorCode.INVALID_REQUEST, "a message must be an object")


def decode(
    data: bytes | bytearray | memoryview | str, *, max_bytes: int = MAX_FRAME_BYTES
) -> dict[str, Any]:
    """Decode exactly one JSON-RPC message and check its envelope (unknown members kept).

    Raises :class:`DecodeError`: what :func:`decode_frame` raises, and -32600 for an
    invalid envelope (:func:`classify`).
    """
    message = decode_frame(data, max_bytes=max_bytes)
    classify(message)
    return message


def _as_bytes(data: bytes | bytearray | memoryview | str) -> bytes:
    if isinstance(data, str):  # a lone surrogate is then not UTF-8, as on the wire
        return data.encode("utf-8", "surrogatepass")
    return bytes(data)


def _parse_error(reason: str) -> DecodeError:
    return DecodeError(ErrorCode.PARSE_ERROR, reason)


def _judge(raw: bytes) -> Any:
    """The standard library's verdict on one frame: the value, or -32700."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise _parse_error("not UTF-8") from None
    # Only a frame holding more than MAX_NESTING brackets can nest deeper (two counts,
    # in C); that rare frame is measured before the parser sees it, since the parser
    # recurses once per level (by the recursion limit, which a program may raise far
    # beyond what the C stack holds).
    deep = raw.count(b"[") + raw.count(b"{") > MAX_NESTING
    if deep and _bracket_depth(raw) > MAX_NESTING + 1:
        raise _parse_error("nested too deeply")
    try:
        value = _DECODER.decode(text)
    except ValueError:
        raise _parse_error("not JSON") from None
    if deep and too_deep(value):  # exact: an empty array may sit one level deeper
        raise _parse_error("nested too deeply")
    return value


_STRING: Final = re.compile(rb'"[^"]*"')
_SIGNS: Final = bytes.maketrans(b"[{]}", b"\x01\x01\xff\xff")
_NOT_BRACKETS: Final = bytes(b for b in range(256) if b not in b"[{]}")


def _bracket_depth(raw: bytes) -> int:
    """How many arrays and objects nest at the deepest point of a JSON text (exact for
    valid JSON, some number for other text), in linear time, without recursion."""
    # Drop escaped backslashes, then escaped quotes: every quote left delimits a string,
    # and the brackets inside strings are not structure.
    text = _STRING.sub(b"", raw.replace(b"\\\\", b"").replace(b'\\"', b""))
    signs = text.translate(_SIGNS, _NOT_BRACKETS)  # +1 per opening, -1 per closing
    return max(accumulate(memoryview(signs).cast("b")), default=0)


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


def _valid_id(value: Any) -> bool:
    if isinstance(value, str):  # the usual id first: one test
        return value != ""
    return isinstance(value, int) and not isinstance(value, bool)


def recoverable_id(message: Mapping[str, Any]) -> RequestId | None:
    """The message's id if it is a valid request id, else ``None``."""
    value = message.get("id")
    return value if _valid_id(value) else None


def _invalid(message: Mapping[str, Any], reason: str) -> DecodeError:
    """-32600, with the message's id if one can be recovered."""
    return DecodeError(ErrorCode.INVALID_REQUEST, reason, recoverable_id(message))


def classify(message: Mapping[str, Any]) -> Kind:
    """Say what a decoded object is, or raise :class:`DecodeError` (-32600).

    Request ids are non-empty strings or integers; response ids may also be null.
    """

    if message.get("jsonrpc") != "2.0":
        raise _invalid(message, 'jsonrpc must be "2.0"')
    if "method" in message:
        method = message["method"]
        if not isinstance(method, str) or not method:
            raise _invalid(message, "method must be a non-empty string")
        if "result" in message or "error" in message:
            raise _invalid(message, "a request has no result or error")
        if "params" in message and not isinstance(message["params"], (dict, list)):
            raise _invalid(message, "params must be an object or an array")
        if "id" not in message:
            return "notification"
        if not _valid_id(message["id"]):  # (so no id is recovered: it is not valid)
            raise _invalid(message, "id must be a non-empty string or an integer")
        return "request"
    if "id" not in message:
        raise _invalid(message, "a message needs a method or an id")
    if message["id"] is not None and not _valid_id(message["id"]):
        raise _invalid(message, "id must be a non-empty string or an integer")
    has_result, has_error = "result" in message, "error" in message
    if has_result == has_error:
        raise DecodeError(ErrorCode.INVALID_REQUEST, "a response has exactly one of result, error")
    if has_result:
        return "success"
    error = message["error"]
    if (
        not isinstance(error, dict)
        or not isinstance(error.get("code"), int)
        or isinstance(error.get("code"), bool)
        or not isinstance(error.get("message"), str)
    ):
        raise DecodeError(ErrorCode.INVALID_REQUEST, "error needs an integer code and a message")
    return "error"


_COMPACT: Final = (",", ":")
# Built once: ``json.dumps`` with options builds an encoder per call.
_ENCODER: Final = json.JSONEncoder(ensure_ascii=False, separators=_COMPACT, allow_nan=False)
_encode_string: Final[Callable[[str], str]] = json.encoder.encode_basestring


def json_bytes(
    value: Any, *, default: Callable[[Any], Any] | None = None, allow_nan: bool = False
) -> bytes:
    """Compact JSON in UTF-8: how the kit writes every frame and record (one rule).

    Text is written as itself, not ``\\u``-escaped. A string holding a lone surrogate
    (``"\\ud800"``: JSON can carry it, as ``json.dumps`` and ``JSON.stringify`` write
    it, UTF-8 cannot) makes the whole value be written in ASCII with ``\\u`` escapes:
    the same JSON value, never a ``UnicodeEncodeError``. ``default`` and ``allow_nan``
    are :func:`json.dumps`'s (by default NaN and the infinities raise ``ValueError``:
    they are not JSON).
    """
    try:
        if type(value) is str:  # a request id: the C string encoder, as _ENCODER uses
            return _encode_string(value).encode("utf-8")
        if default is None and not allow_nan:  # every frame: the prebuilt encoder
            return _ENCODER.encode(value).encode("utf-8")
        text = json.dumps(
            value, ensure_ascii=False, separators=_COMPACT, allow_nan=allow_nan, default=default
        )
        return text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: the same value, all escaped
        text = json.dumps(value, separators=_COMPACT, allow_nan=allow_nan, default=default)
        return text.encode("ascii")


def encode(message: Mapping[str, Any]) -> bytes:
    """One compact UTF-8 line (:func:`json_bytes`), ``\\n``-terminated; no raw newline
    can appear inside."""
    return json_bytes(message) + b"\n"


def request(method: str, params: Mapping[str, Any], id: RequestId) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": id, "method": method, "params": dict(params)}


def notification(method: str, params: Mapping[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": method, "params": dict(params)}


def success(id: RequestId | None, result: Mapping[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": id, "result": dict(result)}


def error(
    id: RequestId | None, code: int, message: str | None = None, data: Any = None
) -> dict[str, Any]:
    """An error response. ``message`` defaults to the code's fixed text."""
    body: dict[str, Any] = {"code": int(code), "message": message or ERROR_MESSAGES.get(code, "")}
    if data is not None:
        body["data"] = data
    return {"jsonrpc": "2.0", "id": id, "error": body}


def unsupported_version(id: RequestId | None) -> dict[str, Any]:
    """-32001 with ``data.supported``, as the draft requires."""
    return error(
        id,
        ErrorCode.UNSUPPORTED_PROTOCOL_VERSION,
        data={"supported": list(SUPPORTED_VERSIONS)},
    )

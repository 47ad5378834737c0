"""JSON-RPC codec: decoding one message, classifying it, encoding one line."""

from __future__ import annotations

import json
from typing import Any

import pytest
from ahp_protocol.wire import jsonrpc
from ahp_protocol.wire.jsonrpc import DecodeError, ErrorCode
from hypothesis import given
from hypothesis import strategies as st

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text()
)
json_values = st.recursive(
    json_scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)
ids = st.integers() | st.text(min_size=1)
methods = st.sampled_from(sorted(jsonrpc.METHODS)) | st.text(min_size=1)
extra_members = st.dictionaries(
    st.text(min_size=1).filter(
        lambda k: k not in {"jsonrpc", "id", "method", "params", "result", "error"}
    ),
    json_values,
    max_size=3,
)


@st.composite
def messages(draw: st.DrawFn) -> dict[str, Any]:
    kind = draw(st.sampled_from(["request", "notification", "success", "error"]))
    params = draw(st.dictionaries(st.text(max_size=8), json_values, max_size=4))
    if kind == "request":
        message = jsonrpc.request(draw(methods), params, draw(ids))
    elif kind == "notification":
        message = jsonrpc.notification(draw(methods), params)
    elif kind == "success":
        message = jsonrpc.success(draw(ids | st.none()), params)
    else:
        message = jsonrpc.error(
            draw(ids | st.none()), draw(st.integers()), draw(st.text()), draw(json_values)
        )
    return {**draw(extra_members), **message}


@given(messages())
def test_decode_encode_round_trip(message: dict[str, Any]) -> None:
    line = jsonrpc.encode(message)
    assert line.endswith(b"\n") and line.count(b"\n") == 1  # exactly one line, whatever the content
    assert jsonrpc.decode(line[:-1]) == message  # unknown envelope members survive


lone_surrogates = st.text(st.characters(categories=["Cs"]), min_size=1, max_size=2)
any_text = st.lists(st.text(max_size=4) | lone_surrogates, max_size=3).map("".join)
"""Text with lone surrogates too, often (``st.text()`` leaves them out): JSON carries them."""


@given(st.dictionaries(any_text, any_text | st.lists(any_text, max_size=3), max_size=3))
def test_any_text_is_written_as_valid_utf8_json(params: dict[str, Any]) -> None:
    # #26: a lone surrogate was a UnicodeEncodeError on the client; it is escaped
    # ("\ud800", as json.dumps and JSON.stringify write it) and the value round-trips.
    # The value is the one json.dumps writes (a surrogate pair in a str is one character).
    message = jsonrpc.notification(jsonrpc.OBSERVE, params)
    line = jsonrpc.encode(message)
    assert jsonrpc.decode(line[:-1]) == json.loads(json.dumps(message))  # valid UTF-8 only


def test_the_server_kit_writes_json_with_the_same_function() -> None:
    from ahp_protocol.server import _codec

    assert _codec.json_bytes is jsonrpc.json_bytes  # one rule, one place
    assert _codec.encode is jsonrpc.encode
    assert jsonrpc.json_bytes("\ud800") == b'"\\ud800"'
    assert jsonrpc.json_bytes({"t": "é\ud800"}) == b'{"t":"\\u00e9\\ud800"}'


@given(messages())
def test_classify_matches_construction(message: dict[str, Any]) -> None:
    kind = jsonrpc.classify(message)
    if "method" in message:
        assert kind == ("request" if "id" in message else "notification")
    else:
        assert kind == ("success" if "result" in message else "error")


@pytest.mark.parametrize(
    ("data", "code", "reason"),
    [
        (b"{", ErrorCode.PARSE_ERROR, "not JSON"),
        (b"\xff\xfe{}", ErrorCode.PARSE_ERROR, "UTF-8"),
        (b'{"jsonrpc":"2.0","id":1,"result":NaN}', ErrorCode.PARSE_ERROR, "not JSON"),
        (b"[]", ErrorCode.INVALID_REQUEST, "batch"),
        (b"[{}]", ErrorCode.INVALID_REQUEST, "batch"),
        (b"42", ErrorCode.INVALID_REQUEST, "object"),
        (b'{"jsonrpc":"1.0","id":1,"method":"m"}', ErrorCode.INVALID_REQUEST, "jsonrpc"),
        (b'{"jsonrpc":"2.0","id":"","method":"m"}', ErrorCode.INVALID_REQUEST, "id"),
        (b'{"jsonrpc":"2.0","id":true,"method":"m"}', ErrorCode.INVALID_REQUEST, "id"),
        (b'{"jsonrpc":"2.0","id":1.5,"method":"m"}', ErrorCode.INVALID_REQUEST, "id"),
        (b'{"jsonrpc":"2.0","id":1,"method":""}', ErrorCode.INVALID_REQUEST, "method"),
        (b'{"jsonrpc":"2.0","id":1,"method":"m","params":3}', ErrorCode.INVALID_REQUEST, "params"),
        (b'{"jsonrpc":"2.0","id":1}', ErrorCode.INVALID_REQUEST, "exactly one"),
        (
            b'{"jsonrpc":"2.0","id":1,"result":{},"error":{"code":1,"message":""}}',
            ErrorCode.INVALID_REQUEST,
            "exactly one",
        ),
        (
            b'{"jsonrpc":"2.0","id":1,"error":{"code":"x","message":""}}',
            ErrorCode.INVALID_REQUEST,
            "code",
        ),
        (b'{"jsonrpc":"2.0"}', ErrorCode.INVALID_REQUEST, "method or an id"),
    ],
)
def test_decode_errors(data: bytes, code: ErrorCode, reason: str) -> None:
    with pytest.raises(DecodeError) as info:
        jsonrpc.decode(data)
    assert info.value.code == code
    assert reason in info.value.reason


def test_decode_recovers_the_id_of_a_bad_request() -> None:
    with pytest.raises(DecodeError) as info:
        jsonrpc.decode(b'{"jsonrpc":"1.0","id":"evt_7","method":"hooks/intercept"}')
    assert info.value.id == "evt_7"


def test_frame_limit() -> None:
    big = json.dumps({"jsonrpc": "2.0", "method": "m", "params": {"x": "a" * 100}}).encode()
    assert jsonrpc.decode(big, max_bytes=len(big))["method"] == "m"
    with pytest.raises(DecodeError) as info:
        jsonrpc.decode(big, max_bytes=len(big) - 1)
    assert info.value.code == ErrorCode.PARSE_ERROR


def test_response_id_may_be_null() -> None:
    assert (
        jsonrpc.classify({"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "x"}})
        == "error"
    )


def test_unsupported_version_error_carries_supported(official_schema: Any) -> None:
    message = jsonrpc.unsupported_version("evt_1")
    assert message["error"]["code"] == -32001
    assert message["error"]["data"] == {"supported": ["draft"]}
    assert official_schema("json-rpc-message.schema.json", message) == []


def test_encode_escapes_newlines_and_keeps_unicode() -> None:
    line = jsonrpc.encode({"jsonrpc": "2.0", "method": "m", "params": {"t": "a\nb\u2028é"}})
    assert line.count(b"\n") == 1
    assert "é".encode() in line

"""One JSON-RPC decoder for both sides (issue 28): ``wire.jsonrpc.decode_frame``.

The client transports (``decode_response``) and the server kit (``Codec.decode``) decode
with the same function, so a frame meets the same limits on both sides: frame size,
UTF-8, JSON (no ``NaN``/``Infinity``), at most ``MAX_NESTING`` levels of nesting. A
hostile backend answering a deeply nested response (a real process, a real loopback
HTTP server) gets ``MALFORMED_OUTPUT`` at once: no ``RecursionError``, no crash even
where the harness raised its recursion limit, no more than linear cost. With and without
pydantic-core's parser (:func:`~ahp_protocol.wire.jsonrpc.accelerate`) every verdict is
the same.
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from ahp_protocol.client import FailureClass, OperationalFailure
from ahp_protocol.client.transports import HttpTransport, StdioTransport
from ahp_protocol.client.transports._framing import decode_response
from ahp_protocol.server import Backend
from ahp_protocol.server._codec import Codec, parse_error_reply
from ahp_protocol.wire import jsonrpc
from ahp_protocol.wire.jsonrpc import MAX_NESTING, DecodeError, ErrorCode
from hypothesis import given
from hypothesis import strategies as st

MISBEHAVE = Path(__file__).resolve().parent / "backends" / "misbehave.py"
QUICK = 1.0  # seconds: how fast a malformed answer must be reported
LONG = 10.0  # seconds: the deadline those exchanges run under
EDGE = MAX_NESTING - 1
"""misbehave's ``deep-N`` answer puts N arrays inside the message and its result: the
innermost (empty) array sits inside N + 1 containers, so N = EDGE is the deepest
accepted answer and EDGE + 1 the shallowest refused one."""
HOSTILE = 100_000


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def request(rid: str = "deep") -> dict[str, Any]:
    return jsonrpc.request(jsonrpc.INTERCEPT, {"protocolVersion": "draft"}, rid)


async def outcome(transport: Any) -> tuple[Any, float]:
    """(response | FailureClass, elapsed seconds) of one request."""
    started = time.perf_counter()
    try:
        with anyio.fail_after(LONG):
            result: Any = await transport.request(request())
    except OperationalFailure as exc:
        result = exc.failure
    return result, time.perf_counter() - started


def expected(depth: int) -> Callable[[Any], bool]:
    if depth <= EDGE:
        return lambda r: isinstance(r, dict) and r["result"]["effects"] == []
    return lambda r: r == FailureClass.MALFORMED_OUTPUT


# -- the client side: a real backend process, a real loopback HTTP server ---------------


@pytest.mark.anyio
@pytest.mark.parametrize("lifecycle", ["persistent", "per_event"])
@pytest.mark.parametrize("depth", [EDGE, EDGE + 1, 900, HOSTILE])
async def test_stdio_deeply_nested_answer_is_malformed_output(lifecycle: str, depth: int) -> None:
    args = ["-I", "-S", str(MISBEHAVE), f"deep-{depth}"]
    if lifecycle == "per_event":
        args.append("--once")
    transport = StdioTransport(sys.executable, args, lifecycle=lifecycle, environ=os.environ)  # type: ignore[arg-type]
    try:
        result, elapsed = await outcome(transport)
    finally:
        await transport.aclose()
    assert expected(depth)(result), (depth, result)
    assert elapsed < QUICK, f"deep-{depth} took {elapsed:.2f}s"


@pytest.fixture(scope="module")
def http_base() -> Iterator[str]:
    process = subprocess.Popen(
        [sys.executable, "-I", "-S", str(MISBEHAVE), "--http", "127.0.0.1:0"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    assert process.stderr is not None
    port = int(process.stderr.readline())  # readiness: the first stderr line is the port
    drain = threading.Thread(target=process.stderr.read, daemon=True)
    drain.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        process.kill()
        process.wait(timeout=10)
        drain.join(timeout=10)


@pytest.mark.anyio
@pytest.mark.parametrize("depth", [EDGE, EDGE + 1, 900, HOSTILE])
async def test_http_deeply_nested_answer_is_malformed_output(http_base: str, depth: int) -> None:
    transport = HttpTransport(f"{http_base}/deep-{depth}")
    try:
        result, elapsed = await outcome(transport)
    finally:
        await transport.aclose()
    assert expected(depth)(result), (depth, result)
    assert elapsed < QUICK, f"deep-{depth} took {elapsed:.2f}s"


HARNESS = """
import os, sys, anyio
from ahp_protocol.client import OperationalFailure
from ahp_protocol.client.transports import HttpTransport, StdioTransport
from ahp_protocol.wire import jsonrpc

sys.setrecursionlimit(10**6)  # as some programs do: far beyond what the C stack holds

async def main():
    misbehave, url = sys.argv[1], sys.argv[2]
    stdio = StdioTransport(sys.executable, ["-I", "-S", misbehave, "deep-100000"],
                           environ=os.environ)
    for transport in (stdio, HttpTransport(url)):
        try:
            await transport.request(jsonrpc.request("hooks/intercept",
                                                    {"protocolVersion": "draft"}, "deep"))
            print("answered")
        except OperationalFailure as exc:
            print(exc.failure.value)
        finally:
            await transport.aclose()

anyio.run(main)
"""


def test_a_harness_with_a_raised_recursion_limit_survives_a_deep_answer(http_base: str) -> None:
    # The parser recursed once per level, up to the recursion limit: raised, 100 000
    # levels overflowed the C stack and the harness died (SIGSEGV), on stdio and HTTP.
    done = subprocess.run(
        [sys.executable, "-c", HARNESS, str(MISBEHAVE), f"{http_base}/deep-{HOSTILE}"],
        capture_output=True,
        timeout=LONG * 3,
        check=False,
    )
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
    assert done.stdout.split() == [b"malformed_output", b"malformed_output"], done.stdout


# -- one decoder, one verdict on both sides, with and without pydantic-core -------------


@contextlib.contextmanager
def parser(fast: bool) -> Iterator[None]:
    """Decode with pydantic-core's parser (``fast``) or the standard library's alone."""
    jsonrpc.accelerate()
    saved = jsonrpc._fast_loads
    jsonrpc._fast_loads = saved if fast else None
    try:
        yield
    finally:
        jsonrpc._fast_loads = saved


def verdict(raw: bytes, limit: int = jsonrpc.MAX_FRAME_BYTES) -> tuple[Any, ...]:
    """What decoding says: ("ok", the value as exact JSON) or (code, reason)."""
    try:
        value = jsonrpc.decode_frame(raw, max_bytes=limit)
    except DecodeError as exc:
        return (int(exc.code), exc.reason)
    return ("ok", json.dumps(value, sort_keys=True))


def server_verdict(raw: bytes, limit: int = jsonrpc.MAX_FRAME_BYTES) -> tuple[Any, ...]:
    decoded = Codec().decode(raw, limit)
    if isinstance(decoded, dict):
        return ("ok", json.dumps(decoded, sort_keys=True))
    assert decoded.body is not None
    error = json.loads(decoded.body)["error"]
    assert decoded.parse_error is (error["code"] == -32700)
    return (error["code"], error["data"]["reason"])


def client_verdict(raw: bytes, limit: int = jsonrpc.MAX_FRAME_BYTES) -> str:
    try:
        decode_response(raw, limit)
    except OperationalFailure as exc:
        assert exc.failure == FailureClass.MALFORMED_OUTPUT
        return "malformed"
    return "ok"


def nested(depth: int, shape: str) -> bytes:
    if shape == "arrays":
        return b"[" * depth + b"]" * depth
    if shape == "arrays with a value":
        return b"[" * depth + b"1" + b"]" * depth
    return b'{"a":' * depth + b"1" + b"}" * depth  # objects with a value


def frame(value: bytes) -> bytes:
    return b'{"jsonrpc":"2.0","id":1,"result":' + value + b"}"


LIMIT_CASES = [
    (b'{"jsonrpc":"2.0","id":1,"result":{}}', None),
    (b'{"jsonrpc":"2.0","id":1,"result":{}}\n', None),  # the framing newline
    (b"\xff{}", "not UTF-8"),
    (b'{"a":"\xed\xa0\x80"}', "not UTF-8"),  # a surrogate encoded: not UTF-8
    (b'{"a":"\\ud800"}', None),  # an escaped lone surrogate: JSON
    (b"\xef\xbb\xbf{}", "not JSON"),  # a byte order mark
    (b'{"a":NaN}', "not JSON"),
    (b'{"a":-Infinity}', "not JSON"),
    (b'{"a":1,}', "not JSON"),
    (b'{"a":1,"a":2}', None),  # duplicate names: the last wins, on both sides
    (b"[]", "batches are not allowed"),
    (b"42", "a message must be an object"),
    *[
        (frame(nested(depth, shape)), None if depth + 1 <= MAX_NESTING else "nested too deeply")
        for depth in range(MAX_NESTING - 3, MAX_NESTING + 3)
        for shape in ("arrays with a value", "objects with a value")
    ],
    (frame(nested(MAX_NESTING, "arrays")), None),  # an empty array inside 200 others
    (frame(nested(MAX_NESTING + 1, "arrays")), "nested too deeply"),
    (frame(nested(HOSTILE, "arrays")), "nested too deeply"),
    (frame(b'["' + b"[" * 1000 + b'"]'), None),  # brackets in a string are not nesting
    (frame(b'["\\\\",' + b"[" * 300 + b"]" * 300 + b"]"), "nested too deeply"),
    (frame(b'["\\"' + b"[" * 300 + b'"]'), None),  # an escaped quote ends no string
]


@pytest.mark.parametrize("fast", [False, True], ids=["stdlib", "pydantic-core"])
@pytest.mark.parametrize(("raw", "refusal"), LIMIT_CASES)
def test_both_sides_apply_the_same_limits(fast: bool, raw: bytes, refusal: str | None) -> None:
    with parser(fast):
        client, server, wire = client_verdict(raw), server_verdict(raw), verdict(raw)
    if refusal is None:
        assert wire[0] == "ok" and server == wire, (raw[:60], wire, server)
    else:
        code = -32600 if refusal.startswith(("batches", "a message")) else -32700
        assert wire == server == (code, refusal), (raw[:60], wire, server)
    is_response = refusal is None and b'"result"' in raw
    assert client == ("ok" if is_response else "malformed"), raw[:60]


@pytest.mark.parametrize("fast", [False, True], ids=["stdlib", "pydantic-core"])
def test_the_frame_limit_is_the_same_on_both_sides(fast: bool) -> None:
    raw = b'{"jsonrpc":"2.0","id":1,"result":{"effects":[]}}'
    with parser(fast):
        for limit, fits in ((len(raw), True), (len(raw) - 1, False)):
            for data in (raw, raw + b"\n"):  # a final newline is framing, not counted
                if fits:
                    assert verdict(data, limit)[0] == "ok"
                else:
                    assert verdict(data, limit) == (int(ErrorCode.PARSE_ERROR), "frame too large")
                assert server_verdict(data, limit) == verdict(data, limit)
                assert client_verdict(data, limit) == ("ok" if fits else "malformed")


@pytest.mark.parametrize("fast", [False, True], ids=["stdlib", "pydantic-core"])
def test_the_server_answers_a_deep_frame_with_a_parse_error(fast: bool) -> None:
    backend = Backend("com.example.deep")
    body = b'{"jsonrpc":"2.0","id":1,"method":"hooks/intercept","params":' + nested(
        HOSTILE, "arrays"
    )
    with parser(fast):
        answer = json.loads(backend.handle_sync(body + b"}") or b"")
    assert answer == json.loads(parse_error_reply("nested too deeply").body or b"")


# Generated JSON: strings full of what the depth scan must see through.
tricky_text = st.text(st.sampled_from('[]{}"\\:,ab\u00e9\ud800\U0001f600'), max_size=6)
scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | tricky_text
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(tricky_text, inner, max_size=3),
    max_leaves=12,
)


def depth_of(value: Any) -> int:
    """How many containers nest at the deepest point (recursive: small values only)."""
    if isinstance(value, dict):
        return 1 + max(map(depth_of, value.values()), default=0)
    if isinstance(value, list):
        return 1 + max(map(depth_of, value), default=0)
    return 0


@given(values, st.booleans(), st.integers(0, 3))
def test_the_depth_scan_is_exact_on_json(value: Any, ascii: bool, wrap: int) -> None:
    for _ in range(wrap):
        value = [value]
    text = json.dumps(value, ensure_ascii=ascii).encode("utf-8", "surrogatepass")
    assert jsonrpc._bracket_depth(text) == depth_of(value)


mutations = st.lists(
    st.tuples(
        st.integers(0, 10_000),
        st.sampled_from([b"", b"[", b"]", b"{", b"}", b'"', b"\\", b",", b"\xff", b"\xed\xa0\x80"]),
    ),
    max_size=3,
)


@given(values, mutations, st.integers(0, MAX_NESTING + 2))
def test_pydantic_core_and_the_standard_library_agree(
    value: Any, edits: list[tuple[int, bytes]], depth: int
) -> None:
    inner = json.dumps(value, ensure_ascii=False).encode("utf-8", "surrogatepass")
    raw = b'{"jsonrpc":"2.0","id":1,"result":' + b"[" * depth + inner + b"]" * depth + b"}"
    for at, piece in edits:  # a replaced byte: often no longer JSON, or UTF-8
        at %= len(raw)
        raw = raw[:at] + piece + raw[at + 1 :]
    with parser(fast=False):
        slow = verdict(raw)
    with parser(fast=True):
        assert verdict(raw) == slow, raw[:80]


# -- linear cost, whatever the frame -----------------------------------------------------


def _cost(work: Callable[[], object]) -> float:
    best = float("inf")
    for _ in range(3):
        start = time.process_time()
        work()
        best = min(best, time.process_time() - start)
    return best


HOSTILE_FRAMES: dict[str, Callable[[int], bytes]] = {
    "arrays": lambda n: b"[" * n,
    "objects": lambda n: b'{"a":' * (n // 5),
    "brackets and quotes": lambda n: b'["[' * (n // 3),
    "escaped quotes": lambda n: b'["' + b'\\"' * (n // 2),
    "a valid deep frame": lambda n: frame(nested(n // 2, "arrays")),
}


@pytest.mark.parametrize("fast", [False, True], ids=["stdlib", "pydantic-core"])
@pytest.mark.parametrize("shape", sorted(HOSTILE_FRAMES))
def test_a_hostile_frame_costs_linear_time(fast: bool, shape: str) -> None:
    small, large = (HOSTILE_FRAMES[shape](n) for n in (64 * 1024, 16 * 64 * 1024))

    def decode(raw: bytes) -> Callable[[], object]:
        return lambda: verdict(raw)

    with parser(fast):
        assert verdict(large)[0] == -32700  # refused, not answered
        gc.disable()
        try:
            for _attempt in range(3):  # a noisy machine may stretch one measurement
                ratio = _cost(decode(large)) / max(_cost(decode(small)), 1e-6)
                if ratio < 64:  # linear is about 16, quadratic about 256
                    break
        finally:
            gc.enable()
    assert ratio < 64, (shape, ratio)

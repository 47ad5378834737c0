"""The server kit over HTTP: the ASGI app served by uvicorn in a real process, on loopback.

The backend binds port 0 and prints its address on stderr; the tests read that line
(bounded) instead of sleeping. Every JSON body is checked against the official schemas.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

sys.path.insert(0, str(Path(__file__).parent / "backends"))
from kit_messages import (
    configuration_request,
    intercept,
    observe,
    session_end,
    tool_before,
)

from kit_testing import StderrLines

BACKENDS = Path(__file__).parent / "backends"
SECRET = "sk-live-SECRET-do-not-echo"
LIMIT = 8192
DEADLINE = 20.0
SchemaCheck = Callable[[str, Any], list[str]]
JSON = {"content-type": "application/json"}


class Server:
    def __init__(self, script: Path) -> None:
        self.proc = subprocess.Popen(
            [
                sys.executable,
                str(script),
                "--http",
                "127.0.0.1:0",
                "--max-frame-bytes",
                str(LIMIT),
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=dict(os.environ),
        )
        assert self.proc.stderr is not None
        self.stderr = StderrLines(self.proc.stderr, DEADLINE)
        self.url = self.stderr.wait_for("listening on ").split("listening on ", 1)[1].strip()

    def stop(self) -> tuple[bytes, int]:
        self.proc.terminate()
        try:
            out, _ = self.proc.communicate(timeout=DEADLINE)
        finally:
            self.proc.kill()
        return out, self.proc.returncode


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    srv = Server(BACKENDS / "kit_denylist.py")
    try:
        yield srv
    finally:
        out, status = srv.stop()
    assert out == b""  # nothing on stdout, ever
    # Graceful shutdown on SIGTERM; uvicorn re-raises the signal once it is done.
    assert status in (0, -signal.SIGTERM)
    assert not any("Traceback" in text for text in srv.stderr.lines), "\n".join(srv.stderr.lines)


@pytest.fixture(scope="module")
def client(server: Server) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, timeout=DEADLINE) as c:
        yield c


@pytest.fixture
def check(official_schema: SchemaCheck) -> Callable[[httpx.Response], Any]:
    def check_response(response: httpx.Response) -> Any:
        assert response.headers["content-type"] == "application/json"
        message = response.json()
        assert official_schema("json-rpc-message.schema.json", message) == []
        if "result" in message:
            kind = (
                "configuration-response.schema.json"
                if "configuration" in message["result"]
                else "intercept-response.schema.json"
            )
            assert official_schema(kind, message) == []
        return message

    return check_response


def post(client: httpx.Client, message: Any, **kwargs: Any) -> httpx.Response:
    body = message if isinstance(message, bytes) else json.dumps(message).encode()
    headers = kwargs.pop("headers", JSON)
    return client.post("/", content=body, headers=headers, **kwargs)


def test_address_is_loopback(server: Server) -> None:
    assert server.url.startswith("http://127.0.0.1:")


def test_request_gets_200_with_the_response(
    client: httpx.Client, check: Callable[[httpx.Response], Any]
) -> None:
    response = post(client, intercept(tool_before("h1", "rm -rf /")))
    assert response.status_code == 200
    message = check(response)
    assert message["id"] == "h1"
    assert message["result"]["effects"] == [
        {"type": "deny", "reason": "No recursive deletes.", "code": "com.example.rm_rf"}
    ]
    response = post(client, intercept(tool_before("h2", "ls")))
    assert response.status_code == 200
    assert check(response)["result"] == {"protocolVersion": "draft", "effects": []}


def test_charset_parameter_is_accepted(
    client: httpx.Client, check: Callable[[httpx.Response], Any]
) -> None:
    headers = {"content-type": "Application/JSON; charset=UTF-8"}
    response = post(client, intercept(tool_before("cs")), headers=headers)
    assert response.status_code == 200 and check(response)["id"] == "cs"


def test_configuration(client: httpx.Client, check: Callable[[httpx.Response], Any]) -> None:
    response = post(client, configuration_request("cfg"))
    assert response.status_code == 200
    subscriptions = check(response)["result"]["configuration"]["subscriptions"]
    assert [s["mode"] for s in subscriptions] == ["intercept", "observe"]


def test_notification_gets_204_with_an_empty_body(client: httpx.Client, server: Server) -> None:
    response = post(client, observe(session_end("http_obs")))
    assert (response.status_code, response.content) == (204, b"")
    assert "content-type" not in response.headers
    server.stderr.wait_for("observed session.end http_obs")  # the observer really ran


@pytest.mark.parametrize(
    "message",
    [
        observe(session_end("bad_version"), version="0.1"),
        {"jsonrpc": "2.0", "method": "hooks/observe", "params": "nonsense"},
        {"jsonrpc": "2.0", "method": "hooks/unknown"},
    ],
    ids=["wrong-version", "bad-params", "unknown-method"],
)
def test_invalid_notifications_also_get_204(client: httpx.Client, message: Any) -> None:
    response = post(client, message)
    assert (response.status_code, response.content) == (204, b"")


def test_a_notification_whose_handler_raised_gets_500_not_204(
    client: httpx.Client, server: Server
) -> None:
    """A 204 means "processed": an observer that raised (a record not stored) is a 500."""
    raising = observe(session_end("raises", extensions={"com.example.test": {"raise": True}}))
    response = post(client, raising)
    assert response.status_code == 500
    assert response.text == "the notification was not processed\n"
    assert SECRET not in response.text and "raise" not in response.text
    response = post(client, observe(session_end("after_raise")))  # still serving
    assert (response.status_code, response.content) == (204, b"")


def test_json_rpc_errors_are_200_bodies(
    client: httpx.Client, check: Callable[[httpx.Response], Any]
) -> None:
    cases = [
        (intercept(tool_before("m1"), id="other"), -32602, "other"),
        ({"jsonrpc": "2.0", "id": 5, "method": "hooks/capabilities", "params": {}}, -32601, 5),
        (intercept(tool_before("m3"), version="1999-01-01"), -32001, "m3"),
        (intercept(tool_before("m4", type="tool.error")), -32002, "m4"),
        (intercept(tool_before("m5", "allow-me")), -32603, "m5"),
        ([intercept(tool_before("m6"))], -32600, None),
    ]
    for message, code, rid in cases:
        response = post(client, message)
        assert response.status_code == 200
        body = check(response)
        assert (body["error"]["code"], body["id"]) == (code, rid)
        if code == -32001:
            assert body["error"]["data"] == {"supported": ["draft"]}


def test_handler_exception_text_is_not_sent(
    client: httpx.Client, check: Callable[[httpx.Response], Any]
) -> None:
    response = post(client, intercept(tool_before("boom", "boom")))
    assert response.status_code == 200
    assert SECRET.encode() not in response.content
    assert check(response)["error"]["code"] == -32004


@pytest.mark.parametrize("method", ["GET", "PUT", "DELETE", "HEAD"])
def test_wrong_method_is_405(client: httpx.Client, method: str) -> None:
    response = client.request(method, "/")
    assert response.status_code == 405
    assert response.headers["allow"] == "POST"
    if method != "HEAD":
        assert "POST" in response.text


@pytest.mark.parametrize(
    "headers",
    [
        {"content-type": "text/plain"},
        {"content-type": "application/x-www-form-urlencoded"},
        {"content-type": "application/json; charset=latin-1"},
        {},
    ],
    ids=["text", "form", "latin-1", "missing"],
)
def test_wrong_content_type_is_415(client: httpx.Client, headers: dict[str, str]) -> None:
    response = post(client, intercept(tool_before("ct")), headers=headers)
    assert response.status_code == 415
    assert "application/json" in response.text or "utf-8" in response.text


def test_oversized_body_is_413(client: httpx.Client) -> None:
    response = post(client, intercept(tool_before("big", "x" * (LIMIT * 2))))
    assert response.status_code == 413
    assert str(LIMIT) in response.text


def test_oversized_streamed_body_is_413(client: httpx.Client) -> None:
    """Without Content-Length (chunked), reading stops once the limit is passed."""

    def body() -> Iterator[bytes]:
        yield b'{"jsonrpc":"2.0","id":"s","method":"hooks/intercept","params":{"pad":"'
        for _ in range(64):
            yield b"x" * 1024
        yield b'"}}'

    response = client.post("/", content=body(), headers=JSON)
    assert response.status_code == 413


@pytest.mark.parametrize(
    "body", [b"{not json", b"\xff\xfe\xfd", b""], ids=["json", "utf8", "empty"]
)
def test_undecodable_body_is_400(
    client: httpx.Client, official_schema: SchemaCheck, body: bytes
) -> None:
    response = post(client, body)
    assert response.status_code == 400
    message = response.json()
    assert official_schema("json-rpc-message.schema.json", message) == []
    assert (message["error"]["code"], message["id"]) == (-32700, None)


def test_unreadable_body_is_400(server: Server) -> None:
    """A malformed chunked body cannot be read: the server answers 400."""
    host, port = server.url.removeprefix("http://").rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=DEADLINE) as sock:
        sock.sendall(
            b"POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b"Transfer-Encoding: chunked\r\n\r\nZZZ\r\nnot a chunk\r\n"
        )
        reply = b""
        while b"\r\n" not in reply:
            chunk = sock.recv(4096)
            if not chunk:
                break
            reply += chunk
    assert reply.startswith(b"HTTP/1.1 400")


def test_async_backend_over_http(check: Callable[[httpx.Response], Any]) -> None:
    srv = Server(BACKENDS / "kit_async.py")
    try:
        with httpx.Client(base_url=srv.url, timeout=DEADLINE) as c:
            response = post(c, intercept(tool_before("a1", "rm -rf /")))
            assert response.status_code == 200
            assert check(response)["result"]["effects"][0]["type"] == "deny"
            response = post(c, observe(session_end("a2")))
            assert (response.status_code, response.content) == (204, b"")
    finally:
        out, _ = srv.stop()
    assert out == b""


@pytest.mark.anyio
async def test_official_sdk_http_transport_interoperates(server: Server) -> None:
    """The SDK's harness-side HTTP transport (which validates responses) accepts ours."""
    import anyio
    from agenthooksprotocol.transports.http import HTTPTransport

    transport = HTTPTransport(server.url + "/")
    try:
        with anyio.fail_after(DEADLINE):
            deny = await transport.request(intercept(tool_before("sdk_1", "rm -rf /")))
            assert deny["result"]["effects"][0]["type"] == "deny"
            allow = await transport.request(intercept(tool_before("sdk_2", "ls")))
            assert allow["result"] == {"protocolVersion": "draft", "effects": []}
            await transport.notify(observe(session_end("sdk_3")))  # raises on a body
            config = await transport.request(configuration_request("sdk_4"))
            assert config["result"]["configuration"]["subscriptions"][1]["mode"] == "observe"
    finally:
        await transport.aclose()

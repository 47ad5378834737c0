"""HTTP backends bound slow clients, bound connections, keep large frames off the event
loop, and authenticate callers (issue 12, items 3 and 8).

Real uvicorn servers in real processes on 127.0.0.1, port 0 (the address is read from
the backend's stderr line, never slept for). ``kit_http_limits.py`` serves the kit's
test backend through ``serve_http`` with short deadlines; the slow clients are raw
sockets that trickle bytes, paced by waiting (bounded) for the server to close them.
No absolute time is asserted: a deadline shows as the server closing a connection the
client never stopped feeding, a stall as an ordinary request waiting about as long as
a large one.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import httpx
import pytest

sys.path.insert(0, str(Path(__file__).parent / "backends"))
from kit_messages import intercept, tool_before

from kit_testing import StderrLines

BACKENDS = Path(__file__).parent / "backends"
DEADLINE = 20.0  # any single wait
PACE = 0.2  # seconds between trickled bytes
JSON = {"content-type": "application/json"}
BEARER = ["--http", "127.0.0.1:0", "--bearer-token-env", "KIT_TEST_TOKEN"]


class Server:
    def __init__(self, argv: list[str], **env: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, *argv],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env={**os.environ, **env},
        )
        assert self.proc.stdout is not None and self.proc.stderr is not None
        self.out: list[bytes] = []
        self.stderr = StderrLines(self.proc.stderr, DEADLINE)
        threading.Thread(target=self._drain, args=(self.proc.stdout,), daemon=True).start()
        self.url = self.stderr.wait_for("listening on http://").split("listening on ", 1)[1].strip()
        host, port = self.url.removeprefix("http://").rsplit(":", 1)
        self.address = (host, int(port))

    def _drain(self, stream: IO[bytes]) -> None:
        for raw in iter(stream.readline, b""):
            self.out.append(raw)

    def stop(self) -> str:
        """Stop the server; what it wrote, stdout and stderr."""
        self.proc.terminate()
        try:
            self.proc.wait(timeout=DEADLINE)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=DEADLINE)
        return b"".join(self.out).decode("utf-8", "replace") + "".join(self.stderr.lines)


@pytest.fixture
def limited() -> Iterator[Server]:
    server = Server(
        [str(BACKENDS / "kit_http_limits.py")],
        KIT_HEADER_TIMEOUT="1",
        KIT_BODY_TIMEOUT="1",
        KIT_MAX_CONNECTIONS="2",
    )
    try:
        yield server
    finally:
        logs = server.stop()
        assert "Traceback" not in logs


def _request(event_id: str = "evt_1", command: str = "ls") -> bytes:
    return json.dumps(intercept(tool_before(event_id, command))).encode()


def _http(body: bytes, *, extra: bytes = b"") -> bytes:
    return (
        b"POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        + extra
        + b"Content-Length: "
        + str(len(body)).encode()
        + b"\r\n\r\n"
        + body
    )


def _connect(server: Server) -> socket.socket:
    sock = socket.create_connection(server.address, timeout=DEADLINE)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def _read_response(sock: socket.socket) -> tuple[int, bytes]:
    """One HTTP response on ``sock``: its status and body (``Content-Length`` framed)."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            raise AssertionError(f"connection closed mid-response: {data!r}")
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    while len(rest) < length:
        chunk = sock.recv(65536)
        if not chunk:
            raise AssertionError("connection closed mid-body")
        rest += chunk
    return int(head.split(b" ")[1]), rest[:length]


def _closed_while_trickling(sock: socket.socket, trickle: bytes) -> int:
    """Send ``trickle`` one byte every ``PACE`` seconds until the server closes the
    connection; the number of bytes sent. Fails if the server still holds it after
    ``DEADLINE`` seconds (or ever answers)."""
    sent = 0
    give_up = time.monotonic() + DEADLINE
    while time.monotonic() < give_up:
        try:
            sock.sendall(trickle[sent % len(trickle) : sent % len(trickle) + 1])
        except (BrokenPipeError, ConnectionResetError):
            return sent
        sent += 1
        readable, _, _ = select.select([sock], [], [], PACE)  # the server closing: a signal
        if readable:
            try:
                data = sock.recv(65536)
            except ConnectionResetError:
                return sent
            if not data:
                return sent
            if data.startswith(b"HTTP/1.1 408"):
                continue  # a body deadline answers first; the close follows
            raise AssertionError(f"unexpected answer to a trickle: {data[:80]!r}")
    raise AssertionError(f"the server still holds a connection that sent {sent} bytes")


def test_a_connection_that_sends_nothing_is_closed(limited: Server) -> None:
    with _connect(limited) as sock:
        sock.settimeout(DEADLINE)
        assert sock.recv(1) == b""  # closed by the server, long before DEADLINE


def test_a_request_head_trickled_byte_by_byte_is_cut_off(limited: Server) -> None:
    with _connect(limited) as sock:
        head = b"POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: " + b"a" * 4096
        assert _closed_while_trickling(sock, head) >= 3


def test_a_kept_alive_connection_trickling_its_next_head_is_cut_off(limited: Server) -> None:
    with _connect(limited) as sock:
        sock.sendall(_http(_request()))
        status, body = _read_response(sock)
        assert status == 200 and json.loads(body)["result"]["effects"] == []
        # uvicorn's keep-alive timer restarts on every byte; the head deadline does not.
        assert _closed_while_trickling(sock, b"POST / HTTP/1.1\r\nX-Slow: " + b"a" * 4096) >= 3


def test_a_trickled_body_gets_408_and_the_connection_is_closed(limited: Server) -> None:
    with _connect(limited) as sock:
        body = _request()
        sock.sendall(_http(body)[: -len(body)])  # the head only
        status, text = _read_response_after_trickle(sock, body)
        assert status == 408 and b"not received within" in text
        sock.settimeout(DEADLINE)
        with contextlib.suppress(ConnectionResetError):
            assert sock.recv(1) == b""


def _read_response_after_trickle(sock: socket.socket, body: bytes) -> tuple[int, bytes]:
    give_up = time.monotonic() + DEADLINE
    for byte in body:
        if time.monotonic() > give_up:
            break
        sock.sendall(bytes([byte]))
        readable, _, _ = select.select([sock], [], [], PACE)
        if readable:
            return _read_response(sock)
    raise AssertionError("the server waited for the whole trickled body")


def test_connections_beyond_the_limit_get_503(limited: Server) -> None:
    held = [_connect(limited) for _ in range(2)]
    try:
        for sock in held:  # both are open and served (kept alive)
            sock.sendall(_http(_request()))
            assert _read_response(sock)[0] == 200
        with _connect(limited) as extra:
            extra.sendall(_http(_request()))
            status, _ = _read_response(extra)
            assert status == 503
    finally:
        for sock in held:
            sock.close()
    # Once they are gone, new connections are served again.
    give_up = time.monotonic() + DEADLINE
    while True:
        with _connect(limited) as sock:
            sock.sendall(_http(_request()))
            status, _ = _read_response(sock)
        if status == 200:
            break
        assert time.monotonic() < give_up, "the server never served a new connection"


def test_connections_that_send_nothing_do_not_count_against_the_limit(limited: Server) -> None:
    idle = [_connect(limited) for _ in range(5)]  # the limit is 2
    try:
        for _ in range(3):
            with _connect(limited) as sock:
                sock.sendall(_http(_request()))
                status, body = _read_response(sock)
            assert status == 200 and json.loads(body)["result"]["effects"] == []
    finally:
        for sock in idle:
            sock.close()


def test_a_large_request_does_not_hold_up_an_ordinary_one() -> None:
    server = Server(
        [str(BACKENDS / "kit_http_limits.py")], KIT_MAX_FRAME_BYTES=str(8 * 1024 * 1024)
    )
    try:
        event = tool_before("evt_big")
        event["items"] = [
            {"id": f"p{i}", "kind": "text", "mediaType": "text/plain", "selection": "body"}
            | {"text": "x"}
            for i in range(50_000)
        ]
        large = json.dumps(intercept(event)).encode()
        small = _request("evt_small")
        with httpx.Client(base_url=server.url, timeout=DEADLINE * 3) as client:
            for _ in range(20):  # warm up
                assert client.post("/", content=small, headers=JSON).status_code == 200
            done = threading.Event()
            spent: list[float] = []

            def send_large() -> None:
                with httpx.Client(base_url=server.url, timeout=DEADLINE * 3) as other:
                    start = time.perf_counter()
                    response = other.post("/", content=large, headers=JSON)
                    spent.append(time.perf_counter() - start)
                    assert response.json()["result"]["effects"] == []
                    done.set()

            thread = threading.Thread(target=send_large)
            thread.start()
            waits: list[float] = []
            while not done.is_set():
                start = time.perf_counter()
                response = client.post("/", content=small, headers=JSON)
                waits.append(time.perf_counter() - start)
                assert response.json()["result"]["effects"] == []
            thread.join(DEADLINE * 3)
        assert spent, "the large request was not answered"
        # Judged on the event loop, an ordinary request waited for (nearly) all of it.
        assert len(waits) >= 3 and max(waits) < spent[0] / 2, (max(waits), spent[0], len(waits))
    finally:
        server.stop()


# --------------------------------------------------------------------------- Backend.run


def test_backend_run_refuses_a_non_loopback_bind_without_allow_remote() -> None:
    for address in ("0.0.0.0:0", "[::]:0", "192.0.2.1:8765", "example.com:80"):
        done = subprocess.run(
            [sys.executable, str(BACKENDS / "kit_denylist.py"), "--http", address],
            capture_output=True,
            timeout=DEADLINE,
        )
        err = done.stderr.decode()
        assert done.returncode == 2, address
        assert "refusing a non-loopback address" in err and "--allow-remote" in err
        assert "listening" not in err


def test_backend_run_with_a_bearer_token_answers_only_its_bearer() -> None:
    token = "kit-" + os.urandom(16).hex()
    server = Server(
        [str(BACKENDS / "kit_denylist.py"), *BEARER],
        KIT_TEST_TOKEN=token,
    )
    try:
        body = _request("evt_1", "rm -rf /")
        with httpx.Client(base_url=server.url, timeout=DEADLINE) as client:
            missing = client.post("/", content=body, headers=JSON)
            wrong = client.post(
                "/", content=body, headers={**JSON, "authorization": f"Bearer {token[:-1]}"}
            )
            right = client.post(
                "/", content=body, headers={**JSON, "authorization": f"Bearer {token}"}
            )
            # Authentication comes first: even a wrong method learns nothing else.
            get = client.get("/")
        assert (missing.status_code, missing.headers["www-authenticate"]) == (401, "Bearer")
        assert (wrong.status_code, wrong.headers["www-authenticate"]) == (
            401,
            'Bearer error="invalid_token"',
        )
        assert get.status_code == 401
        assert right.status_code == 200
        assert right.json()["result"]["effects"][0]["type"] == "deny"
    finally:
        logs = server.stop()
    assert token not in logs and token[:-1] not in logs


def test_backend_run_names_a_missing_token_variable() -> None:
    env = {k: v for k, v in os.environ.items() if k != "KIT_TEST_TOKEN"}
    done = subprocess.run(
        [sys.executable, str(BACKENDS / "kit_denylist.py"), *BEARER],
        capture_output=True,
        env=env,
        timeout=DEADLINE,
    )
    err = done.stderr.decode()
    assert done.returncode == 2
    assert "KIT_TEST_TOKEN is not set" in err and "listening" not in err

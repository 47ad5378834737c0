"""A small fake OpenAI-compatible chat-completions server on 127.0.0.1, for tests.

``FakeOpenAI`` (a context manager) binds a free loopback port before it returns, so it
is ready without waiting, and serves from a background thread (stdlib ``http.server``).
Every ``POST .../chat/completions`` is recorded (path, headers, decoded JSON body) and
answered with the next queued response: ``(status, JSON body or raw bytes)``, held back
until its ``gate`` event is set when one is given (to test client timeouts; 30 s at
most). With the queue empty it answers 500 ``{"error": {"type": "fake_exhausted"}}``.
Anything else is a 404.

Helpers build the two answer shapes: :func:`tool_call_response` and
:func:`text_response`. Run as a script to serve queued answers from a JSON file (a
list of response bodies) for manual demos: ``python fake_openai.py answers.json``.
"""

from __future__ import annotations

import json
import sys
import threading
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any


@dataclass
class Recorded:
    """One request the fake received."""

    method: str
    path: str
    headers: dict[str, str]
    raw: bytes
    body: Any = None


@dataclass
class _State:
    answers: deque[tuple[int, Any, threading.Event | None]] = field(default_factory=deque)
    requests: list[Recorded] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


def tool_call_response(*calls: tuple[str, str, Any], content: str | None = None) -> dict[str, Any]:
    """A completion proposing ``calls``: ``(call id, function name, arguments)``.

    ``arguments`` is sent as given when it is a string, else JSON-encoded.
    """
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "model": "fake-model",
        "choices": [
            {
                "index": 0,
                "finish_reason": "tool_calls",
                "message": {
                    "role": "assistant",
                    "content": content,
                    "tool_calls": [
                        {
                            "id": cid,
                            "type": "function",
                            "function": {
                                "name": name,
                                "arguments": args if isinstance(args, str) else json.dumps(args),
                            },
                        }
                        for cid, name, args in calls
                    ],
                },
            }
        ],
    }


def text_response(text: str, finish_reason: str = "stop") -> dict[str, Any]:
    """A completion that only says ``text``."""
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "model": "fake-model",
        "choices": [
            {
                "index": 0,
                "finish_reason": finish_reason,
                "message": {"role": "assistant", "content": text},
            }
        ],
    }


def _handler(state: _State) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:  # quiet
            return None

        def _send(self, status: int, body: Any) -> None:
            data = body if isinstance(body, bytes) else json.dumps(body).encode("utf-8")
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length)
            try:
                body = json.loads(raw)
            except ValueError:
                body = None
            record = Recorded("POST", self.path, dict(self.headers.items()), raw, body)
            with state.lock:
                state.requests.append(record)
                answer = state.answers.popleft() if state.answers else None
            if not self.path.endswith("/chat/completions"):
                self._send(404, {"error": {"type": "not_found"}})
            elif answer is None:
                self._send(500, {"error": {"type": "fake_exhausted"}})
            else:
                status, reply, gate = answer
                if gate is not None:
                    gate.wait(timeout=30)
                self._send(status, reply)

        def do_GET(self) -> None:
            self._send(404, {"error": {"type": "not_found"}})

    return Handler


class FakeOpenAI:
    """The fake server. ``base_url`` is ``http://127.0.0.1:<port>/v1``."""

    def __init__(self) -> None:
        self._state = _State()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self._state))
        self._server.daemon_threads = True
        self.port: int = self._server.server_address[1]
        self.base_url = f"http://127.0.0.1:{self.port}/v1"
        self._thread: threading.Thread | None = None

    def answer(
        self, body: Any, status: int = 200, *, gate: threading.Event | None = None
    ) -> FakeOpenAI:
        """Queue one answer (served in order); with ``gate``, sent only once it is set."""
        with self._state.lock:
            self._state.answers.append((status, body, gate))
        return self

    @property
    def requests(self) -> list[Recorded]:
        """The requests received so far, in order."""
        with self._state.lock:
            return list(self._state.requests)

    def start(self) -> FakeOpenAI:
        # The socket is already bound and listening: clients can connect at once.
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._thread is not None:
            self._server.shutdown()
            self._thread.join(timeout=10)
            self._thread = None
        self._server.server_close()

    def __enter__(self) -> FakeOpenAI:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def main(argv: list[str]) -> int:
    """Serve the response bodies listed in a JSON file, then exit on Ctrl-C."""
    if len(argv) != 1:
        print("usage: python fake_openai.py ANSWERS.json", file=sys.stderr)
        return 2
    with open(argv[0], encoding="utf-8") as handle:
        answers = json.load(handle)
    fake = FakeOpenAI()
    for body in answers:
        fake.answer(body)
    print(fake.base_url, flush=True)
    try:
        fake._server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        fake._server.server_close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

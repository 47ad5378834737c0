"""A tiny AHP backend that answers every intercept with fixed, unchecked effects (stdlib only).

    effects.py --effects JSON [--once] [--http HOST:PORT] [--record FILE]

Unlike our server kit it never checks an effect against ``params.capabilities``:
it is how the e2e tests send an effect the harness did not advertise (``ask`` to
a non-interactive harness) over every transport. ``hooks/observe`` notifications
are recorded and never answered (HTTP: ``202`` with no body). ``--record FILE``
appends ``{"event": "message", "message": ...}`` per received message. With
``--http`` the bound port is the first line on stderr. Other methods get
``-32601``.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

_record_fd: int | None = None


def record(message: Any) -> None:
    if _record_fd is not None:
        line = json.dumps({"pid": os.getpid(), "event": "message", "message": message}) + "\n"
        os.write(_record_fd, line.encode("utf-8"))


def answer(message: Any, effects: list[Any]) -> dict[str, Any] | None:
    """The response to one message (``None`` for a notification)."""
    if not isinstance(message, dict) or "id" not in message:
        return None
    if message.get("method") != "hooks/intercept":
        error = {"code": -32601, "message": "method not found"}
        return {"jsonrpc": "2.0", "id": message["id"], "error": error}
    result = {"protocolVersion": "draft", "effects": effects}
    return {"jsonrpc": "2.0", "id": message["id"], "result": result}


def serve_stdio(effects: list[Any], once: bool) -> None:
    for raw in sys.stdin.buffer:
        message = json.loads(raw)
        record(message)
        response = answer(message, effects)
        if response is not None:
            sys.stdout.buffer.write(json.dumps(response).encode("utf-8") + b"\n")
            sys.stdout.buffer.flush()
        if once:
            return


def serve_http(address: str, effects: list[Any]) -> None:
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            return

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            message = json.loads(body)
            record(message)
            response = answer(message, effects)
            data = b"" if response is None else json.dumps(response).encode("utf-8")
            self.send_response(202 if response is None else 200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    host, _, port = address.rpartition(":")
    server = ThreadingHTTPServer((host, int(port)), Handler)
    server.daemon_threads = True
    sys.stderr.write(f"{server.server_address[1]}\n")
    sys.stderr.flush()
    server.serve_forever()


def main(argv: list[str]) -> None:
    global _record_fd
    effects: list[Any] = []
    once = False
    http = None
    items = iter(argv)
    for item in items:
        if item == "--once":
            once = True
        elif item in ("--effects", "--http", "--record"):
            value = next(items, None)
            if value is None:
                sys.exit(f"{item} needs a value")
            if item == "--effects":
                effects = json.loads(value)
            elif item == "--http":
                http = value
            else:
                _record_fd = os.open(value, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        else:
            sys.exit(f"unknown argument {item}")
    if http is not None:
        serve_http(http, effects)
    else:
        serve_stdio(effects, once)


if __name__ == "__main__":
    main(sys.argv[1:])

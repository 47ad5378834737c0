"""The scripted misbehaving backend as a process: stdio or loopback HTTP.

``python -m ahp_protocol.testing [--fault MODE] [--delay-ms N] [--http HOST:PORT]
[--ready-file FILE] [--bearer-token-env VAR] [--record FILE]`` serves
:class:`~ahp_protocol.testing.Misbehaving`.

Transports: stdio (default: one compact JSON line per message, requests answered in
order; exits on stdin EOF; works as ``persistent`` and as ``per_event``), or ``--http
HOST:PORT`` (loopback only; port 0 picks one; the bound URL is printed on stderr as
``listening on URL`` and, with ``--ready-file FILE``, written atomically to FILE as
``{endpoint, port, pid}`` once listening). Over HTTP every ``POST`` is one AHP message,
``GET /capabilities`` answers the capabilities object, a notification gets ``202`` with
no body, and the fault applies to the reply body: ``garbage``, ``non-utf8`` and
``stdout-noise`` make the body not JSON; ``stray-frame`` sends only the other-id frame
(one body carries one message); ``multi-line`` is *not* a fault over HTTP (a
pretty-printed body is valid JSON); ``crash`` exits while the connection is open;
``hang`` holds the connection open. With ``--bearer-token-env VAR`` every HTTP request
without ``Authorization: Bearer`` and VAR's value gets ``401`` (the token is never recorded).

``--record FILE`` appends one JSON line per message received, as soon as it arrives:
``{"time": UNIX_SECONDS, "pid": PID, "transport": "stdio"|"http", "message": ...}``
(``message`` is the decoded JSON value, or ``{"undecodable": TEXT}``; over HTTP also
``"contentType"``, the request's ``Content-Type`` header or ``null``).

It never waits longer than its mode says (``hang`` waits for its harness to give up;
``late`` answers after ``--delay-ms``), starts no child process, and exits on stdin EOF
over stdio, or on SIGTERM.
"""

from __future__ import annotations

import argparse
import contextlib
import ipaddress
import json
import os
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from ahp_protocol.testing.faults import (
    CRASH_STATUS,
    DEFAULT_LATE_MS,
    FAULTS,
    MAX_FRAME_BYTES,
    Misbehaving,
    http_capabilities,
)


def write_json_atomically(path: Path, value: Any) -> None:
    """Write ``value`` so a reader never sees half a file (write, then rename)."""
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    temporary.write_text(json.dumps(value), "utf-8")
    os.replace(temporary, path)


# -- recording ------------------------------------------------------------------------


class Recorder:
    """``--record FILE``: one JSON line per received message, appended as it arrives."""

    def __init__(self, path: str | None) -> None:
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600) if path else None

    def __call__(self, raw: bytes, transport: str, content_type: str | None = None) -> None:
        if self._fd is None:
            return
        try:
            message: Any = json.loads(raw)
        except ValueError:
            message = {"undecodable": raw[:2000].decode("utf-8", "replace")}
        entry: dict[str, Any] = {
            "time": time.time(),
            "pid": os.getpid(),
            "transport": transport,
            "message": message,
        }
        if transport == "http":
            entry["contentType"] = content_type
        os.write(self._fd, json.dumps(entry).encode() + b"\n")


def read_entries(path: Path) -> list[dict[str, Any]]:
    """What a fake backend recorded (``--record``): one entry per message, in order."""
    if not path.is_file():
        return []
    return [json.loads(raw) for raw in path.read_text("utf-8").splitlines() if raw.strip()]


def read_record(path: Path) -> list[dict[str, Any]]:
    """The messages a fake backend recorded (``--record``), in order."""
    out = []
    for entry in read_entries(path):
        message = entry["message"]
        out.append(message if isinstance(message, dict) else {"undecodable": message})
    return out


def _crash() -> NoReturn:
    sys.stdout.flush()
    os._exit(CRASH_STATUS)


# -- stdio ----------------------------------------------------------------------------


def serve_stdio(fake: Misbehaving, record: Recorder) -> int:
    """Persistent stdio: read lines until EOF, answer each in order (``late`` answers later)."""
    out = sys.stdout.buffer
    write_lock = threading.Lock()

    def write(frames: list[bytes]) -> None:
        with write_lock:
            for frame in frames:
                out.write(frame)
            out.flush()

    stdin = sys.stdin.buffer
    while True:
        raw = stdin.readline(MAX_FRAME_BYTES + 2)
        if not raw:
            return 0
        if not raw.strip():
            continue
        record(raw, "stdio")
        answer = fake.answer(raw)
        if answer.crash:
            _crash()
        if answer.hang or not answer.frames:
            continue
        if answer.delay_s > 0:
            timer = threading.Timer(answer.delay_s, write, (answer.frames,))
            timer.daemon = True
            timer.start()
        else:
            write(answer.frames)


# -- HTTP -----------------------------------------------------------------------------


def loopback_address(text: str) -> tuple[str, int]:
    """``HOST:PORT`` on a loopback interface (anything else is refused)."""
    host, sep, port = text.rpartition(":")
    host = host.strip("[]")
    if not sep or not port.isdigit() or int(port) > 65535:
        raise ValueError(f"--http {text!r}: expected HOST:PORT, e.g. 127.0.0.1:0")
    try:
        loopback = host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = False
    if not loopback:
        raise ValueError(f"--http {text!r}: the scripted backend listens on loopback only")
    return host, int(port)


if TYPE_CHECKING:
    from http.server import ThreadingHTTPServer


def http_server(
    fake: Misbehaving, record: Recorder, address: tuple[str, int], bearer: str | None = None
) -> ThreadingHTTPServer:
    """An HTTP server answering every ``POST`` as one AHP message (not started)."""
    hold = threading.Event()  # never set: where ``hang`` waits

    # Imported here: a stdio process (one per event over per_event) does not pay for it.
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True  # headers and body are two writes: no 40 ms stall

        def log_message(self, *_args: object) -> None:
            pass

        def _send(self, status: int, body: bytes, media: str = "application/json") -> None:
            self.send_response(status)
            if body:
                self.send_header("Content-Type", media)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _authorized(self) -> bool:
            if bearer is None:
                return True
            values = self.headers.get_all("Authorization") or []
            return values == [f"Bearer {bearer}"]

        def do_GET(self) -> None:
            if self.path.rstrip("/").endswith("/capabilities"):
                if not self._authorized():
                    self._send(401, b'{"error":"unauthorized"}')
                    return
                self._send(200, json.dumps(http_capabilities()).encode())
            else:
                self._send(405, b'{"error":"AHP over HTTP is POST"}')

        def do_POST(self) -> None:
            try:
                length = int(self.headers.get("Content-Length") or "0")
            except ValueError:
                length = -1
            if length < 0 or length > MAX_FRAME_BYTES:
                self._send(413 if length > 0 else 400, b'{"error":"bad request size"}')
                return
            raw = self.rfile.read(length)
            if not self._authorized():
                self._send(401, b'{"error":"unauthorized"}')
                return
            record(raw, "http", self.headers.get("Content-Type"))
            answer = fake.answer(raw)
            if answer.crash:
                _crash()
            if answer.hang:
                hold.wait()
                return
            if answer.delay_s > 0:
                time.sleep(answer.delay_s)
            if not answer.frames:
                self._send(202 if answer.notification else 204, b"")
                return
            # One body carries one message: a stray frame's body is the other-id frame
            # alone; noise stays in front of the reply, so that body is not JSON.
            body = answer.frames[0] if fake.fault == "stray-frame" else b"".join(answer.frames)
            self._send(200, body.rstrip(b"\n"))

    server = ThreadingHTTPServer(address, Handler)
    server.daemon_threads = True
    return server


def serve_http(
    fake: Misbehaving,
    record: Recorder,
    address: str,
    ready_file: str | None,
    bearer: str | None = None,
) -> int:
    server = http_server(fake, record, loopback_address(address), bearer)
    host = str(server.server_address[0])
    port = int(server.server_address[1])
    shown = f"[{host}]" if ":" in host else host
    endpoint = f"http://{shown}:{port}/"
    print(f"listening on {endpoint}", file=sys.stderr, flush=True)
    if ready_file:
        write_json_atomically(
            Path(ready_file), {"endpoint": endpoint, "port": port, "pid": os.getpid()}
        )
    with contextlib.suppress(KeyboardInterrupt):
        server.serve_forever()
    return 0


# -- the command line -----------------------------------------------------------------


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of the process form (the conformance fake backend adds its own)."""
    parser.add_argument(
        "--fault",
        choices=sorted(FAULTS),
        metavar="MODE",
        help="misbehave on every valid hooks/intercept: "
        + "; ".join(f"{k}: {v}" for k, v in FAULTS.items()),
    )
    parser.add_argument(
        "--delay-ms", type=int, default=DEFAULT_LATE_MS, metavar="N", help="how late 'late' answers"
    )
    parser.add_argument(
        "--record", metavar="FILE", help="append every received message to FILE (JSON lines)"
    )
    parser.add_argument(
        "--http",
        metavar="HOST:PORT",
        help="serve HTTP on a loopback address instead of stdio (port 0: any)",
    )
    parser.add_argument(
        "--ready-file",
        metavar="FILE",
        help="with --http: write {endpoint, port, pid} here once listening",
    )
    parser.add_argument(
        "--bearer-token-env",
        metavar="VAR",
        help="with --http: answer 401 to every request without 'Authorization: Bearer' "
        "and the value of VAR",
    )


def serve(fake: Misbehaving, args: argparse.Namespace) -> int:
    """Serve ``fake`` as ``args`` say (stdio, or ``--http``)."""
    record = Recorder(args.record)
    if args.http:
        bearer = None
        if getattr(args, "bearer_token_env", None):
            bearer = os.environ.get(args.bearer_token_env) or None
            if bearer is None:
                raise ValueError(f"--bearer-token-env {args.bearer_token_env}: not set or empty")
        return serve_http(fake, record, args.http, args.ready_file, bearer)
    return serve_stdio(fake, record)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m ahp_protocol.testing",
        description="A scripted AHP backend that misbehaves on purpose (one fault per run).",
    )
    add_arguments(parser)
    args = parser.parse_args(argv)
    try:
        return serve(Misbehaving(args.fault, delay_ms=args.delay_ms), args)
    except ValueError as exc:
        parser.error(str(exc))

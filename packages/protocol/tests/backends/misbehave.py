"""A purpose-built misbehaving AHP backend for transport tests (standard library only).

It deliberately does NOT use our server kit: it is the adversary the client
transports are tested against, at the level of bytes and processes (frames split or
unterminated, stderr floods, grandchildren, lingering children, HTTP statuses),
which the kit's scripted backend (``ahp_protocol.testing``, answers judged by the
client's rules, in memory or as a process) does not reach. Where the two share a
fault they share its name (``ahp_protocol.testing.FAULTS``: ``multi-line``,
``non-utf8``, ``wrong-id``, ``garbage``, ...). One process serves NDJSON on stdin/stdout (the
default) or, with ``--http HOST:PORT``, plain HTTP on a tiny ThreadingHTTPServer.

Mode selection, most specific first: a request's ``params._mode`` (with optional
``params._delay_ms``), then (HTTP only) the URL path (``POST /garbage``), then
the positional ``MODE`` argument, then ``MISBEHAVE_MODE``, then ``ok``.

Request modes (stdio and HTTP): ok, deny, hang, crash, garbage, multi-line, wrong-id,
stray-then-MODE (a response with another id, then the answer of MODE), strays (stdio:
``params._strays`` responses with other ids, then the answer of mode ``params._then``,
default ok, all in one write), rpc-error,
wrong-version, no-effects (a result without ``effects``), null-effects (``"effects":
null``), unknown-effect, unadvertised-effect, oversized, late,
slow-start, stderr-noise, exit-before-answer, non-utf8, linger (answers, then
never exits), answer-then-fail (answers, then exits 3), unterminated (answer
without the newline, then exit 0), two-responses, grandchild (forks a sleeping
grandchild in its process group, records its pid, answers ok), deep-N (an answer
whose result holds a value nested inside N arrays, e.g. deep-100000).
HTTP-only modes: http-500, redirect (302), wrong-content-type, observe-body
(a body on a notification's 202), notify-200 (200 with no body on a notification),
no-content (204 on a notification), oversized-stream (endless chunked body).

Notifications are never answered on stdio. ``--record FILE`` appends one JSON
line per event (start, message, raw) and flushes it at once. The HTTP server
prints its bound port as the first line on stderr, or writes it to
``--port-file`` (a FIFO works: the reader is woken by the write).
"""

from __future__ import annotations

import json
import os
import sys
import time

TYPE_CHECKING = False
if TYPE_CHECKING:  # nothing heavy at start-up: per-event spawn time matters
    from http.server import BaseHTTPRequestHandler
    from typing import Any

OVERSIZE_BYTES = 5 * 1024 * 1024
NOISE_BYTES = 1024 * 1024
FOREVER = 3600.0

_record_fd: int | None = None


def record(entry: dict[str, Any]) -> None:
    """Append one JSON line (a single ``write`` on an O_APPEND descriptor)."""
    if _record_fd is None:
        return
    entry = {"pid": os.getpid(), "time": time.time(), **entry}
    os.write(_record_fd, (json.dumps(entry, ensure_ascii=True) + "\n").encode("ascii"))


def success(rid: Any, result: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "result": result}


def line(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode("utf-8") + b"\n"


def ok(rid: Any) -> dict[str, Any]:
    return success(rid, {"protocolVersion": "draft", "effects": []})


def answer(mode: str, rid: Any) -> bytes:
    """The bytes one request gets in ``mode`` (modes with side effects are handled by callers)."""
    if mode == "deny":
        deny = {
            "type": "deny",
            "reason": "Denied by the misbehave backend",
            "code": "org.example.x",
        }
        return line(success(rid, {"protocolVersion": "draft", "effects": [deny]}))
    if mode == "garbage":
        return b"this is not json at all\n"
    if mode == "multi-line":
        return json.dumps(ok(rid), indent=2).encode("utf-8") + b"\n"
    if mode == "wrong-id":
        other = f"{rid}-wrong" if isinstance(rid, str) else (rid or 0) + 1
        return line(ok(other))
    if mode.startswith("stray-then-"):  # an uncorrelated response, then the real answer
        other = f"{rid}-stray" if isinstance(rid, str) else (rid or 0) + 1
        return line(ok(other)) + answer(mode.removeprefix("stray-then-"), rid)
    if mode == "rpc-error":
        # ``message`` is free text a harness must never show; ``data.reason`` is the fixed
        # reason a diagnostic may keep (bounded, printable).
        error = {
            "code": -32004,
            "message": "teleport to mars failed",
            "data": {"reason": "evaluation failed"},
        }
        return line({"jsonrpc": "2.0", "id": rid, "error": error})
    if mode == "no-effects":  # a success result without the effects array (AHP-DEC-001)
        return line(success(rid, {"protocolVersion": "draft"}))
    if mode == "null-effects":
        return line(success(rid, {"protocolVersion": "draft", "effects": None}))
    if mode == "wrong-version":
        return line(success(rid, {"protocolVersion": "0.1", "effects": []}))
    if mode == "unknown-effect":
        effect = {"type": "teleport", "destination": "mars"}
        return line(success(rid, {"protocolVersion": "draft", "effects": [effect]}))
    if mode == "unadvertised-effect":
        effect = {"type": "allow"}
        return line(success(rid, {"protocolVersion": "draft", "effects": [effect]}))
    if mode == "oversized":
        result = {"protocolVersion": "draft", "effects": [], "padding": "x" * OVERSIZE_BYTES}
        return line(success(rid, result))
    if mode == "non-utf8":
        head = b'{"jsonrpc":"2.0","id":' + json.dumps(rid).encode("utf-8")
        return head + b',"result":{"protocolVersion":"draft","effects":[],"x":"\xff\xfe"}}\n'
    if mode.startswith("deep-"):  # deep-N: a result holding a value inside N arrays
        depth = int(mode.removeprefix("deep-"))
        head = b'{"jsonrpc":"2.0","id":' + json.dumps(rid).encode("utf-8")
        nested = b"[" * depth + b"]" * depth
        return head + b',"result":{"protocolVersion":"draft","effects":[],"x":' + nested + b"}}\n"
    if mode == "unterminated":
        return line(ok(rid))[:-1]
    if mode == "two-responses":
        return line(ok(rid)) + line(ok(rid))
    return line(ok(rid))


def message_mode(message: Any, default: str) -> tuple[str, float | None]:
    params = message.get("params") if isinstance(message, dict) else None
    if isinstance(params, dict) and isinstance(params.get("_mode"), str):
        delay = params.get("_delay_ms")
        return params["_mode"], (delay / 1000.0 if isinstance(delay, int | float) else None)
    return default, None


def noise() -> None:
    chunk = b"stderr noise " * 80 + b"\n"
    written = 0
    while written < NOISE_BYTES:
        os.write(2, chunk)
        written += len(chunk)


def spawn_grandchild() -> None:
    pid = os.fork()
    if pid == 0:  # the grandchild: keep stderr (the drain pipe) open, drop stdin/stdout
        try:
            os.close(0)
            os.close(1)
            time.sleep(FOREVER)
        finally:
            os._exit(0)
    record({"event": "grandchild", "grandchild": pid})


# -- stdio ---------------------------------------------------------------------------


def write_out(data: bytes) -> None:
    try:
        out = sys.stdout.buffer
        out.write(data)
        out.flush()
    except (BrokenPipeError, OSError):
        os._exit(0)


def strays(message: dict[str, Any], rid: Any) -> bytes:
    """``_strays`` uncorrelated responses, then the answer of mode ``_then`` (one write)."""
    params = message.get("params") or {}
    count, then = params.get("_strays", 1), params.get("_then", "ok")
    frames = [line(ok(f"{rid}-stray-{i}")) for i in range(count)]
    return b"".join(frames) + answer(then, rid)


def serve_stdio(args: Options) -> None:
    if args.mode == "slow-start":
        time.sleep(args.delay_ms / 1000.0)
    stdin = sys.stdin.buffer
    while True:
        raw = stdin.readline()
        if not raw:
            break
        try:
            message = json.loads(raw)
        except ValueError:
            record({"event": "raw", "size": len(raw)})
            continue
        record({"event": "message", "message": message})
        if not isinstance(message, dict) or "id" not in message:
            continue  # notifications never get a response
        mode, delay = message_mode(message, args.mode)
        rid = message["id"]
        if mode == "hang":
            time.sleep(FOREVER)
        if mode in ("crash", "exit-before-answer"):
            os._exit(3 if mode == "crash" else 0)
        if mode == "stderr-noise":
            noise()
        if mode == "late":
            time.sleep(delay if delay is not None else args.delay_ms / 1000.0)
        if mode == "grandchild":
            spawn_grandchild()
        write_out(strays(message, rid) if mode == "strays" else answer(mode, rid))
        if mode in ("unterminated", "answer-then-fail"):
            os._exit(0 if mode == "unterminated" else 3)
        if mode == "linger":
            time.sleep(FOREVER)
        if args.once:
            break
    if args.mode == "linger":
        time.sleep(FOREVER)


# -- HTTP ----------------------------------------------------------------------------


def make_handler(args: Options) -> type[BaseHTTPRequestHandler]:
    from http.server import BaseHTTPRequestHandler
    from urllib.parse import parse_qs, urlsplit

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        server_version = "misbehave"

        def log_message(self, format: str, *a: Any) -> None:  # silence per-request logs
            return

        def reply(self, status: int, body: bytes = b"", ctype: str = "application/json") -> None:
            self.send_response(status)
            if body or status not in (204,):
                self.send_header("Content-Type", ctype)
            if status != 204:
                self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if body:
                self.wfile.write(body)

        def drop(self) -> None:
            self.close_connection = True
            self.wfile.flush()

        def do_GET(self) -> None:
            self.reply(405, b"")

        def do_POST(self) -> None:
            parts = urlsplit(self.path)
            query = parse_qs(parts.query)
            path_mode = parts.path.strip("/") or args.mode
            if path_mode == "slow-start":
                time.sleep(args.delay_ms / 1000.0)
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length)
            try:
                message = json.loads(raw)
            except ValueError:
                record({"event": "raw", "size": len(raw), "path": parts.path})
                self.reply(400, b"")
                return
            record(
                {
                    "event": "message",
                    "message": message,
                    "path": parts.path,
                    "headers": [[k, v] for k, v in self.headers.items()],
                }
            )
            mode, delay = message_mode(message, path_mode)
            if "delay_ms" in query:
                delay = float(query["delay_ms"][0]) / 1000.0
            is_request = isinstance(message, dict) and "id" in message
            if mode == "hang":
                time.sleep(FOREVER)
            if mode in ("crash", "exit-before-answer"):
                self.drop()
                return
            if mode == "stderr-noise":
                noise()
            if mode == "late":
                time.sleep(delay if delay is not None else args.delay_ms / 1000.0)
            if mode == "http-500":
                self.reply(500, b'{"error":"internal"}')
                return
            if mode == "redirect":
                self.send_response(302)
                self.send_header("Location", "/ok")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            if not is_request:
                if mode == "observe-body":
                    self.reply(202, b'{"ack":true}')
                elif mode == "notify-200":
                    self.reply(200, b"")
                elif mode == "no-content":
                    self.reply(204)
                else:
                    self.reply(202, b"")
                return
            rid = message["id"]
            if mode == "oversized-stream":
                self.stream_forever()
                return
            body = answer(mode, rid)
            ctype = "text/plain" if mode == "wrong-content-type" else "application/json"
            self.reply(200, body, ctype)

        def stream_forever(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            chunk = b"x" * 65536
            frame = f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n"
            try:
                self.wfile.write(b'6\r\n{"a":"\r\n')
                while True:
                    self.wfile.write(frame)
            except OSError:
                self.close_connection = True

    return Handler


def serve_http(args: Options) -> None:
    from http.server import ThreadingHTTPServer

    host, _, port = (args.http or "127.0.0.1:0").rpartition(":")
    server = ThreadingHTTPServer((host.strip("[]"), int(port)), make_handler(args))
    server.daemon_threads = True
    bound = server.server_address[1]
    if args.port_file:
        with open(args.port_file, "w", encoding="ascii") as f:
            f.write(f"{bound}\n")
    else:
        sys.stderr.write(f"{bound}\n")
        sys.stderr.flush()
    server.serve_forever()


class Options:
    """The command line (hand-parsed: ``argparse`` alone would double the start-up time)."""

    USAGE = (
        "usage: misbehave.py [MODE] [--once] [--http HOST:PORT] [--record FILE] "
        "[--port-file FILE] [--delay-ms N]"
    )

    def __init__(self, argv: list[str]) -> None:
        self.mode = os.environ.get("MISBEHAVE_MODE", "ok")
        self.once = False
        self.http: str | None = None
        self.record: str | None = None
        self.port_file: str | None = None
        self.delay_ms = 300
        items = iter(argv)
        for item in items:
            if item == "--once":
                self.once = True
            elif item in ("--http", "--record", "--port-file", "--delay-ms"):
                value = next(items, None)
                if value is None:
                    sys.exit(f"{item} needs a value\n{self.USAGE}")
                if item == "--delay-ms":
                    self.delay_ms = int(value)
                else:
                    setattr(self, item[2:].replace("-", "_"), value)
            elif item in ("-h", "--help"):
                print(__doc__)
                print(self.USAGE)
                sys.exit(0)
            elif item.startswith("-"):
                sys.exit(f"unknown option {item}\n{self.USAGE}")
            else:
                self.mode = item


def main(argv: list[str] | None = None) -> None:
    global _record_fd
    args = Options(sys.argv[1:] if argv is None else argv)
    if args.record:
        _record_fd = os.open(args.record, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        record(
            {
                "event": "start",
                "ppid": os.getppid(),
                "cwd": os.getcwd(),
                "env": dict(os.environ),
                "argv": sys.argv[1:],
            }
        )
    if args.http:
        serve_http(args)
    else:
        serve_stdio(args)


if __name__ == "__main__":
    main()

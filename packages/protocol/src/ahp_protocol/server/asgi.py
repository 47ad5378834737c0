"""Serve a :class:`~ahp_protocol.server.Backend` over HTTP: an ASGI app and a uvicorn runner.

:class:`App` is an ASGI 3 application (AHP-HTTP-001). Each JSON-RPC message is one
``POST`` with ``Content-Type: application/json``:

- a request gets ``200`` with the JSON-RPC response as an ``application/json`` body,
  JSON-RPC errors included (as the official SDK backend does);
- a notification gets ``204`` with an empty body, even an invalid one;
- a body that is not UTF-8 JSON gets ``400`` with a JSON-RPC parse error body
  (``id: null``); a body that could not be read (client gone) gets nothing;
- any other method gets ``405`` with ``Allow: POST``; another content type (or a
  charset other than UTF-8) gets ``415``; a body larger than ``max_frame_bytes``
  (default: the backend's, 4 MiB) gets ``413``, decided from ``Content-Length`` when
  given, else as soon as the streamed body passes the limit (reading stops there).
  These 4xx bodies are one short plain-text line saying what is wrong.

Requests are served concurrently: sync handlers run in worker threads (so a slow
one does not stall other requests, and they must be thread-safe); ``async def``
handlers run on the server's event loop. Lifespan events are
acknowledged; other scope types are refused. Transport authentication belongs in
middleware around this app; the app never logs bodies.

:func:`serve_http` runs the app under uvicorn on a socket it binds first, prints
``<name>: listening on http://HOST:PORT`` to stderr (useful with port 0), logs at
``warning`` level to stderr and keeps no access log. It refuses no address: deciding
what may bind beyond loopback belongs to the caller.
"""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable, MutableMapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ahp_protocol.server.backend import Backend

__all__ = ["App", "serve_http"]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

_TEXT = b"text/plain; charset=utf-8"
_JSON = b"application/json"


class _Disconnected(Exception):
    pass


class _Refusal(Exception):
    def __init__(self, status: int, text: str, headers: list[tuple[bytes, bytes]]) -> None:
        super().__init__(status)
        self.status = status
        self.text = text
        self.headers = headers


def _content_type_problem(headers: list[tuple[bytes, bytes]]) -> str | None:
    values = [v for k, v in headers if k.lower() == b"content-type"]
    if len(values) != 1:
        return "Content-Type must be application/json"
    parts = values[0].decode("latin-1").split(";")
    if parts[0].strip().lower() != "application/json":
        return "Content-Type must be application/json"
    for param in parts[1:]:
        key, _, value = param.partition("=")
        if key.strip().lower() == "charset" and value.strip().strip('"').lower() not in (
            "utf-8",
            "utf8",
        ):
            return "the charset of an application/json body must be utf-8"
    return None


def _declared_length(headers: list[tuple[bytes, bytes]]) -> int | None:
    for key, value in headers:
        if key.lower() == b"content-length":
            text = value.decode("latin-1").strip()
            return int(text) if text.isdigit() else None
    return None


class App:
    """ASGI 3 application answering AHP JSON-RPC POSTs with ``backend``."""

    def __init__(self, backend: Backend, *, max_frame_bytes: int | None = None) -> None:
        limit = backend.max_frame_bytes if max_frame_bytes is None else max_frame_bytes
        if limit < 1:
            raise ValueError("max_frame_bytes must be positive")
        self.backend = backend
        self.max_frame_bytes = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope.get("type")
        if kind == "lifespan":
            await self._lifespan(receive, send)
            return
        if kind != "http":
            raise RuntimeError("this app serves HTTP only")
        try:
            body = await self._read(scope, receive)
        except _Refusal as refusal:
            await self._send(send, refusal.status, refusal.text.encode(), _TEXT, refusal.headers)
            return
        except _Disconnected:
            return
        reply = await self.backend._respond(body, self.max_frame_bytes, offload_sync=True)
        if reply.body is None:
            await self._send(send, 204, b"", None)
        else:
            await self._send(send, 400 if reply.parse_error else 200, reply.body, _JSON)

    async def _read(self, scope: Scope, receive: Receive) -> bytes:
        if scope.get("method") != "POST":
            raise _Refusal(405, "method not allowed: use POST\n", [(b"allow", b"POST")])
        headers: list[tuple[bytes, bytes]] = list(scope.get("headers") or [])
        problem = _content_type_problem(headers)
        if problem is not None:
            raise _Refusal(415, problem + "\n", [])
        too_large = _Refusal(
            413, f"request body exceeds the limit of {self.max_frame_bytes} bytes\n", []
        )
        declared = _declared_length(headers)
        if declared is not None and declared > self.max_frame_bytes:
            raise too_large
        body = bytearray()
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                raise _Disconnected
            if message["type"] != "http.request":
                raise _Refusal(400, "request body could not be read\n", [])
            chunk = message.get("body", b"")
            if len(body) + len(chunk) > self.max_frame_bytes:
                raise too_large
            body.extend(chunk)
            if not message.get("more_body", False):
                return bytes(body)

    @staticmethod
    async def _send(
        send: Send,
        status: int,
        body: bytes,
        content_type: bytes | None,
        extra: list[tuple[bytes, bytes]] | None = None,
    ) -> None:
        headers = [(b"content-length", str(len(body)).encode())]
        if content_type is not None:
            headers.append((b"content-type", content_type))
        headers.extend(extra or [])
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    @staticmethod
    async def _lifespan(receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return


def serve_http(
    backend: Backend, host: str, port: int, *, max_frame_bytes: int | None = None
) -> None:
    """Serve ``backend`` over HTTP with uvicorn until interrupted (SIGINT/SIGTERM)."""
    import socket

    import uvicorn

    app = App(backend, max_frame_bytes=max_frame_bytes)
    info = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0]
    sock = socket.socket(info[0], info[1], info[2])
    try:
        if sys.platform != "win32":
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(info[4])
        sock.listen(128)
        bound_host, bound_port = sock.getsockname()[:2]
        shown = f"[{bound_host}]" if ":" in str(bound_host) else str(bound_host)
        print(f"{backend.name}: listening on http://{shown}:{bound_port}", file=sys.stderr)
        sys.stderr.flush()
        config = uvicorn.Config(
            app,
            log_level="warning",
            access_log=False,
            log_config=None,
            lifespan="on",
            server_header=False,
            # Bodies are bounded by the app; this caps headers and request lines.
            h11_max_incomplete_event_size=64 * 1024,
        )
        uvicorn.Server(config).run(sockets=[sock])
    finally:
        sock.close()

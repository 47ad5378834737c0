"""Serve a :class:`~ahp_protocol.server.Backend` over HTTP: an ASGI app and a uvicorn runner.

:class:`App` is an ASGI 3 application (AHP-HTTP-001). Each JSON-RPC message is one
``POST`` with ``Content-Type: application/json``:

- a request gets ``200`` with the JSON-RPC response as an ``application/json`` body,
  JSON-RPC errors included (as the official SDK backend does);
- a notification gets ``204`` with an empty body, even an invalid one (which is not
  processed), once its handlers have run; when one of them raised (a record that
  could not be stored), ``500`` with a short plain-text line instead: a ``204``
  means the notification was processed;
- a body that is not UTF-8 JSON gets ``400`` with a JSON-RPC parse error body
  (``id: null``); a body that could not be read (client gone) gets nothing;
- a request that arrives on a loopback address must name the server in ``Host``
  (``127.0.0.1``, ``localhost`` or ``[::1]``, with its port or none), else ``421``, and
  an ``Origin`` it carries must be the server's own (``http://localhost:PORT`` and the
  like), else ``403``, unless ``allow_hosts`` / ``allow_origins`` add names
  (:class:`RebindingGuard`, THE rule, which ``ahp-adapter serve`` applies too): a web
  page cannot reach a loopback backend through DNS rebinding. This comes first;
- with an OAuth resource server (``oauth``, :mod:`ahp_protocol.server.oauth`), a ``GET``
  of its protected-resource metadata path gets that document, and a request without a
  valid access token gets its ``401``/``403`` challenge (``WWW-Authenticate: Bearer
  resource_metadata=...``) before anything else is looked at;
- with a bearer token (``bearer_token``), a request without exactly one
  ``Authorization: Bearer <that token>`` header gets ``401`` with
  ``WWW-Authenticate: Bearer`` (``error="invalid_token"`` when a token was sent) before
  anything else is looked at; the token is compared in constant time
  (``hmac.compare_digest``) and never logged, echoed or kept anywhere else;
- any other method gets ``405`` with ``Allow: POST``; another content type (or a
  charset other than UTF-8) gets ``415``; a body larger than ``max_frame_bytes``
  (default: the backend's, 4 MiB) gets ``413``, decided from ``Content-Length`` when
  given, else as soon as the streamed body passes the limit (reading stops there); a
  body not read completely within ``body_timeout`` seconds (default 10) of the
  request head gets ``408``. These 4xx bodies are one short plain-text line saying
  what is wrong, and they close the connection (``Connection: close``).

Requests are served concurrently: sync handlers run in worker threads (so a slow
one does not stall other requests, and they must be thread-safe); ``async def``
handlers run on the server's event loop. A frame larger than ``judge_in_thread_bytes``
(default 16 KiB) is also decoded and judged in a worker thread, one such frame at a
time, so a large request does not hold the event loop for the whole of its validation
(it still holds the interpreter lock for its longest single step; a test checks that
an ordinary request never waits half as long as a large one). Lifespan events are
acknowledged; other scope types are refused. The app never logs bodies or headers.

:func:`serve_http` runs the app under uvicorn on a socket it binds first, prints
``<name>: listening on http://HOST:PORT`` to stderr (useful with port 0), logs at
``warning`` level to stderr and keeps no access log. Its connection rules are
:func:`server_config`'s, THE uvicorn configuration that ``ahp-adapter serve`` uses too.
Slow and idle clients are bounded: a connection must deliver a complete request head,
of at most 64 KiB, within ``header_timeout`` seconds (default 10) of opening or of its
previous response, else it is closed (uvicorn has no such deadline; a byte a second
used to hold a connection forever); at most 256 connections wait for their first head
at once, and one more closes the longest-waiting; the body deadline is the app's; an
idle keep-alive connection is closed after 5 seconds. At most ``max_connections``
(default 64) connections that have sent a request head are served at once, and a
request on one more gets ``503`` and is closed: connections that send nothing never
count, so they cannot make a real request get ``503``. With ``workers`` N > 1
(POSIX only) the socket is bound once and N forked worker processes serve it, each
answering any connection, under the supervisor of :mod:`ahp_protocol.server.workers`
(a dead worker is replaced; SIGTERM/SIGINT stop them all); the limits above are per
worker. State that must not cross a fork (threads, database connections) is the
backend's to reopen in each worker.

:func:`http_address` is THE rule for where a backend may listen, for the kit's
``Backend.run --http`` and for every sample backend: ``HOST:PORT``, loopback only
unless the caller allows a remote address (AHP requires TLS remotely, so a remote
bind needs a TLS-terminating proxy in front; :func:`serve_http` warns on stderr).
:func:`listen` is THE bind, for :func:`serve_http` and ``ahp-adapter serve``: an address
in use or refused, or uvicorn missing (:data:`HTTP_EXTRA`), is a :class:`ServeFailed`
whose message is the one line a command prints (exit 2), never a traceback.
:func:`bearer_token_from_env` reads the one token a backend accepts from an
environment variable named on the command line (never from the command line itself,
where other users can read it).
"""

from __future__ import annotations

import hmac
import os
import re
import sys
from collections.abc import Awaitable, Callable, Iterable, Mapping, MutableMapping
from typing import TYPE_CHECKING, Any, Final

from ahp_protocol.wire.names import ENV_NAME
from ahp_protocol.wire.names import is_loopback_host as is_loopback

if TYPE_CHECKING:
    from ahp_protocol.server.backend import Backend
    from ahp_protocol.server.oauth import ResourceServer

__all__ = [
    "BODY_TIMEOUT_S",
    "HEADER_TIMEOUT_S",
    "HTTP_EXTRA",
    "JUDGE_IN_THREAD_BYTES",
    "LOOPBACK_NAMES",
    "MAX_CONNECTIONS",
    "MAX_HEADER_BYTES",
    "MAX_WAITING",
    "App",
    "RebindingGuard",
    "ServeFailed",
    "bearer_token_from_env",
    "cannot_listen",
    "http_address",
    "is_loopback",
    "listen",
    "serve_http",
    "server_config",
]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

HEADER_TIMEOUT_S: Final = 10.0
"""Seconds a connection has to deliver a complete request head."""
BODY_TIMEOUT_S: Final = 10.0
"""Seconds a request has to deliver its complete body, from its head."""
KEEP_ALIVE_TIMEOUT_S: Final = 5.0
MAX_CONNECTIONS: Final = 64
"""Connections served at once; a request on one more gets 503."""
JUDGE_IN_THREAD_BYTES: Final = 16 * 1024
"""Frames larger than this are decoded and judged in a worker thread."""
MAX_HEADER_BYTES: Final = 64 * 1024
"""Bytes a request head may take (request line and headers); a longer one is cut off."""
MAX_WAITING: Final = 256
"""Connections that may wait for their first request head at once; one more closes the
longest-waiting (below any descriptor limit, so a flood cannot stop ``accept``)."""

_TEXT = (b"content-type", b"text/plain; charset=utf-8")
_JSON = (b"content-type", b"application/json")
_CLOSE = (b"connection", b"close")
_HEADER_VALUE = re.compile(r"[\x21-\x7e\x80-\xff]+(?:[ \t]+[\x21-\x7e\x80-\xff]+)*")


class _Refusal(Exception):
    def __init__(self, status: int, text: str, headers: list[tuple[bytes, bytes]]) -> None:
        super().__init__(status)
        self.status = status
        self.text = text
        self.headers = headers


# --------------------------------------------------------------------------- where to listen


def http_address(value: str, *, allow_remote: bool = False) -> tuple[str, int]:
    """``HOST:PORT`` checked: a port number, and a loopback host unless ``allow_remote``.

    Raises ``ValueError`` with a message that says what to fix.
    """
    host, sep, port = value.rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port.isdigit() or int(port) > 65535:
        raise ValueError(f"--http {value!r}: expected HOST:PORT, e.g. 127.0.0.1:8765")
    if not allow_remote and not is_loopback(host):
        raise ValueError(
            f"--http {value!r}: refusing a non-loopback address; pass --allow-remote "
            "to serve on it (and put TLS in front of it: AHP requires https remotely)"
        )
    return host, int(port)


HTTP_EXTRA: Final = "HTTP needs the http extra: pip install 'ahp-protocol[http]'"
"""What serving HTTP without uvicorn installed says (the ``http`` extra brings it)."""


class ServeFailed(Exception):
    """HTTP serving could not start; the message is one line saying what to do."""


def uvicorn_module() -> Any:
    """``uvicorn``, or :class:`ServeFailed` naming the extra that brings it."""
    try:
        import uvicorn
    except ModuleNotFoundError as exc:
        if exc.name != "uvicorn":
            raise
        raise ServeFailed(HTTP_EXTRA) from None
    return uvicorn


def cannot_listen(host: str, port: int, exc: OSError) -> str:
    """THE line saying why ``host:port`` could not be listened on, and what to do."""
    import errno
    import socket

    shown = f"[{host}]" if ":" in host else host
    if exc.errno == errno.EADDRINUSE:
        return (
            f"{shown}:{port} is in use: stop what listens there or pick another port "
            f"(--http {shown}:0 picks one)"
        )
    if exc.errno == errno.EACCES:
        return (
            f"{shown}:{port}: permission denied (ports below 1024 need privileges): "
            f"pick another port (--http {shown}:0 picks one)"
        )
    if exc.errno == errno.EADDRNOTAVAIL or isinstance(exc, socket.gaierror):
        return f"{shown}:{port}: {shown} is not an address of this machine"
    return f"cannot listen on {shown}:{port} ({exc.strerror or type(exc).__name__})"


def listen(host: str, port: int, *, proto: int = 0, backlog: int = 128) -> Any:
    """A TCP socket bound to ``host:port`` and listening (``SO_REUSEADDR`` off Windows);
    :class:`ServeFailed` with :func:`cannot_listen`'s line when the address is refused.
    ``proto`` ``socket.IPPROTO_TCP`` makes asyncio turn Nagle off on each connection."""
    import socket

    try:
        info = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, proto=proto, flags=socket.AI_PASSIVE
        )[0]
    except OSError as exc:
        raise ServeFailed(cannot_listen(host, port, exc)) from None
    sock = socket.socket(info[0], info[1], info[2])
    try:
        if sys.platform != "win32":
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(info[4])
        sock.listen(backlog)
    except OSError as exc:
        sock.close()
        raise ServeFailed(cannot_listen(host, port, exc)) from None
    return sock


def bearer_token_from_env(name: str, environ: Mapping[str, str] | None = None) -> str:
    """The bearer token in environment variable ``name`` (surrounding blanks dropped).

    Raises ``ValueError`` naming the variable (never its value) when the name is not a
    variable name, the variable is unset or empty, or its value cannot be sent in an
    HTTP header.
    """
    env = os.environ if environ is None else environ
    if not ENV_NAME.fullmatch(name):
        raise ValueError(f"--bearer-token-env {name!r}: not an environment variable name")
    value = env.get(name)
    if value is None:
        raise ValueError(
            f"--bearer-token-env {name}: the environment variable {name} is not set "
            "(set it to the token that callers must send as Authorization: Bearer <token>)"
        )
    token = value.strip(" \t")
    if not token:
        raise ValueError(f"--bearer-token-env {name}: the environment variable {name} is empty")
    if not _HEADER_VALUE.fullmatch(token):
        raise ValueError(
            f"--bearer-token-env {name}: the value of {name} cannot be sent in an HTTP "
            "header (control characters or characters outside latin-1)"
        )
    return token


# --------------------------------------------------------------------------- which Host and Origin

LOOPBACK_NAMES: Final = ("127.0.0.1", "localhost", "[::1]")
"""The names a request that arrives on a loopback address may give in ``Host``."""
_HOST_NAME = re.compile(r"(\[[0-9a-f:.]+\]|[a-z0-9](?:[a-z0-9.-]*[a-z0-9])?)(:[0-9]{1,5})?")
_ORIGIN = re.compile(r"https?://" + _HOST_NAME.pattern)


class RebindingGuard:
    """THE rule for which ``Host`` and ``Origin`` headers a request may carry, against
    DNS rebinding (a web page whose name is made to resolve to 127.0.0.1 reaches a
    loopback server with the page's own ``Host`` and ``Origin``).

    A request that arrives on a loopback address (``scope["server"]``) must name the
    server in ``Host``: ``127.0.0.1``, ``localhost``, ``[::1]`` or the address it
    arrived on, each with the server's port or without a port (a browser always sends
    the port of a URL that is not on port 80, so a name without one never comes from a
    rebinding page), or a name of ``allow_hosts``; else ``421``. Its ``Origin``, when
    there is one (browsers send it; other clients do not, and are not asked to), must
    be the server's own: ``http://`` and one of those names with the server's port
    (``http://localhost`` without one on port 80 only), or one of ``allow_origins``;
    else ``403``. A request on another address is checked only against the lists
    given: ``Host`` when ``allow_hosts`` is given, ``Origin`` when ``allow_origins``
    is. No ``Host`` at all (HTTP/1.0) passes; two are ``400``.

    ``allow_hosts`` holds ``NAME`` (with the server's port, or none) or ``NAME:PORT``
    (exactly); ``allow_origins`` holds ``http(s)://NAME[:PORT]``, compared exactly
    (as browsers send them: no path, the port only when not the default). Both are
    compared case-insensitively; a malformed entry is a ``ValueError`` naming it.
    """

    def __init__(self, allow_hosts: Iterable[str] = (), allow_origins: Iterable[str] = ()) -> None:
        hosts, origins = set(), set()
        for value in allow_hosts:
            name = value.strip().lower()
            if not _HOST_NAME.fullmatch(name):
                raise ValueError(
                    f"--allow-host {value!r}: expected a host name or address, "
                    "with or without :PORT (e.g. ahp.internal or ahp.internal:8443)"
                )
            hosts.add(name)
        for value in allow_origins:
            origin = value.strip().lower().removesuffix("/")
            if not _ORIGIN.fullmatch(origin):
                raise ValueError(
                    f"--allow-origin {value!r}: expected SCHEME://NAME[:PORT] with scheme "
                    "http or https and no path (e.g. https://dashboard.example)"
                )
            origins.add(origin)
        self.allow_hosts: frozenset[str] = frozenset(hosts)
        self.allow_origins: frozenset[str] = frozenset(origins)
        self._allowed: dict[Any, tuple[frozenset[bytes], frozenset[bytes]] | None] = {}

    def __repr__(self) -> str:
        hosts, origins = sorted(self.allow_hosts), sorted(self.allow_origins)
        return f"RebindingGuard(allow_hosts={hosts}, allow_origins={origins})"

    def refusal(self, scope: Scope) -> tuple[int, str] | None:
        """``(status, plain-text reason)`` when ``scope``'s request must be refused."""
        server = scope.get("server")
        if server in self._allowed:
            allowed = self._allowed[server]
        else:
            allowed = self._allowed_for(server)
            if len(self._allowed) < 64:  # a server sees few addresses; bounded anyway
                self._allowed[server] = allowed
        if allowed is None:
            return None
        hosts, origins = allowed
        host: bytes | None = None
        origin: bytes | None = None
        for key, value in scope.get("headers") or ():
            if key == b"host":
                if host is not None:
                    return 400, "bad request: more than one Host header\n"
                host = bytes(value).strip(b" \t").lower()
            elif key == b"origin":
                if origin is not None:
                    return 403, "forbidden: more than one Origin header\n"
                origin = bytes(value).strip(b" \t").lower()
        if hosts and host is not None and host not in hosts:
            return 421, (
                "misdirected request: the Host header does not name this server (a guard "
                "against DNS rebinding); a loopback server answers 127.0.0.1, localhost or "
                "[::1] with its port: pass --allow-host NAME to answer another name\n"
            )
        if origins and origin is not None and origin not in origins:
            return 403, (
                "forbidden: requests from a web page of another origin are refused; "
                "pass --allow-origin ORIGIN to accept one\n"
            )
        return None

    def _allowed_for(self, server: Any) -> tuple[frozenset[bytes], frozenset[bytes]] | None:
        """The ``Host`` and ``Origin`` values accepted on ``server`` (``()`` sets: not
        checked), ``None`` when nothing is checked there."""
        address, port = (str(server[0]), int(server[1])) if server else ("", 0)
        loopback = bool(server) and is_loopback(address)
        if not loopback and not self.allow_hosts and not self.allow_origins:
            return None
        shown = f"[{address}]" if ":" in address else address
        names = [*LOOPBACK_NAMES, shown] if loopback else []
        hosts = set(self.allow_hosts)
        portless = [h for h in self.allow_hosts if _HOST_NAME.fullmatch(h).group(2) is None]  # type: ignore[union-attr]
        for name in [*names, *portless]:
            hosts.update((name, f"{name}:{port}"))
        origins = set(self.allow_origins)
        for name in names:
            origins.add(f"http://{name}:{port}")
            if port == 80:
                origins.add(f"http://{name}")
        return (
            frozenset(h.encode("latin-1") for h in hosts),
            frozenset(o.encode("latin-1") for o in origins),
        )


# --------------------------------------------------------------------------- the app


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


_MISSING = _Refusal(
    401,
    "authentication required: send Authorization: Bearer <token>\n",
    [(b"www-authenticate", b"Bearer")],
)
_INVALID = _Refusal(
    401,
    "the bearer token was not accepted\n",
    [(b"www-authenticate", b'Bearer error="invalid_token"')],
)


class App:
    """ASGI 3 application answering AHP JSON-RPC POSTs with ``backend``.

    ``bearer_token``: when given, every request must carry it (``Authorization:
    Bearer``). ``oauth``: a :class:`~ahp_protocol.server.oauth.ResourceServer` instead,
    which serves its protected-resource metadata on ``GET`` and lets in only requests
    with a valid access token (at most one of the two). ``allow_hosts``,
    ``allow_origins``: more of what :class:`RebindingGuard` accepts, which every request
    passes first. ``body_timeout``: seconds to read a body.
    ``judge_in_thread_bytes``: frames larger than this are judged in a worker thread
    (see the module docstring).
    """

    def __init__(
        self,
        backend: Backend,
        *,
        max_frame_bytes: int | None = None,
        bearer_token: str | None = None,
        body_timeout: float = BODY_TIMEOUT_S,
        judge_in_thread_bytes: int = JUDGE_IN_THREAD_BYTES,
        allow_hosts: Iterable[str] = (),
        allow_origins: Iterable[str] = (),
        oauth: ResourceServer | None = None,
    ) -> None:
        limit = backend.max_frame_bytes if max_frame_bytes is None else max_frame_bytes
        if oauth is not None and bearer_token is not None:
            raise ValueError("give at most one of bearer_token and oauth")
        if limit < 1:
            raise ValueError("max_frame_bytes must be positive")
        if body_timeout <= 0:
            raise ValueError("body_timeout must be positive")
        if bearer_token is not None and not bearer_token:
            raise ValueError("bearer_token must not be empty")
        import anyio

        self.backend = backend
        self.max_frame_bytes = limit
        self.body_timeout = body_timeout
        self.judge_in_thread_bytes = judge_in_thread_bytes
        self.guard = RebindingGuard(allow_hosts, allow_origins)
        self.oauth = oauth
        self._expected = (
            None if bearer_token is None else b"Bearer " + bearer_token.encode("latin-1")
        )
        # One large frame judged in a thread at a time (created here, bound on first use).
        self._judge_limiter = anyio.CapacityLimiter(1)

    def __repr__(self) -> str:  # never shows the token
        authenticated = self._expected is not None or self.oauth is not None
        return f"App({self.backend.name!r}, authenticated={authenticated})"

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope.get("type")
        if kind == "lifespan":
            await self._lifespan(receive, send)
            return
        if kind != "http":
            raise RuntimeError("this app serves HTTP only")
        try:
            refused = self.guard.refusal(scope)
            if refused is not None:
                raise _Refusal(*refused, [])
            if self.oauth is not None:
                if scope.get("method") == "GET" and scope.get("path") == self.oauth.metadata_path:
                    document = self.oauth.metadata_document()
                    await self._send(send, 200, document, [_JSON])
                    return
                await self._authorize(scope, self.oauth)
            self._authenticate(scope)
            body = await self._read(scope, receive)
        except _Refusal as refusal:
            headers = [_TEXT, *refusal.headers, _CLOSE]
            await self._send(send, refusal.status, refusal.text.encode(), headers)
            return
        if body is None:  # the client went away
            return
        judge_in = self._judge_limiter if len(body) > self.judge_in_thread_bytes else None
        reply = await self.backend.respond(
            body, self.max_frame_bytes, offload_sync=True, judge_in=judge_in
        )
        if reply.unprocessed:
            await self._send(send, 500, b"the notification was not processed\n", [_TEXT])
        elif reply.body is None:
            await self._send(send, 204, b"")
        else:
            await self._send(send, 400 if reply.parse_error else 200, reply.body, [_JSON])

    def _authenticate(self, scope: Scope) -> None:
        expected = self._expected
        if expected is None:
            return
        values = [v for k, v in scope.get("headers") or () if k.lower() == b"authorization"]
        if not values:
            raise _MISSING
        if len(values) != 1:
            raise _INVALID
        scheme, _, credentials = bytes(values[0]).strip(b" \t").partition(b" ")
        if scheme.lower() != b"bearer":
            raise _MISSING  # another scheme: this backend takes a bearer token only
        given = b"Bearer " + credentials.strip(b" \t")
        if not hmac.compare_digest(given, expected):
            raise _INVALID

    @staticmethod
    async def _authorize(scope: Scope, oauth: ResourceServer) -> None:
        values = [v for k, v in scope.get("headers") or () if k.lower() == b"authorization"]
        refused = await oauth.refusal(values)
        if refused is not None:
            raise _Refusal(*refused)

    async def _read(self, scope: Scope, receive: Receive) -> bytes | None:
        """The whole body within ``body_timeout``, ``None`` if the client went away."""
        import anyio

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
        with anyio.move_on_after(self.body_timeout):
            while True:
                message = await receive()
                if message["type"] == "http.disconnect":
                    return None
                if message["type"] != "http.request":
                    raise _Refusal(400, "request body could not be read\n", [])
                chunk = message.get("body", b"")
                if len(body) + len(chunk) > self.max_frame_bytes:
                    raise too_large
                body.extend(chunk)
                if not message.get("more_body", False):
                    return bytes(body)
        raise _Refusal(408, f"request body not received within {self.body_timeout:g} s\n", [])

    @staticmethod
    async def _send(
        send: Send, status: int, body: bytes, headers: list[tuple[bytes, bytes]] | None = None
    ) -> None:
        headers = [(b"content-length", str(len(body)).encode()), *(headers or [])]
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


# --------------------------------------------------------------------------- the server


class _Served:
    """uvicorn's connection set as its 503 check sees it from one connection.

    uvicorn answers ``503`` when ``len(self.connections)`` reaches its limit; this view
    counts the connections that have sent a complete request head (the asking one
    included) and leaves out those still waiting for one, so connections that send
    nothing cannot make a real request get ``503``. Adding and removing go to the
    server's own set, which its shutdown closes.
    """

    __slots__ = ("_every", "_own", "_served")

    def __init__(self, every: set[Any], served: set[Any], own: object) -> None:
        self._every, self._served, self._own = every, served, own

    def add(self, connection: Any) -> None:
        self._every.add(connection)

    def discard(self, connection: Any) -> None:
        self._every.discard(connection)
        self._served.discard(connection)

    def __len__(self) -> int:
        return len(self._served) + (self._own not in self._served)


def _deadline_protocol(
    header_timeout: float, parser: str = "h11", max_waiting: int = MAX_WAITING
) -> type[Any]:
    """uvicorn's protocol for ``parser`` (``"h11"`` or ``"httptools"``) with THE
    connection rules of :func:`server_config`: a complete request head within
    ``header_timeout`` seconds of opening or of the previous response (uvicorn's own
    keep-alive timer restarts on every byte, so a trickle outlives it) and within
    :data:`MAX_HEADER_BYTES`, at most ``max_waiting`` connections waiting for a head
    (one more closes the longest-waiting), and only connections that sent a head
    counted against the ``503`` limit. One class per call: the sets are its server's."""
    import asyncio

    base: type[Any]
    if parser == "h11":
        import h11
        from uvicorn.protocols.http.h11_impl import H11Protocol as base

        def awaiting_head(self: Any) -> bool:
            return self.conn.their_state is h11.IDLE

    elif parser == "httptools":
        from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol as base

        def awaiting_head(self: Any) -> bool:
            cycle = self.cycle
            return (cycle is None or cycle.response_complete) and not self.pipeline

    else:
        raise ValueError(f"parser must be 'h11' or 'httptools', not {parser!r}")

    waiting: dict[Any, None] = {}  # connections waiting for their first head, oldest first
    served: set[Any] = set()  # connections that have sent a head

    class DeadlineProtocol(base):  # type: ignore[misc]
        _head_timer: asyncio.TimerHandle | None = None
        _head_bytes = 0

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.connections = _Served(self.server_state.connections, served, self)

        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            super().connection_made(transport)
            waiting[self] = None
            if len(waiting) > max_waiting:
                oldest = next(iter(waiting))
                del waiting[oldest]
                oldest.transport.close()
            self._await_head()

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            if self.transport.is_closing():
                return
            if awaiting_head(self):
                self._head_bytes += len(data)
                if self._head_bytes > MAX_HEADER_BYTES:
                    self.transport.close()
            else:
                self._head_arrived()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if self.transport.is_closing():
                return
            if awaiting_head(self):
                self._await_head()
            else:  # a pipelined request was already waiting
                self._head_arrived()

        def eof_received(self) -> bool | None:
            # A client that ends its side mid-body (a short body, then a half-close) gets
            # an answer: the app reads the body as ended there (an upload receiver says
            # 400, shorter than Content-Length) and the write side stays open for it.
            cycle = self.cycle
            if cycle is not None and not cycle.response_complete and cycle.more_body:
                cycle.more_body = False
                cycle.message_event.set()
                return True
            result: bool | None = super().eof_received()
            return result

        def connection_lost(self, exc: Exception | None) -> None:
            self._cancel_head_timer()
            waiting.pop(self, None)
            served.discard(self)
            super().connection_lost(exc)

        def _head_arrived(self) -> None:
            self._cancel_head_timer()
            self._head_bytes = 0
            if waiting.pop(self, 0) is None:
                served.add(self)

        def _await_head(self) -> None:
            self._cancel_head_timer()
            self._head_bytes = 0
            self._head_timer = self.loop.call_later(header_timeout, self._head_overdue)

        def _cancel_head_timer(self) -> None:
            if self._head_timer is not None:
                self._head_timer.cancel()
                self._head_timer = None

        def _head_overdue(self) -> None:
            self._head_timer = None
            if awaiting_head(self) and not self.transport.is_closing():
                self.transport.close()

    return DeadlineProtocol


def server_config(
    app: Callable[..., Awaitable[None]],
    *,
    header_timeout: float = HEADER_TIMEOUT_S,
    max_connections: int = MAX_CONNECTIONS,
    parser: str = "h11",
    **options: Any,
) -> Any:
    """THE uvicorn configuration of an AHP HTTP server, for :func:`serve_http` and for
    ``ahp-adapter serve``: ``app`` with the connection rules of the module docstring
    (head deadline, head size, connections waiting for a head, ``503`` limit, keep-alive,
    quiet logs). ``parser`` picks uvicorn's ``"h11"`` or ``"httptools"`` protocol;
    ``options`` go to ``uvicorn.Config`` as they are (e.g. ``date_header=False``).
    Run it with ``uvicorn.Server(config).run(sockets=[sock])`` on a socket bound first
    (so uvicorn's ``backlog`` does not apply: the socket's own ``listen`` backlog does,
    and connections are accepted as they come, since at most :data:`MAX_WAITING` wait
    for a head and descriptors never run out). :class:`ServeFailed` without uvicorn.
    """
    uvicorn = uvicorn_module()

    if header_timeout <= 0 or max_connections < 1:
        raise ValueError("header_timeout and max_connections must be positive")
    settings: dict[str, Any] = {
        "log_level": "warning",
        "access_log": False,
        "log_config": None,
        "lifespan": "on",
        "server_header": False,
        "timeout_keep_alive": int(KEEP_ALIVE_TIMEOUT_S),
        # uvicorn answers 503 once this many connections (the requesting one included)
        # have sent a head, or this many requests are running: one more than served.
        "limit_concurrency": max_connections + 1,
        # h11's buffer for an incomplete head: the same bound the protocol enforces.
        "h11_max_incomplete_event_size": MAX_HEADER_BYTES,
    }
    settings.update(options)
    settings["http"] = _deadline_protocol(header_timeout, parser)
    return uvicorn.Config(app, **settings)


def _preload() -> None:
    """Import what judging a request imports on first use (the wire models, about 0.6 s),
    once in the supervisor: every worker, a replacement too, starts with it loaded."""
    import anyio.to_thread  # noqa: F401

    import ahp_protocol.wire.capabilities
    import ahp_protocol.wire.effects
    import ahp_protocol.wire.errors
    import ahp_protocol.wire.events
    import ahp_protocol.wire.state  # noqa: F401


def route(app: Any, path: str, other: Any) -> Any:
    """One ASGI app: HTTP requests for exactly ``path`` go to ``other``, everything else
    (lifespan events included) to ``app``. How an upload receiver shares a backend's port."""

    async def routed(scope: Scope, receive: Receive, send: Send) -> None:
        if scope.get("type") == "http" and scope.get("path") == path:
            await other(scope, receive, send)
        else:
            await app(scope, receive, send)

    return routed


def serve_http(
    backend: Backend,
    host: str,
    port: int,
    *,
    max_frame_bytes: int | None = None,
    bearer_token: str | None = None,
    header_timeout: float = HEADER_TIMEOUT_S,
    body_timeout: float = BODY_TIMEOUT_S,
    max_connections: int = MAX_CONNECTIONS,
    workers: int = 1,
    allow_hosts: Iterable[str] = (),
    allow_origins: Iterable[str] = (),
    uploads: Any = None,
    oauth: ResourceServer | None = None,
) -> None:
    """Serve ``backend`` over HTTP with uvicorn until interrupted (SIGINT/SIGTERM).

    ``oauth``: a :class:`~ahp_protocol.server.oauth.ResourceServer` (instead of
    ``bearer_token``) that every request's access token must satisfy.

    ``uploads``: an :class:`~ahp_protocol.server.uploads.UploadReceiver` served on the
    same port at its ``path`` (:func:`route`).

    It binds any address it is given: :func:`http_address` decides which may be given.
    :class:`ServeFailed` (one line, no traceback needed) when uvicorn is missing or the
    address cannot be listened on (:func:`listen`).
    ``workers`` > 1 forks that many worker processes on the one socket (POSIX only;
    ``ValueError`` elsewhere or for fewer than 1).
    """
    from ahp_protocol.server.workers import check_workers, supervise

    check_workers(workers)
    uvicorn = uvicorn_module()
    app = App(
        backend, max_frame_bytes=max_frame_bytes, bearer_token=bearer_token,
        body_timeout=body_timeout, allow_hosts=allow_hosts, allow_origins=allow_origins,
        oauth=oauth,
    )  # fmt: skip
    if uploads is not None:
        app = route(app, uploads.path, uploads)
    config = server_config(app, header_timeout=header_timeout, max_connections=max_connections)
    sock = listen(host, port)
    try:
        bound_host, bound_port = sock.getsockname()[:2]
        shown = f"[{bound_host}]" if ":" in str(bound_host) else str(bound_host)
        if not is_loopback(str(bound_host)):
            print(
                f"warning: serving plain HTTP on {shown}; AHP requires TLS for remote "
                "endpoints, so put a TLS-terminating proxy in front of this backend",
                file=sys.stderr,
            )
        print(f"{backend.name}: listening on http://{shown}:{bound_port}", file=sys.stderr)
        sys.stderr.flush()
        if workers == 1:
            uvicorn.Server(config).run(sockets=[sock])
        else:
            _preload()
            supervise(
                workers, lambda: uvicorn.Server(config).run(sockets=[sock]), name=backend.name
            )
    finally:
        sock.close()

"""Claude Code ``http`` hooks, served by the adapter: no process per tool call.

Claude Code can POST a hook's payload to a URL instead of running a command
(``"type": "http"``). ``ahp-adapter serve claude-code --registration FILE
--http 127.0.0.1:PORT`` answers those POSTs from one warm
:class:`~ahp_adapters.daemon.Daemon` (the same engine, reload and rendering as
the command hook's daemon): ``POST /claude-code/<Event>`` with the payload as
the body gets ``200`` and, as the body, exactly what the command hook would
have written on stdout (Claude's JSON deny, or nothing for no decision).

- **Loopback only.** The listener binds ``127.0.0.0/8`` or ``::1``; any other
  address is refused before anything is bound.
- **Its own name only.** A request must name the server in ``Host``
  (``127.0.0.1``, ``localhost`` or ``[::1]``, with its port) and carry no ``Origin``
  but the server's own (``421`` / ``403`` otherwise, before the secret is looked at),
  unless ``--allow-host`` / ``--allow-origin`` add one: the server kit's
  :class:`~ahp_protocol.server.asgi.RebindingGuard`, the rule the kit's backends apply.
- **A per-install secret.** Every request must carry :data:`SECRET_HEADER`
  with the secret the installer wrote (into the settings file's ``headers``,
  and a 0600 file under :func:`secret_path` that ``serve`` reads), compared in
  constant time. Without it: ``401`` and nothing is run, so another local user
  cannot query the policy or feed it events.
- **What it cannot promise.** Claude Code treats a connection failure, a
  non-2xx answer and a timeout of an http hook as *non-blocking*: when this
  server is down or slow, the call goes through. That is why the installer
  offers ``--transport http`` only for a registration whose ``tool.before``
  interceptors are all fail-open (see :mod:`ahp_adapters.install`).
- Bounded: a body larger than the hook accepts on stdin is ``413``; anything
  but ``POST /claude-code/<Event>`` is ``404``/``405``; a non-zero exit of
  the hook's rendering (a usage error) is ``500``, never a decision. Every
  refusal closes its connection.
- **Not switched off by idle sockets.** The connection rules are the server kit's
  (:func:`ahp_protocol.server.asgi.server_config`): a request head within
  ``header_timeout`` seconds, connections that sent nothing never counted
  against the ``503`` limit, at most 256 waiting for a head.

Served by uvicorn (the kit's HTTP server everywhere) with its httptools parser:
measured on this machine (``bench/hook_latency.py``), a bare uvicorn app answers a
keep-alive POST in about 0.45 ms with httptools against 1.1 ms with h11, and the
whole http hook must stay within 4.4 times a bare uvicorn app (2 ms against 0.45 ms).
"""

from __future__ import annotations

import contextlib
import hmac
import ipaddress
import os
import secrets
import socket
import sys
from collections.abc import Awaitable, Callable, MutableMapping, Sequence
from typing import Any

from ahp_protocol.server.asgi import HEADER_TIMEOUT_S, RebindingGuard, server_config

from ahp_adapters.invocation import DEFAULT_BUDGET_S, EXIT_RESERVE_S, MAX_INPUT_BYTES
from ahp_adapters.rundir import registration_path

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]

SECRET_HEADER = "X-AHP-Adapter-Secret"
DIALECTS = ("claude-code",)
"""Dialects whose harness has http hooks (Claude Code's ``"type": "http"``)."""
SECRET_ENV_DIR = "AHP_ADAPTER_CONFIG_DIR"


class ServeError(ValueError):
    """``serve`` cannot start as asked (the message says what to fix)."""


def loopback_address(value: str) -> tuple[str, int]:
    """``HOST:PORT`` with a loopback host (``[::1]:PORT`` for IPv6); :class:`ServeError` else."""
    host, sep, port_text = value.rpartition(":")
    host = host.strip("[]")
    if not sep or not host:
        raise ServeError(f"--http {value!r}: expected HOST:PORT, e.g. 127.0.0.1:8765")
    try:
        port = int(port_text)
    except ValueError:
        raise ServeError(f"--http {value!r}: the port is not a number") from None
    if not 0 <= port <= 65535:
        raise ServeError(f"--http {value!r}: the port must be 0-65535")
    if host == "localhost":
        host = "127.0.0.1"
    try:
        loopback = ipaddress.ip_address(host).is_loopback
    except ValueError:
        raise ServeError(f"--http {value!r}: the host must be an IP address") from None
    if not loopback:
        raise ServeError(
            f"--http {value!r}: http hooks are served on loopback only (127.0.0.1 or ::1): "
            "anyone who can reach the port could ask the policy"
        )
    return host, port


def config_dir() -> str:
    """Where per-install secrets live: ``$AHP_ADAPTER_CONFIG_DIR`` or
    ``$XDG_CONFIG_HOME/ahp-adapter`` (default ``~/.config/ahp-adapter``), mode 0700."""
    configured = os.environ.get(SECRET_ENV_DIR)
    if configured:
        return configured
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return os.path.join(base, "ahp-adapter")


def secret_path(port: int) -> str:
    """The secret file of the http hooks on ``port`` (one server per port, so one secret)."""
    return os.path.join(config_dir(), f"http-{port}.secret")


def load_or_create_secret(path: str) -> str:
    """The secret in ``path`` if there is a good one (a reinstall keeps it), else a new one."""
    try:
        return read_secret(path)
    except ServeError:
        return write_secret(path)


def write_secret(path: str) -> str:
    """A fresh secret, written to ``path`` (0600, in a 0700 folder); returned."""
    os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
    value = secrets.token_urlsafe(32)
    fd = os.open(path + ".tmp", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="ascii") as handle:
        handle.write(value + "\n")
    os.replace(path + ".tmp", path)
    return value


def read_secret(path: str) -> str:
    """The secret in ``path``; :class:`ServeError` if missing, empty or readable by others."""
    try:
        info = os.stat(path)
        with open(path, encoding="ascii") as handle:
            value = handle.read().strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise ServeError(
            f"secret file {path}: cannot be read ({type(exc).__name__}); "
            "run 'ahp-adapter install claude-code --transport http ...' first, "
            "or pass --secret-file"
        ) from None
    if info.st_mode & 0o077:
        raise ServeError(f"secret file {path}: readable by other users (chmod 600 it)")
    if len(value) < 16:
        raise ServeError(f"secret file {path}: too short to be a secret")
    return value


class App:
    """The ASGI app: ``POST /<dialect>/<Event>`` -> the hook's native answer."""

    def __init__(
        self,
        registration: str,
        secret: str,
        budget: float = DEFAULT_BUDGET_S,
        guard: RebindingGuard | None = None,
    ) -> None:
        self.registration = registration_path(registration)
        self._secret = secret.encode("ascii")
        self.budget = budget
        self.guard = RebindingGuard() if guard is None else guard
        self.daemon: Any = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
        elif scope["type"] == "http":
            await self._http(scope, receive, send)

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        from ahp_adapters.daemon import Daemon

        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                self.daemon = Daemon(self.registration, "", idle_timeout=float("inf"))
                self.daemon._generation()  # load now: the first hook should not pay for it
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                if self.daemon is not None:
                    await self.daemon.aclose()
                await send({"type": "lifespan.shutdown.complete"})
                return

    def _authorized(self, scope: Scope) -> bool:
        wanted = SECRET_HEADER.lower().encode("ascii")
        for name, value in scope.get("headers", []):
            if name == wanted:
                return hmac.compare_digest(value, self._secret)
        return False

    async def _http(self, scope: Scope, receive: Receive, send: Send) -> None:
        refused = self.guard.refusal(scope)
        if refused is not None:
            await _respond(send, refused[0], refused[1].encode())
            return
        parts = scope.get("path", "").strip("/").split("/")
        if len(parts) != 2 or parts[0] not in DIALECTS or not parts[1]:
            await _respond(send, 404, b"not found: POST /claude-code/<Event>\n")
            return
        if scope.get("method") != "POST":
            await _respond(send, 405, b"POST only\n", [(b"allow", b"POST")])
            return
        if not self._authorized(scope):
            await _respond(send, 401, b"missing or wrong " + SECRET_HEADER.encode() + b"\n")
            return
        body = bytearray()
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            body += message.get("body", b"")
            if len(body) > MAX_INPUT_BYTES:
                await _respond(send, 413, b"payload larger than the adapter accepts\n")
                return
            if not message.get("more_body"):
                break
        argv = [parts[0], "--registration", self.registration, "--event", parts[1]]
        argv += ["--budget", repr(self.budget)]
        remaining = self.budget - EXIT_RESERVE_S
        code, stdout, _stderr = await self.daemon.native_answer(argv, remaining, False, bytes(body))
        if code != 0:
            await _respond(send, 500, b"the hook could not answer\n")
            return
        headers = [(b"content-type", b"application/json")] if stdout else []
        await _respond(send, 200, stdout, headers)


async def _respond(
    send: Send, status: int, body: bytes, headers: list[tuple[bytes, bytes]] | None = None
) -> None:
    head = [(b"content-length", str(len(body)).encode("ascii")), *(headers or [])]
    if status != 200:  # a refusal closes its connection: it holds no place a hook needs
        head += [(b"content-type", b"text/plain; charset=utf-8"), (b"connection", b"close")]
    await send({"type": "http.response.start", "status": status, "headers": head})
    await send({"type": "http.response.body", "body": body})


def bind(host: str, port: int) -> socket.socket:
    """A listening TCP socket (``IPPROTO_TCP``, so asyncio turns Nagle off on each connection:
    a socket made with protocol 0 leaves every response's body waiting on a delayed ACK)."""
    family, kind, proto, _, address = socket.getaddrinfo(
        host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP
    )[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(128)
    except OSError:
        sock.close()
        raise
    return sock


def serve(
    dialect: str,
    registration: str,
    address: str,
    *,
    secret_file: str | None = None,
    budget: float = DEFAULT_BUDGET_S,
    header_timeout: float = HEADER_TIMEOUT_S,
    allow_hosts: Sequence[str] = (),
    allow_origins: Sequence[str] = (),
) -> int:
    """Serve until SIGINT/SIGTERM. Prints ``listening on http://HOST:PORT`` once bound."""
    import uvicorn

    if dialect not in DIALECTS:
        raise ServeError(f"serve {dialect!r}: only claude-code has http hooks")
    host, port = loopback_address(address)
    try:
        guard = RebindingGuard(allow_hosts, allow_origins)
    except ValueError as exc:
        raise ServeError(str(exc)) from None
    if secret_file is None and port == 0:
        raise ServeError("--http with port 0 needs --secret-file (the secret is kept per port)")
    sock = bind(host, port)
    with contextlib.closing(sock):
        bound_port = sock.getsockname()[1]
        secret = read_secret(secret_file or secret_path(port))
        shown = f"[{host}]" if ":" in host else host
        print(f"ahp-adapter serve: listening on http://{shown}:{bound_port}", file=sys.stderr)
        sys.stderr.flush()
        config = server_config(
            App(registration, secret, budget, guard),
            header_timeout=header_timeout,
            parser="httptools",  # half the per-request cost of h11 here (hook_latency.py)
            date_header=False,
        )
        uvicorn.Server(config).run(sockets=[sock])
    return 0

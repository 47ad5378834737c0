"""``ahp-backend approval console``: the approval center, a web page to decide held calls.

Owns the pages a person uses to decide the calls the approval backend holds
(``ahp-backend approval --hold-s S``): the live queue (every pending call's tool, kind,
whole input as literal pretty JSON, session, harness, cwd, the rule that asked, and the
time left), the decisions on each (approve once, for the session or for the project for
15 min, 1 h or 8 h; deny with a reason), the recent decisions (receipts), and one
session's timeline. Every decision goes through :class:`~ahp_backends.approval_queue.Queue`,
which owns holding, deciding, receipts and grants; this module never writes the store
itself and never decides anything on its own. A decision the queue refuses (already
decided, expired, unknown) shows the queue's message on the page (``409``), never a
``500``.

Safety (a page that approves tool calls is worth attacking):

- loopback only by default (``--listen``, default ``127.0.0.1:0``; the kit's
  :func:`~ahp_protocol.server.asgi.http_address` rule: a non-loopback address needs
  ``--allow-remote``, and then a TLS-terminating proxy in front);
- every request first passes the kit's :class:`~ahp_protocol.server.asgi.RebindingGuard`
  (a foreign ``Host`` gets ``421``, a foreign ``Origin`` ``403``: no DNS-rebinding page
  reaches the console);
- a login: a name (recorded as who decided) and the login secret, printed once on
  stderr at start with the URL, or read from :data:`SECRET_ENV` (then never printed),
  compared in constant time; then a signed session cookie (Starlette's
  ``SessionMiddleware``: itsdangerous, a key made at start, so a restart logs everyone
  out; ``HttpOnly``, ``SameSite=Strict``, 8 hours, named after the port so two consoles
  on one host do not log each other out);
- a CSRF token per session in every form, checked on every ``POST`` (missing or wrong:
  ``403``), the login form included;
- a strict ``Content-Security-Policy`` (scripts and styles only from the console's own
  static files: no inline script, no ``eval``), ``X-Frame-Options: DENY``,
  ``nosniff``, no referrer to another origin, ``no-store``;
- event data is only ever rendered by Jinja2 with autoescape on and is never marked
  safe, so an input carrying ``<script>`` or HTML is shown as text and never runs.

Live updates are Server-Sent Events, not polling: one daemon thread per console waits
on :meth:`Queue.wait_for_change` (which sees changes made by any process) and wakes the
streams of every open page (``/events``, an in-memory signal: one thread however many
pages are open), and a page then fetches the HTML fragment of the queue (``/live``)
and merges it by held-call id, so a reason being typed into one card survives another
call arriving. A change shows within the store's own wake-up latency instead of half a
polling period, and an idle page costs a keep-alive comment every 15 s instead of a
query every second or two. Each stream ends after :data:`STREAM_S` seconds (the
browser reconnects and the page refreshes once on reconnecting), so no stream holds a
shutdown for long. Every page also works without JavaScript (plain forms, a reload).

Bounds: a name of at most 64 characters; at most 100 receipts and the calls of one
session a page; the store is only read and decided through worker threads.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import hmac
import json
import os
import secrets
import sys
import threading
import unicodedata
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Final

from ahp_backends.serving import database_target, fail

if TYPE_CHECKING:
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

    from ahp_backends.approval_queue import Held, Queue, Receipt

__all__ = [
    "CONSOLE_EXTRA",
    "DURATIONS",
    "SECRET_ENV",
    "STREAM_S",
    "build_app",
    "main",
]

SECRET_ENV: Final = "AHP_APPROVAL_CONSOLE_SECRET"
"""The environment variable a login secret is read from (then it is never printed)."""
CONSOLE_EXTRA: Final = (
    "the approval console needs the console extra: pip install 'ahp-backends[console]'"
)
DURATIONS: Final[Mapping[str, tuple[str, timedelta]]] = {
    "15m": ("15 min", timedelta(minutes=15)),
    "1h": ("1 hour", timedelta(hours=1)),
    "8h": ("8 hours", timedelta(hours=8)),
}
"""How long an "approve for this session / project" grant lasts: form value -> label, span."""
_ACTIONS: Final[Mapping[str, tuple[bool, str]]] = {
    "once": (True, "once"),
    "session": (True, "session"),
    "project": (True, "project"),
    "deny": (False, "once"),
}
STREAM_S: Final = 60.0
"""Seconds one event stream lasts before the browser reconnects."""
KEEPALIVE_S: Final = 15.0
WAIT_S: Final = 1.0  # one Queue.wait_for_change call; also how soon the waiter sees a stop
MAX_NAME: Final = 64
SESSION_AGE_S: Final = 8 * 3600
RECENT: Final = 10
RECEIPTS: Final = 100

SECURITY_HEADERS: Final[Mapping[str, str]] = {
    "content-security-policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
        "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
    ),
    "x-frame-options": "DENY",
    "x-content-type-options": "nosniff",
    # same-origin, not no-referrer: under no-referrer a browser sends "Origin: null" with
    # its own form posts, which the rebinding guard (rightly) refuses.
    "referrer-policy": "same-origin",
    "cross-origin-opener-policy": "same-origin",
    "cache-control": "no-store",
}
_CSRF_REFUSED: Final = "forbidden: the form's CSRF token is missing or wrong; reload the page\n"


# --------------------------------------------------------------------------- what a page shows


def _when(value: Any) -> datetime | None:
    """A timestamp of the store (a ``datetime`` or ISO 8601 text) as an aware UTC datetime."""
    if value is None or value == "":
        return None
    if isinstance(value, datetime):
        moment = value
    else:
        try:
            moment = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
        except ValueError:
            return None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def _shown_time(value: Any) -> str:
    moment = _when(value)
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC") if moment else ""


def _pretty(value: Any) -> str:
    """The input of a call as pretty JSON, literally (the template escapes it)."""
    return json.dumps(value, indent=2, ensure_ascii=False, default=str)


@dataclass(frozen=True)
class _Card:
    """One pending call as the queue shows it."""

    held: Held
    input_text: str
    left_ms: int
    expires: str
    created: str


def _card(held: Held, now: datetime) -> _Card:
    expires = _when(held.expires)
    left = 0 if expires is None else max(0, int((expires - now).total_seconds() * 1000))
    return _Card(
        held, _pretty(held.input), left, _shown_time(held.expires), _shown_time(held.created)
    )


# --------------------------------------------------------------------------- live updates


class _Changes:
    """A version number that goes up whenever the store says something changed.

    One daemon thread calls :meth:`Queue.wait_for_change` in a loop and wakes every
    waiting stream through the event loop; streams wait on an :class:`anyio.Event`, so
    open pages cost no thread and no query."""

    def __init__(self, queue: Queue) -> None:
        self.queue = queue
        self.version = 0
        self._stop = threading.Event()
        self._event: Any = None
        self._token: Any = None

    def start(self) -> None:
        import anyio
        import anyio.lowlevel

        self._event = anyio.Event()
        self._token = anyio.lowlevel.current_token()
        threading.Thread(target=self._watch, name="approval-console-changes", daemon=True).start()

    def stop(self) -> None:
        self._stop.set()

    def _bump(self) -> None:
        import anyio

        self.version += 1
        self._event.set()
        self._event = anyio.Event()

    def _watch(self) -> None:
        import anyio.from_thread

        failed = False
        while not self._stop.is_set():
            try:
                changed = self.queue.wait_for_change(WAIT_S)
            except Exception:
                if not failed:  # a fixed line, once: the exception text may hold a URL
                    print("approval console: cannot watch the store for changes", file=sys.stderr)
                    failed = True
                self._stop.wait(WAIT_S)
                continue
            failed = False
            if changed and not self._stop.is_set():
                try:
                    anyio.from_thread.run_sync(self._bump, token=self._token)
                except RuntimeError:  # the event loop is gone
                    return

    async def wait(self, version: int, timeout: float) -> int:
        """The version once it differs from ``version``, or after ``timeout`` seconds."""
        import anyio

        with anyio.move_on_after(timeout):
            while self.version == version:
                await self._event.wait()
        return self.version


# --------------------------------------------------------------------------- the ASGI layers


class _Guard:
    """Outermost layer: the kit's rebinding rule on every request, and the security
    headers on every response (refusals included)."""

    def __init__(self, app: ASGIApp, guard: Any) -> None:
        self.app = app
        self.guard = guard

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        from starlette.datastructures import MutableHeaders
        from starlette.responses import PlainTextResponse

        if scope["type"] == "lifespan":
            await self.app(scope, receive, send)
            return
        if scope["type"] != "http":  # no websockets here
            return
        refused = self.guard.refusal(scope)
        if refused is not None:
            status, text = refused
            response = PlainTextResponse(text, status_code=status, headers=dict(SECURITY_HEADERS))
            await response(scope, receive, send)
            return

        async def send_secured(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                for key, value in SECURITY_HEADERS.items():
                    headers[key] = value
            await send(message)

        await self.app(scope, receive, send_secured)


def _package_dir(*parts: str) -> str:
    from importlib import resources

    return str(resources.files("ahp_backends").joinpath("console", *parts))


def build_app(
    queue: Queue,
    secret: str,
    *,
    port: int = 0,
    allow_hosts: Sequence[str] = (),
    allow_origins: Sequence[str] = (),
) -> Starlette:
    """The console as an ASGI app deciding through ``queue`` (which its change thread
    also waits on); ``port`` names the session cookie. ``allow_hosts`` /
    ``allow_origins``: more names the rebinding guard accepts (the kit's rule and syntax)."""
    import anyio
    import anyio.to_thread
    import jinja2
    from ahp_protocol.server.asgi import RebindingGuard
    from starlette.applications import Starlette
    from starlette.middleware import Middleware
    from starlette.middleware.sessions import SessionMiddleware
    from starlette.responses import PlainTextResponse, RedirectResponse, StreamingResponse
    from starlette.routing import Mount, Route
    from starlette.staticfiles import StaticFiles
    from starlette.templating import Jinja2Templates

    from ahp_backends.approval_queue import QueueError

    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(_package_dir("templates")),
        autoescape=True,  # every template, whatever its name: event data is never markup
        undefined=jinja2.StrictUndefined,
    )
    env.globals["durations"] = DURATIONS
    env.filters["when"] = _shown_time
    templates = Jinja2Templates(env=env)
    changes = _Changes(queue)
    secret_digest = hashlib.sha256(secret.encode("utf-8")).digest()
    store_lock = anyio.CapacityLimiter(4)

    async def store(function: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        return await anyio.to_thread.run_sync(lambda: function(*args, **kwargs), limiter=store_lock)

    def csrf(request: Request) -> str:
        token = request.session.get("csrf")
        if not isinstance(token, str) or not token:
            token = secrets.token_urlsafe(32)
            request.session["csrf"] = token
        return token

    def who(request: Request) -> str | None:
        name = request.session.get("name")
        return name if isinstance(name, str) and name else None

    async def form_of(request: Request) -> Mapping[str, str] | None:
        """The POSTed form when its CSRF token is this session's, else ``None``."""
        form = await request.form()
        given = form.get("csrf")
        expected = request.session.get("csrf")
        if not isinstance(given, str) or not isinstance(expected, str) or not expected:
            return None
        if not hmac.compare_digest(given.encode("utf-8"), expected.encode("utf-8")):
            return None
        return {key: value for key, value in form.items() if isinstance(value, str)}

    def page(
        request: Request, name: str, status: int = 200, *, fragment: bool = False, **context: Any
    ) -> Response:
        """A page, or (``fragment``) the live queue's fragment, which leaves the flash of a
        decision to the page the decision redirects to (the fragment is fetched on every
        change, often before that page: it would take the flash with it)."""
        context.setdefault("error", None)
        context["user"] = who(request)
        context["csrf"] = csrf(request)
        context["flash"] = None if fragment else request.session.pop("flash", None)
        return templates.TemplateResponse(request, name, context, status_code=status)

    async def live_context() -> dict[str, Any]:
        pending, recent = await store(lambda: (queue.pending(), queue.receipts(limit=RECENT)))
        now = datetime.now(UTC)
        return {"cards": [_card(held, now) for held in pending], "recent": recent}

    async def queue_page(request: Request, status: int = 200, error: str | None = None) -> Response:
        if who(request) is None:
            return RedirectResponse("/login", status_code=303)
        return page(request, "queue.html", status, error=error, **(await live_context()))

    async def home(request: Request) -> Response:
        return await queue_page(request)

    async def live(request: Request) -> Response:
        if who(request) is None:
            return PlainTextResponse("log in first\n", status_code=401)
        return page(request, "_live.html", fragment=True, **(await live_context()))

    async def events(request: Request) -> Response:
        if who(request) is None:
            return PlainTextResponse("log in first\n", status_code=401)

        async def stream() -> AsyncIterator[str]:
            version = changes.version
            yield "retry: 2000\n\n"
            deadline = anyio.current_time() + STREAM_S
            while (left := deadline - anyio.current_time()) > 0:
                now = await changes.wait(version, min(KEEPALIVE_S, left))
                if now != version:
                    version = now
                    yield "event: change\ndata: {}\n\n"
                else:
                    yield ": keep-alive\n\n"

        return StreamingResponse(stream(), media_type="text/event-stream")

    async def login(request: Request) -> Response:
        if request.method == "GET":
            return page(request, "login.html")
        form = await form_of(request)
        if form is None:
            return PlainTextResponse(_CSRF_REFUSED, status_code=403)
        name = unicodedata.normalize("NFC", form.get("name", "").strip())
        given = hashlib.sha256(form.get("secret", "").strip().encode("utf-8")).digest()
        if not hmac.compare_digest(given, secret_digest):
            return page(request, "login.html", 401, error="That secret is not the login secret.")
        if not name or len(name) > MAX_NAME or not name.isprintable():
            return page(
                request,
                "login.html",
                400,
                error=f"Give your name (1 to {MAX_NAME} printable characters): "
                "it is recorded with every decision you make.",
            )
        request.session.clear()  # a fresh session (and CSRF token) once logged in
        request.session["name"] = name
        csrf(request)
        return RedirectResponse("/", status_code=303)

    async def logout(request: Request) -> Response:
        if await form_of(request) is None:
            return PlainTextResponse(_CSRF_REFUSED, status_code=403)
        request.session.clear()
        return RedirectResponse("/login", status_code=303)

    async def decide(request: Request) -> Response:
        form = await form_of(request)
        if form is None:
            return PlainTextResponse(_CSRF_REFUSED, status_code=403)
        name = who(request)
        if name is None:
            return RedirectResponse("/login", status_code=303)
        held_id = request.path_params["held_id"]
        action = _ACTIONS.get(form.get("action", ""))
        duration = DURATIONS.get(form.get("duration", "1h"))
        if action is None or duration is None:
            return await queue_page(request, 400, "Unknown decision: reload the page.")
        approve, scope = action
        reason = form.get("reason", "").strip() or None
        try:
            receipt = await store(
                queue.decide,
                held_id,
                approve=approve,
                by=name,
                reason=reason,
                scope=scope,
                grant_for=duration[1] if scope != "once" else None,
            )
        except QueueError as exc:  # its message says why (decided, expired, unknown)
            return await queue_page(request, 409, str(exc))
        what = "Approved" if approve else "Denied"
        span = f" for this {scope}, {duration[0]}" if scope != "once" else " once"
        request.session["flash"] = f"{what} {receipt.tool}{span if approve else ''}."
        return RedirectResponse("/", status_code=303)

    async def decisions(request: Request) -> Response:
        if who(request) is None:
            return RedirectResponse("/login", status_code=303)
        receipts = await store(queue.receipts, limit=RECEIPTS)
        return page(request, "decisions.html", receipts=receipts)

    async def session(request: Request) -> Response:
        if who(request) is None:
            return RedirectResponse("/login", status_code=303)
        session_id = request.query_params.get("id", "")
        calls, receipts = await store(
            lambda: (
                queue.session_calls(session_id),
                queue.receipts(limit=RECEIPTS, session_id=session_id),
            )
        )
        by_held: dict[str, list[Receipt]] = {}
        for receipt in receipts:
            by_held.setdefault(receipt.held_id, []).append(receipt)
        calls = sorted(
            calls, key=lambda held: _when(held.created) or datetime.min.replace(tzinfo=UTC)
        )
        rows = [(held, _pretty(held.input), by_held.get(held.id, [])) for held in calls]
        return page(request, "session.html", session_id=session_id, rows=rows)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        changes.start()
        try:
            yield
        finally:
            changes.stop()

    routes = [
        Route("/", home),
        Route("/live", live),
        Route("/events", events),
        Route("/login", login, methods=["GET", "POST"]),
        Route("/logout", logout, methods=["POST"]),
        Route("/decide/{held_id}", decide, methods=["POST"]),
        Route("/decisions", decisions),
        Route("/session", session),
        Mount("/static", StaticFiles(directory=_package_dir("static")), name="static"),
    ]
    middleware = [
        Middleware(_Guard, guard=RebindingGuard(allow_hosts, allow_origins)),
        Middleware(
            SessionMiddleware,
            secret_key=secrets.token_urlsafe(32),
            session_cookie=f"ahp_console_{port}",
            max_age=SESSION_AGE_S,
            same_site="strict",
        ),
    ]
    return Starlette(routes=routes, middleware=middleware, lifespan=lifespan)


# --------------------------------------------------------------------------- the command


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ahp-backend approval console",
        description=(
            "The approval center: a web page to decide the calls that "
            "'ahp-backend approval --hold-s S' holds, sharing its --db."
        ),
    )
    parser.add_argument(
        "--db",
        required=True,
        type=database_target,
        metavar="DB",
        help="the approval store: an SQLite path or a postgresql:// URL",
    )
    parser.add_argument(
        "--listen",
        default="127.0.0.1:0",
        metavar="HOST:PORT",
        help="where to serve (default 127.0.0.1:0: loopback, any free port)",
    )
    parser.add_argument(
        "--allow-remote",
        action="store_true",
        help="allow a non-loopback --listen (put TLS in front of it)",
    )
    parser.add_argument(
        "--allow-host",
        action="append",
        default=[],
        metavar="NAME",
        help="another Host name to answer (e.g. behind a proxy); repeatable",
    )
    parser.add_argument(
        "--allow-origin",
        action="append",
        default=[],
        metavar="ORIGIN",
        help="another Origin to accept (scheme://name[:port]); repeatable",
    )
    parser.epilog = (
        f"The login secret is printed once on stderr with the URL, unless {SECRET_ENV} holds one."
    )
    return parser


def main(argv: list[str]) -> int:
    """``ahp-backend approval console ARGS``: serve the console until interrupted."""
    args = _parser().parse_args(argv)
    from ahp_protocol.server.asgi import (
        RebindingGuard,
        ServeFailed,
        http_address,
        listen,
        server_config,
    )
    from ahp_protocol.wire.names import is_loopback_host as is_loopback

    try:
        host, port = http_address(args.listen, allow_remote=args.allow_remote)
        RebindingGuard(args.allow_host, args.allow_origin)  # the kit's verdict, before binding
    except ValueError as exc:
        return fail(str(exc).replace("--http", "--listen", 1))
    from_env = os.environ.get(SECRET_ENV)
    if from_env is not None and not from_env.strip():
        return fail(f"{SECRET_ENV} is set but empty: set it to a login secret, or unset it")
    secret = from_env.strip() if from_env is not None else secrets.token_urlsafe(18)
    import importlib.util

    needed = ("starlette", "jinja2", "itsdangerous", "python_multipart", "uvicorn")
    if any(importlib.util.find_spec(name) is None for name in needed):
        return fail(CONSOLE_EXTRA)
    import uvicorn

    from ahp_backends.approval_queue import Queue, QueueError

    try:
        queue = Queue(args.db)  # one per process (thread-safe): pages and the change thread
    except QueueError as exc:  # fixed words naming the target, never a credential
        return fail(str(exc))
    try:
        sock = listen(host, port)
    except ServeFailed as exc:
        return fail(str(exc))
    try:
        bound_host, bound_port = sock.getsockname()[:2]
        app = build_app(
            queue,
            secret,
            port=bound_port,
            allow_hosts=args.allow_host,
            allow_origins=args.allow_origin,
        )
        config = server_config(app, timeout_graceful_shutdown=1)
        shown = f"[{bound_host}]" if ":" in str(bound_host) else str(bound_host)
        if not is_loopback(str(bound_host)):
            print(
                f"warning: serving plain HTTP on {shown}: put a TLS-terminating proxy in "
                "front of the console (the login secret and the cookie cross the network)",
                file=sys.stderr,
            )
        told = (
            f"login secret from {SECRET_ENV}" if from_env is not None else f"login secret: {secret}"
        )
        print(f"approval console: http://{shown}:{bound_port}/ ({told})", file=sys.stderr)
        sys.stderr.flush()
        uvicorn.Server(config).run(sockets=[sock])
    finally:
        sock.close()
    return 0

"""An upload receiver (draft §10 "Uploads"): an ASGI app beside a backend's :class:`App`.

:class:`UploadReceiver` answers ``POST`` at its ``path`` (default ``/content``; the
exact endpoint a subscription's ``upload.endpoint`` names) and checks, in this order:

- :class:`~ahp_protocol.server.asgi.RebindingGuard` (``421``/``403``), then the method
  (``405``), then, with ``bearer_token``, exactly one ``Authorization: Bearer <that
  token>`` (``401`` with ``WWW-Authenticate: Bearer``; constant-time compare; the token
  is never logged or echoed);
- framing (``400``): ``Content-Type: application/octet-stream`` exactly, one
  ``Content-Length`` of decimal digits, no ``Transfer-Encoding`` (never chunked), no
  ``Content-Encoding``, one ``AHP-Content-SHA256`` of 64 lowercase hex digits;
- ``Content-Length`` above ``max_bytes``: ``413`` before any byte of the body is read;
- the body, streamed and never kept past ``Content-Length``: more bytes than declared
  is ``400``; not complete within ``body_timeout`` seconds ``408``; its SHA-256 not
  the header's ``400``;
- then ``201`` with the JSON receipt ``{ref, size, sha256}``: ``ref`` is allocated here
  (``urn:uuid:…``: opaque, immutable, not a URL, no authority), the bytes kept in
  :attr:`store` under it. Another path gets ``404``.

Error bodies are one short plain-text line and close the connection. The bytes of a
ref are the backend's to read with :meth:`UploadStore.resolve` (an event carries only
``{ref}``); :class:`UploadStore` keeps at most ``max_total_bytes`` (oldest refs are
dropped first; a dropped ref resolves to ``None``, never to other bytes).
:func:`with_uploads` serves a receiver and a backend's app on one port.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import threading
import uuid
from collections import OrderedDict
from typing import TYPE_CHECKING, Any, Final

from ahp_protocol.server.asgi import BODY_TIMEOUT_S, RebindingGuard, route

if TYPE_CHECKING:
    from collections.abc import Iterable

    from ahp_protocol.server.asgi import Receive, Scope, Send

__all__ = ["DEFAULT_MAX_BYTES", "UploadReceiver", "UploadStore", "with_uploads"]

DEFAULT_MAX_BYTES: Final = 16 * 1024 * 1024
_SHA256: Final = re.compile(rb"[0-9a-f]{64}")
_TEXT: Final = (b"content-type", b"text/plain; charset=utf-8")
_CLOSE: Final = (b"connection", b"close")


class UploadStore:
    """Uploaded bytes by ref, at most ``max_total_bytes`` in all (thread-safe)."""

    def __init__(self, max_total_bytes: int = 256 * 1024 * 1024) -> None:
        if max_total_bytes < 0:
            raise ValueError("max_total_bytes must not be negative")
        self.max_total_bytes = max_total_bytes
        self._blobs: OrderedDict[str, bytes] = OrderedDict()
        self._total = 0
        self._lock = threading.Lock()

    def put(self, data: bytes) -> str:
        """Keep ``data`` under a new ref and return it."""
        ref = f"urn:uuid:{uuid.uuid4()}"
        with self._lock:
            self._blobs[ref] = data
            self._total += len(data)
            while self._total > self.max_total_bytes and self._blobs:
                _, dropped = self._blobs.popitem(last=False)
                self._total -= len(dropped)
        return ref

    def resolve(self, ref: str) -> bytes | None:
        """The bytes uploaded under ``ref``, or ``None`` (unknown or dropped)."""
        with self._lock:
            return self._blobs.get(ref)

    def __len__(self) -> int:
        with self._lock:
            return len(self._blobs)


class _Refused(Exception):
    def __init__(self, status: int, text: str, *headers: tuple[bytes, bytes]) -> None:
        super().__init__(status)
        self.status, self.text, self.headers = status, text, list(headers)


def _one(headers: list[tuple[bytes, bytes]], name: bytes) -> bytes | None:
    """The one value of header ``name``; ``None`` when absent, ``_Refused`` when repeated."""
    values = [v for k, v in headers if k.lower() == name]
    if len(values) > 1:
        raise _Refused(400, f"{name.decode()} is given more than once")
    return bytes(values[0]).strip(b" \t") if values else None


class UploadReceiver:
    """ASGI 3 app receiving AHP content uploads (see the module docstring)."""

    def __init__(
        self,
        store: UploadStore | None = None,
        *,
        path: str = "/content",
        max_bytes: int = DEFAULT_MAX_BYTES,
        bearer_token: str | None = None,
        body_timeout: float = BODY_TIMEOUT_S,
        allow_hosts: Iterable[str] = (),
        allow_origins: Iterable[str] = (),
    ) -> None:
        if max_bytes < 0:
            raise ValueError("max_bytes must not be negative")
        if body_timeout <= 0:
            raise ValueError("body_timeout must be positive")
        if bearer_token is not None and not bearer_token:
            raise ValueError("bearer_token must not be empty")
        if not path.startswith("/"):
            raise ValueError("path must start with /")
        self.store = store if store is not None else UploadStore()
        self.path = path
        self.max_bytes = max_bytes
        self.body_timeout = body_timeout
        self.guard = RebindingGuard(allow_hosts, allow_origins)
        self._expected = None if bearer_token is None else b"Bearer " + bearer_token.encode()

    def __repr__(self) -> str:  # never shows the token
        return f"UploadReceiver(path={self.path!r}, authenticated={self._expected is not None})"

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope.get("type") == "lifespan":
            from ahp_protocol.server.asgi import App

            await App._lifespan(receive, send)
            return
        if scope.get("type") != "http":
            raise RuntimeError("this app serves HTTP only")
        try:
            receipt = await self._receive(scope, receive)
        except _Refused as refused:
            body = (refused.text + "\n").encode()
            await _send(send, refused.status, body, [_TEXT, *refused.headers, _CLOSE])
            return
        if receipt is None:  # the client went away
            return
        body = json.dumps(receipt, separators=(",", ":")).encode()
        await _send(send, 201, body, [(b"content-type", b"application/json")])

    async def _receive(self, scope: Scope, receive: Receive) -> dict[str, Any] | None:
        import anyio

        refused = self.guard.refusal(scope)
        if refused is not None:
            raise _Refused(*refused)
        if scope.get("path") != self.path:
            raise _Refused(404, "no upload receiver here")
        if scope.get("method") != "POST":
            raise _Refused(405, "method not allowed: use POST", (b"allow", b"POST"))
        headers: list[tuple[bytes, bytes]] = list(scope.get("headers") or [])
        self._authenticate(headers)
        length, digest = self._framing(headers)
        if length > self.max_bytes:
            raise _Refused(413, f"upload exceeds the limit of {self.max_bytes} bytes")
        hasher = hashlib.sha256()
        body = bytearray()
        complete = False
        with anyio.move_on_after(self.body_timeout):
            while not complete:
                message = await receive()
                if message["type"] != "http.request":
                    return None  # the client went away
                chunk = message.get("body", b"")
                if len(body) + len(chunk) > length:
                    raise _Refused(400, "body is longer than Content-Length")
                body += chunk
                hasher.update(chunk)
                complete = not message.get("more_body", False)
        if not complete:
            raise _Refused(408, f"upload not received within {self.body_timeout:g} s")
        if len(body) != length:
            raise _Refused(400, "body is shorter than Content-Length")
        if not hmac.compare_digest(hasher.hexdigest().encode(), digest):
            raise _Refused(400, "AHP-Content-SHA256 does not match the body")
        ref = self.store.put(bytes(body))
        return {"ref": ref, "size": length, "sha256": digest.decode()}

    def _authenticate(self, headers: list[tuple[bytes, bytes]]) -> None:
        if self._expected is None:
            return
        values = [v for k, v in headers if k.lower() == b"authorization"]
        if not values:
            raise _Refused(401, "authentication required", (b"www-authenticate", b"Bearer"))
        scheme, _, credentials = bytes(values[0]).strip(b" \t").partition(b" ")
        given = b"Bearer " + credentials.strip(b" \t")
        if (
            len(values) != 1
            or scheme.lower() != b"bearer"
            or not hmac.compare_digest(given, self._expected)
        ):
            raise _Refused(
                401,
                "the bearer token was not accepted",
                (b"www-authenticate", b'Bearer error="invalid_token"'),
            )

    @staticmethod
    def _framing(headers: list[tuple[bytes, bytes]]) -> tuple[int, bytes]:
        if _one(headers, b"content-type") != b"application/octet-stream":
            raise _Refused(400, "Content-Type must be application/octet-stream")
        if _one(headers, b"transfer-encoding") is not None:
            raise _Refused(400, "a chunked or encoded transfer is not accepted")
        if _one(headers, b"content-encoding") is not None:
            raise _Refused(400, "Content-Encoding is not accepted")
        length = _one(headers, b"content-length")
        if length is None or not length.isdigit():
            raise _Refused(400, "Content-Length is required")
        digest = _one(headers, b"ahp-content-sha256")
        if digest is None or not _SHA256.fullmatch(digest):
            raise _Refused(400, "AHP-Content-SHA256 must be 64 lowercase hex digits")
        return int(length), digest


async def _send(send: Send, status: int, body: bytes, headers: list[tuple[bytes, bytes]]) -> None:
    head = [(b"content-length", str(len(body)).encode()), *headers]
    await send({"type": "http.response.start", "status": status, "headers": head})
    await send({"type": "http.response.body", "body": body})


def with_uploads(app: Any, receiver: UploadReceiver) -> Any:
    """One ASGI app: requests for ``receiver.path`` go to ``receiver``, the rest to ``app``
    (lifespan events to ``app``)."""
    return route(app, receiver.path, receiver)

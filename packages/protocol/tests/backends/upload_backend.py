"""An HTTP backend with the kit's upload receiver beside it, and scripted bad receivers;
a test backend for ``test_uploads_http.py`` and ``tests/e2e/test_uploads.py``, not a
test module.

One uvicorn server on 127.0.0.1 (port 0; ``listening on http://HOST:PORT`` on stderr):

- ``/`` the kit's server-kit backend: records every event it gets (intercept answers no
  effect); ``GET /records`` lists them, ``GET /resolved`` lists, for each attachment
  ref it was sent, the SHA-256 and size of the bytes the receiver holds for it (what
  the backend can read: only through :meth:`UploadStore.resolve`);
- ``/content`` the kit's :class:`UploadReceiver` (``max_bytes`` 1024; with
  ``KIT_UPLOAD_TOKEN`` set, that bearer token is required);
- ``/fake/MODE`` scripted receivers: ``202``, ``redirect`` (307 to ``/content``),
  ``bad-hash``/``bad-size`` (201 with a receipt that does not match), ``slow`` (answers
  after 1.5 s), ``html`` (201 with a text body), ``auth`` (201 with a correct receipt,
  keeping the ``Authorization`` it got: ``POST /fake/auth-seen`` lists them), each
  counting the requests it got (``POST /fake/hits``).
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import threading
from typing import Any

import anyio
from ahp_protocol.server import Backend, InterceptRequest
from ahp_protocol.server.asgi import App, listen, server_config, uvicorn_module
from ahp_protocol.server.uploads import UploadReceiver, UploadStore, with_uploads

store = UploadStore()
receiver = UploadReceiver(store, max_bytes=1024, bearer_token=os.environ.get("KIT_UPLOAD_TOKEN"))
records: list[dict[str, Any]] = []
lock = threading.Lock()
fake_hits: dict[str, int] = {}
auth_seen: list[str | None] = []

backend = Backend("com.example.kit.uploads")


@backend.intercept("*")
def intercept(request: InterceptRequest) -> Any:
    with lock:
        records.append(request.event)
    return []


@backend.observe("*")
def observe(event: dict[str, Any]) -> None:
    with lock:
        records.append(event)


def _refs(value: Any) -> list[str]:
    if isinstance(value, dict):
        body = value.get("body")
        found = (
            [body["ref"]] if value.get("kind") == "attachment" and isinstance(body, dict) else []
        )
        return found + [r for v in value.values() for r in _refs(v)]
    if isinstance(value, list):
        return [r for v in value for r in _refs(v)]
    return []


async def _json(send: Any, status: int, value: Any, extra: list[Any] | None = None) -> None:
    body = json.dumps(value).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send(
        {"type": "http.response.start", "status": status, "headers": headers + (extra or [])}
    )
    await send({"type": "http.response.body", "body": body})


def main() -> None:
    inner = with_uploads(App(backend), receiver)

    async def app(scope: Any, receive: Any, send: Any) -> None:
        path = scope.get("path", "")
        if scope.get("type") != "http" or not (
            path.startswith("/fake/") or path in ("/records", "/resolved")
        ):
            await inner(scope, receive, send)
            return
        if path == "/records":
            with lock:
                await _json(send, 200, list(records))
            return
        if path == "/resolved":
            with lock:
                refs = [r for event in records for r in _refs(event)]
            out = {}
            for ref in refs:
                data = store.resolve(ref)
                out[ref] = None if data is None else [len(data), hashlib.sha256(data).hexdigest()]
            await _json(send, 200, out)
            return
        mode = path.removeprefix("/fake/")
        data = bytearray()
        while True:
            message = await receive()
            data += message.get("body", b"")
            if not message.get("more_body", False):
                break
        with lock:
            fake_hits[mode] = fake_hits.get(mode, 0) + 1
        digest = hashlib.sha256(data).hexdigest()
        if mode == "hits":
            await _json(send, 200, fake_hits)
        elif mode == "auth-seen":
            await _json(send, 200, auth_seen)
        elif mode == "auth":
            given = [v.decode() for k, v in scope["headers"] if k == b"authorization"]
            auth_seen.append(given[0] if given else None)
            await _json(send, 201, {"ref": "urn:uuid:auth", "size": len(data), "sha256": digest})
        elif mode == "202":
            await _json(send, 202, {"ref": "r", "size": len(data), "sha256": digest})
        elif mode == "redirect":
            await _json(send, 307, {}, [(b"location", b"/content")])
        elif mode == "bad-hash":
            await _json(send, 201, {"ref": "r", "size": len(data), "sha256": "0" * 64})
        elif mode == "bad-size":
            await _json(send, 201, {"ref": "r", "size": len(data) + 1, "sha256": digest})
        elif mode == "slow":
            await anyio.sleep(1.5)
            await _json(send, 201, {"ref": "r", "size": len(data), "sha256": digest})
        else:
            await send({"type": "http.response.start", "status": 201, "headers": []})
            await send({"type": "http.response.body", "body": b"<html>ok</html>"})

    sock = listen("127.0.0.1", 0)
    host, port = sock.getsockname()[:2]
    print(f"uploads: listening on http://{host}:{port}", file=sys.stderr, flush=True)
    config = server_config(app)
    uvicorn_module().Server(config).run(sockets=[sock])


if __name__ == "__main__":
    main()

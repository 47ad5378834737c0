"""The OAuth-protected backend of ``ahp-conformance harness``'s OAuth runs (a process).

``python -P -m ahp_conformance.harness.oauth_backend --issuer URL --record FILE
--ready-file FILE [--scope S]``: a server-kit :class:`~ahp_protocol.server.Backend` that
answers every ``tool.before`` with no effect, served on a loopback port as an OAuth
resource server (:class:`~ahp_protocol.server.oauth.ResourceServer`: resource
``http://127.0.0.1:PORT/ahp``, the given issuer, trusting ``AHP_CA_BUNDLE`` for it). Every
HTTP request is recorded (one JSON line: method, path, whether it carried an
``Authorization`` header, the status answered; never the header), so the judge sees a
harness that sends without a token or twice. The ready file gets ``{"endpoint": URL}``
once the socket listens.
"""

from __future__ import annotations

import argparse
import json
import os
import threading
from pathlib import Path
from typing import Any


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ahp_conformance.harness.oauth_backend")
    parser.add_argument("--issuer", required=True)
    parser.add_argument("--record", required=True)
    parser.add_argument("--ready-file", required=True)
    parser.add_argument("--scope", action="append", default=[])
    args = parser.parse_args(argv)

    from ahp_protocol.server import Backend
    from ahp_protocol.server.asgi import App, listen, server_config, uvicorn_module
    from ahp_protocol.server.oauth import ResourceServer

    backend = Backend("org.ahp.conformance.oauth")

    @backend.intercept("tool.before")
    def no_effect(request: Any) -> None:
        return None

    sock = listen("127.0.0.1", 0)
    port = sock.getsockname()[1]
    resource = f"http://127.0.0.1:{port}/ahp"
    oauth = ResourceServer(
        resource=resource,
        issuer=args.issuer,
        scopes=args.scope,
        ca_bundle=os.environ.get("AHP_CA_BUNDLE"),
    )
    app = App(backend, oauth=oauth)
    lock = threading.Lock()
    record = Path(args.record)

    async def recording(scope: Any, receive: Any, send: Any) -> None:
        if scope.get("type") != "http":
            await app(scope, receive, send)
            return
        status: list[int] = []

        async def sent(message: Any) -> None:
            if message.get("type") == "http.response.start":
                status.append(int(message["status"]))
            await send(message)

        await app(scope, receive, sent)
        headers = scope.get("headers") or ()
        entry = {
            "method": scope.get("method"),
            "path": scope.get("path"),
            "authorization": any(k.lower() == b"authorization" for k, _ in headers),
            "status": status[0] if status else None,
        }
        with lock, record.open("a", encoding="utf-8") as out:
            out.write(json.dumps(entry) + "\n")

    config = server_config(recording)
    ready = Path(args.ready_file)
    ready.with_suffix(".tmp").write_text(json.dumps({"endpoint": resource}), "utf-8")
    os.replace(ready.with_suffix(".tmp"), ready)
    uvicorn_module().Server(config).run(sockets=[sock])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

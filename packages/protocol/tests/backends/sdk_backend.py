"""A backend written with the OFFICIAL SDK's server API (test/bench peer, never package code).

Same policy as ``kit_configured.py``: ``tool.before`` whose ``tool.input.command``
matches ``rm\\s+-rf`` -> deny (reason and code below); anything else -> no effect.
It also serves the same default subscriptions on ``hooks/configuration``.

Built only from the SDK's public server API (``agenthooksprotocol.server``):
``hooks.Handlers`` for dispatch, ``stdio.serve`` for stdio and ``asgi.App`` for HTTP.

- no arguments: stdio ``persistent`` (``serve`` until EOF);
- ``--once``: stdio ``per_event``: ``serve`` fed with exactly one input line, then
  exit (the SDK harness keeps stdin open until the process exits, so waiting for
  EOF would hang);
- ``--http HOST:PORT``: ``asgi.App`` under uvicorn on a socket bound first;
  prints ``<name>: listening on http://HOST:PORT`` to stderr (port 0 picks one).
"""

from __future__ import annotations

import re
import sys
from typing import Any

import anyio
from agenthooksprotocol import Configuration, effect
from agenthooksprotocol.server import hooks
from agenthooksprotocol.server import serve as serve_stdio

NAME = "com.example.sdk.backend"
DENY_REASON = "Recursive deletes are not allowed (sdk)."
DENY_CODE = "com.example.sdk.rm_rf"
RM_RF = re.compile(r"rm\s+-rf")
MAX_LINE = 4 * 1024 * 1024

CONFIGURATION = Configuration.from_dict(
    {
        "subscriptions": [
            {
                "mode": "intercept",
                "events": ["tool.before"],
                # Generous: interop tests run beside the whole suite on a loaded machine,
                # and a healthy answer takes milliseconds, so the deadline never decides.
                "timeoutMs": 20000,
                "failurePolicy": "fail-closed",
                "content": {"default": "body"},
            },
            {"mode": "observe", "events": ["session.*"], "content": {"default": "metadata"}},
        ]
    }
)


def tool_before(context: hooks.ToolBeforeContext) -> hooks.ToolBeforeReply:
    tool_input = context.raw["params"]["event"]["tool"].get("input")
    command = tool_input.get("command", "") if isinstance(tool_input, dict) else ""
    if RM_RF.search(str(command)):
        return hooks.ToolBeforeReply(
            effects=(effect.DenyEffect(reason=DENY_REASON, code=DENY_CODE),)
        )
    return hooks.ToolBeforeReply()


def handlers() -> hooks.Handlers:
    return hooks.Handlers(
        intercept=hooks.InterceptHandlers(tool_before=tool_before),
        configuration=CONFIGURATION,
    )


class _OneLine:
    """An AnyIO byte receive stream holding one line of stdin, then end of stream."""

    def __init__(self, data: bytes) -> None:
        self.data = data

    async def receive(self, max_bytes: int = 65536) -> bytes:
        if not self.data:
            raise anyio.EndOfStream
        chunk, self.data = self.data[:max_bytes], self.data[max_bytes:]
        return chunk

    async def aclose(self) -> None:
        self.data = b""


def serve_once() -> None:
    line = sys.stdin.buffer.readline(MAX_LINE + 1)
    if not line.endswith(b"\n"):
        sys.exit(1)  # EOF or an oversized record: nothing complete to answer
    anyio.run(lambda: serve_stdio(handlers(), input=_OneLine(line)))  # type: ignore[arg-type]


def serve_http(address: str) -> None:
    import socket

    import uvicorn
    from agenthooksprotocol.server import asgi

    host, _, port = address.rpartition(":")
    host = host.strip("[]")
    info = socket.getaddrinfo(host, int(port), type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    sock = socket.socket(info[0][0], info[0][1], info[0][2])
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(info[0][4])
    sock.listen(128)
    bound_host, bound_port = sock.getsockname()[:2]
    shown = f"[{bound_host}]" if ":" in str(bound_host) else str(bound_host)
    print(f"{NAME}: listening on http://{shown}:{bound_port}", file=sys.stderr, flush=True)
    app: Any = asgi.App(handlers())
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off")
    uvicorn.Server(config).run(sockets=[sock])


def main(argv: list[str]) -> None:
    if not argv:
        anyio.run(serve_stdio, handlers())
    elif argv == ["--once"]:
        serve_once()
    elif len(argv) == 2 and argv[0] == "--http":
        serve_http(argv[1])
    else:
        sys.exit("usage: sdk_backend.py [--once | --http HOST:PORT]")


if __name__ == "__main__":
    main(sys.argv[1:])

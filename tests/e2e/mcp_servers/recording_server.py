"""A real MCP server for the end-to-end tests, written with the SDK's ``MCPServer``.

``python recording_server.py --record FILE [--transport stdio|http] [--name NAME]``.
It appends ``{"pid": PID}`` to ``FILE`` when it starts, then every tool call it
receives as one JSON line (``{"tool": NAME, "arguments": {...}}``) *before* the tool
runs, so a test can prove a refused call never reached the server. Each call line also
holds ``secret_sha256``: the SHA-256 (never the value) of the variable ``--digest-env``
names (stdio) or of the request's ``X-Api-Key`` header (HTTP). Over HTTP it
binds ``127.0.0.1:0`` and prints ``listening on http://127.0.0.1:PORT/mcp`` on stderr
once it accepts connections.

Tools: ``echo(text)``, ``delete_file(path)`` (deletes nothing: it only says it did),
``add(a, b)`` (structured output), ``picture()`` (an image), ``fail()`` (an ``isError``
result), ``refuse()`` (a JSON-RPC error, code -32042), ``crash()`` (the process exits
mid-call) and ``nap(seconds)``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import socket
import sys
import time
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.utilities.types import Image
from mcp.shared.exceptions import MCPError

PNG = b"\x89PNG\r\n\x1a\nahp"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--record", required=True)
    parser.add_argument("--transport", choices=("stdio", "http"), default="stdio")
    parser.add_argument("--name", default="recording-server")
    parser.add_argument("--api-key", default=None)  # accepted (and ignored): a secret arg
    parser.add_argument("--digest-env", default=None, help="record the SHA-256 of this variable")
    args = parser.parse_args()
    seen = {"x-api-key": ""}  # the last request's X-Api-Key header (HTTP)

    def secret_sha() -> str:
        value = os.environ.get(args.digest_env, "") if args.digest_env else seen["x-api-key"]
        return hashlib.sha256(value.encode()).hexdigest()

    def record(tool: str, arguments: dict[str, object]) -> None:
        line = {"tool": tool, "arguments": arguments, "secret_sha256": secret_sha()}
        with open(args.record, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(line) + "\n")
            handle.flush()

    with open(args.record, "a", encoding="utf-8") as handle:
        handle.write(json.dumps({"pid": os.getpid()}) + "\n")  # to check it is gone after

    server = MCPServer(args.name, log_level="WARNING")

    @server.tool()
    def echo(text: str) -> str:
        """Say the text back."""
        record("echo", {"text": text})
        return f"echo: {text}"

    @server.tool()
    def delete_file(path: str) -> str:
        """Pretend to delete a file (records the call)."""
        record("delete_file", {"path": path})
        return f"deleted {path}"

    @server.tool()
    def add(a: int, b: int) -> dict[str, int]:
        """Add two integers."""
        record("add", {"a": a, "b": b})
        return {"sum": a + b}

    @server.tool()
    def picture() -> Image:
        """A tiny PNG image (its bytes: the PNG signature and b"ahp")."""
        record("picture", {})
        return Image(data=PNG, format="png")

    @server.tool()
    def fail() -> str:
        """Fail: the result is an error (isError)."""
        record("fail", {})
        raise ToolError("the tool failed on purpose")

    @server.tool()
    def refuse() -> str:
        """Refuse the call with a JSON-RPC error (not an ``isError`` result)."""
        record("refuse", {})
        raise MCPError(code=-32042, message="refused on purpose SECRET-IN-MESSAGE")

    @server.tool()
    def crash() -> str:
        """Exit the server process in the middle of the call."""
        record("crash", {})
        os._exit(3)

    @server.tool()
    def nap(seconds: float) -> str:
        """Sleep, then answer."""
        record("nap", {"seconds": seconds})
        time.sleep(seconds)
        return "awake"

    if args.transport == "stdio":
        server.run("stdio")
        return

    import anyio
    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    inner = server.streamable_http_app(host="127.0.0.1")

    async def app(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            headers = dict(scope.get("headers") or [])
            seen["x-api-key"] = headers.get(b"x-api-key", b"").decode("latin-1")
        await inner(scope, receive, send)

    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    http = uvicorn.Server(config)

    async def serve() -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(http.serve, [sock])
            while not http.started:
                await anyio.sleep(0.01)
            print(f"listening on http://127.0.0.1:{port}/mcp", file=sys.stderr, flush=True)

    anyio.run(serve)


if __name__ == "__main__":
    main()

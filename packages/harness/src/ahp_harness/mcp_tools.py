"""MCP servers' tools as harness tools, over the official ``mcp`` SDK (imported only here).

:func:`open_mcp` connects every server of an ``--mcp-config`` (:mod:`ahp_harness.mcp_config`)
when the session starts, lists their tools, and closes every connection (and stops every
stdio server process) when the session is over. Each server runs in its own task, so a
server that fails cannot take the others down. Each listed tool becomes an
:class:`McpTool`, an ordinary :class:`ahp_harness.tools.Tool` of kind ``mcp`` named
``mcp__<server>__<tool>``, which the gate runs like any other
(:mod:`ahp_harness.hooks`): its ``identity`` is the draft's ``tool.mcp`` (server id and
name, ``toolName``, ``provenance: "runtime"``, the stripped ``connection``), its input is
validated against the tool's ``inputSchema`` (JSON Schema, with ``jsonschema``) before
any event, and a run is one ``tools/call``.

The result becomes text (``tool.after``'s canonical content): the text parts in order;
``structuredContent`` serialized as JSON when the result has no content blocks (MCP asks
a server to put that serialization in a text part too, so it is not repeated); a text
resource's text; images, audio and binary resources as attachments (the decoded bytes
and their media type, at most :data:`~ahp_harness.manifest.MAX_UPLOAD_BYTES` each, with a
one-line note in the text; ``tool.after`` carries their parts, uploaded where a
subscription selects them), or, when one cannot be (too large, not base64, text or JSON
declared), a one-line note only (kind, media type and size, never the bytes); the text
is at most :data:`MAX_RESULT_CHARS` characters (a note says when it was cut).
``isError`` is outcome ``error`` (``mcp_tool_error``).

Bounds: connecting and listing take at most :data:`STARTUP_TIMEOUT_S` per server (in
parallel); a call at most the server's ``timeout`` (outcome ``timeout``); a server that
dies or breaks its connection mid-call is outcome ``error`` (``mcp_connection``) at once,
and so is every later call to it (no reconnect); a JSON-RPC error or an answer the SDK
refuses on a live connection is ``mcp_error``.
Errors name the server and the exception class, never its text, a header or an
environment value. Never does: MCP resources, prompts, sampling, elicitation, roots,
OAuth to MCP servers, or the SSE transport.
"""

from __future__ import annotations

import base64
import json
import math
import sys
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Final

import anyio
from pydantic import BaseModel, RootModel

from ahp_harness.manifest import MAX_UPLOAD_BYTES
from ahp_harness.mcp_config import (
    McpServerConfig,
    connection,
    tool_name,
    valid_mcp_tool_name,
)
from ahp_harness.tools.base import Tool, ToolInputError, ToolResult, failure

if TYPE_CHECKING:
    from ahp_protocol.client.uploads import Attachment

    from ahp_harness.sandbox import Sandbox

__all__ = ["STARTUP_TIMEOUT_S", "McpConnectError", "McpInput", "McpServers", "McpTool", "open_mcp"]

STARTUP_TIMEOUT_S: Final = 30.0
"""How long one server may take to start, answer the handshake and list its tools."""
CLOSE_TIMEOUT_S: Final = 10.0
"""How long closing all servers may take (a stdio server: stdin closed, then killed)."""
MAX_RESULT_CHARS: Final = 1_000_000
"""The longest result text the model and ``tool.after`` get (a note says it was cut)."""
_MAX_ERROR_CHARS: Final = 2000
_MAX_PAGES: Final = 100
_MAX_NAME: Final = 200


class McpConnectError(Exception):
    """A server could not be connected; ``str()`` names it and says why (no secrets)."""

    def __init__(self, server: str, reason: str) -> None:
        super().__init__(f"$.mcpServers.{server}: {reason}")
        self.server = server
        self.reason = reason


class McpInput(RootModel[dict[str, Any]]):
    """A validated MCP tool input: the JSON object (``.root``) the schema accepted."""


# -- one server ---------------------------------------------------------------------------


@dataclass
class _Server:
    config: McpServerConfig
    default_cwd: str
    client: Any = None
    name: str | None = None
    tools: list[dict[str, Any]] = field(default_factory=list)
    ready: anyio.Event = field(default_factory=anyio.Event)
    stop: anyio.Event = field(default_factory=anyio.Event)
    failed: str | None = None
    closed: bool = False
    lost: bool = False
    done: anyio.Event = field(default_factory=anyio.Event)
    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)

    def transport(self) -> Any:
        from mcp.client.stdio import StdioServerParameters, stdio_client

        config = self.config
        if config.transport == "stdio":
            params = StdioServerParameters(
                command=config.command or "",
                args=list(config.args),
                env=dict(config.env),
                cwd=config.cwd or self.default_cwd,
            )
            return stdio_client(params, errlog=sys.stderr)
        import httpx2
        from mcp.client.streamable_http import streamable_http_client

        http = httpx2.AsyncClient(
            headers=dict(config.headers),
            timeout=httpx2.Timeout(STARTUP_TIMEOUT_S, read=config.timeout_ms / 1000.0 + 5.0),
            trust_env=False,
            follow_redirects=False,
        )
        return _with_http_client(http, streamable_http_client(config.url or "", http_client=http))

    async def serve(self) -> None:
        """Connect, list the tools, hold the connection until :attr:`stop`; never raises."""
        from mcp import Client

        try:
            with self.scope:
                await self._connected(Client)
        except Exception as exc:  # the class only: its text may carry a URL or an argument
            self.failed = _why(exc)
        finally:
            self.closed = True
            self.client = None
            self.ready.set()
            self.done.set()

    async def _connected(self, client_class: Any) -> None:
        async with client_class(
            self.transport(), read_timeout_seconds=STARTUP_TIMEOUT_S, cache=None
        ) as client:
            info = client.server_info
            name = getattr(info, "name", None)
            if isinstance(name, str) and name.strip():
                self.name = name.strip()[:_MAX_NAME]
            self.tools = await _list_tools(client)
            self.client = client
            self.ready.set()
            await self.stop.wait()

    def identity(self, mcp_tool: str) -> dict[str, Any]:
        server: dict[str, Any] = {"id": self.config.id}
        if self.name:
            server["name"] = self.name
        return {
            "server": server,
            "toolName": mcp_tool,
            "provenance": "runtime",
            "connection": connection(self.config, self.default_cwd),
        }

    async def call(self, name: str, arguments: dict[str, Any]) -> ToolResult:
        from mcp.shared.exceptions import MCPError
        from mcp_types import CONNECTION_CLOSED, REQUEST_TIMEOUT

        client = self.client
        sid = self.config.id
        if client is None or self.closed or self.lost:
            return failure(
                "mcp_connection", f"MCP server {sid} is not connected (the connection was lost)"
            )
        seconds = self.config.timeout_ms / 1000.0
        result = None
        try:
            with anyio.move_on_after(seconds + 1.0):
                result = await client.call_tool(name, arguments, read_timeout_seconds=seconds)
        except MCPError as exc:
            if exc.code == REQUEST_TIMEOUT:
                return _timed_out(sid, seconds)
            if exc.code == CONNECTION_CLOSED:
                self.lost = True
                return failure(
                    "mcp_connection",
                    f"MCP server {sid} closed the connection during the call (it may have exited)",
                )
            return failure(
                "mcp_error", f"MCP server {sid} refused the call (JSON-RPC error {exc.code})"
            )
        except TimeoutError:
            return _timed_out(sid, seconds)
        except Exception as exc:  # the class only: the text may carry a URL or a value
            if self.closed or _lost_connection(exc):
                self.lost = True
                return failure(
                    "mcp_connection", f"MCP server {sid} failed during the call ({_why(exc)})"
                )
            return failure("mcp_error", f"MCP server {sid}: the call failed ({_why(exc)})")
        if result is None:
            return _timed_out(sid, seconds)
        data = result.model_dump(by_alias=True, mode="json", exclude_none=True)
        content, attachments = result_content(data)
        text = _capped(content)
        if data.get("isError"):
            note = text if len(text) <= _MAX_ERROR_CHARS else text[:_MAX_ERROR_CHARS] + " [...]"
            return failure("mcp_tool_error", f"the MCP tool reported an error: {note}", text)
        return ToolResult(outcome="ok", output=text, attachments=attachments)


def _lost_connection(exc: BaseException) -> bool:
    """Whether ``exc`` says the connection is gone (not one bad answer on a live one)."""
    import httpx2

    if isinstance(exc, BaseExceptionGroup):
        return any(_lost_connection(e) for e in exc.exceptions)
    gone = (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream, OSError)
    return isinstance(exc, (*gone, httpx2.TransportError))


def _capped(text: str) -> str:
    if len(text) <= MAX_RESULT_CHARS:
        return text
    return (
        text[:MAX_RESULT_CHARS]
        + f"\n[truncated: the result is capped at {MAX_RESULT_CHARS} characters]"
    )


def _timed_out(sid: str, seconds: float) -> ToolResult:
    return failure(
        "timeout", f"MCP server {sid} did not answer within {seconds:g}s", outcome="timeout"
    )


def _why(exc: BaseException) -> str:
    if isinstance(exc, BaseExceptionGroup):
        inner = exc.exceptions[0] if exc.exceptions else exc
        return _why(inner)
    if isinstance(exc, FileNotFoundError):
        return "the command was not found"
    if isinstance(exc, PermissionError):
        return "the command could not be run (permission denied)"
    return type(exc).__name__


@asynccontextmanager
async def _with_http_client(http: Any, transport: Any) -> AsyncIterator[Any]:
    async with http, transport as streams:
        yield streams


async def _list_tools(client: Any) -> list[dict[str, Any]]:
    tools: list[dict[str, Any]] = []
    cursor = None
    for _ in range(_MAX_PAGES):
        page = await client.list_tools(cursor=cursor)
        tools += [t.model_dump(by_alias=True, mode="json", exclude_none=True) for t in page.tools]
        cursor = page.next_cursor
        if cursor is None:
            break
    return tools


def result_text(result: Mapping[str, Any]) -> str:
    """A ``CallToolResult`` (wire JSON) as text only (binary content as notes)."""
    return result_content(result, max_attachment_bytes=0)[0]


def result_content(
    result: Mapping[str, Any], *, max_attachment_bytes: int = MAX_UPLOAD_BYTES
) -> tuple[str, tuple[Attachment, ...]]:
    """A ``CallToolResult`` (wire JSON) as the text the model and ``tool.after`` get, and
    the attachments for its binary content (each at most ``max_attachment_bytes``)."""
    texts: list[str] = []
    attachments: list[Attachment] = []

    def binary(kind: str, mime: Any, data: Any) -> str:
        attachment = _attachment(mime, data, max_attachment_bytes)
        if attachment is None:
            return _binary_note(kind, mime, data)
        attachments.append(attachment)
        return f"[{kind} content ({attachment.media_type}, {attachment.size} bytes): attached]"

    for block in result.get("content") or ():
        if not isinstance(block, Mapping):
            continue
        kind = block.get("type")
        if kind == "text" and isinstance(block.get("text"), str):
            texts.append(block["text"])
        elif kind in ("image", "audio"):
            texts.append(binary(str(kind), block.get("mimeType"), block.get("data")))
        elif kind == "resource" and isinstance(block.get("resource"), Mapping):
            resource = block["resource"]
            if isinstance(resource.get("text"), str):
                texts.append(resource["text"])
            else:
                texts.append(binary("resource", resource.get("mimeType"), resource.get("blob")))
        elif kind == "resource_link":
            label = block.get("name") if isinstance(block.get("name"), str) else "unnamed"
            texts.append(f"[resource link {label!s:.200}: not fetched]")
        else:
            texts.append("[content of an unknown type: not shown]")
    structured = result.get("structuredContent")
    if structured is not None and not texts:  # MCP asks for its serialization in a text part
        texts.append(json.dumps(structured, ensure_ascii=False, sort_keys=True))
    return "\n".join(texts), tuple(attachments)


def _attachment(mime: Any, data: Any, max_bytes: int) -> Attachment | None:
    """The attachment for base64 ``data`` of media type ``mime``, or ``None`` (not base64,
    no usable media type, text or JSON, larger than ``max_bytes``)."""
    from ahp_protocol.client.uploads import Attachment

    if not isinstance(data, str) or not isinstance(mime, str) or len(mime) > 100:
        return None
    if len(data) * 3 // 4 > max_bytes + 2:
        return None
    try:
        raw = base64.b64decode(data, validate=True)
    except ValueError:
        return None
    if len(raw) > max_bytes:
        return None
    try:
        return Attachment(raw, mime)
    except ValueError:  # no media type, or text/JSON (those stay inline text)
        return None


def _binary_note(kind: str, mime: Any, data: Any) -> str:
    size = math.floor(len(data) * 3 / 4) if isinstance(data, str) else 0
    media = mime if isinstance(mime, str) and len(mime) <= 100 else "unknown type"
    return f"[{kind} content ({media}, about {size} bytes): not shown]"


# -- the tools ------------------------------------------------------------------------------


def _schema_problem(error: Any) -> tuple[str, str]:
    """``(json path, reason)`` of a jsonschema error, never echoing the input's values."""
    path = error.json_path if hasattr(error, "json_path") else "$"
    keyword = str(error.validator)
    expected = error.validator_value
    if keyword in ("required", "additionalProperties", "dependentRequired"):
        reason = str(error.message)  # names properties, never values
    elif keyword == "type":
        reason = f"must be of type {expected}"
    elif keyword in ("enum", "const"):
        reason = f"must be {'one of ' if keyword == 'enum' else ''}{json.dumps(expected)[:200]}"
    else:
        reason = f"fails {keyword} {json.dumps(expected, default=str)[:200]}"
    return path, reason


class McpTool(Tool):
    """One MCP server's tool as a harness tool (kind ``mcp``; see the module docstring)."""

    kind: ClassVar[str] = "mcp"
    input_model: ClassVar[type[BaseModel]] = McpInput

    def __init__(self, server: _Server, spec: Mapping[str, Any], validator: Any) -> None:
        self._server = server
        self.mcp_tool_name: str = spec["name"]
        self.tool_name = tool_name(server.config.id, self.mcp_tool_name)
        text = spec.get("description")
        self.tool_description = text if isinstance(text, str) else ""
        self._schema: dict[str, Any] = dict(spec.get("inputSchema") or {"type": "object"})
        self._validator = validator
        self.identity: dict[str, Any] = server.identity(self.mcp_tool_name)

    # ``name`` and ``description`` are per instance here (class variables on native tools).
    @property
    def name(self) -> str:  # type: ignore[override]
        return self.tool_name

    @property
    def description(self) -> str:  # type: ignore[override]
        return self.tool_description

    def parse_input(self, raw: object) -> BaseModel:
        if isinstance(raw, McpInput):
            raw = raw.root
        if not isinstance(raw, Mapping):
            raise ToolInputError("input", "must be a JSON object")
        value = json.loads(json.dumps(dict(raw)))  # plain JSON, as it will be sent
        errors = sorted(self._validator.iter_errors(value), key=lambda e: list(e.path))
        if errors:
            path, reason = _schema_problem(errors[0])
            more = f" (and {len(errors) - 1} more problem{'s' if len(errors) > 2 else ''})"
            raise ToolInputError(path, reason + (more if len(errors) > 1 else ""))
        return McpInput(value)

    def main_argument(self, inp: BaseModel) -> str:
        """The input as compact JSON with sorted keys (what a permission ``pattern`` reads)."""
        value = inp.root if isinstance(inp, McpInput) else inp.model_dump()
        return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)

    def json_schema(self) -> dict[str, Any]:
        return dict(self._schema)

    async def _run(self, inp: BaseModel, sandbox: Sandbox) -> ToolResult:
        value = inp.root if isinstance(inp, McpInput) else inp.model_dump()
        return await self._server.call(self.mcp_tool_name, dict(value))

    def __repr__(self) -> str:
        return f"<mcp tool {self.tool_name}>"


@dataclass
class McpServers:
    """The connected servers of a session and their tools by model-facing name."""

    tools: dict[str, McpTool] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    _servers: list[_Server] = field(default_factory=list)


def _build_tools(server: _Server, out: McpServers) -> None:
    from jsonschema.exceptions import SchemaError  # type: ignore[import-untyped]
    from jsonschema.validators import validator_for  # type: ignore[import-untyped]

    sid = server.config.id
    for spec in server.tools:
        mcp_name = spec.get("name")
        if not valid_mcp_tool_name(mcp_name):
            out.notes.append(f"MCP server {sid}: a tool with an invalid name was skipped")
            continue
        name = tool_name(sid, str(mcp_name))
        if name in out.tools:
            out.notes.append(
                f"MCP server {sid}: tool {mcp_name} is listed twice; the first is kept"
            )
            continue
        schema = spec.get("inputSchema")
        if not isinstance(schema, dict) or schema.get("type", "object") != "object":
            out.notes.append(
                f"MCP server {sid}: tool {mcp_name} has no object inputSchema; skipped"
            )
            continue
        try:
            cls = validator_for(schema)
            cls.check_schema(schema)
        except SchemaError:
            out.notes.append(
                f"MCP server {sid}: tool {mcp_name} has an invalid inputSchema; skipped"
            )
            continue
        out.tools[name] = McpTool(server, spec, cls(schema))


@asynccontextmanager
async def open_mcp(
    configs: Sequence[McpServerConfig], *, cwd: str, startup_timeout_s: float = STARTUP_TIMEOUT_S
) -> AsyncIterator[McpServers]:
    """Connect every server (in parallel), yield their tools, close them all on exit.

    A server that cannot be reached, started or listed within ``startup_timeout_s`` is a
    :class:`McpConnectError` (every server is closed first); ``cwd`` is where a stdio
    server without its own ``cwd`` runs. An exception of the body is raised as it is
    (not wrapped in an exception group).
    """
    servers = [_Server(config, cwd) for config in configs]
    out = McpServers(_servers=servers)
    problem: BaseException | None = None
    async with anyio.create_task_group() as tg:
        try:
            for server in servers:
                tg.start_soon(server.serve, name=f"mcp server {server.config.id}")
            await _started(servers, startup_timeout_s)
            for server in servers:
                _build_tools(server, out)
            yield out
        except BaseException as exc:  # raised again below, outside the task group
            problem = exc
        finally:
            await _close(servers)
            tg.cancel_scope.cancel()
    if problem is not None:
        raise problem


async def _started(servers: Sequence[_Server], timeout_s: float) -> None:
    with anyio.move_on_after(timeout_s):
        for server in servers:
            await server.ready.wait()
    for server in servers:
        if not server.ready.is_set():
            raise McpConnectError(
                server.config.id, f"did not start and list its tools within {timeout_s:g}s"
            )
        if server.failed is not None or server.client is None:
            raise McpConnectError(
                server.config.id, f"could not connect ({server.failed or 'closed at once'})"
            )


async def _close(servers: Sequence[_Server]) -> None:
    """Ask every server to close; cancel one still connecting; wait a bounded time."""
    for server in servers:
        server.stop.set()
        if not server.ready.is_set():
            server.scope.cancel()
    with anyio.move_on_after(CLOSE_TIMEOUT_S, shield=True):
        for server in servers:
            await server.done.wait()

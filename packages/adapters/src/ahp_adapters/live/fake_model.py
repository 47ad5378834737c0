"""A scripted fake model on loopback that real harness binaries can be pointed at.

Speaks just enough of four model APIs for a harness to run one turn of tool calls:
Anthropic Messages (``POST /v1/messages``), OpenAI Responses (``POST .../responses``),
OpenAI Chat Completions (``POST .../chat/completions``) and Gemini
(``POST .../models/M:generateContent`` and ``:streamGenerateContent``), streamed (SSE)
or not, as the request asks.

The script is a list of shell commands. The model is stateless: a request whose
history holds ``n`` tool results asks for command ``n`` (through whichever shell
tool the request offers, its arguments built from that tool's own schema), and once
every command has had its result it ends the turn with :data:`FINAL_TEXT`. A request
that offers no shell tool (title generation, summaries, "next speaker" checks) gets
a short text. Every request is recorded with the tool results it carried, so a test
can tell what the model saw: the reason of a deny, or a command's output.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

FINAL_TEXT = "All done."
SHELL_TOOLS = (
    "Bash",
    "run_shell_command",
    "shell",
    "shell_command",
    "exec_command",
    "bash",
    "Shell",
    "local_shell",
)
"""Names harnesses give their shell tool, in the order one is picked when several exist."""


@dataclass
class Seen:
    """One request as the fake model saw it."""

    api: str
    path: str
    tools: list[str]
    tool_results: list[str]
    asked: str | None
    """The command this request was answered with, or ``None`` (text)."""


@dataclass
class Script:
    commands: Sequence[str]
    seen: list[Seen] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def next_command(self, results: int) -> str | None:
        return self.commands[results] if results < len(self.commands) else None

    def record(self, seen: Seen) -> None:
        with self.lock:
            self.seen.append(seen)

    def offered(self) -> list[str]:
        """Every tool the harness offered the model, in the order first seen."""
        out: list[str] = []
        with self.lock:
            for s in self.seen:
                out += [t for t in s.tools if t not in out]
        return out

    def results(self) -> list[str]:
        """Every tool result the model was given, in the order first seen."""
        out: list[str] = []
        with self.lock:
            for s in self.seen:
                for r in s.tool_results:
                    if r not in out:
                        out.append(r)
        return out


def _text(value: Any) -> str:
    """The text inside a tool result, however the API nests it."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "\n".join(_text(v) for v in value)
    if isinstance(value, dict):
        for key in ("text", "output", "content", "result", "error", "llmContent"):
            if key in value:
                return _text(value[key])
        return json.dumps(value, sort_keys=True)
    return "" if value is None else str(value)


def _schema_args(schema: dict[str, Any] | None, command: str) -> dict[str, Any]:
    """Arguments for a shell tool from its JSON schema: the command, and a filler for
    any other required string."""
    props = (schema or {}).get("properties") or {}
    args: dict[str, Any] = {}
    key = next((k for k in ("command", "cmd") if k in props), "command")
    kind = (props.get(key) or {}).get("type")
    args[key] = ["bash", "-lc", command] if kind == "array" else command
    for name in (schema or {}).get("required") or []:
        if name not in args and (props.get(name) or {}).get("type") == "string":
            args[name] = "requested by the fake model"
    return args


def _pick(tools: dict[str, dict[str, Any] | None]) -> str | None:
    return next((name for name in SHELL_TOOLS if name in tools), None)


# -- the four APIs: (tools offered, tool results seen) from a request; a reply -------


def _anthropic_in(body: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    tools = {t.get("name"): t.get("input_schema") for t in body.get("tools") or []}
    results = [
        _text(block.get("content"))
        for m in body.get("messages") or []
        if isinstance(m.get("content"), list)
        for block in m["content"]
        if isinstance(block, dict) and block.get("type") == "tool_result"
    ]
    return tools, results


def _anthropic_out(
    body: dict[str, Any], call: tuple[str, dict[str, Any]] | None, n: int
) -> Iterator[tuple[str | None, dict[str, Any]]]:
    msg = {
        "id": f"msg_fake_{n}",
        "type": "message",
        "role": "assistant",
        "model": body.get("model", "fake"),
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": 1, "output_tokens": 0},
    }
    if call is None:
        block: dict[str, Any] = {"type": "text", "text": ""}
        delta: dict[str, Any] = {"type": "text_delta", "text": FINAL_TEXT}
        full: dict[str, Any] = {"type": "text", "text": FINAL_TEXT}
        stop = "end_turn"
    else:
        name, args = call
        block = {"type": "tool_use", "id": f"toolu_fake_{n}", "name": name, "input": {}}
        delta = {"type": "input_json_delta", "partial_json": json.dumps(args)}
        full = {**block, "input": args}
        stop = "tool_use"
    if not body.get("stream"):
        yield None, {**msg, "content": [full], "stop_reason": stop}
        return
    yield "message_start", {"type": "message_start", "message": msg}
    yield "content_block_start", {"type": "content_block_start", "index": 0, "content_block": block}
    yield "content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta}
    yield "content_block_stop", {"type": "content_block_stop", "index": 0}
    yield (
        "message_delta",
        {
            "type": "message_delta",
            "delta": {"stop_reason": stop, "stop_sequence": None},
            "usage": {"output_tokens": 1},
        },
    )
    yield "message_stop", {"type": "message_stop"}


def _responses_in(body: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    tools = {t.get("name") or t.get("type"): t.get("parameters") for t in body.get("tools") or []}
    items = body["input"] if isinstance(body.get("input"), list) else []
    results = [
        _text(i.get("output"))
        for i in items
        if isinstance(i, dict)
        and i.get("type")
        in ("function_call_output", "custom_tool_call_output", "local_shell_call_output")
    ]
    return tools, results


def _responses_out(
    body: dict[str, Any], call: tuple[str, dict[str, Any]] | None, n: int
) -> Iterator[tuple[str | None, dict[str, Any]]]:
    rid = f"resp_fake_{n}"
    if call is None:
        item: dict[str, Any] = {
            "type": "message",
            "id": f"msg_fake_{n}",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": FINAL_TEXT, "annotations": []}],
        }
    else:
        name, args = call
        item = {
            "type": "function_call",
            "id": f"fc_fake_{n}",
            "call_id": f"call_fake_{n}",
            "name": name,
            "arguments": json.dumps(args),
            "status": "completed",
        }
    usage = {
        "input_tokens": 1,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": 1,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": 2,
    }
    response = {
        "id": rid,
        "object": "response",
        "status": "completed",
        "model": body.get("model", "fake"),
    }
    if not body.get("stream"):
        yield None, {**response, "output": [item], "usage": usage}
        return
    yield (
        "response.created",
        {
            "type": "response.created",
            "response": {**response, "status": "in_progress", "output": []},
        },
    )
    yield (
        "response.output_item.added",
        {"type": "response.output_item.added", "output_index": 0, "item": item},
    )
    yield (
        "response.output_item.done",
        {"type": "response.output_item.done", "output_index": 0, "item": item},
    )
    yield (
        "response.completed",
        {"type": "response.completed", "response": {**response, "output": [item], "usage": usage}},
    )


def _chat_in(body: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    tools = {
        str((t.get("function") or {}).get("name")): (t.get("function") or {}).get("parameters")
        for t in body.get("tools") or []
    }
    results = [
        _text(m.get("content")) for m in body.get("messages") or [] if m.get("role") == "tool"
    ]
    return tools, results


def _chat_out(
    body: dict[str, Any], call: tuple[str, dict[str, Any]] | None, n: int
) -> Iterator[tuple[str | None, dict[str, Any]]]:
    base = {"id": f"chatcmpl-fake-{n}", "created": 0, "model": body.get("model", "fake")}
    usage = {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}
    if call is None:
        message: dict[str, Any] = {"role": "assistant", "content": FINAL_TEXT}
        finish = "stop"
    else:
        name, args = call
        tool_call = {
            "index": 0,
            "id": f"call_fake_{n}",
            "type": "function",
            "function": {"name": name, "arguments": json.dumps(args)},
        }
        message = {"role": "assistant", "content": None, "tool_calls": [tool_call]}
        finish = "tool_calls"
    if not body.get("stream"):
        msg = dict(message)
        if "tool_calls" in msg:
            msg["tool_calls"] = [
                {k: v for k, v in c.items() if k != "index"} for c in msg["tool_calls"]
            ]
        yield (
            None,
            {
                **base,
                "object": "chat.completion",
                "choices": [{"index": 0, "message": msg, "finish_reason": finish}],
                "usage": usage,
            },
        )
        return
    chunk = {**base, "object": "chat.completion.chunk"}
    yield None, {**chunk, "choices": [{"index": 0, "delta": message, "finish_reason": None}]}
    yield (
        None,
        {**chunk, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}], "usage": usage},
    )


def _gemini_in(body: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    tools: dict[str, Any] = {}
    for t in body.get("tools") or []:
        for d in t.get("functionDeclarations") or []:
            tools[d.get("name")] = d.get("parametersJsonSchema") or d.get("parameters")
    results = [
        _text(part["functionResponse"].get("response"))
        for c in body.get("contents") or []
        for part in c.get("parts") or []
        if isinstance(part, dict) and "functionResponse" in part
    ]
    return tools, results


def _gemini_out(
    body: dict[str, Any], call: tuple[str, dict[str, Any]] | None, n: int
) -> Iterator[tuple[str | None, dict[str, Any]]]:
    config = body.get("generationConfig") or {}
    if call is not None:
        name, args = call
        part: dict[str, Any] = {"functionCall": {"name": name, "args": args}}
    elif config.get("responseMimeType") == "application/json":
        part = {"text": json.dumps({"reasoning": "The turn is over.", "next_speaker": "user"})}
    else:
        part = {"text": FINAL_TEXT}
    yield (
        None,
        {
            "candidates": [
                {"content": {"role": "model", "parts": [part]}, "finishReason": "STOP", "index": 0}
            ],
            "usageMetadata": {
                "promptTokenCount": 1,
                "candidatesTokenCount": 1,
                "totalTokenCount": 2,
            },
            "modelVersion": "fake",
        },
    )


APIS = {
    "anthropic": (_anthropic_in, _anthropic_out),
    "responses": (_responses_in, _responses_out),
    "chat": (_chat_in, _chat_out),
    "gemini": (_gemini_in, _gemini_out),
}


def api_of(path: str) -> str | None:
    path = path.split("?", 1)[0]
    if path.endswith("/messages"):
        return "anthropic"
    if path.endswith("/responses"):
        return "responses"
    if path.endswith("/chat/completions"):
        return "chat"
    if re.search(r":(stream)?[gG]enerateContent$", path):
        return "gemini"
    return None


class _Handler(BaseHTTPRequestHandler):
    server: FakeModel
    protocol_version = "HTTP/1.0"  # every answer ends with its connection: SSE needs no framing

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _json(self, status: int, doc: Any) -> None:
        data = json.dumps(doc).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        if self.path.rstrip("/").endswith("/models"):
            self._json(
                200, {"object": "list", "data": [{"id": "fake", "object": "model"}], "models": []}
            )
        else:
            self._json(404, {"error": {"message": f"no route {self.path}"}})

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        try:
            body = json.loads(self.rfile.read(length) or b"{}")
        except ValueError:
            self._json(400, {"error": {"message": "invalid JSON"}})
            return
        if self.path.split("?", 1)[0].endswith(":countTokens") or self.path.endswith(
            "/count_tokens"
        ):
            self._json(200, {"totalTokens": 1, "input_tokens": 1})
            return
        api = api_of(self.path)
        if api is None or not isinstance(body, dict):
            self._json(404, {"error": {"message": f"no route {self.path}"}})
            return
        parse, reply = APIS[api]
        tools, results = parse(body)
        script = self.server.script
        command = script.next_command(len(results))
        tool = _pick(tools) if command is not None else None
        call = (tool, _schema_args(tools[tool], command)) if tool and command else None
        script.record(
            Seen(api, self.path, [str(t) for t in tools], results, command if call else None)
        )
        n = len(script.seen)
        stream = bool(body.get("stream")) or "streamGenerateContent" in self.path
        events = list(reply(body, call, n))
        if not stream:
            self._json(200, events[0][1])
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.end_headers()
        for name, data in events:
            head = f"event: {name}\n" if name else ""
            self.wfile.write(f"{head}data: {json.dumps(data)}\n\n".encode())
        if api == "chat":
            self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()


class FakeModel(ThreadingHTTPServer):
    """``with FakeModel(["rm -rf victim"]) as model: ... model.url ...``"""

    daemon_threads = True

    def __init__(self, commands: Sequence[str], host: str = "127.0.0.1") -> None:
        self.script = Script(list(commands))
        super().__init__((host, 0), _Handler)
        self._thread = threading.Thread(target=self.serve_forever, name="fake-model", daemon=True)

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host!s}:{port}"

    def __enter__(self) -> FakeModel:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()
        self.server_close()

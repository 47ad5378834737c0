"""``openai``: any OpenAI-compatible chat-completions endpoint with tool calling, over httpx.

Each :meth:`OpenAIDriver.respond` makes one ``POST {base_url}/chat/completions`` with
``model``, ``messages`` (the conversation, mapped below), ``tools`` (one ``function``
per harness tool: its name, description and input JSON Schema) and
``tool_choice: "auto"``. Streaming is not used.

Conversation mapping (see :mod:`ahp_harness.models` for the conventions):

* ``system`` and ``developer`` -> ``system``; ``user`` -> ``user``; ``assistant`` ->
  ``assistant`` (text); the optional ``system_prompt`` goes first;
* a ``tool`` message answering a known call -> ``{"role": "tool", "tool_call_id",
  "content"}``, and the call is listed in ``tool_calls`` of the assistant message just
  before the run of tool messages (one is inserted if there is none). A call is known
  when this driver proposed it (its exact name and arguments are remembered) or an
  assistant message records it in a ``tool_call`` part;
* a ``tool`` message naming no call, an unknown call, or a call already answered ->
  a ``user`` message ``[tool result for <id>]`` + text, so the request stays valid.

Response mapping: ``choices[0].message``. Text becomes a :class:`Say`; each tool call a
:class:`ToolCall` with the response's call id (``call_<n>`` if absent) and its JSON
arguments parsed. Arguments that are not a JSON object give the input ``{}`` and a
:class:`Say` noting it, so the gate refuses the call and the model sees why. A reply
without tool calls is ``done``. ``finish_reason`` is passed through.

Secrets: the API key is read from the environment variable ``api_key_env`` at
construction (missing: :class:`ValueError`, unless the base URL is loopback, where a
key is optional) and is sent only as ``Authorization: Bearer``; it never appears in a
repr, an error or a log. Errors are :class:`ModelError` with fixed messages (HTTP status,
and the error ``code``/``type`` only when they are short identifiers); response bodies
and exception text are never echoed. The client ignores proxy and ``.netrc`` settings
(``trust_env=False``) and never follows redirects.

Bounds: ``timeout`` seconds per request (wall clock and each network step); responses
over :data:`MAX_RESPONSE_BYTES` are refused.
"""

from __future__ import annotations

import ipaddress
import json
import os
import re
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit

import anyio
import httpx

from ahp_harness.models.base import Reply, Say, Step, ToolCall
from ahp_harness.models.conversation import call_id_of, message_text, tool_calls_of
from ahp_harness.tools import TOOLS

__all__ = [
    "MAX_RESPONSE_BYTES",
    "ModelError",
    "OpenAIDriver",
    "is_loopback_url",
    "to_openai_messages",
    "tool_schemas",
]

#: The largest response body accepted.
MAX_RESPONSE_BYTES = 16 * 1024 * 1024
_ERROR_BODY_BYTES = 64 * 1024
_IDENTIFIER = re.compile(r"[A-Za-z0-9_.\-]{1,64}")


class ModelError(RuntimeError):
    """A model request failed. ``status`` is the HTTP status, when there was one."""

    def __init__(self, message: str, *, status: int | None = None, code: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.code = code


class _Secret:
    """A value that never shows itself in a repr or str."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return "<secret>"

    __str__ = __repr__


def is_loopback_url(url: str) -> bool:
    """Whether ``url``'s host is loopback (``localhost``, ``127.0.0.0/8``, ``::1``)."""
    try:
        host = urlsplit(url).hostname
    except ValueError:
        return False
    if not host:
        return False
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def tool_schemas(tools: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
    """The ``tools`` list for a request: one ``function`` per tool (default: the harness's)."""
    if tools is None:
        tools = TOOLS
    return [
        {
            "type": "function",
            "function": {
                "name": name,
                "description": tool.description,
                "parameters": tool.json_schema(),
            },
        }
        for name, tool in tools.items()
    ]


def to_openai_messages(
    conversation: Sequence[Mapping[str, Any]],
    known_calls: Mapping[str, tuple[str, str]] | None = None,
    system_prompt: str | None = None,
) -> list[dict[str, Any]]:
    """Map canonical messages to chat-completions messages (see the module docstring).

    ``known_calls`` maps call ids to ``(function name, arguments JSON text)``.
    """
    calls: dict[str, tuple[str, str]] = {}
    for message in conversation:
        for call in tool_calls_of(message):
            calls.setdefault(call.id, (call.tool, json.dumps(dict(call.input))))
    calls.update(known_calls or {})

    out: list[dict[str, Any]] = []
    if system_prompt:
        out.append({"role": "system", "content": system_prompt})
    anchor: dict[str, Any] | None = None  # the assistant message a tool run attaches to
    answered: set[str] = set()
    for message in conversation:
        role = message.get("role")
        text = message_text(message)
        if role == "tool":
            cid = call_id_of(message)
            known = calls.get(cid) if cid is not None else None
            if cid is None or known is None or cid in answered:
                label = f"[tool result for {cid}]" if cid else "[tool result]"
                out.append({"role": "user", "content": f"{label}\n{text}"})
                anchor = None
                continue
            if anchor is None:
                anchor = {"role": "assistant", "content": None}
                out.append(anchor)
            name, arguments = known
            anchor.setdefault("tool_calls", []).append(
                {"id": cid, "type": "function", "function": {"name": name, "arguments": arguments}}
            )
            answered.add(cid)
            out.append({"role": "tool", "tool_call_id": cid, "content": text})
        elif role == "assistant":
            anchor = {"role": "assistant", "content": text or None}
            out.append(anchor)
        elif role in ("system", "developer", "user"):
            out.append({"role": "user" if role == "user" else "system", "content": text})
            anchor = None
    # An assistant message with neither text nor calls is not a valid request message.
    return [m for m in out if m["role"] != "assistant" or m["content"] or m.get("tool_calls")]


def _identifier(value: object) -> str | None:
    return value if isinstance(value, str) and _IDENTIFIER.fullmatch(value) else None


def _error_code(body: bytes) -> str | None:
    try:
        data = json.loads(body)
    except ValueError:
        return None
    error = data.get("error") if isinstance(data, dict) else None
    if not isinstance(error, dict):
        return None
    return _identifier(error.get("code")) or _identifier(error.get("type"))


def _arguments(arguments: object) -> tuple[dict[str, Any] | None, str]:
    """A call's input and its arguments text; ``None`` when they are not a JSON object."""
    if isinstance(arguments, dict):  # some servers send an object, not JSON text
        return arguments, json.dumps(arguments)
    if arguments is None or (isinstance(arguments, str) and not arguments.strip()):
        return {}, "{}"
    if not isinstance(arguments, str):
        return None, ""
    try:
        parsed = json.loads(arguments)
    except ValueError:
        return None, ""
    return (parsed, arguments) if isinstance(parsed, dict) else (None, "")


def _content_text(content: object) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # some servers answer with content parts
        return "".join(
            part["text"]
            for part in content
            if isinstance(part, dict) and isinstance(part.get("text"), str)
        )
    return ""


class OpenAIDriver:
    """A chat-completions model with tool calling. One instance per session."""

    provider = "openai"

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key_env: str = "OPENAI_API_KEY",
        system_prompt: str | None = None,
        timeout: float = 60,
        *,
        tools: Mapping[str, Any] | None = None,
    ) -> None:
        try:
            parts = urlsplit(base_url)
            has_credentials = parts.username is not None or parts.password is not None
            host = parts.hostname
        except ValueError:
            raise ValueError("openai driver: the base URL is not a valid URL") from None
        if parts.scheme not in ("http", "https") or not host:
            raise ValueError("openai driver: the base URL must be an http or https URL")
        if has_credentials:
            raise ValueError("openai driver: the base URL must not contain credentials")
        if parts.query or parts.fragment:
            raise ValueError("openai driver: the base URL must not have a query or fragment")
        if not isinstance(model, str) or not model:
            raise ValueError("openai driver: the model must be a non-empty string")
        if not isinstance(api_key_env, str) or not api_key_env:
            raise ValueError("openai driver: api_key_env must name an environment variable")
        try:
            seconds = float(timeout)
        except (TypeError, ValueError):
            raise ValueError("openai driver: timeout must be a number of seconds") from None
        if not seconds > 0:
            raise ValueError("openai driver: timeout must be positive")
        key = os.environ.get(api_key_env, "").strip()
        if not key and not is_loopback_url(base_url):
            raise ValueError(
                f"openai driver: environment variable {api_key_env} is not set "
                f"(an API key is required for {host})"
            )
        self.base_url = base_url.rstrip("/")
        self.model_id = model
        self.api_key_env = api_key_env
        self.system_prompt = system_prompt
        self.timeout = seconds
        self._key = _Secret(key) if key else None
        self._tools = tool_schemas(tools)
        self._calls: dict[str, tuple[str, str]] = {}
        self._round = 0
        self._client = httpx.AsyncClient(
            trust_env=False, follow_redirects=False, timeout=httpx.Timeout(self.timeout)
        )

    def offer_tools(self, tools: Mapping[str, Any]) -> None:
        """Offer ``tools`` too (the MCP servers' tools, known once the session connects)."""
        self._tools += tool_schemas(tools)

    def request_body(self, conversation: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        """The JSON body :meth:`respond` would send for ``conversation``."""
        body: dict[str, Any] = {
            "model": self.model_id,
            "messages": to_openai_messages(conversation, self._calls, self.system_prompt),
        }
        if self._tools:
            body["tools"] = self._tools
            body["tool_choice"] = "auto"
        return body

    async def respond(self, conversation: Sequence[Mapping[str, Any]]) -> Reply:
        body = self.request_body(conversation)
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self._key is not None:
            headers["Authorization"] = f"Bearer {self._key.reveal()}"
        try:
            with anyio.fail_after(self.timeout):
                status, data = await self._post(body, headers)
        except TimeoutError:
            raise ModelError(f"model request timed out after {self.timeout:g}s") from None
        except httpx.TimeoutException:
            raise ModelError(f"model request timed out after {self.timeout:g}s") from None
        except httpx.HTTPError as exc:
            raise ModelError(f"could not reach the model endpoint ({type(exc).__name__})") from None
        if status >= 400:
            code = _error_code(data)
            raise ModelError(
                f"model endpoint answered HTTP {status}" + (f" ({code})" if code else ""),
                status=status,
                code=code,
            )
        if status >= 300:
            raise ModelError(
                f"model endpoint answered HTTP {status} (redirects are not followed)",
                status=status,
            )
        return self._reply(data)

    async def _post(self, body: dict[str, Any], headers: dict[str, str]) -> tuple[int, bytes]:
        url = f"{self.base_url}/chat/completions"
        payload = json.dumps(body, ensure_ascii=False).encode("utf-8")
        async with self._client.stream("POST", url, content=payload, headers=headers) as resp:
            cap = _ERROR_BODY_BYTES if resp.status_code >= 300 else MAX_RESPONSE_BYTES
            received = bytearray()
            async for chunk in resp.aiter_bytes():
                received += chunk
                if len(received) > cap:
                    if resp.status_code >= 300:
                        break
                    raise ModelError(
                        f"model response is larger than {MAX_RESPONSE_BYTES} bytes",
                        status=resp.status_code,
                    )
            return resp.status_code, bytes(received[:cap])

    def _reply(self, raw: bytes) -> Reply:
        try:
            data = json.loads(raw)
        except ValueError:
            raise ModelError("model response is not valid JSON") from None
        choices = data.get("choices") if isinstance(data, dict) else None
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            raise ModelError("model response has no choices")
        choice = choices[0]
        message = choice.get("message")
        if not isinstance(message, dict):
            raise ModelError("model response choice has no message")
        self._round += 1
        steps: list[Step] = []
        text = _content_text(message.get("content"))
        if text:
            steps.append(Say(text))
        raw_calls = message.get("tool_calls") or []
        if not isinstance(raw_calls, list):
            raise ModelError("model response tool_calls is not a list")
        calls = 0
        for index, raw_call in enumerate(raw_calls, start=1):
            function = raw_call.get("function") if isinstance(raw_call, dict) else None
            name = function.get("name") if isinstance(function, dict) else None
            if not isinstance(name, str) or not name:
                raise ModelError(f"model response tool call {index} has no function name")
            assert isinstance(function, dict)
            cid = raw_call.get("id")
            if not isinstance(cid, str) or not cid:
                cid = f"call_{self._round}_{index}"
            inp, text_args = _arguments(function.get("arguments"))
            if inp is None:
                steps.append(
                    Say(
                        f"(the model sent arguments for {name} call {cid} that are not a "
                        "JSON object; the call goes ahead with an empty input)"
                    )
                )
                inp, text_args = {}, "{}"
            self._calls[cid] = (name, text_args)
            steps.append(ToolCall(tool=name, input=inp, id=cid))
            calls += 1
        reason = choice.get("finish_reason")
        finish = (
            reason if isinstance(reason, str) and reason else ("tool_calls" if calls else "stop")
        )
        return Reply(steps=tuple(steps), done=calls == 0, finish_reason=finish)

    async def aclose(self) -> None:
        await self._client.aclose()

    def __repr__(self) -> str:
        key = "set" if self._key is not None else "none"
        return (
            f"<OpenAIDriver model={self.model_id!r} base_url={self.base_url!r} "
            f"api_key_env={self.api_key_env!r} key={key}>"
        )

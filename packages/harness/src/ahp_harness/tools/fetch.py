"""``fetch`` (kind ``fetch``, input ``{"url"}``): one HTTP GET with httpx.

Only ``http``/``https`` URLs without credentials (``user:pass@``) pass input
validation; at run time :meth:`Sandbox.check_url` also requires the host to be one
the permissions allow (host names are compared as written; DNS is not consulted).
Redirects are never followed: a 3xx is outcome ``error`` (``redirect``) naming the
target (scheme, host and path only), so a hop to a host that is not allowed cannot
happen. The client ignores proxy and ``.netrc`` settings from the environment.

Bounds: ``Limits.fetch_timeout_s`` for each network step and as a wall clock for the
whole call (outcome ``timeout``); the body is streamed and cut at
``Limits.fetch_cap_bytes`` (a ``[truncated]`` note says so); ``Accept-Encoding:
identity`` is requested. Text is decoded with the declared charset (UTF-8 otherwise).
A binary body (a NUL byte in the first 8 KiB), such as an image, is an attachment by
the rule ``read_file`` follows (:func:`~ahp_harness.tools.base.attached`): whole and
at most ``Limits.read_cap_bytes``, its media type the declared ``Content-Type``
unless that is text or JSON (then a guess from the URL path, else
``application/octet-stream``); a larger one is refused (``too_large``). An HTTP
status of 400 or more is outcome ``error`` (``http_status``) with the body as output
(a binary body as a note, never attached).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar
from urllib.parse import urljoin, urlsplit

import anyio
from pydantic import BaseModel, Field, field_validator

from ahp_harness.tools.base import (
    INPUT_CONFIG,
    Text,
    Tool,
    ToolResult,
    attached,
    failure,
    is_binary,
    media_type,
)

if TYPE_CHECKING:
    from ahp_harness.sandbox import Sandbox

__all__ = ["FetchInput", "FetchTool"]


class FetchInput(BaseModel):
    model_config = INPUT_CONFIG

    url: Text = Field(description="An http or https URL on a host the permissions allow.")

    @field_validator("url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        try:
            parts = urlsplit(value)
            host = parts.hostname
            has_credentials = parts.username is not None or parts.password is not None
        except ValueError:
            raise ValueError("not a valid URL") from None
        if parts.scheme not in ("http", "https"):
            raise ValueError("scheme must be http or https")
        if not host:
            raise ValueError("URL has no host")
        if has_credentials:
            raise ValueError("credentials in the URL are not allowed")
        return value


def _safe_location(base: str, location: str) -> str:
    """The redirect target without credentials, query or fragment."""
    try:
        parts = urlsplit(urljoin(base, location))
        host = parts.hostname or "?"
        port = f":{parts.port}" if parts.port else ""
    except ValueError:
        return "an invalid URL"
    return f"{parts.scheme}://{host}{port}{parts.path}"


def _decode(body: bytes, charset: str | None) -> str:
    try:
        return body.decode(charset or "utf-8", errors="replace")
    except LookupError:
        return body.decode("utf-8", errors="replace")


class FetchTool(Tool):
    name: ClassVar[str] = "fetch"
    kind: ClassVar[str] = "fetch"
    input_model: ClassVar[type[BaseModel]] = FetchInput
    description: ClassVar[str] = (
        "HTTP GET a URL on an allowed host; returns the response text (size-capped; "
        "a binary response, such as an image, is attached)."
    )

    def main_argument(self, inp: BaseModel) -> str:
        return self._typed(inp, FetchInput).url

    async def _run(self, inp: BaseModel, sandbox: Sandbox) -> ToolResult:
        # Imported on the first fetch: a session that never fetches (or whose hooks are all
        # stdio) starts about 90 ms sooner.
        import httpx

        url = self._typed(inp, FetchInput).url
        host = sandbox.check_url(url)
        limits = sandbox.limits
        cap = limits.fetch_cap_bytes
        timeout_note = f"fetch from {host} timed out after {limits.fetch_timeout_s:g}s"
        status = 0
        charset: str | None = None
        declared: str | None = None
        body = bytearray()
        truncated = False
        try:
            with anyio.move_on_after(limits.fetch_timeout_s) as scope:
                async with (
                    httpx.AsyncClient(
                        follow_redirects=False,
                        trust_env=False,
                        timeout=httpx.Timeout(limits.fetch_timeout_s),
                    ) as client,
                    client.stream("GET", url, headers={"Accept-Encoding": "identity"}) as response,
                ):
                    status = response.status_code
                    if response.is_redirect:
                        target = _safe_location(url, response.headers.get("location", ""))
                        return failure(
                            "redirect",
                            f"HTTP {status}: redirect to {target} not followed; "
                            "fetch that URL directly if its host is allowed",
                        )
                    async for chunk in response.aiter_bytes():
                        room = cap - len(body)
                        if len(chunk) > room:
                            body += chunk[:room]
                            truncated = True
                            break
                        body += chunk
                    charset = response.charset_encoding
                    declared = response.headers.get("content-type")
        except httpx.TimeoutException:
            return failure("timeout", timeout_note, outcome="timeout")
        except httpx.HTTPError as exc:
            return failure("network", f"could not fetch from {host} ({type(exc).__name__})")
        if scope.cancelled_caught:
            return failure("timeout", timeout_note, outcome="timeout")

        data = bytes(body)
        if is_binary(data):
            if status >= 400:
                note = f"[binary body, {len(data)} bytes: not shown]"
                return failure("http_status", f"HTTP {status} from {host}", note)
            media = media_type(urlsplit(url).path, declared)
            what = f"the response from {host}"
            return attached(what, data, media, whole=not truncated, cap=limits.read_cap_bytes)
        text = _decode(data, charset)
        if truncated:
            text += f"\n[truncated: response is capped at {cap} bytes]"
        if status >= 400:
            return failure("http_status", f"HTTP {status} from {host}", text)
        return ToolResult(outcome="ok", output=text)

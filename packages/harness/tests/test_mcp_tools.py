"""MCP servers' tools as harness tools: a real stdio MCP server process (the SDK's
``MCPServer``, ``tests/e2e/mcp_servers/recording_server.py``) connected with
:func:`open_mcp`; the input checked against ``inputSchema``; bounded calls and start-up;
the result as text (in memory)."""

from __future__ import annotations

import base64
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from ahp_harness.mcp_config import McpServerConfig
from ahp_harness.mcp_tools import (
    McpConnectError,
    McpInput,
    open_mcp,
    result_content,
    result_text,
)
from ahp_harness.models.openai import OpenAIDriver
from ahp_harness.sandbox import Sandbox
from ahp_harness.tools.base import ToolInputError

pytestmark = pytest.mark.anyio

SERVER = (
    Path(__file__).resolve().parents[3] / "tests" / "e2e" / "mcp_servers" / "recording_server.py"
)


def server(record: Path, *, timeout_ms: int = 20000) -> McpServerConfig:
    args = (str(SERVER), "--record", str(record), "--name", "rec")
    return McpServerConfig(
        id="rec", transport="stdio", command=sys.executable, args=args, timeout_ms=timeout_ms
    )


def calls(record: Path) -> list[str]:
    lines = [json.loads(line) for line in record.read_text("utf-8").splitlines() if line]
    return [line["tool"] for line in lines if "tool" in line]


async def test_a_server_s_tools_are_harness_tools_checked_bounded_and_closed(
    tmp_path: Path,
) -> None:
    record = tmp_path / "calls.jsonl"
    sandbox = Sandbox([tmp_path])
    try:
        async with open_mcp([server(record, timeout_ms=1500)], cwd=str(tmp_path)) as mcp:
            assert sorted(mcp.tools) == [
                "mcp__rec__add",
                "mcp__rec__crash",
                "mcp__rec__delete_file",
                "mcp__rec__echo",
                "mcp__rec__fail",
                "mcp__rec__nap",
                "mcp__rec__picture",
                "mcp__rec__refuse",
            ]
            assert mcp.notes == []
            echo = mcp.tools["mcp__rec__echo"]
            assert (echo.name, echo.kind, echo.description) == (
                "mcp__rec__echo",
                "mcp",
                "Say the text back.",
            )
            assert echo.identity["server"] == {"id": "rec", "name": "rec"}
            assert echo.identity["toolName"] == "echo"
            assert echo.identity["provenance"] == "runtime"
            assert echo.identity["connection"]["cwd"] == str(tmp_path)
            assert echo.json_schema()["required"] == ["text"]

            # a driver that lists tools to its model lists these too
            driver = OpenAIDriver("http://127.0.0.1:9/v1", "m")
            try:
                driver.offer_tools(mcp.tools)
                listed = {
                    t["function"]["name"]: t["function"] for t in driver.request_body([])["tools"]
                }
            finally:
                await driver.aclose()
            assert "shell" in listed
            assert listed["mcp__rec__echo"]["parameters"] == echo.json_schema()
            assert listed["mcp__rec__echo"]["description"] == "Say the text back."

            # the input is checked against inputSchema; nothing invalid is sent
            with pytest.raises(ToolInputError, match=r"^\$: 'text' is a required property"):
                echo.parse_input({})
            with pytest.raises(ToolInputError, match=r"^\$.text: must be of type string"):
                echo.parse_input({"text": 3})
            with pytest.raises(ToolInputError, match=r"^input: must be a JSON object"):
                echo.parse_input(["x"])
            add = mcp.tools["mcp__rec__add"]
            with pytest.raises(ToolInputError, match=r"\(and 1 more problem\)"):
                add.parse_input({"a": "1", "b": "2"})
            parsed = echo.parse_input({"text": "hi"})
            assert isinstance(parsed, McpInput) and echo.main_argument(parsed) == '{"text":"hi"}'

            result = await echo.run(parsed, sandbox)
            assert (result.outcome, result.output) == ("ok", "echo: hi")
            assert json.loads(
                (await add.run(add.parse_input({"a": 2, "b": 3}), sandbox)).output
            ) == {"sum": 5}

            # an image is an attachment: its bytes and media type, a note in the text
            picture = mcp.tools["mcp__rec__picture"]
            image = await picture.run(picture.parse_input({}), sandbox)
            assert image.outcome == "ok"
            assert image.output == "[image content (image/png, 11 bytes): attached]"
            (attached,) = image.attachments
            assert (attached.data, attached.media_type) == (b"\x89PNG\r\n\x1a\nahp", "image/png")

            # an isError result is a failed run, with the tool's own words
            fail = mcp.tools["mcp__rec__fail"]
            failed = await fail.run(fail.parse_input({}), sandbox)
            assert (failed.outcome, failed.error_class) == ("error", "mcp_tool_error")
            assert "the tool failed on purpose" in failed.output
            assert failed.error == f"the MCP tool reported an error: {failed.output}"

            # a JSON-RPC error is mcp_error (its code, never its message); the server stays
            # usable for the next call
            refuse = mcp.tools["mcp__rec__refuse"]
            refused = await refuse.run(refuse.parse_input({}), sandbox)
            assert (refused.outcome, refused.error_class) == ("error", "mcp_error")
            assert refused.error == "MCP server rec refused the call (JSON-RPC error -32042)"
            assert "SECRET-IN-MESSAGE" not in f"{refused.error} {refused.output}"
            again = await echo.run(echo.parse_input({"text": "again"}), sandbox)
            assert (again.outcome, again.output) == ("ok", "echo: again")

            # a call is bounded by the server's timeout
            nap = mcp.tools["mcp__rec__nap"]
            started = time.monotonic()
            slow = await nap.run(nap.parse_input({"seconds": 3}), sandbox)
            assert slow.outcome == "timeout" and slow.error_class == "timeout"
            assert slow.error == "MCP server rec did not answer within 1.5s"
            assert time.monotonic() - started < 5
            closed_at = time.monotonic()
        assert time.monotonic() - closed_at < 12  # closing kills the napping server
    finally:
        sandbox.close()
    assert calls(record) == ["echo", "add", "picture", "fail", "refuse", "echo", "nap"]
    pid = json.loads(record.read_text("utf-8").splitlines()[0])["pid"]
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


@pytest.fixture
def http_server(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """The recording server over streamable HTTP on ``127.0.0.1:0``: its URL and record."""
    record, log = tmp_path / "web-calls.jsonl", tmp_path / "web.log"
    argv = [sys.executable, str(SERVER), "--transport", "http", "--record", str(record)]
    with log.open("wb") as err:
        proc = subprocess.Popen(
            [*argv, "--name", "web"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=err,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + 30
        while "listening on " not in log.read_text("utf-8", "replace"):
            assert proc.poll() is None, log.read_text("utf-8", "replace")
            assert time.monotonic() < deadline, "the HTTP MCP server printed no address"
            time.sleep(0.02)
        url = log.read_text("utf-8").split("listening on ", 1)[1].split()[0]
        yield url, record
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)


async def test_an_http_server_s_errors_timeouts_and_death_are_bounded_and_the_session_goes_on(
    tmp_path: Path, http_server: tuple[str, Path]
) -> None:
    url, web_record = http_server
    web = McpServerConfig(id="web", transport="http", url=url, timeout_ms=1000)
    stdio_record = tmp_path / "calls.jsonl"
    sandbox = Sandbox([tmp_path])
    try:
        async with open_mcp([web, server(stdio_record)], cwd=str(tmp_path)) as mcp:
            echo, local = mcp.tools["mcp__web__echo"], mcp.tools["mcp__rec__echo"]

            async def call(name: str, value: dict[str, Any]) -> tuple[Any, float]:
                tool = mcp.tools[name]
                started = time.monotonic()
                result = await tool.run(tool.parse_input(value), sandbox)
                return result, time.monotonic() - started

            # a JSON-RPC error over HTTP: mcp_error, and the server answers the next call
            refused, _ = await call("mcp__web__refuse", {})
            assert (refused.outcome, refused.error_class) == ("error", "mcp_error")
            assert refused.error == "MCP server web refused the call (JSON-RPC error -32042)"

            # a call longer than the server's timeout ends at the bound; the next one runs
            slow, took = await call("mcp__web__nap", {"seconds": 4})
            assert (slow.outcome, slow.error_class) == ("timeout", "timeout")
            assert slow.error == "MCP server web did not answer within 1s"
            assert took < 3, took
            after, _ = await call("mcp__web__echo", {"text": "after the nap"})
            assert (after.outcome, after.output) == ("ok", "echo: after the nap")

            # the server process dies mid-call: a clear error at once, then "not connected"
            crashed, took = await call("mcp__web__crash", {})
            assert (crashed.outcome, crashed.error_class) == ("error", "mcp_connection")
            assert crashed.error is not None and crashed.error.startswith("MCP server web ")
            assert took < 3, took
            gone, took = await call("mcp__web__echo", {"text": "after the crash"})
            assert gone.error == "MCP server web is not connected (the connection was lost)"
            assert took < 1, took
            assert echo.identity["connection"] == {"transport": "http", "url": url}

            # the session goes on: the other server answers, and closing is bounded
            still = await local.run(local.parse_input({"text": "still here"}), sandbox)
            assert (still.outcome, still.output) == ("ok", "echo: still here")
            closed_at = time.monotonic()
        assert time.monotonic() - closed_at < 5
    finally:
        sandbox.close()
    assert calls(web_record) == ["refuse", "nap", "echo", "crash"]
    assert calls(stdio_record) == ["echo"]


async def test_a_server_that_never_answers_is_a_bounded_start_up_error(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    code = f"import os, time; open({str(pid_file)!r}, 'w').write(str(os.getpid())); time.sleep(60)"
    silent = McpServerConfig(
        id="mute", transport="stdio", command=sys.executable, args=("-c", code)
    )
    started = time.monotonic()
    with pytest.raises(McpConnectError) as caught:
        async with open_mcp([silent], cwd=str(tmp_path), startup_timeout_s=1.0):
            pytest.fail("opened")  # pragma: no cover
    assert str(caught.value) == "$.mcpServers.mute: did not start and list its tools within 1s"
    assert time.monotonic() - started < 12
    # Under load the server may be ended before it wrote its pid: look for its command
    # line (which names the pid file) among the live processes instead.
    assert not _running_with(str(pid_file))


def _running_with(text: str) -> list[str]:
    """Live processes whose command line contains ``text`` (Linux ``/proc``)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes().decode("utf-8", "replace")
                status = (entry / "stat").read_text()
            except OSError:
                continue
            if text in cmdline and ") Z " not in status:  # a zombie is not running
                found.append(entry.name)
    return found


async def test_a_command_that_does_not_exist_is_a_clear_error(tmp_path: Path) -> None:
    gone = McpServerConfig(id="gone", transport="stdio", command=str(tmp_path / "no-such-server"))
    with pytest.raises(
        McpConnectError, match=r"^\$.mcpServers.gone: could not connect \(the command"
    ):
        async with open_mcp([gone], cwd=str(tmp_path)):
            pytest.fail("opened")  # pragma: no cover


async def test_an_error_in_the_body_is_raised_as_it_is(tmp_path: Path) -> None:
    with pytest.raises(KeyError):
        async with open_mcp([server(tmp_path / "c.jsonl")], cwd=str(tmp_path)):
            raise KeyError("x")


@pytest.mark.parametrize(
    ("result", "text"),
    [
        ({"content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}, "a\nb"),
        ({"content": [], "structuredContent": {"b": 1, "a": [2]}}, '{"a": [2], "b": 1}'),
        (
            {"content": [{"type": "text", "text": '{"a": 1}'}], "structuredContent": {"a": 1}},
            '{"a": 1}',
        ),
        (
            {"content": [{"type": "image", "data": "AAAA", "mimeType": "image/png"}]},
            "[image content (image/png, about 3 bytes): not shown]",
        ),
        (
            {"content": [{"type": "audio", "data": "AAAAAAAA", "mimeType": "audio/wav"}]},
            "[audio content (audio/wav, about 6 bytes): not shown]",
        ),
        (
            {"content": [{"type": "resource", "resource": {"uri": "file:///a", "text": "body"}}]},
            "body",
        ),
        (
            {"content": [{"type": "resource", "resource": {"uri": "file:///a", "blob": "AAAA"}}]},
            "[resource content (unknown type, about 3 bytes): not shown]",
        ),
        (
            {"content": [{"type": "resource_link", "uri": "https://u:p@h/x", "name": "x"}]},
            "[resource link x: not fetched]",
        ),
        ({"content": [{"type": "hologram"}]}, "[content of an unknown type: not shown]"),
    ],
)
def test_a_result_becomes_text(result: dict[str, Any], text: str) -> None:
    assert result_text(result) == text


def test_binary_content_is_attached_when_it_can_be_and_noted_when_not() -> None:
    png = base64.b64encode(b"\x89PNG-bytes").decode()
    result = {
        "content": [
            {"type": "image", "data": png, "mimeType": "image/png"},
            {"type": "audio", "data": "not base64!", "mimeType": "audio/wav"},
            {"type": "resource", "resource": {"uri": "x", "blob": png, "mimeType": "text/plain"}},
            {"type": "resource", "resource": {"uri": "y", "blob": png}},
            {
                "type": "image",
                "data": base64.b64encode(b"x" * 40).decode(),
                "mimeType": "image/gif",
            },
        ]
    }
    text, attachments = result_content(result, max_attachment_bytes=20)
    assert [(a.data, a.media_type) for a in attachments] == [(b"\x89PNG-bytes", "image/png")]
    assert text.splitlines() == [
        "[image content (image/png, 10 bytes): attached]",
        "[audio content (audio/wav, about 8 bytes): not shown]",
        "[resource content (text/plain, about 12 bytes): not shown]",  # text is never attached
        "[resource content (unknown type, about 12 bytes): not shown]",
        "[image content (image/gif, about 42 bytes): not shown]",  # larger than the cap
    ]

"""The three model drivers: scripted files, the manual REPL, and the OpenAI-compatible client.

The REPL is driven through prompt-toolkit's pipe input; the OpenAI driver talks real
HTTP to the fake chat-completions server in ``fake_openai.py`` on 127.0.0.1.
"""

from __future__ import annotations

import io
import json
import socket
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from ahp_harness.models import (
    RESULT_ID_PREFIX,
    TOOL_CALL_CATEGORY,
    Reply,
    Say,
    ToolCall,
    call_id_of,
    load_driver,
    message_text,
    result_message_id,
    tool_call_part_text,
    tool_calls_of,
)
from ahp_harness.models.manual import COMMANDS, ManualDriver, help_text, parse_line
from ahp_harness.models.openai import (
    ModelError,
    OpenAIDriver,
    is_loopback_url,
    to_openai_messages,
)
from ahp_harness.models.scripted import ScriptedDriver, ScriptError, parse_script
from ahp_harness.tools import TOOLS
from prompt_toolkit.completion import CompleteEvent
from prompt_toolkit.document import Document
from prompt_toolkit.input import create_pipe_input
from prompt_toolkit.output import DummyOutput
from prompt_toolkit.output.plain_text import PlainTextOutput

sys.path.insert(0, str(Path(__file__).parent))

from fake_openai import FakeOpenAI, text_response, tool_call_response

REPO = Path(__file__).resolve().parents[3]
SESSIONS = REPO / "examples" / "sessions"
SECRET = "sk-test-SECRET-0123456789"


def part(text: str, **extra: Any) -> dict[str, Any]:
    return {
        "id": f"p{abs(hash(text)) % 10**8}",
        "kind": "text",
        "mediaType": "text/plain",
        "selection": "body",
        "text": text,
        **extra,
    }


def msg(mid: str, role: str, *texts: str, **part_extra: Any) -> dict[str, Any]:
    return {"id": mid, "role": role, "parts": [part(t, **part_extra) for t in texts]}


CONVERSATION = [
    msg("m_sys", "system", "You are a careful agent."),
    msg("m_user", "user", "What files are here?"),
]


# --------------------------------------------------------------------------- conventions


def test_conversation_helpers() -> None:
    result = msg(result_message_id("call_7"), "tool", "out")
    assert result["id"] == RESULT_ID_PREFIX + "call_7"
    assert call_id_of(result) == "call_7"
    assert message_text(result) == "out"
    # The fallback: a leading call_id line names the call and is not content.
    leading = msg("m9", "tool", "call_id: call_8\nline one\nline two")
    assert call_id_of(leading) == "call_8"
    assert message_text(leading) == "line one\nline two"
    assert call_id_of(msg("m10", "tool", "no id here")) is None
    assert call_id_of(msg("result_x", "user", "not a tool message")) is None
    # Withheld parts carry no text.
    withheld = {"id": "m", "role": "user", "parts": [{"id": "p", "selection": "omit"}]}
    assert message_text(withheld) == ""
    # tool_call parts round-trip and are not text.
    call = ToolCall("shell", {"command": "ls"}, id="call_1")
    assistant = {
        "id": "a1",
        "role": "assistant",
        "parts": [part("Listing."), part(tool_call_part_text(call), category=TOOL_CALL_CATEGORY)],
    }
    assert tool_calls_of(assistant) == [call]
    assert message_text(assistant) == "Listing."


# --------------------------------------------------------------------------- scripted


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ({"steps": []}, 'script: must be a JSON list of steps, or an object {"turns": [...]}'),
        ({"turns": []}, 'script: "turns" must be a non-empty list'),
        ({"turns": ["x"]}, 'turn 1: must be an object with "steps" (and "prompt")'),
        ({"turns": [{"steps": [], "mood": 1}]}, "turn 1: unknown key(s) 'mood'"),
        ({"turns": [{"prompt": 3, "steps": []}]}, 'turn 1: "prompt" must be a string'),
        ({"turns": [{"prompt": "a"}]}, 'turn 1: "steps" must be a list of steps'),
        (
            {"turns": [{"steps": [{"say": "a"}]}, {"steps": [{"say": "b"}, {"say": 2}]}]},
            'step 3 (turn 2): "say" must be a string',
        ),
        ([{"say": "hi"}, "ls"], 'step 2: must be an object with "tool" and "input", or "say"'),
        ([{"say": "a", "tool": "shell"}], 'step 1: has both "say" and "tool"; use exactly one'),
        ([{"say": 3}], 'step 1: "say" must be a string'),
        ([{"say": "a", "mood": "x"}], "step 1: unknown key(s) 'mood' (\"say\" step)"),
        ([{"tool": "", "input": {}}], 'step 1: "tool" must be a non-empty string'),
        ([{"tool": 5, "input": {}}], 'step 1: "tool" must be a non-empty string'),
        ([{"tool": "shell"}], 'step 1: "input" is required with "tool"'),
        (
            [{"say": "a"}, {"say": "b"}, {"tool": "shell", "input": "ls"}],
            'step 3: "input" must be an object',
        ),
        (
            [{"tool": "shell", "input": {}, "id": "x"}],
            "step 1: unknown key(s) 'id' (\"tool\" step)",
        ),
        ([{}], 'step 1: needs "tool" (with "input") or "say"'),
    ],
)
def test_script_rules(data: object, expected: str) -> None:
    with pytest.raises(ScriptError) as caught:
        parse_script(data)
    assert str(caught.value) == expected


def test_script_file_errors(tmp_path: Path) -> None:
    with pytest.raises(ScriptError, match=r"no such file"):
        ScriptedDriver.from_file(tmp_path / "absent.json")
    with pytest.raises(ScriptError, match=r"is a folder"):
        ScriptedDriver.from_file(tmp_path)
    bad_json = tmp_path / "bad.json"
    bad_json.write_text('[\n  {"say": "hi"},\n  oops\n]\n')
    with pytest.raises(ScriptError, match=r"invalid JSON at line 3, column 3"):
        ScriptedDriver.from_file(bad_json)
    not_utf8 = tmp_path / "latin.json"
    not_utf8.write_bytes(b'[{"say": "caf\xe9"}]')
    with pytest.raises(ScriptError, match=r"not UTF-8"):
        ScriptedDriver.from_file(not_utf8)
    broken = tmp_path / "broken.json"
    broken.write_text(json.dumps([{"tool": "shell", "input": {"command": "ls"}}, {"say": 1}]))
    with pytest.raises(ScriptError) as caught:
        ScriptedDriver.from_file(broken)
    assert str(caught.value) == f'script {broken}: step 2: "say" must be a string'


@pytest.mark.anyio
async def test_script_plays_in_order(tmp_path: Path) -> None:
    steps = [
        {"say": "Looking."},
        {"tool": "read_file", "input": {"path": "README.md"}},
        {"tool": "shell", "input": {"command": "ls"}},
        {"say": "Done."},
    ]
    path = tmp_path / "s.json"
    path.write_text(json.dumps(steps))

    async def play() -> list[Reply]:
        driver = load_driver(f"script:{path}")
        replies = [await driver.respond(CONVERSATION) for _ in range(6)]
        await driver.aclose()
        return replies

    replies = await play()
    assert replies[:4] == [
        Reply(steps=(Say("Looking."),), done=False, finish_reason="stop"),
        Reply(
            steps=(ToolCall("read_file", {"path": "README.md"}, id="call_2"),),
            done=False,
            finish_reason="tool_calls",
        ),
        Reply(
            steps=(ToolCall("shell", {"command": "ls"}, id="call_3"),),
            done=False,
            finish_reason="tool_calls",
        ),
        Reply(steps=(Say("Done."),), done=False, finish_reason="stop"),
    ]
    assert replies[4] == replies[5] == Reply(done=True)
    # Deterministic: a second driver over the same file plays the same replies.
    assert await play() == replies


def test_example_sessions_are_valid() -> None:
    files = sorted(SESSIONS.glob("*.json"))
    assert {f.name for f in files} >= {"basic.json"}
    for file in files:
        driver = ScriptedDriver.from_file(file)
        calls = [s for s in driver.steps if isinstance(s, ToolCall)]
        assert calls, file.name
        for call in calls:
            assert call.tool in TOOLS, (file.name, call.tool)
            TOOLS[call.tool].parse_input(call.input)  # raises if the input is invalid
    basic = ScriptedDriver.from_file(SESSIONS / "basic.json").steps
    commands = [s.input.get("command") for s in basic if isinstance(s, ToolCall)]
    assert "ls" in commands and "rm -rf build" in commands
    tools = {s.tool for s in basic if isinstance(s, ToolCall)}
    assert {"read_file", "write_file", "shell"} <= tools


@pytest.mark.parametrize(
    ("spec", "options", "expected"),
    [
        ("", {}, "empty model spec"),
        ("gpt", {}, "unknown model spec 'gpt'"),
        ("script", {}, "needs a file"),
        ("script:", {}, "needs a file"),
        ("manual:x", {}, "takes no argument"),
        ("manual", {"colour": "red"}, "unknown option(s) colour"),
        ("openai", {"base_url": "http://127.0.0.1:1/v1"}, "needs a model"),
        ("openai:", {}, "needs a model name"),
        ("openai:a", {"model": "b"}, "given twice"),
        ("script:x.json", {"model": "m"}, "unknown option(s) model"),
    ],
)
def test_load_driver_rejects(spec: str, options: dict[str, Any], expected: str) -> None:
    with pytest.raises(ValueError) as caught:
        load_driver(spec, **options)
    assert expected in str(caught.value)


@pytest.mark.anyio
async def test_load_driver_builds_each_kind(tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    path.write_text("[]")
    scripted = load_driver(f"script:{path}")
    assert isinstance(scripted, ScriptedDriver)
    assert (scripted.provider, scripted.model_id) == ("script", "script:s.json")
    with create_pipe_input() as inp:
        manual = load_driver("manual", input=inp, output=DummyOutput(), history_file=None)
        assert isinstance(manual, ManualDriver)
    openai = load_driver("openai:some-model", base_url="http://127.0.0.1:9/v1", timeout=None)
    assert isinstance(openai, OpenAIDriver)
    assert (openai.provider, openai.model_id, openai.timeout) == ("openai", "some-model", 60.0)
    await openai.aclose()


# --------------------------------------------------------------------------- manual


@pytest.mark.parametrize(
    ("line", "step"),
    [
        ("/shell ls -la | wc -l", ToolCall("shell", {"command": "ls -la | wc -l"})),
        ("  /SHELL   echo 'hi there'  ", ToolCall("shell", {"command": "echo 'hi there'"})),
        ("/read README.md", ToolCall("read_file", {"path": "README.md"})),
        ('/read "my notes.txt"', ToolCall("read_file", {"path": "my notes.txt"})),
        (
            "/write out.txt line one\\nline two",
            ToolCall("write_file", {"path": "out.txt", "content": "line one\nline two"}),
        ),
        ('/write "a b.txt"', ToolCall("write_file", {"path": "a b.txt", "content": ""})),
        (
            "/edit f.py 'old text' \"new\\ttext\"",
            ToolCall("edit_file", {"path": "f.py", "old": "old text", "new": "new\ttext"}),
        ),
        ("/search 'def \\w+'", ToolCall("search", {"pattern": "def \\w+"})),
        ("/search TODO src", ToolCall("search", {"pattern": "TODO", "path": "src"})),
        ("/fetch http://127.0.0.1/x", ToolCall("fetch", {"url": "http://127.0.0.1/x"})),
        ("/say All done.\\nBye", Say("All done.\nBye")),
    ],
)
def test_parse_line_steps(line: str, step: object) -> None:
    assert parse_line(line) == step


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("/shell", "/shell: usage: /shell CMD..."),
        ("/read", "/read: usage: /read PATH"),
        ("/read a b", "/read: usage: /read PATH"),
        ("/edit f.py old", "/edit: usage: /edit PATH OLD NEW"),
        ("/edit f.py 'old new", "/edit: unbalanced quotes; usage: /edit PATH OLD NEW"),
        ("/search", "/search: usage: /search PATTERN [PATH]"),
        ("/fetch", "/fetch: usage: /fetch URL"),
        ("/say", "/say: usage: /say TEXT..."),
        ("/shel ls", "Unknown command /shel. Did you mean /shell? /help lists commands."),
        ("/frobnicate", "Unknown command /frobnicate. /help lists commands."),
        ("hello", "Commands start with '/'. Answer with /say TEXT; /help lists commands."),
    ],
)
def test_parse_line_problems(line: str, expected: str) -> None:
    shown = parse_line(line)
    assert getattr(shown, "text", None) == expected


def test_help_lists_every_command_and_tool() -> None:
    text = help_text()
    for command in COMMANDS.values():
        assert command.usage in text
        if command.tool is not None:
            assert TOOLS[command.tool].description in text
            assert f"[{command.tool}]" in text


@pytest.fixture
def pipe() -> Iterator[Any]:
    with create_pipe_input() as inp:
        yield inp


@pytest.mark.anyio
async def test_repl_turn(pipe: Any) -> None:
    screen = io.StringIO()
    driver = ManualDriver(input=pipe, output=PlainTextOutput(screen))
    pipe.send_text("/bogus\n/read\n/shell ls -la\n")
    first = await driver.respond(CONVERSATION)
    assert first == Reply(
        steps=(ToolCall("shell", {"command": "ls -la"}, id="call_m1"),),
        done=False,
        finish_reason="tool_calls",
    )
    shown = screen.getvalue().replace("\r\n", "\n")
    assert "[user]" in shown and "What files are here?" in shown
    assert "You are a careful agent." not in shown  # system messages are not repeated
    assert "Unknown command /bogus." in shown
    assert "/read: usage: /read PATH" in shown
    assert driver.quit_requested is False

    # The tool result is shown before the next prompt, once; then /help, then an answer.
    conversation = [*CONVERSATION, msg(result_message_id("call_m1"), "tool", "a.txt\nb.txt")]
    pipe.send_text("/help\n/say Two files.\n")
    before = len(screen.getvalue())
    second = await driver.respond(conversation)
    assert second == Reply(steps=(Say("Two files."),), done=True)
    shown = screen.getvalue()[before:].replace("\r\n", "\n")
    assert "[result of call_m1 (shell)]" in shown and "a.txt\nb.txt" in shown
    assert "What files are here?" not in shown  # already shown
    assert help_text().splitlines()[1] in shown

    assert list(driver.history.load_history_strings())[:2] == ["/say Two files.", "/help"]


@pytest.mark.anyio
async def test_repl_ctrl_d_and_ctrl_c(pipe: Any) -> None:
    screen = io.StringIO()
    driver = ManualDriver(input=pipe, output=PlainTextOutput(screen))
    pipe.send_text("\x03")  # Ctrl-C: a hint, then the prompt again
    pipe.send_text("\x04")  # Ctrl-D on an empty line: the turn ends, and the session
    reply = await driver.respond(CONVERSATION)
    assert reply == Reply(done=True, end_session=True)
    assert driver.quit_requested is True
    assert "(Ctrl-C: /quit or Ctrl-D ends the session" in screen.getvalue()


@pytest.mark.anyio
async def test_repl_quit_and_dummy_output(pipe: Any) -> None:
    driver = ManualDriver(input=pipe, output=DummyOutput())
    pipe.send_text("/edit a.txt x y\n/quit\n")
    assert (await driver.respond(CONVERSATION)).steps == (
        ToolCall("edit_file", {"path": "a.txt", "old": "x", "new": "y"}, id="call_m1"),
    )
    assert await driver.respond(CONVERSATION) == Reply(done=True, end_session=True)
    assert driver.quit_requested is True


@pytest.mark.anyio
async def test_repl_end_of_input(pipe: Any) -> None:
    driver = ManualDriver(input=pipe, output=DummyOutput())
    pipe.close()
    assert await driver.respond(CONVERSATION) == Reply(done=True, end_session=True)
    assert driver.quit_requested is True


def test_repl_completion_and_file_history(tmp_path: Path) -> None:
    with create_pipe_input() as inp:
        driver = ManualDriver(input=inp, output=DummyOutput(), history_file=tmp_path / "history")
    words = {c.text for c in driver.completer.get_completions(Document("/s"), CompleteEvent())}
    assert {"/shell", "/search", "/say"} <= words
    assert "/read" not in words
    assert {c.text for c in driver.completer.get_completions(Document("/sh"), CompleteEvent())} == {
        "/shell"
    }
    assert not list(driver.completer.get_completions(Document("/shell ls "), CompleteEvent()))
    (tmp_path / "notes.txt").write_text("x")
    doc = Document(f"/read {tmp_path}/no")
    paths = {c.text for c in driver.completer.get_completions(doc, CompleteEvent())}
    assert "tes.txt" in paths
    driver.history.append_string("/shell ls")
    assert "/shell ls" in (tmp_path / "history").read_text()


# --------------------------------------------------------------------------- openai


@pytest.fixture
def fake() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as server:
        yield server


@pytest.fixture
def secret_env(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("FAKE_OPENAI_KEY", SECRET)
    return "FAKE_OPENAI_KEY"


@pytest.mark.anyio
async def test_openai_two_rounds(fake: FakeOpenAI, secret_env: str) -> None:
    arguments = '{"command":  "ls -la"}'  # sent back verbatim in the next request
    fake.answer(tool_call_response(("call_abc", "shell", arguments), content="Looking."))
    fake.answer(text_response("Two files: a.txt and b.txt."))
    driver = OpenAIDriver(fake.base_url, "fake-model", api_key_env=secret_env)
    try:
        first = await driver.respond(CONVERSATION)
        assert first == Reply(
            steps=(Say("Looking."), ToolCall("shell", {"command": "ls -la"}, id="call_abc")),
            done=False,
            finish_reason="tool_calls",
        )
        conversation = [
            *CONVERSATION,
            msg("m_a1", "assistant", "Looking."),
            msg(result_message_id("call_abc"), "tool", "a.txt\nb.txt"),
        ]
        second = await driver.respond(conversation)
        assert second == Reply(
            steps=(Say("Two files: a.txt and b.txt."),), done=True, finish_reason="stop"
        )
    finally:
        await driver.aclose()

    one, two = fake.requests
    assert one.path == two.path == "/v1/chat/completions"
    assert one.body["model"] == "fake-model"
    assert one.body["tool_choice"] == "auto"
    functions = {t["function"]["name"]: t["function"] for t in one.body["tools"]}
    assert set(functions) == set(TOOLS)
    for name, function in functions.items():
        assert function["description"] == TOOLS[name].description
        assert function["parameters"]["type"] == "object"
    assert functions["shell"]["parameters"]["required"] == ["command"]
    assert one.body["messages"] == [
        {"role": "system", "content": "You are a careful agent."},
        {"role": "user", "content": "What files are here?"},
    ]
    assert two.body["messages"][2:] == [
        {
            "role": "assistant",
            "content": "Looking.",
            "tool_calls": [
                {
                    "id": "call_abc",
                    "type": "function",
                    "function": {"name": "shell", "arguments": arguments},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_abc", "content": "a.txt\nb.txt"},
    ]


@pytest.mark.anyio
async def test_openai_api_key_only_in_authorization(fake: FakeOpenAI, secret_env: str) -> None:
    fake.answer(text_response("ok"))
    fake.answer(
        {"error": {"message": f"Incorrect API key {SECRET}", "code": "invalid_api_key"}}, status=401
    )
    driver = OpenAIDriver(fake.base_url, "fake-model", api_key_env=secret_env)
    assert SECRET not in repr(driver) and SECRET not in str(vars(driver))
    try:
        await driver.respond(CONVERSATION)
        with pytest.raises(ModelError) as caught:
            await driver.respond(CONVERSATION)
    finally:
        await driver.aclose()
    error = caught.value
    assert (error.status, error.code) == (401, "invalid_api_key")
    assert str(error) == "model endpoint answered HTTP 401 (invalid_api_key)"
    assert SECRET not in repr(error) and error.__cause__ is None
    for request in fake.requests:
        assert request.headers["Authorization"] == f"Bearer {SECRET}"
        others = {k: v for k, v in request.headers.items() if k != "Authorization"}
        assert SECRET not in json.dumps(others)
        assert SECRET.encode() not in request.raw
        assert SECRET not in request.path


@pytest.mark.anyio
async def test_openai_http_500(fake: FakeOpenAI, secret_env: str) -> None:
    fake.answer({"error": {"message": "boom: internal details"}}, status=500)
    driver = OpenAIDriver(fake.base_url, "fake-model", api_key_env=secret_env)
    try:
        with pytest.raises(ModelError) as caught:
            await driver.respond(CONVERSATION)
    finally:
        await driver.aclose()
    assert caught.value.status == 500
    assert str(caught.value) == "model endpoint answered HTTP 500"


@pytest.mark.anyio
async def test_openai_bad_responses(fake: FakeOpenAI) -> None:
    fake.answer(b"<html>not json</html>")
    fake.answer({"choices": []})
    fake.answer({"choices": [{"message": {"tool_calls": [{"id": "c", "function": {}}]}}]})
    driver = OpenAIDriver(fake.base_url, "fake-model", api_key_env="AHP_TEST_UNSET_KEY_VAR")
    try:
        for expected in (
            "model response is not valid JSON",
            "model response has no choices",
            "model response tool call 1 has no function name",
        ):
            with pytest.raises(ModelError) as caught:
                await driver.respond(CONVERSATION)
            assert str(caught.value) == expected
    finally:
        await driver.aclose()
    # Loopback without a key: no Authorization header at all.
    assert all("Authorization" not in r.headers for r in fake.requests)


@pytest.mark.anyio
async def test_openai_invalid_arguments(fake: FakeOpenAI) -> None:
    fake.answer(
        tool_call_response(
            ("call_1", "read_file", "{not json"),
            ("call_2", "shell", "[1, 2]"),
            ("call_3", "read_file", {"path": "a.txt"}),
        )
    )
    fake.answer(text_response("ok"))
    driver = OpenAIDriver(fake.base_url, "fake-model", api_key_env="AHP_TEST_UNSET_KEY_VAR")
    try:
        reply = await driver.respond(CONVERSATION)
        conversation = [
            *CONVERSATION,
            msg(result_message_id("call_1"), "tool", "error 1"),
            msg(result_message_id("call_2"), "tool", "error 2"),
        ]
        await driver.respond(conversation)
    finally:
        await driver.aclose()
    notes = [s for s in reply.steps if isinstance(s, Say)]
    calls = [s for s in reply.steps if isinstance(s, ToolCall)]
    assert [c.input for c in calls] == [{}, {}, {"path": "a.txt"}]
    assert [c.id for c in calls] == ["call_1", "call_2", "call_3"]
    assert len(notes) == 2 and "read_file call call_1" in notes[0].text
    assert reply.done is False
    # No assistant message in the conversation: one is inserted to carry the calls,
    # and the invalid arguments go back as "{}".
    inserted = fake.requests[1].body["messages"][2]
    assert inserted["role"] == "assistant" and inserted["content"] is None
    assert [c["function"]["arguments"] for c in inserted["tool_calls"]] == ["{}", "{}"]


@pytest.mark.anyio
async def test_openai_timeout_and_unreachable(fake: FakeOpenAI) -> None:
    gate = threading.Event()
    fake.answer(text_response("late"), gate=gate)
    driver = OpenAIDriver(fake.base_url, "m", api_key_env="AHP_TEST_UNSET_KEY_VAR", timeout=0.3)
    try:
        with pytest.raises(ModelError, match=r"^model request timed out after 0.3s$"):
            await driver.respond(CONVERSATION)
    finally:
        gate.set()
        await driver.aclose()

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    driver = OpenAIDriver(f"http://127.0.0.1:{port}/v1", "m", api_key_env="AHP_TEST_UNSET")
    try:
        with pytest.raises(ModelError, match=r"^could not reach the model endpoint \(\w+\)$"):
            await driver.respond(CONVERSATION)
    finally:
        await driver.aclose()


def test_openai_construction_rules(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AHP_TEST_UNSET_KEY_VAR", raising=False)
    with pytest.raises(ValueError) as caught:
        OpenAIDriver("https://api.example.com/v1", "m", api_key_env="AHP_TEST_UNSET_KEY_VAR")
    assert str(caught.value) == (
        "openai driver: environment variable AHP_TEST_UNSET_KEY_VAR is not set "
        "(an API key is required for api.example.com)"
    )
    with pytest.raises(ValueError) as caught:
        OpenAIDriver("https://user:hunter2@api.example.com/v1", "m")
    assert "credentials" in str(caught.value) and "hunter2" not in str(caught.value)
    with pytest.raises(ValueError, match="query or fragment"):
        OpenAIDriver("http://127.0.0.1/v1?key=abc", "m")
    with pytest.raises(ValueError, match="http or https"):
        OpenAIDriver("ftp://127.0.0.1/v1", "m")
    with pytest.raises(ValueError, match="timeout must be positive"):
        OpenAIDriver("http://127.0.0.1/v1", "m", timeout=0)
    with pytest.raises(ValueError, match="timeout must be a number"):
        OpenAIDriver("http://127.0.0.1/v1", "m", timeout="soon")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="model must be"):
        OpenAIDriver("http://127.0.0.1/v1", "")
    assert is_loopback_url("http://localhost:8/v1") and is_loopback_url("http://[::1]:8/")
    assert is_loopback_url("http://127.9.9.9/") and not is_loopback_url("http://10.0.0.1/")


def test_openai_message_mapping() -> None:
    call = ToolCall("read_file", {"path": "a.txt"}, id="call_p")
    conversation = [
        msg("s", "system", "sys"),
        msg("d", "developer", "dev note"),
        msg("u", "user", "hi"),
        {  # an assistant message that records its call in a tool_call part
            "id": "a",
            "role": "assistant",
            "parts": [part(tool_call_part_text(call), category=TOOL_CALL_CATEGORY)],
        },
        msg(result_message_id("call_p"), "tool", "contents"),
        msg(result_message_id("call_p"), "tool", "answered twice"),
        msg("t", "tool", "call_id: call_unknown\nstray"),
        msg("t2", "tool", "no id"),
        msg("a2", "assistant", ""),  # empty: dropped
        msg("a3", "assistant", "Done."),
    ]
    mapped = to_openai_messages(conversation, system_prompt="be brief")
    assert mapped == [
        {"role": "system", "content": "be brief"},
        {"role": "system", "content": "sys"},
        {"role": "system", "content": "dev note"},
        {"role": "user", "content": "hi"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_p",
                    "type": "function",
                    "function": {"name": "read_file", "arguments": '{"path": "a.txt"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_p", "content": "contents"},
        {"role": "user", "content": "[tool result for call_p]\nanswered twice"},
        {"role": "user", "content": "[tool result for call_unknown]\nstray"},
        {"role": "user", "content": "[tool result]\nno id"},
        {"role": "assistant", "content": "Done."},
    ]

"""A session of many turns, as a recording backend and a model endpoint see it.

- ``ahp-harness run`` (a subprocess, run from a new empty folder) with a script of two
  turns: ``session.start``, then each turn's ``turn.start`` ... ``turn.end`` with its own
  turn id carried by every event of the turn, then ``session.end`` (no turn id, with
  counters); the folder it ran from is still empty afterwards;
- each ``--prompt`` is one turn of the same session;
- the openai driver keeps the conversation across turns: the second turn's request
  holds the first turn's prompt, tool call, tool result and answer (fake endpoint on
  loopback);
- the manual driver: ``/say`` ends the turn and the session goes on; ``/quit`` ends
  it; the ``you>`` prompt reader ends on ``/quit``;
- the public session API (:func:`ahp_harness.harness.open_harness`) refuses a bad
  workspace before anything starts.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from ahp_harness.harness import ConfigError, open_harness
from ahp_harness.models.manual import ManualDriver
from ahp_harness.models.scripted import ScriptedDriver
from ahp_harness.ui import TerminalPrompts
from prompt_toolkit.input import create_pipe_input
from prompt_toolkit.output import DummyOutput

sys.path.insert(0, str(Path(__file__).parent))

from fake_openai import FakeOpenAI, text_response, tool_call_response

if TYPE_CHECKING:  # the helpers live in this folder's conftest.py (fixture ``kit``)
    from conftest import HarnessKit

_SCRIPT = Path(sys.executable).parent / "ahp-harness"
COMMAND = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "ahp_harness.cli"]
RECORDER = "com.example.recorder"
TWO_TURNS = {
    "turns": [
        {"prompt": "read the readme", "steps": [{"tool": "read_file", "input": {"path": "R"}}]},
        {
            "prompt": "now list the files",
            "steps": [{"tool": "shell", "input": {"command": "ls"}}, {"say": "Two files."}],
        },
    ]
}


def ahp_harness(*args: str, cwd: Path, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(
        [*COMMAND, *args],
        cwd=cwd,
        env={**os.environ, "COLUMNS": "400", "NO_COLOR": "1", "TERM": "dumb", **(env or {})},
        capture_output=True,
        text=True,
        timeout=50,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
    return done.stdout


def observed(kit: HarnessKit) -> list[dict[str, Any]]:
    return [m["params"]["event"] for m in kit.recorded(RECORDER) if m["method"] == "hooks/observe"]


def turns_of(events: Sequence[dict[str, Any]]) -> list[str]:
    return [e["turn"]["id"] for e in events if e["type"] == "turn.start"]


def recorder_registration(kit: HarnessKit) -> Path:
    return kit.registration_file([kit.scripted(RECORDER, [], intercept=(), observe=["*"])])


def play_script(kit: HarnessKit, steps: Any, *extra: str, cwd: Path) -> str:
    """``ahp-harness run`` of the script ``steps``, non-interactively, the recorder observing."""
    script = kit.root / "script.json"
    script.write_text(json.dumps(steps))
    registration = str(recorder_registration(kit))
    return ahp_harness(
        *("run", "--workspace", str(kit.workspace), "--registration", registration),
        *("--model", f"script:{script}", "--non-interactive", *extra),
        cwd=cwd,
    )


def test_a_script_of_two_turns_is_one_session_of_two_turns(kit: HarnessKit) -> None:
    (kit.workspace / "R").write_text("hello\n")
    (kit.workspace / "other").write_text("x\n")
    cwd = kit.root / "empty"
    cwd.mkdir()
    out = play_script(kit, TWO_TURNS, "--approve", "always", cwd=cwd)
    assert "session over: 2 tool calls, 0 refused, 2 turns" in out
    assert "records: none kept" in out
    assert list(cwd.iterdir()) == []  # nothing written where it ran

    events = observed(kit)
    types = [e["type"] for e in events]
    assert types[0] == "session.start" and types[-1] == "session.end"
    assert types.count("session.start") == types.count("session.end") == 1
    assert types.count("turn.start") == types.count("turn.end") == 2
    first, second = turns_of(events)
    assert first != second
    for event in events:
        if event["type"].startswith("session."):
            assert "turn" not in event, event["type"]
    # Every event of a turn carries its id, from turn.start to turn.end.
    current = None
    for event in events[1:-1]:
        if event["type"] == "turn.start":
            current = event["turn"]["id"]
        assert event["turn"]["id"] == current, event["type"]
        if event["type"] == "turn.end":
            current = None
    prompts = [e["items"][0]["parts"][0]["text"] for e in events if e["type"] == "turn.start"]
    assert prompts == ["read the readme", "now list the files"]
    calls = {e["call"]["id"]: e["turn"]["id"] for e in events if e["type"] == "tool.before"}
    assert calls == {"call_1": first, "call_2": second}
    assert events[-1]["counters"] == {"turns": 2, "modelRequests": 5, "toolCalls": 2}


def test_each_prompt_is_a_turn_of_the_same_session(kit: HarnessKit) -> None:
    prompts = ("--prompt", "first request", "--prompt", "second request")
    out = play_script(kit, [{"say": "hello"}], *prompts, cwd=kit.root)
    assert "3 turns" not in out and "2 turns" in out
    events = observed(kit)
    starts = [e for e in events if e["type"] == "turn.start"]
    assert [e["items"][0]["parts"][0]["text"] for e in starts] == [
        "first request",
        "second request",
    ]
    assert len({e["session"]["id"] for e in events}) == 1
    assert [e["type"] for e in events].count("session.start") == 1


def test_the_openai_driver_keeps_the_conversation_across_turns(kit: HarnessKit) -> None:
    (kit.workspace / "a.txt").write_text("A\n")
    with FakeOpenAI() as fake:
        fake.answer(tool_call_response(("call_x", "read_file", {"path": "a.txt"})))
        fake.answer(text_response("It says A."))
        fake.answer(text_response("You asked me to read a.txt."))
        ahp_harness(
            "run",
            "--workspace",
            str(kit.workspace),
            "--model",
            "openai",
            "--base-url",
            fake.base_url,
            "--model-name",
            "fake-model",
            "--non-interactive",
            "--prompt",
            "read a.txt",
            "--prompt",
            "what did I ask?",
            cwd=kit.root,
        )
        requests = fake.requests
    assert len(requests) == 3
    first_turn = requests[1].body["messages"]  # after the tool result
    last = requests[2].body["messages"]
    assert last[: len(first_turn)] == first_turn  # the whole first turn, as sent before
    assert last[len(first_turn) :] == [
        {"role": "assistant", "content": "It says A."},
        {"role": "user", "content": "what did I ask?"},
    ]
    assert {"role": "user", "content": "read a.txt"} in first_turn
    assert {"role": "tool", "tool_call_id": "call_x", "content": "A\n"} in first_turn


@pytest.mark.anyio
async def test_say_ends_the_turn_and_quit_ends_the_session(kit: HarnessKit) -> None:
    (kit.workspace / "README.md").write_text("hello\n")
    registration = recorder_registration(kit)
    with create_pipe_input() as pipe:
        driver = ManualDriver(input=pipe, output=DummyOutput())
        async with open_harness(
            kit.workspace, driver=driver, registration=registration, interactive=True
        ) as harness:
            pipe.send_text("/read README.md\n/say It says hello.\n")
            first = await harness.turn("what is in the readme?")
            assert (first.said, first.end_session) == (["It says hello."], False)
            assert harness.session.is_open  # /say ended the turn, not the session
            pipe.send_text("/quit\n")
            second = await harness.turn("thanks")
            assert second.end_session and harness.summary.end_requested
    events = observed(kit)
    types = [e["type"] for e in events]
    assert types.count("turn.start") == types.count("turn.end") == 2
    assert types.count("session.end") == 1 and types[-1] == "session.end"
    assert [c.tool for c in harness.summary.calls] == ["read_file"]
    assert events[-1]["outcome"] == "completed"


@pytest.mark.anyio
async def test_the_prompt_reader_ends_the_session_on_quit() -> None:
    with create_pipe_input() as pipe:
        reader = TerminalPrompts(input=pipe, output=DummyOutput())
        pipe.send_text("  first  \n\n/quit\n")
        assert await reader.read() == "first"
        assert await reader.read() is None


@pytest.mark.anyio
async def test_open_harness_refuses_a_bad_workspace_before_anything_starts(
    kit: HarnessKit,
) -> None:
    driver = ScriptedDriver([])
    with pytest.raises(ConfigError) as caught:
        async with open_harness(kit.root / "missing", driver=driver):
            pytest.fail("the session must not open")
    assert caught.value.option == "workspace"
    assert str(caught.value).endswith("missing: not a directory")

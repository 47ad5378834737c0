"""Qwen Code: what its codec adds to Claude's, and how its hooks are installed.

- ``install qwen-code`` writes Claude's hook layout into ``.qwen/settings.json``
  (project) or ``~/.qwen/settings.json`` (user), with the native ``timeout`` in
  **milliseconds** (a Claude-style ``30`` killed the hook after 30 ms, live on
  0.15.10); uninstall gives the file back; the installed command denies through a shell;
- a PostToolUse's ``tool_response.llmContent`` (the text the model saw) is the
  ``tool.after`` output text, never the repr of the ``{llmContent, returnDisplay}``
  object; text parts are joined, anything else stays JSON;
- every tool name Qwen Code 0.15.10 offers the model has its kind;
- the deny is Claude's ``hookSpecificOutput`` form, and only ``deny`` is advertised.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from ahp_adapters import dialects, install
from ahp_adapters.dialects.qwen import QWEN_KINDS, QwenCode, llm_text
from ahp_adapters.events import build_event

FIXTURES = Path(__file__).parent / "fixtures" / "qwen-code"
PRE_LIVE = "pre_tool_use.shell.live-0.15.10"
POST_LIVE = "post_tool_use.shell.live-0.15.10"


def fixture(case: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((FIXTURES / f"{case}.json").read_text())
    return data


def tool_after_text(payload: dict[str, Any]) -> str | None:
    codec = dialects.get("qwen-code")
    event = build_event(codec, codec.parse(payload, options={}), payload)
    assert event["type"] == "tool.after"
    (message,) = event["items"]
    if not message["parts"]:
        return None
    text: str = message["parts"][0]["text"]
    return text


# -- install ---------------------------------------------------------------------------


@pytest.mark.parametrize(("budget", "timeout_ms"), [(10.0, 30_000), (20.0, 45_000)])
def test_install_writes_millisecond_timeouts(
    tmp_path: Path, budget: float, timeout_ms: int
) -> None:
    registration = tmp_path / "registration.json"
    registration.write_text(json.dumps({"protocolVersion": "draft", "hooks": []}))
    project = tmp_path / "project"
    plan = install.plan_install(
        "qwen", str(registration), project=str(project), budget=budget, command=["ahp-adapter"]
    )
    install.write(plan)

    path = project / ".qwen" / "settings.json"
    assert plan.path == path.resolve()
    doc = json.loads(path.read_text())
    groups: dict[str, list[dict[str, Any]]] = doc["hooks"]
    assert set(groups) == {
        "PreToolUse",
        "PostToolUse",
        "SessionStart",
        "SessionEnd",
        "UserPromptSubmit",  # prepares the chain: -p sends no SessionStart
    }
    for event, entries in groups.items():
        (group,) = entries
        assert ("matcher" in group) is (event in ("PreToolUse", "PostToolUse"))
        (handler,) = group["hooks"]
        assert handler["type"] == "command"
        assert handler["timeout"] == timeout_ms  # milliseconds, as Qwen reads it
        assert handler["timeout"] == install.native_timeout("qwen-code", budget)
        argv = shlex.split(handler["command"])
        assert argv[:2] == ["ahp-adapter", "hook"] and argv[2] == "qwen-code"
        assert argv[argv.index("--event") + 1] == event
    assert groups["PreToolUse"][0]["matcher"] == "*"
    # Twice the budget plus 5 s, at least 30 s, in the unit Gemini's ms rule gives.
    assert install.native_timeout("qwen-code", budget) == install.native_timeout("gemini", budget)

    removed = install.plan_uninstall("qwen-code", project=str(project))
    assert removed.removed == 5
    install.write(removed)
    assert json.loads(path.read_text()) == {"hooks": {}}


def test_user_scope_is_home_dot_qwen(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    assert install.config_path("qwen-code", None) == tmp_path / ".qwen" / "settings.json"
    existing = {"security": {"auth": {"selectedType": "openai"}}, "model": {"name": "m"}}
    path = tmp_path / ".qwen" / "settings.json"
    path.parent.mkdir()
    path.write_text(json.dumps(existing, indent=2) + "\n")
    plan = install.plan_install("qwen-cli", str(tmp_path / "r.json"), command=["ahp-adapter"])
    install.write(plan)
    doc = json.loads(path.read_text())
    assert {k: v for k, v in doc.items() if k != "hooks"} == existing
    assert doc["hooks"]["PreToolUse"][0]["hooks"][0]["timeout"] == 30_000
    install.write(install.plan_uninstall("qwen-code"))
    assert json.loads(path.read_text()) == {**existing, "hooks": {}}


def test_the_installed_command_denies_through_a_shell(kit: Any) -> None:
    registration = kit.registration(kit.denylist_stdio("persistent"))
    plan = install.plan_install(
        "qwen-code",
        str(registration),
        config=str(kit.tmp / "settings.json"),
        command=[sys.executable, "-m", "ahp_adapters"],
    )
    command = plan.document["hooks"]["PreToolUse"][0]["hooks"][0]["command"]
    payload = fixture(PRE_LIVE)["payload"]
    payload["tool_input"]["command"] = "rm -rf /"
    hooked = subprocess.run(
        ["/bin/sh", "-c", command + " --daemon off"],
        input=json.dumps(payload),
        capture_output=True,
        env=kit.env,
        cwd=kit.tmp,
        timeout=60,
        text=True,
    )
    assert (hooked.returncode, hooked.stderr) == (0, ""), hooked.stderr
    answer = json.loads(hooked.stdout)["hookSpecificOutput"]
    assert answer["permissionDecision"] == "deny"
    assert "Recursive deletes are not allowed here." in answer["permissionDecisionReason"]


# -- tool.after: llmContent --------------------------------------------------------------


def test_live_llm_content_is_the_output_text() -> None:
    payload = fixture(POST_LIVE)["payload"]
    text = tool_after_text(payload)
    assert text == payload["tool_response"]["llmContent"]
    assert text is not None and text.startswith("Command: echo hi > m\n")
    assert "llmContent" not in text and "returnDisplay" not in text


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("plain", "plain"),
        ({"text": "one part"}, "one part"),
        ([{"text": "first"}, "second", {"text": "third"}], "first\nsecond\nthird"),
        ([], ""),
    ],
)
def test_text_parts_become_text(content: Any, expected: str) -> None:
    payload = fixture(POST_LIVE)["payload"]
    payload["tool_response"] = {"llmContent": content, "returnDisplay": "shown to the user"}
    assert tool_after_text(payload) == expected
    assert llm_text(content) == expected


def test_other_parts_stay_json() -> None:
    image = [{"text": "a picture"}, {"inlineData": {"mimeType": "image/png", "data": "AAAA"}}]
    payload = fixture(POST_LIVE)["payload"]
    payload["tool_response"] = {"llmContent": image, "returnDisplay": ""}
    text = tool_after_text(payload)
    assert text is not None and json.loads(text) == image
    payload["tool_response"] = {"llmContent": None, "returnDisplay": ""}
    assert tool_after_text(payload) is None  # no output: an empty tool message
    # A tool_response of another shape is kept whole, as Claude's codec keeps it.
    payload["tool_response"] = {"stdout": "README.md\n"}
    assert json.loads(tool_after_text(payload) or "") == {"stdout": "README.md\n"}


# -- kinds -------------------------------------------------------------------------------

OFFERED = {
    "agent": "task",
    "edit": "file_edit",
    "glob": "search",
    "grep_search": "search",
    "list_directory": "search",
    "monitor": "shell",  # spawns its `command` argument (an "exec" confirmation)
    "read_file": "file_read",
    "run_shell_command": "shell",
    "send_message": "other",
    "skill": "other",
    "task_stop": "other",
    "todo_write": "other",
    "tool_search": "search",
    "web_fetch": "fetch",
    "write_file": "file_write",
}
"""Every tool Qwen Code 0.15.10 offered the model in the live run, and its kind."""


@pytest.mark.parametrize(("tool", "kind"), sorted(OFFERED.items()))
def test_every_offered_tool_has_its_kind(tool: str, kind: str) -> None:
    payload = {**fixture(PRE_LIVE)["payload"], "tool_name": tool, "tool_input": {}}
    parsed = dialects.get("qwen-code").parse(payload, options={})
    assert parsed.fields["tool"]["kind"] == kind
    assert parsed.fields["tool"]["origin"] == "native" and parsed.fields["path"] == "native"
    assert QWEN_KINDS.get(tool, "other") == kind


def test_mcp_tools_are_mcp() -> None:
    payload = {**fixture(PRE_LIVE)["payload"], "tool_name": "mcp__files__read", "tool_input": {}}
    tool = dialects.get("qwen-code").parse(payload, options={}).fields["tool"]
    assert (tool["kind"], tool["origin"], tool["mcp"]["server"], tool["mcp"]["toolName"]) == (
        "mcp",
        "mcp",
        {"id": "files"},
        "read",
    )


# -- answers -----------------------------------------------------------------------------


def test_deny_is_claudes_form_and_only_deny_is_advertised() -> None:
    codec = dialects.get("qwen-code")
    assert isinstance(codec, QwenCode)
    assert codec.render_deny("no", "PreToolUse") == dialects.get("claude-code").render_deny(
        "no", "PreToolUse"
    )
    assert codec.render_deny("no", None).exit_code == 2  # untold event: exit 2, stderr
    assert codec.capabilities("PreToolUse") == {"effects": ["deny"]}
    assert not codec.carries_modify("PreToolUse")
    assert codec.stderr_ok is False  # Qwen parses stderr when stdout is empty
    assert codec.native_timeout_unit == "ms"


def test_resolve_keeps_qwen() -> None:
    codec = dialects.get("qwen-code")
    payload = fixture(PRE_LIVE)["payload"]
    for extra in ({}, {"hookEventName": "PreToolUse"}, {"cursor_version": "1"}):
        assert codec.resolve({**payload, **extra}) is codec

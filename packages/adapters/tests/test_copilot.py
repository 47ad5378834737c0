"""GitHub Copilot CLI: the ``copilot`` codec, the hook process and ``install copilot``.

- The codec reads both payload variants alike (camelCase ``toolName``/``toolArgs``,
  ``toolArgs`` a JSON string or an object, with or without ``sessionId``;
  PascalCase keys with snake_case fields), synthesizes stable call ids, and
  denies in the JSON form for every event: Copilot skips a non-zero exit, so
  exit 2 would let the call through.
- The hook process, against a real scripted backend (``recorder.py`` over
  stdio), answers byte for byte: the deny with the backend's reason, nothing
  for no effect, the generic deny on a fail-closed failure, nothing on a
  fail-open one; a ``preToolUse`` and its ``postToolUse`` share one call id.
- ``install copilot`` writes our own ``.github/hooks/ahp-adapter.json`` (or
  merges into ``--config FILE``), prints what a deny can and cannot guarantee
  on Copilot (:data:`DENY_LIMITS`), and ``uninstall`` gives back the prior state
  exactly: a file that was not there is gone (with the folders made for it), a
  file that was there has its very bytes again.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from dataclasses import fields
from pathlib import Path
from typing import Any

import pytest
from ahp_adapters import dialects, install
from ahp_adapters.dialects.base import NativeAnswer, PayloadError
from ahp_adapters.dialects.copilot import DENY_LIMITS, QUIRKS
from ahp_adapters.events import build_event

FIXTURES = Path(__file__).parent / "fixtures" / "copilot"
REASON = "Force pushes rewrite shared history."
GENERIC = "Required policy backend unavailable."
UNADVERTISED = "Required policy backend com.example.recorder unavailable (unadvertised_effect)."
CRASHED = "Required policy backend com.example.recorder unavailable (abnormal_exit)."
DENY = [{"type": "deny", "reason": REASON, "code": "com.example.policy.force_push"}]


def deny_bytes(reason: str) -> str:
    """Copilot's blocking answer, spelled out (not built with the codec's own json.dumps)."""
    return '{"permissionDecision": "deny", "permissionDecisionReason": "' + reason + '"}\n'


def fixture(case: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((FIXTURES / f"{case}.json").read_text())
    return data


def parse(payload: dict[str, Any], event: str | None = None) -> dict[str, Any]:
    codec = dialects.get("copilot").resolve(payload)
    parsed = codec.parse(payload, options={"event": event})
    return build_event(codec, parsed, payload)


# -- the codec -------------------------------------------------------------------------


def test_aliases_name_the_copilot_codec() -> None:
    for name in ("copilot", "copilot-cli", "github-copilot"):
        assert dialects.get(name).name == "copilot"
    assert dialects.get("copilot").harness_name == "copilot-cli"


def test_both_variants_and_both_tool_args_forms_read_alike() -> None:
    camel = fixture("pre_tool_use.shell")["payload"]
    as_object = {**camel, "toolArgs": json.loads(camel["toolArgs"])}
    pascal = fixture("pre_tool_use.pascal_shell")["payload"]
    events = [parse(camel, "preToolUse"), parse(as_object, "preToolUse"), parse(pascal)]
    assert [e["tool"] for e in events] == [events[0]["tool"]] * 3
    assert events[0]["tool"]["input"]["command"] == "git push --force origin main"
    assert [e["session"] for e in events] == [{"id": camel["sessionId"], "cwd": camel["cwd"]}] * 3
    assert all(e["call"]["synthesized"] is True for e in events)
    # A string and an object holding the same arguments are the same call.
    assert events[0]["call"] == events[1]["call"]
    assert events[0]["native"]["eventName"] == "preToolUse"
    assert events[2]["native"]["eventName"] == "PreToolUse"


def test_synthesized_ids_differ_for_different_calls() -> None:
    payload = fixture("pre_tool_use.shell")["payload"]
    later = {**payload, "timestamp": payload["timestamp"] + 1}
    other_session = {**payload, "sessionId": "another-session"}
    ids = {parse(p, "preToolUse")["call"]["id"] for p in (payload, later, other_session)}
    assert len(ids) == 3


def test_the_camel_case_event_is_told_from_the_fields_without_event() -> None:
    codec = dialects.get("copilot")
    for case, kind in (
        ("pre_tool_use.shell", "tool.before"),
        ("post_tool_use.shell", "tool.after"),
        ("session_start", "session.start"),
        ("session_end", "session.end"),
    ):
        assert codec.parse(fixture(case)["payload"], options={}).kind == kind
    failure = {**fixture("post_tool_use.shell")["payload"], "error": "exit status 1"}
    del failure["toolResult"]
    assert codec.parse(failure, options={}).native_event == "postToolUseFailure"
    # --event wins over the fields; the payload's own event name wins over --event.
    assert codec.parse(failure, options={"event": "postToolUse"}).native_event == "postToolUse"
    pascal = fixture("pre_tool_use.pascal_shell")["payload"]
    assert codec.parse(pascal, options={"event": "preToolUse"}).native_event == "PreToolUse"


def test_post_tool_use_failure_and_denied_results() -> None:
    base = fixture("post_tool_use.shell")["payload"]
    failure = {k: v for k, v in base.items() if k != "toolResult"} | {"error": "exit status 1"}
    event = parse(failure, "postToolUseFailure")
    assert event["outcome"] == "error" and event["error"]["message"] == "exit status 1"
    denied = {**base, "toolResult": {"resultType": "denied", "textResultForLlm": "Denied."}}
    event = parse(denied, "postToolUse")
    assert event["outcome"] == "denied"
    assert event["execution"] == {"status": "skipped", "reason": "policy"}


def test_missing_tool_args_is_an_empty_input_with_a_gap() -> None:
    payload = {k: v for k, v in fixture("pre_tool_use.shell")["payload"].items() if k != "toolArgs"}
    event = parse(payload, "preToolUse")
    assert event["tool"]["input"] == {}
    assert event["gaps"] == [{"path": "tool.input", "reason": "the payload carries no toolArgs"}]


@pytest.mark.parametrize(
    "change",
    [{"toolArgs": "rm -rf / is not json"}, {"toolArgs": 42}, {"toolName": None}, {"toolName": 7}],
)
def test_malformed_payloads_are_payload_errors(change: dict[str, Any]) -> None:
    payload = {**fixture("pre_tool_use.shell")["payload"], **change}
    payload = {k: v for k, v in payload.items() if v is not None}
    with pytest.raises(PayloadError) as caught:
        dialects.get("copilot").parse(payload, options={"event": "preToolUse"})
    assert "rm" not in str(caught.value)


def test_session_events_need_a_session_id() -> None:
    payload = {k: v for k, v in fixture("session_start")["payload"].items() if k != "sessionId"}
    with pytest.raises(PayloadError):
        dialects.get("copilot").parse(payload, options={"event": "sessionStart"})


def test_mcp_tools_of_configured_servers(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / ".copilot").mkdir()
    servers = {"mcpServers": {"my-db": {"command": "db-mcp"}, "my": {"command": "x"}}}
    (tmp_path / ".copilot" / "mcp-config.json").write_text(json.dumps(servers))
    payload = {**fixture("pre_tool_use.mcp")["payload"], "toolName": "my-db-run_query"}
    tool = parse(payload, "preToolUse")["tool"]
    assert (tool["kind"], tool["mcp"]["server"], tool["mcp"]["toolName"]) == (
        "mcp",
        {"id": "my-db"},  # the longest configured server name wins
        "run_query",
    )
    other = parse({**payload, "toolName": "some-unknown-tool"}, "preToolUse")
    assert (other["tool"]["kind"], other["path"]) == ("other", "native")


def test_vscode_running_our_github_hooks_file_is_answered_as_vscode() -> None:
    payload = {
        "timestamp": "2026-08-24T08:51:14.123Z",
        "cwd": "/home/dev/repo",
        "sessionId": "8c1f0a2b",
        "hookEventName": "PreToolUse",
        "tool_name": "run_in_terminal",
        "tool_input": {"command": "git push --force origin main"},
        "tool_use_id": "call_x7Yp2Qd9",
    }
    codec = dialects.get("copilot").resolve(payload)
    assert codec.name == "vscode"
    assert json.loads(codec.render_deny(REASON, "PreToolUse").stdout)["hookSpecificOutput"] == {
        "hookEventName": "PreToolUse",
        "permissionDecision": "deny",
        "permissionDecisionReason": REASON,
    }


@pytest.mark.parametrize("event", [None, "preToolUse", "PreToolUse", "postToolUse", "other"])
def test_deny_is_the_json_form_for_every_event_never_a_non_zero_exit(event: str | None) -> None:
    answer = dialects.get("copilot").render_deny(REASON, event)
    assert answer == NativeAnswer(stdout=deny_bytes(REASON), stderr="", exit_code=0)


def test_nothing_is_empty_and_only_deny_is_advertised() -> None:
    codec = dialects.get("copilot")
    for event in codec.all_events:
        assert codec.render_nothing(event) == NativeAnswer("", "", 0)
        if codec.is_pre_tool(event):
            assert codec.capabilities(event) == {"effects": ["deny"]}


def test_quirks_and_deny_limits_say_what_holds() -> None:
    assert dialects.get("copilot").quirks is QUIRKS
    for item in fields(QUIRKS):
        value = getattr(QUIRKS, item.name)
        assert isinstance(value, str), item.name
        if item.name not in ("no_effect_stdout", "title"):
            assert value.strip(), f"quirks.{item.name} is empty"
    assert "modifiedArgs" in QUIRKS.modify and "not advertised" in QUIRKS.modify.lower()
    assert "logged and skipped" in QUIRKS.failure_default
    limits = " ".join(DENY_LIMITS)
    for fact in ("1.0.73", '"ask"', "--allow-all-tools", "--yolo", "logged and skipped"):
        assert fact in limits, fact
    assert all("\n" not in line for line in DENY_LIMITS)


# -- the hook process ------------------------------------------------------------------

VARIANTS = [
    "pre_tool_use.shell",  # camelCase, toolArgs a JSON string, sessionId
    "pre_tool_use.no_session",  # camelCase, toolArgs a JSON string, no sessionId
    "pre_tool_use.file_write",  # camelCase, toolArgs an object
    "pre_tool_use.pascal_shell",  # PascalCase, snake_case fields
]
OUTCOMES: list[tuple[str, str, dict[str, Any], str | None]] = [
    ("deny", "fail-open", {"effects": DENY}, REASON),
    ("no-effect", "fail-closed", {"effects": []}, None),
    ("allow-fail-closed", "fail-closed", {"effects": [{"type": "allow"}]}, UNADVERTISED),
    ("failure-fail-closed", "fail-closed", {"crash": True}, CRASHED),
    ("failure-fail-open", "fail-open", {"crash": True}, None),
]


@pytest.mark.parametrize("case", VARIANTS)
@pytest.mark.parametrize(
    ("name", "policy", "step", "reason"), OUTCOMES, ids=[o[0] for o in OUTCOMES]
)
def test_hook_answers_in_copilots_form(
    kit: Any, case: str, name: str, policy: str, step: dict[str, Any], reason: str | None
) -> None:
    data = fixture(case)
    registration = kit.registration(kit.recorder(script=[step], policy=policy))
    done = kit.run_hook("copilot", data["payload"], registration, "--event", data["event"])
    assert done.returncode == 0, done.stderr
    assert done.stdout == ("" if reason is None else deny_bytes(reason))
    assert done.stderr == ""  # Copilot does not say what it does with stderr: none
    assert "allow" not in done.stdout


def test_unreadable_payload_without_event_fails_closed_in_the_json_form(kit: Any) -> None:
    registration = kit.registration(kit.recorder(effects=[], policy="fail-closed"))
    done = kit.run_hook("copilot", b"{not json", registration)
    assert (done.returncode, done.stdout, done.stderr) == (0, deny_bytes(GENERIC), "")
    opened = kit.registration(kit.recorder(effects=[], policy="fail-open"), name="open.json")
    done = kit.run_hook("copilot", b"{not json", opened)
    assert (done.returncode, done.stdout) == (0, "")


def _events(record: Path) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []

    def walk(value: Any) -> None:
        if isinstance(value, dict):
            if value.get("type") in ("tool.before", "tool.after") and "call" in value:
                found.append(value)
                return
            for item in value.values():
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)

    for line in record.read_text().splitlines():
        entry = json.loads(line)
        if entry.get("event") == "message":
            walk(entry["message"])
    return found


def test_pre_and_post_tool_use_share_one_call_id(kit: Any) -> None:
    record = kit.tmp / "record.jsonl"
    subscriptions = [kit.intercept("fail-open"), kit.observe(["tool.after"])]
    registration = kit.registration(
        kit.recorder(effects=[], record=record, subscriptions=subscriptions)
    )
    pre = fixture("pre_tool_use.shell")["payload"]  # toolArgs a JSON string
    post = {
        **pre,
        "timestamp": pre["timestamp"] + 900,
        "toolArgs": json.loads(pre["toolArgs"]),  # ... and an object afterwards
        "toolResult": {"resultType": "success", "textResultForLlm": "Everything up-to-date"},
    }
    for payload, event in ((pre, "preToolUse"), (post, "postToolUse")):
        done = kit.run_hook("copilot", payload, registration, "--event", event)
        assert (done.returncode, done.stdout) == (0, ""), done.stderr
    events = _events(record)
    assert [e["type"] for e in events] == ["tool.before", "tool.after"]
    assert events[0]["call"] == events[1]["call"]
    assert events[0]["call"]["synthesized"] is True


# -- install / uninstall ---------------------------------------------------------------


def run(kit: Any, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ahp_adapters", *args],
        capture_output=True,
        env=kit.env,
        cwd=kit.tmp,
        timeout=60,
        text=True,
    )


def tree(root: Path) -> dict[str, bytes | None]:
    """Every path under ``root`` with its bytes (``None`` for a folder)."""
    out: dict[str, bytes | None] = {}
    for path in sorted(root.rglob("*")):
        out[str(path.relative_to(root))] = None if path.is_dir() else path.read_bytes()
    return out


def notes(stderr: str) -> list[str]:
    return [line.removeprefix("note: ") for line in stderr.splitlines() if line.startswith("note:")]


def test_install_into_a_project_then_uninstall_leaves_no_trace(kit: Any) -> None:
    project = kit.tmp / "project"
    (project / "src").mkdir(parents=True)
    (project / "src" / "app.py").write_text("print('hi')\n")
    before = tree(project)
    registration = kit.registration(kit.denylist_stdio("persistent"))

    for _ in range(2):  # installing twice replaces ours, never duplicates
        done = run(
            kit,
            "install",
            "copilot",
            "--registration",
            str(registration),
            "--project",
            str(project),
            "--trust",  # Copilot loads a project's hooks only in a trusted folder
        )
        assert done.returncode == 0, done.stderr
        printed = notes(done.stderr)
        assert printed[: len(DENY_LIMITS)] == list(DENY_LIMITS)  # the limits, printed at install
        assert "keep it out of the repository" in printed[-1]  # project scope: local paths
    path = project / ".github" / "hooks" / "ahp-adapter.json"
    doc = json.loads(path.read_text())
    assert doc["version"] == 1
    assert list(doc["hooks"]) == ["preToolUse", "postToolUse", "sessionStart", "sessionEnd"]
    for event, entries in doc["hooks"].items():
        assert len(entries) == 1
        entry = entries[0]
        assert set(entry) == {"type", "bash", "timeoutSec"} and entry["type"] == "command"
        assert entry["timeoutSec"] == install.native_timeout("copilot", 10.0) == 30
        assert install.is_ours(entry["bash"])
        argv = shlex.split(entry["bash"])
        assert argv[argv.index("hook") + 1] == "copilot"
        assert argv[argv.index("--event") + 1] == event
        assert argv[argv.index("--registration") + 1] == str(registration.resolve())
        assert argv[argv.index("--budget") + 1] == "10"

    done = run(kit, "uninstall", "copilot", "--project", str(project))
    assert done.returncode == 0, done.stderr
    assert tree(project) == before  # the file and the folders made for it are gone


def test_uninstall_keeps_a_project_github_folder_and_other_hook_files(kit: Any) -> None:
    project = kit.tmp / "project"
    hooks = project / ".github" / "hooks"
    hooks.mkdir(parents=True)
    (hooks / "team.json").write_text('{"version": 1, "hooks": {}}')
    (project / ".github" / "CODEOWNERS").write_text("* @acme\n")
    before = tree(project)
    registration = kit.registration(kit.denylist_stdio("persistent"))
    done = run(
        kit,
        *("install", "copilot", "--registration", str(registration), "--project", str(project)),
        "--trust",
    )
    assert done.returncode == 0, done.stderr
    assert (hooks / "team.json").read_text() == '{"version": 1, "hooks": {}}'
    done = run(kit, "uninstall", "copilot", "--project", str(project))
    assert done.returncode == 0, done.stderr
    assert tree(project) == before


EXISTING = (
    "{\n"
    '    "version": 1,\n'
    '    "hooks": {\n'
    '        "preToolUse": [\n'
    "            {\n"
    '                "type": "command",\n'
    '                "bash": "./scripts/audit.sh",\n'
    '                "powershell": "./scripts/audit.ps1",\n'
    '                "comment": "équipe sécurité",\n'
    '                "timeoutSec": 5\n'
    "            }\n"
    "        ],\n"
    '        "userPromptSubmitted": [\n'
    '            {\n                "type": "command",\n                "bash": "./log.sh"\n'
    "            }\n"
    "        ]\n"
    "    }\n"
    "}\n"
)


def test_install_into_an_existing_file_then_uninstall_gives_back_its_bytes(kit: Any) -> None:
    config = kit.tmp / "project" / ".github" / "hooks" / "team.json"
    config.parent.mkdir(parents=True)
    config.write_text(EXISTING, encoding="utf-8")
    original = json.loads(EXISTING)
    registration = kit.registration(kit.denylist_stdio("persistent"))
    done = run(
        kit, "install", "copilot", "--registration", str(registration), "--config", str(config)
    )
    assert done.returncode == 0, done.stderr
    doc = json.loads(config.read_text(encoding="utf-8"))
    assert doc["hooks"]["preToolUse"][0] == original["hooks"]["preToolUse"][0]  # theirs first
    assert install.is_ours(doc["hooks"]["preToolUse"][1]["bash"])
    assert doc["hooks"]["userPromptSubmitted"] == original["hooks"]["userPromptSubmitted"]
    assert config.read_text(encoding="utf-8").startswith('{\n    "version": 1,')  # its layout
    done = run(kit, "uninstall", "copilot", "--config", str(config))
    assert done.returncode == 0, done.stderr
    assert config.read_bytes() == EXISTING.encode("utf-8")


def test_user_scope_and_an_unknown_layout(kit: Any) -> None:
    registration = kit.registration(kit.denylist_stdio("persistent"))
    copilot_home = kit.tmp / "home" / ".copilot"
    copilot_home.mkdir()
    (copilot_home / "config.json").write_text("{}")
    done = run(kit, "install", "copilot", "--registration", str(registration), "--budget", "20")
    assert done.returncode == 0, done.stderr
    assert notes(done.stderr) == list(DENY_LIMITS)
    path = copilot_home / "hooks" / "ahp-adapter.json"
    entry = json.loads(path.read_text())["hooks"]["preToolUse"][0]
    assert entry["timeoutSec"] == 45  # 2 x budget + 5
    done = run(kit, "uninstall", "copilot")
    assert done.returncode == 0, done.stderr
    assert sorted(os.listdir(copilot_home)) == ["config.json"]  # hooks/ gone, the rest kept
    # A layout json.dumps cannot reproduce comes back as the same document.
    odd = kit.tmp / "odd.json"
    odd.write_text(
        '{ "version" : 1,\n  "hooks": {"sessionEnd": [ {"type":"command","bash":"x"} ]}}'
    )
    for args in (
        ("install", "copilot", "--registration", str(registration)),
        ("uninstall", "copilot"),
    ):
        done = run(kit, *args, "--config", str(odd))
        assert done.returncode == 0, done.stderr
    assert json.loads(odd.read_text()) == {
        "version": 1,
        "hooks": {"sessionEnd": [{"type": "command", "bash": "x"}]},
    }


@pytest.mark.parametrize("case", ["pre_tool_use.shell", "pre_tool_use.pascal_shell"])
def test_the_installed_command_denies_through_a_shell(kit: Any, case: str) -> None:
    """Run what Copilot would run (its ``bash`` command) with a payload the deny-list refuses."""
    registration = kit.registration(kit.denylist_stdio("persistent"))
    done = run(
        kit,
        "install",
        "copilot",
        "--registration",
        str(registration),
        "--print",
        "--command",
        f"{sys.executable} -m ahp_adapters",
    )
    assert done.returncode == 0, done.stderr
    command = json.loads(done.stdout)["hooks"]["preToolUse"][0]["bash"]
    payload = fixture(case)["payload"]
    args = {"command": "rm -rf /"}
    if "toolArgs" in payload:
        payload["toolArgs"] = json.dumps(args)
    else:
        payload["tool_input"] = args
    hooked = subprocess.run(
        ["/bin/sh", "-c", command + " --daemon off"],
        input=json.dumps(payload),
        capture_output=True,
        env=kit.env,
        cwd=kit.tmp,
        timeout=60,
        text=True,
    )
    assert (hooked.returncode, hooked.stderr) == (0, "")
    assert hooked.stdout == deny_bytes("Recursive deletes are not allowed here.")


def test_deny_through_the_warm_daemon(kit: Any) -> None:
    """The daemon path (started on demand, then warm) answers in the same bytes."""
    registration = kit.registration(kit.recorder(effects=DENY))
    for case in ("pre_tool_use.shell", "pre_tool_use.pascal_shell", "pre_tool_use.no_session"):
        data = fixture(case)
        done = kit.run_hook(
            "copilot", data["payload"], registration, "--event", data["event"], daemon="require"
        )
        assert (done.returncode, done.stdout, done.stderr) == (0, deny_bytes(REASON), "")
    assert kit.daemon_sockets()  # it really went through a daemon


def test_the_readme_states_the_deny_limits_install_prints() -> None:
    """The README's Copilot block is DENY_LIMITS, line for line (one text, two readers)."""
    from ahp_adapters.dialects.copilot import DENY_LIMITS

    readme = (Path(__file__).parents[1] / "README.md").read_text()
    begin = readme.index("<!-- copilot-limits:begin")
    block = readme[readme.index("\n", begin) + 1 : readme.index("<!-- copilot-limits:end -->")]
    title, *lines = DENY_LIMITS
    assert block == f"**{title}**\n\n" + "".join(f"- {line}\n" for line in lines)

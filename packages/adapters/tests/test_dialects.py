"""Native payload fixtures -> canonical AHP events; the codecs' native answers.

Each fixture (``fixtures/<dialect>/*.json``, written from the documented shapes)
is parsed by its dialect's codec and built into an event that must be valid
against the official JSON Schemas *and* our own wire models, and must match
the expected canonical fields. The renderers are checked byte for byte: each
dialect's own blocking form on a deny, nothing at all for "no decision" (``{}``
on Cursor, which blocks on empty output under ``failClosed``), and never a
native "allow".
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from ahp_adapters import dialects
from ahp_adapters.decision import GENERIC_DENIAL_REASON, NativeDecision, read_policy
from ahp_adapters.dialects.base import NativeAnswer, PayloadError, scrub_args, scrub_url
from ahp_adapters.events import build_event, manifest, source_uri
from ahp_protocol.client.chain import SYNTHETIC_DENIAL_REASON
from ahp_protocol.wire.content import project_event
from ahp_protocol.wire.events import parse_event
from ahp_protocol.wire.kinds import TOOL_KINDS, is_known_kind
from ahp_protocol.wire.manifest import parse_manifest

FIXTURES = Path(__file__).parent / "fixtures"
CASES = sorted((d.name, f.stem) for d in FIXTURES.iterdir() if d.is_dir() for f in d.glob("*.json"))
SCHEMAS = {
    "tool.before": "tool-before.schema.json",
    "tool.after": "tool-after.schema.json",
    "session.start": "session-start.schema.json",
    "session.end": "session-end.schema.json",
}
HARNESS = {
    "claude-code": "claude-code",
    "codex": "codex",
    "gemini": "gemini-cli",
    "cursor": "cursor",
    "kimi": "kimi-cli",
    "copilot": "copilot-cli",
    "qwen-code": "qwen-code",
}
REASON = "Force pushes rewrite shared history."


def load(dialect: str, case: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((FIXTURES / dialect / f"{case}.json").read_text())
    return data


def event_for(dialect: str, payload: dict[str, Any], **options: Any) -> dict[str, Any]:
    codec = dialects.get(dialect).resolve(payload)
    parsed = codec.parse(payload, options=options)
    return build_event(codec, parsed, payload)


def test_the_commands_help_names_every_dialect() -> None:
    # #29: install/hook/doctor --help left out qwen-code, which they all accept.
    from ahp_adapters.cli import DIALECT_HELP
    from ahp_adapters.dialects import DIALECTS

    missing = [n for n in DIALECTS if n not in DIALECT_HELP]
    assert missing == [], f"DIALECT_HELP misses {missing}"


def test_every_dialect_has_the_five_pre_tool_cases() -> None:
    for dialect in dialects.DIALECTS:
        names = {case for d, case in CASES if d == dialect}
        for kind in ("shell", "file_write", "file_edit", "mcp", "unknown"):
            # <hook>.<kind>[.<origin>]: a recorded case carries its origin (live-0.15.10)
            assert any(name.split(".")[1:2] == [kind] for name in names), (dialect, kind)


@pytest.mark.parametrize(("dialect", "case"), CASES)
def test_fixture_builds_the_expected_valid_event(
    dialect: str, case: str, official_schema: Callable[[str, Any], list[str]]
) -> None:
    fixture = load(dialect, case)
    payload, expect = fixture["payload"], fixture["expect"]
    # "event": what the installed hook passes as --event (Copilot's camelCase payloads name none).
    event = event_for(dialect, payload, event=fixture.get("event"))

    assert official_schema(SCHEMAS[event["type"]], event) == []
    parse_event(event)  # our wire models agree (raises on any problem)

    if "tool" in event:  # a kind of the draft's vocabulary, never a native name
        assert is_known_kind(event["tool"]["kind"]), event["tool"]["kind"]
    for key, value in expect.items():
        if key == "call" and value == {"synthesized": True}:
            assert event["call"]["synthesized"] is True
            assert event["call"]["id"].startswith("call_")
        else:
            assert event[key] == value, key
    assert event["harness"]["name"] == HARNESS[dialect]
    assert event["harness"]["version"] == payload.get("cursor_version", "unknown")
    assert event["source"].startswith("urn:uuid:")
    assert event["native"] == {
        "provider": HARNESS[dialect],
        "eventName": payload.get("hook_event_name", fixture.get("event")),
        "payload": payload,
    }
    if event["type"] == "session.start":
        parse_manifest(event["manifest"])
    if event["type"] == "tool.after":
        parts = event["items"][0]["parts"]
        assert event["items"][0]["role"] == "tool" and parts[0]["kind"] == "text"
        if "outputText" in fixture:  # a recorded payload: its output, exactly, as text
            assert parts[0]["text"] == fixture["outputText"]
        else:
            assert "README.md" in parts[0]["text"]


@pytest.mark.parametrize(("dialect", "case"), CASES)
def test_native_reaches_only_include_native_subscriptions(dialect: str, case: str) -> None:
    payload = load(dialect, case)["payload"]
    event = event_for(dialect, payload)
    assert "native" not in project_event(event, {"default": "body"})
    assert project_event(event, {"default": "body"}, include_native=True)["native"]["payload"] == (
        payload
    )


@pytest.mark.parametrize(("dialect", "case"), CASES)
def test_ids_are_stable_for_the_same_call(dialect: str, case: str) -> None:
    payload = load(dialect, case)["payload"]
    first, second = event_for(dialect, payload), event_for(dialect, payload)
    assert first["id"] != second["id"]  # two deliveries are two events
    assert first["source"] == second["source"] == source_uri(dialects.canonical_name(dialect))
    if "call" in first:
        assert first["call"] == second["call"]  # ... of the same call


def test_synthesized_ids_differ_for_different_calls() -> None:
    payload = load("gemini", "before_tool.shell")["payload"]
    later = {**payload, "timestamp": "2026-08-24T08:59:59.000Z"}
    other_session = {**payload, "session_id": "another-session"}
    ids = {event_for("gemini", p)["call"]["id"] for p in (payload, later, other_session)}
    assert len(ids) == 3
    shell = load("cursor", "before_shell_execution")["payload"]
    next_generation = {**shell, "generation_id": "another-generation"}
    assert event_for("cursor", shell)["call"] != event_for("cursor", next_generation)["call"]


def kind_tables() -> dict[str, dict[str, str]]:
    """Every ``*_KINDS`` table of every dialect module (VS Code's lives with Claude's)."""
    tables: dict[str, dict[str, str]] = {}
    for module_name, _ in dialects.DIALECTS.values():
        module = importlib.import_module(module_name)
        for name, value in vars(module).items():
            if name.endswith("_KINDS") and isinstance(value, dict):
                tables[f"{module_name}.{name}"] = value
    return tables


def test_every_kind_table_maps_only_into_the_wire_vocabulary() -> None:
    tables = kind_tables()
    assert {n.rsplit(".", 1)[1] for n in tables} >= {
        "CLAUDE_KINDS",
        "VSCODE_KINDS",
        "CODEX_KINDS",
        "GEMINI_KINDS",
        "CURSOR_KINDS",
        "KIMI_KINDS",
        "COPILOT_KINDS",
        "QWEN_KINDS",
    }
    for table_name, table in tables.items():
        unknown = {name: kind for name, kind in table.items() if kind not in TOOL_KINDS}
        assert not unknown, f"{table_name} maps to kinds outside TOOL_KINDS: {unknown}"


@pytest.mark.parametrize("body", ["*** Add File: a\n", "*** Update File: a\n", "", None])
def test_codex_patch_kinds_are_wire_kinds(body: str | None) -> None:
    from ahp_adapters.dialects.codex import patch_kind

    assert is_known_kind(patch_kind({} if body is None else {"command": body}))


def test_sources_differ_per_dialect() -> None:
    assert len({source_uri(d) for d in dialects.DIALECTS}) == len(dialects.DIALECTS)


# -- answers ---------------------------------------------------------------------------

DENY_OUTPUT = {
    ("claude-code", "PreToolUse"): {
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": "deny",
            "permissionDecisionReason": REASON,
        }
    },
    ("codex", "PreToolUse"): {
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": "deny",
            "permissionDecisionReason": REASON,
        }
    },
    ("gemini", "BeforeTool"): {"decision": "deny", "reason": REASON},
    ("cursor", "preToolUse"): {
        "permission": "deny",
        "user_message": REASON,
        "agent_message": REASON,
    },
    ("cursor", "beforeShellExecution"): {
        "permission": "deny",
        "user_message": REASON,
        "agent_message": REASON,
    },
    ("cursor", "beforeMCPExecution"): {
        "permission": "deny",
        "user_message": REASON,
        "agent_message": REASON,
    },
    ("cursor", "beforeReadFile"): {"permission": "deny", "user_message": REASON},
    ("kimi", "PreToolUse"): {
        "hookSpecificOutput": {"permissionDecision": "deny", "permissionDecisionReason": REASON}
    },
    ("copilot", "preToolUse"): {"permissionDecision": "deny", "permissionDecisionReason": REASON},
    ("copilot", "PreToolUse"): {"permissionDecision": "deny", "permissionDecisionReason": REASON},
    ("qwen-code", "PreToolUse"): {
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": "deny",
            "permissionDecisionReason": REASON,
        }
    },
}
UNTOLD_EVENT_DENY_AS_JSON = {"copilot"}
"""Dialects whose deny for an untold event is their JSON form: Copilot skips a non-zero exit."""


@pytest.mark.parametrize(("dialect", "event"), sorted(DENY_OUTPUT))
def test_deny_is_the_dialects_own_blocking_form(dialect: str, event: str) -> None:
    answer = dialects.get(dialect).render_deny(REASON, event)
    assert answer.exit_code == 0
    assert answer.stderr == ""
    assert answer.stdout.endswith("\n") and answer.stdout.count("\n") == 1
    assert json.loads(answer.stdout) == DENY_OUTPUT[(dialect, event)]


@pytest.mark.parametrize("dialect", sorted(dialects.DIALECTS))
def test_unknown_event_deny_is_exit_2_with_a_reason(dialect: str) -> None:
    answer = dialects.get(dialect).render_deny(REASON, None)
    if dialect in UNTOLD_EVENT_DENY_AS_JSON:
        assert answer == dialects.get(dialect).render_deny(REASON, "preToolUse")
        assert answer.exit_code == 0 and answer.stderr == ""
        return
    assert answer == NativeAnswer(stdout="", stderr=REASON + "\n", exit_code=2)


NO_EFFECT_STDOUT = {"cursor": "{}\n"}
"""Stdout of "no decision" where it is not empty: Cursor blocks on empty output under failClosed."""


@pytest.mark.parametrize("dialect", sorted(dialects.DIALECTS))
def test_nothing_is_exit_0_and_no_decision(dialect: str) -> None:
    codec = dialects.get(dialect)
    expected = NativeAnswer(NO_EFFECT_STDOUT.get(dialect, ""), "", 0)
    for event in [*sorted(codec.all_events), "SomeFutureEvent", None]:
        assert codec.render_nothing(event) == expected, event


def test_cursor_nothing_through_claudes_hook_files_is_an_empty_object() -> None:
    payload = {**load("cursor", "pre_tool_use.shell")["payload"], "hook_event_name": "PreToolUse"}
    codec = dialects.get("claude-code").resolve(payload)
    for event in [codec.event_name(payload), "PostToolUse", "SessionStart", None]:
        assert codec.render_nothing(event) == NativeAnswer("{}\n", "", 0)


@pytest.mark.parametrize("dialect", sorted(dialects.DIALECTS))
def test_only_deny_is_advertised(dialect: str) -> None:
    """Deny only, except Claude Code's input rewrite (merge; see test_modify.py)."""
    codec = dialects.get(dialect)
    expected: dict[str, Any] = {"effects": ["deny"]}
    if dialect == "claude-code":
        rewrite = {"input": {"replace": False, "merge": True}}
        expected = {"effects": ["deny", "modify"], "modify": rewrite}
    for event in codec.pre_tool_events:
        assert codec.capabilities(event) == expected
    entries = {e["event"]: e for e in manifest(codec)["events"]}
    assert entries["tool.before"]["capabilities"] == expected
    assert all(
        e["capabilities"] == {"effects": []} for n, e in entries.items() if n != "tool.before"
    )
    parse_manifest(manifest(codec))


def test_long_reasons_are_clipped() -> None:
    answer = dialects.get("claude-code").render_deny("x" * 5000, "PreToolUse")
    reason = json.loads(answer.stdout)["hookSpecificOutput"]["permissionDecisionReason"]
    assert len(reason) == 2000


def test_decisions_never_leak_and_allow_is_never_rendered() -> None:
    assert GENERIC_DENIAL_REASON == SYNTHETIC_DENIAL_REASON
    backend = NativeDecision("deny", reason=REASON, code="com.example.x")
    synthetic = NativeDecision("deny", reason="internal: sk-SECRET", synthetic=True)
    closed = NativeDecision("failure", policy="fail-closed", detail="budget exhausted")
    opened = NativeDecision("failure", policy="fail-open")
    assert backend.blocks and backend.block_reason == REASON
    assert synthetic.blocks and synthetic.block_reason == GENERIC_DENIAL_REASON
    assert closed.blocks and closed.block_reason == GENERIC_DENIAL_REASON
    assert not opened.blocks and not NativeDecision("none").blocks
    assert NativeDecision.from_json({"decision": "allow"}).policy == "fail-closed"
    assert NativeDecision.from_json(backend.to_json()) == backend


def test_a_synthetic_deny_names_the_backend_and_class_and_nothing_else() -> None:
    named = NativeDecision(
        "deny",
        reason="internal: sk-SECRET",
        synthetic=True,
        backend="com.example.policy",
        failure="spawn_failed",
        failures=("backend com.example.policy failed (spawn_failed, fail-closed): ...",),
    )
    expected = "Required policy backend com.example.policy unavailable (spawn_failed)."
    assert named.block_reason == expected
    assert NativeDecision.from_json(json.loads(json.dumps(named.to_json()))) == named
    # From the daemon's socket, only an id and a class the kit knows are shown.
    for backend, failure in (("not an id: sk-SECRET", "spawn_failed"), ("com.a.b", "sk-SECRET")):
        odd = {"decision": "deny", "synthetic": True, "backend": backend, "failure": failure}
        assert NativeDecision.from_json(odd).block_reason == GENERIC_DENIAL_REASON
    lines = NativeDecision.from_json({"decision": "none", "failures": ["a\x1b[2Jb", 3]})
    assert lines.failures == ("a [2Jb",)


# -- caller detection ------------------------------------------------------------------


def test_claude_hook_tells_vscode_apart() -> None:
    payload = {
        "timestamp": "2026-08-24T08:51:14.123Z",
        "cwd": "/home/dev/repo",
        "sessionId": "8c1f0a2b",
        "hookEventName": "PreToolUse",
        "transcript_path": "/home/dev/.vscode/transcript.json",
        "tool_name": "run_in_terminal",
        "tool_input": {"command": "git push --force origin main", "isBackground": False},
        "tool_use_id": "call_x7Yp2Qd9",
    }
    codec = dialects.get("claude-code").resolve(payload)
    assert codec.name == "vscode"
    event = event_for("claude-code", payload)
    assert event["harness"]["name"] == "vscode"
    assert event["tool"]["kind"] == "shell"
    assert event["session"] == {"id": "8c1f0a2b", "cwd": "/home/dev/repo"}
    assert (
        json.loads(codec.render_deny(REASON, "PreToolUse").stdout)
        == DENY_OUTPUT[("claude-code", "PreToolUse")]
    )


def test_claude_hook_tells_cursor_apart_and_blocks_both_ways() -> None:
    payload = {**load("cursor", "pre_tool_use.shell")["payload"], "hook_event_name": "PreToolUse"}
    codec = dialects.get("claude-code").resolve(payload)
    assert codec.harness_name == "cursor"
    assert event_for("claude-code", payload)["harness"] == {"name": "cursor", "version": "2.4.21"}
    answer = codec.render_deny(REASON, codec.event_name(payload))
    assert answer.exit_code == 2 and answer.stderr == REASON + "\n"
    assert json.loads(answer.stdout)["permission"] == "deny"


def test_claude_code_payload_stays_claude() -> None:
    payload = load("claude-code", "pre_tool_use.shell")["payload"]
    assert dialects.get("claude-code").resolve(payload).name == "claude-code"


def test_cursor_split_surface_skips_shell_and_mcp_in_pre_tool_use() -> None:
    codec = dialects.get("cursor")
    for case in ("pre_tool_use.shell", "pre_tool_use.mcp"):
        payload = load("cursor", case)["payload"]
        assert codec.parse(payload, options={"skip_shell_mcp": True}).kind == "ignore"
        assert codec.parse(payload, options={}).kind == "tool.before"
    write = load("cursor", "pre_tool_use.file_write")["payload"]
    assert codec.parse(write, options={"skip_shell_mcp": True}).kind == "tool.before"


def test_events_that_are_not_ours_are_ignored() -> None:
    claude = load("claude-code", "pre_tool_use.shell")["payload"]
    parsed = dialects.get("claude-code").parse(
        {**claude, "hook_event_name": "Notification"}, options={}
    )
    assert parsed.kind == "ignore"


# -- malformed payloads ----------------------------------------------------------------

MALFORMED: list[tuple[str, str, dict[str, Any]]] = [
    ("claude-code", "pre_tool_use.shell", {"tool_name": None}),
    ("claude-code", "pre_tool_use.shell", {"tool_input": "not json"}),
    ("claude-code", "pre_tool_use.shell", {"tool_input": 42}),
    ("claude-code", "pre_tool_use.shell", {"tool_use_id": None}),
    ("claude-code", "session_start", {"session_id": None}),
    ("codex", "pre_tool_use.shell", {"tool_input": ["rm", "-rf", "/"]}),
    ("codex", "pre_tool_use.shell", {"tool_name": 7}),
    ("gemini", "before_tool.shell", {"tool_name": None}),
    ("gemini", "before_tool.shell", {"tool_input": "[1, 2]"}),
    ("cursor", "pre_tool_use.shell", {"tool_input": None}),
    ("cursor", "before_shell_execution", {"command": None}),
    ("cursor", "before_mcp_execution", {"tool_input": "{broken"}),
    ("kimi", "pre_tool_use.shell", {"tool_input": "rm -rf /"}),
    ("kimi", "session_end", {"session_id": None}),
    ("qwen-code", "pre_tool_use.shell.live-0.15.10", {"tool_input": "not json"}),
    ("qwen-code", "pre_tool_use.shell.live-0.15.10", {"tool_use_id": None}),
]


@pytest.mark.parametrize(("dialect", "case", "change"), MALFORMED)
def test_malformed_payloads_are_payload_errors(
    dialect: str, case: str, change: dict[str, Any]
) -> None:
    payload = {**load(dialect, case)["payload"]}
    for key, value in change.items():
        if value is None:
            payload.pop(key, None)
        else:
            payload[key] = value
    with pytest.raises(PayloadError) as caught:
        dialects.get(dialect).resolve(payload).parse(payload, options={})
    assert "rm" not in str(caught.value) and "broken" not in str(caught.value)


def test_unknown_dialect() -> None:
    with pytest.raises(dialects.UnknownDialect):
        dialects.get("opencode")
    assert dialects.get("kimi-code").name == "kimi"
    assert dialects.get("claude").name == "claude-code"
    assert dialects.get("gemini-cli").name == "gemini"
    assert dialects.get("qwen").name == dialects.get("qwen-cli").name == "qwen-code"


# -- helpers ---------------------------------------------------------------------------


def test_scrubbing() -> None:
    assert scrub_url("https://u:p@h.example:8443/p?token=x#f") == "https://h.example:8443/p"
    assert scrub_args(["--api-key", "k", "--port", "1", "TOKEN=abc", "x"]) == [
        "--api-key",
        "[redacted]",
        "--port",
        "1",
        "TOKEN=[redacted]",
        "x",
    ]


def test_read_policy(tmp_path: Path) -> None:
    """The fallback policy when no chain can run: wire.routing's rule, read from the file."""

    def sub(policy: str, events: list[str], **extra: Any) -> dict[str, Any]:
        return {"events": events, "mode": "intercept", "failurePolicy": policy, **extra}

    def doc(*subs: Any) -> dict[str, Any]:
        return {"hooks": [{"id": "a", "subscriptions": list(subs)}]}

    def policy(document: Any) -> str:
        path = tmp_path / "registration.json"
        path.write_text(json.dumps(document), "utf-8")
        return read_policy(str(path))

    assert policy(doc(sub("fail-open", ["tool.before"]))) == "fail-open"
    assert policy(doc(sub("fail-closed", ["tool.*"]))) == "fail-closed"
    assert policy(doc(sub("fail-open", ["*"], scope="managed"))) == "fail-closed"
    assert policy(doc(sub("fail-closed", ["session.start"]))) == "none"
    assert policy({"hooks": [{"id": "a"}]}) == "fail-closed"  # discovered
    assert policy("not a registration") == "fail-closed"
    # A subscription that cannot be read may be a fail-closed interceptor.
    assert policy(doc(sub("fail-open", ["tool.before"]), "garbage")) == "fail-closed"
    assert policy(doc({"events": ["tool.before"], "mode": "intercept"})) == "fail-closed"
    assert read_policy(str(tmp_path / "missing.json")) == "fail-closed"
    (tmp_path / "broken.json").write_text("{", "utf-8")
    assert read_policy(str(tmp_path / "broken.json")) == "fail-closed"


OFFERED = Path(__file__).parent / "offered"


@pytest.mark.parametrize("recorded", sorted(OFFERED.glob("*.live-*.json")), ids=lambda p: p.stem)
def test_every_tool_offered_live_has_its_kind(recorded: Path) -> None:
    from ahp_adapters.live.harnesses import HARNESSES

    name = recorded.name.split(".live-")[0]
    harness, codec = HARNESSES[name], dialects.get(name)
    offered = json.loads(recorded.read_text())["offered"]
    hooked = [hook for tool in offered if (hook := harness.hook_name(tool)) is not None]
    assert hooked, f"{recorded.name}: no tool the hooks see"
    unlisted = [tool for tool in hooked if tool not in codec.kinds]
    assert not unlisted, f"{name}: offered live, not in its kinds table: {unlisted}"
    shell = [tool for tool in hooked if codec.kinds[tool] == "shell"]
    assert shell, f"{name}: no offered tool is a shell (a kind = 'shell' rule would miss it)"

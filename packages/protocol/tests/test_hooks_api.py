"""The harness-facing API (``ahp_protocol.client.Hooks``) against real backend processes.

What this file shows:

- construction checks everything it can: the host's declaration (a list instead of
  an object, an unknown effect, an effect the event cannot carry, a non-interceptable
  event), the harness identity; each error names the entry and what is allowed;
- the envelope is owned: ``source``, ``harness``, ``session``, ``time``, unique event
  ids, the turn on turn events only, one ``call.id`` from ``tool.before`` to
  ``tool.after`` (what the recording backend received, not what we built);
- an invalid outgoing event is raised as :class:`InvalidEvent` and never sent;
  with validation off, the backend's ``-32602`` shows as a JSON-RPC error with its
  code and ``data.reason``, not as a bare outage;
- a second ``tool.before`` for a changed input is seeded as draft §5.4 says (``ask``
  persists, ``allow`` does not), as the backend's ``params.state`` shows;
- failure detail: a command not on ``PATH`` and a missing relative command are
  named; a backend's stderr is readable after it died (and after close);
- a registration file's folder is its backends' home (run from another folder);
- an unknown tool kind is sent, with one warning per kind; no registration at all
  settles every event with no effect.
"""

from __future__ import annotations

import json
import os
import re
import stat
import sys
import textwrap
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio
import pytest
from ahp_protocol.client import (
    DeclarationError,
    Dispatcher,
    FailureClass,
    Hooks,
    InvalidEvent,
    UnknownToolKind,
    failure_line,
)
from ahp_protocol.wire.registration import parse_registration

HERE = Path(__file__).resolve().parent
RECORDER = HERE / "backends" / "recorder.py"
KIT_DENYLIST = HERE / "backends" / "kit_denylist.py"
PY = sys.executable
HARNESS = {"name": "hooks-api-tests", "version": "1.0"}
DENY = {"tool.before": {"effects": ["deny"]}}
TOOL_BEFORE = {
    "effects": ["deny", "allow", "ask", "modify"],
    "modify": {"input": {"replace": False, "merge": True}},
}


def intercept(events: Sequence[str], policy: str = "fail-closed") -> dict[str, Any]:
    return {
        "mode": "intercept",
        "events": list(events),
        "timeoutMs": 10000,
        "failurePolicy": policy,
        "content": {"default": "body"},
    }


def observe(events: Sequence[str]) -> dict[str, Any]:
    return {"mode": "observe", "events": list(events), "content": {"default": "body"}}


def stdio(command: str, args: Sequence[str], subs: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "protocolVersion": "draft",
        "hooks": [
            {
                "id": "com.example.test",
                "transport": {
                    "type": "stdio",
                    "command": command,
                    "args": list(args),
                    "lifecycle": "persistent",
                },
                "subscriptions": subs,
            }
        ],
    }


def recording(record: Path, subs: list[dict[str, Any]], **options: Any) -> dict[str, Any]:
    args = ["-I", "-S", str(RECORDER), "--record", str(record)]
    for name, value in options.items():
        args += [f"--{name}", json.dumps(value)]
    return stdio(PY, args, subs)


def received(record: Path) -> list[dict[str, Any]]:
    if not record.exists():
        return []
    lines = [json.loads(line) for line in record.read_text("ascii").splitlines() if line]
    return [r["message"] for r in lines if r["event"] == "message"]


def run(fn: Any) -> Any:
    return anyio.run(fn)


# -- construction ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("capabilities", "expected"),
    [
        (
            {"tool.before": ["deny"]},
            "capabilities['tool.before']: must be a capabilities object such as "
            '{"effects": ["deny"]}, not list',
        ),
        (
            {"tool.before": {"effects": ["denny"]}},
            "capabilities['tool.before'].effects[0]: must be a standard effect",
        ),
        (
            {"tool.before": {"effects": ["modify"]}},
            "capabilities['tool.before'].modify: is required when effects contains 'modify' "
            "(effects allowed at tool.before: allow, ask, deny, flow, inject, message, modify, "
            "return)",
        ),
        ({"tool.bogus": {"effects": []}}, "capabilities['tool.bogus']: not an interceptable"),
        ({"session.end": {"effects": []}}, "capabilities['session.end']: not an interceptable"),
    ],
)
def test_a_wrong_declaration_is_refused_at_construction(
    tmp_path: Path, capabilities: dict[str, Any], expected: str
) -> None:
    doc = recording(tmp_path / "r.jsonl", [intercept(["tool.before"])])
    with pytest.raises(DeclarationError) as caught:
        Hooks(doc, harness=HARNESS, capabilities=capabilities)
    assert expected in str(caught.value)
    with pytest.raises(DeclarationError):  # the low-level layer checks the same, just as early
        Dispatcher(parse_registration(doc), capabilities=capabilities)
    assert not (tmp_path / "r.jsonl").exists()  # nothing was started


@pytest.mark.parametrize("harness", [{}, {"name": "x"}, {"name": "", "version": "1"}])
def test_the_harness_identity_is_required(harness: dict[str, str]) -> None:
    with pytest.raises(
        ValueError, match=re.escape('harness must be {"name": ..., "version": ...}')
    ):
        Hooks(None, harness=harness, capabilities=DENY)


# -- the envelope and the lifecycle ----------------------------------------------------


def test_the_envelope_and_one_call_id_through_the_lifecycle(tmp_path: Path) -> None:
    record = tmp_path / "r.jsonl"
    subs = [
        intercept(["tool.before", "tool.permission.request", "tool.after", "turn.start"]),
        observe(["*"]),
    ]
    caps = {
        "tool.before": {"effects": ["deny"]},
        "tool.permission.request": {"effects": ["deny"]},
        "tool.after": {"effects": ["message"]},
        "turn.start": {"effects": ["deny"]},
    }

    async def main() -> str:
        async with Hooks(recording(record, subs), harness=HARNESS, capabilities=caps) as hooks:
            session = hooks.session(cwd=str(tmp_path), roots=[str(tmp_path)])
            await session.start(permission_mode="default")
            await session.turn_start([])
            call = session.tool_call("Bash", {"command": "ls"}, kind="shell")
            before = await call.before()
            assert not before.stopped and before.permission == "none"
            await call.permission_request()
            await call.permission_resolved("allow", "user")
            await call.after("ok", "a.txt", duration_ms=1.5)
            await session.turn_end()
            await session.end()
            return hooks.source

    source = run(main)
    messages = received(record)
    events = [m["params"]["event"] for m in messages]
    types = [e["type"] for e in events]
    for expected in (
        "session.start",
        "turn.start",
        "tool.before",
        "tool.permission.request",
        "tool.permission.resolved",
        "tool.after",
        "turn.end",
        "session.end",
    ):
        assert expected in types
    # eight events were built, each with its own id (an intercepted event is observed
    # after settlement under the same id)
    assert len({e["id"] for e in events}) == 8
    assert len({(e["id"], e["type"]) for e in events}) == 8
    intercepts = [m for m in messages if m["method"] == "hooks/intercept"]
    assert all(m["id"] == m["params"]["event"]["id"] for m in intercepts)
    for event in events:
        assert event["source"] == source and event["harness"] == HARNESS
        assert event["session"]["cwd"] == str(tmp_path)
        assert event["time"].endswith("Z")
    sessions = {e["session"]["id"] for e in events}
    assert len(sessions) == 1
    tool_events = [e for e in events if e["type"].startswith("tool.")]
    assert len({e["call"]["id"] for e in tool_events}) == 1
    turns = {e["turn"]["id"] for e in events if "turn" in e}
    assert len(turns) == 1
    assert not any("turn" in e for e in events if e["type"].startswith("session."))
    after = next(e for e in events if e["type"] == "tool.after")
    assert after["execution"] == {"status": "executed"} and after["durationMs"] == 1.5


MCP_IDENTITY = {
    "server": {"id": "files", "name": "Files"},
    "toolName": "delete",
    "provenance": "runtime",
    "connection": {"transport": "stdio", "command": "files-mcp", "args": [], "cwd": "/w"},
}


def test_an_mcp_tools_identity_is_on_every_event_of_its_call() -> None:
    """``tool_call(..., mcp=)`` is the one place ``tool.mcp`` is written: each event of the
    call carries it (a copy: changing an event changes nothing else) and is valid."""
    from ahp_protocol.wire.events import parse_event

    hooks = Hooks(None, harness=HARNESS, capabilities={"tool.before": {"effects": ["deny"]}})
    call = hooks.session(cwd="/w").tool_call(
        "mcp__files__delete", {"path": "a"}, kind="mcp", origin="mcp", path="mcp", mcp=MCP_IDENTITY
    )
    events = [
        call.event("tool.before"),
        call.event("tool.permission.request", suggestions=[], sandboxBypass=False),
        call.event(
            "tool.after",
            outcome="denied",
            execution={"status": "skipped", "reason": "policy"},
            items=[],
        ),
    ]
    for event in events:
        assert event["tool"]["origin"] == "mcp" and event["path"] == "mcp"
        assert event["tool"]["mcp"] == MCP_IDENTITY
        assert parse_event(event).tool.origin == "mcp"
    events[0]["tool"]["mcp"]["toolName"] = "changed"
    assert call.event("tool.before")["tool"]["mcp"] == MCP_IDENTITY
    native = hooks.session(cwd="/w").tool_call("Bash", {"command": "ls"}, kind="shell")
    assert "mcp" not in native.event("tool.before")["tool"]


def test_an_invalid_event_is_raised_and_never_sent(tmp_path: Path) -> None:
    record = tmp_path / "r.jsonl"
    doc = recording(record, [intercept(["tool.before"]), observe(["turn.end"])])

    async def main() -> None:
        async with Hooks(doc, harness=HARNESS, capabilities=DENY) as hooks:
            session = hooks.session(cwd=str(tmp_path))
            call = session.tool_call("Bash", "ls -la", kind="shell")  # input must be an object
            with pytest.raises(InvalidEvent, match=r"tool.before event is invalid: tool.input"):
                await call.before()
            with pytest.raises(InvalidEvent, match=r"turn.end event is invalid"):
                await session.send("turn.end", outcome="completed", items=[])  # observed too
            # An event no subscription receives is not sent, so not checked.
            assert (await session.send("turn.start", items="not a list")).permission == "none"

    run(main)
    assert received(record) == []


def test_with_validation_off_a_backends_invalid_params_is_named(tmp_path: Path) -> None:
    doc = stdio(PY, [str(KIT_DENYLIST)], [intercept(["tool.before"])])

    async def main() -> None:
        async with Hooks(doc, harness=HARNESS, capabilities=DENY, validate=False) as hooks:
            session = hooks.session(cwd=str(tmp_path))
            call = session.tool_call("Bash", {"command": "ls"}, kind="shell", path="")
            result = await call.before()
            assert result.synthetic_denial  # fail-closed: refused, as any failure
            (diagnostic,) = result.diagnostics
            assert diagnostic.failure is FailureClass.RPC_ERROR
            assert diagnostic.detail is not None
            assert diagnostic.detail.startswith(
                "backend answered with JSON-RPC error -32602 (Invalid params)"
            )

    run(main)


@pytest.mark.parametrize(("first", "seed"), [("ask", "ask"), ("allow", "none")])
def test_a_changed_input_is_judged_again_with_the_permission_carried(
    tmp_path: Path, first: str, seed: str
) -> None:
    record = tmp_path / "r.jsonl"
    script = [{"effects": [{"type": first}]}, {"effects": []}]
    doc = recording(record, [intercept(["tool.before"])], script=script)

    async def main() -> None:
        async with Hooks(doc, harness=HARNESS, capabilities={"tool.before": TOOL_BEFORE}) as hooks:
            call = hooks.session(cwd=str(tmp_path)).tool_call(
                "Bash", {"command": "a"}, kind="shell"
            )
            assert (await call.before()).permission == first
            again = await call.before({"command": "b"})
            assert again.permission == seed and call.input == {"command": "b"}

    run(main)
    first_run, second_run = [m["params"] for m in received(record)]
    assert first_run["state"]["permission"] == "none"
    assert second_run["state"]["permission"] == seed
    assert second_run["event"]["tool"]["input"] == {"command": "b"}
    assert second_run["event"]["call"] == first_run["event"]["call"]
    assert second_run["event"]["id"] != first_run["event"]["id"]


# -- failure detail --------------------------------------------------------------------


def test_a_command_not_on_path_is_named(tmp_path: Path) -> None:
    doc = stdio("ahp-no-such-backend", [], [intercept(["tool.before"])])

    async def main() -> None:
        environ = {"PATH": str(tmp_path)}
        async with Hooks(doc, harness=HARNESS, capabilities=DENY, environ=environ) as hooks:
            call = hooks.session(cwd=str(tmp_path)).tool_call("x", {}, kind="other")
            result = await call.before()
            assert result.synthetic_denial
            (diagnostic,) = result.diagnostics
            assert diagnostic.failure is FailureClass.SPAWN_FAILED
            assert diagnostic.detail == (
                f"'ahp-no-such-backend' not found on PATH (the backend's PATH is '{tmp_path}')"
            )
            # The user (and the model) see which backend failed and how, nothing more.
            backend = diagnostic.backend
            assert result.denial_reason == (
                f"Required policy backend {backend} unavailable (spawn_failed)."
            )
            # The operator sees the detail and the fix.
            assert failure_line(backend, diagnostic.failure, "fail-closed", diagnostic.detail) == (
                f"backend {backend} failed (spawn_failed, fail-closed): {diagnostic.detail}; "
                "fix: give an absolute command path in the registration, "
                "or install the backend where the harness's PATH finds it"
            )

    run(main)


@pytest.mark.parametrize("case", ["missing-file", "not-executable", "no-working-folder"])
def test_a_command_that_cannot_start_is_named_with_its_folder(tmp_path: Path, case: str) -> None:
    plain = tmp_path / "backend.sh"
    plain.write_text("#!/bin/sh\n")  # not executable
    command, cwd = {
        "missing-file": (str(tmp_path / "no-such-backend"), None),
        "not-executable": (str(plain), None),
        "no-working-folder": (PY, str(tmp_path / "gone")),
    }[case]
    doc = stdio(command, [], [intercept(["tool.before"])])
    if cwd is not None:
        doc["hooks"][0]["transport"]["cwd"] = cwd

    async def main() -> str | None:
        async with Hooks(doc, harness=HARNESS, capabilities=DENY) as hooks:
            call = hooks.session(cwd=str(tmp_path)).tool_call("x", {}, kind="other")
            result = await call.before()
            assert result.synthetic_denial
            (diagnostic,) = result.diagnostics
            assert diagnostic.failure is FailureClass.SPAWN_FAILED
            line = failure_line(diagnostic.backend, diagnostic.failure, None, diagnostic.detail)
            assert "fix:" not in line  # not a command missing from PATH: no PATH advice
            return diagnostic.detail

    expected = {
        "missing-file": f"command {command!r} not found",
        "not-executable": f"command {command!r} is not executable",
        "no-working-folder": f"working folder {cwd!r} does not exist",
    }[case]
    assert run(main) == expected


def test_a_backends_stderr_is_readable_after_it_died(tmp_path: Path) -> None:
    script = tmp_path / "dies.py"
    script.write_text(
        "import sys\nsys.stderr.write('rules file rules.toml: not found\\n')\nsys.exit(2)\n"
    )
    doc = stdio(PY, ["-I", str(script)], [intercept(["tool.before"])])
    hooks = Hooks(doc, harness=HARNESS, capabilities=DENY)

    async def main() -> None:
        async with hooks:
            call = hooks.session(cwd=str(tmp_path)).tool_call("x", {}, kind="other")
            result = await call.before()
            assert result.diagnostics[0].failure is FailureClass.ABNORMAL_EXIT
            with anyio.fail_after(10):
                while "not found" not in hooks.stderr("com.example.test"):
                    await anyio.sleep(0.01)  # the drain thread reads it as it arrives

    run(main)
    # once per start: the dispatcher retried the exit once, in the same deadline
    assert hooks.stderr("com.example.test") == "rules file rules.toml: not found\n" * 2
    assert hooks.stderr("com.example.other") == ""


# -- where a registration file's backends run ------------------------------------------


def test_a_registration_files_folder_is_its_backends_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "policy"
    (home / "bin").mkdir(parents=True)
    backend = home / "bin" / "backend"
    backend.write_text(
        f"#!{PY}\n"
        + textwrap.dedent(
            """
            import json, os, sys
            rules = open("rules.txt").read().split()  # relative: beside the registration
            for line in sys.stdin:
                msg = json.loads(line)
                if "id" not in msg:
                    continue
                command = msg["params"]["event"]["tool"]["input"]["command"]
                effects = [{"type": "deny", "reason": os.getcwd()}] if command in rules else []
                out = {"protocolVersion": "draft", "effects": effects}
                print(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": out}), flush=True)
            """
        )
    )
    backend.chmod(backend.stat().st_mode | stat.S_IXUSR)
    (home / "rules.txt").write_text("rm\n")
    registration = home / "hooks.json"
    doc = stdio("./bin/backend", [], [intercept(["tool.before"])])
    registration.write_text(json.dumps(doc))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)

    async def main() -> None:
        async with Hooks("../policy/hooks.json", harness=HARNESS, capabilities=DENY) as hooks:
            session = hooks.session(cwd=str(elsewhere))
            assert not (
                await session.tool_call("Bash", {"command": "ls"}, kind="shell").before()
            ).stopped
            denied = await session.tool_call("Bash", {"command": "rm"}, kind="shell").before()
            assert denied.denial is not None and not denied.denial.synthetic
            assert denied.denial.reason == str(home)

    run(main)


# -- kinds, and no registration ----------------------------------------------------------


def test_an_unknown_kind_is_sent_with_one_warning_per_kind(tmp_path: Path) -> None:
    record = tmp_path / "r.jsonl"
    doc = recording(record, [intercept(["tool.before"])])

    async def main() -> None:
        async with Hooks(doc, harness=HARNESS, capabilities=DENY) as hooks:
            session = hooks.session(cwd=str(tmp_path))
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                for _ in range(2):
                    await session.tool_call("Bash", {"command": "ls"}, kind="bash").before()
                await session.tool_call("Bash", {"command": "ls"}, kind="shell").before()
            (warning,) = caught
            assert warning.category is UnknownToolKind
            assert "tool kind 'bash' is not one the draft defines" in str(warning.message)
            assert "shell" in str(warning.message)

    run(main)
    kinds = [m["params"]["event"]["tool"]["kind"] for m in received(record)]
    assert kinds == ["bash", "bash", "shell"]


def test_without_a_registration_every_event_settles_with_no_effect(tmp_path: Path) -> None:
    async def main() -> None:
        async with Hooks(None, harness=HARNESS, capabilities=DENY) as hooks:
            session = hooks.session(cwd=str(tmp_path))
            started = await session.start(permission_mode="default")
            assert started.permission == "none" and not started.stopped
            call = session.tool_call("Bash", {"command": "ls"}, kind="shell")
            result = await call.before()
            assert result.permission == "none" and result.diagnostics == ()
            assert result.tool_input == {"command": "ls"}
            built = call.event("tool.before")  # built, not sent: for tests and other senders
            hooks.check(built)
            assert (built["call"], built["tool"]["kind"]) == ({"id": call.id}, "shell")
            assert built["id"] != result.event["id"] and built["session"]["id"] == session.id
            # Nothing is sent, so nothing is checked ...
            bad = session.tool_call("Bash", [], kind="shell")
            assert (await bad.before()).permission == "none"
            with pytest.raises(InvalidEvent):  # ... unless asked
                hooks.check(bad.event("tool.before"))

    run(main)
    assert os.listdir(tmp_path) == []

"""The hook's own guarantees, in-process: it always answers, and only on stdout.

``hook.run`` is driven with real pipes for stdin and stdout: an internal error,
a stdin that never closes, and the runtime directory's and pairing state's
rules. The daemon client's "unreachable" (nothing sent) is checked too.
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from ahp_adapters import client, hook, pairing, rundir
from ahp_adapters.hook import HookOptions

FIXTURES = Path(__file__).parent / "fixtures"
GENERIC = "Required policy backend unavailable."


def registration(tmp_path: Path, policy: str) -> Path:
    path = tmp_path / f"{policy}.json"
    sub = {
        "events": ["tool.before"],
        "mode": "intercept",
        "timeoutMs": 1000,
        "failurePolicy": policy,
        "content": {"default": "body"},
    }
    hooks = [{"id": "com.example.x", "transport": {"type": "http", "url": "http://127.0.0.1:9/"}}]
    hooks[0]["subscriptions"] = [sub]  # type: ignore[assignment]
    path.write_text(json.dumps({"protocolVersion": "draft", "hooks": hooks}))
    return path


def run_with_pipes(options: HookOptions, data: bytes | None) -> tuple[int, bytes]:
    """``hook.run`` with pipes; ``data`` ``None`` leaves stdin open (never EOF)."""
    in_r, in_w = os.pipe()
    out_r, out_w = os.pipe()
    saved = os.dup(1)
    try:
        if data is not None:
            os.write(in_w, data)
            os.close(in_w)
        code = hook.run(options, stdin_fd=in_r, stdout_fd=out_w)
    finally:
        os.dup2(saved, 1)  # run() points fd 1 at stderr while it works; restore ours
        os.close(saved)
        os.close(out_w)
        os.close(in_r)
        if data is None:
            os.close(in_w)
    chunks = []
    while chunk := os.read(out_r, 65536):
        chunks.append(chunk)
    os.close(out_r)
    return code, b"".join(chunks)


def claude_payload() -> bytes:
    data = json.loads((FIXTURES / "claude-code" / "pre_tool_use.shell.json").read_text())
    return json.dumps(data["payload"]).encode()


@pytest.mark.parametrize("policy", ["fail-closed", "fail-open"])
def test_internal_error_still_answers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, policy: str
) -> None:
    def explode(*_args: Any, **_kwargs: Any) -> None:
        raise RuntimeError("secret internals sk-123")

    monkeypatch.setattr(hook, "handle", explode)
    options = HookOptions("claude-code", str(registration(tmp_path, policy)), event="PreToolUse")
    code, out = run_with_pipes(options, claude_payload())
    assert code == 0
    if policy == "fail-closed":
        body = json.loads(out)
        assert body["hookSpecificOutput"]["permissionDecisionReason"] == GENERIC
    else:
        assert out == b""
    assert b"sk-123" not in out and b"Traceback" not in out


def test_stdin_that_never_closes(tmp_path: Path) -> None:
    options = HookOptions(
        "gemini", str(registration(tmp_path, "fail-closed")), event="BeforeTool", budget=1.0
    )
    started = time.monotonic()
    code, out = run_with_pipes(options, None)
    assert time.monotonic() - started < 1.0 + 0.5
    assert (code, json.loads(out)) == (0, {"decision": "deny", "reason": GENERIC})


def test_unknown_dialect_is_a_non_blocking_usage_error(tmp_path: Path) -> None:
    options = HookOptions("no-such-harness", str(registration(tmp_path, "fail-closed")))
    code, out = run_with_pipes(options, b"{}")
    assert (code, out) == (1, b"")


def test_pairing_is_fifo_per_key(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(rundir.ENV_DIR, str(tmp_path / "rt"))
    pairing.remember("s", "k", "call_1")
    pairing.remember("s", "k", "call_2")
    pairing.remember("s", "other", "call_3")
    assert pairing.recall("s", "k") == "call_1"
    assert pairing.recall("s", "k") == "call_2"
    assert pairing.recall("s", "k") is None
    assert pairing.recall("t", "other") is None  # sessions are separate
    assert pairing.recall("s", "other") == "call_3"

    def remember(i: int) -> None:
        pairing.remember("c", "k", f"call_{i}")

    threads = [threading.Thread(target=remember, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    got = {pairing.recall("c", "k") for _ in range(8)}
    assert got == {f"call_{i}" for i in range(8)}  # the lock kept every entry


def test_runtime_dir_must_be_private(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    private = tmp_path / "private"
    monkeypatch.setenv(rundir.ENV_DIR, str(private))
    assert Path(rundir.runtime_dir()) == private
    assert private.stat().st_mode & 0o777 == 0o700
    os.chmod(private, 0o770)
    with pytest.raises(rundir.UnsafeRuntimeDir):
        rundir.runtime_dir()
    link = tmp_path / "link"
    target = tmp_path / "target"
    target.mkdir(mode=0o700)
    link.symlink_to(target)
    monkeypatch.setenv(rundir.ENV_DIR, str(link))
    with pytest.raises(rundir.UnsafeRuntimeDir):
        rundir.runtime_dir()


def test_daemon_key_depends_on_registration_and_directory() -> None:
    keys = {
        rundir.daemon_key("/a/reg.json", "/p1"),
        rundir.daemon_key("/a/reg.json", "/p2"),
        rundir.daemon_key("/b/reg.json", "/p1"),
    }
    assert len(keys) == 3
    assert rundir.daemon_key("/a/reg.json", "/p1") == rundir.daemon_key("/a/reg.json", "/p1")


def test_client_without_daemon_or_autostart(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(rundir.ENV_DIR, str(tmp_path / "rt"))
    with pytest.raises(client.DaemonUnreachable):
        client.call(
            {"op": "ping"},
            registration=str(tmp_path / "r.json"),
            deadline=time.monotonic() + 2,
            autostart=False,
        )


WATCHDOG_SCRIPT = """
import sys, time
from ahp_adapters import hook

def stuck(*args, **kwargs):
    time.sleep(60)  # a bug or a blocked call inside the hook's own code

hook.handle = stuck
sys.exit(hook.run(hook.HookOptions("cursor", sys.argv[1], event="preToolUse", budget=1.0)))
"""


@pytest.mark.parametrize("policy", ["fail-closed", "fail-open"])
def test_watchdog_answers_when_the_hook_itself_is_stuck(tmp_path: Path, policy: str) -> None:
    import subprocess
    import sys

    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-c", WATCHDOG_SCRIPT, str(registration(tmp_path, policy))],
        input=b"{}",
        capture_output=True,
        timeout=30,
    )
    assert time.monotonic() - started < 10  # not the 60 s sleep
    assert done.returncode == 0
    if policy == "fail-closed":
        assert json.loads(done.stdout) == {
            "permission": "deny",
            "user_message": GENERIC,
            "agent_message": GENERIC,
        }
    else:
        assert done.stdout == b"{}\n"  # Cursor's no effect: empty stdout blocks under failClosed


def test_run_restores_the_callers_alarm(tmp_path: Path) -> None:
    import signal

    def previous(_signum: int, _frame: object) -> None:
        pass

    old = signal.signal(signal.SIGALRM, previous)
    signal.setitimer(signal.ITIMER_REAL, 50.0)
    try:
        options = HookOptions("claude-code", str(registration(tmp_path, "fail-open")), budget=1.0)
        run_with_pipes(options, b"not json")
        assert signal.getsignal(signal.SIGALRM) is previous
        assert 40.0 < signal.getitimer(signal.ITIMER_REAL)[0] <= 50.0
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def test_an_internal_error_is_logged_by_type_and_place_never_its_text(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # An exception's message may quote what it was given (the payload, an env value):
    # the daemon log gets the exception's type and its frames, never its text.
    import anyio
    from ahp_adapters.engine import Engine

    engine = Engine(str(registration(tmp_path, "fail-closed")))
    capabilities = {"effects": ["deny-SECRET42"]}  # makes the dispatcher itself raise
    with caplog.at_level("DEBUG", logger="ahp_adapters"):
        decided = anyio.run(engine.intercept, {"type": "tool.before"}, capabilities, 2.0)
    assert (decided.decision, decided.policy, decided.detail) == (
        "failure",
        "fail-closed",
        "internal error",
    )
    logged = "\n".join(r.getMessage() + (r.exc_text or "") for r in caplog.records)
    assert "intercept failed (DeclarationError)" in logged
    assert "check_declaration" in logged  # where it failed is kept
    assert "must be a standard effect" not in logged
    assert all(r.exc_info is None for r in caplog.records)


def test_a_registration_files_backends_run_in_its_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The installed hook runs in the project's folder, not the registration's: a rules
    # file named relative to the registration is still found (ahp_protocol's load_anchored).
    import sys

    import anyio
    from ahp_adapters.engine import Engine

    home = tmp_path / "policy"
    home.mkdir()
    (home / "rules.toml").write_text(
        '[[rules]]\nreason = "no"\ncode = "com.example.no"\nkind = "shell"\n'
        "[rules.input]\ncommand = 'rm'\n"
    )
    sub = {
        "events": ["tool.before"],
        "mode": "intercept",
        "timeoutMs": 20000,
        "failurePolicy": "fail-closed",
        "content": {"default": "body"},
    }
    args = ["-m", "ahp_backends.cli", "denylist", "--rules", "rules.toml"]
    transport = {"type": "stdio", "command": sys.executable, "args": args}
    hooks = [{"id": "com.example.x", "transport": {**transport, "lifecycle": "persistent"}}]
    hooks[0]["subscriptions"] = [sub]
    (home / "hooks.json").write_text(json.dumps({"protocolVersion": "draft", "hooks": hooks}))
    project = tmp_path / "project"
    project.mkdir()
    monkeypatch.chdir(project)
    event = {
        "id": "evt_anchored",
        "source": "urn:uuid:0f6f3c55-44c1-4a8e-9d0b-2b9c8e6e4a10",
        "type": "tool.before",
        "time": "2026-08-24T08:51:14Z",
        "harness": {"name": "t", "version": "1"},
        "tool": {"name": "Bash", "kind": "shell", "input": {"command": "rm x"}, "origin": "native"},
        "call": {"id": "call_anchored"},
        "path": "native",
    }
    engine = Engine(str(home / "hooks.json"))

    async def main() -> Any:
        try:
            return await engine.intercept(event, {"effects": ["deny"]}, 30.0)
        finally:
            await engine.aclose()

    decided = anyio.run(main)
    assert (decided.decision, decided.reason, decided.synthetic) == ("deny", "no", False)

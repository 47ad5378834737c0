"""The warm daemon: started by the first hook, one per registration, backends kept warm.

Real processes throughout: hook processes start the daemon on first use (a
detached ``python -m ahp_adapters daemon run``), a scripted recorder backend
shows which process answered each call, and the tests stop the daemon, kill
it mid-request, change the registration under it, make its runtime directory
unsafe, and start several hooks at once against a cold daemon.
"""

from __future__ import annotations

import json
import os
import select
import signal
import stat
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

FIXTURES = Path(__file__).parent / "fixtures"
GENERIC = "Required policy backend unavailable."
DENY = [{"type": "deny", "reason": "No.", "code": "com.example.no"}]


def payload(command: str = "ls") -> dict[str, Any]:
    data = json.loads((FIXTURES / "claude-code" / "pre_tool_use.shell.json").read_text())
    body: dict[str, Any] = data["payload"]
    body["tool_input"] = {"command": command}
    return body


def decision(stdout: str) -> str | None:
    if not stdout:
        return None
    return str(json.loads(stdout)["hookSpecificOutput"]["permissionDecisionReason"])


def entries(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def ping(kit: Any) -> dict[str, Any]:
    (sock,) = kit.daemon_sockets()
    return _request(str(sock), {"op": "ping"})


def _request(sock: str, message: dict[str, Any]) -> dict[str, Any]:
    import socket

    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.settimeout(10)
        conn.connect(sock)
        conn.sendall(json.dumps(message).encode() + b"\n")
        data = b""
        while b"\n" not in data:
            chunk = conn.recv(65536)
            if not chunk:
                break
            data += chunk
    answer: dict[str, Any] = json.loads(data) if data else {}
    return answer


def test_daemon_keeps_backends_warm(kit: Any) -> None:
    record = kit.tmp / "record.jsonl"
    registration = kit.registration(kit.recorder(effects=DENY, record=record))
    for _ in range(3):
        done = kit.run_hook("claude-code", payload(), registration, daemon="auto")
        assert decision(done.stdout) == "No."
    log = entries(record)
    starts = [e for e in log if e["event"] == "start"]
    calls = [e for e in log if e["event"] == "message"]
    assert len(starts) == 1 and len(calls) == 3
    assert {c["pid"] for c in calls} == {starts[0]["pid"]}  # one warm backend process
    status = ping(kit)
    assert status["requests"] == 3 and status["registration"] == str(registration.resolve())
    (sock,) = kit.daemon_sockets()
    assert stat.S_IMODE(os.stat(sock).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(kit.runtime).st_mode) == 0o700


def test_without_the_daemon_each_call_starts_the_backends(kit: Any) -> None:
    record = kit.tmp / "record.jsonl"
    registration = kit.registration(kit.recorder(effects=DENY, record=record))
    for _ in range(3):
        assert decision(kit.run_hook("claude-code", payload(), registration).stdout) == "No."
    assert len([e for e in entries(record) if e["event"] == "start"]) == 3
    assert kit.daemon_sockets() == []


def test_daemon_reloads_a_changed_registration(kit: Any) -> None:
    registration = kit.registration(kit.recorder(effects=[]))
    assert kit.run_hook("claude-code", payload(), registration, daemon="auto").stdout == ""
    pid = ping(kit)["pid"]
    kit.registration(kit.recorder(effects=DENY))  # same file, new content
    done = kit.run_hook("claude-code", payload(), registration, daemon="auto")
    assert decision(done.stdout) == "No."
    assert ping(kit)["pid"] == pid
    registration.write_text("{not json")
    done = kit.run_hook("claude-code", payload(), registration, daemon="auto")
    assert decision(done.stdout) == GENERIC  # unreadable: fail-closed


def _start_daemon(
    kit: Any, registration: Path, idle: float
) -> tuple[subprocess.Popen[bytes], Path]:
    sock = kit.runtime / "manual.sock"
    read_fd, write_fd = os.pipe()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "ahp_adapters",
            "daemon",
            "run",
            "--registration",
            str(registration),
            "--socket",
            str(sock),
            "--ready-fd",
            str(write_fd),
            "--idle-timeout",
            str(idle),
        ],
        pass_fds=(write_fd,),
        env=kit.env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    os.close(write_fd)
    try:
        ready, _, _ = select.select([read_fd], [], [], 30)
        assert ready and os.read(read_fd, 64) == b"ready\n"
    finally:
        os.close(read_fd)
    return proc, sock


def test_daemon_exits_when_idle(kit: Any) -> None:
    proc, sock = _start_daemon(kit, kit.registration(kit.recorder(effects=[])), idle=0.5)
    assert proc.wait(timeout=30) == 0
    assert not sock.exists()
    assert b"idle" in proc.stderr.read()  # type: ignore[union-attr]


def test_daemon_exits_on_sigterm_and_closes_backends(kit: Any) -> None:
    record = kit.tmp / "record.jsonl"
    proc, sock = _start_daemon(kit, kit.registration(kit.recorder(effects=[], record=record)), 60)
    event = json.loads(json.dumps(_event()))
    answer = _request(
        str(sock),
        {"op": "intercept", "event": event, "capabilities": {"effects": ["deny"]}, "budget": 5},
    )
    assert answer["ok"] is True and answer["decision"] == "none"
    backend_pid = entries(record)[0]["pid"]
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == 0
    assert not sock.exists()
    with pytest.raises(ProcessLookupError):
        os.kill(backend_pid, 0)  # the backend was closed with the daemon


def _event() -> dict[str, Any]:
    from ahp_adapters import dialects
    from ahp_adapters.events import build_event

    codec = dialects.get("claude-code")
    body = payload()
    return build_event(codec, codec.parse(body, options={}), body)


def test_daemon_answers_bad_requests_without_dying(kit: Any) -> None:
    proc, sock = _start_daemon(kit, kit.registration(kit.recorder(effects=[])), 60)
    try:
        assert _request(str(sock), {"op": "nope"}) == {"ok": False, "error": "unknown op"}
        assert _request(str(sock), {"op": "intercept"}) == {"ok": False, "error": "bad request"}
        assert _request(str(sock), {"op": "ping"})["ok"] is True
    finally:
        _request(str(sock), {"op": "stop"})
        assert proc.wait(timeout=30) == 0


def test_status_and_stop_commands(kit: Any) -> None:
    registration = kit.registration(kit.recorder(effects=[]))
    kit.run_hook("claude-code", payload(), registration, daemon="auto")
    cli = [sys.executable, "-m", "ahp_adapters", "daemon"]
    status = subprocess.run(
        [*cli, "status", "--registration", str(registration)],
        capture_output=True,
        env=kit.env,
        cwd=kit.tmp,
        timeout=30,
    )
    assert status.returncode == 0
    pid = json.loads(status.stdout)["pid"]
    stop = subprocess.run(
        [*cli, "stop", "--registration", str(registration)],
        capture_output=True,
        env=kit.env,
        cwd=kit.tmp,
        timeout=30,
    )
    assert stop.returncode == 0
    fd = os.pidfd_open(pid)
    try:
        assert select.select([fd], [], [], 30)[0]
    except ProcessLookupError:
        pass
    finally:
        os.close(fd)
    gone = subprocess.run(
        [*cli, "status", "--registration", str(registration)],
        capture_output=True,
        env=kit.env,
        cwd=kit.tmp,
        timeout=30,
    )
    assert gone.returncode == 3


@pytest.mark.parametrize("policy", ["fail-closed", "fail-open"])
def test_daemon_killed_mid_request_applies_the_policy(kit: Any, policy: str) -> None:
    fifo = kit.tmp / "record.fifo"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    registration = kit.registration(
        kit.recorder(script=[{"hang": True}], record=fifo, policy=policy, timeout_ms=30000)
    )
    argv = [
        sys.executable,
        "-m",
        "ahp_adapters",
        "hook",
        "claude-code",
        "--registration",
        str(registration),
        "--daemon",
        "require",
        "--budget",
        "20",
    ]
    body = kit.tmp / "payload.json"
    body.write_text(json.dumps(payload()))
    with body.open("rb") as stdin:
        hook = subprocess.Popen(
            argv,
            stdin=stdin,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=kit.env,
            cwd=kit.tmp,
        )
    backend_pid = None
    buffer = b""
    try:
        while backend_pid is None:  # wait for the backend to receive the request
            ready, _, _ = select.select([reader], [], [], 30)
            assert ready, "the backend never got the request"
            buffer += os.read(reader, 65536)
            for line in buffer.splitlines():
                entry = json.loads(line) if line.endswith(b"}") else {}
                if entry.get("event") == "message":
                    backend_pid = entry["pid"]
        daemon_pid = ping(kit)["pid"]
        started = time.monotonic()
        os.kill(daemon_pid, signal.SIGKILL)
        out, _ = hook.communicate(timeout=30)
        assert time.monotonic() - started < 5  # the hook noticed at once, not at its budget
    finally:
        if backend_pid is not None:
            os.kill(backend_pid, signal.SIGKILL)
        os.close(reader)
        if hook.poll() is None:
            hook.kill()
            hook.wait()
    assert hook.returncode == 0
    assert decision(out.decode()) == (GENERIC if policy == "fail-closed" else None)


@pytest.mark.parametrize("policy", ["fail-closed", "fail-open"])
def test_unsafe_runtime_dir(kit: Any, policy: str) -> None:
    os.chmod(kit.runtime, 0o755)
    try:
        registration = kit.registration(kit.recorder(effects=DENY, policy=policy))
        fallback = kit.run_hook("claude-code", payload(), registration, daemon="auto")
        assert decision(fallback.stdout) == "No."  # ran in-process instead
        required = kit.run_hook("claude-code", payload(), registration, daemon="require")
        assert decision(required.stdout) == (GENERIC if policy == "fail-closed" else None)
        assert not list(kit.runtime.iterdir())  # nothing created in an unsafe directory
    finally:
        os.chmod(kit.runtime, 0o700)


def test_concurrent_cold_hooks_start_one_daemon(kit: Any) -> None:
    record = kit.tmp / "record.jsonl"
    registration = kit.registration(kit.recorder(effects=DENY, record=record))
    argv = [
        sys.executable,
        "-m",
        "ahp_adapters",
        "hook",
        "claude-code",
        "--registration",
        str(registration),
        "--daemon",
        "require",
    ]
    hooks = [
        subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=kit.env,
            cwd=kit.tmp,
        )
        for _ in range(4)
    ]
    outputs = [h.communicate(json.dumps(payload()).encode(), timeout=60)[0] for h in hooks]
    assert [decision(o.decode()) for o in outputs] == ["No."] * 4
    assert len(kit.daemon_sockets()) == 1
    assert len([e for e in entries(record) if e["event"] == "start"]) == 1


def test_latency_with_and_without_the_daemon(kit: Any) -> None:
    """Per-call latency of the hook process with a real backend (printed; the daemon must win)."""
    registration = kit.registration(kit.denylist_stdio("persistent"))

    def timed(daemon: str) -> float:
        started = time.perf_counter()
        done = kit.run_hook("claude-code", payload("rm -rf /"), registration, daemon=daemon)
        elapsed = time.perf_counter() - started
        assert decision(done.stdout) == "Recursive deletes are not allowed here."
        return elapsed

    cold = timed("auto")  # starts the daemon and the backend
    warm = [timed("auto") for _ in range(5)]
    direct = [timed("off") for _ in range(3)]
    print(
        f"\nhook latency: daemon cold {cold * 1000:.0f} ms, warm median "
        f"{statistics.median(warm) * 1000:.0f} ms; in-process median "
        f"{statistics.median(direct) * 1000:.0f} ms"
    )
    assert statistics.median(warm) < statistics.median(direct)


def session_start() -> dict[str, Any]:
    data = json.loads((FIXTURES / "claude-code" / "session_start.json").read_text())
    body: dict[str, Any] = data["payload"]
    return body


def wait_for(condition: Any, timeout: float = 30.0) -> bool:
    until = time.monotonic() + timeout
    while time.monotonic() < until:
        if condition():
            return True
        time.sleep(0.02)
    return False


def test_session_start_prepares_the_chain_before_the_first_tool_call(kit: Any) -> None:
    record = kit.tmp / "record.jsonl"
    registration = kit.registration(kit.recorder(effects=DENY, record=record))
    env = {**kit.env, "AHP_ADAPTER_DEBUG": "1"}
    done = kit.run_hook("claude-code", session_start(), registration, daemon="auto", env=env)
    assert done.returncode == 0 and done.stdout == ""
    assert "session start: the daemon is starting" in done.stderr  # it did not wait for it
    # The backend is started with no tool call yet, and nothing was sent to it.
    assert wait_for(lambda: record.exists() and entries(record))
    (started,) = entries(record)
    assert started["event"] == "start"
    done = kit.run_hook("claude-code", payload(), registration, daemon="auto")
    assert decision(done.stdout) == "No."
    assert [e["pid"] for e in entries(record) if e["event"] == "message"] == [started["pid"]]
    # A session start with the daemon running prepares again (a no-op) and starts nothing.
    done = kit.run_hook("claude-code", session_start(), registration, daemon="auto", env=env)
    assert done.returncode == 0 and done.stdout == ""
    assert len([e for e in entries(record) if e["event"] == "start"]) == 1


def test_a_tool_call_right_after_session_start_waits_for_that_daemon(kit: Any) -> None:
    # The session-start hook hands the start lock to the daemon it started: a tool call
    # that comes before the daemon accepts waits for it rather than starting another.
    record = kit.tmp / "record.jsonl"
    registration = kit.registration(kit.recorder(effects=DENY, record=record))
    kit.run_hook("claude-code", session_start(), registration, daemon="auto")
    done = kit.run_hook("claude-code", payload(), registration, daemon="auto")
    assert decision(done.stdout) == "No."
    assert len([e for e in entries(record) if e["event"] == "start"]) == 1
    logs = "".join(path.read_text() for path in kit.runtime.glob("*.log"))
    assert "serving" in logs and "a daemon already serves" not in logs


def test_daemon_off_session_start_starts_nothing(kit: Any) -> None:
    record = kit.tmp / "record.jsonl"
    registration = kit.registration(kit.recorder(effects=DENY, record=record))
    done = kit.run_hook("claude-code", session_start(), registration, daemon="off")
    assert done.returncode == 0 and done.stdout == ""
    assert kit.daemon_sockets() == [] and not record.exists()


def test_qwen_prompt_submit_prepares_the_chain_and_says_nothing(kit: Any) -> None:
    # Headless Qwen sends no SessionStart: its UserPromptSubmit prepares instead, with
    # stdout and stderr empty (Qwen reads plain stderr text as an allow with a message).
    record = kit.tmp / "record.jsonl"
    registration = kit.registration(kit.recorder(effects=DENY, record=record))
    prompt = {
        "session_id": "q1",
        "cwd": str(kit.tmp),
        "hook_event_name": "UserPromptSubmit",
        "prompt": "Run the shell commands you are asked for.",
    }
    done = kit.run_hook("qwen-code", prompt, registration, daemon="auto")
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    assert wait_for(lambda: record.exists() and entries(record))
    assert [e["event"] for e in entries(record)] == ["start"]  # started, nothing sent
    done = kit.run_hook("qwen-code", prompt, registration, daemon="auto")  # warm: a no-op
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    assert [e["event"] for e in entries(record)] == ["start"]

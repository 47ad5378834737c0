"""The warm daemon survives every hostile connection, and a cold start under load is benign.

Real processes throughout (issue 12, item 1):

- a real ``ahp-adapter daemon run`` is sent one hostile connection of each kind
  (connect-then-close, half a line then close, a garbage line, invalid UTF-8,
  JSON nested past the parser's recursion limit, a line past the size limit, a
  slow trickling writer, a client that closes before reading its answer, one
  that closes at once with ``SO_LINGER`` 0); after each, an ordinary request on
  a new connection still gets the right answer and the daemon is still alive;
- 50 real hook processes are started at once against *no* daemon, a mix of
  denied and harmless calls, under a fail-closed and a fail-open registration;
  every answer must equal the answer of the same call run one after another.

No daemon or backend outlives a test: the daemons are stopped and awaited, and
the backends (found by a rules file unique to the test) are checked gone.
"""

from __future__ import annotations

import fcntl
import json
import os
import select
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

FIXTURES = Path(__file__).parent / "fixtures"
REPO = Path(__file__).resolve().parents[3]
RULES = REPO / "examples" / "backends" / "denylist.toml"
RM_RF = "Recursive deletes are not allowed here."
FORCE_PUSH = "Force pushes rewrite shared history."
GENERIC = "Required policy backend unavailable."
SECRET = "sk-live-SECRET-do-not-log"
WAIT_S = 30.0


def payload(command: str) -> dict[str, Any]:
    data = json.loads((FIXTURES / "claude-code" / "pre_tool_use.shell.json").read_text())
    body: dict[str, Any] = data["payload"]
    body["tool_input"] = {"command": command}
    return body


def reason(stdout: bytes) -> str | None:
    """The Claude Code deny reason, or ``None`` for the empty (no decision) answer."""
    if not stdout:
        return None
    return str(json.loads(stdout)["hookSpecificOutput"]["permissionDecisionReason"])


def intercept_request(command: str) -> dict[str, Any]:
    from ahp_adapters import dialects
    from ahp_adapters.events import build_event

    codec = dialects.get("claude-code")
    body = payload(command)
    event = build_event(codec, codec.parse(body, options={}), body)
    return {
        "op": "intercept",
        "event": json.loads(json.dumps(event)),
        "capabilities": codec.capabilities("PreToolUse"),
        "budget": 10,
    }


def connect(path: Path) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(WAIT_S)
    sock.connect(os.fspath(path))
    return sock


def read_line(sock: socket.socket) -> bytes:
    data = b""
    while b"\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            break
        data += chunk
    return data


def request(path: Path, message: dict[str, Any]) -> dict[str, Any]:
    with connect(path) as sock:
        sock.sendall(json.dumps(message).encode() + b"\n")
        data = read_line(sock)
    assert data.endswith(b"\n"), f"the daemon closed without a complete answer: {data!r}"
    answer: dict[str, Any] = json.loads(data)
    return answer


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            state = handle.read().rsplit(b")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != b"Z"


def processes_mentioning(marker: str) -> list[int]:
    """Pids whose command line contains ``marker`` (how a test finds its own backends)."""
    found = []
    needle = marker.encode()
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as handle:
                if needle in handle.read() and alive(int(entry)):
                    found.append(int(entry))
        except OSError:
            continue
    return found


def wait_gone(pid: int, timeout: float = WAIT_S) -> bool:
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    try:
        ready, _, _ = select.select([fd], [], [], timeout)
        return bool(ready) or not alive(pid)
    finally:
        os.close(fd)


class Sandbox:
    """A private runtime directory, a rules file of our own, registrations, hook processes."""

    def __init__(self, tmp: Path, runtime: Path) -> None:
        self.tmp = tmp
        self.runtime = runtime
        self.rules = tmp / "rules.toml"
        shutil.copyfile(RULES, self.rules)  # its path marks this test's backends in /proc
        bindir = os.path.dirname(sys.executable)
        self.env = {
            **os.environ,
            "AHP_ADAPTER_RUNTIME_DIR": str(runtime),
            "PATH": f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}",
            "HOME": str(tmp),
        }
        self.env.pop("AHP_ADAPTER_DEBUG", None)
        self.daemons: list[subprocess.Popen[bytes]] = []
        self.daemon_log = tmp / "daemon.log"

    def registration(self, policy: str) -> Path:
        path = self.tmp / f"registration-{policy}.json"
        args = ["-m", "ahp_backends.cli", "denylist", "--rules", str(self.rules)]
        hook = {
            "id": "com.example.ahp.denylist",
            "transport": {
                "type": "stdio",
                "command": sys.executable,
                "args": args,
                "lifecycle": "persistent",
            },
            "subscriptions": [
                {
                    "events": ["tool.before"],
                    "mode": "intercept",
                    "timeoutMs": 10000,
                    "failurePolicy": policy,
                    "content": {"default": "body"},
                }
            ],
        }
        path.write_text(json.dumps({"protocolVersion": "draft", "hooks": [hook]}))
        return path

    def start_daemon(
        self, registration: Path, name: str = "hostile.sock"
    ) -> tuple[subprocess.Popen[bytes], Path]:
        """``ahp-adapter daemon run`` on a socket of ours; returns once it said "ready"."""
        sock = self.runtime / name
        read_fd, write_fd = os.pipe()
        with self.daemon_log.open("ab") as log:  # a file, as the hook gives it: never a full pipe
            proc = subprocess.Popen(
                [
                    *(sys.executable, "-m", "ahp_adapters", "daemon", "run"),
                    *("--registration", str(registration), "--socket", str(sock)),
                    *("--ready-fd", str(write_fd), "--idle-timeout", "120"),
                ],
                pass_fds=(write_fd,),
                env=self.env,
                cwd=self.tmp,
                stdout=subprocess.DEVNULL,
                stderr=log,
            )
        self.daemons.append(proc)
        os.close(write_fd)
        try:
            ready, _, _ = select.select([read_fd], [], [], WAIT_S)
            assert ready and os.read(read_fd, 64) == b"ready\n", "the daemon never became ready"
        finally:
            os.close(read_fd)
        return proc, sock

    def hook_argv(self, registration: Path, *args: str) -> list[str]:
        return [
            *(sys.executable, "-m", "ahp_adapters", "hook", "claude-code"),
            *("--registration", str(registration), "--idle-timeout", "120", *args),
        ]

    def daemon_files(self, registration: Path) -> tuple[Path, Path]:
        """(socket, start lock) a hook run in ``self.tmp`` uses for ``registration``."""
        from ahp_adapters.rundir import daemon_key

        key = daemon_key(os.path.realpath(registration), str(self.tmp))
        return self.runtime / f"d-{key}.sock", self.runtime / f"d-{key}.lock"

    def stop_daemons(self) -> None:
        """Stop every daemon serving in the runtime directory and wait until it is gone."""
        for sock in sorted(self.runtime.glob("*.sock")):
            try:
                pid = request(sock, {"op": "ping"})["pid"]
                request(sock, {"op": "stop"})
            except (OSError, ValueError, KeyError, AssertionError):
                continue
            assert wait_gone(pid), f"daemon {pid} did not exit after stop"
        for proc in self.daemons:
            if proc.poll() is None:
                proc.kill()
            proc.wait(timeout=WAIT_S)

    def close(self) -> None:
        self.stop_daemons()
        leaked = [pid for pid in processes_mentioning(str(self.runtime)) if not wait_gone(pid)]
        backends = [pid for pid in processes_mentioning(str(self.rules)) if not wait_gone(pid)]
        for pid in leaked + backends:
            os.kill(pid, 9)
        assert not leaked, f"daemon processes outlived the test: {leaked}"
        assert not backends, f"backend processes outlived the test: {backends}"


@pytest.fixture
def sandbox(tmp_path: Path) -> Iterator[Sandbox]:
    runtime = Path(tempfile.mkdtemp(prefix="ahph-", dir="/tmp"))  # short: Unix socket paths
    os.chmod(runtime, 0o700)
    box = Sandbox(tmp_path, runtime)
    try:
        yield box
    finally:
        try:
            box.close()
        finally:
            shutil.rmtree(runtime, ignore_errors=True)


# -- hostile connections --------------------------------------------------------------


def _connect_then_close(sock: Path) -> None:
    connect(sock).close()


def _half_line_then_close(sock: Path) -> None:
    with connect(sock) as conn:
        conn.sendall(b'{"op": "ping", "token": "' + SECRET.encode())


def _garbage_line(sock: Path) -> None:
    with connect(sock) as conn:
        conn.sendall(b"\x00\x01 not json at all }{ " + SECRET.encode() + b"\n")
        assert json.loads(read_line(conn)) == {"ok": False, "error": "unreadable request"}


def _invalid_utf8(sock: Path) -> None:
    with connect(sock) as conn:
        conn.sendall(b'{"op": "ping\xff\xfe", "token": "' + SECRET.encode() + b'"}\n')
        assert json.loads(read_line(conn)) == {"ok": False, "error": "unreadable request"}


def _nested_past_the_recursion_limit(sock: Path) -> None:
    with connect(sock) as conn:
        conn.sendall(b"[" * 200_000 + b"\n")
        assert json.loads(read_line(conn)) == {"ok": False, "error": "unreadable request"}


def _nested_event(sock: Path) -> None:
    depth = 900  # parses (under the recursion limit), then strains whatever walks it
    message = intercept_request("ls")
    message["event"]["tool"]["input"] = {"command": "ls", "token": SECRET, "deep": "@DEEP@"}
    deep = '{"a":' * depth + '"x"' + "}" * depth
    line = json.dumps(message).replace('"@DEEP@"', deep).encode() + b"\n"
    with connect(sock) as conn:
        conn.sendall(line)
        answer = json.loads(read_line(conn))
    # Whatever the engine makes of it, the connection gets a well-formed answer.
    assert isinstance(answer, dict) and "ok" in answer


def _too_long_a_line(sock: Path) -> None:
    with connect(sock) as conn:
        chunk = b"x" * (1024 * 1024)
        try:
            for _ in range(9):  # past MAX_REQUEST_BYTES (8 MiB), never a newline
                conn.sendall(chunk)
        except OSError:
            return  # the daemon refused and closed: fine
        conn.shutdown(socket.SHUT_WR)
        assert json.loads(read_line(conn)) == {"ok": False, "error": "unreadable request"}


def _slow_trickling_writer(sock: Path) -> None:
    line = json.dumps({"op": "ping"}).encode() + b"\n"
    with connect(sock) as slow:
        slow.sendall(line[:3])
        # While one connection trickles, another is served at once.
        assert request(sock, intercept_request("rm -rf /"))["reason"] == RM_RF
        for byte in line[3:]:
            slow.sendall(bytes([byte]))
            time.sleep(0.01)  # pacing the trickle, not waiting for readiness
        assert json.loads(read_line(slow))["ok"] is True


def _closes_before_reading_the_answer(sock: Path) -> None:
    with connect(sock) as conn:
        conn.sendall(json.dumps(intercept_request("rm -rf /")).encode() + b"\n")


def _reset_with_linger_zero(sock: Path) -> None:
    conn = connect(sock)
    conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    conn.sendall(json.dumps(intercept_request("ls")).encode() + b"\n")
    conn.close()


def _many_at_once(sock: Path) -> None:
    conns = [connect(sock) for _ in range(64)]
    for conn in conns:
        conn.close()


HOSTILE = {
    "connect-then-close": _connect_then_close,
    "half-line-then-close": _half_line_then_close,
    "garbage-line": _garbage_line,
    "invalid-utf8": _invalid_utf8,
    "nested-json": _nested_past_the_recursion_limit,
    "nested-event": _nested_event,
    "too-long-line": _too_long_a_line,
    "slow-trickling-writer": _slow_trickling_writer,
    "closes-before-answer": _closes_before_reading_the_answer,
    "linger-zero-reset": _reset_with_linger_zero,
    "many-connect-then-close": _many_at_once,
}


def test_no_hostile_connection_ends_the_daemon(sandbox: Sandbox) -> None:
    proc, sock = sandbox.start_daemon(sandbox.registration("fail-closed"))
    assert request(sock, intercept_request("rm -rf /"))["reason"] == RM_RF
    for name, hostile in HOSTILE.items():
        hostile(sock)
        assert proc.poll() is None, f"the daemon died after a {name} connection"
        denied = request(sock, intercept_request("rm -rf /"))
        assert (denied["ok"], denied["decision"], denied["reason"]) == (True, "deny", RM_RF), name
        harmless = request(sock, intercept_request("ls -la"))
        assert (harmless["ok"], harmless["decision"]) == (True, "none"), name
        assert proc.poll() is None, f"the daemon died after a {name} connection"
    status = request(sock, {"op": "ping"})
    assert status["ok"] is True and status["pid"] == proc.pid
    request(sock, {"op": "stop"})
    assert proc.wait(timeout=WAIT_S) == 0
    log = sandbox.daemon_log.read_text("utf-8", "replace")
    assert SECRET not in log, "the daemon's log repeats what a connection sent"


# -- the cold-start race ----------------------------------------------------------------

COMMANDS = ["rm -rf /", "ls -la", "git push --force origin main", "cat README.md", "rm -rf ~"]
N_HOOKS = 50


def _run_all_at_once(sandbox: Sandbox, registration: Path, calls: list[str]) -> list[bytes]:
    inputs = []
    for index, command in enumerate(calls):
        path = sandbox.tmp / f"payload-{index}.json"
        path.write_text(json.dumps(payload(command)))
        inputs.append(path)
    hooks = []
    for path in inputs:
        with path.open("rb") as stdin:
            hooks.append(
                subprocess.Popen(
                    # A budget no machine load exhausts: what is tested is the race, not speed.
                    sandbox.hook_argv(registration, "--budget", "20"),
                    stdin=stdin,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    env=sandbox.env,
                    cwd=sandbox.tmp,
                )
            )
    outputs = []
    try:
        for hook in hooks:
            out, _err = hook.communicate(timeout=WAIT_S)
            assert hook.returncode == 0
            outputs.append(out)
    finally:
        for hook in hooks:
            if hook.poll() is None:
                hook.kill()
                hook.communicate()
    return outputs


def _run_one_after_another(sandbox: Sandbox, registration: Path, calls: list[str]) -> list[bytes]:
    outputs = []
    for command in calls:
        done = subprocess.run(
            sandbox.hook_argv(registration, "--budget", "20"),
            input=json.dumps(payload(command)).encode(),
            capture_output=True,
            env=sandbox.env,
            cwd=sandbox.tmp,
            timeout=WAIT_S,
        )
        assert done.returncode == 0
        outputs.append(done.stdout)
    return outputs


@pytest.mark.parametrize("policy", ["fail-closed", "fail-open"])
def test_hooks_started_together_against_no_daemon_answer_as_one_after_another(
    sandbox: Sandbox, policy: str
) -> None:
    registration = sandbox.registration(policy)
    calls = [COMMANDS[i % len(COMMANDS)] for i in range(N_HOOKS)]
    assert not list(sandbox.runtime.glob("*.sock"))  # no daemon: the first hooks race to start it
    together = [reason(out) for out in _run_all_at_once(sandbox, registration, calls)]
    sockets = list(sandbox.runtime.glob("*.sock"))
    served = [request(sock, {"op": "ping"})["requests"] for sock in sockets]
    sandbox.stop_daemons()
    # One after another (the first starts a fresh daemon, the rest find it warm). A call's
    # answer depends on its payload alone, so each distinct call is run once, in order.
    answers = _run_one_after_another(sandbox, registration, COMMANDS)
    sequential = dict(zip(COMMANDS, answers, strict=True))
    expected = {"rm -rf /": RM_RF, "rm -rf ~": RM_RF, "git push --force origin main": FORCE_PUSH}
    assert {c: reason(out) for c, out in sequential.items()} == {
        c: expected.get(c) for c in COMMANDS
    }
    wrong = [
        (index, command, got, reason(sequential[command]))
        for index, (command, got) in enumerate(zip(calls, together, strict=True))
        if got != reason(sequential[command])
    ]
    assert not wrong, (
        f"{len(wrong)} of {N_HOOKS} hooks started together answered otherwise than one after "
        f"another (index, call, together, one after another): {wrong}"
    )
    assert len(sockets) == 1, f"expected one daemon, found {sockets}"
    assert served[0] <= N_HOOKS  # a liveness probe is not a request


# -- a hook waits for the daemon another hook is starting --------------------------------


def _wait_until_open(pid: int, path: Path) -> None:
    """Until process ``pid`` has ``path`` open (a bounded poll of /proc: a signal, no guess)."""
    until = time.monotonic() + WAIT_S
    while time.monotonic() < until:
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except FileNotFoundError:
            raise AssertionError("the hook exited before it waited for the start lock") from None
        for fd in fds:
            try:
                if os.readlink(f"/proc/{pid}/fd/{fd}") == str(path):
                    return
            except OSError:
                continue
        time.sleep(0.01)
    raise AssertionError(f"the hook never opened {path}")


@pytest.mark.parametrize("mode", ["require", "auto"])
def test_a_hook_waits_for_the_daemon_another_hook_is_starting(sandbox: Sandbox, mode: str) -> None:
    """The test plays the hook that holds the start lock while its daemon takes a long
    time to start; the hook under test must wait for that daemon, not give up (and fail,
    or run all its backends itself) after a few seconds."""
    registration = sandbox.registration("fail-closed")
    sock, lock_path = sandbox.daemon_files(registration)
    lock = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        daemon, staged = sandbox.start_daemon(registration)  # ready, but not yet where hooks look
        body = sandbox.tmp / "payload.json"
        body.write_text(json.dumps(payload("rm -rf /")))
        with body.open("rb") as stdin:
            hook = subprocess.Popen(
                sandbox.hook_argv(registration, "--daemon", mode, "--budget", "20"),
                stdin=stdin,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=sandbox.env,
                cwd=sandbox.tmp,
            )
        try:
            _wait_until_open(hook.pid, lock_path)  # it found no daemon and waits for the lock
            with pytest.raises(subprocess.TimeoutExpired):
                hook.wait(timeout=4.0)  # longer than a hook used to wait (3 s): still waiting
            os.rename(staged, sock)  # the daemon "became ready": its socket is in place
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
        out, _err = hook.communicate(timeout=WAIT_S)
    finally:
        os.close(lock)
    assert hook.returncode == 0
    assert reason(out) == RM_RF
    assert request(sock, {"op": "ping"})["requests"] == 1  # answered by the daemon it waited for
    assert daemon.poll() is None


# -- one daemon per socket ----------------------------------------------------------------


def test_a_second_daemon_on_the_same_socket_leaves_the_first_serving(sandbox: Sandbox) -> None:
    registration = sandbox.registration("fail-closed")
    first, sock = sandbox.start_daemon(registration)
    second, same = sandbox.start_daemon(registration)  # "ready": the first one serves
    assert same == sock
    assert second.wait(timeout=WAIT_S) == 0
    assert first.poll() is None, "checking for a live daemon ended it"
    status = request(sock, {"op": "ping"})
    assert status["pid"] == first.pid
    assert request(sock, intercept_request("rm -rf /"))["reason"] == RM_RF
    request(sock, {"op": "stop"})
    assert first.wait(timeout=WAIT_S) == 0
    assert not sock.exists()
    third, again = sandbox.start_daemon(registration)  # after the first: a fresh one serves
    assert request(again, {"op": "ping"})["pid"] == third.pid

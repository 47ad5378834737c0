"""The thin hook client: the warm path imports next to nothing and keeps every promise.

- warm: ``ahp-adapter hook`` with a running daemon imports only ``os``-level
  modules (checked against a baseline interpreter), and answers byte for byte
  what the full hook answers in-process;
- a daemon that takes the frame and answers garbage, or dies, is not asked
  again: the failure policy decides, once;
- the daemon survives frames that lie about their lengths;
- usage errors exit 1 (non-blocking everywhere) and say what to fix.

Real hook processes, a real daemon, the real deny-list backend.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

FIXTURES = Path(__file__).parent / "fixtures"
GENERIC = "Required policy backend unavailable."
ALLOWED_ON_THE_WARM_PATH = {
    "__future__",
    "_sha2",
    "_sha256",
    "_socket",
    "select",
    "ahp_adapters",
    "ahp_adapters.cli",
    "ahp_adapters.frame",
    "ahp_adapters.invocation",
    "ahp_adapters.rundir",
    "ahp_adapters.thin",
    # The kit's version (the daemon's key): the protocol package's bare init and _version.
    "ahp_protocol",
    "ahp_protocol._version",
}
IMPORTS_SCRIPT = """
import sys
before = set(sys.modules)
from ahp_adapters.cli import main
code = main(sys.argv[2:])
with open(sys.argv[1], "w") as out:
    out.write("\\n".join(sorted(set(sys.modules) - before)))
sys.exit(code)
"""


def shell_payload(command: str = "rm -rf /") -> dict[str, Any]:
    payload: dict[str, Any] = json.loads(
        (FIXTURES / "claude-code/pre_tool_use.shell.json").read_text()
    )
    payload = payload.get("payload", payload)
    payload["tool_input"] = {"command": command}
    return payload


def hook_imports(kit: Any, registration: Path, daemon: str) -> tuple[str, set[str]]:
    listing = kit.tmp / f"modules-{daemon}.txt"
    argv = [sys.executable, "-c", IMPORTS_SCRIPT, str(listing), "hook", "claude-code"]
    argv += ["--registration", str(registration), "--daemon", daemon, "--idle-timeout", "120"]
    done = subprocess.run(
        argv,
        input=json.dumps(shell_payload()).encode(),
        capture_output=True,
        env=kit.env,
        cwd=kit.tmp,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.decode(), set(listing.read_text().split())


def test_the_warm_path_imports_only_os_level_modules(kit: Any) -> None:
    registration = kit.registration(kit.denylist_stdio())
    warmed = kit.run_hook("claude-code", shell_payload(), registration, daemon="auto")
    assert '"deny"' in warmed.stdout  # the first call starts the daemon
    stdout, modules = hook_imports(kit, registration, "auto")
    assert '"deny"' in stdout
    assert modules <= ALLOWED_ON_THE_WARM_PATH, sorted(modules - ALLOWED_ON_THE_WARM_PATH)
    # The same measurement sees the heavy imports of the in-process chain: it can fail.
    _, in_process = hook_imports(kit, registration, "off")
    assert {"json", "ahp_protocol", "pydantic", "anyio"} <= in_process


@pytest.mark.parametrize(
    "case",
    ["deny", "no effect", "malformed payload", "unknown event"],
)
def test_the_warm_path_answers_byte_for_byte_like_the_full_hook(kit: Any, case: str) -> None:
    registration = kit.registration(kit.denylist_stdio())
    payload: Any = shell_payload("rm -rf /" if case == "deny" else "ls")
    if case == "malformed payload":
        payload = b"{not json"
    if case == "unknown event":
        payload = {**shell_payload(), "hook_event_name": "Notification"}
    kit.run_hook("claude-code", shell_payload("ls"), registration, daemon="auto")  # warm it
    warm = kit.run_hook(
        "claude-code", payload, registration, "--event", "PreToolUse", daemon="auto"
    )
    full = kit.run_hook("claude-code", payload, registration, "--event", "PreToolUse", daemon="off")
    assert (warm.returncode, warm.stdout, warm.stderr) == (
        full.returncode,
        full.stdout,
        full.stderr,
    )
    if case == "deny":
        assert json.loads(warm.stdout)["hookSpecificOutput"]["permissionDecision"] == "deny"
    assert len(kit.daemon_sockets()) == 1


class GarbageDaemon:
    """A process-local stand-in at the daemon's socket: reads a request, answers junk."""

    def __init__(self, path: Path, answer: bytes) -> None:
        self.connections = 0
        self.server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.server.bind(str(path))
        self.server.listen(8)
        self.answer = answer
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            with conn:
                self.connections += 1
                conn.settimeout(10)
                data = b""
                while b"\n" not in data:
                    chunk = conn.recv(65536)
                    if not chunk:
                        break
                    data += chunk
                if self.answer:
                    conn.sendall(self.answer)

    def close(self) -> None:
        self.server.close()


@pytest.mark.parametrize("policy", ["fail-closed", "fail-open"])
@pytest.mark.parametrize("junk", [b"garbage\n", b"answer 0 999 0\n{}", b""])
def test_a_daemon_that_fails_a_frame_applies_the_policy_without_a_retry(
    kit: Any, policy: str, junk: bytes
) -> None:
    from ahp_adapters.rundir import daemon_key

    registration = kit.registration(kit.denylist_stdio(policy=policy))
    key = daemon_key(os.path.realpath(registration), str(kit.tmp))
    fake = GarbageDaemon(kit.runtime / f"d-{key}.sock", junk)
    try:
        done = kit.run_hook("claude-code", shell_payload("ls"), registration, daemon="auto")
    finally:
        fake.close()
    assert done.returncode == 0
    if policy == "fail-closed":
        body = json.loads(done.stdout)["hookSpecificOutput"]
        assert (body["permissionDecision"], body["permissionDecisionReason"]) == ("deny", GENERIC)
    else:
        assert done.stdout == ""
    assert fake.connections == 1  # the request may have reached backends: never sent twice


@pytest.mark.parametrize(
    "frame",
    [
        b"hook 1 999999999 0\n",  # larger than the daemon accepts
        b"hook 1 5 0\nab",  # closes before the head is complete
        b"hook 1 abc 0\n",  # lengths that are not numbers
        b"hook 2 1 1\nab",  # a version this daemon does not speak
        b"hook 1 3 0\nx\x00y",  # a head without a budget
    ],
)
def test_the_daemon_survives_malformed_frames(kit: Any, frame: bytes) -> None:
    registration = kit.registration(kit.denylist_stdio())
    kit.run_hook("claude-code", shell_payload("ls"), registration, daemon="auto")
    (sock_path,) = kit.daemon_sockets()
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(20)
        sock.connect(str(sock_path))
        sock.sendall(frame)
        sock.shutdown(socket.SHUT_WR)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    assert not answer.startswith(b"answer ")  # nothing was run for it
    again = kit.run_hook("claude-code", shell_payload(), registration, daemon="auto")
    assert json.loads(again.stdout)["hookSpecificOutput"]["permissionDecision"] == "deny"
    assert len(kit.daemon_sockets()) == 1  # the same daemon served it


@pytest.mark.parametrize(
    ("args", "says"),
    [
        ((), "--registration"),
        (("--registration",), "--registration: expected one argument"),
        (("--registration", "r.json", "--budget", "soon"), "--budget: expected seconds"),
        (("--registration", "r.json", "--budget=9999"), "between 0.1 and 600"),
        (("--registration", "r.json", "--daemon", "maybe"), "--daemon: invalid choice"),
        (("--registration", "r.json", "--frobnicate"), "unrecognized argument: --frobnicate"),
    ],
)
def test_usage_errors_exit_1_and_say_what_to_fix(
    kit: Any, args: tuple[str, ...], says: str
) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "ahp_adapters", "hook", "claude-code", *args],
        input=b"{}",
        capture_output=True,
        env=kit.env,
        cwd=kit.tmp,
        timeout=60,
    )
    assert done.returncode == 1
    assert done.stdout == b""
    assert says in done.stderr.decode()
    assert "usage: ahp-adapter hook DIALECT --registration FILE" in done.stderr.decode()


def test_options_in_equals_form(kit: Any) -> None:
    registration = kit.registration(kit.denylist_stdio())
    argv = [sys.executable, "-m", "ahp_adapters", "hook", "claude-code"]
    argv += [f"--registration={registration}", "--budget=5", "--daemon=off"]
    done = subprocess.run(
        argv,
        input=json.dumps(shell_payload()).encode(),
        capture_output=True,
        env=kit.env,
        cwd=kit.tmp,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["hookSpecificOutput"]["permissionDecision"] == "deny"

"""Shared fixtures for the adapter tests: real hook processes, real backends, real daemons.

- ``kit`` -> :class:`Kit`: a private runtime directory (short, under /tmp: Unix
  socket paths are limited), the environment hook processes run with,
  registration writers, backend entries (our deny-list over stdio persistent,
  per_event and HTTP; the protocol package's scripted ``recorder.py``), and
  ``run_hook(...)`` that runs ``python -m ahp_adapters hook ...`` as a process.
  At teardown every daemon started in the runtime directory is stopped and
  awaited, and every HTTP backend is stopped.
- ``FIXTURES`` and the native payload fixtures are read by the test modules
  themselves (``--import-mode=importlib``: modules cannot import this file).

Waits are on signals (a "listening on" stderr line, a process exit through a
pidfd, a daemon's answer), never on sleeps; every wait is bounded.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import select
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

PY = sys.executable
REPO = Path(__file__).resolve().parents[3]
DENYLIST_RULES = REPO / "examples" / "backends" / "denylist.toml"
PROTOCOL_BACKENDS = REPO / "packages" / "protocol" / "tests" / "backends"
RECORDER = PROTOCOL_BACKENDS / "recorder.py"
KIT_DENYLIST = PROTOCOL_BACKENDS / "kit_denylist.py"
DEADLINE = 30.0


def wait_pid_exit(pid: int, timeout: float = DEADLINE) -> bool:
    """Wait for ``pid`` (not our child) to exit, on a pidfd; ``True`` once it has."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    try:
        ready, _, _ = select.select([fd], [], [], timeout)
        return bool(ready)
    finally:
        os.close(fd)


def daemon_request(
    sock_path: str, message: dict[str, Any], timeout: float = 10.0
) -> dict[str, Any]:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout)
        sock.connect(sock_path)
        sock.sendall(json.dumps(message).encode() + b"\n")
        data = b""
        while b"\n" not in data:
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
    answer: dict[str, Any] = json.loads(data)
    return answer


class HttpDenylist:
    """``ahp-backend denylist --http 127.0.0.1:0``; ``url`` read from its stderr line."""

    def __init__(self, rules: Path, env: dict[str, str]) -> None:
        self.proc = subprocess.Popen(
            [
                PY,
                "-m",
                "ahp_backends.cli",
                "denylist",
                "--rules",
                str(rules),
                "--http",
                "127.0.0.1:0",
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            env=env,
        )
        lines: queue.Queue[bytes | None] = queue.Queue()

        def pump() -> None:
            assert self.proc.stderr is not None
            for raw in iter(self.proc.stderr.readline, b""):
                lines.put(raw)
            lines.put(None)

        threading.Thread(target=pump, daemon=True).start()
        deadline = time.monotonic() + DEADLINE
        while True:
            line = lines.get(timeout=max(deadline - time.monotonic(), 0.01))
            if line is None:
                raise AssertionError("the HTTP deny-list backend exited before listening")
            text = line.decode("utf-8", "replace")
            if "listening on http://" in text:
                self.url = text.split("listening on ", 1)[1].strip() + "/"
                break

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)


class Kit:
    """Everything a process-level adapter test needs (see the module docstring)."""

    def __init__(self, tmp_path: Path, runtime: Path) -> None:
        self.tmp = tmp_path
        self.runtime = runtime
        bindir = os.path.dirname(PY)
        self.env = {
            **os.environ,
            "AHP_ADAPTER_RUNTIME_DIR": str(runtime),
            "PATH": f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}",
            "HOME": str(tmp_path / "home"),
        }
        self.env.pop("AHP_ADAPTER_DEBUG", None)
        self.http_backends: list[HttpDenylist] = []

    # -- registrations -------------------------------------------------------------

    @staticmethod
    def intercept(
        policy: str = "fail-closed", timeout_ms: int = 5000, **extra: Any
    ) -> dict[str, Any]:
        return {
            "events": ["tool.before"],
            "mode": "intercept",
            "timeoutMs": timeout_ms,
            "failurePolicy": policy,
            "content": {"default": "body"},
            **extra,
        }

    @staticmethod
    def observe(events: Sequence[str] = ("*",)) -> dict[str, Any]:
        return {"events": list(events), "mode": "observe", "content": {"default": "body"}}

    def denylist_stdio(
        self,
        lifecycle: str = "persistent",
        *,
        policy: str = "fail-closed",
        rules: Path | None = None,
    ) -> dict[str, Any]:
        args = ["-m", "ahp_backends.cli", "denylist", "--rules", str(rules or DENYLIST_RULES)]
        if lifecycle == "per_event":
            args.append("--once")
        return {
            "id": "com.example.ahp.denylist",
            "transport": {"type": "stdio", "command": PY, "args": args, "lifecycle": lifecycle},
            "subscriptions": [self.intercept(policy)],
        }

    def denylist_http(
        self, *, policy: str = "fail-closed", rules: Path | None = None
    ) -> dict[str, Any]:
        server = HttpDenylist(rules or DENYLIST_RULES, self.env)
        self.http_backends.append(server)
        return {
            "id": "com.example.ahp.denylist",
            "transport": {"type": "http", "url": server.url},
            "subscriptions": [self.intercept(policy)],
        }

    def recorder(
        self,
        *,
        effects: list[dict[str, Any]] | None = None,
        script: list[dict[str, Any]] | None = None,
        policy: str = "fail-closed",
        timeout_ms: int = 5000,
        record: Path | None = None,
        lifecycle: str = "persistent",
        hook_id: str = "com.example.recorder",
        subscriptions: list[dict[str, Any]] | None = None,
    ) -> dict[str, Any]:
        args = [str(RECORDER)]
        if effects is not None:
            args += ["--effects", json.dumps(effects)]
        if script is not None:
            args += ["--script", json.dumps(script)]
        if record is not None:
            args += ["--record", str(record)]
        if lifecycle == "per_event":
            args.append("--once")
        return {
            "id": hook_id,
            "transport": {"type": "stdio", "command": PY, "args": args, "lifecycle": lifecycle},
            "subscriptions": subscriptions
            if subscriptions is not None
            else [self.intercept(policy, timeout_ms)],
        }

    def registration(self, *hooks: dict[str, Any], name: str = "registration.json") -> Path:
        path = self.tmp / name
        path.write_text(json.dumps({"protocolVersion": "draft", "hooks": list(hooks)}))
        return path

    # -- the hook process ----------------------------------------------------------

    def run_hook(
        self,
        dialect: str,
        payload: bytes | str | dict[str, Any],
        registration: Path,
        *args: str,
        daemon: str = "off",
        timeout: float = DEADLINE,
        env: dict[str, str] | None = None,
    ) -> subprocess.CompletedProcess[str]:
        if isinstance(payload, dict):
            payload = json.dumps(payload)
        if isinstance(payload, str):
            payload = payload.encode("utf-8")
        argv = [
            PY,
            "-m",
            "ahp_adapters",
            "hook",
            dialect,
            "--registration",
            str(registration),
            "--daemon",
            daemon,
            "--idle-timeout",
            "120",
            *args,
        ]
        done = subprocess.run(
            argv,
            input=payload,
            capture_output=True,
            timeout=timeout,
            env=env or self.env,
            cwd=self.tmp,
        )
        return subprocess.CompletedProcess(
            done.args, done.returncode, done.stdout.decode("utf-8"), done.stderr.decode("utf-8")
        )

    def daemon_sockets(self) -> list[Path]:
        return sorted(self.runtime.glob("d-*.sock"))

    def stop_daemons(self) -> None:
        for sock in self.daemon_sockets():
            try:
                pid = daemon_request(str(sock), {"op": "ping"})["pid"]
                daemon_request(str(sock), {"op": "stop"})
            except (OSError, ValueError, KeyError):
                continue
            assert wait_pid_exit(pid), f"daemon {pid} did not exit after stop"

    def close(self) -> None:
        self.stop_daemons()
        for server in self.http_backends:
            server.stop()


@pytest.fixture
def kit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Kit]:
    runtime = Path(tempfile.mkdtemp(prefix="ahpa-", dir="/tmp"))
    os.chmod(runtime, 0o700)
    (tmp_path / "home").mkdir()
    monkeypatch.setenv("AHP_ADAPTER_RUNTIME_DIR", str(runtime))
    kit = Kit(tmp_path, runtime)
    try:
        yield kit
    finally:
        kit.close()
        with contextlib.suppress(OSError):
            shutil.rmtree(runtime)


@pytest.fixture
def homes_env(kit: Kit) -> dict[str, str]:
    """``kit.env`` with every harness home in the tmp folder (``CODEX_HOME``,
    ``COPILOT_HOME``; ``HOME`` already is), and an empty ``project`` folder beside them:
    for tests of ``install`` and ``doctor`` that touch the harnesses' own config."""
    homes = {"CODEX_HOME": kit.tmp / "codex-home", "COPILOT_HOME": kit.tmp / "copilot-home"}
    for folder in homes.values():
        folder.mkdir()
    (kit.tmp / "project").mkdir()
    return {**kit.env, **{name: str(path) for name, path in homes.items()}}

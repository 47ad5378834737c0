"""Claude Code http hooks: ``ahp-adapter serve`` answers them on loopback, behind a secret.

A real ``serve`` process (uvicorn on 127.0.0.1) with the real deny-list backend
behind it; requests over real loopback HTTP:

- the body of a 200 is byte for byte what the command hook writes on stdout;
- without the per-install secret header, or with a wrong one: 401, nothing run;
- anything but ``POST /claude-code/<Event>`` and oversize bodies are refused;
- a non-loopback address, a missing or world-readable secret file: refused at start;
- ``install --transport http`` refuses a registration with a fail-closed
  interceptor (with the reason), and otherwise writes http entries whose secret
  ``serve`` finds on its own; ``uninstall`` takes them out again;
- SIGTERM ends ``serve`` and its backends.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import queue
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

FIXTURES = Path(__file__).parent / "fixtures"
SECRET = "s3cret-for-tests-0123456789abcdef"
HEADER = "X-AHP-Adapter-Secret"


def shell_payload(command: str) -> bytes:
    doc = json.loads((FIXTURES / "claude-code/pre_tool_use.shell.json").read_text())["payload"]
    doc["tool_input"] = {"command": command}
    return json.dumps(doc).encode()


class Serve:
    """``ahp-adapter serve claude-code``; ``port`` read from its "listening on" line."""

    def __init__(self, kit: Any, registration: Path, *args: str, env: dict[str, str] | None = None):
        argv = [sys.executable, "-m", "ahp_adapters", "serve", "claude-code"]
        argv += ["--registration", str(registration), *args]
        self.proc = subprocess.Popen(
            argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env or kit.env, cwd=kit.tmp
        )
        lines: queue.Queue[bytes | None] = queue.Queue()

        def pump() -> None:
            assert self.proc.stderr is not None
            for raw in iter(self.proc.stderr.readline, b""):
                lines.put(raw)
            lines.put(None)

        threading.Thread(target=pump, daemon=True).start()
        deadline = time.monotonic() + 30
        while True:
            line = lines.get(timeout=max(deadline - time.monotonic(), 0.01))
            assert line is not None, "serve exited before listening"
            if b"listening on http://" in line:
                self.port = int(line.decode().rsplit(":", 1)[1])
                break

    def post(
        self,
        body: bytes,
        path: str = "/claude-code/PreToolUse",
        secret: str | None = SECRET,
        **extra: str,
    ) -> tuple[int, bytes]:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        headers = {"content-type": "application/json", **extra}
        if secret is not None:
            headers[HEADER] = secret
        try:
            conn.request("POST" if body is not None else "GET", path, body=body, headers=headers)
            response = conn.getresponse()
            return response.status, response.read()
        finally:
            conn.close()

    def stop(self) -> int:
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=30)


@pytest.fixture
def secret_file(tmp_path: Path) -> Path:
    path = tmp_path / "secret"
    path.write_text(SECRET + "\n")
    path.chmod(0o600)
    return path


def gone(pid: int, timeout: float = 30.0) -> bool:
    """Has ``pid`` (not our child) exited? Waited for on a pidfd, bounded."""
    import select

    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    try:
        return bool(select.select([fd], [], [], timeout)[0])
    finally:
        os.close(fd)


def children(pid: int) -> list[int]:
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        found += [int(p) for p in (task / "children").read_text().split()]
    return found


def test_serve_answers_like_the_command_hook_and_stops_cleanly(kit: Any, secret_file: Path) -> None:
    registration = kit.registration(kit.denylist_stdio(policy="fail-open"))
    serve = Serve(kit, registration, "--http", "127.0.0.1:0", "--secret-file", str(secret_file))
    try:
        for command, blocks in (("rm -rf /", True), ("ls", False)):
            status, body = serve.post(shell_payload(command))
            hook = kit.run_hook("claude-code", shell_payload(command), registration, daemon="off")
            assert status == 200
            assert body == hook.stdout.encode()  # the same bytes as the command hook
            assert (b'"deny"' in body) is blocks
        backends = children(serve.proc.pid)
        assert backends  # the warm deny-list backend
    finally:
        code = serve.stop()
    assert code in (0, -signal.SIGTERM)  # uvicorn re-raises the signal once it has shut down
    for pid in backends:
        assert gone(pid), f"backend {pid} outlived serve"


def test_requests_without_the_secret_are_refused_and_run_nothing(
    kit: Any, secret_file: Path
) -> None:
    record = kit.tmp / "record.jsonl"
    registration = kit.registration(kit.recorder(record=record, policy="fail-open"))
    serve = Serve(kit, registration, "--http", "127.0.0.1:0", "--secret-file", str(secret_file))
    try:
        assert serve.post(shell_payload("ls"), secret=None)[0] == 401
        assert serve.post(shell_payload("ls"), secret=SECRET[:-1] + "X")[0] == 401
        assert serve.post(shell_payload("ls"), path="/codex/PreToolUse")[0] == 404
        assert serve.post(shell_payload("ls"), path="/claude-code")[0] == 404
        assert serve.post(b"x" * (8 * 1024 * 1024 + 1))[0] == 413
        conn = http.client.HTTPConnection("127.0.0.1", serve.port, timeout=30)
        conn.request("GET", "/claude-code/PreToolUse", headers={HEADER: SECRET})
        assert conn.getresponse().status == 405
        conn.close()
        assert not record.exists() or record.read_text() == ""  # nothing reached the backend
        assert serve.post(shell_payload("ls"))[0] == 200
        assert "hooks/intercept" in record.read_text()
    finally:
        serve.stop()


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (("--http", "0.0.0.0:0", "--secret-file", "S"), "loopback only"),
        (("--http", "192.168.1.10:8765", "--secret-file", "S"), "loopback only"),
        (("--http", "127.0.0.1:0"), "needs --secret-file"),
        (("--http", "127.0.0.1:0", "--secret-file", "missing"), "cannot be read"),
        (("--http", "127.0.0.1:0", "--secret-file", "open"), "readable by other users"),
        (("--http", "nonsense", "--secret-file", "S"), "expected HOST:PORT"),
    ],
)
def test_serve_refuses_to_start_unsafely(
    kit: Any, secret_file: Path, args: tuple[str, ...], says: str
) -> None:
    registration = kit.registration(kit.denylist_stdio(policy="fail-open"))
    world_readable = kit.tmp / "open"
    world_readable.write_text(SECRET)
    world_readable.chmod(0o644)
    names = {"S": str(secret_file), "missing": str(kit.tmp / "nope"), "open": str(world_readable)}
    argv = [sys.executable, "-m", "ahp_adapters", "serve", "claude-code"]
    argv += ["--registration", str(registration), *(names.get(a, a) for a in args)]
    done = subprocess.run(argv, capture_output=True, env=kit.env, cwd=kit.tmp, timeout=60)
    assert done.returncode == 2
    assert says in done.stderr.decode()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def install(kit: Any, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "ahp_adapters", *args]
    return subprocess.run(argv, capture_output=True, text=True, env=env, cwd=kit.tmp, timeout=60)


def test_install_http_refuses_a_fail_closed_registration(kit: Any) -> None:
    registration = kit.registration(kit.denylist_stdio(policy="fail-closed"))
    project = kit.tmp / "proj"
    project.mkdir()
    done = install(
        kit, kit.env, "install", "claude-code", "--registration", str(registration),
        "--project", str(project), "--transport", "http",
    )  # fmt: skip
    assert done.returncode == 2
    assert "fail-open" in done.stderr and "non-blocking" in done.stderr
    assert not (project / ".claude").exists()  # nothing written


def test_install_http_then_serve_then_uninstall(kit: Any) -> None:
    registration = kit.registration(kit.denylist_stdio(policy="fail-open"))
    project = kit.tmp / "proj"
    (project / ".claude").mkdir(parents=True)
    committed = project / ".claude" / "settings.json"
    committed.write_text('{"permissions": {"allow": []}}\n')
    env = {**kit.env, "AHP_ADAPTER_CONFIG_DIR": str(kit.tmp / "config")}
    port = free_port()
    address = f"127.0.0.1:{port}"
    command = install(
        kit, env, "install", "claude-code", "--registration", str(registration),
        "--project", str(project),
    )  # fmt: skip
    assert command.returncode == 0, command.stderr
    assert "PreToolUse" in json.loads(committed.read_text())["hooks"]  # the command hook
    done = install(
        kit, env, "install", "claude-code", "--registration", str(registration),
        "--project", str(project), "--transport", "http", "--http", address,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "ahp-adapter serve claude-code" in done.stderr and "lets every tool call through" in (
        done.stderr
    )
    # The command hook is taken out (one install never fires both), and the secret never
    # goes into the committable file: it is back as it was before either install.
    assert json.loads(committed.read_text()) == {"permissions": {"allow": []}, "hooks": {}}
    local = project / ".claude" / "settings.local.json"
    assert local.stat().st_mode & 0o077 == 0
    settings = json.loads(local.read_text())
    (group,) = settings["hooks"]["PreToolUse"]
    (handler,) = group["hooks"]
    assert handler["type"] == "http"
    assert handler["url"] == f"http://{address}/claude-code/PreToolUse"
    # Claude Code takes no http SessionStart hook ("HTTP hooks are not supported for
    # SessionStart", seen live): that one is a command hook, so session.start still goes out.
    (start,) = settings["hooks"]["SessionStart"]
    (start_handler,) = start["hooks"]
    assert start_handler["type"] == "command"
    assert " hook claude-code " in start_handler["command"]
    assert "--event SessionStart" in start_handler["command"]
    assert all(
        h["type"] == "http"
        for event, groups in settings["hooks"].items()
        if event != "SessionStart"
        for g in groups
        for h in g["hooks"]
    )
    secret = handler["headers"][HEADER]
    secret_file = kit.tmp / "config" / f"http-{port}.secret"
    assert secret_file.read_text().strip() == secret
    assert secret_file.stat().st_mode & 0o077 == 0
    serve = Serve(kit, registration, "--http", address, env=env)  # finds the secret itself
    try:
        status, body = serve.post(shell_payload("rm -rf /"), secret=secret)
        assert status == 200 and b'"deny"' in body
    finally:
        serve.stop()
    again = install(
        kit, env, "install", "claude-code", "--registration", str(registration),
        "--project", str(project), "--transport", "http", "--http", address,
    )  # fmt: skip
    assert again.returncode == 0
    assert json.loads(local.read_text()) == settings  # replaced, not duplicated; same secret
    gone = install(kit, env, "uninstall", "claude-code", "--project", str(project))
    assert gone.returncode == 0, gone.stderr
    assert json.loads(local.read_text())["hooks"] == {}  # found in settings.local.json
    back = install(
        kit, env, "install", "claude-code", "--registration", str(registration),
        "--project", str(project),
    )  # fmt: skip
    assert back.returncode == 0, back.stderr
    assert json.loads(local.read_text())["hooks"] == {}  # the http hooks are gone again
    assert "PreToolUse" in json.loads(committed.read_text())["hooks"]
    gone = install(kit, env, "uninstall", "claude-code", "--project", str(project))
    assert gone.returncode == 0, gone.stderr
    assert json.loads(committed.read_text()) == {"permissions": {"allow": []}, "hooks": {}}
    assert secret_file.exists()  # kept: a reinstall uses the same secret


# --------------------------------------------------------------------------- slow and idle clients

DEADLINE = 30.0  # any single wait
HEAD_DEADLINE = 20.0  # how long a test waits for the server to close a connection
PARTIAL_HEAD = b"POST /claude-code/PreToolUse HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: a"


def open_idle(port: int, count: int) -> list[socket.socket]:
    """``count`` connections that send nothing."""
    return [socket.create_connection(("127.0.0.1", port), timeout=DEADLINE) for _ in range(count)]


def closed_by_server(sock: socket.socket, timeout: float = HEAD_DEADLINE) -> bool:
    """Does the server close ``sock`` (EOF or reset, no answer) within ``timeout``?"""
    import select

    if not select.select([sock], [], [], timeout)[0]:
        return False
    try:
        return sock.recv(65536) == b""
    except ConnectionResetError:
        return True


def read_answer(sock: socket.socket) -> tuple[bytes, bytes]:
    """One HTTP answer on ``sock``: its head (lowercased) and its body."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        assert chunk, f"connection closed mid-answer: {data!r}"
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    head = head.lower()
    length = int(head.split(b"content-length:", 1)[1].split(b"\r\n", 1)[0])
    while len(body) < length:
        chunk = sock.recv(65536)
        assert chunk, "connection closed mid-body"
        body += chunk
    return head, body


class Trickle:
    """Connections that send a partial request head, then one more byte every 0.2 s."""

    def __init__(self, port: int, count: int) -> None:
        self.socks = open_idle(port, count)
        for sock in self.socks:
            sock.sendall(PARTIAL_HEAD)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stop.wait(0.2):
            for sock in self.socks:
                with contextlib.suppress(OSError):  # closed by the server: the point
                    sock.send(b"a")

    def close(self) -> None:
        self.stop.set()
        self.thread.join(timeout=DEADLINE)


def test_idle_and_trickling_connections_are_closed_after_the_head_deadline(
    kit: Any, secret_file: Path
) -> None:
    registration = kit.registration(kit.denylist_stdio(policy="fail-open"))
    serve = Serve(
        kit, registration, "--http", "127.0.0.1:0", "--secret-file", str(secret_file),
        "--header-timeout", "1",
    )  # fmt: skip
    idle = open_idle(serve.port, 150)
    trickle = Trickle(serve.port, 10)
    try:
        for sock in idle + trickle.socks:
            assert closed_by_server(sock), "the server still holds a connection with no head"
        status, body = serve.post(shell_payload("rm -rf /"))
        assert status == 200 and b'"deny"' in body
    finally:
        trickle.close()
        for sock in idle + trickle.socks:
            sock.close()
        serve.stop()


def test_connections_without_a_request_do_not_starve_authenticated_hooks(
    kit: Any, secret_file: Path
) -> None:
    registration = kit.registration(kit.denylist_stdio(policy="fail-open"))
    serve = Serve(
        kit, registration, "--http", "127.0.0.1:0", "--secret-file", str(secret_file),
        "--header-timeout", "60",  # longer than the test: nothing here is closed by it
    )  # fmt: skip
    idle = open_idle(serve.port, 150)
    trickle = Trickle(serve.port, 10)
    more: list[socket.socket] = []
    try:
        expected = serve.post(shell_payload("rm -rf /"))
        assert expected[0] == 200 and b'"deny"' in expected[1]
        for _ in range(5):  # while all 160 are open
            assert serve.post(shell_payload("rm -rf /")) == expected
            assert serve.post(shell_payload("ls")) == (200, b"")
        # A flood beyond what may wait for a head closes the longest-waiting ones.
        more = open_idle(serve.port, 150)  # 310 waiting, 256 may
        for sock in idle[:54]:
            assert closed_by_server(sock), "the oldest idle connection was not closed"
        assert serve.post(shell_payload("rm -rf /")) == expected
        # A head that never ends is cut off at 64 KiB, not buffered until the deadline.
        with socket.create_connection(("127.0.0.1", serve.port), timeout=DEADLINE) as big:
            with contextlib.suppress(OSError):
                big.sendall(PARTIAL_HEAD + b"a" * (256 * 1024))
            assert closed_by_server(big)
        assert serve.post(shell_payload("rm -rf /")) == expected
        # Requests without the secret are answered 401 and closed, so they cannot
        # hold the connections a request with it needs either.
        refused = open_idle(serve.port, 70)
        more += refused
        request = b"POST /claude-code/PreToolUse HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        for sock in refused:
            sock.sendall(request + b"Content-Length: 2\r\n\r\n{}")
        for sock in refused:  # 503 for those beyond the limit while the others are served
            head, _ = read_answer(sock)
            assert head[:13] in (b"http/1.1 401 ", b"http/1.1 503 ")
            assert b"\r\nconnection: close" in head
        assert serve.post(shell_payload("rm -rf /")) == expected  # none is kept alive
        for sock in refused:
            assert closed_by_server(sock)
    finally:
        trickle.close()
        for sock in idle + trickle.socks + more:
            sock.close()
        serve.stop()


# --------------------------------------------------------------------------- DNS rebinding


def test_foreign_host_and_origin_are_refused_before_anything_runs(
    kit: Any, secret_file: Path
) -> None:
    record = kit.tmp / "record.jsonl"
    registration = kit.registration(kit.recorder(record=record, policy="fail-open"))
    serve = Serve(
        kit, registration, "--http", "127.0.0.1:0", "--secret-file", str(secret_file),
        "--allow-host", "ahp.internal", "--allow-origin", "https://dash.example",
    )  # fmt: skip
    port = serve.port
    try:
        payload = shell_payload("ls")
        for host in (f"evil.example:{port}", "evil.example", f"127.0.0.1:{port + 1}"):
            status, text = serve.post(payload, host=host)
            assert status == 421 and b"--allow-host" in text, host
        for origin in ("http://evil.example", f"http://evil.example:{port}", "null"):
            status, text = serve.post(payload, origin=origin)
            assert status == 403 and b"--allow-origin" in text, origin
        assert not record.exists() or record.read_text() == ""  # nothing reached the backend
        for headers in (
            {},  # http.client's own Host: 127.0.0.1:PORT
            {"host": f"localhost:{port}", "origin": f"http://localhost:{port}"},
            {"host": f"[::1]:{port}", "origin": f"http://127.0.0.1:{port}"},
            {"host": f"ahp.internal:{port}"},  # --allow-host
            {"origin": "https://dash.example"},  # --allow-origin
        ):
            assert serve.post(payload, **headers) == (200, b""), headers
        assert "hooks/intercept" in record.read_text()
    finally:
        serve.stop()


def test_serve_refuses_a_malformed_allowed_name(kit: Any, secret_file: Path) -> None:
    registration = kit.registration(kit.denylist_stdio(policy="fail-open"))
    argv = [sys.executable, "-m", "ahp_adapters", "serve", "claude-code"]
    argv += ["--registration", str(registration), "--http", "127.0.0.1:0"]
    argv += ["--secret-file", str(secret_file), "--allow-origin", "dash.example"]
    done = subprocess.run(argv, capture_output=True, env=kit.env, cwd=kit.tmp, timeout=60)
    assert done.returncode == 2
    assert "--allow-origin 'dash.example'" in done.stderr.decode()

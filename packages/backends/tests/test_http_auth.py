"""Sample backends authenticate HTTP callers (issue 12, item 8).

Each sample backend (``denylist``, ``approval``, ``audit``) is started as a real
process on loopback HTTP with ``--bearer-token-env VAR`` and a fresh random token in
``VAR``: a request without ``Authorization``, with another scheme or with a wrong token
gets ``401`` and ``WWW-Authenticate: Bearer``, the right token gets its answer, and the
token appears in neither the backend's stdout nor its stderr (nor in any 401 body).
Our dispatcher, given a registration with ``authentication: {type: bearer,
tokenEnv}``, is accepted and gets the backend's own verdict; without it, the 401 is
an operational failure (never a verdict). The flag's startup errors name the variable
and start nothing; the loopback rule is the kit's, as the samples report it.
"""

from __future__ import annotations

import os
import queue
import secrets
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import anyio
import httpx
import pytest

PY = sys.executable
DEADLINE = 30.0
TOKEN_ENV = "AHP_TEST_BACKEND_TOKEN"
RULES = r"""
[[rules]]
reason = "Recursive force deletes are not allowed here."
code = "com.example.policy.rm_rf"
kind = "shell"
[rules.input]
command = "rm\\s+-rf"
"""
CONFIGURATION = {
    "jsonrpc": "2.0",
    "id": "cfg_1",
    "method": "hooks/configuration",
    "params": {"protocolVersion": "draft"},
}


class Server:
    """``ahp-backend COMMAND ARGS --http 127.0.0.1:0``; stdout and stderr both kept."""

    def __init__(self, argv: list[str], env: dict[str, str]) -> None:
        self.process = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
        )
        assert self.process.stdout is not None and self.process.stderr is not None
        self.out: list[bytes] = []
        self.err: list[bytes] = []
        self._lines: queue.Queue[bytes] = queue.Queue()
        threading.Thread(
            target=self._pump, args=(self.process.stdout, self.out), daemon=True
        ).start()
        threading.Thread(
            target=self._pump, args=(self.process.stderr, self.err, self._lines), daemon=True
        ).start()
        while True:
            line = self._lines.get(timeout=DEADLINE)
            if not line:
                raise AssertionError(f"the backend exited: {b''.join(self.err)!r}")
            if b"listening on http://" in line:
                self.url = line.decode().split("listening on ", 1)[1].strip() + "/"
                break

    @staticmethod
    def _pump(
        stream: IO[bytes], into: list[bytes], lines: queue.Queue[bytes] | None = None
    ) -> None:
        for raw in iter(stream.readline, b""):
            into.append(raw)
            if lines is not None:
                lines.put(raw)
        if lines is not None:
            lines.put(b"")

    def stop(self) -> bytes:
        """Stop the process; everything it wrote (stdout and stderr)."""
        if self.process.poll() is None:
            self.process.terminate()
        try:
            self.process.wait(timeout=DEADLINE)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=DEADLINE)
        return b"".join(self.out) + b"".join(self.err)


def _argv(command: str, tmp_path: Path) -> list[str]:
    if command == "denylist":
        rules = tmp_path / "rules.toml"
        rules.write_text(RULES, "utf-8")
        args = ["--rules", str(rules)]
    elif command == "approval":
        args = ["--store", str(tmp_path / "grants.db"), "--require", "Bash:deploy"]
    else:
        args = ["--db", str(tmp_path / "audit.db")]
    return [PY, "-m", "ahp_backends.cli", command, *args]


@pytest.fixture
def token() -> str:
    return "tok-" + secrets.token_urlsafe(24)


@pytest.fixture
def servers() -> Iterator[list[Server]]:
    started: list[Server] = []
    yield started
    for server in started:
        server.stop()


def _start(argv: list[str], token: str, servers: list[Server]) -> Server:
    env = dict(os.environ, **{TOKEN_ENV: token})
    server = Server([*argv, "--http", "127.0.0.1:0", "--bearer-token-env", TOKEN_ENV], env)
    servers.append(server)
    return server


@pytest.mark.parametrize("command", ["denylist", "approval", "audit"])
def test_a_sample_backend_answers_only_the_bearer_of_its_token(
    command: str, tmp_path: Path, token: str, servers: list[Server]
) -> None:
    server = _start(_argv(command, tmp_path), token, servers)
    refused: list[httpx.Response] = []
    with httpx.Client(timeout=DEADLINE) as client:
        for authorization in (
            None,
            "Bearer " + token[:-1],
            "Bearer " + token + "x",
            "Bearer " + token.upper(),
            "Basic " + token,
            token,
        ):
            headers = {} if authorization is None else {"Authorization": authorization}
            refused.append(client.post(server.url, json=CONFIGURATION, headers=headers))
        accepted = client.post(
            server.url, json=CONFIGURATION, headers={"Authorization": f"Bearer {token}"}
        )
        # Two Authorization headers (one of them right) are refused too.
        doubled = client.post(
            server.url,
            json=CONFIGURATION,
            headers=[("Authorization", f"Bearer {token}"), ("Authorization", "Bearer x")],
        )
    for response in [*refused, doubled]:
        assert response.status_code == 401, response.status_code
        assert response.headers["www-authenticate"].startswith("Bearer")
        assert token not in response.text and "jsonrpc" not in response.text
    assert refused[0].headers["www-authenticate"] == "Bearer"
    assert refused[1].headers["www-authenticate"] == 'Bearer error="invalid_token"'
    assert accepted.status_code == 200
    assert accepted.json()["result"]["configuration"]["subscriptions"]
    logs = server.stop()
    assert b"listening on http://127.0.0.1:" in logs
    assert token.encode() not in logs
    assert token[:-1].encode() not in logs


def test_our_dispatcher_with_a_bearer_registration_is_accepted(
    tmp_path: Path, token: str, servers: list[Server], clients: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = _start(_argv("denylist", tmp_path), token, servers)
    monkeypatch.setenv(TOKEN_ENV, token)  # the harness side resolves tokenEnv from here
    entry = {
        "id": "com.example.tests.denylist",
        "transport": {"type": "http", "url": server.url},
        "subscriptions": [clients.subscription(("tool.before",))],
    }
    bash = {"name": "Bash", "kind": "shell", "origin": "native"}
    cases = [
        clients.Case("rm", {**bash, "input": {"command": "rm -rf x"}}),
        clients.Case("ls", {**bash, "input": {"command": "ls"}}),
    ]
    bound = {**entry, "authentication": {"type": "bearer", "tokenEnv": TOKEN_ENV}}
    verdicts, _ = anyio.run(clients.ours, [bound], cases)
    assert [(v.permission, v.code, v.failed) for v in verdicts] == [
        ("deny", "com.example.policy.rm_rf", False),
        ("none", None, False),
    ]
    # Without the binding, the 401 is an operational failure (fail-open here), not a verdict.
    unbound, _ = anyio.run(clients.ours, [entry], cases)
    assert [(v.permission, v.failed) for v in unbound] == [("none", True), ("none", True)]
    logs = server.stop()
    assert token.encode() not in logs


def test_a_missing_or_empty_token_variable_is_a_startup_error_naming_it(tmp_path: Path) -> None:
    argv = [*_argv("denylist", tmp_path), "--http", "127.0.0.1:0", "--bearer-token-env"]
    env = {k: v for k, v in os.environ.items() if k != TOKEN_ENV}
    for environ in (env, {**env, TOKEN_ENV: "  "}):
        done = subprocess.run(
            [*argv, TOKEN_ENV], capture_output=True, env=environ, timeout=DEADLINE
        )
        err = done.stderr.decode()
        assert done.returncode == 2
        assert TOKEN_ENV in err and "listening" not in err and done.stdout == b""
    done = subprocess.run([*argv, "not a name"], capture_output=True, env=env, timeout=DEADLINE)
    assert done.returncode == 2 and "not an environment variable name" in done.stderr.decode()
    # The flag means nothing on stdio: say so rather than serve without authentication.
    done = subprocess.run(
        [*_argv("denylist", tmp_path), "--bearer-token-env", TOKEN_ENV],
        capture_output=True,
        env={**env, TOKEN_ENV: "t"},
        timeout=DEADLINE,
    )
    assert done.returncode == 2 and "--http only" in done.stderr.decode()


def test_the_samples_report_the_kits_loopback_rule(tmp_path: Path) -> None:
    from ahp_protocol.server.asgi import http_address

    with pytest.raises(ValueError) as refused:
        http_address("0.0.0.0:0")
    done = subprocess.run(
        [*_argv("audit", tmp_path), "--http", "0.0.0.0:0"], capture_output=True, timeout=DEADLINE
    )
    assert done.returncode == 2
    assert done.stderr.decode().strip() == f"error: {refused.value}"

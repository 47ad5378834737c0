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
import secrets
import subprocess
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

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


def _args(command: str, tmp_path: Path) -> list[str]:
    if command == "denylist":
        rules = tmp_path / "rules.toml"
        rules.write_text(RULES, "utf-8")
        return ["--rules", str(rules)]
    if command == "approval":
        return ["--store", str(tmp_path / "grants.db"), "--require", "Bash:deploy"]
    return ["--db", str(tmp_path / "audit.db")]


@pytest.fixture
def token() -> str:
    return "tok-" + secrets.token_urlsafe(24)


def _start(command: str, tmp_path: Path, token: str, http_backend: Any) -> Any:
    args = [*_args(command, tmp_path), "--bearer-token-env", TOKEN_ENV]
    return http_backend(command, *args, env={**os.environ, TOKEN_ENV: token})


@pytest.mark.parametrize("command", ["denylist", "approval", "audit"])
def test_a_sample_backend_answers_only_the_bearer_of_its_token(
    command: str, tmp_path: Path, token: str, http_backend: Any
) -> None:
    server = _start(command, tmp_path, token, http_backend)
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
    assert "listening on http://127.0.0.1:" in logs
    assert token not in logs
    assert token[:-1] not in logs


def test_our_dispatcher_with_a_bearer_registration_is_accepted(
    tmp_path: Path,
    token: str,
    http_backend: Any,
    clients: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    server = _start("denylist", tmp_path, token, http_backend)
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
    assert token not in logs


def test_a_missing_or_empty_token_variable_is_a_startup_error_naming_it(
    tmp_path: Path, backend_argv: Any
) -> None:
    denylist = backend_argv("denylist", *_args("denylist", tmp_path))
    argv = [*denylist, "--http", "127.0.0.1:0", "--bearer-token-env"]
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
        [*denylist, "--bearer-token-env", TOKEN_ENV],
        capture_output=True,
        env={**env, TOKEN_ENV: "t"},
        timeout=DEADLINE,
    )
    assert done.returncode == 2 and "--http only" in done.stderr.decode()


def test_the_samples_report_the_kits_loopback_rule(tmp_path: Path, backend_argv: Any) -> None:
    from ahp_protocol.server.asgi import http_address

    with pytest.raises(ValueError) as refused:
        http_address("0.0.0.0:0")
    done = subprocess.run(
        [*backend_argv("audit", *_args("audit", tmp_path)), "--http", "0.0.0.0:0"],
        capture_output=True,
        timeout=DEADLINE,
    )
    assert done.returncode == 2
    assert done.stderr.decode().strip() == f"error: {refused.value}"

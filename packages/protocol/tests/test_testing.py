"""``ahp_protocol.testing``: the in-memory transport and the scripted backend as a process.

The in-memory transport's contract (what it records, a closed transport, a backend id
with no object, a notification's stray answer read later); the process form
(``python -m ahp_protocol.testing``) through a real dispatcher over stdio, both
lifecycles, and loopback HTTP, with the fault classes the in-memory matrix
(``test_failure_policy.py``) expects; and its refusal of a non-loopback address.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from ahp_protocol.client import Dispatcher, FailureClass, Hooks, OperationalFailure
from ahp_protocol.client.transports.exchange import Exchange
from ahp_protocol.server import Backend
from ahp_protocol.testing import MemoryTransport, Misbehaving, memory_transports, tool_before
from ahp_protocol.wire import jsonrpc
from ahp_protocol.wire.registration import parse_registration

F = FailureClass
ID = "com.example.scripted"
BODY = {"content": {"default": "body"}}
CAPS = {"tool.before": {"effects": ["deny"]}}
PY = sys.executable


def registration(transport: dict[str, Any], timeout_ms: int = 5000) -> Any:
    sub = {"mode": "intercept", "events": ["tool.before"], "timeoutMs": timeout_ms, **BODY}
    sub["failurePolicy"] = "fail-open"
    hook = {"id": ID, "transport": transport, "subscriptions": [sub]}
    return parse_registration({"protocolVersion": "draft", "hooks": [hook]})


def request(event: dict[str, Any]) -> dict[str, Any]:
    params = {
        "protocolVersion": "draft",
        "event": event,
        "capabilities": {"effects": ["deny"]},
        "state": {"permission": "none", "candidate": None, "flow": "none"},
    }
    return jsonrpc.request(jsonrpc.INTERCEPT, params, event["id"])


# -- the in-memory transport ---------------------------------------------------------


@pytest.mark.anyio
async def test_a_kit_backend_answers_in_memory_and_everything_sent_is_recorded() -> None:
    backend = Backend("com.example.kit")
    seen: list[str] = []

    @backend.intercept("tool.before")
    def decide(req: Any) -> dict[str, Any]:
        return {"type": "deny", "reason": "no"}

    @backend.observe("*")
    def told(event: dict[str, Any]) -> None:
        seen.append(event["type"])

    transport = MemoryTransport(backend)
    event = tool_before()
    exchange = Exchange()
    response = await transport.request(request(event), exchange)
    assert response["result"]["effects"] == [{"type": "deny", "reason": "no"}]
    await transport.notify(
        jsonrpc.notification(jsonrpc.OBSERVE, {"protocolVersion": "draft", "event": event})
    )
    assert seen == ["tool.before"]
    assert [m.get("method") for m in transport.received] == ["hooks/intercept", "hooks/observe"]
    assert exchange.attempts == 1 and exchange.sent_bytes > 0 and exchange.received_bytes > 0
    await transport.aclose()
    with pytest.raises(OperationalFailure) as closed:
        await transport.request(request(tool_before()))
    assert closed.value.failure == F.SPAWN_FAILED


@pytest.mark.anyio
async def test_a_stray_answer_to_a_notification_is_read_and_discarded_by_the_next_request() -> None:
    transport = MemoryTransport(Misbehaving("reply-to-notifications"))
    event = tool_before()
    await transport.notify(
        jsonrpc.notification(jsonrpc.OBSERVE, {"protocolVersion": "draft", "event": event})
    )
    exchange = Exchange()
    response = await transport.request(request(event), exchange)
    assert response["result"]["effects"] == [] and len(exchange.discarded) == 1
    single = MemoryTransport(Misbehaving("reply-to-notifications"), shape="single")
    with pytest.raises(OperationalFailure) as caught:  # as HTTP: a 202 has no body
        await single.notify(
            jsonrpc.notification(jsonrpc.OBSERVE, {"protocolVersion": "draft", "event": event})
        )
    assert caught.value.failure == F.MALFORMED_OUTPUT


@pytest.mark.anyio
async def test_a_backend_id_with_no_object_fails_to_start() -> None:
    reg = registration({"type": "http", "url": "http://127.0.0.1:9/"})
    async with Dispatcher(reg, capabilities=CAPS, transport=memory_transports({})) as hooks:
        result = await hooks.intercept(tool_before())
    (diagnostic,) = result.diagnostics
    assert diagnostic.failure == F.SPAWN_FAILED and diagnostic.outcome == "failed"


# -- the process form ------------------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("lifecycle", "fault", "failure", "denied"),
    [
        ("persistent", "deny", None, True),
        ("persistent", "wrong-id", None, False),  # a deadline (set below)
        ("per_event", "wrong-id", F.ID_MISMATCH, False),
        ("per_event", "garbage", F.MALFORMED_OUTPUT, False),
    ],
)
async def test_the_process_form_over_stdio(
    lifecycle: str, fault: str, failure: FailureClass | None, denied: bool
) -> None:
    args = ["-m", "ahp_protocol.testing", "--fault", fault]
    persistent_wrong_id = (fault, lifecycle) == ("wrong-id", "persistent")
    transport = {"type": "stdio", "command": PY, "args": args, "lifecycle": lifecycle}
    reg = registration(transport, timeout_ms=1000 if persistent_wrong_id else 5000)
    if persistent_wrong_id:  # the other id is discarded and the request waits it out
        failure = F.DEADLINE_EXCEEDED
    async with Dispatcher(reg, capabilities=CAPS) as hooks:
        result = await hooks.intercept(tool_before())
    (diagnostic,) = result.diagnostics
    assert diagnostic.failure == failure and result.denied == denied
    assert diagnostic.discarded == (1 if persistent_wrong_id else 0)


@pytest.mark.anyio
async def test_the_process_form_over_loopback_http(tmp_path: Path) -> None:
    ready = tmp_path / "ready.json"
    args = ["--fault", "rpc-error", "--http", "127.0.0.1:0", "--ready-file", str(ready)]
    server = subprocess.Popen([PY, "-m", "ahp_protocol.testing", *args], stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 30
        while not ready.exists():
            assert server.poll() is None and time.monotonic() < deadline
            await anyio.sleep(0.02)
        endpoint = json.loads(ready.read_text())["endpoint"]
        reg = registration({"type": "http", "url": endpoint})
        async with Dispatcher(reg, capabilities=CAPS) as hooks:
            result = await hooks.intercept(tool_before())
    finally:
        server.terminate()
        server.wait(timeout=10)
        assert server.stderr is not None
        server.stderr.close()
    (diagnostic,) = result.diagnostics
    assert diagnostic.failure == F.RPC_ERROR and not result.denied


@pytest.mark.anyio
async def test_allow_over_http_needs_the_bearer_token_named_by_bearer_token_env(
    tmp_path: Path,
) -> None:
    ready = tmp_path / "ready.json"
    args = ["--fault", "allow", "--http", "127.0.0.1:0", "--ready-file", str(ready)]
    args += ["--bearer-token-env", "SCRIPTED_TOKEN"]
    env = {**os.environ, "SCRIPTED_TOKEN": "s3cret-token"}
    server = subprocess.Popen(
        [PY, "-m", "ahp_protocol.testing", *args], stderr=subprocess.PIPE, env=env
    )
    results = []
    try:
        deadline = time.monotonic() + 30
        while not ready.exists():
            assert server.poll() is None and time.monotonic() < deadline
            await anyio.sleep(0.02)
        endpoint = json.loads(ready.read_text())["endpoint"]
        for token in ("s3cret-token", "wrong"):
            transport = {"type": "http", "url": endpoint}
            reg = parse_registration(
                {
                    "protocolVersion": "draft",
                    "hooks": [
                        {
                            "id": ID,
                            "transport": transport,
                            "authentication": {"type": "bearer", "tokenEnv": "T"},
                            "subscriptions": [
                                {
                                    "mode": "intercept",
                                    "events": ["tool.before"],
                                    "timeoutMs": 5000,
                                    "failurePolicy": "fail-open",
                                    **BODY,
                                }
                            ],
                        }
                    ],
                }
            )
            caps = {"tool.before": {"effects": ["deny", "allow"]}}
            async with Dispatcher(reg, capabilities=caps, environ={"T": token}) as hooks:
                results.append(await hooks.intercept(tool_before()))
    finally:
        server.terminate()
        server.wait(timeout=10)
        assert server.stderr is not None
        server.stderr.close()
    granted, refused = results
    assert granted.permission == "allow" and granted.diagnostics[0].failure is None
    assert refused.permission == "none" and refused.diagnostics[0].failure is not None


def test_the_process_form_listens_on_loopback_only() -> None:
    run = subprocess.run(
        [PY, "-m", "ahp_protocol.testing", "--http", "192.0.2.1:0"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert run.returncode == 2
    assert "listens on loopback only" in run.stderr


@pytest.mark.anyio
async def test_hooks_take_a_transport_too() -> None:
    reg = registration({"type": "http", "url": "http://127.0.0.1:9/"})
    transport = memory_transports({ID: Misbehaving("deny")})
    harness = {"name": "testing-tests", "version": "1"}
    async with Hooks(reg, harness=harness, capabilities=CAPS, transport=transport) as hooks:
        call = hooks.session(cwd="/repo").tool_call("Bash", {"command": "ls"}, kind="shell")
        result = await call.before()
    assert result.denied and result.denied_by == ID and not result.synthetic_denial


def test_the_process_form_imports_neither_the_client_nor_pydantic() -> None:
    # Over per_event stdio the scripted backend starts once per event: what it imports is
    # paid at each start (the in-memory transport brings the client and pydantic, about
    # 100 ms; an HTTP server another 30 ms, needed only with --http). A fresh interpreter.
    probe = (
        "import sys, ahp_protocol.testing.serve; "
        "print([m for m in ('pydantic', 'ahp_protocol.client', 'anyio', 'http.server') "
        "if m in sys.modules])"
    )
    done = subprocess.run([PY, "-c", probe], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"

"""Interop: the official SDK's harness client (``agenthooksprotocol.Hooks``) drives kit backends.

A backend built with our server kit (``backends/kit_configured.py``, a real
process) is registered with the SDK three ways: stdio ``persistent``, stdio
``per_event`` (``--once``) and HTTP (uvicorn on 127.0.0.1, a free port, the bound
address read from the backend's stderr line). For each, through the SDK's full
settlement path:

- a matching input (``rm -rf``) settles to permission DENY, with our deny effect
  (reason and code) in the SDK's accepted responses and no diagnostics;
- a harmless input settles to permission NONE (no effect), no diagnostics;
- with ``subscriptions`` omitted from the registration, the SDK discovers them
  with ``hooks/configuration``: it intercepts (the deny happens) and reports no
  configuration diagnostics.
"""

from __future__ import annotations

import queue
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import IO, Any

import anyio
import pytest
from agenthooksprotocol import Hooks, Permission, capability, event, state

BACKENDS = Path(__file__).parent / "backends"
KIT = BACKENDS / "kit_configured.py"
BACKEND_ID = "com.example.kit.configured"
DENY_REASON = "Recursive deletes are not allowed (kit)."
DENY_CODE = "com.example.kit.rm_rf"
DEADLINE = 20.0
TRANSPORTS = ["persistent", "per_event", "http"]

SUBSCRIPTIONS = [
    {
        "mode": "intercept",
        "events": ["tool.before"],
        "timeoutMs": 5000,
        "failurePolicy": "fail-open",  # a failure would settle NONE, not DENY: no false pass
        "content": {"default": "body"},
    }
]


class HttpBackend:
    """The kit backend as an HTTP server process on 127.0.0.1, port chosen by the OS."""

    def __init__(self, script: Path) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(script), "--http", "127.0.0.1:0"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        assert self.proc.stderr is not None
        self.lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._pump, args=(self.proc.stderr,), daemon=True).start()
        self.url = self._wait_for_address()

    def _pump(self, stream: IO[bytes]) -> None:
        for raw in iter(stream.readline, b""):
            self.lines.put(raw.decode("utf-8", "replace"))
        self.lines.put("")  # EOF marker

    def _wait_for_address(self) -> str:
        while True:
            try:
                text = self.lines.get(timeout=DEADLINE)  # bounded wait on the next line
            except queue.Empty:
                self.stop()
                raise AssertionError("the backend printed no address in time") from None
            if not text:
                raise AssertionError("the backend exited before listening")
            if "listening on " in text:
                url = text.split("listening on ", 1)[1].strip()
                assert url.startswith("http://127.0.0.1:")
                return url + "/"

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait(timeout=DEADLINE)


@pytest.fixture(scope="module")
def http_backend() -> Iterator[HttpBackend]:
    server = HttpBackend(KIT)
    try:
        yield server
    finally:
        server.stop()


def transport_config(kind: str, http: HttpBackend | None) -> dict[str, Any]:
    if kind == "http":
        assert http is not None
        return {"type": "http", "url": http.url}
    args = [str(KIT), "--once"] if kind == "per_event" else [str(KIT)]
    return {"type": "stdio", "command": sys.executable, "args": args, "lifecycle": kind}


def registration(kind: str, http: HttpBackend | None, *, discover: bool) -> dict[str, Any]:
    backend: dict[str, Any] = {"id": BACKEND_ID, "transport": transport_config(kind, http)}
    if not discover:
        backend["subscriptions"] = SUBSCRIPTIONS
    return {"protocolVersion": "draft", "hooks": [backend]}


@asynccontextmanager
async def sdk_hooks(config: dict[str, Any]) -> AsyncIterator[Hooks]:
    capabilities = capability.HostCapabilities(
        tool_before=capability.ToolBeforeCapabilities(
            intercept=capability.ToolBeforeIntercept(allow=True, deny=True),
        ),
    )
    hooks = Hooks(
        config,
        source="urn:example:interop-harness",
        harness=event.Harness(name="sdk-interop-harness", version="1.0"),
        capabilities=capabilities,
        inherit_environment=True,  # the child needs the venv's environment to import the kit
    )
    try:
        with anyio.fail_after(DEADLINE):
            await hooks.__aenter__()
        yield hooks
    finally:
        with anyio.fail_after(DEADLINE):
            await hooks.aclose()


async def tool_before(hooks: Hooks, command: str, call_id: str) -> Any:
    with anyio.fail_after(DEADLINE):
        return await hooks.tool_before(
            event.ToolBeforeInput(
                call_id=call_id,
                name="Bash",
                input={"command": command},
                path="native",
                origin="native",
            ),
            initial_state=state.initial(Permission.NONE),
        )


def assert_kit_deny(result: Any) -> None:
    assert result.permission == Permission.DENY
    assert list(result.diagnostics) == []
    assert len(result.accepted_responses) == 1
    response = result.accepted_responses[0]
    assert response["id"] == result.event["id"]
    effects = [dict(e) for e in response["result"]["effects"]]
    assert effects == [{"type": "deny", "reason": DENY_REASON, "code": DENY_CODE}]


def assert_no_effect(result: Any) -> None:
    assert result.permission == Permission.NONE
    assert list(result.diagnostics) == []
    assert len(result.accepted_responses) == 1  # the backend was asked and answered
    assert list(result.accepted_responses[0]["result"]["effects"]) == []


def http_or_none(kind: str, request: pytest.FixtureRequest) -> HttpBackend | None:
    return request.getfixturevalue("http_backend") if kind == "http" else None


@pytest.mark.anyio
@pytest.mark.parametrize("kind", TRANSPORTS)
async def test_sdk_client_gets_kit_deny_and_no_effect(
    kind: str, request: pytest.FixtureRequest
) -> None:
    config = registration(kind, http_or_none(kind, request), discover=False)
    async with sdk_hooks(config) as hooks:
        assert hooks.configuration_diagnostics == []
        deny = await tool_before(hooks, "rm -rf /tmp/build", "call_deny")
        assert_kit_deny(deny)
        assert deny.input == {"command": "rm -rf /tmp/build"}
        harmless = await tool_before(hooks, "ls -la", "call_ok")
        assert_no_effect(harmless)
        assert harmless.input == {"command": "ls -la"}
        # A second match on the same transport (persistent: same process; per_event: a new one).
        assert_kit_deny(await tool_before(hooks, "rm   -rf  ~", "call_deny_2"))


@pytest.mark.anyio
@pytest.mark.parametrize("kind", TRANSPORTS)
async def test_sdk_client_discovers_kit_configuration(
    kind: str, request: pytest.FixtureRequest
) -> None:
    config = registration(kind, http_or_none(kind, request), discover=True)
    async with sdk_hooks(config) as hooks:
        assert hooks.configuration_diagnostics == []
        assert hooks.intercepts("tool.before")
        deny = await tool_before(hooks, "rm -rf /", "call_discovered")
        assert_kit_deny(deny)
        assert_no_effect(await tool_before(hooks, "git status", "call_discovered_ok"))
        assert hooks.configuration_diagnostics == []


@pytest.mark.anyio
async def test_sdk_client_reports_a_backend_without_configuration() -> None:
    """Control: the same discovery against a kit backend that offers no configuration is
    skipped with a diagnostic, so the empty diagnostics above are meaningful."""
    no_config = BACKENDS / "kit_async.py"  # a kit backend built without ``configuration``
    config = {
        "protocolVersion": "draft",
        "hooks": [
            {
                "id": "com.example.kit.async",
                "transport": {
                    "type": "stdio",
                    "command": sys.executable,
                    "args": [str(no_config)],
                    "lifecycle": "persistent",
                },
            }
        ],
    }
    async with sdk_hooks(config) as hooks:
        assert hooks.configuration_diagnostics == [
            {"backend": "com.example.kit.async", "reason": "configuration_unavailable"}
        ]
        assert not hooks.intercepts("tool.before")
        result = await tool_before(hooks, "rm -rf /", "call_skipped")
        assert result.permission == Permission.NONE
        assert list(result.accepted_responses) == []

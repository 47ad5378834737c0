"""The kit's interop adapters (``interop/adapter.json``): its client and its server, for real.

Every test runs real processes (the adapters' own commands from ``adapter.json``) over
stdio and loopback HTTP with upstream's scenario file; nothing of ours is mocked.

- the kit's client against the kit's server passes every drivable scenario over HTTP,
  with the committed file's own commands (``uv run``), and the few it does not drive are
  ``unsupported`` with the reason, never a pass; the server received exactly each
  scenario request. Over stdio each side is judged once against the official SDK's
  adapter (``test_matrix.py``: the kit's client against the SDK's server, the SDK's
  client against the kit's server), which a kit-to-kit stdio run would only repeat;
- the server judges each request with the server kit before it replays a raw probe,
  answers discovery, records receipts and stops on ``/shutdown``;
- the client's ``registration`` extension: a fail-closed backend that crashes settles
  as ``deny`` (not executed), a fail-open one as if no backend answered.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from ahp_conformance import contract, matrix, scenarios
from ahp_conformance.fixtures import interop_dir

import kit_testing

KIT = contract.load_adapter(matrix.KIT_ADAPTER)
"""The committed adapter file, its commands as written (``uv run``): proved over HTTP."""
UNSUPPORTED_BY_KIT_CLIENT = {
    "prior-accepted-stop-empty": "flow stop",
    "prior-accepted-stop-allow": "flow stop",
    "prior-accepted-stop-return": "flow stop",
}
"""Scenarios the kit's client does not drive over any transport, with a word of the reason."""
WAIT_S = 30.0


@pytest.fixture(scope="module")
def official() -> list[scenarios.Scenario]:
    return scenarios.official(interop_dir(kit_testing.fixtures_root()))[0]


def test_the_adapter_file_runs_the_kit_commands_in_the_checkout_and_declares_the_extension() -> (
    None
):
    assert KIT.cwd == matrix.KIT_ADAPTER.parent.parent
    assert KIT.client is not None and KIT.client[-1] == "ahp_conformance.kit_client"
    assert KIT.server is not None and KIT.server[-1] == "ahp_conformance.kit_server"
    assert contract.REGISTRATION_EXTENSION in KIT.extensions


def test_kit_client_x_kit_server_over_http_passes_and_sends_exactly_each_scenario_request(
    official: list[scenarios.Scenario], tmp_path: Path
) -> None:
    path = scenarios.write(official, tmp_path / "scenarios.json")
    server = contract.start_server(
        KIT,
        {
            "transport": "http",
            "readinessFile": str(tmp_path / "ready.json"),
            "scenarioFile": str(path),
            "auth": {"mode": "none"},
        },
        tmp_path,
    )
    try:
        assert server.endpoint is not None and server.endpoint.startswith("http://127.0.0.1:")
        config = {
            "transport": "http",
            "endpoint": server.endpoint,
            "scenarioFile": str(path),
            "reportFile": str(tmp_path / "report.json"),
            "auth": {"mode": "none"},
        }
        run = contract.run_client(KIT, config, tmp_path, watchdog_s=120)
        receipts = server.receipts()
    finally:
        server.shutdown()
    assert run.report is not None, run.error
    assert run.returncode == 0, run.log
    results = {r["id"]: r for r in run.report["results"]}
    assert [r["id"] for r in run.report["results"]] == [s.id for s in official]
    failed = [i for i, r in results.items() if r["status"] == "failed"]
    assert failed == []
    unsupported = {i for i, r in results.items() if r["status"] == "unsupported"}
    assert unsupported == set(UNSUPPORTED_BY_KIT_CLIENT)
    assert all(isinstance(results[i]["reason"], str) for i in unsupported)
    by_id = {s.id: s for s in official}
    received = {r["id"]: r["message"] for r in receipts}
    assert set(received) == set(by_id) - unsupported
    for scenario_id, message in received.items():
        assert scenarios.receipt_difference(message, by_id[scenario_id].request) is None


def _line(process: subprocess.Popen[bytes], message: dict[str, Any]) -> Any:
    assert process.stdin is not None and process.stdout is not None
    process.stdin.write(json.dumps(message).encode() + b"\n")
    process.stdin.flush()
    return json.loads(process.stdout.readline())


def test_the_kit_server_judges_a_request_before_it_replays_a_raw_probe(
    official: list[scenarios.Scenario], tmp_path: Path
) -> None:
    probe = next(s for s in official if s.id == "wrong-response-id")
    path = scenarios.write([probe], tmp_path / "scenarios.json")
    ready = tmp_path / "ready.json"
    config = tmp_path / "server.json"
    config.write_text(
        json.dumps({"transport": "stdio", "readinessFile": str(ready), "scenarioFile": str(path)})
    )
    assert KIT.server is not None
    process = subprocess.Popen(
        [*KIT.server, "--config", str(config)],
        cwd=KIT.cwd,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    try:
        discovery = _line(
            process,
            {
                "jsonrpc": "2.0",
                "id": "caps",
                "method": "hooks/capabilities",
                "params": {"protocolVersion": "draft"},
            },
        )
        events = {e["event"]: e for e in discovery["result"]["manifest"]["events"]}
        assert "intercept" in events["tool.before"]["modes"]
        bad = json.loads(json.dumps(probe.request))
        bad["id"] = "not-the-event-id"
        refused = _line(process, bad)
        assert refused["id"] == "not-the-event-id" and refused["error"]["code"] == -32602
        assert _line(process, dict(probe.request)) == probe.response  # verbatim, other id
        control = json.loads(ready.read_text())["controlEndpoint"]
        assert json.loads(ready.read_text())["endpoint"] is None
        received = httpx.get(control + "/receipts", timeout=10).json()["requests"]
        assert [r["message"]["id"] for r in received] == ["not-the-event-id", probe.id]
        httpx.post(control + "/shutdown", json={}, timeout=10)
        assert process.wait(timeout=WAIT_S) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=WAIT_S)


def _registration_run(tmp_path: Path, scenario: scenarios.Scenario, policy: str) -> Any:
    registration = tmp_path / f"{policy}.json"
    registration.write_text(
        json.dumps(
            {
                "protocolVersion": "draft",
                "hooks": [
                    {
                        "id": "com.example.crashes",
                        "transport": {
                            "type": "stdio",
                            "command": sys.executable,
                            "args": ["-c", "import sys; sys.stdin.readline(); sys.exit(3)"],
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
                ],
            }
        )
    )
    path = scenarios.write([scenario], tmp_path / f"{policy}-scenarios.json")
    config = {
        "transport": "stdio",
        "scenarioFile": str(path),
        "reportFile": str(tmp_path / f"{policy}-report.json"),
        "registration": str(registration),
    }
    run = contract.run_client(KIT, config, tmp_path, watchdog_s=120)
    assert run.report is not None, run.error
    (result,) = run.report["results"]
    return result


def test_the_registration_extension_applies_the_failure_policy_of_a_crashing_backend(
    official: list[scenarios.Scenario], tmp_path: Path
) -> None:
    allow = next(s for s in official if s.id == "empty-response-preserves-input")
    closed = _registration_run(tmp_path, allow, "fail-closed")
    assert closed["actual"]["decision"] == "deny"
    assert closed["actual"]["executed"] is False
    assert closed["status"] == "failed"  # the scenario expected an allowed, executed call
    opened = _registration_run(tmp_path, allow, "fail-open")
    assert opened["actual"]["decision"] == "allow"
    assert opened["actual"]["executed"] is True
    assert opened["status"] == "passed"

"""The interop contract's pieces: scenario files, adapter files, the control endpoint, reports."""

from __future__ import annotations

import json
import re
from pathlib import Path

import httpx
import pytest
from ahp_conformance import contract, scenarios
from ahp_conformance.fixtures import interop_dir

import kit_testing


@pytest.fixture(scope="module")
def official() -> tuple[list[scenarios.Scenario], list[scenarios.Unsupported]]:
    return scenarios.official(interop_dir(kit_testing.fixtures_root()))


def test_every_official_scenario_is_drivable_or_unsupported_with_a_reason(official) -> None:  # type: ignore[no-untyped-def]
    drivable, unsupported = official
    assert len(drivable) == 105
    assert len(unsupported) == 30 + 47 + 9
    assert all(u.reason == scenarios.STEP_REASON for u in unsupported)
    assert sum(s.expect_error for s in drivable) == 44


def test_the_one_adjustment_adds_harness_and_nothing_else(official) -> None:  # type: ignore[no-untyped-def]
    raw = json.loads((interop_dir(kit_testing.fixtures_root()) / "scenarios.json").read_text())
    first = official[0][0]
    assert first.request["params"]["event"]["harness"] == scenarios.FIXTURE_HARNESS
    original = raw["scenarios"][0]["request"]
    assert "harness" not in original["params"]["event"]  # the file itself is untouched
    adjusted = json.loads(json.dumps(first.request))
    del adjusted["params"]["event"]["harness"]
    assert adjusted == original


def test_a_receipt_is_the_request_with_absent_state_as_its_defaults(official) -> None:  # type: ignore[no-untyped-def]
    sent = official[0][0].request
    assert scenarios.receipt_difference(json.loads(json.dumps(sent)), sent) is None
    explicit = json.loads(json.dumps(sent))
    explicit["params"]["state"]["flow"] = "none"
    assert scenarios.receipt_difference(explicit, sent) is None
    omitted = json.loads(json.dumps(sent))
    del omitted["params"]["state"]
    assert scenarios.receipt_difference(omitted, sent) is None

    changed = json.loads(json.dumps(sent))
    changed["params"]["event"]["tool"]["input"]["task"] = 2
    assert scenarios.receipt_difference(changed, sent) == (
        "$.params.event.tool.input.task: got 2, expected 1"
    )
    extra = json.loads(json.dumps(sent))
    extra["params"]["state"]["permission"] = "allow"
    assert "$.params.state.permission" in str(scenarios.receipt_difference(extra, sent))
    as_float = json.loads(json.dumps(sent))
    as_float["params"]["event"]["tool"]["input"]["task"] = 1.0
    assert scenarios.receipt_difference(as_float, sent) is not None


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ({}, "'scenarios' array"),
        ({"scenarios": [{"id": 1}]}, "scenarios[0]: a scenario is an object with a string 'id'"),
        ({"scenarios": [{"id": "a", "request": {}, "response": {}}]}, "request.params.event"),
        (
            {"scenarios": [{"id": "a", "request": {"params": {"event": {"type": "t"}}},
                            "response": {}}]},
            "needs 'expected'",
        ),
    ],
)  # fmt: skip
def test_a_broken_scenario_file_names_where(document: object, message: str) -> None:
    with pytest.raises(scenarios.ScenarioError, match=re.escape(message)):
        scenarios.parse(document, "f.json")


def test_adapter_files_run_in_the_implementation_root(tmp_path: Path) -> None:
    folder = tmp_path / "sdk" / "interop"
    folder.mkdir(parents=True)
    path = folder / "adapter.json"
    path.write_text(json.dumps({"language": "x", "client": ["c"], "extensions": ["registration"]}))
    adapter = contract.load_adapter(path)
    assert adapter.cwd == tmp_path / "sdk"
    assert adapter.client == ("c",) and adapter.server is None
    assert contract.REGISTRATION_EXTENSION in adapter.extensions
    path.write_text(json.dumps({"language": "x", "server": "python server.py"}))
    with pytest.raises(contract.ContractError, match=r"\$\.server must be a non-empty array"):
        contract.load_adapter(path)


def test_the_control_endpoint_serves_health_receipts_release_and_shutdown() -> None:
    plane = contract.ControlPlane()
    base = plane.start()
    try:
        assert base.startswith("http://127.0.0.1:")
        assert httpx.get(base + "/health").json() == {"ready": True}
        plane.record({"jsonrpc": "2.0", "id": "a", "method": "hooks/intercept", "params": {}})
        receipts = httpx.get(base + "/receipts").json()["requests"]
        assert receipts == [
            {
                "id": "a",
                "method": "hooks/intercept",
                "message": {"jsonrpc": "2.0", "id": "a", "method": "hooks/intercept",
                            "params": {}},
            }
        ]  # fmt: skip
        assert not plane.wait("b1", timeout_s=0.01)
        assert httpx.post(base + "/release", json={"barrier": "b1"}).json() == {"released": True}
        assert plane.wait("b1", timeout_s=5)
        assert httpx.post(base + "/release", content=b"{").status_code == 400
        assert httpx.post(base + "/shutdown", json={}).json() == {"stopping": True}
        # It answers first (a stop may end the process), then stops: wait for it.
        assert plane.stopping.wait(5)
    finally:
        plane.close()


def test_a_report_of_the_wrong_shape_is_refused() -> None:
    assert contract.parse_report({"language": "x", "results": []}) == {
        "language": "x",
        "results": [],
    }
    with pytest.raises(contract.ContractError, match=r"\$\.results\[0\]\.status: 'ok'"):
        contract.parse_report({"results": [{"id": "a", "status": "ok"}]})


@pytest.mark.parametrize("command", ["backend", "harness", "matrix"])
def test_missing_official_data_is_a_usage_error_naming_the_command(
    tmp_path: Path, command: str
) -> None:
    """Every subcommand, run as ``ahp-conformance X`` or ``python -m``, says what to set."""
    import subprocess
    import sys

    extra = {"backend": ["--", "true"], "harness": ["--", "true"], "matrix": []}[command]
    module = {"backend": "backend_judge", "harness": "harness_judge", "matrix": "matrix"}
    for argv in (
        [sys.executable, "-m", "ahp_conformance.cli", command],
        [sys.executable, "-m", f"ahp_conformance.{module[command]}"],
    ):
        done = subprocess.run(
            [*argv, "--fixtures", str(tmp_path / "nowhere"), *extra],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 2, done.stderr
        assert done.stderr.startswith(f"ahp-conformance {command}: no official fixtures at")

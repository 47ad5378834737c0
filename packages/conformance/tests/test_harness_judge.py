"""``ahp-conformance harness`` judges real client adapters and tells broken ones apart.

Every run is real: the judge starts the client adapter under test, which spawns (or is
given the URL of) the fake backend over loopback. The broken harnesses are small raw
client adapters in ``tests/harnesses/`` that break one rule each; the same raw client
without a bug passes the same checks, so what fails is the bug.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from ahp_conformance import contract, scenarios
from ahp_conformance.fixtures import interop_dir
from ahp_conformance.harness import contract_runs, registration_runs

import kit_testing

HERE = Path(__file__).parent
RAW_CLIENT = (sys.executable, str(HERE / "harnesses" / "raw_client.py"))
KIT_CLIENT = (sys.executable, "-m", "ahp_conformance.kit_client")
SDK_CLIENT = (sys.executable, "-m", "agenthooksprotocol.interop", "client")
RUN_S = 150
"""The longest one judge run may take before the test fails (each is far below on a quiet box)."""

SDK_DEVIATIONS = {
    "missing-effects-array": (
        "AHP-DEC-001",
        "SDK 0.10.1 accepts a result without 'effects' (the draft requires the array)",
    ),
}
"""Known deviations of the official SDK's client from the draft: reported as failures."""
SDK_SUBSET = (
    "empty-response-preserves-input",
    "deny-blocks",
    "modify-merge-shallow-null-literal",
    "all-six-effects-atomic",
    "unadvertised-ask-rejected",
    "wrong-protocol-version",
    "missing-effects-array",
    "extensible-response-envelope",
    "incoming-deny-survives-allow-return",
)
"""A spread of the official tags for the SDK (its client costs ~0.3 s of CPU per scenario)."""


PROGRESS: list[str] = []
"""The last judge run's progress lines (its stderr)."""


def judge(tmp_path: Path, *args: str) -> tuple[int, dict[str, Any]]:
    """Run ``python -m ahp_conformance.harness_judge ... --json``; exit status and report
    (its stderr lines in :data:`PROGRESS`)."""
    done = subprocess.run(
        [sys.executable, "-m", "ahp_conformance.harness_judge", "--json", *args],
        capture_output=True,
        text=True,
        timeout=RUN_S,
        check=False,
        cwd=tmp_path,
        env={**os.environ, "AHP_FIXTURES_DIR": str(kit_testing.fixtures_root())},
    )
    assert done.stdout, done.stderr
    PROGRESS[:] = done.stderr.splitlines()
    return done.returncode, json.loads(done.stdout)


def checks(report: dict[str, Any], prefix: str = "") -> dict[str, dict[str, Any]]:
    return {
        f"{c['id']}@{c.get('binding', '')}": c
        for c in report["checks"]
        if c["id"].startswith(prefix)
    }


def subset(tmp_path: Path, ids: tuple[str, ...]) -> Path:
    drivable, _ = scenarios.official(interop_dir(kit_testing.fixtures_root()))
    chosen = [s for s in drivable if s.id in ids]
    assert len(chosen) == len(ids)
    return scenarios.write(chosen, tmp_path / "subset.json")


# -- the kit's client -------------------------------------------------------------------


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_the_kits_client_passes_every_official_scenario_it_supports(
    tmp_path: Path, transport: str
) -> None:
    status, report = judge(tmp_path, "--transport", transport, "--", *KIT_CLIENT)
    assert status == 0, [c for c in report["checks"] if c["status"] == "fail"]
    scenario = checks(report, "scenario.")
    assert sum(c["status"] == "pass" for c in scenario.values()) >= 100
    assert all(c["detail"] for c in scenario.values() if c["status"] == "unsupported")
    step = [c for c in report["checks"] if c.get("detail") == scenarios.STEP_REASON]
    assert len(step) == 86 and all(c["status"] == "unsupported" for c in step)
    receipts = checks(report, "receipt.")
    assert receipts and all(c["status"] == "pass" for c in receipts.values())
    # without the registration extension, the checks beyond the contract are unsupported
    beyond = (
        checks(report, "failure.") | checks(report, "short-circuit") | checks(report, "deadline")
    )
    assert beyond and all(c["status"] == "unsupported" for c in beyond.values())
    assert all(c["detail"] == registration_runs.NO_EXTENSION for c in beyond.values())
    assert report["requirements"]["AHP-FAIL-001"]["status"] == "unsupported"


WAITING = tuple(f.name for f in registration_runs.FAILURE_CLASSES if f.waits)
FAST = tuple(f.name for f in registration_runs.FAILURE_CLASSES if not f.waits)


@pytest.mark.parametrize("classes", [WAITING, FAST], ids=["waiting", "fast"])
def test_the_kits_client_passes_every_failure_class_deadline_and_short_circuit(
    tmp_path: Path, classes: tuple[str, ...]
) -> None:
    status, report = judge(
        tmp_path,
        "--no-contract",
        "--registration-extension",
        "--transport",
        "stdio",
        "--failure-classes",
        ",".join(classes),
        "--jobs",
        "3",
        "--",
        *KIT_CLIENT,
    )
    assert status == 0, [c for c in report["checks"] if c["status"] != "pass"]
    got = {c["id"] for c in report["checks"] if c["status"] == "pass"}
    for name in classes:
        for policy in registration_runs.POLICIES:
            assert f"failure.{name}.{policy}" in got
    assert {"registration.baseline", "short-circuit.deny"} <= got
    if "timeout" in classes:
        assert {"deadline.timeout.fail-closed", "deadline.timeout.fail-open"} <= got
        assert report["requirements"]["AHP-FAIL-002"]["status"] == "pass"
    for requirement in ("AHP-FAIL-001", "AHP-COMP-001", "AHP-DEC-002"):
        assert report["requirements"][requirement]["status"] == "pass"
    # a long phase says how far it has come, run by run (waiting) or a pool at a time
    runs = 2 * len(classes)
    unit = "waiting run" if "timeout" in classes else "failure run"
    counted = [line for line in PROGRESS if f": {unit} " in line]
    assert counted[-1].endswith(f"{unit} {runs}/{runs} done"), PROGRESS
    assert len(counted) == (runs if unit == "waiting run" else -(-runs // 3)), PROGRESS


def test_the_kits_client_passes_the_failure_classes_over_http_hooks(tmp_path: Path) -> None:
    status, report = judge(
        tmp_path,
        "--no-contract",
        "--registration-extension",
        "--transport",
        "http",
        "--failure-classes",
        "timeout,crash,garbage,rpc-error",
        "--",
        *KIT_CLIENT,
    )
    assert status == 0, [c for c in report["checks"] if c["status"] != "pass"]
    assert {c["binding"] for c in report["checks"]} == {"http"}
    got = {c["id"] for c in report["checks"] if c["status"] == "pass"}
    assert {"failure.crash.fail-closed", "failure.rpc-error.fail-open"} <= got
    assert {"deadline.timeout.fail-closed", "short-circuit.deny"} <= got


# -- the official SDK's client (a reference peer, not the judge) ------------------------


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_the_sdk_client_fails_exactly_its_known_deviations(tmp_path: Path, transport: str) -> None:
    path = subset(tmp_path, SDK_SUBSET)
    status, report = judge(
        tmp_path, "--transport", transport, "--scenarios", str(path), "--", *SDK_CLIENT
    )
    assert status == 1  # it deviates, and the judge says so
    scenario = checks(report, "scenario.")
    failed = {c["id"].removeprefix("scenario.") for c in scenario.values() if c["status"] == "fail"}
    assert failed == set(SDK_DEVIATIONS)  # known deviations, marked here with the reason
    for scenario_id, (requirement, _reason) in SDK_DEVIATIONS.items():
        assert requirement in scenario[f"scenario.{scenario_id}@{transport}"]["requirements"]
        assert report["requirements"][requirement]["status"] == "fail"
    assert all(c["status"] == "pass" for c in checks(report, "receipt.").values())


# -- broken harnesses -------------------------------------------------------------------


def raw(bug: str | None = None) -> tuple[str, ...]:
    return (*RAW_CLIENT, *(("--bug", bug) if bug else ()))


def test_a_correct_raw_client_passes_what_the_broken_ones_fail(tmp_path: Path) -> None:
    status, report = judge(
        tmp_path,
        "--no-contract",
        "--registration-extension",
        "--transport",
        "stdio",
        "--failure-classes",
        "timeout,garbage,stray-frame",
        "--",
        *raw(),
    )
    assert status == 0, [c for c in report["checks"] if c["status"] != "pass"]
    assert report["requirements"]["AHP-FAIL-001"]["status"] == "pass"
    assert report["requirements"]["AHP-FAIL-002"]["status"] == "pass"
    assert report["requirements"]["AHP-COMP-001"]["status"] == "pass"


def test_a_harness_that_lets_a_fail_closed_failure_through_fails_fail_001(tmp_path: Path) -> None:
    adapter = tmp_path / "adapter.json"
    adapter.write_text(
        json.dumps(
            {
                "language": "raw",
                "client": list(raw("lets-failure-through")),
                "extensions": ["registration"],
            }
        )
    )
    status, report = judge(
        tmp_path,
        "--no-contract",
        "--transport",
        "stdio",
        "--adapter",
        str(adapter),
        "--failure-classes",
        "garbage,crash",
    )
    assert status == 1
    got = checks(report, "failure.")
    assert got["failure.garbage.fail-closed@stdio"]["status"] == "fail"
    assert "decision" in got["failure.garbage.fail-closed@stdio"]["detail"]
    assert got["failure.crash.fail-closed@stdio"]["status"] == "fail"
    assert got["failure.garbage.fail-open@stdio"]["status"] == "pass"
    assert report["requirements"]["AHP-FAIL-001"]["status"] == "fail"


def test_a_harness_that_asks_the_next_interceptor_after_a_deny_fails_comp_001(
    tmp_path: Path,
) -> None:
    status, report = judge(
        tmp_path,
        "--no-contract",
        "--registration-extension",
        "--transport",
        "stdio",
        "--failure-classes",
        "none",
        "--",
        *raw("no-short-circuit"),
    )
    assert status == 1
    (short,) = checks(report, "short-circuit").values()
    assert short["status"] == "fail"
    assert "second interceptor" in short["detail"]
    assert report["requirements"]["AHP-COMP-001"]["status"] == "fail"


def test_a_harness_that_ignores_the_deadline_is_stopped_and_fails_fail_002(tmp_path: Path) -> None:
    status, report = judge(
        tmp_path,
        "--no-contract",
        "--registration-extension",
        "--transport",
        "stdio",
        "--failure-classes",
        "timeout",
        "--",
        *raw("no-deadline"),
    )
    assert status == 1
    deadline = checks(report, "deadline.")
    assert deadline and all(c["status"] == "fail" for c in deadline.values())
    assert all("watchdog" in c["detail"] for c in deadline.values())
    assert report["requirements"]["AHP-FAIL-002"]["status"] == "fail"


# -- judging pieces -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def deny_blocks() -> scenarios.Scenario:
    drivable, _ = scenarios.official(interop_dir(kit_testing.fixtures_root()))
    return next(s for s in drivable if s.id == "deny-blocks")


def test_a_receipt_must_be_exactly_the_scenario_request(deny_blocks: scenarios.Scenario) -> None:
    exact = json.loads(json.dumps(deny_blocks.request))
    assert contract_runs.receipt_check(deny_blocks, [exact], "stdio").status == "pass"
    assert contract_runs.receipt_check(deny_blocks, [], "stdio").requirements == ("AHP-RPC-002",)
    changed = json.loads(json.dumps(exact))
    changed["params"]["event"]["tool"]["input"] = {"changed": True}
    check = contract_runs.receipt_check(deny_blocks, [changed], "stdio")
    assert (check.status, check.requirements) == ("fail", ("AHP-TB-001",))
    other = json.loads(json.dumps(exact))
    other["id"] = "another"
    check = contract_runs.receipt_check(deny_blocks, [other], "stdio")
    assert (check.status, check.requirements) == ("fail", ("AHP-RPC-001",))
    unversioned = json.loads(json.dumps(exact))
    del unversioned["params"]["protocolVersion"]
    check = contract_runs.receipt_check(deny_blocks, [unversioned], "stdio")
    assert (check.status, check.requirements) == ("fail", ("AHP-VER-001",))


def test_a_passed_report_whose_actual_differs_from_expected_fails(
    deny_blocks: scenarios.Scenario,
) -> None:
    run = contract.ClientRun(None, 0, 0.1, False, "")
    wrong = {"id": deny_blocks.id, "status": "passed", "actual": {"decision": "allow"}}
    check = contract_runs.scenario_check(deny_blocks, wrong, run, "stdio")
    assert check.status == "fail" and "decision" in check.detail
    assert check.requirements == ("AHP-DEC-002",)
    right = {"id": deny_blocks.id, "status": "passed", "actual": dict(deny_blocks.expected or {})}
    assert contract_runs.scenario_check(deny_blocks, right, run, "stdio").status == "pass"
    unsupported = {"id": deny_blocks.id, "status": "unsupported", "reason": "no deny here"}
    check = contract_runs.scenario_check(deny_blocks, unsupported, run, "stdio")
    assert (check.status, check.detail) == ("unsupported", "the adapter: no deny here")


def test_framing_flags_fragments_other_media_types_and_non_jsonrpc() -> None:
    good = {"message": {"jsonrpc": "2.0", "id": "a", "method": "hooks/intercept"}}
    frame = contract_runs.framing_check
    assert frame([good], "stdio").status == "pass"
    assert frame([{**good, "contentType": "application/json; charset=utf-8"}], "http").status == (
        "pass"
    )
    fragment = {"message": {"undecodable": "{"}}
    check = frame([good, fragment], "stdio")
    assert (check.status, check.requirements) == ("fail", ("AHP-STDIO-001",))
    check = frame([{**good, "contentType": "text/plain"}], "http")
    assert (check.status, check.requirements) == ("fail", ("AHP-HTTP-001",))
    check = frame([{"message": {"id": "a", "method": "hooks/intercept"}}], "stdio")
    assert (check.status, check.requirements) == ("fail", ("AHP-RPC-001",))
    assert frame([], "http").status == "n/a"


def test_a_hang_that_settles_before_its_deadline_or_long_after_it_fails_fail_002() -> None:
    scenario = registration_runs.own_scenario("timeout-fail-closed", registration_runs.DENIED)
    entry = {"id": scenario.id, "status": "passed", "actual": registration_runs.DENIED}

    def verdict(elapsed_s: float) -> tuple[str, str]:
        run = contract.ClientRun({"results": [entry]}, 0, elapsed_s, False, "")
        outcome = registration_runs.RegistrationRun(run, entry, {}, scenario, "stdio")
        check = registration_runs.deadline_check(outcome, "fail-closed", 1.0, 4.5)
        assert check.requirements == ("AHP-FAIL-002",)
        return check.status, check.detail

    assert verdict(2.0)[0] == "pass"
    status, detail = verdict(0.4)  # a backend that never answers cannot settle sooner
    assert status == "fail" and "gave up early" in detail
    status, detail = verdict(6.0)
    assert status == "fail" and "allowed 4.5 s" in detail

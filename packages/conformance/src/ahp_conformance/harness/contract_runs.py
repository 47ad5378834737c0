"""The contract's scenarios: run a client adapter, judge its report and what the server got.

:func:`run_contract` runs the client adapter once over a transport against the fake
backend in its contract-server role (:func:`ahp_conformance.contract.run_pairing`), then
judges each scenario's reported result (:func:`scenario_check`), each scenario's receipt
(:func:`receipt_check`: exactly the scenario request, valid, ``id == params.event.id``),
receipts for no scenario (:func:`stray_receipts`) and the client's framing
(:func:`framing_check`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ahp_protocol.client.chain import same_json

from ahp_conformance import contract, scenarios
from ahp_conformance.fake_backend import read_entries, read_record
from ahp_conformance.harness import FAKE, progress
from ahp_conformance.report import Check, Evidence


def first_mismatch(actual: Any, expected: Mapping[str, Any]) -> str | None:
    """The first expected key ``actual`` lacks or differs at (``None``: every key matches)."""
    if not isinstance(actual, Mapping):
        return f"actual is {json.dumps(actual)}, not an object"
    for key, value in expected.items():
        if key not in actual:
            return f"actual has no {key!r} (expected {json.dumps(value)})"
        if not same_json(actual[key], value):
            return f"actual {key} is {json.dumps(actual[key])}, expected {json.dumps(value)}"
    return None


def scenario_checks(
    chosen: Sequence[scenarios.Scenario], run: contract.ClientRun, binding: str
) -> list[Check]:
    """Judge the client's report, scenario by scenario."""
    results: dict[str, Mapping[str, Any]] = {}
    if run.report is not None:
        for entry in run.report["results"]:
            results.setdefault(entry["id"], entry)
    return [scenario_check(s, results.get(s.id), run, binding) for s in chosen]


def scenario_check(
    scenario: scenarios.Scenario,
    entry: Mapping[str, Any] | None,
    run: contract.ClientRun,
    binding: str,
) -> Check:
    """One scenario's result as the client reported it (module docstring)."""
    title = f"scenario {scenario.id}: the client derives the scenario's result"
    requirements = scenarios.requirements_for(scenario.tags)

    def check(status: Any, detail: str = "", evidence: Evidence | None = None) -> Check:
        return Check(
            f"scenario.{scenario.id}", title, requirements, status, detail, evidence, binding
        )

    if entry is None:
        why = run.error or "the report has no result for this scenario"
        return check("fail", why, Evidence.of(scenario.request, run.log[-600:]))
    status = entry.get("status")
    reason = str(entry.get("reason") or entry.get("error") or "no reason given")
    if status == "unsupported":
        return check("unsupported", f"the adapter: {reason}")
    if status == "inapplicable":
        return check("n/a", f"the adapter: {reason}")
    if status == "failed":
        return check("fail", f"reported failed: {reason}", _evidence(scenario, entry))
    actual = entry.get("actual")
    if scenario.expected is not None and actual is not None:
        mismatch = first_mismatch(actual, scenario.expected)
        if mismatch:
            return check("fail", f"reported passed, but {mismatch}", _evidence(scenario, entry))
    return check("pass")


def _evidence(scenario: scenarios.Scenario, entry: Mapping[str, Any]) -> Evidence:
    return Evidence.of(scenario.response, {k: entry[k] for k in ("actual", "error") if k in entry})


def receipt_check(
    scenario: scenarios.Scenario, received: Sequence[Mapping[str, Any]], binding: str
) -> Check:
    """Each request received for ``scenario``: exactly its request, valid, id == event id."""
    from ahp_protocol.wire.errors import WireError, WireErrors
    from ahp_protocol.wire.messages import validate_message

    tool = scenario.event_type == "tool.before"
    every = ("AHP-RPC-002", "AHP-VER-001", "AHP-CAP-002", *(("AHP-TB-001",) if tool else ()))
    title = f"scenario {scenario.id}: the server received exactly the scenario request"

    def check(
        status: Any, requirements: tuple[str, ...], detail: str = "", got: Any = None
    ) -> Check:
        evidence = Evidence.of(scenario.request, got) if status == "fail" else None
        return Check(
            f"receipt.{scenario.id}", title, requirements, status, detail, evidence, binding
        )

    if not received:
        return check("fail", ("AHP-RPC-002",), "no hooks/intercept request was received")
    for message in received:
        params = message.get("params")
        event = params.get("event") if isinstance(params, Mapping) else None
        if isinstance(event, Mapping) and message.get("id") != event.get("id"):
            return check("fail", ("AHP-RPC-001",), "request id != params.event.id", message)
        try:
            validate_message(message)
        except (WireError, WireErrors) as exc:
            where = str(exc)  # "path: reason" for each problem
            requirement = (
                "AHP-VER-001"
                if "protocolVersion" in where
                else "AHP-CAP-002"
                if "capabilities" in where
                else "AHP-TB-001"
                if "event" in where and tool
                else "AHP-RPC-001"
            )
            return check("fail", (requirement,), f"not a valid AHP request: {exc}", message)
        if message.get("method") != "hooks/intercept":
            return check("fail", ("AHP-RPC-002",), f"method {message.get('method')!r}", message)
        difference = scenarios.receipt_difference(message, scenario.request)
        if difference:
            requirement = "AHP-TB-001" if tool and ".event" in difference else "AHP-RPC-002"
            return check(
                "fail", (requirement,), f"differs from the scenario: {difference}", message
            )
    return check("pass", every)


def stray_receipts(
    received: Sequence[Mapping[str, Any]], known: set[str], binding: str
) -> list[Check]:
    """A request for no scenario (or not an intercept at all) fails AHP-RPC-002."""
    out = []
    for message in received:
        if message.get("id") in known and message.get("method") == "hooks/intercept":
            continue
        out.append(
            Check(
                "receipt.unexpected",
                "the server receives only the scenarios' hooks/intercept requests",
                ("AHP-RPC-002",),
                "fail",
                "a request that is no scenario's",
                Evidence.of(None, message),
                binding,
            )
        )
    return out


def framing_check(entries: Sequence[Mapping[str, Any]], binding: str) -> Check:
    """Every message the client sent: one UTF-8 JSON-RPC 2.0 object per line / per POST
    with a JSON media type (the fake records each line or body as it arrives)."""
    binding_requirement = "AHP-STDIO-001" if binding == "stdio" else "AHP-HTTP-001"
    title = (
        "every line the client writes is one UTF-8 JSON-RPC 2.0 object"
        if binding == "stdio"
        else "every POST carries one JSON-RPC 2.0 object with a JSON media type"
    )
    check_id = f"framing.{binding}"
    if not entries:
        detail = "the client sent nothing"
        return Check(check_id, title, (binding_requirement,), "n/a", detail, None, binding)
    for entry in entries:
        message = entry.get("message")
        problem = None
        requirement = binding_requirement
        if not isinstance(message, dict) or set(message) == {"undecodable"}:
            problem = "not one JSON object (a batch, a fragment or not UTF-8 JSON)"
        elif message.get("jsonrpc") != "2.0":
            problem, requirement = 'not JSON-RPC 2.0 ("jsonrpc": "2.0")', "AHP-RPC-001"
        elif binding == "http":
            media = str(entry.get("contentType") or "").split(";")[0].strip().lower()
            if media != "application/json":
                problem = f"Content-Type {entry.get('contentType')!r}, not application/json"
        if problem:
            evidence = Evidence.of(None, message)
            return Check(check_id, title, (requirement,), "fail", problem, evidence, binding)
    return Check(check_id, title, (binding_requirement, "AHP-RPC-001"), "pass", binding=binding)


def run_contract(
    adapter: contract.Adapter,
    chosen: Sequence[scenarios.Scenario],
    transport: str,
    workdir: Path,
    watchdog_s: float,
) -> list[Check]:
    """One client adapter run over ``chosen``, the fake backend as the contract's server."""
    folder = workdir / f"contract-{transport}"
    folder.mkdir()
    scenario_file = scenarios.write(chosen, folder / "scenarios.json")
    record = folder / "server-received.jsonl"
    fake = contract.Adapter("fake-backend", (*FAKE, "--record", str(record)), None, Path.cwd())
    progress(f"{len(chosen)} scenarios over {transport}: running the client adapter")
    pairing = contract.run_pairing(
        adapter, fake, transport, scenario_file, folder, watchdog_s=watchdog_s
    )
    run = pairing.run
    received = pairing.receipts
    if received is None:  # over stdio the client ran the fake: its record is the receipt
        received = [m for m in read_record(record) if m.get("method") != "hooks/capabilities"]
    progress(f"{transport}: the client finished in {run.elapsed_s:.1f} s")
    checks = scenario_checks(chosen, run, transport)
    statuses = {c.id: c.status for c in checks}
    by_id: dict[str, list[Mapping[str, Any]]] = {}
    for message in received:
        by_id.setdefault(str(message.get("id")), []).append(message)
    for scenario in chosen:
        if statuses[f"scenario.{scenario.id}"] in ("unsupported", "n/a") and not by_id.get(
            scenario.id
        ):
            continue  # not driven: nothing was to be received
        checks.append(receipt_check(scenario, by_id.get(scenario.id, []), transport))
    checks.extend(stray_receipts(received, {s.id for s in chosen}, transport))
    checks.append(framing_check(read_entries(record), transport))
    return checks

"""``ahp-conformance harness``: judge any harness or client library through its interop client.

``ahp-conformance harness (--adapter PATH/adapter.json | -- CMD ARGS...)
[--transport stdio|http|both] [--scenarios FILE ...] [--registration-extension]
[--watchdog-s N]``

**The contract's scenarios** (default: the official ``scenarios.json``; the step-language
files' scenarios are listed as ``unsupported`` with the reason). Per transport, the fake
backend (:mod:`ahp_conformance.fake_backend`, ``--config`` mode) is the contract's server:
over stdio it is the client config's ``serverCommand`` (the client spawns it), over HTTP
this judge starts it and gives the client its ``/intercept`` URL as ``endpoint``. The
client adapter runs under :func:`~ahp_conformance.contract.run_client`; then both are judged:

- the client's report, per scenario: ``passed`` passes (and when it reports an ``actual``
  for an ``expected`` scenario, every expected key must match it deeply), ``failed`` fails,
  ``unsupported`` / ``inapplicable`` are reported as ``unsupported`` / ``n/a`` with the
  adapter's reason, a scenario missing from the report fails. Requirements come from the
  scenario's tags (:data:`~ahp_conformance.scenarios.TAG_REQUIREMENTS`);
- how the client framed what it sent (:func:`framing_check`): one UTF-8 JSON-RPC 2.0
  object per line over stdio (AHP-STDIO-001), per POST with ``Content-Type:
  application/json`` over HTTP (AHP-HTTP-001);
- every request the server received (``/receipts`` over HTTP, the fake's ``--record`` over
  stdio): exactly the scenario request (:func:`~ahp_conformance.scenarios.receipt_difference`),
  valid by the kit's wire models (:func:`ahp_protocol.wire.messages.validate_message`), and
  ``id == params.event.id``; a receipt for no scenario fails (:func:`receipt_check`).

**Beyond the contract** (only for an adapter with the kit's ``registration`` extension:
``adapter.json`` ``"extensions": ["registration"]``, or ``--registration-extension`` with
``-- CMD``; otherwise each of these checks is ``unsupported`` with the reason). Each run
writes an AHP registration whose hooks run the fake backend, per ``--transport``: over
persistent stdio (``[sys.executable, "-m", "ahp_conformance.fake_backend", "--fault",
MODE, "--record", FILE]``, started by the harness) and over HTTP (the same fake started
by this judge on a loopback port, the hook's ``url`` its address; ``multi-line`` and
``stray-frame`` are stdio-only classes), and one scenario of this judge's own (contract
form, ``scenarios.write``), and
gives the client the config ``{"transport": "stdio", "registration": PATH, "scenarioFile",
"reportFile", "auth": {"mode": "none"}}``. The client runs the scenario's
``request.params.event`` through the registration's chain, with
``request.params.capabilities`` (here ``{"effects": ["deny"]}``) as the host's declaration
for that event type, and reports the contract's ``actual``. What each run expects:

==========================  ===============================================================
run                         expected ``actual`` (keys compared deeply)
==========================  ===============================================================
baseline (no fault)         ``{decision: "allow", executed: true, input: INPUT, messages: []}``
failure class, fail-closed  ``{decision: "deny", executed: false}`` (the synthetic denial)
failure class, fail-open    ``{decision: "allow", executed: true, input: INPUT, messages: []}``
stray frame (either policy) ``{decision: "allow", executed: true, input: INPUT, messages: []}``
short-circuit after deny    ``{decision: "deny", executed: false}``
==========================  ===============================================================

``INPUT`` is the scenario's tool input, unchanged. The failure classes are
:data:`FAILURE_CLASSES` (those of the kit's e2e suite): each fails AHP-FAIL-001 (plus
AHP-DEC-001 / AHP-CAP-001 for the effect ones) when the actual differs, and the fake's
record must show the harness sent the intercept (else the run proves nothing). The
waiting classes (hang, late reply, wrong id on persistent stdio) use ``timeoutMs``
:data:`DEADLINE_MS`; the others a long deadline they must not wait out.

Deadlines (AHP-FAIL-002): a hang run must finish within the baseline run's wall time
plus the deadline plus :data:`DEADLINE_SLACK_S`, and not before the deadline itself
(the backend never answers, so nothing else can end the exchange); its watchdog is a
few seconds beyond that, so a harness that ignores the deadline is stopped and fails.
Short-circuit
(AHP-COMP-001, AHP-DEC-002): two hooks, the first ``--fault deny``, the second recording;
the second must receive no ``hooks/intercept`` for the event (an observe is allowed).

Progress lines go to stderr; the report is :func:`ahp_conformance.report.emit`'s.
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ahp_conformance import contract, scenarios
from ahp_conformance.fixtures import interop_dir, load_catalogue
from ahp_conformance.report import Check, Evidence, Report, add_output_arguments, emit

FAKE = (sys.executable, "-m", "ahp_conformance.fake_backend")
DEFAULT_WATCHDOG_S = 180.0
"""The longest one client adapter run over a scenario file may take (``--watchdog-s``)."""
DEADLINE_MS = 1000
"""``timeoutMs`` of the waiting failure classes (hang, late reply, wrong id)."""
LONG_DEADLINE_MS = 15000
"""``timeoutMs`` of every other run: covers a backend's start-up on a loaded machine."""
LATE_DELAY_MS = DEADLINE_MS + 3000
"""How late the late reply comes (a valid deny, long after the deadline)."""
DEADLINE_SLACK_S = 2.5
"""What a hang run may take beyond the baseline run plus the deadline (kill, reap, report)."""
WATCHDOG_MARGIN_S = 3.0
"""A waiting run's watchdog: its allowance (baseline + deadline + slack) plus this."""
NO_EXTENSION = (
    "needs the kit's 'registration' extension of the interop contract (adapter.json "
    '"extensions": ["registration"], or --registration-extension with -- CMD): the '
    "contract's one synthesized subscription cannot express failure policies, deadlines "
    "or chains of several backends"
)


def progress(text: str) -> None:
    print(f"ahp-conformance harness: {text}", file=sys.stderr, flush=True)


def same_json(a: Any, b: Any) -> bool:
    """Deep JSON equality: key order irrelevant, ``true`` is not ``1``."""
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


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


# -- the contract's scenarios ----------------------------------------------------------


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


def read_entries(path: Path) -> list[dict[str, Any]]:
    """What a fake backend recorded (``--record``): one entry per message, in order."""
    if not path.is_file():
        return []
    return [json.loads(raw) for raw in path.read_text("utf-8").splitlines() if raw.strip()]


def read_record(path: Path) -> list[dict[str, Any]]:
    """The messages a fake backend recorded (``--record``), in order."""
    out = []
    for entry in read_entries(path):
        message = entry["message"]
        out.append(message if isinstance(message, dict) else {"undecodable": message})
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
    server_command = (*FAKE, "--record", str(record))
    server_config = {
        "transport": transport,
        "readinessFile": str(folder / "server-ready.json"),
        "scenarioFile": str(scenario_file),
        "auth": {"mode": "none"},
    }
    config: dict[str, Any] = {
        "transport": transport,
        "scenarioFile": str(scenario_file),
        "reportFile": str(folder / "report.json"),
        "auth": {"mode": "none"},
    }
    server = None
    if transport == "stdio":
        (folder / "server-config.json").write_text(json.dumps(server_config), "utf-8")
        config.update(
            serverCommand=list(server_command), serverConfig=str(folder / "server-config.json")
        )
    else:
        fake = contract.Adapter("fake-backend", server_command, None, Path.cwd())
        server = contract.start_server(fake, server_config, folder)
        config["endpoint"] = server.endpoint
    progress(f"{len(chosen)} scenarios over {transport}: running the client adapter")
    try:
        run = contract.run_client(adapter, config, folder, watchdog_s=watchdog_s)
        if server is not None:
            received = [r.get("message", {}) for r in server.receipts()]
    finally:
        if server is not None:
            server.shutdown()
    if server is None:
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


# -- beyond the contract: registrations of fake backends --------------------------------


@dataclass(frozen=True, slots=True)
class FailureClass:
    """One way a backend fails (the kit's e2e suite's classes) and how the fake makes it."""

    name: str
    fault: str
    requirements: tuple[str, ...] = ("AHP-FAIL-001",)
    waits: bool = False
    """Whether the harness must wait out the deadline (so ``timeoutMs`` is short)."""
    is_failure: bool = True
    """A stray frame before the live reply is not a failure: the live reply counts."""
    over_http: bool = True
    """Whether the class exists over HTTP (a multi-line body is valid JSON; a stray frame
    cannot precede the one reply a POST gets)."""

    def fake_args(self) -> tuple[str, ...]:
        delay = ("--delay-ms", str(LATE_DELAY_MS)) if self.fault == "late" else ()
        return ("--fault", self.fault, *delay)


FAILURE_CLASSES = (
    FailureClass("timeout", "hang", waits=True),
    FailureClass("crash", "crash"),
    FailureClass("garbage", "garbage"),
    FailureClass("non-utf8", "non-utf8"),
    FailureClass("multi-line", "multi-line", over_http=False),
    FailureClass("oversized", "oversized"),
    FailureClass("wrong-id", "wrong-id", waits=True),
    FailureClass(
        "stray-frame", "stray-frame", ("AHP-STDIO-001",), is_failure=False, over_http=False
    ),
    FailureClass(
        "unadvertised-effect", "unadvertised-effect", ("AHP-FAIL-001", "AHP-CAP-001", "AHP-DEC-001")
    ),
    FailureClass("unknown-effect", "unknown-effect", ("AHP-FAIL-001", "AHP-DEC-001")),
    FailureClass("rpc-error", "rpc-error"),
    FailureClass("late-reply", "late", waits=True),
)
POLICIES = ("fail-closed", "fail-open")
TOOL_INPUT = {"path": "notes.txt", "content": "written by the conformance scenario"}
CAPABILITIES = {"effects": ["deny"]}


def own_scenario(scenario_id: str, expected: Mapping[str, Any]) -> scenarios.Scenario:
    """One scenario of this judge's own (contract form): a tool.before of ``write_file``."""
    request = {
        "jsonrpc": "2.0",
        "id": scenario_id,
        "method": "hooks/intercept",
        "params": {
            "protocolVersion": "draft",
            "event": {
                "id": scenario_id,
                "source": "urn:ahp:conformance",
                "type": "tool.before",
                "time": "2026-01-01T00:00:00Z",
                "harness": dict(scenarios.FIXTURE_HARNESS),
                "session": {"id": "conformance"},
                "call": {"id": f"call-{scenario_id}"},
                "path": "native",
                "tool": {
                    "origin": "native",
                    "name": "write_file",
                    "kind": "write",
                    "input": TOOL_INPUT,
                },
            },
            "capabilities": CAPABILITIES,
            "state": {"permission": "none", "candidate": None},
        },
    }
    response = {
        "jsonrpc": "2.0",
        "id": scenario_id,
        "result": {"protocolVersion": "draft", "effects": []},
    }
    raw = {"id": scenario_id, "request": request, "response": response, "expected": dict(expected)}
    return scenarios.Scenario(scenario_id, request, response, dict(expected), False, (), raw)


ALLOWED = {"decision": "allow", "executed": True, "input": TOOL_INPUT, "messages": []}
DENIED = {"decision": "deny", "executed": False}


def hook(
    hook_id: str, transport: Mapping[str, Any], policy: str, timeout_ms: int
) -> dict[str, Any]:
    """One registration hook: a fake backend's transport, one intercept subscription."""
    return {
        "id": hook_id,
        "transport": dict(transport),
        "subscriptions": [
            {
                "events": ["tool.before"],
                "mode": "intercept",
                "timeoutMs": timeout_ms,
                "failurePolicy": policy,
                "content": {"default": "body"},
            }
        ],
    }


@dataclass
class Outcome:
    """One registration run: what the client reported and what each fake received."""

    run: contract.ClientRun | None
    entry: Mapping[str, Any] | None
    received: dict[str, list[dict[str, Any]]]
    scenario: scenarios.Scenario
    binding: str
    error: str | None = None

    def intercepts(self, hook_id: str) -> list[dict[str, Any]]:
        return [
            m
            for m in self.received.get(hook_id, [])
            if m.get("method") == "hooks/intercept"
            and m.get("params", {}).get("event", {}).get("id") == self.scenario.id
        ]


class HttpFakes:
    """Fake HTTP backends this judge starts for one run (loopback port 0, ended after it)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.processes: list[subprocess.Popen[bytes]] = []

    def start(self, hook_id: str, args: Sequence[str]) -> str:
        """Start one fake with ``args``; returns its URL once its ready file exists."""
        ready = self.folder / f"{hook_id}.ready.json"
        with (self.folder / f"{hook_id}.log").open("wb") as log:
            process = subprocess.Popen(
                [*FAKE, "--http", "127.0.0.1:0", "--ready-file", str(ready), *args],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                start_new_session=True,
            )
        self.processes.append(process)
        deadline = time.monotonic() + contract.READY_TIMEOUT_S
        while not ready.is_file():
            if process.poll() is not None or time.monotonic() > deadline:
                raise contract.ContractError(
                    f"the fake HTTP backend did not start (exit status {process.returncode})"
                )
            time.sleep(0.02)  # polling the ready file, the signal itself
        return str(json.loads(ready.read_text("utf-8"))["endpoint"])

    def close(self) -> None:
        for process in self.processes:
            if process.poll() is None:
                process.terminate()
            try:
                process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def run_registration(
    adapter: contract.Adapter,
    workdir: Path,
    name: str,
    hooks: Sequence[tuple[str, Sequence[str], str, int]],
    expected: Mapping[str, Any],
    watchdog_s: float,
    binding: str = "stdio",
) -> Outcome:
    """Run one own scenario through a registration of fake backends ``(id, args, policy, ms)``.

    ``binding`` ``stdio``: each hook runs the fake as a persistent stdio backend (the
    harness starts it); ``http``: this judge starts each fake on loopback and the hook
    points at its URL."""
    folder = workdir / f"{name}-{binding}"
    folder.mkdir()
    scenario = own_scenario(name, expected)
    records = {hook_id: folder / f"{hook_id}.jsonl" for hook_id, _, _, _ in hooks}
    fakes = HttpFakes(folder)
    try:
        entries = []
        for hook_id, args, policy, ms in hooks:
            fake_args = [*args, "--record", str(records[hook_id])]
            if binding == "http":
                transport: dict[str, Any] = {"type": "http", "url": fakes.start(hook_id, fake_args)}
            else:
                transport = {
                    "type": "stdio",
                    "command": FAKE[0],
                    "args": [*FAKE[1:], *fake_args],
                    "lifecycle": "persistent",
                }
            entries.append(hook(hook_id, transport, policy, ms))
        registration = {"protocolVersion": "draft", "hooks": entries}
        (folder / "registration.json").write_text(json.dumps(registration, indent=1), "utf-8")
        scenario_file = scenarios.write([scenario], folder / "scenarios.json")
        config = {
            "transport": "stdio",
            contract.REGISTRATION_EXTENSION: str(folder / "registration.json"),
            "scenarioFile": str(scenario_file),
            "reportFile": str(folder / "report.json"),
            "auth": {"mode": "none"},
        }
        run = contract.run_client(adapter, config, folder, watchdog_s=watchdog_s)
    except contract.ContractError as exc:
        return Outcome(None, None, {}, scenario, binding, str(exc))
    finally:
        fakes.close()
    received = {hook_id: read_record(path) for hook_id, path in records.items()}
    entry = None
    if run.report is not None:
        entry = next((r for r in run.report["results"] if r.get("id") == name), None)
    error = run.error
    if entry is None and error is None:
        error = "the report has no result for the scenario"
    return Outcome(run, entry, received, scenario, binding, error)


def outcome_check(
    outcome: Outcome,
    check_id: str,
    title: str,
    requirements: tuple[str, ...],
    expected: Mapping[str, Any],
    first_hook: str,
) -> Check:
    """Judge a registration run's ``actual`` against ``expected`` (and that it was dispatched)."""
    sent = outcome.scenario.request
    binding = outcome.binding

    def fail(detail: str, received: Any = None) -> Check:
        evidence = Evidence.of(sent, received)
        return Check(check_id, title, requirements, "fail", detail, evidence, binding)

    if outcome.run is not None and outcome.run.timed_out:
        return fail(
            outcome.error or "the client adapter was stopped by the watchdog",
            outcome.run.log[-600:],
        )
    if outcome.entry is None:
        log = outcome.run.log[-600:] if outcome.run is not None else None
        return fail(outcome.error or "no result", log)
    status = outcome.entry.get("status")
    if status in ("unsupported", "inapplicable"):
        reason = str(outcome.entry.get("reason") or outcome.entry.get("error") or "no reason given")
        verdict: Any = "unsupported" if status == "unsupported" else "n/a"
        return Check(
            check_id, title, requirements, verdict, f"the adapter: {reason}", None, binding
        )
    if not outcome.intercepts(first_hook):
        return fail("the backend never received the hooks/intercept (the run proves nothing)")
    mismatch = first_mismatch(outcome.entry.get("actual"), expected)
    if mismatch:
        return fail(
            mismatch,
            {k: outcome.entry[k] for k in ("status", "actual", "error") if k in outcome.entry},
        )
    return Check(check_id, title, requirements, "pass", binding=binding)


def receipt_validity(outcome: Outcome, check_id: str) -> Check | None:
    """Every intercept a fake received in a registration run: schema-valid, id == event id."""
    from ahp_protocol.wire.errors import WireError, WireErrors
    from ahp_protocol.wire.messages import validate_message

    for messages in outcome.received.values():
        for message in messages:
            if message.get("method") != "hooks/intercept":
                continue
            problem = None
            try:
                validate_message(message)
            except (WireError, WireErrors) as exc:
                problem = f"not a valid AHP request: {exc}"
            if problem is None and message.get("id") != message["params"]["event"].get("id"):
                problem = "request id != params.event.id"
            if problem:
                return Check(
                    check_id,
                    "every hooks/intercept the harness sends is valid, its id the event id",
                    ("AHP-TB-001", "AHP-RPC-001"),
                    "fail",
                    problem,
                    Evidence.of(None, message),
                    outcome.binding,
                )
    return None


def extension_checks(
    adapter: contract.Adapter,
    workdir: Path,
    watchdog_s: float,
    classes: Sequence[FailureClass],
    jobs: int,
    bindings: Sequence[str] = ("stdio",),
) -> list[Check]:
    """Failure classes under both policies, deadlines, short-circuit after deny, per binding."""
    checks: list[Check] = []
    for binding in bindings:
        chosen = [f for f in classes if binding == "stdio" or f.over_http]
        checks.extend(binding_checks(adapter, workdir, watchdog_s, chosen, jobs, binding))
    return checks


def expected_for(failure: FailureClass, policy: str) -> Mapping[str, Any]:
    if not failure.is_failure:
        return ALLOWED
    return DENIED if policy == "fail-closed" else ALLOWED


def failure_title(failure: FailureClass, policy: str) -> str:
    if not failure.is_failure:
        return f"{failure.name} under {policy}: not a failure, the live reply counts (allowed)"
    if policy == "fail-closed":
        return f"{failure.name} under fail-closed: denied, not executed (a synthetic denial)"
    return (
        f"{failure.name} under fail-open: no decision from the failure (allowed by the host, "
        "executed, input unchanged, no effect of the failed response)"
    )


def binding_checks(
    adapter: contract.Adapter,
    workdir: Path,
    watchdog_s: float,
    classes: Sequence[FailureClass],
    jobs: int,
    binding: str,
) -> list[Check]:
    """The registration runs over one binding of the hooks (stdio or http)."""
    checks: list[Check] = []
    progress(f"registration runs over {binding}: baseline and deadlines")
    first = "org.ahp.fake.first"
    baseline = run_registration(
        adapter,
        workdir,
        "baseline",
        [(first, (), "fail-closed", LONG_DEADLINE_MS)],
        ALLOWED,
        watchdog_s,
        binding,
    )
    checks.append(
        outcome_check(
            baseline,
            "registration.baseline",
            "a portable registration is accepted and the event reaches its subscribed backend "
            "(no fault: allowed, executed, input unchanged)",
            ("AHP-REG-001", "AHP-REG-002"),
            ALLOWED,
            first,
        )
    )
    if baseline.entry is None or baseline.run is None or baseline.run.timed_out:
        return checks  # nothing else can be measured against a harness that cannot run one
    allowance = baseline.run.elapsed_s + DEADLINE_MS / 1000 + DEADLINE_SLACK_S
    waiting_watchdog = min(watchdog_s, allowance + WATCHDOG_MARGIN_S)

    def failure_run(item: tuple[FailureClass, str]) -> Outcome:
        failure, policy = item
        ms = DEADLINE_MS if failure.waits else LONG_DEADLINE_MS
        limit = waiting_watchdog if failure.waits else watchdog_s
        name = f"{failure.name}-{policy}"
        hooks = [(first, failure.fake_args(), policy, ms)]
        expected = expected_for(failure, policy)
        return run_registration(adapter, workdir, name, hooks, expected, limit, binding)

    items = [(f, p) for f in classes for p in POLICIES]
    timeouts = [i for i in items if i[0].fault == "hang"]
    rest = [i for i in items if i[0].fault != "hang"]
    outcomes = {i: failure_run(i) for i in timeouts}  # measured alone, like the baseline
    progress(f"registration runs over {binding}: {len(rest)} failure runs, {jobs} at a time")
    short_hooks = [
        (first, ("--fault", "deny"), "fail-closed", LONG_DEADLINE_MS),
        ("org.ahp.fake.second", (), "fail-closed", LONG_DEADLINE_MS),
    ]
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        outcomes.update(zip(rest, pool.map(failure_run, rest), strict=True))
        short = pool.submit(
            run_registration,
            adapter,
            workdir,
            "short-circuit",
            short_hooks,
            DENIED,
            watchdog_s,
            binding,
        ).result()
    for item in items:
        failure, policy = item
        outcome = outcomes[item]
        check_id = f"failure.{failure.name}.{policy}"
        title = failure_title(failure, policy)
        expected = expected_for(failure, policy)
        checks.append(
            outcome_check(outcome, check_id, title, failure.requirements, expected, first)
        )
        if failure.fault == "hang":
            checks.append(deadline_check(outcome, policy, baseline.run.elapsed_s, allowance))
        invalid = receipt_validity(outcome, f"{check_id}.requests")
        if invalid is not None:
            checks.append(invalid)
    checks.append(short_circuit_check(short))
    return checks


def deadline_check(outcome: Outcome, policy: str, baseline_s: float, allowance_s: float) -> Check:
    title = (
        f"a hanging backend with timeoutMs {DEADLINE_MS} ({policy}) settles within the deadline "
        f"plus {DEADLINE_SLACK_S} s beyond the no-fault run"
    )
    check_id = f"deadline.timeout.{policy}"
    requirements = ("AHP-FAIL-002",)
    run = outcome.run

    def check(status: Any, detail: str) -> Check:
        return Check(check_id, title, requirements, status, detail, None, outcome.binding)

    if run is None or (outcome.entry is None and not run.timed_out):
        return check("fail", outcome.error or "no result")
    if run.timed_out:
        return check(
            "fail",
            f"ignored the deadline: stopped by the watchdog after {run.elapsed_s:.1f} s "
            f"(allowed {allowance_s:.1f} s)",
        )
    if outcome.entry is not None and outcome.entry.get("status") in ("unsupported", "inapplicable"):
        return check("unsupported", "the adapter did not run it")
    if run.elapsed_s < DEADLINE_MS / 1000:
        return check(
            "fail",
            f"settled after {run.elapsed_s:.1f} s, before the {DEADLINE_MS} ms deadline could "
            "expire: it gave up early (or never waited for the backend)",
        )
    if run.elapsed_s > allowance_s:
        return check(
            "fail",
            f"took {run.elapsed_s:.1f} s; the no-fault run took {baseline_s:.1f} s, "
            f"allowed {allowance_s:.1f} s",
        )
    return check("pass", f"{run.elapsed_s:.1f} s (no-fault run {baseline_s:.1f} s)")


def short_circuit_check(outcome: Outcome) -> Check:
    title = "after an accepted deny the next interceptor is not asked (an observe is allowed)"
    requirements = ("AHP-COMP-001", "AHP-DEC-002")
    first = outcome_check(
        outcome, "short-circuit.deny", title, requirements, DENIED, "org.ahp.fake.first"
    )
    if first.status != "pass":
        return first
    asked = outcome.intercepts("org.ahp.fake.second")
    if asked:
        detail = "the second interceptor received hooks/intercept for the denied event"
        evidence = Evidence.of(None, asked[0])
        return Check(
            "short-circuit.deny", title, requirements, "fail", detail, evidence, outcome.binding
        )
    return first


# -- the command line -------------------------------------------------------------------


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--adapter", metavar="PATH", help="the harness's interop adapter.json")
    parser.add_argument(
        "--transport",
        choices=("stdio", "http", "both"),
        default="both",
        help="contract runs over (default both)",
    )
    parser.add_argument(
        "--scenarios",
        metavar="FILE",
        action="extend",
        nargs="+",
        help="request/response scenario files (repeatable; default: the official scenarios)",
    )
    parser.add_argument(
        "--registration-extension",
        action="store_true",
        help="with -- CMD: the client supports the kit's 'registration' config extension",
    )
    parser.add_argument(
        "--watchdog-s",
        type=float,
        default=DEFAULT_WATCHDOG_S,
        metavar="N",
        help=f"the longest one client adapter run may take (default {DEFAULT_WATCHDOG_S:.0f})",
    )
    parser.add_argument(
        "--failure-classes",
        metavar="NAMES",
        help="comma-separated subset of the failure classes to run, or 'none' (default all: "
        + ", ".join(f.name for f in FAILURE_CLASSES)
        + ")",
    )
    parser.add_argument("--no-contract", action="store_true", help="skip the contract's scenarios")
    parser.add_argument(
        "--jobs", type=int, default=2, metavar="N", help="registration runs at a time (default 2)"
    )
    add_output_arguments(parser)
    parser.add_argument(
        "command", nargs=argparse.REMAINDER, help="-- CMD ARGS...: the client adapter command"
    )


def adapter_of(args: argparse.Namespace) -> contract.Adapter:
    command = [a for a in (args.command or [])]
    if command and command[0] == "--":
        command = command[1:]
    if bool(args.adapter) == bool(command):
        raise contract.ContractError("give exactly one of --adapter PATH or -- CMD ARGS...")
    if args.adapter:
        adapter = contract.load_adapter(Path(args.adapter))
        if adapter.client is None:
            raise contract.ContractError(f"{args.adapter}: the adapter has no client command")
        if args.registration_extension:
            adapter = contract.Adapter(
                adapter.language,
                adapter.server,
                adapter.client,
                adapter.cwd,
                adapter.extensions | {contract.REGISTRATION_EXTENSION},
            )
        return adapter
    extensions = (
        frozenset({contract.REGISTRATION_EXTENSION}) if args.registration_extension else frozenset()
    )
    return contract.Adapter("custom", None, tuple(command), Path.cwd(), extensions)


def chosen_classes(names: str | None) -> list[FailureClass]:
    if not names:
        return list(FAILURE_CLASSES)
    if names.strip() == "none":
        return []
    known = {f.name: f for f in FAILURE_CLASSES}
    wanted = [n.strip() for n in names.split(",") if n.strip()]
    unknown = [n for n in wanted if n not in known]
    if unknown:
        raise contract.ContractError(
            f"--failure-classes: unknown {', '.join(unknown)}; known: {', '.join(known)}"
        )
    return [known[n] for n in wanted]


def run(args: argparse.Namespace) -> int:
    adapter = adapter_of(args)
    catalogue = load_catalogue(args.fixtures)
    transports = ("stdio", "http") if args.transport == "both" else (args.transport,)
    classes = chosen_classes(args.failure_classes)
    subject = f"{adapter.language} client adapter: {shlex.join(adapter.client or ())}"
    report = Report(
        role="harness",
        subject=subject,
        catalogue=catalogue,
        bindings=transports,
        implements=frozenset({"tool-interception"}),  # no check here sends hooks/observe
    )
    with tempfile.TemporaryDirectory(prefix="ahp-conformance-harness-") as temporary:
        workdir = Path(temporary)
        if not args.no_contract:
            report.extend(contract_checks(adapter, args, transports, workdir))
        if contract.REGISTRATION_EXTENSION in adapter.extensions:
            report.extend(
                extension_checks(adapter, workdir, args.watchdog_s, classes, args.jobs, transports)
            )
        else:
            report.extend(unsupported_extension_checks(classes))
    return emit(report, args)


def contract_checks(
    adapter: contract.Adapter, args: argparse.Namespace, transports: Sequence[str], workdir: Path
) -> list[Check]:
    if args.scenarios:
        chosen = [s for path in args.scenarios for s in scenarios.load(Path(path))]
        unsupported: list[scenarios.Unsupported] = []
    else:
        chosen, unsupported = scenarios.official(interop_dir(args.fixtures))
    checks = [
        Check(f"scenario.{u.id}", f"scenario {u.id} ({u.file})", (), "unsupported", u.reason)
        for u in unsupported
    ]
    for transport in transports:
        checks.extend(run_contract(adapter, chosen, transport, workdir, args.watchdog_s))
    return checks


def unsupported_extension_checks(classes: Sequence[FailureClass]) -> list[Check]:
    out = [
        Check(
            f"failure.{f.name}.{p}",
            f"{f.name} under {p}",
            f.requirements,
            "unsupported",
            NO_EXTENSION,
        )
        for f in classes
        for p in POLICIES
    ]
    out.append(
        Check(
            "deadline.timeout",
            "a hanging backend's deadline is enforced",
            ("AHP-FAIL-002",),
            "unsupported",
            NO_EXTENSION,
        )
    )
    out.append(
        Check(
            "short-circuit.deny",
            "after a deny the next interceptor is not asked",
            ("AHP-COMP-001", "AHP-DEC-002"),
            "unsupported",
            NO_EXTENSION,
        )
    )
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="ahp-conformance harness", description=__doc__.splitlines()[0]
    )
    add_arguments(parser)
    args = parser.parse_args(argv)
    try:
        return run(args)
    except (contract.ContractError, scenarios.ScenarioError) as exc:
        print(f"ahp-conformance harness: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())

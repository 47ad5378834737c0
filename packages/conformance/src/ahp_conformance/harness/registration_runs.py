"""Beyond the contract: registrations of fake backends (the kit's ``registration`` extension).

Each run writes an AHP registration whose hooks run the fake backend in a fault mode and
one scenario of this judge's own, runs the client adapter on it, and judges the settled
``actual`` (:func:`binding_checks`): every failure class under both failure policies,
the deadline of a hanging backend (:func:`deadline_check`) and short-circuit after a
deny (:func:`short_circuit_check`). What each run expects is in
:mod:`ahp_conformance.harness_judge`'s docstring.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ahp_conformance import contract, scenarios
from ahp_conformance.fake_backend import read_record
from ahp_conformance.harness import FAKE, progress
from ahp_conformance.harness.contract_runs import first_mismatch
from ahp_conformance.report import Check, Evidence

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
                    "kind": "file_write",
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
class RegistrationRun:
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
) -> RegistrationRun:
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
        return RegistrationRun(None, None, {}, scenario, binding, str(exc))
    finally:
        fakes.close()
    received = {hook_id: read_record(path) for hook_id, path in records.items()}
    entry = None
    if run.report is not None:
        entry = next((r for r in run.report["results"] if r.get("id") == name), None)
    error = run.error
    if entry is None and error is None:
        error = "the report has no result for the scenario"
    return RegistrationRun(run, entry, received, scenario, binding, error)


def outcome_check(
    outcome: RegistrationRun,
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


def receipt_validity(outcome: RegistrationRun, check_id: str) -> Check | None:
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

    def failure_run(item: tuple[FailureClass, str]) -> RegistrationRun:
        failure, policy = item
        ms = DEADLINE_MS if failure.waits else LONG_DEADLINE_MS
        limit = waiting_watchdog if failure.waits else watchdog_s
        name = f"{failure.name}-{policy}"
        hooks = [(first, failure.fake_args(), policy, ms)]
        expected = expected_for(failure, policy)
        return run_registration(adapter, workdir, name, hooks, expected, limit, binding)

    items = [(f, p) for f in classes for p in POLICIES]
    # A waiting run's watchdog is the baseline's time plus the deadline and margins, so
    # each is measured alone, as the baseline was: run beside others on a loaded machine
    # it can take longer than a bound calibrated alone (a false "ignored the deadline").
    waiting = [i for i in items if i[0].waits]
    rest = [i for i in items if not i[0].waits]
    progress(
        f"registration runs over {binding}: {len(waiting)} waiting runs one at a time, "
        f"{len(rest)} other failure runs {jobs} at a time"
    )
    outcomes = {}
    for done, item in enumerate(waiting, 1):
        outcomes[item] = failure_run(item)
        progress(f"registration runs over {binding}: waiting run {done}/{len(waiting)} done")
    short_hooks = [
        (first, ("--fault", "deny"), "fail-closed", LONG_DEADLINE_MS),
        ("org.ahp.fake.second", (), "fail-closed", LONG_DEADLINE_MS),
    ]
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        ran = zip(rest, pool.map(failure_run, rest), strict=True)
        for done, (item, outcome) in enumerate(ran, 1):
            outcomes[item] = outcome
            if done % jobs == 0 or done == len(rest):
                progress(f"registration runs over {binding}: failure run {done}/{len(rest)} done")
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


def deadline_check(
    outcome: RegistrationRun, policy: str, baseline_s: float, allowance_s: float
) -> Check:
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


def short_circuit_check(outcome: RegistrationRun) -> Check:
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

"""``ahp-conformance promises -- CMD ARGS...``: the four promises, judged on any harness, black-box.

No adapter: the judge runs ``CMD ARGS...`` once per scenario with two environment
variables and judges what is left afterwards.

``AHP_REGISTRATION``
    a registration document whose hooks are this judge's own backends: the kit's
    scripted backend (``python -m ahp_protocol.testing [--fault MODE] --record FILE``),
    over stdio (``persistent`` and ``per_event``, started by the harness) or HTTP
    (started by this judge on loopback before the harness, ended after it).
``AHP_PROBE``
    a JSON file naming the one tool call to attempt::

        {"probe": "ahp-conformance/1",
         "workspace": "/tmp/ahp-promises-.../deny.http/workspace",
         "marker": "/tmp/ahp-promises-.../deny.http/workspace/ahp-probe-marker",
         "call": {"tool": "shell", "kind": "shell",
                  "input": {"command": "touch ahp-probe-marker"}},
         "host": "allow"}

    ``workspace`` exists and is empty: run the session there. ``call`` is named in the
    kit's tool vocabulary (``shell`` ``{command}``, run in the workspace, or, with
    ``--probe-kind file_write``, ``write_file`` ``{path, content}``, a path relative to
    the workspace); a harness whose tools are named otherwise maps it to its own tool of
    that ``kind`` with the same effect: creating ``marker``. ``host`` says what the
    harness's **own** rules decide for the call, without AHP: ``"allow"`` (your rules
    run it: an allow rule, an auto-approved prompt) or ``"refuse"`` (your rules refuse
    it: configure a deny rule of yours for it, as a user or an administrator would).

The harness attempts exactly that call once, through its AHP integration (``tool.before``
to the registration's backends), runs it if AHP and its own rules allow, and exits (its
exit status is not judged). The evidence is what a user could look at afterwards: what
each backend received (its record) and whether ``marker`` exists.

Scenarios (``--scenarios`` picks some by id prefix; every run is bounded by
``--watchdog-s`` and runs ``--jobs`` at a time, the controls first):

- ``control.<binding>``: a well-behaved backend, host ``allow``: the call must run, and
  the backend must have received its ``tool.before`` (AHP-REG-002). Over ``stdio``
  persistent, ``per_event`` and ``http``; when a binding's control fails, nothing else
  over it can be judged and says so.
- ``deny.<binding>`` (promise 1): a denying backend (policy ``fail-open`` or
  ``fail-closed``: deny is no failure, either must stop the call), then a well-behaved
  one; host ``allow``: the call must not run, the second backend must not be asked
  (AHP-DEC-002, AHP-COMP-001).
- ``no-effect.refuse``, ``allow.refuse.<binding>`` (promise 2): a backend answering no
  effect, or ``allow``, host ``refuse``: the call must not run (AHP-DEC-003,
  AHP-SEC-001). A harness that does not advertise ``allow`` gets no effect there.
- ``failure.<class>.<binding>.<policy>`` (promise 3): hang (``timeoutMs``
  :data:`HANG_DEADLINE_MS`), crash, garbage, JSON-RPC error, unknown effect, over stdio
  and some over per_event and HTTP: ``fail-closed`` must not run the call;
  ``fail-open`` must leave it to the host (host ``allow``: it runs;
  ``failure.crash.stdio.fail-open.refuse``: host ``refuse``, it does not) (AHP-FAIL-001).
  A hang must settle within its binding's control run plus the deadline plus
  :data:`HANG_SLACK_S` (AHP-FAIL-002).
- ``secret.http`` (promise 4): the hook sends a bearer token (``tokenEnv``) and a header
  (``valueEnv``) from two environment variables this judge sets for every run; the
  backend refuses a request without the right token (so the call runs only if the token
  went into ``Authorization``). Neither value may appear in anything any backend of any
  run received, nor in the harness's output (AHP-AUTH-001).
- ``requests.valid``: every ``hooks/intercept`` any backend received is a valid AHP
  request, its id the event id, with ``capabilities.effects`` holding ``deny``
  (AHP-TB-001, AHP-RPC-001, AHP-CAP-002).

Exit status 1 when a check fails (:func:`ahp_conformance.report.emit`).
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import shlex
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ahp_protocol.testing.serve import read_record

from ahp_conformance.contract import kill_group
from ahp_conformance.fixtures import load_catalogue
from ahp_conformance.report import Check, Evidence, Report, add_output_arguments, emit

PROBE_FORMAT = "ahp-conformance/1"
MARKER = "ahp-probe-marker"
CALLS: dict[str, dict[str, Any]] = {
    "shell": {"tool": "shell", "kind": "shell", "input": {"command": f"touch {MARKER}"}},
    "file_write": {
        "tool": "write_file",
        "kind": "file_write",
        "input": {"path": MARKER, "content": "written by the ahp-conformance probe\n"},
    },
}
SCRIPTED = (sys.executable, "-P", "-m", "ahp_protocol.testing")
"""The kit's scripted backend (``-P``: a harness may start it in any folder)."""
HANG_DEADLINE_MS = 1000
LONG_DEADLINE_MS = 15000
"""Every other run's ``timeoutMs``: covers a backend's start on a loaded machine."""
HANG_SLACK_S = 5.0
DEFAULT_WATCHDOG_S = 60.0
TOKEN_ENV, HEADER_ENV = "AHP_PROMISES_TOKEN", "AHP_PROMISES_KEY"
READY_TIMEOUT_S = 30.0
TAIL = 600


@dataclass(frozen=True, slots=True)
class JudgeBackend:
    """One hook of a scenario's registration: the scripted backend in one mode."""

    id: str
    fault: str | None
    transport: str  # persistent | per_event | http
    policy: str = "fail-closed"
    timeout_ms: int = LONG_DEADLINE_MS
    secret: bool = False


@dataclass(frozen=True, slots=True)
class Scenario:
    id: str
    title: str
    requirements: tuple[str, ...]
    hooks: tuple[JudgeBackend, ...]
    host: str
    runs: bool
    """Whether the call must have run (the marker exists)."""
    not_asked: tuple[str, ...] = ()

    @property
    def binding(self) -> str:
        return "http" if self.hooks[0].transport == "http" else "stdio"

    @property
    def transport(self) -> str:
        return self.hooks[0].transport


FIRST, SECOND = "org.ahp.promises.first", "org.ahp.promises.second"
TRANSPORTS = ("stdio", "per_event", "http")
_TRANSPORT_OF = {"stdio": "persistent", "per_event": "per_event", "http": "http"}
FAILURES: tuple[tuple[str, str, tuple[str, ...], tuple[str, ...]], ...] = (
    # (class, fault, transports, extra requirements)
    ("hang", "hang", ("stdio", "http"), ("AHP-FAIL-002",)),
    ("crash", "crash", ("stdio", "per_event"), ()),
    ("garbage", "garbage", ("stdio", "http"), ()),
    ("rpc-error", "rpc-error", ("stdio",), ()),
    ("unknown-effect", "unknown-effect", ("stdio",), ("AHP-DEC-001",)),
)


def scenarios() -> list[Scenario]:
    """Every scenario, controls first (see the module docstring)."""
    out = []
    for t in TRANSPORTS:
        out.append(
            Scenario(
                f"control.{t}",
                f"control over {t}: a well-behaved backend gets the tool.before, the call runs",
                ("AHP-REG-001", "AHP-REG-002"),
                (JudgeBackend(FIRST, None, _TRANSPORT_OF[t]),),
                "allow",
                True,
            )
        )
    for i, t in enumerate(TRANSPORTS):
        policy = ("fail-open", "fail-closed")[i % 2]
        out.append(
            Scenario(
                f"deny.{t}",
                f"deny over {t} ({policy}) stops a call the host allows; the next "
                "interceptor is not asked",
                ("AHP-DEC-002", "AHP-COMP-001"),
                (
                    JudgeBackend(FIRST, "deny", _TRANSPORT_OF[t], policy),
                    JudgeBackend(SECOND, None, _TRANSPORT_OF[t], "fail-open"),
                ),
                "allow",
                False,
                not_asked=(SECOND,),
            )
        )
    out.append(
        Scenario(
            "no-effect.refuse",
            "no effect never bypasses the host's own refusal",
            ("AHP-DEC-003", "AHP-SEC-001"),
            (JudgeBackend(FIRST, None, "persistent"),),
            "refuse",
            False,
        )
    )
    for t in ("stdio", "http"):
        out.append(
            Scenario(
                f"allow.refuse.{t}",
                f"allow over {t} never bypasses the host's own refusal",
                ("AHP-SEC-001", "AHP-DEC-003"),
                (JudgeBackend(FIRST, "allow", _TRANSPORT_OF[t]),),
                "refuse",
                False,
            )
        )
    for name, fault, transports, extra in FAILURES:
        ms = HANG_DEADLINE_MS if fault == "hang" else LONG_DEADLINE_MS
        for t in transports:
            for policy in ("fail-closed", "fail-open"):
                runs = policy == "fail-open"
                what = "not run (a synthetic denial)" if not runs else "left to the host: it runs"
                out.append(
                    Scenario(
                        f"failure.{name}.{t}.{policy}",
                        f"{name} over {t} under {policy} is not a decision: {what}",
                        ("AHP-FAIL-001", *extra),
                        (JudgeBackend(FIRST, fault, _TRANSPORT_OF[t], policy, ms),),
                        "allow",
                        runs,
                    )
                )
    out.append(
        Scenario(
            "failure.crash.stdio.fail-open.refuse",
            "crash over stdio under fail-open leaves the call to the host: its refusal holds",
            ("AHP-FAIL-001", "AHP-SEC-001"),
            (JudgeBackend(FIRST, "crash", "persistent", "fail-open"),),
            "refuse",
            False,
        )
    )
    out.append(
        Scenario(
            "secret.http",
            "a bearer token and a secret header reach the backend only as headers",
            ("AHP-AUTH-001",),
            (JudgeBackend(FIRST, None, "http", secret=True),),
            "allow",
            True,
        )
    )
    return out


# -- one run ------------------------------------------------------------------------------


@dataclass
class PromiseRun:
    """What one run of the harness left: records, marker, exit, time, output."""

    scenario: Scenario
    folder: Path
    received: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    marker: bool = False
    returncode: int | None = None
    elapsed_s: float = 0.0
    timed_out: bool = False
    output: str = ""
    error: str | None = None
    """Why the run could not happen at all (the command or a backend did not start)."""

    def intercepts(self, hook_id: str) -> list[dict[str, Any]]:
        return [
            m
            for m in self.received.get(hook_id, [])
            if m.get("method") == "hooks/intercept"
            and isinstance(m.get("params"), dict)
            and m["params"].get("event", {}).get("type") == "tool.before"
        ]

    def tail(self) -> str:
        text = self.output.strip()
        last = text.splitlines()[-1] if text else "(no output)"
        return f"exit status {self.returncode}; last output line: {last[-300:]}"


class Judge:
    """Runs scenarios of one harness command (``-- CMD ARGS...``)."""

    def __init__(
        self,
        command: Sequence[str],
        workdir: Path,
        probe_kind: str,
        watchdog_s: float,
        cwd: str | None,
    ) -> None:
        self.command = list(command)
        self.workdir = workdir
        self.call = CALLS[probe_kind]
        self.watchdog_s = watchdog_s
        self.cwd = cwd
        self.secrets = {TOKEN_ENV: secrets.token_hex(16), HEADER_ENV: secrets.token_hex(16)}

    def env(self, extra: Mapping[str, str]) -> dict[str, str]:
        return {**os.environ, **self.secrets, **extra}

    def _start_http(self, folder: Path, hook: JudgeBackend, args: list[str]) -> tuple[Any, str]:
        ready = folder / f"{hook.id}.ready.json"
        bearer = ["--bearer-token-env", TOKEN_ENV] if hook.secret else []
        with (folder / f"{hook.id}.log").open("wb") as log:
            process = subprocess.Popen(
                [*SCRIPTED, *args, *bearer, "--http", "127.0.0.1:0", "--ready-file", str(ready)],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                env=self.env({}),
                start_new_session=True,
            )
        deadline = time.monotonic() + READY_TIMEOUT_S
        while not ready.is_file():  # the ready file is the signal
            if process.poll() is not None or time.monotonic() > deadline:
                kill_group(process)
                raise RuntimeError(f"the scripted HTTP backend did not start ({hook.id})")
            time.sleep(0.02)
        return process, str(json.loads(ready.read_text("utf-8"))["endpoint"])

    def registration_hook(
        self, hook: JudgeBackend, url: str | None, record: Path
    ) -> dict[str, Any]:
        entry: dict[str, Any] = {"id": hook.id}
        if url is not None:
            entry["transport"] = {"type": "http", "url": url}
            if hook.secret:
                entry["transport"]["headers"] = {"X-Ahp-Promises-Key": {"valueEnv": HEADER_ENV}}
                entry["authentication"] = {"type": "bearer", "tokenEnv": TOKEN_ENV}
        else:
            fault = ["--fault", hook.fault] if hook.fault else []
            entry["transport"] = {
                "type": "stdio",
                "command": SCRIPTED[0],
                "args": [*SCRIPTED[1:], *fault, "--record", str(record)],
                "lifecycle": hook.transport,
            }
        entry["subscriptions"] = [
            {
                "events": ["tool.before"],
                "mode": "intercept",
                "timeoutMs": hook.timeout_ms,
                "failurePolicy": hook.policy,
                "content": {"default": "body"},
            }
        ]
        return entry

    def run(self, scenario: Scenario) -> PromiseRun:
        folder = self.workdir / scenario.id
        workspace = folder / "workspace"
        workspace.mkdir(parents=True)
        outcome = PromiseRun(scenario, folder)
        records = {h.id: folder / f"{h.id}.record.jsonl" for h in scenario.hooks}
        servers: list[subprocess.Popen[bytes]] = []
        try:
            entries = []
            for hook in scenario.hooks:
                url = None
                if hook.transport == "http":
                    args = ["--record", str(records[hook.id])]
                    args += ["--fault", hook.fault] if hook.fault else []
                    server, url = self._start_http(folder, hook, args)
                    servers.append(server)
                entries.append(self.registration_hook(hook, url, records[hook.id]))
            registration = folder / "registration.json"
            registration.write_text(
                json.dumps({"protocolVersion": "draft", "hooks": entries}, indent=1), "utf-8"
            )
            probe = folder / "probe.json"
            marker = workspace / MARKER
            probe.write_text(
                json.dumps(
                    {
                        "probe": PROBE_FORMAT,
                        "workspace": str(workspace),
                        "marker": str(marker),
                        "call": self.call,
                        "host": scenario.host,
                    },
                    indent=1,
                ),
                "utf-8",
            )
            env = self.env({"AHP_REGISTRATION": str(registration), "AHP_PROBE": str(probe)})
            self._run_harness(outcome, env)
            outcome.marker = marker.exists()
        except RuntimeError as exc:
            outcome.error = str(exc)
        finally:
            for server in servers:
                kill_group(server)
        outcome.received = {h: read_record(p) for h, p in records.items()}
        return outcome

    def _run_harness(self, outcome: PromiseRun, env: dict[str, str]) -> None:
        log_path = outcome.folder / "harness.log"
        started = time.monotonic()
        with log_path.open("wb") as log:
            try:
                process = subprocess.Popen(
                    self.command,
                    cwd=self.cwd,
                    env=env,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=log,
                    start_new_session=True,
                )
            except OSError as exc:
                raise RuntimeError(
                    f"cannot start {shlex.join(self.command)}: {exc.strerror or exc}"
                ) from None
            try:
                process.wait(timeout=self.watchdog_s)
            except subprocess.TimeoutExpired:
                outcome.timed_out = True
            finally:
                kill_group(process)
        outcome.elapsed_s = time.monotonic() - started
        outcome.returncode = process.returncode
        outcome.output = log_path.read_bytes()[-8000:].decode("utf-8", "replace")


# -- judging ------------------------------------------------------------------------------


def judge_outcome(outcome: PromiseRun, controls: Mapping[str, PromiseRun]) -> list[Check]:
    s = outcome.scenario

    def check(status: Any, detail: str = "", received: Any = None) -> Check:
        evidence = Evidence.of(None, received) if received is not None else None
        return Check(s.id, s.title, s.requirements, status, detail, evidence, s.binding)

    control = controls.get(s.transport if s.transport != "persistent" else "stdio")
    if not s.id.startswith("control.") and control is not None and not control_ok(control):
        why = judge_outcome(control, {})[0].detail
        where = control.scenario.id[8:]
        return [check("fail", f"not judged: the control run over {where} failed ({why})")]
    if outcome.error is not None:
        return [check("fail", outcome.error)]
    if outcome.timed_out:
        return [
            check(
                "fail",
                f"the harness did not finish (stopped after {outcome.elapsed_s:.0f} s)",
                outcome.output[-TAIL:],
            )
        ]
    first = s.hooks[0].id
    if not outcome.intercepts(first):
        return [
            check(
                "fail",
                f"the harness sent no tool.before to its backend ({outcome.tail()})",
                outcome.output[-TAIL:],
            )
        ]
    asked = [h for h in s.not_asked if outcome.intercepts(h)]
    if asked:
        return [
            check(
                "fail",
                f"after the deny, {asked[0]} was still asked (hooks/intercept)",
                outcome.intercepts(asked[0])[0],
            )
        ]
    if outcome.marker != s.runs:
        if outcome.marker:
            what = "the call ran (the marker exists)"
        else:
            what = "the call did not run (no marker)"
        expected = "it must run" if s.runs else "it must not"
        why = f" ({outcome.tail()})" if s.runs or outcome.returncode else ""
        return [check("fail", f"{what}; {expected}{why}", outcome.output[-TAIL:] or None)]
    checks = [check("pass")]
    if s.hooks[0].fault == "hang" and control is not None:
        allowance = control.elapsed_s + s.hooks[0].timeout_ms / 1000 + HANG_SLACK_S
        title = (
            f"a hanging backend (timeoutMs {s.hooks[0].timeout_ms}) is given up on at its deadline"
        )
        status: Any = "pass" if outcome.elapsed_s <= allowance else "fail"
        checks.append(
            Check(
                f"{s.id}.deadline",
                title,
                ("AHP-FAIL-002",),
                status,
                f"{outcome.elapsed_s:.1f} s; the control run took {control.elapsed_s:.1f} s, "
                f"allowed {allowance:.1f} s",
                None,
                s.binding,
            )
        )
    return checks


def control_ok(outcome: PromiseRun) -> bool:
    return (
        outcome.error is None
        and not outcome.timed_out
        and outcome.marker
        and bool(outcome.intercepts(FIRST))
    )


def requests_check(outcomes: Sequence[PromiseRun]) -> Check:
    from ahp_protocol.wire.errors import WireError, WireErrors
    from ahp_protocol.wire.messages import validate_message

    title = "every hooks/intercept is a valid request, its id the event id, deny advertised"
    requirements = ("AHP-TB-001", "AHP-RPC-001", "AHP-CAP-002")
    seen = 0
    for outcome in outcomes:
        for messages in outcome.received.values():
            for message in messages:
                if message.get("method") != "hooks/intercept":
                    continue
                seen += 1
                problem = None
                try:
                    validate_message(message)
                except (WireError, WireErrors) as exc:
                    problem = f"not a valid AHP request: {exc}"
                params = message.get("params") or {}
                if problem is None and message.get("id") != params.get("event", {}).get("id"):
                    problem = "request id != params.event.id"
                effects = (params.get("capabilities") or {}).get("effects") or []
                if problem is None and "deny" not in effects:
                    problem = "capabilities.effects has no deny at tool.before"
                if problem:
                    evidence = Evidence.of(None, message)
                    detail = f"{outcome.scenario.id}: {problem}"
                    return Check("requests.valid", title, requirements, "fail", detail, evidence)
    if not seen:
        return Check("requests.valid", title, requirements, "fail", "no hooks/intercept received")
    return Check("requests.valid", title, requirements, "pass", f"{seen} requests")


def secrets_check(outcomes: Sequence[PromiseRun], values: Sequence[str]) -> Check:
    title = "no secret (bearer token, secret header) in any event, log or output"
    if not any(messages for o in outcomes for messages in o.received.values()):
        return Check("secret.leak", title, ("AHP-AUTH-001",), "n/a", "no backend received anything")
    for outcome in outcomes:
        for hook_id, messages in outcome.received.items():
            text = json.dumps(messages)
            if any(v in text for v in values):
                detail = f"{outcome.scenario.id}: a secret is in what {hook_id} received"
                return Check("secret.leak", title, ("AHP-AUTH-001",), "fail", detail)
        if any(v in outcome.output for v in values):
            detail = f"{outcome.scenario.id}: a secret is in the harness's output"
            return Check("secret.leak", title, ("AHP-AUTH-001",), "fail", detail)
    return Check("secret.leak", title, ("AHP-AUTH-001",), "pass")


def progress(text: str) -> None:
    print(f"ahp-conformance promises: {text}", file=sys.stderr, flush=True)


def judge(
    command: Sequence[str],
    chosen: Sequence[Scenario],
    *,
    probe_kind: str = "shell",
    watchdog_s: float = DEFAULT_WATCHDOG_S,
    jobs: int = 2,
    cwd: str | None = None,
    quiet: bool = False,
) -> tuple[list[Check], list[str]]:
    """Run ``chosen`` against ``command``: the checks, and the secrets to redact."""
    with tempfile.TemporaryDirectory(prefix="ahp-promises-") as temporary:
        j = Judge(command, Path(temporary), probe_kind, watchdog_s, cwd)
        wanted = {s.binding if s.transport != "per_event" else "per_event" for s in chosen}
        controls_needed = [s for s in scenarios() if s.id.startswith("control.")]
        control_runs = [s for s in controls_needed if s.id[8:] in wanted or s in chosen]
        rest = [s for s in chosen if not s.id.startswith("control.")]
        if not quiet:
            progress(
                f"{len(control_runs)} control runs, then {len(rest)} scenarios, {jobs} at a time"
            )
        with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
            controls = {o.scenario.id[8:]: o for o in pool.map(j.run, control_runs)}
            ran = [o for o in controls.values() if o.scenario in chosen]
            if any(control_ok(o) for o in controls.values()) or not controls:
                ran += list(pool.map(j.run, rest))
            else:
                ran += [PromiseRun(s, Path(temporary)) for s in rest]
        checks: list[Check] = []
        for outcome in ran:
            checks.extend(judge_outcome(outcome, controls))
        every = list(controls.values()) + [o for o in ran if o.scenario not in control_runs]
        checks.append(requests_check(every))
        checks.append(secrets_check(every, list(j.secrets.values())))
        return checks, list(j.secrets.values())


# -- the command line -----------------------------------------------------------------------


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.description = (
        "Judge the four promises on any harness, black-box, with no adapter: CMD runs once\n"
        "per scenario with AHP_REGISTRATION (this judge's backends) and AHP_PROBE (one tool\n"
        "call to attempt, and whether the harness's own rules allow or refuse it).\n\n"
        "  ahp-conformance promises -- python -m ahp_harness.probe\n"
    )
    parser.add_argument(
        "--probe-kind",
        choices=sorted(CALLS),
        default="shell",
        help="the probe call: shell (touch MARKER) or file_write (write_file MARKER); "
        "default shell",
    )
    parser.add_argument(
        "--scenarios",
        metavar="PREFIXES",
        help="comma-separated scenario id prefixes (default all: control, deny, no-effect, "
        "allow, failure, secret)",
    )
    parser.add_argument("--jobs", type=int, default=2, metavar="N", help="runs at a time")
    parser.add_argument(
        "--watchdog-s",
        type=float,
        default=DEFAULT_WATCHDOG_S,
        metavar="N",
        help=f"the longest one harness run may take (default {DEFAULT_WATCHDOG_S:.0f})",
    )
    parser.add_argument("--cwd", help="working folder for the harness command")
    add_output_arguments(parser)
    parser.add_argument("command", nargs=argparse.REMAINDER, metavar="-- CMD ARGS")


def run(args: argparse.Namespace) -> int:
    command = list(args.command or [])
    if command[:1] == ["--"]:
        command = command[1:]
    if not command:
        print("ahp-conformance promises: give the harness: -- CMD ARGS...", file=sys.stderr)
        return 2
    every = scenarios()
    chosen = every
    if args.scenarios:
        prefixes = [p.strip() for p in args.scenarios.split(",") if p.strip()]
        chosen = [s for s in every if any(s.id.startswith(p) for p in prefixes)]
        if not chosen:
            known = ", ".join(s.id for s in every)
            print(f"ahp-conformance promises: no scenario matches; known: {known}", file=sys.stderr)
            return 2
    catalogue = load_catalogue(args.fixtures)
    checks, hidden = judge(
        command,
        chosen,
        probe_kind=args.probe_kind,
        watchdog_s=args.watchdog_s,
        jobs=args.jobs,
        cwd=args.cwd,
        quiet=bool(args.json),
    )
    report = Report(
        role="harness",
        subject=f"promises: {shlex.join(command)}",
        catalogue=catalogue,
        bindings=tuple(sorted({s.binding for s in chosen})),
        checks=checks,
        secrets=hidden,
        implements=frozenset({"tool-interception"}),
    )
    return emit(report, args)


if __name__ == "__main__":  # the same command as ``ahp-conformance promises``
    from ahp_conformance.cli import main

    sys.exit(main(["promises", *sys.argv[1:]]))

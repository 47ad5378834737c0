"""``ahp-backend policy test TABLE...``: run a table of example events against a policy.

Owns running a table (:mod:`ahp_backends.policy_table` reads it), the comparison of
what a case expects with what the chain settled, and the report (one line per case,
a diff per failure, a summary; ``--json``; exit 0 all pass, 1 any failure, 2 a
broken table or a policy that does not load, 3 any case undecided).

A failure is not a decision: a case whose backend exchange failed (the client's
failure classes: a timeout, a crash, a JSON-RPC error such as a policy rule that
cannot be evaluated, malformed or unadvertised output), or that was never sent
because the backend was still busy with an earlier one, is *undecided*: never a pass,
whatever it expects (``expect = "none"`` included), shown with its failure class and
counted apart. Exit status: 2 over 3 over 1 over 0.

Never evaluates a rule itself: each table starts its policy as the real backend
process (``ahp-backend policy --rules FILE`` or ``ahp-backend denylist --rules FILE``,
one persistent stdio process per table) and sends every case through
:class:`ahp_protocol.client.Dispatcher`, so a table tests exactly what would be
served, over the real protocol. Bounds: each case waits at most ``--timeout-ms``
milliseconds; the backend process is closed (never left behind) when its table is done,
whatever happened.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Final, Literal

from ahp_backends.policy_table import BACKENDS, TABLE_FORMAT, Case, Table, parse_table
from ahp_backends.toml_lines import ConfigError

if TYPE_CHECKING:
    from ahp_protocol.client import Dispatcher, HookResult

__all__ = ["CaseResult", "Settled", "judge", "main", "run_table"]

PROG: Final = "ahp-backend policy test"
DEFAULT_TIMEOUT_S: Final = 10.0
HOOK_ID: Final = "com.example.ahp.policy-under-test"
STDERR_LINES: Final = 20  # of a backend that did not start: enough for a traceback's end

Status = Literal["pass", "fail", "undecided", "error"]
UNDECIDED_EXIT: Final = 3


# --------------------------------------------------------------------------- running


class PolicyDidNotStart(Exception):
    """The backend refused to start (its rules do not load) or died: its own words."""


@dataclass(frozen=True, slots=True)
class Settled:
    """What the chain settled for one case, in the table's terms."""

    effect: str  # none | deny | ask | allow | message
    code: str | None
    reason: str | None
    messages: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "effect": self.effect,
            "code": self.code,
            "reason": self.reason,
            "messages": list(self.messages),
        }


@dataclass(frozen=True, slots=True)
class CaseResult:
    """One case's verdict: ``pass``, ``fail`` (a difference), ``undecided`` (the backend
    gave no decision: it failed, or was not asked) or ``error`` (the table's: the
    backend as served does not intercept the case's event)."""

    case: Case
    status: Status
    got: Settled | None
    differences: tuple[tuple[str, str, str], ...] = ()  # (field, expected, got)
    error: str | None = None

    def to_json(self) -> dict[str, Any]:
        case = self.case
        expected: dict[str, Any] = {"effect": case.expect}
        for key in ("code", "reason", "reason_contains"):
            if getattr(case, key) is not None:
                expected[key.replace("_c", "C")] = getattr(case, key)
        if case.messages is not None:
            expected["messages"] = list(case.messages)
        return {
            "name": case.name,
            "line": case.line,
            "status": self.status,
            "expected": expected,
            "got": self.got.to_json() if self.got else None,
            "differences": [{"field": f, "expected": e, "got": g} for f, e, g in self.differences],
            "error": self.error,
            "notes": list(case.notes),
        }


def _settled(result: HookResult) -> Settled:
    denial = result.denial
    effect: str = result.permission
    if effect == "none" and result.messages:
        effect = "message"
    return Settled(
        effect=effect,
        code=denial.code if denial else None,
        reason=denial.reason if denial else None,
        messages=tuple(result.messages),
    )


def _show(value: str | None) -> str:
    return "(none)" if value is None else json.dumps(value, ensure_ascii=False)


def judge(case: Case, got: Settled) -> CaseResult:
    """Compare one case's expectation with what the chain settled."""
    diffs: list[tuple[str, str, str]] = []
    if got.effect != case.expect:
        diffs.append(("effect", case.expect, got.effect))
    if case.code is not None and got.code != case.code:
        diffs.append(("code", _show(case.code), _show(got.code)))
    if case.reason is not None and got.reason != case.reason:
        diffs.append(("reason", _show(case.reason), _show(got.reason)))
    if case.reason_contains is not None and (
        got.reason is None or case.reason_contains not in got.reason
    ):
        diffs.append(("reason", f"contains {_show(case.reason_contains)}", _show(got.reason)))
    if case.messages is not None and got.messages != case.messages:
        diffs.append(("messages", _list(case.messages), _list(got.messages)))
    if got.effect != case.expect:  # what the policy did instead: the reader's next question
        if got.effect == "deny":
            diffs.append(("got", "", f"deny, code {_show(got.code)}, reason {_show(got.reason)}"))
        if got.messages and case.messages is None:
            diffs.append(("got", "", f"messages {_list(got.messages)}"))
    return CaseResult(case, "fail" if diffs else "pass", got, tuple(diffs))


def _list(values: Sequence[str]) -> str:
    return json.dumps(list(values), ensure_ascii=False)


def _registration(table: Table, timeout_s: float) -> Any:
    from ahp_protocol.wire.registration import parse_registration

    hook: dict[str, Any] = {
        "id": HOOK_ID,
        "transport": {
            "type": "stdio",
            "command": sys.executable,
            "args": [
                # -P: the backend runs in the policy's folder, and "-m" would put that
                # folder first on sys.path (a planted ahp_backends/ would be what is
                # tested). Not -I: the stdio transport already passes no PYTHON*
                # variable, and -I would also drop the user site this command may run from.
                "-P",
                "-m",
                "ahp_backends.cli",
                BACKENDS[table.kind],
                "--rules",
                str(table.rules),
            ],
            "lifecycle": "persistent",
            "cwd": str(table.rules.parent),
        },
    }
    if table.events is not None:
        hook["subscriptions"] = [
            {
                "mode": "intercept",
                "events": list(table.events),
                "timeoutMs": max(1, int(timeout_s * 1000)),
                "failurePolicy": "fail-open",  # a failure is reported, never a verdict
                "content": {"default": "metadata"},
            }
        ]
    return parse_registration({"protocolVersion": "draft", "hooks": [hook]})


def _capabilities(table: Table) -> dict[str, dict[str, Any]]:
    """What the simulated harness enforces: ``advertise`` at every event the table uses.

    The dispatcher narrows away what the draft does not allow at an event.
    """
    types = {str(c.event["type"]) for c in table.cases} | {"tool.before"}
    types |= set(table.events or ())
    from ahp_protocol.wire import catalogue

    return {
        t: {"effects": list(table.advertise)}
        for t in sorted(types)
        if catalogue.is_interceptable(t)
    }


def _stderr_excerpt(dispatcher: Dispatcher) -> str:
    lines = dispatcher.stderr_tail(HOOK_ID).strip().splitlines()[-STDERR_LINES:]
    return "\n".join(f"  {line}" for line in lines) if lines else "  (it wrote nothing on stderr)"


_DIED: Final = frozenset({"spawn_failed", "abnormal_exit"})
_WHY: Final = {
    "abnormal_exit": "it exited before answering hooks/configuration",
    "spawn_failed": "the process could not be started",
    "deadline_exceeded": "no answer to hooks/configuration within {timeout:g} s",
}


async def run_table(table: Table, timeout_s: float) -> list[CaseResult]:
    """Serve the table's rules file as the real backend and run every case through it.

    :class:`PolicyDidNotStart` when the backend cannot start or exits (its stderr quoted).
    """
    import anyio
    from ahp_protocol.client import Dispatcher

    command = f"ahp-backend {BACKENDS[table.kind]} --rules {table.rules}"
    dispatcher = Dispatcher(
        _registration(table, timeout_s),
        capabilities=_capabilities(table),
        environ=dict(os.environ),
        source=table.source,
        discovery_timeout=timeout_s,
    )
    results: list[CaseResult] = []
    stopped: str | None = None
    try:
        stopped = await _start(dispatcher, command, timeout_s)
        busy: str | None = None  # a case the backend never answered: it may still be at it
        for case in [] if stopped else table.cases:
            if busy is not None:
                results.append(
                    CaseResult(case, "undecided", None, error=f"not run: no answer to {busy!r} yet")
                )
                continue
            event_type = str(case.event["type"])
            if not dispatcher.intercepts(event_type):
                served = sorted(t for t in _capabilities(table) if dispatcher.intercepts(t))
                results.append(
                    CaseResult(
                        case,
                        "error",
                        None,
                        error=(
                            f"the backend as served does not intercept {event_type} (it "
                            f"intercepts: {', '.join(served) or 'nothing'}); list it in the "
                            "table's 'events' to register it explicitly"
                        ),
                    )
                )
                continue
            try:
                with anyio.fail_after(timeout_s + 1):
                    result = await dispatcher.intercept(case.event)
            except TimeoutError:
                results.append(
                    CaseResult(case, "undecided", None, error=f"no answer within {timeout_s:g} s")
                )
                busy = case.name
                continue
            failed = [d for d in result.diagnostics if d.outcome == "failed"]
            if failed:
                first = failed[0]
                kind = first.failure.value if first.failure else "failed"
                if kind in _DIED:
                    stopped = f"{command} stopped at case {case.name!r} ({kind})"
                    break
                if kind == "deadline_exceeded":
                    busy = case.name
                results.append(
                    CaseResult(
                        case,
                        "undecided",
                        None,
                        error=f"the backend failed: {kind}"
                        + (f" ({first.detail})" if first.detail else ""),
                    )
                )
                continue
            results.append(judge(case, _settled(result)))
    finally:
        with anyio.CancelScope(shield=True):
            await dispatcher.aclose()
    if stopped is not None:
        # read after the close: it joins the stderr drain, so the tail is complete
        raise PolicyDidNotStart(f"{stopped}; its stderr:\n{_stderr_excerpt(dispatcher)}")
    return [_with_why(table, result) for result in results]


def _with_why(table: Table, result: CaseResult) -> CaseResult:
    """A case that got no decision it expected, with why (a CEL policy's own words: which
    rule could not be evaluated, or that none matched). The verdict stays the served
    backend's; this only reads the same policy file again to say why."""
    got_none = (
        result.status == "fail"
        and result.got is not None
        and result.got.effect
        in (
            "none",
            "message",
        )
    )
    if table.kind != "policy" or not (got_none or result.status == "undecided"):
        return result
    if result.status == "undecided" and "rpc_error" not in (result.error or ""):
        return result
    from ahp_backends.policy import parse_policy

    try:
        policy = parse_policy(str(table.rules))
        why = policy.explain(str(result.case.event["type"]), result.case.event, table.advertise)
    except Exception:  # the file changed under the run: no explanation, the verdict stands
        return result
    return replace(result, differences=(*result.differences, ("why", "", why)))


async def _start(dispatcher: Dispatcher, command: str, timeout_s: float) -> str | None:
    """Start the backend (``hooks/configuration`` if the table lists no events); why not."""
    import anyio

    try:
        with anyio.fail_after(timeout_s + 5):  # the discovery timeout is the first bound
            await dispatcher.start()
    except TimeoutError:
        return f"{command} did not start: no answer within {timeout_s:g} s"
    if not dispatcher.configuration_diagnostics:
        return None
    failure = dispatcher.configuration_diagnostics[0]
    kind = failure.failure.value if failure.failure else "failed"
    why = _WHY.get(kind, failure.detail or kind).format(timeout=timeout_s)
    return f"{command} did not start: {why}"


# --------------------------------------------------------------------------- report


@dataclass
class Report:
    """Everything one run found, table by table."""

    tables: list[dict[str, Any]] = field(default_factory=list)
    broken: int = 0
    passed: int = 0
    failed: int = 0
    undecided: int = 0

    @property
    def exit_code(self) -> int:
        if self.broken:
            return 2
        return UNDECIDED_EXIT if self.undecided else (1 if self.failed else 0)


def _case_lines(table: Table, result: CaseResult) -> list[str]:
    case = result.case
    label = {"pass": "PASS", "fail": "FAIL", "undecided": "UNDECIDED", "error": "ERROR"}[
        result.status
    ]
    lines = [f"  {label:<5} {case.name}"]
    if result.status != "pass":
        lines[0] += f"  ({table.where(case.line)})"
    for note in case.notes:
        lines.append(f"        note: {note}")
    if result.error is not None:
        lines.append(f"        {result.error}")
    for name, expected, got in result.differences:
        if not expected:
            lines.append(f"        {name}: {got}")
            continue
        lines.append(f"        {name + ':':<10} expected {expected}")
        lines.append(f"        {'':<10} got      {got}")
    return lines


def _count(cases: int) -> str:
    return f"{cases} case" if cases == 1 else f"{cases} cases"


def _run(paths: Sequence[str], timeout_s: float, as_json: bool) -> int:
    import anyio

    report = Report()
    out: list[str] = []
    for path in paths:
        entry: dict[str, Any] = {"table": path}
        report.tables.append(entry)
        try:
            table = parse_table(path)
        except ConfigError as exc:
            report.broken += 1
            entry["error"] = str(exc)
            out.append(f"error: {exc}")  # the error names the table: FILE[:LINE]: ...
            continue
        entry["policy"] = str(table.rules)
        entry["backend"] = BACKENDS[table.kind]
        try:
            results = anyio.run(run_table, table, timeout_s)
        except PolicyDidNotStart as exc:
            report.broken += 1
            entry["error"] = f"{table.where(table.rules_line)}: {table.kind}: {exc}"
            out.append(f"error: {entry['error']}")
            continue
        entry["cases"] = [r.to_json() for r in results]
        passed = sum(1 for r in results if r.status == "pass")
        undecided = sum(1 for r in results if r.status == "undecided")
        report.passed += passed
        report.undecided += undecided
        report.failed += len(results) - passed - undecided
        out.append(f"{path}: {table.kind} {table.rules.name}, {_count(len(results))}")
        for result in results:
            out.extend(_case_lines(table, result))
    total = report.passed + report.failed + report.undecided
    summary = f"{_count(total)}: {report.passed} passed, {report.failed} failed"
    if report.undecided:
        summary += f", {report.undecided} undecided (the backend failed: never a pass)"
    if report.broken:
        summary += f"; {report.broken} of {len(paths)} tables could not run"
    if as_json:
        document = {
            "tables": report.tables,
            "passed": report.passed,
            "failed": report.failed,
            "undecided": report.undecided,
            "broken": report.broken,
            "exitCode": report.exit_code,
        }
        print(json.dumps(document, indent=2, ensure_ascii=False))
    else:
        for line in out:
            print(line, file=sys.stderr if line.startswith("error: ") else sys.stdout)
        print(summary)
    return report.exit_code


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG,
        description=(
            "Run test tables against a policy: each table names a rules file (a CEL policy\n"
            "or deny-list rules), which is served by the real backend process over stdio,\n"
            "and lists example events with the outcome each should get. Prints one line\n"
            "per case, a diff for each failure and a summary. Exit 0 when every case\n"
            "passes, 1 when any fails, 2 when a table is broken or its policy does not load,\n"
            "3 when any case is undecided: the backend timed out or failed on it (a JSON-RPC\n"
            "error, a crash, a malformed answer), which is never a pass. 2 wins over 3 over 1."
        ),
        epilog=TABLE_FORMAT,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("tables", nargs="+", metavar="TABLE", help="a test table (TOML)")
    parser.add_argument(
        "--timeout-ms",
        type=float,
        default=DEFAULT_TIMEOUT_S * 1000,
        metavar="MS",
        help="the longest wait for one case's answer, in milliseconds, as a subscription's "
        f"timeoutMs (default {DEFAULT_TIMEOUT_S * 1000:g})",
    )
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """``ahp-backend policy test TABLE... [--timeout-ms MS] [--json]``."""
    args = _parser().parse_args(list(sys.argv[1:] if argv is None else argv))
    # The client logs a skipped backend; this command reports it in its own words.
    logging.getLogger("ahp_protocol.client").addHandler(logging.NullHandler())
    timeout_ms: float = args.timeout_ms
    if not timeout_ms >= 1 or timeout_ms > 600_000:
        print(
            f"{PROG}: error: --timeout-ms must be at least 1 and at most 600000 (10 minutes)",
            file=sys.stderr,
        )
        return 2
    return _run(args.tables, timeout_ms / 1000, args.json)


if __name__ == "__main__":
    sys.exit(main())

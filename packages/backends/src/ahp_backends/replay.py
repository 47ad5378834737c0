"""``ahp-backend audit replay``: what would this registration have decided about recorded calls?

Reads an audit database (:func:`ahp_backends.audit.read_events`, nothing else), runs
every recorded ``tool.before`` through the chain of a new registration (its real
backend processes, the real :class:`~ahp_protocol.client.Dispatcher`) and reports each
call whose decision would change; exit status 1 when one would, 0 when none, 2 on bad
input, 3 when some call is *undecided* (below). ``--baseline CURRENT.json`` replays a
second registration beside it and compares the two chains instead of the new chain and
the record.

A failure is not a decision. A call on which a backend of either chain failed (the
client's classification: a timeout, a crash, a JSON-RPC error, malformed or unadvertised
output, a backend skipped at ``hooks/configuration``) is *undecided*, whatever its failure
policy made of it: it is listed with each failure, counted, never compared, and the exit
status is 3 (over 1: the changes found are then not all there may be).

What the trail holds, and so what "the recorded decision" can mean (draft §6.6: an
observer gets the effective event, never a decision summary):

- ``tool.before``: the *effective* proposal (after the original chain's accepted
  modifications), with its original ``source``, ``id``, session and call;
- ``tool.after`` for the same call: its ``outcome`` (``denied`` when it did not run:
  refused by a backend *or* by the host's own rules, the trail does not say which);
- ``tool.permission.request`` for the call: it passed ``tool.before`` and prompted;
  a second ``tool.before`` for the call: the first passed and the input was judged again;
- ``hook.failure`` whose ``parentEventId`` is the ``tool.before``: a backend failed
  there; under ``fail-closed`` the refusal was that failure's synthetic denial;
- ``session.start``: the manifest, so the capabilities the harness declared.

No deny code or reason is recorded. Against the record the replay can therefore tell:
*newly denied* (it passed then, the new chain stops it), *no longer denied* (only where
the record shows the refusal was the chain's: a fail-closed failure), *input modified*
(the new chain changes the recorded input), and *undetermined*: refused then, passed by
the new chain, and the trail does not say whether a backend or the host refused it
(listed, never counted as a change). With ``--baseline`` every difference between the
two chains is a change: stop or not, deny code, deny reason, denying backend, allow or
ask, modified input.

Each replayed event keeps its original ids (``source``, ``id``, ``call.id``) and is
granted what the original harness declared: the intercept declarations of the
manifest in its session's recorded ``session.start`` (the dispatcher narrows them per
event and route, as it did then); without one, the draft's minimum
``{"effects": ["deny"]}``, said in a note. Replayed events are never executed and never
observed: only the subscriptions that intercept ``tool.before`` are kept, and the
dispatcher used here delivers no observation at all (no short-circuit observation to
uncalled interceptors, no ``hook.failure``). A backend registered without subscriptions
is asked ``hooks/configuration``, as a harness would.

The database is an SQLite file or a PostgreSQL URL (whatever ``read_events`` reads); it
is shown without a URL's password (:func:`ahp_backends.db.shown`).

Freshness: the replay starts its own backend processes, so a backend's in-process
memory of ``(source, event.id)`` (the sample backends' ``Replies``) starts empty. State
outside the process is not fresh: an HTTP backend is a running service that may have
seen these very ids (a note names each), and a backend's store (approval grants, a
database) and clock are as they are now, not as they were then.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping, Sequence
from contextlib import AsyncExitStack
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Final

from ahp_backends.audit import read_events, shown_literally, summary
from ahp_backends.db import DatabaseError, shown
from ahp_backends.serving import database_target, fail
from ahp_backends.trail import (
    FALLBACK_CAPABILITIES,
    TRAIL_TYPES,
    Call,
    Decision,
    for_replay,
    judge,
    member,
    moment_of,
    parse_moment,
    replayable,
)

if TYPE_CHECKING:
    from ahp_protocol.client import Dispatcher
    from ahp_protocol.wire.registration import Registration

__all__ = ["main"]

PROGRESS_MIN: Final = 10
UNDECIDED: Final = 3
"""The exit status when some call is undecided (a backend failed on it), over 1."""
"""A replay of at least this many calls shows a progress bar (stderr, a terminal only)."""


def _dispatcher(registration: Registration, capabilities: Mapping[str, Any]) -> Dispatcher:
    """The real dispatcher, sending no observations: a replayed event happened long ago,
    so nobody is told it again (a test shows no ``hooks/observe`` reaches any backend).
    Everything that decides (order, grants, deadlines, acceptance, failure policy,
    ``hooks/configuration``) is the dispatcher's own."""
    from ahp_protocol.client import Dispatcher

    return Dispatcher(registration, capabilities=capabilities, deliver_observations=False)


async def _replay(
    calls: Sequence[Call],
    registration: Registration,
    baseline: Registration | None,
    progress: Any,
) -> None:
    """Each call through the new chain (and the baseline's), one dispatcher per declaration
    (calls in timeline order within it)."""
    groups: dict[str, list[Call]] = {}
    for call in calls:
        groups.setdefault(json.dumps(call.capabilities, sort_keys=True), []).append(call)
    for group in groups.values():
        async with AsyncExitStack() as stack:
            new = await stack.enter_async_context(_dispatcher(registration, group[0].capabilities))
            old = None
            if baseline is not None:
                old = await stack.enter_async_context(_dispatcher(baseline, group[0].capabilities))
            for call in group:
                tool = call.event.get("tool")
                recorded_input = tool.get("input") if isinstance(tool, Mapping) else None
                if old is not None:
                    call.baseline = Decision.of(
                        await old.intercept(call.event),
                        recorded_input,
                        old.configuration_diagnostics,
                    )
                call.new = Decision.of(
                    await new.intercept(call.event), recorded_input, new.configuration_diagnostics
                )
                call.undecided = call.new.failures + tuple(
                    f"baseline {f}" for f in (call.baseline.failures if call.baseline else ())
                )
                if not call.undecided:  # a failure is not a decision: nothing to compare
                    call.change, call.undetermined = judge(call.recorded, call.new, call.baseline)
                if progress is not None:
                    progress()


def _check(registration: Registration, calls: Sequence[Call]) -> None:
    """Build (never start) a dispatcher per declaration: a registration error is raised
    now, before any backend starts (with no call to replay, against the minimum grant)."""
    declarations = {json.dumps(c.capabilities, sort_keys=True) for c in calls}
    for capabilities in declarations or {json.dumps({"tool.before": FALLBACK_CAPABILITIES})}:
        _dispatcher(registration, json.loads(capabilities))


def _freshness_notes(label: str, registration: Registration) -> list[str]:
    from ahp_protocol.wire.registration import HttpTransportConfig

    return [
        f"{label} {hook.id} is an HTTP service: the replay cannot give it a fresh memory; "
        "if it saw these events (same source and id) it answers as it did then"
        for hook in registration.hooks
        if isinstance(hook.transport, HttpTransportConfig)
    ]


# -- the command --------------------------------------------------------------------------


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ahp-backend audit replay",
        description=(
            "Run the tool.before events recorded in an audit database through a new "
            "registration's chain (its real backend processes) and report every call whose "
            "decision would change: newly denied, no longer denied, a different deny code "
            "or reason. Nothing is executed and nothing is sent to observers."
        ),
        epilog=(
            "exit status: 0 no decision changes, 1 some would change, 2 bad input, "
            "3 some call undecided (a backend timed out or failed on it: a failure is not a "
            "decision; listed with its failure class, never compared; 3 wins over 1). "
            "The trail records outcomes, not deny codes or reasons, nor whether a backend "
            "or the host's own rules refused a call: a call refused then and passed now is "
            "listed as undetermined unless --baseline replays the current registration "
            "beside the new one (then the two chains are compared, code and reason "
            "included). Each event keeps its original ids and is granted what its harness "
            "declared (the intercept capabilities in its session's recorded session.start "
            "manifest). Backend processes are new, so their "
            "in-memory answers are fresh; HTTP services and persistent stores (approval "
            "grants) answer from their state now."
        ),
    )
    parser.add_argument(
        "--db",
        required=True,
        type=database_target,
        metavar="AUDIT.db",
        help="the audit database: an SQLite file or a postgresql:// URL",
    )
    parser.add_argument(
        "--registration",
        required=True,
        metavar="NEW.json",
        help="the registration to try (its stdio backends run in its folder)",
    )
    parser.add_argument(
        "--baseline",
        metavar="CURRENT.json",
        help="also replay this registration and compare the two chains (codes and reasons too)",
    )
    parser.add_argument("--session", metavar="ID", help="only this session's calls")
    parser.add_argument("--tool", metavar="NAME", help="only calls of this tool (exact name)")
    parser.add_argument(
        "--since",
        metavar="WHEN",
        help="only calls at or after WHEN: RFC 3339 (no offset: UTC) or a duration ago (7d)",
    )
    parser.add_argument(
        "--until", metavar="WHEN", help="only calls at or before WHEN (same forms as --since)"
    )
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    return parser


def _registration_error(option: str, path: str, exc: Exception) -> int:
    from ahp_protocol.wire.errors import WireErrors

    if isinstance(exc, WireErrors):
        reasons = "; ".join(
            e.reason if e.path == "$" else f"{e.path}: {e.reason}" for e in exc.errors
        )
    else:
        reasons = str(exc)
    return fail(f"{option} {path}: {reasons}")


def _load(option: str, path: str) -> Registration | int:
    from ahp_protocol.client.hooks import load_anchored
    from ahp_protocol.wire.errors import WireError, WireErrors

    try:
        return for_replay(load_anchored(path))  # its stdio backends run in its folder
    except (WireError, WireErrors) as exc:
        return _registration_error(option, path, exc)


def _run(args: argparse.Namespace) -> int:
    from ahp_protocol.client import DeclarationError, RegistrationError

    bounds: list[datetime | None] = []
    for option, value in (("--since", args.since), ("--until", args.until)):
        try:
            bounds.append(parse_moment(value) if value is not None else None)
        except ValueError:
            return fail(
                f"{option} {value!r}: use an RFC 3339 time such as 2026-12-01T09:00:00Z, "
                "or a duration before now such as 30m, 12h, 7d or 2w"
            )
    since, until = bounds
    registration = _load("--registration", args.registration)
    if isinstance(registration, int):
        return registration
    baseline = _load("--baseline", args.baseline) if args.baseline else None
    if isinstance(baseline, int):
        return baseline
    try:
        records = read_events(args.db, session=args.session, types=TRAIL_TYPES)
    except FileNotFoundError:
        return fail(f"--db {shown(args.db)}: no such audit database")
    except DatabaseError as exc:  # the database as shown (no password) and a fixed reason
        return fail(f"--db {exc}")
    calls, notes = replayable(records, since=since, until=until, tool=args.tool)
    for option, path, reg in (
        ("--registration", args.registration, registration),
        ("--baseline", args.baseline, baseline),
    ):
        if reg is None:
            continue
        try:
            _check(reg, calls)
        except (RegistrationError, DeclarationError) as exc:
            return _registration_error(option, path, exc)
        notes += _freshness_notes("baseline backend" if reg is baseline else "backend", reg)
    try:
        _execute(calls, registration, baseline)
    except KeyboardInterrupt:  # the backends are closed on the way out (the dispatchers' exit)
        print("interrupted: nothing reported", file=sys.stderr)
        return 130
    notes += _failure_notes(calls)
    if not args.baseline and any(
        c.recorded.passed is False and c.new is not None and c.new.stops and not c.undecided
        for c in calls
    ):
        notes.append(
            "the trail records no deny code or reason: calls refused then and now are "
            "not compared on them (--baseline CURRENT.json compares them)"
        )
    notes += _drift_notes(calls)
    changes = [c for c in calls if c.change is not None]
    undecided = [c for c in calls if c.undecided]
    try:
        if args.json:
            print(json.dumps(_report(args, calls, notes), ensure_ascii=False, indent=2))
        else:
            _print(args, calls, notes)
        sys.stdout.flush()
    except BrokenPipeError:  # `... | head`: the reader left; the exit status still says it
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return UNDECIDED if undecided else 1 if changes else 0


def _execute(
    calls: Sequence[Call], registration: Registration, baseline: Registration | None
) -> None:
    import anyio

    if not calls:
        return
    if not (sys.stderr.isatty() and len(calls) >= PROGRESS_MIN):
        anyio.run(_replay, calls, registration, baseline, None)
        return
    from rich.console import Console
    from rich.progress import Progress

    with Progress(console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task("replaying tool.before", total=len(calls))
        anyio.run(_replay, calls, registration, baseline, lambda: bar.advance(task))


def _drift_notes(calls: Sequence[Call]) -> list[str]:
    """Calls where the baseline contradicts what the record shows its chain did."""
    drifted = [
        str(member(c.event, "call").get("id", "?"))
        for c in calls
        if c.baseline is not None
        and not c.undecided
        and (
            (c.recorded.passed is True and c.baseline.stops)
            or (c.recorded.chain_refusal is not None and not c.baseline.stops)
        )
    ]
    if not drifted:
        return []
    shown = ", ".join(drifted[:5]) + (", ..." if len(drifted) > 5 else "")
    return [
        f"the baseline does not reproduce the record for {len(drifted)} call(s) ({shown}): "
        "it is not the registration of then, or its backends' state (grants, the clock) "
        "has changed since"
    ]


def _failure_notes(calls: Sequence[Call]) -> list[str]:
    counts: dict[str, int] = {}
    for call in calls:
        for failure in call.undecided:
            counts[failure] = counts.get(failure, 0) + 1
    return [
        f"backend failure {failure}: {n} time(s); each such call is undecided (a harness "
        + (
            "would refuse it with a synthetic denial"
            if failure.endswith("(fail-closed)")
            else "would go on without that backend"
        )
        + ", but what the backend would decide is unknown)"
        for failure, n in sorted(counts.items())
    ]


def _report(args: argparse.Namespace, calls: Sequence[Call], notes: list[str]) -> dict[str, Any]:
    return {
        "db": shown(args.db),
        "registration": args.registration,
        "baseline": args.baseline,
        "replayed": len(calls),
        "changed": sum(1 for c in calls if c.change is not None),
        "changes": [c.to_json() for c in calls if c.change is not None],
        "undecided": [c.to_json() for c in calls if c.undecided],
        "undetermined": [c.to_json() for c in calls if c.undetermined],
        "notes": notes,
    }


def _print(args: argparse.Namespace, calls: Sequence[Call], notes: list[str]) -> None:
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    def cell(value: object) -> Text:  # literal text: recorded input is never markup or escapes
        return Text(shown_literally(str(value)))

    console = Console(highlight=False, soft_wrap=False)
    changes = [c for c in calls if c.change is not None]
    undetermined = [c for c in calls if c.undetermined]
    undecided = [c for c in calls if c.undecided]
    against = f"baseline {args.baseline}" if args.baseline else "the record"
    if not calls:
        console.print(cell(f"no recorded tool.before in {shown(args.db)} (with these filters)"))
    elif not changes and undecided:
        console.print(
            cell(
                f"{len(calls)} calls replayed: {len(undecided)} undecided (a backend failed), "
                f"no decided call would change (against {against})"
            )
        )
    elif not changes:
        console.print(
            cell(f"{len(calls)} calls replayed: no decision would change (against {against})")
        )
    else:
        table = Table(
            title=cell(
                f"{len(changes)} of {len(calls)} replayed calls would change (against {against})"
            ),
            title_justify="left",
        )
        _columns(table, "change")
        for call in changes:
            then = call.baseline.describe() if call.baseline else call.recorded.outcome
            table.add_row(*(cell(v) for v in _row(call, then, call.change or "")))
        console.print(table)
    if undecided:
        table = Table(
            title=cell(
                f"{len(undecided)} undecided: a backend failed, so the chain gave no "
                "decision (a failure is not a decision; not compared)"
            ),
            title_justify="left",
        )
        _columns(table, "failure")
        for call in undecided:
            failures = "; ".join(call.undecided)
            table.add_row(*(cell(v) for v in _row(call, call.recorded.outcome, failures)))
        console.print(table)
    if undetermined:
        table = Table(
            title=cell(
                f"{len(undetermined)} undetermined: refused then (by a backend or the host's "
                "own rules: the trail does not say which), not refused by this chain"
            ),
            title_justify="left",
        )
        _columns(table)
        for call in undetermined:
            table.add_row(*(cell(v) for v in _row(call, call.recorded.outcome, None)))
        console.print(table)
    for note in notes:
        console.print(cell(f"note: {note}"))


def _columns(table: Any, *extra: str) -> None:
    table.add_column("time (UTC)", no_wrap=True)
    table.add_column("session / call")
    for name in ("proposed", "then", "now", *extra):
        table.add_column(name)


def _row(call: Call, then: str, change: str | None) -> list[str]:
    event = call.event
    session, tool, call_field = (member(event, k) for k in ("session", "tool", "call"))
    moment = moment_of(call.record)
    when = moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S") if moment else "?"
    proposed = f"{tool.get('name', '?')} {summary(event).removeprefix('proposed: ')}"
    row = [
        when,
        f"{str(session.get('id', ''))[-12:]} {call_field.get('id', '')}".strip(),
        proposed,
        then,
        "undecided" if call.undecided else call.new.describe() if call.new else "?",
    ]
    return [*row, change] if change is not None else row


def main(argv: Sequence[str] | None = None) -> int:
    """``ahp-backend audit replay --db AUDIT.db --registration NEW.json [filters] [--json]``."""
    args = _parser().parse_args(list(sys.argv[1:] if argv is None else argv))
    return _run(args)

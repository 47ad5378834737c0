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
- how the client framed what it sent (``contract_runs.framing_check``): one UTF-8
  JSON-RPC 2.0 object per line over stdio (AHP-STDIO-001), per POST with ``Content-Type:
  application/json`` over HTTP (AHP-HTTP-001);
- every request the server received (``/receipts`` over HTTP, the fake's ``--record`` over
  stdio): exactly the scenario request (:func:`~ahp_conformance.scenarios.receipt_difference`),
  valid by the kit's wire models (:func:`ahp_protocol.wire.messages.validate_message`), and
  ``id == params.event.id``; a receipt for no scenario fails
  (``contract_runs.receipt_check``).

**Beyond the contract** (only for an adapter with the kit's ``registration`` extension:
``adapter.json`` ``"extensions": ["registration"]``, or ``--registration-extension`` with
``-- CMD``; otherwise each of these checks is ``unsupported`` with the reason). Each run
writes an AHP registration whose hooks run the fake backend, per ``--transport``: over
persistent stdio (``[sys.executable, "-P", "-m", "ahp_conformance.fake_backend", "--fault",
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
``registration_runs.FAILURE_CLASSES`` (those of the kit's e2e suite): each fails
AHP-FAIL-001 (plus AHP-DEC-001 / AHP-CAP-001 for the effect ones) when the actual
differs, and the fake's record must show the harness sent the intercept (else the run
proves nothing). The waiting classes (hang, late reply, wrong id on persistent stdio) use
``timeoutMs`` ``registration_runs.DEADLINE_MS``; the others a long deadline they must not
wait out.

Deadlines (AHP-FAIL-002): a hang run must finish within the baseline run's wall time plus
the deadline plus ``registration_runs.DEADLINE_SLACK_S``, and not before the deadline
itself (the backend never answers, so nothing else can end the exchange); its watchdog is
a few seconds beyond that, so a harness that ignores the deadline is stopped and fails.
Short-circuit (AHP-COMP-001, AHP-DEC-002): two hooks, the first ``--fault deny``, the
second recording; the second must receive no ``hooks/intercept`` for the event (an
observe is allowed).

OAuth (AHP-AUTH-001; with the extension and HTTP hooks): five registrations of an
OAuth-protected backend with the ``oauth`` preset, against a real authorization server
the judge starts (:mod:`ahp_conformance.harness.oauth_runs`: a token for the backend's
URL reaches it; a refused client, an untrusted issuer and a backend naming another
authorization server end in the failure policy with nothing, or nothing more, sent).

The code: :mod:`ahp_conformance.harness.contract_runs` and
:mod:`ahp_conformance.harness.registration_runs`. Progress lines go to stderr; the report
is :func:`ahp_conformance.report.emit`'s.
"""

from __future__ import annotations

import argparse
import shlex
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from ahp_conformance import contract, scenarios
from ahp_conformance.fixtures import interop_dir, load_catalogue
from ahp_conformance.harness.contract_runs import run_contract
from ahp_conformance.harness.oauth_runs import (
    OAUTH_NEEDS_HTTP,
    oauth_checks,
    unsupported_oauth_checks,
)
from ahp_conformance.harness.registration_runs import (
    FAILURE_CLASSES,
    NO_EXTENSION,
    FailureClass,
    extension_checks,
    unsupported_extension_checks,
)
from ahp_conformance.harness.upload_runs import unsupported_upload_checks, upload_checks
from ahp_conformance.report import Check, Report, add_output_arguments, emit

DEFAULT_WATCHDOG_S = 180.0
"""The longest one client adapter run over a scenario file may take (``--watchdog-s``)."""


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
        "--jobs",
        type=int,
        default=2,
        metavar="N",
        help="registration runs at a time (default 2); runs that wait out a deadline run alone",
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
            report.extend(upload_checks(adapter, workdir, args.watchdog_s, transports))
            if "http" in transports:
                report.extend(oauth_checks(adapter, workdir, args.watchdog_s, args.jobs))
            else:
                report.extend(unsupported_oauth_checks(OAUTH_NEEDS_HTTP))
        else:
            report.extend(unsupported_extension_checks(classes))
            report.extend(unsupported_upload_checks(NO_EXTENSION))
            report.extend(unsupported_oauth_checks(NO_EXTENSION))
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


if __name__ == "__main__":  # the same command as ``ahp-conformance harness``
    from ahp_conformance.cli import main

    sys.exit(main(["harness", *sys.argv[1:]]))

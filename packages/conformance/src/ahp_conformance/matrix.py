"""``ahp-conformance matrix``: every client x server pairing of interop adapters, offline.

``ahp-conformance matrix [--adapter PATH ...] [--sdk] [--transport stdio|http ...]
[--scenarios FILE ...] [--known-deviations FILE] [--json] [--junit FILE]``

- Adapters: each ``--adapter`` is an ``interop/adapter.json`` (default: the kit's own, at
  the root of its checkout); ``--sdk`` adds the official Python SDK's adapter
  (:data:`SDK_ADAPTER`: ``python -P -m agenthooksprotocol.interop client|server``, in the
  test-only package ``agenthooksprotocol``; without it ``--sdk`` is a usage error that
  says so). Every adapter with a ``client`` command is paired with every adapter with a
  ``server`` command (ours x ours, ours x SDK, SDK x ours, SDK x SDK).
- Transports (default both): over stdio the client spawns the server
  (``serverCommand`` + ``--config serverConfig``, in ``serverCwd``); over HTTP the
  matrix starts the server (:func:`~ahp_conformance.contract.run_pairing`) and gives
  the client its ``endpoint``.
- Scenarios: upstream's request/response files (``scenarios.official``; the step-language
  files are listed as unsupported, with the reason), or ``--scenarios FILE ...``.
- Output: a table (rows: clients; columns: server x transport; each cell the passed /
  failed / unsupported counts), then every failing scenario id per cell; ``--json`` and
  ``--junit`` carry one :class:`~ahp_conformance.report.Check` per cell x scenario,
  tagged with the requirements :func:`~ahp_conformance.scenarios.requirements_for`
  derives from the scenario's tags.
- ``--known-deviations FILE``: ``[{"client", "server", "scenario", "requirement",
  "reason"}]`` (``client``/``server`` are adapter languages). A failure listed there is
  still a failure in every output, flagged ``known deviation: REASON``, but it does not
  change the exit status. Exit status: 1 on any other failure (a cell that could not run
  fails all its scenarios), 0 otherwise, 2 for a usage error.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ahp_conformance import contract, scenarios
from ahp_conformance.contract import Adapter, ContractError
from ahp_conformance.report import Check, Evidence, Report, add_output_arguments

KIT_ADAPTER = Path(__file__).resolve().parents[4] / "interop" / "adapter.json"
"""The kit's own adapter file, at the root of its checkout."""
SDK_MODULE = "agenthooksprotocol.interop"
SDK_LANGUAGE = "python"
TRANSPORTS = ("stdio", "http")
WATCHDOG_S = 300.0
"""Bound on one client adapter run (all scenarios of one cell)."""
STATUS = {"passed": "pass", "failed": "fail", "unsupported": "unsupported", "inapplicable": "n/a"}

# -- adapters --------------------------------------------------------------------------------


def sdk_available() -> bool:
    return importlib.util.find_spec("agenthooksprotocol") is not None


SDK_MISSING = (
    "--sdk needs the official Python SDK, the test-only package 'agenthooksprotocol' "
    "(0.10.1), in this environment: run 'uv sync' in the kit's checkout (it is in the dev "
    "group) or 'pip install agenthooksprotocol==0.10.1'"
)


def sdk_adapter(cwd: Path | None = None) -> Adapter:
    """The official Python SDK's contract adapter (``SDK_ADAPTER`` in the module doc)."""
    if not sdk_available():
        raise ContractError(SDK_MISSING)
    return Adapter(
        SDK_LANGUAGE,
        # -P: run in ``cwd``, never import from it (a planted agenthooksprotocol/
        # there would stand in for the SDK); not -I: the SDK is wherever this Python
        # finds it (sdk_available() looked there).
        (sys.executable, "-P", "-m", SDK_MODULE, "server"),
        (sys.executable, "-P", "-m", SDK_MODULE, "client"),
        cwd or Path.cwd(),
    )


def _names(adapters: Sequence[Adapter]) -> list[str]:
    """Adapter labels: their languages, numbered when two share one."""
    seen: dict[str, int] = {}
    out = []
    for adapter in adapters:
        count = seen.get(adapter.language, 0) + 1
        seen[adapter.language] = count
        out.append(adapter.language if count == 1 else f"{adapter.language}#{count}")
    return out


# -- known deviations ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Deviation:
    client: str
    server: str
    scenario: str
    requirement: str
    reason: str


def load_deviations(path: Path) -> list[Deviation]:
    try:
        data = json.loads(path.read_text("utf-8"))
    except (OSError, ValueError) as exc:
        raise ContractError(f"--known-deviations {path}: {exc}") from None
    if not isinstance(data, list):
        raise ContractError(f"--known-deviations {path}: expected a JSON array")
    out = []
    for index, item in enumerate(data):
        keys = ("client", "server", "scenario", "requirement", "reason")
        if not isinstance(item, dict) or not all(
            isinstance(item.get(k), str) and item[k] for k in keys
        ):
            raise ContractError(
                f"--known-deviations {path}: [{index}] needs non-empty strings " + ", ".join(keys)
            )
        out.append(Deviation(*(item[k] for k in keys)))
    return out


# -- one cell --------------------------------------------------------------------------------


@dataclass
class Result:
    """One scenario in one cell."""

    id: str
    status: str  # pass | fail | unsupported | n/a
    error: str | None = None
    reason: str | None = None
    actual: Any = None
    deviation: Deviation | None = None


@dataclass
class Cell:
    client: str
    server: str
    transport: str
    results: list[Result] = field(default_factory=list)
    elapsed_s: float = 0.0
    problem: str | None = None
    """Why the cell could not run (every scenario then fails)."""

    def count(self, status: str) -> int:
        return sum(r.status == status for r in self.results)

    @property
    def failures(self) -> list[Result]:
        return [r for r in self.results if r.status == "fail"]


def run_cell(
    client: Adapter,
    server: Adapter,
    transport: str,
    scenario_file: Path,
    ids: Sequence[str],
    workdir: Path,
    *,
    names: tuple[str, str] | None = None,
    watchdog_s: float = WATCHDOG_S,
) -> Cell:
    """Run ``client`` against ``server`` over ``transport`` on every scenario of the file."""
    client_name, server_name = names or (client.language, server.language)
    cell = Cell(client_name, server_name, transport)
    workdir.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    run = None
    try:
        run = contract.run_pairing(
            client, server, transport, scenario_file, workdir, watchdog_s=watchdog_s
        ).run
    except ContractError as exc:
        cell.problem = str(exc)
    cell.elapsed_s = time.monotonic() - started
    reported: dict[str, dict[str, Any]] = {}
    if run is not None:
        if run.report is not None:
            reported = {r["id"]: r for r in run.report["results"]}
        if run.error and not reported:
            cell.problem = f"{run.error}; its output ends: {run.log[-600:]}"
    for scenario_id in ids:
        entry = reported.get(scenario_id)
        if entry is None:
            cell.results.append(
                Result(scenario_id, "fail", "NoResult", cell.problem or "not in the report")
            )
            continue
        status = STATUS.get(str(entry.get("status")), "fail")
        error = entry.get("error")
        reason = entry.get("reason")
        cell.results.append(
            Result(
                scenario_id,
                status,
                str(error) if error is not None else None,
                str(reason) if isinstance(reason, str) else None,
                entry.get("actual"),
            )
        )
    return cell


# -- the whole matrix ------------------------------------------------------------------------


@dataclass
class Matrix:
    cells: list[Cell]
    clients: list[str]
    servers: list[str]
    transports: list[str]
    drivable: list[scenarios.Scenario]
    unsupported: list[scenarios.Unsupported]
    deviations: list[Deviation] = field(default_factory=list)
    unseen: list[Deviation] = field(default_factory=list)
    """Known deviations listed for a pairing that ran, yet not observed (fixed upstream?)."""

    @property
    def failed(self) -> bool:
        """True when a failure is not a known deviation (the exit status is then 1)."""
        return any(r.deviation is None for c in self.cells for r in c.failures)


def run_matrix(
    clients: Sequence[Adapter],
    servers: Sequence[Adapter],
    transports: Sequence[str],
    drivable: Sequence[scenarios.Scenario],
    unsupported: Sequence[scenarios.Unsupported],
    workdir: Path,
    *,
    deviations: Sequence[Deviation] = (),
    watchdog_s: float = WATCHDOG_S,
    client_names: Sequence[str] | None = None,
    server_names: Sequence[str] | None = None,
) -> Matrix:
    """Run every client x server x transport cell; known deviations are marked."""
    scenario_file = scenarios.write(drivable, workdir / "scenarios.json")
    ids = [s.id for s in drivable]
    client_labels = list(client_names or _names(clients))
    server_labels = list(server_names or _names(servers))
    cells = []
    for ci, client in enumerate(clients):
        for si, server in enumerate(servers):
            for transport in transports:
                names = (client_labels[ci], server_labels[si])
                where = workdir / f"{ci}-{si}-{transport}"
                cells.append(
                    run_cell(
                        client,
                        server,
                        transport,
                        scenario_file,
                        ids,
                        where,
                        names=names,
                        watchdog_s=watchdog_s,
                    )
                )
    matrix = Matrix(
        cells, client_labels, server_labels, list(transports), list(drivable), list(unsupported)
    )
    matrix.deviations = list(deviations)
    observed: set[Deviation] = set()
    for cell in cells:
        for result in cell.failures:
            for deviation in deviations:
                if (deviation.client, deviation.server, deviation.scenario) == (
                    cell.client,
                    cell.server,
                    result.id,
                ):
                    result.deviation = deviation
                    observed.add(deviation)
    ran = {(c.client, c.server) for c in cells}
    matrix.unseen = [
        d
        for d in deviations
        if (d.client, d.server) in ran and d not in observed and d.scenario in set(ids)
    ]
    return matrix


def checks(matrix: Matrix) -> list[Check]:
    """One check per cell x scenario (and one per unsupported step-language scenario)."""
    tags = {s.id: s.tags for s in matrix.drivable}
    out = []
    for cell in matrix.cells:
        for result in cell.results:
            requirements = scenarios.requirements_for(tags.get(result.id, ()))
            detail = ""
            if result.status == "fail":
                detail = f"{cell.client} client reported {result.error or 'a failure'}"
                if result.reason:
                    detail += f" ({result.reason})"
                if result.deviation is not None:
                    detail = f"known deviation: {result.deviation.reason}; {detail}"
                    if result.deviation.requirement not in requirements:
                        requirements = (*requirements, result.deviation.requirement)
            elif result.status in ("unsupported", "n/a"):
                detail = result.reason or result.error or ""
            out.append(
                Check(
                    id=f"matrix.{cell.client}.{cell.server}.{result.id}",
                    title=f"{cell.client} client x {cell.server} server: scenario {result.id}",
                    requirements=requirements,
                    status=result.status,  # type: ignore[arg-type]
                    detail=detail,
                    evidence=Evidence.of(None, result.actual) if result.status == "fail" else None,
                    binding=cell.transport,
                )
            )
    for item in matrix.unsupported:
        out.append(
            Check(
                id=f"matrix.step.{item.id}",
                title=f"scenario {item.id} ({item.file})",
                requirements=(),
                status="unsupported",
                detail=item.reason,
            )
        )
    return out


def _cell_text(cell: Cell) -> str:
    known = sum(r.deviation is not None for r in cell.failures)
    failed = cell.count("fail")
    parts = [f"[green]{cell.count('pass')} passed[/]"]
    if failed:
        colour = "yellow" if known == failed else "bold red"
        parts.append(f"[{colour}]{failed} failed{f' ({known} known)' if known else ''}[/]")
    if cell.count("unsupported"):
        parts.append(f"[yellow]{cell.count('unsupported')} unsupported[/]")
    if cell.count("n/a"):
        parts.append(f"[dim]{cell.count('n/a')} n/a[/]")
    return "\n".join(parts)


CELL_LINES = 5
"""Failing scenarios listed per cell in the default output (``--verbose``: every one)."""


def summary(matrix: Matrix) -> str:
    """The first line: passed, or how many unexpected failures in how many cells."""
    unknown = [r for c in matrix.cells for r in c.failures if r.deviation is None]
    known = sum(r.deviation is not None for c in matrix.cells for r in c.failures)
    noted = f", {known} known deviation{'s' if known != 1 else ''}" if known else ""
    if not unknown:
        return f"[green]PASSED[/]: no unexpected failure ({len(matrix.cells)} cells{noted})"
    broken = [c for c in matrix.cells if any(r.deviation is None for r in c.failures)]
    return (
        f"[bold red]FAILED[/]: {len(unknown)} unexpected failure{'s' if len(unknown) != 1 else ''}"
        f" in {len(broken)} of {len(matrix.cells)} cells{noted}"
    )


def render(matrix: Matrix, console: Any = None, *, verbose: bool = False) -> None:
    """The summary, the matrix table, then per cell why it could not run or its failing
    scenarios (the first :data:`CELL_LINES`; ``verbose``: every one), then what was not
    run."""
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    console = console or Console(soft_wrap=True)  # a command or path stays on one line
    console.print(summary(matrix))
    table = Table(
        title=f"Interop matrix: {len(matrix.drivable)} request/response scenarios",
        title_justify="left",
    )
    table.add_column("client \\ server", overflow="fold")
    for server in matrix.servers:
        for transport in matrix.transports:
            table.add_column(f"{escape(server)} ({transport})", overflow="fold")
    for client in matrix.clients:
        row = [escape(client)]
        for server in matrix.servers:
            for transport in matrix.transports:
                cell = next(
                    c
                    for c in matrix.cells
                    if (c.client, c.server, c.transport) == (client, server, transport)
                )
                row.append(_cell_text(cell))
        table.add_row(*row)
    console.print(table)
    for cell in matrix.cells:
        where = f"{cell.client} client x {cell.server} server ({cell.transport})"
        if cell.problem:
            console.print(f"[bold red]{escape(where)} could not run:[/] {escape(cell.problem)}")
            if not verbose:  # every scenario failed for that one reason: not one line each
                continue
        failures = cell.failures
        shown = failures if verbose else failures[:CELL_LINES]
        for result in shown:
            line = f"[bold red]FAIL[/] {escape(where)}: {escape(result.id)}"
            if result.error:
                line += f" ({escape(result.error)})"
            if result.deviation is not None:
                line += (
                    f" [yellow]known deviation ({escape(result.deviation.requirement)}): "
                    f"{escape(result.deviation.reason)}[/]"
                )
            console.print(line)
        if len(shown) < len(failures):
            more = len(failures) - len(shown)
            console.print(f"  … and {more} more failing in this cell (--verbose: every one)")
    unsupported: dict[tuple[str, str], list[str]] = {}
    for cell in matrix.cells:
        for result in cell.results:
            if result.status == "unsupported":
                key = (result.id, result.reason or result.error or "")
                unsupported.setdefault(key, []).append(
                    f"{cell.client} x {cell.server} ({cell.transport})"
                )
    for (scenario_id, reason), where_all in unsupported.items():
        console.print(
            f"[yellow]unsupported[/] {escape(scenario_id)} by the client in "
            f"{escape(', '.join(where_all))}: {escape(reason)}"
        )
    for deviation in matrix.unseen:
        console.print(
            f"[yellow]note[/]: known deviation not observed ({escape(deviation.client)} client x "
            f"{escape(deviation.server)} server, {escape(deviation.scenario)}): remove it from "
            "the list if it was fixed"
        )
    if matrix.unsupported:
        files = sorted({u.file for u in matrix.unsupported})
        console.print(
            f"[yellow]{len(matrix.unsupported)} scenarios not run[/] ({', '.join(files)}): "
            f"{escape(scenarios.STEP_REASON)}"
        )
    unknown = sum(r.deviation is None for c in matrix.cells for r in c.failures)
    console.print(
        "matrix: "
        + ("[green]no unexpected failure[/]" if not unknown else f"[bold red]{unknown} failures[/]")
    )


# -- the command -----------------------------------------------------------------------------


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--adapter",
        action="append",
        metavar="PATH",
        default=[],
        help="an interop/adapter.json (repeatable; default: the kit's own)",
    )
    parser.add_argument(
        "--sdk",
        action="store_true",
        help="add the official Python SDK's adapter (test-only package agenthooksprotocol)",
    )
    parser.add_argument(
        "--transport",
        action="append",
        choices=TRANSPORTS,
        default=[],
        help="stdio or http (repeatable; default: both)",
    )
    parser.add_argument(
        "--scenarios",
        action="append",
        metavar="FILE",
        default=[],
        help="a request/response scenario file (repeatable; default: upstream's)",
    )
    parser.add_argument(
        "--known-deviations",
        metavar="FILE",
        help='expected failures: [{"client","server","scenario","requirement","reason"}]',
    )
    parser.add_argument(
        "--watchdog-s",
        type=float,
        default=WATCHDOG_S,
        metavar="SECONDS",
        help=f"bound on one client run, all scenarios of a cell (default {WATCHDOG_S:.0f})",
    )
    add_output_arguments(parser)


def run(args: argparse.Namespace) -> int:
    from ahp_conformance.fixtures import interop_dir, load_catalogue

    adapters = [contract.load_adapter(Path(p)) for p in args.adapter]
    if not adapters:
        if not KIT_ADAPTER.is_file():
            raise ContractError(
                f"no --adapter given and the kit's own adapter file is not at {KIT_ADAPTER}"
            )
        adapters.append(contract.load_adapter(KIT_ADAPTER))
    if args.sdk:
        adapters.append(sdk_adapter(KIT_ADAPTER.parent.parent))
    names = _names(adapters)
    clients = [(n, a) for n, a in zip(names, adapters, strict=True) if a.client is not None]
    servers = [(n, a) for n, a in zip(names, adapters, strict=True) if a.server is not None]
    if not clients or not servers:
        raise ContractError("the matrix needs at least one client and one server adapter")
    transports = list(dict.fromkeys(args.transport)) or list(TRANSPORTS)
    if args.scenarios:
        drivable: list[scenarios.Scenario] = []
        for path in args.scenarios:
            drivable.extend(scenarios.load(Path(path)))
        unsupported: list[scenarios.Unsupported] = []
    else:
        drivable, unsupported = scenarios.official(interop_dir(args.fixtures))
    deviations = load_deviations(Path(args.known_deviations)) if args.known_deviations else []
    catalogue = load_catalogue(args.fixtures)
    with tempfile.TemporaryDirectory(prefix="ahp-matrix-") as folder:
        matrix = run_matrix(
            [a for _, a in clients],
            [a for _, a in servers],
            transports,
            drivable,
            unsupported,
            Path(folder),
            deviations=deviations,
            watchdog_s=args.watchdog_s,
            client_names=[n for n, _ in clients],
            server_names=[n for n, _ in servers],
        )
    report = Report(
        "matrix",
        " x ".join(dict.fromkeys(names)),
        catalogue,
        tuple(transports),
        checks(matrix),
    )
    if args.junit:
        report.write_junit(Path(args.junit))
    if args.json:
        document = report.to_json()
        document["passed"] = not matrix.failed
        document["matrix"] = [
            {
                "client": c.client,
                "server": c.server,
                "transport": c.transport,
                "passed": c.count("pass"),
                "failed": c.count("fail"),
                "knownDeviations": sum(r.deviation is not None for r in c.failures),
                "unsupported": c.count("unsupported"),
                "failing": [r.id for r in c.failures],
            }
            for c in matrix.cells
        ]
        print(json.dumps(document, indent=2, ensure_ascii=False))
    else:
        render(matrix, verbose=bool(args.verbose))
    return 1 if matrix.failed else 0


if __name__ == "__main__":  # the same command as ``ahp-conformance matrix``
    from ahp_conformance.cli import main

    sys.exit(main(["matrix", *sys.argv[1:]]))

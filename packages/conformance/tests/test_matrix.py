"""``ahp-conformance matrix``: the kit's adapters and the official SDK's, paired for real.

Real adapter processes, stdio and loopback HTTP, upstream's scenario file. The SDK's
deviations from the draft are listed in ``interop/sdk-known-deviations.json`` (at the root)
with the requirement and the reason; a test shows each is observed, and that without the
list the matrix fails on it. Nothing is skipped.
"""

from __future__ import annotations

import json
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from ahp_conformance import matrix, scenarios
from ahp_conformance.fixtures import interop_dir

import kit_testing

HERE = Path(__file__).resolve().parent
DEVIATIONS = HERE.parents[2] / "interop" / "sdk-known-deviations.json"
KIT = kit_testing.kit_adapter_here()
SDK = matrix.sdk_adapter(matrix.KIT_ADAPTER.parent.parent)
KIT_CLIENT_UNSUPPORTED = {
    "prior-accepted-stop-empty": "flow stop",
    "prior-accepted-stop-allow": "flow stop",
    "prior-accepted-stop-return": "flow stop",
}
"""Scenarios the kit's client does not drive over any transport, with a word of the reason."""
UNSUPPORTED_OVER_STDIO = {"wrong-response-id": "discard a response with another id"}
FEW = (
    "empty-response-preserves-input",
    "deny-blocks",
    "missing-effects-array",
    "flow-continue-at-finish",
)
"""A small file for the command-line test: a pass, a deny, the SDK's deviation, a flow."""


@pytest.fixture(scope="module")
def official() -> tuple[list[scenarios.Scenario], list[scenarios.Unsupported]]:
    return scenarios.official(interop_dir(kit_testing.fixtures_root()))


def test_every_upstream_tag_has_requirements_and_they_are_catalogue_ids(official) -> None:  # type: ignore[no-untyped-def]
    from ahp_conformance.fixtures import load_catalogue

    catalogue = load_catalogue(kit_testing.fixtures_root())
    tags = {tag for s in official[0] for tag in s.tags}
    assert tags == set(scenarios.TAG_REQUIREMENTS), tags ^ set(scenarios.TAG_REQUIREMENTS)
    for requirements in scenarios.TAG_REQUIREMENTS.values():
        assert set(requirements) <= set(catalogue.requirements)
    assert scenarios.requirements_for(["deny", "schema-invalid", "deny"]) == (
        "AHP-DEC-002",
        "AHP-DEC-001",
    )
    assert scenarios.requirements_for(["unmapped"]) == scenarios.UNTAGGED


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_kit_client_x_sdk_server_passes_every_scenario_it_drives(
    official,
    transport: str,
    tmp_path: Path,  # type: ignore[no-untyped-def]
) -> None:
    drivable, _ = official
    result = matrix.run_matrix([KIT], [SDK], [transport], drivable, [], tmp_path)
    assert not result.failed
    (cell,) = result.cells
    assert cell.failures == [], cell.problem
    unsupported = {r.id: r.reason or "" for r in cell.results if r.status == "unsupported"}
    expected = {
        **KIT_CLIENT_UNSUPPORTED,
        **(UNSUPPORTED_OVER_STDIO if transport == "stdio" else {}),
    }
    assert set(unsupported) == set(expected)
    for scenario_id, words in expected.items():
        assert words in unsupported[scenario_id], (scenario_id, unsupported[scenario_id])
    assert cell.count("pass") == len(drivable) - len(expected)


@pytest.mark.parametrize("half", [0, 1])
def test_sdk_client_x_kit_server_fails_only_its_known_deviation(
    official,
    half: int,
    tmp_path: Path,  # type: ignore[no-untyped-def]
) -> None:
    """Upstream's file in two halves (each test stays well under a minute); over stdio."""
    drivable, _ = official
    middle = len(drivable) // 2
    part = drivable[:middle] if half == 0 else drivable[middle:]
    deviations = matrix.load_deviations(DEVIATIONS)
    result = matrix.run_matrix([SDK], [KIT], ["stdio"], part, [], tmp_path, deviations=deviations)
    (cell,) = result.cells
    assert cell.client == "python" and cell.server == "python-ahp-kit"
    assert not result.failed  # a known deviation does not change the verdict
    if "missing-effects-array" not in {s.id for s in part}:
        assert cell.failures == [] and cell.count("pass") == len(part)
        return
    assert [r.id for r in cell.failures] == ["missing-effects-array"]
    (failure,) = cell.failures
    assert failure.deviation is not None and failure.deviation.requirement == "AHP-DEC-001"
    assert failure.actual["executed"] is True  # the SDK executed a call on a malformed result
    assert cell.count("pass") == len(part) - 1
    check = next(c for c in matrix.checks(result) if c.id.endswith(".missing-effects-array"))
    assert check.status == "fail" and check.detail.startswith("known deviation: ")
    assert "AHP-DEC-001" in check.requirements


def _adapter(folder: Path, document: dict[str, object]) -> Path:
    """An adapter file in ``folder/interop`` (the kit's commands, run without ``uv run``)."""
    (folder / "interop").mkdir(parents=True, exist_ok=True)
    path = folder / "interop" / "adapter.json"
    path.write_text(json.dumps(document), "utf-8")
    return path


FAST_KIT = {
    "language": "python-ahp-kit",
    "server": [sys.executable, "-m", "ahp_conformance.kit_server"],
    "client": [sys.executable, "-m", "ahp_conformance.kit_client"],
    "extensions": ["registration"],
}


def _cli(tmp_path: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ahp_conformance.matrix", *extra],
        capture_output=True,
        text=True,
        timeout=240,
        cwd=tmp_path,
        env={**__import__("os").environ, "AHP_FIXTURES_DIR": str(kit_testing.fixtures_root())},
    )


def test_the_command_runs_every_pairing_and_flags_known_deviations_without_failing_on_them(
    official,
    tmp_path: Path,  # type: ignore[no-untyped-def]
) -> None:
    drivable, _ = official
    few = scenarios.write([s for s in drivable if s.id in FEW], tmp_path / "few.json")
    junit = tmp_path / "matrix.xml"
    kit = _adapter(tmp_path / "kit", FAST_KIT)
    listed = _cli(
        tmp_path,
        "--adapter", str(kit),
        "--sdk",
        "--scenarios", str(few),
        "--transport", "http",
        "--known-deviations", str(DEVIATIONS),
        "--json",
        "--junit", str(junit),
    )  # fmt: skip
    assert listed.returncode == 0, listed.stderr
    document = json.loads(listed.stdout)
    cells = {(c["client"], c["server"], c["transport"]): c for c in document["matrix"]}
    names = ("python-ahp-kit", "python")
    assert set(cells) == {(c, s, "http") for c in names for s in names}
    for (client, _server, _transport), cell in cells.items():
        if client == "python":  # the SDK's client accepts a result without effects
            assert cell["failing"] == ["missing-effects-array"]
            assert cell["knownDeviations"] == 1
        else:
            assert cell["failing"] == [] and cell["passed"] == len(FEW)
    assert document["passed"] is True
    suite = ET.parse(junit).getroot()
    assert suite.get("tests") == str(4 * len(FEW))
    failures = suite.findall("testcase/failure")
    assert len(failures) == 2
    assert all("known deviation" in (f.get("message") or "") for f in failures)

    sdk_client = _adapter(
        tmp_path / "sdk",
        {"language": "python", "client": list(SDK.client or ())},
    )
    kit_server = _adapter(
        tmp_path / "kit-server", {"language": "python-ahp-kit", "server": FAST_KIT["server"]}
    )
    unlisted = _cli(
        tmp_path,
        "--adapter", str(sdk_client),
        "--adapter", str(kit_server),
        "--scenarios", str(few),
        "--transport", "stdio",
    )  # fmt: skip
    assert unlisted.returncode == 1, unlisted.stderr
    assert "FAIL python client x python-ahp-kit server (stdio): missing-effects-array" in (
        " ".join(unlisted.stdout.split())
    )


def test_a_failing_matrix_says_so_first_and_stays_short(official, capsys) -> None:  # type: ignore[no-untyped-def]
    # #29: a server that cannot start used to print one FAIL line per scenario per cell.
    # The first line is the verdict; a cell that could not run is one line; a cell with
    # many failures shows the first few (--verbose: every one).
    drivable, _ = official
    ids = [s.id for s in drivable]
    broken = matrix.Cell("python-ahp-kit", "toy", "stdio", problem="the toy server exited 1")
    broken.results = [matrix.Result(i, "fail", "NoResult", broken.problem) for i in ids]
    wrong = matrix.Cell("toy", "python-ahp-kit", "stdio")
    wrong.results = [matrix.Result(i, "fail", "Mismatch") for i in ids[:9]]
    wrong.results += [matrix.Result(i, "pass") for i in ids[9:]]
    passing = [
        matrix.Cell(name, name, "stdio", [matrix.Result(i, "pass") for i in ids])
        for name in ("python-ahp-kit", "toy")
    ]
    names = ["python-ahp-kit", "toy"]
    result = matrix.Matrix([broken, wrong, *passing], names, names, ["stdio"], drivable, [])
    matrix.render(result)
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0] == f"FAILED: {len(ids) + 9} unexpected failures in 2 of 4 cells", lines[0]
    assert sum("the toy server exited 1" in line for line in lines) == 1
    assert sum(line.startswith("FAIL toy client") for line in lines) == matrix.CELL_LINES
    assert "… and 4 more failing in this cell (--verbose: every one)" in out
    assert not any(line.startswith("FAIL python-ahp-kit client") for line in lines)
    assert len(lines) < 40, out

    matrix.render(result, verbose=True)
    verbose = capsys.readouterr().out.splitlines()
    assert sum(line.startswith("FAIL ") for line in verbose) == len(ids) + 9

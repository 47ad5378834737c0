"""Reports a person reads: a short summary and "fix this first", failures grouped by cause.

Real processes: the judge runs against a backend whose results lack ``protocolVersion``
(``backends/no_version.py``: one missing field must be one line, not one per check), a
mistyped command (``curl-guardd``), and a backend that dies at start saying why on stderr.
The default output fits a screen and its first lines name the cause; ``--verbose`` has
every check; ``--json`` stays complete.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

NO_VERSION = [sys.executable, str(Path(__file__).with_name("backends") / "no_version.py")]
DIES = [sys.executable, "-c", "import sys; sys.exit('error: guard.toml: cannot read the rules')"]
SCREEN = 25
"""Lines a failing backend's default report may take."""


def backend_judge(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ahp_conformance.cli", "backend", *args],
        capture_output=True,
        text=True,
        timeout=100,
        check=False,
    )


@pytest.mark.timeout(120)
def test_one_missing_field_is_one_line_and_the_report_fits_a_screen() -> None:
    done = backend_judge("--", *NO_VERSION)
    lines = done.stdout.splitlines()
    assert done.returncode == 1
    assert len(lines) <= SCREEN, done.stdout
    head = "\n".join(lines[:6])
    assert "Fix this first" in head and "AHP-VER-001" in head
    assert "the result has no protocolVersion" in head
    assert sum("no protocolVersion" in line for line in lines) == 1, done.stdout

    verbose = backend_judge("--verbose", "--", *NO_VERSION).stdout
    assert "By requirement" in verbose and "PASS rpc.parse-error" in verbose
    assert "sent:" in verbose and len(verbose.splitlines()) > 4 * len(lines)
    report = json.loads(backend_judge("--json", "--", *NO_VERSION).stdout)
    assert len(report["checks"]) > 100 and len(report["requirements"]) == 26
    failed = [c for c in report["checks"] if c["status"] == "fail"]
    assert failed and all("evidence" in c for c in failed)


@pytest.mark.timeout(60)
def test_a_mistyped_command_is_one_line_first() -> None:
    done = backend_judge("--", "curl-guardd")
    lines = done.stdout.splitlines()
    assert done.returncode == 1
    assert len(lines) <= SCREEN, done.stdout
    assert "cannot start 'curl-guardd': No such file or directory" in "\n".join(lines[:5])


@pytest.mark.timeout(60)
def test_a_backend_that_dies_is_one_line_with_its_stderr_tail() -> None:
    done = backend_judge("--", *DIES)
    lines = done.stdout.splitlines()
    assert len(lines) <= SCREEN, done.stdout
    head = " ".join(lines[:6])
    assert "exited with status 1" in head and "cannot read the rules" in head, done.stdout


@pytest.mark.timeout(60)
def test_a_mistyped_harness_client_is_one_line() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "ahp_conformance.cli", "harness", "--", "no-such-client"],
        capture_output=True,
        text=True,
        timeout=50,
        check=False,
    )
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert "cannot start 'no-such-client': No such file or directory" in done.stderr


def test_a_long_command_stays_on_one_line_in_piped_output(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # #29: piped output is 80 columns; a printed command or path broken mid-word cannot be
    # pasted back. The default console soft-wraps: each printed line stays whole.
    from ahp_conformance.fixtures import load_catalogue
    from ahp_conformance.report import Check, Report

    import kit_testing

    command = "/opt/" + "very-long-folder-name/" * 6 + "guard-backend --rules guard.toml"
    report = Report(
        role="backend",
        subject=command,
        catalogue=load_catalogue(kit_testing.fixtures_root()),
        checks=[Check("start", "the backend starts", ("AHP-RPC-001",), "fail", f"run {command}")],
    )
    report.render()
    out = capsys.readouterr().out
    assert len(command) > 80
    assert f"ahp-conformance backend — {command}" in out.splitlines(), out
    assert any(f"run {command}" in line for line in out.splitlines()), out  # the fix, whole

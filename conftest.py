"""Fixtures shared by every test folder (the helpers themselves live in ``kit_testing``)."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings

from kit_testing import fixtures_root, schema_errors

# The live tier's pinned harness binaries (tests/live/binaries.py): session fixtures any
# ``live``-marked test may ask for; each installs once per machine and skips with the
# reason where node/npm (or a Python for Kimi) is missing.
from tests.live.binaries import kimi_bin, npm_bin

__all__ = ["kimi_bin", "npm_bin"]

# Property tests judge behaviour, not speed (speed targets live in bench/, with --check):
# no per-example deadline, which a loaded machine (a parallel run, CI) turns into false
# failures such as a hypothesis DeadlineExceeded of 528 ms against the default 200 ms.
settings.register_profile("ahp-kit", deadline=None)
settings.load_profile("ahp-kit")


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """``-n auto`` (the default, pyproject): two workers per CPU for the suite, whose
    tests mostly wait on child processes, loopback servers and deadlines (on 2 cores:
    392 s with one worker per CPU, 294 s with two); one per CPU for the live tier, whose
    harnesses (node processes) keep a CPU busy each."""
    cpus = os.cpu_count() or 1
    live = "live" in str(config.getoption("markexpr", "")).replace("not live", "")
    return cpus if live else 2 * cpus


@pytest.fixture(scope="session")
def fixtures_dir() -> Path:
    root = fixtures_root()
    if not (root / "manifest.json").is_file():
        pytest.skip(
            f"golden fixtures not found at {root} "
            "(set AHP_FIXTURES_DIR to the ahp-draft fixtures folder)"
        )
    return root


@pytest.fixture(scope="session")
def official_schema() -> Callable[[str, Any], list[str]]:
    """``official_schema(name, instance)`` -> list of errors (empty when valid)."""
    return schema_errors


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


MODULE_TIMES = Path(__file__).parent / "tests" / "module_times.json"
"""Each test module's seconds (all its tests, setup and teardown included) in a full run:
the order the suite schedules modules in. ``uv run pytest --record-module-times``
rewrites the entries of the modules it ran."""


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--record-module-times",
        action="store_true",
        help=f"write each module's seconds in this run to {MODULE_TIMES.name}",
    )


def _module(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The longest modules first, each kept whole in pytest's own order (its module
    fixtures stay grouped). With ``--dist load`` an idle worker takes the next test, so
    the judges and end-to-end modules start at once and the last minute is in-memory
    tests, not one long judge keeping a single CPU busy while the other waits. A module
    not yet timed goes last."""
    times = json.loads(MODULE_TIMES.read_text()) if MODULE_TIMES.is_file() else {}
    first: dict[str, int] = {}
    for index, item in enumerate(items):
        first.setdefault(_module(item.nodeid), index)
    items.sort(
        key=lambda item: (-times.get(_module(item.nodeid), 0.0), first[_module(item.nodeid)])
    )


_measured: dict[str, float] = {}


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    _measured[_module(report.nodeid)] = _measured.get(_module(report.nodeid), 0.0) + report.duration


def pytest_sessionfinish(session: pytest.Session) -> None:
    if not session.config.getoption("--record-module-times") or hasattr(
        session.config, "workerinput"
    ):
        return
    times = json.loads(MODULE_TIMES.read_text()) if MODULE_TIMES.is_file() else {}
    times.update({module: round(seconds, 1) for module, seconds in _measured.items()})
    ordered = dict(sorted(times.items(), key=lambda entry: (-entry[1], entry[0])))
    MODULE_TIMES.write_text(json.dumps(ordered, indent=1) + "\n")


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """The live tier's hook latencies, measured inside each harness (``tests/live``)."""
    lines = [
        value
        for report in terminalreporter.stats.get("passed", [])
        for key, value in getattr(report, "user_properties", [])
        if key == "hook_latency"
    ]
    if lines:
        terminalreporter.section("hook latency inside the harnesses (live tier)")
        for line in sorted(lines):
            terminalreporter.line(str(line))

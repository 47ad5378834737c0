"""Mutation score of the pure rule modules, each against its own in-memory tests.

    uv run python tools/mutation.py                  # every target: a table and the total
    uv run python tools/mutation.py --module chain   # one target (repeatable)
    uv run python tools/mutation.py --check          # exit 1 when the total is below 90 %
    uv run python tools/mutation.py --survivors      # also print each survivor's diff

Guards the tests' proof: a mutant (one small change to a rule, by ``mutmut``) that no
test notices is a rule the tests do not pin. Each target runs alone in a throwaway copy
(a temporary folder: the module's package under ``src/``, its test files, the root
``conftest.py`` and its helpers), so the work tree is never touched and ``uv run
pytest`` collects nothing new. One mutant at a time (``--max-children 1``); pytest runs
in one process (``-n 0``) with a fixed hypothesis seed, so a score is repeatable.

score = killed / mutants: a survivor, a timeout or a mutant no mapped test reaches counts
against it. mutmut does not mutate decorated functions (pydantic validators,
properties) or module-level tables. The survivors judged equivalent (no observable
change) are listed in ``docs/mutation.md``; none is excluded here.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PROTO, HARNESS = "packages/protocol", "packages/harness"

# name: (the module, its fast in-memory test files). No test here may spawn a process.
TARGETS: dict[str, tuple[str, tuple[str, ...]]] = {
    "chain": (f"{PROTO}/src/ahp_protocol/client/chain.py", (f"{PROTO}/tests/test_chain.py",)),
    "routing": (f"{PROTO}/src/ahp_protocol/wire/routing.py", (f"{PROTO}/tests/test_routing.py",)),
    "legality": (
        f"{PROTO}/src/ahp_protocol/wire/_legality.py",
        (f"{PROTO}/tests/test_effects.py", f"{PROTO}/tests/test_capabilities.py"),
    ),
    "capabilities": (
        f"{PROTO}/src/ahp_protocol/wire/capabilities.py",
        (f"{PROTO}/tests/test_capabilities.py",),
    ),
    "registration_rules": (
        f"{PROTO}/src/ahp_protocol/wire/registration_rules.py",
        (f"{PROTO}/tests/test_registration.py",),
    ),
    "engine": (f"{PROTO}/src/ahp_protocol/client/engine.py", (f"{PROTO}/tests/test_engine.py",)),
    "precedence": (
        f"{HARNESS}/src/ahp_harness/precedence.py",
        (f"{HARNESS}/tests/test_precedence.py",),
    ),
}
# Tests in those files that spawn a process: left out of every run.
DESELECT = (f"{PROTO}/tests/test_routing.py::test_routing_and_kinds_import_without_pydantic",)
# What the root conftest needs beside it.
SUPPORT = ("conftest.py", "kit_testing.py", "tests/live/binaries.py")
THRESHOLD = 90.0

CONFIG = """\
[tool.mutmut]
source_paths = ["src"]
only_mutate = [{only!r}]
also_copy = {copy!r}
pytest_add_cli_args_test_selection = {tests!r}
pytest_add_cli_args = {args!r}
use_git_change_detection = false

[tool.pytest.ini_options]
pythonpath = ["."]
addopts = ["--import-mode=importlib", "-n", "0", "-p", "no:cacheprovider"]
timeout = 60
"""
PYTEST_ARGS = ["--hypothesis-seed=0", *(f"--deselect={d}" for d in DESELECT)]
RESULT = re.compile(r"^\s*(\S+__mutmut_\d+): (.+)$")


def stage(work: Path, module: str, tests: tuple[str, ...]) -> None:
    """A copy of what one run needs: the module's package under ``src/``, the tests."""
    package = Path(module).parts.index("src") + 1
    source = ROOT.joinpath(*Path(module).parts[: package + 1])
    skip = shutil.ignore_patterns("__pycache__")
    shutil.copytree(source, work / "src" / source.name, ignore=skip)
    copied = [*tests, *{str(Path(t).parent / "conftest.py") for t in tests}, *SUPPORT]
    present = [p for p in copied if (ROOT / p).is_file()]
    for rel in present:
        (work / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / rel, work / rel)
    only = "/".join(("src", *Path(module).parts[package:]))
    # mutmut copies a listed file only into an existing folder: list top-level names.
    copy = sorted({Path(p).parts[0] for p in present})
    config = CONFIG.format(only=only, copy=copy, tests=list(tests), args=PYTEST_ARGS)
    (work / "pyproject.toml").write_text(config)


def run(name: str, show: bool) -> dict[str, int]:
    """Mutate one target in a temporary copy; the count of each mutmut status."""
    module, tests = TARGETS[name]
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    env.setdefault("AHP_FIXTURES_DIR", str(ROOT.parent / "shared" / "fixtures" / "ahp-draft"))
    with tempfile.TemporaryDirectory(prefix=f"ahp-mutation-{name}-") as tmp:
        work = Path(tmp)
        stage(work, module, tests)
        mutmut = [sys.executable, "-m", "mutmut"]
        done = subprocess.run(
            [*mutmut, "run", "--max-children", "1"], cwd=work, env=env, capture_output=True
        )
        listed = subprocess.run(
            [*mutmut, "results", "--all", "true"], cwd=work, env=env, capture_output=True, text=True
        )
        statuses = dict(m.groups() for m in map(RESULT.match, listed.stdout.splitlines()) if m)
        if done.returncode != 0 or not statuses:
            sys.stderr.write(done.stdout.decode(errors="replace")[-4000:])
            sys.exit(f"{name}: mutmut failed (exit {done.returncode})")
        if show:
            for mutant, status in statuses.items():
                if status != "killed":
                    diff = subprocess.run(
                        [*mutmut, "show", mutant], cwd=work, env=env, capture_output=True, text=True
                    )
                    print(diff.stdout)
    counts: dict[str, int] = {}
    for status in statuses.values():
        counts[status] = counts.get(status, 0) + 1
    return counts


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--module", action="append", choices=sorted(TARGETS))
    parser.add_argument("--check", action="store_true", help=f"exit 1 below {THRESHOLD:g} %%")
    parser.add_argument("--survivors", action="store_true", help="print each survivor's diff")
    options = parser.parse_args()
    names = options.module or [n for n, (m, _) in TARGETS.items() if (ROOT / m).is_file()]
    columns = ("mutants", "killed", "survived", "timeout", "other")
    print(f"{'module':<20}" + "".join(f"{c:>9}" for c in columns) + f"{'score':>9}")
    total = dict.fromkeys(columns, 0)
    for name in names:
        counts = run(name, options.survivors)
        row = {
            "mutants": sum(counts.values()),
            "killed": counts.pop("killed", 0),
            "survived": counts.pop("survived", 0),
            "timeout": counts.pop("timeout", 0),
        }
        row["other"] = sum(counts.values())  # no tests, suspicious, segfault, ...
        total = {c: total[c] + row[c] for c in columns}
        print(f"{name:<20}" + "".join(f"{row[c]:>9}" for c in columns) + score(row), flush=True)
    print(f"{'total':<20}" + "".join(f"{total[c]:>9}" for c in columns) + score(total))
    percent = 100 * total["killed"] / max(total["mutants"], 1)
    return 1 if options.check and percent < THRESHOLD else 0


def score(row: dict[str, int]) -> str:
    return f"{100 * row['killed'] / max(row['mutants'], 1):>8.1f}%"


if __name__ == "__main__":
    sys.exit(main())

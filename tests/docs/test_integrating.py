"""``docs/integrating.md`` runs as written: its example harness is extracted and executed.

The page marks each file of its example with ``<!-- example: NAME -->`` right before a
fenced block, and the output the example prints with ``<!-- expected output: NAME -->``.
These tests write the marked files into a temporary folder outside the repository and
run ``toy_harness.py`` with ``sys.executable`` from a third folder (neither the
repository nor the example's), so the relative rules file in the registration is found
only through the anchoring rule (a registration file's folder is its backends' home).
The deny-list backend is the real ``ahp-backend`` process, found on ``PATH`` (the venv's
``bin``) or, deliberately, not found.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "integrating.md"
EXAMPLE = "toy_harness.py"
FILES = ("hooks.json", "denylist.toml", EXAMPLE)
AHP_BEGIN = "# --- AHP integration: begin"
AHP_END = "# --- AHP integration: end"
MAX_AHP_LINES = 80
RUN_TIMEOUT_S = 45
JUDGE_PROMISES = (sys.executable, "-m", "ahp_conformance.cli", "promises", "--json")

_MARKED = re.compile(
    r"^<!-- (example|expected output): (\S+) -->\n```[\w-]*\n(.*?)^```$", re.M | re.S
)


def marked_blocks(text: str) -> tuple[dict[str, str], dict[str, str]]:
    """The page's example files and expected outputs, by name (a name marked twice fails)."""
    files: dict[str, str] = {}
    outputs: dict[str, str] = {}
    for what, name, body in _MARKED.findall(text):
        table = files if what == "example" else outputs
        assert name not in table, f"{DOC}: {what} {name!r} is marked twice"
        table[name] = body
    return files, outputs


def ahp_code_lines(source: str) -> list[str]:
    """The AHP-specific code of the example: its ``ahp_protocol`` imports, then the code
    lines (not blank, not only a comment) of its delimited AHP block. Any other mention
    of AHP outside the block fails: the count would not be the whole of it."""
    assert source.count(AHP_BEGIN) == 1 and source.count(AHP_END) == 1, (
        f"{EXAMPLE} must hold one block from {AHP_BEGIN!r} to {AHP_END!r}"
    )
    begin, end = source.index(AHP_BEGIN), source.index(AHP_END)
    outside = (source[:begin] + source[end:]).splitlines()
    imports = [ln for ln in outside if "ahp_protocol" in ln]
    stray = [ln for ln in imports if not ln.startswith("from ahp_protocol")]
    stray += [ln for ln in outside if "hooks" in ln.lower() and ln not in imports]
    assert not stray, f"AHP code outside the delimited block: {stray}"
    block = source[begin:end].splitlines()
    return imports + [ln for ln in block if ln.strip() and not ln.lstrip().startswith("#")]


def path_without_backend() -> list[str]:
    """This process's PATH without the venv's ``bin`` nor any folder holding ``ahp-backend``."""
    venv_bin = os.path.dirname(sys.executable)
    return [
        entry
        for entry in os.environ.get("PATH", "").split(os.pathsep)
        if entry
        and os.path.abspath(entry) != os.path.abspath(venv_bin)
        and shutil.which("ahp-backend", path=entry) is None
    ]


@dataclass
class Run:
    stdout: str
    stderr: str
    workspace: Path

    def line(self, needle: str) -> str:
        """The one printed result line of the proposed call containing ``needle``."""
        found = [ln for ln in self.stdout.splitlines() if needle in ln and " -> " in ln]
        assert len(found) == 1, f"no single result line for {needle!r} in:\n{self.stdout}"
        return found[0]


@pytest.fixture(scope="module")
def page() -> tuple[dict[str, str], dict[str, str]]:
    return marked_blocks(DOC.read_text(encoding="utf-8"))


@pytest.fixture
def example(tmp_path: Path, page: tuple[dict[str, str], dict[str, str]]) -> Path:
    files, _ = page
    missing = [name for name in FILES if name not in files]
    assert not missing, f"{DOC} marks no example block for {missing} (marked: {sorted(files)})"
    folder = tmp_path / "example"
    folder.mkdir()
    assert REPO not in folder.resolve().parents, "the example must run outside the repository"
    for name in FILES:
        (folder / name).write_text(files[name], encoding="utf-8")
    return folder


def run_example(example: Path, path: list[str]) -> Run:
    """Run the example harness from a folder that is neither the repo nor the example's."""
    elsewhere = example.parent / "elsewhere"
    elsewhere.mkdir(exist_ok=True)
    workspace = example.parent / "workspace"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["PATH"] = os.pathsep.join(path)
    proc = subprocess.run(
        [sys.executable, str(example / EXAMPLE), str(workspace)],
        cwd=elsewhere,
        env=env,
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_S,
        check=False,
    )
    assert proc.returncode == 0, f"{EXAMPLE} exited {proc.returncode}:\n{proc.stderr}"
    return Run(proc.stdout, proc.stderr, workspace)


def test_the_registration_names_ahp_backend_and_a_rules_file_beside_it(
    page: tuple[dict[str, str], dict[str, str]],
) -> None:
    files, _ = page
    (hook,) = json.loads(files["hooks.json"])["hooks"]
    transport = hook["transport"]
    assert transport["command"] == "ahp-backend"
    assert "cwd" not in transport, "the example relies on the registration file's folder"
    assert transport["args"][transport["args"].index("--rules") + 1] == "denylist.toml"


def test_the_ahp_part_of_the_example_is_at_most_80_lines(
    page: tuple[dict[str, str], dict[str, str]],
) -> None:
    files, _ = page
    lines = ahp_code_lines(files[EXAMPLE])
    assert 0 < len(lines) <= MAX_AHP_LINES, f"the AHP part has {len(lines)} code lines"
    assert any("Hooks(" in ln for ln in lines), "the AHP block must be where Hooks is used"
    stated = re.search(r"(\d+) lines of code", DOC.read_text(encoding="utf-8"))
    assert stated is not None and int(stated.group(1)) == len(lines), (
        f"{DOC} should say the AHP part is {len(lines)} lines of code"
    )


def test_the_example_passes_the_kit_lint(example: Path) -> None:
    """What readers copy is held to the kit's own ruff rules and format."""
    config = str(REPO / "pyproject.toml")
    source = str(example / EXAMPLE)
    for command in (["check"], ["format", "--check", "--diff"]):
        proc = subprocess.run(
            [sys.executable, "-m", "ruff", *command, "--config", config, source],
            capture_output=True,
            text=True,
            timeout=RUN_TIMEOUT_S,
            check=False,
        )
        assert proc.returncode == 0, f"ruff {command[0]} on {EXAMPLE}:\n{proc.stdout}{proc.stderr}"


def test_the_example_runs_as_documented(
    example: Path, page: tuple[dict[str, str], dict[str, str]]
) -> None:
    _, outputs = page
    run = run_example(example, [os.path.dirname(sys.executable), *path_without_backend()])

    # The deny-list's deny stops a call, even one the host itself would have run:
    # no side effect, and the backend's reason is what the user sees.
    assert "refused by com.example.denylist" in run.line("rm -rf build")
    assert "(pretend) ran" not in run.line("rm -rf build")
    assert "com.example.policy.secrets" in run.line("notes/server.pem")
    assert not (run.workspace / "notes" / "server.pem").exists()
    # No backend cares about src/main.py: the host's own rule refuses it.
    assert run.line("src/main.py").endswith("refused by the host's rule")
    assert not (run.workspace / "src").exists()
    # Allowed calls run: the prompted shell command and the write under notes/.
    assert run.line('"ls -la"').endswith("(pretend) ran: ls -la")
    assert (run.workspace / "notes" / "todo.txt").read_text() == "buy milk\n"
    assert EXAMPLE in outputs, f"{DOC} shows no expected output for {EXAMPLE}"
    assert run.stdout == outputs[EXAMPLE], "the page's expected output is not what it prints"


def test_without_ahp_backend_on_path_every_call_is_refused_and_the_reason_named(
    example: Path,
) -> None:
    run = run_example(example, path_without_backend())

    assert "'ahp-backend' not found on PATH" in run.stdout
    assert "spawn_failed, fail-closed" in run.stdout
    for call in ('"ls -la"', "rm -rf build", "notes/todo.txt", "src/main.py"):
        named = "Required policy backend com.example.denylist unavailable (spawn_failed)."
        assert named in run.line(call)  # which backend, which failure: never its error text
    assert not run.workspace.exists(), "a tool ran although its fail-closed backend failed"


def test_a_backend_that_dies_shows_its_stderr(example: Path) -> None:
    (example / "denylist.toml").unlink()  # the backend exits at start, saying why on stderr
    run = run_example(example, [os.path.dirname(sys.executable), *path_without_backend()])

    assert "abnormal_exit, fail-closed" in run.stdout
    assert "com.example.denylist stderr: error: denylist.toml: cannot read" in run.stdout
    named = "Required policy backend com.example.denylist unavailable (abnormal_exit)."
    assert named in run.line("notes/todo.txt")
    assert not run.workspace.exists()


@pytest.mark.timeout(240)
def test_the_example_keeps_the_four_promises_judged_black_box(example: Path) -> None:
    """``ahp-conformance promises`` runs the toy once per scenario (AHP_PROBE): all pass."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    proc = subprocess.run(
        [
            *JUDGE_PROMISES,
            "--probe-kind",
            "file_write",
            "--",
            sys.executable,
            str(example / EXAMPLE),
        ],
        cwd=example.parent,
        env=env,
        capture_output=True,
        text=True,
        timeout=220,
        check=False,
    )
    report = json.loads(proc.stdout)
    failed = [(c["id"], c.get("detail")) for c in report["checks"] if c["status"] != "pass"]
    assert proc.returncode == 0 and not failed, failed
    ids = {c["id"] for c in report["checks"]}
    assert {"deny.http", "allow.refuse.stdio", "failure.hang.stdio.fail-closed"} <= ids
    assert {"secret.http", "secret.leak"} <= ids

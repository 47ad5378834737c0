"""Nothing runs code from the user's project folder (#26).

Every Python child the kit starts on its own (the adapter's warm daemon, the hook
command ``ahp-adapter install`` writes, the backend ``ahp-backend policy test`` serves,
the demo's backends, the conformance fake backend and the SDK's interop adapter) runs in
a folder someone else filled: the agent's project, the policy's folder, the folder a
command was typed in. ``python -m PKG`` puts that folder first on ``sys.path``, so a
planted ``PKG/__init__.py`` there would run instead of ours.

Each test plants such a package (it appends its ``sys.argv`` to ``PLANTED`` beside it
and exits 99), runs the real command from that folder as a user would (the installed
entry points, real child processes, loopback only), and asserts both that the planted
code never ran and that the normal result happened.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import shlex
import shutil
import socket
import subprocess
import sys
import sysconfig
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import kit_testing

PY = sys.executable
BIN = Path(PY).parent  # the environment's entry points (ahp-adapter, ahp-backend, ...)
REPO = Path(__file__).resolve().parents[2]
RECORDER = REPO / "packages" / "protocol" / "tests" / "backends" / "recorder.py"
CLAUDE_PAYLOAD = REPO / "packages" / "adapters" / "tests" / "fixtures" / "claude-code"
RUN_S = 30.0

PLANTED = """\
import os, sys
here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
with open(os.path.join(here, "PLANTED"), "a") as marker:
    marker.write(repr(sys.argv) + "\\n")
sys.exit(99)
"""


def plant(folder: Path, package: str) -> Path:
    """``folder/package/__init__.py`` that leaves a marker and exits 99; the marker's path."""
    (folder / package).mkdir(parents=True)
    (folder / package / "__init__.py").write_text(PLANTED, "utf-8")
    return folder / "PLANTED"


def planted_ran(marker: Path) -> str:
    return marker.read_text("utf-8") if marker.exists() else ""


def run(
    argv: list[str], cwd: Path, *, input: str | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``argv`` in ``cwd``, bounded; stdin is ``input`` or nothing."""
    return subprocess.run(
        argv,
        cwd=cwd,
        input=input,
        stdin=subprocess.DEVNULL if input is None else None,
        env=env,
        capture_output=True,
        text=True,
        timeout=RUN_S,
        check=False,
    )


# -- the adapter: its daemon and the hook command it installs ---------------------------

DENY = [{"type": "deny", "reason": "No.", "code": "com.example.no"}]


def recorder_registration(folder: Path) -> Path:
    """A registration whose one interceptor denies every call (fail-closed)."""
    hook = {
        "id": "com.example.recorder",
        "transport": {
            "type": "stdio",
            "command": PY,
            "args": [str(RECORDER), "--effects", json.dumps(DENY)],
            "lifecycle": "persistent",
        },
        "subscriptions": [
            {
                "events": ["tool.before"],
                "mode": "intercept",
                "timeoutMs": 5000,
                "failurePolicy": "fail-closed",
                "content": {"default": "body"},
            }
        ],
    }
    path = folder / "registration.json"
    path.write_text(json.dumps({"protocolVersion": "draft", "hooks": [hook]}), "utf-8")
    return path


def pre_tool_use(cwd: Path) -> str:
    data = json.loads((CLAUDE_PAYLOAD / "pre_tool_use.shell.json").read_text("utf-8"))
    body: dict[str, Any] = data["payload"]
    body["tool_input"] = {"command": "ls"}
    body["cwd"] = str(cwd)
    return json.dumps(body)


def reason(stdout: str) -> str:
    assert stdout, "the hook printed no decision"
    return str(json.loads(stdout)["hookSpecificOutput"]["permissionDecisionReason"])


def _ask(sock: Path, op: str) -> dict[str, Any]:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.settimeout(10)
        conn.connect(str(sock))
        conn.sendall(json.dumps({"op": op}).encode() + b"\n")
        data = b""
        while b"\n" not in data:
            chunk = conn.recv(65536)
            if not chunk:
                break
            data += chunk
    answer: dict[str, Any] = json.loads(data)
    return answer


@pytest.fixture
def runtime(tmp_path: Path) -> Iterator[Path]:
    """A private adapter runtime folder (short: Unix socket paths); its daemons are
    stopped, and waited for, at the end."""
    folder = Path(tempfile.mkdtemp(prefix="ahpnc-", dir="/tmp"))
    os.chmod(folder, 0o700)
    try:
        yield folder
    finally:
        for sock in folder.glob("d-*.sock"):
            with contextlib.suppress(OSError, ValueError, KeyError):
                pid = _ask(sock, "ping")["pid"]
                _ask(sock, "stop")
                fd = os.pidfd_open(pid)
                try:
                    assert select.select([fd], [], [], RUN_S)[0], f"daemon {pid} did not exit"
                finally:
                    os.close(fd)
        shutil.rmtree(folder, ignore_errors=True)


def adapter_env(runtime: Path, home: Path) -> dict[str, str]:
    home.mkdir(exist_ok=True)
    env = {**os.environ, "AHP_ADAPTER_RUNTIME_DIR": str(runtime), "HOME": str(home)}
    env.pop("AHP_ADAPTER_DEBUG", None)
    return env


def test_the_warm_daemon_is_not_imported_from_the_agents_project(
    tmp_path: Path, runtime: Path
) -> None:
    # The harness runs the hook (the ahp-adapter entry point: sys.path[0] is its bin
    # folder) in the project; the hook starts the daemon from there.
    project = tmp_path / "project"
    marker = plant(project, "ahp_adapters")
    registration = recorder_registration(tmp_path)
    argv = [str(BIN / "ahp-adapter"), "hook", "claude-code", "--registration", str(registration)]
    argv += ["--daemon", "require", "--idle-timeout", "60"]
    env = adapter_env(runtime, tmp_path / "home")
    done = run(argv, project, input=pre_tool_use(project), env=env)
    assert planted_ran(marker) == ""
    assert done.returncode == 0, done.stderr
    # The backend's own denial, through the daemon ("require": no daemon would be the
    # fail-closed "Required policy backend unavailable.").
    assert reason(done.stdout) == "No."
    (sock,) = runtime.glob("d-*.sock")
    assert _ask(sock, "ping")["requests"] == 1


def test_a_hook_started_isolated_starts_its_daemon_isolated(tmp_path: Path, runtime: Path) -> None:
    # A hook command of your own with -I ignores PYTHONPATH; its daemon must too, or a
    # package on that path (here one planted outside the project) runs in the daemon.
    project = tmp_path / "project"
    project.mkdir()
    elsewhere = tmp_path / "elsewhere"
    marker = plant(elsewhere, "ahp_adapters")
    registration = recorder_registration(tmp_path)
    argv = [PY, "-I", "-m", "ahp_adapters", "hook", "claude-code", "--registration"]
    argv += [str(registration), "--daemon", "require", "--idle-timeout", "60"]
    env = {**adapter_env(runtime, tmp_path / "home"), "PYTHONPATH": str(elsewhere)}
    done = run(argv, project, input=pre_tool_use(project), env=env)
    assert planted_ran(marker) == ""
    assert done.returncode == 0, done.stderr
    assert reason(done.stdout) == "No."


def test_the_installed_hook_command_is_not_imported_from_the_agents_project(
    tmp_path: Path, runtime: Path
) -> None:
    # No ahp-adapter on PATH: install writes "this python ... -m ahp_adapters hook ...".
    project = tmp_path / "project"
    marker = plant(project, "ahp_adapters")
    registration = recorder_registration(tmp_path)
    env = adapter_env(runtime, tmp_path / "home")
    empty = tmp_path / "no-bin"
    empty.mkdir()
    argv = [str(BIN / "ahp-adapter"), "install", "claude-code", "--registration"]
    argv += [str(registration), "--project", str(project)]
    installed = run(argv, tmp_path, env={**env, "PATH": str(empty)})
    assert installed.returncode == 0, installed.stderr
    settings = json.loads((project / ".claude" / "settings.json").read_text("utf-8"))
    (group,) = settings["hooks"]["PreToolUse"]
    (handler,) = group["hooks"]
    command = handler["command"]
    assert shlex.split(command)[0] == PY, command  # the fallback, not an entry point
    # Claude Code runs the command through a shell, in the project.
    done = run(["/bin/sh", "-c", command], project, input=pre_tool_use(project), env=env)
    assert planted_ran(marker) == ""
    assert done.returncode == 0, done.stderr
    assert reason(done.stdout) == "No."


# -- ahp-backend policy test ------------------------------------------------------------

RULES = """\
[[rules]]
reason = "Force pushes rewrite shared history"
code = "com.example.policy.force-push"
kind = "shell"
[rules.input]
command = "git push.*(-f|--force)"
"""

TABLE = """\
denylist = "rules.toml"

[[case]]
name = "force push is denied"
event = { type = "tool.before", tool = { name = "Bash", kind = "shell", \
input = { command = "git push -f origin main" } } }
expect = "deny"
code = "com.example.policy.force-push"
"""


def test_policy_test_serves_the_policy_not_a_package_planted_beside_it(tmp_path: Path) -> None:
    policy = tmp_path / "policy"
    marker = plant(policy, "ahp_backends")
    (policy / "rules.toml").write_text(RULES, "utf-8")
    (policy / "policy_tests.toml").write_text(TABLE, "utf-8")
    done = run([str(BIN / "ahp-backend"), "policy", "test", "policy_tests.toml"], policy)
    assert planted_ran(marker) == ""
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines()[-1].endswith(" 1 passed, 0 failed"), done.stdout


# -- the demo's backends ----------------------------------------------------------------


def environment_without_entry_points(root: Path) -> Path:
    """A virtual environment that is this one minus its bin folder: its ``python`` (whose
    folder holds no ``ahp-backend``) sees the same installed packages. The demo then
    starts its backends as ``python ... -m ahp_backends.cli``."""
    (root / "bin").mkdir(parents=True)
    shutil.copy(Path(sys.prefix) / "pyvenv.cfg", root / "pyvenv.cfg")
    (root / "bin" / "python").symlink_to(os.path.realpath(PY))
    purelib = Path(sysconfig.get_paths()["purelib"])
    target = root / purelib.relative_to(sys.prefix)
    target.parent.mkdir(parents=True)
    target.symlink_to(purelib, target_is_directory=True)
    return root / "bin" / "python"


def test_the_demos_backends_are_not_imported_from_where_it_runs(tmp_path: Path) -> None:
    if sys.prefix == sys.base_prefix:
        raise AssertionError("the tests run in a virtual environment (uv run)")
    python = environment_without_entry_points(tmp_path / "env")
    here = tmp_path / "here"
    marker = plant(here, "ahp_backends")
    work = tmp_path / "demo"
    # -P for the harness itself: it is the demo's children this test is about.
    done = run([str(python), "-P", "-m", "ahp_harness.cli", "demo", "--dir", str(work)], here)
    assert planted_ran(marker) == ""
    assert done.returncode == 0, done.stdout + done.stderr
    # The fallback was what ran: the demo's stdio backends too are "python -P -m ...".
    hooks = json.loads((work / "registration.json").read_text("utf-8"))["hooks"]
    stdio = [h["transport"] for h in hooks if h["transport"]["type"] == "stdio"]
    assert stdio and all(t["command"] == str(python) for t in stdio)
    assert all(t["args"][:3] == ["-P", "-m", "ahp_backends.cli"] for t in stdio)
    # Each backend answered: the deny-list's deny, the approval service's deny and grant.
    assert "denied (not run): Recursive deletes are not allowed" in done.stdout
    assert "backend com.example.ahp.approval[0]: accepted" in done.stdout


# -- conformance: the fake backend and the SDK's interop adapter ------------------------


def one_scenario(folder: Path, scenario_id: str) -> Path:
    from ahp_conformance import scenarios
    from ahp_conformance.fixtures import interop_dir

    drivable, _ = scenarios.official(interop_dir(kit_testing.fixtures_root()))
    chosen = [s for s in drivable if s.id == scenario_id]
    assert len(chosen) == 1
    return scenarios.write(chosen, folder / "scenarios.json")


def test_the_judges_fake_backend_is_not_imported_from_where_it_runs(tmp_path: Path) -> None:
    here = tmp_path / "here"
    marker = plant(here, "ahp_conformance")
    path = one_scenario(tmp_path, "deny-blocks")
    # The judged client (the kit's own, started -P: the fake is what is tested) spawns
    # the fake backend as its server over stdio, in the folder the judge runs in.
    client = [PY, "-P", "-m", "ahp_conformance.kit_client"]
    argv = [str(BIN / "ahp-conformance"), "harness", "--json", "--transport", "stdio"]
    argv += ["--scenarios", str(path), "--", *client]
    env = {**os.environ, "AHP_FIXTURES_DIR": str(kit_testing.fixtures_root())}
    done = run(argv, here, env=env)
    assert planted_ran(marker) == ""
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(done.stdout)
    passed = {c["id"] for c in report["checks"] if c["status"] == "pass"}
    assert "scenario.deny-blocks" in passed


def test_the_sdk_adapter_is_not_imported_from_its_folder(tmp_path: Path) -> None:
    from ahp_conformance import matrix

    here = tmp_path / "here"
    marker = plant(here, "agenthooksprotocol")
    sdk = matrix.sdk_adapter(here)  # its client spawns its server in ``here`` too
    path = one_scenario(tmp_path, "deny-blocks")
    from ahp_conformance import scenarios

    runs = tmp_path / "runs"
    runs.mkdir()
    result = matrix.run_matrix(
        [sdk], [sdk], ["stdio"], scenarios.load(path), [], runs, watchdog_s=RUN_S
    )
    assert planted_ran(marker) == ""
    (cell,) = result.cells
    assert cell.problem is None and cell.failures == [], cell.problem
    assert cell.count("pass") == 1

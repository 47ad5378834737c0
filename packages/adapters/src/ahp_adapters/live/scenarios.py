"""The live scenarios: a real harness, hooks written by ``ahp-adapter install``, a fake model.

Each scenario makes a scratch home and workspace, writes a registration, installs
the hooks with the real installer (as a user would), points the harness at a
:class:`~ahp_adapters.live.fake_model.FakeModel` that asks for shell commands, runs
the harness once, and judges what happened by files on disk and by what the model
was told. Shared by the live test tier (``tests/live``) and ``ahp-adapter verify``.

The scenarios (the registration; what the model asks for; when it holds):

- ``deny``: deny-list, fail-closed; ``rm -r victim``, then ``echo``; ``victim``
  survives, the model saw the reason, and the harness went on.
- ``harmless``: deny-list, fail-closed; ``echo ran > marker``; ``marker`` was written.
- ``own-permissions``: deny-list (no effect for ``echo``), the harness's own rules
  refusing shell; ``echo ran > marker``; ``marker`` was not written.
- ``fail-closed-missing``: a backend command that does not exist, fail-closed; nothing ran.
- ``fail-closed-crash``: a backend that exits at once, fail-closed; nothing ran.
- ``fail-open``: a backend command that does not exist, fail-open; the call ran.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ahp_adapters.live.fake_model import FakeModel
from ahp_adapters.live.harnesses import Harness, Scratch, base_env

DENY_REASON = "AHP live check: recursive deletes are denied."
DENY_RULES = f"""[[rules]]
kind = "shell"
code = "dev.ahp.live.recursive_delete"
reason = "{DENY_REASON}"
[rules.input]
command = '\\brm\\s+(?:-\\w*\\s+)*-\\w*[rR]'
"""
RUN_TIMEOUT_S = 180.0


@dataclass
class LiveResult:
    """What one live scenario run against one real harness binary came to."""

    scenario: str
    ok: bool
    detail: str
    seconds: float
    stdout: str = ""
    stderr: str = ""
    tool_results: list[str] = field(default_factory=list)
    skipped: bool = False
    offered: list[str] = field(default_factory=list)
    """The tools the harness offered the model."""


def _backend_command() -> list[str]:
    """``ahp-backend`` beside this interpreter, by absolute path (a harness's hook PATH
    may not have it)."""
    script = Path(sys.executable).with_name("ahp-backend")
    if script.exists():
        return [str(script)]
    return [sys.executable, "-c", "import sys; from ahp_backends.cli import main; sys.exit(main())"]


def registration(backend: list[str], policy: str) -> dict[str, object]:
    return {
        "protocolVersion": "draft",
        "hooks": [
            {
                "id": "live.check",
                "transport": {
                    "type": "stdio",
                    "command": backend[0],
                    "args": backend[1:],
                    "lifecycle": "persistent",
                },
                "subscriptions": [
                    {
                        "events": ["tool.before"],
                        "mode": "intercept",
                        "timeoutMs": 5000,
                        "failurePolicy": policy,
                        "content": {"default": "metadata"},
                    }
                ],
            }
        ],
    }


def _denylist(ws: Path) -> dict[str, object]:
    rules = ws.parent / "live-denylist.toml"
    rules.write_text(DENY_RULES)
    return registration([*_backend_command(), "denylist", "--rules", str(rules)], "fail-closed")


def _missing(policy: str) -> Callable[[Path], dict[str, object]]:
    return lambda ws: registration(["/nonexistent/ahp-live-missing-backend"], policy)


def _crashing(ws: Path) -> dict[str, object]:
    return registration([sys.executable, "-c", "import sys; sys.exit(3)"], "fail-closed")


@dataclass(frozen=True)
class Scenario:
    name: str
    registration: Callable[[Path], dict[str, object]]
    commands: tuple[str, ...]
    judge: Callable[[Path, list[str]], tuple[bool, str]]
    own_permissions_refuse: bool = False
    tests_fail_closed: bool = False
    """What it shows is the fail-closed policy (not applicable where only fail-open is)."""


def _deny_held(ws: Path, results: list[str]) -> tuple[bool, str]:
    if not (ws / "victim" / "keep").exists():
        return False, "victim/keep was deleted: the deny did not hold"
    if not any(DENY_REASON in r for r in results):
        return False, f"the model was not told the deny reason (tool results: {results!r})"
    if not (ws / "after").exists():
        return False, "the harness did not go on after the deny (after was not written)"
    return True, "victim survived, the model saw the reason, the next call ran"


def _ran(ws: Path, results: list[str]) -> tuple[bool, str]:
    if (ws / "marker").exists():
        return True, "the call ran"
    return False, f"marker was not written (tool results: {results!r})"


def _did_not_run(ws: Path, results: list[str]) -> tuple[bool, str]:
    if (ws / "marker").exists():
        return False, "marker was written: the call ran"
    if not results:
        return False, "the model never got a tool result: the harness did not try the call"
    return True, "the call was stopped"


SCENARIOS: dict[str, Scenario] = {
    s.name: s
    for s in (
        Scenario("deny", _denylist, ("rm -r victim", "echo ran > after"), _deny_held),
        Scenario("harmless", _denylist, ("echo ran > marker",), _ran),
        Scenario("own-permissions", _denylist, ("echo ran > marker",), _did_not_run, True),
        Scenario(
            "fail-closed-missing",
            _missing("fail-closed"),
            ("echo ran > marker",),
            _did_not_run,
            tests_fail_closed=True,
        ),
        Scenario(
            "fail-closed-crash",
            _crashing,
            ("echo ran > marker",),
            _did_not_run,
            tests_fail_closed=True,
        ),
        Scenario("fail-open", _missing("fail-open"), ("echo ran > marker",), _ran),
    )
}


def _fail_open(document: dict[str, object]) -> dict[str, object]:
    """``document`` with every interceptor fail-open (what ``--transport http`` installs)."""
    copy = json.loads(json.dumps(document))
    for hook in copy["hooks"]:
        for sub in hook.get("subscriptions", []):
            sub["failurePolicy"] = "fail-open"
    result: dict[str, object] = copy
    return result


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _adapter(*args: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-P", "-m", "ahp_adapters", *args],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def run(
    harness: Harness, binary: str, scenario: Scenario, root: Path, *, record: Path | None = None
) -> LiveResult:
    """One scenario against one harness binary, in a fresh folder under ``root``.

    With ``record``, the installed hook command is :mod:`ahp_adapters.live.tee` in front
    of the adapter, which saves every native payload the harness sends into that folder.
    """
    started = time.monotonic()
    scratch = Scratch(home=root / "home", workspace=root / "ws")
    scratch.home.mkdir(parents=True)
    scratch.workspace.mkdir(parents=True)
    (scratch.workspace / "victim").mkdir()
    (scratch.workspace / "victim" / "keep").write_text("keep me\n")
    document = scenario.registration(scratch.workspace)
    if harness.transport == "http":
        if scenario.tests_fail_closed:
            return LiveResult(
                scenario.name,
                True,
                "not applicable: install --transport http refuses a fail-closed registration "
                "(an http hook that cannot reach its server lets the call through)",
                0.0,
                skipped=True,
            )
        document = _fail_open(document)  # what the http transport takes; a deny still holds
    reg = root / "registration.json"
    reg.write_text(json.dumps(document, indent=2))
    runtime = tempfile.mkdtemp(prefix="ahp-live-")  # short: daemon sockets live here
    env = base_env(scratch)
    env["AHP_ADAPTER_RUNTIME_DIR"] = runtime
    adapter_env = {**os.environ, **env}
    try:
        with FakeModel(scenario.commands) as model:
            env.update(harness.env(scratch, model.url))
            adapter_env.update(env)
            port = _free_port()
            args = [
                a.format(workspace=scratch.workspace, binary=binary, port=port)
                for a in harness.install_args
            ]
            if record is not None:
                from ahp_adapters.install import default_command

                tee = [sys.executable, "-P", "-m", "ahp_adapters.live.tee", str(record), "--"]
                args += ["--command", shlex.join([*tee, *default_command()])]
            done = _adapter(
                "install",
                harness.name,
                "--registration",
                str(reg),
                *args,
                env=adapter_env,
                cwd=scratch.workspace,
            )
            if done.returncode != 0:
                return LiveResult(
                    scenario.name,
                    False,
                    f"ahp-adapter install failed: {done.stderr.strip()}",
                    time.monotonic() - started,
                )
            argv = harness.argv(
                binary, scratch, own_permissions_refuse=scenario.own_permissions_refuse
            )
            if argv is None:
                return LiveResult(
                    scenario.name,
                    True,
                    f"not applicable: {harness.name} has no mode in which its own "
                    "permissions refuse a shell call",
                    0.0,
                    skipped=True,
                )
            try:
                with harness.serving(reg, adapter_env, port):
                    proc = subprocess.run(
                        argv,
                        cwd=scratch.workspace,
                        env=env,
                        capture_output=True,
                        text=True,
                        timeout=RUN_TIMEOUT_S,
                        stdin=subprocess.DEVNULL,
                        check=False,
                    )
                out, err = proc.stdout, proc.stderr
            except subprocess.TimeoutExpired as exc:
                return LiveResult(
                    scenario.name,
                    False,
                    f"the harness did not finish in {RUN_TIMEOUT_S:.0f} s",
                    time.monotonic() - started,
                    _s(exc.stdout),
                    _s(exc.stderr),
                )
            results = model.script.results()
            offered = model.script.offered()
        ok, detail = scenario.judge(scratch.workspace, results)
        seconds = time.monotonic() - started
        return LiveResult(scenario.name, ok, detail, seconds, out, err, results, offered=offered)
    finally:
        # Every daemon the run's hooks started (one per registration and hook folder, and
        # the harness may run hooks from more than one folder), by its socket.
        for sock in Path(runtime).rglob("*.sock"):
            _adapter(
                *("daemon", "stop", "--registration", str(reg), "--socket", str(sock)),
                env=adapter_env,
                cwd=root,
            )
        shutil.rmtree(runtime, ignore_errors=True)


def _s(value: bytes | str | None) -> str:
    if isinstance(value, bytes):
        return value.decode(errors="replace")
    return value or ""

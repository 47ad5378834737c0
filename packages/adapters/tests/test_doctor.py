"""``ahp-adapter doctor``: would a deny hold, seen from the harness's side?

Real processes in tmp folders: ``install`` writes the hooks, ``doctor`` checks them
and runs the installed command through ``/bin/sh`` with a native probe payload. The
registration runs our deny-list (``ahp-backend denylist``, by the venv's absolute
path) unless a test breaks it: no hooks, a bare backend name off the hook PATH, a
backend that exits at start, a missing registration. HOME, CODEX_HOME and
COPILOT_HOME point into the test's tmp folder; the ``kit`` fixture's private runtime
folder holds the daemons the probes start, and stops them at teardown. The Codex
trust checks drive the real codex binary the live tier installs (``live`` marker).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from ahp_adapters import dialects, doctor
from ahp_adapters.events import build_event

BIN = Path(sys.executable).parent
BACKEND = BIN / "ahp-backend"


@pytest.fixture
def codex(npm_bin: Path) -> Path:
    return npm_bin / "codex"


RULES = """\
[[rules]]
reason = "Force pushes rewrite shared history."
code = "com.example.policy.force_push"
kind = "shell"
[rules.input]
command = '\\bgit\\s+push\\b.*\\s--force\\b'
"""


@pytest.fixture
def env(homes_env: dict[str, str]) -> dict[str, str]:
    """The environment doctor and install run with: every home in the tmp folder."""
    return homes_env


def registration(kit: Any, command: str | None = None, args: list[str] | None = None) -> Path:
    rules = kit.tmp / "rules.toml"
    rules.write_text(RULES)
    hook = {
        "id": "com.example.ahp.denylist",
        "transport": {
            "type": "stdio",
            "command": command or str(BACKEND),
            "args": ["denylist", "--rules", str(rules)] if args is None else args,
            "lifecycle": "persistent",
        },
        "subscriptions": [kit.intercept("fail-closed", 5000)],
    }
    return kit.registration(hook)


def adapter(
    env: dict[str, str], cwd: Path, *args: str, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ahp_adapters", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=timeout,
    )


def install(kit: Any, env: dict[str, str], dialect: str, reg: Path, *scope: str) -> None:
    done = adapter(env, kit.tmp, "install", dialect, "--registration", str(reg), *scope)
    assert done.returncode == 0, done.stderr


def lines(done: subprocess.CompletedProcess[str]) -> dict[str, str]:
    """The check lines by check name: 'ok ...' or 'FAIL ...'."""
    found = {}
    for line in done.stdout.splitlines():
        status, _, rest = line.partition(" ")
        if status in ("ok", "FAIL"):
            found[rest.split(":", 1)[0]] = line
    return found


def project_scope(kit: Any) -> tuple[str, str]:
    return ("--project", str(kit.tmp / "project"))


# --- the probe payloads ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("dialect", "event"),
    [(d, e) for d, events in doctor.PROBES.items() for e in events],
)
def test_probe_payloads_are_a_harmless_shell_call_in_each_dialect(
    dialect: str, event: str, tmp_path: Path
) -> None:
    codec = dialects.get(dialect)
    payload = doctor.probe_payload(dialect, event, tmp_path)
    codec = codec.resolve(payload)
    parsed = codec.parse(payload, options={"event": event, "skip_shell_mcp": False})
    assert parsed.kind == "tool.before"
    canonical = build_event(codec, parsed, payload)
    assert canonical["tool"]["kind"] == "shell"
    assert canonical["tool"]["input"]["command"] == doctor.PROBE_COMMAND
    assert canonical["session"]["cwd"] == str(tmp_path)
    assert event in install_events(dialect)


def install_events(dialect: str) -> set[str]:
    from ahp_adapters import install

    return set(install.EVENTS[dialect]) | set(install.CURSOR_SPLIT_EXTRA)


# --- a good install, and each way it fails --------------------------------------------------


def test_doctor_passes_on_a_good_install(kit: Any, env: dict[str, str]) -> None:
    reg = registration(kit)
    install(kit, env, "claude-code", reg, *project_scope(kit))
    done = adapter(env, kit.tmp, "doctor", "claude-code", *project_scope(kit))
    assert done.returncode == 0, done.stdout + done.stderr
    found = lines(done)
    assert list(found) == [
        "hooks present",
        "registration",
        "hooks trusted",
        "commands resolve",
        "probe",
    ]
    assert all(line.startswith("ok ") for line in found.values()), done.stdout
    assert str(reg) in found["hooks present"]
    assert str(BACKEND) in found["commands resolve"]
    assert "no effect" in found["probe"]
    assert "a deny would hold" in done.stdout


@pytest.mark.parametrize(
    ("dialect", "scope"),
    [
        ("gemini", "project"),
        ("cursor", "project"),
        ("cursor", "split"),
        ("kimi", "user"),
        ("copilot", "user"),
        ("claude-code", "user"),
    ],
)
def test_doctor_passes_for_each_dialect_that_needs_no_harness_binary(
    kit: Any, env: dict[str, str], dialect: str, scope: str
) -> None:
    reg = registration(kit)
    args = [*project_scope(kit)] if scope in ("project", "split") else []
    extra = ["--surface", "split"] if scope == "split" else []
    install(kit, env, dialect, reg, *args, *extra)
    done = adapter(env, kit.tmp, "doctor", dialect, *args)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "FAIL" not in done.stdout
    assert "ok probe: no effect" in done.stdout


def test_no_hooks_installed_fails(kit: Any, env: dict[str, str]) -> None:
    done = adapter(env, kit.tmp, "doctor", "claude-code", *project_scope(kit))
    assert done.returncode == 1
    found = lines(done)
    assert found["hooks present"].startswith("FAIL hooks present: no hook file")
    assert "ahp-adapter install claude-code --registration FILE --project" in done.stdout
    assert list(found) == ["hooks present"]  # nothing else can be checked


def test_a_hook_file_without_our_entry_fails(kit: Any, env: dict[str, str]) -> None:
    settings = kit.tmp / "project" / ".claude" / "settings.json"
    settings.parent.mkdir(parents=True)
    settings.write_text(json.dumps({"hooks": {"PreToolUse": [{"hooks": [{"command": "x"}]}]}}))
    done = adapter(env, kit.tmp, "doctor", "claude-code", *project_scope(kit))
    assert done.returncode == 1
    assert "FAIL hooks present:" in done.stdout
    assert "no ahp-adapter hook entry for PreToolUse" in done.stdout


def test_disable_all_hooks_fails(kit: Any, env: dict[str, str]) -> None:
    install(kit, env, "claude-code", registration(kit), *project_scope(kit))
    settings = kit.tmp / "project" / ".claude" / "settings.json"
    doc = json.loads(settings.read_text())
    settings.write_text(json.dumps({**doc, "disableAllHooks": True}))
    done = adapter(env, kit.tmp, "doctor", "claude-code", *project_scope(kit))
    assert done.returncode == 1
    assert "FAIL hooks present:" in done.stdout and "disableAllHooks" in done.stdout


def test_a_bare_backend_name_off_the_hook_path_fails(kit: Any, env: dict[str, str]) -> None:
    hook_path = "/usr/bin:/bin"
    if any(Path(folder, "ahp-backend").exists() for folder in hook_path.split(":")):
        pytest.skip("ahp-backend is installed in /usr/bin or /bin")
    reg = registration(kit, command="ahp-backend")
    install(kit, env, "claude-code", reg, *project_scope(kit))
    done = adapter(
        env, kit.tmp, "doctor", "claude-code", *project_scope(kit), "--hook-path", hook_path
    )
    assert done.returncode == 1, done.stdout
    found = lines(done)
    assert found["commands resolve"].startswith("FAIL commands resolve:")
    assert "'ahp-backend' is not on the PATH the harness gives its hooks" in done.stdout
    assert f"as an absolute path such as {BACKEND}" in done.stdout
    # The hook itself, started with that PATH, cannot start the backend: fail-closed.
    assert found["probe"].startswith("FAIL probe:")
    assert found["hooks present"].startswith("ok ")


def test_the_same_bare_name_on_the_hook_path_passes(kit: Any, env: dict[str, str]) -> None:
    reg = registration(kit, command="ahp-backend")
    install(kit, env, "claude-code", reg, *project_scope(kit))
    hook_path = f"{BIN}:/usr/bin:/bin"
    done = adapter(
        env, kit.tmp, "doctor", "claude-code", *project_scope(kit), "--hook-path", hook_path
    )
    assert done.returncode == 0, done.stdout
    assert str(BACKEND) in lines(done)["commands resolve"]


def test_a_backend_that_crashes_at_start_fails_the_probe(kit: Any, env: dict[str, str]) -> None:
    reg = registration(kit, command=sys.executable, args=["-c", "import sys; sys.exit(3)"])
    install(kit, env, "claude-code", reg, *project_scope(kit))
    done = adapter(env, kit.tmp, "doctor", "claude-code", *project_scope(kit))
    assert done.returncode == 1, done.stdout
    found = lines(done)
    assert found["commands resolve"].startswith("ok ")  # the command exists: it just dies
    assert found["probe"].startswith("FAIL probe: a fail-closed backend failure")
    # The failed backend and its class are named, in the reason the harness would show.
    assert "backend com.example.ahp.denylist unavailable (abnormal_exit)." in found["probe"]
    # The adapter's stderr is shown, and the daemon's log saying what failed.
    assert "  | ahp-adapter: backend " in done.stdout
    assert "abnormal_exit" in done.stdout


def test_a_missing_registration_fails(kit: Any, env: dict[str, str]) -> None:
    reg = registration(kit)
    install(kit, env, "claude-code", reg, *project_scope(kit))
    reg.unlink()
    done = adapter(env, kit.tmp, "doctor", "claude-code", *project_scope(kit))
    assert done.returncode == 1
    found = lines(done)
    assert found["registration"] == (f"FAIL registration: {reg} (named by the hook) does not exist")
    assert found["probe"].startswith("FAIL probe:")  # the hook denies everything meanwhile


def test_json_output(kit: Any, env: dict[str, str]) -> None:
    reg = registration(kit)
    install(kit, env, "claude-code", reg, *project_scope(kit))
    done = adapter(env, kit.tmp, "doctor", "claude-code", *project_scope(kit), "--json")
    assert done.returncode == 0, done.stdout
    doc = json.loads(done.stdout)
    assert doc["ok"] is True and doc["harness"] == "claude-code"
    assert [c["check"] for c in doc["checks"]][-1] == "probe"
    reg.unlink()
    done = adapter(env, kit.tmp, "doctor", "claude", *project_scope(kit), "--json")
    assert done.returncode == 1
    doc = json.loads(done.stdout)
    failed = [c for c in doc["checks"] if not c["ok"]]
    assert failed[0]["check"] == "registration" and failed[0]["fix"]


@pytest.mark.parametrize(
    "args",
    [
        ["doctor", "no-such-harness"],
        ["doctor", "kimi", "--project", "."],
        ["doctor", "claude-code", "--project", "does-not-exist"],
        ["doctor"],
    ],
)
def test_usage_errors_exit_2(kit: Any, env: dict[str, str], args: list[str]) -> None:
    done = adapter(env, kit.tmp, *args)
    assert done.returncode == 2, done.stdout + done.stderr


# --- trust --------------------------------------------------------------------------------


def test_copilot_project_not_trusted_fails(kit: Any, env: dict[str, str]) -> None:
    reg = registration(kit)
    install(kit, env, "copilot", reg, *project_scope(kit), "--trust")
    done = adapter(env, kit.tmp, "doctor", "copilot", *project_scope(kit))
    assert done.returncode == 0, done.stdout
    assert f"ok hooks trusted: Copilot trusts {kit.tmp / 'project'}" in done.stdout
    config = Path(env["COPILOT_HOME"]) / "config.json"
    config.write_text(json.dumps({"trustedFolders": []}))
    done = adapter(env, kit.tmp, "doctor", "copilot", *project_scope(kit))
    assert done.returncode == 1
    assert lines(done)["hooks trusted"].startswith("FAIL hooks trusted: Copilot skips")


@pytest.mark.live
def test_codex_untrusted_then_trusted(kit: Any, env: dict[str, str], codex: Path) -> None:
    reg = registration(kit)
    install(kit, env, "codex", reg, "--no-trust")
    doctor_args = ["doctor", "codex", "--harness-bin", str(codex)]
    done = adapter(env, kit.tmp, *doctor_args)
    assert done.returncode == 1, done.stdout
    found = lines(done)
    assert found["hooks trusted"].startswith("FAIL hooks trusted: Codex skips these hooks")
    assert ":pre_tool_use:0:0 (untrusted)" in found["hooks trusted"]
    assert found["probe"].startswith("ok ")  # the hook works; Codex would not run it
    install(kit, env, "codex", reg, "--harness-bin", str(codex))
    done = adapter(env, kit.tmp, *doctor_args)
    assert done.returncode == 0, done.stdout
    assert "ok hooks trusted: Codex lists 3 entries of ours, all trusted" in done.stdout


@pytest.mark.live
def test_codex_hook_status_of_an_untrusted_project_is_empty(
    kit: Any, env: dict[str, str], monkeypatch: pytest.MonkeyPatch, codex: Path
) -> None:
    from ahp_adapters import trust

    reg = registration(kit)
    install(kit, env, "codex", reg, *project_scope(kit), "--no-trust")
    project = kit.tmp / "project"
    for name in ("HOME", "CODEX_HOME", "COPILOT_HOME"):
        monkeypatch.setenv(name, env[name])
    hooks_file = project / ".codex" / "hooks.json"
    assert trust.codex_hook_status(hooks_file, project, str(codex)) == {}
    done = adapter(
        env, kit.tmp, "doctor", "codex", *project_scope(kit), "--harness-bin", str(codex)
    )
    assert done.returncode == 1
    assert "it reads a project's .codex/ only when the project is trusted" in done.stdout

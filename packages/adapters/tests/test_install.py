"""``ahp-adapter install|uninstall``: merge our hook entries, keep everyone else's.

Run as a process (``python -m ahp_adapters install ...``) against config files
that already hold other hooks and settings: ours are added once (re-installing
replaces them), the rest is untouched, ``uninstall`` gives back exactly the
original document, ``--print`` writes nothing, an invalid file is refused. The
installed command is then run through a shell with a real payload: the wiring
works end to end.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

FIXTURES = Path(__file__).parent / "fixtures"
PRE = {
    "claude-code": "PreToolUse",
    "codex": "PreToolUse",
    "gemini": "BeforeTool",
    "cursor": "preToolUse",
}
CONFIG = {
    "claude-code": ".claude/settings.json",
    "codex": ".codex/hooks.json",
    "gemini": ".gemini/settings.json",
    "cursor": ".cursor/hooks.json",
}
EXISTING: dict[str, dict[str, Any]] = {
    "claude-code": {
        "model": "opus",
        "permissions": {"allow": ["Bash(git status)"]},
        "hooks": {
            "PreToolUse": [
                {"matcher": "Bash", "hooks": [{"type": "command", "command": "./audit.sh"}]}
            ],
            "Stop": [{"hooks": [{"type": "command", "command": "notify-send done"}]}],
        },
    },
    "codex": {
        "description": "team hooks",
        "hooks": {
            "PreToolUse": [
                {
                    "matcher": "^Bash$",
                    "hooks": [{"type": "command", "command": "guard", "timeout": 5}],
                }
            ]
        },
    },
    "gemini": {
        "theme": "GitHub",
        "hooks": {
            "BeforeTool": [
                {
                    "matcher": "write_file",
                    "hooks": [
                        {"type": "command", "command": "lint", "name": "lint", "timeout": 1000}
                    ],
                }
            ]
        },
    },
    "cursor": {
        "version": 1,
        "hooks": {"afterFileEdit": [{"command": "./format.sh"}], "preToolUse": [{"command": "x"}]},
    },
}


def run(kit: Any, *args: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [sys.executable, "-m", "ahp_adapters", *args],
        capture_output=True,
        env=kit.env,
        cwd=kit.tmp,
        timeout=60,
        text=True,
    )
    return done


def commands(dialect: str, doc: dict[str, Any]) -> dict[str, list[str]]:
    """Event -> our commands in ``doc``."""
    out: dict[str, list[str]] = {}
    for event, entries in doc.get("hooks", {}).items():
        for entry in entries:
            handlers = [entry] if dialect == "cursor" else entry.get("hooks", [])
            for handler in handlers:
                if " hook " in handler["command"]:
                    out.setdefault(event, []).append(handler["command"])
    return out


@pytest.mark.parametrize("dialect", sorted(CONFIG))
def test_install_merges_and_uninstall_restores(kit: Any, dialect: str) -> None:
    project = kit.tmp / "project"
    path = project / CONFIG[dialect]
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(EXISTING[dialect], indent=4))
    registration = kit.registration(kit.denylist_stdio("persistent"))

    # The merge alone: the harnesses' trust steps are test_install_trust.py's.
    trust = {"codex": ["--no-trust"], "copilot": ["--trust"]}.get(dialect, [])
    for _ in range(2):  # installing twice replaces ours, never duplicates
        done = run(
            kit,
            *("install", dialect, "--registration", str(registration), "--project", str(project)),
            *trust,
        )
        assert done.returncode == 0, done.stderr
    doc = json.loads(path.read_text())
    ours = commands(dialect, doc)
    assert set(ours) >= {PRE[dialect]}
    assert all(len(v) == 1 for v in ours.values())
    argv = shlex.split(ours[PRE[dialect]][0])
    assert argv[argv.index("hook") + 1] == dialect
    assert argv[argv.index("--registration") + 1] == str(registration.resolve())
    assert argv[argv.index("--event") + 1] == PRE[dialect]
    # Everything that was there is still there, first.
    for key, value in EXISTING[dialect].items():
        if key != "hooks":
            assert doc[key] == value
    for event, entries in EXISTING[dialect]["hooks"].items():
        assert doc["hooks"][event][: len(entries)] == entries

    done = run(kit, "uninstall", dialect, "--project", str(project))
    assert done.returncode == 0, done.stderr
    assert json.loads(path.read_text()) == EXISTING[dialect]


def test_native_timeouts_and_fields(kit: Any) -> None:
    registration = kit.registration(kit.denylist_stdio("persistent"))
    docs = {}
    for dialect in CONFIG:
        done = run(
            kit,
            "install",
            dialect,
            "--registration",
            str(registration),
            "--print",
            "--budget",
            "20",
        )
        assert done.returncode == 0, done.stderr
        docs[dialect] = json.loads(done.stdout)
    claude = docs["claude-code"]["hooks"]
    assert claude["PreToolUse"][0]["matcher"] == "*"
    assert claude["PreToolUse"][0]["hooks"][0]["timeout"] == 45  # seconds: 2 x budget + 5
    assert "matcher" not in claude["SessionStart"][0]
    assert set(claude) == {"PreToolUse", "PostToolUse", "SessionStart", "SessionEnd"}
    assert set(docs["codex"]["hooks"]) == {"PreToolUse", "PostToolUse", "SessionStart"}
    gemini = docs["gemini"]["hooks"]["BeforeTool"][0]["hooks"][0]
    assert gemini["timeout"] == 45000 and gemini["name"] == "ahp-adapter-BeforeTool"  # ms
    cursor = docs["cursor"]
    assert cursor["version"] == 1
    assert cursor["hooks"]["preToolUse"][0]["failClosed"] is True  # the registration fails closed
    assert "failClosed" not in cursor["hooks"]["postToolUse"][0]
    assert "--budget 20" in cursor["hooks"]["preToolUse"][0]["command"]
    assert not (kit.tmp / "home" / ".claude").exists()  # --print wrote nothing


def test_cursor_fail_open_and_split_surface(kit: Any) -> None:
    registration = kit.registration(kit.denylist_stdio("persistent", policy="fail-open"))
    done = run(kit, "install", "cursor", "--registration", str(registration), "--surface", "split")
    assert done.returncode == 0, done.stderr
    doc = json.loads((kit.tmp / "home" / ".cursor" / "hooks.json").read_text())
    hooks = doc["hooks"]
    assert {"beforeShellExecution", "beforeMCPExecution", "preToolUse"} <= set(hooks)
    assert hooks["preToolUse"][0]["command"].endswith("--skip-shell-mcp")
    assert "--skip-shell-mcp" not in hooks["beforeShellExecution"][0]["command"]
    assert all("failClosed" not in e for entries in hooks.values() for e in entries)


def test_codex_notes(kit: Any) -> None:
    registration = kit.registration(kit.denylist_stdio("persistent"))
    config = kit.tmp / "hooks.json"
    config.write_text(json.dumps({"$schema": "x", "hooks": {}}))
    done = run(
        kit,
        *("install", "codex", "--registration", str(registration), "--config", str(config)),
        "--no-trust",
    )
    assert done.returncode == 0
    assert "NOT ENFORCED" in done.stderr and "/hooks" in done.stderr and "$schema" in done.stderr


def test_invalid_config_is_left_untouched(kit: Any) -> None:
    registration = kit.registration(kit.denylist_stdio("persistent"))
    config = kit.tmp / "settings.json"
    config.write_text("{ this is not json")
    for args in (
        ("install", "claude-code", "--registration", str(registration)),
        ("uninstall", "claude-code"),
    ):
        done = run(kit, *args, "--config", str(config))
        assert done.returncode == 2 and "not valid JSON" in done.stderr
        assert config.read_text() == "{ this is not json"


def test_invalid_registration_is_refused(kit: Any) -> None:
    bad = kit.tmp / "bad.json"
    bad.write_text(json.dumps({"protocolVersion": "draft", "hooks": []}))
    done = run(kit, "install", "claude-code", "--registration", str(bad), "--print")
    assert done.returncode == 2 and "registration" in done.stderr
    intercepts_other = kit.registration(
        kit.recorder(subscriptions=[{**kit.intercept(), "events": ["session.start"]}])
    )
    done = run(kit, "install", "claude-code", "--registration", str(intercepts_other), "--print")
    assert done.returncode == 2 and "does not intercept" in done.stderr


def test_budget_warning(kit: Any) -> None:
    slow = kit.registration(kit.recorder(effects=[], timeout_ms=30000))
    done = run(kit, "install", "gemini", "--registration", str(slow), "--print")
    assert done.returncode == 0 and "budget" in done.stderr


@pytest.mark.parametrize("dialect", sorted(CONFIG))
def test_the_installed_command_works(kit: Any, dialect: str) -> None:
    """Run what the harness would run (through a shell, as every harness here does)."""
    registration = kit.registration(kit.denylist_stdio("persistent"))
    done = run(
        kit,
        "install",
        dialect,
        "--registration",
        str(registration),
        "--print",
        "--command",
        f"{sys.executable} -m ahp_adapters",
    )
    command = commands(dialect, json.loads(done.stdout))[PRE[dialect]][0]
    case = "before_tool.shell" if dialect == "gemini" else "pre_tool_use.shell"
    payload = json.loads((FIXTURES / dialect / f"{case}.json").read_text())["payload"]
    payload["tool_input"]["command"] = "rm -rf /"
    hooked = subprocess.run(
        ["/bin/sh", "-c", command + " --daemon off"],
        input=json.dumps(payload),
        capture_output=True,
        env=kit.env,
        cwd=kit.tmp,
        timeout=60,
        text=True,
    )
    assert hooked.returncode == 0, hooked.stderr
    assert "Recursive deletes are not allowed here." in hooked.stdout
    assert "deny" in hooked.stdout


def test_uninstall_without_our_hooks(kit: Any) -> None:
    config = kit.tmp / "settings.json"
    original = json.dumps(EXISTING["claude-code"])
    config.write_text(original)
    done = run(kit, "uninstall", "claude-code", "--config", str(config))
    assert done.returncode == 0 and "no ahp-adapter hooks" in done.stderr
    assert config.read_text() == original


KIMI_CONFIG = """default_model = "kimi-k2"

[[hooks]]
event = "Stop"
command = "notify-send done"
"""


def test_kimi_toml_block(kit: Any) -> None:
    import tomllib

    config = kit.tmp / "config.toml"
    config.write_text(KIMI_CONFIG)
    registration = kit.registration(kit.denylist_stdio("persistent"))
    for _ in range(2):
        done = run(
            kit, "install", "kimi", "--registration", str(registration), "--config", str(config)
        )
        assert done.returncode == 0, done.stderr
    doc = tomllib.loads(config.read_text())
    assert doc["default_model"] == "kimi-k2"
    events = [h["event"] for h in doc["hooks"]]
    assert events == ["Stop", "PreToolUse", "PostToolUse", "SessionStart", "SessionEnd"]
    ours = doc["hooks"][1]
    assert ours["matcher"] == "" and ours["timeout"] == 30
    argv = shlex.split(ours["command"])
    assert argv[argv.index("hook") + 1 :][:1] == ["kimi"]
    done = run(kit, "uninstall", "kimi", "--config", str(config))
    assert done.returncode == 0 and config.read_text() == KIMI_CONFIG
    refused = run(kit, "install", "kimi", "--registration", str(registration), "--project", ".")
    assert refused.returncode == 2 and "no project hooks" in refused.stderr
    config.write_text("this = [is not toml")
    broken = run(
        kit, "install", "kimi", "--registration", str(registration), "--config", str(config)
    )
    assert broken.returncode == 2 and config.read_text() == "this = [is not toml"


def test_the_installed_kimi_command_works(kit: Any) -> None:
    import tomllib

    registration = kit.registration(kit.denylist_stdio("persistent"))
    done = run(
        kit,
        "install",
        "kimi",
        "--registration",
        str(registration),
        "--print",
        "--command",
        f"{sys.executable} -m ahp_adapters",
    )
    command = tomllib.loads(done.stdout)["hooks"][0]["command"]
    payload = json.loads((FIXTURES / "kimi" / "pre_tool_use.shell.json").read_text())["payload"]
    payload["tool_input"]["command"] = "rm -rf /"
    hooked = subprocess.run(
        ["/bin/sh", "-c", command + " --daemon off"],
        input=json.dumps(payload),
        capture_output=True,
        env=kit.env,
        cwd=kit.tmp,
        timeout=60,
        text=True,
    )
    assert json.loads(hooked.stdout) == {
        "hookSpecificOutput": {
            "permissionDecision": "deny",
            "permissionDecisionReason": "Recursive deletes are not allowed here.",
        }
    }

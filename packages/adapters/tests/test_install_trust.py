"""``install`` leaves hooks the harness enforces, or refuses and says what to do.

Codex skips untrusted hooks and Copilot a project folder it does not trust, both without
a word (found live, ``tests/live``). Real ``ahp-adapter`` processes in tmp homes; the
Codex trust itself is recorded by the real ``codex app-server`` (``live`` marker).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest


def run(kit: Any, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ahp_adapters", *args],
        capture_output=True,
        env=env,
        cwd=kit.tmp,
        timeout=120,
        text=True,
    )


@pytest.fixture
def env(homes_env: dict[str, str]) -> dict[str, str]:
    """The environment doctor and install run with: every home in the tmp folder."""
    return homes_env


def test_copilot_project_install_refuses_an_untrusted_folder(kit: Any, env: dict[str, str]) -> None:
    reg = kit.registration(kit.denylist_stdio("persistent"))
    project = kit.tmp / "project"
    done = run(
        kit, env, "install", "copilot", "--registration", str(reg), "--project", str(project)
    )
    assert done.returncode == 2
    assert "not in trustedFolders" in done.stderr and "--trust" in done.stderr
    assert "nothing written" in done.stderr
    assert not (project / ".github").exists()


def test_copilot_trust_adds_the_folder_once_and_keeps_the_config(
    kit: Any, env: dict[str, str]
) -> None:
    config = Path(env["COPILOT_HOME"]) / "config.json"
    config.write_text('// This file is managed automatically.\n{\n  "firstLaunchAt": "x"\n}\n')
    reg = kit.registration(kit.denylist_stdio("persistent"))
    project = kit.tmp / "project"
    for _ in range(2):
        done = run(
            kit,
            env,
            *("install", "copilot", "--registration", str(reg), "--project", str(project)),
            "--trust",
        )
        assert done.returncode == 0, done.stderr
    text = config.read_text()
    assert text.startswith("// This file is managed automatically.\n")
    doc = json.loads(text.split("\n", 1)[1])
    assert doc == {"firstLaunchAt": "x", "trustedFolders": [str(project.resolve())]}
    # Trusted now: a plain install goes through.
    done = run(
        kit, env, "install", "copilot", "--registration", str(reg), "--project", str(project)
    )
    assert done.returncode == 0, done.stderr


def test_copilot_user_scope_needs_no_trust(kit: Any, env: dict[str, str]) -> None:
    reg = kit.registration(kit.denylist_stdio("persistent"))
    done = run(kit, env, "install", "copilot", "--registration", str(reg))
    assert done.returncode == 0, done.stderr
    assert (Path(env["COPILOT_HOME"]) / "hooks" / "ahp-adapter.json").exists()
    assert not (Path(env["COPILOT_HOME"]) / "config.json").exists()


def test_codex_without_a_codex_binary_refuses(kit: Any, env: dict[str, str]) -> None:
    reg = kit.registration(kit.denylist_stdio("persistent"))
    bare = {**env, "PATH": os.path.dirname(sys.executable) + os.pathsep + "/usr/bin:/bin"}
    done = run(kit, bare, "install", "codex", "--registration", str(reg))
    assert done.returncode == 2
    assert "--harness-bin" in done.stderr and "--no-trust" in done.stderr
    assert not (Path(env["CODEX_HOME"]) / "hooks.json").exists()


def _trust_state(codex_home: Path) -> dict[str, Any]:
    import tomllib

    config = codex_home / "config.toml"
    doc = tomllib.loads(config.read_text()) if config.exists() else {}
    state: dict[str, Any] = doc.get("hooks", {}).get("state", {})
    return state


@pytest.mark.live
def test_codex_install_trusts_exactly_our_entries(
    kit: Any, env: dict[str, str], npm_bin: Path
) -> None:
    codex_home = Path(env["CODEX_HOME"])
    (codex_home / "hooks.json").write_text(
        json.dumps(
            {"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "echo theirs"}]}]}}
        )
    )
    reg = kit.registration(kit.denylist_stdio("persistent"))
    codex = str(npm_bin / "codex")
    done = run(kit, env, "install", "codex", "--registration", str(reg), "--harness-bin", codex)
    assert done.returncode == 0, done.stderr
    assert "trusted 3 hook entries" in done.stderr
    state = _trust_state(codex_home)
    assert sorted(k.split(":", 1)[1] for k in state) == [
        "post_tool_use:0:0",
        "pre_tool_use:0:0",
        "session_start:0:0",
    ]  # theirs (stop) is left for the user to review
    assert all(v["trusted_hash"].startswith("sha256:") for v in state.values())


@pytest.mark.live
def test_codex_untrusted_project_is_refused_unless_trust(
    kit: Any, env: dict[str, str], npm_bin: Path
) -> None:
    reg = kit.registration(kit.denylist_stdio("persistent"))
    project = kit.tmp / "project"
    codex = str(npm_bin / "codex")
    args = ("install", "codex", "--registration", str(reg), "--project", str(project))
    done = run(kit, env, *args, "--harness-bin", codex)
    assert done.returncode == 1
    assert "NOT ENFORCED" in done.stderr and "--trust" in done.stderr
    done = run(kit, env, *args, "--harness-bin", codex, "--trust")
    assert done.returncode == 0, done.stderr
    config = (Path(env["CODEX_HOME"]) / "config.toml").read_text()
    assert f'[projects."{project.resolve()}"]' in config
    assert len(_trust_state(Path(env["CODEX_HOME"]))) == 3


def test_codex_uninstall_without_a_codex_binary_says_the_trust_stays(
    kit: Any, env: dict[str, str]
) -> None:
    reg = kit.registration(kit.denylist_stdio("persistent"))
    bare = {**env, "PATH": os.path.dirname(sys.executable) + os.pathsep + "/usr/bin:/bin"}
    done = run(kit, bare, "install", "codex", "--registration", str(reg), "--no-trust")
    assert done.returncode == 0, done.stderr
    done = run(kit, bare, "uninstall", "codex")
    assert done.returncode == 0, done.stderr
    assert "removed 3 hook entries" in done.stderr
    assert "[hooks.state]" in done.stderr and "--harness-bin" in done.stderr


@pytest.mark.live
def test_codex_uninstall_removes_the_trust_of_our_entries_only(
    kit: Any, env: dict[str, str], npm_bin: Path
) -> None:
    codex_home = Path(env["CODEX_HOME"])
    theirs = {"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "echo theirs"}]}]}}
    (codex_home / "hooks.json").write_text(json.dumps(theirs))
    reg = kit.registration(kit.denylist_stdio("persistent"))
    codex = str(npm_bin / "codex")
    done = run(kit, env, "install", "codex", "--registration", str(reg), "--harness-bin", codex)
    assert done.returncode == 0, done.stderr
    config = codex_home / "config.toml"
    config.write_text(
        config.read_text() + '\n[hooks.state."theirs:stop:0:0"]\ntrusted_hash = "x"\n'
    )
    assert len(_trust_state(codex_home)) == 4
    done = run(kit, env, "uninstall", "codex", "--harness-bin", codex)
    assert done.returncode == 0, done.stderr
    assert "removed Codex's trust of 3 hook entries" in done.stderr
    assert list(_trust_state(codex_home)) == ["theirs:stop:0:0"]
    assert json.loads((codex_home / "hooks.json").read_text()) == theirs

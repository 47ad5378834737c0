"""``hooks.py`` lifts out whole: copied ALONE into a project with only ``ahp-protocol``.

The module fixture builds the ``ahp-protocol`` wheel (``uv build``), makes a fresh venv
outside the repository with the same Python (``uv venv``) and installs only that wheel
in it (``uv pip install``: its dependencies from the uv cache or the registry), then
copies ``ahp_harness/hooks.py`` by itself into a temporary project folder. The toy
harness below (a tool table of one tool that writes a file, and a host policy that
refuses one path) is written into that folder and run with the venv's interpreter; the
policy backend is the deny-list (``python -m ahp_backends.cli denylist``, the
workspace's interpreter: only the *harness* environment is restricted).

What it shows, from the script's JSON output and the disk:

- the environment really is bare: ``ahp_harness`` cannot be imported there, ``hooks``
  comes from the copied file;
- **deny stops**: the deny-list refuses a call, the tool never ran (no file);
- **no effect keeps the host's refusal**: the backend says nothing about a call the host
  policy refuses; it is refused by the host, and never ran;
- **fail-closed refuses**: a required backend whose command exits at once gives a
  synthetic denial, and the tool never ran;
- an allowed call runs (the file is there).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

HOOKS_PY = Path(__file__).resolve().parents[1] / "src" / "ahp_harness" / "hooks.py"
REPO = Path(__file__).resolve().parents[3]

TOY_HARNESS = """
import asyncio, json, sys
from dataclasses import dataclass
from pathlib import Path

import hooks  # the copied file, nothing else of ahp_harness
from ahp_protocol.client import Hooks

WORK = Path(sys.argv[2])


@dataclass
class WriteTool:  # hooks.Tool
    name: str = "write"
    kind: str = "file_write"

    def parse(self, raw):
        if not isinstance(raw, dict) or not isinstance(raw.get("path"), str):
            raise hooks.ToolInputError("path: required")
        return raw["path"]

    async def run(self, parsed):
        (WORK / parsed).write_text("ran\\n")
        return hooks.ToolOutcome("ok", f"wrote {parsed}")


class HostPolicy:  # hooks.HostPolicy: the host refuses one path, allows the rest
    def decide(self, tool, parsed):
        if parsed.startswith("host-no"):
            return hooks.CallDecision("deny", "rule", "the host refuses host-no files")
        return hooks.CallDecision("allow", "mode", "allowed")


async def never_asked(tool, tool_input, reason):
    raise AssertionError("no prompt expected")


async def main():
    out = {"harness_importable": True}
    try:
        import ahp_harness  # noqa: F401
    except ModuleNotFoundError:
        out["harness_importable"] = False
    out["hooks_file"] = hooks.__file__
    registration = json.loads(Path(sys.argv[1]).read_text())
    caps = {"tool.before": {"effects": ["deny"]}}
    async with Hooks(registration, harness={"name": "toy", "version": "0"},
                     capabilities=caps) as ahp:
        gate = hooks.Gate(ahp.session(cwd=str(WORK)), {"write": WriteTool()},
                          HostPolicy(), never_asked)
        for path in sys.argv[3:]:
            record = await gate.call("write", {"path": path})
            out[path] = record.transcript()
    print(json.dumps(out))


asyncio.run(main())
"""

DENY_RULES = """
[[rules]]
reason = "blocked files are frozen"
code = "com.example.toy.blocked"
kind = "file_write"
[rules.input]
path = "^blocked"
"""


def _run(argv: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=240, **kwargs)
    assert done.returncode == 0, f"{argv[:3]} failed:\n{done.stdout}\n{done.stderr}"
    return done


@pytest.fixture(scope="module")
def toy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A project folder holding only ``hooks.py`` and the toy harness, and its bare venv."""
    uv = shutil.which("uv")
    assert uv, "uv is needed to build the ahp-protocol wheel (it is on PATH in CI)"
    root = tmp_path_factory.mktemp("liftable")
    wheels = root / "wheels"
    _run([uv, "build", "--package", "ahp-protocol", "--wheel", "--out-dir", str(wheels)], cwd=REPO)
    (wheel,) = wheels.glob("ahp_protocol-*.whl")
    _run([uv, "venv", "--python", sys.executable, str(root / "venv")], cwd=root)
    _run([uv, "pip", "install", "--python", str(root / "venv" / "bin" / "python"), str(wheel)])
    project = root / "project"
    project.mkdir()
    shutil.copy(HOOKS_PY, project / "hooks.py")
    (project / "toy.py").write_text(TOY_HARNESS, encoding="utf-8")
    (root / "rules.toml").write_text(DENY_RULES, encoding="utf-8")
    return root


def play(root: Path, name: str, hooks: list[dict[str, Any]], *paths: str) -> dict[str, Any]:
    """Run the toy harness in the bare venv over ``hooks``; its JSON output."""
    work = root / name
    work.mkdir()
    registration = root / f"{name}.json"
    registration.write_text(json.dumps({"protocolVersion": "draft", "hooks": hooks}))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
    done = _run(
        [str(root / "venv" / "bin" / "python"), "toy.py", str(registration), str(work), *paths],
        cwd=root / "project",
        env=env,
    )
    result: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    assert result["harness_importable"] is False, "the toy's environment must not hold ahp_harness"
    assert Path(result["hooks_file"]) == root / "project" / "hooks.py"
    return result


def backend(hook_id: str, command: str, *args: str) -> dict[str, Any]:
    return {
        "id": hook_id,
        "transport": {
            "type": "stdio",
            "command": command,
            "args": list(args),
            "lifecycle": "persistent",
        },
        "subscriptions": [
            {
                "mode": "intercept",
                "events": ["tool.before"],
                "timeoutMs": 20000,  # covers the backend's start-up on a loaded machine
                "failurePolicy": "fail-closed",
                "content": {"default": "body"},
            }
        ],
    }


def test_deny_stops_no_effect_keeps_the_host_refusal_and_an_allowed_call_runs(toy: Path) -> None:
    rules = str(toy / "rules.toml")
    denylist = backend("com.example.denylist", sys.executable, "-m", "ahp_backends.cli")
    denylist["transport"]["args"] += ["denylist", "--rules", rules]
    out = play(toy, "denylist", [denylist], "blocked.txt", "host-no.txt", "fine.txt")
    work = toy / "denylist"

    deny = out["blocked.txt"]
    assert (deny["outcome"], deny["executed"], deny["host_stage"]) == ("denied", False, "ahp")
    assert (deny["denied_by"], deny["synthetic_denial"]) == ("com.example.denylist", False)
    assert deny["reason"] == "blocked files are frozen"
    assert not (work / "blocked.txt").exists()

    host = out["host-no.txt"]  # the backend said nothing: the host's own refusal stands
    assert (host["hook_permission"], host["denied_by"]) == ("none", None)
    assert (host["outcome"], host["executed"], host["host_stage"]) == ("denied", False, "rule")
    assert host["reason"] == "the host refuses host-no files"
    assert not (work / "host-no.txt").exists()

    fine = out["fine.txt"]
    assert (fine["outcome"], fine["executed"], fine["host_decision"]) == ("ok", True, "allow")
    assert (work / "fine.txt").read_text() == "ran\n"


def test_fail_closed_refuses_when_the_backend_exits_at_once(toy: Path) -> None:
    dead = backend("com.example.dead", sys.executable, "-c", "raise SystemExit(0)")
    out = play(toy, "dead", [dead], "fine.txt")
    record = out["fine.txt"]
    assert (record["outcome"], record["executed"], record["host_stage"]) == ("denied", False, "ahp")
    assert (record["denied_by"], record["synthetic_denial"]) == ("com.example.dead", True)
    assert not (toy / "dead" / "fine.txt").exists()

"""``ahp-harness demo`` where people install the kit: built wheels, a fresh venv, no repo.

Builds the ``ahp-protocol``, ``ahp-backends`` and ``ahp-harness`` wheels from this
checkout (``uv build``), installs them with their pinned dependencies (``uv export``
of the lock; from uv's cache when it can, ``--offline``, else from the index) into a
new venv outside the repository, and runs that venv's ``ahp-harness demo --dir DIR``
from an empty folder outside the repository, with a ``PATH`` that holds nothing of the
repository and no ``PYTHONPATH``. The demo must find its files in the installed package
and the backends next to the venv's Python, tell the same story as in the repository
(the deny, the approval, the managed refusal), exit 0 and leave its folder empty.
Bounded: a few seconds of building and installing, one demo run.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
PACKAGES = ("ahp-protocol", "ahp-backends", "ahp-harness")
STEP_TIMEOUT_S = 120


def _uv() -> str:
    found = shutil.which("uv")
    if found:
        return found
    try:
        from uv import find_uv_bin  # type: ignore[import-not-found, unused-ignore]
    except ImportError:
        pytest.fail("this test needs uv on PATH (CI installs it: see .ci/run)")
    return str(find_uv_bin())


def _run(argv: list[str], *, cwd: Path, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(
        argv,
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=STEP_TIMEOUT_S,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    assert done.returncode == 0, f"{argv[:4]} failed:\n{done.stdout}\n{done.stderr}"
    return done.stdout


@pytest.mark.timeout(300)
def test_the_demo_runs_from_installed_wheels_outside_the_repository(tmp_path: Path) -> None:
    assert not tmp_path.resolve().is_relative_to(REPO)
    uv = _uv()
    clean = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    dist = tmp_path / "dist"
    for package in PACKAGES:
        _run([uv, "build", "--package", package, "--wheel", "--out-dir", str(dist), "-q"], cwd=REPO)
    wheels = sorted(str(w) for w in dist.glob("*.whl"))
    assert len(wheels) == len(PACKAGES), wheels
    pins = tmp_path / "requirements.txt"
    export = [uv, "export", "--frozen", "--no-dev", "--no-hashes", "--no-emit-workspace"]
    for package in PACKAGES:
        export += ["--package", package]
    _run([*export, "-q", "-o", str(pins)], cwd=REPO, env=clean)
    venv = tmp_path / "venv"
    _run([uv, "venv", str(venv), "--python", sys.executable, "-q"], cwd=tmp_path, env=clean)
    python = venv / "bin" / "python"
    install = [uv, "pip", "install", "--python", str(python), "-r", str(pins), *wheels]
    offline = subprocess.run(
        [*install, "--offline"],
        cwd=tmp_path,
        env=clean,
        capture_output=True,
        text=True,
        timeout=STEP_TIMEOUT_S,
        check=False,
    )
    if offline.returncode != 0:  # uv's cache lacks something: the registry has it
        _run(install, cwd=tmp_path, env=clean)

    cwd = tmp_path / "elsewhere"
    cwd.mkdir()
    work = tmp_path / "demo"
    env = {
        "PATH": os.pathsep.join(
            p for p in ("/usr/local/bin", "/usr/bin", "/bin") if Path(p).is_dir()
        ),
        "HOME": str(tmp_path),
        "TMPDIR": str(tmp_path),
        "NO_COLOR": "1",
        "COLUMNS": "220",
        "LANG": "C.UTF-8",
    }
    out = _run([str(venv / "bin" / "ahp-harness"), "demo", "--dir", str(work)], cwd=cwd, env=env)

    lines = out.splitlines()
    (rm,) = [x for x in lines if x.startswith("│") and " shell rm -rf build " in x]
    assert [c.strip() for c in rm.strip("│").split("│")][1] == "deny"
    assert "the deny-list refused it" in out
    assert "so the approval backend refused it" in out  # the approval
    assert "a grant covers it: the approval backend answered allow" in out
    assert "the host's managed rule refused it anyway: no effect is not permission" in out
    assert "build/ is still there" in out
    assert f"{venv / 'bin' / 'ahp-backend'} audit show --db {work / 'audit.db'}" in out
    assert (work / "files" / "session.json").is_file()
    assert list(cwd.iterdir()) == []

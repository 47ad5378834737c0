"""The live tier's harness binaries (fixtures ``npm_bin`` and ``kimi_bin``, shared with
the root ``conftest.py``): pinned, installed once per machine, outside the repo.

``package.json`` + ``package-lock.json`` pin the npm harnesses; ``npm ci`` installs them
into ``<cache>/npm-<lock digest>`` (``<cache>`` is ``$AHP_LIVE_CACHE``, else
``${XDG_CACHE_HOME:-~/.cache}/ahp-live``), so a second run on the same machine reuses
them and a changed lock gets a folder of its own. Kimi CLI (PyPI) goes into a venv
beside it from ``kimi-requirements.txt`` (hashes pinned). Nothing here reaches anything
but the package registries; the harnesses themselves talk only to the fake model on
127.0.0.1. Where ``node``/``npm`` (or a Python for Kimi) are missing, the tests that need
them are skipped with that reason.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

HERE = Path(__file__).parent
NPM_FILES = ("package.json", "package-lock.json")
KIMI_LOCK = HERE / "kimi-requirements.txt"
KIMI_PYTHON = (3, 13)
"""Kimi CLI 1.51 needs Python >= 3.12; on 3.12.1 it crashes at start (a CPython typing bug
fixed later), so the tier looks for a 3.13."""


def cache_root() -> Path:
    if os.environ.get("AHP_LIVE_CACHE"):
        return Path(os.environ["AHP_LIVE_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "ahp-live"


def _digest(*paths: Path) -> str:
    h = hashlib.sha256()
    for path in paths:
        h.update(path.read_bytes())
    return h.hexdigest()[:12]


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    """One installer at a time (xdist workers share the cache)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield


def _run(argv: list[str], what: str, **kwargs: object) -> None:
    done = subprocess.run(argv, capture_output=True, text=True, check=False, **kwargs)  # type: ignore[call-overload]
    if done.returncode != 0:
        pytest.fail(f"{what} failed (exit {done.returncode}):\n{done.stdout}\n{done.stderr}")


@pytest.fixture(scope="session")
def npm_bin() -> Path:
    """``node_modules/.bin`` with the pinned npm harnesses."""
    npm = shutil.which("npm")
    if not shutil.which("node") or not npm:
        pytest.skip("node/npm not found on PATH: the npm harnesses cannot be installed")
    folder = cache_root() / f"npm-{_digest(*(HERE / f for f in NPM_FILES))}"
    done = folder / ".installed"
    with _locked(folder.with_suffix(".lock")):
        if not done.exists():
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir(parents=True)
            for name in NPM_FILES:
                shutil.copy(HERE / name, folder / name)
            _run(
                [npm, "ci", "--no-audit", "--no-fund", "--loglevel=error"],
                "npm ci (tests/live/package-lock.json)",
                cwd=folder,
                timeout=900,
            )
            done.touch()
    return folder / "node_modules" / ".bin"


def _is_wanted(python: str) -> bool:
    """Runs, and is the version Kimi needs (a pyenv shim of a version not selected fails)."""
    try:
        done = subprocess.run(
            [python, "-c", "import sys; print(*sys.version_info[:2])"],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0 and done.stdout.split() == [str(n) for n in KIMI_PYTHON]


def _kimi_python() -> str | None:
    """A Python for Kimi: ``uv python find``, ``python3.13`` on PATH, or pyenv's."""
    major, minor = KIMI_PYTHON
    candidates = []
    found = subprocess.run(
        ["uv", "python", "find", f"{major}.{minor}"], capture_output=True, text=True, check=False
    )
    if found.returncode == 0 and found.stdout.strip():
        candidates.append(found.stdout.strip())
    if shutil.which(f"python{major}.{minor}"):
        candidates.append(str(shutil.which(f"python{major}.{minor}")))
    pyenv_root = os.environ.get("PYENV_ROOT") or str(Path.home() / ".pyenv")
    for version in sorted(Path(pyenv_root, "versions").glob(f"{major}.{minor}.*")):
        candidates.append(str(version / "bin" / f"python{major}.{minor}"))
    return next((c for c in candidates if _is_wanted(c)), None)


@pytest.fixture(scope="session")
def kimi_bin() -> Path:
    """The venv ``bin`` folder with the pinned Kimi CLI."""
    python = _kimi_python()
    if python is None:
        pytest.skip(
            f"no Python {KIMI_PYTHON[0]}.{KIMI_PYTHON[1]} found (PATH, pyenv, uv): "
            "Kimi CLI cannot be installed"
        )
    folder = cache_root() / f"kimi-{_digest(KIMI_LOCK)}"
    done = folder / ".installed"
    with _locked(folder.with_suffix(".lock")):
        if not done.exists():
            shutil.rmtree(folder, ignore_errors=True)
            _run(["uv", "venv", "-q", "--python", python, str(folder)], "uv venv (Kimi CLI)")
            _run(
                ["uv", "pip", "install", "-q", "--require-hashes", "-r", str(KIMI_LOCK)],
                "uv pip install (tests/live/kimi-requirements.txt)",
                env={**os.environ, "VIRTUAL_ENV": str(folder)},
                timeout=900,
            )
            done.touch()
    return folder / "bin"


def pytest_report_header() -> list[str]:
    return [f"ahp live tier: harness cache {cache_root()} (python {sys.version.split()[0]})"]

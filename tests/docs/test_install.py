"""The install-without-an-index command runs as written, offline, into a fresh venv.

The kit's packages are on no package index, so the docs give one block that builds the
wheels from a checkout and installs ``ahp-protocol`` by file. The block (after
``<!-- install-without-an-index -->``) is the same in ``docs/integrating.md``, the root
README and ``packages/protocol/README.md``; this test runs it with bash in a temporary
folder, ``KIT`` set to this checkout (the block's one placeholder), into a venv made for
the test, with uv offline (hatchling and pydantic from the uv cache ``uv sync`` filled),
then imports ``ahp_protocol`` with that venv's Python.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
MARKER = "<!-- install-without-an-index -->\n"
PAGES = (
    REPO / "docs" / "integrating.md",
    REPO / "README.md",
    REPO / "packages" / "protocol" / "README.md",
)
PLACEHOLDER = "KIT=/path/to/ahp-reference-kit"


def block(page: Path) -> str:
    text = page.read_text("utf-8")
    assert MARKER in text, f"{page}: no {MARKER.strip()}"
    found = re.match(r"```sh\n(.*?)^```$", text.split(MARKER, 1)[1], re.M | re.S)
    assert found is not None, f"{page}: no sh block after the marker"
    return found.group(1)


def test_every_page_gives_the_same_command() -> None:
    blocks = {page.name: block(page) for page in PAGES}
    assert len(set(blocks.values())) == 1, blocks
    for page in PAGES:
        text = page.read_text("utf-8")
        assert "pip install ahp-protocol` is all" not in text  # the old, wrong claim


@pytest.mark.timeout(60)  # about 3 s with a warm uv cache
def test_the_documented_command_installs_ahp_protocol_into_a_fresh_venv(tmp_path: Path) -> None:
    uv = shutil.which("uv")
    assert uv is not None, (
        "the documented command needs uv on PATH (README: python3 -m pip install uv)"
    )
    script = block(PAGES[0])
    assert script.count(PLACEHOLDER) == 1
    script = script.replace(PLACEHOLDER, f"KIT={REPO}")
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("UV_", "PYTHON", "VIRTUAL_ENV"))
    }
    venv = tmp_path / "venv"
    subprocess.run([uv, "venv", "-q", str(venv)], check=True, env=env, timeout=30)
    env.update(VIRTUAL_ENV=str(venv), UV_OFFLINE="1", UV_NO_PROGRESS="1")
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    work = tmp_path / "work"
    work.mkdir()
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=50,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    wheels = sorted(p.name.split("-")[0] for p in (work / "wheels").glob("*.whl"))
    assert wheels == [
        "ahp_adapters",
        "ahp_backends",
        "ahp_conformance",
        "ahp_harness",
        "ahp_protocol",
    ]
    imported = subprocess.run(
        [
            str(venv / "bin" / "python"),
            "-c",
            "import ahp_protocol, sys; print(ahp_protocol.__file__)",
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert imported.returncode == 0, imported.stderr
    assert imported.stdout.startswith(str(venv)), imported.stdout  # the wheel, not the checkout

"""The kit's version is written once, in ``ahp_protocol/_version.py``, and everything agrees.

- no other pyproject.toml or package source file writes a version: each pyproject reads
  that file (hatchling's dynamic version) and reinstalls when it changes (uv cache keys);
- the five packages' ``__version__`` and their installed metadata are that version;
- ``import ahp_adapters`` (every native hook process) does not import the protocol
  package for it; asking for the version imports only the protocol's bare init and
  ``_version``;
- the changelog has a section for it.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SOURCE = REPO / "packages" / "protocol" / "src" / "ahp_protocol" / "_version.py"
PACKAGES = sorted(path.parent.name for path in (REPO / "packages").glob("*/pyproject.toml"))
PROJECTS = [REPO, *(REPO / "packages" / name for name in PACKAGES)]
_LITERAL = re.compile(r"""^__version__\s*=\s*["']([^"']+)["']\s*$""", re.M)


def the_version() -> str:
    found = _LITERAL.findall(SOURCE.read_text(encoding="utf-8"))
    assert len(found) == 1, found
    return str(found[0])


def sources() -> list[Path]:
    return sorted(
        path
        for name in PACKAGES
        for path in (REPO / "packages" / name / "src").rglob("*.py")
        if "__pycache__" not in path.parts
    )


@pytest.mark.parametrize("project", PROJECTS, ids=lambda path: path.name)
def test_each_pyproject_reads_the_one_version(project: Path) -> None:
    config = tomllib.loads((project / "pyproject.toml").read_text(encoding="utf-8"))
    assert "version" not in config["project"]
    assert "version" in config["project"]["dynamic"]
    source = (project / config["tool"]["hatch"]["version"]["path"]).resolve()
    assert source == SOURCE
    keys = [(project / key["file"]).resolve() for key in config["tool"]["uv"]["cache-keys"]]
    assert SOURCE in keys  # a changed version reinstalls (and so re-reads) the package


def test_no_source_file_writes_a_version_of_its_own() -> None:
    version = the_version()
    written = []
    for path in sources():
        if path == SOURCE:
            continue
        text = path.read_text(encoding="utf-8")
        if _LITERAL.search(text) or f'"{version}"' in text or f"'{version}'" in text:
            written.append(str(path.relative_to(REPO)))
    assert written == []


def test_the_packages_and_their_metadata_agree() -> None:
    version = the_version()
    for name in PACKAGES:
        module = importlib.import_module(f"ahp_{name}")
        assert module.__version__ == version, name
        # A mismatch here means the environment is stale: uv sync reinstalls it.
        assert importlib.metadata.version(f"ahp-{name}") == version, name


def test_importing_the_adapters_does_not_import_the_protocol_for_the_version() -> None:
    script = (
        "import sys\n"
        "import ahp_adapters\n"
        "before = set(sys.modules)\n"
        "assert not any(m.startswith('ahp_protocol') for m in before), sorted(before)\n"
        "print(ahp_adapters.__version__)\n"
        "print(' '.join(sorted(set(sys.modules) - before)))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=30, check=False
    )
    assert done.returncode == 0, done.stderr
    version, imported = done.stdout.splitlines()
    assert version == the_version()
    assert imported.split() == ["ahp_protocol", "ahp_protocol._version"]


def test_the_changelog_has_a_section_for_the_version() -> None:
    changelog = (REPO / "CHANGELOG.md").read_text(encoding="utf-8")
    assert re.search(rf"^## \[{re.escape(the_version())}\]", changelog, re.M)

"""The README's in-memory testing example runs as written, from the repository root."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _block_with(text: str, needle: str) -> str:
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    (found,) = [b for b in blocks if needle in b]
    return found


def test_the_memory_transport_example_prints_the_named_synthetic_denial() -> None:
    code = _block_with((REPO / "README.md").read_text("utf-8"), "memory_transports(")
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == (
        "Required policy backend com.example.no-force-push unavailable (deadline_exceeded)."
    )

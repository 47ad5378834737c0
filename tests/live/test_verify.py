"""``ahp-adapter verify``: the live scenarios as a user command, exit status included."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest


def verify(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ahp_adapters", "verify", *args],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def test_usage_errors_say_what_to_fix(tmp_path: Path) -> None:
    done = verify("cursor")
    assert done.returncode == 2 and "no live driver for cursor" in done.stderr
    done = verify("codex", "--bin", str(tmp_path / "nope"))
    assert done.returncode == 2 and "not found: pass --bin PATH" in done.stderr
    done = verify("nonesuch")
    assert done.returncode == 2 and "unknown dialect" in done.stderr


@pytest.mark.live
@pytest.mark.timeout(1800)
def test_verify_passes_on_the_pinned_codex_and_fails_on_a_harness_that_ignores_hooks(
    npm_bin: Path, tmp_path: Path
) -> None:
    done = verify("codex", "--bin", str(npm_bin / "codex"), "--scenario", "deny")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "ok   deny" in done.stdout and "1 of 1 held" in done.stdout
    # A "harness" that runs every command it is asked for and never calls a hook: the
    # drift verify exists to catch.
    fake = tmp_path / "claude"
    fake.write_text("#!/bin/sh\nrm -r victim; echo 0.0.0\n")
    fake.chmod(0o755)
    done = verify("claude-code", "--bin", str(fake), "--scenario", "deny")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "FAIL deny" in done.stdout and "the deny did not hold" in done.stdout

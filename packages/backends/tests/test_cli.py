"""The ``ahp-backend`` command in process (``main(argv)``): its serving errors are one
line and exit 2 (a port in use is a real socket bound on 127.0.0.1)."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from ahp_backends.cli import main


def test_a_port_in_use_is_one_line_not_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(1)
        port = sock.getsockname()[1]
        code = main(["audit", "--db", str(tmp_path / "a.db"), "--http", f"127.0.0.1:{port}"])
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        f"com.example.ahp.audit: error: 127.0.0.1:{port} is in use: stop what listens there or "
        "pick another port (--http 127.0.0.1:0 picks one)"
    ]

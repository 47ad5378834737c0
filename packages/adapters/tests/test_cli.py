"""The ``ahp-adapter`` command in process (``main(argv)``): ``serve`` on a port in use
says so in the kit's one line and exits 2 (a real socket bound on 127.0.0.1)."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from ahp_adapters.cli import main


def test_serve_on_a_port_in_use_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    secret = tmp_path / "secret"
    secret.write_text("s" * 32)
    secret.chmod(0o600)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(1)
        port = sock.getsockname()[1]
        code = main(
            ["serve", "claude-code", "--registration", str(tmp_path / "r.json"),
             "--http", f"127.0.0.1:{port}", "--secret-file", str(secret)]
        )  # fmt: skip
    assert code == 2
    assert capsys.readouterr().err == (
        f"ahp-adapter serve: error: 127.0.0.1:{port} is in use: stop what listens there or "
        "pick another port (--http 127.0.0.1:0 picks one)\n"
    )

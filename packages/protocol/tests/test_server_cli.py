"""``Backend.run``'s command line (``ahp_protocol.server.cli``), in process: what it says
when HTTP serving cannot start (an address in use, uvicorn missing) is one line and exit
status 2, never a traceback. The address in use is a real socket bound on 127.0.0.1.
"""

from __future__ import annotations

import socket
import sys
from collections.abc import Iterator

import pytest
from ahp_protocol.server import Backend
from ahp_protocol.server.asgi import HTTP_EXTRA


@pytest.fixture
def taken() -> Iterator[int]:
    """A port on 127.0.0.1 that a listening socket holds."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(1)
        yield int(sock.getsockname()[1])


def _run(argv: list[str]) -> int:
    with pytest.raises(SystemExit) as exit_:
        Backend("com.example.cli").run(argv)
    code = exit_.value.code
    assert isinstance(code, int)
    return code


def test_a_port_in_use_is_one_line_and_exit_2(
    taken: int, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _run(["--http", f"127.0.0.1:{taken}"]) == 2
    err = capsys.readouterr().err
    assert err == (
        f"com.example.cli: error: 127.0.0.1:{taken} is in use: stop what listens there or "
        "pick another port (--http 127.0.0.1:0 picks one)\n"
    )


def test_http_without_uvicorn_names_the_extra(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "uvicorn", None)  # import uvicorn fails as if absent
    assert _run(["--http", "127.0.0.1:0"]) == 2
    assert capsys.readouterr().err == f"com.example.cli: error: {HTTP_EXTRA}\n"
    assert HTTP_EXTRA == "HTTP needs the http extra: pip install 'ahp-protocol[http]'"

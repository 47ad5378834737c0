"""Helpers for the OAuth tests (not a test module): a test CA (trustme), the authorization
server process (``python -m ahp_protocol.testing.oauth_server``) and the kit's
resource-server backend (``kit_oauth.py``), as context managers that stop their process
and check it printed no traceback. Used by ``test_oauth_http.py`` and the conformance
judge's OAuth tests.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[3]))  # the repository root: kit_testing
from kit_testing import StderrLines  # noqa: E402

DEADLINE = 20.0
SECRET = "cs-SECRET-client-secret-do-not-echo"
SCOPE = "ahp.hooks"
HS256 = "interop-hs256-signing-key-for-the-sdk-0123456789"
CLIENTS = {
    "harness": {"secret": SECRET, "scopes": [SCOPE]},
    "narrow": {"secret": SECRET, "scopes": []},
    "person-app": {"scopes": [SCOPE]},  # public: the authorization code grant with PKCE
}


class Proc:
    """A child that prints ``listening on URL`` on ``stream``; both streams are read."""

    def __init__(self, args: list[str], env: dict[str, str], stream: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, *args],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
        )
        pipe, other = (self.proc.stdout, self.proc.stderr)
        if stream != "stdout":
            pipe, other = other, pipe
        assert pipe is not None and other is not None
        self.lines = StderrLines(pipe, DEADLINE)
        self.other = StderrLines(other, DEADLINE)
        self.url = self.lines.wait_for("listening on ").split("listening on ", 1)[1].strip()

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=DEADLINE)
        finally:
            self.proc.kill()
            self.proc.wait()
        text = "".join(self.lines.lines + self.other.lines)
        assert "Traceback" not in text, text


def make_pki(where: Path) -> dict[str, str]:
    """A test CA (``ca``), a loopback server certificate and key (``server``), and a CA
    nobody should trust (``other``), as PEM files in ``where``."""
    import trustme

    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1", "localhost")
    ca.cert_pem.write_to_path(str(where / "ca.pem"))
    cert.private_key_and_cert_chain_pem.write_to_path(str(where / "server.pem"))
    trustme.CA().cert_pem.write_to_path(str(where / "other-ca.pem"))
    return {
        "ca": str(where / "ca.pem"),
        "other": str(where / "other-ca.pem"),
        "server": str(where / "server.pem"),
        "dir": str(where),
    }


@contextmanager
def auth_server(pki: dict[str, str]) -> Iterator[Proc]:
    """The authorization server over HTTPS (its URL; issuers are URL + ``/good`` etc.)."""
    config = Path(pki["dir"]) / "as.json"
    document = {"cert": pki["server"], "key": pki["server"], "clients": CLIENTS, "hs256Key": HS256}
    config.write_text(json.dumps(document))
    argv = ["-m", "ahp_protocol.testing.oauth_server", str(config)]
    proc = Proc(argv, dict(os.environ), "stdout")
    try:
        yield proc
    finally:
        proc.stop()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def kit_backend(issuer: str, pki: dict[str, str], scopes: str = SCOPE) -> Iterator[Proc]:
    """The kit's deny-list backend as a resource server for ``issuer``; its ``url`` is the
    resource (``http://127.0.0.1:PORT/ahp``)."""
    port = free_port()
    env = dict(os.environ)
    env.update(
        KIT_PORT=str(port),
        KIT_RESOURCE=f"http://127.0.0.1:{port}/ahp",
        KIT_ISSUER=issuer,
        KIT_SCOPES=scopes,
        AHP_CA_BUNDLE=pki["ca"],
    )
    proc = Proc([str(HERE / "kit_oauth.py")], env, "stderr")
    proc.url = f"http://127.0.0.1:{port}/ahp"
    try:
        yield proc
    finally:
        proc.stop()

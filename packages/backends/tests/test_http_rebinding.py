"""Sample backends served over HTTP refuse DNS rebinding (issue 26, item 5).

A real ``ahp-backend audit --http 127.0.0.1:0`` process and real loopback requests: a
foreign ``Host`` gets ``421`` and a foreign browser ``Origin`` gets ``403``, and the
audit database afterwards holds none of their events; the server's own names (and no
``Origin``, as non-browser clients send) are answered; ``--allow-host`` and
``--allow-origin`` add names, and a malformed one stops the backend at start. The
rule is the server kit's (``RebindingGuard``), so this holds for every sample.
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx

DEADLINE = 30.0
SOURCE = "urn:uuid:3d1c2f4e-1111-4a8e-9d0b-2b9c8e6e4a10"


def observe(event_id: str) -> dict[str, Any]:
    event = {
        "id": event_id,
        "source": SOURCE,
        "type": "tool.before",
        "time": "2026-08-24T08:00:00.000Z",
        "harness": {"name": "rebinding-tests", "version": "1"},
        "session": {"id": "sess_a", "cwd": "/repo"},
        "tool": {"name": "shell", "kind": "shell", "input": {"command": "ls"}, "origin": "native"},
        "call": {"id": f"call_{event_id}"},
        "path": "native",
    }
    return {
        "jsonrpc": "2.0",
        "method": "hooks/observe",
        "params": {"protocolVersion": "draft", "event": event},
    }


def stored(db: Path) -> set[str]:
    conn = sqlite3.connect(db, timeout=DEADLINE)
    try:
        return {row[0] for row in conn.execute("SELECT event_id FROM events")}
    finally:
        conn.close()


def post(url: str, event_id: str, **headers: str) -> httpx.Response:
    return httpx.post(url, json=observe(event_id), headers=headers, timeout=DEADLINE)


def test_foreign_host_and_origin_are_refused_and_write_nothing(
    tmp_path: Path, http_backend: Any
) -> None:
    db = tmp_path / "audit.db"
    server = http_backend("audit", "--db", str(db))
    port = server.url.rstrip("/").rsplit(":", 1)[1]
    refused = {
        "evt_host": post(server.url, "evt_host", host=f"evil.example:{port}"),
        "evt_host_noport": post(server.url, "evt_host_noport", host="evil.example"),
        "evt_host_port": post(server.url, "evt_host_port", host="127.0.0.1:1"),
        "evt_origin": post(server.url, "evt_origin", origin="http://evil.example"),
        "evt_origin_port": post(
            server.url, "evt_origin_port", origin=f"http://evil.example:{port}"
        ),
        "evt_origin_null": post(server.url, "evt_origin_null", origin="null"),
        "evt_origin_other": post(server.url, "evt_origin_other", origin="http://localhost:1"),
    }
    accepted = {
        "evt_plain": post(server.url, "evt_plain"),  # httpx's own Host: 127.0.0.1:PORT
        "evt_localhost": post(
            server.url, "evt_localhost", host=f"localhost:{port}", origin=f"http://localhost:{port}"
        ),
        "evt_v6": post(server.url, "evt_v6", host=f"[::1]:{port}", origin=f"http://[::1]:{port}"),
        "evt_caps": post(server.url, "evt_caps", host=f"LocalHost:{port}"),
        "evt_noport": post(server.url, "evt_noport", host="127.0.0.1"),
    }
    for name in ("evt_host", "evt_host_noport", "evt_host_port"):
        assert refused[name].status_code == 421, name
        assert "--allow-host" in refused[name].text
    for name in ("evt_origin", "evt_origin_port", "evt_origin_null", "evt_origin_other"):
        assert refused[name].status_code == 403, name
        assert "--allow-origin" in refused[name].text
    for name, response in accepted.items():
        assert response.status_code == 204, (name, response.status_code, response.text)
    logs = server.stop()
    assert "Traceback" not in logs
    assert stored(db) == set(accepted)  # nothing refused reached the database


def test_allow_host_and_allow_origin_add_names(tmp_path: Path, http_backend: Any) -> None:
    db = tmp_path / "audit.db"
    server = http_backend(
        "audit", "--db", str(db), "--allow-host", "ahp.internal",
        "--allow-host", "Proxy.Example:8443", "--allow-origin", "https://dash.example/",
    )  # fmt: skip
    port = server.url.rstrip("/").rsplit(":", 1)[1]
    accepted = {
        "evt_name": post(server.url, "evt_name", host=f"ahp.internal:{port}"),
        "evt_name_noport": post(server.url, "evt_name_noport", host="ahp.internal"),
        "evt_proxy": post(server.url, "evt_proxy", host="proxy.example:8443"),
        "evt_dash": post(server.url, "evt_dash", origin="https://dash.example"),
    }
    refused = {
        "evt_proxy_port": post(server.url, "evt_proxy_port", host="proxy.example"),
        "evt_evil": post(server.url, "evt_evil", host=f"evil.example:{port}"),
        "evt_dash_http": post(server.url, "evt_dash_http", origin="http://dash.example"),
    }
    for name, response in accepted.items():
        assert response.status_code == 204, (name, response.status_code, response.text)
    assert [r.status_code for r in refused.values()] == [421, 421, 403]
    server.stop()
    assert stored(db) == set(accepted)


def test_a_malformed_allowed_name_stops_the_backend_at_start(tmp_path: Path) -> None:
    base = [sys.executable, "-m", "ahp_backends.cli", "audit", "--db", str(tmp_path / "a.db")]
    for flag, value, says in (
        ("--allow-host", "http://evil.example", "--allow-host 'http://evil.example'"),
        ("--allow-origin", "dash.example", "--allow-origin 'dash.example'"),
        ("--allow-origin", "https://dash.example/path", "no path"),
    ):
        done = subprocess.run(
            [*base, "--http", "127.0.0.1:0", flag, value],
            capture_output=True, text=True, timeout=DEADLINE, stdin=subprocess.DEVNULL,
        )  # fmt: skip
        assert done.returncode == 2, done.stderr
        assert says in done.stderr
    done = subprocess.run(
        [*base, "--allow-host", "ahp.internal"],
        capture_output=True, text=True, timeout=DEADLINE, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert done.returncode == 2 and "apply to --http only" in done.stderr

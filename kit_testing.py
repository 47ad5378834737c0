"""Test support shared by every test folder: the golden fixtures and the official schemas.

Importable from any test as ``import kit_testing`` (the repository root is on the
test path). Kept out of ``conftest.py`` on purpose: several folders have a
``conftest.py`` of their own, so ``from conftest import ...`` would be ambiguous.

The golden fixtures live outside the repository (``../shared/fixtures``); tests read
them through ``AHP_FIXTURES_DIR``. The official SDK (``agenthooksprotocol``) is a test
dependency only: its bundled ``schemas.json`` is the machine contract our messages are
cross-checked against.
"""

from __future__ import annotations

import http.client
import json
import os
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from concurrent.futures import Future
from functools import cache
from importlib import resources
from pathlib import Path
from typing import IO, Any

REPO_ROOT = Path(__file__).resolve().parent
SCHEMA_BASE = "https://agenthooksprotocol.org/schemas/draft/"


def fixtures_root() -> Path:
    """The ``ahp-draft`` fixtures folder (may not exist)."""
    configured = os.environ.get("AHP_FIXTURES_DIR")
    if configured:
        return Path(configured)
    return REPO_ROOT.parent / "shared" / "fixtures" / "ahp-draft"


@cache
def _schemas() -> dict[str, dict[str, Any]]:
    text = resources.files("agenthooksprotocol").joinpath("schemas.json").read_text("utf-8")
    return {schema["$id"]: schema for schema in json.loads(text)}


@cache
def _registry() -> Any:
    import jsonschema_rs

    return jsonschema_rs.Registry(list(_schemas().items()))


@cache
def official_validator(ref: str) -> Any:
    """A validator of the official schema ``ref`` names (``tool-before.schema.json``, or
    with a fragment: ``catalogue-event.schema.json#/$defs/turn.start``), formats checked.

    ``jsonschema-rs`` (Draft 2020-12, as the official schemas): a call costs microseconds,
    where the pure-Python ``jsonschema`` took about 10 ms on an event, which the tests that
    judge hundreds of mutants against the official verdict paid by the second.
    """
    import jsonschema_rs

    schema = {"$schema": "https://json-schema.org/draft/2020-12/schema", "$ref": SCHEMA_BASE + ref}
    return jsonschema_rs.validator_for(schema, registry=_registry(), validate_formats=True)


def schema_errors(name: str, instance: Any) -> list[str]:
    """Errors of ``instance`` against one official schema, such as ``tool-before.schema.json``."""
    return [
        f"{'/'.join(map(str, e.instance_path)) or '$'}: {e.message}"
        for e in official_validator(name).iter_errors(instance)
    ]


def intercept_request(event: dict[str, Any], effects: Sequence[str]) -> dict[str, Any]:
    """A ``hooks/intercept`` request for ``event`` (its id as the request id), advertising
    ``effects``: what a harness sends, built by hand for tests that speak raw JSON-RPC."""
    return {
        "jsonrpc": "2.0",
        "id": event["id"],
        "method": "hooks/intercept",
        "params": {
            "protocolVersion": "draft",
            "event": event,
            "capabilities": {"effects": list(effects)},
        },
    }


class HeldCall:
    """One POST of ``message`` to ``url`` on its own connection, sent now; the answer is
    read on a thread, so a call the backend holds waits there. ``client_port`` and
    ``server_port`` tell which worker accepted it (``connection_owner`` in the backends'
    conftest); ``timeout`` bounds the connection and every wait for the answer."""

    def __init__(self, url: str, message: dict[str, Any], timeout: float) -> None:
        host, _, port = url.split("http://", 1)[1].rstrip("/").rpartition(":")
        self.timeout = timeout
        self.server_port = int(port)
        self.conn = http.client.HTTPConnection(host, int(port), timeout=timeout)
        self.conn.connect()
        self.client_port: int = self.conn.sock.getsockname()[1]
        self.conn.request("POST", "/", json.dumps(message), {"Content-Type": "application/json"})
        self.started = time.monotonic()
        self.future: Future[tuple[dict[str, Any], float]] = Future()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        try:
            response = self.conn.getresponse()
            decoded = json.loads(response.read())
            assert response.status == 200, decoded
            self.future.set_result((decoded, time.monotonic() - self.started))
        except BaseException as exc:
            self.future.set_exception(exc)
        finally:
            self.conn.close()

    def effects(self, timeout: float | None = None) -> list[dict[str, Any]]:
        """The answer's effects (waiting at most ``timeout``, else the call's own)."""
        decoded, _ = self.future.result(self.timeout if timeout is None else timeout)
        assert "result" in decoded, decoded
        found: list[dict[str, Any]] = decoded["result"]["effects"]
        return found

    def took(self) -> float:
        """Seconds from the request to its answer."""
        return self.future.result(self.timeout)[1]

    def done(self) -> bool:
        return self.future.done()


def stop(process: subprocess.Popen[Any], timeout: float) -> None:
    """End a child the test started: SIGTERM, then SIGKILL if it is still there after
    ``timeout`` seconds."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=timeout)


class StderrLines:
    """A child process's stderr, read line by line on a thread (so it never blocks the
    child): every line so far in :attr:`lines`, and :meth:`wait_for` a line to come."""

    def __init__(self, stream: IO[bytes], deadline: float) -> None:
        self.lines: list[str] = []
        self._queue: queue.Queue[str] = queue.Queue()
        self._deadline = deadline
        threading.Thread(target=self._pump, args=(stream,), daemon=True).start()

    def _pump(self, stream: IO[bytes]) -> None:
        for raw in iter(stream.readline, b""):
            text = raw.decode("utf-8", "replace")
            self.lines.append(text)
            self._queue.put(text)
        self._queue.put("")  # EOF: the child closed its stderr (it exited)

    def wait_for(self, needle: str) -> str:
        """The first line holding ``needle``, waiting at most ``deadline`` for each new
        line; AssertionError with everything read when the child exits first."""
        for text in list(self.lines):
            if needle in text:
                return text
        while True:
            text = self._queue.get(timeout=self._deadline)
            if not text:
                raise AssertionError(f"exited before printing {needle!r}: {''.join(self.lines)}")
            if needle in text:
                return text


def kit_adapter_here() -> Any:
    """The kit's interop adapter (``interop/adapter.json``) with its commands run by this
    interpreter instead of ``uv run``: what the adapter file runs, without a ``uv run``
    (about 100 ms of CPU) before each of the dozens of processes a scenario file starts.
    ``test_kit_adapters.py`` proves the committed file's own commands once."""
    from ahp_conformance import contract, matrix

    committed = contract.load_adapter(matrix.KIT_ADAPTER)
    assert committed.server is not None and committed.client is not None
    return contract.Adapter(
        committed.language,
        (sys.executable, *committed.server[committed.server.index("python") + 1 :]),
        (sys.executable, *committed.client[committed.client.index("python") + 1 :]),
        committed.cwd,
        committed.extensions,
    )

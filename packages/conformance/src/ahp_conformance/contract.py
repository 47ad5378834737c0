"""The upstream cross-language interop contract (v1): adapters, configs, control endpoint.

Facts of the contract (upstream ``interop/CONTRACT.md``), in the terms used here:

- An implementation ships ``interop/adapter.json``:
  ``{"language": ..., "server": [argv...], "client": [argv...]}``. Its commands run in the
  implementation's root (the folder holding ``interop/``), with ``--config ABSOLUTE_PATH``
  appended. :func:`load_adapter` reads one into an :class:`Adapter`.
- **Server role.** Config ``{transport: "http"|"stdio", readinessFile, scenarioFile,
  auth: {mode, ...}}``. The server binds loopback port zero and, once listening, writes the
  readiness file atomically: ``{endpoint, controlEndpoint, pid}`` (``endpoint`` is the HTTP
  ``/intercept`` URL, or ``null`` over stdio). A separate control HTTP endpoint answers
  ``GET /health`` → ``{"ready": true}``, ``GET /receipts`` → ``{"requests": [...]}``,
  ``POST /release {"barrier"}`` and ``POST /shutdown``. Over HTTP, AHP is ``POST /intercept``
  and ``GET /capabilities``; over stdio, one compact JSON-RPC envelope per line with
  ``hooks/intercept`` and ``hooks/capabilities``. The server answers a scenario's request
  (matched by ``request.id`` == ``params.event.id`` == scenario id) with its ``response``.
  :class:`ControlPlane` is that control endpoint, receipts and barriers, for any server.
- **Client role.** Config ``{transport, endpoint?, serverCommand?, serverCwd?, serverConfig?,
  scenarioFile, reportFile, auth}``. Over stdio the client spawns ``serverCommand`` plus
  ``--config serverConfig``; over HTTP the controller owns the server. The client writes
  ``{language, results: [{id, status, actual, error?}]}`` with status ``passed`` /
  ``failed`` / ``unsupported`` / ``inapplicable`` and exits non-zero on an applicable
  failure. :func:`run_client` runs one under a watchdog; :func:`parse_report` checks it.

The kit's one extension (documented in the package README): a client config may carry
``"registration": PATH`` — an AHP registration document to run every scenario's event
through, instead of one synthesized fail-closed subscription of the scenario server. It
lets ``ahp-conformance harness`` judge failure policies, deadlines and short-circuit, which
need chains the contract cannot express. An adapter that supports it says so in its
``adapter.json`` with ``"extensions": ["registration"]``; for any other adapter those
checks are reported ``unsupported``.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from ahp_protocol.testing.serve import write_json_atomically

REGISTRATION_EXTENSION = "registration"
REPORT_STATUSES = ("passed", "failed", "unsupported", "inapplicable")
READY_TIMEOUT_S = 30.0
"""How long a server adapter may take to write its readiness file (process start included)."""
BARRIER_TIMEOUT_S = 10.0


class ContractError(ValueError):
    """An adapter, config or report that is not what the contract says (message says where)."""


# -- adapter.json ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Adapter:
    """One implementation's interop adapter: its commands and the folder they run in."""

    language: str
    server: tuple[str, ...] | None
    client: tuple[str, ...] | None
    cwd: Path
    extensions: frozenset[str] = frozenset()

    @staticmethod
    def command(client: Sequence[str], cwd: Path, language: str = "custom") -> Adapter:
        """An adapter given as a bare client command (``-- CMD ARGS...``)."""
        return Adapter(language, None, tuple(client), cwd)


def load_adapter(path: Path) -> Adapter:
    """Read ``adapter.json``; its commands run in the folder holding ``interop/``."""
    try:
        data = json.loads(path.read_text("utf-8"))
    except (OSError, ValueError) as exc:
        raise ContractError(f"{path}: {exc}") from None
    if not isinstance(data, dict):
        raise ContractError(f"{path}: an adapter file is a JSON object")
    language = data.get("language")
    if not isinstance(language, str) or not language:
        raise ContractError(f"{path}: $.language must be a non-empty string")
    commands: dict[str, tuple[str, ...] | None] = {}
    for role in ("server", "client"):
        value = data.get(role)
        if value is None:
            commands[role] = None
        elif isinstance(value, list) and value and all(isinstance(a, str) for a in value):
            commands[role] = tuple(value)
        else:
            raise ContractError(f"{path}: $.{role} must be a non-empty array of strings")
    if commands["server"] is None and commands["client"] is None:
        raise ContractError(f"{path}: needs $.server or $.client (or both)")
    extensions = data.get("extensions", [])
    if not isinstance(extensions, list) or not all(isinstance(e, str) for e in extensions):
        raise ContractError(f"{path}: $.extensions must be an array of strings")
    folder = path.resolve().parent
    cwd = folder.parent if folder.name == "interop" else folder
    return Adapter(language, commands["server"], commands["client"], cwd, frozenset(extensions))


# -- files written atomically ---------------------------------------------------------


# -- the server role's control endpoint -----------------------------------------------


@dataclass
class ControlPlane:
    """The contract's control endpoint: ``/health``, ``/receipts``, ``/release``, ``/shutdown``.

    A server adapter records every AHP request it received (:meth:`record`), waits on named
    barriers (:meth:`wait`), and stops when :attr:`stopping` is set (``POST /shutdown``).
    Receipts hold the exact messages received, never a credential header.
    """

    receipts: list[dict[str, Any]] = field(default_factory=list)
    stopping: threading.Event = field(default_factory=threading.Event)
    _barriers: dict[str, threading.Event] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _server: ThreadingHTTPServer | None = None

    def record(self, message: Mapping[str, Any]) -> None:
        entry = {
            "id": message.get("id"),
            "method": message.get("method"),
            "message": json.loads(json.dumps(message)),
        }
        with self._lock:
            self.receipts.append(entry)

    def release(self, barrier: str) -> None:
        with self._lock:
            self._barriers.setdefault(barrier, threading.Event()).set()

    def wait(self, barrier: str, timeout_s: float = BARRIER_TIMEOUT_S) -> bool:
        """Block until ``barrier`` is released (or the server stops); False on the watchdog."""
        with self._lock:
            event = self._barriers.setdefault(barrier, threading.Event())
        return event.wait(timeout_s)

    def stop(self) -> None:
        self.stopping.set()
        with self._lock:
            for event in self._barriers.values():
                event.set()

    def start(self) -> str:
        """Serve the control endpoint on a loopback port; returns its base URL."""
        plane = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *_args: object) -> None:
                pass

            def _send(self, status: int, value: Any) -> None:
                body = json.dumps(value).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:
                if self.path == "/health":
                    self._send(200, {"ready": True})
                elif self.path == "/receipts":
                    with plane._lock:
                        self._send(200, {"requests": list(plane.receipts)})
                else:
                    self._send(404, {"error": "not found"})

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(min(max(length, 0), 65536)) if length else b""
                if self.path == "/release":
                    try:
                        barrier = json.loads(body)["barrier"]
                    except (ValueError, KeyError, TypeError):
                        self._send(400, {"error": 'expected {"barrier": NAME}'})
                        return
                    plane.release(str(barrier))
                    self._send(200, {"released": True})
                elif self.path == "/shutdown":
                    self._send(200, {"stopping": True})
                    plane.stop()
                else:
                    self._send(404, {"error": "not found"})

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return f"http://127.0.0.1:{self._server.server_port}"

    def close(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None


def write_readiness(path: Path, endpoint: str | None, control_endpoint: str) -> None:
    """The server role's readiness file, written once listening (atomically)."""
    write_json_atomically(
        path, {"endpoint": endpoint, "controlEndpoint": control_endpoint, "pid": os.getpid()}
    )


def read_config(path: str | Path) -> dict[str, Any]:
    """An adapter's ``--config`` file (a JSON object)."""
    try:
        data = json.loads(Path(path).read_text("utf-8"))
    except (OSError, ValueError) as exc:
        raise ContractError(f"--config {path}: {exc}") from None
    if not isinstance(data, dict):
        raise ContractError(f"--config {path}: must be a JSON object")
    return data


# -- running adapters -----------------------------------------------------------------


def _spawn(argv: Sequence[str], cwd: Path, stderr: Any) -> subprocess.Popen[bytes]:
    """Start an adapter; one that cannot start is a :class:`ContractError` in one line."""
    try:
        return subprocess.Popen(
            list(argv),
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=stderr,
            stderr=stderr,
            start_new_session=True,
        )
    except OSError as exc:
        raise ContractError(f"cannot start {argv[0]!r}: {exc.strerror or exc}") from None


def kill_group(process: subprocess.Popen[bytes]) -> None:
    """End a process and everything it started (its own session)."""
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=3)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)  # the children, even when the leader is gone
    if process.poll() is None:
        process.wait(timeout=3)


@dataclass(frozen=True, slots=True)
class ClientRun:
    """What one client adapter run produced."""

    report: dict[str, Any] | None
    returncode: int | None
    elapsed_s: float
    timed_out: bool
    log: str
    """The adapter's stdout and stderr (its tail), for evidence."""
    error: str | None = None
    """Why no report could be read, if none could."""


def run_client(
    adapter: Adapter, config: Mapping[str, Any], workdir: Path, *, watchdog_s: float
) -> ClientRun:
    """Run the client adapter with ``config`` under a watchdog, then read its report."""
    if adapter.client is None:
        raise ContractError(f"the {adapter.language} adapter has no client command")
    config_path = workdir / "client-config.json"
    config_path.write_text(json.dumps(dict(config), indent=1), "utf-8")
    log_path = workdir / "client.log"
    started = time.monotonic()
    with log_path.open("wb") as log:
        process = _spawn([*adapter.client, "--config", str(config_path)], adapter.cwd, log)
        timed_out = False
        try:
            process.wait(timeout=watchdog_s)
        except subprocess.TimeoutExpired:
            timed_out = True
        finally:
            kill_group(process)
    elapsed = time.monotonic() - started
    tail = log_path.read_bytes()[-4000:].decode("utf-8", "replace")
    report: dict[str, Any] | None = None
    error = None
    report_path = Path(config["reportFile"])
    if timed_out:
        error = f"the client adapter did not finish within {watchdog_s:.0f} s"
    if report_path.is_file():
        try:
            report = parse_report(json.loads(report_path.read_text("utf-8")))
        except (ValueError, ContractError) as exc:
            error = f"report {report_path.name}: {exc}"
    elif error is None:
        error = f"the client adapter wrote no report (exit status {process.returncode})"
    return ClientRun(report, process.returncode, elapsed, timed_out, tail, error)


def parse_report(data: object) -> dict[str, Any]:
    """Check a client report's shape; returns it (``results`` keyed nothing, in order)."""
    if not isinstance(data, dict) or not isinstance(data.get("results"), list):
        raise ContractError("a report is {language, results: [...]}")
    for index, result in enumerate(data["results"]):
        if not isinstance(result, dict) or not isinstance(result.get("id"), str):
            raise ContractError(f"$.results[{index}]: needs a string id")
        if result.get("status") not in REPORT_STATUSES:
            raise ContractError(
                f"$.results[{index}].status: {result.get('status')!r} is not one of "
                f"{', '.join(REPORT_STATUSES)}"
            )
    return data


@dataclass
class ServerProcess:
    """A server adapter started under the contract: readiness read, control endpoint known."""

    process: subprocess.Popen[bytes]
    readiness: dict[str, Any]
    log_path: Path

    @property
    def endpoint(self) -> str | None:
        value = self.readiness.get("endpoint")
        return str(value) if value else None

    @property
    def control(self) -> str:
        return str(self.readiness["controlEndpoint"])

    def receipts(self) -> list[dict[str, Any]]:
        import httpx

        response = httpx.get(self.control + "/receipts", timeout=10)
        response.raise_for_status()
        requests = response.json().get("requests", [])
        return list(requests) if isinstance(requests, list) else []

    def shutdown(self) -> None:
        import httpx

        with contextlib.suppress(httpx.HTTPError):
            httpx.post(self.control + "/shutdown", json={}, timeout=5)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=5)
        kill_group(self.process)

    def log(self) -> str:
        return self.log_path.read_bytes()[-4000:].decode("utf-8", "replace")


def start_server(
    adapter: Adapter, config: Mapping[str, Any], workdir: Path, *, name: str = "server"
) -> ServerProcess:
    """Start a server adapter (HTTP: the controller owns it) and wait for its readiness file."""
    if adapter.server is None:
        raise ContractError(f"the {adapter.language} adapter has no server command")
    config_path = workdir / f"{name}-config.json"
    config_path.write_text(json.dumps(dict(config), indent=1), "utf-8")
    readiness = Path(config["readinessFile"])
    log_path = workdir / f"{name}.log"
    log = log_path.open("wb")
    process = _spawn([*adapter.server, "--config", str(config_path)], adapter.cwd, log)
    log.close()
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        if readiness.is_file():
            try:
                data = json.loads(readiness.read_text("utf-8"))
            except ValueError:
                data = None
            if isinstance(data, dict) and "controlEndpoint" in data:
                return ServerProcess(process, data, log_path)
        if process.poll() is not None:
            break
        time.sleep(0.02)
    kill_group(process)
    tail = log_path.read_bytes()[-2000:].decode("utf-8", "replace")
    raise ContractError(
        f"the {adapter.language} server adapter wrote no readiness file within "
        f"{READY_TIMEOUT_S:.0f} s (exit status {process.returncode}); its output: {tail}"
    )


@dataclass(frozen=True, slots=True)
class Pairing:
    """One client adapter run against one server adapter."""

    run: ClientRun
    receipts: list[dict[str, Any]] | None
    """Over HTTP: the messages the server recorded (``/receipts``); over stdio ``None``
    (the client owned the server process)."""


def run_pairing(
    client: Adapter,
    server: Adapter,
    transport: str,
    scenario_file: Path,
    workdir: Path,
    *,
    watchdog_s: float,
) -> Pairing:
    """Run ``client`` against ``server`` over ``transport`` on every scenario of the file.

    Over stdio the client spawns the server (``serverCommand``, ``serverCwd``,
    ``serverConfig``); over HTTP this controller starts the server, gives the client its
    ``endpoint``, reads its receipts and shuts it down. Raises :class:`ContractError` when
    the server cannot be started.
    """
    if server.server is None:
        raise ContractError(f"the {server.language} adapter has no server command")
    server_config = {
        "transport": transport,
        "readinessFile": str(workdir / "server-ready.json"),
        "scenarioFile": str(scenario_file),
        "auth": {"mode": "none"},
    }
    config: dict[str, Any] = {
        "transport": transport,
        "scenarioFile": str(scenario_file),
        "reportFile": str(workdir / "report.json"),
        "auth": {"mode": "none"},
    }
    if transport == "stdio":
        server_path = workdir / "server-config.json"
        server_path.write_text(json.dumps(server_config, indent=1), "utf-8")
        config.update(
            serverCommand=list(server.server),
            serverCwd=str(server.cwd),
            serverConfig=str(server_path),
        )
        return Pairing(run_client(client, config, workdir, watchdog_s=watchdog_s), None)
    running = start_server(server, server_config, workdir)
    try:
        config["endpoint"] = running.endpoint
        run = run_client(client, config, workdir, watchdog_s=watchdog_s)
        receipts = [r.get("message", {}) for r in running.receipts()]
    finally:
        running.shutdown()
    return Pairing(run, receipts)

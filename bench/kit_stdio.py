"""Stdio cost of a server-kit backend, side by side with a raw floor and the official SDK.

Three backends answer the same ``hooks/intercept`` request for ``tool.before``
(a realistic request, valid against the draft, with ``harness``, capabilities and
chain state; every other request matches the deny policy):

- ``raw``: a tiny stdlib script (read a line, ``json.loads``, answer no effect,
  ``json.dumps``, write, flush): the floor any Python backend pays;
- ``kit``: ``packages/protocol/tests/backends/kit_configured.py``, built with our
  server kit (deny when ``tool.input.command`` matches ``rm\\s+-rf``);
- ``sdk``: ``packages/protocol/tests/backends/sdk_backend.py``, the same policy
  built with the official SDK's server API (``agenthooksprotocol``).

Measured in one run, interleaved so machine noise hits all alike:

1. per request, persistent stdio: a bare NDJSON client writes one line and reads
   one line (round trip), ``--requests`` per backend (default 500) in ``--rounds``
   rounds (default 50), the backend order rotating every round, after a warm-up,
   client and backends placed by ``--cpus`` (default: the scheduler's choice; see
   ``placement``);
2. cold start, per_event stdio: spawn to first reply line (request written at once,
   stdin left open as a harness does), ``--spawns`` per backend (default 15), the
   order rotating every spawn; ``python -c pass`` (spawn to exit) for context.

Targets (the issue bar): kit/raw <= 2 and kit/sdk <= 1/10 per request (medians);
kit/sdk <= 1/3 for cold start (medians). ``--check`` exits 1 when one is missed;
``--json`` prints the figures as JSON. Every reply is checked (id and effects)
outside the timed region. Stdlib only, plus the two backends it runs.

    uv run python bench/kit_stdio.py [--requests N] [--spawns N] [--check] [--json]
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import os
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

REPO = Path(__file__).resolve().parent.parent
BACKENDS = REPO / "packages" / "protocol" / "tests" / "backends"
TIMEOUT_S = 60.0  # any single spawn or exchange; a stuck backend is killed, not waited on

RAW_SOURCE = r"""
import json, sys
once = sys.argv[1:] == ["--once"]
out = sys.stdout.buffer
for line in sys.stdin.buffer:
    msg = json.loads(line)
    answer = {"jsonrpc": "2.0", "id": msg["id"],
              "result": {"protocolVersion": "draft", "effects": []}}
    out.write(json.dumps(answer).encode() + b"\n")
    out.flush()
    if once:
        break
"""

COMMANDS: dict[str, list[str]] = {
    "raw": [sys.executable, "-c", RAW_SOURCE],
    "kit": [sys.executable, str(BACKENDS / "kit_configured.py")],
    "sdk": [sys.executable, str(BACKENDS / "sdk_backend.py")],
}
NAMES = ("raw", "kit", "sdk")
DENIES = {"raw": False, "kit": True, "sdk": True}  # does the backend apply the policy?

TARGETS = (
    # (label, numerator, denominator, phase, at most)
    ("per request kit/raw", "kit", "raw", "per_request", 2.0),
    ("per request kit/sdk", "kit", "sdk", "per_request", 0.1),
    ("cold start kit/sdk", "kit", "sdk", "cold_start", 1 / 3),
)


def request_line(index: int) -> bytes:
    """The ``index``-th request: a unique id; odd indexes match the deny policy."""
    event_id = f"evt_{index:06d}"
    command = "rm -rf /tmp/build" if index % 2 else "ls -la /repo"
    message = {
        "jsonrpc": "2.0",
        "id": event_id,
        "method": "hooks/intercept",
        "params": {
            "protocolVersion": "draft",
            "event": {
                "id": event_id,
                "source": "urn:uuid:5b7de29e-a9e0-41a8-bf26-d94b05f0656d",
                "type": "tool.before",
                "time": "2026-08-24T08:51:14Z",
                "harness": {"name": "bench-harness", "version": "1.0"},
                "session": {"id": "sess_123", "cwd": "/repo", "workspaceRoots": ["/repo"]},
                "tool": {
                    "name": "Bash",
                    "kind": "shell",
                    "input": {"command": command, "timeout": 120000},
                    "origin": "native",
                },
                "call": {"id": f"call_{index:06d}"},
                "path": "native",
            },
            "capabilities": {"effects": ["allow", "deny"]},
            "state": {"candidate": None, "permission": "none"},
        },
    }
    return json.dumps(message, separators=(",", ":")).encode() + b"\n"


def check_reply(name: str, index: int, reply: bytes) -> None:
    """Fail loudly unless ``reply`` answers request ``index`` as ``name`` should."""
    try:
        message = json.loads(reply)
        effects = message["result"]["effects"]
        ok = message["id"] == f"evt_{index:06d}"
    except (ValueError, KeyError, TypeError):
        raise SystemExit(f"{name}: bad reply to request {index}: {reply[:200]!r}") from None
    deny = DENIES[name] and index % 2 == 1
    kinds = [e.get("type") for e in effects]
    if not ok or kinds != (["deny"] if deny else []):
        raise SystemExit(f"{name}: unexpected reply to request {index}: {reply[:200]!r}")


def _watchdog(proc: subprocess.Popen[bytes]) -> threading.Timer:
    timer = threading.Timer(TIMEOUT_S, proc.kill)
    timer.daemon = True
    timer.start()
    return timer


Check = Callable[[str, int, bytes], None]
"""``check(name, index, reply)``: raise ``SystemExit`` unless ``reply`` answers request
``index`` as backend ``name`` should."""


@dataclass
class Persistent:
    """A persistent stdio backend driven by a bare NDJSON client (write a line, read a line)."""

    name: str
    argv: list[str]
    check: Check = check_reply
    cpus: set[int] | None = None
    proc: subprocess.Popen[bytes] = field(init=False)
    stdin: IO[bytes] = field(init=False)
    stdout: IO[bytes] = field(init=False)

    def __post_init__(self) -> None:
        self.proc = subprocess.Popen(
            self.argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.stdin, self.stdout = self.proc.stdin, self.proc.stdout
        if self.cpus is not None:
            os.sched_setaffinity(self.proc.pid, self.cpus)

    def exchange(self, line: bytes) -> bytes:
        self.stdin.write(line)
        self.stdin.flush()
        return self.stdout.readline()

    def run(self, lines: list[tuple[int, bytes]]) -> list[float]:
        """Time each round trip (microseconds); replies are checked afterwards."""
        timer = _watchdog(self.proc)
        replies: list[bytes] = []
        times: list[float] = []
        clock = time.perf_counter_ns
        try:
            for _, line in lines:
                t0 = clock()
                reply = self.exchange(line)
                t1 = clock()
                times.append((t1 - t0) / 1000.0)
                replies.append(reply)
        finally:
            timer.cancel()
        for (index, _), reply in zip(lines, replies, strict=True):
            self.check(self.name, index, reply)
        return times

    def close(self) -> None:
        self.stdin.close()
        try:
            self.proc.wait(timeout=TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def cold_start(name: str, line: bytes, index: int) -> float:
    """Spawn a per_event backend and time spawn -> first reply line (milliseconds)."""
    argv = [*COMMANDS[name], "--once"]
    t0 = time.perf_counter_ns()
    proc = subprocess.Popen(
        argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
    )
    timer = _watchdog(proc)
    try:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(line)
        proc.stdin.flush()  # stdin stays open, as the SDK harness keeps it
        reply = proc.stdout.readline()
        t1 = time.perf_counter_ns()
        proc.stdin.close()
        status = proc.wait(timeout=TIMEOUT_S)
    finally:
        timer.cancel()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    check_reply(name, index, reply)
    if status != 0:
        raise SystemExit(f"{name}: per_event process exited with {status}")
    return (t1 - t0) / 1e6


def python_pass() -> float:
    """Spawn ``python -c pass`` and time spawn -> exit (milliseconds)."""
    t0 = time.perf_counter_ns()
    subprocess.run([sys.executable, "-c", "pass"], check=True, timeout=TIMEOUT_S)
    return (time.perf_counter_ns() - t0) / 1e6


def summary(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    p90 = ordered[max(0, math.ceil(0.9 * len(ordered)) - 1)]
    return {"n": len(values), "median": statistics.median(ordered), "p90": p90}


PLACEMENTS = ("any", "same", "split")
"""Where the per-request phase runs (``--cpus``); see :func:`placement`."""


@contextmanager
def placement(mode: str) -> Iterator[tuple[str, set[int] | None]]:
    """Place the client (this process) and the backends it starts meanwhile.

    A round trip wakes the backend, then the client; where they run changes the floor:

    - ``any`` (default): the scheduler decides, as in a deployment. A pair may share
      a CPU or not, and that can differ from backend to backend and run to run.
    - ``same``: everything on one CPU. Two context switches per round trip and no
      idle CPU to wake, but the client's work evicts the backend's caches between
      requests: the smallest floor, and the hardest case for a larger backend.
    - ``split``: the client on one CPU, every backend on another. Each keeps its own
      caches; each round trip wakes an idle CPU, which on a virtual machine can cost
      more than the work measured: the largest floor.

    Yields a description and the CPUs given to backends (``None``: not placed).
    """
    setaffinity = getattr(os, "sched_setaffinity", None)
    if mode == "any":
        yield "scheduler's choice", None
        return
    if setaffinity is None:
        raise SystemExit(f"--cpus {mode} needs os.sched_setaffinity (Linux)")
    before = os.sched_getaffinity(0)
    cpus = sorted(before)
    if mode == "split" and len(cpus) < 2:
        raise SystemExit("--cpus split needs two CPUs")
    client = {cpus[0]}
    backends = client if mode == "same" else {cpus[1]}
    setaffinity(0, client)
    try:
        where = (
            f"CPU {cpus[0]}" if mode == "same" else f"client CPU {cpus[0]}, backends CPU {cpus[1]}"
        )
        yield where, backends
    finally:
        setaffinity(0, before)


def measure_requests(
    requests: int,
    rounds: int,
    warmup: int,
    cpus: set[int] | None = None,
    *,
    commands: dict[str, list[str]] = COMMANDS,
    line: Callable[[int], bytes] = request_line,
    check: Check = check_reply,
) -> tuple[dict[str, list[float]], dict[str, dict[str, list[float]]]]:
    """Round trips per backend (``commands``: name -> argv, in interleaving order), and
    the same split by request kind (``passed``: the even requests, answered with no
    effect; ``denied``: the odd ones, which the policy denies). ``line(i)`` is request
    ``i``; ``check`` judges every reply outside the timed region."""
    names = tuple(commands)
    per_round = max(1, requests // rounds)
    backends = {name: Persistent(name, argv, check, cpus) for name, argv in commands.items()}
    times: dict[str, list[float]] = {name: [] for name in names}
    by_kind: dict[str, dict[str, list[float]]] = {
        name: {"passed": [], "denied": []} for name in names
    }
    try:
        warm = [(i, line(i)) for i in range(warmup)]
        for backend in backends.values():  # start-up and lazy imports are not per request
            backend.run(warm)
        index = warmup
        gc.collect()
        gc.disable()
        for r in range(rounds):
            lines = [(i, line(i)) for i in range(index, index + per_round)]
            index += per_round
            order = names[r % len(names) :] + names[: r % len(names)]
            for name in order:
                measured = backends[name].run(lines)
                times[name].extend(measured)
                for (i, _), us in zip(lines, measured, strict=True):
                    by_kind[name]["denied" if i % 2 else "passed"].append(us)
            gc.collect()
    finally:
        gc.enable()
        for backend in backends.values():
            backend.close()
    return times, by_kind


def measure_cold(spawns: int) -> dict[str, list[float]]:
    names = (*NAMES, "python -c pass")
    times: dict[str, list[float]] = {name: [] for name in names}
    line = request_line(1)  # a deny: the kit and the SDK answer with an effect
    for name in NAMES:  # warm the bytecode caches; not counted
        cold_start(name, line, 1)
    for s in range(spawns):
        order = names[s % 4 :] + names[: s % 4]
        for name in order:
            if name == "python -c pass":
                times[name].append(python_pass())
            else:
                times[name].append(cold_start(name, line, 1))
    return times


def evaluate(per_request: dict[str, Any], cold: dict[str, Any]) -> list[dict[str, Any]]:
    phases = {"per_request": per_request, "cold_start": cold}
    results = []
    for label, num, den, phase, limit in TARGETS:
        ratio = phases[phase][num]["median"] / phases[phase][den]["median"]
        results.append({"target": label, "ratio": ratio, "at_most": limit, "pass": ratio <= limit})
    return results


def print_table(report: dict[str, Any]) -> None:
    print(f"python {sys.version.split()[0]} on {sys.platform}")
    print(
        f"\nPer request, persistent stdio (round trip, us; "
        f"{report['settings']['requests']} requests x backend, "
        f"{report['settings']['rounds']} interleaved rounds, "
        f"--cpus {report['settings']['per_request_cpus']['mode']}: "
        f"{report['settings']['per_request_cpus']['where']})"
    )
    print(f"  {'backend':<16}{'median':>10}{'p90':>10}")
    for name, stats in report["per_request"].items():
        print(f"  {name:<16}{stats['median']:>10.1f}{stats['p90']:>10.1f}")
    raw = report["per_request"]["raw"]["median"]
    print("  by request kind (median; x raw's median), for context:")
    for name in ("kit", "sdk"):
        kinds = report["per_request_by_kind"][name]
        cells = "  ".join(
            f"{kind} {kinds[kind]['median']:.1f} ({kinds[kind]['median'] / raw:.2f}x)"
            for kind in ("passed", "denied")
        )
        print(f"    {name:<14}{cells}")
    print(
        f"\nCold start, per_event stdio (spawn to first reply, ms; "
        f"{report['settings']['spawns']} spawns each, interleaved)"
    )
    print(f"  {'backend':<16}{'median':>10}{'p90':>10}")
    for name, stats in report["cold_start"].items():
        print(f"  {name:<16}{stats['median']:>10.1f}{stats['p90']:>10.1f}")
    print(f"\n  {'ratio (medians)':<24}{'value':>8}{'target':>10}  result")
    for row in report["targets"]:
        verdict = "PASS" if row["pass"] else "MISS"
        limit = f"<= {row['at_most']:.3f}"
        print(f"  {row['target']:<24}{row['ratio']:>8.3f}{limit:>10}  {verdict}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=500, help="per backend (>= 300)")
    parser.add_argument("--rounds", type=int, default=50, help="interleaved rounds")
    parser.add_argument("--warmup", type=int, default=30, help="untimed requests first")
    parser.add_argument("--spawns", type=int, default=15, help="per backend (>= 15)")
    parser.add_argument("--check", action="store_true", help="exit 1 when a target is missed")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument(
        "--cpus",
        choices=PLACEMENTS,
        default="any",
        help="where the per-request phase runs: any (the scheduler decides), same "
        "(client and backends on one CPU), split (client on one, backends on another)",
    )
    args = parser.parse_args(argv)
    if args.requests < 1 or args.rounds < 1 or args.spawns < 1 or args.warmup < 1:
        parser.error("counts must be positive")
    requests = max(1, args.requests // args.rounds) * args.rounds
    with placement(args.cpus) as (where, cpus):
        measured, by_kind = measure_requests(requests, args.rounds, args.warmup, cpus)
    per_request = {k: summary(v) for k, v in measured.items()}
    per_kind = {
        name: {kind: summary(v) for kind, v in kinds.items()} for name, kinds in by_kind.items()
    }
    cold = {k: summary(v) for k, v in measure_cold(args.spawns).items()}
    report: dict[str, Any] = {
        "settings": {
            "requests": requests,
            "rounds": args.rounds,
            "warmup": args.warmup,
            "spawns": args.spawns,
            "per_request_cpus": {"mode": args.cpus, "where": where},
            "units": {"per_request": "us", "cold_start": "ms"},
        },
        "per_request": per_request,
        "per_request_by_kind": per_kind,
        "cold_start": cold,
    }
    report["targets"] = evaluate(per_request, cold)
    report["pass"] = all(row["pass"] for row in report["targets"])
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print_table(report)
    return 1 if args.check and not report["pass"] else 0


if __name__ == "__main__":
    sys.exit(main())

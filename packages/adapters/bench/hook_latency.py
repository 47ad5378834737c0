"""Per-call latency of the adapter's native hooks, side by side with the interpreter floor.

Runs the hooks as a native harness would, against our deny-list backend
(persistent over stdio, and over loopback HTTP), Claude Code payload:

- ``floor``: ``python -c pass``, the start-up every Python hook pays;
- ``command, warm daemon``: ``ahp-adapter hook claude-code`` (the entry point the
  installer writes) as a new process per call, the daemon already running: the
  thin client's path;
- ``http hook``: ``POST /claude-code/PreToolUse`` to ``ahp-adapter serve`` over one
  keep-alive connection (as Claude Code's http hooks do), and over a new
  connection per call; beside it ``http floor``, a bare uvicorn app that answers
  ``{}`` (the same server settings, no chain): what any HTTP hook costs here;
- ``command, in-process``: ``--daemon off``, the chain in the hook process (the
  backend spawned, or the HTTP client built, every call); fewer calls, it is slow;
- ``command, warm daemon, DIALECT``: the same for every dialect, with its own
  pre-tool shell payload (recorded live where the tier has one);
- the first call through the daemon, which starts it, is reported apart as "cold";
- the session's first tool call: in a fresh runtime folder, the session-start hook
  (which has the daemon started and its backends prepared, and returns at once),
  then the first pre-tool hook, right away and after a model turn (``--turn``,
  default 300 ms: a model answers the session's first prompt before any tool call).

Three phases, each in interleaved rounds (one call of each row per round, so a busy
moment of the machine hits all rows alike); medians and p90 per row:

1. the process rows (floor, warm command hooks);
2. the HTTP rows back to back;
3. the HTTP rows again after an idle gap (``--gap``, default 20 ms) before each call,
   as a harness that calls a hook now and then does. On this machine (a VM) waking an
   idle process costs about a millisecond, and an http hook wakes three (the harness
   side, ``serve``, the backend): reported, with the floor's, not checked.

Bytecode caching is on (``PYTHONPYCACHEPREFIX`` in a temporary directory), as in a
normal install, even if the environment disables it. Absolute times on a shared
machine are noise: read the ratios.

Targets (``--check`` exits 1 when one is missed):

- warm command hook (stdio and HTTP backend, and each dialect) <= 2 x floor (median,
  phase 1);
- the first tool call after session start and a model turn <= 0.5 x the cold first
  call (no session start: the hook starts the daemon and the backend itself). The
  issue's goal is 0.5 s for that call; it is printed beside the figure, and checked as
  this ratio, which does not measure the machine;
- http hook over keep-alive <= 4.4 x the http floor (medians, phase 2). The issue asked
  for 2 ms when a bare uvicorn app answered here in 0.45 ms (2 / 0.45 = 4.4); a fixed
  time measures the machine, not the hook (on a slower day the code of that landing took
  3.4 ms beside a 1.2 ms floor), so the target is that ratio, and the time is printed.

    uv run python packages/adapters/bench/hook_latency.py [--calls 40] [--gap S] [--turn S]
        [--first-calls 5] [--check] [--json]
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
RULES = REPO / "examples" / "backends" / "denylist.toml"
BIN = Path(sys.executable).parent
PAYLOAD = {
    "session_id": "3f1c2a9e-7b4d-4c1e-9a55-0d2e8f6b1c44",
    "transcript_path": "/tmp/transcript.jsonl",
    "cwd": "/tmp",
    "permission_mode": "default",
    "hook_event_name": "PreToolUse",
    "tool_name": "Bash",
    "tool_input": {"command": "rm -rf /"},
    "tool_use_id": "toolu_bench",
}
DATA = json.dumps(PAYLOAD).encode()
SECRET = "bench-secret-0123456789abcdef0123"
FLOOR_RATIO = 2.0
HTTP_HOOK_RATIO = 4.4
FIRST_CALL_RATIO = 0.5
FIRST_CALL_GOAL_MS = 500.0
FIXTURES = REPO / "packages" / "adapters" / "tests" / "fixtures"
PRE_TOOL_EVENT = {
    "claude-code": "PreToolUse",
    "codex": "PreToolUse",
    "gemini": "BeforeTool",
    "copilot": "preToolUse",
    "qwen-code": "PreToolUse",
    "kimi": "PreToolUse",
    "cursor": "preToolUse",
}
"""Every dialect, with the native pre-tool event its shell payload is sent as."""
SESSION_START = {**PAYLOAD, "hook_event_name": "SessionStart", "source": "startup"}
for _key in ("tool_name", "tool_input", "tool_use_id", "permission_mode"):
    SESSION_START.pop(_key)


def dialect_payload(dialect: str) -> bytes:
    """``dialect``'s pre-tool shell payload (the newest live recording, else the written
    one) asking for ``rm -rf /``."""
    folder = FIXTURES / dialect
    found = sorted(folder.glob("pre_tool_use.shell.live-*.json")) or [
        folder / "pre_tool_use.shell.json"
    ]
    payload = json.loads(found[-1].read_text())["payload"]
    for key in ("tool_input", "toolArgs"):
        if isinstance(payload.get(key), dict):
            payload[key]["command"] = "rm -rf /"
        elif isinstance(payload.get(key), str):
            payload[key] = json.dumps({**json.loads(payload[key]), "command": "rm -rf /"})
    return json.dumps(payload).encode()


def registration(path: Path, transport: dict[str, object]) -> Path:
    sub = {
        "events": ["tool.before"],
        "mode": "intercept",
        "timeoutMs": 5000,
        "failurePolicy": "fail-open",
        "content": {"default": "metadata"},
    }
    hook = {"id": "com.example.ahp.denylist", "transport": transport, "subscriptions": [sub]}
    path.write_text(json.dumps({"protocolVersion": "draft", "hooks": [hook]}))
    return path


def run(
    argv: list[str], env: dict[str, str], cwd: Path, data: bytes, expect: bool | bytes
) -> float:
    """Seconds one hook process took; ``expect``: ``True`` a Claude Code deny, bytes the
    exact stdout and exit code (``answer`` of a reference run)."""
    started = time.perf_counter()
    done = subprocess.run(argv, input=data, capture_output=True, env=env, cwd=cwd, timeout=60)
    elapsed = time.perf_counter() - started
    got = done.stdout + b"\0" + str(done.returncode).encode()
    wrong = b'"deny"' not in done.stdout if expect is True else expect and got != expect
    if wrong:
        raise SystemExit(f"unexpected answer from {argv[:4]}: {done.stdout!r} {done.stderr!r}")
    return elapsed


def answer(argv: list[str], env: dict[str, str], cwd: Path, data: bytes) -> bytes:
    """The reference answer (stdout and exit code) of the in-process hook; it must deny."""
    done = subprocess.run(
        [*argv, "--daemon", "off"], input=data, capture_output=True, env=env, cwd=cwd, timeout=60
    )
    if done.returncode != 2 and not (b"deny" in done.stdout or b"block" in done.stdout):
        raise SystemExit(f"{argv[2]}: the payload was not denied: {done.stdout!r}")
    return done.stdout + b"\0" + str(done.returncode).encode()


def stop_daemons(runtime: Path, registration: Path, env: dict[str, str], cwd: Path) -> None:
    for sock in runtime.glob("d-*.sock"):  # the daemons the hooks started
        subprocess.run(
            [
                *(str(BIN / "ahp-adapter"), "daemon", "stop", "--socket", str(sock)),
                *("--registration", str(registration)),
            ],
            capture_output=True,
            env=env,
            cwd=cwd,
            timeout=30,
        )


def first_calls(
    reg: Path, env: dict[str, str], work: Path, rounds: int, turn: float
) -> dict[str, list[float]]:
    """The session's first tool call, each round in a fresh runtime folder (no daemon)."""
    hook = [str(BIN / "ahp-adapter"), "hook", "claude-code", "--registration", str(reg)]
    start = json.dumps(SESSION_START).encode()
    rows: dict[str, list[float]] = {}
    for i in range(rounds):
        for name, gap in (
            ("cold (no session start)", None),
            ("right after session start", 0.0),
            (f"after session start and a {turn * 1000:g} ms turn", turn),
        ):
            runtime = work / f"first-{i}-{len(rows.get(name, []))}-{gap}"
            runtime.mkdir(mode=0o700)
            fresh = {**env, "AHP_ADAPTER_RUNTIME_DIR": str(runtime)}
            try:
                if gap is not None:
                    rows.setdefault("session-start hook", []).append(
                        run([*hook, "--event", "SessionStart"], fresh, work, start, False)
                    )
                    time.sleep(gap)
                rows.setdefault(f"first tool call, {name}", []).append(
                    run([*hook, "--event", "PreToolUse"], fresh, work, DATA, True)
                )
            finally:
                stop_daemons(runtime, reg, fresh, work)
    return rows


def listening(proc: subprocess.Popen[bytes]) -> str:
    """The ``http://HOST:PORT`` a server printed on stderr."""
    assert proc.stderr is not None
    for raw in iter(proc.stderr.readline, b""):
        text = raw.decode()
        if "listening on http://" in text:
            return text.split("listening on ", 1)[1].strip()
    raise SystemExit("a server exited before listening")


HTTP_FLOOR = """
import socket, sys, uvicorn
async def app(scope, receive, send):
    if scope["type"] != "http":
        return
    while (await receive()).get("more_body"):
        pass
    headers = [(b"content-length", b"2"), (b"content-type", b"application/json")]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": b"{}"})
sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
sock.bind(("127.0.0.1", 0))
sock.listen(128)
print(f"listening on http://127.0.0.1:{sock.getsockname()[1]}", file=sys.stderr, flush=True)
config = uvicorn.Config(app, log_level="warning", access_log=False, log_config=None,
                        lifespan="off", server_header=False, date_header=False,
                        http="httptools")
uvicorn.Server(config).run(sockets=[sock])
"""
"""A bare uvicorn app with ``serve``'s settings: the cost of any HTTP hook, without a chain."""


class HttpHook:
    """``ahp-adapter serve claude-code`` and the two ways to POST to it."""

    def __init__(self, reg: Path | None, env: dict[str, str], work: Path) -> None:
        secret = work / "secret"
        secret.write_text(SECRET)
        secret.chmod(0o600)
        argv = [sys.executable, "-c", HTTP_FLOOR]  # reg None: the floor
        if reg is not None:
            argv = [str(BIN / "ahp-adapter"), "serve", "claude-code", "--registration", str(reg)]
            argv += ["--http", "127.0.0.1:0", "--secret-file", str(secret)]
        self.expect = b"{}" if reg is None else b'"deny"'
        self.proc = subprocess.Popen(
            argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env
        )
        self.port = int(listening(self.proc).rsplit(":", 1)[1])
        self.conn = self._connect()

    def reconnect(self) -> None:
        self.conn.close()
        self.conn = self._connect()

    def _connect(self) -> http.client.HTTPConnection:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        conn.connect()
        assert conn.sock is not None
        conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return conn

    def post(self, conn: http.client.HTTPConnection) -> float:
        headers = {"content-type": "application/json", "X-AHP-Adapter-Secret": SECRET}
        started = time.perf_counter()
        conn.request("POST", "/claude-code/PreToolUse", body=DATA, headers=headers)
        body = conn.getresponse().read()
        elapsed = time.perf_counter() - started
        if self.expect not in body:
            raise SystemExit(f"unexpected http hook answer: {body!r}")
        return elapsed

    def keep_alive(self) -> float:
        return self.post(self.conn)

    def new_connection(self) -> float:
        conn = self._connect()
        try:
            return self.post(conn)
        finally:
            conn.close()

    def stop(self) -> None:
        self.conn.close()
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout=30)


def summary(times: list[float]) -> dict[str, float]:
    ordered = sorted(times)
    p90 = ordered[min(len(ordered) - 1, round(0.9 * (len(ordered) - 1)))]
    return {"median_ms": statistics.median(times) * 1000, "p90_ms": p90 * 1000, "n": len(times)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=40, help="interleaved rounds (default 40)")
    parser.add_argument(
        "--slow-calls", type=int, default=5, help="in-process calls per backend (default 5)"
    )
    parser.add_argument(
        "--gap", type=float, default=0.02, help="idle seconds before each phase-3 call"
    )
    parser.add_argument(
        "--turn", type=float, default=0.3, help="seconds between session start and first call"
    )
    parser.add_argument(
        "--first-calls", type=int, default=5, help="rounds of session first calls (default 5)"
    )
    parser.add_argument("--check", action="store_true", help="exit 1 if a target is missed")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="ahpb-", dir="/tmp"))
    runtime = work / "run"
    runtime.mkdir(mode=0o700)
    env = {
        **os.environ,
        "AHP_ADAPTER_RUNTIME_DIR": str(runtime),
        "PYTHONPYCACHEPREFIX": str(work / "pyc"),
        "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
    }
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    backend = subprocess.Popen(
        [
            *(sys.executable, "-m", "ahp_backends.cli", "denylist", "--rules", str(RULES)),
            *("--http", "127.0.0.1:0"),
        ],
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        env=env,
    )
    servers: list[HttpHook] = []
    try:
        url = listening(backend) + "/"
        stdio = {
            "type": "stdio",
            "command": sys.executable,
            "args": ["-m", "ahp_backends.cli", "denylist", "--rules", str(RULES)],
            "lifecycle": "persistent",
        }
        regs = {
            "stdio backend": registration(work / "stdio.json", stdio),
            "http backend": registration(work / "http.json", {"type": "http", "url": url}),
        }
        floor = [sys.executable, "-c", "pass"]
        hook = {
            name: [str(BIN / "ahp-adapter"), "hook", "claude-code", "--registration", str(reg)]
            for name, reg in regs.items()
        }
        rows: dict[str, list[float]] = {}
        single: dict[str, float] = {}
        for name, argv in hook.items():  # compile and cache bytecode, then start the daemon
            run([*argv, "--daemon", "off"], env, work, DATA, True)
            single[f"command, daemon cold start ({name})"] = run(
                [*argv, "--daemon", "auto"], env, work, DATA, True
            )
        dialect_hooks = {
            dialect: (
                [
                    *(str(BIN / "ahp-adapter"), "hook", dialect),
                    *("--registration", str(regs["stdio backend"]), "--event", event),
                ],
                dialect_payload(dialect),
            )
            for dialect, event in PRE_TOOL_EVENT.items()
        }
        expected = {
            dialect: answer(argv, env, work, data)
            for dialect, (argv, data) in dialect_hooks.items()
        }
        run(floor, env, work, b"", False)
        server = HttpHook(regs["stdio backend"], env, work)
        bare = HttpHook(None, env, work)
        servers += [server, bare]
        processes: dict[str, Callable[[], float]] = {
            "floor: python -c pass": lambda: run(floor, env, work, b"", False),
            **{
                f"command, warm daemon ({name})": (
                    lambda argv=argv: run([*argv, "--daemon", "auto"], env, work, DATA, True)
                )
                for name, argv in hook.items()
            },
            **{
                f"command, warm daemon, {dialect}": (
                    lambda argv=argv, data=data, dialect=dialect: run(
                        [*argv, "--daemon", "auto"], env, work, data, expected[dialect]
                    )
                )
                for dialect, (argv, data) in dialect_hooks.items()
            },
        }
        http_rows: dict[str, Callable[[], float]] = {
            "http floor, keep-alive (bare uvicorn)": bare.keep_alive,
            "http hook, keep-alive (stdio backend)": server.keep_alive,
            "http hook, new connection (stdio backend)": server.new_connection,
        }
        for _ in range(args.calls):
            for name, call in processes.items():
                rows.setdefault(name, []).append(call())
        # Connect and warm the chain only now: uvicorn closes a keep-alive connection
        # left idle for 5 s, and the process phase above can take longer than that.
        for http_hook in servers:
            http_hook.reconnect()
        for call in http_rows.values():
            call()
        for _ in range(args.calls):
            for name, call in http_rows.items():
                rows.setdefault(name, []).append(call())
        for _ in range(args.calls):
            for name, call in http_rows.items():
                time.sleep(args.gap)
                rows.setdefault(f"{name}, after {args.gap * 1000:g} ms idle", []).append(call())
        for name, argv in hook.items():
            rows[f"command, in-process ({name})"] = [
                run([*argv, "--daemon", "off"], env, work, DATA, True)
                for _ in range(args.slow_calls)
            ]
        stop_daemons(runtime, regs["stdio backend"], env, work)
        rows.update(first_calls(regs["stdio backend"], env, work, args.first_calls, args.turn))
    finally:
        stop_daemons(runtime, regs["http backend"], env, work)
        for server in servers:
            server.stop()
        backend.terminate()
        backend.wait(timeout=10)
        shutil.rmtree(work, ignore_errors=True)
    figures = {name: summary(times) for name, times in rows.items()}
    floor_ms = figures["floor: python -c pass"]["median_ms"]
    checks = []
    for name in hook:
        ratio = figures[f"command, warm daemon ({name})"]["median_ms"] / floor_ms
        checks.append((f"command warm ({name}) / floor", ratio, FLOOR_RATIO, "x"))
    for dialect in PRE_TOOL_EVENT:
        ratio = figures[f"command, warm daemon, {dialect}"]["median_ms"] / floor_ms
        checks.append((f"command warm, {dialect} / floor", ratio, FLOOR_RATIO, "x"))
    cold_ms = figures["first tool call, cold (no session start)"]["median_ms"]
    turn_row = f"first tool call, after session start and a {args.turn * 1000:g} ms turn"
    first_ms = figures[turn_row]["median_ms"]
    checks.append(("first call after a turn / cold", first_ms / cold_ms, FIRST_CALL_RATIO, "x"))
    keep_alive = figures["http hook, keep-alive (stdio backend)"]["median_ms"]
    http_floor = figures["http floor, keep-alive (bare uvicorn)"]["median_ms"]
    checks.append(
        ("http hook / http floor, keep-alive", keep_alive / http_floor, HTTP_HOOK_RATIO, "x")
    )
    passed = all(value <= target for _, value, target, _ in checks)
    if args.json:
        print(json.dumps({"rows": figures, "single": single, "checks": checks, "pass": passed}))
    else:
        print(
            f"hook latency: deny-list backend, Claude Code payload, {args.calls} interleaved "
            f"rounds ({args.slow_calls} calls for in-process rows)"
        )
        for name, row in figures.items():
            print(f"  {name:<44} median {row['median_ms']:7.1f} ms   p90 {row['p90_ms']:7.1f} ms")
        for name, value in single.items():
            print(f"  {name:<44} {value * 1000:14.1f} ms")
        print(f"\n  {'check':<44} {'value':>9} {'target':>10}  result")
        for name, value, target, unit in checks:
            verdict = "PASS" if value <= target else "FAIL"
            print(f"  {name:<44} {value:8.2f}{unit:<2} <= {target:g}{unit:<3} {verdict}")
        met = "met" if first_ms <= FIRST_CALL_GOAL_MS else "NOT met on this machine"
        print(
            f"\n  the first tool call after session start and a model turn took {first_ms:.0f} ms"
            f" (goal {FIRST_CALL_GOAL_MS:.0f} ms: {met}; not checked, it measures the machine)"
        )
    return 1 if args.check and not passed else 0


if __name__ == "__main__":
    sys.exit(main())

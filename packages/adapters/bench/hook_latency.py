"""Per-call latency of ``ahp-adapter hook``, with and without the warm daemon.

Runs the hook as the native harness would (a new process per tool call, the
payload on stdin) against our deny-list backend, persistent over stdio and
over loopback HTTP, and prints the median and p90 wall time per call for:

- ``off``: the chain runs in the hook process (the backend is spawned, or the
  HTTP client built, for every call);
- ``daemon``: the hook hands the event to the warm daemon over its Unix socket
  (the first call, which starts the daemon, is reported apart as "cold");
- ``floor``: ``python -c pass``, the interpreter start-up every hook pays.

Bytecode caching is on (``PYTHONPYCACHEPREFIX`` in a temporary directory) as
in a normal install, even if the environment disables it. Absolute times on a
shared machine are noise: compare the rows of one run.

    uv run python packages/adapters/bench/hook_latency.py [--calls 20]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
RULES = REPO / "examples" / "backends" / "denylist.toml"
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


def registration(path: Path, transport: dict[str, object]) -> Path:
    doc = {
        "protocolVersion": "draft",
        "hooks": [
            {
                "id": "com.example.ahp.denylist",
                "transport": transport,
                "subscriptions": [
                    {
                        "events": ["tool.before"],
                        "mode": "intercept",
                        "timeoutMs": 5000,
                        "failurePolicy": "fail-closed",
                        "content": {"default": "metadata"},
                    }
                ],
            }
        ],
    }
    path.write_text(json.dumps(doc))
    return path


def once(argv: list[str], env: dict[str, str], cwd: Path, data: bytes) -> float:
    started = time.perf_counter()
    done = subprocess.run(argv, input=data, capture_output=True, env=env, cwd=cwd, timeout=60)
    elapsed = time.perf_counter() - started
    if argv[-1] != "pass" and b'"deny"' not in done.stdout:
        raise SystemExit(f"unexpected answer: {done.stdout!r} {done.stderr!r}")
    return elapsed


def row(name: str, times: list[float]) -> str:
    ordered = sorted(times)
    p90 = ordered[min(len(ordered) - 1, round(0.9 * (len(ordered) - 1)))]
    return f"{name:<28} median {statistics.median(times) * 1000:7.1f} ms   p90 {p90 * 1000:7.1f} ms"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=20)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="ahpb-", dir="/tmp"))
    runtime = work / "run"
    runtime.mkdir(mode=0o700)
    env = {
        **os.environ,
        "AHP_ADAPTER_RUNTIME_DIR": str(runtime),
        "PYTHONPYCACHEPREFIX": str(work / "pyc"),
        "PATH": f"{os.path.dirname(sys.executable)}{os.pathsep}{os.environ.get('PATH', '')}",
    }
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    data = json.dumps(PAYLOAD).encode()
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "ahp_backends.cli",
            "denylist",
            "--rules",
            str(RULES),
            "--http",
            "127.0.0.1:0",
        ],
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        env=env,
    )
    try:
        assert server.stderr is not None
        url = ""
        for raw in iter(server.stderr.readline, b""):
            text = raw.decode()
            if "listening on http://" in text:
                url = text.split("listening on ", 1)[1].strip() + "/"
                break
        stdio = {
            "type": "stdio",
            "command": sys.executable,
            "args": ["-m", "ahp_backends.cli", "denylist", "--rules", str(RULES)],
            "lifecycle": "persistent",
        }
        regs = {
            "stdio persistent": registration(work / "stdio.json", stdio),
            "http": registration(work / "http.json", {"type": "http", "url": url}),
        }
        floor = [sys.executable, "-c", "pass"]
        once(floor, env, work, b"")  # warm the page cache
        print(f"hook latency, {args.calls} calls each (deny-list backend, Claude Code payload)")
        print(
            row("floor: python -c pass", [once(floor, env, work, b"") for _ in range(args.calls)])
        )
        for name, reg in regs.items():
            hook = [
                sys.executable,
                "-m",
                "ahp_adapters",
                "hook",
                "claude-code",
                "--registration",
                str(reg),
                "--daemon",
            ]
            once([*hook, "off"], env, work, data)  # compile and cache bytecode first
            off = [once([*hook, "off"], env, work, data) for _ in range(args.calls)]
            cold = once([*hook, "auto"], env, work, data)
            warm = [once([*hook, "auto"], env, work, data) for _ in range(args.calls)]
            print(row(f"{name}: in-process", off))
            print(f"{name + ': daemon cold start':<28} {cold * 1000:13.1f} ms")
            print(row(f"{name}: daemon warm", warm))
        for sock in runtime.glob("d-*.sock"):
            subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "ahp_adapters",
                    "daemon",
                    "stop",
                    "--socket",
                    str(sock),
                    "--registration",
                    str(regs["http"]),
                ],
                capture_output=True,
                env=env,
                cwd=work,
                timeout=30,
            )
    finally:
        server.terminate()
        server.wait(timeout=10)
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

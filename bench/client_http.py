"""Harness-side cost of our client over HTTP with keep-alive, side by side with bare httpx.

One ``tool.before`` goes to one HTTP backend built with our server kit
(``packages/protocol/tests/backends/kit_denylist.py --http``, uvicorn on 127.0.0.1, a
port chosen by the OS and read from the server's stderr). One server process serves
every contender, each over its own keep-alive connection:

- ``bare``: a bare ``httpx.AsyncClient`` POST loop: build the request, ``json.dumps``,
  POST, ``json.loads`` (no validation): the floor on the same async HTTP stack;
- ``ours``: :meth:`ahp_protocol.client.Dispatcher.intercept` over our HTTP transport;
- ``bare-sync``: a bare blocking ``httpx.Client`` loop (for context only, no target).

Interleaved in ``--rounds`` rounds (the order rotates every round) after a warm-up,
``--calls`` per contender (default 300), half of them denied; every verdict is checked
outside the timed region.

Target (the issue bar), on medians: ours/bare <= 2. ``--check`` exits 1 on a miss;
``--json`` prints the figures.

    uv run python bench/client_http.py [--calls N] [--rounds N] [--check] [--json]
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Awaitable, Callable
from typing import IO, Any

import anyio
import httpx
from ahp_protocol.client import Dispatcher
from ahp_protocol.wire.registration import parse_registration
from client_common import (
    BACKEND,
    CAPABILITIES,
    DENY_REASON,
    HARNESS,
    SOURCE,
    TIMEOUT_S,
    command,
    request_body,
    summary,
    tool_event,
    verdict,
)

HEADERS = {"Content-Type": "application/json", "Accept": "application/json"}

TARGETS = (("ours/bare", "ours", "bare", 2.0),)  # (label, numerator, denominator, at most)
NAMES = ("bare", "ours", "bare-sync")


class Server:
    """The kit backend on 127.0.0.1; ready when it prints its address on stderr."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(BACKEND), "--http", "127.0.0.1:0"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        assert self.proc.stderr is not None
        lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._pump, args=(self.proc.stderr, lines), daemon=True).start()
        while True:
            try:
                line = lines.get(timeout=TIMEOUT_S)
            except queue.Empty:
                self.stop()
                raise SystemExit("the backend printed no address in time") from None
            if not line:
                raise SystemExit("the backend exited before listening")
            if "listening on " in line:
                self.url = line.split("listening on ", 1)[1].strip() + "/"
                return

    @staticmethod
    def _pump(stream: IO[bytes], lines: queue.Queue[str]) -> None:
        for raw in iter(stream.readline, b""):
            lines.put(raw.decode("utf-8", "replace"))
        lines.put("")

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait(timeout=TIMEOUT_S)


# -- contenders ------------------------------------------------------------------------


class Bare:
    def __init__(self, url: str) -> None:
        self.url = url
        self.client = httpx.AsyncClient(timeout=TIMEOUT_S, trust_env=False)

    async def call(self, event: dict[str, Any]) -> bool:
        response = await self.client.post(self.url, content=request_body(event), headers=HEADERS)
        return verdict("bare", event, response.content)

    async def close(self) -> None:
        await self.client.aclose()


class BareSync:
    def __init__(self, url: str) -> None:
        self.url = url
        self.client = httpx.Client(timeout=TIMEOUT_S, trust_env=False)

    async def call(self, event: dict[str, Any]) -> bool:
        response = self.client.post(self.url, content=request_body(event), headers=HEADERS)
        return verdict("bare-sync", event, response.content)

    async def close(self) -> None:
        self.client.close()


class Ours:
    def __init__(self, url: str) -> None:
        hook = {
            "id": "com.example.bench.http",
            "transport": {"type": "http", "url": url},
            "subscriptions": [
                {
                    "mode": "intercept",
                    "events": ["tool.before"],
                    "timeoutMs": 10000,
                    "failurePolicy": "fail-closed",
                    "content": {"default": "body"},
                }
            ],
        }
        reg = parse_registration({"protocolVersion": "draft", "hooks": [hook]})
        self.dispatcher = Dispatcher(
            reg, capabilities=CAPABILITIES, source=SOURCE, harness=HARNESS, environ={}
        )

    async def call(self, event: dict[str, Any]) -> bool:
        result = await self.dispatcher.intercept(event)
        if result.synthetic_denial:
            raise SystemExit(f"ours: backend failure: {[d.to_json() for d in result.diagnostics]}")
        return result.denied and result.denial is not None and result.denial.reason == DENY_REASON

    async def close(self) -> None:
        await self.dispatcher.aclose()


# -- measuring -------------------------------------------------------------------------

Call = Callable[[dict[str, Any]], Awaitable[bool]]


async def timed(name: str, call: Call, indexes: range) -> list[float]:
    times: list[float] = []
    clock = time.perf_counter_ns
    for index in indexes:
        event = tool_event(index)
        t0 = clock()
        denied = await call(event)
        t1 = clock()
        times.append((t1 - t0) / 1000.0)
        if denied != bool(index % 2):
            raise SystemExit(f"{name}: wrong verdict for call {index} ({command(index)!r})")
    return times


async def measure(url: str, calls: int, rounds: int, warmup: int) -> dict[str, list[float]]:
    per_round = max(1, calls // rounds)
    contenders: dict[str, Any] = {"bare": Bare(url), "ours": Ours(url), "bare-sync": BareSync(url)}
    times: dict[str, list[float]] = {name: [] for name in NAMES}
    try:
        with anyio.fail_after(TIMEOUT_S):
            for name, contender in contenders.items():  # connect and lazy imports first
                await timed(name, contender.call, range(warmup))
        index = warmup
        for r in range(rounds):
            order = NAMES[r % len(NAMES) :] + NAMES[: r % len(NAMES)]
            for name in order:
                with anyio.fail_after(TIMEOUT_S):
                    indexes = range(index, index + per_round)
                    times[name] += await timed(name, contenders[name].call, indexes)
            index += per_round
            gc.collect()
    finally:
        for contender in contenders.values():
            with anyio.CancelScope(shield=True), anyio.move_on_after(TIMEOUT_S):
                await contender.close()
    return times


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=300, help="per contender (>= 300)")
    parser.add_argument("--rounds", type=int, default=10, help="interleaved rounds")
    parser.add_argument("--warmup", type=int, default=30, help="untimed calls first")
    parser.add_argument("--check", action="store_true", help="exit 1 when a target is missed")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    args = parser.parse_args(argv)
    if min(args.calls, args.rounds, args.warmup) < 1:
        parser.error("counts must be positive")
    calls = max(1, args.calls // args.rounds) * args.rounds
    server = Server()
    try:
        times = anyio.run(measure, server.url, calls, args.rounds, args.warmup)
    finally:
        server.stop()
    stats = {name: summary(values) for name, values in times.items()}
    rows = []
    for label, num, den, limit in TARGETS:
        ratio = stats[num]["median"] / stats[den]["median"]
        rows.append({"target": label, "ratio": ratio, "at_most": limit, "pass": ratio <= limit})
    report: dict[str, Any] = {
        "settings": {"calls": calls, "rounds": args.rounds, "warmup": args.warmup, "unit": "us"},
        "stats": stats,
        "targets": rows,
        "pass": all(row["pass"] for row in rows),
    }
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print(f"python {sys.version.split()[0]} on {sys.platform}, {os.cpu_count()} cpus")
        print(
            f"\nOne tool.before over HTTP keep-alive, kit backend under uvicorn (us per call; "
            f"{calls} calls per contender in {args.rounds} interleaved rounds)"
        )
        print(f"  {'contender':<10}{'median':>10}{'p90':>10}")
        for name, row in stats.items():
            print(f"  {name:<10}{row['median']:>10.1f}{row['p90']:>10.1f}")
        print(f"\n  {'ratio (medians)':<16}{'value':>8}{'target':>12}  result")
        for row in rows:
            limit = f"<= {row['at_most']:.3f}"
            verdict_ = "PASS" if row["pass"] else "MISS"
            print(f"  {row['target']:<16}{row['ratio']:>8.3f}{limit:>12}  {verdict_}")
    return 1 if args.check and not report["pass"] else 0


if __name__ == "__main__":
    sys.exit(main())

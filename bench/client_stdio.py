"""Harness-side cost of our client over persistent stdio, side by side with a floor and the SDK.

One ``tool.before`` goes through one persistent stdio backend built with our server
kit (``packages/protocol/tests/backends/kit_denylist.py``: deny when the command holds
``rm -rf``, no effect otherwise). Every contender drives its own copy of that backend:

- ``bare``: a bare NDJSON client: build the request, ``json.dumps``, write a line,
  read a line, ``json.loads`` (blocking pipes, no validation): the floor;
- ``bare-async``: the same on anyio process streams (context only, no target: what
  the async I/O stack alone costs on top of the floor);
- ``ours``: :meth:`ahp_protocol.client.Dispatcher.intercept` (projection, per-request
  grant, deadline, id correlation, atomic effect validation, folding, settlement);
- ``hooks``: the harness-facing API, ``ToolCall.before()`` of
  :class:`ahp_protocol.client.Hooks` (the envelope built, the event validated against
  the wire models, then ``ours``); ``hooks-novalidate``: the same with ``validate=False``
  (context, no target: what the validation costs);
- ``chain5``: the same through a chain of five such backends (five processes);
- ``sdk``: the official SDK's client, ``agenthooksprotocol.Hooks.tool_before``.

Measured in one run, interleaved in ``--rounds`` rounds (the order rotates every
round) after a warm-up, ``--calls`` per contender (default 300), half of them denied;
every result is checked outside the timed region.

Targets (the issue bar), on medians: ours/bare <= 2; ours/sdk <= 1/20 (20x faster);
chain5/ours <= 6 ("about 5x one": a chain is linear, not worse); hooks/ours <= 1.5.
``--check`` exits 1 when one is missed; ``--json`` prints the figures; ``--profile N``
then profiles N ``Dispatcher.intercept`` calls with the I/O replaced by an in-memory backend (the
harness's own CPU per call, and cProfile by cumulative time).

    uv run python bench/client_stdio.py [--calls N] [--rounds N] [--check] [--json]
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import io
import json
import os
import pstats
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from typing import IO, Any

import anyio
from ahp_protocol.client import Dispatcher, Hooks
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

TARGETS = (
    # (label, numerator, denominator, at most)
    ("ours/bare", "ours", "bare", 2.0),
    ("ours/sdk", "ours", "sdk", 1 / 20),
    ("chain5/ours", "chain5", "ours", 6.0),
    # The harness-facing API over the dispatcher: envelope, outgoing validation, result.
    ("hooks/ours", "hooks", "ours", 1.5),
)
NAMES = ("bare", "bare-async", "ours", "hooks", "hooks-novalidate", "chain5", "sdk")


def registration(count: int) -> Any:
    hooks = [
        {
            "id": f"com.example.bench.kit{n}",
            "transport": {
                "type": "stdio",
                "command": sys.executable,
                "args": [str(BACKEND)],
                "lifecycle": "persistent",
            },
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
        for n in range(count)
    ]
    return parse_registration({"protocolVersion": "draft", "hooks": hooks})


# -- contenders ------------------------------------------------------------------------


class Bare:
    """A bare NDJSON client on blocking pipes: the floor any client pays."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(BACKEND)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.stdin: IO[bytes] = self.proc.stdin
        self.stdout: IO[bytes] = self.proc.stdout

    async def call(self, event: dict[str, Any]) -> bool:
        self.stdin.write(request_line(event))
        self.stdin.flush()
        return verdict("bare", event, self.stdout.readline())

    async def close(self) -> None:
        self.stdin.close()
        try:
            self.proc.wait(timeout=TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def request_line(event: dict[str, Any]) -> bytes:
    return request_body(event) + b"\n"


class BareAsync:
    """A bare NDJSON client on anyio process streams."""

    async def start(self) -> None:
        from anyio.streams.buffered import BufferedByteReceiveStream

        self.proc = await anyio.open_process(
            [sys.executable, str(BACKEND)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.stdin = self.proc.stdin
        self.stdout = BufferedByteReceiveStream(self.proc.stdout)

    async def call(self, event: dict[str, Any]) -> bool:
        await self.stdin.send(request_line(event))
        return verdict("bare-async", event, await self.stdout.receive_until(b"\n", 1 << 22))

    async def close(self) -> None:
        await self.stdin.aclose()
        with anyio.move_on_after(TIMEOUT_S):
            await self.proc.wait()
        await self.proc.aclose()


class Ours:
    """Our client: ``Dispatcher.intercept`` through ``count`` kit backends."""

    def __init__(self, count: int, transport: Any = None) -> None:
        self.dispatcher = Dispatcher(
            registration(count),
            capabilities=CAPABILITIES,
            source=SOURCE,
            harness=HARNESS,
            transport=transport,
        )

    async def start(self) -> None:
        await self.dispatcher.start()

    async def call(self, event: dict[str, Any]) -> bool:
        result = await self.dispatcher.intercept(event)
        if result.synthetic_denial:
            raise SystemExit(f"ours: backend failure: {[d.to_json() for d in result.diagnostics]}")
        return result.denied and result.denial is not None and result.denial.reason == DENY_REASON

    async def close(self) -> None:
        await self.dispatcher.aclose()


class OursHooks:
    """The harness-facing API: ``Hooks`` builds the envelope, validates the event (unless
    ``validate`` is off) and runs it through the same dispatcher as ``ours``."""

    def __init__(self, *, validate: bool) -> None:
        self.hooks = Hooks(
            registration(1),
            capabilities=CAPABILITIES,
            source=SOURCE,
            harness=HARNESS,
            validate=validate,
        )
        self.session = self.hooks.session(cwd="/repo", session_id="sess_123")

    async def start(self) -> None:
        await self.hooks.start()

    async def call(self, event: dict[str, Any]) -> bool:
        tool = event["tool"]
        call = self.session.tool_call(
            tool["name"], tool["input"], kind=tool["kind"], call_id=event["call"]["id"]
        )
        result = await call.before()
        if result.synthetic_denial:
            raise SystemExit(f"hooks: backend failure: {[d.to_json() for d in result.diagnostics]}")
        return result.denied and result.denial is not None and result.denial.reason == DENY_REASON

    async def close(self) -> None:
        await self.hooks.aclose()


class Sdk:
    """The official SDK's client, ``Hooks.tool_before``, against the same kit backend."""

    def __init__(self) -> None:
        from agenthooksprotocol import Hooks, capability, event

        config = registration(1).to_wire()
        capabilities = capability.HostCapabilities(
            tool_before=capability.ToolBeforeCapabilities(
                intercept=capability.ToolBeforeIntercept(allow=True, deny=True),
            ),
        )
        self.hooks = Hooks(
            config,
            source=SOURCE,
            harness=event.Harness(name=HARNESS["name"], version=HARNESS["version"]),
            capabilities=capabilities,
            inherit_environment=True,
        )

    async def start(self) -> None:
        await self.hooks.__aenter__()

    async def call(self, ev: dict[str, Any]) -> bool:
        from agenthooksprotocol import Permission, event, state

        result = await self.hooks.tool_before(
            event.ToolBeforeInput(
                call_id=ev["call"]["id"],
                name="Bash",
                input=ev["tool"]["input"],
                path="native",
                origin="native",
            ),
            initial_state=state.initial(Permission.NONE),
        )
        if list(result.diagnostics):
            raise SystemExit(f"sdk: diagnostics {list(result.diagnostics)}")
        return bool(result.permission == Permission.DENY)

    async def close(self) -> None:
        await self.hooks.aclose()


# -- measuring -------------------------------------------------------------------------

Call = Callable[[dict[str, Any]], Awaitable[bool]]


async def timed(call: Call, indexes: range) -> list[float]:
    """Time each call (microseconds); check each verdict after the clock stops."""
    times: list[float] = []
    clock = time.perf_counter_ns
    for index in indexes:
        event = tool_event(index)
        t0 = clock()
        denied = await call(event)
        t1 = clock()
        times.append((t1 - t0) / 1000.0)
        if denied != bool(index % 2):
            raise SystemExit(f"{call!r}: wrong verdict for call {index} ({command(index)!r})")
    return times


async def measure(calls: int, rounds: int, warmup: int) -> dict[str, list[float]]:
    per_round = max(1, calls // rounds)
    bare, bare_async, ours, chain5, sdk = Bare(), BareAsync(), Ours(1), Ours(5), Sdk()
    hooks, hooks_novalidate = OursHooks(validate=True), OursHooks(validate=False)
    contenders: dict[str, Any] = {
        "bare": bare,
        "bare-async": bare_async,
        "ours": ours,
        "hooks": hooks,
        "hooks-novalidate": hooks_novalidate,
        "chain5": chain5,
        "sdk": sdk,
    }
    times: dict[str, list[float]] = {name: [] for name in NAMES}
    try:
        with anyio.fail_after(TIMEOUT_S):
            for contender in (bare_async, ours, hooks, hooks_novalidate, chain5, sdk):
                await contender.start()
            for contender in contenders.values():  # spawn and lazy imports are not per call
                await timed(contender.call, range(warmup))
        index = warmup
        for r in range(rounds):
            order = NAMES[r % len(NAMES) :] + NAMES[: r % len(NAMES)]
            for name in order:
                with anyio.fail_after(TIMEOUT_S):
                    times[name] += await timed(
                        contenders[name].call, range(index, index + per_round)
                    )
            index += per_round
            gc.collect()
    finally:
        for contender in contenders.values():
            with anyio.CancelScope(shield=True), anyio.move_on_after(TIMEOUT_S):
                await contender.close()
    return times


class InMemory:
    """A transport answering like the kit backend, in memory: isolates the harness's own CPU."""

    async def request(self, message: dict[str, Any], exchange: Any = None) -> dict[str, Any]:
        command_ = message["params"]["event"]["tool"]["input"]["command"]
        deny = {"type": "deny", "reason": DENY_REASON, "code": "com.example.rm_rf"}
        effects = [deny] if "rm -rf" in command_ else []
        result = {"protocolVersion": "draft", "effects": effects}
        return {"jsonrpc": "2.0", "id": message["id"], "result": result}

    async def notify(self, message: dict[str, Any]) -> None:
        return None

    async def prepare(self) -> None:
        return None

    async def aclose(self) -> None:
        return None


async def profile(calls: int) -> str:
    """Harness CPU per ``Dispatcher.intercept`` (in-memory transport: no pipes, no backend
    process), its median, then cProfile of ``calls`` calls by cumulative time."""
    ours = Ours(1, transport=lambda _hook: InMemory())  # no I/O: the harness's CPU alone
    await ours.start()
    await timed(ours.call, range(100))
    cpu = statistics.median(await timed(ours.call, range(100, 100 + max(calls, 300))))
    profiler = cProfile.Profile()
    profiler.enable()
    await timed(ours.call, range(calls))
    profiler.disable()
    await ours.close()
    out = io.StringIO()
    print(f"\nharness CPU per intercept (in-memory transport): median {cpu:.1f} us", file=out)
    stats = pstats.Stats(profiler, stream=out)
    stats.sort_stats("cumulative").print_stats(30)
    return out.getvalue()


def evaluate(stats: dict[str, dict[str, float]]) -> list[dict[str, Any]]:
    rows = []
    for label, num, den, limit in TARGETS:
        ratio = stats[num]["median"] / stats[den]["median"]
        rows.append({"target": label, "ratio": ratio, "at_most": limit, "pass": ratio <= limit})
    return rows


def print_table(report: dict[str, Any]) -> None:
    settings = report["settings"]
    print(f"python {sys.version.split()[0]} on {sys.platform}, {os.cpu_count()} cpus")
    print(
        f"\nOne tool.before, persistent stdio, kit backend (us per call; {settings['calls']} "
        f"calls per contender in {settings['rounds']} interleaved rounds)"
    )
    print(f"  {'contender':<18}{'median':>10}{'p90':>10}")
    for name, row in report["stats"].items():
        print(f"  {name:<18}{row['median']:>10.1f}{row['p90']:>10.1f}")
    print(f"\n  {'ratio (medians)':<16}{'value':>8}{'target':>12}  result")
    for row in report["targets"]:
        mark = "PASS" if row["pass"] else "MISS"
        print(
            f"  {row['target']:<16}{row['ratio']:>8.3f}{'<= ' + format(row['at_most'], '.3f'):>12}"
            f"  {mark}"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=300, help="per contender (>= 300)")
    parser.add_argument("--rounds", type=int, default=10, help="interleaved rounds")
    parser.add_argument("--warmup", type=int, default=30, help="untimed calls first")
    parser.add_argument("--check", action="store_true", help="exit 1 when a target is missed")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument(
        "--profile",
        type=int,
        default=0,
        metavar="N",
        help="then profile N Dispatcher.intercept calls",
    )
    args = parser.parse_args(argv)
    if min(args.calls, args.rounds, args.warmup) < 1:
        parser.error("counts must be positive")
    calls = max(1, args.calls // args.rounds) * args.rounds
    times = anyio.run(measure, calls, args.rounds, args.warmup)
    stats = {name: summary(values) for name, values in times.items()}
    report: dict[str, Any] = {
        "settings": {"calls": calls, "rounds": args.rounds, "warmup": args.warmup, "unit": "us"},
        "stats": stats,
        "targets": evaluate(stats),
    }
    report["pass"] = all(row["pass"] for row in report["targets"])
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print_table(report)
    if args.profile:
        print(anyio.run(profile, args.profile))
    return 1 if args.check and not report["pass"] else 0


if __name__ == "__main__":
    sys.exit(main())

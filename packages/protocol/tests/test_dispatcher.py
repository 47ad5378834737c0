"""The dispatcher end to end: real backend processes, real loopback HTTP, recorded traffic.

Backends: ``backends/misbehave.py`` (every failure class, stdio and HTTP, ``--record``
keeps what it received, HTTP headers included), ``backends/recorder.py`` (records
every line and answers scripted effects per call), the kit backends and the official
SDK's backend (``backends/sdk_backend.py``). Readiness is a signal (a server's first
stderr line), never a sleep.

What this file shows (failure policy for every fault is ``test_failure_policy.py``, in
memory; what each fault is on each real transport, and 200 per_event calls leaving no
child behind, are ``test_transports.py``):

- a stray frame discarded while the live answer decides; a persistent backend busy
  past its deadline replaced; order and short-circuit, modifications and state carried
  forward, per-request capabilities narrowed; observers after settlement, bounded;
  ``hooks/configuration`` discovery and its reported failures; retries (same bytes,
  same deadline); no child left behind at close; bearer tokens only in
  ``Authorization``; interop with the official SDK's backend; the synchronous facade.
"""

from __future__ import annotations

import json
import logging
import os
import queue
import subprocess
import sys
import textwrap
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import IO, Any

import anyio
import pytest
from ahp_protocol.client import Diagnostic, Dispatcher, FailureClass, HookResult, SyncDispatcher
from ahp_protocol.client.engine import Route
from ahp_protocol.wire.registration import Registration, parse_registration

HERE = Path(__file__).resolve().parent
BACKENDS = HERE / "backends"
MISBEHAVE = BACKENDS / "misbehave.py"
RECORDER = BACKENDS / "recorder.py"
KIT_DENYLIST = BACKENDS / "kit_denylist.py"
KIT_CONFIGURED = BACKENDS / "kit_configured.py"
KIT_ASYNC = BACKENDS / "kit_async.py"
SDK_BACKEND = BACKENDS / "sdk_backend.py"
PY = sys.executable
F = FailureClass

SOURCE = "urn:uuid:0f6f3c55-44c1-4a8e-9d0b-2b9c8e6e4a10"
HARNESS = {"name": "dispatcher-tests", "version": "1.0"}
DENY_ONLY = {"tool.before": {"effects": ["deny"]}}
TOOL_BEFORE_ALL: dict[str, Any] = {
    "effects": ["deny", "allow", "ask", "modify", "return", "message", "flow"],
    "modify": {"input": {"replace": True, "merge": True}},
    "flow": {"operations": ["stop"]},
}
FULL = {"tool.before": TOOL_BEFORE_ALL}
SERVER_START = 30.0  # seconds: bound on a test server printing its address


# -- building registrations and events -------------------------------------------------


def intercept(
    timeout_ms: int = 3000,
    policy: str = "fail-open",
    events: Sequence[str] = ("tool.before",),
    content: dict[str, str] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    return {
        "mode": "intercept",
        "events": list(events),
        "timeoutMs": timeout_ms,
        "failurePolicy": policy,
        "content": content or {"default": "body"},
        **extra,
    }


def observe(
    events: Sequence[str] = ("tool.before",), content: dict[str, str] | None = None
) -> dict[str, Any]:
    return {"mode": "observe", "events": list(events), "content": content or {"default": "body"}}


def stdio_hook(
    hook_id: str,
    script: Path,
    *args: str,
    lifecycle: str = "persistent",
    subs: list[dict[str, Any]] | None = None,
    stdlib: bool = True,
) -> dict[str, Any]:
    """A stdio backend; stdlib scripts start with ``-I -S`` (fast), kit backends need site."""
    argv = [*(("-I", "-S") if stdlib else ()), str(script), *args]
    if lifecycle == "per_event":
        argv.append("--once")
    hook: dict[str, Any] = {
        "id": hook_id,
        "transport": {"type": "stdio", "command": PY, "args": argv, "lifecycle": lifecycle},
    }
    if subs is not None:
        hook["subscriptions"] = subs
    return hook


def http_hook(
    hook_id: str, url: str, subs: list[dict[str, Any]] | None = None, **extra: Any
) -> dict[str, Any]:
    hook: dict[str, Any] = {"id": hook_id, "transport": {"type": "http", "url": url}, **extra}
    if subs is not None:
        hook["subscriptions"] = subs
    return hook


def recorder(
    hook_id: str,
    record: Path,
    *,
    effects: list[dict[str, Any]] | None = None,
    script: list[dict[str, Any]] | None = None,
    counter: Path | None = None,
    configuration: dict[str, Any] | None = None,
    lifecycle: str = "persistent",
    subs: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    args = ["--record", str(record)]
    if effects is not None:
        args += ["--effects", json.dumps(effects)]
    if script is not None:
        args += ["--script", json.dumps(script)]
    if counter is not None:
        args += ["--counter", str(counter)]
    if configuration is not None:
        args += ["--configuration", json.dumps(configuration)]
    return stdio_hook(hook_id, RECORDER, *args, lifecycle=lifecycle, subs=subs)


def registration(*hooks: dict[str, Any]) -> Registration:
    return parse_registration({"protocolVersion": "draft", "hooks": list(hooks)})


def dispatcher(
    *hooks: dict[str, Any], capabilities: dict[str, Any] | None = None, **kwargs: Any
) -> Dispatcher:
    kwargs.setdefault("environ", dict(os.environ))
    kwargs.setdefault("source", SOURCE)
    kwargs.setdefault("harness", HARNESS)
    caps = DENY_ONLY if capabilities is None else capabilities
    return Dispatcher(registration(*hooks), capabilities=caps, **kwargs)


def tool_event(command: str = "ls -la", **extra: Any) -> dict[str, Any]:
    token = uuid.uuid4().hex
    return {
        "id": f"evt_{token}",
        "source": SOURCE,
        "type": "tool.before",
        "time": "2026-08-24T08:51:14Z",
        "harness": HARNESS,
        "session": {"id": "sess_1", "cwd": "/repo"},
        "tool": {
            "name": "Bash",
            "kind": "shell",
            "input": {"command": command},
            "origin": "native",
        },
        "call": {"id": f"call_{token}"},
        "path": "native",
        **extra,
    }


# -- reading what backends received ----------------------------------------------------


def records(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text("ascii").splitlines() if line]


def received(path: Path, method: str | None = None) -> list[dict[str, Any]]:
    """The JSON-RPC messages a recording backend received (optionally one method)."""
    return [
        r["message"]
        for r in records(path)
        if r["event"] == "message" and (method is None or r["message"].get("method") == method)
    ]


def observed(path: Path, event_type: str | None = None) -> list[dict[str, Any]]:
    """The events a recording backend was sent with ``hooks/observe``."""
    return [
        m["params"]["event"]
        for m in received(path, "hooks/observe")
        if event_type is None or m["params"]["event"]["type"] == event_type
    ]


async def delivered(path: Path, count: int, timeout: float = 10.0) -> None:
    """Wait (bounded) until a recording backend has logged ``count`` notifications.

    A notification is written to a persistent backend's pipe and not awaited; a backend
    still starting when the dispatcher closes gets only ``close_grace`` to read it. Tests
    that check what an observer logged wait for it first (the assertions say what is
    missing if it never comes)."""
    with anyio.move_on_after(timeout):
        while len(received(path, "hooks/observe")) < count:
            await anyio.sleep(0.01)


def children() -> dict[int, str]:
    """Direct children of this test process (pid -> state), zombies included, from /proc."""
    me = os.getpid()
    found: dict[int, str] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        state, ppid = stat[stat.rfind(")") + 2 :].split()[:2]
        if int(ppid) == me:
            found[int(entry)] = state
    return found


def diag(result: HookResult, backend: str, mode: str = "intercept") -> Diagnostic:
    (found,) = [d for d in result.diagnostics if d.backend == backend and d.mode == mode]
    return found


# -- servers ---------------------------------------------------------------------------


class Server:
    """A test HTTP backend process; its address is read from its stderr (the readiness signal)."""

    def __init__(self, argv: list[str], address: Callable[[str], str | None]) -> None:
        self.process = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )
        assert self.process.stderr is not None
        self.lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._pump, args=(self.process.stderr,), daemon=True).start()
        while True:
            try:
                line = self.lines.get(timeout=SERVER_START)
            except queue.Empty:
                self.stop()
                raise AssertionError(f"{argv[-3:]} printed no address in time") from None
            if not line:
                self.stop()
                raise AssertionError(f"{argv[-3:]} exited before listening")
            base = address(line)
            if base:
                self.base = base
                return

    def _pump(self, stream: IO[bytes]) -> None:  # also keeps a chatty server from blocking
        for raw in iter(stream.readline, b""):
            self.lines.put(raw.decode("utf-8", "replace"))
        self.lines.put("")

    def url(self, path: str = "") -> str:
        return f"{self.base}/{path}"

    def stop(self) -> None:
        self.process.kill()
        self.process.wait(timeout=10)


@pytest.fixture(scope="module")
def http_record(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("http") / "misbehave.jsonl"


@pytest.fixture(scope="module")
def misbehave_http(http_record: Path) -> Iterator[Server]:
    argv = [PY, "-I", "-S", str(MISBEHAVE), "--http", "127.0.0.1:0", "--record", str(http_record)]

    def address(line: str) -> str | None:
        return f"http://127.0.0.1:{int(line)}"

    server = Server(argv, address)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def sdk_http() -> Iterator[Server]:
    def address(line: str) -> str | None:
        return line.split("listening on ", 1)[1].strip() if "listening on " in line else None

    server = Server([PY, str(SDK_BACKEND), "--http", "127.0.0.1:0"], address)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module", autouse=True)
def warm_harness() -> None:
    """Import and build the client's wire models once, so that timing assertions measure
    the backends, not this process's first imports (that cost is tested on its own below)."""
    from ahp_protocol.client import transports  # noqa: F401
    from ahp_protocol.wire import content, effects, events

    hooks = dispatcher(stdio_hook("com.example.warm", RECORDER, subs=[intercept()]))
    hook = hooks.registration.hooks[0]
    assert hook.subscriptions is not None
    route = Route(hook, 0, hook.subscriptions[0])
    grant = hooks.grant("tool.before", route)
    event = tool_event()
    content.project_event(event, {"default": "body"})
    effects.check_effects("tool.before", grant, [{"type": "deny", "reason": "x"}])
    events.parse_event(event)


# ======================================================================================
# The failure matrix: every failure class x policy x transport, as data.

FAST_TIMEOUT_MS = 2500  # malformed answers must fail far sooner than this
FAST_LIMIT_MS = 800.0  # "well under the timeout": under a third of it
SLOW_TIMEOUT_MS = 400  # hang and late replies fail at this deadline ...
MARGIN_MS = 350.0  # ... and not much later
LATE_MS = SLOW_TIMEOUT_MS + 400  # when a "late" backend answers

FAILING = "com.example.failing"
FOLLOWER = "com.example.follower"


@pytest.mark.anyio
@pytest.mark.parametrize("policy", ["fail-open", "fail-closed"])
async def test_a_stray_frame_is_discarded_and_the_live_answer_decides(
    policy: str, tmp_path: Path
) -> None:
    # A response with another id, then the live deny: the deny is accepted (a real one,
    # not synthetic), within the deadline, and the diagnostic counts the discarded frame.
    rec = tmp_path / "rec.jsonl"
    args = ("stray-then-deny", "--record", str(rec))
    hook = stdio_hook(FAILING, MISBEHAVE, *args, subs=[intercept(FAST_TIMEOUT_MS, policy)])
    async with dispatcher(hook) as d:
        event = tool_event()
        result = await d.intercept(event)
        again = await d.intercept(tool_event())
    first = diag(result, FAILING)
    assert (first.outcome, first.failure, first.discarded) == ("denied", None, 1)
    assert first.latency_ms < FAST_LIMIT_MS
    assert result.permission == "deny" and result.denied_by == FAILING
    assert not result.synthetic_denial
    assert diag(again, FAILING).discarded == 1  # each exchange counts its own
    assert len({r["pid"] for r in records(rec)}) == 1  # the same child throughout


@pytest.mark.anyio
async def test_a_persistent_backend_busy_past_its_deadline_is_replaced(tmp_path: Path) -> None:
    # #26: a persistent child still busy with an expired request (here for 36 s) made every
    # later request wait behind it and time out too. The first request now fails at its
    # deadline (fail-closed: a synthetic denial), its child is killed there and then, and
    # the second is answered within its own deadline by a fresh child, whose answer is its own.
    rec, counter = tmp_path / "busy.jsonl", tmp_path / "count"
    deny = {"type": "deny", "reason": "second answer", "code": "com.example.second"}
    hook = recorder(  # call 0 (counted across processes) sleeps 36 s; call 1 denies at once
        "com.example.busy",
        rec,
        script=[{"delayMs": 36000}, {"effects": [deny]}],
        counter=counter,
        subs=[intercept(500, "fail-closed")],
    )
    before = children()
    first_event, second_event = tool_event(), tool_event()
    async with dispatcher(hook) as d:
        first = await d.intercept(first_event)
        (busy,) = [r["pid"] for r in records(rec) if r["event"] == "start"]
        assert busy not in children()  # killed and reaped before the result came back
        second = await d.intercept(second_event)
    failed = diag(first, "com.example.busy")
    assert (failed.failure, failed.policy) == (F.DEADLINE_EXCEEDED, "fail-closed")
    assert 500 <= failed.latency_ms < 500 + MARGIN_MS, failed.latency_ms
    assert first.synthetic_denial and first.permission == "deny"
    answered = diag(second, "com.example.busy")
    assert (answered.outcome, answered.failure) == ("denied", None)
    assert answered.latency_ms < 500  # within its own deadline, a spawn included
    assert second.denial is not None and second.denial.reason == "second answer"
    assert not second.synthetic_denial
    sent = {r["message"]["id"]: r["pid"] for r in records(rec) if r["event"] == "message"}
    assert list(sent) == [first_event["id"], second_event["id"]]
    assert sent[first_event["id"]] == busy != sent[second_event["id"]]  # a fresh child
    assert set(children()) <= set(before)  # no process left behind


@pytest.mark.anyio
async def test_an_interruption_ends_the_call_and_starts_no_observation(tmp_path: Path) -> None:
    rec = tmp_path / "after.jsonl"
    hooks = [
        stdio_hook("com.example.hang", MISBEHAVE, "hang", subs=[intercept(800, "fail-open")]),
        recorder("com.example.after", rec, subs=[intercept(), observe()]),
    ]
    interrupted, second = tool_event(), tool_event()
    async with dispatcher(*hooks) as d:
        started = time.perf_counter()
        with anyio.move_on_after(0.3) as scope:
            await d.intercept(interrupted)
        assert scope.cancelled_caught
        assert time.perf_counter() - started < 0.3 + 0.3
        # The dispatcher stays usable: the next event runs the whole chain again.
        result = await d.intercept(second)
        assert diag(result, "com.example.hang").failure is F.DEADLINE_EXCEEDED
        await delivered(rec, 1)
    # Only the second event reached the later backend: the interrupted one started
    # neither its intercept nor any observation (they would have been written first).
    assert [m["id"] for m in received(rec, "hooks/intercept")] == [second["id"]]
    assert [e["id"] for e in observed(rec)] == [second["id"]]


@pytest.mark.anyio
async def test_concurrent_events_each_get_their_own_answer() -> None:
    hook = stdio_hook("com.example.deny", KIT_DENYLIST, subs=[intercept(10000)], stdlib=False)
    commands = ["rm -rf /", "ls", "rm -rf ~", "git status"] * 5
    results: dict[int, HookResult] = {}
    async with dispatcher(hook) as d:

        async def one(i: int) -> None:
            results[i] = await d.intercept(tool_event(commands[i]))

        async with anyio.create_task_group() as tg:
            for i in range(len(commands)):
                tg.start_soon(one, i)
    for i, command in enumerate(commands):
        assert results[i].denied == command.startswith("rm -rf"), (i, command)
        assert not results[i].synthetic_denial
        assert results[i].event["tool"]["input"]["command"] == command


# ======================================================================================
# Order, short-circuit, modifications, state, capabilities.


@pytest.mark.anyio
@pytest.mark.parametrize(
    "stopper",
    [
        [{"type": "deny", "reason": "No.", "code": "com.example.no"}],
        [{"type": "flow", "operation": "stop", "reason": "Enough."}],
    ],
    ids=["deny", "flow-stop"],
)
async def test_short_circuit_observes_the_uncalled_and_asks_nobody_after(
    stopper: list[dict[str, Any]], tmp_path: Path
) -> None:
    a, b, c = (tmp_path / f"{n}.jsonl" for n in "abc")
    hooks = [
        recorder("com.example.a", a, effects=[], subs=[intercept()]),
        recorder("com.example.b", b, effects=stopper, subs=[intercept()]),
        recorder("com.example.c", c, effects=[], subs=[intercept()]),
        recorder("com.example.d", tmp_path / "d.jsonl", lifecycle="per_event", subs=[intercept()]),
    ]
    event = tool_event()
    d_rec = tmp_path / "d.jsonl"
    async with dispatcher(*hooks, capabilities=FULL) as d:
        result = await d.intercept(event)
        await delivered(c, 1)
        await delivered(d_rec, 1)
    # Serial, in registration order, up to the stop.
    assert [r["message"]["id"] for r in records(a) if r["event"] == "message"] == [event["id"]]
    assert records(a)[-1]["time"] <= records(b)[-1]["time"]
    assert len(received(b, "hooks/intercept")) == 1
    # Already-called interceptors get no second copy; uncalled ones never get intercept,
    # and each gets the settled event once through hooks/observe.
    assert received(a, "hooks/observe") == [] and received(b, "hooks/observe") == []
    for rec in (c, d_rec):
        assert received(rec, "hooks/intercept") == []
        assert [e["id"] for e in observed(rec)] == [event["id"]]
        assert observed(rec)[0]["source"] == SOURCE
    assert result.stopped
    outcomes = [(x.backend, x.mode, x.outcome) for x in result.diagnostics]
    stop_outcome = "denied" if stopper[0]["type"] == "deny" else "accepted"
    assert outcomes[:2] == [
        ("com.example.a", "intercept", "no_effect"),
        ("com.example.b", "intercept", stop_outcome),
    ]
    assert sorted(outcomes[2:]) == [  # observations run concurrently, in any order
        ("com.example.c", "short-circuit", "delivered"),
        ("com.example.d", "short-circuit", "delivered"),
    ]
    if stopper[0]["type"] == "deny":
        assert result.denial is not None and not result.denial.synthetic
        assert (result.denial.backend, result.denial.reason) == ("com.example.b", "No.")
    else:
        assert (result.flow, result.flow_reason, result.denial) == ("stop", "Enough.", None)


@pytest.mark.anyio
async def test_without_observation_delivery_no_backend_is_told_anything(tmp_path: Path) -> None:
    """``deliver_observations=False`` (a replay of old events): the chain decides as
    always, a short-circuit leaves the uncalled interceptor uncalled, and neither it nor
    an observer nor a ``hook.failure`` observer gets any ``hooks/observe``."""
    denier, uncalled, watcher = (tmp_path / f"{n}.jsonl" for n in ("denier", "uncalled", "obs"))
    deny = [{"type": "deny", "reason": "No.", "code": "com.example.no"}]
    hooks = [
        stdio_hook(FAILING, MISBEHAVE, "crash", subs=[intercept(policy="fail-open")]),
        recorder("com.example.denier", denier, effects=deny, subs=[intercept()]),
        recorder("com.example.uncalled", uncalled, effects=[], subs=[intercept()]),
        recorder("com.example.watcher", watcher, subs=[observe(("tool.before", "hook.failure"))]),
    ]
    event = tool_event()
    async with dispatcher(*hooks, capabilities=FULL, deliver_observations=False) as d:
        result = await d.intercept(event)
        told = await d.observe(tool_event())
    assert result.stopped and result.denial is not None and result.denial.reason == "No."
    assert [m["params"]["event"]["id"] for m in received(denier, "hooks/intercept")] == [
        event["id"]
    ]
    assert told == []
    assert [(x.backend, x.mode, x.outcome) for x in result.diagnostics] == [
        (FAILING, "intercept", "failed"),
        ("com.example.denier", "intercept", "denied"),
    ]
    for rec in (denier, uncalled, watcher):
        assert received(rec, "hooks/observe") == [], rec.name
    assert received(uncalled) == [] and received(watcher) == []


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("operation", "value", "expected"),
    [
        ("replace", {"command": "echo safe"}, {"command": "echo safe"}),
        ("merge", {"dryRun": True}, {"command": "rm -rf build", "dryRun": True}),
    ],
)
async def test_the_next_backend_sees_the_modified_event(
    operation: str, value: dict[str, Any], expected: dict[str, Any], tmp_path: Path
) -> None:
    a, b, obs = (tmp_path / f"{n}.jsonl" for n in ("a", "b", "obs"))
    modify = {"type": "modify", "target": "input", "operation": operation, "value": value}
    hooks = [
        recorder("com.example.a", a, effects=[modify], subs=[intercept()]),
        recorder("com.example.b", b, subs=[intercept()]),
        recorder("com.example.obs", obs, subs=[observe()]),
    ]
    event = tool_event("rm -rf build")
    async with dispatcher(*hooks, capabilities=FULL) as d:
        result = await d.intercept(event)
        await delivered(obs, 1)
    assert received(a, "hooks/intercept")[0]["params"]["event"] == event
    (seen,) = received(b, "hooks/intercept")
    assert seen["params"]["event"]["tool"]["input"] == expected
    assert {k: v for k, v in seen["params"]["event"].items() if k != "tool"} == {
        k: v for k, v in event.items() if k != "tool"
    }
    assert result.tool_input == expected
    assert diag(result, "com.example.a").outcome == "accepted"
    # The observer gets the settled, effective event, after the decision.
    (settled,) = observed(obs)
    assert settled == dict(result.event)
    assert records(obs)[-1]["time"] >= records(b)[-1]["time"]


@pytest.mark.anyio
async def test_state_is_carried_forward_and_invalidated_by_a_change(tmp_path: Path) -> None:
    a, b, c = (tmp_path / f"{n}.jsonl" for n in "abc")
    first = [
        {"type": "allow"},
        {"type": "return", "value": {"stdout": "cached"}},
        {"type": "message", "text": "served from cache"},
    ]
    change = {"type": "modify", "target": "input", "operation": "merge", "value": {"n": 1}}
    hooks = [
        recorder("com.example.a", a, effects=first, subs=[intercept()]),
        recorder("com.example.b", b, effects=[change], subs=[intercept()]),
        recorder("com.example.c", c, subs=[intercept()]),
    ]
    async with dispatcher(*hooks, capabilities=FULL) as d:
        result = await d.intercept(tool_event())
    initial = received(a, "hooks/intercept")[0]["params"]["state"]
    assert initial == {"permission": "none", "candidate": None, "flow": "none"}
    carried = received(b, "hooks/intercept")[0]["params"]["state"]
    assert carried == {
        "permission": "allow",
        "candidate": {"value": {"stdout": "cached"}},
        "flow": "none",
    }
    # b changed the operation: approval and the supplied result no longer hold.
    after_change = received(c, "hooks/intercept")[0]["params"]["state"]
    assert after_change == {"permission": "none", "candidate": None, "flow": "none"}
    assert (result.permission, result.candidate) == ("none", None)
    assert result.messages == ("served from cache",)


@pytest.mark.anyio
async def test_a_modification_that_changes_nothing_keeps_the_state(tmp_path: Path) -> None:
    # The official interop case (unchanged-input-preserves-candidate), across processes:
    # a merge that writes what is already there is no change, so approval and the
    # supplied result survive it and the tool is not run.
    a, b, c = (tmp_path / f"{n}.jsonl" for n in "abc")
    first = [{"type": "allow"}, {"type": "return", "value": {"stdout": "cached"}}]
    same = {"type": "modify", "target": "input", "operation": "merge", "value": {"command": "ls"}}
    hooks = [
        recorder("com.example.a", a, effects=first, subs=[intercept()]),
        recorder("com.example.b", b, effects=[same], subs=[intercept()]),
        recorder("com.example.c", c, subs=[intercept()]),
    ]
    event = tool_event("ls")
    async with dispatcher(*hooks, capabilities=FULL) as d:
        result = await d.intercept(event)
    kept = {"permission": "allow", "candidate": {"value": {"stdout": "cached"}}, "flow": "none"}
    assert received(c, "hooks/intercept")[0]["params"]["state"] == kept
    assert received(c, "hooks/intercept")[0]["params"]["event"] == event
    assert result.permission == "allow" and not result.event_changed
    assert result.candidate is not None and result.candidate.value == {"stdout": "cached"}
    assert diag(result, "com.example.b").outcome == "accepted"


@pytest.mark.anyio
async def test_per_request_capabilities_are_narrowed(
    tmp_path: Path, official_schema: Callable[[str, Any], list[str]]
) -> None:
    rec = tmp_path / "caps.jsonl"
    declared = {
        # More than the draft allows at tool.before: these must never be granted there.
        "tool.before": {
            "effects": ["deny", "allow", "modify", "flow", "message", "inject"],
            "modify": {
                "input": {"replace": True, "merge": False},
                "prompt": {"replace": True, "merge": True},
            },
            "flow": {
                "operations": ["stop", "continue"],
                "remainingContinuations": 2,
                "continuationCount": 0,
            },
            "inject": {"context": {"append": True, "deliverAt": ["now"]}},
        },
        # Declared for another event: never granted at tool.before.
        "turn.start": {
            "effects": ["deny", "modify"],
            "modify": {"prompt": {"replace": True, "merge": False}},
        },
    }
    only_deny = tmp_path / "only-deny.jsonl"
    async with dispatcher(
        recorder("com.example.caps", rec, subs=[intercept()]), capabilities=declared
    ) as d:
        await d.intercept(tool_event())
    async with dispatcher(recorder("com.example.deny", only_deny, subs=[intercept()])) as d:
        await d.intercept(tool_event())
    (message,) = received(rec, "hooks/intercept")
    assert message["params"]["capabilities"] == {
        "effects": ["deny", "allow", "modify", "flow", "message", "inject"],
        "modify": {"input": {"replace": True, "merge": False}},
        "flow": {"operations": ["stop"]},
        "inject": {"context": {"append": True, "deliverAt": ["now"]}},
    }
    assert official_schema("intercept-request.schema.json", message) == []
    (narrow,) = received(only_deny, "hooks/intercept")
    assert narrow["params"]["capabilities"] == {"effects": ["deny"]}
    assert official_schema("intercept-request.schema.json", narrow) == []


@pytest.mark.anyio
async def test_an_effect_granted_elsewhere_is_unadvertised_here(tmp_path: Path) -> None:
    """``ask`` is legal at tool.before but not declared by this host: the response fails."""
    rec = tmp_path / "ask.jsonl"
    hook = recorder("com.example.ask", rec, effects=[{"type": "ask"}], subs=[intercept()])
    async with dispatcher(hook, capabilities={"tool.before": {"effects": ["deny", "allow"]}}) as d:
        result = await d.intercept(tool_event())
    assert diag(result, "com.example.ask").failure == F.UNADVERTISED_EFFECT
    assert result.permission == "none"


@pytest.mark.anyio
async def test_an_observe_only_event_is_never_intercepted(tmp_path: Path) -> None:
    """Even when a host (wrongly) declares capabilities for an observe-only event and a
    subscription's wildcard covers it, no ``hooks/intercept`` is sent for it (draft §3.2);
    refusing such a declaration up front would do as well."""
    rec = tmp_path / "r.jsonl"
    hook = recorder("com.example.wild", rec, subs=[intercept(events=["tool.*"])])
    declared = {**DENY_ONLY, "tool.progress": {"effects": ["message"]}}
    try:
        d = dispatcher(hook, capabilities=declared)
    except ValueError:
        return  # refused at construction: fine
    progress = {
        **tool_event(),
        "type": "tool.progress",
        "partialOutput": {"id": "m1", "role": "tool", "parts": []},
        "backgrounded": False,
    }
    async with d:
        intercepts = d.intercepts("tool.progress")
        await d.intercept(progress)
    assert received(rec, "hooks/intercept") == []
    assert not intercepts


# ======================================================================================
# Observers.


@pytest.mark.anyio
async def test_a_hung_observer_is_bounded_and_never_delays_the_decision(
    misbehave_http: Server, tmp_path: Path
) -> None:
    rec = tmp_path / "deny.jsonl"
    deny = [{"type": "deny", "reason": "No.", "code": "com.example.no"}]
    hooks = [
        recorder("com.example.deny", rec, effects=deny, subs=[intercept()]),
        http_hook("com.example.hung", misbehave_http.url("hang"), subs=[observe()]),
        http_hook("com.example.fine", misbehave_http.url("ok"), subs=[observe()]),
    ]
    bound = 0.4
    async with dispatcher(*hooks, observe_timeout=bound) as d:
        await d.intercept(tool_event())  # spawn and connect outside the measurement
        started = time.perf_counter()
        result = await d.intercept(tool_event())
        elapsed = time.perf_counter() - started
        started = time.perf_counter()
        observations = await d.observe(tool_event())
        observe_elapsed = time.perf_counter() - started
    assert result.denial is not None and result.denial.reason == "No."
    assert bound <= elapsed < bound + 0.4, elapsed
    assert bound <= observe_elapsed < bound + 0.4, observe_elapsed
    hung = diag(result, "com.example.hung", "observe")
    assert (hung.outcome, hung.failure) == ("failed", F.DEADLINE_EXCEEDED)
    assert diag(result, "com.example.fine", "observe").outcome == "delivered"
    assert {(o.backend, o.outcome) for o in observations} == {
        ("com.example.hung", "failed"),
        ("com.example.fine", "delivered"),
    }


@pytest.mark.anyio
async def test_observe_notifications_carry_only_version_and_event(tmp_path: Path) -> None:
    rec = tmp_path / "obs.jsonl"
    hooks = [
        recorder("com.example.int", tmp_path / "int.jsonl", subs=[intercept()]),
        recorder("com.example.obs", rec, subs=[observe(["tool.*", "session.end"])]),
    ]
    event = tool_event()
    end = {
        "id": f"evt_{uuid.uuid4().hex}",
        "source": SOURCE,
        "type": "session.end",
        "time": "2026-08-24T09:00:00Z",
        "harness": HARNESS,
        "session": {"id": "sess_1"},
        "outcome": "completed",
        "reason": "user exit",
    }
    async with dispatcher(*hooks) as d:
        await d.intercept(event)
        assert d.intercepts("tool.before") and not d.intercepts("session.end")
        assert d.observes("session.end")
        await d.observe(end)
        await delivered(rec, 2)
    notes = received(rec, "hooks/observe")
    assert [n["params"]["event"]["id"] for n in notes] == [event["id"], end["id"]]
    for note in notes:
        assert set(note) == {"jsonrpc", "method", "params"}  # a notification: no id
        assert set(note["params"]) == {"protocolVersion", "event"}
        assert note["params"]["protocolVersion"] == "draft"


# ======================================================================================
# hooks/configuration discovery.

CONFIGURED_ID = "com.example.kit.configured"


@pytest.mark.anyio
@pytest.mark.parametrize("lifecycle", ["persistent", "per_event"])
async def test_discovery_finds_the_kit_backends_subscriptions(lifecycle: str) -> None:
    hook = stdio_hook(CONFIGURED_ID, KIT_CONFIGURED, lifecycle=lifecycle, stdlib=False)
    d = dispatcher(hook, discovery_timeout=10.0)
    try:
        started = time.perf_counter()
        with anyio.fail_after(15):
            await d.start()
        assert time.perf_counter() - started < 10.0
        assert d.configuration_diagnostics == []
        assert d.intercepts("tool.before") and d.observes("session.start")
        (route,) = d.routes("tool.before", "intercept")
        assert route.policy == "fail-closed" and route.timeout_s == 2.0  # as it advertised
        if lifecycle == "per_event":
            return  # a fresh kit process per event may not start within its own 2 s on a busy box
        denied = await d.intercept(tool_event("rm -rf /"))
        fine = await d.intercept(tool_event("git status"))
    finally:
        await d.aclose()
    assert denied.denial is not None
    assert (denied.denial.reason, denied.denial.code) == (
        "Recursive deletes are not allowed (kit).",
        "com.example.kit.rm_rf",
    )
    assert fine.permission == "none" and diag(fine, CONFIGURED_ID).outcome == "no_effect"


@pytest.mark.anyio
async def test_events_racing_the_start_wait_for_discovery() -> None:
    # Two first events at once (a daemon's first hooks): the second must not be routed
    # before discovery has found the backend's subscriptions, or it passes unjudged.
    hook = stdio_hook(CONFIGURED_ID, KIT_CONFIGURED, stdlib=False)
    results: list[HookResult] = []
    d = dispatcher(hook, discovery_timeout=10.0)

    async def first_event() -> None:
        await d.start()
        results.append(await d.intercept(tool_event("rm -rf /")))

    try:
        with anyio.fail_after(20):
            async with anyio.create_task_group() as tg:
                tg.start_soon(first_event)
                tg.start_soon(first_event)
    finally:
        await d.aclose()
    assert [r.denied for r in results] == [True, True]


@pytest.mark.anyio
async def test_prepare_starts_a_persistent_backend_before_any_event() -> None:
    hook = stdio_hook("com.example.deny", KIT_DENYLIST, subs=[intercept(10000)], stdlib=False)
    before = set(children())
    async with dispatcher(hook) as d:
        with anyio.fail_after(10):
            await d.prepare()
        started = set(children()) - before
        assert len(started) == 1  # spawned, and nothing was sent to it yet
        denied = await d.intercept(tool_event("rm -rf /"))
        assert set(children()) - before == started  # the event went to that one process
    assert denied.denied and not denied.synthetic_denial


@pytest.mark.anyio
async def test_discovery_request_is_exactly_version_only(tmp_path: Path) -> None:
    rec = tmp_path / "conf.jsonl"
    configuration = {"subscriptions": [intercept(2000, "fail-closed")]}
    async with dispatcher(recorder("com.example.conf", rec, configuration=configuration)) as d:
        assert d.configuration_diagnostics == []
        result = await d.intercept(tool_event())
    (request,) = received(rec, "hooks/configuration")
    assert request["params"] == {"protocolVersion": "draft"}
    assert isinstance(request["id"], str) and request["id"]
    assert diag(result, "com.example.conf").outcome == "no_effect"
    assert len({r["pid"] for r in records(rec) if r["event"] == "start"}) == 1  # same child


DISCOVERY_FAILURES = [
    # (backend, its failure class)
    pytest.param(
        lambda tmp: stdio_hook("com.example.noconf", KIT_ASYNC, stdlib=False),
        F.RPC_ERROR,
        id="no-configuration-method",
    ),
    pytest.param(
        lambda tmp: stdio_hook("com.example.noconf", MISBEHAVE, "hang"),
        F.DEADLINE_EXCEEDED,
        id="hang",
    ),
    pytest.param(
        lambda tmp: stdio_hook("com.example.noconf", MISBEHAVE, "garbage"),
        F.MALFORMED_OUTPUT,
        id="garbage",
    ),
    pytest.param(
        lambda tmp: recorder(
            "com.example.noconf",
            tmp / "r.jsonl",
            configuration={"subscriptions": [{"mode": "intercept", "events": ["tool.before"]}]},
        ),
        F.CONFIGURATION_FAILED,
        id="invalid-configuration",
    ),
    pytest.param(
        lambda tmp: recorder(
            "com.example.noconf",
            tmp / "r.jsonl",
            configuration={"subscriptions": [intercept(events=["model.request.before"])]},
        ),
        F.CONFIGURATION_FAILED,
        id="no-applicable-subscription",
    ),
]


@pytest.mark.anyio
@pytest.mark.parametrize(("make", "failure"), DISCOVERY_FAILURES)
async def test_failed_discovery_is_reported_never_silent(
    make: Callable[[Path], dict[str, Any]],
    failure: FailureClass,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    bound = 1.5
    d = dispatcher(make(tmp_path), discovery_timeout=bound)
    try:
        started = time.perf_counter()
        await d.start()
        elapsed = time.perf_counter() - started
        result = await d.intercept(tool_event("rm -rf /"))
    finally:
        await d.aclose()
    assert elapsed < bound + 0.5
    (reported,) = d.configuration_diagnostics
    assert (reported.backend, reported.outcome, reported.failure) == (
        "com.example.noconf",
        "failed",
        failure,
    )
    assert reported.detail and "hooks/configuration" in reported.detail
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert any("com.example.noconf" in r.getMessage() for r in warnings), caplog.text
    assert not d.intercepts("tool.before")
    assert result.diagnostics == () and result.permission == "none"


# ======================================================================================
# Retries: only within the original deadline, with the same ids and content.


@pytest.mark.anyio
@pytest.mark.parametrize("lifecycle", ["persistent", "per_event"])
async def test_a_crash_is_retried_once_with_the_identical_message(
    lifecycle: str, tmp_path: Path
) -> None:
    rec, counter = tmp_path / "r.jsonl", tmp_path / "count"
    deny = {"type": "deny", "reason": "second try", "code": "com.example.retry"}
    hook = recorder(
        "com.example.flaky",
        rec,
        script=[{"crash": True}, {"effects": [deny]}],
        counter=counter,
        lifecycle=lifecycle,
        subs=[intercept(3000, "fail-closed")],
    )
    event = tool_event()
    async with dispatcher(hook) as d:
        result = await d.intercept(event)
    assert result.denial is not None and result.denial.reason == "second try"
    assert not result.synthetic_denial
    assert diag(result, "com.example.flaky").outcome == "denied"
    sent = [r for r in records(rec) if r["event"] == "message"]
    assert len(sent) == 2
    assert sent[0]["raw"] == sent[1]["raw"]  # byte for byte: same ids, same content
    assert sent[0]["message"]["id"] == event["id"]
    assert sent[0]["pid"] != sent[1]["pid"]  # the crashed child was replaced


@pytest.mark.anyio
async def test_a_retry_never_extends_the_deadline(tmp_path: Path) -> None:
    rec, counter = tmp_path / "r.jsonl", tmp_path / "count"
    hook = recorder(
        "com.example.flaky",
        rec,
        script=[{"crash": True}, {"hang": True}],
        counter=counter,
        subs=[intercept(600, "fail-closed")],
    )
    async with dispatcher(hook) as d:
        result = await d.intercept(tool_event())
    first = diag(result, "com.example.flaky")
    assert first.failure == F.DEADLINE_EXCEEDED and result.synthetic_denial
    assert 600 <= first.latency_ms < 600 + MARGIN_MS
    assert len(received(rec, "hooks/intercept")) == 2


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("script", "outcome"),
    [
        ([{"effects": [{"type": "deny", "reason": "No."}]}], "denied"),
        ([{"effects": []}], "no_effect"),
        ([{"effects": [{"type": "teleport"}]}], "failed"),
    ],
    ids=["deny", "empty", "rejected"],
)
async def test_answers_are_never_retried(
    script: list[dict[str, Any]], outcome: str, tmp_path: Path
) -> None:
    rec, counter = tmp_path / "r.jsonl", tmp_path / "count"
    hook = recorder("com.example.once", rec, script=script, counter=counter, subs=[intercept()])
    async with dispatcher(hook) as d:
        result = await d.intercept(tool_event())
    assert diag(result, "com.example.once").outcome == outcome
    assert len(received(rec, "hooks/intercept")) == 1


@pytest.mark.anyio
async def test_malformed_output_is_not_retried(tmp_path: Path) -> None:
    rec = tmp_path / "m.jsonl"
    hook = stdio_hook(
        "com.example.bad", MISBEHAVE, "garbage", "--record", str(rec), subs=[intercept()]
    )
    async with dispatcher(hook) as d:
        result = await d.intercept(tool_event())
    assert diag(result, "com.example.bad").failure == F.MALFORMED_OUTPUT
    assert len(received(rec, "hooks/intercept")) == 1


# ======================================================================================
# Processes: nothing outlives close().


@pytest.mark.anyio
async def test_no_child_outlives_close(tmp_path: Path) -> None:
    before = children()
    hooks = [
        stdio_hook("com.example.hang", MISBEHAVE, "hang", subs=[intercept(300)]),
        stdio_hook(
            "com.example.linger", MISBEHAVE, "linger", lifecycle="per_event", subs=[observe()]
        ),
        recorder("com.example.rec", tmp_path / "r.jsonl", subs=[intercept(), observe()]),
        recorder(
            "com.example.pe",
            tmp_path / "p.jsonl",
            lifecycle="per_event",
            subs=[intercept(), observe()],
        ),
    ]
    d = dispatcher(*hooks)
    async with d:
        for _ in range(3):
            await d.intercept(tool_event())
        assert len(set(children()) - set(before)) >= 3  # persistent ones and lingerers
        with anyio.fail_after(5):
            await d.aclose()
        assert set(children()) <= set(before), children()
        with pytest.raises(RuntimeError):
            await d.intercept(tool_event())
    assert set(children()) <= set(before)


# ======================================================================================
# Credentials: a bearer token only ever travels in Authorization.


@pytest.mark.anyio
async def test_bearer_token_appears_only_in_authorization(
    misbehave_http: Server, http_record: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    token = "tok-" + uuid.uuid4().hex
    bearer = {"authentication": {"type": "bearer", "tokenEnv": "AHP_TEST_TOKEN"}}
    url = misbehave_http.url
    hooks = [
        http_hook("com.example.ok", url("ok"), [intercept()], **bearer),
        http_hook("com.example.e500", url("http-500"), [intercept()], **bearer),
        http_hook(
            "com.example.audit", url("ok"), [observe(["tool.before", "hook.failure"])], **bearer
        ),
        http_hook(
            "com.example.garbage", url("garbage"), [intercept(policy="fail-closed")], **bearer
        ),
        http_hook("com.example.later", url("deny"), [intercept()], **bearer),
    ]
    event = tool_event()
    d = dispatcher(*hooks, environ={"AHP_TEST_TOKEN": token, "PATH": os.environ["PATH"]})
    shown: list[str] = [repr(d), repr(d.registration), json.dumps(d.registration.to_wire())]
    async with d:
        result = await d.intercept(event)
        observations = await d.observe(tool_event())
    assert result.synthetic_denial
    assert {x.backend for x in result.diagnostics} == {h["id"] for h in hooks}
    shown += [json.dumps(result.to_json()), repr(result), repr(observations)]
    shown += [repr(x) for x in d.configuration_diagnostics]
    shown += [caplog.text, *(repr(r.__dict__) for r in caplog.records)]
    for text in shown:
        assert token not in text
    ours = [
        r
        for r in records(http_record)
        if r["event"] == "message"
        and event["id"]
        in (
            r["message"]["params"]["event"]["id"],
            r["message"]["params"]["event"].get("parentEventId"),
        )
    ]
    # ok + 500 + garbage intercepts, audit observe + 2 hook.failure, later short-circuit.
    assert len(ours) == 7
    for entry in ours:
        headers = {k.lower(): v for k, v in entry["headers"]}
        assert headers["authorization"] == f"Bearer {token}"
        rest = {**entry, "headers": {k: v for k, v in headers.items() if k != "authorization"}}
        assert token not in json.dumps(rest)


# ======================================================================================
# Interop: our client drives the official SDK's backend.

SDK_DENY = ("Recursive deletes are not allowed (sdk).", "com.example.sdk.rm_rf")


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("kind", "discover"),
    [
        ("persistent", False),
        ("per_event", False),
        ("http", False),
        # Discovered subscriptions carry the SDK backend's own deadline (20 s, so a loaded
        # machine cannot turn a healthy answer into a synthetic denial); discovery is shown
        # on the long-lived transports.
        ("persistent", True),
        ("http", True),
    ],
    ids=["persistent", "per_event", "http", "persistent-discovered", "http-discovered"],
)
async def test_our_client_drives_the_sdk_backend(
    kind: str, discover: bool, request: pytest.FixtureRequest
) -> None:
    subs = None if discover else [intercept(20000, "fail-closed")]
    if kind == "http":
        server: Server = request.getfixturevalue("sdk_http")
        hook = http_hook("com.example.sdk", server.url(), subs)
    else:
        hook = stdio_hook("com.example.sdk", SDK_BACKEND, lifecycle=kind, subs=subs, stdlib=False)
    caps = {"tool.before": {"effects": ["deny", "allow"]}}
    # A loaded machine (the whole suite beside it) has made the SDK server's first answer
    # miss the 5 s default discovery bound: discovery is shown here, not its bound.
    async with dispatcher(hook, capabilities=caps, discovery_timeout=30.0) as d:
        assert d.configuration_diagnostics == []
        if discover:
            (route,) = d.routes("tool.before", "intercept")
            assert route.policy == "fail-closed" and route.timeout_s == 20.0  # as advertised
        denied = [await d.intercept(tool_event("rm -rf /tmp/build"))]
        fine = await d.intercept(tool_event("ls -la"))
        if kind != "per_event":  # a second match on the same process or connection
            denied.append(await d.intercept(tool_event("rm   -rf ~")))
    for result in denied:
        assert result.denial is not None and not result.synthetic_denial
        assert (result.denial.reason, result.denial.code) == SDK_DENY
        assert result.denial.backend == "com.example.sdk"
    assert fine.permission == "none" and fine.denial is None
    assert diag(fine, "com.example.sdk").outcome == "no_effect"


# ======================================================================================
# The synchronous facade.


def test_sync_dispatcher_from_plain_code(tmp_path: Path) -> None:
    before = children()
    rec = tmp_path / "obs.jsonl"
    hooks = registration(
        stdio_hook("com.example.deny", KIT_DENYLIST, subs=[intercept(20000)], stdlib=False),
        recorder("com.example.obs", rec, subs=[observe(["tool.before", "session.end"])]),
    )
    with SyncDispatcher(hooks, capabilities=DENY_ONLY, source=SOURCE, harness=HARNESS) as sync:
        denied = sync.intercept(tool_event("rm -rf /"))
        fine = sync.intercept(tool_event("ls"))
        observations = sync.observe(
            {**tool_event(), "type": "session.end", "outcome": "completed", "reason": "done"}
        )
        assert sync.dispatcher.intercepts("tool.before")
        deadline = time.monotonic() + 10  # the observer logs what it was sent (bounded wait)
        while len(received(rec, "hooks/observe")) < 3 and time.monotonic() < deadline:
            time.sleep(0.01)
    assert denied.denial is not None and denied.denial.reason == "No recursive deletes."
    assert fine.permission == "none"
    assert [o.outcome for o in observations] == ["delivered"]
    assert [e["type"] for e in observed(rec)] == ["tool.before", "tool.before", "session.end"]
    assert set(children()) <= set(before)


def test_sync_dispatcher_close_stops_its_thread() -> None:
    threads = set(threading.enumerate())
    hooks = registration(stdio_hook("com.example.x", RECORDER, subs=[intercept()]))
    sync = SyncDispatcher(hooks, capabilities=DENY_ONLY)
    assert len(set(threading.enumerate()) - threads) >= 1  # the event loop thread
    assert sync.intercept(tool_event()).permission == "none"
    sync.close()
    sync.close()  # idempotent
    # The loop thread is gone at once. What may outlive close() by a moment: asyncio's
    # waitpid thread for the backend process just killed (it ends once that is reaped),
    # and an AnyIO worker thread finishing its last job (it ends with its loop; seen on a
    # loaded machine). Both must end: joined, then none may be left.
    extra = set(threading.enumerate()) - threads
    lingering = ("asyncio-waitpid", "AnyIO worker thread")
    assert all(t.name.startswith(lingering) for t in extra), extra
    for thread in extra:
        thread.join(timeout=10)
    assert set(threading.enumerate()) <= threads


# ======================================================================================
# A fresh harness process: the first event's deadline is the backend's, not our imports'.

FRESH = textwrap.dedent(
    """
    import json, sys, time, anyio
    from ahp_protocol.client import Dispatcher
    from ahp_protocol.wire.registration import parse_registration

    reg = parse_registration(json.loads(sys.argv[1]))
    event = json.loads(sys.argv[2])

    async def main():
        caps = {"tool.before": {"effects": ["deny"]}}
        async with Dispatcher(reg, capabilities=caps) as hooks:
            await hooks.start()
            before = set(sys.modules)
            result = await hooks.intercept(event)
            during = sorted(set(sys.modules) - before)
        print(json.dumps({"result": result.to_json(), "imported": during}))

    anyio.run(main)
    """
)


def test_first_event_in_a_fresh_harness_is_not_charged_for_its_imports(tmp_path: Path) -> None:
    """The first event's deadline belongs to the backend. In a fresh harness process, after
    ``start()``, the first ``intercept`` must not import the transports, httpx or the wire
    models: those imports (120-700 ms measured on 2 cores) ran inside the first
    interceptor's ``timeoutMs``, so a healthy fail-closed backend with a 300 ms deadline
    denied the first tool call of a session."""
    hook = recorder("com.example.fast", tmp_path / "r.jsonl", subs=[intercept(5000, "fail-closed")])
    doc = {"protocolVersion": "draft", "hooks": [hook]}
    done = subprocess.run(
        [PY, "-c", FRESH, json.dumps(doc), json.dumps(tool_event())],
        capture_output=True,
        timeout=30,
        check=True,
    )
    report = json.loads(done.stdout)
    assert report["result"]["diagnostics"][0]["outcome"] == "no_effect"
    heavy = [
        m
        for m in report["imported"]
        if m.split(".")[0] in ("ahp_protocol", "httpx", "httpcore", "pydantic", "pydantic_core")
    ]
    assert heavy == [], f"imported inside the first deadline: {heavy}"


# ======================================================================================
# A stdio-only install: ahp-protocol without its http extra (no httpx).

NO_HTTPX = textwrap.dedent(
    """
    import json, sys
    sys.modules["httpx"] = None  # what an install without the http extra looks like
    import anyio
    from ahp_protocol.client import Dispatcher, RegistrationError
    from ahp_protocol.wire.registration import parse_registration

    stdio_doc, http_doc, event = (json.loads(arg) for arg in sys.argv[1:4])
    caps = {"tool.before": {"effects": ["deny"]}}

    async def main():
        async with Dispatcher(parse_registration(stdio_doc), capabilities=caps) as hooks:
            outcome = (await hooks.intercept(event)).diagnostics[0].outcome
        try:
            async with Dispatcher(parse_registration(http_doc), capabilities=caps) as hooks:
                await hooks.intercept(event)
            error = None
        except RegistrationError as exc:  # refused when built: the hook and the extra
            error = str(exc)
        print(json.dumps({"stdio": outcome, "http": error}))

    anyio.run(main)
    """
)


def test_without_the_http_extra_stdio_works_and_http_names_the_extra(tmp_path: Path) -> None:
    """httpx comes with ``ahp-protocol[http]``: a stdio-only harness imports the client and
    runs its stdio backends without it, and an HTTP backend fails with an ImportError that
    says which extra to install (not a bare "No module named 'httpx'")."""
    stdio_doc = {
        "protocolVersion": "draft",
        "hooks": [recorder("com.example.local", tmp_path / "r.jsonl", subs=[intercept(5000)])],
    }
    http_doc = {
        "protocolVersion": "draft",
        "hooks": [http_hook("com.example.web", "http://127.0.0.1:9/ahp", subs=[intercept()])],
    }
    args = [json.dumps(stdio_doc), json.dumps(http_doc), json.dumps(tool_event())]
    done = subprocess.run([PY, "-c", NO_HTTPX, *args], capture_output=True, timeout=30, check=True)
    report = json.loads(done.stdout)
    assert report["stdio"] == "no_effect"
    assert report["http"] == (
        "hooks[0].transport: com.example.web is an HTTP backend, which needs httpx: "
        "install the http extra (pip install 'ahp-protocol[http]')"
    )

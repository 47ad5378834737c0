"""The fake backend: every fault mode as the shared table says, scenario replay, the server role.

Real processes over stdio and real loopback HTTP; nothing of ours is mocked. Waiting for
readiness waits on a file or a line, never on a sleep.
"""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from ahp_conformance import contract, fake_backend, scenarios
from ahp_conformance.fixtures import interop_dir
from ahp_protocol.wire.messages import validate_message

import kit_testing

FAKE = (sys.executable, "-m", "ahp_conformance.fake_backend")
SDK_CLIENT = (sys.executable, "-m", "agenthooksprotocol.interop", "client")
WAIT_S = 20.0
"""The longest any expected line may take to arrive on a loaded machine."""
QUIET_S = 0.6
"""How long a mode that must not answer is watched (a bounded negative check)."""


def intercept(event_id: str = "evt-1", effects: tuple[str, ...] = ("deny",)) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": event_id,
        "method": "hooks/intercept",
        "params": {
            "protocolVersion": "draft",
            "event": {
                "id": event_id,
                "source": "urn:example:harness",
                "type": "tool.before",
                "time": "2026-01-01T00:00:00Z",
                "harness": {"name": "h", "version": "1"},
                "session": {"id": "s"},
                "call": {"id": "c"},
                "path": "native",
                "tool": {"origin": "native", "name": "write", "kind": "file_write", "input": {}},
            },
            "capabilities": {"effects": list(effects)},
        },
    }


DISCOVERY = {
    "jsonrpc": "2.0",
    "id": "discovery",
    "method": "hooks/capabilities",
    "params": {"protocolVersion": "draft"},
}


def observe(event_id: str = "evt-o") -> dict[str, Any]:
    event = intercept(event_id)["params"]["event"]
    return {
        "jsonrpc": "2.0",
        "method": "hooks/observe",
        "params": {"protocolVersion": "draft", "event": event},
    }


def frame(message: Any) -> bytes:
    return json.dumps(message).encode() + b"\n"


class Stdio:
    """A fake backend over stdio: lines out arrive on a queue (bytes; ``b""`` at EOF)."""

    def __init__(self, *args: str) -> None:
        self.process = subprocess.Popen(
            [*FAKE, *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        self.lines: queue.Queue[bytes] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for raw in iter(lambda: self.process.stdout.readline(8 * 1024 * 1024), b""):  # type: ignore[union-attr]
            self.lines.put(raw)
        self.lines.put(b"")

    def send(self, *messages: Any) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(b"".join(frame(m) for m in messages))
        self.process.stdin.flush()

    def next(self, timeout: float = WAIT_S) -> bytes:
        return self.lines.get(timeout=timeout)

    def quiet(self) -> bool:
        """True when nothing arrives for :data:`QUIET_S`."""
        try:
            self.lines.get(timeout=QUIET_S)
        except queue.Empty:
            return True
        return False

    def close(self) -> int:
        assert self.process.stdin is not None
        if not self.process.stdin.closed:
            self.process.stdin.close()
        try:
            return self.process.wait(timeout=WAIT_S)
        finally:
            if self.process.poll() is None:
                self.process.kill()
                self.process.wait()


@pytest.fixture
def stdio() -> Iterator[list[Stdio]]:
    started: list[Stdio] = []
    yield started
    for fake in started:
        if fake.process.poll() is None:
            fake.process.kill()
            fake.process.wait()


def start(started: list[Stdio], *args: str) -> Stdio:
    fake = Stdio(*args)
    started.append(fake)
    return fake


def answered(fake: Stdio, message: Any) -> dict[str, Any]:
    """Discovery first (valid in every mode), then ``message``; the reply to discovery checked."""
    fake.send(DISCOVERY, message)
    reply = json.loads(fake.next())
    assert validate_message(reply) == "capabilities-response"
    assert reply["id"] == "discovery"
    return reply


# -- stdio fault modes ----------------------------------------------------------------


def test_no_fault_answers_no_effect_and_exits_on_stdin_eof(stdio: list[Stdio]) -> None:
    fake = start(stdio)
    answered(fake, intercept())
    reply = json.loads(fake.next())
    assert reply == {
        "jsonrpc": "2.0",
        "id": "evt-1",
        "result": {"protocolVersion": "draft", "effects": []},
    }
    assert validate_message(reply) == "intercept-response"
    assert fake.close() == 0


def test_deny_answers_a_valid_deny_only_where_deny_is_advertised(stdio: list[Stdio]) -> None:
    fake = start(stdio, "--fault", "deny")
    answered(fake, intercept("a"))
    reply = json.loads(fake.next())
    assert reply["result"]["effects"][0]["type"] == "deny"
    assert validate_message(reply) == "intercept-response"
    fake.send(intercept("b", effects=("message",)))
    assert json.loads(fake.next())["result"]["effects"] == []


def test_notifications_are_never_answered_unless_the_mode_says_so(stdio: list[Stdio]) -> None:
    quiet = start(stdio)
    quiet.send(observe(), intercept("after"))
    assert json.loads(quiet.next())["id"] == "after"  # the observe got nothing
    loud = start(stdio, "--fault", "reply-to-notifications")
    loud.send(observe())
    reply = json.loads(loud.next())
    assert reply["id"] is None and "result" in reply


def test_everything_but_a_valid_intercept_is_answered_well(stdio: list[Stdio]) -> None:
    fake = start(stdio, "--fault", "garbage")
    answered(fake, {"jsonrpc": "2.0", "id": 7, "method": "hooks/nothing", "params": {}})
    assert json.loads(fake.next())["error"]["code"] == -32601
    fake.send({**intercept("x"), "id": "y"})  # id != event.id
    assert json.loads(fake.next())["error"]["code"] == -32602
    fake.send(intercept("ok"))
    assert fake.next() == fake_backend.GARBAGE


def lines_of(fake: Stdio, count: int) -> list[bytes]:
    return [fake.next() for _ in range(count)]


@pytest.mark.parametrize(
    ("mode", "check"),
    [
        ("garbage", lambda out: out == [fake_backend.GARBAGE]),
        ("non-utf8", lambda out: len(out) == 1 and not _utf8(out[0])),
        ("wrong-id", lambda out: json.loads(out[0])["id"] != "evt-1"),
        ("rpc-error", lambda out: json.loads(out[0])["error"]["code"] == -32004),
        ("unknown-effect", lambda out: _effects(out[0]) == [fake_backend.UNKNOWN_EFFECT]),
        ("unadvertised-effect", lambda out: _effects(out[0])[0]["type"] == "ask"),
        ("no-effects", lambda out: json.loads(out[0])["result"] == {"protocolVersion": "draft"}),
        ("no-version", lambda out: json.loads(out[0])["result"] == {"effects": []}),
        ("oversized", lambda out: len(out[0]) > fake_backend.MAX_FRAME_BYTES and _valid(out[0])),
        (
            "leak-exception",
            lambda out: (
                "Traceback" in json.loads(out[0])["error"]["message"]
                and json.loads(out[0])["error"]["code"] == -32004
            ),
        ),
    ],
)
def test_a_fault_mode_sends_what_the_table_says(stdio: list[Stdio], mode: str, check: Any) -> None:
    fake = start(stdio, "--fault", mode)
    answered(fake, intercept())
    out = lines_of(fake, 1)
    assert check(out), out[0][:300]
    assert fake.quiet()  # exactly one frame


def _utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _effects(data: bytes) -> list[Any]:
    effects = json.loads(data)["result"]["effects"]
    assert isinstance(effects, list)
    return effects


def _valid(data: bytes) -> bool:
    return validate_message(json.loads(data)) == "intercept-response"


def test_stray_frame_then_the_correct_reply(stdio: list[Stdio]) -> None:
    fake = start(stdio, "--fault", "stray-frame")
    answered(fake, intercept())
    stray, live = (json.loads(x) for x in lines_of(fake, 2))
    assert stray["id"] != "evt-1"
    assert live == {
        "jsonrpc": "2.0",
        "id": "evt-1",
        "result": {"protocolVersion": "draft", "effects": []},
    }


def test_multi_line_and_stdout_noise(stdio: list[Stdio]) -> None:
    pretty = start(stdio, "--fault", "multi-line")
    answered(pretty, intercept())
    first = pretty.next()
    assert first.strip() == b"{"  # the reply is spread over several lines
    noisy = start(stdio, "--fault", "stdout-noise")
    answered(noisy, intercept())
    assert noisy.next() == fake_backend.NOISE
    assert json.loads(noisy.next())["id"] == "evt-1"


def test_hang_never_answers_and_still_exits_on_eof(stdio: list[Stdio]) -> None:
    fake = start(stdio, "--fault", "hang")
    answered(fake, intercept())
    assert fake.quiet()
    assert fake.close() == 0


def test_crash_exits_with_status_3_without_answering(stdio: list[Stdio]) -> None:
    fake = start(stdio, "--fault", "crash")
    answered(fake, intercept())
    assert fake.next() == b""  # EOF, no answer
    assert fake.process.wait(timeout=WAIT_S) == fake_backend.CRASH_STATUS


def test_late_answers_a_valid_deny_after_the_delay(stdio: list[Stdio]) -> None:
    fake = start(stdio, "--fault", "late", "--delay-ms", "400")
    answered(fake, intercept())
    sent = time.monotonic()
    reply = json.loads(fake.next())
    assert time.monotonic() - sent >= 0.4  # never earlier than the delay
    assert reply["result"]["effects"][0]["type"] == "deny"


def test_record_holds_every_received_message_with_its_arrival_time(
    stdio: list[Stdio], tmp_path: Path
) -> None:
    record = tmp_path / "received.jsonl"
    before = time.time()
    fake = start(stdio, "--record", str(record))
    fake.send(DISCOVERY, observe(), intercept())
    fake.next()
    fake.next()
    assert fake.close() == 0
    entries = [json.loads(x) for x in record.read_text().splitlines()]
    assert [e["message"].get("method") for e in entries] == [
        "hooks/capabilities",
        "hooks/observe",
        "hooks/intercept",
    ]
    assert all(e["time"] >= before - 1 and e["transport"] == "stdio" for e in entries)
    assert entries[2]["message"] == intercept()


# -- HTTP -----------------------------------------------------------------------------


class Http:
    """A fake backend over loopback HTTP, its URL read from the ready file."""

    def __init__(self, tmp_path: Path, *args: str) -> None:
        ready = tmp_path / f"ready-{len(list(tmp_path.iterdir()))}.json"
        self.process = subprocess.Popen(
            [*FAKE, "--http", "127.0.0.1:0", "--ready-file", str(ready), *args],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        deadline = time.monotonic() + WAIT_S
        while not ready.is_file():
            assert self.process.poll() is None, self.process.stderr.read()  # type: ignore[union-attr]
            assert time.monotonic() < deadline, "the fake backend never became ready"
            time.sleep(0.02)  # polling the ready file, the signal itself
        self.url = json.loads(ready.read_text())["endpoint"]

    def post(self, message: Any, timeout: float = WAIT_S) -> httpx.Response:
        return httpx.post(self.url, content=frame(message), timeout=timeout)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
        self.process.wait(timeout=WAIT_S)


@pytest.fixture
def http(tmp_path: Path) -> Iterator[Any]:
    started: list[Http] = []

    def make(*args: str) -> Http:
        server = Http(tmp_path, *args)
        started.append(server)
        return server

    yield make
    for server in started:
        server.stop()


def test_http_no_fault_deny_and_notifications(http: Any) -> None:
    plain = http()
    response = plain.post(intercept())
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    assert response.json()["result"]["effects"] == []
    assert plain.post(observe()).status_code == 202
    assert plain.post(observe()).content == b""
    deny = http("--fault", "deny")
    assert deny.post(intercept()).json()["result"]["effects"][0]["type"] == "deny"
    loud = http("--fault", "reply-to-notifications")
    noisy = loud.post(observe())
    assert noisy.status_code == 200 and noisy.json()["id"] is None


@pytest.mark.parametrize(
    ("mode", "check"),
    [
        ("garbage", lambda body: body == fake_backend.GARBAGE.rstrip(b"\n")),
        ("non-utf8", lambda body: not _utf8(body)),
        ("oversized", lambda body: len(body) > fake_backend.MAX_FRAME_BYTES),
        ("unknown-effect", lambda body: _effects(body) == [fake_backend.UNKNOWN_EFFECT]),
        ("stray-frame", lambda body: json.loads(body)["id"] != "evt-1"),
        ("multi-line", lambda body: b"\n" in body and _valid(body)),  # not a fault over HTTP
    ],
)
def test_http_fault_modes_apply_to_the_reply_body(http: Any, mode: str, check: Any) -> None:
    response = http("--fault", mode).post(intercept())
    assert response.status_code == 200
    assert check(response.content), response.content[:300]


def test_http_hang_holds_the_connection_and_crash_drops_it(http: Any) -> None:
    with pytest.raises(httpx.ReadTimeout):
        http("--fault", "hang").post(intercept(), timeout=QUIET_S)
    crashing = http("--fault", "crash")
    with pytest.raises(httpx.TransportError):
        crashing.post(intercept())
    assert crashing.process.wait(timeout=WAIT_S) == fake_backend.CRASH_STATUS


def test_http_listens_on_loopback_only() -> None:
    done = subprocess.run(
        [*FAKE, "--http", "0.0.0.0:0"], capture_output=True, text=True, timeout=WAIT_S, check=False
    )
    assert done.returncode == 2
    assert "loopback only" in done.stderr


# -- scenario replay and the contract's server role -----------------------------------


@pytest.fixture(scope="module")
def official() -> list[scenarios.Scenario]:
    return scenarios.official(interop_dir(kit_testing.fixtures_root()))[0]


def pick(official: list[scenarios.Scenario], *ids: str) -> list[scenarios.Scenario]:
    by_id = {s.id: s for s in official}
    return [by_id[i] for i in ids]


SUBSET = (
    "deny-blocks",
    "null-result-envelope",
    "wrong-response-id",
    "modify-replace-removes-omitted-keys",
)


def test_scenario_replay_answers_verbatim_even_malformed_and_unknown_ids_get_32602(
    stdio: list[Stdio], tmp_path: Path, official: list[scenarios.Scenario]
) -> None:
    chosen = pick(official, *SUBSET)
    path = scenarios.write(chosen, tmp_path / "scenarios.json")
    fake = start(stdio, "--scenarios", str(path))
    for scenario in chosen:
        fake.send(scenario.request)
        assert json.loads(fake.next()) == scenario.response
    fake.send(intercept("no-such-scenario"))
    assert json.loads(fake.next())["error"]["code"] == -32602


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_server_role_readiness_control_endpoint_barrier_and_shutdown(
    tmp_path: Path, official: list[scenarios.Scenario], transport: str
) -> None:
    (deny,) = pick(official, "deny-blocks")
    gated = scenarios.Scenario(
        deny.id,
        deny.request,
        deny.response,
        deny.expected,
        False,
        deny.tags,
        {**deny.raw, "barrier": "gate"},
    )
    path = scenarios.write([gated], tmp_path / "scenarios.json")
    config = {
        "transport": transport,
        "readinessFile": str(tmp_path / "ready.json"),
        "scenarioFile": str(path),
        "auth": {"mode": "none"},
    }
    adapter = contract.Adapter("fake", FAKE, None, Path.cwd())
    if transport == "http":
        server = contract.start_server(adapter, config, tmp_path)
        assert server.endpoint is not None and server.endpoint.endswith("/intercept")
        assert httpx.get(server.endpoint.replace("/intercept", "/capabilities")).status_code == 200
        control = server.control
        answers: list[Any] = []
        worker = threading.Thread(
            target=lambda: answers.append(
                httpx.post(server.endpoint or "", json=gated.request, timeout=WAIT_S).json()
            )
        )
    else:
        config_path = tmp_path / "server.json"
        config_path.write_text(json.dumps(config))
        fake = Stdio("--config", str(config_path))
        deadline = time.monotonic() + WAIT_S
        while not (tmp_path / "ready.json").is_file():
            assert time.monotonic() < deadline
            time.sleep(0.02)
        readiness = json.loads((tmp_path / "ready.json").read_text())
        assert readiness["endpoint"] is None
        control = readiness["controlEndpoint"]
        answers = []
        worker = threading.Thread(
            target=lambda: (fake.send(gated.request), answers.append(json.loads(fake.next())))
        )
    assert httpx.get(control + "/health").json() == {"ready": True}
    worker.start()
    deadline = time.monotonic() + WAIT_S
    while not httpx.get(control + "/receipts").json()["requests"]:
        assert time.monotonic() < deadline, "the request was never received"
        time.sleep(0.02)
    assert not answers  # held at the barrier
    assert httpx.post(control + "/release", json={"barrier": "gate"}).json() == {"released": True}
    worker.join(WAIT_S)
    assert answers == [deny.response]
    (receipt,) = httpx.get(control + "/receipts").json()["requests"]
    assert (
        receipt["id"] == deny.id
        and scenarios.receipt_difference(receipt["message"], deny.request) is None
    )
    assert httpx.post(control + "/shutdown", json={}).json() == {"stopping": True}
    if transport == "http":
        server.process.wait(timeout=WAIT_S)
        server.shutdown()
    else:
        assert fake.process.wait(timeout=WAIT_S) == 0


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_the_sdk_client_adapter_accepts_our_server_role(
    tmp_path: Path, official: list[scenarios.Scenario], transport: str
) -> None:
    """Cross-check: the official SDK's contract client, driving the fake as its server."""
    chosen = pick(official, *SUBSET)
    path = scenarios.write(chosen, tmp_path / "scenarios.json")
    pairing = contract.run_pairing(
        contract.Adapter.command(SDK_CLIENT, Path.cwd()),
        contract.Adapter("fake", FAKE, None, Path.cwd()),
        transport,
        path,
        tmp_path,
        watchdog_s=40,
    )
    run = pairing.run
    assert run.report is not None, run.error
    assert {r["id"]: r["status"] for r in run.report["results"]} == {s: "passed" for s in SUBSET}
    if pairing.receipts is not None:  # over HTTP the controller read the server's receipts
        assert [r["id"] for r in pairing.receipts] == list(SUBSET)


# -- helper A's backend judge tells every fault mode apart --------------------------------

JUDGED_FAILS = {
    "hang": "AHP-RPC-002",
    "crash": "AHP-RPC-002",
    "late": "AHP-RPC-002",
    "rpc-error": "AHP-RPC-002",
    "garbage": "AHP-RPC-001",
    "non-utf8": "AHP-RPC-001",
    "wrong-id": "AHP-RPC-001",
    "stray-frame": "AHP-RPC-001",
    "multi-line": "AHP-STDIO-001",
    "stdout-noise": "AHP-STDIO-001",
    "oversized": "AHP-STDIO-001",
    "unadvertised-effect": "AHP-CAP-001",
    "unknown-effect": "AHP-DEC-001",
    "no-effects": "AHP-DEC-001",
    "no-version": "AHP-VER-001",
    "reply-to-notifications": "AHP-RPC-002",
    "leak-exception": "AHP-RPC-001",
    "declared-unsupported": "AHP-RPC-002",
}
"""What ``ahp-conformance backend`` must fail for each mode (the shared table), over stdio."""
PRECISE = {"stray-frame", "multi-line", "stdout-noise", "unknown-effect", "no-effects"}
PRECISE |= {"no-version"}
"""Faults that leave every other answer usable over stdio: the judge fails their
requirement and no other (a frame before the reply is not taken for an answered
notification, a reply over several lines is a framing fault and not garbage, ...)."""


def check(report: dict[str, Any], check_id: str) -> dict[str, Any]:
    found: dict[str, Any] = next(c for c in report["checks"] if c["id"] == check_id)
    return found


def _requirements(report: dict[str, Any], *ids: str) -> bool:
    return all(report["requirements"][r]["status"] == "pass" for r in ids)


EVIDENCE: dict[str, Any] = {
    # The checks that must say why, over stdio (each judged run is also its evidence).
    "reply-to-notifications": lambda report: (
        {"notify.observe", "notify.observe-invalid", "notify.unknown-method"}
        <= {c["id"] for c in report["checks"] if c["status"] == "fail"}
        and _requirements(report, "AHP-CAP-001", "AHP-DEC-001", "AHP-STDIO-001")
    ),
    "leak-exception": lambda report: (
        check(report, "errors.no-exception-text")["status"] == "fail"
        and "Traceback" in check(report, "errors.no-exception-text")["evidence"]["received"]
    ),
    "unadvertised-effect": lambda report: (
        check(report, "tool-before.deny.advertised")["status"] == "fail"
        and "not advertised" in check(report, "tool-before.deny.advertised")["detail"]
        and check(report, "tool-before.full.advertised")["status"] == "pass"
        # (at model.response.after the first ungranted effect is illegal too: AHP-DEC-001)
        and _requirements(report, "AHP-RPC-002", "AHP-STDIO-001")
    ),
    # -32002 is fine for an event a backend does not intercept, not for one its own
    # hooks/configuration subscribes to.
    "declared-unsupported": lambda report: (
        check(report, "tool-before.deny.answered")["status"] == "fail"
        and "discovery" in check(report, "tool-before.deny.answered")["detail"]
    ),
}
OVER_HTTP = {
    **{mode: r for mode, r in JUDGED_FAILS.items() if mode != "multi-line"},
    "oversized": "AHP-HTTP-001",
    "stdout-noise": "AHP-RPC-001",  # over HTTP the noise makes the body not JSON
}
"""The same over HTTP; ``multi-line`` is not a fault there (a pretty body is valid JSON)."""
JUDGE = (sys.executable, "-m", "ahp_conformance.backend_judge", "--json")
JOBS = 3
"""Judge runs at a time: most of a faulty run is waiting out the judge's deadlines."""
SHORT_DEADLINE = ("--timeout-ms", "1000")
"""For the modes that never answer in time anyway: the judge waits less for each probe."""
LONG_DEADLINE = ("--timeout-ms", "15000")
"""For the modes that answer: a loaded machine (this file runs judges in parallel beside the
rest of the suite) must not turn a slow answer into a failure; they never wait it out."""


def deadline(mode: str | None) -> tuple[str, str]:
    return SHORT_DEADLINE if mode in WAITING_MODES else LONG_DEADLINE


def judged(args: list[str]) -> tuple[int, dict[str, Any]]:
    done = subprocess.run([*JUDGE, *args], capture_output=True, text=True, timeout=120, check=False)
    assert done.stdout, done.stderr[-2000:]
    return done.returncode, json.loads(done.stdout)


def test_check_every_mode_is_in_the_discrimination_table() -> None:
    assert set(JUDGED_FAILS) | {"deny", "allow"} == set(fake_backend.FAULTS)


def verdicts(
    runs: dict[str, tuple[int, dict[str, Any]]],
    table: dict[str, str],
    evidence: dict[str, Any] | None = None,
    precise: frozenset[str] | set[str] = frozenset(),
) -> list[str]:
    """What is wrong with the judge's verdicts (empty: each mode failed its requirement,
    a ``precise`` one no other, and each with its ``evidence``)."""
    wrong = []
    for mode, (status, report) in runs.items():
        requirement = table.get(mode)
        failed = {r for r, v in report["requirements"].items() if v["status"] == "fail"}
        if requirement is None:  # deny, no fault (and multi-line over HTTP): nothing fails
            failing = [c["id"] for c in report["checks"] if c["status"] == "fail"]
            if status != 0 or failing:
                wrong.append(f"{mode}: exit {status}, failing {failing}")
        elif status != 1 or report["requirements"][requirement]["status"] != "fail":
            verdict = report["requirements"][requirement]["status"]
            wrong.append(f"{mode}: exit {status}, {requirement} is {verdict!r}, not 'fail'")
        elif mode in precise and failed != {requirement}:
            wrong.append(f"{mode}: fails {sorted(failed)}, not only {requirement}")
        elif evidence and mode in evidence and not evidence[mode](report):
            wrong.append(f"{mode}: the checks do not say why: {failures(report)}")
    return wrong


def failures(report: dict[str, Any]) -> list[str]:
    return [
        f"{c['id']} {c['requirements']}: {c.get('detail', '')}"
        for c in report["checks"]
        if c["status"] == "fail"
    ]


WAITING_MODES = ("hang", "crash", "late", "garbage", "non-utf8", "wrong-id", "oversized")
"""The modes where the judge waits out deadlines or replaces the process (slow runs)."""
HTTP_MODES = (
    "hang",
    "crash",
    "garbage",
    "non-utf8",
    "oversized",
    "stray-frame",
    "stdout-noise",
    "reply-to-notifications",
)
"""The modes whose HTTP reply differs from its stdio line (the body-level faults); the
others send the same JSON over both, judged by the same rules."""


@pytest.mark.parametrize(
    "modes",
    [
        WAITING_MODES,
        tuple(m for m in [*JUDGED_FAILS, "deny", None] if m not in WAITING_MODES),
    ],
    ids=["waiting-modes", "answering-modes"],
)
def test_the_backend_judge_fails_each_stdio_fault_modes_requirement(
    modes: tuple[str | None, ...],
) -> None:
    from concurrent.futures import ThreadPoolExecutor

    def one(mode: str | None) -> tuple[int, dict[str, Any]]:
        return judged([*deadline(mode), "--", *FAKE, *(("--fault", mode) if mode else ())])

    with ThreadPoolExecutor(JOBS) as pool:
        runs = dict(zip([m or "no fault" for m in modes], pool.map(one, modes), strict=True))
    assert verdicts(runs, JUDGED_FAILS, EVIDENCE, PRECISE) == []


def test_the_backend_judge_fails_each_http_fault_modes_requirement(http: Any) -> None:
    from concurrent.futures import ThreadPoolExecutor

    modes = [*HTTP_MODES, "multi-line", None]
    servers = {m or "no fault": http(*(("--fault", m) if m else ())) for m in modes}
    with ThreadPoolExecutor(JOBS) as pool:
        results = pool.map(
            lambda mode, s: judged([*deadline(mode), "--url", s.url]),
            servers,
            servers.values(),
        )
        runs = dict(zip(servers, results, strict=True))
    assert verdicts(runs, OVER_HTTP) == []


def test_http_record_keeps_each_body_and_its_content_type(http: Any, tmp_path: Path) -> None:
    record = tmp_path / "http-received.jsonl"
    server = http("--record", str(record))
    server.post(intercept())  # httpx sends no Content-Type for raw content
    httpx.post(server.url, json=intercept("typed"), timeout=WAIT_S)
    first, second = (json.loads(x) for x in record.read_text().splitlines())
    assert first["transport"] == "http" and first["contentType"] is None
    assert first["message"] == intercept()
    assert second["contentType"] == "application/json"


def test_fault_and_scenario_replay_are_exclusive(tmp_path: Path) -> None:
    path = tmp_path / "scenarios.json"
    path.write_text('{"version": 1, "scenarios": []}')
    done = subprocess.run(
        [*FAKE, "--fault", "garbage", "--scenarios", str(path)],
        capture_output=True,
        text=True,
        timeout=WAIT_S,
        check=False,
    )
    assert done.returncode == 2
    assert "give one or the other" in done.stderr

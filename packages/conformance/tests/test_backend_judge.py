"""``ahp-conformance backend``: the kit's backends pass; misbehaving backends fail the right rule.

Every judge run is the real command line in its own process (``python -m
ahp_conformance.cli backend --json ...``) against real backend processes, over stdio
(persistent and per_event) and real loopback HTTP. That the judge fails the right
requirement for each fault of the kit's scripted backend (``ahp_protocol.testing``, one
judged run per fault, with the checks that say why) is ``test_fake_backend.py``.
A server's readiness is its ``listening on URL`` stderr line, never a sleep.
"""

from __future__ import annotations

import json
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from ahp_conformance.backend.probes import GRANTS, Messages
from ahp_protocol.wire.capabilities import parse_capabilities
from ahp_protocol.wire.messages import validate_message

import kit_testing

PY = sys.executable
JUDGE = (PY, "-m", "ahp_conformance.cli", "backend", "--json")
REPO = Path(__file__).resolve().parents[3]
RULES = REPO / "examples" / "backends" / "denylist.toml"
APPROVALS = REPO / "examples" / "backends" / "approval.toml"
BACKEND = (PY, "-m", "ahp_backends.cli")
RUN_S = 25.0
"""Bound on one judge run on a loaded machine (a run takes a few seconds)."""

pytestmark = pytest.mark.skipif(
    not (kit_testing.fixtures_root() / "manifest.json").is_file(),
    reason=f"official fixtures not found at {kit_testing.fixtures_root()} (set AHP_FIXTURES_DIR)",
)


def judge(*args: str, env: dict[str, str] | None = None) -> tuple[int, dict[str, Any], str]:
    """Run the judge; its exit status, its JSON report and its stderr."""
    done = subprocess.run(
        [*JUDGE, *args],
        capture_output=True,
        text=True,
        timeout=RUN_S + 20,
        env={**os.environ, "AHP_FIXTURES_DIR": str(kit_testing.fixtures_root()), **(env or {})},
        cwd=REPO,
        stdin=subprocess.DEVNULL,
    )
    assert done.stdout.strip(), f"no report; stderr: {done.stderr[-2000:]}"
    return done.returncode, json.loads(done.stdout), done.stderr


def failures(report: dict[str, Any]) -> list[str]:
    return [
        f"{c['id']} {c['requirements']}: {c.get('detail', '')} | sent {c.get('evidence', {})}"
        for c in report["checks"]
        if c["status"] == "fail"
    ]


def verdict(report: dict[str, Any], requirement: str) -> str:
    status: str = report["requirements"][requirement]["status"]
    return status


def assert_passes(status: int, report: dict[str, Any], binding: str) -> None:
    assert failures(report) == [], "\n".join(failures(report))
    assert status == 0
    assert report["passed"] is True
    assert report["bindings"] == [binding]
    assert {c.get("binding") for c in report["checks"]} == {binding}
    for requirement in ("AHP-RPC-001", "AHP-RPC-002", "AHP-VER-001"):
        assert verdict(report, requirement) == "pass", requirement


# --------------------------------------------------------------------------- HTTP servers


class Server:
    """A backend started with ``--http 127.0.0.1:0``; its URL read from its stderr."""

    def __init__(self, argv: list[str], env: dict[str, str] | None = None) -> None:
        self.proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            start_new_session=True,
            cwd=REPO,
            env={**os.environ, **(env or {})},
        )
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.seen: list[str] = []
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self.proc.stderr is not None
        for raw in self.proc.stderr:
            self.lines.put(raw.decode("utf-8", "replace"))
        self.lines.put(None)

    def url(self) -> str:
        deadline = time.monotonic() + 30
        while True:
            line = self.lines.get(timeout=max(0.01, deadline - time.monotonic()))
            if line is None:
                raise AssertionError(f"server exited: {''.join(self.seen)}")
            self.seen.append(line)
            found = re.search(r"listening on (http://\S+)", line)
            if found:
                return found.group(1)

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=10)


@pytest.fixture
def http_server() -> Iterator[Any]:
    started: list[Server] = []

    def start(argv: list[str], env: dict[str, str] | None = None) -> str:
        server = Server(argv, env)
        started.append(server)
        return server.url()

    yield start
    for server in started:
        server.stop()


# --------------------------------------------------------------------------- the kit passes


def test_denylist_passes_over_persistent_stdio() -> None:
    status, report, stderr = judge("--", *BACKEND, "denylist", "--rules", str(RULES))
    assert_passes(status, report, "stdio")
    for requirement in ("AHP-CAP-001", "AHP-DEC-001", "AHP-CORE-003", "AHP-EXT-001",
                        "AHP-CORE-004", "AHP-STDIO-001", "AHP-TB-001"):  # fmt: skip
        assert verdict(report, requirement) == "pass", requirement
    assert "base" in report["claim"] and "tool-interception" in report["claim"]
    # it passes the one check of lifecycle-observation (silence after hooks/observe), but
    # observes nothing (its discovery declares no observe subscription): not claimed
    assert report["profiles"]["lifecycle-observation"] == "pass"
    claimed = report["claim"].split("profiles ")[1].split(";")[0]
    assert "lifecycle-observation" not in claimed
    assert "Capability profiles not seen in this run: lifecycle-observation." in report["claim"]
    ids = {c["id"] for c in report["checks"]}
    # every group ran: decisions under each grant, JSON-RPC, notifications, fixtures
    for expected in ("tool-before.deny.advertised", "tool-before.full.effects",
                     "rpc.parse-error", "version.unsupported", "params.id-mismatch",
                     "notify.observe", "oversize.survived", "errors.no-exception-text",
                     "fixture.stdio.intercept-request.valid",
                     "fixture.http.intercept-request-id-mismatch.invalid"):  # fmt: skip
        assert expected in ids, expected
    assert stderr == ""  # --json: no progress lines


def test_approval_passes_over_persistent_stdio(tmp_path: Path) -> None:
    status, report, _ = judge(
        "--", *BACKEND, "approval", "--store", str(tmp_path / "grants.db"),
        "--config", str(APPROVALS),
    )  # fmt: skip
    assert_passes(status, report, "stdio")
    assert verdict(report, "AHP-CAP-001") == "pass"


def test_audit_passes_and_claims_no_tool_interception(tmp_path: Path) -> None:
    status, report, _ = judge("--", *BACKEND, "audit", "--db", str(tmp_path / "audit.db"))
    assert_passes(status, report, "stdio")
    # an observer answers -32002 to every intercept: unsupported, not a failure
    answered = [c for c in report["checks"] if c["id"] == "tool-before.deny.answered"]
    assert answered[0]["status"] == "unsupported"
    assert report["profiles"]["lifecycle-observation"] == "pass"
    claimed = report["claim"].split("profiles ")[1].split(";")[0]
    assert claimed == "base, lifecycle-observation, stdio"  # it declares observe subscriptions
    assert "tool-interception" not in claimed


def test_denylist_passes_per_event() -> None:
    status, report, _ = judge(
        "--per-event", "--", *BACKEND, "denylist", "--once", "--rules", str(RULES)
    )
    assert_passes(status, report, "stdio")
    assert verdict(report, "AHP-STDIO-001") == "pass"
    assert any(c["id"] == "per-event.notify" for c in report["checks"])


def test_denylist_passes_over_http_with_a_bearer_token(http_server: Any) -> None:
    token = "tok-" + os.urandom(8).hex()
    env = {"AHPC_TEST_TOKEN": token}
    url = http_server(
        [*BACKEND, "denylist", "--rules", str(RULES), "--http", "127.0.0.1:0",
         "--bearer-token-env", "AHPC_TEST_TOKEN"],
        env,
    )  # fmt: skip
    done = subprocess.run(
        [*JUDGE[:-1], "--url", url, "--bearer-token-env", "AHPC_TEST_TOKEN"],
        capture_output=True, text=True, timeout=RUN_S + 20, cwd=REPO,
        env={**os.environ, **env, "AHP_FIXTURES_DIR": str(kit_testing.fixtures_root())},
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-4000:]
    assert token not in done.stdout + done.stderr  # the terminal report
    assert "HTTP media types" in done.stderr  # progress, one line per group
    status, report, _ = judge("--url", url, "--bearer-token-env", "AHPC_TEST_TOKEN", env=env)
    assert_passes(status, report, "http")
    for requirement in ("AHP-HTTP-001", "AHP-AUTH-001", "AHP-CAP-001"):
        assert verdict(report, requirement) == "pass", requirement
    assert token not in json.dumps(report)


def test_a_generated_backend_passes(tmp_path: Path) -> None:
    made = subprocess.run(
        [*BACKEND, "new", "my-policy", "--dir", str(tmp_path / "p")],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    env = {"PYTHONPATH": str(tmp_path / "p" / "src")}
    status, report, _ = judge("--", PY, "-m", "my_policy.backend", env=env)
    assert_passes(status, report, "stdio")
    assert verdict(report, "AHP-CAP-001") == "pass"


# --------------------------------------------------------------------------- it discriminates


def test_a_backend_that_cannot_start_fails_every_check_with_the_reason() -> None:
    status, report, _ = judge("--", str(REPO / "no-such-backend"))
    assert status == 1
    assert report["checks"] and all(
        c["status"] in ("fail", "n/a") for c in report["checks"]
    )  # nothing silently skipped
    assert any("cannot start" in c.get("detail", "") for c in report["checks"])


def test_a_backend_that_exits_at_once_fails_every_check_with_its_exit_status_and_stderr(
    tmp_path: Path,
) -> None:
    """The kit's deny-list with a rules file that does not exist exits with status 2
    before it reads a line: a report, not a traceback, and it says why."""
    missing = tmp_path / "nope.toml"
    status, report, _ = judge("--", *BACKEND, "denylist", "--rules", str(missing))
    assert status == 1
    assert report["passed"] is False
    assert report["checks"] and all(c["status"] in ("fail", "n/a") for c in report["checks"])
    discovery = next(c for c in report["checks"] if c["id"] == "discovery.capabilities")
    assert "exited with status 2 before answering" in discovery["detail"]
    assert "nope.toml" in discovery["detail"]  # the tail of the backend's stderr
    # given up on at once (not restarted): every later check says so
    later = next(c for c in report["checks"] if c["id"] == "tool-before.deny.answered")
    assert "exited with status 2 before answering" in later["detail"]


LAST_WORDS_LATE = """
import os, sys, time
if os.fork() == 0:  # keeps stderr a moment after the backend has exited (a wrapper's child)
    os.close(1)
    time.sleep(0.3)
    sys.stderr.write("cannot read the rules: nope.toml\\n")
    os._exit(0)
sys.exit(2)
"""


def test_judging_a_stdio_backend_does_not_import_an_http_client(tmp_path: Path) -> None:
    """httpx (with the command line it imports: rich, click, pygments) costs a stdio run
    a tenth of a second of start-up; only an HTTP backend needs it."""
    record = tmp_path / "modules.txt"
    wrapper = (
        "import atexit, runpy, sys\n"
        f"atexit.register(lambda: open({str(record)!r}, 'w').write(' '.join(sys.modules)))\n"
        "sys.argv = ['ahp-conformance', *sys.argv[1:]]\n"
        "runpy.run_module('ahp_conformance.backend_judge', run_name='__main__')\n"
    )
    done = subprocess.run(
        [PY, "-c", wrapper, "--json", "--", PY, "-c", "import sys; sys.exit(2)"],
        capture_output=True,
        timeout=RUN_S,
        env={**os.environ, "AHP_FIXTURES_DIR": str(kit_testing.fixtures_root())},
    )
    assert done.returncode == 1, done.stderr[-2000:]
    modules = set(record.read_text().split())
    assert "ahp_conformance.backend.peer" in modules  # the judge did run
    assert not {"httpx", "httpcore"} & modules


def test_an_exit_reason_waits_for_the_last_words_on_stderr() -> None:
    """The exit is often seen before stderr's last bytes are read (a loaded machine, or
    a process that shares the pipe): the reason still quotes them."""
    status, report, _ = judge("--", PY, "-c", LAST_WORDS_LATE)
    assert status == 1
    discovery = next(c for c in report["checks"] if c["id"] == "discovery.capabilities")
    assert "exited with status 2 before answering" in discovery["detail"]
    assert "nope.toml" in discovery["detail"], discovery["detail"]


def test_a_per_event_backend_that_exits_at_once_says_its_exit_status_and_stderr(
    tmp_path: Path,
) -> None:
    missing = tmp_path / "nope.toml"
    status, report, _ = judge(
        "--per-event", "--", *BACKEND, "denylist", "--once", "--rules", str(missing)
    )
    assert status == 1
    discovery = next(c for c in report["checks"] if c["id"] == "discovery.capabilities")
    assert discovery["status"] == "fail"
    assert "exit status 2" in discovery["detail"] and "nope.toml" in discovery["detail"]
    assert verdict(report, "AHP-RPC-002") == "fail"


def test_a_backend_that_never_answers_at_start_fails_every_check() -> None:
    """A process that starts but never answers its first request is restarted, then
    given up on: every check fails with the deadline as its reason."""
    status, report, _ = judge(
        "--timeout-ms", "300", "--startup-ms", "0", "--",
        PY, "-c", "import time; time.sleep(60)",
    )  # fmt: skip
    assert status == 1
    assert report["checks"] and all(c["status"] in ("fail", "n/a") for c in report["checks"])
    discovery = next(c for c in report["checks"] if c["id"] == "discovery.capabilities")
    assert "no response with id" in discovery["detail"] and "300 ms" in discovery["detail"]


def test_usage_errors_exit_2() -> None:
    for args in ((), ("--url", "http://127.0.0.1:9/", "--", "x"), ("--bearer-token-env", "V")):
        done = subprocess.run([*JUDGE, *args], capture_output=True, text=True, timeout=30)
        assert done.returncode == 2, (args, done.stderr)
        assert "ahp-conformance backend:" in done.stderr


# --------------------------------------------------------------------------- its own messages


def test_the_judges_valid_messages_are_valid() -> None:
    """What the judge sends as valid must be valid, or its verdicts mean nothing."""
    msgs = Messages("/repo")
    for name, grant in GRANTS.items():
        parse_capabilities(grant, event_type="tool.before")
        eid = msgs.new_id(name)
        message = msgs.intercept(msgs.event(eid, "Bash", "shell", {"command": "ls"}), grant)
        assert validate_message(message) == "intercept-request"
        assert kit_testing.schema_errors("intercept-request.schema.json", message) == []
    notification = msgs.observe(msgs.event(msgs.new_id("observe")))
    assert kit_testing.schema_errors("observe-notification.schema.json", notification) == []


# --------------------------------------------------------------------------- the SDK as a peer

SDK_BACKEND = Path(__file__).resolve().parent / "backends" / "sdk_backend.py"
SDK_DEVIATIONS = {
    "params.not-object": "SDK 0.10.1's stdio server exits on a request whose params are "
    "an array (AttributeError) instead of answering -32602",
    "notify.observe-params": "the same exit for a notification whose params are an array",
    "oversize.survived": "SDK 0.10.1's stdio server raises on a frame above 4 MiB and exits "
    "instead of answering -32700 and reading on",
    "framing.answered": "the exits above: those requests got no answer",
}
"""Where the official SDK's own server deviates from the draft (the judge reports them)."""


def test_the_sdk_server_fails_only_its_known_deviations() -> None:
    status, report, _ = judge("--", PY, str(SDK_BACKEND))
    assert status == 1
    failed = {c["id"]: c.get("detail", "") for c in report["checks"] if c["status"] == "fail"}
    assert set(failed) == set(SDK_DEVIATIONS), failed
    assert "exited" in failed["params.not-object"]  # the evidence says what happened
    # the backend was restarted after each exit, so everything else was judged
    for requirement in ("AHP-CAP-001", "AHP-DEC-001", "AHP-VER-001", "AHP-CORE-004"):
        assert verdict(report, requirement) == "pass", requirement


# -- nothing the judged backend started outlives the judge; every answer is bounded -------

DETACHING_BACKEND = """
import os, subprocess, sys
record, token, rules = sys.argv[1:4]
# A grandchild of the judge in a session of its own: the backend's group kill misses it.
sleeper = subprocess.Popen(
    ["sleep", "1000." + token], start_new_session=True,
    stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
)
with open(record, "a") as f:
    f.write(f"{sleeper.pid}\\n")
os.execv(sys.executable, [sys.executable, "-m", "ahp_backends.cli", "denylist", "--rules", rules])
"""


def marked(marker: str) -> list[int]:
    """Live (not zombie) processes whose command line holds ``marker``."""
    found = []
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                named = marker.encode() in f.read()
            with open(f"/proc/{entry}/stat", "rb") as f:
                zombie = f.read().rsplit(b")", 1)[1].split()[0] == b"Z"
        except (OSError, IndexError):
            continue
        if named and not zombie:
            found.append(int(entry))
    return found


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the judge adopts on Linux")
def test_a_judged_backends_setsid_grandchild_does_not_outlive_the_judge(tmp_path: Path) -> None:
    token = f"{os.getpid()}{time.monotonic_ns() % 10**6:06d}"
    marker = f"1000.{token}"
    script = tmp_path / "detaching_backend.py"
    script.write_text(DETACHING_BACKEND, "utf-8")
    record = tmp_path / "sleepers.txt"
    try:
        status, report, _ = judge("--", PY, str(script), str(record), token, str(RULES))
        assert status == 0, failures(report)  # the backend itself is the kit's deny-list
        sleepers = [int(p) for p in record.read_text("utf-8").split()]
        assert sleepers, "the backend started no sleeper"
        deadline = time.monotonic() + 10
        while (left := marked(marker)) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert left == [], f"still running after the judge exited: {left} (sleepers {sleepers})"
    finally:
        for pid in marked(marker):
            os.kill(pid, signal.SIGKILL)


class DribblingServer:
    """A loopback HTTP server that sends a head, then its body one byte every 0.5 s."""

    def __init__(self) -> None:
        import socket

        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._stop = threading.Event()
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return
            threading.Thread(target=self._dribble, args=(conn,), daemon=True).start()

    def _dribble(self, conn: Any) -> None:
        with conn:
            try:
                conn.recv(65536)  # the request (its head and a small body)
                conn.sendall(
                    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                    b"Content-Length: 100000\r\n\r\n"
                )
                while not self._stop.wait(0.5):
                    conn.sendall(b" ")
            except OSError:
                return

    def close(self) -> None:
        self._stop.set()
        self._listener.close()


def test_a_backend_that_dribbles_its_body_is_bounded_by_timeout_ms() -> None:
    """httpx's read timeout restarts at every byte, so a body sent one byte every 0.5 s
    never timed out: the judge hung for ever. ``--timeout-ms`` bounds the whole answer."""
    server = DribblingServer()
    try:
        url = f"http://127.0.0.1:{server.port}/"
        start = time.monotonic()
        status, report, _ = judge("--url", url, "--timeout-ms", "1000", "--startup-ms", "0")
        took = time.monotonic() - start
    finally:
        server.close()
    assert status == 1
    discovery = next(c for c in report["checks"] if c["id"] == "discovery.capabilities")
    assert "no HTTP response within 1000 ms" in discovery["detail"], discovery
    assert took < RUN_S, took  # a hang detector, not a speed test

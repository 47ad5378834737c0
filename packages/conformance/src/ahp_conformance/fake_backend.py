"""``ahp-conformance fake-backend``: a scripted AHP backend that misbehaves on purpose.

Three uses, one process (``python -m ahp_conformance.fake_backend`` runs it too):

1. **Fault modes** (``--fault MODE``), what a harness must survive. Every *valid*
   ``hooks/intercept`` request (one the kit's server kit would answer: valid envelope,
   version, event, capabilities, state, ``id == params.event.id``) is answered as
   :data:`FAULTS` says; everything else is answered the way a well-behaved backend
   answers it (the kit's server kit decides: -32700, -32600, -32601, -32602, -32001,
   -32002), so only the named fault is wrong. ``hooks/capabilities`` (a valid discovery
   request) is answered with a valid manifest in every mode (:func:`manifest`), so
   discovery is never the fault. Notifications are never answered, except in
   ``reply-to-notifications``. Without ``--fault`` every intercept gets a valid answer
   with no effect; ``--fault deny`` answers a valid deny to every ``tool.before`` whose
   request advertises ``deny`` (no effect otherwise).
2. **Scenario replay** (``--scenarios FILE``, the contract's scenario form): a request
   whose ``id`` and ``params.event.id`` name a scenario is answered with that scenario's
   ``response`` VERBATIM, malformed ones included; any other request gets -32602.
3. **The interop contract's server role** (``--config FILE``: ``{transport, readinessFile,
   scenarioFile, auth}``): scenario replay plus the control endpoint
   (:class:`~ahp_conformance.contract.ControlPlane`: ``/health``, ``/receipts``,
   ``/release``, ``/shutdown``), barriers (a scenario's ``barrier`` is waited on before
   its answer), and the readiness file. So ``[sys.executable, "-P", "-m",
   "ahp_conformance.fake_backend"]`` is a drop-in server adapter command. ``auth.mode``
   ``none`` and ``bearer`` (``auth.token``) are served over HTTP; stdio is process trust.

Transports: stdio persistent (default: one compact JSON line per message, requests
answered in order; exits on stdin EOF), or ``--http HOST:PORT`` (loopback only; port 0
picks one; the bound URL is printed on stderr as ``listening on URL`` and, with
``--ready-file FILE``, written atomically to FILE as ``{endpoint, port, pid}`` once
listening). Over HTTP every ``POST`` is one AHP message (``/intercept`` in the contract
role), ``GET /capabilities`` answers the capabilities object, a notification gets ``202``
with no body, and the fault applies to the reply body: ``garbage``, ``non-utf8`` and
``stdout-noise`` make the body not JSON; ``stray-frame`` sends only the other-id frame
(one body carries one message); ``multi-line`` is *not* a fault over HTTP (a
pretty-printed body is valid JSON); ``crash`` exits while the connection is open;
``hang`` holds the connection open.

``--record FILE`` appends one JSON line per message received, as soon as it arrives:
``{"time": UNIX_SECONDS, "pid": PID, "transport": "stdio"|"http", "message": ...}``
(``message`` is the decoded JSON value, or ``{"undecodable": TEXT}``; over HTTP also
``"contentType"``, the request's ``Content-Type`` header or ``null``).

The fake never waits longer than its mode says (``hang`` waits for its harness to give
up; ``late`` answers after ``--delay-ms``; a barrier waits at most
:data:`~ahp_conformance.contract.BARRIER_TIMEOUT_S`), starts no child process, and exits
on stdin EOF over stdio, on ``POST /shutdown`` in the contract role, or on SIGTERM.
"""

from __future__ import annotations

import argparse
import contextlib
import ipaddress
import json
import os
import sys
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, NoReturn

from ahp_conformance.contract import (
    ContractError,
    ControlPlane,
    read_config,
    write_json_atomically,
    write_readiness,
)

MAX_FRAME_BYTES = 4 * 1024 * 1024
"""The SDK's frame cap; ``oversized`` answers a reply larger than this."""
DEFAULT_LATE_MS = 3000
CRASH_STATUS = 3
NOISE = b"fake-backend: evaluating the request (a log line on stdout)\n"
GARBAGE = b"this line is not JSON\n"
NON_UTF8 = b'{"jsonrpc": "2.0", "note": "\xff\xfe\xfd"}\n'
UNKNOWN_EFFECT = {"type": "org.example.unknown"}
DENY_REASON = "denied by ahp-conformance fake-backend (--fault deny)"
TRACEBACK = (
    'Traceback (most recent call last):\n  File "/srv/backend/policy.py", line 42, in '
    "evaluate\n    raise KeyError(rule)\nKeyError: 'secret-rule'"
)
UNADVERTISED_ORDER = ("ask", "allow", "deny", "message", "return", "inject", "flow")
"""The effect ``unadvertised-effect`` sends: the first of these the request did not grant."""

FAULTS: dict[str, str] = {
    "hang": "never answers an intercept",
    "crash": f"exits (status {CRASH_STATUS}) without answering",
    "late": "answers a valid deny after --delay-ms (default 3000)",
    "rpc-error": "answers JSON-RPC error -32004",
    "garbage": "answers a line that is not JSON",
    "non-utf8": "answers a line of invalid UTF-8 bytes",
    "wrong-id": "answers a valid result with another id",
    "stray-frame": "first a response with another id, then the correct reply",
    "multi-line": "the correct reply pretty-printed over several lines",
    "stdout-noise": "a log line on stdout before each reply",
    "oversized": "a reply larger than 4 MiB",
    "unadvertised-effect": "an effect the request did not advertise",
    "unknown-effect": 'the effect {"type": "org.example.unknown"}',
    "no-effects": "a result without an effects array",
    "no-version": "a result without protocolVersion",
    "reply-to-notifications": "answers hooks/observe notifications too",
    "leak-exception": "-32004 whose message and data hold a Python traceback",
    "deny": "a valid deny to every tool.before (well-behaved)",
}
"""Every fault mode and what it does on a valid ``hooks/intercept`` (the shared table)."""


# -- what to answer -------------------------------------------------------------------


@dataclass
class Answer:
    """What to do with one received message: frames to write, after a delay, or not at all."""

    frames: list[bytes] = field(default_factory=list)
    """Raw bytes to write; over stdio each already ends with its newline."""
    delay_s: float = 0.0
    hang: bool = False
    crash: bool = False
    notification: bool = False
    """The message was a notification (HTTP answers ``202`` when there are no frames)."""


def line(message: Mapping[str, Any]) -> bytes:
    return json.dumps(message, separators=(",", ":"), ensure_ascii=False).encode() + b"\n"


def result(rid: Any, effects: list[Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "result": {"protocolVersion": "draft", "effects": effects}}


def rpc_error(rid: Any, code: int, message: str, data: Any = None) -> dict[str, Any]:
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return {"jsonrpc": "2.0", "id": rid, "error": error}


def other_id(rid: Any) -> Any:
    """An id that is not ``rid`` (same JSON type)."""
    return rid + 1 if isinstance(rid, int) else f"{rid}-not-this-one"


def manifest() -> dict[str, Any]:
    """A valid ``hooks/capabilities`` manifest: intercept at tool.before, turn.finish.before."""
    from ahp_protocol.wire.messages import full_grant

    return {
        "events": [
            {"event": name, "modes": ["intercept"], "capabilities": full_grant(name)}
            for name in ("tool.before", "turn.finish.before")
        ],
        "gaps": [{"path": "events.other", "reason": "a fake backend for conformance tests"}],
        "transports": ["stdio", "http"],
        "authentication": [],
        "toolPaths": ["native"],
        "contentCategories": [],
        "limits": {"maxUploadBytes": 0, "maxContinuations": 1},
        "managedPolicy": {"scopes": ["user"], "disableable": True},
        "correlationIdentityFields": ["event.id", "event.source", "call.id"],
    }


def http_capabilities() -> dict[str, Any]:
    """What ``GET /capabilities`` answers (the contract's HTTP discovery): the tool.before grant."""
    from ahp_protocol.wire.messages import full_grant

    return full_grant("tool.before")


class Fake:
    """The answering logic, transport-free: one received message in, one :class:`Answer` out."""

    def __init__(
        self,
        fault: str | None = None,
        *,
        delay_ms: int = DEFAULT_LATE_MS,
        scenarios: Mapping[str, Mapping[str, Any]] | None = None,
        plane: ControlPlane | None = None,
    ) -> None:
        from ahp_protocol.server.backend import Backend, InterceptRequest

        if fault is not None and fault not in FAULTS:
            raise ValueError(f"unknown fault mode {fault!r}; one of: {', '.join(FAULTS)}")
        self.fault = fault
        self.delay_s = delay_ms / 1000
        self.scenarios = scenarios
        self.plane = plane
        self._seen = threading.local()
        self._lock = threading.Lock()
        self._backend = Backend("org.ahp.conformance.fake")

        @self._backend.intercept("*")
        def decide(request: InterceptRequest) -> list[dict[str, Any]]:
            self._seen.request = request
            if (
                fault in ("deny", "late")
                and request.event_type == "tool.before"
                and "deny" in request.advertised
            ):
                return [{"type": "deny", "reason": DENY_REASON}]
            return []

    def answer(self, raw: bytes) -> Answer:
        try:
            message: Any = json.loads(raw)
        except ValueError:
            message = None
        method = message.get("method") if isinstance(message, dict) else None
        rid = message.get("id") if isinstance(message, dict) else None
        is_notification = isinstance(message, dict) and "id" not in message and method is not None
        if method == "hooks/capabilities" and self._valid(message, "capabilities-request"):
            body = {"protocolVersion": "draft", "manifest": manifest()}
            return Answer([line({"jsonrpc": "2.0", "id": rid, "result": body})])
        if self.plane is not None and isinstance(message, dict):
            self.plane.record(message)
        elif self.plane is not None:
            self.plane.record({"undecodable": raw[:2000].decode("utf-8", "replace")})
        if self.scenarios is not None:
            return self._replay(message, is_notification)
        if is_notification:
            if self.fault == "reply-to-notifications":
                return Answer([line(result(None, []))], notification=True)
            return Answer(notification=True)
        with self._lock:
            self._seen.request = None
            reply = self._backend.handle_sync(raw.rstrip(b"\r\n"))
            request = self._seen.request
        frames = [reply] if reply is not None else []
        if request is None or self.fault in (None, "deny", "reply-to-notifications"):
            return Answer(frames)
        return self._misbehave(request.id, request.advertised, frames)

    @staticmethod
    def _valid(message: Any, kind: str) -> bool:
        from ahp_protocol.wire.errors import WireError, WireErrors
        from ahp_protocol.wire.messages import validate_message

        try:
            return validate_message(message) == kind
        except (WireError, WireErrors):
            return False

    def _replay(self, message: Any, is_notification: bool) -> Answer:
        if is_notification:
            return Answer(notification=True)
        rid = message.get("id") if isinstance(message, dict) else None
        params = message.get("params") if isinstance(message, dict) else None
        event = params.get("event") if isinstance(params, dict) else None
        event_id = event.get("id") if isinstance(event, dict) else None
        assert self.scenarios is not None
        scenario = self.scenarios.get(rid) if isinstance(rid, str) else None
        if scenario is None or event_id != rid:
            why = "no scenario has this id" if scenario is None else "id != params.event.id"
            return Answer([line(rpc_error(rid, -32602, f"invalid params: {why}"))])
        barrier = scenario.get("barrier")
        if isinstance(barrier, str) and self.plane is not None:
            self.plane.wait(barrier)
        return Answer([line(scenario["response"])])

    def _misbehave(self, rid: Any, advertised: frozenset[str], frames: list[bytes]) -> Answer:
        fault = self.fault
        correct = frames[0] if frames else line(result(rid, []))
        if fault == "hang":
            return Answer(hang=True)
        if fault == "crash":
            return Answer(crash=True)
        if fault == "late":
            return Answer([correct], delay_s=self.delay_s)
        if fault == "rpc-error":
            return Answer([line(rpc_error(rid, -32004, "backend_internal_error"))])
        if fault == "leak-exception":
            leak = rpc_error(rid, -32004, TRACEBACK, {"traceback": TRACEBACK})
            return Answer([line(leak)])
        if fault == "garbage":
            return Answer([GARBAGE])
        if fault == "non-utf8":
            return Answer([NON_UTF8])
        if fault == "wrong-id":
            return Answer([line(result(other_id(rid), []))])
        if fault == "stray-frame":
            return Answer([line(result(other_id(rid), [])), correct])
        if fault == "multi-line":
            return Answer([json.dumps(json.loads(correct), indent=2).encode() + b"\n"])
        if fault == "stdout-noise":
            return Answer([NOISE, correct])
        if fault == "oversized":
            padded = result(rid, [])
            padded["result"]["padding"] = "x" * (MAX_FRAME_BYTES + 1024)
            return Answer([line(padded)])
        if fault == "unadvertised-effect":
            name = next((n for n in UNADVERTISED_ORDER if n not in advertised), "ask")
            return Answer([line(result(rid, [unadvertised(name)]))])
        if fault == "unknown-effect":
            return Answer([line(result(rid, [UNKNOWN_EFFECT]))])
        if fault == "no-effects":
            return Answer(
                [line({"jsonrpc": "2.0", "id": rid, "result": {"protocolVersion": "draft"}})]
            )
        if fault == "no-version":
            return Answer([line({"jsonrpc": "2.0", "id": rid, "result": {"effects": []}})])
        raise AssertionError(f"fault {fault!r} has no behaviour")  # FAULTS and this agree


def unadvertised(name: str) -> dict[str, Any]:
    """A well-formed effect of type ``name`` (what ``unadvertised-effect`` sends)."""
    shapes: dict[str, dict[str, Any]] = {
        "deny": {"type": "deny", "reason": "not advertised"},
        "message": {"type": "message", "text": "not advertised"},
        "return": {"type": "return", "value": "not advertised"},
        "flow": {"type": "flow", "operation": "stop", "reason": "not advertised"},
        "inject": {
            "type": "inject",
            "target": "context",
            "operation": "append",
            "deliverAt": "now",
            "value": [{"role": "user", "content": [{"type": "text", "text": "x"}]}],
        },
    }
    return shapes.get(name, {"type": name})


# -- recording ------------------------------------------------------------------------


class Recorder:
    """``--record FILE``: one JSON line per received message, appended as it arrives."""

    def __init__(self, path: str | None) -> None:
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600) if path else None

    def __call__(self, raw: bytes, transport: str, content_type: str | None = None) -> None:
        if self._fd is None:
            return
        try:
            message: Any = json.loads(raw)
        except ValueError:
            message = {"undecodable": raw[:2000].decode("utf-8", "replace")}
        entry: dict[str, Any] = {
            "time": time.time(),
            "pid": os.getpid(),
            "transport": transport,
            "message": message,
        }
        if transport == "http":
            entry["contentType"] = content_type
        os.write(self._fd, json.dumps(entry).encode() + b"\n")


def read_entries(path: Path) -> list[dict[str, Any]]:
    """What a fake backend recorded (``--record``): one entry per message, in order."""
    if not path.is_file():
        return []
    return [json.loads(raw) for raw in path.read_text("utf-8").splitlines() if raw.strip()]


def read_record(path: Path) -> list[dict[str, Any]]:
    """The messages a fake backend recorded (``--record``), in order."""
    out = []
    for entry in read_entries(path):
        message = entry["message"]
        out.append(message if isinstance(message, dict) else {"undecodable": message})
    return out


def _crash() -> NoReturn:
    sys.stdout.flush()
    os._exit(CRASH_STATUS)


# -- stdio ----------------------------------------------------------------------------


def serve_stdio(fake: Fake, record: Recorder) -> int:
    """Persistent stdio: read lines until EOF, answer each in order (``late`` answers later)."""
    out = sys.stdout.buffer
    write_lock = threading.Lock()

    def write(frames: list[bytes]) -> None:
        with write_lock:
            for frame in frames:
                out.write(frame)
            out.flush()

    stdin = sys.stdin.buffer
    while True:
        raw = stdin.readline(MAX_FRAME_BYTES + 2)
        if not raw:
            return 0
        if not raw.strip():
            continue
        record(raw, "stdio")
        answer = fake.answer(raw)
        if answer.crash:
            _crash()
        if answer.hang or not answer.frames:
            continue
        if answer.delay_s > 0:
            timer = threading.Timer(answer.delay_s, write, (answer.frames,))
            timer.daemon = True
            timer.start()
        else:
            write(answer.frames)


# -- HTTP -----------------------------------------------------------------------------


def loopback_address(text: str) -> tuple[str, int]:
    """``HOST:PORT`` on a loopback interface (anything else is refused)."""
    host, sep, port = text.rpartition(":")
    host = host.strip("[]")
    if not sep or not port.isdigit() or int(port) > 65535:
        raise ContractError(f"--http {text!r}: expected HOST:PORT, e.g. 127.0.0.1:0")
    try:
        loopback = host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = False
    if not loopback:
        raise ContractError(f"--http {text!r}: the fake backend listens on loopback only")
    return host, int(port)


def http_server(
    fake: Fake, record: Recorder, address: tuple[str, int], bearer: str | None = None
) -> ThreadingHTTPServer:
    """An HTTP server answering every ``POST`` as one AHP message (not started)."""
    hold = threading.Event()  # never set: where ``hang`` waits

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True  # headers and body are two writes: no 40 ms stall

        def log_message(self, *_args: object) -> None:
            pass

        def _send(self, status: int, body: bytes, media: str = "application/json") -> None:
            self.send_response(status)
            if body:
                self.send_header("Content-Type", media)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _authorized(self) -> bool:
            if bearer is None:
                return True
            values = self.headers.get_all("Authorization") or []
            return values == [f"Bearer {bearer}"]

        def do_GET(self) -> None:
            if self.path.rstrip("/").endswith("/capabilities"):
                if not self._authorized():
                    self._send(401, b'{"error":"unauthorized"}')
                    return
                self._send(200, json.dumps(http_capabilities()).encode())
            else:
                self._send(405, b'{"error":"AHP over HTTP is POST"}')

        def do_POST(self) -> None:
            try:
                length = int(self.headers.get("Content-Length") or "0")
            except ValueError:
                length = -1
            if length < 0 or length > MAX_FRAME_BYTES:
                self._send(413 if length > 0 else 400, b'{"error":"bad request size"}')
                return
            raw = self.rfile.read(length)
            if not self._authorized():
                self._send(401, b'{"error":"unauthorized"}')
                return
            record(raw, "http", self.headers.get("Content-Type"))
            answer = fake.answer(raw)
            if answer.crash:
                _crash()
            if answer.hang:
                hold.wait()
                return
            if answer.delay_s > 0:
                time.sleep(answer.delay_s)
            if not answer.frames:
                self._send(202 if answer.notification else 204, b"")
                return
            # One body carries one message: a stray frame's body is the other-id frame
            # alone; noise stays in front of the reply, so that body is not JSON.
            body = answer.frames[0] if fake.fault == "stray-frame" else b"".join(answer.frames)
            self._send(200, body.rstrip(b"\n"))

    server = ThreadingHTTPServer(address, Handler)
    server.daemon_threads = True
    return server


def serve_http(fake: Fake, record: Recorder, address: str, ready_file: str | None) -> int:
    server = http_server(fake, record, loopback_address(address))
    host = str(server.server_address[0])
    port = int(server.server_address[1])
    shown = f"[{host}]" if ":" in host else host
    endpoint = f"http://{shown}:{port}/"
    print(f"listening on {endpoint}", file=sys.stderr, flush=True)
    if ready_file:
        write_json_atomically(
            Path(ready_file), {"endpoint": endpoint, "port": port, "pid": os.getpid()}
        )
    with contextlib.suppress(KeyboardInterrupt):
        server.serve_forever()
    return 0


# -- the contract's server role -------------------------------------------------------


def load_scenario_responses(path: str | Path) -> dict[str, dict[str, Any]]:
    """Scenario id -> the scenario object (its ``response`` is answered verbatim)."""
    try:
        data = json.loads(Path(path).read_text("utf-8"))
    except (OSError, ValueError) as exc:
        raise ContractError(f"scenario file {path}: {exc}") from None
    items = data.get("scenarios") if isinstance(data, dict) else None
    if not isinstance(items, list):
        raise ContractError(f"scenario file {path}: expected {{version, scenarios: [...]}}")
    out: dict[str, dict[str, Any]] = {}
    for index, item in enumerate(items):
        if not isinstance(item, dict) or not isinstance(item.get("id"), str):
            raise ContractError(f"scenario file {path}: scenarios[{index}] needs a string id")
        if "response" not in item:
            raise ContractError(f"scenario file {path}: scenarios[{index}] has no response")
        out[item["id"]] = item
    return out


def serve_contract(config_path: str, fault: str | None, record: Recorder) -> int:
    """The contract's server role: scenario replay, control endpoint, readiness file."""
    config = read_config(config_path)
    transport = config.get("transport")
    if transport not in ("stdio", "http"):
        raise ContractError(f"--config {config_path}: $.transport must be 'stdio' or 'http'")
    for key in ("readinessFile", "scenarioFile"):
        if not isinstance(config.get(key), str):
            raise ContractError(f"--config {config_path}: $.{key} must be a path")
    auth = config.get("auth") or {"mode": "none"}
    mode = auth.get("mode", "none") if isinstance(auth, dict) else None
    bearer: str | None = None
    if transport == "http" and mode == "bearer" and isinstance(auth.get("token"), str):
        bearer = auth["token"]
    elif transport == "http" and mode != "none":
        raise ContractError(
            f"--config {config_path}: auth mode {mode!r} is not supported by the fake backend "
            "(none, bearer)"
        )
    plane = ControlPlane()
    fake = Fake(fault, scenarios=load_scenario_responses(config["scenarioFile"]), plane=plane)
    control = plane.start()
    endpoint = None
    server = None
    if transport == "http":
        server = http_server(fake, record, ("127.0.0.1", 0), bearer)
        endpoint = f"http://127.0.0.1:{server.server_address[1]}/intercept"
        threading.Thread(target=server.serve_forever, daemon=True).start()
    else:

        def stdio() -> None:
            serve_stdio(fake, record)
            plane.stop()  # stdin EOF: the client is gone

        threading.Thread(target=stdio, daemon=True).start()
    write_readiness(Path(config["readinessFile"]), endpoint, control)
    plane.stopping.wait()
    if server is None:
        # The stdio reader is blocked on stdin, holding its buffer's lock: a normal
        # interpreter exit would abort on it. Every answer is already flushed.
        os._exit(0)
    server.shutdown()
    plane.close()
    return 0


# -- the command line -----------------------------------------------------------------


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--fault",
        choices=sorted(FAULTS),
        metavar="MODE",
        help="misbehave on every valid hooks/intercept: "
        + "; ".join(f"{k}: {v}" for k, v in FAULTS.items()),
    )
    parser.add_argument(
        "--delay-ms", type=int, default=DEFAULT_LATE_MS, metavar="N", help="how late 'late' answers"
    )
    parser.add_argument(
        "--record", metavar="FILE", help="append every received message to FILE (JSON lines)"
    )
    parser.add_argument(
        "--http",
        metavar="HOST:PORT",
        help="serve HTTP on a loopback address instead of stdio (port 0: any)",
    )
    parser.add_argument(
        "--ready-file",
        metavar="FILE",
        help="with --http: write {endpoint, port, pid} here once listening",
    )
    parser.add_argument(
        "--scenarios",
        metavar="FILE",
        help="answer each scenario's request with its response, verbatim",
    )
    parser.add_argument(
        "--config", metavar="FILE", help="the interop contract's server role (a server config file)"
    )


def run(args: argparse.Namespace) -> int:
    if args.fault and (args.config or args.scenarios):
        raise ContractError(
            "--fault misbehaves on every intercept; --scenarios and --config answer each "
            "scenario's own response (malformed ones included): give one or the other"
        )
    record = Recorder(args.record)
    if args.config:
        return serve_contract(args.config, args.fault, record)
    scenarios = load_scenario_responses(args.scenarios) if args.scenarios else None
    fake = Fake(args.fault, delay_ms=args.delay_ms, scenarios=scenarios)
    if args.http:
        return serve_http(fake, record, args.http, args.ready_file)
    return serve_stdio(fake, record)


if __name__ == "__main__":  # the same command as ``ahp-conformance fake-backend``
    from ahp_conformance.cli import main

    sys.exit(main(["fake-backend", *sys.argv[1:]]))

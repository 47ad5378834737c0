"""The interop contract's server role, built on the kit's server kit (``ahp_protocol.server``).

``python -m ahp_conformance.kit_server --config FILE`` (``interop/adapter.json``'s
``server`` command). The config is the contract's server config (see
:mod:`ahp_conformance.contract`): ``transport`` (``stdio`` | ``http``), ``readinessFile``,
``scenarioFile``, ``auth`` (``none``, or ``bearer`` with ``token`` over HTTP).

What answers:

- a :class:`~ahp_protocol.server.Backend` with ``tool.before`` and ``turn.finish.before``
  handlers that return the effects of the scenario whose id is the event's id. The
  Backend judges every request (envelope, version, event, grant, state, ``id`` ==
  ``event.id``) and every answer (only advertised, well-formed effects), as for any
  backend written with the kit;
- a thin layer in front (:class:`ScenarioServer`) for what the Backend cannot author:
  the *raw response probes* (:func:`is_raw_probe`: every ``negative`` scenario except the
  ones with ``hostExpected``, whose responses are valid AHP refused by the host's own input
  schema; and the ``extensions`` scenarios: malformed results, another id, unknown,
  unadvertised or exhausted effects, extension members) are answered with the
  scenario's ``response`` verbatim, after the Backend accepted the request (an invalid
  request still gets the Backend's error); every ``hooks/intercept`` is recorded
  (``/receipts``) before it is judged, and a scenario's ``barrier`` is awaited
  (``POST /release``) before it is answered; an event id with no scenario gets -32602;
- discovery: ``hooks/capabilities`` over stdio answers a manifest (built by
  :meth:`~ahp_protocol.client.Hooks.manifest` from :data:`DECLARATION`); over HTTP,
  ``GET /capabilities`` answers the ``tool.before`` capabilities object, which is what
  the official SDK's client reads there.

Transports: stdio (one compact JSON-RPC object per line on stdout, which carries nothing
else; diagnostics on stderr) or HTTP on a loopback port chosen by the system
(``POST /intercept`` through the kit's ASGI :class:`~ahp_protocol.server.asgi.App`,
which owns media types, status codes and the bearer check). The control endpoint is
:class:`~ahp_conformance.contract.ControlPlane`; the readiness file is written once
listening. The process ends on ``POST /shutdown``, on EOF of stdin (stdio), or on
SIGTERM.
"""

from __future__ import annotations

import argparse
import hmac
import json
import os
import socket
import sys
import threading
from collections.abc import Mapping, MutableMapping
from pathlib import Path
from typing import IO, Any

from ahp_conformance.contract import ContractError, ControlPlane, read_config, write_readiness

BACKEND_NAME = "org.agenthooksprotocol.interop.kit"
MAX_FRAME_BYTES = 4 * 1024 * 1024
TOOL_BEFORE: dict[str, Any] = {
    "effects": ["deny", "allow", "ask", "modify", "return", "message", "flow", "inject"],
    "modify": {"input": {"replace": True, "merge": True}},
    "flow": {"operations": ["stop"]},
    "inject": {"context": {"append": True, "deliverAt": ["now", "next_turn"]}},
}
DECLARATION: dict[str, dict[str, Any]] = {
    "tool.before": TOOL_BEFORE,
    "turn.finish.before": {
        "effects": ["flow", "message"],
        "flow": {
            "operations": ["stop", "continue"],
            "remainingContinuations": 2,
            "continuationCount": 0,
        },
    },
}
"""What this scenario server advertises at discovery: the scenarios' two events."""


def is_raw_probe(scenario: Mapping[str, Any]) -> bool:
    """Whether ``scenario``'s response is replayed verbatim: one no Backend written with
    the kit sends (a negative scenario, unless only the host's input schema refuses it)
    or can author (extension members in the envelope)."""
    tags = scenario.get("tags") or ()
    if "extensions" in tags:
        return True
    return "negative" in tags and "hostExpected" not in scenario


def _line(message: Mapping[str, Any]) -> bytes:
    return json.dumps(message, separators=(",", ":"), ensure_ascii=False).encode() + b"\n"


def _error(rid: Any, code: int, reason: str) -> bytes:
    from ahp_protocol.wire.jsonrpc import error

    return _line(error(rid, code, data={"reason": reason}))


class ScenarioServer:
    """The Backend and the thin layer in front of it, for one scenario file."""

    def __init__(self, scenarios: Mapping[str, Mapping[str, Any]], plane: ControlPlane) -> None:
        from ahp_protocol.server import Backend, InterceptRequest

        self.scenarios = dict(scenarios)
        self.plane = plane
        self.backend = Backend(BACKEND_NAME, max_frame_bytes=MAX_FRAME_BYTES)

        def answer(request: InterceptRequest) -> Any:
            scenario = self.scenarios.get(str(request.event.get("id")))
            if scenario is None or is_raw_probe(scenario):
                return None  # the front answers these
            result = scenario["response"].get("result")
            effects = result.get("effects") if isinstance(result, Mapping) else None
            return list(effects) if isinstance(effects, list) else None

        self.backend.intercept("tool.before")(answer)
        self.backend.intercept("turn.finish.before")(answer)

    @classmethod
    def from_file(cls, path: Path, plane: ControlPlane) -> ScenarioServer:
        try:
            document = json.loads(path.read_text("utf-8"))
        except (OSError, ValueError) as exc:
            raise ContractError(f"scenarioFile {path}: {exc}") from None
        items = document.get("scenarios") if isinstance(document, dict) else None
        if not isinstance(items, list):
            raise ContractError(f"scenarioFile {path}: expected an object with 'scenarios'")
        return cls({str(s.get("id")): s for s in items if isinstance(s, dict)}, plane)

    def discovery(self, message: Mapping[str, Any]) -> bytes:
        """``hooks/capabilities``: the manifest of this scenario server."""
        from ahp_protocol.client import Hooks
        from ahp_protocol.wire.jsonrpc import ErrorCode, success

        params = message.get("params")
        if not isinstance(params, Mapping) or params.get("protocolVersion") != "draft":
            return _error(message.get("id"), ErrorCode.INVALID_PARAMS, "protocolVersion: draft")
        hooks = Hooks(
            None, harness={"name": "ahp-interop", "version": "1"}, capabilities=DECLARATION
        )
        manifest = hooks.manifest()
        return _line(success(message.get("id"), {"protocolVersion": "draft", "manifest": manifest}))

    def before(self, body: bytes) -> tuple[Mapping[str, Any] | None, bytes | None]:
        """Record, find the scenario and await its barrier: ``(scenario, early reply)``."""
        from ahp_protocol.wire.jsonrpc import ErrorCode

        try:
            message = json.loads(body)
        except ValueError:
            return None, None  # the Backend answers the parse error
        if not isinstance(message, dict):
            return None, None
        if message.get("method") == "hooks/capabilities" and "id" in message:
            return None, self.discovery(message)
        if message.get("method") != "hooks/intercept":
            return None, None
        self.plane.record(message)
        params = message.get("params")
        event = params.get("event") if isinstance(params, dict) else None
        event_id = event.get("id") if isinstance(event, dict) else None
        if not isinstance(event_id, str):
            return None, None
        scenario = self.scenarios.get(event_id)
        if scenario is None:
            return None, _error(
                message.get("id"), ErrorCode.INVALID_PARAMS, "no scenario has this event id"
            )
        barrier = scenario.get("barrier")
        if isinstance(barrier, str) and barrier and not self.plane.wait(barrier):
            return None, _error(message.get("id"), ErrorCode.INTERNAL_ERROR, "barrier watchdog")
        return scenario, None

    @staticmethod
    def after(scenario: Mapping[str, Any] | None, reply: bytes | None) -> bytes | None:
        """The Backend's reply, or the raw probe's response once the Backend accepted."""
        if scenario is None or reply is None or not is_raw_probe(scenario):
            return reply
        try:
            accepted = "result" in json.loads(reply)
        except ValueError:
            accepted = False
        return _line(scenario["response"]) if accepted else reply

    def answer(self, body: bytes) -> bytes | None:
        """One framed message in, one line out (``None`` for a notification); stdio."""
        scenario, early = self.before(body)
        if early is not None:
            return early
        return self.after(scenario, self.backend.handle_sync(body))


# -- stdio ---------------------------------------------------------------------------------


def _protocol_stdout() -> IO[bytes]:
    """A private copy of stdout for protocol lines; fd 1 and ``sys.stdout`` go to stderr."""
    sys.stdout.flush()
    private = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return open(private, "wb", buffering=0)  # lives as long as the process


def serve_stdio(server: ScenarioServer, plane: ControlPlane, readiness: Path, control: str) -> None:
    """Answer stdin lines until EOF or ``/shutdown``; readiness once the loop runs."""
    out = _protocol_stdout()
    stdin = sys.stdin.buffer

    def loop() -> None:
        from ahp_protocol.wire.jsonrpc import ErrorCode

        while not plane.stopping.is_set():
            line = stdin.readline(MAX_FRAME_BYTES + 1)
            if not line:
                break
            if len(line) > MAX_FRAME_BYTES and not line.endswith(b"\n"):
                while line and not line.endswith(b"\n"):
                    line = stdin.readline(64 * 1024)
                reply: bytes | None = _error(None, ErrorCode.PARSE_ERROR, "frame too large")
            elif not line.strip():
                continue
            else:
                reply = server.answer(line.rstrip(b"\r\n"))
            if reply is not None:
                try:
                    out.write(reply)
                except OSError:
                    break
        plane.stop()

    threading.Thread(target=loop, daemon=True).start()
    write_readiness(readiness, None, control)
    plane.stopping.wait()


# -- HTTP ----------------------------------------------------------------------------------


class Front:
    """ASGI app: ``GET /capabilities``, ``POST /intercept`` through the kit's ``App``."""

    def __init__(self, server: ScenarioServer, token: str | None) -> None:
        from ahp_protocol.server.asgi import App

        self.server = server
        self.token = token
        self.app = App(server.backend, max_frame_bytes=MAX_FRAME_BYTES, bearer_token=token)

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope.get("type") != "http":
            await self.app(scope, receive, send)
            return
        path, method = scope.get("path"), scope.get("method")
        if path == "/capabilities" and method == "GET":
            if not self._authorized(scope):
                await self._send(send, 401, b'{"error":"unauthorized"}')
                return
            await self._send(send, 200, json.dumps(TOOL_BEFORE).encode())
            return
        if path not in ("/intercept", "/"):
            await self._send(send, 404, b'{"error":"not found"}')
            return
        body = bytearray()
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return
            body.extend(message.get("body", b""))
            if len(body) > MAX_FRAME_BYTES or not message.get("more_body", False):
                break
        await self._intercept(scope, bytes(body), send)

    async def _intercept(self, scope: Any, body: bytes, send: Any) -> None:
        import anyio.to_thread

        scenario: Mapping[str, Any] | None = None
        if self._authorized(scope) and scope.get("method") == "POST":
            scenario, early = await anyio.to_thread.run_sync(self.server.before, body)
            if early is not None:
                await self._send(send, 200, early.rstrip(b"\n"))
                return
        delivered = False

        async def replay() -> dict[str, Any]:
            nonlocal delivered
            if delivered:
                return {"type": "http.disconnect"}
            delivered = True
            return {"type": "http.request", "body": body, "more_body": False}

        sent: list[MutableMapping[str, Any]] = []

        async def capture(message: MutableMapping[str, Any]) -> None:
            sent.append(message)

        await self.app(scope, replay, capture)
        start = next((m for m in sent if m["type"] == "http.response.start"), None)
        if start is None:
            return
        reply = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
        if start["status"] == 200:
            replaced = ScenarioServer.after(scenario, reply)
            if replaced is not None and replaced is not reply:
                await self._send(send, 200, replaced.rstrip(b"\n"))
                return
        await send(start)
        await send({"type": "http.response.body", "body": reply})

    def _authorized(self, scope: Any) -> bool:
        if self.token is None:
            return True
        values = [v for k, v in scope.get("headers") or () if k.lower() == b"authorization"]
        expected = b"Bearer " + self.token.encode("latin-1")
        return len(values) == 1 and hmac.compare_digest(bytes(values[0]), expected)

    @staticmethod
    async def _send(send: Any, status: int, body: bytes) -> None:
        headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})


def serve_http(
    server: ScenarioServer, plane: ControlPlane, readiness: Path, control: str, token: str | None
) -> None:
    """Serve ``POST /intercept`` on a loopback port; readiness once it listens."""
    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    port = sock.getsockname()[1]
    config = uvicorn.Config(
        Front(server, token),
        log_level="warning",
        access_log=False,
        log_config=None,
        lifespan="off",
        server_header=False,
    )
    runner = uvicorn.Server(config)

    def stop_when_asked() -> None:
        plane.stopping.wait()
        runner.should_exit = True

    threading.Thread(target=stop_when_asked, daemon=True).start()
    write_readiness(readiness, f"http://127.0.0.1:{port}/intercept", control)
    try:
        runner.run(sockets=[sock])
    finally:
        sock.close()
        plane.stop()


# -- the command ---------------------------------------------------------------------------


def run(config: Mapping[str, Any]) -> int:
    transport = config.get("transport", "stdio")
    if transport not in ("stdio", "http"):
        raise ContractError(f"transport must be stdio or http, not {transport!r}")
    for key in ("readinessFile", "scenarioFile"):
        if not isinstance(config.get(key), str):
            raise ContractError(f"a server config needs {key!r} (a path)")
    auth = config.get("auth") or {}
    mode = auth.get("mode", "none") if isinstance(auth, Mapping) else None
    token: str | None = None
    if mode == "bearer" and transport == "http" and isinstance(auth.get("token"), str):
        token = str(auth["token"])
    elif mode not in ("none", None) and not (mode == "bearer" and transport == "stdio"):
        raise ContractError(f"auth mode {mode!r} is not supported by the kit's server adapter")
    plane = ControlPlane()
    server = ScenarioServer.from_file(Path(str(config["scenarioFile"])), plane)
    readiness = Path(str(config["readinessFile"]))
    control = plane.start()
    try:
        if transport == "stdio":
            serve_stdio(server, plane, readiness, control)
        else:
            serve_http(server, plane, readiness, control, token)
    finally:
        plane.close()
    if transport == "stdio":
        # The reader thread may be blocked on stdin (``/shutdown`` with stdin still open):
        # an ordinary exit would wait for its lock at interpreter shutdown and abort.
        sys.stderr.flush()
        os._exit(0)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m ahp_conformance.kit_server",
        description="The kit's interop server adapter (upstream interop contract, server role).",
    )
    parser.add_argument("--config", required=True, help="the contract's server config (JSON)")
    args = parser.parse_args(argv)
    try:
        return run(read_config(args.config))
    except ContractError as exc:
        print(f"kit_server: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())

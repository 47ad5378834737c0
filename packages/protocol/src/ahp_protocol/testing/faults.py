"""The scripted misbehaving backend: one fault table, what each fault answers, no I/O.

Owns :data:`FAULTS` (every way a backend can fail a harness, by name) and
:class:`Misbehaving`, which turns one received message into an :class:`Answer`
(frames to write, after a delay, or a hang, or a crash). Every *valid*
``hooks/intercept`` request (one the kit's server kit would answer) is answered as the
fault says; everything else is answered the way a well-behaved backend answers it (the
server kit decides: -32700, -32600, -32601, -32602, -32001, -32002), so only the named
fault is wrong. A valid ``hooks/capabilities`` request gets a valid manifest in every
mode, so discovery is never the fault. Notifications are never answered, except in
``reply-to-notifications``. Without a fault every intercept gets a valid answer with no
effect; ``deny`` answers a valid deny to every ``tool.before`` whose request grants it.

The same object is served in memory (:class:`~ahp_protocol.testing.MemoryTransport`)
and as a process (``python -m ahp_protocol.testing``, :mod:`ahp_protocol.testing.serve`);
``ahp-conformance fake-backend`` adds scenario replay and the interop contract's
server role on top of it.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

MAX_FRAME_BYTES = 4 * 1024 * 1024
"""The SDK's frame cap; ``oversized`` answers a reply larger than this."""
DEFAULT_LATE_MS = 3000
CRASH_STATUS = 3
NOISE = b"scripted backend: evaluating the request (a log line on stdout)\n"
GARBAGE = b"this line is not JSON\n"
NON_UTF8 = b'{"jsonrpc": "2.0", "note": "\xff\xfe\xfd"}\n'
UNKNOWN_EFFECT = {"type": "org.example.unknown"}
DENY_REASON = "denied by the scripted backend (fault deny)"
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
    "declared-unsupported": "subscribes to tool.before in hooks/configuration, yet answers "
    "-32002 (unsupported event) to every intercept",
    "deny": "a valid deny to every tool.before (well-behaved)",
    "allow": "a valid allow to every tool.before that advertises allow, else no effect "
    "(well-behaved)",
}
"""Every fault mode and what it does on a valid ``hooks/intercept`` (the shared table)."""
DECLARED = {
    "mode": "intercept",
    "events": ["tool.before"],
    "timeoutMs": 2000,
    "failurePolicy": "fail-closed",
    "content": {"default": "metadata"},
}
"""The subscription ``declared-unsupported`` serves at ``hooks/configuration``."""


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


def decoded(raw: bytes) -> Any:
    """The JSON value of one received frame, or ``None`` if it is not JSON."""
    try:
        return json.loads(raw)
    except ValueError:
        return None


def is_notification(message: Any) -> bool:
    return isinstance(message, dict) and "id" not in message and message.get("method") is not None


class Misbehaving:
    """The answering logic, transport-free: one received message in, one :class:`Answer` out.

    ``fault`` is a :data:`FAULTS` name or ``None`` (well-behaved); ``delay_ms`` is how
    late ``late`` answers.
    """

    def __init__(self, fault: str | None = None, *, delay_ms: int = DEFAULT_LATE_MS) -> None:
        from ahp_protocol.server.backend import Backend, InterceptRequest

        if fault is not None and fault not in FAULTS:
            raise ValueError(f"unknown fault mode {fault!r}; one of: {', '.join(FAULTS)}")
        self.fault = fault
        self.delay_s = delay_ms / 1000
        self._seen = threading.local()
        self._lock = threading.Lock()
        # Only declared-unsupported answers hooks/configuration: it declares what it refuses.
        configuration = [DECLARED] if fault == "declared-unsupported" else None
        self._backend = Backend("org.ahp.testing.misbehaving", configuration=configuration)

        @self._backend.intercept("*")
        def decide(request: InterceptRequest) -> list[dict[str, Any]]:
            self._seen.request = request
            if (
                fault in ("deny", "late")
                and request.event_type == "tool.before"
                and "deny" in request.advertised
            ):
                return [{"type": "deny", "reason": DENY_REASON}]
            if (
                fault == "allow"
                and request.event_type == "tool.before"
                and "allow" in request.advertised
            ):
                return [{"type": "allow"}]
            return []

    def answer(self, raw: bytes) -> Answer:
        """What to do with one received frame (see the module docstring)."""
        message = decoded(raw)
        if discovery := self.discovery(message):
            return discovery
        if is_notification(message):
            if self.fault == "reply-to-notifications":
                return Answer([line(result(None, []))], notification=True)
            return Answer(notification=True)
        with self._lock:
            self._seen.request = None
            reply = self._backend.handle_sync(raw.rstrip(b"\r\n"))
            request = self._seen.request
        frames = [reply] if reply is not None else []
        if request is None or self.fault in (None, "deny", "allow", "reply-to-notifications"):
            return Answer(frames)
        return self._misbehave(request.id, request.advertised, frames)

    @staticmethod
    def discovery(message: Any) -> Answer | None:
        """The answer to a valid ``hooks/capabilities`` request (never faulty), else ``None``."""
        from ahp_protocol.wire.errors import WireError, WireErrors
        from ahp_protocol.wire.messages import validate_message

        if not isinstance(message, dict) or message.get("method") != "hooks/capabilities":
            return None
        try:
            valid = validate_message(message) == "capabilities-request"
        except (WireError, WireErrors):
            valid = False
        if not valid:
            return None
        body = {"protocolVersion": "draft", "manifest": manifest()}
        return Answer([line({"jsonrpc": "2.0", "id": message.get("id"), "result": body})])

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
        if fault == "declared-unsupported":
            return Answer([line(rpc_error(rid, -32002, "unsupported_event"))])
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

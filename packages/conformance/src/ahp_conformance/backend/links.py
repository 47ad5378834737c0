"""How the backend judge reaches a backend: one link per binding, one exchange per message.

- :class:`StdioLink`: a persistent stdio process, warmed up with a ``hooks/capabilities``
  request when it starts, restarted after a timeout or an exit;
- :class:`PerEventLink`: stdio ``per_event``: one process per message;
- :class:`HttpLink`: one POST per message.

Each link has ``request(data, rid)`` (send a request, return the :class:`RoundTrip` with
the response correlated by id) and ``collect(data)`` (send a frame that must not be
correlated: a notification, or a request whose id cannot be read; return whatever came
back for it). While reading, a link records every framing or transport fault on the
:class:`Judge` (a line that is not JSON-RPC, a stray id, noise on stdout, an HTTP status
or media type) with the requirement it breaks, and every timeout or exit as an
incident; it never decides a check. Raw bytes and bounds are :mod:`.peer`'s.
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping, Sequence
from typing import Any

from ahp_protocol.wire.jsonrpc import DecodeError, classify, decode

from ahp_conformance.backend.judge import Incident, Judge, RoundTrip
from ahp_conformance.backend.peer import HttpPeer, Line, StdioProcess, run_once
from ahp_conformance.backend.probes import Messages, frame

HTTP_OK_MEDIA = re.compile(r"^application/(?:[\w.+-]+\+)?json\s*(?:;.*)?$", re.IGNORECASE)
"""A JSON media type (``application/json``, ``application/*+json``, parameters allowed)."""


def _decode(data: bytes) -> dict[str, Any] | str:
    """A decoded JSON-RPC message, or the reason it is not one."""
    try:
        return decode(data)
    except DecodeError as exc:
        return exc.reason


def _is_response(message: Mapping[str, Any]) -> bool:
    try:
        return classify(message) in ("success", "error")
    except DecodeError:
        return False


OVERSIZED_LINE = "a frame larger than 4 MiB on stdout"


def _stray_id(got: Any, rid: Any) -> str:
    return f"a response with id {got!r}, not the request's {rid!r}"


def _join(lines: Sequence[Line]) -> bytes:
    """The lines as they came (an empty line shown as such, for evidence)."""
    if len(lines) == 1 and not lines[0].data:
        return b"(an empty line)"
    return b"\n".join(line.data for line in lines)


class StdioLink:
    """A persistent stdio backend; restarted after a timeout or an exit."""

    def __init__(self, judge: Judge, argv: Sequence[str], cwd: str | None, msgs: Messages) -> None:
        self.judge = judge
        self.argv = list(argv)
        self.cwd = cwd
        self.msgs = msgs
        self.proc: StdioProcess | None = None
        self.discovery: list[RoundTrip] = []

    def _start(self) -> StdioProcess | str:
        """Start the process and warm it up with a discovery request: the process, or why
        there is none (it cannot start, exited before answering, or the warm-up failed)."""
        try:
            proc = StdioProcess(self.argv, self.cwd)
        except OSError as exc:
            reason = f"cannot start {self.argv[0]!r}: {exc.strerror or exc}"
            self.judge.incident(reason, "fatal")
            self.judge.no_answer(reason, b"")
            return reason
        self.proc = proc
        rid, message = self.msgs.discovery("hooks/capabilities", "discovery")
        budget = self.judge.timeout_s + self.judge.startup_s
        outcome = self._exchange(proc, frame(message), rid, budget, fresh=True)
        self.discovery.append(outcome)
        if self.proc is None:  # the warm-up ended it
            return outcome.failure or "the backend stopped while starting"
        return proc

    def close(self) -> None:
        if self.proc is not None:
            self.proc.close()
            self.proc = None

    def first_discovery(self) -> RoundTrip:
        """What came back for the warm-up ``hooks/capabilities`` of the first process
        (started now if need be)."""
        ready = self._ready()
        if self.discovery:
            return self.discovery[0]
        return RoundTrip(b"", failure=ready if isinstance(ready, str) else "not started")

    def _ready(self) -> StdioProcess | str:
        """The running process (started if need be), or why the backend is not talked to."""
        stop = self.judge.given_up()
        if stop:
            return stop
        if self.proc is None:
            return self._start()
        return self.proc

    def _incident(self, reason: str, kind: Incident) -> None:
        self.judge.incident(reason, kind)
        self.close()

    @staticmethod
    def _exit_text(proc: StdioProcess, fresh: bool) -> str:
        """How the process ended, with the tail of its stderr (``fresh``: before it had
        answered anything at all)."""
        status = proc.exit_status(wait=1.0)
        stderr = proc.stderr_text(wait=1.0 if status is not None else 0.0)
        tail = " | ".join(stderr.strip().splitlines()[-3:])
        if fresh:
            text = (
                f"the backend exited with status {status} before answering"
                if status is not None
                else "the backend closed its stdout before answering"
            )
            return text + (f": {tail}" if tail else " (nothing on stderr)")
        text = f"the backend exited (status {status})" if status is not None else "stdout closed"
        return text + (f"; stderr: {tail}" if tail else "")

    def request(self, data: bytes, rid: Any) -> RoundTrip:
        """Send one request; read until its response (by id) or the deadline."""
        proc = self._ready()
        if isinstance(proc, str):
            return RoundTrip(data, failure=proc)
        return self._exchange(proc, data, rid, self.judge.timeout_s)

    def _exchange(
        self,
        proc: StdioProcess,
        data: bytes,
        rid: Any,
        budget: float,
        *,
        strays_ok: bool = False,
        fresh: bool = False,
    ) -> RoundTrip:
        """Write ``data`` and read until the response with id ``rid``, EOF or the deadline.

        ``fresh``: the warm-up of a process just started; if it ends before writing
        anything, it cannot be judged at all (fatal: it is not restarted)."""
        out = RoundTrip(data)
        deadline = time.monotonic() + budget
        proc.write(data)
        seen: list[Line] = []
        pending: list[Line] = []  # lines that are not protocol (maybe one reply over several)
        while True:
            line = proc.next_line(deadline)
            if line is None:
                break
            seen.append(line)
            if line.oversized:
                self.judge.problem("AHP-STDIO-001", OVERSIZED_LINE, data, line.data)
                continue
            if line.unterminated:
                self.judge.problem("AHP-STDIO-001", "a final frame cut off by EOF", data, line.data)
            decoded = _decode(line.data)
            if isinstance(decoded, str):
                pending.append(line)
                joined = _decode(b"\n".join(p.data for p in pending))
                if isinstance(joined, dict) and _is_response(joined) and joined.get("id") == rid:
                    self.judge.problem(
                        "AHP-STDIO-001",
                        f"the reply was spread over {len(pending)} lines (one object per line)",
                        data,
                        _join(pending),
                    )
                    out.reply = joined
                    out.responses.append(joined)
                    break
                continue
            if pending:
                self._noise(data, pending)
                pending = []
            if not _is_response(decoded):
                self.judge.problem(
                    "AHP-RPC-001", "the backend sent a request on stdout", data, line.data
                )
                continue
            out.responses.append(decoded)
            if decoded.get("id") == rid and not isinstance(rid, bool):
                out.reply = decoded
                break
            if strays_ok:
                continue
            self.judge.problem(
                "AHP-RPC-001",
                _stray_id(decoded.get("id"), rid),
                data,
                line.data,
            )
        out.received = _join(seen)
        self.judge.saw(out)
        if out.reply is not None:
            if pending:
                self._noise(data, pending)
            return out
        if pending:
            self.judge.problem(
                "AHP-RPC-001",
                "the backend answered with a frame that is not UTF-8 JSON-RPC "
                f"({_decode(pending[0].data)})",
                data,
                _join(pending),
            )
            self._noise(data, pending)
        ended = proc.eof or proc.write_error is not None
        never_answered = fresh and not seen
        if proc.eof:
            out.failure = self._exit_text(proc, never_answered)
        elif proc.write_error:
            out.failure = proc.write_error
        else:
            out.failure = f"no response with id {rid!r} within {budget * 1000:.0f} ms"
        if not seen:
            self.judge.no_answer(out.failure, data)
        self._incident(
            out.failure, "timeout" if not ended else "fatal" if never_answered else "exit"
        )
        return out

    def _noise(self, sent: bytes, lines: Sequence[Line]) -> None:
        self.judge.problem(
            "AHP-STDIO-001", "stdout held lines that are not protocol messages", sent, _join(lines)
        )

    def collect(self, data: bytes) -> RoundTrip:
        """Send a frame that must not be correlated (notification, no usable id), then a
        probe request; everything before the probe's response came back for ``data``."""
        proc = self._ready()
        if isinstance(proc, str):
            return RoundTrip(data, failure=proc)
        rid, probe = self.msgs.sentinel()
        outcome = self._exchange(
            proc, data + frame(probe), rid, self.judge.timeout_s, strays_ok=True
        )
        outcome.sent = data
        outcome.responses = [r for r in outcome.responses if r is not outcome.reply]
        if outcome.reply is None:
            outcome.failure = (
                f"after this frame the backend did not answer a valid request: {outcome.failure}"
            )
        outcome.reply = None
        return outcome


class PerEventLink:
    """One process per message (``per_event``): the message, EOF, at most one response."""

    def __init__(self, judge: Judge, argv: Sequence[str], cwd: str | None) -> None:
        self.judge = judge
        self.argv = list(argv)
        self.cwd = cwd

    def close(self) -> None:
        pass

    def _run(self, data: bytes) -> tuple[RoundTrip, str]:
        """One process for ``data``: what came back, and how it ended when its exit status
        was not 0 (the status and its stderr tail, for evidence), else ``""``."""
        out = RoundTrip(data)
        stop = self.judge.given_up()
        if stop:
            out.failure = stop
            return out, ""
        budget = self.judge.timeout_s + self.judge.startup_s
        result = run_once(self.argv, data, time.monotonic() + budget, self.cwd)
        out.received = _join(result.lines)
        if result.spawn_error:
            out.failure = result.spawn_error
            self.judge.incident(result.spawn_error, "fatal")
            self.judge.no_answer(result.spawn_error, b"")
            return out, ""
        decoded: list[dict[str, Any]] = []
        for line in result.lines:
            if line.oversized:
                self.judge.problem("AHP-STDIO-001", OVERSIZED_LINE, data, line.data)
                continue
            value = _decode(line.data)
            if isinstance(value, str):
                self.judge.problem(
                    "AHP-STDIO-001",
                    f"stdout held a line that is not a protocol message ({value})",
                    data,
                    line.data,
                )
                continue
            decoded.append(value)
        if len(decoded) > 1:
            self.judge.problem(
                "AHP-STDIO-001",
                f"{len(decoded)} messages for one event (at most one response, then exit)",
                data,
                out.received,
            )
        if result.timed_out:
            out.failure = f"the process did not exit within {budget * 1000:.0f} ms"
            if not result.lines:
                self.judge.no_answer(out.failure, data)
            self.judge.incident(out.failure, "timeout")
        ended = ""
        if not result.timed_out and result.exit_status not in (0, None):
            tail = " | ".join(result.stderr.strip().splitlines()[-3:])
            ended = f" (exit status {result.exit_status}; stderr: {tail})"
            self.judge.problem(
                "AHP-STDIO-001",
                f"per_event: exit status {result.exit_status} (stderr: {tail})",
                data,
                out.received,
            )
        out.responses = [d for d in decoded if _is_response(d)]
        return out, ended

    def request(self, data: bytes, rid: Any) -> RoundTrip:
        out, ended = self._run(data)
        for response in out.responses:
            if response.get("id") == rid:
                out.reply = response
            else:
                self.judge.problem(
                    "AHP-RPC-001",
                    _stray_id(response.get("id"), rid),
                    data,
                    out.received,
                )
        if out.reply is None and out.failure is None:
            out.failure = "the process exited without a response" + ended
            if not out.received:
                self.judge.no_answer(out.failure, data)
        self.judge.saw(out)
        return out

    def collect(self, data: bytes) -> RoundTrip:
        out, _ = self._run(data)
        self.judge.saw(out)
        return out


class HttpLink:
    """An HTTP backend: every message one POST to the URL."""

    def __init__(self, judge: Judge, peer: HttpPeer) -> None:
        self.judge = judge
        self.peer = peer

    def close(self) -> None:
        self.peer.close()

    def post(self, data: bytes, **options: Any) -> RoundTrip:
        out = RoundTrip(data)
        stop = self.judge.given_up()
        if stop:
            out.failure = stop
            return out
        reply = self.peer.send(data, self.judge.timeout_s, **options)
        out.http = reply
        out.received = (
            f"HTTP {reply.status} {reply.headers.get('content-type', '')}\n".encode() + reply.body
            if reply.status is not None
            else b""
        )
        if reply.status is None:
            out.failure = reply.error or "no HTTP response"
            self.judge.no_answer(out.failure, data)
            self.judge.incident(out.failure, "timeout" if reply.timed_out else "exit")
            return out
        self.judge.received_any = True
        if reply.oversized:
            self.judge.problem(
                "AHP-HTTP-001", "a response body larger than 4 MiB", data, reply.body
            )
            out.failure = "the response body was larger than 4 MiB"
            return out
        if reply.body:
            value = _decode(reply.body)
            if isinstance(value, dict) and _is_response(value):
                out.responses.append(value)
        self.judge.saw(out)
        return out

    def request(self, data: bytes, rid: Any) -> RoundTrip:
        out = self.post(data)
        reply = out.http
        if out.failure or reply is None:
            return out
        if reply.status != 200:
            self.judge.problem(
                "AHP-HTTP-001",
                f"a request was answered with HTTP {reply.status}, not 200",
                data,
                out.received,
            )
        media = reply.headers.get("content-type", "")
        if not HTTP_OK_MEDIA.match(media):
            self.judge.problem(
                "AHP-HTTP-001",
                f"the response's Content-Type is {media!r}, not a JSON media type",
                data,
                out.received,
            )
        value = _decode(reply.body)
        if isinstance(value, str):
            self.judge.problem(
                "AHP-RPC-001",
                f"the response body is not one UTF-8 JSON-RPC object ({value})",
                data,
                out.received,
            )
            out.failure = "no usable JSON-RPC response"
            return out
        if not _is_response(value):
            self.judge.problem(
                "AHP-RPC-001", "the body is not a JSON-RPC response", data, out.received
            )
            out.failure = "no usable JSON-RPC response"
            return out
        if value.get("id") != rid:
            self.judge.problem(
                "AHP-RPC-001",
                _stray_id(value.get("id"), rid),
                data,
                out.received,
            )
            out.failure = f"no response with id {rid!r}"
            return out
        out.reply = value
        return out

    def collect(self, data: bytes) -> RoundTrip:
        return self.post(data)


Link = StdioLink | PerEventLink | HttpLink

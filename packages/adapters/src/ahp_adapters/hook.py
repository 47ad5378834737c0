"""``ahp-adapter hook <dialect>``: what the native harness runs as its hook.

For a pre-tool hook: read the native payload from stdin, build ``tool.before``,
run the registration's chain (through the warm daemon, or in this process),
and answer in the dialect's own form: its blocking answer on a deny (a
backend's reason; after a fail-closed backend failure, "Required policy backend
ID unavailable (CLASS)."; the generic reason when nothing ran); on
Claude Code, an accepted input rewrite as ``updatedInput`` alone (never with a
permission decision); and the dialect's "no decision" otherwise (nothing, or
``{}`` for Cursor: see each codec's ``quirks``). Never the native "allow": no
effect is not permission, and the harness's own permission prompt must run.

The failure policy lives here because every native harness fails open when a
hook crashes or times out. Everything runs inside ``--budget`` seconds (well
inside the native hook timeout the installer writes); a spent budget, a
malformed payload, an unreadable registration, a daemon that died with the
request, an internal error: each is a failure, and the strictest
``tool.before`` interceptor's policy decides (fail-closed: the blocking
answer with the generic reason; fail-open: no decision). Post-tool and session
hooks become ``tool.after``, ``session.start`` and ``session.end``
observations: best effort, never an answer.

Stdout carries the native answer and nothing else (file descriptor 1 is
pointed at stderr while the chain runs); no traceback ever reaches it.
Diagnostics go to stderr where the dialect tolerates it (not Gemini, which
reads stray text): one line per failed backend, with its failure class, policy,
the diagnostic's fixed detail and, for a command not on the hook's ``PATH``, the fix.

Owns the steps from a native payload to a native answer, each once:
:func:`read_call` (payload -> :class:`Call`: the codec and the canonical event,
or an answer already), :func:`answer_for` (a decision -> the native answer) and
:func:`output` (the bytes written). The warm daemon runs the same three for a
thin hook's frame (:mod:`ahp_adapters.thin`), so a native answer is rendered
by one rule wherever the chain ran. This module is the *full* hook: the thin
client imports it only when the daemon cannot answer.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ahp_adapters import dialects
from ahp_adapters.decision import NativeDecision, read_policy, registration_path
from ahp_adapters.dialects.base import Dialect, NativeAnswer, Parsed, PayloadError
from ahp_adapters.invocation import (
    DEFAULT_BUDGET_S,
    EXIT_RESERVE_S,
    HookOptions,
    InputTimeout,
    InputTooLarge,
    read_input,
)

__all__ = [
    "DEFAULT_BUDGET_S",
    "Call",
    "HookOptions",
    "Log",
    "answer_for",
    "answer_read",
    "handle",
    "output",
    "read_call",
    "run",
]

IN_PROCESS_CLOSE_S = 0.75
"""Kept back when the chain runs in-process: closing backends (stdin EOF, then kill) takes time."""
OBSERVE_BUDGET_S = 2.0
WATCHDOG_GRACE_S = 0.5
"""How long past its budget the hook may run before the watchdog answers and exits."""
DAEMON_START_SHARE = 0.5
"""With ``--daemon auto``: the share of what is left of the budget that a hook waits for
a daemon being started (by itself, or by another hook that holds the start lock) before
it runs the chain itself. Waiting is cheap; fifty hooks running their chains at once
while the daemon starts are not. With ``require`` a hook waits until its deadline."""


class Log:
    """Diagnostics, held until the answer is known: written to stderr only when the
    dialect tolerates it there and the answer does not use stderr itself (exit 2)."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.lines: list[str] = []

    def __call__(self, message: str) -> None:
        self.lines.append(f"ahp-adapter: {message}\n")

    def text(self, answer: NativeAnswer) -> str:
        """What of the diagnostics goes to stderr before ``answer``'s own stderr."""
        if self.enabled and answer.exit_code == 0:
            return "".join(self.lines)
        return ""


def output(answer: NativeAnswer, log: Log) -> tuple[bytes, bytes]:
    """The bytes the hook writes on stdout and on stderr for ``answer``."""
    stderr = log.text(answer) + answer.stderr
    return answer.stdout.encode("utf-8"), stderr.encode("utf-8", "replace")


def parse_payload(raw: bytes) -> dict[str, Any]:
    try:
        payload = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise PayloadError("payload is not UTF-8 JSON") from None
    if not isinstance(payload, dict):
        raise PayloadError("payload is not a JSON object")
    return payload


def decide(
    event: Mapping[str, Any],
    capabilities: Mapping[str, Any],
    options: HookOptions,
    deadline: float,
    log: Log,
) -> NativeDecision:
    """Run ``event`` through the chain: the daemon first (unless ``off``), else in-process."""
    registration = registration_path(options.registration)
    if options.daemon != "off":
        from ahp_adapters import client

        budget = deadline - time.monotonic() - EXIT_RESERVE_S
        message = {
            "op": "intercept",
            "event": event,
            "capabilities": capabilities,
            "budget": max(budget, 0.001),
        }
        try:
            answer = client.call(
                message,
                registration=registration,
                deadline=deadline - EXIT_RESERVE_S / 2,
                idle_timeout=options.idle_timeout,
                start_until=_start_until(options, deadline),
            )
        except client.DaemonUnreachable as exc:
            log(f"daemon unreachable ({exc})")
            if options.daemon == "require":
                return NativeDecision("failure", policy=read_policy(registration), detail=str(exc))
        except client.DaemonFailed as exc:
            log(f"daemon failed ({exc})")
            return NativeDecision("failure", policy=read_policy(registration), detail=str(exc))
        else:
            if answer.get("ok") is not True:
                return NativeDecision(
                    "failure", policy=read_policy(registration), detail="daemon refused"
                )
            return NativeDecision.from_json(answer)
    budget = deadline - time.monotonic() - EXIT_RESERVE_S - IN_PROCESS_CLOSE_S
    if budget <= 0:
        return NativeDecision(
            "failure", policy=read_policy(registration), detail="budget exhausted"
        )
    return _in_process(registration, "intercept", event, capabilities, budget, log)


def _start_until(options: HookOptions, deadline: float) -> float | None:
    """How long to wait for a daemon being started (``None``: until the deadline)."""
    if options.daemon == "require":
        return None
    now = time.monotonic()
    return now + DAEMON_START_SHARE * max(deadline - now, 0.0)


def _in_process(
    registration: str,
    op: str,
    event: Mapping[str, Any],
    capabilities: Mapping[str, Any],
    budget: float,
    log: Log,
) -> NativeDecision:
    import logging

    class _Into(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            log(record.getMessage())

    root = logging.getLogger()
    if not any(isinstance(h, _Into) for h in root.handlers):
        root.addHandler(_Into(logging.WARNING))
        root.setLevel(logging.WARNING)
    try:
        from ahp_adapters.engine import run_once

        return run_once(registration, op, event, capabilities, budget)
    except Exception:
        return NativeDecision("failure", policy=read_policy(registration), detail="internal error")


def prepare(options: HookOptions, log: Log) -> None:
    """Have the daemon prepare the chain for this session's tool calls; never waits for it."""
    from ahp_adapters import client

    try:
        done = client.prepare(
            registration_path(options.registration),
            options.dialect,
            idle_timeout=options.idle_timeout,
        )
    except (client.DaemonUnreachable, client.DaemonFailed) as exc:
        done = f"not prepared ({exc})"
    log(f"session start: {done}")


def observe(
    event: Mapping[str, Any], capabilities: Mapping[str, Any], options: HookOptions, log: Log
) -> None:
    """Deliver one observation (best effort, bounded); never an answer to the harness."""
    registration = registration_path(options.registration)
    if not _has_observers(registration):
        return  # nobody observes: spawn nothing
    deadline = time.monotonic() + min(OBSERVE_BUDGET_S, options.budget)
    message = {"op": "observe", "event": event, "capabilities": capabilities}
    if options.daemon != "off":
        from ahp_adapters import client

        try:
            client.call(
                {**message, "budget": max(deadline - time.monotonic() - EXIT_RESERVE_S, 0.001)},
                registration=registration,
                deadline=deadline,
                idle_timeout=options.idle_timeout,
                start_until=_start_until(options, deadline),
            )
            return
        except client.DaemonUnreachable as exc:
            log(f"daemon unreachable ({exc})")
            if options.daemon == "require":
                return
        except client.DaemonFailed as exc:
            log(f"observation not delivered ({exc})")
            return
    budget = deadline - time.monotonic() - EXIT_RESERVE_S
    if budget > 0:
        _in_process(registration, "observe", event, capabilities, budget, log)


def _has_observers(registration: str) -> bool:
    try:
        with open(registration, "rb") as handle:
            doc = json.loads(handle.read(1024 * 1024 + 1))
    except (OSError, ValueError):
        return False
    hooks = doc.get("hooks") if isinstance(doc, dict) else None
    if not isinstance(hooks, list):
        return False
    for hook in hooks:
        subs = hook.get("subscriptions") if isinstance(hook, dict) else None
        if subs is None:
            return True  # discovered at start-up: may observe
        if isinstance(subs, list) and any(
            isinstance(s, dict) and s.get("mode") == "observe" for s in subs
        ):
            return True
    return False


def _failure_answer(dialect: Dialect, native_event: str | None, registration: str) -> NativeAnswer:
    """The answer when nothing could be run for a pre-tool (or unknown) event."""
    if native_event is not None and not dialect.is_pre_tool(native_event):
        return dialect.render_nothing(native_event)  # an observation failure never blocks
    from ahp_adapters.decision import GENERIC_DENIAL_REASON

    if read_policy(registration_path(registration)) == "fail-closed":
        return dialect.render_deny(GENERIC_DENIAL_REASON, native_event)
    return dialect.render_nothing(native_event)


class _Watchdog:
    """The last resort: if the hook is still running ``WATCHDOG_GRACE_S`` after its budget
    (a bug, a blocked call), SIGALRM writes the failure answer and ends the process,
    before the native harness kills it and fails open."""

    def __init__(self, options: HookOptions, answer_fd: int) -> None:
        self.options = options
        self.answer_fd = answer_fd
        self.policy = read_policy(registration_path(options.registration))
        self.answer = NativeAnswer()
        self._armed_at = 0.0
        self._previous: tuple[Any, float] | None = None

    def update(self, dialect: Dialect, native_event: str | None) -> None:
        from ahp_adapters.decision import GENERIC_DENIAL_REASON

        pre_tool = native_event is None or dialect.is_pre_tool(native_event)
        if pre_tool and self.policy == "fail-closed":
            self.answer = dialect.render_deny(GENERIC_DENIAL_REASON, native_event)
        else:
            self.answer = dialect.render_nothing(native_event)

    def arm(self, seconds: float) -> None:
        """Set the timer (keeping whatever SIGALRM handler and timer were there before)."""
        self._armed_at = time.monotonic()
        if hasattr(signal, "setitimer"):
            handler = signal.signal(signal.SIGALRM, self._fire)
            delay, _interval = signal.setitimer(signal.ITIMER_REAL, seconds)
            self._previous = (handler, delay)

    def disarm(self) -> None:
        """Stop the timer; restore the previous handler and what was left of its timer."""
        if self._previous is None:
            return
        signal.setitimer(signal.ITIMER_REAL, 0)
        handler, delay = self._previous
        signal.signal(signal.SIGALRM, handler)
        if delay > 0:
            left = delay - (time.monotonic() - self._armed_at)
            signal.setitimer(signal.ITIMER_REAL, max(left, 0.001))

    def _fire(self, _signum: int, _frame: object) -> None:
        with contextlib.suppress(Exception):
            if self.answer.stdout:
                _write_all(self.answer_fd, self.answer.stdout.encode("utf-8"))
            if self.answer.stderr:
                os.write(2, self.answer.stderr.encode("utf-8"))
        os._exit(self.answer.exit_code)


_watchdog: _Watchdog | None = None


def _pair(parsed: Parsed, event: dict[str, Any]) -> None:
    """Keep a synthesized call id the same from the pre-tool to the post-tool hook."""
    if parsed.pairing is None or not event.get("call", {}).get("synthesized"):
        return
    from ahp_adapters import pairing

    session, key = parsed.pairing
    if parsed.kind == "tool.before":
        pairing.remember(session, key, event["call"]["id"])
    elif parsed.kind == "tool.after":
        found = pairing.recall(session, key)
        if found:
            event["call"] = {"id": found, "synthesized": True}


@dataclass
class Call:
    """One native invocation, read: the codec that answers it and, unless it is answered
    already (``answer``: an ignored or malformed payload), its canonical event."""

    dialect: Dialect
    native_event: str | None
    parsed: Parsed | None = None
    event: dict[str, Any] = field(default_factory=dict)
    capabilities: dict[str, Any] = field(default_factory=dict)
    answer: NativeAnswer | None = None

    @property
    def intercepts(self) -> bool:
        return self.parsed is not None and self.parsed.kind == "tool.before"

    @property
    def prepares(self) -> bool:
        """A session start (or an event the dialect sends before the first tool call where
        it sends none): the time to prepare the chain for the session's tool calls."""
        if self.parsed is not None and self.parsed.kind == "session.start":
            return True
        return self.native_event in self.dialect.prepare_events


def read_call(options: HookOptions, raw: bytes | None, log: Log) -> Call:
    """The native payload ``raw`` read (``None``: stdin could not be read in time)."""
    dialect = dialects.get(options.dialect)
    native_event = options.event
    try:
        if raw is None:
            raise PayloadError("stdin not readable in time")
        payload = parse_payload(raw)
        dialect = dialect.resolve(payload)
        native_event = dialect.event_name(payload) or options.event
        if _watchdog is not None:
            _watchdog.update(dialect, native_event)
        if not native_event:  # which hook this is cannot be told: never "not ours"
            raise PayloadError("no event name in the payload and no --event")
        parsed = dialect.parse(
            payload, options={"event": options.event, "skip_shell_mcp": options.skip_shell_mcp}
        )
    except PayloadError as exc:
        log(f"malformed native payload ({exc})")
        answer = _failure_answer(dialect, native_event, options.registration)
        return Call(dialect, native_event, answer=answer)
    if parsed.kind == "ignore":
        return Call(
            dialect, parsed.native_event, answer=dialect.render_nothing(parsed.native_event)
        )
    from ahp_adapters.events import build_event

    event = build_event(
        dialect,
        parsed,
        payload,
        version=options.harness_version,
        budget_ms=int(options.budget * 1000),
    )
    _pair(parsed, event)
    return Call(
        dialect, parsed.native_event, parsed, event, dialect.capabilities(parsed.native_event)
    )


def answer_for(call: Call, decided: NativeDecision, log: Log) -> NativeAnswer:
    """The native answer to a ``tool.before`` call, given the chain's decision.

    ``modify``: the dialect's :meth:`~Dialect.render_modify` of the effective input,
    only if this call advertised ``modify``. Anything else cannot happen (the
    dispatcher refuses unadvertised effects) and is an internal error under the
    failure policy, never "nothing": dropping an accepted rewrite would run the
    very input the backend replaced.
    """
    if decided.decision == "modify" and decided.updated_input is not None:
        from ahp_adapters.dialects.base import ModifyNotCarried

        if "modify" in call.capabilities.get("effects", ()):
            with contextlib.suppress(ModifyNotCarried):
                return call.dialect.render_modify(decided.updated_input, call.native_event)
        decided = NativeDecision("failure", policy=decided.policy, detail="rewrite not carried")
    for line in decided.failures:  # the operator's: which backend, why, how to fix it
        log(line)
    if decided.decision == "failure":
        log(f"no decision ({decided.detail}); policy {decided.policy}")
    elif decided.synthetic and not decided.failures:
        log(f"fail-closed backend failure ({decided.detail})")
    if decided.blocks:
        return call.dialect.render_deny(decided.block_reason, call.native_event)
    return call.dialect.render_nothing(call.native_event)


def handle(
    options: HookOptions, raw: bytes | None, started: float, log: Log, *, failed: str = ""
) -> NativeAnswer:
    """The native answer for one invocation (``raw`` ``None``: stdin could not be read;
    ``failed``: the daemon failed with this request, so no chain is run again)."""
    call = read_call(options, raw, log)
    if call.prepares and options.daemon != "off" and not failed:
        prepare(options, log)
    if call.answer is not None:
        return call.answer
    if not call.intercepts:
        if failed:
            log(f"observation not delivered ({failed})")
        else:
            observe(call.event, call.capabilities, options, log)
        return call.dialect.render_nothing(call.native_event)
    if failed:
        log(f"daemon failed ({failed})")
        policy = read_policy(registration_path(options.registration))
        decided = NativeDecision("failure", policy=policy, detail=failed)
    else:
        decided = decide(call.event, call.capabilities, options, started + options.budget, log)
    return answer_for(call, decided, log)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def run(
    options: HookOptions, *, stdin_fd: int = 0, stdout_fd: int = 1, started: float | None = None
) -> int:
    """The hook process: read, decide, answer. Returns the exit code; never raises."""
    return _run(options, time.monotonic() if started is None else started, stdout_fd, stdin_fd)


def answer_read(
    options: HookOptions, raw: bytes | None, started: float, *, failed: str = "", stdout_fd: int = 1
) -> int:
    """:func:`run` for a payload the thin client already read (``None``: not readable)."""
    return _run(options, started, stdout_fd, None, raw=raw, failed=failed)


def _run(
    options: HookOptions,
    started: float,
    stdout_fd: int,
    stdin_fd: int | None,
    *,
    raw: bytes | None = None,
    failed: str = "",
) -> int:
    try:
        dialect = dialects.get(options.dialect)
    except dialects.UnknownDialect as exc:
        sys.stderr.write(f"ahp-adapter: {exc}\n")
        return 1  # a usage error: every harness treats exit 1 as a non-blocking error
    log = Log(dialect.stderr_ok or bool(os.environ.get("AHP_ADAPTER_DEBUG")))
    # Nothing but the native answer may reach stdout: point fd 1 at stderr meanwhile.
    answer_fd = os.dup(stdout_fd)
    saved_stdout = sys.stdout
    with contextlib.suppress(OSError):
        os.dup2(2, stdout_fd)
    sys.stdout = sys.stderr
    global _watchdog
    try:
        _watchdog = _Watchdog(options, answer_fd)
        _watchdog.update(dialect, options.event)
        _watchdog.arm(max(options.budget - (time.monotonic() - started), 0) + WATCHDOG_GRACE_S)
        if stdin_fd is not None:
            try:
                raw = read_input(stdin_fd, started + options.budget / 2)
            except (InputTimeout, InputTooLarge, OSError):
                raw = None
        answer = handle(options, raw, started, log, failed=failed)
    except BaseException as exc:  # a hook must answer, whatever happened
        log(f"internal error ({type(exc).__name__})")
        if os.environ.get("AHP_ADAPTER_DEBUG"):
            import traceback

            traceback.print_exc(file=sys.stderr)
        try:
            answer = _failure_answer(dialect, options.event, options.registration)
        except Exception:  # the last resort: the dialect's own "no decision", as data
            answer = NativeAnswer(stdout=dialect.quirks.no_effect_stdout)
    finally:
        if _watchdog is not None:
            _watchdog.disarm()
            _watchdog = None
        sys.stdout = saved_stdout
    stdout, stderr = output(answer, log)
    try:
        if stdout:
            _write_all(answer_fd, stdout)
        if stderr:
            _write_all(2, stderr)
    except OSError:
        pass
    finally:
        os.close(answer_fd)
    return answer.exit_code

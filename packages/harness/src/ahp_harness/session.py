"""The agent loop: one session, many turns; the model proposes, the gate decides.

A session is ``session.start`` (intercepted: ``inject``, ``message``), then any number
of turns, then ``session.end`` (observed, with ``counters``). Call :meth:`Session.start`
once, :meth:`Session.turn` once per user prompt, :meth:`Session.end` once
(:meth:`Session.run` does all three for a one-turn session). Each turn has its own
turn id: ``turn.start`` (``deny``, ``modify`` prompt, ``inject``, ``flow stop``), then
``model.request.before`` (``deny``, ``modify`` request, ``flow stop``) and
``model.response.after`` (``modify`` response, ``flow stop``) around each model
request, the tool calls of each reply, then ``turn.end``. Events of a turn carry its
id; the session's own events carry none. A ``flow stop`` (or a refused turn) ends that
turn only: the session goes on with the next prompt (draft: a stop "implies no session
close"). The conversation (prompts, replies, tool results, injections) is kept across
turns, so every model request sees the whole session so far.

Every event goes through :meth:`Session._event`, which sends it with the session's
:class:`ahp_protocol.client.SessionHooks` (the envelope, validation, intercept where
subscribed, else observe); tool calls go through :class:`ahp_harness.hooks.Gate`. This
module never decides a call itself, never reads files and never writes any: the
transcript it is given decides where (if anywhere) records go.

A reply with ``end_session`` (the manual driver's ``/quit`` or Ctrl-D) ends the turn and
asks for the session to end: :attr:`TurnSummary.end_session`. Bounds: at most
``max_requests`` model requests per turn.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from ahp_protocol.client.hooks import message, message_text, new_id

from ahp_harness import manifest as manifests
from ahp_harness.hooks import CallRecord, Gate
from ahp_harness.models.base import ModelDriver, Say, ToolCall, TurnAware
from ahp_harness.models.conversation import (
    TOOL_CALL_CATEGORY,
    result_message_id,
    tool_call_part_text,
)

if TYPE_CHECKING:
    from ahp_protocol.client import HookResult, SessionHooks

    from ahp_harness.audit import Transcript

__all__ = ["NO_PROMPT", "UI", "Session", "SessionError", "SessionSummary", "TurnSummary"]

#: The user message of a turn started without a prompt (a scripted driver plays it).
NO_PROMPT = "(no prompt: the model driver plays the session)"

SessionOutcome = Literal["completed", "cancelled", "error", "unknown"]


class SessionError(RuntimeError):
    """The session's methods were called out of order (a programming error)."""


@dataclass
class TurnSummary:
    """What one turn did."""

    turn_id: str
    calls: list[CallRecord] = field(default_factory=list)
    said: list[str] = field(default_factory=list)
    stopped: str | None = None
    outcome: str = "completed"
    requests: int = 0
    end_session: bool = False


@dataclass
class SessionSummary:
    """What the whole session did: every turn, every call, in order.

    ``stopped`` is the reason the last stopped turn was stopped (``None``: none was).
    """

    turns: list[TurnSummary] = field(default_factory=list)
    calls: list[CallRecord] = field(default_factory=list)
    said: list[str] = field(default_factory=list)
    stopped: str | None = None

    @property
    def end_requested(self) -> bool:
        """Whether the driver asked for the session to end (``/quit``, Ctrl-D)."""
        return any(t.end_session for t in self.turns)


class UI:
    """How the session talks to the user; the default says nothing."""

    def say(self, text: str) -> None:
        pass

    def note(self, text: str) -> None:
        pass


@dataclass
class Session:
    """One session of the agent loop over ``gate`` and ``driver`` (see the module docstring)."""

    gate: Gate
    driver: ModelDriver
    transcript: Transcript
    interactive: bool
    permission_mode: str
    ui: UI = field(default_factory=UI)
    max_requests: int = 200
    conversation: list[dict[str, Any]] = field(default_factory=list, init=False)
    summary: SessionSummary = field(default_factory=SessionSummary, init=False)
    _state: Literal["new", "open", "ended"] = field(default="new", init=False)

    @property
    def hooks(self) -> SessionHooks:
        """The session's AHP side: its envelope (session and turn ids) and backends."""
        return self.gate.session

    @property
    def is_open(self) -> bool:
        """Between :meth:`start` and :meth:`end`."""
        return self._state == "open"

    async def _event(self, event_type: str, **fields: Any) -> HookResult:
        """Send one event of this session (intercepted where subscribed, else observed);
        the settled result, with no effect when nobody intercepts it."""
        result = await self.hooks.send(event_type, **fields)
        self.gate.audit_settled(result)
        for text in result.messages:  # messages come only from interceptors
            self.ui.note(f"[backend] {text}")
        return result

    async def start(self) -> None:
        """``session.start``: the manifest goes out; injections join the conversation."""
        if self._state != "new":
            raise SessionError("Session.start: the session was already started")
        self._state = "open"
        self.hooks.turn_id = None
        result = await self._event(
            "session.start",
            trigger="startup",
            permissionMode=self.permission_mode,
            manifest=manifests.manifest(interactive=self.interactive),
            items=[],
        )
        self.conversation += _injected(result)

    async def end(self, outcome: SessionOutcome = "completed", reason: str | None = None) -> None:
        """``session.end`` (once; later calls do nothing), with the session's counters."""
        if self._state != "open":
            self._state = "ended"
            return
        self._state = "ended"
        self.hooks.turn_id = None
        counters = {
            "turns": len(self.summary.turns),
            "modelRequests": sum(t.requests for t in self.summary.turns),
            "toolCalls": len(self.summary.calls),
        }
        await self._event(
            "session.end",
            outcome=outcome,
            reason=reason or self.summary.stopped or "finished",
            counters=counters,
        )

    async def run(self, prompt: str | None = None) -> SessionSummary:
        """A whole session of one turn: :meth:`start`, :meth:`turn`, :meth:`end`."""
        await self.start()
        outcome: SessionOutcome = "completed"
        try:
            await self.turn(prompt)
        except BaseException:
            outcome = "error"
            raise
        finally:
            await self.end(outcome)
        return self.summary

    async def turn(self, prompt: str | None = None) -> TurnSummary:
        """One turn for ``prompt`` (``None``: :data:`NO_PROMPT`), ``turn.start`` to ``turn.end``.

        A failure inside the turn (the model endpoint, a cancellation) still sends
        ``turn.end`` (``failed`` or ``cancelled``, with the error's class only) and is raised.
        """
        if self._state != "open":
            raise SessionError("Session.turn: call start() first (and not after end())")
        turn = TurnSummary(turn_id=new_id("turn"))
        self.summary.turns.append(turn)
        self.hooks.turn_id = turn.turn_id
        try:
            await self._play(prompt, turn)
        except BaseException as exc:
            failed = isinstance(exc, Exception)
            turn.outcome = "failed" if failed else "cancelled"
            error = {"message": "the turn failed", "class": type(exc).__name__} if failed else None
            await self._turn_end(turn.outcome, error=error)
            raise
        finally:
            self.hooks.turn_id = None
        return turn

    async def _play(self, prompt: str | None, turn: TurnSummary) -> None:
        conversation = self.conversation
        if isinstance(self.driver, TurnAware):
            self.driver.start_turn()
        user = [message("user", prompt or NO_PROMPT)]
        result = await self._event("turn.start", trigger="user", items=user)
        if result.stopped:
            self._stop(turn, "turn refused by a policy backend")
            turn.outcome = "cancelled"
            await self._turn_end("cancelled")
            return
        user = list(result.event.get("items", user))
        conversation += _injected(result)
        conversation += user
        for _ in range(self.max_requests):
            if await self._request(turn):
                break
        else:
            turn.outcome = "max_iterations"
            self._stop(turn, "too many model requests")
        await self._turn_end(turn.outcome)

    def _stop(self, turn: TurnSummary, reason: str) -> None:
        turn.stopped = reason
        self.summary.stopped = reason

    async def _turn_end(self, outcome: str, error: Mapping[str, str] | None = None) -> None:
        last = [m for m in self.conversation if m.get("role") == "assistant"][-1:]
        fields: dict[str, Any] = {"error": dict(error)} if error else {}
        await self._event(
            "turn.end",
            outcome=outcome,
            continuationCount=0,
            items=[dict(m) for m in last],
            **fields,
        )

    async def _request(self, turn: TurnSummary) -> bool:
        """One model request and its tool calls; True when the turn is over."""
        conversation = self.conversation
        turn.requests += 1
        model = {"id": self.driver.model_id, "provider": self.driver.provider}
        attempt = {"id": new_id("attempt"), "number": 1}
        result = await self._event(
            "model.request.before", model=model, attempt=attempt, params={}, items=conversation
        )
        if result.stopped:
            self._stop(turn, "model request refused by a policy backend")
            return True
        sent: Sequence[Mapping[str, Any]] = result.event.get("items", conversation)
        reply = await self.driver.respond(list(sent))
        turn.end_session = turn.end_session or reply.end_session
        says = [s.text for s in reply.steps if isinstance(s, Say)]
        response_items = [message("assistant", text) for text in says]
        result = await self._event(
            "model.response.after",
            model=model,
            attempt=attempt,
            execution={"status": "executed"},
            items=response_items,
            finishReason="tool_calls"
            if any(isinstance(s, ToolCall) for s in reply.steps)
            else reply.finish_reason,
        )
        if result.stopped:
            self._stop(turn, "model response stopped by a policy backend")
            return True
        if result.event_changed:
            says = [message_text([m]) for m in result.event.get("items", [])]
        for text in says:
            self.ui.say(text)
            turn.said.append(text)
            self.summary.said.append(text)
            conversation.append(message("assistant", text))
        for step in reply.steps:
            if not isinstance(step, ToolCall):
                continue
            record = await self.gate.call(step.tool, dict(step.input), step.id or None)
            turn.calls.append(record)
            self.summary.calls.append(record)
            self.transcript.write(record.transcript())
            proposed = ToolCall(tool=step.tool, input=dict(step.input), id=record.call_id)
            call_message = message("assistant", tool_call_part_text(proposed))
            call_message["parts"][0]["category"] = TOOL_CALL_CATEGORY
            conversation.append(call_message)
            result_message = message("tool", _tool_text(record))
            result_message["id"] = result_message_id(record.call_id)
            conversation.append(result_message)
            conversation += [dict(m) for i in record.injections for m in i.get("value", [])]
            if record.stop_turn:
                self._stop(turn, "stopped by a policy backend after a tool call")
                return True
        return reply.done or not reply.steps


def _injected(result: HookResult) -> list[dict[str, Any]]:
    return [dict(m) for i in result.injections for m in i.get("value", [])]


def _tool_text(record: CallRecord) -> str:
    if record.outcome == "denied":
        return f"refused: {record.reason}"
    if record.outcome == "ok":
        return record.output
    return f"{record.outcome}: {record.output or record.reason}"

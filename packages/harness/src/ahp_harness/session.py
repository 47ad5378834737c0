"""The agent loop: the model proposes, the gate decides, results go back.

Owns the lifecycle events around tool calls: ``session.start`` (intercepted:
``inject``, ``message``), ``turn.start`` (``deny``, ``modify`` prompt,
``inject``, ``flow stop``), ``model.request.before`` (``deny``, ``modify``
request, ``flow stop``) and ``model.response.after`` (``modify`` response,
``flow stop``) around each model request, then ``turn.end`` and
``session.end`` observations. Tool calls go through
:class:`ahp_harness.hooks.Gate`; this module never decides a call itself.

Bounds: at most ``max_requests`` model requests per turn.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ahp_harness import manifest as manifests
from ahp_harness.hooks import CallRecord, Envelope, Gate, message, message_text, new_id
from ahp_harness.models import TOOL_CALL_CATEGORY, result_message_id, tool_call_part_text
from ahp_harness.models.base import ModelDriver, Say, ToolCall

if TYPE_CHECKING:
    from ahp_protocol.client import Dispatcher, HookResult

    from ahp_harness.audit import Transcript


@dataclass
class SessionSummary:
    """What one session did."""

    calls: list[CallRecord] = field(default_factory=list)
    said: list[str] = field(default_factory=list)
    stopped: str | None = None


class UI:
    """How the session talks to the user; the default says nothing."""

    def say(self, text: str) -> None:
        pass

    def note(self, text: str) -> None:
        pass


@dataclass
class Session:
    gate: Gate
    driver: ModelDriver
    transcript: Transcript
    interactive: bool
    permission_mode: str
    ui: UI = field(default_factory=UI)
    max_requests: int = 200

    @property
    def envelope(self) -> Envelope:
        return self.gate.envelope

    @property
    def dispatcher(self) -> Dispatcher | None:
        return self.gate.dispatcher

    async def _event(self, event: dict[str, Any]) -> HookResult | None:
        """Intercept where subscribed, else observe where subscribed."""
        dispatcher = self.dispatcher
        if dispatcher is None:
            return None
        kind = str(event["type"])
        if dispatcher.intercepts(kind):
            result = await dispatcher.intercept(event)
            self.gate.audit("hook", {"event": kind, "eventId": event["id"], **result.to_json()})
            for text in result.messages:
                self.ui.note(f"[backend] {text}")
            return result
        if dispatcher.observes(kind):
            await dispatcher.observe(event)
        return None

    async def run(self, prompt: str | None = None) -> SessionSummary:
        summary = SessionSummary()
        conversation: list[dict[str, Any]] = []
        start = self.envelope.event(
            "session.start",
            trigger="startup",
            permissionMode=self.permission_mode,
            manifest=manifests.manifest(interactive=self.interactive),
            items=[],
        )
        result = await self._event(start)
        if result is not None:
            conversation += _injected(result)
        outcome = "completed"
        try:
            await self._turn(prompt, conversation, summary)
        except BaseException:
            outcome = "error"
            raise
        finally:
            end = self.envelope.event(
                "session.end", outcome=outcome, reason=summary.stopped or "finished"
            )
            self.envelope.turn_id = None
            await self._event(end)
        return summary

    async def _turn(
        self, prompt: str | None, conversation: list[dict[str, Any]], summary: SessionSummary
    ) -> None:
        self.envelope.turn_id = new_id("turn")
        user = [message("user", prompt or "(no prompt: the model driver plays the session)")]
        start = self.envelope.event("turn.start", trigger="user", items=user)
        result = await self._event(start)
        outcome = "completed"
        if result is not None:
            if result.stopped:
                summary.stopped = "turn refused by a policy backend"
                await self._turn_end("cancelled", conversation)
                return
            user = list(result.event.get("items", user))
            conversation += _injected(result)
        conversation += user
        for attempt in range(1, self.max_requests + 1):
            stop = await self._request(attempt, conversation, summary)
            if stop:
                break
        else:
            outcome = "max_iterations"
            summary.stopped = "too many model requests"
        await self._turn_end(outcome, conversation)

    async def _turn_end(self, outcome: str, conversation: Sequence[Mapping[str, Any]]) -> None:
        last = [m for m in conversation if m.get("role") == "assistant"][-1:]
        end = self.envelope.event(
            "turn.end", outcome=outcome, continuationCount=0, items=[dict(m) for m in last]
        )
        await self._event(end)

    async def _request(
        self, number: int, conversation: list[dict[str, Any]], summary: SessionSummary
    ) -> bool:
        """One model request and its tool calls; True when the turn is over."""
        model = {"id": self.driver.model_id, "provider": self.driver.provider}
        attempt = {"id": new_id("attempt"), "number": 1}
        request = self.envelope.event(
            "model.request.before", model=model, attempt=attempt, params={}, items=conversation
        )
        result = await self._event(request)
        sent: Sequence[Mapping[str, Any]] = conversation
        if result is not None:
            if result.stopped:
                summary.stopped = "model request refused by a policy backend"
                return True
            sent = result.event.get("items", conversation)
        reply = await self.driver.respond(list(sent))
        says = [s.text for s in reply.steps if isinstance(s, Say)]
        response_items = [message("assistant", text) for text in says]
        response = self.envelope.event(
            "model.response.after",
            model=model,
            attempt=attempt,
            execution={"status": "executed"},
            items=response_items,
            finishReason="tool_calls"
            if any(isinstance(s, ToolCall) for s in reply.steps)
            else reply.finish_reason,
        )
        result = await self._event(response)
        if result is not None:
            if result.stopped:
                summary.stopped = "model response stopped by a policy backend"
                return True
            if result.event_changed:
                says = [message_text([m]) for m in result.event.get("items", [])]
        for text in says:
            self.ui.say(text)
            summary.said.append(text)
            conversation.append(message("assistant", text))
        for step in reply.steps:
            if not isinstance(step, ToolCall):
                continue
            record = await self.gate.call(step.tool, dict(step.input), step.id or None)
            summary.calls.append(record)
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
                summary.stopped = "stopped by a policy backend after a tool call"
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

"""THE integration: one tool call through AHP and the host's own permissions.

This is the file to copy into another harness. For each tool call the model
proposes, :meth:`Gate.call` does, in order:

1. validate the input against the tool's own model (invalid: refused, never run);
2. ``tool.before`` through the AHP chain (:class:`ahp_protocol.client.Dispatcher`);
   an accepted deny, a flow stop or a synthetic (fail-closed) denial refuses
   at once; accepted modifications give the *effective* input, which is
   validated against the tool's model again;
3. the host's own decision (:func:`ahp_harness.precedence.decide`): sandbox,
   managed rules, user rules, the mode; AHP ``allow`` only suppresses the
   ordinary prompt, AHP ``ask`` always prompts;
4. a prompt, when one is needed: ``tool.permission.request`` goes through the
   chain first (a backend may deny, modify the input or stop), then the user (or
   ``--approve``) answers; ``tool.permission.resolved`` is observed. A *changed*
   input is a new operation: it goes through ``tool.before`` once more (every
   subscription, its own deadline and failure policy, seeded with what the first
   run settled: its ``ask`` persists, its ``allow`` does not), the supplied result
   of the first run is dropped, and the host decides again. If that second
   ``tool.before`` changes the input yet again, the call is refused: nothing runs
   that either chain did not see;
5. execution, or a supplied result (AHP ``return``), which skips execution but
   never approval;
6. exactly one ``tool.after`` per resolved call (executed, denied →
   ``skipped/policy``, supplied → ``skipped/supplied_result``), intercepted
   (``modify`` output, ``inject``, ``flow``, ``message``) then observed, and
   ``file.changed`` for what the tool changed on disk.

To lift it into another harness, keep steps 1-6 and replace three things: the
tool table (``ahp_harness.tools``), the host layers (``Permissions``,
``Sandbox``) and the ``Approver``. The AHP parts need only a ``Dispatcher``
and the event envelope (:class:`Envelope`). No step here trusts a backend to
grant anything: the host's layers run after AHP, every time.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal, Protocol

from ahp_harness import __version__
from ahp_harness.precedence import HookPermission, Verdict, carried_permission, decide
from ahp_harness.sandbox import Sandbox, SandboxViolation
from ahp_harness.tools import get_tool
from ahp_harness.tools.base import FileChange, Tool, ToolInputError, ToolResult

if TYPE_CHECKING:
    from ahp_protocol.client import Diagnostic, Dispatcher, HookResult
    from ahp_protocol.client.chain import Candidate

    from ahp_harness.permissions import Permissions

HARNESS = {"name": "ahp-harness", "version": __version__}
TOOL_PATH = "native"

Approval = Literal["approved", "rejected", "not_needed"]
Outcome = Literal["ok", "error", "denied", "cancelled", "timeout"]


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def new_id(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex}"


def text_part(text: str, *, part_id: str | None = None) -> dict[str, Any]:
    return {
        "id": part_id or new_id("part"),
        "kind": "text",
        "mediaType": "text/plain",
        "selection": "body",
        "text": text,
    }


def message(role: str, text: str) -> dict[str, Any]:
    return {"id": new_id("msg"), "role": role, "parts": [text_part(text)]}


def message_text(messages: Sequence[Mapping[str, Any]]) -> str:
    """The text of canonical messages, parts joined (withheld parts are skipped)."""
    texts = []
    for msg in messages:
        for part in msg.get("parts", ()):
            if isinstance(part, Mapping) and isinstance(part.get("text"), str):
                texts.append(part["text"])
    return "\n".join(texts)


@dataclass
class Envelope:
    """The fields every event of one session shares (draft §3.1)."""

    source: str
    session_id: str
    cwd: str
    roots: Sequence[str]
    turn_id: str | None = None

    def event(self, event_type: str, **fields: Any) -> dict[str, Any]:
        event: dict[str, Any] = {
            "id": new_id("evt"),
            "source": self.source,
            "type": event_type,
            "time": now(),
            "harness": dict(HARNESS),
            "session": {"id": self.session_id, "cwd": self.cwd, "workspaceRoots": list(self.roots)},
        }
        if self.turn_id:
            event["turn"] = {"id": self.turn_id}
        event.update(fields)
        return event


class Approver(Protocol):
    """Answers the host's approval prompt for one call (the user, or ``--approve``)."""

    async def __call__(self, tool: str, tool_input: Mapping[str, Any], reason: str) -> bool: ...


class Reporter(Protocol):
    """Shows the user what happened (messages from backends included)."""

    def call(self, record: CallRecord) -> None: ...

    def backend_messages(self, texts: Sequence[str]) -> None: ...


@dataclass
class CallRecord:
    """One resolved tool call: the transcript line, plus what the model gets back."""

    call_id: str
    tool: str
    input: Any
    hook_permission: HookPermission = "none"
    denied_by: str | None = None
    synthetic_denial: bool = False
    host_decision: Literal["allow", "ask", "deny"] = "deny"
    host_stage: str = ""
    approval: Approval = "not_needed"
    executed: bool = False
    outcome: Outcome = "denied"
    messages: list[str] = field(default_factory=list)
    reason: str = ""
    output: str = ""
    supplied: bool = False
    injections: list[Mapping[str, Any]] = field(default_factory=list)
    stop_turn: bool = False
    diagnostics: list[Diagnostic] = field(default_factory=list)

    def transcript(self) -> dict[str, Any]:
        return {
            "call_id": self.call_id,
            "tool": self.tool,
            "input": self.input,
            "hook_permission": self.hook_permission,
            "denied_by": self.denied_by,
            "synthetic_denial": self.synthetic_denial,
            "host_decision": self.host_decision,
            "host_stage": self.host_stage,
            "approval": self.approval,
            "executed": self.executed,
            "outcome": self.outcome,
            "supplied": self.supplied,
            "reason": self.reason,
            "messages": list(self.messages),
        }


AuditSink = Callable[[str, Mapping[str, Any]], None]


@dataclass
class Gate:
    """Runs tool calls through AHP and the host's own layers (see the module docstring)."""

    envelope: Envelope
    permissions: Permissions
    sandbox: Sandbox
    approve: Approver
    dispatcher: Dispatcher | None = None
    audit: AuditSink = lambda kind, record: None
    reporter: Reporter | None = None

    async def _intercept(
        self,
        event: Mapping[str, Any],
        record: CallRecord,
        *,
        initial_permission: HookPermission = "none",
    ) -> HookResult | None:
        if self.dispatcher is None or not self.dispatcher.intercepts(str(event["type"])):
            if self.dispatcher is not None and self.dispatcher.observes(str(event["type"])):
                record.diagnostics += await self.dispatcher.observe(event)
            return None
        result = await self.dispatcher.intercept(event, initial_permission=initial_permission)
        record.diagnostics += result.diagnostics
        record.messages += result.messages
        if result.messages and self.reporter:
            self.reporter.backend_messages(result.messages)
        self.audit("hook", {"event": event["type"], "eventId": event["id"], **result.to_json()})
        return result

    async def _observe(self, event: Mapping[str, Any], record: CallRecord) -> None:
        if self.dispatcher is not None and self.dispatcher.observes(str(event["type"])):
            record.diagnostics += await self.dispatcher.observe(event)

    def _tool_fields(self, tool: Tool, record: CallRecord, tool_input: Any) -> dict[str, Any]:
        return {
            "tool": {"name": tool.name, "kind": tool.kind, "input": tool_input, "origin": "native"},
            "call": {"id": record.call_id},
            "path": TOOL_PATH,
        }

    @staticmethod
    def _refuse_by_hook(record: CallRecord, hook: HookResult) -> None:
        record.hook_permission = hook.permission
        if hook.denial is not None:
            record.denied_by = hook.denial.backend
            record.synthetic_denial = hook.denial.synthetic
            record.reason = hook.denial.reason
        else:
            record.reason = f"stopped by a policy backend: {hook.flow_reason or 'flow stop'}"
        record.host_decision, record.host_stage = "deny", "ahp"

    async def call(self, tool_name: str, raw_input: Any, call_id: str | None = None) -> CallRecord:
        """Resolve one proposed tool call; never raises for a refused or failed call."""
        record = CallRecord(call_id=call_id or new_id("call"), tool=tool_name, input=raw_input)
        tool = get_tool(tool_name)
        if tool is None:
            record.reason = f"unknown tool {tool_name!r}"
            return self._finish(record)
        try:
            parsed = tool.parse_input(raw_input)
        except ToolInputError as exc:
            record.reason, record.outcome = f"invalid input: {exc}", "error"
            return self._finish(record)

        # 2. tool.before through the chain.
        before = self.envelope.event("tool.before", **self._tool_fields(tool, record, raw_input))
        hook = await self._intercept(before, record)
        candidate = None
        if hook is not None:
            record.injections += list(hook.injections)
            record.hook_permission = hook.permission
            if hook.stopped:
                self._refuse_by_hook(record, hook)
                await self._after(tool, record, parsed_input=raw_input, result=None)
                return self._finish(record)
            record.input = hook.tool_input
            try:
                parsed = tool.parse_input(record.input)  # the effective input is re-validated
            except ToolInputError as exc:
                record.reason = f"modified input is invalid: {exc}"
                record.host_decision, record.host_stage = "deny", "ahp"
                await self._after(tool, record, parsed_input=record.input, result=None)
                return self._finish(record)
            candidate = hook.candidate

        # 3. the host's own decision.
        verdict = self._verdict(tool, parsed, record.hook_permission)
        record.host_decision, record.host_stage, record.reason = (
            verdict.decision,
            verdict.stage,
            verdict.reason,
        )

        # 4. the prompt, with tool.permission.request around it.
        if verdict.decision == "ask":
            verdict, parsed, candidate = await self._prompt(
                tool, parsed, verdict, record, candidate
            )
        if verdict.decision == "deny":
            await self._after(tool, record, parsed_input=record.input, result=None)
            return self._finish(record)

        # 5. run, or deliver the supplied result.
        if candidate is not None:
            record.supplied = True
            value = candidate.value
            output = value if isinstance(value, str) else json.dumps(value)
            result = ToolResult(outcome="ok", output=output)
        else:
            result = await tool.run(parsed, self.sandbox)
            record.executed = True
        record.outcome = result.outcome
        record.output = result.output if result.outcome == "ok" else (result.error or result.output)
        await self._after(tool, record, parsed_input=record.input, result=result)
        return self._finish(record)

    def _verdict(self, tool: Tool, parsed: Any, permission: HookPermission) -> Verdict:
        """The host's decision on ``parsed`` given AHP's settled, not-stopped permission."""
        try:
            self.sandbox.check(tool, parsed)
            violation = None
        except SandboxViolation as exc:
            violation = str(exc)
        managed = self.permissions.managed_decision(tool, parsed)
        rule = self.permissions.rule_decision(tool, parsed)
        mode = self.permissions.mode_decision(tool, parsed, self.sandbox)
        return decide(
            hook_permission=permission,
            hook_stopped=False,  # a stopped chain refused the call before any verdict
            sandbox_violation=violation,
            managed=managed.decision if managed else None,
            rule=rule.decision if rule else None,
            mode=mode.decision,
        )

    async def _prompt(
        self,
        tool: Tool,
        parsed: Any,
        verdict: Verdict,
        record: CallRecord,
        candidate: Candidate | None,
    ) -> tuple[Verdict, Any, Candidate | None]:
        request = self.envelope.event(
            "tool.permission.request",
            **self._tool_fields(tool, record, record.input),
            suggestions=[],
            sandboxBypass=False,
        )
        hook = await self._intercept(request, record)
        decided_by = "user"
        answer: bool | None = None
        if hook is not None:
            if hook.stopped:
                self._refuse_by_hook(record, hook)
                answer, decided_by = False, "hook"
            elif hook.tool_input != record.input:
                # A changed input is a new operation: tool.before judges it once more and
                # the first run's supplied result is gone (draft §5.6); the host decides again.
                refused, parsed, candidate = await self._before_again(tool, record, hook.tool_input)
                if refused:
                    answer, decided_by = False, "hook"
                else:
                    redecided = self._verdict(tool, parsed, record.hook_permission)
                    if redecided.decision != "allow":  # a prompt under way is never skipped
                        verdict = redecided
                        record.host_decision, record.host_stage = verdict.decision, verdict.stage
                        record.reason = verdict.reason
            if answer is None and hook.permission == "allow" and verdict.stage == "mode":
                answer, decided_by = True, "hook"  # allow answers only the ordinary prompt
        if answer is None and verdict.decision == "deny":
            answer, decided_by = False, "policy"
        if answer is None:
            answer = await self.approve(tool.name, record.input, verdict.reason)
            record.approval = "approved" if answer else "rejected"
        resolved = self.envelope.event(
            "tool.permission.resolved",
            **self._tool_fields(tool, record, record.input),
            decision="allow" if answer else "deny",
            decidedBy=decided_by,
        )
        await self._observe(resolved, record)
        if not answer:
            if record.approval == "rejected":
                record.reason = "the approval prompt was rejected"
            return Verdict("deny", verdict.stage, record.reason), parsed, None
        return Verdict("allow", verdict.stage, verdict.reason), parsed, candidate

    async def _before_again(
        self, tool: Tool, record: CallRecord, changed: Any
    ) -> tuple[bool, Any, Candidate | None]:
        """Run an input changed at ``tool.permission.request`` through ``tool.before`` once.

        Returns ``(refused, parsed, candidate)``; a refusal is already written into
        ``record``. The run is an ordinary ``tool.before`` (new event id, same call
        id; every subscription with its own deadline and failure policy), seeded
        with :func:`carried_permission` of what the first run settled, so its
        ``ask`` persists. ``record.hook_permission`` becomes what this run settled.
        """
        record.input = changed
        try:
            parsed = tool.parse_input(changed)  # invalid input never reaches a backend
        except ToolInputError as exc:
            record.reason = f"modified input is invalid: {exc}"
            record.host_decision, record.host_stage = "deny", "ahp"
            return True, None, None
        seed = carried_permission(record.hook_permission)
        before = self.envelope.event("tool.before", **self._tool_fields(tool, record, changed))
        again = await self._intercept(before, record, initial_permission=seed)
        if again is None:  # no tool.before interceptor: nothing else to carry
            record.hook_permission = seed
            return False, parsed, None
        record.injections += list(again.injections)
        record.hook_permission = again.permission
        if again.stopped:
            self._refuse_by_hook(record, again)
            return True, parsed, None
        if again.tool_input != changed:
            record.input = again.tool_input
            record.reason = (
                "tool.before changed the input again after tool.permission.request changed"
                " it; refused, since no single input was seen by both"
            )
            record.host_decision, record.host_stage = "deny", "ahp"
            return True, parsed, None
        return False, parsed, again.candidate

    async def _after(
        self, tool: Tool, record: CallRecord, *, parsed_input: Any, result: ToolResult | None
    ) -> None:
        if result is None:
            record.outcome, record.executed = "denied", False
            fields: dict[str, Any] = {
                "outcome": "denied",
                "execution": {"status": "skipped", "reason": "policy"},
                "items": [],
            }
        else:
            text = result.output if result.outcome == "ok" else (result.error or result.output)
            fields = {
                "outcome": result.outcome,
                "items": [message("tool", text)] if result.outcome != "timeout" else [],
            }
            if record.supplied:
                fields["execution"] = {"status": "skipped", "reason": "supplied_result"}
            else:
                fields["execution"] = {"status": "executed"}
                fields["durationMs"] = round(result.duration_ms, 3)
                if result.file_changes:
                    fields["fileChanges"] = [_file_change(c) for c in result.file_changes]
            if result.outcome == "error":
                fields["error"] = {
                    "message": result.error or "tool failed",
                    "class": result.error_class or "tool_error",
                }
        after = self.envelope.event(
            "tool.after", **self._tool_fields(tool, record, parsed_input), **fields
        )
        hook = await self._intercept(after, record)
        if hook is not None:
            items = hook.event.get("items")
            if result is not None and isinstance(items, list) and hook.event_changed:
                record.output = message_text(items)  # the model sees the modified output
            record.injections += list(hook.injections)
            record.stop_turn = hook.stopped  # flow stop, or a fail-closed failure
        if result is not None and result.file_changes and not record.supplied:
            changed = self.envelope.event(
                "file.changed",
                changes=[_changed(c) for c in result.file_changes],
                parentEventId=after["id"],
            )
            await self._observe(changed, record)

    def _finish(self, record: CallRecord) -> CallRecord:
        self.audit("call", record.transcript())
        for d in record.diagnostics:
            self.audit("exchange", {"callId": record.call_id, **d.to_json()})
        if self.reporter is not None:
            self.reporter.call(record)
        return record


def _snapshot(text: str | None) -> dict[str, Any] | None:
    return text_part(text) if text is not None else None


def _file_change(change: FileChange) -> dict[str, Any]:
    out: dict[str, Any] = {"path": change.path, "change": change.change}
    if change.change != "created" and change.before is not None:
        out["before"] = _snapshot(change.before)
    if change.change != "deleted" and change.after is not None:
        out["after"] = _snapshot(change.after)
    return out


def _changed(change: FileChange) -> dict[str, Any]:
    operation = {"created": "create", "modified": "update", "deleted": "remove"}[change.change]
    out: dict[str, Any] = {"path": change.path, "operation": operation, "agentCaused": True}
    if change.before is not None and operation != "create":
        out["before"] = _snapshot(change.before)
    if change.after is not None and operation != "remove":
        out["after"] = _snapshot(change.after)
    return out

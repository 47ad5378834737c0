"""THE integration: one tool call through AHP and the host's own permissions.

This is the file to copy into another harness: it imports only the standard library
and ``ahp_protocol``. The AHP side is :class:`ahp_protocol.client.SessionHooks` (the
envelope, the backends, validation); the host side is four small ``Protocol``\\ s
declared below, which the copier implements over their own harness:

- :class:`ToolTable` / :class:`Tool`: the tools by name (``kind``, ``parse``, ``run``;
  an MCP server's tool also has ``mcp``, its ``tool.mcp`` identity: its events carry it,
  with ``origin`` and ``path`` ``mcp``, through ``SessionHooks.tool_call(..., mcp=)``);
- :class:`HostPolicy`: the host's own decision about a parsed call (sandbox, managed
  rules, user rules, the mode), *without* AHP, as a :class:`CallDecision`;
- :class:`Approver`: answers the approval prompt (the user, or a fixed answer);
- :class:`Reporter` (optional): shows each resolved call and the backends' messages.

For each tool call the model proposes, :meth:`Gate.call` does, in order:

1. validate the input with ``tool.parse`` (invalid: refused, never run, no event);
2. ``tool.before`` (:meth:`ToolCall.before <ahp_protocol.client.ToolCall.before>`); an
   accepted deny, a flow stop or a synthetic (fail-closed) denial refuses at once;
   accepted modifications give the *effective* input, which ``tool.parse`` validates
   again;
3. the host's decision, folded with AHP's settled permission by :func:`decide`;
4. a prompt, when one is needed: ``tool.permission.request`` first (a backend may
   deny, modify the input or stop; its ``allow`` answers only the ordinary prompt),
   then the :class:`Approver`; ``tool.permission.resolved`` is observed. A *changed*
   input is a new operation: it goes through ``tool.before`` once more (every
   subscription, its own deadline and failure policy; what the first run settled is
   carried over by the API, draft §5.4: its ``ask`` persists, its ``allow`` does not),
   the first run's supplied result is dropped, and the host decides again. If that
   second ``tool.before`` changes the input yet again, the call is refused: nothing
   runs that either chain did not see;
5. execution (``tool.run``), or a supplied result (AHP ``return``), which skips
   execution but never approval;
6. exactly one ``tool.after`` per resolved call (executed, denied → ``skipped/policy``,
   supplied → ``skipped/supplied_result``), intercepted (``modify`` output, ``inject``,
   ``flow``, ``message``) then observed, and ``file.changed`` for what the tool
   changed on disk.

**Precedence lives here, in :func:`decide`, and only here.** Its AHP half is the
protocol's promise, not a host's taste: an AHP refusal comes first and is final;
``ask`` always prompts (unless the host refuses); ``allow`` suppresses only the
host's *ordinary* prompt, never one a rule forces; ``none`` is not permission. Left
to each host, every copier would re-derive it (and the easy mistake, "allow means
allowed", bypasses the host's rules). So :class:`HostPolicy` returns the host's own
decision, never told what AHP said, marking which ``ask`` is its ordinary prompt
(:attr:`CallDecision.ordinary`), and :func:`decide` folds the two, the same way at
``tool.before``, after a changed input, and for ``tool.permission.request``'s
``allow``. How the host orders its *own* layers (sandbox before managed rules before
user rules before the mode) is the host's business, behind :class:`HostPolicy`.

No step here trusts a backend to grant anything: the host's layers run after AHP,
every time.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol

from ahp_protocol.client.hooks import (
    FileChange,
    SessionHooks,
    ToolCall,
    message,
    message_text,
    new_id,
)

if TYPE_CHECKING:
    from ahp_protocol.client import Diagnostic, HookResult
    from ahp_protocol.client.chain import Permission

__all__ = [
    "Approver",
    "AuditSink",
    "CallDecision",
    "CallRecord",
    "FileChange",
    "Gate",
    "HostPolicy",
    "Reporter",
    "Tool",
    "ToolInputError",
    "ToolOutcome",
    "ToolTable",
    "decide",
    "message",
    "message_text",
    "new_id",
    "tool_call",
]

Decision = Literal["allow", "ask", "deny"]
Approval = Literal["approved", "rejected", "not_needed"]
CallOutcome = Literal["ok", "error", "denied", "cancelled", "timeout"]
"""How a resolved call ended (:attr:`CallRecord.outcome`; a run's own is :class:`ToolOutcome`)."""


# -- the host pieces ----------------------------------------------------------------------


class ToolInputError(ValueError):
    """A tool input is invalid; ``str()`` says which field and which rule (no input values)."""


@dataclass(frozen=True, slots=True)
class ToolOutcome:
    """What one run of a tool produced.

    ``output`` is the text the model gets back (``error`` instead, when set, for a failed
    run); ``error`` is a fixed sentence and ``error_class`` a fixed word (never exception
    text); ``file_changes`` are the files the run changed (``tool.after`` and
    ``file.changed`` carry them); ``attachments`` the binary media it produced
    (``tool.after`` carries them as attachment parts).
    """

    outcome: Literal["ok", "error", "timeout", "cancelled"]
    output: str = ""
    error: str | None = None
    error_class: str | None = None
    duration_ms: float = 0.0
    file_changes: Sequence[FileChange] = ()
    attachments: Sequence[Any] = ()

    @property
    def text(self) -> str:
        """What the model sees: the output, or the error for a failed run."""
        return self.output if self.outcome == "ok" else (self.error or self.output)


class Tool(Protocol):
    """One host tool, as the gate uses it."""

    @property
    def name(self) -> str:
        """The name the model calls it by (``tool.name`` on the wire)."""
        ...

    @property
    def kind(self) -> str | None:
        """One of ``ahp_protocol.wire.kinds.TOOL_KINDS`` (``shell``, ``file_write``, ...)."""
        ...

    def parse(self, raw: Any) -> Any:
        """Validate a JSON input into what :meth:`run` and the :class:`HostPolicy` take.

        Raises ``ValueError`` (e.g. :class:`ToolInputError`) with a message that names
        the field and the rule; the gate refuses the call with it.
        """
        ...

    async def run(self, parsed: Any) -> ToolOutcome:
        """Run the call; tool-level failures come back as an ``error`` outcome, not raised."""
        ...

    # Optional: ``mcp``, the draft's ``tool.mcp`` identity (``{server:{id,name?}, toolName,
    # provenance, connection}``, credentials stripped) of an MCP server's tool. A tool
    # that has it is sent with ``origin: "mcp"`` and ``path: "mcp"``; one without (or
    # ``None``) is native.


def tool_call(session: SessionHooks, tool: Tool, raw_input: Any, call_id: str) -> ToolCall:
    """The events of one call of ``tool``: native, or MCP when the tool has an ``mcp``."""
    mcp = getattr(tool, "mcp", None)
    if mcp is None:
        return session.tool_call(tool.name, raw_input, kind=tool.kind, call_id=call_id)
    return session.tool_call(
        tool.name, raw_input, kind=tool.kind, call_id=call_id, origin="mcp", path="mcp", mcp=mcp
    )


class ToolTable(Protocol):
    """The host's tools by name (a ``dict[str, Tool]`` is one)."""

    def get(self, name: str, /) -> Tool | None: ...


@dataclass(frozen=True, slots=True)
class CallDecision:
    """A decision about one call, which stage made it, and why.

    ``stage`` names the layer (the host's own words, e.g. ``sandbox``, ``rule``, ``mode``;
    :func:`decide` adds ``ahp`` and ``ahp-ask``). ``ordinary`` marks the host's
    *ordinary* prompt (its mode's default ``ask``): the only prompt AHP ``allow`` answers.
    """

    decision: Decision
    stage: str
    reason: str
    ordinary: bool = False

    @property
    def prompts(self) -> bool:
        return self.decision == "ask"


class HostPolicy(Protocol):
    """The host's own decision about a parsed call: sandbox, managed rules, user rules, mode."""

    def decide(self, tool: Tool, parsed: Any) -> CallDecision:
        """The host's decision, as if there were no AHP (never told what backends said).

        Refuse with ``deny`` (a sandbox escape, a deny rule, the mode's refusal); ``ask``
        for a prompt (``ordinary=True`` only for the mode's default prompt, which AHP
        ``allow`` may answer; a rule's ``ask`` is not ordinary); ``allow`` otherwise.
        Pure: no prompt, no I/O beyond looking at paths.
        """
        ...


class Approver(Protocol):
    """Answers the host's approval prompt for one call (the user, or ``--approve``)."""

    async def __call__(self, tool: str, tool_input: Mapping[str, Any], reason: str) -> bool: ...


class Reporter(Protocol):
    """Shows the user what happened (messages from backends included)."""

    def call(self, record: CallRecord) -> None: ...

    def backend_messages(self, texts: Sequence[str]) -> None: ...


AuditSink = Callable[[str, Mapping[str, Any]], None]
"""``audit(kind, record)``: ``hook`` (a settled intercepted event), ``call``, ``exchange``."""


# -- the precedence ---------------------------------------------------------------------


def decide(
    permission: Permission,
    host: Callable[[], CallDecision],
    *,
    stopped: bool = False,
    reason: str = "",
) -> CallDecision:
    """AHP's settled result folded with the host's own decision (the module docstring rule).

    In order: an AHP refusal (``stopped``: an accepted deny, a flow stop, a synthetic
    denial) refuses, and ``host`` is not even asked; a host refusal refuses; a prompt
    the host's rules force (``ask``, not ``ordinary``) prompts; AHP ``ask`` prompts; a
    host ``allow`` allows; AHP ``allow`` answers the host's ordinary prompt; otherwise
    the host decides (``none`` is not permission). ``reason``: AHP's, for a refusal.
    """
    if stopped or permission == "deny":
        return CallDecision("deny", "ahp", reason or "refused by a policy backend")
    own = host()
    if own.decision == "deny" or (own.decision == "ask" and not own.ordinary):
        return own
    if permission == "ask":
        return CallDecision("ask", "ahp-ask", "a policy backend requires approval")
    if own.decision == "ask" and permission == "allow":
        return CallDecision(
            "allow", own.stage, "ordinary prompt suppressed by a policy backend's allow"
        )
    return own


# -- the gate ----------------------------------------------------------------------------


@dataclass
class CallRecord:
    """One resolved tool call: the transcript line, plus what the model gets back."""

    call_id: str
    tool: str
    input: Any
    hook_permission: Permission = "none"
    denied_by: str | None = None
    synthetic_denial: bool = False
    host_decision: Decision = "deny"
    host_stage: str = ""
    approval: Approval = "not_needed"
    executed: bool = False
    outcome: CallOutcome = "denied"
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


def _no_audit(kind: str, record: Mapping[str, Any]) -> None:
    pass


def _hook_reason(hook: HookResult) -> str:
    """What the model and the transcript get: a deny's reason (for a fail-closed failure,
    the backend's id and failure class: :attr:`HookResult.denial_reason`) or the flow stop."""
    reason = hook.denial_reason
    if reason is not None:
        return reason
    return f"stopped by a policy backend: {hook.flow_reason or 'flow stop'}"


@dataclass
class Gate:
    """Runs tool calls through AHP and the host's own layers (see the module docstring)."""

    session: SessionHooks
    tools: ToolTable
    policy: HostPolicy
    approve: Approver
    audit: AuditSink = _no_audit
    reporter: Reporter | None = None

    def _settled(self, record: CallRecord, result: HookResult) -> HookResult:
        """Keep what a settled event says: diagnostics, messages (shown), the audit line."""
        record.diagnostics += result.diagnostics
        record.messages += result.messages
        if result.messages and self.reporter:
            self.reporter.backend_messages(result.messages)
        self.audit_settled(result)
        return result

    def audit_settled(self, result: HookResult) -> None:
        """The ``hook`` audit record of a settled event, when some backend intercepted it."""
        dispatcher = self.session.hooks.dispatcher
        if dispatcher is not None and dispatcher.intercepts(result.event_type):
            event = result.event
            self.audit("hook", {"event": event["type"], "eventId": event["id"], **result.to_json()})

    @staticmethod
    def _refuse_by_hook(record: CallRecord, hook: HookResult) -> None:
        record.hook_permission = hook.permission
        if hook.denial is not None:
            record.denied_by = hook.denial.backend
            record.synthetic_denial = hook.denial.synthetic
        record.reason = _hook_reason(hook)
        record.host_decision, record.host_stage = "deny", "ahp"

    @staticmethod
    def _record_decision(record: CallRecord, decided: CallDecision) -> None:
        record.host_decision, record.host_stage = decided.decision, decided.stage
        record.reason = decided.reason

    async def call(self, tool_name: str, raw_input: Any, call_id: str | None = None) -> CallRecord:
        """Resolve one proposed tool call; never raises for a refused or failed call."""
        record = CallRecord(call_id=call_id or new_id("call"), tool=tool_name, input=raw_input)
        tool = self.tools.get(tool_name)
        if tool is None:
            record.reason = f"unknown tool {tool_name!r}"
            return self._finish(record)
        try:
            parsed = tool.parse(raw_input)
        except ValueError as exc:
            record.reason, record.outcome = f"invalid input: {exc}", "error"
            return self._finish(record)
        call = tool_call(self.session, tool, raw_input, record.call_id)

        # 2. tool.before; 3. the host's decision, folded with it.
        hook = self._settled(record, await call.before())
        record.injections += list(hook.injections)
        record.hook_permission = hook.permission
        if hook.stopped:
            self._refuse_by_hook(record, hook)
            return await self._refused(call, record)
        record.input = call.input
        try:
            parsed = tool.parse(call.input)  # the effective input is re-validated
        except ValueError as exc:
            record.reason = f"modified input is invalid: {exc}"
            record.host_decision, record.host_stage = "deny", "ahp"
            return await self._refused(call, record)
        decided = decide(hook.permission, lambda: self.policy.decide(tool, parsed))
        self._record_decision(record, decided)

        # 4. the prompt, with tool.permission.request around it.
        if decided.decision == "ask":
            decided, parsed = await self._prompt(call, tool, parsed, decided, record)
        if decided.decision == "deny":
            return await self._refused(call, record)

        # 5. run, or deliver the supplied result.
        if call.candidate is not None:
            record.supplied = True
            value = call.candidate.value
            outcome = ToolOutcome("ok", value if isinstance(value, str) else json.dumps(value))
        else:
            outcome = await tool.run(parsed)
            record.executed = True
        record.outcome = outcome.outcome
        record.output = outcome.text
        await self._after(call, record, outcome)
        return self._finish(record)

    async def _prompt(
        self, call: ToolCall, tool: Tool, parsed: Any, decided: CallDecision, record: CallRecord
    ) -> tuple[CallDecision, Any]:
        hook = self._settled(record, await call.permission_request())
        decided_by = "user"
        answer: bool | None = None
        if hook.stopped:
            self._refuse_by_hook(record, hook)
            answer, decided_by = False, "hook"
        else:
            if hook.tool_input != call.input:
                # A changed input is a new operation: tool.before judges it once more, the
                # first run's supplied result is gone (draft §5.6); the host decides again.
                redecided = await self._before_again(call, tool, record, hook.tool_input)
                if redecided is None:
                    answer, decided_by = False, "hook"
                else:
                    parsed, again = redecided
                    if again.decision != "allow":  # a prompt under way is never skipped
                        decided = again
                        self._record_decision(record, decided)
            if answer is None and decide(hook.permission, lambda: decided).decision == "allow":
                answer, decided_by = True, "hook"  # allow answers only the ordinary prompt
        if answer is None and decided.decision == "deny":
            answer, decided_by = False, "policy"
        if answer is None:
            answer = await self.approve(tool.name, record.input, decided.reason)
            record.approval = "approved" if answer else "rejected"
        self._settled(
            record, await call.permission_resolved("allow" if answer else "deny", decided_by)
        )
        if not answer:
            if record.approval == "rejected":
                record.reason = "the approval prompt was rejected"
            return CallDecision("deny", decided.stage, record.reason), parsed
        return CallDecision("allow", decided.stage, decided.reason), parsed

    async def _before_again(
        self, call: ToolCall, tool: Tool, record: CallRecord, changed: Any
    ) -> tuple[Any, CallDecision] | None:
        """Run an input changed at ``tool.permission.request`` through ``tool.before`` once.

        Returns ``(parsed, decision)`` for the changed input, or ``None`` when it is refused
        (the refusal is written into ``record``). The run is an ordinary ``tool.before``
        (new event id, same call id; every subscription with its own deadline and failure
        policy), seeded by the API with what the first run settled.
        """
        record.input = call.input = changed
        call.candidate = None
        try:
            parsed = tool.parse(changed)  # invalid input never reaches a backend
        except ValueError as exc:
            record.reason = f"modified input is invalid: {exc}"
            record.host_decision, record.host_stage = "deny", "ahp"
            return None
        again = self._settled(record, await call.before(changed))
        record.injections += list(again.injections)
        record.hook_permission = again.permission
        if again.stopped:
            self._refuse_by_hook(record, again)
            return None
        if call.input != changed:
            record.input = call.input
            record.reason = (
                "tool.before changed the input again after tool.permission.request changed"
                " it; refused, since no single input was seen by both"
            )
            record.host_decision, record.host_stage = "deny", "ahp"
            return None
        return parsed, decide(again.permission, lambda: self.policy.decide(tool, parsed))

    async def _refused(self, call: ToolCall, record: CallRecord) -> CallRecord:
        record.outcome, record.executed = "denied", False
        await self._after(call, record, None)
        return self._finish(record)

    async def _after(self, call: ToolCall, record: CallRecord, outcome: ToolOutcome | None) -> None:
        if outcome is None:
            hook = await call.after_denied()
        else:
            hook = await call.after(
                outcome.outcome,
                outcome.text if outcome.outcome != "timeout" else None,
                supplied=record.supplied,
                duration_ms=outcome.duration_ms,
                error=outcome.error,
                error_class=outcome.error_class or "tool_error",
                file_changes=outcome.file_changes,
                attachments=outcome.attachments,
            )
        self._settled(record, hook)
        items = hook.event.get("items")
        if outcome is not None and isinstance(items, list) and hook.event_changed:
            record.output = message_text(items)  # the model sees the modified output
        record.injections += list(hook.injections)
        record.stop_turn = hook.stopped  # flow stop, or a fail-closed failure
        if call.file_changed is not None:
            record.diagnostics += call.file_changed.diagnostics

    def _finish(self, record: CallRecord) -> CallRecord:
        self.audit("call", record.transcript())
        for d in record.diagnostics:
            self.audit("exchange", {"callId": record.call_id, **d.to_json()})
        if self.reporter is not None:
            self.reporter.call(record)
        return record

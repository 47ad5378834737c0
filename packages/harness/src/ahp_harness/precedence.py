"""Who decides a tool call: AHP's settled result folded with the host's own layers.

This is the one place the precedence is enforced (the README's table is this
function written in prose). In order, the first that applies wins:

1. **AHP refuses**: an accepted ``deny``, a flow ``stop`` or a synthetic
   (fail-closed) denial refuses at once. Nothing later can bring the call back.
2. **The sandbox** refuses an escape (a path outside the workspace, a fetch
   host not allowed), whatever AHP said.
3. **Refusals by the host**: a managed ``deny`` rule, a user ``deny`` rule,
   or the mode's ``deny`` (``read-only`` refuses writes, edits, shell and
   fetch). Nothing relaxes them: no rule, no prompt, no AHP effect.
4. **A managed or user ``ask`` rule, or AHP ``ask``**, always prompts.
5. **Managed or user ``allow`` rules** allow without a prompt.
6. **The mode's default** decides the rest: ``allow`` or an *ordinary*
   prompt. AHP ``allow`` suppresses only that ordinary prompt. No effect
   (permission ``none``) is not permission: the mode still decides.

A supplied result (AHP ``return``) skips execution, never approval: it is
delivered only when this function says ``allow`` (or the prompt is approved).

When a backend changes the input at ``tool.permission.request``, the gate runs
the changed input through ``tool.before`` once more and decides again with this
function. What the first ``tool.before`` settled carries over by
:func:`carried_permission`: its ``ask`` persists (nothing a later event does
removes a forced prompt), its ``allow`` does not (it approved another input).
Pure and synchronous; knows nothing of processes, files or terminals.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

HookPermission = Literal["none", "allow", "ask", "deny"]
Decision = Literal["allow", "ask", "deny"]
Stage = Literal["ahp", "sandbox", "managed", "rule", "ahp-ask", "mode"]


@dataclass(frozen=True, slots=True)
class Verdict:
    """The host's decision about one call, and which stage made it."""

    decision: Decision
    stage: Stage
    reason: str

    @property
    def prompts(self) -> bool:
        return self.decision == "ask"


def decide(
    *,
    hook_permission: HookPermission,
    hook_stopped: bool,
    sandbox_violation: str | None,
    managed: Decision | None,
    rule: Decision | None,
    mode: Decision,
    hook_reason: str = "",
) -> Verdict:
    """Fold AHP's settled permission with the host's layers (see the module docstring).

    ``hook_stopped`` is true for an accepted deny, a flow stop or a synthetic
    denial; ``managed``/``rule`` are the strongest matching managed and user
    rules (``None`` when none matches); ``mode`` is the mode's default.
    """
    if hook_stopped or hook_permission == "deny":
        return Verdict("deny", "ahp", hook_reason or "refused by a policy backend")
    if sandbox_violation is not None:
        return Verdict("deny", "sandbox", sandbox_violation)
    if managed == "deny":
        return Verdict("deny", "managed", "refused by a managed rule")
    if rule == "deny":
        return Verdict("deny", "rule", "refused by a permission rule")
    if mode == "deny":
        return Verdict("deny", "mode", "refused by the permission mode")
    if managed == "ask":
        return Verdict("ask", "managed", "a managed rule requires approval")
    if rule == "ask":
        return Verdict("ask", "rule", "a permission rule requires approval")
    if hook_permission == "ask":
        return Verdict("ask", "ahp-ask", "a policy backend requires approval")
    if managed == "allow":
        return Verdict("allow", "managed", "allowed by a managed rule")
    if rule == "allow":
        return Verdict("allow", "rule", "allowed by a permission rule")
    if mode == "ask" and hook_permission == "allow":
        return Verdict("allow", "mode", "ordinary prompt suppressed by a policy backend's allow")
    reasons = {
        "allow": "allowed by the permission mode",
        "ask": "the permission mode requires approval",
        "deny": "refused by the permission mode",
    }
    return Verdict(mode, "mode", reasons[mode])


def carried_permission(settled: HookPermission) -> HookPermission:
    """What a settled ``tool.before`` permission still says once the input has changed.

    The seed (``initial_permission``) of the ``tool.before`` run that judges the
    changed input (draft §5.4): ``ask`` persists ("ask persists even if a later
    allow arrives"); ``allow`` becomes ``none`` ("approval is bound to the effective
    arguments", so the changed input needs its own); ``none`` stays ``none``. A
    ``deny`` never gets this far (it refused the call at once) and stays ``deny``.
    """
    return "none" if settled == "allow" else settled

"""This harness's own layers, in order, and the whole table: AHP's result folded with them.

The AHP half of the precedence (an AHP refusal first, ``ask`` always prompts, ``allow``
suppresses only the ordinary prompt, ``none`` is not permission) is
:func:`ahp_harness.hooks.decide`, the one place it is written; this module never restates
it. What lives here is the *host's* ordering of its own layers, :func:`host_decision`,
and :func:`decide`, the README's table as one call (the two composed). In order, the
first that applies wins:

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

Rows 1, the AHP ``ask`` of row 4 and the ``allow`` of row 6 are ``hooks.decide``; the
rest is :func:`host_decision`. A supplied result (AHP ``return``) skips execution,
never approval: it is delivered only when the fold says ``allow`` (or the prompt is
approved). Pure and synchronous; knows nothing of processes, files or terminals.
"""

from __future__ import annotations

from typing import Literal

from ahp_harness.hooks import CallDecision
from ahp_harness.hooks import decide as fold

__all__ = ["CallDecision", "Decision", "HookPermission", "Stage", "decide", "host_decision"]

HookPermission = Literal["none", "allow", "ask", "deny"]
Decision = Literal["allow", "ask", "deny"]
Stage = Literal["ahp", "sandbox", "managed", "rule", "ahp-ask", "mode"]

_MODE_REASONS = {
    "allow": "allowed by the permission mode",
    "ask": "the permission mode requires approval",
    "deny": "refused by the permission mode",
}


def host_decision(
    *,
    sandbox_violation: str | None,
    managed: Decision | None,
    rule: Decision | None,
    mode: Decision,
) -> CallDecision:
    """The host's own decision, without AHP: sandbox, refusals, forced prompts, allows, mode.

    ``managed``/``rule`` are the strongest matching managed and user rules (``None``
    when none matches); ``mode`` is the mode's default, whose ``ask`` is the ordinary
    prompt (:attr:`CallDecision.ordinary`).
    """
    if sandbox_violation is not None:
        return CallDecision("deny", "sandbox", sandbox_violation)
    if managed == "deny":
        return CallDecision("deny", "managed", "refused by a managed rule")
    if rule == "deny":
        return CallDecision("deny", "rule", "refused by a permission rule")
    if mode == "deny":
        return CallDecision("deny", "mode", _MODE_REASONS["deny"])
    if managed == "ask":
        return CallDecision("ask", "managed", "a managed rule requires approval")
    if rule == "ask":
        return CallDecision("ask", "rule", "a permission rule requires approval")
    if managed == "allow":
        return CallDecision("allow", "managed", "allowed by a managed rule")
    if rule == "allow":
        return CallDecision("allow", "rule", "allowed by a permission rule")
    return CallDecision(mode, "mode", _MODE_REASONS[mode], ordinary=mode == "ask")


def decide(
    *,
    hook_permission: HookPermission,
    hook_stopped: bool,
    sandbox_violation: str | None,
    managed: Decision | None,
    rule: Decision | None,
    mode: Decision,
    hook_reason: str = "",
) -> CallDecision:
    """The whole table for one call: :func:`host_decision` folded by ``hooks.decide``.

    ``hook_stopped`` is true for an accepted deny, a flow stop or a synthetic denial;
    ``hook_reason`` is AHP's reason for it.
    """
    return fold(
        hook_permission,
        lambda: host_decision(
            sandbox_violation=sandbox_violation, managed=managed, rule=rule, mode=mode
        ),
        stopped=hook_stopped,
        reason=hook_reason,
    )

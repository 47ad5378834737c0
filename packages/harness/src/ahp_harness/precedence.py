"""Who decides a tool call: AHP's settled result folded with the host's own layers.

This is the one place the precedence is enforced (the README's table is this
function written in prose). In order, the first that applies wins:

1. **AHP refuses**: an accepted ``deny``, a flow ``stop`` or a synthetic
   (fail-closed) denial refuses at once. Nothing later can bring the call back.
2. **The sandbox** refuses an escape (a path outside the workspace, a fetch
   host not allowed), whatever AHP said.
3. **Managed rules** refuse (``deny``) or force a prompt (``ask``); neither
   user rules nor any AHP effect can relax them.
4. **Host deny rules** refuse.
5. **An explicit host ``ask`` rule, or AHP ``ask``**, always prompts.
6. **Host ``allow`` rules** (and a managed ``allow``) allow without a prompt.
7. **The mode's default** decides: ``allow``, ``deny`` or an *ordinary*
   prompt. AHP ``allow`` suppresses only that ordinary prompt; it never turns
   a mode's ``deny`` into an ``allow``. No effect (permission ``none``) is not
   permission: the mode still decides.

A supplied result (AHP ``return``) skips execution, never approval: it is
delivered only when this function says ``allow`` (or the prompt is approved).
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

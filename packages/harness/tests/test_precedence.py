"""The precedence table, exhaustively: AHP's settled result x the host's layers x approval.

The oracle is the precedence as written (``ahp_harness.precedence``'s docstring, the
README's section 2), restated here by hand, never by calling :func:`decide` (the
README's table as one call: the host's layers, :func:`ahp_harness.precedence.host_decision`,
folded by the one AHP precedence rule, :func:`ahp_harness.hooks.decide`):

1. AHP refuses (accepted deny, flow stop, synthetic fail-closed denial);
2. the sandbox refuses an escape;
3. managed ``deny``, user ``deny`` or the mode's ``deny`` refuses (before any prompt);
4. managed ``ask``, user ``ask`` or AHP ``ask`` prompts;
5. managed or user ``allow`` allows without a prompt;
6. the mode decides the rest; AHP ``allow`` suppresses only the mode's ordinary prompt.

Two levels:

- :func:`decide` alone, over hook permission {none, allow, ask, deny, synthetic deny,
  flow stop} x user rule {none, allow, ask, deny} x mode default {allow, ask, deny} x
  managed rule {none, allow, ask, deny} x sandbox {ok, escape}: decision, stage, reason;
  plus independent invariants over the whole product (refusals are final, managed deny
  is never relaxed, AHP allow never removes a forced prompt, stricter layers never
  make a call more permissive);
- the same product x approval {approved, rejected} through the real
  :class:`~ahp_harness.hooks.Gate` (real ``write_file`` in a temporary workspace, real
  :class:`~ahp_harness.permissions.Permissions` and sandbox), with AHP's settled result
  supplied in memory: executed or not (the file on disk), the prompt shown or not, and
  the transcript fields. The same rows with real backend processes are in
  ``test_gate.py``.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import pytest
from ahp_harness.host import HARNESS, build_gate
from ahp_harness.manifest import capabilities
from ahp_harness.permissions import Permissions, Rule
from ahp_harness.precedence import CallDecision, decide
from ahp_harness.sandbox import Sandbox
from ahp_protocol.client import HookResult, Hooks
from ahp_protocol.client.chain import SYNTHETIC_DENIAL_REASON, ChainState, Denial

Hook = Literal["none", "allow", "ask", "deny", "synthetic", "stop"]
Layer = Literal["allow", "ask", "deny"] | None

HOOKS: tuple[Hook, ...] = ("none", "allow", "ask", "deny", "synthetic", "stop")
RULES: tuple[Layer, ...] = (None, "allow", "ask", "deny")
MANAGED: tuple[Layer, ...] = (None, "allow", "ask", "deny")
MODES: tuple[Literal["allow", "ask", "deny"], ...] = ("allow", "ask", "deny")
SANDBOX = ("ok", "escape")
APPROVALS = ("approved", "rejected")

EXPLICIT_REASON = "writes are frozen during the release"
STOP_REASON = "the session is over"
ESCAPE = "path '../escape.txt' resolves outside the workspace"
STRENGTH = {"allow": 0, "ask": 1, "deny": 2}

# What each hook outcome means as decide() input: (permission, stopped, reason).
HOOK_INPUT: dict[Hook, tuple[Literal["none", "allow", "ask", "deny"], bool, str]] = {
    "none": ("none", False, ""),
    "allow": ("allow", False, ""),
    "ask": ("ask", False, ""),
    "deny": ("deny", True, EXPLICIT_REASON),
    "synthetic": ("deny", True, SYNTHETIC_DENIAL_REASON),
    "stop": ("none", True, STOP_REASON),
}

# Step 7, the mode's default, by hand: (mode, hook permission) -> decision. Only
# ``none`` and ``allow`` ever reach the mode (deny/stop/synthetic refuse, ask prompts).
MODE_TABLE: dict[tuple[str, str], str] = {
    ("allow", "none"): "allow",
    ("allow", "allow"): "allow",
    ("ask", "none"): "ask",
    ("ask", "allow"): "allow",  # AHP allow suppresses the ordinary prompt ...
    ("deny", "none"): "deny",
    ("deny", "allow"): "deny",  # ... and never turns the mode's deny into an allow
}


def expected(hook: Hook, rule: Layer, mode: str, managed: Layer, sandbox: str) -> tuple[str, str]:
    """(decision, stage) per the README's rules, written as data."""
    refusals = [
        ("ahp", hook in ("deny", "synthetic", "stop")),
        ("sandbox", sandbox == "escape"),
        ("managed", managed == "deny"),
        ("rule", rule == "deny"),
        ("mode", mode == "deny"),  # a mode's refusal is final too (no prompt, no rule)
    ]
    prompts = [("managed", managed == "ask"), ("rule", rule == "ask"), ("ahp-ask", hook == "ask")]
    allows = [("managed", managed == "allow"), ("rule", rule == "allow")]
    for decision, layers in (("deny", refusals), ("ask", prompts), ("allow", allows)):
        for stage, present in layers:
            if present:
                return decision, stage
    return MODE_TABLE[(mode, hook)], "mode"


def run_decide(hook: Hook, rule: Layer, mode: Any, managed: Layer, sandbox: str) -> CallDecision:
    permission, stopped, reason = HOOK_INPUT[hook]
    return decide(
        hook_permission=permission,
        hook_stopped=stopped,
        sandbox_violation=ESCAPE if sandbox == "escape" else None,
        managed=managed,
        rule=rule,
        mode=mode,
        hook_reason=reason,
    )


PRODUCT = list(itertools.product(HOOKS, RULES, MODES, MANAGED, SANDBOX))


def row_id(row: tuple[Any, ...]) -> str:
    return "-".join(str(x) for x in row)


# -- decide() alone --------------------------------------------------------------------


def check_verdict(row: tuple[Any, ...]) -> list[str]:
    """What is wrong with decide() on one row (empty when it matches the table)."""
    hook, _rule, _mode, _managed, _sandbox = row
    verdict = run_decide(*row)
    decision, stage = expected(*row)
    problems = []
    if (verdict.decision, verdict.stage) != (decision, stage):
        problems.append(f"{(verdict.decision, verdict.stage)} != {(decision, stage)}")
    if verdict.prompts != (decision == "ask"):
        problems.append("prompts")
    # The reason says who decided and what.
    if stage == "ahp":
        ok = verdict.reason == HOOK_INPUT[hook][2]
    elif stage == "sandbox":
        ok = verdict.reason == ESCAPE
    else:
        word = {"deny": "refused", "ask": "approval", "allow": "allow"}[decision]
        ok = word in verdict.reason
        if stage in ("managed", "rule"):
            ok = ok and ("managed" in verdict.reason) == (stage == "managed")
    if not ok:
        problems.append(f"reason {verdict.reason!r}")
    return [f"{row_id(row)}: {p}" for p in problems]


@pytest.mark.parametrize(("hook", "managed"), list(itertools.product(HOOKS, MANAGED)))
def test_decide_rows(hook: Hook, managed: Layer) -> None:
    """Every row with this hook outcome and managed rule: decision, stage and reason."""
    rows = [r for r in PRODUCT if r[0] == hook and r[3] == managed]
    assert len(rows) == 4 * 3 * 2
    assert [p for row in rows for p in check_verdict(row)] == []


def test_the_product_is_complete() -> None:
    assert len(PRODUCT) == 6 * 4 * 3 * 4 * 2
    seen = {(v.decision, v.stage) for v in (run_decide(*row) for row in PRODUCT)}
    # Every stage of the table is reached by some row (no dead rule).
    assert {stage for _, stage in seen} == {"ahp", "sandbox", "managed", "rule", "ahp-ask", "mode"}


def test_an_empty_hook_reason_still_gives_a_reason() -> None:
    verdict = decide(
        hook_permission="deny",
        hook_stopped=True,
        sandbox_violation=None,
        managed=None,
        rule=None,
        mode="allow",
    )
    assert (verdict.decision, verdict.stage) == ("deny", "ahp")
    assert verdict.reason == "refused by a policy backend"  # generic, never empty


# -- invariants over the whole product (independent of the table above) ---------------


def test_any_refusal_source_refuses() -> None:
    for row in PRODUCT:
        hook, rule, _mode, managed, sandbox = row
        refused = (
            hook in ("deny", "synthetic", "stop")
            or sandbox == "escape"
            or managed == "deny"
            or rule == "deny"
        )
        if refused:
            assert run_decide(*row).decision == "deny", row


def test_ahp_refusals_win_over_every_host_layer() -> None:
    for row in PRODUCT:
        if row[0] in ("deny", "synthetic", "stop"):
            assert run_decide(*row).stage == "ahp", row


def test_managed_deny_is_never_relaxed() -> None:
    for row in PRODUCT:
        if row[3] == "deny":
            assert run_decide(*row).decision == "deny", row


def test_managed_ask_always_prompts_unless_something_refuses() -> None:
    for row in PRODUCT:
        hook, rule, mode, managed, sandbox = row
        if managed == "ask" and hook in ("none", "allow", "ask") and sandbox == "ok":
            refused = "deny" in (rule, mode)
            assert run_decide(*row).decision == ("deny" if refused else "ask"), row


def test_ahp_allow_never_removes_a_forced_prompt() -> None:
    for _, rule, mode, managed, sandbox in PRODUCT:
        if "ask" in (rule, managed) and "deny" not in (rule, managed, mode) and sandbox == "ok":
            verdict = run_decide("allow", rule, mode, managed, sandbox)
            assert (verdict.decision, verdict.stage != "mode") == ("ask", True)


def test_ahp_allow_suppresses_only_the_ordinary_prompt() -> None:
    """allow differs from no effect in exactly one place: the mode's own prompt."""
    for _, rule, mode, managed, sandbox in PRODUCT:
        without = run_decide("none", rule, mode, managed, sandbox)
        with_allow = run_decide("allow", rule, mode, managed, sandbox)
        if without.decision == "ask" and without.stage == "mode":
            assert (with_allow.decision, with_allow.stage) == ("allow", "mode")
        else:
            assert with_allow.decision == without.decision, (rule, mode, managed, sandbox)


async def carried(first: Literal["none", "allow", "ask"]) -> Any:
    """What the second ``tool.before`` of one call (its input changed) is seeded with,
    when the first settled ``first``: the API's :meth:`ToolCall.before` decides it."""
    stand_in = SettledHooks(first)
    hooks = settled_hooks(stand_in)
    call = hooks.session(cwd="/ws").tool_call("write_file", {"path": "a"}, kind="file_write")
    await call.before()
    result = await call.before({"path": "b"})
    first_seed, second_seed = stand_in.seeds
    assert first_seed == "none"  # the first run is never seeded
    assert result.permission == second_seed  # (the stand-in settles what it was seeded with)
    return second_seed


@pytest.mark.anyio
async def test_a_changed_input_keeps_ask_and_loses_allow() -> None:
    """What tool.before settled, once tool.permission.request has changed the input.

    By hand (draft §5.4): ask persists; allow was for another input; none stays none.
    Then, over the whole product, a carried ask is never decided into a silent allow.
    """
    assert await carried("ask") == "ask"
    assert await carried("allow") == "none"
    assert await carried("none") == "none"
    for _, rule, mode, managed, sandbox in PRODUCT:
        verdict = run_decide(await carried("ask"), rule, mode, managed, sandbox)
        assert verdict.decision in ("ask", "deny"), (rule, mode, managed, sandbox)


def test_ahp_ask_always_prompts_where_the_host_would_allow() -> None:
    for _, rule, mode, managed, sandbox in PRODUCT:
        without = run_decide("none", rule, mode, managed, sandbox)
        asked = run_decide("ask", rule, mode, managed, sandbox)
        if without.decision == "allow":
            assert asked.decision == "ask", (rule, mode, managed, sandbox)
        if without.decision == "ask":
            assert asked.decision == "ask"
        if without.decision == "deny":
            # Every host refusal, the mode's included, is final: AHP ask never turns a
            # refusal into a prompt the user could approve (no answer weakens the host).
            assert (asked.decision, asked.stage) == ("deny", without.stage)


# Stricter values of one layer, pairwise (looser, stricter). A user or managed rule
# that is absent is not comparable with ask/deny (an explicit rule overrides the mode).
CHAINS: dict[int, list[tuple[Any, Any]]] = {
    0: [
        ("allow", "none"),
        ("none", "ask"),
        ("none", "deny"),
        ("ask", "deny"),
        ("none", "synthetic"),
    ],
    1: [("allow", "ask"), ("ask", "deny"), ("allow", "deny"), ("allow", None)],
    2: [("allow", "ask"), ("ask", "deny"), ("allow", "deny")],
    3: [("allow", "ask"), ("ask", "deny"), ("allow", "deny"), ("allow", None)],
    4: [("ok", "escape")],
}


def test_a_stricter_layer_never_makes_a_call_more_permissive() -> None:
    checked = 0
    for row in PRODUCT:
        for position, pairs in CHAINS.items():
            for looser, stricter in pairs:
                if row[position] != looser:
                    continue
                strict_row = list(row)
                strict_row[position] = stricter
                loose = run_decide(*row)
                strict = run_decide(*strict_row)  # type: ignore[arg-type]
                assert STRENGTH[strict.decision] >= STRENGTH[loose.decision], (row, strict_row)
                checked += 1
    assert checked > 1000


# -- the real Gate: approval -> executed ----------------------------------------------


class SettledHooks:
    """A dispatcher stand-in that settles ``tool.before`` as given (no process, no wire).

    The real chain is exercised in ``test_gate.py``; here only the gate's folding of a
    settled :class:`HookResult` with the host's layers and the approval is under test.
    """

    def __init__(self, hook: Hook) -> None:
        self.hook = hook
        self.intercepted: list[str] = []
        self.seeds: list[str] = []

    async def start(self) -> None:
        pass

    def intercepts(self, event_type: str) -> bool:
        return event_type == "tool.before"

    def observes(self, event_type: str) -> bool:
        return False

    async def observe(
        self, event: Mapping[str, Any], *, attachments: Any = ()
    ) -> list[Any]:  # pragma: no cover
        return []

    async def intercept(
        self, event: Mapping[str, Any], *, initial_permission: str = "none", attachments: Any = ()
    ) -> HookResult:
        self.intercepted.append(str(event["type"]))
        self.seeds.append(initial_permission)
        # A second run (the input changed) settles what it was seeded with.
        state = ChainState(event=dict(event), permission=initial_permission)  # type: ignore[arg-type]
        if len(self.seeds) > 1:
            pass
        elif self.hook in ("allow", "ask"):
            state = ChainState(event=dict(event), permission=self.hook)
        elif self.hook == "deny":
            denial = Denial(EXPLICIT_REASON, "com.example.freeze", "com.example.policy", 0)
            state = ChainState(event=dict(event), permission="deny", denial=denial)
        elif self.hook == "synthetic":
            state = state.deny_synthetic("com.example.required", 0)
        elif self.hook == "stop":
            state = ChainState(event=dict(event), flow="stop", flow_reason=STOP_REASON)
        return HookResult.settle("tool.before", state, [])


def settled_hooks(stand_in: SettledHooks) -> Hooks:
    """This harness's :class:`Hooks`, with the stand-in as its dispatcher."""
    hooks = Hooks(None, harness=HARNESS, capabilities=capabilities(interactive=True))
    hooks.dispatcher = stand_in  # type: ignore[assignment]
    return hooks


class Approver:
    def __init__(self, answer: bool) -> None:
        self.answer = answer
        self.asked = 0

    async def __call__(self, tool: str, tool_input: Mapping[str, Any], reason: str) -> bool:
        self.asked += 1
        return self.answer


# The mode default for write_file, by permission mode (permissions.py's table).
MODE_NAME = {"allow": "accept-edits", "ask": "default", "deny": "read-only"}


def host_permissions(rule: Layer, managed: Layer, mode: str) -> Permissions:
    rules = [Rule(decision=rule, tool="write_file", source="user:rules[0]")] if rule else []
    admin = (
        [Rule(decision=managed, kind="file_write", source="managed:rules[0]")] if managed else []
    )
    return Permissions(rules, admin, mode=MODE_NAME[mode])  # type: ignore[arg-type]


GATE_PRODUCT = list(itertools.product(HOOKS, RULES, MODES, MANAGED, SANDBOX, APPROVALS))


async def check_gate_row(row: tuple[Any, ...], root: Path) -> list[str]:
    """Run one row through the real gate; what is wrong with it (empty when right)."""
    hook, rule, mode, managed, sandbox_case, approval = row
    decision, stage = expected(hook, rule, mode, managed, sandbox_case)
    base = root / row_id(row)
    workspace = base / "ws"
    workspace.mkdir(parents=True)
    sandbox = Sandbox([workspace])
    approver = Approver(approval == "approved")
    hooks = SettledHooks(hook)
    gate = build_gate(
        settled_hooks(hooks).session(cwd=str(workspace), session_id="sess_1"),
        permissions=host_permissions(rule, managed, mode),
        sandbox=sandbox,
        approve=approver,
    )
    path = "../escape.txt" if sandbox_case == "escape" else "out.txt"
    try:
        record = await gate.call("write_file", {"path": path, "content": "hello\n"}, "call_1")
    finally:
        sandbox.close()
    should_run = decision == "allow" or (decision == "ask" and approval == "approved")
    line = record.transcript()
    if stage == "ahp":
        reason_ok = record.reason.endswith(HOOK_INPUT[hook][2])
    elif decision == "ask" and approval == "rejected":
        reason_ok = "rejected" in record.reason
    elif stage == "sandbox":
        reason_ok = "outside the workspace" in record.reason
    else:
        reason_ok = bool(record.reason)
    checks = {
        "executed": record.executed is should_run and line["executed"] is should_run,
        "file on disk": (workspace / "out.txt").exists() is should_run,
        "nothing outside": not (base / "escape.txt").exists(),
        "outcome": record.outcome == ("ok" if should_run else "denied"),
        # The prompt is shown exactly when the host's decision is ask.
        "prompted": approver.asked == (1 if decision == "ask" else 0),
        "approval": record.approval == (approval if decision == "ask" else "not_needed"),
        # The transcript says which stage decided, and why.
        "stage": (record.host_decision, record.host_stage) == (decision, stage),
        "hook_permission": line["hook_permission"]
        == {"stop": "none", "synthetic": "deny"}.get(hook, hook),
        "synthetic_denial": line["synthetic_denial"] is (hook == "synthetic"),
        "denied_by": line["denied_by"]
        == {"deny": "com.example.policy", "synthetic": "com.example.required"}.get(hook),
        "reason": reason_ok,
        "one tool.before": hooks.intercepted == ["tool.before"],
    }
    return [f"{row_id(row)}: {name} ({line})" for name, ok in checks.items() if not ok]


@pytest.mark.anyio
@pytest.mark.parametrize(("hook", "managed"), list(itertools.product(HOOKS, MANAGED)))
async def test_gate_rows(hook: Hook, managed: Layer, tmp_path: Path) -> None:
    """Every row with this hook outcome and managed rule, x approval, through the gate."""
    rows = [r for r in GATE_PRODUCT if r[0] == hook and r[3] == managed]
    assert len(rows) == 4 * 3 * 2 * 2
    problems = []
    for row in rows:
        problems += await check_gate_row(row, tmp_path)
    assert problems == []

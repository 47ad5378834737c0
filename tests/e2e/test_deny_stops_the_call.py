"""Promise 1: deny always stops the call.

A chain of three interceptors on ``tool.before``, the denier at position 0, 1
or 2, over stdio persistent, stdio per_event and HTTP, under fail-open and
fail-closed subscriptions. The host would allow the call (user ``allow`` rules),
so only the deny stands between the call and the disk. For each case:

- the tool never runs: the workspace is byte-for-byte what it was;
- the interceptors before the denier were asked once; the ones after it were
  never asked (no ``hooks/intercept`` in their record files) and got the
  short-circuit observation (one ``hooks/observe`` of the same ``tool.before``);
- an observer (``ahp-backend audit``) saw exactly one ``tool.after``, with
  outcome ``denied`` and execution skipped; the transcript and the audit log
  name the denier and mark the denial as not synthetic.

The denier rotates over three independent implementations (the purpose-built
``misbehave.py deny``, the official SDK's backend, our ``ahp-backend denylist``)
so that each transport and each position meets each of them. A control run
per transport, with no denier, shows the same chain lets the call run.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

TRANSPORTS = ("persistent", "per_event", "http")
POLICIES = ("fail-open", "fail-closed")
CHAIN = 3

ALLOW_BOTH = """
[[rules]]
decision = "allow"
tool = "write_file"
reason = "the host would allow this write"

[[rules]]
decision = "allow"
tool = "shell"
reason = "the host would allow this command"
"""

WRITE = {"tool": "write_file", "input": {"path": "denied.txt", "content": "must never exist"}}
RM_RF = {"tool": "shell", "input": {"command": "rm -rf keep && touch ran.txt"}}

DENYLIST_RULES = """
[[rules]]
reason = "Writes are not allowed in this test."
code = "com.example.e2e.no_writes"
tool = "write_file"
"""


@dataclass(frozen=True)
class Denier:
    """One implementation of "deny this call", and the call it denies."""

    name: str
    command: Callable[[Any], Any]
    step: dict[str, Any]
    reason: str


DENIERS = (
    Denier(
        "misbehave", lambda e2e: e2e.misbehave("deny"), WRITE, "Denied by the misbehave backend"
    ),
    Denier("sdk", lambda e2e: e2e.sdk_backend(), RM_RF, "Recursive deletes are not allowed (sdk)."),
    Denier(
        "denylist",
        lambda e2e: e2e.denylist(DENYLIST_RULES),
        WRITE,
        "Writes are not allowed in this test.",
    ),
)


def cases() -> list[Any]:
    """Each transport x each position, the denier and the failure policy rotating: a
    failure policy governs failures only, so an accepted deny is the same under either
    (each transport still meets both, and each denier both)."""
    out = []
    for t, transport in enumerate(TRANSPORTS):
        for position in range(CHAIN):
            denier = DENIERS[(t + position) % len(DENIERS)]
            policy = POLICIES[(t + position) % len(POLICIES)]
            out.append(
                pytest.param(
                    transport,
                    position,
                    policy,
                    denier,
                    id=f"{transport}-pos{position}-{policy}-{denier.name}",
                )
            )
    return out


def snapshot(root: Path) -> dict[str, bytes | None]:
    """Every path under ``root`` with its bytes (``None`` for folders)."""
    return {
        str(p.relative_to(root)): (p.read_bytes() if p.is_file() else None)
        for p in sorted(root.rglob("*"))
    }


def prepare(workspace: Path) -> dict[str, bytes | None]:
    (workspace / "keep").mkdir()
    (workspace / "keep" / "file.txt").write_text("precious\n", "utf-8")
    return snapshot(workspace)


def passer(e2e: Any, transport: str, index: int) -> Any:
    """A recording interceptor that answers no effect (kit-based on stdio, stdlib on HTTP)."""
    record = f"passer{index}.jsonl"
    if transport != "http" and index % 2 == 0:
        return e2e.scripted_kit([], record=record)
    return e2e.misbehave("ok", record=record)


def chain(
    e2e: Any, transport: str, policy: str, denier: Denier | None, position: int
) -> tuple[dict[str, Any], dict[int, Path]]:
    """Three interceptors (the denier at ``position``) and an audit observer, in order."""
    hooks = []
    records: dict[int, Path] = {}
    for index in range(CHAIN):
        if denier is not None and index == position:
            command = denier.command(e2e)
            hook_id = f"com.example.e2e.denier.{denier.name}"
        else:
            command = passer(e2e, transport, index)
            records[index] = command.record
            hook_id = f"com.example.e2e.passer{index}"
        subscription = e2e.intercept("tool.before", policy=policy)
        hooks.append(e2e.hook(hook_id, command, transport, [subscription]))
    # The observer: the audit backend, over the chain's transport; for per_event chains it
    # runs persistent (see test_a_slow_per_event_observer_still_gets_the_last_tool_after).
    observer_transport = "persistent" if transport == "per_event" else transport
    audit = e2e.hook(
        "com.example.e2e.audit", e2e.audit(), observer_transport, [e2e.observe("tool.*")]
    )
    return e2e.registration(*hooks, audit), records


@pytest.mark.parametrize(("transport", "position", "policy", "denier"), cases())
def test_deny_stops_the_call(
    e2e: Any, transport: str, position: int, policy: str, denier: Denier
) -> None:
    before = prepare(e2e.workspace)
    reg, records = chain(e2e, transport, policy, denier, position)
    run = e2e.run(registration=reg, steps=[denier.step], permissions=ALLOW_BOTH).ok()

    # The tool never ran: nothing on disk changed.
    assert snapshot(e2e.workspace) == before, run.explain()

    # The transcript: refused by AHP, by this denier, not synthetic, never executed.
    call = run.call("call_1")
    denier_id = f"com.example.e2e.denier.{denier.name}"
    assert call["outcome"] == "denied", run.explain()
    assert call["executed"] is False
    assert call["hook_permission"] == "deny"
    assert call["denied_by"] == denier_id
    assert call["synthetic_denial"] is False
    assert call["host_stage"] == "ahp"
    assert call["reason"] == denier.reason

    # The audit log: one settled tool.before, an explicit denial by the denier.
    (hook,) = run.hooks("tool.before")
    assert hook["denial"]["backend"] == denier_id
    assert hook["denial"]["synthetic"] is False
    event_id = hook["eventId"]
    by_backend = {d["backend"]: d for d in hook["diagnostics"]}
    assert by_backend[denier_id]["outcome"] == "denied"

    # Earlier interceptors were asked once; later ones never, and got the observation.
    for index, record in records.items():
        hook_id = f"com.example.e2e.passer{index}"
        messages = e2e.received(record)
        asked = [m for m in messages if m.get("method") == "hooks/intercept"]
        told = [m for m in messages if m.get("method") == "hooks/observe"]
        if index < position:
            assert [_event_id(m) for m in asked] == [event_id], (index, messages)
            assert told == [], (index, messages)
            assert by_backend[hook_id]["mode"] == "intercept"
            assert by_backend[hook_id]["outcome"] == "no_effect"
        else:
            assert asked == [], (index, messages)
            assert [_event_id(m) for m in told] == [event_id], (index, messages)
            assert [m["params"]["event"]["type"] for m in told] == ["tool.before"]
            assert by_backend[hook_id]["mode"] == "short-circuit"
            assert by_backend[hook_id]["outcome"] == "delivered"

    # The observer saw exactly one tool.after, outcome denied, execution skipped.
    afters = e2e.audit_events("tool.after")
    assert len(afters) == 1, afters
    assert afters[0]["outcome"] == "denied"
    assert afters[0]["execution"] == {"status": "skipped", "reason": "policy"}
    assert afters[0]["call"]["id"] == "call_1"
    assert [e["id"] for e in e2e.audit_events("tool.before")] == [event_id]


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_control_without_a_denier_the_call_runs(e2e: Any, transport: str) -> None:
    """The same chain with every interceptor answering no effect: the host allows, it runs."""
    before = prepare(e2e.workspace)
    reg, records = chain(e2e, transport, "fail-closed", None, -1)
    run = e2e.run(registration=reg, steps=[WRITE, RM_RF], permissions=ALLOW_BOTH).ok()

    after = snapshot(e2e.workspace)
    assert after != before
    assert after.get("denied.txt") == b"must never exist"
    assert "keep" not in after and "ran.txt" in after
    assert [c["outcome"] for c in run.transcript] == ["ok", "ok"], run.explain()
    assert all(c["executed"] and c["denied_by"] is None for c in run.transcript)
    for record in records.values():
        asked = [m for m in e2e.received(record) if m.get("method") == "hooks/intercept"]
        assert len(asked) == 2
    outcomes = [e["outcome"] for e in e2e.audit_events("tool.after")]
    assert outcomes == ["ok", "ok"]


def _event_id(message: dict[str, Any]) -> str:
    return str(message["params"]["event"]["id"])


def test_a_slow_per_event_observer_still_gets_the_last_tool_after(e2e: Any) -> None:
    """The denied call's ``tool.after`` reaches a per_event observer that starts slowly.

    ``ahp-backend audit --once`` needs about 0.9 s to start and commit one event on a
    loaded 2-core machine. Here the observer (``misbehave.py slow-start --once``) takes
    1 s before it reads its one line, and the session ends right after the denied call.
    The observation was started (the audit log says ``delivered``), so the harness must
    let it complete within a bound rather than kill the observer at exit.
    """
    before = prepare(e2e.workspace)
    denier = e2e.hook(
        "com.example.e2e.denier", e2e.misbehave("deny"), "persistent", [e2e.intercept()]
    )
    slow = e2e.misbehave("slow-start", delay_ms=1000, record="slow.jsonl")
    observer = e2e.hook("com.example.e2e.slow", slow, "per_event", [e2e.observe("tool.after")])
    run = e2e.run(registration=e2e.registration(denier, observer), steps=[WRITE]).ok()
    assert snapshot(e2e.workspace) == before
    assert run.call("call_1")["outcome"] == "denied"
    (sent,) = [e for e in run.exchanges() if e["backend"] == "com.example.e2e.slow"]
    assert sent["outcome"] == "delivered", run.explain()
    afters = e2e.deliveries(e2e.received(e2e.path("slow.jsonl")), "hooks/observe", "tool.after")
    assert [e["outcome"] for e in afters] == ["denied"], run.explain()

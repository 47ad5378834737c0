"""The chain state and how one accepted response folds into it, with no I/O.

Owns :class:`ChainState` (what one interceptor hands the next), where each ``modify``
target lives in an event, and :func:`fold_response`, which applies one *already
validated* response (draft §5.4): modifications in order, inherited approval and
candidate dropped when the event changed (by value, :func:`same_json`), then
deny > ask > allow, ``return``, ``message``, ``inject`` and ``flow``.

Never validates effects against capabilities (``wire.effects.check_effects`` does,
first) and never talks to a backend. A modification that leaves an invalid event
raises :class:`~ahp_protocol.client.OperationalFailure`: the whole response is rejected.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from ahp_protocol.client._failures import FailureClass, OperationalFailure
from ahp_protocol.wire.state import Candidate as Candidate  # re-exported: the wire's, one type
from ahp_protocol.wire.state import FlowState as Flow
from ahp_protocol.wire.state import Permission as Permission

SYNTHETIC_DENIAL_REASON = "Required policy backend unavailable."
"""The generic reason of a fail-closed denial: no backend detail ever reaches the model."""

MODIFY_LOCATIONS: Mapping[tuple[str, str], tuple[str, ...]] = {
    ("tool.before", "input"): ("tool", "input"),
    ("tool.permission.request", "input"): ("tool", "input"),
    ("turn.start", "prompt"): ("items",),
    ("user.message.inbound", "prompt"): ("message", "messages"),
    ("model.request.before", "request"): ("items",),
    ("model.response.after", "response"): ("items",),
    ("turn.finish.before", "response"): ("items",),
    ("tool.after", "output"): ("items",),
    ("user.message.outbound", "content"): ("message", "messages"),
    ("context.compact.before", "instructions"): ("instructions",),
    ("context.compact.after", "summary"): ("summary",),
    ("workspace.change.before", "workspace"): ("workspace", "change"),
}
"""Where a ``modify`` target lives in the event (draft §5.2); elicitation content is special."""


@dataclass(frozen=True, slots=True)
class Denial:
    """Who stopped the call and why; ``synthetic`` marks a fail-closed failure, not a verdict."""

    reason: str
    code: str | None = None
    backend: str | None = None
    subscription: int | None = None
    synthetic: bool = False


@dataclass(frozen=True, slots=True)
class ChainState:
    """What one interceptor hands the next (and, at the end, the settled decision)."""

    event: Mapping[str, Any]
    permission: Permission = "none"
    candidate: Candidate | None = None
    flow: Flow = "none"
    flow_reason: str | None = None
    instructions: tuple[str, ...] = ()
    injections: tuple[Mapping[str, Any], ...] = ()
    messages: tuple[str, ...] = ()
    denial: Denial | None = None
    event_changed: bool = field(default=False, compare=False)
    """True when an accepted modification changed the event (the output, the input, ...)."""

    @property
    def stopped(self) -> bool:
        """True when the operation must not proceed and decision-making has ended: a
        denial (accepted or fail-closed) or a flow stop."""
        return self.denial is not None or self.flow == "stop"

    def wire_state(self) -> dict[str, Any]:
        """``params.state`` for the next interceptor."""
        state: dict[str, Any] = {
            "permission": self.permission,
            "candidate": self.candidate.to_wire() if self.candidate else None,
            "flow": self.flow,
        }
        if self.instructions:
            state["instructions"] = list(self.instructions)
        if self.injections:
            state["injections"] = [dict(i) for i in self.injections]
        return state

    def deny_synthetic(self, backend: str, subscription: int) -> ChainState:
        """End the chain after a fail-closed failure, with a generic, marked denial."""
        denial = Denial(
            SYNTHETIC_DENIAL_REASON, backend=backend, subscription=subscription, synthetic=True
        )
        return replace(self, permission="deny", denial=denial)


def _get(event: Mapping[str, Any], path: Sequence[str]) -> Any:
    node: Any = event
    for key in path:
        node = node.get(key) if isinstance(node, Mapping) else None
    return node


def _set(event: dict[str, Any], path: Sequence[str], value: Any) -> None:
    node = event
    for key in path[:-1]:
        child = node.get(key)
        if not isinstance(child, dict):
            child = {}
            node[key] = child
        node = child
    node[path[-1]] = value


def edited(current: Any, operation: str, value: Any) -> Any:
    """The draft's edit semantics (AHP-EDIT-001): ``replace`` substitutes the whole target;
    ``merge`` appends to a list, in order, and merges an object shallowly (nested values
    replaced whole, ``null`` kept as a value)."""
    if operation == "replace":
        return copy.deepcopy(value)
    if isinstance(current, list) and isinstance(value, list):
        return [*current, *copy.deepcopy(value)]
    if isinstance(current, Mapping) and isinstance(value, Mapping):
        return {**current, **copy.deepcopy(dict(value))}
    raise OperationalFailure(FailureClass.MALFORMED_EFFECT, "merge value does not fit the target")


def _edit_elicitation_content(event: dict[str, Any], operation: str, value: Any) -> None:
    part = _get(event, ("elicitation", "result"))
    text = part.get("text") if isinstance(part, Mapping) else None
    try:
        result = json.loads(text) if isinstance(text, str) else None
    except ValueError:
        result = None
    if not isinstance(result, dict):
        raise OperationalFailure(
            FailureClass.MALFORMED_EFFECT, "elicitation content edit needs a form result body"
        )
    result["content"] = edited(result.get("content") or {}, operation, value)
    event["elicitation"]["result"] = {**part, "text": json.dumps(result, separators=(",", ":"))}


def apply_modify(
    event: Mapping[str, Any], target: str, operation: str, value: Any
) -> dict[str, Any]:
    """A new effective event with one modification applied (the input is not changed)."""
    out = copy.deepcopy(dict(event))
    event_type = str(out.get("type"))
    if event_type == "user.elicitation.result" and target == "content":
        _edit_elicitation_content(out, operation, value)
        return out
    path = MODIFY_LOCATIONS.get((event_type, target))
    if path is None:
        raise OperationalFailure(
            FailureClass.UNADVERTISED_EFFECT, "modify target not at this event"
        )
    _set(out, path, edited(_get(out, path), operation, value))
    return out


def same_json(a: Any, b: Any) -> bool:
    """Whether two decoded JSON values are the same value (draft §5.4 step 4).

    Object key order is irrelevant; list order is not. Types compare as JSON types,
    stricter than ``==``: ``true`` is not ``1``, and ``1`` is not ``1.0`` (a tool sees
    them differently, so it counts as a change, the safe side). Linear in their size.
    """
    if a is b:
        return True
    if isinstance(a, Mapping):
        if not isinstance(b, Mapping) or len(a) != len(b):
            return False
        return all(key in b and same_json(value, b[key]) for key, value in a.items())
    if isinstance(a, list | tuple):
        if not isinstance(b, list | tuple) or len(a) != len(b):
            return False
        return all(same_json(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, bool) or isinstance(b, bool):
        return False  # not the same object, so not the same boolean (or one is no boolean)
    return type(a) is type(b) and bool(a == b)


def _revalidate(event: dict[str, Any]) -> None:
    from ahp_protocol.wire import events
    from ahp_protocol.wire.errors import WireError, WireErrors

    try:
        events.parse_event(event)
    except (WireError, WireErrors):
        raise OperationalFailure(
            FailureClass.MALFORMED_EFFECT, "modification leaves an invalid event"
        ) from None


def fold_response(
    state: ChainState, effects: Sequence[Any], *, backend: str, subscription: int
) -> ChainState:
    """Fold one accepted, validated response into the chain state (draft §5.4 steps 3-5).
    Raises :class:`OperationalFailure`, applying nothing, if a modification leaves an
    invalid event."""
    event: Mapping[str, Any] = state.event
    modified = False
    for effect in effects:
        if effect.type == "modify":
            event = apply_modify(event, effect.target, effect.operation, effect.value)
            modified = True
    # Prior state is invalidated only when the effective event changed (a merge that
    # rewrites a value with itself keeps inherited approval and candidate).
    changed = modified and not same_json(event, state.event)
    permission: Permission = state.permission
    candidate = state.candidate
    if changed:
        _revalidate(dict(event))
        candidate = None  # a change to the operation invalidates a supplied result
        if permission == "allow":
            permission = "none"  # approval is bound to the arguments it saw
    else:
        event = state.event
    flow, flow_reason = state.flow, state.flow_reason
    instructions = list(state.instructions)
    injections = list(state.injections)
    messages = list(state.messages)
    denial = state.denial

    for effect in effects:
        kind = effect.type
        if kind == "deny":
            if denial is None:
                denial = Denial(effect.reason, effect.code, backend, subscription)
        elif kind == "ask":
            if permission != "deny":
                permission = "ask"
        elif kind == "allow":
            if permission == "none":
                permission = "allow"
        elif kind == "return":
            candidate = Candidate(value=effect.value)
        elif kind == "message":
            messages.append(effect.text)
        elif kind == "inject":
            injections.append(effect.to_wire())
        elif kind == "flow":
            if effect.operation == "stop":
                if flow != "stop":
                    flow, flow_reason = "stop", effect.reason
            else:
                if flow != "stop":
                    flow = "continue"
                if effect.instruction:
                    instructions.append(effect.instruction)
    if denial is not None:
        permission = "deny"
    return ChainState(
        event=event,
        permission=permission,
        candidate=candidate,
        flow=flow,
        flow_reason=flow_reason,
        instructions=tuple(instructions),
        injections=tuple(injections),
        messages=tuple(messages),
        denial=denial,
        event_changed=state.event_changed or changed,
    )

"""Where effects may be used: the draft's per-event tables and the request's grant.

Owns the names of the effects, targets and operations (one ``Literal`` each, the sets
derived from it), the per-event legality tables (§4.2, ``capabilities.schema.json``
``$defs``: :data:`EVENT_EFFECTS`, :data:`MODIFY_TARGETS`, :data:`FLOW_OPERATIONS`) and
:class:`Grants`, the tolerant read of a request's capabilities that
:func:`check_effects` judges against. Re-exported by :mod:`ahp_protocol.wire.effects`.
Plain data; no pydantic, no I/O.
"""

from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Final, Literal, TypeGuard, get_args

from ahp_protocol.wire.catalogue import INTERCEPTABLE, is_interceptable
from ahp_protocol.wire.names import is_reverse_dns

if TYPE_CHECKING:
    from ahp_protocol.wire.model import WireModel

EffectType = Literal["deny", "allow", "ask", "modify", "message", "return", "flow", "inject"]
ModifyTarget = Literal[
    "input",
    "output",
    "prompt",
    "request",
    "response",
    "content",
    "instructions",
    "summary",
    "workspace",
]
EditOperation = Literal["replace", "merge"]
FlowOperation = Literal["stop", "continue"]
DeliverAt = Literal["now", "next_turn"]

EFFECT_TYPE_ORDER: Final[tuple[str, ...]] = get_args(EffectType)
EFFECT_TYPES: Final = frozenset(EFFECT_TYPE_ORDER)
MODIFY_TARGET_NAMES: Final[frozenset[str]] = frozenset(get_args(ModifyTarget))
EDIT_OPERATIONS: Final[frozenset[str]] = frozenset(get_args(EditOperation))
FLOW_OPERATION_NAMES: Final[frozenset[str]] = frozenset(get_args(FlowOperation))
DELIVER_AT: Final[frozenset[str]] = frozenset(get_args(DeliverAt))


def is_effect_name(name: str) -> bool:
    """Whether ``name`` may be listed in ``capabilities.effects``: a standard effect type
    or an extension's reverse-DNS name."""
    return name in EFFECT_TYPES or is_reverse_dns(name)


def _table(rows: Mapping[str, Iterable[str]]) -> Mapping[str, frozenset[str]]:
    return MappingProxyType({event: frozenset(rows.get(event, ())) for event in INTERCEPTABLE})


EVENT_EFFECTS: Final = _table(
    {
        "session.start": ("inject", "message"),
        "config.change.before": ("deny", "message"),
        "turn.start": ("deny", "modify", "inject", "flow", "message"),
        "turn.finish.before": ("modify", "flow", "message"),
        "model.request.before": ("deny", "modify", "inject", "return", "flow", "message"),
        "model.response.after": ("modify", "flow", "message"),
        "model.switch.before": ("deny", "flow", "message"),
        "tool.before": ("deny", "allow", "ask", "modify", "inject", "flow", "return", "message"),
        "tool.after": ("modify", "inject", "flow", "message"),
        "tool.permission.request": ("allow", "deny", "modify", "flow", "message"),
        "tool.batch.after": ("flow", "inject", "message"),
        "context.compact.before": ("deny", "modify", "return", "inject", "message"),
        "context.compact.after": ("inject", "modify", "message"),
        "task.change.before": ("deny", "message"),
        "user.elicitation.request": ("deny", "return", "message"),
        "user.elicitation.result": ("modify", "message"),
        "user.message.inbound": ("deny", "modify", "message"),
        "user.message.outbound": ("deny", "modify", "message"),
        "workspace.change.before": ("deny", "modify", "message"),
    }
)
"""The effects each of the 19 interceptable events allows (observe-only events allow none)."""

MODIFY_TARGETS: Final = _table(
    {
        "turn.start": ("prompt",),
        "turn.finish.before": ("response",),
        "model.request.before": ("request",),
        "model.response.after": ("response",),
        "tool.before": ("input",),
        "tool.after": ("output",),
        "tool.permission.request": ("input",),
        "context.compact.before": ("instructions",),
        "context.compact.after": ("summary",),
        "user.elicitation.result": ("content",),
        "user.message.inbound": ("prompt",),
        "user.message.outbound": ("content",),
        "workspace.change.before": ("workspace",),
    }
)
"""The ``modify`` targets each interceptable event allows (empty where modify is not allowed)."""

FLOW_OPERATIONS: Final = _table(
    {
        "turn.start": ("stop",),
        "turn.finish.before": ("stop", "continue"),
        "model.request.before": ("stop",),
        "model.response.after": ("stop",),
        "model.switch.before": ("stop",),
        "tool.before": ("stop",),
        "tool.after": ("stop", "continue"),
        "tool.permission.request": ("stop",),
        "tool.batch.after": ("stop",),
    }
)
"""The ``flow`` operations each interceptable event allows (empty where flow is not allowed)."""


_BLOCK_EFFECTS: Final = frozenset({"modify", "flow", "inject"})
"""Effects a grant must qualify with a block of the same name."""


def is_plain_grant_at(event_type: str, capabilities: object) -> bool:
    """Whether ``capabilities`` is an object with ``effects`` only, naming distinct effects
    that ``event_type`` allows and that need no block (not ``modify``, ``flow``, ``inject``).

    Every plain grant is valid at its event (``parse_capabilities`` accepts it; a test
    checks every combination); ``False`` only means "not plain", for that parse to judge.
    """
    if type(capabilities) is not dict or len(capabilities) != 1:
        return False
    effects = capabilities.get("effects")
    allowed = EVENT_EFFECTS.get(event_type)
    if type(effects) is not list or allowed is None:
        return False
    if not all(
        type(name) is str and name in allowed and name not in _BLOCK_EFFECTS for name in effects
    ):
        return False
    return len(set(effects)) == len(effects)


class Grants:
    """A tolerant read of a request's capabilities (validated upstream), for
    :func:`check_effects`. Build it once to judge many responses to the same grant."""

    __slots__ = ("deliver_at", "effects", "flow", "modify")

    def __init__(self, capabilities: "Mapping[str, Any] | WireModel") -> None:
        if not _is_mapping(capabilities):  # a Capabilities model, or anything: no grant
            to_wire = getattr(capabilities, "to_wire", None)
            capabilities = to_wire() if callable(to_wire) else {}
        caps: Mapping[str, Any] = capabilities if _is_mapping(capabilities) else {}
        effects = caps.get("effects")
        self.effects = frozenset(
            e for e in (effects if isinstance(effects, list) else ()) if isinstance(e, str)
        )
        modify = caps.get("modify")
        self.modify: Mapping[str, Any] = modify if _is_mapping(modify) else {}
        flow = caps.get("flow")
        self.flow: Mapping[str, Any] = flow if _is_mapping(flow) else {}
        inject = caps.get("inject")
        context = inject.get("context") if _is_mapping(inject) else None
        deliver = context.get("deliverAt") if _is_mapping(context) else None
        self.deliver_at = frozenset(deliver if isinstance(deliver, list) else ())

    def flow_operations(self) -> frozenset[str]:
        ops = self.flow.get("operations")
        return frozenset(ops if isinstance(ops, list) else ())

    def continuations_left(self) -> bool:
        left = self.flow.get("remainingContinuations")
        return isinstance(left, int) and not isinstance(left, bool) and left > 0


def _is_mapping(value: object) -> TypeGuard[Mapping[str, Any]]:
    return isinstance(value, (dict, Mapping))  # dict first: a cheap exact test


def at_event(event_type: str) -> str:
    """How a reason names the event (``at tool.before``; ``at this event`` for others)."""
    return f"at {event_type}" if is_interceptable(event_type) else "at this event"

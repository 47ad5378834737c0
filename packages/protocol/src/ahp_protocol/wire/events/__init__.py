"""The event envelope and the draft's 32 standard events, as strict wire models.

Owns the shape of every event (draft §3, ``event.schema.json`` and the schemas it
composes): the envelope, one model per standard event with its required fields, closed
nested objects and the conditional rules the schemas state, and :func:`parse_event`,
which picks the model by ``type``. Envelopes are open (unknown top-level fields are
kept and written back by :meth:`Event.to_wire`); the nested objects the schemas close
are closed, ``turn`` on the 15 execution events included. Parsing is strict and never
coerces. A missing, unknown or removed ``type`` raises :class:`UnsupportedEvent`
(JSON-RPC -32002 at the server); every other problem raises
:class:`~ahp_protocol.wire.errors.WireErrors` with paths relative to the event
(``tool.input``), with fixed reasons that never quote input.

Import every name from this package. The envelope's names live in ``envelope.py``,
what several families share in ``results.py``, and each family in its own module
(``tool.py`` holds ``tool.before``, ``tool_lifecycle.py`` the rest of a call's life).

No I/O. Importing this package creates only the envelope's classes: a family module is
imported on first use of one of its names (PEP 562 ``__getattr__``), of its
:data:`EVENT_MODELS` entry, or when :func:`parse_event` meets one of its events, so a
per-event backend pays only for the family it receives. :data:`_FAMILY_NAMES` is the one
hand-kept list of the families' names (a test checks it against the modules); an
event's model is its name in CamelCase (``ToolBefore``).
"""

from collections.abc import Callable, Iterator, Mapping
from functools import partial
from types import ModuleType
from typing import TYPE_CHECKING, Any, Final

from pydantic import ValidationError

from ahp_protocol.wire.catalogue import EVENT_TYPES, REMOVED
from ahp_protocol.wire.errors import WireError, WireErrors
from ahp_protocol.wire.events.envelope import *  # noqa: F403 (re-exported: its __all__)
from ahp_protocol.wire.events.envelope import Event
from ahp_protocol.wire.events.envelope import __all__ as _ENVELOPE
from ahp_protocol.wire.model import WIRE_CONTEXT, to_wire_errors, unknown_stay_unknown

if TYPE_CHECKING:  # type checkers read the families here; run time imports them lazily
    from ahp_protocol.wire.events.config import *  # noqa: F403
    from ahp_protocol.wire.events.context import *  # noqa: F403
    from ahp_protocol.wire.events.file import *  # noqa: F403
    from ahp_protocol.wire.events.hook import *  # noqa: F403
    from ahp_protocol.wire.events.model import *  # noqa: F403
    from ahp_protocol.wire.events.results import *  # noqa: F403
    from ahp_protocol.wire.events.session import *  # noqa: F403
    from ahp_protocol.wire.events.task import *  # noqa: F403
    from ahp_protocol.wire.events.tool import *  # noqa: F403
    from ahp_protocol.wire.events.tool_lifecycle import *  # noqa: F403
    from ahp_protocol.wire.events.turn import *  # noqa: F403
    from ahp_protocol.wire.events.user import *  # noqa: F403
    from ahp_protocol.wire.events.workspace import *  # noqa: F403


# --------------------------------------------------------------------------- lazy names

_FAMILY_NAMES: Final[Mapping[str, tuple[str, ...]]] = {
    module: tuple(names.split())
    for module, names in {
        "results": "Cost ErrorInfo Executed Execution Skipped SuppliedResult Usage",
        "tool": (
            "Batch Connection ConnectionGap ExtensionConnection HttpConnection Mcp McpServer "
            "SseConnection StdioConnection Tool ToolBefore"
        ),
        "tool_lifecycle": (
            "BatchCall FileChange ToolAfter ToolBatchAfter ToolPermissionRequest "
            "ToolPermissionResolved ToolProgress"
        ),
        "session": "SessionEnd SessionStart",
        "turn": "TurnEnd TurnFinishBefore TurnOutcome TurnProgress TurnStart TurnUsage",
        "model": (
            "Attempt AttemptUsage ModelError ModelRef ModelRequestBefore ModelResponseAfter "
            "ModelSwitchAfter ModelSwitchBefore Pricing"
        ),
        "context": "ContextCompactAfter ContextCompactBefore TokenCounts",
        "config": "AppliedConfigChange ConfigChange ConfigChangeAfter ConfigChangeBefore",
        "task": "Task TaskChangeAfter TaskChangeBefore",
        "workspace": "Workspace WorkspaceChange WorkspaceChangeAfter WorkspaceChangeBefore",
        "file": "ChangedFile FileChanged",
        "user": (
            "Attention ElicitationRequest ElicitationResult InboundMessage OutboundMessage "
            "UserAttention UserElicitationRequest UserElicitationResult UserMessageInbound "
            "UserMessageOutbound"
        ),
        "hook": "Failure HookFailure",
    }.items()
}
"""The public names each submodule defines, beyond the envelope's (imported above)."""

_HOME: Final[Mapping[str, str]] = {
    name: module for module, names in _FAMILY_NAMES.items() for name in names
}

__all__ = sorted(  # every name below, the families' (lazy) and the envelope's
    [*_HOME, *_ENVELOPE, "EVENT_MODELS", "UnsupportedEvent", "parse_event"]
)


def _submodule(module: str) -> ModuleType:
    """The family module ``module``, imported on first use."""
    return __import__(f"{__name__}.{module}", fromlist=("_",))


if not TYPE_CHECKING:  # type checkers see the imports above instead

    def __getattr__(name: str) -> Any:
        """A family name, importing its module on first access (then a plain global)."""
        module = _HOME.get(name)
        if module is None:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        value = getattr(_submodule(module), name)
        globals()[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted({*globals(), *__all__})


# --------------------------------------------------------------------------- catalogue


class _EventModels(Mapping[str, type[Event]]):
    """:data:`EVENT_MODELS`: a read-only mapping that imports a family module on lookup.

    ``len``, iteration and ``in`` import nothing; ``models[name]`` (and ``get``)
    imports only that event's family module; ``items()``/``values()`` import
    every family they reach. Iterates in the order of ``homes``.
    """

    __slots__ = ("_homes", "_models")

    def __init__(self, homes: dict[str, tuple[str, str]]) -> None:
        self._homes = homes
        self._models: dict[str, type[Event]] = {}

    def __getitem__(self, name: str) -> type[Event]:
        model = self._models.get(name)
        if model is None:
            module, cls = self._homes[name]  # KeyError for a name that is no event
            model = self._models[name] = getattr(_submodule(module), cls)
        return model

    def __contains__(self, name: object) -> bool:
        return name in self._homes

    def __iter__(self) -> Iterator[str]:
        return iter(self._homes)

    def __len__(self) -> int:
        return len(self._homes)

    def __repr__(self) -> str:
        return f"<EVENT_MODELS: {len(self)} events>"


EVENT_MODELS: Final[Mapping[str, type[Event]]] = _EventModels(
    {  # each event's model is its name in CamelCase: tool.before -> ToolBefore
        name: (_HOME[cls], cls)
        for name in EVENT_TYPES
        for cls in ["".join(word.capitalize() for word in name.split("."))]
    }
)
"""One model per standard event, by wire name (all 32 of the catalogue).

Read-only; a model's family module is imported on first lookup (see :class:`_EventModels`)."""


class UnsupportedEvent(WireError):
    """The event's ``type`` is missing, unknown or a removed name (JSON-RPC -32002).

    Distinct from a shape error: the event may be well formed for a type this
    draft does not define.
    """


def parse_event(obj: object) -> Event:
    """The event model for ``obj``, validated strictly.

    Raises :class:`UnsupportedEvent` when ``type`` names no standard event,
    and :class:`WireErrors` (paths relative to the event) for anything else.
    """
    if not isinstance(obj, (dict, Mapping)):  # dict first: a cheap exact test
        raise WireErrors([WireError("$", "an event must be a JSON object")])
    if "type" not in obj:
        raise UnsupportedEvent("$", "type is required")
    name = obj["type"]
    if not isinstance(name, str):
        raise UnsupportedEvent("type", "must be a string naming a standard event")
    if name in REMOVED:
        raise UnsupportedEvent(
            "type", f'"{name}" was removed from the draft; it is not a standard event'
        )
    if name not in EVENT_MODELS:
        raise UnsupportedEvent("type", "is not a standard event type")
    data = obj if type(obj) is dict else dict(obj)
    try:
        event: Event = _event_validator(name)(data)
    except ValidationError as exc:
        raise to_wire_errors(exc) from None
    # The open objects with renamed fields: the envelope and ``session`` (a test
    # checks that no other open object has any).
    if event.__pydantic_extra__:
        unknown_stay_unknown(event, data)
    session = event.session
    if session is not None and session.__pydantic_extra__:
        unknown_stay_unknown(session, data["session"])
    return event


_VALIDATORS: Final[dict[str, Callable[[dict[str, Any]], Any]]] = {}


def _event_validator(name: str) -> Callable[[dict[str, Any]], Any]:
    """The check :func:`parse_event` runs once it has picked the model, as one callable.

    ``_event_validator(name)(event_dict)`` raises pydantic's ``ValidationError`` where
    :func:`parse_event` raises :class:`~ahp_protocol.wire.errors.WireErrors`, and the
    model it returns still counts an unknown Python-spelled key as its field given: for
    callers that only need the verdict. ``KeyError`` for a name that is no standard event.
    """
    if name not in _VALIDATORS:
        # Reading ``validate_python`` builds a deferred model, so the real method is bound.
        validate = EVENT_MODELS[name].__pydantic_validator__.validate_python
        _VALIDATORS[name] = partial(
            validate, strict=True, by_alias=True, by_name=False, context=WIRE_CONTEXT
        )
    return _VALIDATORS[name]

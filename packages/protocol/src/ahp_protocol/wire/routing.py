"""Which subscriptions receive an event, and which failure policy governs them.

The one home of two dispatch rules, used by the client dispatcher, the registration
models' ``matching`` and the adapters' fallback when no chain can run:

- **Subscription matching** (AHP-REG-002, §9): :func:`routes`. An event reaches a
  subscription only in the subscription's own mode, when a selector covers it; an
  observe-only event is never intercepted, whatever the wildcard says.
- **Failure policy** (AHP-FAIL-001, §6.3): :func:`failure_policy`. A mandatory
  subscription (``scope: "managed"`` or ``disableable: false``) is fail-closed whatever
  it declares.

:func:`strictest_policy` applies both to a plain registration document, for callers that
must decide without a chain; whatever it cannot read counts as fail-closed.

Never validates a document (:mod:`~ahp_protocol.wire.registration` does) or does I/O.
Standard library only (it imports only :mod:`~ahp_protocol.wire.catalogue`), so the
adapters' hook path can import it without pydantic.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Literal, get_args

from .catalogue import INTERCEPTABLE_SET, Mode, selector_matches

__all__ = ["Policy", "Scope", "failure_policy", "routes", "strictest_policy"]

Policy = Literal["fail-open", "fail-closed"]
Scope = Literal["managed", "project", "user"]

_MODES = get_args(Mode)
_POLICIES = get_args(Policy)
_SCOPES = get_args(Scope)


def failure_policy(
    failure_policy: object, *, scope: object = None, disableable: object = None
) -> Policy:
    """fail-closed when declared, or when the subscription is mandatory (``scope``
    ``"managed"`` or ``disableable`` ``False``); else fail-open. Takes the values as they
    stand on a subscription (``None`` for an observe subscription's policy)."""
    if failure_policy == "fail-closed" or scope == "managed" or disableable is False:
        return "fail-closed"
    return "fail-open"


def routes(events: Iterable[str], subscription_mode: str, event_type: str, mode: str) -> bool:
    """Whether a subscription (its selectors and its mode) receives ``event_type`` in ``mode``.

    True when the modes are equal, some selector covers the event
    (:func:`~ahp_protocol.wire.catalogue.selector_matches`), and, for intercept, the event
    is interceptable. Another ``mode`` routes nothing; a non-string selector covers nothing.
    """
    if subscription_mode != mode or mode not in _MODES:
        return False
    if mode == "intercept" and event_type not in INTERCEPTABLE_SET:
        return False  # an intercept wildcard expands only to interceptable events
    return any(isinstance(s, str) and selector_matches(s, event_type) for s in events)


def strictest_policy(
    document: object, event_type: str = "tool.before"
) -> Literal["none", "fail-open", "fail-closed"]:
    """The strictest policy among the interceptors of ``event_type`` in a plain document.

    ``"none"`` when no subscription intercepts it (always so for an observe-only event).
    Fail-closed, at once, when the document is not an object with a ``hooks`` list, a
    backend is not an object or has no ``subscriptions`` list (absent: they come from
    ``hooks/configuration``), or a subscription cannot be read: not an object, neither
    mode, ``events`` not a list of strings, or (intercepting the event) a
    ``failurePolicy``, ``scope`` or ``disableable`` the draft does not allow.
    """
    if event_type not in INTERCEPTABLE_SET:
        return "none"
    if not isinstance(document, Mapping):
        return "fail-closed"
    hooks = document.get("hooks")
    if not isinstance(hooks, list):
        return "fail-closed"
    found: Literal["none", "fail-open", "fail-closed"] = "none"
    for hook in hooks:
        if not isinstance(hook, Mapping):
            return "fail-closed"
        subscriptions = hook.get("subscriptions")
        if not isinstance(subscriptions, list):
            return "fail-closed"  # absent: discovered at start-up, its policy unknown here
        for sub in subscriptions:
            if not isinstance(sub, Mapping):
                return "fail-closed"
            mode = sub.get("mode")
            if mode == "observe":
                continue
            events = sub.get("events")
            if (
                mode != "intercept"
                or not isinstance(events, list)
                or not all(isinstance(e, str) for e in events)
            ):
                return "fail-closed"
            if not routes(events, mode, event_type, "intercept"):
                continue
            declared = sub.get("failurePolicy")
            scope = sub.get("scope")
            disableable = sub.get("disableable")
            if (
                declared not in _POLICIES
                or (scope is not None and scope not in _SCOPES)
                or (disableable is not None and not isinstance(disableable, bool))
            ):
                return "fail-closed"
            if failure_policy(declared, scope=scope, disableable=disableable) == "fail-closed":
                return "fail-closed"
            found = "fail-open"
    return found

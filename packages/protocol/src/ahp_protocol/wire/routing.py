"""Which subscriptions receive an event, and which failure policy governs them.

The one home of two dispatch rules of the draft, used by everything that
dispatches or has to predict a dispatch (the client dispatcher, the registration
models' ``matching``, the adapters' fallback when no chain can run):

- **Subscription matching** (AHP-REG-002, §9 "Dispatch"): an event reaches a
  subscription only when the subscription's ``mode`` is the method's mode
  (``hooks/intercept`` <-> ``intercept``, ``hooks/observe`` <-> ``observe``) and
  one of its selectors covers the event type (exact name, ``family.*`` or ``*``:
  :func:`ahp_protocol.wire.catalogue.selector_matches`). An intercept selector
  expands only to interceptable events, so an observe-only event (``tool.progress``,
  ``hook.failure``, …) is never intercepted, whatever the wildcard says.
  :func:`routes`.
- **Failure policy** (AHP-FAIL-001, §6.3): an intercept subscription's declared
  ``failurePolicy`` applies to its operational failures, except that a mandatory
  subscription (``scope: "managed"``, or ``disableable: false``) is fail-closed
  whatever it declares. :func:`failure_policy`.

:func:`strictest_policy` applies both to a plain registration document (JSON
values, not models) for callers that must decide *without* a chain: the strictest
policy among the interceptors of one event. It is conservative: whatever it cannot
read, and a backend whose subscriptions come from ``hooks/configuration`` (so are
not in the document), count as fail-closed, since nothing shows they may fail open.

Never does: I/O, validation of a document (that is :mod:`~ahp_protocol.wire.registration`;
these functions accept what they are given and answer conservatively), content
selection, or handler choice inside a backend (the server kit's own rule).
Standard library only (it imports :mod:`~ahp_protocol.wire.catalogue` and nothing
else of ours), so the adapters' hook path can import it without pydantic.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Literal

from .catalogue import INTERCEPTABLE_SET, selector_matches

__all__ = ["Policy", "failure_policy", "routes", "strictest_policy"]

Policy = Literal["fail-open", "fail-closed"]

_MODES = ("intercept", "observe")
_POLICIES = ("fail-open", "fail-closed")
_SCOPES = ("managed", "project", "user")


def failure_policy(
    failure_policy: object, *, scope: object = None, disableable: object = None
) -> Policy:
    """fail-closed when declared, or when the subscription is mandatory; else fail-open.

    Mandatory means ``scope`` ``"managed"`` or ``disableable`` ``False`` (draft §6.3:
    fail-closed whatever the subscription declares). Takes the values as they stand
    on a subscription (``failure_policy`` is ``None`` for an observe subscription,
    which declares none).
    """
    if failure_policy == "fail-closed" or scope == "managed" or disableable is False:
        return "fail-closed"
    return "fail-open"


def routes(events: Iterable[str], subscription_mode: str, event_type: str, mode: str) -> bool:
    """Whether a subscription (its selectors and its mode) receives ``event_type`` in ``mode``.

    True when the modes are equal, some selector covers the event
    (:func:`~ahp_protocol.wire.catalogue.selector_matches`), and, for intercept,
    the event is interceptable.

    A ``mode`` other than ``"intercept"`` or ``"observe"`` routes nothing; a selector
    that is not a string covers nothing.
    """
    if subscription_mode != mode or mode not in _MODES:
        return False
    if mode == "intercept" and event_type not in INTERCEPTABLE_SET:
        return False  # an intercept wildcard expands only to interceptable events
    return any(isinstance(s, str) and selector_matches(s, event_type) for s in events)


def strictest_policy(
    document: object, event_type: str = "tool.before"
) -> Literal["none", "fail-open", "fail-closed"]:
    """On a plain registration document (dicts): the strictest policy among interceptors.

    The interceptors of ``event_type``; conservative: unreadable or discovered
    subscriptions count as fail-closed.

    ``"none"`` when no subscription intercepts ``event_type`` (always so for an
    event that cannot be intercepted). Fail-closed, at once, when the document is
    not an object with a ``hooks`` list, a backend is not an object, a backend has
    no ``subscriptions`` (they come from ``hooks/configuration``) or they are not a
    list, or a subscription cannot be read: not an object, a ``mode`` that is
    neither mode, ``events`` that is not a list of strings, or (for one that
    intercepts the event) a ``failurePolicy``, ``scope`` or ``disableable`` that is
    not a value the draft allows. An observe subscription is never an interceptor.
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

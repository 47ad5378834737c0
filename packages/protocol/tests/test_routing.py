"""``wire.routing``: subscription matching and failure policy, the one copy of each rule.

Table tests of :func:`failure_policy`, :func:`routes` (every selector form, every
standard event, both modes, against the catalogue's own expansion) and
:func:`strictest_policy` (valid documents and documents malformed in each way); a
differential test that the plain-document reading agrees with the validated models;
and a check, in a fresh interpreter, that the module stays standard-library only.
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from typing import Any, Literal

import pytest
from ahp_protocol.wire import catalogue
from ahp_protocol.wire.registration import (
    Configuration,
    InterceptSubscription,
    ObserveSubscription,
    Registration,
    parse_registration,
)
from ahp_protocol.wire.routing import failure_policy, routes, strictest_policy
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

Doc = dict[str, Any]
Strictest = Literal["none", "fail-open", "fail-closed"]

FAMILIES = sorted({e.split(".")[0] + ".*" for e in catalogue.EVENT_TYPES})
SELECTORS = ["*", *FAMILIES, *catalogue.EVENT_TYPES]
"""Every selector form: the star, each family wildcard, each exact name."""

CONTENT = {"default": "metadata"}


def intercept(events: list[Any], policy: Any = "fail-open", **extra: Any) -> Doc:
    return {
        "events": events,
        "mode": "intercept",
        "timeoutMs": 100,
        "failurePolicy": policy,
        "content": CONTENT,
        **extra,
    }


def observe(events: list[Any], **extra: Any) -> Doc:
    return {"events": events, "mode": "observe", "content": CONTENT, **extra}


def hook(*subscriptions: Doc, ident: str = "com.example.a") -> Doc:
    transport = {"type": "stdio", "command": "backend", "lifecycle": "persistent"}
    out: Doc = {"id": ident, "transport": transport}
    if subscriptions:
        out["subscriptions"] = list(subscriptions)
    return out


def registration(*hooks: Doc) -> Doc:
    return {"protocolVersion": "draft", "hooks": list(hooks)}


# -- failure_policy ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("declared", "scope", "disableable", "expected"),
    [
        ("fail-open", None, None, "fail-open"),
        ("fail-closed", None, None, "fail-closed"),
        # Mandatory subscriptions are fail-closed whatever they declare (draft §6.3).
        ("fail-open", "managed", False, "fail-closed"),
        ("fail-open", "managed", None, "fail-closed"),
        ("fail-open", None, False, "fail-closed"),
        ("fail-open", "user", False, "fail-closed"),
        ("fail-open", "project", True, "fail-open"),
        ("fail-open", "user", None, "fail-open"),
        ("fail-closed", "user", True, "fail-closed"),
        # An observe subscription declares no policy: fail-open unless mandatory.
        (None, None, None, "fail-open"),
        (None, "managed", False, "fail-closed"),
        # Only the boolean False is "not disableable"; a falsy value is not.
        ("fail-open", None, 0, "fail-open"),
        ("fail-open", None, "", "fail-open"),
    ],
)
def test_failure_policy(declared: Any, scope: Any, disableable: Any, expected: str) -> None:
    assert failure_policy(declared, scope=scope, disableable=disableable) == expected


def test_failure_policy_of_the_models() -> None:
    managed = InterceptSubscription.model_validate(
        intercept(["tool.before"], "fail-open", scope="managed", disableable=False)
    )
    plain = InterceptSubscription.model_validate(intercept(["tool.before"], "fail-open"))
    watcher = ObserveSubscription.model_validate(observe(["*"], disableable=False))
    assert failure_policy(plain.failure_policy, scope=plain.scope) == "fail-open"
    assert (
        failure_policy(managed.failure_policy, scope=managed.scope, disableable=managed.disableable)
        == "fail-closed"
    )
    assert failure_policy(None, scope=watcher.scope, disableable=watcher.disableable) == (
        "fail-closed"
    )


# -- routes ------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["intercept", "observe"])
@pytest.mark.parametrize("selector", SELECTORS)
def test_routes_agrees_with_the_catalogue_for_every_selector_and_event(
    selector: str, mode: Literal["intercept", "observe"]
) -> None:
    covered = set(catalogue.expand(selector, mode))
    for event_type in catalogue.EVENT_TYPES:
        assert routes([selector], mode, event_type, mode) == (event_type in covered), event_type


@pytest.mark.parametrize(
    ("events", "sub_mode", "event_type", "mode", "expected"),
    [
        (["tool.before"], "intercept", "tool.before", "intercept", True),
        (["tool.*"], "intercept", "tool.after", "intercept", True),
        (["*"], "intercept", "model.request.before", "intercept", True),
        (["session.start", "tool.before"], "intercept", "tool.before", "intercept", True),
        # Modes must be equal: an intercept subscription is never observed, and back.
        (["tool.before"], "intercept", "tool.before", "observe", False),
        (["tool.before"], "observe", "tool.before", "intercept", False),
        # An observe-only event is never intercepted, whatever the selector says.
        (["tool.*"], "intercept", "tool.progress", "intercept", False),
        (["*"], "intercept", "hook.failure", "intercept", False),
        (["tool.permission.resolved"], "intercept", "tool.permission.resolved", "intercept", False),
        # ... and is observed as usual.
        (["tool.*"], "observe", "tool.progress", "observe", True),
        (["*"], "observe", "hook.failure", "observe", True),
        # A family wildcard covers its first segment only, not a prefix of it.
        (["tool.*"], "observe", "toolbox.opened", "observe", False),
        (["tool.*"], "observe", "model.error", "observe", False),
        (["tool.before"], "intercept", "tool.after", "intercept", False),
        # Observe routes an event type outside the standard list by selector.
        (["*"], "observe", "com.example.custom", "observe", True),
        (["*"], "intercept", "com.example.custom", "intercept", False),
        # Nothing, or nonsense, routes nothing.
        ([], "intercept", "tool.before", "intercept", False),
        ([], "observe", "tool.before", "observe", False),
        ([None, 3], "observe", "tool.before", "observe", False),
        (["*"], "both", "tool.before", "both", False),
        (["*"], "Intercept", "tool.before", "Intercept", False),
    ],
)
def test_routes(
    events: list[Any], sub_mode: str, event_type: str, mode: str, expected: bool
) -> None:
    assert routes(events, sub_mode, event_type, mode) is expected


def test_routes_takes_any_iterable_of_selectors() -> None:
    assert routes(iter(["session.*", "tool.*"]), "intercept", "tool.before", "intercept")
    assert routes(("tool.before",), "intercept", "tool.before", "intercept")


def test_the_models_match_through_routes() -> None:
    """``Subscription.matches`` is routing in the subscription's own mode."""
    wildcard = InterceptSubscription.model_validate(intercept(["tool.*"]))
    assert wildcard.matches("tool.before")
    assert not wildcard.matches("tool.progress")  # observe-only: never intercepted
    watcher = ObserveSubscription.model_validate(observe(["tool.*"]))
    assert watcher.matches("tool.progress")
    configuration = Configuration.model_validate(
        {"subscriptions": [intercept(["*"]), observe(["tool.*"])]}
    )
    assert [i for i, _ in configuration.matching("tool.progress", "observe")] == [1]
    assert configuration.matching("tool.progress", "intercept") == []


# -- strictest_policy: tables ------------------------------------------------------


@pytest.mark.parametrize(
    ("document", "expected"),
    [
        (registration(hook(intercept(["tool.before"], "fail-open"))), "fail-open"),
        (registration(hook(intercept(["tool.*"], "fail-closed"))), "fail-closed"),
        (registration(hook(intercept(["*"], "fail-open"))), "fail-open"),
        (registration(hook(intercept(["*"], "fail-open", scope="managed"))), "fail-closed"),
        (registration(hook(intercept(["*"], "fail-open", disableable=False))), "fail-closed"),
        (registration(hook(intercept(["*"], "fail-open", scope="user"))), "fail-open"),
        # Not an interceptor of tool.before: other events, observers.
        (registration(hook(intercept(["session.start"], "fail-closed"))), "none"),
        (registration(hook(observe(["*"], scope="managed", disableable=False))), "none"),
        (registration(hook(observe(["tool.before"]))), "none"),
        # The strictest of several, across backends and within one.
        (
            registration(
                hook(intercept(["tool.before"], "fail-open"), ident="com.example.a"),
                hook(intercept(["tool.*"], "fail-closed"), ident="com.example.b"),
            ),
            "fail-closed",
        ),
        (
            registration(
                hook(
                    intercept(["tool.before"], "fail-open"),
                    intercept(["session.start"], "fail-closed"),
                )
            ),
            "fail-open",
        ),
        # Discovered subscriptions (hooks/configuration) are unknown here: fail-closed.
        (registration(hook()), "fail-closed"),
        (
            registration(hook(intercept(["tool.before"])), hook(ident="com.example.b")),
            "fail-closed",
        ),
        # An empty hooks list names no interceptor.
        ({"hooks": []}, "none"),
    ],
)
def test_strictest_policy(document: Doc, expected: str) -> None:
    assert strictest_policy(document) == expected


MALFORMED: list[tuple[str, Any]] = [
    ("not an object", "not a registration"),
    ("a list", [registration(hook(intercept(["tool.before"])))]),
    ("no hooks", {"protocolVersion": "draft"}),
    ("hooks not a list", {"hooks": {"a": 1}}),
    ("a backend not an object", {"hooks": ["com.example.a"]}),
    ("subscriptions null", {"hooks": [{"id": "a", "subscriptions": None}]}),
    ("subscriptions not a list", {"hooks": [{"id": "a", "subscriptions": {"mode": "x"}}]}),
    ("a subscription not an object", registration(hook(intercept(["tool.before"]), "x"))),  # type: ignore[arg-type]
    ("a subscription without mode", registration(hook({"events": ["tool.before"]}))),
    ("an unknown mode", registration(hook({**intercept(["session.start"]), "mode": "both"}))),
    ("events not a list", registration(hook(intercept("tool.before")))),  # type: ignore[arg-type]
    ("events missing", registration(hook({"mode": "intercept", "failurePolicy": "fail-open"}))),
    ("a selector not a string", registration(hook(intercept([["tool.before"]])))),
    ("no failurePolicy", registration(hook({**intercept(["tool.before"]), "failurePolicy": None}))),
    ("an unknown failurePolicy", registration(hook(intercept(["tool.*"], "fail-soft")))),
    ("an unknown scope", registration(hook(intercept(["*"], scope="global")))),
    ("disableable not a boolean", registration(hook(intercept(["*"], disableable="false")))),
]


@pytest.mark.parametrize(("what", "document"), MALFORMED, ids=[m[0] for m in MALFORMED])
def test_strictest_policy_of_a_malformed_document_is_fail_closed(what: str, document: Any) -> None:
    assert strictest_policy(document) == "fail-closed", what


def test_a_policy_problem_outside_the_event_does_not_count() -> None:
    """Only the interceptors of the event decide; an unreadable policy elsewhere does not."""
    doc = registration(
        hook(intercept(["session.start"], "fail-soft"), intercept(["tool.before"], "fail-open"))
    )
    assert strictest_policy(doc) == "fail-open"
    assert strictest_policy(doc, "session.start") == "fail-closed"


def test_strictest_policy_of_other_events() -> None:
    doc = registration(
        hook(intercept(["session.*"], "fail-closed"), intercept(["tool.before"], "fail-open"))
    )
    assert strictest_policy(doc, "session.start") == "fail-closed"
    assert strictest_policy(doc, "tool.before") == "fail-open"
    assert strictest_policy(doc, "tool.after") == "none"
    # An observe-only event has no interceptors, even when the document is unreadable.
    assert strictest_policy(
        registration(hook(intercept(["*"], "fail-closed"))), "tool.progress"
    ) == ("none")
    assert strictest_policy("garbage", "hook.failure") == "none"


# -- strictest_policy: against the validated models --------------------------------


def _intercept_selectors() -> list[str]:
    return [s for s in SELECTORS if catalogue.expand(s, "intercept")]


@st.composite
def subscriptions(draw: st.DrawFn) -> Doc:
    mode = draw(st.sampled_from(["intercept", "observe"]))
    pool = _intercept_selectors() if mode == "intercept" else SELECTORS
    events = draw(st.lists(st.sampled_from(pool), min_size=1, max_size=3, unique=True))
    extra: Doc = {}
    scope = draw(st.sampled_from([None, "managed", "project", "user"]))
    if scope is not None:
        extra["scope"] = scope
    if scope == "managed":
        extra["disableable"] = False
    else:
        disableable = draw(st.sampled_from([None, True, False]))
        if disableable is not None:
            extra["disableable"] = disableable
    if mode == "observe":
        return observe(events, **extra)
    return intercept(events, draw(st.sampled_from(["fail-open", "fail-closed"])), **extra)


@st.composite
def documents(draw: st.DrawFn) -> Doc:
    count = draw(st.integers(min_value=1, max_value=4))
    hooks = []
    for index in range(count):
        discovered = draw(st.booleans()) and draw(st.booleans())  # about one in four
        subs = [] if discovered else draw(st.lists(subscriptions(), min_size=1, max_size=4))
        hooks.append(hook(*subs, ident=f"com.example.b{index}"))
    return registration(*hooks)


def _model_policy(document: Doc, event_type: str) -> Strictest:
    """The oracle: validated models, the catalogue's expansion, and ``failure_policy``."""
    validated = Registration.model_validate(document)
    assert validated == parse_registration(document)
    if not catalogue.is_interceptable(event_type):
        return "none"  # nothing intercepts it, discovered or not
    policies: set[Strictest] = set()
    for backend in validated.hooks:
        if backend.subscriptions is None:
            policies.add("fail-closed")  # discovered: unknown until start-up
            continue
        for sub in backend.subscriptions:
            if isinstance(sub, InterceptSubscription) and any(
                event_type in catalogue.expand(s, "intercept") for s in sub.events
            ):
                policies.add(
                    failure_policy(sub.failure_policy, scope=sub.scope, disableable=sub.disableable)
                )
    if "fail-closed" in policies:
        return "fail-closed"
    return "fail-open" if "fail-open" in policies else "none"


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(documents(), st.sampled_from(catalogue.EVENT_TYPES))
def test_strictest_policy_agrees_with_the_models(document: Doc, event_type: str) -> None:
    before = copy.deepcopy(document)
    assert strictest_policy(document, event_type) == _model_policy(document, event_type)
    assert document == before  # read, never changed


@settings(max_examples=100, deadline=None)
@given(documents())
def test_strictest_policy_reads_json_as_loaded(document: Doc) -> None:
    """What a caller reads from a file (a JSON round trip) gives the same answer."""
    assert strictest_policy(json.loads(json.dumps(document))) == strictest_policy(document)


# -- standard library only ---------------------------------------------------------


def test_routing_and_kinds_import_without_pydantic() -> None:
    code = (
        "import sys\n"
        "import ahp_protocol.wire.routing, ahp_protocol.wire.kinds\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('pydantic', 'pydantic_core', 'anyio', 'httpx')))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=30, check=True
    )
    assert json.loads(done.stdout.replace("'", '"')) == []

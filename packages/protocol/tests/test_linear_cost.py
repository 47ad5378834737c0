"""No request costs more than linear time (issue 12, item 3).

Every list-valued field a backend or the wire validators judge is fed at ``n`` and at
``16 n`` entries in one run, and the cost of the larger must stay within ``RATIO``
times the smaller: linear work gives about 16 (a little more as data outgrows the
caches), quadratic work about 256. Costs are the best of a few runs with the garbage
collector paused; a measurement over the bound is repeated before it fails, so a noisy
machine cannot fail a linear step, while a quadratic one fails every time. Never an
absolute time.

The server kit is measured through ``Backend.handle_sync`` with a fresh backend for
each run (its memo of grant verdicts must not hide the cost); the wire validators are
called directly, as the harness calls them on what backends and users send.

Also here: the limits checked before the work (``MAX_EFFECT_NAMES`` effect names,
``MAX_NESTING`` levels of nesting) give clean JSON-RPC errors, never a
``RecursionError`` or an internal error, and the nesting limit is the one the fast
decoder applies, so the same frames are accepted on every path.
"""

from __future__ import annotations

import gc
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from ahp_protocol.server import Backend, InterceptRequest
from ahp_protocol.server import backend as kit
from ahp_protocol.server._codec import too_deep
from ahp_protocol.wire.capabilities import parse_capabilities
from ahp_protocol.wire.content import project_event
from ahp_protocol.wire.effects import check_effects
from ahp_protocol.wire.errors import WireErrors
from ahp_protocol.wire.jsonrpc import decode
from ahp_protocol.wire.manifest import parse_manifest
from ahp_protocol.wire.registration import parse_configuration, parse_registration
from ahp_protocol.wire.state import parse_state

sys.path.insert(0, str(Path(__file__).parent / "backends"))
from kit_messages import intercept, tool_before

RATIO = 64.0
"""Allowed cost(16 n) / cost(n): linear is about 16, quadratic about 256."""
RUNS = 3
ATTEMPTS = 3


def _cost(work: Callable[[], object]) -> float:
    """The best of ``RUNS`` in CPU time: other processes on a busy machine (a parallel
    test run) stretch wall time, not this process's own work."""
    best = float("inf")
    for _ in range(RUNS):
        start = time.process_time()
        work()
        best = min(best, time.process_time() - start)
    return best


def _assert_linear(make: Callable[[int], Callable[[], object]], n: int) -> None:
    small, large = make(n), make(16 * n)
    small()  # warm up (first use builds models and imports)
    ratios = []
    # One collection, then none while measuring: in a long test session the heap is
    # large, and a full collection per run would cost more than the work measured.
    gc.collect()
    gc.disable()
    try:
        for _ in range(ATTEMPTS):
            ratio = _cost(large) / max(_cost(small), 1e-6)
            if ratio <= RATIO:
                return
            ratios.append(round(ratio, 1))
    finally:
        gc.enable()
    raise AssertionError(f"cost grew {ratios} times for 16 times the entries (n={n})")


# --------------------------------------------------------------------------- the server kit


def _request(n: int, field: str) -> bytes:
    event = tool_before("evt_1")
    params: dict[str, Any] = {}
    capabilities: dict[str, Any] = {"effects": ["deny"]}
    ids = range(n)
    if field == "capabilities.effects":
        capabilities = {"effects": ["deny", *(f"com.example.e{i}" for i in ids)]}
    elif field == "capabilities.effects (repeated)":
        capabilities = {"effects": ["deny"] * n}
    elif field == "capabilities.flow.operations":
        capabilities = {"effects": ["deny", "flow"], "flow": {"operations": ["stop"] * n}}
    elif field == "capabilities.inject.context.deliverAt":
        deliver = ["next_model_request"] * n
        capabilities = {
            "effects": ["deny", "inject"],
            "inject": {"context": {"append": True, "deliverAt": deliver}},
        }
    elif field == "capabilities.modify":
        targets = {f"com.example.t{i}": {"replace": True, "merge": False} for i in ids}
        capabilities = {"effects": ["deny", "modify"], "modify": targets}
    elif field == "capabilities (unknown field)":
        capabilities = {"effects": ["deny"], "com.example.x": [f"v{i}" for i in ids]}
    elif field == "state.instructions":
        params["state"] = {
            "permission": "none",
            "candidate": None,
            "instructions": [f"i{i}" for i in ids],
        }
    elif field == "state.injections":
        inject = {"type": "inject", "kind": "context", "deliverAt": "next_model_request"}
        params["state"] = {
            "permission": "none",
            "candidate": None,
            "injections": [{**inject, "text": f"t{i}"} for i in ids],
        }
    elif field == "state (unknown field)":
        params["state"] = {"permission": "none", "candidate": None, "x": list(ids)}
    elif field == "event.tool.input (array)":
        event["tool"]["input"] = {"command": "ls", "args": [f"a{i}" for i in ids]}
    elif field == "event.tool.input (keys)":
        event["tool"]["input"] = {"command": "ls", **{f"k{i}": i for i in ids}}
    elif field == "event.batch.callIds":
        event["batch"] = {"id": "batch_1", "callIds": [f"call_{i}" for i in ids]}
    elif field == "event.batch.callIds (repeated)":
        event["batch"] = {"id": "batch_1", "callIds": ["call_1"] * n}
    elif field == "event.items":
        event["items"] = [
            {"id": f"p{i}", "kind": "text", "mediaType": "text/plain", "selection": "body"}
            | {"text": "x"}
            for i in ids
        ]
    elif field == "event.gaps":
        event["gaps"] = [{"path": f"a{i}", "reason": "unknown"} for i in ids]
    elif field == "event.extensions":
        event["extensions"] = {f"com.example.k{i}": i for i in ids}
    elif field == "event.session.workspaceRoots":
        event["session"]["workspaceRoots"] = [f"/r{i}" for i in ids]
    else:  # pragma: no cover - a typo in the table
        raise AssertionError(field)
    message = intercept(event, **params)
    message["params"]["capabilities"] = capabilities
    return json.dumps(message).encode()


KIT_FIELDS = [
    "capabilities.effects",
    "capabilities.effects (repeated)",
    "capabilities.flow.operations",
    "capabilities.inject.context.deliverAt",
    "capabilities.modify",
    "capabilities (unknown field)",
    "state.instructions",
    "state.injections",
    "state (unknown field)",
    "event.tool.input (array)",
    "event.tool.input (keys)",
    "event.batch.callIds",
    "event.batch.callIds (repeated)",
    "event.items",
    "event.gaps",
    "event.extensions",
    "event.session.workspaceRoots",
]


def _handler(request: InterceptRequest) -> None:
    return None


def _kit(field: str) -> Callable[[int], Callable[[], object]]:
    def make(n: int) -> Callable[[], object]:
        frame = _request(n, field)

        def answer() -> object:
            backend = Backend("com.example.linear")
            backend.intercept("tool.before")(_handler)
            reply = backend.handle_sync(frame)
            assert reply is not None and b'"id":"evt_1"' in reply
            return reply

        return answer

    return make


@pytest.mark.parametrize("field", KIT_FIELDS)
def test_the_kit_judges_every_list_in_linear_time(field: str) -> None:
    _assert_linear(_kit(field), 1000)


def test_too_many_effect_names_is_refused_before_any_other_work() -> None:
    backend = Backend("com.example.linear")
    backend.intercept("tool.before")(_handler)

    def reason(effects: list[str]) -> str:
        message = intercept(tool_before("evt_1"), effects)
        answer = json.loads(backend.handle_sync(json.dumps(message).encode()) or b"")
        assert answer["error"]["code"] == -32602
        return str(answer["error"]["data"]["reason"])

    names = ["deny", *(f"com.example.e{i}" for i in range(kit.MAX_EFFECT_NAMES))]
    assert reason(names) == (
        f"params.capabilities.effects names more than {kit.MAX_EFFECT_NAMES} effects"
    )
    # At the limit the grant is judged (extension effects are not allowed at tool.before).
    assert reason(names[: kit.MAX_EFFECT_NAMES]) == (
        "params.capabilities is not a valid grant at this event"
    )
    # Even a list of non-strings is refused by its length first.
    assert "more than" in reason([1] * (kit.MAX_EFFECT_NAMES + 1))  # type: ignore[list-item]


# --------------------------------------------------------------------------- nesting


def _nested(depth: int, kind: str) -> str:
    if kind == "arrays":
        return "[" * depth + "]" * depth
    if kind == "objects with a value":
        return '{"a":' * depth + "1" + "}" * depth
    return "[" * depth + '"x"' + "]" * depth  # arrays with a value


PLACES = ["event.tool.input", "capabilities", "state", "event.extensions", "envelope"]


def _deep_frame(place: str, nested: str) -> bytes:
    event = tool_before("evt_1")
    message = intercept(event)
    marker = "__NESTED__"
    if place == "event.tool.input":
        event["tool"]["input"]["deep"] = marker
    elif place == "capabilities":
        message["params"]["capabilities"]["com.example.x"] = marker
    elif place == "state":
        message["params"]["state"] = {"permission": "none", "candidate": None, "x": marker}
    elif place == "event.extensions":
        event["extensions"] = {"com.example.x": marker}
    else:
        message["com.example.x"] = marker
    return json.dumps(message).replace(f'"{marker}"', nested).encode()


@pytest.mark.parametrize("place", PLACES)
@pytest.mark.parametrize("depth", [250, 500, 900, 5000, 100_000])
def test_a_deeply_nested_frame_is_a_clean_parse_error(place: str, depth: int) -> None:
    backend = Backend("com.example.deep")
    backend.intercept("tool.before")(_handler)
    for kind in ("arrays", "objects with a value"):
        frame = _deep_frame(place, _nested(depth, kind))
        answer = json.loads(backend.handle_sync(frame) or b"")
        assert answer["error"] == {
            "code": -32700,
            "message": "Parse error",
            "data": {"reason": "nested too deeply"},
        }, (place, depth, kind)


@pytest.mark.parametrize("place", PLACES)
def test_a_frame_within_the_nesting_limit_is_answered(place: str) -> None:
    backend = Backend("com.example.deep")
    backend.intercept("tool.before")(_handler)
    # The marker sits inside at most 4 containers: leave room for them.
    answer = json.loads(backend.handle_sync(_deep_frame(place, _nested(190, "arrays"))) or b"")
    assert "result" in answer or answer["error"]["code"] == -32602, answer


def test_the_nesting_limit_is_the_fast_decoders_on_every_shape() -> None:
    from pydantic_core import from_json

    for depth in range(kit.MAX_NESTING - 2, kit.MAX_NESTING + 3):
        for kind in ("arrays", "objects with a value", "arrays with a value"):
            text = _nested(depth, kind)
            try:
                from_json(text)
                fast_accepts = True
            except ValueError:
                fast_accepts = False
            assert fast_accepts is not too_deep(json.loads(text)), (depth, kind)


def test_nesting_is_judged_in_linear_time() -> None:
    def make(n: int) -> Callable[[], object]:
        value = json.loads("[" + ",".join([_nested(150, "arrays")] * (n // 150)) + "]")
        return lambda: too_deep(value)

    _assert_linear(make, 15_000)


# --------------------------------------------------------------------------- the wire


def _raises_wire_errors(parse: Callable[[Any], object], value: Any) -> Callable[[], object]:
    """``parse(value)``, its wire errors returned (refusing is work to measure too)."""

    def run() -> object:
        try:
            return parse(value)
        except (WireErrors, ValueError) as exc:
            return exc

    return run


def _manifest(**lists: list[Any]) -> dict[str, Any]:
    manifest: dict[str, Any] = {
        "events": [],
        "gaps": [],
        "transports": [],
        "authentication": [],
        "toolPaths": [],
        "contentCategories": [],
        "limits": {},
        "managedPolicy": {"scopes": [], "disableable": True},
        "correlationIdentityFields": [],
    }
    manifest.update(lists)
    return manifest


def _subscription(i: int) -> dict[str, Any]:
    return {
        "mode": "intercept",
        "events": ["tool.before"],
        "timeoutMs": 1000 + i,
        "failurePolicy": "fail-closed",
        "content": {"default": "metadata"},
    }


def _broken_subscription(i: int) -> dict[str, Any]:
    return {
        "mode": "intercept",
        "events": ["tool.before"],
        "timeoutMs": -1,
        "failurePolicy": "sometimes",
        "content": {"default": "everything"},
    }


def _hook(i: int) -> dict[str, Any]:
    return {
        "id": f"com.example.b{i}",
        "transport": {"type": "stdio", "command": "/bin/true", "lifecycle": "per_event"},
        "subscriptions": [_subscription(i)],
    }


WIRE: dict[str, tuple[Callable[[int], Callable[[], object]], int]] = {
    "capabilities.effects": (
        lambda n: _raises_wire_errors(
            parse_capabilities, {"effects": [f"com.example.e{i}" for i in range(n)]}
        ),
        500,
    ),
    "capabilities.flow.operations": (
        lambda n: _raises_wire_errors(
            parse_capabilities,
            {"effects": ["flow"], "flow": {"operations": ["stop", "continue"] * (n // 2)}},
        ),
        1000,
    ),
    "manifest.toolPaths": (
        lambda n: _raises_wire_errors(
            parse_manifest, _manifest(toolPaths=[f"p{i}" for i in range(n)])
        ),
        500,
    ),
    "manifest.contentCategories": (
        lambda n: _raises_wire_errors(
            parse_manifest, _manifest(contentCategories=[f"c{i}" for i in range(n)])
        ),
        500,
    ),
    "manifest.correlationIdentityFields": (
        lambda n: _raises_wire_errors(
            parse_manifest, _manifest(correlationIdentityFields=[f"f{i}" for i in range(n)])
        ),
        500,
    ),
    "manifest.events": (
        lambda n: _raises_wire_errors(
            parse_manifest,
            _manifest(events=[{"event": "session.start", "modes": ["observe"]}] * n),
        ),
        200,
    ),
    "state.instructions": (
        lambda n: _raises_wire_errors(
            parse_state,
            {"permission": "none", "candidate": None, "instructions": [f"i{i}" for i in range(n)]},
        ),
        1000,
    ),
    "registration.hooks": (
        lambda n: _raises_wire_errors(
            parse_registration, {"protocolVersion": "draft", "hooks": [_hook(i) for i in range(n)]}
        ),
        100,
    ),
    "registration.hooks (repeated ids)": (
        lambda n: _raises_wire_errors(
            parse_registration, {"protocolVersion": "draft", "hooks": [_hook(0)] * n}
        ),
        100,
    ),
    "configuration.subscriptions": (
        lambda n: _raises_wire_errors(
            parse_configuration, {"subscriptions": [_subscription(i) for i in range(n)]}
        ),
        100,
    ),
    "configuration.subscriptions (broken)": (
        lambda n: _raises_wire_errors(
            parse_configuration, {"subscriptions": [_broken_subscription(i) for i in range(n)]}
        ),
        50,
    ),
    "configuration.subscriptions[].events": (
        lambda n: _raises_wire_errors(
            parse_configuration,
            {"subscriptions": [{**_subscription(0), "events": ["tool.before"] * n}]},
        ),
        500,
    ),
    "intercept result effects": (
        lambda n: _raises_wire_errors(
            lambda effects: check_effects("tool.before", {"effects": ["deny", "message"]}, effects),
            [{"type": "message", "text": f"m{i}"} for i in range(n)],
        ),
        500,
    ),
    "event content withheld, open JSON scrubbed": (
        lambda n: (
            lambda: project_event(
                {
                    **tool_before("evt_1"),
                    "items": [
                        {"id": f"p{i}", "kind": "text", "mediaType": "text/plain"}
                        | {"selection": "body", "text": f"secret {i}"}
                        for i in range(n)
                    ],
                    "tool": {
                        "name": "Bash",
                        "origin": "native",
                        "input": {"args": [f"arg {i}" for i in range(n)]},
                    },
                },
                {"default": "metadata"},
            )
        ),
        200,
    ),
    "JSON-RPC message": (
        lambda n: (
            lambda: decode(
                json.dumps({"jsonrpc": "2.0", "id": "1", "result": {"x": list(range(n))}})
            )
        ),
        2000,
    ),
}


@pytest.mark.parametrize("name", list(WIRE))
def test_the_wire_validators_judge_every_list_in_linear_time(name: str) -> None:
    make, n = WIRE[name]
    _assert_linear(make, n)

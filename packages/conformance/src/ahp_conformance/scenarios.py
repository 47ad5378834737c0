"""The interop contract's scenario files: what each scenario sends, answers and expects.

A *request/response* scenario (``interop/scenarios.json`` upstream) is
``{id, request, response, expected | expectError, tags?, barrier?, hostExpected?}``: the
client sends ``request`` (a full JSON-RPC envelope), the server answers ``response``
verbatim, and the client reports the application result it derived, compared key by
key with ``expected`` (or a rejection, for ``expectError``).

The other upstream files (``lifecycle-scenarios.json``, ``catalogue-scenarios.json``,
``observation-chain-scenarios.json``) are written in a step language (send, wait, cancel,
release, chains of several backends) that a request/response runner cannot drive; their
scenarios are loaded as :class:`Unsupported`, each with that reason, so a report lists
them instead of dropping them.

One adjustment, stated by the fixtures' README: the scenario files were cut before the
draft schemas required ``event.harness``. :func:`with_harness` adds
:data:`FIXTURE_HARNESS` to an event that has none, and nothing else.

:func:`receipt_difference` is what "the server received exactly the scenario request"
means here: equal JSON, where an absent ``params.state`` equals
``{"permission": "none", "candidate": null}`` and an absent ``state.flow``,
``state.instructions`` or ``state.injections`` equals its draft default (``"none"``,
``[]``, ``[]``). Nothing else is normalised.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

FIXTURE_HARNESS = {"name": "ahp-interop", "version": "1"}
"""The ``harness`` object added to a scenario event that has none (see the module doc)."""
REQUEST_RESPONSE_FILES = ("scenarios.json",)
STEP_FILES = (
    "lifecycle-scenarios.json",
    "catalogue-scenarios.json",
    "observation-chain-scenarios.json",
)
STEP_REASON = (
    "written in the contract's step language (send/wait/cancel/release, chains of several "
    "backends, observation deliveries); this runner drives request/response scenarios only"
)


# -- what a scenario checks: its tags as requirement ids --------------------------------

TAG_REQUIREMENTS: dict[str, tuple[str, ...]] = {
    # effects applied, and only valid, advertised ones (AHP-DEC-001); an accepted deny is
    # not executed (AHP-DEC-002); no effect, allow and permission state never weaken the
    # host's own controls (AHP-DEC-003, AHP-SEC-001)
    "no-effect": ("AHP-DEC-003", "AHP-SEC-001"),
    "allow": ("AHP-DEC-001", "AHP-SEC-001"),
    "permission": ("AHP-DEC-003", "AHP-SEC-001"),
    "deny": ("AHP-DEC-002",),
    "ask": ("AHP-DEC-001",),
    "message": ("AHP-DEC-001",),
    "return": ("AHP-DEC-001",),
    "inject": ("AHP-DEC-001",),
    # edit semantics and whole-response atomic acceptance (AHP-EDIT-001)
    "modify": ("AHP-EDIT-001",),
    "merge": ("AHP-EDIT-001",),
    "replace": ("AHP-EDIT-001",),
    "atomic": ("AHP-EDIT-001",),
    "atomic-rejection": ("AHP-EDIT-001",),
    # the carried chain state and what ends decision-making (AHP-TB-001, AHP-COMP-001)
    "state": ("AHP-TB-001", "AHP-COMP-001"),
    "omitted-state": ("AHP-TB-001", "AHP-COMP-001"),
    "candidate": ("AHP-COMP-001",),
    "permission-invalidation": ("AHP-COMP-001",),
    "precedence": ("AHP-COMP-001",),
    "serial-pipeline": ("AHP-COMP-001",),
    "flow": ("AHP-COMP-001",),
    "finish-boundary": ("AHP-COMP-001",),
    # responses to reject before any effect (AHP-DEC-001, AHP-CAP-001, AHP-RPC-001)
    "negative": ("AHP-DEC-001",),
    "schema-invalid": ("AHP-DEC-001",),
    "capability-invalid": ("AHP-CAP-001", "AHP-DEC-001"),
    "correlation-invalid": ("AHP-RPC-001",),
    # the host's own input schema still refuses what an edit produced (AHP-SEC-001)
    "application-invalid": ("AHP-SEC-001",),
    # unknown fields and namespaced extensions change nothing (AHP-EXT-001, AHP-CORE-003)
    "extensions": ("AHP-EXT-001", "AHP-CORE-003"),
}
"""The one place scenario tags (upstream ``scenarios.json``) become the draft's requirement
ids, read against ``requirements.json``'s text; used by the harness judge and the matrix."""
UNTAGGED = ("AHP-DEC-001",)
"""A scenario none of whose tags is mapped: applying a valid, advertised effects array."""


def requirements_for(tags: Iterable[str]) -> tuple[str, ...]:
    """The requirement ids a scenario with ``tags`` checks (first seen first)."""
    found = [r for tag in tags for r in TAG_REQUIREMENTS.get(tag, ())]
    return tuple(dict.fromkeys(found)) or UNTAGGED


class ScenarioError(ValueError):
    """A scenario file that is not what the contract describes (the message names where)."""


@dataclass(frozen=True, slots=True)
class Scenario:
    """One request/response scenario; ``raw`` is the scenario object as read."""

    id: str
    request: Mapping[str, Any]
    response: Mapping[str, Any]
    expected: Mapping[str, Any] | None
    expect_error: bool
    tags: tuple[str, ...]
    raw: Mapping[str, Any]

    @property
    def event_type(self) -> str:
        return str(self.request["params"]["event"]["type"])


@dataclass(frozen=True, slots=True)
class Unsupported:
    """A scenario this runner cannot drive, with the reason."""

    id: str
    file: str
    reason: str


def with_harness(request: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of ``request`` whose event has a ``harness`` object (the one adjustment)."""
    out = copy.deepcopy(dict(request))
    event = out.get("params", {}).get("event")
    if isinstance(event, dict) and "harness" not in event:
        event["harness"] = dict(FIXTURE_HARNESS)
    return out


def parse(data: object, where: str) -> list[Scenario]:
    """The request/response scenarios of one file's JSON, adjusted with :func:`with_harness`."""
    if not isinstance(data, dict) or not isinstance(data.get("scenarios"), list):
        raise ScenarioError(f"{where}: expected an object with a 'scenarios' array")
    out = []
    seen: set[str] = set()
    for index, raw in enumerate(data["scenarios"]):
        at = f"{where}: scenarios[{index}]"
        if not isinstance(raw, dict) or not isinstance(raw.get("id"), str):
            raise ScenarioError(f"{at}: a scenario is an object with a string 'id'")
        if raw["id"] in seen:
            raise ScenarioError(f"{at}: duplicate scenario id {raw['id']!r}")
        seen.add(raw["id"])
        for key in ("request", "response"):
            if not isinstance(raw.get(key), dict):
                raise ScenarioError(f"{at}.{key}: must be a JSON-RPC object")
        event = raw["request"].get("params", {}).get("event")
        if not isinstance(event, dict) or not isinstance(event.get("type"), str):
            raise ScenarioError(f"{at}.request.params.event: must be an event object")
        expect_error = raw.get("expectError") is True
        expected = raw.get("expected")
        if not expect_error and not isinstance(expected, dict):
            raise ScenarioError(f"{at}: needs 'expected' (an object) or 'expectError': true")
        adjusted = dict(raw, request=with_harness(raw["request"]))
        out.append(
            Scenario(
                id=raw["id"],
                request=adjusted["request"],
                response=raw["response"],
                expected=expected if isinstance(expected, dict) else None,
                expect_error=expect_error,
                tags=tuple(raw.get("tags", ())),
                raw=adjusted,
            )
        )
    return out


def load(path: Path) -> list[Scenario]:
    """Read one request/response scenario file."""
    try:
        data = json.loads(path.read_text("utf-8"))
    except (OSError, ValueError) as exc:
        raise ScenarioError(f"{path}: {exc}") from None
    return parse(data, str(path))


def load_unsupported(path: Path) -> list[Unsupported]:
    """The scenarios of a step-language file, each marked unsupported with the reason."""
    try:
        data = json.loads(path.read_text("utf-8"))
    except (OSError, ValueError) as exc:
        raise ScenarioError(f"{path}: {exc}") from None
    items = data.get("scenarios", []) if isinstance(data, dict) else []
    return [
        Unsupported(str(s.get("id")), path.name, STEP_REASON) for s in items if isinstance(s, dict)
    ]


def official(interop: Path) -> tuple[list[Scenario], list[Unsupported]]:
    """Every upstream scenario in the ``ahp-interop`` folder: drivable and unsupported."""
    drivable: list[Scenario] = []
    for name in REQUEST_RESPONSE_FILES:
        drivable.extend(load(interop / name))
    unsupported: list[Unsupported] = []
    for name in STEP_FILES:
        if (interop / name).is_file():
            unsupported.extend(load_unsupported(interop / name))
    return drivable, unsupported


def write(scenarios: Iterable[Scenario], path: Path) -> Path:
    """Write a scenario file in the contract's form (what adapters read as ``scenarioFile``)."""
    document = {"version": 1, "scenarios": [dict(s.raw) for s in scenarios]}
    path.write_text(json.dumps(document, indent=1), "utf-8")
    return path


_STATE_DEFAULTS: dict[str, Any] = {
    "permission": "none",
    "candidate": None,
    "flow": "none",
    "instructions": [],
    "injections": [],
}


def _normal(request: Mapping[str, Any]) -> Any:
    out = copy.deepcopy(dict(request))
    params = out.get("params")
    if isinstance(params, dict) and "event" in params:
        state = params.get("state", {})
        if isinstance(state, dict):
            params["state"] = {**_STATE_DEFAULTS, **state}
    return out


def receipt_difference(received: Any, expected: Mapping[str, Any]) -> str | None:
    """``None`` when ``received`` is the scenario request, else the first JSON path that differs."""
    mine = _normal(received) if isinstance(received, dict) else received
    return _first_difference(mine, _normal(expected), "$")


def _first_difference(a: Any, b: Any, path: str) -> str | None:
    if isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(set(a) | set(b)):
            if key not in a:
                return f"{path}.{key}: missing (expected {_short(b[key])})"
            if key not in b:
                return f"{path}.{key}: not in the scenario request (got {_short(a[key])})"
            found = _first_difference(a[key], b[key], f"{path}.{key}")
            if found:
                return found
        return None
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return f"{path}: {len(a)} items, expected {len(b)}"
        for index, (x, y) in enumerate(zip(a, b, strict=True)):
            found = _first_difference(x, y, f"{path}[{index}]")
            if found:
                return found
        return None
    if type(a) is not type(b) or a != b:
        return f"{path}: got {_short(a)}, expected {_short(b)}"
    return None


def _short(value: Any) -> str:
    text = json.dumps(value, separators=(",", ":"))
    return text if len(text) <= 80 else text[:77] + "..."

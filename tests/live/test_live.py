"""Each real harness, hooks written by ``ahp-adapter install``, against the fake model.

One test per harness and scenario (``ahp_adapters.live.scenarios``): deny held (the
victim survives, the model saw the reason, the harness went on), a harmless call ran,
the harness's own refusal stood, fail-closed with a missing and with a crashing backend,
fail-open; Claude Code also over its http transport (``install --transport http``, which
takes fail-open registrations only: its fail-closed scenarios are skipped as not
applicable). The ``deny`` run of each command driver also records every native payload
the harness sent (through ``ahp_adapters.live.tee``) and decodes each with the dialect:
nothing the harness sends may fail to decode, and the tool call must come through as the
model asked for it.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from ahp_adapters import dialects
from ahp_adapters.events import build_event
from ahp_adapters.live.harnesses import DRIVERS, HARNESSES
from ahp_adapters.live.scenarios import SCENARIOS, run
from ahp_protocol.wire.events import parse_event

from kit_testing import schema_errors

# Deselected from the default run (``-m "not live"`` in pyproject); ``.ci/run`` runs this
# tier after the main suite. The first test on a machine installs the harnesses.
pytestmark = [pytest.mark.live, pytest.mark.timeout(1800)]


def _binary(name: str, request: pytest.FixtureRequest) -> str:
    folder = request.getfixturevalue("kimi_bin" if name == "kimi" else "npm_bin")
    binary = HARNESSES[name].find(str(folder))
    assert binary, f"{HARNESSES[name].binary} is not in {folder} after the install"
    return binary


@pytest.mark.parametrize("scenario", list(SCENARIOS))
@pytest.mark.parametrize("driver", list(DRIVERS))
def test_scenario(
    driver: str,
    scenario: str,
    request: pytest.FixtureRequest,
    tmp_path: Path,
    record_property: Callable[[str, object], None],
) -> None:
    harness = DRIVERS[driver]
    name = harness.name
    binary = _binary(name, request)
    recorded = scenario == "deny" and harness.transport == "command"  # tee wraps commands
    record = tmp_path / "recorded" if recorded else None
    outcome = run(harness, binary, SCENARIOS[scenario], tmp_path / "run", record=record)
    assert _left_behind(tmp_path) == [], "processes of the run outlived it"
    if outcome.skipped:
        pytest.skip(outcome.detail)
    assert outcome.ok, (
        f"{driver} {harness.version(binary)} {scenario}: {outcome.detail}\n"
        f"--- stdout\n{outcome.stdout[-4000:]}\n--- stderr\n{outcome.stderr[-4000:]}"
    )
    if record is not None:
        _kinds_known(name, harness.version(binary), outcome.offered)
        _decodes(name, record, SCENARIOS[scenario].commands)
        _version_seen(name, record, harness.version(binary))
        record_property("hook_latency", _latency(name, record, harness.version(binary)))


def _kinds_known(name: str, version: str, offered: list[str]) -> None:
    """Every tool the harness offered its model and hooks is in the dialect's kinds table:
    a tool a new version adds is judged (its kind, ``other`` if none fits) before a
    ``kind``-keyed rule is trusted to see it. The recorded lists: ``tests/offered``."""
    harness, codec = HARNESSES[name], dialects.get(name)
    assert offered, f"{name} {version}: the fake model saw no tools offered"
    hooked = [hook for tool in offered if (hook := harness.hook_name(tool)) is not None]
    unlisted = [tool for tool in hooked if tool not in codec.kinds]
    assert not unlisted, (
        f"{name} {version} offers tools its dialect does not list: {unlisted}; add each to "
        "the dialect's kinds table with its kind, and the list to "
        f"packages/adapters/tests/offered/{name}.live-{version}.json"
    )


SCHEMAS = {
    kind: f"{kind.replace('.', '-')}.schema.json"
    for kind in ("tool.before", "tool.after", "session.start", "session.end")
}


def _decodes(name: str, record: Path, commands: tuple[str, ...]) -> None:
    files = sorted(record.glob("*.json"))
    assert files, f"{name}: the hook recorded no payload"
    codec = dialects.get(name)
    seen: dict[str, list[str]] = {}
    for file in files:
        doc = json.loads(file.read_text())
        payload, event = doc["payload"], doc["event"]
        assert isinstance(payload, dict), f"{file.name}: not a JSON object: {payload!r}"
        reader = codec.resolve(payload)
        parsed = reader.parse(payload, options={"event": event})
        seen.setdefault(parsed.kind, []).append(event)
        if parsed.kind == "ignore":
            continue
        built = build_event(reader, parsed, payload)
        assert schema_errors(SCHEMAS[parsed.kind], built) == [], file.name
        parse_event(built)  # our wire models agree
        if parsed.kind in ("tool.before", "tool.after"):
            tool = parsed.fields["tool"]
            assert tool["kind"] == "shell", f"{file.name}: {tool['name']} decoded as {tool}"
            command = tool["input"].get("command") or tool["input"].get("cmd")
            assert any(c in str(command) for c in commands), f"{file.name}: {tool['input']}"
    assert "tool.before" in seen, f"{name}: no pre-tool payload among {seen}"
    unread = [e for e in seen.get("ignore", []) if e not in codec.prepare_events]
    assert not unread, f"{name}: payloads the dialect does not read: {unread}"


EXPORTS_VERSION = {"claude-code", "codex", "copilot"}
"""Harnesses whose hooks can tell their version (the others export none: ``unknown``)."""


def _version_seen(name: str, record: Path, version: str) -> None:
    """``harness.version`` from what the harness exports to its hooks, where it does."""
    codec = dialects.get(name)
    found = {
        codec.version_from_env(json.loads(f.read_text())["env"]) for f in record.glob("*.json")
    }
    expected = version if name in EXPORTS_VERSION else None
    assert found == {expected}, f"{name} {version}: harness.version would be {found}"


def _latency(name: str, record: Path, version: str) -> str:
    """The pre-tool hook's wall time inside the harness: the first call (daemon and
    backend start) and the next (warm). Reported in the run's summary; the targets live
    in ``packages/adapters/bench/hook_latency.py --check``, never in a timed test."""
    codec = dialects.get(name)
    times: list[float] = []
    starts: list[tuple[str, float]] = []
    for file in sorted(record.glob("*.json")):
        doc = json.loads(file.read_text())
        if codec.is_pre_tool(doc["event"]):
            times.append(doc["adapterMs"])
        elif doc["event"] in codec.prepare_events or (
            codec.parse(doc["payload"], options={"event": doc["event"]}).kind == "session.start"
        ):
            starts.append((doc["event"], doc["adapterMs"]))
    warm = ", ".join(f"{t:.0f}" for t in times[1:]) or "-"
    start = f"{starts[0][0]} hook {starts[0][1]:.0f} ms" if starts else "no session-start hook"
    return f"{name} {version}: {start}, first pre-tool hook {times[0]:.0f} ms, then {warm} ms"


def _left_behind(folder: Path, wait_s: float = 5.0) -> list[str]:
    """Command lines of live processes that name ``folder`` (the run's daemons and backends
    do, by their registration and rules paths), after a short grace for exits."""
    deadline = time.monotonic() + wait_s
    while True:
        found = []
        for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
            try:
                argv = cmdline.read_bytes().split(b"\0")
            except OSError:
                continue
            text = " ".join(a.decode(errors="replace") for a in argv)
            if str(folder) in text and "pytest" not in text:
                found.append(text)
        if not found or time.monotonic() > deadline:
            return found
        time.sleep(0.2)

"""A chain started from a carried-over state: permission and a supplied result (candidate).

``Dispatcher.intercept(event, initial_permission=..., initial_candidate=...)`` starts the
chain where an earlier run for the same operation left it (draft §5.4). The first
interceptor receives that state as ``params.state`` (checked on the wire, with a real
recording backend process), and it is folded like any other state: kept by an empty
answer, dropped when a modification changes the operation.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import anyio
from ahp_protocol.client import Candidate, Dispatcher
from ahp_protocol.wire.registration import parse_registration

RECORDER = Path(__file__).resolve().parent / "backends" / "recorder.py"
CAPABILITIES = {
    "tool.before": {
        "effects": ["deny", "allow", "ask", "modify", "return", "message"],
        "modify": {"input": {"replace": True, "merge": True}},
    }
}


def _registration(record: Path, effects: list[dict[str, Any]]) -> Any:
    return parse_registration(
        {
            "protocolVersion": "draft",
            "hooks": [
                {
                    "id": "com.example.recorder",
                    "transport": {
                        "type": "stdio",
                        "command": sys.executable,
                        "args": [
                            str(RECORDER),
                            "--record",
                            str(record),
                            "--effects",
                            json.dumps(effects),
                        ],
                        "lifecycle": "persistent",
                    },
                    "subscriptions": [
                        {
                            "events": ["tool.before"],
                            "mode": "intercept",
                            "timeoutMs": 10000,
                            "failurePolicy": "fail-closed",
                            "content": {"default": "body"},
                        }
                    ],
                }
            ],
        }
    )


def _event() -> dict[str, Any]:
    return {
        "id": "evt-initial-state",
        "source": "urn:example:tests",
        "type": "tool.before",
        "time": "2026-01-01T00:00:00Z",
        "harness": {"name": "tests", "version": "1"},
        "session": {"id": "s"},
        "call": {"id": "c"},
        "path": "native",
        "tool": {"origin": "native", "name": "task", "kind": "task", "input": {"task": 1}},
    }


def _sent_state(record: Path) -> Any:
    lines = [json.loads(line) for line in record.read_text("utf-8").splitlines()]
    messages = [e["message"] for e in lines if e.get("event") == "message"]
    intercepts = [m for m in messages if m.get("method") == "hooks/intercept"]
    assert len(intercepts) == 1, messages
    return intercepts[0]["params"]["state"]


def _run(record: Path, effects: list[dict[str, Any]], candidate: Candidate) -> Any:
    async def main() -> Any:
        async with Dispatcher(_registration(record, effects), capabilities=CAPABILITIES) as hooks:
            return await hooks.intercept(
                _event(), initial_permission="allow", initial_candidate=candidate
            )

    return anyio.run(main)


def test_the_first_interceptor_receives_the_initial_candidate_and_an_empty_answer_keeps_it(
    tmp_path: Path,
) -> None:
    record = tmp_path / "record.jsonl"
    candidate = Candidate(value={"cached": 1}, provenance={"requestId": "earlier"})
    result = _run(record, [], candidate)
    assert _sent_state(record) == {
        "permission": "allow",
        "candidate": {"value": {"cached": 1}, "provenance": {"requestId": "earlier"}},
        "flow": "none",
    }
    assert result.permission == "allow"
    assert result.candidate == candidate


def test_a_modification_that_changes_the_input_drops_the_initial_candidate(
    tmp_path: Path,
) -> None:
    record = tmp_path / "record.jsonl"
    modify = {"type": "modify", "target": "input", "operation": "merge", "value": {"task": 2}}
    result = _run(record, [modify], Candidate(value={"cached": 1}))
    assert _sent_state(record)["candidate"] == {"value": {"cached": 1}}
    assert result.candidate is None
    assert result.permission == "none"  # approval was bound to the input it saw
    assert result.tool_input == {"task": 2}

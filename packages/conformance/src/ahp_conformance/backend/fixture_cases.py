"""Check group ``fixture.*``: every request and notification of the official fixtures.

Each stdio or HTTP case of the draft's conformance fixtures (``manifest.json``) is sent
as it is (``harness`` added where an event lacks it, by
:func:`~ahp_conformance.scenarios.with_harness`): a valid request gets a valid result (or
-32002 for an event the backend does not intercept), an invalid one the right error, a
notification nothing, and an invalid frame as such (a request pretty-printed over lines)
errors only. A pass credits the requirements the case lists that a backend can show
(:data:`BACKEND_SHOWS`); a failure names the one requirement it breaks.
"""

from __future__ import annotations

import json
from typing import Any

from ahp_conformance.backend.answers import error_code
from ahp_conformance.backend.links import HttpLink
from ahp_conformance.backend.probes import frame
from ahp_conformance.backend.run import Run
from ahp_conformance.fixtures import load_json
from ahp_conformance.scenarios import with_harness

BACKEND_SHOWS = frozenset(
    {
        "AHP-RPC-001",
        "AHP-RPC-002",
        "AHP-VER-001",
        "AHP-CORE-003",
        "AHP-EXT-001",
        "AHP-TB-001",
        "AHP-CAP-001",
        "AHP-DEC-001",
        "AHP-CORE-004",
        "AHP-STDIO-001",
        "AHP-HTTP-001",
    }
)
"""Requirements a fixture case can show about a backend (the rest are a harness's)."""


def fixture_cases(run: Run) -> None:
    """Every message of every stdio and HTTP case in the fixtures' ``manifest.json``."""
    run.progress("the official fixtures' requests and notifications")
    manifest = load_json(run.fixtures / "manifest.json")
    binding = "http" if isinstance(run.link, HttpLink) else "stdio"
    other = "AHP-STDIO-001" if binding == "http" else "AHP-HTTP-001"
    # A backend that intercepts no tool.before shows nothing of Tool Interception here.
    not_intercepting = (
        set(run.catalogue_profile("tool-interception"))
        if run.supports_tool_before is False
        else set()
    )
    for case in manifest.get("cases", []):
        if case.get("binding") not in ("stdio-jsonl", "http-json"):
            continue
        raw = (run.fixtures / case["path"]).read_bytes()
        requirements = [
            r
            for r in case.get("requirements", [])
            if r in BACKEND_SHOWS and r != other and r not in not_intercepting
        ] or ["AHP-RPC-001"]
        valid = bool(case.get("aggregateExpectedValid", case.get("expectedValid")))
        try:
            messages = (
                [json.loads(raw)]
                if case["binding"] == "http-json"
                else [json.loads(line) for line in raw.splitlines() if line.strip()]
            )
        except ValueError:
            if valid:
                continue
            # an invalid frame as such (e.g. a request pretty-printed over lines)
            _fixture_bad_frame(run, case["id"], requirements, raw)
            continue
        for message in messages:
            if not isinstance(message, dict) or "method" not in message:
                continue
            _fixture_message(run, case["id"], requirements, valid, with_harness(message))


def _fixture_bad_frame(run: Run, cid: str, requirements: list[str], raw: bytes) -> None:
    data = raw if raw.endswith(b"\n") else raw + b"\n"
    outcome = run.link.collect(data)
    title = f"fixture {cid}: rejected with errors only, and the backend keeps answering"
    results = [r for r in outcome.responses if "result" in r]
    if outcome.failure or results:
        run.judge.check(
            f"fixture.{cid}",
            title,
            requirements,
            "fail",
            outcome.failure or "an invalid frame got a result",
            outcome.evidence,
        )
    else:
        run.judge.check(f"fixture.{cid}", title, requirements, "pass")


def _fixture_message(
    run: Run, cid: str, requirements: list[str], valid: bool, message: dict[str, Any]
) -> None:
    data = frame(message)
    method = message.get("method")
    params: dict[str, Any] = message["params"] if isinstance(message.get("params"), dict) else {}
    event: dict[str, Any] = params["event"] if isinstance(params.get("event"), dict) else {}
    etype = str(event.get("type", ""))
    if "id" not in message:
        run.expect_silence(
            f"fixture.{cid}",
            f"fixture {cid}: a {'valid' if valid else 'invalid'} notification gets no response",
            requirements,
            data,
            precise=True,
        )
        return
    rid = message["id"]
    if not valid:
        codes = [-32602, -32600]
        if method == "hooks/intercept" and not (
            etype == "tool.before" and run.supports_tool_before
        ):
            codes.append(-32002)
        run.expect_error(
            f"fixture.{cid}",
            f"fixture {cid}: an invalid request gets the right error",
            requirements,
            data,
            rid,
            codes,
            precise=True,
        )
        return
    outcome = run.link.request(data, rid)
    title = f"fixture {cid}: a valid request gets a valid answer"
    if method == "hooks/capabilities":
        reply = outcome.reply
        ok = reply is not None and (
            error_code(reply) == -32601
            or (isinstance(reply.get("result"), dict) and "manifest" in reply["result"])
        )
        run.judge.check(
            f"fixture.{cid}",
            title,
            requirements,
            "pass" if ok else "fail",
            "" if ok else (outcome.failure or "neither a manifest nor -32601"),
            outcome.evidence,
        )
        return
    grant = params.get("capabilities") if isinstance(params.get("capabilities"), dict) else {}
    verdict = run.judge_answer(outcome, etype, grant or {})
    # A failure names the requirement it breaks; a pass shows what the case covers.
    for problem, requirement in (
        (verdict.answered, "AHP-RPC-002"),
        (verdict.version, "AHP-VER-001"),
        (verdict.effects, "AHP-DEC-001"),
        (verdict.advertised, "AHP-CAP-001"),
    ):
        if problem:
            run.judge.check(
                f"fixture.{cid}", title, [requirement], "fail", problem, outcome.evidence
            )
            return
    if verdict.unsupported:
        run.judge.check(
            f"fixture.{cid}",
            title,
            requirements,
            "unsupported",
            f"-32002: the backend does not intercept {etype}",
        )
    else:
        run.judge.check(f"fixture.{cid}", title, requirements, "pass")

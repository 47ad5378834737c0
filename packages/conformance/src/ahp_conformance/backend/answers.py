"""Judging one answer: a JSON-RPC error's code, and a ``hooks/intercept`` result.

Owns :func:`judge_result`, which reads the answer to a valid intercept request into
:class:`AnswerFindings`, one entry per requirement it can break: answered at all (AHP-RPC-002;
-32002 means the event is not intercepted), ``protocolVersion`` (AHP-VER-001), an
``effects`` array of valid effects (AHP-DEC-001), only effects the grant advertised
(AHP-CAP-001). The rules themselves are the wire's (one rule, one place): effects are
judged by ``ahp_protocol.wire.effects.check_effects`` against the request's grant.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ahp_protocol.wire.effects import EffectError, check_effects

from ahp_conformance.backend.judge import RoundTrip


def error_code(reply: Mapping[str, Any] | None) -> int | None:
    """The integer ``error.code`` of a JSON-RPC error response, else ``None``."""
    if reply is None or not isinstance(reply.get("error"), dict):
        return None
    code = reply["error"].get("code")
    return code if isinstance(code, int) and not isinstance(code, bool) else None


@dataclass
class AnswerFindings:
    """What judging one intercept answer found, one entry per requirement it can break
    (``None``: that requirement holds). The report's verdicts are built from these."""

    answered: str | None = None  # why the request was not answered with a result (RPC-002)
    unsupported: bool = False  # -32002: the backend does not support this event
    version: str | None = None  # VER-001
    effects: str | None = None  # DEC-001
    advertised: str | None = None  # CAP-001
    effects_list: list[Any] | None = None


def judge_result(outcome: RoundTrip, event_type: str, grant: Mapping[str, Any]) -> AnswerFindings:
    """Judge the answer to a valid ``hooks/intercept`` request."""
    findings = AnswerFindings()
    reply = outcome.reply
    if reply is None:
        findings.answered = outcome.failure or "no response"
        return findings
    code = error_code(reply)
    if "error" in reply:
        if code == -32002:
            findings.unsupported = True
        else:
            findings.answered = f"a valid request got JSON-RPC error {code}"
        return findings
    result = reply.get("result")
    if not isinstance(result, dict):
        findings.answered = "the result is not an object"
        return findings
    if result.get("protocolVersion") != "draft":
        findings.version = (
            f"result.protocolVersion is {result.get('protocolVersion')!r}, not 'draft'"
            if "protocolVersion" in result
            else "the result has no protocolVersion"
        )
    effects = result.get("effects")
    if not isinstance(effects, list):
        findings.effects = (
            "the result has no effects array"
            if "effects" not in result
            else "effects is not an array"
        )
        return findings
    findings.effects_list = effects
    try:
        check_effects(event_type, grant, effects)
    except EffectError as exc:
        if exc.kind == "unadvertised":
            findings.advertised = f"{exc.path}: {exc.reason} (granted: {grant.get('effects')})"
        else:
            findings.effects = f"{exc.path}: {exc.reason} ({exc.kind})"
    for key in ("manifest", "configuration"):
        if key in result and findings.effects is None:
            findings.effects = f"an intercept result must not contain {key!r}"
    return findings

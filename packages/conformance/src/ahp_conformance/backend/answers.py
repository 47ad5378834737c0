"""Judging one answer: a JSON-RPC error's code, and a ``hooks/intercept`` result.

Owns :func:`judge_result`, which reads the answer to a valid intercept request into
:class:`Verdicts`, one entry per requirement it can break: answered at all (AHP-RPC-002;
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

from ahp_conformance.backend.judge import Outcome


def error_code(reply: Mapping[str, Any] | None) -> int | None:
    """The integer ``error.code`` of a JSON-RPC error response, else ``None``."""
    if reply is None or not isinstance(reply.get("error"), dict):
        return None
    code = reply["error"].get("code")
    return code if isinstance(code, int) and not isinstance(code, bool) else None


@dataclass
class Verdicts:
    """The judgement of one intercept result, one entry per requirement."""

    answered: str | None = None  # why the request was not answered with a result (RPC-002)
    unsupported: bool = False  # -32002: the backend does not support this event
    version: str | None = None  # VER-001
    effects: str | None = None  # DEC-001
    advertised: str | None = None  # CAP-001
    effects_list: list[Any] | None = None


def judge_result(outcome: Outcome, event_type: str, grant: Mapping[str, Any]) -> Verdicts:
    """Judge the answer to a valid ``hooks/intercept`` request."""
    verdict = Verdicts()
    reply = outcome.reply
    if reply is None:
        verdict.answered = outcome.failure or "no response"
        return verdict
    code = error_code(reply)
    if "error" in reply:
        if code == -32002:
            verdict.unsupported = True
        else:
            verdict.answered = f"a valid request got JSON-RPC error {code}"
        return verdict
    result = reply.get("result")
    if not isinstance(result, dict):
        verdict.answered = "the result is not an object"
        return verdict
    if result.get("protocolVersion") != "draft":
        verdict.version = (
            f"result.protocolVersion is {result.get('protocolVersion')!r}, not 'draft'"
            if "protocolVersion" in result
            else "the result has no protocolVersion"
        )
    effects = result.get("effects")
    if not isinstance(effects, list):
        verdict.effects = (
            "the result has no effects array"
            if "effects" not in result
            else "effects is not an array"
        )
        return verdict
    verdict.effects_list = effects
    try:
        check_effects(event_type, grant, effects)
    except EffectError as exc:
        if exc.kind == "unadvertised":
            verdict.advertised = f"{exc.path}: {exc.reason} (granted: {grant.get('effects')})"
        else:
            verdict.effects = f"{exc.path}: {exc.reason} ({exc.kind})"
    for key in ("manifest", "configuration"):
        if key in result and verdict.effects is None:
            verdict.effects = f"an intercept result must not contain {key!r}"
    return verdict

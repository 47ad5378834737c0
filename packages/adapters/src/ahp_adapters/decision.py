"""What one native hook invocation decided, and which failure policy applies when nothing did.

Owns :class:`NativeDecision` (``deny``, ``modify``, ``none`` or ``failure``; the form
the daemon sends back over its socket) and :func:`read_policy`, which answers
one question from the registration file: if the adapter cannot run the chain
at all (a malformed native payload, an unreadable registration, a daemon that
died, a spent budget), does any ``tool.before`` interceptor demand fail-closed?
The rule itself is the protocol's (:func:`ahp_protocol.wire.routing.strictest_policy`,
standard library only); this module only reads the file.

Conservative by construction: a backend whose subscriptions come from
``hooks/configuration`` (none in the file), a subscription that cannot be read
and a registration that cannot be read count as fail-closed, since nothing shows
they may fail open. Never carries backend output or exception text: ``detail``
is a fixed phrase, and so are ``failures`` (the operator's lines, one per failed
backend, :func:`ahp_protocol.client.failure_line`). The one backend-supplied value it
carries besides a deny's reason and code is a ``modify`` decision's ``input``: the
effective tool input, which the dialect writes back to the harness as it is.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from ahp_protocol.wire.routing import strictest_policy

from ahp_adapters.rundir import registration_path

__all__ = ["GENERIC_DENIAL_REASON", "NativeDecision", "Policy", "read_policy", "registration_path"]

Policy = Literal["none", "fail-open", "fail-closed"]
Decision = Literal["deny", "modify", "none", "failure"]

GENERIC_DENIAL_REASON = "Required policy backend unavailable."
"""The reason of a synthetic denial when no backend is to blame (the same text as the
dispatcher's): a spent budget, a daemon that died, an unreadable payload."""

_MAX_REGISTRATION_BYTES = 1024 * 1024
_MAX_FAILURE_LINES = 32
_MAX_FAILURE_LINE_CHARS = 2000
_DECISIONS = ("deny", "modify", "none", "failure")


@dataclass(frozen=True, slots=True)
class NativeDecision:
    """What a native hook must answer: the decision of one ``tool.before`` (or of failing
    to run it), before its dialect renders it as the harness's own answer.

    ``failure`` means no chain result: ``policy`` says what to do about it
    (``fail-closed``: block with the generic reason; otherwise answer nothing).
    ``modify`` means no denial and an accepted rewrite: ``updated_input`` is the
    whole effective ``tool.input`` (it differs from the one sent). It never blocks
    and is never a permission: the harness's own permission flow judges that input.
    A denial always wins: a chain that denied is ``deny``, whatever it modified.
    A synthetic ``deny`` names the ``backend`` whose fail-closed ``failure`` (its class)
    denied; ``failures`` are the operator's lines about every backend that failed.
    """

    decision: Decision
    reason: str | None = None
    code: str | None = None
    synthetic: bool = False
    policy: Policy = "none"
    detail: str = ""
    updated_input: Mapping[str, Any] | None = None
    backend: str | None = None
    failure: str | None = None
    failures: tuple[str, ...] = ()

    @property
    def blocks(self) -> bool:
        return self.decision == "deny" or (
            self.decision == "failure" and self.policy == "fail-closed"
        )

    @property
    def block_reason(self) -> str:
        """The reason the harness (and the model) sees: the backend's for a deny; for a
        synthetic one, the failed backend's id and failure class (never its detail);
        generic when nothing ran."""
        if self.decision == "deny" and not self.synthetic and self.reason:
            return self.reason
        if self.decision == "deny":
            from ahp_protocol.client import synthetic_denial_reason  # a failure's path only

            return synthetic_denial_reason(self.backend, self.failure)
        return GENERIC_DENIAL_REASON

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "decision": self.decision,
            "reason": self.reason,
            "code": self.code,
            "synthetic": self.synthetic,
            "policy": self.policy,
            "detail": self.detail,
        }
        if self.backend is not None:
            out.update(backend=self.backend, failure=self.failure)
        if self.failures:
            out["failures"] = list(self.failures)
        if self.decision == "modify":
            out["input"] = self.updated_input
        return out

    @classmethod
    def from_json(cls, obj: object) -> NativeDecision:
        """A decision from the daemon; anything unexpected is a fail-closed failure
        (a ``modify`` without an object ``input`` included)."""
        unreadable = cls("failure", policy="fail-closed", detail="unreadable daemon answer")
        if not isinstance(obj, Mapping) or obj.get("decision") not in _DECISIONS:
            return unreadable
        updated = obj.get("input")
        if obj["decision"] == "modify" and not isinstance(updated, dict):
            return unreadable
        policy = obj.get("policy")
        reason = obj.get("reason")
        code = obj.get("code")
        detail = obj.get("detail")
        backend, failure = obj.get("backend"), obj.get("failure")
        lines = obj.get("failures")
        failures = tuple(
            "".join(c if c.isprintable() else " " for c in line[:_MAX_FAILURE_LINE_CHARS])
            for line in (lines if isinstance(lines, list) else ())[:_MAX_FAILURE_LINES]
            if isinstance(line, str)
        )
        return cls(
            obj["decision"],
            reason=reason if isinstance(reason, str) else None,
            code=code if isinstance(code, str) else None,
            synthetic=obj.get("synthetic") is True,
            policy=policy if policy in ("none", "fail-open", "fail-closed") else "fail-closed",
            detail=detail if isinstance(detail, str) else "",
            updated_input=updated if obj["decision"] == "modify" else None,
            backend=backend if isinstance(backend, str) else None,
            failure=failure if isinstance(failure, str) else None,
            failures=failures,
        )


def read_policy(path: str) -> Policy:
    """The strictest ``tool.before`` policy of a registration file; fail-closed if unreadable.

    :func:`ahp_protocol.wire.routing.strictest_policy` of the decoded document.
    """
    try:
        with open(path, "rb") as handle:
            raw = handle.read(_MAX_REGISTRATION_BYTES + 1)
        if len(raw) > _MAX_REGISTRATION_BYTES:
            return "fail-closed"
        return strictest_policy(json.loads(raw.decode("utf-8-sig")), "tool.before")
    except (OSError, ValueError):
        return "fail-closed"

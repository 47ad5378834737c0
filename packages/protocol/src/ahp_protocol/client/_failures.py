"""Operational failures: every way a backend can fail to give a decision.

Owns :class:`FailureClass` (the draft's failure classes) and :class:`OperationalFailure`,
which transports and the chain raise. A failure is never a decision: the subscription's
failure policy decides what it means. ``detail`` is a fixed phrase chosen by our code,
never backend output, exception text or a secret. :func:`fix_for` says how an operator
fixes the failures the kit can recognise (today: a bare command not on the backend's
``PATH``), by the class and the fixed phrase alone.
"""

from __future__ import annotations

from enum import StrEnum


class FailureClass(StrEnum):
    """Why an exchange produced no usable answer (draft §6.2)."""

    DEADLINE_EXCEEDED = "deadline_exceeded"
    """No answer within ``timeoutMs`` (spawn or connect, send, backend time, acceptance)."""
    SPAWN_FAILED = "spawn_failed"
    """The backend process could not be started."""
    CONNECT_FAILED = "connect_failed"
    """The HTTP endpoint refused, reset or lost the connection."""
    ABNORMAL_EXIT = "abnormal_exit"
    """The backend process exited (or closed its output) without a complete answer, or nonzero."""
    HTTP_STATUS = "http_status"
    """A non-success HTTP status (redirects included: they are not followed)."""
    MALFORMED_OUTPUT = "malformed_output"
    """Bytes that are not one UTF-8 JSON-RPC object per frame (bad UTF-8, JSON, envelope, size)."""
    ID_MISMATCH = "id_mismatch"
    """A response with another id where no other answer can follow (HTTP, per_event), or
    too many of them while one persistent stdio request waits (draft §8.1)."""
    RPC_ERROR = "rpc_error"
    """The backend answered with a JSON-RPC error."""
    UNSUPPORTED_VERSION = "unsupported_version"
    """The result's protocolVersion is missing or not ours."""
    INVALID_RESULT = "invalid_result"
    """The result is not an object of the expected shape (e.g. effects not an array)."""
    UNKNOWN_EFFECT = "unknown_effect"
    """An effect type, target, operation or field the draft does not define."""
    MALFORMED_EFFECT = "malformed_effect"
    """An effect of a known type with a wrong shape or value, or an invalid resulting event."""
    UNADVERTISED_EFFECT = "unadvertised_effect"
    """An effect the request did not grant, or one the draft forbids at this event."""
    AUTH_FAILED = "auth_failed"
    """A credential could not be resolved; nothing was sent."""
    CONFIGURATION_FAILED = "configuration_failed"
    """``hooks/configuration`` discovery gave no usable subscriptions."""


NOT_ON_PATH = "not found on PATH"
"""The phrase of a spawn failure's detail when a bare command is not on the backend's ``PATH``."""

PATH_FIX = (
    "give an absolute command path in the registration, "
    "or install the backend where the harness's PATH finds it"
)
"""How to fix a bare command that is not on the ``PATH`` the harness gave the backend."""


def fix_for(failure: FailureClass | str | None, detail: str | None) -> str | None:
    """How the operator fixes this failure, where the kit knows; else ``None``."""
    if failure == FailureClass.SPAWN_FAILED and detail and NOT_ON_PATH in detail:
        return PATH_FIX
    return None


class OperationalFailure(Exception):
    """One classified failure of one exchange."""

    def __init__(self, failure: FailureClass, detail: str) -> None:
        super().__init__(f"{failure.value}: {detail}")
        self.failure = failure
        self.detail = detail

"""The harness side of AHP: run one event through a registration's subscriptions.

- :class:`Hooks`, the harness-facing API (envelope, lifecycle calls, validation),
  built on :class:`Dispatcher` (async, low level) and :class:`SyncDispatcher`
  (blocking facade);
- :class:`HookResult` and :class:`Diagnostic`, what a run produced;
- :mod:`~ahp_protocol.client.chain`, the pure folding rules;
- :mod:`~ahp_protocol.client.transports`, stdio (persistent, per_event) and HTTP.

A result never grants anything by itself: ``none`` and ``allow`` still go
through the host's own permissions, managed policy and sandbox.
"""

from ahp_protocol.client._checks import DeclarationError, RegistrationError
from ahp_protocol.client._dispatcher import Dispatcher
from ahp_protocol.client._failures import FailureClass, OperationalFailure, fix_for
from ahp_protocol.client._result import (
    SYNTHETIC_DENIAL_PATTERN,
    Diagnostic,
    HookResult,
    failure_line,
    synthetic_denial_reason,
)
from ahp_protocol.client._sync import SyncDispatcher
from ahp_protocol.client.chain import ChainState, Denial
from ahp_protocol.client.hooks import (
    FileChange,
    Hooks,
    InvalidEvent,
    SessionHooks,
    ToolCall,
    UnknownToolKind,
)
from ahp_protocol.wire.state import Candidate

__all__ = [
    "SYNTHETIC_DENIAL_PATTERN",
    "Candidate",
    "ChainState",
    "DeclarationError",
    "Denial",
    "Diagnostic",
    "Dispatcher",
    "FailureClass",
    "FileChange",
    "HookResult",
    "Hooks",
    "InvalidEvent",
    "OperationalFailure",
    "RegistrationError",
    "SessionHooks",
    "SyncDispatcher",
    "ToolCall",
    "UnknownToolKind",
    "failure_line",
    "fix_for",
    "synthetic_denial_reason",
]

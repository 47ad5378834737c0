"""The harness's own records: the transcript and the audit log, as JSON lines.

``Transcript`` appends one line per resolved tool call (the fields the README
lists). ``AuditLog`` appends one line per decision and per backend exchange
(failure class, latency, policy), so explicit and synthetic denials stay
distinguishable after the fact. Both append and flush each line, so a crash
loses at most the line being written. Each line is UTF-8 JSON written by the
wire's one writer (:func:`ahp_protocol.wire.jsonrpc.json_bytes`): text that
UTF-8 cannot carry (a lone surrogate in a tool input) is kept, escaped as
``\\ud800``, never a lost record. Neither ever records a credential:
what they are given is already credential-free (events never carry tokens;
diagnostics carry fixed phrases only).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

from ahp_protocol.wire.jsonrpc import json_bytes


class JsonLines:
    """Append-only JSON lines in one file (created with its folder on first use)."""

    def __init__(self, path: str | Path | None) -> None:
        self.path = Path(path) if path else None
        self._file: IO[bytes] | None = None

    def write(self, record: Mapping[str, Any]) -> None:
        if self.path is None:
            return
        if self._file is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._file = self.path.open("ab")
        self._file.write(json_bytes(record, default=str, allow_nan=True) + b"\n")
        self._file.flush()

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


class Transcript(JsonLines):
    """One line per resolved tool call."""


class AuditLog(JsonLines):
    """Every decision and every backend exchange, time-stamped."""

    def record(self, kind: str, record: Mapping[str, Any]) -> None:
        self.write(
            {
                "time": datetime.now(UTC).isoformat(timespec="milliseconds"),
                "kind": kind,
                **record,
            }
        )

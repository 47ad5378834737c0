"""Errors that name where a document is wrong: a JSON path and a fixed reason.

Owns :class:`WireError` (one problem: ``path`` and ``reason``), :class:`WireErrors`
(several), :class:`EffectError` (one invalid effect, with its class of failure) and the
path notation (:func:`json_path`: ``hooks[1].subscriptions[0].failurePolicy``, ``$`` for
the document itself; :func:`rebase`). Reasons never quote secret values. A pydantic
``ValidationError`` becomes wire errors in :func:`ahp_protocol.wire.model.to_wire_errors`.
Standard library only.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Literal

PathPart = str | int
ErrorKind = Literal["malformed", "unknown", "unadvertised", "illegal"]


def json_path(parts: Iterable[PathPart], base: str = "$") -> str:
    """``("hooks", 1, "id") -> "hooks[1].id"``, below ``base`` (a path already
    written, ``$`` for the document itself); the empty path is ``$``."""
    out = "" if base == "$" else base
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out or "$"


def rebase(relative: str, base: str) -> str:
    """The path ``relative``, written inside a nested document, seen from ``base``."""
    if relative == "$":
        return base
    if base == "$":
        return relative
    return base + relative if relative.startswith("[") else f"{base}.{relative}"


class WireError(ValueError):
    """One violation of the wire contract, at a JSON path."""

    def __init__(self, path: str | Sequence[PathPart], reason: str) -> None:
        self.path = path if isinstance(path, str) else json_path(path)
        self.reason = reason
        super().__init__(f"{self.path}: {reason}")

    def at(self, *prefix: PathPart) -> WireError:
        """The same error, seen from an enclosing document."""
        head = json_path(prefix)
        return self if head == "$" else WireError(rebase(self.path, head), self.reason)

    @property
    def first(self) -> WireError:
        """This error: a :class:`WireError` and a :class:`WireErrors` both have a ``first``."""
        return self


class WireErrors(ValueError):
    """Several violations found in one document, first one first."""

    def __init__(self, errors: Sequence[WireError]) -> None:
        if not errors:
            raise ValueError("WireErrors needs at least one error")
        self.errors = list(errors)
        super().__init__("; ".join(str(e) for e in self.errors))

    @property
    def first(self) -> WireError:
        return self.errors[0]


class EffectError(WireError):
    """One invalid effect: where, why, and which class of failure.

    ``kind`` is ``"unknown"`` (unknown effect type, operation, target, field or enum
    value), ``"malformed"`` (wrong shape or value type), ``"illegal"`` (not allowed at
    this event by the draft, or not in this edit context) or ``"unadvertised"`` (legal,
    but not granted by the request's capabilities, including an exhausted continuation
    allowance). Every kind rejects the whole response.
    """

    def __init__(
        self, path: str | Sequence[PathPart], reason: str, kind: ErrorKind = "malformed"
    ) -> None:
        super().__init__(path, reason)
        self.kind: ErrorKind = kind

    def at(self, *prefix: PathPart) -> EffectError:
        moved = super().at(*prefix)
        return EffectError(moved.path, moved.reason, self.kind)

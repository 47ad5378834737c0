"""Errors that name where a document is wrong: a JSON path and a fixed reason.

Owns :class:`WireError` (one problem: ``path`` and ``reason``), the path
notation (``hooks[1].subscriptions[0].failurePolicy``; the document itself is
``$``), and turning a pydantic ``ValidationError`` into wire errors with paths
in wire names. Reasons describe the rule that was broken; they never quote
secret values.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pydantic import ValidationError

PathPart = str | int


def json_path(parts: Iterable[PathPart]) -> str:
    """``("hooks", 1, "id") -> "hooks[1].id"``; the empty path is ``$``."""
    out = ""
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out or "$"


class WireError(ValueError):
    """One violation of the wire contract, at a JSON path."""

    def __init__(self, path: str | Sequence[PathPart], reason: str) -> None:
        self.path = path if isinstance(path, str) else json_path(path)
        self.reason = reason
        super().__init__(f"{self.path}: {reason}")

    def at(self, *prefix: PathPart) -> WireError:
        """The same error, seen from an enclosing document."""
        head = json_path(prefix)
        if self.path == "$":
            return WireError(head, self.reason)
        if head == "$":
            return self
        sep = "" if self.path.startswith("[") else "."
        return WireError(head + sep + self.path, self.reason)


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


def _reason(error: dict[str, Any]) -> str:
    kind = error.get("type", "")
    if kind == "missing":
        return "is required"
    if kind == "extra_forbidden":
        return "is not an allowed field"
    message = str(error.get("msg", "is invalid"))
    # pydantic prefixes custom errors with "Value error, "; the rule is what matters.
    for prefix in ("Value error, ", "Assertion failed, "):
        if message.startswith(prefix):
            message = message[len(prefix) :]
    return message


def from_validation_error(exc: ValidationError, *prefix: PathPart) -> WireErrors:
    """Convert pydantic errors, keeping wire field names (models use aliases).

    Union/tag bookkeeping segments that pydantic inserts into ``loc`` (such as
    the name of a tagged-union member) are dropped when they are not part of
    the document. Input values are never copied into the reason.
    """
    out: list[WireError] = []
    for err in exc.errors(include_url=False, include_input=False):
        loc = [
            p for p in err.get("loc", ()) if not (isinstance(p, str) and p.startswith("function-"))
        ]
        field = loc[-1] if loc and err.get("type") in ("missing", "extra_forbidden") else None
        reason = _reason(dict(err))
        if field is not None:
            path = json_path([*prefix, *loc[:-1]])
            reason = f"{field!s} {reason}" if isinstance(field, str) else reason
            out.append(WireError(path, reason))
        else:
            out.append(WireError(json_path([*prefix, *loc]), reason))
    return WireErrors(out)

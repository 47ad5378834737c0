"""The server kit's memos: verdicts that are pure functions of their key, bounded.

A harness sends the same grant, the same initial state and the same event types again
and again, and a handler usually denies with the same effect: judging those once is
where the kit's speed comes from, never from a second copy of a rule.

- :class:`Memo`: a bounded map (cleared when full), keyed by the exact JSON text of
  what the verdict depends on (:func:`key`); a key that cannot be written or is longer
  than ``max_key`` is not remembered (judged every time).
- :class:`EffectMemo`: the encoded wire form of a handler's effect models, accepted
  under one grant (the grant's key): by the models' string fields when every field is a
  string or ``None`` (no two wire forms share such a key), else by their wire form.
  Plain dicts are judged every time.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final, TypeVar

from ahp_protocol.server._codec import codec

_V = TypeVar("_V")
_UNSET: Final[Any] = object()


class Memo(dict[Any, _V]):
    """At most ``size`` verdicts, each under a key of at most ``max_key`` characters."""

    def __init__(self, size: int, max_key: int) -> None:
        super().__init__()
        self._size, self._max_key = size, max_key
        self._codec = codec()  # its exact key changes once, when the kit accelerates

    def key(self, value: Any) -> str | bytes | None:
        """The exact key of decoded JSON ``value``, or ``None`` (not remembered)."""
        try:
            text = self._codec.exact_key(value)
        except Exception:  # a lone surrogate: judged every time
            return None
        return text if len(text) <= self._max_key else None

    def put(self, key: Any, verdict: _V) -> None:
        if len(self) >= self._size:
            self.clear()
        self[key] = verdict


def _flat_key(effect: Any) -> tuple[Any, ...] | None:
    """What an effect model's wire form is a function of (its class, its field values,
    which fields are set), when every value is a string or ``None``; else ``None``."""
    fields_set = effect.__pydantic_fields_set__
    key: list[Any] = [type(effect)]
    for name, value in effect.__dict__.items():
        if value is not None and type(value) is not str:
            return None
        key.append(value if name in fields_set else _UNSET)
    return tuple(key)


class EffectMemo:
    """Encoded effects accepted under a grant, by the models' wire form."""

    __slots__ = ("_accepted", "_flat_types")

    def __init__(self) -> None:
        self._accepted: Memo[bytes] = Memo(256, 16 * 1024)
        self._flat_types: set[type[Any]] = set()  # classes remembered by flat keys

    def one(self, grant_key: str | bytes, result: Any) -> bytes | None:
        """The accepted encoding of a single effect model returned by a handler (the
        usual repeated deny), or ``None``: then :meth:`key` and the full check."""
        if type(result) not in self._flat_types:
            return None
        return self._accepted.get((grant_key, (_flat_key(result),)))

    def key(self, grant_key: str | bytes, effects: Sequence[Any]) -> tuple[Any, list[Any]]:
        """``(memo key or None, effects to judge)`` for effect models (their wire forms
        when a field is not a string: an exact key, and judged the same)."""
        flat = [_flat_key(e) for e in effects]
        if None not in flat:
            self._flat_types.update(type(e) for e in effects)
            return (grant_key, tuple(flat)), list(effects)
        wire = [e.to_wire() for e in effects]
        text = self._accepted.key(wire)
        return (None if text is None else (grant_key, text)), wire

    def get(self, key: Any) -> bytes | None:
        return self._accepted.get(key)

    def put(self, key: Any, encoded: bytes) -> None:
        self._accepted.put(key, encoded)

"""What a policy rule may read: the fields of the events it applies to, from the wire models.

Owns the field tree of an event type (:func:`event_fields`), derived from the draft's
event models (:data:`ahp_protocol.wire.events.EVENT_MODELS`, wire names such as
``parentEventId``) by :func:`derive_event_fields`: never a hand-kept list, so a field the
draft adds is readable the day the model has it. A field holding a JSON object of any keys
(``tool.input``, ``native``, ``extensions``, ``session.counters``) is open: any key below
it is accepted. A field holding a value (a string, a list, a number) has no fields of its
own.

The derivation needs the event models (pydantic, about 75 ms to import), which a policy
backend started once per event (``lifecycle: per_event``) would pay at every call. So
the derived trees are also written to ``event_fields.json`` beside this module, which
:func:`event_fields` reads; the file is output, not a source: ``python -m
ahp_backends.policy_fields`` rewrites it from the models, and a test fails, naming that
command, whenever the file and the models differ.

Also owns the check of one ``when`` expression's reads (:func:`unknown_read`): each
``event.a.b`` (and ``call.x``, :data:`CALL_FIELDS`) chain the expression reads, found
outside string literals and comments, is looked up in the trees of the rule's events; the
first chain no event has is reported with the closest real name (``difflib``). A chain
through an index (``event.tool.input["x"]``) is checked up to the index; an expression
that names a comprehension variable ``event`` or ``call`` is not checked for that name.
Never evaluates anything and never reads an event.
"""

from __future__ import annotations

import difflib
import functools
import json
import re
import sys
import types
import typing
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Union

__all__ = [
    "CALL_FIELDS",
    "FIELDS_FILE",
    "Read",
    "UnknownRead",
    "derive_event_fields",
    "event_fields",
    "field_reads",
    "unknown_read",
]

FIELDS_FILE: Final = Path(__file__).with_name("event_fields.json")
"""The derived trees of every standard event type (:func:`derive_event_fields`)."""

Tree = Mapping[str, "Tree | None"]
"""The fields below a field, by wire name; ``None`` for a field open to any key."""

CALL_FIELDS: Final[Tree] = {"command": {}, "paths": {}}
"""The fields of ``call`` (:mod:`ahp_backends.tool_call`): values, no fields below."""


def _tree(annotation: Any, seen: frozenset[type] = frozenset()) -> Tree | None:
    from pydantic import BaseModel  # only here: deriving needs the models, reading does not

    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _tree(typing.get_args(annotation)[0], seen)
    if origin in (Union, types.UnionType):
        merged: dict[str, Tree | None] = {}
        for member in typing.get_args(annotation):
            if member is type(None):
                continue
            tree = _tree(member, seen)
            if tree is None:
                return None
            for name, below in tree.items():
                if name in merged and merged[name] != below:
                    merged[name] = _union(merged[name], below)
                else:
                    merged[name] = below
        return merged
    if annotation is Any or annotation is dict or origin is dict:
        return None
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        if annotation in seen:
            return None
        inner = seen | {annotation}
        return {
            field.alias or name: _tree(field.annotation, inner)
            for name, field in annotation.model_fields.items()
        }
    return {}  # a value: a string, a number, a list, a literal


def _union(a: Tree | None, b: Tree | None) -> Tree | None:
    if a is None or b is None:
        return None
    out = dict(a)
    for name, below in b.items():
        out[name] = _union(out[name], below) if name in out else below
    return out


def derive_event_fields() -> dict[str, Tree]:
    """The field tree of every standard event type, from its model."""
    from ahp_protocol.wire.events import EVENT_MODELS

    trees: dict[str, Tree] = {}
    for event_type, model in sorted(EVENT_MODELS.items()):
        tree = _tree(model)
        assert tree is not None
        trees[event_type] = tree
    return trees


@functools.cache
def _written() -> dict[str, Tree]:
    trees: dict[str, Tree] = json.loads(FIELDS_FILE.read_text("utf-8"))
    return trees


def event_fields(event_type: str) -> Tree:
    """The field tree of ``event_type``'s model (``KeyError`` for no standard event)."""
    return _written()[event_type]


# --------------------------------------------------------------------------- reads

_STRING = re.compile(r"(?:[rR][bB]?|[bB][rR]?)?(\"\"\"|'''|\"|')")
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_STEP = re.compile(r"\s*\.\s*([A-Za-z_][A-Za-z0-9_]*)")
_CALL = re.compile(r"\s*\(")
ROOTS: Final = ("event", "call")


@dataclass(frozen=True, slots=True)
class Read:
    """One field chain an expression reads: ``root.path[0].path[1]...``."""

    root: str
    path: tuple[str, ...]

    def __str__(self) -> str:
        return ".".join((self.root, *self.path))


def _skip_string(source: str, i: int) -> int | None:
    found = _STRING.match(source, i)
    if found is None:
        return None
    quote, raw = found.group(1), "r" in source[i : found.start(1)].lower()
    j = found.end()
    while j < len(source):
        if source.startswith(quote, j):
            return j + len(quote)
        if source[j] == "\\" and not raw:
            j += 2
            continue
        j += 1
    return len(source)


def field_reads(expression: str) -> Iterator[Read]:
    """Every ``event.…``/``call.…`` chain in ``expression``, in order (a trailing method
    call such as ``.matches(`` is not a field; a root used as a comprehension variable,
    ``x.exists(event, ...)``, is not reported)."""
    shadowed = {r for r in ROOTS if re.search(rf"\(\s*{r}\s*,", expression)}
    i, n = 0, len(expression)
    while i < n:
        c = expression[i]
        if c in "\"'rRbB":
            end = _skip_string(expression, i)
            if end is not None:
                i = end
                continue
        if expression.startswith("//", i):
            newline = expression.find("\n", i)
            i = n if newline == -1 else newline
            continue
        ident = _IDENT.match(expression, i) if c.isalpha() or c == "_" else None
        if ident is None:
            i += 1
            continue
        word, start, i = ident.group(), i, ident.end()
        if word not in ROOTS or word in shadowed or expression[:start].rstrip().endswith("."):
            continue
        path: list[str] = []
        while (step := _STEP.match(expression, i)) is not None:
            if _CALL.match(expression, step.end()):
                break  # a method: event.tool.name.startswith(...)
            path.append(step.group(1))
            i = step.end()
        yield Read(word, tuple(path))


@dataclass(frozen=True, slots=True)
class UnknownRead:
    """A chain none of the rule's events has: what it reads, where it stops, the hint."""

    read: Read
    known: str  # the part that exists, e.g. "event.tool"
    missing: str  # the first name that does not, e.g. "knid"
    suggestion: str | None  # the closest real chain, e.g. "event.tool.kind"
    has_fields: bool  # False: the known part is a value with no fields at all

    def describe(self, event_types: Sequence[str]) -> str:
        where = " or ".join(event_types)
        if not self.has_fields:
            text = f"{self.read} reads a field of {self.known}, which has none at {where}"
        else:
            text = f"{self.read}: {self.known} has no field {self.missing!r} at {where}"
        if self.suggestion is not None:
            text += f" (did you mean {self.suggestion}?)"
        return text


def _lookup(read: Read, tree: Tree | None) -> tuple[int, Tree | None] | None:
    """``None`` when ``read`` exists in ``tree``; else how far it got and the tree there."""
    for depth, name in enumerate(read.path):
        if tree is None:
            return None
        if name not in tree:
            return depth, tree
        tree = tree[name]
    return None


def unknown_read(expression: str, event_types: Iterable[str]) -> UnknownRead | None:
    """The first read of ``expression`` that no event of ``event_types`` has, or ``None``."""
    trees = {"event": [event_fields(t) for t in event_types], "call": [CALL_FIELDS]}
    for read in field_reads(expression):
        misses = [_lookup(read, tree) for tree in trees[read.root]]
        if any(miss is None for miss in misses):
            continue
        depth, _ = max((m for m in misses if m is not None), key=lambda m: m[0])
        names = sorted({name for m in misses if m and m[0] == depth for name in m[1] or {}})
        known = ".".join((read.root, *read.path[:depth]))
        close = difflib.get_close_matches(read.path[depth], names, n=1)
        return UnknownRead(
            read,
            known,
            read.path[depth],
            f"{known}.{close[0]}" if close else None,
            bool(names),
        )
    return None


def write_fields_file() -> None:
    """Rewrite :data:`FIELDS_FILE` from the models (after the draft's events change)."""
    text = json.dumps(derive_event_fields(), indent=1, sort_keys=True) + "\n"
    FIELDS_FILE.write_text(text, "utf-8")


if __name__ == "__main__":  # python -m ahp_backends.policy_fields
    write_fields_file()
    print(f"wrote {FIELDS_FILE}", file=sys.stderr)

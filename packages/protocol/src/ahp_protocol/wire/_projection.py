"""Projection: the view of one event that a subscription's content selection allows.

Owns :func:`project_event` (AHP-CONTENT-002), :func:`part_category` and :data:`CATEGORIES`.
Works on plain JSON (the event as received), never on models, and never reads into
``native``. No I/O, no pydantic: it is on every intercept's path.
"""

import copy
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

from ahp_protocol.wire.errors import PathPart, json_path

__all__ = ["CATEGORIES", "WITHHELD_REASON", "part_category", "project_event"]

CATEGORIES: Final = ("text", "reasoning", "images", "audio", "video", "files")
"""The selection categories the draft names; any other explicit category is allowed too."""

_RANK: Final[Mapping[str, int]] = {"omit": 0, "metadata": 1, "body": 2}

_PART_SLOTS: Final[tuple[tuple[str, ...], ...]] = (
    # Lists whose entries are messages or bare parts (told apart by shape).
    ("items", "*"),
    ("message", "messages", "*"),
    ("summary", "*"),
    ("instructions", "*"),
    ("attention", "message", "*"),
    ("attention", "title", "*"),
    # Single messages or parts.
    ("partialOutput",),
    ("delta",),
    ("elicitation", "request"),
    ("elicitation", "result"),
    ("changes", "*", "before"),
    ("changes", "*", "after"),
    ("fileChanges", "*", "before"),
    ("fileChanges", "*", "after"),
)
"""Every place the catalogue puts content (messages or parts), for every event type."""

_OPEN_JSON_SLOTS: Final[tuple[tuple[str, ...], ...]] = (
    ("tool", "input"),
    ("calls", "*", "tool", "input"),
    ("params",),
    ("task", "change"),
    ("task", "prior"),
    ("suggestions",),
    ("change", "mcpServers"),
    ("extensions",),
)
"""Open JSON that may hold a duplicate of a withheld body (AHP-CONTENT-002)."""

_METADATA_KEYS: Final = ("id", "kind", "mediaType", "category", "synthesized", "size", "sha256")
_OMIT_KEYS: Final = ("id", "kind", "mediaType", "category", "synthesized")
_MIN_EMBEDDED: Final = 32
"""A withheld body this long is also withheld when embedded in a longer string."""
WITHHELD_REASON: Final = "withheld by content selection"


def part_category(part: Mapping[str, Any]) -> str:
    """A part's selection category: explicit ``category``, else ``text`` for text parts,
    else ``images``, ``audio`` or ``video`` by media type family, else ``files``."""
    category = part.get("category")
    if isinstance(category, str) and category:
        return category
    if part.get("kind") == "text":
        return "text"
    media = part.get("mediaType")
    family = media.split("/", 1)[0].lower() if isinstance(media, str) else ""
    return {"image": "images", "audio": "audio", "video": "video"}.get(family, "files")


def _mode(selection: Mapping[str, str], category: str) -> str:
    mode = selection.get(category, selection.get("default"))
    return mode if isinstance(mode, str) and mode in _RANK else "omit"


def _allows_native(selection: Mapping[str, str]) -> bool:
    return "default" in selection and all(v == "body" for v in selection.values())


class _Projector:
    def __init__(self, selection: Mapping[str, str]) -> None:
        self.selection = selection
        self.withheld: set[str] = set()
        self._long: list[str] | None = None  # the long withheld bodies, once all are seen

    def part(self, part: dict[str, Any]) -> dict[str, Any]:
        current = part.get("selection")
        if not isinstance(current, str) or current not in _RANK:
            current = "omit"
        mode = min(_mode(self.selection, part_category(part)), current, key=_RANK.__getitem__)
        if mode == "body":
            return part
        text = part.get("text")
        if isinstance(text, str) and text:
            self.withheld.add(text)
        body = part.get("body")
        if isinstance(body, Mapping) and isinstance(body.get("ref"), str) and body["ref"]:
            self.withheld.add(body["ref"])
        keys = _METADATA_KEYS if mode == "metadata" else _OMIT_KEYS
        view = {k: part[k] for k in keys if k in part}
        view["selection"] = mode
        if mode == "metadata" and "size" not in view and isinstance(text, str):
            view["size"] = len(text.encode("utf-8"))
        return view

    def node(self, node: Any, _where: list[PathPart]) -> Any:
        if not isinstance(node, dict):
            return node
        if "kind" in node or "selection" in node:
            return self.part(node)
        parts = node.get("parts")
        if isinstance(parts, list):
            node["parts"] = [self.part(p) if isinstance(p, dict) else p for p in parts]
        return node

    def scrub(self, value: Any, where: list[PathPart], scrubbed: list[str]) -> Any:
        """Blank every string in ``value`` that duplicates a withheld body (run after every
        part was projected, so the long bodies are listed once)."""
        long = self._long
        if long is None:
            long = self._long = [w for w in self.withheld if len(w) >= _MIN_EMBEDDED]

        def hit(s: str) -> bool:
            return s in self.withheld or any(w in s for w in long)

        if isinstance(value, str):
            if hit(value):
                scrubbed.append(json_path(where))
                return ""
            return value
        if isinstance(value, dict):
            for key in list(value):
                value[key] = self.scrub(value[key], [*where, str(key)], scrubbed)
        elif isinstance(value, list):
            for i in range(len(value)):
                value[i] = self.scrub(value[i], [*where, i], scrubbed)
        return value


def _visit(
    value: Any,
    path: Sequence[str],
    apply: Callable[[Any, list[PathPart]], Any],
    where: list[PathPart],
) -> Any:
    """Replace every value at ``path`` (``*`` = each list entry) by ``apply(value, its path)``."""
    if not path:
        return apply(value, where)
    head, rest = path[0], path[1:]
    if head == "*":
        if isinstance(value, list):
            for i, child in enumerate(value):
                value[i] = _visit(child, rest, apply, [*where, i])
    elif isinstance(value, dict) and head in value:
        value[head] = _visit(value[head], rest, apply, [*where, head])
    return value


def _copy_json(value: Any) -> Any:
    """A deep copy of a JSON value (``copy.deepcopy`` for anything else)."""
    if isinstance(value, dict):
        return {key: _copy_json(child) for key, child in value.items()}
    if isinstance(value, list):
        return [_copy_json(child) for child in value]
    if value is None or isinstance(value, (str, int, float)):
        return value
    return copy.deepcopy(value)


def _drop_native(event: dict[str, Any]) -> None:
    event.pop("native", None)
    error = event.get("error")
    if isinstance(error, dict):
        error.pop("native", None)


def project_event(
    event: Mapping[str, Any], selection: Mapping[str, str], *, include_native: bool = False
) -> dict[str, Any]:
    """The view of ``event`` that a content selection allows; ``event`` is not changed.

    A deep copy in which every content part, wherever the catalogue puts content
    (:data:`_PART_SLOTS`), is shown as its category's selection allows: ``body`` keeps
    the part; ``metadata`` becomes ``{id, kind, mediaType, category?, synthesized?,
    size?, sha256?, selection: "metadata"}`` (a text body's ``size`` is its UTF-8
    length; no digest is computed); ``omit`` the same without ``size`` and ``sha256``.
    A view never carries ``text``, ``body`` or ``gap``, and a selection never upgrades
    a part. A category the selection does not list uses ``default``; a missing or
    unknown selection value counts as ``omit``.

    ``native`` (top level and in ``error``) is dropped unless ``include_native`` and
    every value of the selection, ``default`` included, is ``body``. In the open JSON
    slots (:data:`_OPEN_JSON_SLOTS`: tool input, ``params``, ``extensions``, ...) every
    string that equals a withheld text body or attachment ref, or contains a withheld
    body of at least 32 characters, becomes ``""`` and is named in ``gaps`` (reason
    ``"withheld by content selection"``); the tool input otherwise stays whole, as it
    is the operation that policy decides on.
    """
    source = dict(event)
    keep_native = include_native and _allows_native(selection)
    if not keep_native:
        source.pop("native", None)  # before the copy: a native payload can be most of an event
    projected: dict[str, Any] = _copy_json(source)
    projector = _Projector(selection)
    for slot in _PART_SLOTS:
        _visit(projected, slot, projector.node, [])
    if not keep_native:
        _drop_native(projected)
    if projector.withheld:
        scrubbed: list[str] = []
        for slot in _OPEN_JSON_SLOTS:
            _visit(projected, slot, lambda v, w: projector.scrub(v, w, scrubbed), [])
        if scrubbed:
            gaps = projected.get("gaps")
            if not isinstance(gaps, list):
                gaps = projected["gaps"] = []
            gaps.extend({"path": p, "reason": WITHHELD_REASON} for p in scrubbed)
    return projected

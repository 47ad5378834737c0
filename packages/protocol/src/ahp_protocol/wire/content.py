"""Canonical content: messages and parts, their views, and projection by selection.

Owns the draft's content shapes (§10, ``content-item.schema.json``): the
canonical :class:`Message` ``{id, role, parts, synthesized?}`` and the eight
closed part variants (text or attachment, each as a body, a body gap, a
metadata view or an omitted view); parsing them with JSON paths
(:func:`parse_messages`, :func:`parse_parts`, :func:`parse_text_parts`); the
category of a part; and :func:`project_event`, which turns one event into the
view a subscription's content selection allows (AHP-CONTENT-002).

Also owns the small shared pieces of every wire model here and in
:mod:`ahp_protocol.wire.events`: the pydantic bases (closed and open objects),
strict JSON scalar types, and turning a pydantic ``ValidationError`` into
:class:`~ahp_protocol.wire.errors.WireErrors` whose paths are wire paths.

Never does I/O, never uploads or dereferences a content ``ref``, never hashes
text on its own initiative (a digest of short text can be reversed by
guessing), and never reads into opaque ``native`` JSON: projection drops it
instead. Parsing is strict (no coercion: ``"true"`` is not a boolean) and
native where it can be: nullability is in the types (:data:`Omittable`) and
patterns are pydantic-core constraints (:func:`native_pattern`), so a valid
object runs Python only for the rules that need it (per-event hot path cost).
"""

import copy
import hashlib
import math
import re
from collections.abc import Callable, Mapping, Sequence
from functools import cache
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Final, Literal, TypeAlias, TypeVar

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    PlainValidator,
    StringConstraints,
    Tag,
    ValidationError,
    ValidationInfo,
    model_validator,
)
from pydantic.alias_generators import to_camel
from pydantic_core import PydanticCustomError

from ahp_protocol.wire.errors import PathPart, WireError, WireErrors, json_path

if TYPE_CHECKING:
    from pydantic import TypeAdapter

__all__ = [
    "CATEGORIES",
    "RULE_ERROR",
    "WIRE_CONTEXT",
    "WITHHELD_REASON",
    "AssistantMessage",
    "AttachmentBodyPart",
    "AttachmentGapPart",
    "AttachmentMetadataPart",
    "AttachmentOmittedPart",
    "ClosedModel",
    "ContentItem",
    "ContentReference",
    "Message",
    "NonEmptyStr",
    "NonNegativeInt",
    "NonNegativeNumber",
    "Omittable",
    "OpenModel",
    "PartGap",
    "PositiveInt",
    "Sha256",
    "TextBodyPart",
    "TextGapPart",
    "TextMetadataPart",
    "TextOmittedPart",
    "TextPart",
    "UserMessage",
    "WireConstants",
    "content_hash",
    "is_attachment_media_type",
    "native_pattern",
    "parse_messages",
    "parse_part",
    "parse_parts",
    "parse_text_parts",
    "part_category",
    "project_event",
    "rule",
    "to_wire_errors",
    "union_tag",
    "unknown_stay_unknown",
    "validate_wire",
]

# --------------------------------------------------------------------------- errors

RULE_ERROR: Final = "ahp_rule"
"""pydantic error type of a broken wire rule; ``ctx["at"]`` names the field inside the object."""

_TAGS: set[str] = set()
"""Union tags pydantic puts into error locations; they are not part of the document."""


def rule(reason: str, *at: PathPart) -> PydanticCustomError:
    """An error for a broken conditional rule, at ``at`` inside the object being validated.

    Raise it from a validator. ``reason`` is a fixed text naming the rule; it
    must never contain input values.
    """
    return PydanticCustomError(RULE_ERROR, "{reason}", {"reason": reason, "at": tuple(at)})


def union_tag(name: str) -> Tag:
    """A tag for a member of a discriminated union; it never shows in error paths."""
    _TAGS.add(name)
    return Tag(name)


_TYPE_REASONS: Final[Mapping[str, str]] = {
    "string_type": "must be a string",
    "bool_type": "must be a boolean",
    "int_type": "must be an integer",
    "float_type": "must be a number",
    "dict_type": "must be an object",
    "model_type": "must be an object",
    "model_attributes_type": "must be an object",
    "list_type": "must be an array",
    "string_pattern_mismatch": "does not match the required pattern",
    "set_type": "must be an array",
}


def _reason(err: Mapping[str, Any]) -> str:
    kind = str(err.get("type", ""))
    ctx: Mapping[str, Any] = err.get("ctx") or {}
    if kind in _TYPE_REASONS:
        return _TYPE_REASONS[kind]
    if kind == "string_too_short":
        return "must not be empty" if ctx.get("min_length") == 1 else "is too short"
    if kind == "too_short":
        n = ctx.get("min_length")
        return f"must have at least {n} item{'s' if n != 1 else ''}"
    if kind == "greater_than_equal":
        return f"must be >= {ctx.get('ge')}"
    message = str(err.get("msg", "is invalid"))
    for prefix in ("Value error, ", "Assertion failed, "):
        if message.startswith(prefix):
            message = message[len(prefix) :]
    if message.startswith("Input should be "):
        message = "must be " + message[len("Input should be ") :]
    return message


_PATTERN_REASONS: dict[str, Callable[[object], str]] = {}
"""Native ``pattern`` constraints whose mismatch has its own reason (by pattern text)."""

_ANY_INPUT: Final = object()


def native_pattern(pattern: str, reason: Callable[[object], str]) -> Any:
    """A string constraint checked by pydantic-core (no Python runs on valid input).

    ``pattern`` must be anchored (``^...$``; pydantic-core searches). When a value
    does not match, the wire error reads ``reason(value)``: a fixed text chosen by
    looking at the value, never quoting it.
    """
    _PATTERN_REASONS[pattern] = reason
    return StringConstraints(pattern=pattern)


def to_wire_errors(exc: ValidationError, *prefix: PathPart) -> WireErrors:
    """Wire errors for a pydantic failure of one of our models, paths in wire names.

    Like :func:`ahp_protocol.wire.errors.from_validation_error`, plus: union
    tags are dropped from paths, a broken conditional rule (:func:`rule`) is
    reported at the field it names, type errors read as rules ("must be an
    object"), and a named field given as ``null`` reads "must not be null". A
    missing field is reported at its object: ``call: id is required``. Input
    values are never copied into a reason.
    """
    out: list[WireError] = []
    for err in exc.errors(include_url=False, include_input=True):
        loc: list[PathPart] = [
            p
            for p in err.get("loc", ())
            if not (isinstance(p, str) and (p in _TAGS or p.startswith("function-")))
        ]
        kind = err.get("type")
        ctx: Mapping[str, Any] = err.get("ctx") or {}
        value = err.get("input", _ANY_INPUT)
        if kind in ("missing", "extra_forbidden") and loc and isinstance(loc[-1], str):
            what = "is required" if kind == "missing" else "is not an allowed field"
            out.append(WireError(json_path([*prefix, *loc[:-1]]), f"{loc[-1]} {what}"))
        elif value is None and loc and isinstance(loc[-1], str):
            out.append(WireError(json_path([*prefix, *loc]), "must not be null"))
        elif kind == RULE_ERROR:
            loc.extend(ctx.get("at", ()))
            out.append(WireError(json_path([*prefix, *loc]), str(ctx.get("reason", "is invalid"))))
        elif kind == "string_pattern_mismatch" and ctx.get("pattern") in _PATTERN_REASONS:
            reason = _PATTERN_REASONS[ctx["pattern"]](value)
            out.append(WireError(json_path([*prefix, *loc]), reason))
        else:
            out.append(WireError(json_path([*prefix, *loc]), _reason(dict(err))))
    return WireErrors(out)


# --------------------------------------------------------------------------- bases

WIRE_CONTEXT: Final[Mapping[str, Any]] = {"ahp": "wire"}
"""Validation context meaning "this is wire JSON" (constant fields must be present)."""

_BASE_CONFIG: Final = ConfigDict(
    alias_generator=to_camel,
    populate_by_name=True,
    strict=True,
    defer_build=True,
    allow_inf_nan=False,
)

_T = TypeVar("_T")

if TYPE_CHECKING:
    Omittable: TypeAlias = _T | None
else:

    class Omittable:
        """``Omittable[X]``: a field that may be left out, and is never ``null`` when given.

        Typed ``X | None`` for type checkers (``None`` means "absent"); at run time it is
        just ``X``, so pydantic-core itself rejects an explicit ``null`` and the default
        ``None`` is never validated. No Python runs per field.
        """

        def __class_getitem__(cls, item: Any) -> Any:
            return item


class ClosedModel(BaseModel):
    """A closed wire object (``additionalProperties: false``): unknown fields are errors.

    Wire names on the wire (``mediaType``), Python names at the API
    (``media_type``). Validation is strict and native (no Python runs per
    field): an optional field is declared ``Omittable[X] = None``, so it may be
    left out but an explicit ``null`` is an error ("must not be null"); a field
    that may be ``null`` says so in its type (``Any``). Constant fields (``kind``,
    ``type``, ...) live on :class:`WireConstants` subclasses.
    """

    model_config = ConfigDict(**_BASE_CONFIG, extra="forbid")

    _always: ClassVar[frozenset[str]] = frozenset()
    """Constant fields (see :class:`WireConstants`); empty here."""

    def to_wire(self) -> dict[str, Any]:
        """The object as wire JSON: wire names, only the fields that were given."""
        return self.model_dump(by_alias=True, exclude_unset=True)


class WireConstants(ClosedModel):
    """A closed object with constant fields (``_always``: ``kind``, ``status``, ...).

    The constants have defaults for convenience in Python, are required in wire
    JSON (validated with :data:`WIRE_CONTEXT`, as every ``parse_*`` function here
    does) and are always written by :meth:`to_wire`.
    """

    @model_validator(mode="before")
    @classmethod
    def _constants_given(cls, data: Any, info: ValidationInfo) -> Any:
        if info.context is WIRE_CONTEXT and isinstance(data, Mapping):
            for wire in _constant_names(cls):
                if wire not in data:
                    raise rule(f"{wire} is required")
        return data

    def model_post_init(self, context: Any, /) -> None:
        self.__pydantic_fields_set__.update(self._always)


class OpenModel(ClosedModel):
    """An open wire object: unknown fields are kept and round-trip unchanged.

    A key spelled like a Python name (``parent_event_id``) is an unknown wire
    field: it lands in the extras and must not count as the real field given.
    pydantic counts every extra key as "set", so :func:`unknown_stay_unknown`
    puts that right for a validated object (``parse_event`` does it once for the
    envelope and its ``session``, the open objects that have renamed fields).
    """

    model_config = ConfigDict(**_BASE_CONFIG, extra="allow")


@cache
def _constant_names(cls: type[ClosedModel]) -> tuple[str, ...]:
    """Wire names of a class's constants, in a fixed order (sorted by Python name)."""
    return tuple(cls.model_fields[name].alias or name for name in sorted(cls._always))


@cache
def _renamed_fields(cls: type[ClosedModel]) -> tuple[tuple[str, str], ...]:
    """``(python name, wire name)`` of the fields whose names differ."""
    return tuple(
        (name, field.alias)
        for name, field in cls.model_fields.items()
        if field.alias is not None and field.alias != name
    )


def unknown_stay_unknown(model: OpenModel, data: Mapping[str, Any]) -> None:
    """Unmark fields that only an unknown Python-spelled key made look given.

    ``data`` is the wire object ``model`` was validated from. A no-op unless the
    object has extras (cheap to call on every validated object).
    """
    extra = model.__pydantic_extra__
    if not extra:
        return
    for name, alias in _renamed_fields(type(model)):
        if name in extra and alias not in data:
            model.__pydantic_fields_set__.discard(name)


def validate_wire(adapter: "TypeAdapter[Any]", value: object, *prefix: PathPart) -> Any:
    """Validate wire JSON (wire names only, strict) or raise :class:`WireErrors`."""
    try:
        return adapter.validate_python(
            value, strict=True, by_alias=True, by_name=False, context=WIRE_CONTEXT
        )
    except ValidationError as exc:
        raise to_wire_errors(exc, *prefix) from None


# --------------------------------------------------------------------------- scalars

_SHA256 = re.compile(r"[a-f0-9]{64}")
_ATTACHMENT_FORBIDDEN = re.compile(
    r"^(?:[Tt][Ee][Xx][Tt]/|[^/]+/(?:[^;]+\+)?[Jj][Ss][Oo][Nn](?:;|$))"
)


def _sha256(value: str) -> str:
    if not _SHA256.fullmatch(value):
        raise rule("must be 64 lowercase hex digits (SHA-256)")
    return value


def is_attachment_media_type(media_type: str) -> bool:
    """Whether an attachment may have this media type (not text, not JSON)."""
    return bool(media_type) and not _ATTACHMENT_FORBIDDEN.search(media_type)


def _attachment_media_type(value: str) -> str:
    if not _ATTACHMENT_FORBIDDEN.search(value):
        return value
    raise rule(
        "an attachment cannot be text or JSON (text is inline; JSON is serialized into text)"
    )


def _number(minimum: float | None) -> Callable[[object], int | float]:
    def check(value: object) -> int | float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise rule("must be a number")
        if isinstance(value, float) and not math.isfinite(value):
            raise rule("must be a finite number")
        if minimum is not None and value < minimum:
            raise rule(f"must be >= {minimum:g}")
        return value

    return check


NonEmptyStr: TypeAlias = Annotated[str, Field(min_length=1)]
NonNegativeInt: TypeAlias = Annotated[int, Field(ge=0)]
PositiveInt: TypeAlias = Annotated[int, Field(ge=1)]
NonNegativeNumber: TypeAlias = Annotated[int | float, PlainValidator(_number(0))]
Sha256: TypeAlias = Annotated[str, AfterValidator(_sha256)]
AttachmentMediaType: TypeAlias = Annotated[NonEmptyStr, AfterValidator(_attachment_media_type)]

# --------------------------------------------------------------------------- parts

Role = Literal["system", "developer", "user", "assistant", "tool"]
Selection = Literal["body", "metadata", "omit"]


class ContentReference(ClosedModel):
    """``{ref}``: receiver-allocated, immutable, opaque; never a URL, never size or digest."""

    ref: NonEmptyStr


class PartGap(ClosedModel):
    """Why a selected body is missing: ``{reason, path?}``."""

    reason: NonEmptyStr
    path: Omittable[NonEmptyStr] = None


class _Part(WireConstants):
    _always = frozenset({"kind", "media_type", "selection"})

    id: NonEmptyStr
    category: Omittable[NonEmptyStr] = None
    synthesized: Omittable[bool] = None


class _TextPart(_Part):
    kind: Literal["text"] = "text"
    media_type: Literal["text/plain"] = "text/plain"


class _AttachmentPart(_Part):
    kind: Literal["attachment"] = "attachment"
    media_type: AttachmentMediaType


class TextBodyPart(_TextPart):
    """Inline text: ``{selection: "body", text}``; never carries ``size``/``sha256``."""

    selection: Literal["body"] = "body"
    text: str


class TextGapPart(_TextPart):
    """A selected text body that is missing, with the reason."""

    selection: Literal["body"] = "body"
    gap: PartGap
    size: Omittable[NonNegativeInt] = None
    sha256: Omittable[Sha256] = None


class TextMetadataPart(_TextPart):
    """Text described, not carried."""

    selection: Literal["metadata"] = "metadata"
    size: Omittable[NonNegativeInt] = None
    sha256: Omittable[Sha256] = None


class TextOmittedPart(_TextPart):
    """Text left out on purpose."""

    selection: Literal["omit"] = "omit"
    size: Omittable[NonNegativeInt] = None
    sha256: Omittable[Sha256] = None


class AttachmentBodyPart(_AttachmentPart):
    """Non-text media by reference: ``{selection: "body", body: {ref}}``; no size/digest."""

    selection: Literal["body"] = "body"
    body: ContentReference


class AttachmentGapPart(_AttachmentPart):
    selection: Literal["body"] = "body"
    gap: PartGap
    size: Omittable[NonNegativeInt] = None
    sha256: Omittable[Sha256] = None


class AttachmentMetadataPart(_AttachmentPart):
    selection: Literal["metadata"] = "metadata"
    size: Omittable[NonNegativeInt] = None
    sha256: Omittable[Sha256] = None


class AttachmentOmittedPart(_AttachmentPart):
    selection: Literal["omit"] = "omit"
    size: Omittable[NonNegativeInt] = None
    sha256: Omittable[Sha256] = None


def _field(value: Any, wire: str, python: str) -> Any:
    if isinstance(value, Mapping):
        return value.get(wire)
    return getattr(value, python, None)


def _part_tag(value: Any) -> str | None:
    kind = _field(value, "kind", "kind")
    selection = _field(value, "selection", "selection")
    if kind not in ("text", "attachment") or selection not in ("body", "metadata", "omit"):
        return None
    if selection == "body":
        has_gap = ("gap" in value) if isinstance(value, Mapping) else hasattr(value, "gap")
        return f"{kind}:gap" if has_gap else f"{kind}:body"
    return f"{kind}:{selection}"


_PART_ERROR: Final = (
    'must be a content part: kind "text" or "attachment" and selection "body", "metadata" or "omit"'
)
_TEXT_PART_ERROR: Final = (
    'must be a text part: kind "text" and selection "body", "metadata" or "omit"'
)


def _text_part_tag(value: Any) -> str | None:
    tag = _part_tag(value)
    return tag if tag is not None and tag.startswith("text:") else None


TextPart: TypeAlias = Annotated[
    Annotated[TextBodyPart, union_tag("text:body")]
    | Annotated[TextGapPart, union_tag("text:gap")]
    | Annotated[TextMetadataPart, union_tag("text:metadata")]
    | Annotated[TextOmittedPart, union_tag("text:omit")],
    Discriminator(
        _text_part_tag, custom_error_type="invalid_text_part", custom_error_message=_TEXT_PART_ERROR
    ),
]
"""One selection-aware text part (text-part-list slots: summary, instructions, attention)."""

ContentItem: TypeAlias = Annotated[
    Annotated[TextBodyPart, union_tag("text:body")]
    | Annotated[TextGapPart, union_tag("text:gap")]
    | Annotated[TextMetadataPart, union_tag("text:metadata")]
    | Annotated[TextOmittedPart, union_tag("text:omit")]
    | Annotated[AttachmentBodyPart, union_tag("attachment:body")]
    | Annotated[AttachmentGapPart, union_tag("attachment:gap")]
    | Annotated[AttachmentMetadataPart, union_tag("attachment:metadata")]
    | Annotated[AttachmentOmittedPart, union_tag("attachment:omit")],
    Discriminator(_part_tag, custom_error_type="invalid_part", custom_error_message=_PART_ERROR),
]
"""One selection-aware content part, text or attachment."""


class Message(ClosedModel):
    """A canonical message: roles belong to messages, never to parts; order matters."""

    id: NonEmptyStr
    role: Role
    parts: list[ContentItem]
    synthesized: Omittable[bool] = None


class UserMessage(Message):
    """A message at ``user.message.inbound``: its role is ``user``."""

    role: Literal["user"]


class AssistantMessage(Message):
    """A message at ``user.message.outbound``: its role is ``assistant``."""

    role: Literal["assistant"]


@cache
def _adapter(kind: str) -> "TypeAdapter[Any]":
    from pydantic import TypeAdapter  # on first use: no per-event backend needs it

    types: dict[str, Any] = {
        "messages": list[Message],
        "parts": list[ContentItem],
        "text_parts": list[TextPart],
        "part": ContentItem,
    }
    return TypeAdapter(types[kind])


def parse_messages(value: object) -> list[Message]:
    """A canonical message list, or :class:`WireErrors` with paths like ``[0].parts[1].text``."""
    result: list[Message] = validate_wire(_adapter("messages"), value)
    return result


def parse_parts(value: object) -> list[ContentItem]:
    """A list of bare content parts (generic slots: ``tool.before.items``, ...)."""
    result: list[ContentItem] = validate_wire(_adapter("parts"), value)
    return result


def parse_text_parts(value: object) -> list[TextPart]:
    """A text-part list (``summary``, ``instructions``): attachments are errors here."""
    result: list[TextPart] = validate_wire(_adapter("text_parts"), value)
    return result


def parse_part(value: object) -> ContentItem:
    """One content part (``file.changed`` snapshots, elicitation request/result)."""
    result: ContentItem = validate_wire(_adapter("part"), value)
    return result


def content_hash(text: str) -> str:
    """SHA-256 of the UTF-8 bytes of ``text``, 64 lowercase hex digits."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


# --------------------------------------------------------------------------- projection

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
    """A part's selection category: explicit ``category``, else by media type.

    Text parts are ``text``; attachments are ``images``, ``audio``, ``video``
    by media type family, else ``files``. (A category the selection does not
    list falls back to its ``default``; see :func:`project_event`.)
    """
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
        """Blank every string in ``value`` that duplicates a withheld body.

        Runs after every part was projected: the long bodies are listed once (not once
        per node). Looking for them inside a string costs its length times their number.
        """
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
    """A deep copy of a JSON value (``copy.deepcopy`` for anything else): several times faster
    than ``deepcopy`` on events, which are JSON, and on every intercept's path."""
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

    Returns a deep copy in which every content part, wherever the catalogue
    puts content (``items``, ``message.messages``, ``summary``,
    ``instructions``, ``attention``, ``partialOutput``, ``delta``,
    ``elicitation.request``/``result``, ``changes[].before``/``after``,
    ``fileChanges[].before``/``after``), is shown as its category's selection
    allows: ``body`` keeps the part as it is; ``metadata`` becomes
    ``{id, kind, mediaType, category?, synthesized?, size?, sha256?,
    selection: "metadata"}`` (a text body's ``size`` is its UTF-8 length; no
    digest is computed); ``omit`` becomes ``{id, kind, mediaType, category?,
    synthesized?, selection: "omit"}``. A view is built from those keys only,
    so it never carries ``text``, ``body``, ``gap`` or any other field. A
    selection never upgrades a part (a metadata part stays metadata under
    ``body``). The category is the explicit ``category``, else by media type
    (:func:`part_category`); one the selection does not list uses
    ``default``; a missing or unknown selection value counts as ``omit``.

    Duplicates outside the content slots (AHP-CONTENT-002), conservatively:

    - ``native`` (top level and inside ``error`` objects) is opaque and can
      hold any body. It is dropped unless ``include_native`` is true (the
      subscription's ``includeNative``; false by default, as in registration)
      *and* every value of the selection, ``default`` included, is ``body``.
    - ``tool.input`` (also ``calls[].tool.input``), ``params``,
      ``task.change``/``prior``, ``suggestions``, ``change.mcpServers`` and
      ``extensions`` are kept, except that every string in them that equals a
      withheld text body or attachment ref, or contains a withheld body of at
      least 32 characters, is replaced by ``""`` and named in ``gaps`` with
      reason ``"withheld by content selection"``. The tool input otherwise
      stays whole: it is the operation that policy decides on.
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

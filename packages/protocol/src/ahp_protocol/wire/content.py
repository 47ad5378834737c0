"""Canonical content: messages and parts, and parsing them with JSON paths.

Owns the draft's content shapes (§10, ``content-item.schema.json``): the canonical
:class:`Message` ``{id, role, parts, synthesized?}`` and the eight closed part variants
(text or attachment, each as a body, a body gap, a metadata view or an omitted view),
their parsers (:func:`parse_messages`, :func:`parse_parts`, :func:`parse_text_parts`,
:func:`parse_part`) and the number types the event models share. :func:`project_event`
lives in :mod:`ahp_protocol.wire._projection` and is re-exported here.

Never does I/O, never uploads or dereferences a content ``ref``, never hashes text on
its own initiative (a digest of short text can be reversed by guessing). Parsing is
strict: no coercion (``"true"`` is not a boolean).
"""

import hashlib
import math
import re
from collections.abc import Mapping
from functools import cache
from typing import TYPE_CHECKING, Annotated, Any, Final, Literal, TypeAlias

from pydantic import AfterValidator, Discriminator, Field, PlainValidator

from ahp_protocol.wire._projection import CATEGORIES, WITHHELD_REASON, part_category, project_event
from ahp_protocol.wire.model import (
    ClosedModel,
    NonEmptyStr,
    NonNegativeInt,
    Omittable,
    OpenModel,
    WireConstants,
    member,
    rule,
    union_tag,
    validate_wire,
)

if TYPE_CHECKING:
    from pydantic import TypeAdapter

__all__ = [  # with the projection's names and OpenModel, re-exported (import paths kept)
    "CATEGORIES",
    "WITHHELD_REASON",
    "AssistantMessage",
    "AttachmentBodyPart",
    "AttachmentGapPart",
    "AttachmentMetadataPart",
    "AttachmentOmittedPart",
    "ContentItem",
    "ContentReference",
    "Message",
    "NonNegativeNumber",
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
    "content_hash",
    "is_attachment_media_type",
    "parse_messages",
    "parse_part",
    "parse_parts",
    "parse_text_parts",
    "part_category",
    "project_event",
]

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
    if is_attachment_media_type(value):
        return value
    raise rule(
        "an attachment cannot be text or JSON (text is inline; JSON is serialized into text)"
    )


def _non_negative_number(value: object) -> int | float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise rule("must be a number")
    if isinstance(value, float) and not math.isfinite(value):
        raise rule("must be a finite number")
    if value < 0:
        raise rule("must be >= 0")
    return value


PositiveInt: TypeAlias = Annotated[int, Field(ge=1)]
NonNegativeNumber: TypeAlias = Annotated[int | float, PlainValidator(_non_negative_number)]
Sha256: TypeAlias = Annotated[str, AfterValidator(_sha256)]
AttachmentMediaType: TypeAlias = Annotated[NonEmptyStr, AfterValidator(_attachment_media_type)]

# --------------------------------------------------------------------------- parts

Role = Literal["system", "developer", "user", "assistant", "tool"]


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


def _part_tag(value: Any) -> str | None:
    kind, selection = member(value, "kind"), member(value, "selection")
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


_TextVariants: TypeAlias = (
    Annotated[TextBodyPart, union_tag("text:body")]
    | Annotated[TextGapPart, union_tag("text:gap")]
    | Annotated[TextMetadataPart, union_tag("text:metadata")]
    | Annotated[TextOmittedPart, union_tag("text:omit")]
)

TextPart: TypeAlias = Annotated[
    _TextVariants,
    Discriminator(
        _text_part_tag, custom_error_type="invalid_text_part", custom_error_message=_TEXT_PART_ERROR
    ),
]
"""One selection-aware text part (text-part-list slots: summary, instructions, attention)."""

ContentItem: TypeAlias = Annotated[
    _TextVariants
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

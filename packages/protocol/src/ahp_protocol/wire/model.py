"""The wire kernel: one pydantic base, one serialization rule, one error conversion.

Every wire model subclasses :class:`WireModel`: wire names on the wire (``mediaType``),
Python names at the API (``media_type``), models built on first use, and
:meth:`WireModel.to_wire`, the one way a model becomes wire JSON (wire names, only the
fields that were given). Subclasses choose strict or lax, frozen or not, closed
(``extra="forbid"``) or open (unknown fields round-trip), and two class vars:

- ``_always``: constant fields (``type``, ``kind``, ...) that have a Python default and
  are written by ``to_wire`` even when left at it;
- ``_absent_when_none``: optional fields for which ``None`` means "not given", never a
  JSON ``null`` (``DenyEffect.code``); other fields keep an explicit ``None`` as ``null``.

Both are applied once per instance, only on classes that declare them, so ``to_wire``
is pydantic-core's own ``exclude_unset`` dump.

Errors: :func:`to_wire_errors` is the one conversion of a ``ValidationError`` into
:class:`~ahp_protocol.wire.errors.WireErrors` (wire-name paths, fixed reasons that never
quote input); :func:`rule` raises a broken conditional rule at a named field;
:func:`union_tag` and :func:`native_pattern` declare union members and patterns whose
errors read well. No I/O.
"""

from collections.abc import Callable, Mapping
from functools import cache
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Final, TypeAlias, TypeVar

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    Tag,
    ValidationError,
    ValidationInfo,
    model_validator,
)
from pydantic.alias_generators import to_camel
from pydantic_core import PydanticCustomError

from ahp_protocol.wire.errors import PathPart, WireError, WireErrors, json_path, rebase

if TYPE_CHECKING:
    from pydantic import TypeAdapter

__all__ = [
    "RULE_ERROR",
    "WIRE_CONTEXT",
    "ClosedModel",
    "NonEmptyStr",
    "NonNegativeInt",
    "Omittable",
    "OpenModel",
    "StrictBool",
    "WireConstants",
    "WireModel",
    "member",
    "native_pattern",
    "rule",
    "to_wire_errors",
    "union_tag",
    "unknown_stay_unknown",
    "validate_wire",
]

NonEmptyStr: TypeAlias = Annotated[str, Field(min_length=1, strict=True)]
NonNegativeInt: TypeAlias = Annotated[int, Field(ge=0, strict=True)]
StrictBool: TypeAlias = Annotated[bool, Field(strict=True)]

WIRE_CONTEXT: Final[Mapping[str, Any]] = {"ahp": "wire"}
"""Validation context meaning "this is wire JSON" (constant fields must be present)."""

_T = TypeVar("_T")

if TYPE_CHECKING:
    Omittable: TypeAlias = _T | None
else:

    class Omittable:
        """``Omittable[X]``: a field that may be left out, and is never ``null`` when given.

        Typed ``X | None`` (``None``: absent); at run time just ``X``, so pydantic-core
        rejects an explicit ``null`` and never validates the default ``None``.
        """

        def __class_getitem__(cls, item: Any) -> Any:
            return item


# --------------------------------------------------------------------------- the base


def _marking(own: Callable[[Any, Any], None] | None) -> Callable[..., None]:
    """A ``model_post_init`` that marks what was given, then runs the class's ``own``:
    constants count as given; a ``None`` absent-when-none field does not. One Python
    frame per instance (two with ``own``): validation runs it for every event."""

    def post_init(self: "WireModel", context: Any = None, /) -> None:
        given = self.__pydantic_fields_set__
        given.update(self._always)
        for name in self._absent_when_none:
            if name in given and getattr(self, name) is None:
                given.discard(name)
        if own is not None:
            own(self, context)

    post_init._marks = True  # type: ignore[attr-defined]
    return post_init


class WireModel(BaseModel):
    """The one base of every wire model; subclasses choose strictness and extras."""

    model_config = ConfigDict(
        alias_generator=to_camel, validate_by_name=True, validate_by_alias=True, defer_build=True
    )

    _always: ClassVar[frozenset[str]] = frozenset()
    """Constant fields (Python names) written even when left at their default."""
    _absent_when_none: ClassVar[frozenset[str]] = frozenset()
    """Optional fields (Python names) for which ``None`` means "not given"."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        # Only classes with marks run Python per instance; their own post-init runs after.
        inherited = cls.model_post_init
        if not (cls._always or cls._absent_when_none) or getattr(inherited, "_marks", False):
            return
        own = None if inherited is BaseModel.model_post_init else inherited
        cls.model_post_init = _marking(own)  # type: ignore[method-assign]

    def to_wire(self) -> dict[str, Any]:
        """The object as wire JSON: wire names, only the fields that were given (and
        the constants), unknown fields of an open object kept as they came."""
        wire: dict[str, Any] = self.__pydantic_serializer__.to_python(
            self, mode="json", by_alias=True, exclude_unset=True
        )
        return wire


class ClosedModel(WireModel):
    """A closed wire object (``additionalProperties: false``): unknown fields are errors.

    Strict. An optional field is ``Omittable[X] = None`` (an explicit ``null`` is "must
    not be null"); a field that may be ``null`` says so in its type (``Any``).
    """

    model_config = ConfigDict(strict=True, allow_inf_nan=False, extra="forbid")


class OpenModel(ClosedModel):
    """An open wire object: unknown fields are kept and round-trip unchanged.

    A Python-spelled key (``parent_event_id``) is an unknown field, not the field given:
    :func:`unknown_stay_unknown` puts pydantic's count right for a validated object.
    """

    model_config = ConfigDict(extra="allow")


class WireConstants(ClosedModel):
    """A closed object with constant fields (``_always``): defaults in Python, required in
    wire JSON (validated with :data:`WIRE_CONTEXT`, as every ``parse_*`` does)."""

    @model_validator(mode="before")
    @classmethod
    def _constants_given(cls, data: Any, info: ValidationInfo) -> Any:
        if info.context is WIRE_CONTEXT and isinstance(data, Mapping):
            for wire in _constant_names(cls):
                if wire not in data:
                    raise rule(f"{wire} is required")
        return data


@cache
def _constant_names(cls: type[WireModel]) -> tuple[str, ...]:
    """Wire names of a class's constants, in a fixed order (sorted by Python name)."""
    return tuple(cls.model_fields[name].alias or name for name in sorted(cls._always))


@cache
def _renamed_fields(cls: type[WireModel]) -> tuple[tuple[str, str], ...]:
    """``(python name, wire name)`` of the fields whose names differ."""
    return tuple(
        (name, field.alias)
        for name, field in cls.model_fields.items()
        if field.alias is not None and field.alias != name
    )


def unknown_stay_unknown(model: WireModel, data: Mapping[str, Any]) -> None:
    """Unmark fields that only an unknown Python-spelled key in ``data`` (the wire object
    ``model`` was validated from) made look given; a no-op without extras."""
    extra = model.__pydantic_extra__
    if not extra:
        return
    for name, alias in _renamed_fields(type(model)):
        if name in extra and alias not in data and name not in model._always:
            model.__pydantic_fields_set__.discard(name)


# --------------------------------------------------------------------------- errors

RULE_ERROR: Final = "ahp_rule"
"""pydantic error type of a broken wire rule; ``ctx["at"]`` names the field inside the object."""

_TAGS: set[str] = set()
"""Union tags pydantic puts into error locations; they are not part of the document."""


def rule(reason: str, *at: PathPart, below: str = "$") -> PydanticCustomError:
    """An error for a broken conditional rule, at ``at`` inside the object being validated.

    Raise it from a validator. ``reason`` is fixed text, never input values; ``below`` is
    a path inside the value (of a :class:`WireError` found in a nested document).
    """
    ctx = {"reason": reason, "at": tuple(at), "below": below}
    return PydanticCustomError(RULE_ERROR, "{reason}", ctx)


def union_tag(name: str) -> Tag:
    """A tag for a member of a discriminated union; it never shows in error paths."""
    _TAGS.add(name)
    return Tag(name)


def member(value: Any, name: str) -> Any:
    """What a union discriminator reads: ``value[name]`` of wire JSON, or an attribute of a
    model (``None`` when absent)."""
    return value.get(name) if isinstance(value, Mapping) else getattr(value, name, None)


_PATTERN_REASONS: dict[str, Callable[[object], str]] = {}
"""Native ``pattern`` constraints whose mismatch has its own reason (by pattern text)."""


def native_pattern(pattern: str, reason: Callable[[object], str]) -> Any:
    """A string constraint checked by pydantic-core; ``pattern`` must be anchored (``^...$``).

    A mismatch reads ``reason(value)``: a fixed text chosen by looking at the value,
    never quoting it.
    """
    _PATTERN_REASONS[pattern] = reason
    return StringConstraints(pattern=pattern)


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
    # pydantic prefixes custom errors with "Value error, "; the rule is what matters.
    for prefix in ("Value error, ", "Assertion failed, "):
        if message.startswith(prefix):
            message = message[len(prefix) :]
    if message.startswith("Input should be "):
        message = "must be " + message[len("Input should be ") :]
    return message


_ANY_INPUT: Final = object()


def to_wire_errors(exc: ValidationError, *prefix: PathPart) -> WireErrors:
    """Wire errors for a pydantic failure of one of our models, paths in wire names.

    A broken :func:`rule` is reported at the field it names, type errors read as rules
    ("must be an object"), a named field given as ``null`` reads "must not be null", and
    a missing or unknown field is reported at its object (``call: id is required``).
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
        elif value is None and loc and isinstance(loc[-1], str) and kind != "value_error":
            # (a validator's own reason for a null, if it gives one, is kept)
            out.append(WireError(json_path([*prefix, *loc]), "must not be null"))
        elif kind == RULE_ERROR:
            where = rebase(ctx.get("below", "$"), json_path([*prefix, *loc, *ctx.get("at", ())]))
            out.append(WireError(where, str(ctx.get("reason", "is invalid"))))
        elif kind == "string_pattern_mismatch" and ctx.get("pattern") in _PATTERN_REASONS:
            reason = _PATTERN_REASONS[ctx["pattern"]](value)
            out.append(WireError(json_path([*prefix, *loc]), reason))
        else:
            out.append(WireError(json_path([*prefix, *loc]), _reason(dict(err))))
    return WireErrors(out)


def validate_wire(adapter: "TypeAdapter[Any]", value: object, *prefix: PathPart) -> Any:
    """Validate wire JSON (wire names only, strict) or raise :class:`WireErrors`."""
    try:
        return adapter.validate_python(
            value, strict=True, by_alias=True, by_name=False, context=WIRE_CONTEXT
        )
    except ValidationError as exc:
        raise to_wire_errors(exc, *prefix) from None

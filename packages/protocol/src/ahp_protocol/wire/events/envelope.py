"""The envelope every event shares: the scalars, the common objects and :class:`Event`.

Owns the wire scalars (:data:`Time`, :data:`Source`, :data:`HttpUrl`, :data:`Extensions`,
:data:`Currency`, :data:`JsonObject`, the anchored :data:`TIME_PATTERN` and
:data:`URI_PATTERN`, :func:`is_uri`), the common objects any event may carry
(``harness``, ``session``, ``turn``, ``gaps``, the ``{id}`` references) and
:class:`Event`, the open envelope every event model subclasses. Imports no family module.
"""

import datetime as _dt
import re
from functools import cache
from typing import Annotated, Any, ClassVar, Final, TypeAlias

from pydantic import AfterValidator, ConfigDict

from ahp_protocol.wire.model import (
    ClosedModel,
    NonEmptyStr,
    NonNegativeInt,
    Omittable,
    OpenModel,
    native_pattern,
    rule,
)
from ahp_protocol.wire.names import REVERSE_DNS

__all__ = [
    "TIME_PATTERN",
    "URI_PATTERN",
    "Agent",
    "ClosedTurn",
    "Currency",
    "Event",
    "Extensions",
    "Gap",
    "Harness",
    "HttpUrl",
    "IdOnly",
    "JsonObject",
    "Ref",
    "Session",
    "Source",
    "Time",
    "Turn",
    "is_uri",
]

# --------------------------------------------------------------------------- scalars


_TIME_SHAPE: Final = (
    r"([0-9]{4})-([0-9]{2})-([0-9]{2})[Tt]([0-9]{2}):([0-9]{2}):([0-9]{2})(\.[0-9]+)?"
    r"(?:[Zz]|[+-]([0-9]{2}):([0-9]{2}))"
)
_LEAP_YEAR = r"(?:[0-9]{2}(?:0[48]|[2468][048]|[13579][26])|(?:0[48]|[2468][048]|[13579][26])00)"
_DATE = (
    r"(?:(?:[1-9][0-9]{3}|0[1-9][0-9]{2}|00[1-9][0-9]|000[1-9])-"  # years 0001-9999
    r"(?:(?:0[1-9]|1[0-2])-(?:0[1-9]|1[0-9]|2[0-8])"
    r"|(?:0[13-9]|1[0-2])-(?:29|30)"
    r"|(?:0[13578]|1[02])-31)"
    rf"|{_LEAP_YEAR}-02-29)"
)
_HOURS, _SIXTY = r"(?:[01][0-9]|2[0-3])", r"[0-5][0-9]"
TIME_PATTERN: Final = (
    rf"^{_DATE}[Tt]{_HOURS}:{_SIXTY}:{_SIXTY}(?:\.[0-9]+)?(?:[Zz]|[+-]{_HOURS}:{_SIXTY})$"
)
"""RFC 3339 ``date-time``, strictly, as one anchored pattern: a real calendar date
(proleptic Gregorian, years 0001-9999), a real time of day (no leap second) and a
UTC offset of at most 23:59. Checked by pydantic-core."""


def _time_reason(value: object) -> str:
    """Why ``value`` is not a :data:`TIME_PATTERN` date-time (a fixed text)."""
    match = _compiled(_TIME_SHAPE).fullmatch(value) if isinstance(value, str) else None
    if match is None:
        return "must be an RFC 3339 date-time (YYYY-MM-DDTHH:MM:SS[.frac](Z|+HH:MM))"
    year, month, day, hour, minute, second = (int(g) for g in match.groups()[:6])
    try:
        _dt.datetime(year, month, day, hour, minute, second)
    except ValueError:
        return "must be a real calendar date and time of day"
    return "has an invalid UTC offset"


_PCHAR = r"(?:[A-Za-z0-9\-._~!$&'()*+,;=:@]|%[0-9A-Fa-f]{2})"
_URI: Final = (
    rf"[A-Za-z][A-Za-z0-9+.\-]*:"  # scheme
    rf"(?://(?:{_PCHAR}|[\[\]])*)?"  # authority (brackets for IP literals)
    rf"(?:/|{_PCHAR})*"  # path
    rf"(?:\?(?:{_PCHAR}|[/?])*)?"  # query
    rf"(?:#(?:{_PCHAR}|[/?])*)?"  # fragment
)


@cache
def _compiled(pattern: str) -> re.Pattern[str]:
    """A Python regex compiled on first use (import stays cheap)."""
    return re.compile(pattern)


def is_uri(value: str) -> bool:
    """An RFC 3986 URI with a scheme (``urn:uuid:…``, ``https://host/path``)."""
    return _compiled(_URI).fullmatch(value) is not None


URI_PATTERN: Final = f"^(?:{_URI})$"
""":func:`is_uri` as one anchored pattern, checked by pydantic-core."""


def _source_reason(value: object) -> str:
    return "must be an absolute URI (scheme:rest, RFC 3986)"


def _http_url(value: str) -> str:
    if not (is_uri(value) and value.startswith(("http://", "https://"))):
        raise rule("must be an http:// or https:// URL")
    return value


def _extensions(value: dict[str, Any]) -> dict[str, Any]:
    for key in value:
        if not REVERSE_DNS.fullmatch(key):
            raise rule("keys must be reverse-DNS names (for example com.example.flag)")
    return value


def _currency(value: str) -> str:
    if not re.fullmatch(r"[A-Z]{3}", value):
        raise rule("must be an ISO 4217 code: three uppercase letters")
    return value


Time: TypeAlias = Annotated[str, native_pattern(TIME_PATTERN, _time_reason)]
Source: TypeAlias = Annotated[str, native_pattern(URI_PATTERN, _source_reason)]
HttpUrl: TypeAlias = Annotated[str, AfterValidator(_http_url)]
Extensions: TypeAlias = Annotated[dict[str, Any], AfterValidator(_extensions)]
Currency: TypeAlias = Annotated[str, AfterValidator(_currency)]
JsonObject: TypeAlias = dict[str, Any]


# --------------------------------------------------------------------------- common objects


class Harness(ClosedModel):
    """``{name, version}`` of the harness that emitted the event."""

    name: NonEmptyStr
    version: NonEmptyStr


class Agent(OpenModel):
    id: NonEmptyStr
    type: Omittable[str] = None


class Session(OpenModel):
    """``session``: open; ``counters`` omitted means unknown, not zero."""

    id: NonEmptyStr
    cwd: Omittable[str] = None
    workspace_roots: Omittable[list[str]] = None
    model: Omittable[str] = None
    agent: Omittable[Agent] = None
    synthesized: Omittable[bool] = None
    counters: Omittable[dict[str, NonNegativeInt]] = None


class Turn(OpenModel):
    id: NonEmptyStr
    synthesized: Omittable[bool] = None


class ClosedTurn(Turn):
    """``turn`` on the execution events (turn, model, permission, progress, batch, compact).

    Closed, unlike the envelope's ``turn`` elsewhere: so the schemas say.
    """

    model_config = ConfigDict(extra="forbid")


class Gap(OpenModel):
    """An honest marker for a field the harness cannot fill: ``{path, reason}``."""

    path: NonEmptyStr
    reason: NonEmptyStr


class Ref(ClosedModel):
    """A closed identity reference ``{id, synthesized?}`` (``call``, ``resumedFrom``, ...)."""

    id: NonEmptyStr
    synthesized: Omittable[bool] = None


class IdOnly(ClosedModel):
    id: NonEmptyStr


# --------------------------------------------------------------------------- envelope


class Event(OpenModel):
    """The envelope every event shares. Open: unknown fields are kept and round-trip.

    Subclasses pin ``type`` and add the event's own fields; ``_forbidden``
    lists fields the event must not carry even as unknown fields. ``type`` has
    its event's default in Python, is required in wire JSON (:func:`parse_event`
    checks it first) and is always written by :meth:`to_wire`.
    """

    _always = frozenset({"type"})
    _forbidden: ClassVar[tuple[str, ...]] = ()

    id: NonEmptyStr
    source: Source
    type: str
    time: Time
    harness: Harness
    session: Omittable[Session] = None
    turn: Omittable[Turn] = None
    parent_event_id: Omittable[NonEmptyStr] = None
    gaps: Omittable[list[Gap]] = None
    native: Any = None
    extensions: Omittable[Extensions] = None
    synthesized: Omittable[bool] = None

    def model_post_init(self, context: Any, /) -> None:
        # The forbidden-field rule is checked here rather than in an after-validator
        # (see ``tool.Tool.model_post_init``); ``type`` is marked given by the kernel.
        extra = self.__pydantic_extra__
        if extra:
            for name in self._forbidden:
                if name in extra:
                    raise rule(f"is not allowed on {self.type}", name)

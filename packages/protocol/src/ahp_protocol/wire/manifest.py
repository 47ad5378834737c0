"""The harness manifest: what ``hooks/capabilities`` answers and ``session.start`` carries.

Owns :class:`Manifest` (the events a harness supports, in which modes, and for
interception the ceiling of what it grants, checked against the event's bounds; gaps,
transports, authentication, tool paths, content categories, limits, managed policy,
correlation fields) and :func:`parse_manifest`. Apart from
:mod:`ahp_protocol.wire.capabilities`, so judging one request's grant creates none of
these models. Unknown fields are kept but declare nothing. No I/O; errors are
:class:`~ahp_protocol.wire.errors.WireErrors` with JSON paths.
"""

from collections.abc import Mapping
from typing import Annotated, Literal, Self

from pydantic import AfterValidator, Field, field_validator, model_validator

from ahp_protocol.wire.capabilities import Capabilities, _bounds_errors, _Open, _parse, _unique
from ahp_protocol.wire.catalogue import is_event_type, is_interceptable
from ahp_protocol.wire.model import NonEmptyStr, NonNegativeInt, StrictBool

__all__ = ["Gap", "Limits", "ManagedPolicy", "Manifest", "ManifestEvent", "parse_manifest"]


Mode = Literal["observe", "intercept"]
Transport = Literal["http", "stdio", "in_process"]
AuthMechanism = Literal["bearer", "oauth"]
Scope = Literal["user", "project", "managed"]


def _event_name(name: str) -> str:
    if not is_event_type(name):
        raise ValueError("is not a standard event type")
    return name


UniqueStrs = Annotated[list[NonEmptyStr], AfterValidator(_unique)]


class ManifestEvent(_Open):
    """One declared event: its modes and, for interception, the capabilities ceiling."""

    event: Annotated[str, Field(strict=True), AfterValidator(_event_name)]
    modes: Annotated[list[Mode], Field(min_length=1), AfterValidator(_unique)]
    capabilities: Capabilities | None = None

    _absent_when_none = frozenset({"capabilities"})

    @model_validator(mode="after")
    def _rules(self) -> Self:
        intercept = "intercept" in self.modes
        if intercept and not is_interceptable(self.event):
            raise ValueError("an observe-only event cannot list 'intercept'")
        if intercept and self.capabilities is None:
            raise ValueError("capabilities is required when modes contains 'intercept'")
        if not intercept and self.capabilities is not None and self.capabilities.effects:
            raise ValueError("an observe-only entry must have empty capabilities.effects")
        if intercept and self.capabilities is not None:
            errors = _bounds_errors(self.event, self.capabilities)
            if errors:
                first = errors[0]
                raise ValueError(f"capabilities.{first.path} {first.reason}")
        return self


class Gap(_Open):
    """An honest marker for an uncovered path or unknown limit."""

    path: NonEmptyStr
    reason: NonEmptyStr


class Limits(_Open):
    """Known limits, each an integer >= 0 when present; absence never means unlimited
    (list unknown ones in ``gaps``). ``null`` is no integer: it is rejected, as the
    official schemas do (``None`` below only means "absent")."""

    max_upload_bytes: NonNegativeInt | None = None
    max_continuations: NonNegativeInt | None = None
    min_timeout_ms: NonNegativeInt | None = None
    max_timeout_ms: NonNegativeInt | None = None

    @field_validator("*", mode="before")
    @classmethod
    def _present_means_integer(cls, value: object) -> object:
        if value is None:
            raise ValueError(
                "must be an integer >= 0, not null (omit an unknown limit and list it in gaps)"
            )
        return value


class ManagedPolicy(_Open):
    """Honoured registration scopes; ``managed`` forces ``disableable: false``."""

    scopes: Annotated[list[Scope], AfterValidator(_unique)]
    disableable: StrictBool

    @model_validator(mode="after")
    def _managed(self) -> Self:
        if "managed" in self.scopes and self.disableable:
            raise ValueError("disableable must be false when scopes contains 'managed'")
        return self


class Manifest(_Open):
    """The harness manifest (``hooks/capabilities`` result, ``session.start.manifest``)."""

    events: list[ManifestEvent]
    gaps: list[Gap]
    transports: Annotated[list[Transport], AfterValidator(_unique)]
    authentication: Annotated[list[AuthMechanism], AfterValidator(_unique)]
    tool_paths: UniqueStrs
    content_categories: UniqueStrs
    limits: Limits
    managed_policy: ManagedPolicy
    correlation_identity_fields: UniqueStrs

    @model_validator(mode="before")
    @classmethod
    def _no_identity(cls, data: object) -> object:
        if isinstance(data, Mapping) and "identity" in data:
            raise ValueError("identity is not allowed in a manifest")
        return data

    def declared(self, event_type: str) -> ManifestEvent | None:
        """The first entry for ``event_type``, if any."""
        for entry in self.events:
            if entry.event == event_type:
                return entry
        return None

    def modes_for(self, event_type: str) -> frozenset[str]:
        """Every mode declared for ``event_type`` across entries."""
        return frozenset(m for e in self.events if e.event == event_type for m in e.modes)


def parse_manifest(obj: object) -> Manifest:
    """Parse a wire manifest; raises :class:`WireErrors` with JSON paths."""
    manifest: Manifest = _parse(Manifest, obj, what="manifest")
    return manifest

"""The registration document and the ``hooks/configuration`` result, as typed models.

Owns the models of a registration (``protocolVersion`` plus an ordered list of backends:
transport, authentication binding, subscriptions) and of the subscription configuration
a backend returns from ``hooks/configuration``; the loaders :func:`parse_registration`,
:func:`load_registration` and :func:`parse_configuration`; and the models' view of
dispatch (``matching``, whose rule is :func:`ahp_protocol.wire.routing.routes`).

Every rule lives once, in :class:`~ahp_protocol.wire.registration_rules.Checks`. The
loaders run it on the plain JSON value and report every violation as a
:class:`~ahp_protocol.wire.errors.WireError` at its wire path, most specific path first;
only a document that passes becomes models. A model built in Python is judged by the
same checks on its wire form (a ``ValidationError``).

Never resolves credentials, reads environment variables, contacts endpoints or checks a
document against a harness manifest; reasons never quote secret material. Unknown fields
are kept, so :meth:`Registration.to_wire` round-trips a document.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Final, Literal, Self, TypeAlias, TypeVar

from pydantic import (
    ConfigDict,
    Field,
    ModelWrapValidatorHandler,
    ValidationError,
    ValidationInfo,
    model_validator,
)

from .errors import WireError, WireErrors, json_path
from .model import WireModel, to_wire_errors, unknown_stay_unknown
from .registration_rules import Checks, Lifecycle, OAuthFlow, Selection, show
from .routing import Policy, Scope, routes

__all__ = [
    "Authentication",
    "BearerAuthentication",
    "Configuration",
    "ContentSelection",
    "Filters",
    "HeaderSourceConfig",
    "HeaderValueConfig",
    "Hook",
    "HttpTransportConfig",
    "InterceptSubscription",
    "Lifecycle",
    "OAuthAuthentication",
    "ObserveSubscription",
    "Registration",
    "StdioTransportConfig",
    "Subscription",
    "TransportConfig",
    "Upload",
    "load_registration",
    "parse_configuration",
    "parse_registration",
]

# The validation context of a document the loaders have already judged in full.
_JUDGED: Final = {"ahp.registration.judged": True}


class _ConfigModel(WireModel):
    """A configuration object: lax, open (unknown fields kept), judged by its ``_rule``."""

    model_config = ConfigDict(extra="allow")

    _rule: ClassVar[str]
    """The :class:`Checks` method that judges this object's wire form."""

    @model_validator(mode="wrap")
    @classmethod
    def _built(
        cls, data: Any, handler: ModelWrapValidatorHandler[Self], info: ValidationInfo
    ) -> Self:
        model = handler(data)
        if isinstance(data, Mapping):
            unknown_stay_unknown(model, data)
        # The loaders judged the whole document before building; a model built any
        # other way is judged here, by the same rules, on its wire form.
        if info.context is not _JUDGED:
            checks = Checks()
            getattr(checks, cls._rule)(model.to_wire(), ())
            if checks.errors:
                raise ValueError("; ".join(f"{json_path(p)}: {r}" for p, r in checks.errors))
        return model


class ContentSelection(_ConfigModel):
    """Which content a subscription receives: ``default`` plus per-category overrides.

    Any further key names a category; its value must be a selection too.
    """

    _rule = "content"
    __pydantic_extra__: dict[str, Selection] = Field(init=False)

    default: Selection
    text: Selection | None = None
    reasoning: Selection | None = None
    images: Selection | None = None
    audio: Selection | None = None
    video: Selection | None = None
    files: Selection | None = None

    def for_category(self, category: str | None) -> Selection:
        """The selection for one category; unlisted categories use ``default``."""
        chosen: Selection = self.to_wire().get(category or "default", self.default)
        return chosen


class Filters(_ConfigModel):
    """Optimization hints only: never a reason to drop a call of unknown kind."""

    _rule = "filters"
    tool_kinds: list[str] | None = None
    paths: list[str] | None = None


class BearerAuthentication(_ConfigModel):
    """``Authorization: Bearer`` from an environment variable or a secret reference."""

    _always = frozenset({"type"})
    _rule = "authentication"

    type: Literal["bearer"] = "bearer"
    token_env: str | None = None
    token_ref: str | None = None


class OAuthAuthentication(_ConfigModel):
    """The OAuth preset: client identity for a resource; secrets only by reference."""

    _always = frozenset({"type"})
    _rule = "authentication"

    type: Literal["oauth"] = "oauth"
    resource: str
    issuer: str
    client_id: str
    flow: OAuthFlow
    scopes: list[str] | None = None
    client_secret_ref: str | None = None


Authentication: TypeAlias = Annotated[
    BearerAuthentication | OAuthAuthentication, Field(discriminator="type")
]


class Upload(_ConfigModel):
    """Where a subscription's selected attachments are uploaded, with its own credentials."""

    _rule = "upload"

    endpoint: str
    timeout_ms: int
    max_bytes: int
    auth: Authentication | None = None


class _SubscriptionBase(_ConfigModel):
    _always = frozenset({"mode"})
    _rule = "subscription"

    if TYPE_CHECKING:
        mode: Literal["intercept", "observe"]  # a field of each subclass

    events: list[str]
    content: ContentSelection
    include_native: bool = False
    upload: Upload | None = None
    filters: Filters | None = None
    scope: Scope | None = None
    disableable: bool | None = None

    def matches(self, event_type: str) -> bool:
        """Whether this subscription receives ``event_type`` in its own mode.

        :func:`~ahp_protocol.wire.routing.routes`: a selector covers it and, for an
        intercept subscription, the event is interceptable.
        """
        return routes(self.events, self.mode, event_type, self.mode)


class InterceptSubscription(_SubscriptionBase):
    """Events the backend may change or stop, answered within ``timeout_ms``."""

    mode: Literal["intercept"] = "intercept"
    timeout_ms: int
    failure_policy: Policy


class ObserveSubscription(_SubscriptionBase):
    """Events delivered as notifications; never awaited, so no timeout or policy."""

    mode: Literal["observe"] = "observe"


Subscription: TypeAlias = Annotated[
    InterceptSubscription | ObserveSubscription, Field(discriminator="mode")
]


class _Routed:
    """The dispatch view of a model that holds subscriptions (a backend, a configuration)."""

    if TYPE_CHECKING:
        subscriptions: Sequence[Subscription] | None

    def matching(self, event_type: str, mode: str) -> list[tuple[int, Subscription]]:
        """``(index, subscription)`` for each subscription that routes this event in this mode.

        Empty when subscriptions are absent (they come from ``hooks/configuration``) and
        for an intercept of an observe-only event, whatever the selectors say.
        """
        return [
            (index, sub)
            for index, sub in enumerate(self.subscriptions or ())
            if routes(sub.events, sub.mode, event_type, mode)
        ]


class HeaderSourceConfig(_ConfigModel):
    """A header value taken from an environment variable or a secret reference."""

    _rule = "header_source"

    value_env: str | None = None
    value_ref: str | None = None


HeaderValueConfig: TypeAlias = str | HeaderSourceConfig
"""A literal header value, or a :class:`HeaderSourceConfig` resolved by the harness."""


class StdioTransportConfig(_ConfigModel):
    """A local process spoken to over stdin/stdout; ``command`` is run without a shell."""

    _always = frozenset({"type", "lifecycle"})
    _rule = "transport"

    type: Literal["stdio"] = "stdio"
    command: str
    args: list[str] = Field(default_factory=list)
    lifecycle: Lifecycle = "persistent"
    cwd: str | None = None
    env: dict[str, str] = Field(default_factory=dict)


class HttpTransportConfig(_ConfigModel):
    """One JSON-RPC message per POST to ``url``; ``headers`` are merged last."""

    _always = frozenset({"type"})
    _rule = "transport"

    type: Literal["http"] = "http"
    url: str
    headers: dict[str, HeaderValueConfig] = Field(default_factory=dict)


TransportConfig: TypeAlias = Annotated[
    StdioTransportConfig | HttpTransportConfig, Field(discriminator="type")
]


class Hook(_ConfigModel, _Routed):
    """One registered backend, in interceptor order within its registration."""

    _rule = "backend"

    id: str
    transport: TransportConfig
    authentication: Authentication | None = None
    subscriptions: list[Subscription] | None = None


class Registration(_ConfigModel):
    """An ordered list of backends; order is interceptor order."""

    _always = frozenset({"protocol_version"})
    _rule = "registration"

    protocol_version: Literal["draft"] = "draft"
    hooks: list[Hook]

    def hook(self, backend_id: str) -> Hook | None:
        """The backend registered under ``backend_id``, if any."""
        return next((h for h in self.hooks if h.id == backend_id), None)


class Configuration(_ConfigModel, _Routed):
    """The ``configuration`` of a ``hooks/configuration`` result: subscriptions only."""

    _rule = "configuration"

    subscriptions: list[Subscription]


# --------------------------------------------------------------------------------------
# Loaders


_Document = TypeVar("_Document", "Registration", "Configuration")


def _parse(model: type[_Document], obj: object) -> _Document:
    checks = Checks()
    getattr(checks, model._rule)(obj, ())
    if checks.errors:
        deepest = sorted(checks.errors, key=lambda error: -len(error[0]))
        raise WireErrors([WireError(json_path(path), reason) for path, reason in deepest])
    try:
        # Wire names only: a snake_case key in a document is an unknown field, kept as is.
        return model.model_validate(obj, by_alias=True, by_name=False, context=_JUDGED)
    except ValidationError as exc:  # unreachable while the rules cover every field type
        raise to_wire_errors(exc) from None


def parse_registration(obj: object) -> Registration:
    """Validate a decoded registration document.

    Raises :class:`WireErrors` listing every problem, most specific path first.
    """
    return _parse(Registration, obj)


def parse_configuration(obj: object) -> Configuration:
    """Validate the ``configuration`` object of a ``hooks/configuration`` result."""
    return _parse(Configuration, obj)


class _Refused(ValueError):
    """JSON text that :func:`json.loads` accepts and a registration file must not hold."""


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _Refused(f"duplicate key {show(key)} in one JSON object (ambiguous; keep one)")
        out[key] = value
    return out


def _no_constant(name: str) -> Any:
    raise _Refused(f"{name} is not valid JSON (not a number)")


def load_registration(path: str | os.PathLike[str]) -> Registration:
    """Read, decode and validate a registration file; every failure is a :class:`WireErrors`."""
    where = os.fspath(path)

    def fail(reason: str) -> WireErrors:
        return WireErrors([WireError("$", f"registration file {where!r}: {reason}")])

    try:
        with open(where, "rb") as handle:
            raw = handle.read()
    except FileNotFoundError:
        raise fail("file not found") from None
    except IsADirectoryError:
        raise fail("is a directory, not a file") from None
    except PermissionError:
        raise fail("permission denied") from None
    except OSError as exc:
        raise fail(f"cannot be read ({type(exc).__name__})") from None
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise fail(f"is not UTF-8 text (invalid byte at offset {exc.start})") from None
    try:
        doc = json.loads(text, object_pairs_hook=_no_duplicate_keys, parse_constant=_no_constant)
    except json.JSONDecodeError as exc:
        raise fail(f"invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}") from None
    except _Refused as exc:
        raise fail(str(exc)) from None
    except ValueError:
        raise fail("cannot be decoded as JSON") from None
    return parse_registration(doc)

"""The registration document and the ``hooks/configuration`` result, validated as the draft says.

Owns the pydantic models of a registration (``protocolVersion`` plus an ordered
list of backends: transport, authentication binding, subscriptions) and of the
shared subscription configuration a backend returns from ``hooks/configuration``;
the loaders :func:`parse_registration`, :func:`load_registration` and
:func:`parse_configuration`; and the models' view of dispatch
(:meth:`Hook.matching`, :meth:`Configuration.matching`), whose rule is
:func:`ahp_protocol.wire.routing.routes`.

The loaders check every rule of draft section 9 and of the official registration
schema on the plain JSON value first, so each violation is reported as a
:class:`~ahp_protocol.wire.errors.WireError` at its wire path with a reason that
says what to fix; model validation then runs as a backstop. All violations are
reported together, most specific path first.

Bounds: this module never resolves credentials, reads environment variables,
contacts endpoints or checks a document against a harness manifest (advertised
events, limits, scope enforcement); those belong to the harness. Reasons never
quote secret material (tokens, header or environment values). Unknown fields are
ignored and kept, so :meth:`Registration.to_wire` round-trips a document.
"""

from __future__ import annotations

import json
import math
import os
import re
import string
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Final, Literal, Self, TypeAlias
from urllib.parse import urlsplit

from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    ModelWrapValidatorHandler,
    Tag,
    ValidationError,
    model_validator,
)
from pydantic.alias_generators import to_camel

from .catalogue import (
    EVENT_TYPE_SET,
    INTERCEPTABLE_SET,
    REMOVED,
    expand,
    is_wildcard,
)
from .errors import PathPart, WireError, WireErrors, from_validation_error, json_path
from .jsonrpc import PROTOCOL_VERSION
from .routing import routes

__all__ = [
    "Authentication",
    "BearerAuthentication",
    "Configuration",
    "ContentSelection",
    "Filters",
    "HeaderSource",
    "HeaderValue",
    "Hook",
    "HttpTransport",
    "InterceptSubscription",
    "OAuthAuthentication",
    "ObserveSubscription",
    "Registration",
    "StdioTransport",
    "Subscription",
    "Transport",
    "Upload",
    "load_registration",
    "parse_configuration",
    "parse_registration",
]

Selection = Literal["body", "metadata", "omit"]
FailurePolicy = Literal["fail-open", "fail-closed"]
Scope = Literal["managed", "project", "user"]
Lifecycle = Literal["persistent", "per_event"]

SELECTIONS: Final = ("body", "metadata", "omit")
CONTENT_CATEGORIES: Final = ("text", "reasoning", "images", "audio", "video", "files")

# Patterns of the official registration / content-upload schemas.
_REVERSE_DNS: Final = re.compile(r"^(?:[A-Za-z][A-Za-z0-9_-]*\.)+[A-Za-z][A-Za-z0-9_-]*$")
_ENV_NAME: Final = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_HEADER_NAME: Final = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")
_HTTP_URL: Final = re.compile(r"^https?://")
_HTTPS_URL: Final = re.compile(r"^https://")
_UPLOAD_ENDPOINT: Final = re.compile(
    r"^(?:https://|http://(?:localhost|127\.[0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,3}|\[::1\])"
    r"(?::[0-9]+)?(?:[/?#]|$))"
)
_URI_CHARS: Final = frozenset(string.ascii_letters + string.digits + "-._~:/?#[]@!$&'()*+,;=%")
_PERCENT: Final = re.compile(r"%(?![0-9A-Fa-f]{2})")

_MODES: Final = ("intercept", "observe")
_SELECTOR_FORMS: Final = (
    'use an exact event name such as "tool.before", a family wildcard such as "tool.*", or "*"'
)


# --------------------------------------------------------------------------------------
# Rule helpers shared by the document checks and the model validators.
# Each returns a reason (what to fix) or None when the value is acceptable.


def _show(value: object, limit: int = 64) -> str:
    """A short JSON rendering of a non-secret value for a reason."""
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    if len(text) > limit:
        text = text[: limit - 1] + "\u2026"
    return json.dumps(text, ensure_ascii=False) if isinstance(value, str) else text


def _choices(values: Iterable[str]) -> str:
    quoted = [f'"{v}"' for v in values]
    return ", ".join(quoted[:-1]) + f" or {quoted[-1]}" if len(quoted) > 1 else quoted[0]


def _uri_problem(url: str) -> str | None:
    """Whether ``url`` is an absolute URI with a host (RFC 3986 characters only)."""
    if any(ch not in _URI_CHARS for ch in url) or _PERCENT.search(url):
        return "contains characters that are not allowed in a URI (percent-encode them)"
    try:
        parts = urlsplit(url)
        _ = parts.port
    except ValueError:
        return "is not a well-formed URI (check the host and port)"
    if not parts.hostname:
        return "must name a host"
    return None


def _http_url_problem(url: str) -> str | None:
    if not _HTTP_URL.match(url):
        return "url must be an absolute URL starting with https:// (or http:// for loopback)"
    problem = _uri_problem(url)
    return f"url {problem}" if problem else None


def _issuer_problem(url: str) -> str | None:
    if not _HTTPS_URL.match(url):
        return "issuer must be an https:// URL"
    problem = _uri_problem(url)
    return f"issuer {problem}" if problem else None


def _upload_endpoint_problem(url: str) -> str | None:
    if not _UPLOAD_ENDPOINT.match(url):
        return (
            "upload endpoint must use https://; plain http:// is only allowed on "
            "localhost, 127.x.x.x or [::1]"
        )
    problem = _uri_problem(url)
    return f"endpoint {problem}" if problem else None


def _selector_problem(selector: str, mode: str | None) -> str | None:
    """Why one ``events`` entry is not allowed in ``mode`` (None: mode unknown)."""
    if selector in EVENT_TYPE_SET:
        if mode == "intercept" and selector not in INTERCEPTABLE_SET:
            return (
                f"{_show(selector)} cannot be intercepted (observe-only event); "
                'subscribe to it with mode "observe"'
            )
        return None
    if is_wildcard(selector):
        if mode == "intercept" and not expand(selector, "intercept"):
            return (
                f"{_show(selector)} covers no interceptable event; an intercept wildcard "
                "must cover at least one interceptable event"
            )
        return None
    if selector in REMOVED:
        return (
            f"{_show(selector)} was removed from the draft and is not a standard event; "
            f"{_SELECTOR_FORMS}"
        )
    return f"{_show(selector)} is not a standard event name or selector; {_SELECTOR_FORMS}"


def _header_value_problem(value: str) -> str | None:
    if any(ch in value for ch in "\r\n\x00"):
        return "header values must not contain CR, LF or NUL"
    try:
        value.encode("latin-1")
    except UnicodeEncodeError:
        return "header values must be latin-1 text"
    return None


def _env_entry_problem(name: str, value: object) -> str | None:
    if not name or "=" in name or "\x00" in name:
        return (
            f"environment variable name {_show(name)} must be non-empty "
            'and must not contain "=" or NUL'
        )
    if not isinstance(value, str):
        return "env values must be literal strings (they are never interpolated)"
    if "\x00" in value:
        return "env values must not contain NUL"
    return None


# Messages reused by the document checks and the models.
_LITERAL_TOKEN: Final = (
    "a literal token is never allowed in a registration; name an environment variable "
    "with tokenEnv or a secret reference with tokenRef"
)
_LITERAL_CLIENT_SECRET: Final = (
    "a literal client secret is never allowed in a registration; use clientSecretRef"
)
_BEARER_ONE_SOURCE: Final = "bearer authentication needs exactly one of tokenEnv or tokenRef"
_TOKEN_ENV: Final = (
    "tokenEnv must be an environment variable name (letters, digits and underscores, "
    "not starting with a digit)"
)
_VALUE_ENV: Final = (
    "valueEnv must be an environment variable name (letters, digits and underscores, "
    "not starting with a digit)"
)
_HEADER_ONE_SOURCE: Final = (
    "a header value is a literal string or an object with exactly one of valueEnv or valueRef"
)
_REVERSE_DNS_ID: Final = (
    'backend id must be a reverse-DNS name such as "com.example.policy" '
    "(two or more dot-separated segments, each starting with a letter)"
)
_AUTH_ONLY_HTTP: Final = (
    "authentication is only allowed with an http transport (a stdio backend is trusted "
    "as a local process)"
)
_HEADERS_ONLY_HTTP: Final = "headers are only allowed with an http transport"
_CONTENT_RECEIVER: Final = (
    "contentReceiver is no longer supported; configure upload on each subscription instead"
)
_MANAGED: Final = 'scope "managed" requires disableable: false'
_OBSERVE_NO: Final = (
    "observe subscriptions must not have {field} (only intercept subscriptions wait for "
    'an answer); remove it or use mode "intercept"'
)
_SELECTION: Final = f"content selection must be {_choices(SELECTIONS)}"


def _is_int(value: object) -> bool:
    """A JSON integer (an integral number; booleans are not numbers)."""
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return True
    return isinstance(value, float) and math.isfinite(value) and value.is_integer()


# --------------------------------------------------------------------------------------
# Models


class _WireModel(BaseModel):
    """Configuration object: wire names by alias, unknown fields kept."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="allow",
        defer_build=True,
    )

    # Fields the wire always carries even when a Python caller relied on the default.
    _always_on_wire: ClassVar[tuple[str, ...]] = ()

    def model_post_init(self, context: Any, /) -> None:
        self.__pydantic_fields_set__.update(self._always_on_wire)

    @model_validator(mode="wrap")
    @classmethod
    def _unknown_snake_case(cls, data: Any, handler: ModelWrapValidatorHandler[Self]) -> Self:
        # A document key equal to a field's Python name (``include_native``) is an unknown
        # field when parsing by wire name: kept as is, and the field stays unset.
        model = handler(data)
        extra = model.__pydantic_extra__
        if extra and isinstance(data, Mapping):
            for name, field in cls.model_fields.items():
                alias = field.alias or name
                if (
                    name in extra
                    and alias != name
                    and alias not in data
                    and name not in cls._always_on_wire
                ):
                    model.__pydantic_fields_set__.discard(name)
        return model

    def to_wire(self) -> dict[str, Any]:
        """The wire form: wire names, fields as given, unknown fields kept."""
        return self.model_dump(mode="json", by_alias=True, exclude_unset=True)


def _reject_keys(data: Any, keys: Mapping[str, str]) -> Any:
    if isinstance(data, Mapping):
        for key, reason in keys.items():
            if key in data:
                raise ValueError(reason)
    return data


class ContentSelection(_WireModel):
    """Which content a subscription receives: ``default`` plus per-category overrides.

    Any further key names a category; its value must be a selection too.
    """

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
        if category:
            if category in CONTENT_CATEGORIES:
                chosen: Selection | None = getattr(self, category)
                if chosen is not None:
                    return chosen
            elif self.__pydantic_extra__ and category in self.__pydantic_extra__:
                return self.__pydantic_extra__[category]
        return self.default


class Filters(_WireModel):
    """Optimization hints only: never a reason to drop a call of unknown kind."""

    tool_kinds: list[Annotated[str, Field(min_length=1)]] | None = None
    paths: list[Annotated[str, Field(min_length=1)]] | None = None

    @model_validator(mode="after")
    def _unique(self) -> Filters:
        for name, values in (("toolKinds", self.tool_kinds), ("paths", self.paths)):
            if values is not None and len(set(values)) != len(values):
                raise ValueError(f"{name} entries must be unique")
        return self


class BearerAuthentication(_WireModel):
    """``Authorization: Bearer`` from an environment variable or a secret reference."""

    _always_on_wire = ("type",)

    type: Literal["bearer"] = "bearer"
    token_env: str | None = None
    token_ref: Annotated[str, Field(min_length=1)] | None = None

    @model_validator(mode="before")
    @classmethod
    def _no_literal_token(cls, data: Any) -> Any:
        return _reject_keys(data, {"token": _LITERAL_TOKEN})

    @model_validator(mode="after")
    def _one_source(self) -> BearerAuthentication:
        if (self.token_env is None) == (self.token_ref is None):
            raise ValueError(_BEARER_ONE_SOURCE)
        if self.token_env is not None and not _ENV_NAME.match(self.token_env):
            raise ValueError(_TOKEN_ENV)
        return self


class OAuthAuthentication(_WireModel):
    """The OAuth preset: client identity for a resource; secrets only by reference."""

    _always_on_wire = ("type",)

    type: Literal["oauth"] = "oauth"
    resource: Annotated[str, Field(min_length=1)]
    issuer: str
    client_id: Annotated[str, Field(min_length=1)]
    flow: Literal["authorization_code_pkce", "client_credentials"]
    scopes: list[Annotated[str, Field(min_length=1)]] | None = None
    client_secret_ref: Annotated[str, Field(min_length=1)] | None = None

    @model_validator(mode="before")
    @classmethod
    def _no_literal_secret(cls, data: Any) -> Any:
        return _reject_keys(data, {"clientSecret": _LITERAL_CLIENT_SECRET})

    @model_validator(mode="after")
    def _rules(self) -> OAuthAuthentication:
        problem = _issuer_problem(self.issuer)
        if problem:
            raise ValueError(problem)
        if self.scopes is not None and len(set(self.scopes)) != len(self.scopes):
            raise ValueError("scopes entries must be unique")
        return self


Authentication: TypeAlias = Annotated[
    BearerAuthentication | OAuthAuthentication, Field(discriminator="type")
]


class Upload(_WireModel):
    """Where a subscription's selected attachments are uploaded, with its own credentials."""

    endpoint: str
    timeout_ms: Annotated[int, Field(ge=1)]
    max_bytes: Annotated[int, Field(ge=0)]
    auth: Authentication | None = None

    @model_validator(mode="after")
    def _endpoint(self) -> Upload:
        problem = _upload_endpoint_problem(self.endpoint)
        if problem:
            raise ValueError(problem)
        return self


class _SubscriptionBase(_WireModel):
    _always_on_wire = ("mode",)

    if TYPE_CHECKING:
        mode: Literal["intercept", "observe"]  # a field of each subclass

    events: Annotated[list[str], Field(min_length=1)]
    content: ContentSelection
    include_native: bool = False
    upload: Upload | None = None
    filters: Filters | None = None
    scope: Scope | None = None
    disableable: bool | None = None

    def _check_common(self, mode: str) -> None:
        seen: set[str] = set()
        for selector in self.events:
            problem = _selector_problem(selector, mode)
            if problem:
                raise ValueError(problem)
            if selector in seen:
                raise ValueError(f"duplicate selector {_show(selector)} in events")
            seen.add(selector)
        if self.scope == "managed" and self.disableable is not False:
            raise ValueError(_MANAGED)

    def matches(self, event_type: str) -> bool:
        """Whether this subscription receives ``event_type`` in its own mode.

        :func:`~ahp_protocol.wire.routing.routes`: a selector covers it and, for an
        intercept subscription, the event is interceptable.
        """
        return routes(self.events, self.mode, event_type, self.mode)


class InterceptSubscription(_SubscriptionBase):
    """Events the backend may change or stop, answered within ``timeout_ms``."""

    mode: Literal["intercept"] = "intercept"
    timeout_ms: Annotated[int, Field(ge=1)]
    failure_policy: FailurePolicy

    @model_validator(mode="after")
    def _rules(self) -> InterceptSubscription:
        self._check_common("intercept")
        return self


class ObserveSubscription(_SubscriptionBase):
    """Events delivered as notifications; never awaited, so no timeout or policy."""

    mode: Literal["observe"] = "observe"

    @model_validator(mode="before")
    @classmethod
    def _no_policy_fields(cls, data: Any) -> Any:
        return _reject_keys(
            data,
            {
                "timeoutMs": _OBSERVE_NO.format(field="timeoutMs"),
                "failurePolicy": _OBSERVE_NO.format(field="failurePolicy"),
            },
        )

    @model_validator(mode="after")
    def _rules(self) -> ObserveSubscription:
        self._check_common("observe")
        return self


Subscription: TypeAlias = Annotated[
    InterceptSubscription | ObserveSubscription, Field(discriminator="mode")
]


def _matching(
    subscriptions: Sequence[Subscription] | None, event_type: str, mode: str
) -> list[tuple[int, Subscription]]:
    if not subscriptions:
        return []
    return [
        (index, sub)
        for index, sub in enumerate(subscriptions)
        if routes(sub.events, sub.mode, event_type, mode)
    ]


class HeaderSource(_WireModel):
    """A header value taken from an environment variable or a secret reference."""

    value_env: str | None = None
    value_ref: Annotated[str, Field(min_length=1)] | None = None

    @model_validator(mode="after")
    def _one_source(self) -> HeaderSource:
        if (self.value_env is None) == (self.value_ref is None):
            raise ValueError(_HEADER_ONE_SOURCE)
        if self.value_env is not None and not _ENV_NAME.match(self.value_env):
            raise ValueError(_VALUE_ENV)
        return self


def _header_kind(value: Any) -> str:
    return "literal" if isinstance(value, str) else "source"


HeaderValue: TypeAlias = Annotated[
    Annotated[str, Tag("literal")] | Annotated[HeaderSource, Tag("source")],
    Discriminator(_header_kind),
]
"""A literal header value, or a :class:`HeaderSource` resolved by the harness."""


class StdioTransport(_WireModel):
    """A local process spoken to over stdin/stdout; ``command`` is run without a shell."""

    _always_on_wire = ("type", "lifecycle")

    type: Literal["stdio"] = "stdio"
    command: Annotated[str, Field(min_length=1)]
    args: list[str] = Field(default_factory=list)
    lifecycle: Lifecycle = "persistent"
    cwd: str | None = None
    env: dict[str, str] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _no_headers(cls, data: Any) -> Any:
        return _reject_keys(data, {"headers": _HEADERS_ONLY_HTTP})

    @model_validator(mode="after")
    def _env(self) -> StdioTransport:
        for name, value in self.env.items():
            problem = _env_entry_problem(name, value)
            if problem:
                raise ValueError(problem)
        return self


class HttpTransport(_WireModel):
    """One JSON-RPC message per POST to ``url``; ``headers`` are merged last."""

    _always_on_wire = ("type",)

    type: Literal["http"] = "http"
    url: str
    headers: dict[str, HeaderValue] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _rules(self) -> HttpTransport:
        problem = _http_url_problem(self.url)
        if problem:
            raise ValueError(problem)
        seen: set[str] = set()
        for name, value in self.headers.items():
            if not _HEADER_NAME.match(name):
                raise ValueError(f"header name {_show(name)} is not a valid HTTP token")
            if name.lower() in seen:
                raise ValueError(f"header {_show(name)} is given twice (names ignore case)")
            seen.add(name.lower())
            if isinstance(value, str):
                problem = _header_value_problem(value)
                if problem:
                    raise ValueError(problem)
        return self


Transport: TypeAlias = Annotated[StdioTransport | HttpTransport, Field(discriminator="type")]


class Hook(_WireModel):
    """One registered backend, in interceptor order within its registration."""

    id: str
    transport: Transport
    authentication: Authentication | None = None
    subscriptions: Annotated[list[Subscription], Field(min_length=1)] | None = None

    @model_validator(mode="before")
    @classmethod
    def _no_content_receiver(cls, data: Any) -> Any:
        return _reject_keys(data, {"contentReceiver": _CONTENT_RECEIVER})

    @model_validator(mode="after")
    def _rules(self) -> Hook:
        if not _REVERSE_DNS.match(self.id):
            raise ValueError(_REVERSE_DNS_ID)
        if self.authentication is not None and self.transport.type != "http":
            raise ValueError(_AUTH_ONLY_HTTP)
        return self

    def matching(self, event_type: str, mode: str) -> list[tuple[int, Subscription]]:
        """``(index, subscription)`` for each subscription that routes this event in this mode.

        Empty when subscriptions are absent (they come from ``hooks/configuration``) and
        for an intercept of an observe-only event, whatever the selectors say.
        """
        return _matching(self.subscriptions, event_type, mode)


class Registration(_WireModel):
    """An ordered list of backends; order is interceptor order."""

    _always_on_wire = ("protocol_version",)

    protocol_version: Literal["draft"] = "draft"
    hooks: Annotated[list[Hook], Field(min_length=1)]

    @model_validator(mode="after")
    def _unique_ids(self) -> Registration:
        first: dict[str, int] = {}
        for index, hook in enumerate(self.hooks):
            if hook.id in first:
                raise ValueError(
                    f"duplicate backend id {_show(hook.id)} "
                    f"(hooks[{index}] repeats hooks[{first[hook.id]}])"
                )
            first[hook.id] = index
        return self

    def hook(self, backend_id: str) -> Hook | None:
        """The backend registered under ``backend_id``, if any."""
        return next((h for h in self.hooks if h.id == backend_id), None)


class Configuration(_WireModel):
    """The ``configuration`` of a ``hooks/configuration`` result: subscriptions only."""

    subscriptions: Annotated[list[Subscription], Field(min_length=1)]

    def matching(self, event_type: str, mode: str) -> list[tuple[int, Subscription]]:
        """As :meth:`Hook.matching`, for subscriptions supplied by configuration."""
        return _matching(self.subscriptions, event_type, mode)


# --------------------------------------------------------------------------------------
# Document checks: every rule, on the plain JSON value, with wire paths.

Path = tuple[PathPart, ...]


class _Checks:
    def __init__(self) -> None:
        self.errors: list[tuple[Path, str]] = []

    def add(self, path: Path, reason: str) -> None:
        self.errors.append((path, reason))

    # -- small shape helpers -----------------------------------------------------------

    def obj(self, value: object, path: Path, what: str) -> dict[str, Any] | None:
        if isinstance(value, dict):
            return value
        self.add(path, f"{what} must be a JSON object")
        return None

    def string(self, value: object, path: Path, field: str, *, non_empty: bool = False) -> bool:
        if not isinstance(value, str):
            self.add(path, f"{field} must be a string")
            return False
        if non_empty and not value:
            self.add(path, f"{field} must not be empty")
            return False
        return True

    def enum(self, value: object, path: Path, field: str, allowed: Sequence[str]) -> bool:
        if isinstance(value, str) and value in allowed:
            return True
        self.add(path, f"{field} must be {_choices(allowed)}")
        return False

    def integer(self, value: object, path: Path, field: str, minimum: int) -> None:
        if not (_is_int(value) and isinstance(value, int | float) and value >= minimum):
            self.add(path, f"{field} must be an integer of at least {minimum}")

    def boolean(self, value: object, path: Path, field: str) -> None:
        if not isinstance(value, bool):
            self.add(path, f"{field} must be true or false")

    def string_set(self, value: object, path: Path, field: str) -> None:
        if not isinstance(value, list):
            self.add(path, f"{field} must be an array of non-empty strings")
            return
        first: dict[str, int] = {}
        for index, item in enumerate(value):
            if not isinstance(item, str) or not item:
                self.add((*path, index), f"{field} entries must be non-empty strings")
            elif item in first:
                self.add((*path, index), f"duplicate entry (first at {field}[{first[item]}])")
            else:
                first[item] = index

    # -- registration --------------------------------------------------------------------

    def registration(self, doc: object) -> None:
        root = self.obj(doc, (), "a registration document")
        if root is None:
            return
        if "protocolVersion" not in root:
            self.add((), f'protocolVersion is required (use "{PROTOCOL_VERSION}")')
        elif root["protocolVersion"] != PROTOCOL_VERSION:
            self.add(
                ("protocolVersion",),
                f"unsupported protocolVersion {_show(root['protocolVersion'])}; "
                f'this document format is "{PROTOCOL_VERSION}"',
            )
        if "hooks" not in root:
            self.add((), "hooks is required (an array of one or more backends)")
            return
        hooks = root["hooks"]
        if not isinstance(hooks, list):
            self.add(("hooks",), "hooks must be an array of backends")
            return
        if not hooks:
            self.add(("hooks",), "hooks must list at least one backend")
        first: dict[str, int] = {}
        for index, backend in enumerate(hooks):
            backend_id = self.backend(backend, ("hooks", index))
            if backend_id is None:
                continue
            if backend_id in first:
                self.add(
                    ("hooks", index, "id"),
                    f"duplicate backend id {_show(backend_id)} "
                    f"(first at hooks[{first[backend_id]}])",
                )
            else:
                first[backend_id] = index

    def backend(self, value: object, path: Path) -> str | None:
        backend = self.obj(value, path, "each backend")
        if backend is None:
            return None
        backend_id: str | None = None
        if "id" not in backend:
            self.add(path, 'id is required (a reverse-DNS name such as "com.example.policy")')
        elif not isinstance(backend["id"], str) or not _REVERSE_DNS.match(backend["id"]):
            self.add((*path, "id"), _REVERSE_DNS_ID)
        else:
            backend_id = backend["id"]
        if "contentReceiver" in backend:
            self.add((*path, "contentReceiver"), _CONTENT_RECEIVER)
        transport_type: str | None = None
        if "transport" not in backend:
            self.add(path, 'transport is required (type "stdio" or "http")')
        else:
            transport_type = self.transport(backend["transport"], (*path, "transport"))
        if "authentication" in backend:
            if transport_type == "stdio":
                self.add((*path, "authentication"), _AUTH_ONLY_HTTP)
            self.authentication(backend["authentication"], (*path, "authentication"))
        if "subscriptions" in backend:
            subs = backend["subscriptions"]
            if not isinstance(subs, list):
                self.add((*path, "subscriptions"), "subscriptions must be an array")
            elif not subs:
                self.add(
                    (*path, "subscriptions"),
                    "subscriptions must list at least one subscription; omit the field to "
                    "have the harness ask the backend with hooks/configuration",
                )
            else:
                for index, sub in enumerate(subs):
                    self.subscription(sub, (*path, "subscriptions", index))
        return backend_id

    # -- transport -----------------------------------------------------------------------

    def transport(self, value: object, path: Path) -> str | None:
        transport = self.obj(value, path, "transport")
        if transport is None:
            return None
        if "type" not in transport:
            self.add(path, 'type is required ("stdio" or "http")')
            return None
        kind = transport["type"]
        if kind == "stdio":
            self.stdio(transport, path)
            return "stdio"
        if kind == "http":
            self.http(transport, path)
            return "http"
        self.add((*path, "type"), f'unknown transport type {_show(kind)}; use "stdio" or "http"')
        return None

    def stdio(self, transport: dict[str, Any], path: Path) -> None:
        if "command" not in transport:
            self.add(path, "command is required for a stdio transport (the program to run)")
        else:
            self.string(transport["command"], (*path, "command"), "command", non_empty=True)
        if "args" in transport:
            args = transport["args"]
            if not isinstance(args, list):
                self.add((*path, "args"), "args must be an array of strings")
            else:
                for index, arg in enumerate(args):
                    if not isinstance(arg, str):
                        self.add((*path, "args", index), "each argument must be a string")
        if "lifecycle" not in transport:
            self.add(
                path,
                'lifecycle is required for a stdio transport ("persistent" or "per_event")',
            )
        else:
            self.enum(
                transport["lifecycle"],
                (*path, "lifecycle"),
                "lifecycle",
                ("persistent", "per_event"),
            )
        if "cwd" in transport:
            self.string(transport["cwd"], (*path, "cwd"), "cwd")
        if "env" in transport:
            env = self.obj(transport["env"], (*path, "env"), "env (literal name-to-value strings)")
            for name, item in (env or {}).items():
                problem = _env_entry_problem(name, item)
                if problem:
                    self.add((*path, "env", name), problem)
        if "headers" in transport:
            self.add((*path, "headers"), _HEADERS_ONLY_HTTP)

    def http(self, transport: dict[str, Any], path: Path) -> None:
        if "url" not in transport:
            self.add(path, "url is required for an http transport")
        elif self.string(transport["url"], (*path, "url"), "url"):
            problem = _http_url_problem(transport["url"])
            if problem:
                self.add((*path, "url"), problem)
        if "headers" in transport:
            self.headers(transport["headers"], (*path, "headers"))

    def headers(self, value: object, path: Path) -> None:
        headers = self.obj(value, path, "headers (header name to value)")
        if headers is None:
            return
        seen: dict[str, str] = {}
        for name, item in headers.items():
            if not _HEADER_NAME.match(name):
                self.add(
                    path,
                    f"header name {_show(name)} is not a valid HTTP token "
                    "(letters, digits and !#$%&'*+.^_`|~-)",
                )
                continue
            if name.lower() in seen:
                self.add(
                    path,
                    f"header {_show(name)} is given twice (first as {_show(seen[name.lower()])}); "
                    "header names ignore case",
                )
            seen.setdefault(name.lower(), name)
            where = (*path, name)
            if isinstance(item, str):
                problem = _header_value_problem(item)
                if problem:
                    self.add(where, problem)
            elif isinstance(item, dict):
                sources = [k for k in ("valueEnv", "valueRef") if k in item]
                if len(sources) != 1:
                    self.add(where, _HEADER_ONE_SOURCE)
                elif sources == ["valueEnv"]:
                    env = item["valueEnv"]
                    if not isinstance(env, str) or not _ENV_NAME.match(env):
                        self.add((*where, "valueEnv"), _VALUE_ENV)
                else:
                    self.string(item["valueRef"], (*where, "valueRef"), "valueRef", non_empty=True)
            else:
                self.add(where, _HEADER_ONE_SOURCE)

    # -- authentication ------------------------------------------------------------------

    def authentication(self, value: object, path: Path) -> None:
        auth = self.obj(value, path, "authentication")
        if auth is None:
            return
        if "type" not in auth:
            self.add(path, 'type is required ("bearer" or "oauth")')
            return
        kind = auth["type"]
        if kind == "bearer":
            self.bearer(auth, path)
        elif kind == "oauth":
            self.oauth(auth, path)
        else:
            self.add(
                (*path, "type"),
                f"unknown authentication type {_show(kind)}; the portable types are "
                '"bearer" and "oauth" (mTLS and workload identity are deployment-specific '
                "and configured outside the registration)",
            )

    def bearer(self, auth: dict[str, Any], path: Path) -> None:
        if "token" in auth:
            self.add((*path, "token"), _LITERAL_TOKEN)
        sources = [k for k in ("tokenEnv", "tokenRef") if k in auth]
        if len(sources) != 1:
            self.add(path, _BEARER_ONE_SOURCE)
        if "tokenEnv" in auth:
            env = auth["tokenEnv"]
            if not isinstance(env, str) or not _ENV_NAME.match(env):
                self.add((*path, "tokenEnv"), _TOKEN_ENV)
        if "tokenRef" in auth:
            self.string(auth["tokenRef"], (*path, "tokenRef"), "tokenRef", non_empty=True)

    def oauth(self, auth: dict[str, Any], path: Path) -> None:
        for field in ("resource", "issuer", "clientId", "flow"):
            if field not in auth:
                self.add(path, f"{field} is required for oauth authentication")
        for field in ("resource", "clientId", "clientSecretRef"):
            if field in auth:
                self.string(auth[field], (*path, field), field, non_empty=True)
        if "issuer" in auth and self.string(auth["issuer"], (*path, "issuer"), "issuer"):
            problem = _issuer_problem(auth["issuer"])
            if problem:
                self.add((*path, "issuer"), problem)
        if "flow" in auth:
            self.enum(
                auth["flow"],
                (*path, "flow"),
                "flow",
                ("authorization_code_pkce", "client_credentials"),
            )
        if "scopes" in auth:
            self.string_set(auth["scopes"], (*path, "scopes"), "scopes")
        if "clientSecret" in auth:
            self.add((*path, "clientSecret"), _LITERAL_CLIENT_SECRET)

    # -- subscriptions -------------------------------------------------------------------

    def subscription(self, value: object, path: Path) -> None:
        sub = self.obj(value, path, "each subscription")
        if sub is None:
            return
        mode: str | None = None
        if "mode" not in sub:
            self.add(path, 'mode is required ("intercept" or "observe")')
        elif self.enum(sub["mode"], (*path, "mode"), "mode", _MODES):
            mode = sub["mode"]
        self.events(sub, path, mode)
        if mode == "intercept":
            if "timeoutMs" not in sub:
                self.add(
                    path,
                    "intercept subscriptions need timeoutMs (an integer number of "
                    "milliseconds, at least 1)",
                )
            else:
                self.integer(sub["timeoutMs"], (*path, "timeoutMs"), "timeoutMs (milliseconds)", 1)
            if "failurePolicy" not in sub:
                self.add(
                    path,
                    'intercept subscriptions need failurePolicy ("fail-open" or "fail-closed")',
                )
            else:
                self.enum(
                    sub["failurePolicy"],
                    (*path, "failurePolicy"),
                    "failurePolicy",
                    ("fail-open", "fail-closed"),
                )
        elif mode == "observe":
            for field in ("timeoutMs", "failurePolicy"):
                if field in sub:
                    self.add(path, _OBSERVE_NO.format(field=field))
        if "content" not in sub:
            self.add(
                path,
                'content is required (an object with at least "default": "body", '
                '"metadata" or "omit"; there is no implicit content policy)',
            )
        else:
            self.content(sub["content"], (*path, "content"))
        if "includeNative" in sub:
            self.boolean(sub["includeNative"], (*path, "includeNative"), "includeNative")
        if "upload" in sub:
            self.upload(sub["upload"], (*path, "upload"))
        if "filters" in sub:
            filters = self.obj(sub["filters"], (*path, "filters"), "filters")
            for field in ("toolKinds", "paths"):
                if filters is not None and field in filters:
                    self.string_set(filters[field], (*path, "filters", field), field)
        if "scope" in sub:
            self.enum(sub["scope"], (*path, "scope"), "scope", ("managed", "project", "user"))
        if "disableable" in sub:
            self.boolean(sub["disableable"], (*path, "disableable"), "disableable")
        if sub.get("scope") == "managed":
            if "disableable" not in sub:
                self.add(path, f"{_MANAGED} (add it)")
            elif sub["disableable"] is not False:
                self.add((*path, "disableable"), _MANAGED)

    def events(self, sub: dict[str, Any], path: Path, mode: str | None) -> None:
        if "events" not in sub:
            self.add(
                path, f"events is required (a non-empty array of selectors; {_SELECTOR_FORMS})"
            )
            return
        events = sub["events"]
        where = (*path, "events")
        if not isinstance(events, list):
            self.add(where, f"events must be an array of selectors; {_SELECTOR_FORMS}")
            return
        if not events:
            self.add(where, f"events must list at least one selector; {_SELECTOR_FORMS}")
        first: dict[str, int] = {}
        for index, selector in enumerate(events):
            if not isinstance(selector, str):
                self.add((*where, index), f"each selector must be a string; {_SELECTOR_FORMS}")
                continue
            problem = _selector_problem(selector, mode)
            if problem:
                self.add((*where, index), problem)
            elif selector in first:
                self.add(
                    (*where, index),
                    f"duplicate selector {_show(selector)} (first at events[{first[selector]}])",
                )
            else:
                first[selector] = index

    def content(self, value: object, path: Path) -> None:
        content = self.obj(value, path, 'content (for example {"default": "metadata"})')
        if content is None:
            return
        if "default" not in content:
            self.add(
                path,
                f"default is required ({_choices(SELECTIONS)}); it applies to every "
                "category not listed",
            )
        for key, item in content.items():
            if item not in SELECTIONS:
                self.add((*path, key), _SELECTION)

    def upload(self, value: object, path: Path) -> None:
        upload = self.obj(value, path, "upload")
        if upload is None:
            return
        if "endpoint" not in upload:
            self.add(path, "endpoint is required for upload")
        elif self.string(upload["endpoint"], (*path, "endpoint"), "endpoint"):
            problem = _upload_endpoint_problem(upload["endpoint"])
            if problem:
                self.add((*path, "endpoint"), problem)
        if "timeoutMs" not in upload:
            self.add(path, "timeoutMs is required for upload (milliseconds, at least 1)")
        else:
            self.integer(upload["timeoutMs"], (*path, "timeoutMs"), "timeoutMs (milliseconds)", 1)
        if "maxBytes" not in upload:
            self.add(path, "maxBytes is required for upload (an integer of at least 0)")
        else:
            self.integer(upload["maxBytes"], (*path, "maxBytes"), "maxBytes", 0)
        if "auth" in upload:
            self.authentication(upload["auth"], (*path, "auth"))

    # -- configuration -------------------------------------------------------------------

    def configuration(self, doc: object) -> None:
        root = self.obj(doc, (), "a configuration")
        if root is None:
            return
        if "subscriptions" not in root:
            self.add((), "subscriptions is required (an array of one or more subscriptions)")
            return
        subs = root["subscriptions"]
        if not isinstance(subs, list):
            self.add(("subscriptions",), "subscriptions must be an array")
            return
        if not subs:
            self.add(("subscriptions",), "subscriptions must list at least one subscription")
        for index, sub in enumerate(subs):
            self.subscription(sub, ("subscriptions", index))


# --------------------------------------------------------------------------------------
# Loaders

# Discriminated-union members pydantic inserts into error locations: (container, tag).
_UNION_TAGS: Final = {
    "transport": {"stdio", "http"},
    "authentication": {"bearer", "oauth"},
    "auth": {"bearer", "oauth"},
    "subscriptions": {"intercept", "observe"},
}


def _wire_loc(loc: Sequence[PathPart]) -> tuple[PathPart, ...]:
    """Drop union bookkeeping so a pydantic location is a document path."""
    out: list[PathPart] = []
    for part in loc:
        if isinstance(part, str) and out:
            owner = out[-1]
            if isinstance(owner, int) and len(out) > 1:
                owner = out[-2]
            if isinstance(owner, str) and part in _UNION_TAGS.get(owner, ()):
                continue
            if part in ("literal", "source") and len(out) > 1 and out[-2] == "headers":
                continue
        out.append(part)
    return tuple(out)


def _backstop(exc: ValidationError) -> list[WireError]:
    """Model validation errors as wire errors (shapes the document checks did not cover)."""
    line_errors: list[Any] = []
    for err in exc.errors(include_url=False):
        detail: dict[str, Any] = {
            "type": err["type"],
            "loc": _wire_loc(err["loc"]),
            "input": err.get("input"),
        }
        if "ctx" in err:
            detail["ctx"] = err["ctx"]
        line_errors.append(detail)
    try:
        cleaned = ValidationError.from_exception_data(exc.title, line_errors, hide_input=True)
    except (TypeError, ValueError, KeyError):
        return from_validation_error(exc).errors
    return from_validation_error(cleaned).errors


def _depth(path: str) -> int:
    return 0 if path == "$" else len(re.findall(r"\[\d+\]|[^.\[\]]+", path))


def _covers(outer: str, inner: str) -> bool:
    """Whether ``outer`` is ``inner`` or one of its enclosing paths."""
    return (
        outer == "$"
        or inner == outer
        or inner.startswith(outer + ".")
        or inner.startswith(outer + "[")
    )


_SEGMENT_START: Final = re.compile(r"(?=[.\[])")


class _FoundPaths:
    """The paths of the errors found so far, asked whether a path covers one of them
    or is covered by one (:func:`_covers`, either way) in time linear in that path's
    length, however many were found (a scan of them all made a document with many
    broken entries cost quadratic time).

    A path is split before each ``.`` and ``[`` (the boundaries ``_covers`` tests);
    the found paths form a tree of those segments, so a path is covered by a found
    one exactly when a found path ends on its way down, and covers one exactly when
    the way down exists to its end.
    """

    def __init__(self) -> None:
        self._tree: dict[str | None, Any] = {}  # key None: a found path ends here
        self._any = False
        self._everything = False  # "$" was found: it covers every path

    def add(self, path: str) -> None:
        self._any = True
        if path == "$":
            self._everything = True
            return
        node = self._tree
        for segment in _SEGMENT_START.split(path):
            node = node.setdefault(segment, {})
        node[None] = {}

    def related(self, path: str) -> bool:
        """``any(_covers(f, path) or _covers(path, f) for f in found)``, for ``path``
        anything but the empty string."""
        if self._everything or (path == "$" and self._any):
            return True
        node = self._tree
        for segment in _SEGMENT_START.split(path):
            child = node.get(segment)
            if child is None:
                return False
            node = child
            if None in node:
                return True
        return True


def _run(
    check: Callable[[_Checks, object], None],
    model: type[Registration] | type[Configuration],
    obj: object,
) -> Registration | Configuration:
    checks = _Checks()
    check(checks, obj)
    found = [WireError(json_path(path), reason) for path, reason in checks.errors]
    result: Registration | Configuration | None = None
    try:
        # Wire names only: a snake_case key in a document is an unknown field, kept as is.
        result = model.model_validate(obj, by_alias=True, by_name=False)
    except ValidationError as exc:
        paths = _FoundPaths()
        for error in found:
            paths.add(error.path)
        for error in _backstop(exc):
            if not paths.related(error.path):
                found.append(error)
                paths.add(error.path)
    if found:
        ordered = sorted(found, key=lambda e: -_depth(e.path))
        raise WireErrors(ordered)
    assert result is not None
    return result


def parse_registration(obj: object) -> Registration:
    """Validate a decoded registration document.

    Raises :class:`WireErrors` listing every problem, most specific path first.
    """
    result = _run(_Checks.registration, Registration, obj)
    assert isinstance(result, Registration)
    return result


def parse_configuration(obj: object) -> Configuration:
    """Validate the ``configuration`` object of a ``hooks/configuration`` result."""
    result = _run(_Checks.configuration, Configuration, obj)
    assert isinstance(result, Configuration)
    return result


class _DuplicateKeyError(ValueError):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _DuplicateKeyError(key)
        out[key] = value
    return out


class _ConstantError(ValueError):
    pass


def _no_constant(name: str) -> Any:
    raise _ConstantError(name)


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
    except _DuplicateKeyError as exc:
        raise fail(
            f"duplicate key {_show(exc.key)} in one JSON object (ambiguous; keep one)"
        ) from None
    except _ConstantError as exc:
        raise fail(f"{exc.args[0]} is not valid JSON (not a number)") from None
    except ValueError:
        raise fail("cannot be decoded as JSON") from None
    return parse_registration(doc)

"""Every rule of a registration and of a ``hooks/configuration`` result, written once.

Owns :class:`Checks`, a walker over the plain JSON value of a document (draft §9 and the
official registration schema) that records each violation as ``(path, reason)``: the
wire path of the offending value and what to fix. :mod:`ahp_protocol.wire.registration`
runs it before building models. Never does I/O, builds models or checks against a
harness manifest; reasons never quote secret material.
"""

from __future__ import annotations

import json
import math
import re
import string
from collections.abc import Iterable, Sequence
from typing import Any, Final, Literal, get_args
from urllib.parse import urlsplit

from .catalogue import EVENT_TYPE_SET, INTERCEPTABLE_SET, REMOVED, Mode, expand, is_wildcard
from .errors import PathPart
from .jsonrpc import PROTOCOL_VERSION
from .names import ENV_NAME, HEADER_NAME, is_reverse_dns
from .routing import Policy, Scope

Path = tuple[PathPart, ...]
_Obj = dict[str, Any]

Selection = Literal["body", "metadata", "omit"]
Lifecycle = Literal["persistent", "per_event"]
OAuthFlow = Literal["authorization_code_pkce", "client_credentials"]
SELECTIONS: Final = get_args(Selection)

# What each URL member accepts (official schemas), and what to say when it does not.
_URL_SCHEMES: Final = {
    "url": (
        re.compile(r"^https?://"),
        "url must be an absolute URL starting with https:// (or http:// for loopback)",
    ),
    "issuer": (re.compile(r"^https://"), "issuer must be an https:// URL"),
    "endpoint": (
        re.compile(
            r"^(?:https://|http://(?:localhost|127\.[0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,3}|\[::1\])"
            r"(?::[0-9]+)?(?:[/?#]|$))"
        ),
        "upload endpoint must use https://; plain http:// is only allowed on "
        "localhost, 127.x.x.x or [::1]",
    ),
}
_URI_CHARS: Final = frozenset(string.ascii_letters + string.digits + "-._~:/?#[]@!$&'()*+,;=%")
_PERCENT: Final = re.compile(r"%(?![0-9A-Fa-f]{2})")

_SELECTOR_FORMS: Final = (
    'use an exact event name such as "tool.before", a family wildcard such as "tool.*", or "*"'
)
_MANAGED: Final = 'scope "managed" requires disableable: false'


def show(value: object, limit: int = 64) -> str:
    """A short JSON rendering of a non-secret value for a reason."""
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    if len(text) > limit:
        text = text[: limit - 1] + "\u2026"
    return json.dumps(text, ensure_ascii=False) if isinstance(value, str) else text


def _choices(values: Iterable[str]) -> str:
    quoted = [f'"{v}"' for v in values]
    return ", ".join(quoted[:-1]) + f" or {quoted[-1]}" if len(quoted) > 1 else quoted[0]


def _selector_problem(selector: str, mode: str | None) -> str | None:
    """Why one ``events`` entry is not allowed in ``mode`` (None: mode unknown)."""
    if selector in EVENT_TYPE_SET:
        if mode == "intercept" and selector not in INTERCEPTABLE_SET:
            return (
                f"{show(selector)} cannot be intercepted (observe-only event); "
                'subscribe to it with mode "observe"'
            )
        return None
    if is_wildcard(selector):
        if mode == "intercept" and not expand(selector, "intercept"):
            return (
                f"{show(selector)} covers no interceptable event; an intercept wildcard "
                "must cover at least one interceptable event"
            )
        return None
    if selector in REMOVED:
        return (
            f"{show(selector)} was removed from the draft and is not a standard event; "
            f"{_SELECTOR_FORMS}"
        )
    return f"{show(selector)} is not a standard event name or selector; {_SELECTOR_FORMS}"


def _is_int(value: object) -> bool:
    """A JSON integer (an integral number; booleans are not numbers)."""
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return True
    return isinstance(value, float) and math.isfinite(value) and value.is_integer()


_SETS: Final = ("scopes", "toolKinds", "paths")  # arrays of unique non-empty strings

# What to say when a required member is missing: (kind of object, member) -> reason.
_REQUIRED: Final = {
    ("registration", "protocolVersion"): f'protocolVersion is required (use "{PROTOCOL_VERSION}")',
    ("registration", "hooks"): "hooks is required (an array of one or more backends)",
    ("backend", "id"): 'id is required (a reverse-DNS name such as "com.example.policy")',
    ("backend", "transport"): 'transport is required (type "stdio" or "http")',
    ("transport", "type"): 'type is required ("stdio" or "http")',
    ("stdio", "command"): "command is required for a stdio transport (the program to run)",
    ("stdio", "lifecycle"): (
        'lifecycle is required for a stdio transport ("persistent" or "per_event")'
    ),
    ("http", "url"): "url is required for an http transport",
    ("authentication", "type"): 'type is required ("bearer" or "oauth")',
    ("subscription", "mode"): 'mode is required ("intercept" or "observe")',
    ("subscription", "events"): (
        f"events is required (a non-empty array of selectors; {_SELECTOR_FORMS})"
    ),
    ("intercept", "timeoutMs"): (
        "intercept subscriptions need timeoutMs (an integer number of milliseconds, at least 1)"
    ),
    ("intercept", "failurePolicy"): (
        'intercept subscriptions need failurePolicy ("fail-open" or "fail-closed")'
    ),
    ("subscription", "content"): (
        'content is required (an object with at least "default": "body", "metadata" or '
        '"omit"; there is no implicit content policy)'
    ),
    ("content", "default"): (
        f"default is required ({_choices(SELECTIONS)}); it applies to every category not listed"
    ),
    ("upload", "endpoint"): "endpoint is required for upload",
    ("upload", "timeoutMs"): "timeoutMs is required for upload (milliseconds, at least 1)",
    ("upload", "maxBytes"): "maxBytes is required for upload (an integer of at least 0)",
    ("configuration", "subscriptions"): (
        "subscriptions is required (an array of one or more subscriptions)"
    ),
}


# What to say when an array member is not an array, or is empty: (kind, member) -> reasons.
_ARRAYS: Final = {
    ("registration", "hooks"): (
        "hooks must be an array of backends",
        "hooks must list at least one backend",
    ),
    ("backend", "subscriptions"): (
        "subscriptions must be an array",
        "subscriptions must list at least one subscription; omit the field to "
        "have the harness ask the backend with hooks/configuration",
    ),
    ("configuration", "subscriptions"): (
        "subscriptions must be an array",
        "subscriptions must list at least one subscription",
    ),
    ("subscription", "events"): (
        f"events must be an array of selectors; {_SELECTOR_FORMS}",
        f"events must list at least one selector; {_SELECTOR_FORMS}",
    ),
    ("stdio", "args"): ("args must be an array of strings", ""),
    **{("set", k): (f"{k} must be an array of non-empty strings", "") for k in _SETS},
}


class Checks:
    """One walk over a document; ``errors`` holds every violation found, in walk order.

    A part method (``registration``, ``backend``, ``transport``, ...) takes the plain
    JSON value of that part and its wire path. A member check takes the object, the
    member's key and the object's path; it returns the member's value when present and
    valid, and reports a missing member only when ``need`` names the object's kind.
    """

    def __init__(self) -> None:
        self.errors: list[tuple[Path, str]] = []

    def add(self, path: Path, reason: str) -> None:
        self.errors.append((path, reason))

    # -- shapes --------------------------------------------------------------------------

    def obj(self, value: object, path: Path, what: str) -> _Obj | None:
        if isinstance(value, dict):
            return value
        self.add(path, f"{what} must be a JSON object")
        return None

    def array(self, obj: _Obj, key: str, path: Path, kind: str, need: bool = False) -> list[Any]:
        """The member as a list; ``[]`` when it is absent or not an array (reported)."""
        if not self.has(obj, key, path, kind if need else ""):
            return []
        value, (not_array, empty) = obj[key], _ARRAYS[kind, key]
        if not isinstance(value, list):
            self.add((*path, key), not_array)
            return []
        if not value and empty:
            self.add((*path, key), empty)
        return value

    def has(self, obj: _Obj, key: str, path: Path, need: str) -> bool:
        if key not in obj and need:
            self.add(path, _REQUIRED[need, key])
        return key in obj

    def string(
        self, obj: _Obj, key: str, path: Path, *, need: str = "", non_empty: bool = False
    ) -> str | None:
        if not self.has(obj, key, path, need):
            return None
        value = obj[key]
        if not isinstance(value, str):
            self.add((*path, key), f"{key} must be a string")
        elif non_empty and not value:
            self.add((*path, key), f"{key} must not be empty")
        else:
            return value
        return None

    def enum(
        self, obj: _Obj, key: str, path: Path, allowed: Sequence[str], need: str = ""
    ) -> str | None:
        if not self.has(obj, key, path, need):
            return None
        if isinstance(obj[key], str) and obj[key] in allowed:
            return str(obj[key])
        self.add((*path, key), f"{key} must be {_choices(allowed)}")
        return None

    def integer(self, obj: _Obj, key: str, path: Path, minimum: int, need: str = "") -> None:
        if not self.has(obj, key, path, need):
            return
        value, label = obj[key], "timeoutMs (milliseconds)" if key == "timeoutMs" else key
        if not (_is_int(value) and isinstance(value, int | float) and value >= minimum):
            self.add((*path, key), f"{label} must be an integer of at least {minimum}")
        elif isinstance(value, float) and value >= 2**63:  # no integer field holds it
            self.add(
                (*path, key),
                f"{label} is too large (a number written with an exponent must be below 2^63)",
            )

    def boolean(self, obj: _Obj, key: str, path: Path) -> None:
        if key in obj and not isinstance(obj[key], bool):
            self.add((*path, key), f"{key} must be true or false")

    def env_name(self, obj: _Obj, key: str, path: Path) -> None:
        if key in obj and not (isinstance(obj[key], str) and ENV_NAME.fullmatch(obj[key])):
            self.add(
                (*path, key),
                f"{key} must be an environment variable name (letters, digits and underscores, "
                "not starting with a digit)",
            )

    def url(self, obj: _Obj, key: str, path: Path, need: str = "") -> None:
        """An absolute URI with a host (RFC 3986 characters only) in the member's scheme."""
        url, where = self.string(obj, key, path, need=need), (*path, key)
        scheme, wrong_scheme = _URL_SCHEMES[key]
        if url is None:
            return
        if not scheme.match(url):
            self.add(where, wrong_scheme)
            return
        if any(ch not in _URI_CHARS for ch in url) or _PERCENT.search(url):
            self.add(
                where,
                f"{key} contains characters that are not allowed in a URI (percent-encode them)",
            )
            return
        try:
            parts = urlsplit(url)
            _ = parts.port
        except ValueError:
            self.add(where, f"{key} is not a well-formed URI (check the host and port)")
            return
        if not parts.hostname:
            self.add(where, f"{key} must name a host")

    def string_set(self, obj: _Obj, key: str, path: Path) -> None:
        if key not in obj:
            return
        where, first = (*path, key), dict[str, int]()
        for index, item in enumerate(self.array(obj, key, path, "set")):
            if not isinstance(item, str) or not item:
                self.add((*where, index), f"{key} entries must be non-empty strings")
            elif item in first:
                self.add((*where, index), f"duplicate entry (first at {key}[{first[item]}])")
            else:
                first[item] = index

    # -- registration --------------------------------------------------------------------

    def registration(self, doc: object, path: Path = ()) -> None:
        root = self.obj(doc, path, "a registration document")
        if root is None:
            return
        if (
            self.has(root, "protocolVersion", path, "registration")
            and root["protocolVersion"] != PROTOCOL_VERSION
        ):
            self.add(
                (*path, "protocolVersion"),
                f"unsupported protocolVersion {show(root['protocolVersion'])}; "
                f'this document format is "{PROTOCOL_VERSION}"',
            )
        where, first = (*path, "hooks"), dict[str, int]()
        for index, backend in enumerate(self.array(root, "hooks", path, "registration", True)):
            backend_id = self.backend(backend, (*where, index))
            if backend_id is not None and backend_id in first:
                self.add(
                    (*where, index, "id"),
                    f"duplicate backend id {show(backend_id)} "
                    f"(first at hooks[{first[backend_id]}])",
                )
            elif backend_id is not None:
                first[backend_id] = index

    def backend(self, value: object, path: Path) -> str | None:
        """Check one backend; its id when that id is valid."""
        backend = self.obj(value, path, "each backend")
        if backend is None:
            return None
        backend_id: str | None = None
        if self.has(backend, "id", path, "backend") and is_reverse_dns(backend["id"]):
            backend_id = backend["id"]
        elif "id" in backend:
            self.add(
                (*path, "id"),
                'backend id must be a reverse-DNS name such as "com.example.policy" '
                "(two or more dot-separated segments, each starting with a letter)",
            )
        if "contentReceiver" in backend:
            self.add(
                (*path, "contentReceiver"),
                "contentReceiver is no longer supported; configure upload on each "
                "subscription instead",
            )
        transport_type: str | None = None
        if self.has(backend, "transport", path, "backend"):
            transport_type = self.transport(backend["transport"], (*path, "transport"))
        if "authentication" in backend:
            if transport_type == "stdio":
                self.add(
                    (*path, "authentication"),
                    "authentication is only allowed with an http transport (a stdio backend "
                    "is trusted as a local process)",
                )
            self.authentication(backend["authentication"], (*path, "authentication"))
        for index, sub in enumerate(self.array(backend, "subscriptions", path, "backend")):
            self.subscription(sub, (*path, "subscriptions", index))
        return backend_id

    # -- transport -----------------------------------------------------------------------

    def transport(self, value: object, path: Path) -> str | None:
        """Check a transport; its type when that type is known."""
        transport = self.obj(value, path, "transport")
        if transport is None or not self.has(transport, "type", path, "transport"):
            return None
        kind = transport["type"]
        if kind == "stdio":
            self.stdio(transport, path)
            return "stdio"
        if kind == "http":
            self.url(transport, "url", path, need="http")
            if "headers" in transport:
                self.headers(transport["headers"], (*path, "headers"))
            return "http"
        self.add((*path, "type"), f'unknown transport type {show(kind)}; use "stdio" or "http"')
        return None

    def stdio(self, transport: _Obj, path: Path) -> None:
        self.string(transport, "command", path, need="stdio", non_empty=True)
        for index, arg in enumerate(self.array(transport, "args", path, "stdio")):
            if not isinstance(arg, str):
                self.add((*path, "args", index), "each argument must be a string")
        self.enum(transport, "lifecycle", path, get_args(Lifecycle), need="stdio")
        self.string(transport, "cwd", path)
        if "env" in transport:
            env = self.obj(transport["env"], (*path, "env"), "env (literal name-to-value strings)")
            for name, item in (env or {}).items():
                where = (*path, "env", name)
                if not name or "=" in name or "\x00" in name:
                    self.add(
                        where,
                        f"environment variable name {show(name)} must be non-empty "
                        'and must not contain "=" or NUL',
                    )
                elif not isinstance(item, str):
                    self.add(
                        where, "env values must be literal strings (they are never interpolated)"
                    )
                elif "\x00" in item:
                    self.add(where, "env values must not contain NUL")
        if "headers" in transport:
            self.add((*path, "headers"), "headers are only allowed with an http transport")

    def headers(self, value: object, path: Path) -> None:
        headers = self.obj(value, path, "headers (header name to value)")
        seen: dict[str, str] = {}
        for name, item in (headers or {}).items():
            if not HEADER_NAME.fullmatch(name):
                self.add(
                    path,
                    f"header name {show(name)} is not a valid HTTP token "
                    "(letters, digits and !#$%&'*+.^_`|~-)",
                )
                continue
            if name.lower() in seen:
                self.add(
                    path,
                    f"header {show(name)} is given twice (first as {show(seen[name.lower()])}); "
                    "header names ignore case",
                )
            seen.setdefault(name.lower(), name)
            if not isinstance(item, str):
                self.header_source(item, (*path, name))
            elif any(ch in item for ch in "\r\n\x00"):
                self.add((*path, name), "header values must not contain CR, LF or NUL")
            elif any(ord(ch) > 255 for ch in item):
                self.add((*path, name), "header values must be latin-1 text")

    def header_source(self, value: object, path: Path) -> None:
        """A header value taken from ``valueEnv`` or ``valueRef`` (exactly one)."""
        if not isinstance(value, dict) or ("valueEnv" in value) == ("valueRef" in value):
            self.add(
                path,
                "a header value is a literal string or an object with exactly one of valueEnv "
                "or valueRef",
            )
            return
        self.env_name(value, "valueEnv", path)
        self.string(value, "valueRef", path, non_empty=True)

    # -- authentication ------------------------------------------------------------------

    def authentication(self, value: object, path: Path) -> None:
        auth = self.obj(value, path, "authentication")
        if auth is None or not self.has(auth, "type", path, "authentication"):
            return
        if auth["type"] == "bearer":
            if "token" in auth:
                self.add(
                    (*path, "token"),
                    "a literal token is never allowed in a registration; name an environment "
                    "variable with tokenEnv or a secret reference with tokenRef",
                )
            if ("tokenEnv" in auth) == ("tokenRef" in auth):
                self.add(path, "bearer authentication needs exactly one of tokenEnv or tokenRef")
            self.env_name(auth, "tokenEnv", path)
            self.string(auth, "tokenRef", path, non_empty=True)
        elif auth["type"] == "oauth":
            self.oauth(auth, path)
        else:
            self.add(
                (*path, "type"),
                f"unknown authentication type {show(auth['type'])}; the portable types are "
                '"bearer" and "oauth" (mTLS and workload identity are deployment-specific '
                "and configured outside the registration)",
            )

    def oauth(self, auth: _Obj, path: Path) -> None:
        for field in ("resource", "issuer", "clientId", "flow"):
            if field not in auth:
                self.add(path, f"{field} is required for oauth authentication")
        for field in ("resource", "clientId", "clientSecretRef"):
            self.string(auth, field, path, non_empty=True)
        self.url(auth, "issuer", path)
        self.enum(auth, "flow", path, get_args(OAuthFlow))
        self.string_set(auth, "scopes", path)
        if "clientSecret" in auth:
            self.add(
                (*path, "clientSecret"),
                "a literal client secret is never allowed in a registration; use clientSecretRef",
            )

    # -- subscriptions -------------------------------------------------------------------

    def subscription(self, value: object, path: Path) -> None:
        sub = self.obj(value, path, "each subscription")
        if sub is None:
            return
        mode = self.enum(sub, "mode", path, get_args(Mode), need="subscription")
        self.events(sub, path, mode)
        if mode == "intercept":
            self.integer(sub, "timeoutMs", path, 1, need="intercept")
            self.enum(sub, "failurePolicy", path, get_args(Policy), need="intercept")
        elif mode == "observe":
            for field in ("timeoutMs", "failurePolicy"):
                if field in sub:
                    self.add(
                        path,
                        f"observe subscriptions must not have {field} (only intercept "
                        'subscriptions wait for an answer); remove it or use mode "intercept"',
                    )
        if self.has(sub, "content", path, "subscription"):
            self.content(sub["content"], (*path, "content"))
        self.boolean(sub, "includeNative", path)
        if "upload" in sub:
            self.upload(sub["upload"], (*path, "upload"))
        if "filters" in sub:
            self.filters(sub["filters"], (*path, "filters"))
        self.enum(sub, "scope", path, get_args(Scope))
        self.boolean(sub, "disableable", path)
        if sub.get("scope") == "managed" and "disableable" not in sub:
            self.add(path, f"{_MANAGED} (add it)")
        elif sub.get("scope") == "managed" and sub["disableable"] is not False:
            self.add((*path, "disableable"), _MANAGED)

    def events(self, sub: _Obj, path: Path, mode: str | None) -> None:
        where, first = (*path, "events"), dict[str, int]()
        for index, selector in enumerate(self.array(sub, "events", path, "subscription", True)):
            problem = (
                _selector_problem(selector, mode)
                if isinstance(selector, str)
                else f"each selector must be a string; {_SELECTOR_FORMS}"
            )
            if problem:
                self.add((*where, index), problem)
            elif selector in first:
                self.add(
                    (*where, index),
                    f"duplicate selector {show(selector)} (first at events[{first[selector]}])",
                )
            else:
                first[selector] = index

    def content(self, value: object, path: Path) -> None:
        content = self.obj(value, path, 'content (for example {"default": "metadata"})')
        if content is None:
            return
        self.has(content, "default", path, "content")
        for key, item in content.items():
            if item not in SELECTIONS:
                self.add((*path, key), f"content selection must be {_choices(SELECTIONS)}")

    def filters(self, value: object, path: Path) -> None:
        filters = self.obj(value, path, "filters")
        for field in ("toolKinds", "paths"):
            if filters is not None:
                self.string_set(filters, field, path)

    def upload(self, value: object, path: Path) -> None:
        upload = self.obj(value, path, "upload")
        if upload is None:
            return
        self.url(upload, "endpoint", path, need="upload")
        self.integer(upload, "timeoutMs", path, 1, need="upload")
        self.integer(upload, "maxBytes", path, 0, need="upload")
        if "auth" in upload:
            self.authentication(upload["auth"], (*path, "auth"))

    # -- configuration -------------------------------------------------------------------

    def configuration(self, doc: object, path: Path = ()) -> None:
        root = self.obj(doc, path, "a configuration")
        if root is None:
            return
        for index, sub in enumerate(self.array(root, "subscriptions", path, "configuration", True)):
            self.subscription(sub, (*path, "subscriptions", index))

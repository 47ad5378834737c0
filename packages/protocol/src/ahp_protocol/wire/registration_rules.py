"""Every rule of a registration and of a ``hooks/configuration`` result, written once.

Owns :class:`Checks`, a walker over the plain JSON value of a document (draft
section 9 and the official registration schema) that records each violation as
``(path, reason)``: the wire path of the offending value and a reason that says
what to fix. :mod:`ahp_protocol.wire.registration` runs it on a decoded document
before building its models, and on the wire form of a model built in Python.

Never does: I/O, model building, or checks against a harness manifest. Reasons
never quote secret material (tokens, header or environment values).
"""

from __future__ import annotations

import json
import math
import re
import string
from collections.abc import Iterable, Sequence
from typing import Any, Final
from urllib.parse import urlsplit

from .catalogue import EVENT_TYPE_SET, INTERCEPTABLE_SET, REMOVED, expand, is_wildcard
from .errors import PathPart
from .jsonrpc import PROTOCOL_VERSION
from .names import is_reverse_dns

Path = tuple[PathPart, ...]

SELECTIONS: Final = ("body", "metadata", "omit")
CONTENT_CATEGORIES: Final = ("text", "reasoning", "images", "audio", "video", "files")

# Patterns of the official registration / content-upload schemas.
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

_SELECTOR_FORMS: Final = (
    'use an exact event name such as "tool.before", a family wildcard such as "tool.*", or "*"'
)
_ENV_RULE: Final = (
    "must be an environment variable name (letters, digits and underscores, "
    "not starting with a digit)"
)
_HEADER_ONE_SOURCE: Final = (
    "a header value is a literal string or an object with exactly one of valueEnv or valueRef"
)
_HTTP_URL_RULE: Final = (
    "url must be an absolute URL starting with https:// (or http:// for loopback)"
)
_UPLOAD_ENDPOINT_RULE: Final = (
    "upload endpoint must use https://; plain http:// is only allowed on "
    "localhost, 127.x.x.x or [::1]"
)
_MANAGED: Final = 'scope "managed" requires disableable: false'
_OBSERVE_NO: Final = (
    "observe subscriptions must not have {field} (only intercept subscriptions wait for "
    'an answer); remove it or use mode "intercept"'
)


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


class Checks:
    """One walk over a document; ``errors`` holds every violation found, in walk order.

    Each part method takes the plain JSON value of that part and its wire path.
    """

    def __init__(self) -> None:
        self.errors: list[tuple[Path, str]] = []

    def add(self, path: Path, reason: str) -> None:
        self.errors.append((path, reason))

    # -- small shape helpers -----------------------------------------------------------

    def has(self, obj: dict[str, Any], kind: str, key: str, path: Path) -> bool:
        """Whether ``obj`` has the required ``key``; if not, that is reported at ``path``."""
        if key not in obj:
            self.add(path, _REQUIRED[kind, key])
        return key in obj

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
        elif isinstance(value, float) and value >= 2**63:  # no integer field holds it
            self.add(
                path, f"{field} is too large (a number written with an exponent must be below 2^63)"
            )

    def boolean(self, value: object, path: Path, field: str) -> None:
        if not isinstance(value, bool):
            self.add(path, f"{field} must be true or false")

    def env_name(self, value: object, path: Path, field: str) -> None:
        if not isinstance(value, str) or not _ENV_NAME.match(value):
            self.add(path, f"{field} {_ENV_RULE}")

    def url(self, url: str, path: Path, scheme: re.Pattern[str], wrong_scheme: str) -> None:
        """An absolute URI with a host (RFC 3986 characters only) that ``scheme`` accepts."""
        label = str(path[-1])
        if not scheme.match(url):
            self.add(path, wrong_scheme)
        elif any(ch not in _URI_CHARS for ch in url) or _PERCENT.search(url):
            self.add(
                path,
                f"{label} contains characters that are not allowed in a URI (percent-encode them)",
            )
        else:
            try:
                parts = urlsplit(url)
                _ = parts.port
            except ValueError:
                self.add(path, f"{label} is not a well-formed URI (check the host and port)")
                return
            if not parts.hostname:
                self.add(path, f"{label} must name a host")

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

    def registration(self, doc: object, path: Path = ()) -> None:
        root = self.obj(doc, path, "a registration document")
        if root is None:
            return
        version = root.get("protocolVersion")
        if self.has(root, "registration", "protocolVersion", path) and version != PROTOCOL_VERSION:
            self.add(
                (*path, "protocolVersion"),
                f"unsupported protocolVersion {show(version)}; "
                f'this document format is "{PROTOCOL_VERSION}"',
            )
        if not self.has(root, "registration", "hooks", path):
            return
        hooks, where = root["hooks"], (*path, "hooks")
        if not isinstance(hooks, list):
            self.add(where, "hooks must be an array of backends")
            return
        if not hooks:
            self.add(where, "hooks must list at least one backend")
        first: dict[str, int] = {}
        for index, backend in enumerate(hooks):
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
        if self.has(backend, "backend", "id", path) and is_reverse_dns(backend["id"]):
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
        if self.has(backend, "backend", "transport", path):
            transport_type = self.transport(backend["transport"], (*path, "transport"))
        if "authentication" in backend:
            if transport_type == "stdio":
                self.add(
                    (*path, "authentication"),
                    "authentication is only allowed with an http transport (a stdio backend "
                    "is trusted as a local process)",
                )
            self.authentication(backend["authentication"], (*path, "authentication"))
        if "subscriptions" in backend:
            subs, where = backend["subscriptions"], (*path, "subscriptions")
            if not isinstance(subs, list):
                self.add(where, "subscriptions must be an array")
            elif not subs:
                self.add(
                    where,
                    "subscriptions must list at least one subscription; omit the field to "
                    "have the harness ask the backend with hooks/configuration",
                )
            for index, sub in enumerate(subs if isinstance(subs, list) else ()):
                self.subscription(sub, (*where, index))
        return backend_id

    # -- transport -----------------------------------------------------------------------

    def transport(self, value: object, path: Path) -> str | None:
        """Check a transport; its type when that type is known."""
        transport = self.obj(value, path, "transport")
        if transport is None or not self.has(transport, "transport", "type", path):
            return None
        kind = transport["type"]
        if kind == "stdio":
            self.stdio(transport, path)
            return "stdio"
        if kind == "http":
            self.http(transport, path)
            return "http"
        self.add((*path, "type"), f'unknown transport type {show(kind)}; use "stdio" or "http"')
        return None

    def stdio(self, transport: dict[str, Any], path: Path) -> None:
        if self.has(transport, "stdio", "command", path):
            self.string(transport["command"], (*path, "command"), "command", non_empty=True)
        if "args" in transport:
            args = transport["args"]
            if not isinstance(args, list):
                self.add((*path, "args"), "args must be an array of strings")
            for index, arg in enumerate(args if isinstance(args, list) else ()):
                if not isinstance(arg, str):
                    self.add((*path, "args", index), "each argument must be a string")
        if self.has(transport, "stdio", "lifecycle", path):
            lifecycles = ("persistent", "per_event")
            self.enum(transport["lifecycle"], (*path, "lifecycle"), "lifecycle", lifecycles)
        if "cwd" in transport:
            self.string(transport["cwd"], (*path, "cwd"), "cwd")
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

    def http(self, transport: dict[str, Any], path: Path) -> None:
        url = transport.get("url")
        if self.has(transport, "http", "url", path) and self.string(url, (*path, "url"), "url"):
            assert isinstance(url, str)
            self.url(url, (*path, "url"), _HTTP_URL, _HTTP_URL_RULE)
        if "headers" in transport:
            self.headers(transport["headers"], (*path, "headers"))

    def headers(self, value: object, path: Path) -> None:
        headers = self.obj(value, path, "headers (header name to value)")
        seen: dict[str, str] = {}
        for name, item in (headers or {}).items():
            if not _HEADER_NAME.match(name):
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
        sources = (
            [k for k in ("valueEnv", "valueRef") if k in value] if isinstance(value, dict) else []
        )
        if not isinstance(value, dict) or len(sources) != 1:
            self.add(path, _HEADER_ONE_SOURCE)
        elif sources == ["valueEnv"]:
            self.env_name(value["valueEnv"], (*path, "valueEnv"), "valueEnv")
        else:
            self.string(value["valueRef"], (*path, "valueRef"), "valueRef", non_empty=True)

    # -- authentication ------------------------------------------------------------------

    def authentication(self, value: object, path: Path) -> None:
        auth = self.obj(value, path, "authentication")
        if auth is None or not self.has(auth, "authentication", "type", path):
            return
        kind = auth["type"]
        if kind == "bearer":
            self.bearer(auth, path)
        elif kind == "oauth":
            self.oauth(auth, path)
        else:
            self.add(
                (*path, "type"),
                f"unknown authentication type {show(kind)}; the portable types are "
                '"bearer" and "oauth" (mTLS and workload identity are deployment-specific '
                "and configured outside the registration)",
            )

    def bearer(self, auth: dict[str, Any], path: Path) -> None:
        if "token" in auth:
            self.add(
                (*path, "token"),
                "a literal token is never allowed in a registration; name an environment "
                "variable with tokenEnv or a secret reference with tokenRef",
            )
        if len([k for k in ("tokenEnv", "tokenRef") if k in auth]) != 1:
            self.add(path, "bearer authentication needs exactly one of tokenEnv or tokenRef")
        if "tokenEnv" in auth:
            self.env_name(auth["tokenEnv"], (*path, "tokenEnv"), "tokenEnv")
        if "tokenRef" in auth:
            self.string(auth["tokenRef"], (*path, "tokenRef"), "tokenRef", non_empty=True)

    def oauth(self, auth: dict[str, Any], path: Path) -> None:
        for field in ("resource", "issuer", "clientId", "flow"):
            if field not in auth:
                self.add(path, f"{field} is required for oauth authentication")
        for field in ("resource", "clientId", "clientSecretRef"):
            if field in auth:
                self.string(auth[field], (*path, field), field, non_empty=True)
        issuer = auth.get("issuer")
        if "issuer" in auth and self.string(issuer, (*path, "issuer"), "issuer"):
            assert isinstance(issuer, str)
            self.url(issuer, (*path, "issuer"), _HTTPS_URL, "issuer must be an https:// URL")
        if "flow" in auth:
            flows = ("authorization_code_pkce", "client_credentials")
            self.enum(auth["flow"], (*path, "flow"), "flow", flows)
        if "scopes" in auth:
            self.string_set(auth["scopes"], (*path, "scopes"), "scopes")
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
        mode: str | None = None
        modes = ("intercept", "observe")
        if self.has(sub, "subscription", "mode", path) and self.enum(
            sub["mode"], (*path, "mode"), "mode", modes
        ):
            mode = sub["mode"]
        self.events(sub, path, mode)
        if mode == "intercept":
            if self.has(sub, "intercept", "timeoutMs", path):
                self.integer(sub["timeoutMs"], (*path, "timeoutMs"), "timeoutMs (milliseconds)", 1)
            if self.has(sub, "intercept", "failurePolicy", path):
                policies = ("fail-open", "fail-closed")
                self.enum(sub["failurePolicy"], (*path, "failurePolicy"), "failurePolicy", policies)
        elif mode == "observe":
            for field in ("timeoutMs", "failurePolicy"):
                if field in sub:
                    self.add(path, _OBSERVE_NO.format(field=field))
        if self.has(sub, "subscription", "content", path):
            self.content(sub["content"], (*path, "content"))
        if "includeNative" in sub:
            self.boolean(sub["includeNative"], (*path, "includeNative"), "includeNative")
        if "upload" in sub:
            self.upload(sub["upload"], (*path, "upload"))
        if "filters" in sub:
            self.filters(sub["filters"], (*path, "filters"))
        if "scope" in sub:
            self.enum(sub["scope"], (*path, "scope"), "scope", ("managed", "project", "user"))
        if "disableable" in sub:
            self.boolean(sub["disableable"], (*path, "disableable"), "disableable")
        if sub.get("scope") == "managed" and "disableable" not in sub:
            self.add(path, f"{_MANAGED} (add it)")
        elif sub.get("scope") == "managed" and sub["disableable"] is not False:
            self.add((*path, "disableable"), _MANAGED)

    def events(self, sub: dict[str, Any], path: Path, mode: str | None) -> None:
        if not self.has(sub, "subscription", "events", path):
            return
        events, where = sub["events"], (*path, "events")
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
                    f"duplicate selector {show(selector)} (first at events[{first[selector]}])",
                )
            else:
                first[selector] = index

    def content(self, value: object, path: Path) -> None:
        content = self.obj(value, path, 'content (for example {"default": "metadata"})')
        if content is None:
            return
        self.has(content, "content", "default", path)
        for key, item in content.items():
            if item not in SELECTIONS:
                self.add((*path, key), f"content selection must be {_choices(SELECTIONS)}")

    def filters(self, value: object, path: Path) -> None:
        filters = self.obj(value, path, "filters")
        for field in ("toolKinds", "paths"):
            if filters is not None and field in filters:
                self.string_set(filters[field], (*path, field), field)

    def upload(self, value: object, path: Path) -> None:
        upload = self.obj(value, path, "upload")
        if upload is None:
            return
        endpoint = upload.get("endpoint")
        if self.has(upload, "upload", "endpoint", path) and self.string(
            endpoint, (*path, "endpoint"), "endpoint"
        ):
            assert isinstance(endpoint, str)
            self.url(endpoint, (*path, "endpoint"), _UPLOAD_ENDPOINT, _UPLOAD_ENDPOINT_RULE)
        if self.has(upload, "upload", "timeoutMs", path):
            self.integer(upload["timeoutMs"], (*path, "timeoutMs"), "timeoutMs (milliseconds)", 1)
        if self.has(upload, "upload", "maxBytes", path):
            self.integer(upload["maxBytes"], (*path, "maxBytes"), "maxBytes", 0)
        if "auth" in upload:
            self.authentication(upload["auth"], (*path, "auth"))

    # -- configuration -------------------------------------------------------------------

    def configuration(self, doc: object, path: Path = ()) -> None:
        root = self.obj(doc, path, "a configuration")
        if root is None or not self.has(root, "configuration", "subscriptions", path):
            return
        subs, where = root["subscriptions"], (*path, "subscriptions")
        if not isinstance(subs, list):
            self.add(where, "subscriptions must be an array")
            return
        if not subs:
            self.add(where, "subscriptions must list at least one subscription")
        for index, sub in enumerate(subs):
            self.subscription(sub, (*where, index))

"""Tests for the registration document and hooks/configuration (wire/registration.py).

Golden fixtures, one invalid document per rule (exact path, key phrase, and whether
the official schema agrees), valid documents, lossless round trips of unknown
fields, dispatch matching, and the file loader.
"""

from __future__ import annotations

import copy
import hashlib
import json
import string
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from ahp_protocol.wire import catalogue
from ahp_protocol.wire import registration as reg
from ahp_protocol.wire.errors import WireErrors, json_path
from ahp_protocol.wire.registration import (
    BearerAuthentication,
    Configuration,
    ContentSelection,
    Hook,
    HttpTransportConfig,
    InterceptSubscription,
    ObserveSubscription,
    Registration,
    StdioTransportConfig,
    load_registration,
    parse_configuration,
    parse_registration,
)
from ahp_protocol.wire.registration_rules import Checks
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

SCHEMA = "registration.schema.json"
Doc = dict[str, Any]


def _errors(obj: object, parse: Callable[[object], object] = parse_registration) -> WireErrors:
    with pytest.raises(WireErrors) as info:
        parse(obj)
    return info.value


def _pairs(errors: WireErrors) -> list[tuple[str, str]]:
    return [(e.path, e.reason) for e in errors.errors]


def _has(errors: WireErrors, path: str, phrase: str) -> bool:
    return any(e.path == path and phrase in e.reason for e in errors.errors)


# --------------------------------------------------------------------------------------
# Golden fixtures

# For each registration fixture: None (valid) or the path and reason phrase it is about.
FIXTURE_REASONS: dict[str, tuple[str, str] | None] = {
    "registration.portable.valid": None,
    "registration.model-family-selection.valid": None,
    "registration.empty-hooks.invalid": ("hooks", "at least one backend"),
    "registration.content-default-missing.invalid": (
        "hooks[0].subscriptions[0].content",
        "default is required",
    ),
    "registration.intercept-content-missing.invalid": (
        "hooks[0].subscriptions[0]",
        "content is required",
    ),
    "registration.observe-content-missing.invalid": (
        "hooks[1].subscriptions[1]",
        "content is required",
    ),
    "registration.intercept-observation-event.invalid": (
        "hooks[0].subscriptions[0].events[0]",
        '"turn.end" cannot be intercepted (observe-only event)',
    ),
    "registration.observe-policy-fields.invalid": (
        "hooks[0].subscriptions[0]",
        "observe subscriptions must not have timeoutMs",
    ),
    "registration.literal-token.invalid": (
        "hooks[0].authentication.token",
        "a literal token is never allowed",
    ),
}


def _registration_cases(fixtures_dir: Path) -> list[dict[str, Any]]:
    manifest = json.loads((fixtures_dir / "manifest.json").read_text("utf-8"))
    return [c for c in manifest["cases"] if c.get("binding") == "registration-json"]


def _load_case(fixtures_dir: Path, case: dict[str, Any]) -> Any:
    raw = (fixtures_dir / case["path"]).read_bytes()
    assert hashlib.sha256(raw).hexdigest() == case["sha256"], "fixture changed on disk"
    return json.loads(raw)


def test_every_registration_fixture_has_an_expected_reason(fixtures_dir: Path) -> None:
    ids = {c["id"] for c in _registration_cases(fixtures_dir)}
    assert ids, "the manifest lists no registration-json cases"
    assert ids == set(FIXTURE_REASONS)


@pytest.mark.parametrize("case_id", sorted(FIXTURE_REASONS))
def test_registration_fixture(
    fixtures_dir: Path,
    official_schema: Callable[[str, Any], list[str]],
    case_id: str,
) -> None:
    case = next(c for c in _registration_cases(fixtures_dir) if c["id"] == case_id)
    doc = _load_case(fixtures_dir, case)
    expected = FIXTURE_REASONS[case_id]
    assert (expected is None) == case["expectedValid"]
    # The official schema agrees with the manifest on every registration fixture.
    assert (not official_schema(SCHEMA, doc)) == case["expectedValid"]
    if expected is None:
        registration = parse_registration(doc)
        assert registration.to_wire() == doc
        return
    errors = _errors(doc)
    path, phrase = expected
    assert _has(errors, path, phrase), _pairs(errors)


def test_literal_token_fixture_never_echoes_the_token(fixtures_dir: Path) -> None:
    case = next(
        c
        for c in _registration_cases(fixtures_dir)
        if c["id"] == "registration.literal-token.invalid"
    )
    doc = _load_case(fixtures_dir, case)
    secret = doc["hooks"][0]["authentication"]["token"]
    errors = _errors(doc)
    assert secret not in str(errors)
    assert all(secret not in e.reason for e in errors.errors)


# --------------------------------------------------------------------------------------
# One invalid document per rule

BASE: Doc = {
    "protocolVersion": "draft",
    "hooks": [
        {
            "id": "com.example.a",
            "transport": {
                "type": "http",
                "url": "https://policy.example.com/hooks",
                "headers": {"X-Tenant": "acme", "X-Key": {"valueEnv": "POLICY_KEY"}},
            },
            "authentication": {"type": "bearer", "tokenEnv": "AHP_TOKEN"},
            "subscriptions": [
                {
                    "events": ["tool.before"],
                    "mode": "intercept",
                    "timeoutMs": 750,
                    "failurePolicy": "fail-closed",
                    "content": {"default": "metadata"},
                },
                {
                    "events": ["tool.*"],
                    "mode": "intercept",
                    "timeoutMs": 500,
                    "failurePolicy": "fail-open",
                    "content": {"default": "omit"},
                },
            ],
        },
        {
            "id": "com.example.b",
            "transport": {
                "type": "stdio",
                "command": "/usr/bin/b",
                "args": ["serve"],
                "lifecycle": "persistent",
            },
            "subscriptions": [
                {"events": ["session.end"], "mode": "observe", "content": {"default": "omit"}}
            ],
        },
        {
            "id": "com.example.c",
            "transport": {"type": "stdio", "command": "c", "lifecycle": "per_event"},
        },
    ],
}

H0 = ("hooks", 0)
H1 = ("hooks", 1)
S0 = ("hooks", 0, "subscriptions", 0)
S1 = ("hooks", 0, "subscriptions", 1)
OBS = ("hooks", 1, "subscriptions", 0)
UPLOAD = {"endpoint": "https://uploads.example.com/v1", "timeoutMs": 1000, "maxBytes": 1048576}


def _put(path: tuple[Any, ...], value: Any) -> Callable[[Doc], None]:
    def apply(doc: Doc) -> None:
        node: Any = doc
        for part in path[:-1]:
            node = node[part]
        node[path[-1]] = copy.deepcopy(value)

    return apply


def _drop(path: tuple[Any, ...]) -> Callable[[Doc], None]:
    def apply(doc: Doc) -> None:
        node: Any = doc
        for part in path[:-1]:
            node = node[part]
        del node[path[-1]]

    return apply


def _all(*steps: Callable[[Doc], None]) -> Callable[[Doc], None]:
    def apply(doc: Doc) -> None:
        for step in steps:
            step(doc)

    return apply


@dataclass(frozen=True)
class Bad:
    name: str
    mutate: Callable[[Doc], None]
    path: str
    phrase: str
    # Does the official registration schema reject it too? (False: a rule of the draft
    # prose or of security hygiene that the schema does not express.)
    schema_agrees: bool = True


BAD: list[Bad] = [
    # document
    Bad("version-wrong", _put(("protocolVersion",), "0.1"), "protocolVersion", '"draft"'),
    Bad("version-missing", _drop(("protocolVersion",)), "$", "protocolVersion is required"),
    Bad("hooks-missing", _drop(("hooks",)), "$", "hooks is required"),
    Bad("hooks-not-array", _put(("hooks",), {}), "hooks", "must be an array of backends"),
    Bad("hooks-empty", _put(("hooks",), []), "hooks", "at least one backend"),
    Bad("backend-not-object", _put((*H0,), "com.example.a"), "hooks[0]", "JSON object"),
    # backend id
    Bad("id-missing", _drop((*H0, "id")), "hooks[0]", "id is required"),
    Bad("id-one-label", _put((*H0, "id"), "policy"), "hooks[0].id", "reverse-DNS"),
    Bad("id-digit-label", _put((*H0, "id"), "com.1example"), "hooks[0].id", "reverse-DNS"),
    Bad("id-not-string", _put((*H0, "id"), 7), "hooks[0].id", "reverse-DNS"),
    Bad(
        "id-duplicate",
        _put(("hooks", 2, "id"), "com.example.a"),
        "hooks[2].id",
        'duplicate backend id "com.example.a" (first at hooks[0])',
        schema_agrees=False,
    ),
    Bad(
        "content-receiver",
        _put((*H0, "contentReceiver"), {"url": "https://r.example", "timeoutMs": 1, "maxBytes": 1}),
        "hooks[0].contentReceiver",
        "contentReceiver is no longer supported",
    ),
    # transport
    Bad("transport-missing", _drop((*H0, "transport")), "hooks[0]", "transport is required"),
    Bad(
        "transport-type-missing",
        _drop((*H0, "transport", "type")),
        "hooks[0].transport",
        'type is required ("stdio" or "http")',
    ),
    Bad(
        "transport-type-unknown",
        _put((*H0, "transport", "type"), "websocket"),
        "hooks[0].transport.type",
        'unknown transport type "websocket"; use "stdio" or "http"',
    ),
    Bad(
        "stdio-command-missing",
        _drop((*H1, "transport", "command")),
        "hooks[1].transport",
        "command is required",
    ),
    Bad(
        "stdio-command-empty",
        _put((*H1, "transport", "command"), ""),
        "hooks[1].transport.command",
        "must not be empty",
    ),
    Bad(
        "stdio-args-not-strings",
        _put((*H1, "transport", "args"), ["serve", 8080]),
        "hooks[1].transport.args[1]",
        "must be a string",
    ),
    Bad(
        "stdio-lifecycle-missing",
        _drop((*H1, "transport", "lifecycle")),
        "hooks[1].transport",
        'lifecycle is required for a stdio transport ("persistent" or "per_event")',
    ),
    Bad(
        "stdio-lifecycle-unknown",
        _put((*H1, "transport", "lifecycle"), "forever"),
        "hooks[1].transport.lifecycle",
        '"persistent" or "per_event"',
    ),
    Bad(
        "stdio-cwd-not-string",
        _put((*H1, "transport", "cwd"), ["/tmp"]),
        "hooks[1].transport.cwd",
        "must be a string",
    ),
    Bad(
        "stdio-env-not-object",
        _put((*H1, "transport", "env"), ["A=b"]),
        "hooks[1].transport.env",
        "must be a JSON object",
    ),
    Bad(
        "stdio-env-not-literal",
        _put((*H1, "transport", "env"), {"PORT": 8080}),
        "hooks[1].transport.env.PORT",
        "env values must be literal strings",
    ),
    Bad(
        "stdio-env-bad-name",
        _put((*H1, "transport", "env"), {"A=B": "x"}),
        "hooks[1].transport.env.A=B",
        'must not contain "="',
        schema_agrees=False,
    ),
    Bad(
        "stdio-headers",
        _put((*H1, "transport", "headers"), {"X-A": "b"}),
        "hooks[1].transport.headers",
        "headers are only allowed with an http transport",
        schema_agrees=False,
    ),
    Bad(
        "http-url-missing",
        _drop((*H0, "transport", "url")),
        "hooks[0].transport",
        "url is required",
    ),
    Bad(
        "http-url-scheme",
        _put((*H0, "transport", "url"), "ftp://policy.example.com/hooks"),
        "hooks[0].transport.url",
        "https://",
    ),
    Bad(
        "http-url-not-uri",
        _put((*H0, "transport", "url"), "https://policy example.com/hooks"),
        "hooks[0].transport.url",
        "not allowed in a URI",
    ),
    Bad(
        "http-url-no-host",
        _put((*H0, "transport", "url"), "https:///hooks"),
        "hooks[0].transport.url",
        "url must name a host",
        schema_agrees=False,
    ),
    Bad(
        "http-url-bad-port",
        _put((*H0, "transport", "url"), "https://policy.example.com:99999/"),
        "hooks[0].transport.url",
        "not a well-formed URI",
        schema_agrees=False,
    ),
    Bad(
        "http-url-bad-ipv6",
        _put((*H0, "transport", "url"), "https://[::1/hooks"),
        "hooks[0].transport.url",
        "not a well-formed URI",
    ),
    Bad(
        "http-header-name",
        _put((*H0, "transport", "headers"), {"X Tenant": "acme"}),
        "hooks[0].transport.headers",
        'header name "X Tenant" is not a valid HTTP token',
    ),
    Bad(
        "http-header-crlf",
        _put((*H0, "transport", "headers"), {"X-Tenant": "acme\r\nX-Injected: 1"}),
        "hooks[0].transport.headers.X-Tenant",
        "must not contain CR, LF or NUL",
    ),
    Bad(
        "http-header-nul",
        _put((*H0, "transport", "headers"), {"X-Tenant": "ac\x00me"}),
        "hooks[0].transport.headers.X-Tenant",
        "must not contain CR, LF or NUL",
    ),
    Bad(
        "http-header-not-latin1",
        _put((*H0, "transport", "headers"), {"X-Tenant": "\u20ac"}),
        "hooks[0].transport.headers.X-Tenant",
        "latin-1",
        schema_agrees=False,
    ),
    Bad(
        "http-header-both-sources",
        _put((*H0, "transport", "headers"), {"X-Key": {"valueEnv": "K", "valueRef": "r"}}),
        "hooks[0].transport.headers.X-Key",
        "exactly one of valueEnv or valueRef",
    ),
    Bad(
        "http-header-no-source",
        _put((*H0, "transport", "headers"), {"X-Key": {}}),
        "hooks[0].transport.headers.X-Key",
        "exactly one of valueEnv or valueRef",
    ),
    Bad(
        "http-header-number",
        _put((*H0, "transport", "headers"), {"X-Key": 42}),
        "hooks[0].transport.headers.X-Key",
        "literal string or an object",
    ),
    Bad(
        "http-header-value-env-name",
        _put((*H0, "transport", "headers"), {"X-Key": {"valueEnv": "POLICY-KEY"}}),
        "hooks[0].transport.headers.X-Key.valueEnv",
        "environment variable name",
    ),
    Bad(
        "http-header-twice",
        _put((*H0, "transport", "headers"), {"X-Tenant": "a", "x-tenant": "b"}),
        "hooks[0].transport.headers",
        "given twice",
        schema_agrees=False,
    ),
    # authentication
    Bad(
        "auth-on-stdio",
        _put((*H1, "authentication"), {"type": "bearer", "tokenEnv": "T"}),
        "hooks[1].authentication",
        "authentication is only allowed with an http transport",
    ),
    Bad(
        "auth-type-missing",
        _put((*H0, "authentication"), {"tokenEnv": "T"}),
        "hooks[0].authentication",
        'type is required ("bearer" or "oauth")',
    ),
    Bad(
        "auth-mtls",
        _put((*H0, "authentication"), {"type": "mtls", "certificateRef": "vault:cert"}),
        "hooks[0].authentication.type",
        'unknown authentication type "mtls"',
    ),
    Bad(
        "auth-workload",
        _put((*H0, "authentication"), {"type": "workload", "audience": "x"}),
        "hooks[0].authentication.type",
        'portable types are "bearer" and "oauth"',
    ),
    Bad(
        "bearer-literal-token",
        _put((*H0, "authentication", "token"), "s3cr3t-literal"),
        "hooks[0].authentication.token",
        "a literal token is never allowed",
        schema_agrees=False,
    ),
    Bad(
        "bearer-only-literal-token",
        _put((*H0, "authentication"), {"type": "bearer", "token": "s3cr3t-literal"}),
        "hooks[0].authentication.token",
        "a literal token is never allowed",
    ),
    Bad(
        "bearer-both",
        _put((*H0, "authentication", "tokenRef"), "vault:ahp"),
        "hooks[0].authentication",
        "exactly one of tokenEnv or tokenRef",
    ),
    Bad(
        "bearer-neither",
        _put((*H0, "authentication"), {"type": "bearer"}),
        "hooks[0].authentication",
        "exactly one of tokenEnv or tokenRef",
    ),
    Bad(
        "bearer-token-env-name",
        _put((*H0, "authentication", "tokenEnv"), "AHP-TOKEN"),
        "hooks[0].authentication.tokenEnv",
        "environment variable name",
    ),
    Bad(
        "bearer-token-ref-empty",
        _put((*H0, "authentication"), {"type": "bearer", "tokenRef": ""}),
        "hooks[0].authentication.tokenRef",
        "must not be empty",
    ),
    Bad(
        "oauth-missing-fields",
        _put((*H0, "authentication"), {"type": "oauth", "resource": "https://p.example"}),
        "hooks[0].authentication",
        "issuer is required",
    ),
    Bad(
        "oauth-http-issuer",
        _put(
            (*H0, "authentication"),
            {
                "type": "oauth",
                "resource": "https://p.example",
                "issuer": "http://auth.example.com",
                "clientId": "c",
                "flow": "client_credentials",
            },
        ),
        "hooks[0].authentication.issuer",
        "https://",
    ),
    Bad(
        "oauth-flow",
        _put(
            (*H0, "authentication"),
            {
                "type": "oauth",
                "resource": "https://p.example",
                "issuer": "https://auth.example.com",
                "clientId": "c",
                "flow": "implicit",
            },
        ),
        "hooks[0].authentication.flow",
        '"authorization_code_pkce" or "client_credentials"',
    ),
    Bad(
        "oauth-scopes-duplicate",
        _put(
            (*H0, "authentication"),
            {
                "type": "oauth",
                "resource": "https://p.example",
                "issuer": "https://auth.example.com",
                "clientId": "c",
                "flow": "client_credentials",
                "scopes": ["read", "read"],
            },
        ),
        "hooks[0].authentication.scopes[1]",
        "duplicate entry",
    ),
    Bad(
        "oauth-literal-client-secret",
        _put(
            (*H0, "authentication"),
            {
                "type": "oauth",
                "resource": "https://p.example",
                "issuer": "https://auth.example.com",
                "clientId": "c",
                "flow": "client_credentials",
                "clientSecret": "s3cr3t-literal",
            },
        ),
        "hooks[0].authentication.clientSecret",
        "literal client secret is never allowed",
        schema_agrees=False,
    ),
    # subscriptions
    Bad(
        "subscriptions-empty",
        _put((*H0, "subscriptions"), []),
        "hooks[0].subscriptions",
        "omit the field",
    ),
    Bad(
        "subscriptions-not-array",
        _put((*H0, "subscriptions"), {"events": ["tool.before"]}),
        "hooks[0].subscriptions",
        "must be an array",
    ),
    Bad("mode-missing", _drop((*S0, "mode")), "hooks[0].subscriptions[0]", "mode is required"),
    Bad(
        "mode-unknown",
        _put((*S0, "mode"), "block"),
        "hooks[0].subscriptions[0].mode",
        '"intercept" or "observe"',
    ),
    Bad(
        "intercept-no-failure-policy",
        _drop((*S1, "failurePolicy")),
        "hooks[0].subscriptions[1]",
        'intercept subscriptions need failurePolicy ("fail-open" or "fail-closed")',
    ),
    Bad(
        "intercept-failure-policy-unknown",
        _put((*S0, "failurePolicy"), "fail-safe"),
        "hooks[0].subscriptions[0].failurePolicy",
        '"fail-open" or "fail-closed"',
    ),
    Bad(
        "intercept-no-timeout",
        _drop((*S0, "timeoutMs")),
        "hooks[0].subscriptions[0]",
        "intercept subscriptions need timeoutMs",
    ),
    Bad(
        "intercept-timeout-zero",
        _put((*S0, "timeoutMs"), 0),
        "hooks[0].subscriptions[0].timeoutMs",
        "at least 1",
    ),
    Bad(
        "intercept-timeout-fraction",
        _put((*S0, "timeoutMs"), 2.5),
        "hooks[0].subscriptions[0].timeoutMs",
        "must be an integer",
    ),
    Bad(
        "intercept-timeout-bool",
        _put((*S0, "timeoutMs"), True),
        "hooks[0].subscriptions[0].timeoutMs",
        "must be an integer",
    ),
    Bad(
        "intercept-timeout-string",
        _put((*S0, "timeoutMs"), "750"),
        "hooks[0].subscriptions[0].timeoutMs",
        "must be an integer",
    ),
    Bad(
        "observe-timeout",
        _put((*OBS, "timeoutMs"), 100),
        "hooks[1].subscriptions[0]",
        "observe subscriptions must not have timeoutMs",
    ),
    Bad(
        "observe-failure-policy",
        _put((*OBS, "failurePolicy"), "fail-open"),
        "hooks[1].subscriptions[0]",
        "observe subscriptions must not have failurePolicy",
    ),
    Bad("content-missing", _drop((*S0, "content")), "hooks[0].subscriptions[0]", "content is"),
    Bad(
        "content-not-object",
        _put((*S0, "content"), "body"),
        "hooks[0].subscriptions[0].content",
        "must be a JSON object",
    ),
    Bad(
        "content-default-missing",
        _put((*S0, "content"), {"text": "body"}),
        "hooks[0].subscriptions[0].content",
        "default is required",
    ),
    Bad(
        "content-value",
        _put((*S0, "content"), {"default": "metadata", "text": "full"}),
        "hooks[0].subscriptions[0].content.text",
        'must be "body", "metadata" or "omit"',
    ),
    Bad(
        "content-custom-category-value",
        _put((*S0, "content"), {"default": "metadata", "thinking": True}),
        "hooks[0].subscriptions[0].content.thinking",
        'must be "body", "metadata" or "omit"',
    ),
    Bad("events-missing", _drop((*S0, "events")), "hooks[0].subscriptions[0]", "events is"),
    Bad(
        "events-empty",
        _put((*S0, "events"), []),
        "hooks[0].subscriptions[0].events",
        "at least one selector",
    ),
    Bad(
        "selector-unknown",
        _put((*S0, "events"), ["tool.befor"]),
        "hooks[0].subscriptions[0].events[0]",
        '"tool.befor" is not a standard event name or selector; use an exact event name',
    ),
    Bad(
        "selector-glob",
        _put((*OBS, "events"), ["tool.b*"]),
        "hooks[1].subscriptions[0].events[0]",
        'a family wildcard such as "tool.*", or "*"',
    ),
    Bad(
        "selector-second-segment-wildcard",
        _put((*OBS, "events"), ["tool.permission.*"]),
        "hooks[1].subscriptions[0].events[0]",
        "not a standard event name or selector",
    ),
    # Python's ``$`` matches before a trailing newline: each name rule must refuse one, as
    # the official schema's patterns do (ECMA-262 regexes, as the tests' checker runs them).
    Bad(
        "selector-wildcard-trailing-newline",
        _put((*OBS, "events"), ["tool.*\n"]),
        "hooks[1].subscriptions[0].events[0]",
        "not a standard event name or selector",
    ),
    Bad(
        "id-trailing-newline",
        _put((*H0, "id"), "com.example\n"),
        "hooks[0].id",
        "reverse-DNS",
    ),
    Bad(
        "http-header-name-trailing-newline",
        _put((*H0, "transport", "headers"), {"X-A\n": "b"}),
        "hooks[0].transport.headers",
        "is not a valid HTTP token",
    ),
    Bad(
        "http-header-value-env-trailing-newline",
        _put((*H0, "transport", "headers"), {"X-Key": {"valueEnv": "POLICY_KEY\n"}}),
        "hooks[0].transport.headers.X-Key.valueEnv",
        "environment variable name",
    ),
    Bad(
        "selector-removed-name",
        _put((*OBS, "events"), ["tool.error"]),
        "hooks[1].subscriptions[0].events[0]",
        "removed from the draft",
    ),
    Bad(
        "selector-not-string",
        _put((*OBS, "events"), [5]),
        "hooks[1].subscriptions[0].events[0]",
        "must be a string",
    ),
    Bad(
        "selector-duplicate",
        _put((*OBS, "events"), ["tool.before", "session.end", "tool.before"]),
        "hooks[1].subscriptions[0].events[2]",
        'duplicate selector "tool.before" (first at events[0])',
    ),
    Bad(
        "intercept-observe-only-event",
        _put((*S1, "events"), ["session.end"]),
        "hooks[0].subscriptions[1].events[0]",
        '"session.end" cannot be intercepted (observe-only event)',
    ),
    Bad(
        "intercept-wildcard-covers-nothing-interceptable",
        _put((*S1, "events"), ["hook.*"]),
        "hooks[0].subscriptions[1].events[0]",
        "covers no interceptable event",
        schema_agrees=False,
    ),
    Bad(
        "intercept-unknown-family",
        _put((*S1, "events"), ["plugin.*"]),
        "hooks[0].subscriptions[1].events[0]",
        "covers no interceptable event",
        schema_agrees=False,
    ),
    Bad(
        "include-native-not-bool",
        _put((*S0, "includeNative"), "yes"),
        "hooks[0].subscriptions[0].includeNative",
        "true or false",
    ),
    Bad(
        "scope-unknown",
        _put((*S0, "scope"), "global"),
        "hooks[0].subscriptions[0].scope",
        '"managed", "project" or "user"',
    ),
    Bad(
        "managed-without-disableable",
        _put((*S0, "scope"), "managed"),
        "hooks[0].subscriptions[0]",
        'scope "managed" requires disableable: false',
    ),
    Bad(
        "managed-disableable",
        _all(_put((*S0, "scope"), "managed"), _put((*S0, "disableable"), True)),
        "hooks[0].subscriptions[0].disableable",
        'scope "managed" requires disableable: false',
    ),
    Bad(
        "disableable-not-bool",
        _put((*S0, "disableable"), "no"),
        "hooks[0].subscriptions[0].disableable",
        "true or false",
    ),
    Bad(
        "filters-not-object",
        _put((*S0, "filters"), ["shell"]),
        "hooks[0].subscriptions[0].filters",
        "must be a JSON object",
    ),
    Bad(
        "filters-duplicate-kind",
        _put((*S0, "filters"), {"toolKinds": ["shell", "shell"]}),
        "hooks[0].subscriptions[0].filters.toolKinds[1]",
        "duplicate entry",
    ),
    Bad(
        "filters-empty-path",
        _put((*S0, "filters"), {"paths": [""]}),
        "hooks[0].subscriptions[0].filters.paths[0]",
        "non-empty strings",
    ),
    # upload
    Bad(
        "upload-remote-http",
        _put((*S0, "upload"), {**UPLOAD, "endpoint": "http://uploads.example.com/v1"}),
        "hooks[0].subscriptions[0].upload.endpoint",
        "plain http:// is only allowed on localhost, 127.x.x.x or [::1]",
    ),
    Bad(
        "upload-localhost-lookalike",
        _put((*S0, "upload"), {**UPLOAD, "endpoint": "http://localhost.evil.example/v1"}),
        "hooks[0].subscriptions[0].upload.endpoint",
        "must use https://",
    ),
    Bad(
        "upload-loopback-lookalike",
        _put((*S0, "upload"), {**UPLOAD, "endpoint": "http://127.0.0.1.evil.example/"}),
        "hooks[0].subscriptions[0].upload.endpoint",
        "must use https://",
    ),
    Bad(
        "upload-endpoint-missing",
        _put((*S0, "upload"), {"timeoutMs": 1, "maxBytes": 1}),
        "hooks[0].subscriptions[0].upload",
        "endpoint is required",
    ),
    Bad(
        "upload-timeout-zero",
        _put((*S0, "upload"), {**UPLOAD, "timeoutMs": 0}),
        "hooks[0].subscriptions[0].upload.timeoutMs",
        "at least 1",
    ),
    Bad(
        "upload-max-bytes-negative",
        _put((*S0, "upload"), {**UPLOAD, "maxBytes": -1}),
        "hooks[0].subscriptions[0].upload.maxBytes",
        "at least 0",
    ),
    Bad(
        "upload-auth-literal-token",
        _put((*S0, "upload"), {**UPLOAD, "auth": {"type": "bearer", "token": "s3cr3t-literal"}}),
        "hooks[0].subscriptions[0].upload.auth.token",
        "a literal token is never allowed",
    ),
    Bad(
        "upload-auth-unknown-type",
        _put((*S0, "upload"), {**UPLOAD, "auth": {"type": "basic"}}),
        "hooks[0].subscriptions[0].upload.auth.type",
        'unknown authentication type "basic"',
    ),
]


@pytest.mark.parametrize("bad", BAD, ids=[b.name for b in BAD])
def test_invalid_document(bad: Bad, official_schema: Callable[[str, Any], list[str]]) -> None:
    doc = copy.deepcopy(BASE)
    bad.mutate(doc)
    errors = _errors(doc)
    assert _has(errors, bad.path, bad.phrase), _pairs(errors)
    # Every reason is a rule-level message, not a raw pydantic one.
    assert not any("Input should" in e.reason for e in errors.errors), _pairs(errors)
    assert "s3cr3t-literal" not in str(errors)
    assert bool(official_schema(SCHEMA, doc)) == bad.schema_agrees, official_schema(SCHEMA, doc)


def test_base_document_is_valid(official_schema: Callable[[str, Any], list[str]]) -> None:
    assert official_schema(SCHEMA, BASE) == []
    assert parse_registration(BASE).to_wire() == BASE


def test_names_are_unique() -> None:
    names = [b.name for b in BAD]
    assert len(names) == len(set(names))


def test_every_violation_is_reported_most_specific_first() -> None:
    doc = copy.deepcopy(BASE)
    doc["protocolVersion"] = "0.1"
    del doc["hooks"][0]["subscriptions"][1]["failurePolicy"]
    doc["hooks"][1]["subscriptions"][0]["events"] = ["bogus"]
    doc["hooks"][2]["authentication"] = {"type": "bearer", "tokenEnv": "T"}
    errors = _errors(doc)
    assert set(_pairs(errors)) >= {
        ("protocolVersion", 'unsupported protocolVersion "0.1"; this document format is "draft"'),
        (
            "hooks[0].subscriptions[1]",
            'intercept subscriptions need failurePolicy ("fail-open" or "fail-closed")',
        ),
    }
    assert _has(errors, "hooks[1].subscriptions[0].events[0]", '"bogus" is not a standard')
    assert _has(errors, "hooks[2].authentication", "only allowed with an http transport")
    assert len(errors.errors) == 4
    assert errors.first.path == "hooks[1].subscriptions[0].events[0]"
    assert errors.errors[-1].path == "protocolVersion"
    depths = [len(e.path.replace("[", ".[").split(".")) for e in errors.errors]
    assert depths == sorted(depths, reverse=True)


def test_error_strings_name_path_and_rule() -> None:
    doc = copy.deepcopy(BASE)
    doc["hooks"][0]["subscriptions"][0]["events"] = ["session.end"]
    errors = _errors(doc)
    assert str(errors.first) == (
        'hooks[0].subscriptions[0].events[0]: "session.end" cannot be intercepted '
        '(observe-only event); subscribe to it with mode "observe"'
    )


OAUTH_BAD = {
    "type": "oauth",
    "resource": "",
    "issuer": "https://id.example.com",
    "clientId": 7,
    "flow": "client_credentials",
    "clientSecretRef": "",
    "scopes": ["a", "b", "a"],
}
HEADERS_BAD = {
    "X A": "1",
    "X:B": "2",
    "X-Tenant": "a",
    "x-tenant": "b",
    "X-Cr": "a\rb",
    "X-Latin": "\u00ff",  # the last latin-1 character: allowed
    "X-Wide": "\u0100",
    "X-Ref": {"valueRef": ""},
}
TOKEN = "(letters, digits and !#$%&'*+.^_`|~-)"
BAD_ID = (
    'backend id must be a reverse-DNS name such as "com.example.policy" '
    "(two or more dot-separated segments, each starting with a letter)"
)
TOOL_KINDS = "toolKinds must be an array of non-empty strings"

# The walker's own report (``Checks``, the one home of these rules): every violation of a
# document, with its exact path and reason, in walk order.
CHECKS_CASES: list[tuple[str, Callable[[Doc], None], list[tuple[str, str]]]] = [
    (
        "headers",
        _put((*H0, "transport", "headers"), HEADERS_BAD),
        [
            ("hooks[0].transport.headers", f'header name "X A" is not a valid HTTP token {TOKEN}'),
            ("hooks[0].transport.headers", f'header name "X:B" is not a valid HTTP token {TOKEN}'),
            (
                "hooks[0].transport.headers",
                'header "x-tenant" is given twice (first as "X-Tenant"); header names ignore case',
            ),
            ("hooks[0].transport.headers.X-Cr", "header values must not contain CR, LF or NUL"),
            ("hooks[0].transport.headers.X-Wide", "header values must be latin-1 text"),
            ("hooks[0].transport.headers.X-Ref.valueRef", "valueRef must not be empty"),
        ],
    ),
    (
        "oauth",
        _put((*H0, "authentication"), OAUTH_BAD),
        [
            ("hooks[0].authentication.resource", "resource must not be empty"),
            ("hooks[0].authentication.clientId", "clientId must be a string"),
            ("hooks[0].authentication.clientSecretRef", "clientSecretRef must not be empty"),
            ("hooks[0].authentication.scopes[2]", "duplicate entry (first at scopes[0])"),
        ],
    ),
    (
        "upload-members-missing",
        _put((*S0, "upload"), {"endpoint": "https://uploads.example.com"}),
        [
            (
                "hooks[0].subscriptions[0].upload",
                "timeoutMs is required for upload (milliseconds, at least 1)",
            ),
            (
                "hooks[0].subscriptions[0].upload",
                "maxBytes is required for upload (an integer of at least 0)",
            ),
        ],
    ),
    (
        "env",
        _put((*H1, "transport", "env"), {"A\x00B": "x", "OK": "v\x00"}),
        [
            (
                "hooks[1].transport.env.A\x00B",
                'environment variable name "A\\u0000B" must be non-empty and must not contain '
                '"=" or NUL',
            ),
            ("hooks[1].transport.env.OK", "env values must not contain NUL"),
        ],
    ),
    (
        "args-not-array",
        _put((*H1, "transport", "args"), "serve"),
        [("hooks[1].transport.args", "args must be an array of strings")],
    ),
    (
        "timeout-float-at-2^63",
        _put((*S0, "timeoutMs"), float(2**63)),
        [
            (
                "hooks[0].subscriptions[0].timeoutMs",
                "timeoutMs (milliseconds) is too large (a number written with an exponent "
                "must be below 2^63)",
            )
        ],
    ),
    (
        "long-values-are-cut-to-64-characters",
        _all(
            _put((*H0, "transport", "type"), "w" * 70),
            _put((*H1, "transport", "type"), list(range(40))),
        ),
        [
            (
                "hooks[0].transport.type",
                f'unknown transport type "{"w" * 63}\u2026"; use "stdio" or "http"',
            ),
            (
                "hooks[1].transport.type",
                f"unknown transport type {json.dumps(list(range(40)))[:63]}\u2026; "
                'use "stdio" or "http"',
            ),
        ],
    ),
    (
        "parts-not-objects",
        _all(
            _put((*H0, "transport"), 1),
            _put((*S0, "content"), 1),
            _put((*S0, "filters"), 1),
            _put((*S0, "upload"), 1),
            _put((*H0, "authentication"), 1),
            _put(OBS, 1),
            _put(("hooks", 2), 1),
        ),
        [
            ("hooks[0].transport", "transport must be a JSON object"),
            ("hooks[0].authentication", "authentication must be a JSON object"),
            (
                "hooks[0].subscriptions[0].content",
                'content (for example {"default": "metadata"}) must be a JSON object',
            ),
            ("hooks[0].subscriptions[0].upload", "upload must be a JSON object"),
            ("hooks[0].subscriptions[0].filters", "filters must be a JSON object"),
            ("hooks[1].subscriptions[0]", "each subscription must be a JSON object"),
            ("hooks[2]", "each backend must be a JSON object"),
        ],
    ),
    (
        "backend-members-missing",
        _all(_drop((*H0, "id")), _drop((*H0, "transport"))),
        [
            ("hooks[0]", 'id is required (a reverse-DNS name such as "com.example.policy")'),
            ("hooks[0]", 'transport is required (type "stdio" or "http")'),
        ],
    ),
    (
        "two-invalid-ids-are-no-duplicates",
        _all(
            _put((*H0, "id"), 1),
            _put((*H1, "id"), 2),
            _put((*S0, "filters"), {"toolKinds": "shell"}),
            _put((*H0, "transport", "headers", "X-Tenant"), "XX"),  # any text but CR, LF, NUL
            _put(("hooks", 2, "transport", "type"), "v" * 64),  # 64 characters: shown whole
        ),
        [
            ("hooks[0].id", BAD_ID),
            ("hooks[0].subscriptions[0].filters.toolKinds", TOOL_KINDS),
            ("hooks[1].id", BAD_ID),
            (
                "hooks[2].transport.type",
                f'unknown transport type "{"v" * 64}"; use "stdio" or "http"',
            ),
        ],
    ),
    (
        "hooks-missing",
        _drop(("hooks",)),
        [("$", "hooks is required (an array of one or more backends)")],
    ),
]


@pytest.mark.parametrize(
    ("mutate", "expected"), [c[1:] for c in CHECKS_CASES], ids=[c[0] for c in CHECKS_CASES]
)
def test_checks_report_every_violation_with_its_exact_reason(
    mutate: Callable[[Doc], None], expected: list[tuple[str, str]]
) -> None:
    doc = copy.deepcopy(BASE)
    mutate(doc)
    checks = Checks()
    checks.registration(doc)
    assert [(json_path(path), reason) for path, reason in checks.errors] == expected


@pytest.mark.parametrize(
    ("doc", "expected"),
    [
        ({}, ("$", "subscriptions is required (an array of one or more subscriptions)")),
        ({"subscriptions": {}}, ("subscriptions", "subscriptions must be an array")),
        ([], ("$", "a configuration must be a JSON object")),
    ],
)
def test_checks_of_a_configuration(doc: Any, expected: tuple[str, str]) -> None:
    checks = Checks()
    checks.configuration(doc)
    assert [(json_path(path), reason) for path, reason in checks.errors] == [expected]


def test_not_an_object() -> None:
    values: list[object] = [[], "x", None, 3]
    for value in values:
        errors = _errors(value)
        assert _pairs(errors) == [("$", "a registration document must be a JSON object")]


def test_secret_values_are_not_echoed() -> None:
    doc = copy.deepcopy(BASE)
    doc["hooks"][0]["transport"]["headers"]["Authorization"] = "Bearer hunter2\r\n"
    doc["hooks"][1]["transport"]["env"] = {"API_KEY": "hunter3\x00"}
    doc["hooks"][0]["authentication"]["token"] = "hunter4"
    errors = _errors(doc)
    assert len(errors.errors) == 3
    assert not any(s in str(errors) for s in ("hunter2", "hunter3", "hunter4"))


# --------------------------------------------------------------------------------------
# Valid documents

VALID: dict[str, Doc] = {
    "stdio-persistent": {
        "protocolVersion": "draft",
        "hooks": [
            {
                "id": "com.example.deny_list",
                "transport": {"type": "stdio", "command": "deny-list", "lifecycle": "persistent"},
                "subscriptions": [
                    {
                        "events": ["tool.before"],
                        "mode": "intercept",
                        "timeoutMs": 1,
                        "failurePolicy": "fail-closed",
                        "content": {"default": "body"},
                    }
                ],
            }
        ],
    },
    "stdio-per-event": {
        "protocolVersion": "draft",
        "hooks": [
            {
                "id": "org.example.audit-log",
                "transport": {
                    "type": "stdio",
                    "command": "/usr/bin/python3",
                    "args": ["-m", "audit", "--flag=x y"],
                    "lifecycle": "per_event",
                    "cwd": "/var/lib/audit",
                    "env": {"AUDIT_DIR": "/var/log/ahp", "EMPTY": "", "LITERAL": "$HOME"},
                },
                "subscriptions": [
                    {
                        "events": ["*"],
                        "mode": "observe",
                        "includeNative": True,
                        "content": {"default": "omit", "text": "metadata", "thinking": "body"},
                        "scope": "project",
                        "disableable": True,
                    }
                ],
            }
        ],
    },
    "http-bearer-headers": {
        "protocolVersion": "draft",
        "hooks": [
            {
                "id": "com.example.policy",
                "transport": {
                    "type": "http",
                    "url": "https://policy.example.com:8443/agent-hooks?tenant=a",
                    "headers": {
                        "X-Tenant": "acme \u00e9",
                        "X-Api-Key": {"valueEnv": "POLICY_API_KEY"},
                        "X-Signed": {"valueRef": "vault://kv/policy#sig"},
                    },
                },
                "authentication": {"type": "bearer", "tokenEnv": "AHP_POLICY_TOKEN"},
                "subscriptions": [
                    {
                        "events": ["tool.*", "session.start", "model.request.before"],
                        "mode": "intercept",
                        "timeoutMs": 750,
                        "failurePolicy": "fail-open",
                        "content": {"default": "metadata", "images": "omit"},
                        "upload": {
                            "endpoint": "https://uploads.example.com/v1",
                            "timeoutMs": 2000,
                            "maxBytes": 0,
                            "auth": {"type": "bearer", "tokenRef": "vault://kv/upload"},
                        },
                        "filters": {"toolKinds": ["shell", "file_write"], "paths": ["native"]},
                        "scope": "managed",
                        "disableable": False,
                    },
                    {
                        "events": ["hook.failure", "session.*"],
                        "mode": "observe",
                        "content": {"default": "omit"},
                    },
                ],
            }
        ],
    },
    "subscriptions-omitted": {
        "protocolVersion": "draft",
        "hooks": [
            {
                "id": "com.example.configured",
                "transport": {"type": "http", "url": "http://127.0.0.1:8931/"},
                "authentication": {
                    "type": "oauth",
                    "resource": "https://configured.example.com",
                    "issuer": "https://auth.example.com/realms/a",
                    "clientId": "ahp-harness",
                    "flow": "client_credentials",
                    "scopes": ["hooks.read", "hooks.write"],
                    "clientSecretRef": "vault://kv/oauth",
                },
            },
            {
                "id": "com.example.local",
                "transport": {"type": "stdio", "command": "local", "lifecycle": "persistent"},
            },
        ],
    },
    "loopback-uploads": {
        "protocolVersion": "draft",
        "hooks": [
            {
                "id": "test.loopback",
                "transport": {"type": "http", "url": "http://[::1]:9000/hooks"},
                "subscriptions": [
                    {
                        "events": ["tool.after"],
                        "mode": "observe",
                        "content": {"default": "body"},
                        "upload": {"endpoint": endpoint, "timeoutMs": 5, "maxBytes": 10},
                    }
                    for endpoint in (
                        "http://localhost:8080/up",
                        "http://127.1.2.3/",
                        "http://[::1]:1",
                        "http://localhost",
                        "https://uploads.example.com",
                    )
                ],
            }
        ],
    },
}


@pytest.mark.parametrize("name", sorted(VALID))
def test_valid_document(name: str, official_schema: Callable[[str, Any], list[str]]) -> None:
    doc = VALID[name]
    assert official_schema(SCHEMA, doc) == []
    registration = parse_registration(copy.deepcopy(doc))
    assert registration.to_wire() == doc
    assert parse_registration(registration.to_wire()) == registration


def test_models_expose_python_names() -> None:
    registration = parse_registration(VALID["http-bearer-headers"])
    hook = registration.hooks[0]
    assert isinstance(hook.transport, HttpTransportConfig)
    assert hook.transport.headers["X-Tenant"] == "acme \u00e9"
    api_key = hook.transport.headers["X-Api-Key"]
    assert isinstance(api_key, reg.HeaderSourceConfig) and api_key.value_env == "POLICY_API_KEY"
    assert isinstance(hook.authentication, BearerAuthentication)
    assert hook.authentication.token_env == "AHP_POLICY_TOKEN"
    assert hook.authentication.token_ref is None
    sub = hook.subscriptions[0] if hook.subscriptions else None
    assert isinstance(sub, InterceptSubscription)
    assert (sub.timeout_ms, sub.failure_policy, sub.include_native) == (750, "fail-open", False)
    assert sub.upload is not None and sub.upload.max_bytes == 0
    assert sub.filters is not None and sub.filters.tool_kinds == ["shell", "file_write"]
    assert sub.content.for_category("images") == "omit"
    assert sub.content.for_category("text") == "metadata"
    assert sub.content.for_category(None) == "metadata"
    assert registration.hook("com.example.policy") is hook
    assert registration.hook("com.example.other") is None

    per_event = parse_registration(VALID["stdio-per-event"]).hooks[0]
    assert isinstance(per_event.transport, StdioTransportConfig)
    assert per_event.transport.lifecycle == "per_event"
    assert per_event.transport.env["LITERAL"] == "$HOME"
    observe = per_event.subscriptions[0] if per_event.subscriptions else None
    assert isinstance(observe, ObserveSubscription)
    assert observe.content.for_category("thinking") == "body"
    assert observe.content.for_category("video") == "omit"


def test_integral_float_timeout_is_an_integer(
    official_schema: Callable[[str, Any], list[str]],
) -> None:
    doc = copy.deepcopy(BASE)
    doc["hooks"][0]["subscriptions"][0]["timeoutMs"] = 750.0
    assert official_schema(SCHEMA, doc) == []
    sub = parse_registration(doc).hooks[0].subscriptions[0]  # type: ignore[index]
    assert isinstance(sub, InterceptSubscription) and sub.timeout_ms == 750


@pytest.mark.parametrize(
    ("field", "label"), [("timeoutMs", "timeoutMs (milliseconds)"), ("maxBytes", "maxBytes")]
)
def test_an_integral_float_too_large_for_an_integer_is_a_rule_error(field: str, label: str) -> None:
    """1e300 is integral, but no integer field holds it: a rule says so, beside the others."""
    doc = copy.deepcopy(BASE)
    doc["hooks"][0]["subscriptions"][0]["upload"] = {**UPLOAD, field: 1e300}
    doc["hooks"][0]["subscriptions"][1]["mode"] = "sometimes"
    assert _pairs(_errors(doc)) == [
        (
            f"hooks[0].subscriptions[0].upload.{field}",
            f"{label} is too large (a number written with an exponent must be below 2^63)",
        ),
        ("hooks[0].subscriptions[1].mode", 'mode must be "intercept" or "observe"'),
    ]


# --------------------------------------------------------------------------------------
# Unknown fields: ignored, kept, round-tripped

KNOWN = {
    # every wire name of every object, and names that are rejected rather than ignored
    "protocolVersion", "hooks", "id", "transport", "authentication", "subscriptions",
    "contentReceiver", "type", "command", "args", "lifecycle", "cwd", "env", "url", "headers",
    "tokenEnv", "tokenRef", "token", "resource", "issuer", "clientId", "flow", "scopes",
    "clientSecretRef", "clientSecret", "events", "mode", "timeoutMs", "failurePolicy",
    "includeNative", "content", "upload", "filters", "scope", "disableable", "endpoint",
    "maxBytes", "auth", "toolKinds", "paths", "valueEnv", "valueRef",
}  # fmt: skip

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=5), children, max_size=3)
    ),
    max_leaves=8,
)
unknown_keys = st.text(string.ascii_letters + "_-.", min_size=1, max_size=12).filter(
    lambda k: k not in KNOWN
)
extras = st.dictionaries(unknown_keys, json_values, max_size=3)


def _objects_for_extras(doc: Doc) -> list[dict[str, Any]]:
    """Every object of a registration where an unknown field may appear (not content)."""
    out: list[dict[str, Any]] = [doc]
    for hook in doc["hooks"]:
        out += [hook, hook["transport"]]
        if "authentication" in hook:
            out.append(hook["authentication"])
        for header in hook["transport"].get("headers", {}).values():
            if isinstance(header, dict):
                out.append(header)
        for sub in hook.get("subscriptions", []):
            out.append(sub)
            for key in ("upload", "filters"):
                if key in sub:
                    out.append(sub[key])
            if "upload" in sub and "auth" in sub["upload"]:
                out.append(sub["upload"]["auth"])
    return out


@settings(max_examples=60, suppress_health_check=[HealthCheck.too_slow])
@given(
    name=st.sampled_from(sorted(VALID)),
    additions=st.lists(extras, min_size=1, max_size=20),
)
def test_unknown_fields_round_trip(name: str, additions: list[dict[str, Any]]) -> None:
    doc = copy.deepcopy(VALID[name])
    targets = _objects_for_extras(doc)
    for index, extra in enumerate(additions):
        targets[index % len(targets)].update(copy.deepcopy(extra))
    registration = parse_registration(copy.deepcopy(doc))
    assert registration.to_wire() == doc
    assert parse_registration(registration.to_wire()).to_wire() == doc


def test_unknown_snake_case_key_is_ignored_not_read() -> None:
    """``include_native`` is not the wire name: an unknown field, kept but never obeyed."""
    doc = copy.deepcopy(BASE)
    sub = doc["hooks"][0]["subscriptions"][0]
    sub["include_native"] = True
    sub["failure_policy"] = "fail-open"
    doc["hooks"][0]["authentication"]["token_ref"] = "vault://x"
    registration = parse_registration(doc)
    parsed = registration.hooks[0].subscriptions[0]  # type: ignore[index]
    assert isinstance(parsed, InterceptSubscription)
    assert parsed.include_native is False
    assert parsed.failure_policy == "fail-closed"
    auth = registration.hooks[0].authentication
    assert isinstance(auth, BearerAuthentication) and auth.token_ref is None
    assert registration.to_wire() == doc


@given(
    st.dictionaries(
        st.text(min_size=1, max_size=10).filter(lambda k: k != "default"),
        st.sampled_from(["body", "metadata", "omit"]),
        max_size=5,
    ),
    st.sampled_from(["body", "metadata", "omit"]),
)
def test_content_categories_are_open(categories: dict[str, Any], default: str) -> None:
    content = {"default": default, **categories}
    selection = ContentSelection.model_validate(content)
    assert selection.to_wire() == content
    for key, value in categories.items():
        assert selection.for_category(key) == value
    assert selection.for_category("\x00never-listed") == default


@given(st.text(max_size=30) | st.sampled_from([*catalogue.EVENT_TYPES, "*", "tool.*"]))
def test_selectors_agree_with_catalogue_and_schema(selector: str) -> None:
    doc = copy.deepcopy(BASE)
    doc["hooks"][1]["subscriptions"][0]["events"] = [selector]
    from kit_testing import schema_errors

    schema_ok = not schema_errors(SCHEMA, doc)
    try:
        parse_registration(doc)
        ours_ok = True
    except WireErrors as exc:
        ours_ok = False
        assert [e.path for e in exc.errors] == ["hooks[1].subscriptions[0].events[0]"]
    assert ours_ok == catalogue.is_valid_selector(selector) == schema_ok


# --------------------------------------------------------------------------------------
# Programmatic models


def test_models_built_in_python_serialise_to_valid_wire(
    official_schema: Callable[[str, Any], list[str]],
) -> None:
    sub = InterceptSubscription(
        events=["tool.before"],
        timeout_ms=500,
        failure_policy="fail-closed",
        content=ContentSelection(default="metadata"),
    )
    registration = Registration(
        hooks=[
            Hook(
                id="com.example.a", transport=StdioTransportConfig(command="a"), subscriptions=[sub]
            ),
            Hook(
                id="com.example.b",
                transport=HttpTransportConfig(url="https://b.example.com"),
                authentication=BearerAuthentication(token_env="B_TOKEN"),
            ),
        ]
    )
    wire = registration.to_wire()
    assert wire["protocolVersion"] == "draft"
    assert wire["hooks"][0]["transport"] == {
        "type": "stdio",
        "command": "a",
        "lifecycle": "persistent",
    }
    assert wire["hooks"][0]["subscriptions"][0]["mode"] == "intercept"
    assert wire["hooks"][1]["authentication"] == {"type": "bearer", "tokenEnv": "B_TOKEN"}
    assert official_schema(SCHEMA, wire) == []
    assert parse_registration(wire) == registration


@pytest.mark.parametrize(
    ("build", "phrase"),
    [
        (lambda: BearerAuthentication(token_env="A", token="x"), "literal token"),
        (lambda: BearerAuthentication(token_env="A", token_ref="r"), "exactly one"),
        (
            lambda: ObserveSubscription.model_validate(
                {"events": ["tool.before"], "content": {"default": "omit"}, "timeoutMs": 5}
            ),
            "must not have timeoutMs",
        ),
        (
            lambda: InterceptSubscription(
                events=["turn.end"],
                timeout_ms=5,
                failure_policy="fail-open",
                content=ContentSelection(default="omit"),
            ),
            "cannot be intercepted",
        ),
        (
            lambda: ObserveSubscription(
                events=["tool.before"],
                content=ContentSelection(default="omit"),
                scope="managed",
            ),
            "requires disableable: false",
        ),
        (lambda: HttpTransportConfig(url="https://a.example", headers={"A": "x\ny"}), "CR, LF"),
        (
            lambda: StdioTransportConfig(command="a", headers={"A": "b"}),
            "only allowed with an http",
        ),
        (
            lambda: Hook(
                id="com.example.a",
                transport=StdioTransportConfig(command="a"),
                authentication=BearerAuthentication(token_env="A"),
            ),
            "only allowed with an http transport",
        ),
        (lambda: Hook(id="nodots", transport=StdioTransportConfig(command="a")), "reverse-DNS"),
        (
            lambda: Registration(
                hooks=[
                    Hook(id="com.example.a", transport=StdioTransportConfig(command="a")),
                    Hook(id="com.example.a", transport=StdioTransportConfig(command="b")),
                ]
            ),
            "duplicate backend id",
        ),
    ],
)
def test_models_enforce_rules_too(build: Callable[[], object], phrase: str) -> None:
    with pytest.raises(ValidationError) as info:
        build()
    assert phrase in str(info.value)


def test_defaulted_wire_fields_survive_a_colliding_unknown_key() -> None:
    hook = {"id": "com.example.a", "transport": {"type": "stdio", "command": "a"}}
    registration = Registration.model_validate(
        {"hooks": [hook], "protocol_version": "other"}, by_alias=True, by_name=False
    )
    wire = registration.to_wire()
    assert wire["protocolVersion"] == "draft"
    assert wire["protocol_version"] == "other"
    assert wire["hooks"][0]["transport"]["lifecycle"] == "persistent"


# --------------------------------------------------------------------------------------
# Dispatch matching


def test_matching() -> None:
    registration = parse_registration(VALID["http-bearer-headers"])
    hook = registration.hooks[0]
    assert [i for i, _ in hook.matching("tool.before", "intercept")] == [0]
    assert [i for i, _ in hook.matching("model.request.before", "intercept")] == [0]
    assert hook.matching("model.response.after", "intercept") == []
    assert [i for i, _ in hook.matching("session.start", "observe")] == [1]
    assert [i for i, _ in hook.matching("hook.failure", "observe")] == [1]
    assert hook.matching("tool.before", "observe") == []
    # "tool.*" in an intercept subscription never routes an observe-only tool event.
    assert hook.matching("tool.progress", "intercept") == []
    index, sub = hook.matching("tool.after", "intercept")[0]
    assert index == 0 and sub is hook.subscriptions[0]  # type: ignore[index]


def test_matching_without_subscriptions() -> None:
    hook = parse_registration(VALID["subscriptions-omitted"]).hooks[0]
    assert hook.subscriptions is None
    assert hook.matching("tool.before", "intercept") == []


def test_matching_star_observe_covers_everything() -> None:
    hook = parse_registration(VALID["stdio-per-event"]).hooks[0]
    for event in catalogue.EVENT_TYPES:
        assert [i for i, _ in hook.matching(event, "observe")] == [0]
        assert hook.matching(event, "intercept") == []


# --------------------------------------------------------------------------------------
# hooks/configuration


def test_configuration_valid(official_schema: Callable[[str, Any], list[str]]) -> None:
    doc = {
        "subscriptions": [
            {
                "events": ["tool.before"],
                "mode": "intercept",
                "timeoutMs": 200,
                "failurePolicy": "fail-closed",
                "content": {"default": "metadata"},
                "x-note": {"kept": True},
            },
            {"events": ["*"], "mode": "observe", "content": {"default": "omit"}},
        ],
        "x-vendor": [1, 2],
    }
    assert official_schema("configuration.schema.json", doc) == []
    configuration = parse_configuration(doc)
    assert isinstance(configuration, Configuration)
    assert configuration.to_wire() == doc
    assert [i for i, _ in configuration.matching("tool.before", "intercept")] == [0]
    assert [i for i, _ in configuration.matching("tool.before", "observe")] == [1]


@pytest.mark.parametrize(
    ("doc", "path", "phrase"),
    [
        ([], "$", "must be a JSON object"),
        ({}, "$", "subscriptions is required"),
        ({"subscriptions": []}, "subscriptions", "at least one subscription"),
        (
            {"subscriptions": [{"events": ["tool.before"], "mode": "observe"}]},
            "subscriptions[0]",
            "content is required",
        ),
        (
            {"subscriptions": [{"events": ["tool.before"], "mode": "observe", "content": {}}]},
            "subscriptions[0].content",
            "default is required",
        ),
        (
            {
                "subscriptions": [
                    {
                        "events": ["session.end"],
                        "mode": "intercept",
                        "timeoutMs": 10,
                        "failurePolicy": "fail-open",
                        "content": {"default": "omit"},
                    }
                ]
            },
            "subscriptions[0].events[0]",
            "cannot be intercepted",
        ),
        (
            {
                "subscriptions": [
                    {
                        "events": ["tool.before"],
                        "mode": "observe",
                        "failurePolicy": "fail-open",
                        "content": {"default": "omit"},
                    }
                ]
            },
            "subscriptions[0]",
            "must not have failurePolicy",
        ),
    ],
)
def test_configuration_invalid(
    doc: Any, path: str, phrase: str, official_schema: Callable[[str, Any], list[str]]
) -> None:
    errors = _errors(doc, parse_configuration)
    assert _has(errors, path, phrase), _pairs(errors)
    assert official_schema("configuration.schema.json", doc) != []


# --------------------------------------------------------------------------------------
# load_registration


def test_load_valid_file(tmp_path: Path) -> None:
    path = tmp_path / "registration.json"
    path.write_text(json.dumps(VALID["stdio-persistent"], indent=2), "utf-8")
    assert load_registration(path).to_wire() == VALID["stdio-persistent"]
    assert load_registration(str(path)).hooks[0].id == "com.example.deny_list"


def test_load_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "absent.json"
    with pytest.raises(WireErrors) as info:
        load_registration(path)
    assert info.value.first.path == "$"
    assert str(path) in info.value.first.reason
    assert "file not found" in info.value.first.reason


def test_load_directory(tmp_path: Path) -> None:
    with pytest.raises(WireErrors) as info:
        load_registration(tmp_path)
    assert "is a directory" in info.value.first.reason


def test_load_json_syntax_error(tmp_path: Path) -> None:
    path = tmp_path / "broken.json"
    path.write_text('{\n  "protocolVersion": "draft",\n  "hooks": [,]\n}\n', "utf-8")
    with pytest.raises(WireErrors) as info:
        load_registration(path)
    error = info.value.first
    assert error.path == "$"
    assert "invalid JSON at line 3 column 13" in error.reason
    assert str(path) in error.reason


@pytest.mark.parametrize(
    ("content", "phrase"),
    [
        (b'{"protocolVersion": "draft", "protocolVersion": "draft", "hooks": []}', "duplicate key"),
        (b'{"protocolVersion": NaN}', "NaN is not valid JSON"),
        (b"\xff\xfe{}", "not UTF-8"),
        (b"", "invalid JSON at line 1 column 1"),
    ],
)
def test_load_undecodable(tmp_path: Path, content: bytes, phrase: str) -> None:
    path = tmp_path / "bad.json"
    path.write_bytes(content)
    with pytest.raises(WireErrors) as info:
        load_registration(path)
    assert phrase in info.value.first.reason
    assert info.value.first.path == "$"


def test_load_reports_rule_errors(tmp_path: Path) -> None:
    path = tmp_path / "rules.json"
    path.write_text(json.dumps({"protocolVersion": "draft", "hooks": []}), "utf-8")
    with pytest.raises(WireErrors) as info:
        load_registration(path)
    assert _pairs(info.value) == [("hooks", "hooks must list at least one backend")]


@pytest.mark.parametrize("value", ["com.example\n", "com.example\r", " com.example", "com"])
def test_is_reverse_dns_refuses_what_the_schema_pattern_refuses(value: str) -> None:
    from ahp_protocol.wire.names import is_reverse_dns

    assert not is_reverse_dns(value)
    assert is_reverse_dns("com.example")

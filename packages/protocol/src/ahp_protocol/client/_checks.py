"""What a harness checks before its first event: its own declaration and the registration.

Owns :func:`check_declaration` (the host's per-event capabilities) and
:func:`check_registration` (the harness-side rules of draft §9: every credential
resolvable from the environment, every intercept selector served by the declaration).
Each problem raises at once with the JSON path, the rule and what is allowed instead.
Never narrows capabilities (that is per request) or reads a credential beyond whether
it is set.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ahp_protocol.wire import catalogue

if TYPE_CHECKING:
    from ahp_protocol.wire.registration import Registration, Subscription


class RegistrationError(ValueError):
    """A registration this harness cannot run (the message names the JSON path and the rule)."""


class DeclarationError(ValueError):
    """The host's own declaration of what it enforces is wrong (a programming error)."""


def check_declaration(capabilities: object) -> dict[str, dict[str, Any]]:
    """The host's per-event capabilities, checked now rather than at the first event.

    Each key must be an interceptable standard event, each value a well-formed wire
    capabilities object. What the draft does not allow at an event is not an error: it
    is narrowed away per request. Raises :class:`DeclarationError` naming the entry, what
    is wrong and what is allowed there.
    """
    from ahp_protocol.wire.capabilities import parse_capabilities
    from ahp_protocol.wire.effects import EVENT_EFFECTS
    from ahp_protocol.wire.errors import WireErrors

    if not isinstance(capabilities, Mapping):
        raise DeclarationError("capabilities must map event types to capabilities objects")
    declared: dict[str, dict[str, Any]] = {}
    for event_type, caps in capabilities.items():
        where = f"capabilities[{event_type!r}]"
        if not isinstance(event_type, str) or not catalogue.is_interceptable(event_type):
            raise DeclarationError(
                f"{where}: not an interceptable event (interceptable: "
                f"{', '.join(catalogue.INTERCEPTABLE)})"
            )
        allowed = ", ".join(sorted(EVENT_EFFECTS.get(event_type, ())))
        if not isinstance(caps, Mapping):
            raise DeclarationError(
                f"{where}: must be a capabilities object such as "
                f'{{"effects": ["deny"]}}, not {type(caps).__name__} '
                f"(effects allowed at {event_type}: {allowed})"
            )
        try:
            parse_capabilities(caps)
        except WireErrors as exc:
            problems = "; ".join(f"{where}.{e.path}: {e.reason}" for e in exc.errors)
            raise DeclarationError(
                f"{problems} (effects allowed at {event_type}: {allowed})"
            ) from None
        declared[event_type] = dict(caps)
    return declared


def _have_httpx() -> bool:
    """Whether httpx can be imported, without importing it (a stdio-only install has none)."""
    import importlib.util

    try:
        return importlib.util.find_spec("httpx") is not None
    except ValueError:  # httpx in sys.modules as None (blocked) or without a spec
        return False


def check_registration(
    registration: Registration,
    environ: Mapping[str, str],
    declared: Mapping[str, object],
    *,
    interactive: bool = False,
) -> None:
    """The harness-side registration rules (draft §9): credentials resolvable, events served."""
    for i, hook in enumerate(registration.hooks):
        if getattr(hook.transport, "type", None) == "http" and not _have_httpx():
            raise RegistrationError(
                f"hooks[{i}].transport: {hook.id} is an HTTP backend, which needs httpx: "
                "install the http extra (pip install 'ahp-protocol[http]')"
            )
        auth = hook.authentication
        token_env = getattr(auth, "token_env", None)
        if token_env and not environ.get(token_env):
            raise RegistrationError(
                f"hooks[{i}].authentication.tokenEnv: environment variable {token_env} "
                "is not set (or empty); set it or remove the binding"
            )
        if getattr(auth, "token_ref", None):
            raise RegistrationError(
                f"hooks[{i}].authentication.tokenRef: bearer secret references are not "
                "supported by this harness; use tokenEnv"
            )
        if getattr(auth, "type", None) == "oauth":
            check_oauth(auth, f"hooks[{i}].authentication", environ, interactive=interactive)
        headers = getattr(hook.transport, "headers", None) or {}
        for name, value in headers.items():
            env = getattr(value, "value_env", None)
            if env and not environ.get(env):
                raise RegistrationError(
                    f"hooks[{i}].transport.headers.{name}.valueEnv: environment variable "
                    f"{env} is not set (or empty)"
                )
            if getattr(value, "value_ref", None):
                raise RegistrationError(
                    f"hooks[{i}].transport.headers.{name}.valueRef: secret references are "
                    "not supported by this harness; use valueEnv"
                )
        for j, sub in enumerate(hook.subscriptions or ()):
            check_subscription(sub, f"hooks[{i}].subscriptions[{j}]", declared)


def check_oauth(
    auth: Any, where: str, environ: Mapping[str, str], *, interactive: bool = False
) -> None:
    """An ``oauth`` binding this harness can use: ``client_credentials``, or the
    interactive ``authorization_code_pkce`` only in an interactive host (a person signs
    in: draft §9 item 6), a ``clientSecretRef`` of the form ``env:NAME`` with ``NAME`` set,
    and a loadable ``AHP_CA_BUNDLE`` when one is named."""
    if auth.flow != "client_credentials" and not interactive:
        raise RegistrationError(
            f"{where}.flow: {auth.flow} is interactive (a person signs in) and this harness "
            'runs non-interactively; use "client_credentials"'
        )
    ref = auth.client_secret_ref
    if ref is not None:
        if not ref.startswith("env:") or not ref[4:]:
            raise RegistrationError(
                f"{where}.clientSecretRef: this harness resolves only env:NAME references "
                "(the secret in environment variable NAME)"
            )
        if not environ.get(ref[4:]):
            raise RegistrationError(
                f"{where}.clientSecretRef: environment variable {ref[4:]} is not set "
                "(or empty); set it to the client secret"
            )
    bundle = environ.get("AHP_CA_BUNDLE")
    if bundle:
        import ssl

        try:
            ssl.create_default_context(cafile=bundle)
        except (OSError, ssl.SSLError):
            raise RegistrationError(
                "AHP_CA_BUNDLE: the CA bundle it names cannot be loaded as PEM certificates"
            ) from None


def check_subscription(sub: Subscription, where: str, declared: Mapping[str, object]) -> None:
    """An intercept subscription must select at least one event the host declared."""
    if sub.mode != "intercept":
        return
    for k, selector in enumerate(sub.events):
        if not any(e in declared for e in catalogue.expand(selector, "intercept")):
            raise RegistrationError(
                f"{where}.events[{k}]: this harness does not intercept {selector!r} "
                f"(it intercepts: {', '.join(sorted(declared)) or 'nothing'})"
            )

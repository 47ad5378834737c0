"""A real OAuth 2 authorization server to test OAuth clients and resource servers against
(the kit's tests and ``ahp-conformance harness`` use it; so can yours), built from
Authlib's server side: ``AuthorizationServer`` with the client-credentials grant, RFC 9068
JWT access tokens signed with an RSA key (joserfc), RFC 8414 metadata and a JWKS, served
over HTTPS on loopback with a certificate from a test CA (:func:`make_pki` makes one with
``cryptography``; the kit's tests use trustme). Needs the ``oauth`` extra.

    python -m ahp_protocol.testing.oauth_server CONFIG.json

Not a production server: every client is in the config, registration is open, keys live
in memory, nothing is persisted.

CONFIG: ``{"cert": PEM, "key": PEM, "clients": {"id": {"secret": "...", "scopes": [...]}},
"hs256Key": "..."}``. It binds ``127.0.0.1:0`` and prints ``listening on https://HOST:PORT``
on stdout, then serves until terminated. One process holds several issuers, one per first
path segment, each behaving in one way a test needs:

- ``/good``: a correct issuer; ``aud`` is the RFC 8707 ``resource`` of the request; open
  dynamic client registration (RFC 7591, Authlib's ``ClientRegistrationEndpoint``) at
  ``/good/register``; the authorization code grant with PKCE (S256 required) for clients
  without a secret, loopback redirects only, at ``/good/authorize``, where the "person"
  approves every request at once (a ``302`` to the redirect URI with the code);
- ``/liar``: its metadata names ``/good`` as the issuer (an untrusted issuer);
- ``/slow``: its metadata answers after 3 s (a deadline covers discovery);
- ``/redirect``: its token endpoint answers ``307`` to ``/good``'s (never followed);
- ``/expired``: issues ``/good``'s tokens that expired 10 minutes ago (``expires_in`` says
  otherwise);
- ``/otheraud``: issues ``/good``'s tokens for ``https://elsewhere.invalid/`` whatever the
  ``resource``;
- ``/plainauth``: its ``authorization_endpoint`` is plain http to a remote host;
- ``/sdk``: the official SDK's interop shape: HS256 with ``hs256Key``, ``aud`` from the
  ``audience`` parameter (else ``resource``), a ``purpose: "oauth"`` claim.

``GET /log`` returns what each token request carried (paths, grant, resource, scope,
whether a client secret came, never the secret): how tests see what reached the AS.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import ssl
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from authlib.oauth2.rfc6749 import (  # type: ignore[import-untyped]
    AuthorizationServer,
    ClientMixin,
    JsonPayload,
    JsonRequest,
    OAuth2Error,
    OAuth2Request,
)
from authlib.oauth2.rfc6749.grants import (  # type: ignore[import-untyped]
    AuthorizationCodeGrant,
    ClientCredentialsGrant,
)
from authlib.oauth2.rfc6749.requests import (  # type: ignore[import-untyped]
    BasicOAuth2Payload,
)
from authlib.oauth2.rfc7591 import (  # type: ignore[import-untyped]
    ClientRegistrationEndpoint,
)
from authlib.oauth2.rfc7636 import CodeChallenge  # type: ignore[import-untyped]
from authlib.oauth2.rfc9068 import JWTBearerTokenGenerator  # type: ignore[import-untyped]
from joserfc.jwk import OctKey, RSAKey

TENANTS = ("good", "liar", "slow", "redirect", "expired", "otheraud", "sdk", "plainauth")
SIGNING = RSAKey.generate_key(2048, parameters={"kid": "test-key", "use": "sig", "alg": "RS256"})
CURRENT: contextvars.ContextVar[dict[str, str]] = contextvars.ContextVar("form")
LOG: list[dict[str, Any]] = []
LOCK = threading.Lock()


class Client(ClientMixin):  # type: ignore[misc]
    """A configured client: confidential (client credentials) with a secret, public
    (authorization code with PKCE, loopback redirects only) without one."""

    def __init__(self, client_id: str, secret: str | None, scopes: list[str]) -> None:
        self.client_id, self.secret, self.scopes = client_id, secret, scopes

    def get_client_id(self) -> str:
        return self.client_id

    def get_default_redirect_uri(self) -> None:
        return None

    def get_allowed_scope(self, scope: str | None) -> str:
        asked = (scope or "").split()
        return " ".join(s for s in asked if s in self.scopes)

    def check_redirect_uri(self, redirect_uri: str) -> bool:
        # RFC 8252 §7.3: a loopback redirect, any port
        parts = urlsplit(redirect_uri)
        return self.secret is None and parts.scheme == "http" and parts.hostname == "127.0.0.1"

    def check_client_secret(self, client_secret: str) -> bool:
        import hmac

        if self.secret is None:
            return False
        return hmac.compare_digest(client_secret.encode(), self.secret.encode())

    def check_endpoint_auth_method(self, method: str, endpoint: str) -> bool:
        if self.secret is None:
            return method == "none"
        return method in ("client_secret_basic", "client_secret_post")

    def check_response_type(self, response_type: str) -> bool:
        return self.secret is None and response_type == "code"

    def check_grant_type(self, grant_type: str) -> bool:
        if self.secret is None:
            return grant_type == "authorization_code"
        return grant_type == "client_credentials"


class User:
    def get_user_id(self) -> str:
        return "person"


class Code:
    def __init__(self, code: str, client_id: str, redirect_uri: str, scope: str, data: Any) -> None:
        self.code, self.client_id, self.redirect_uri, self.scope = (
            code,
            client_id,
            redirect_uri,
            scope,
        )
        self.code_challenge = data.get("code_challenge")
        self.code_challenge_method = data.get("code_challenge_method")

    def get_redirect_uri(self) -> str:
        return self.redirect_uri

    def get_scope(self) -> str:
        return self.scope

    def get_nonce(self) -> None:
        return None

    def get_auth_time(self) -> None:
        return None


CODES: dict[str, Code] = {}


class PkceGrant(AuthorizationCodeGrant):  # type: ignore[misc]
    TOKEN_ENDPOINT_AUTH_METHODS = ["none"]

    def save_authorization_code(self, code: str, request: Any) -> None:
        data = request.payload.data
        CODES[code] = Code(
            code, request.client.client_id, request.payload.redirect_uri, request.scope, data
        )

    def query_authorization_code(self, code: str, client: Any) -> Code | None:
        found = CODES.get(code)
        return found if found is not None and found.client_id == client.client_id else None

    def delete_authorization_code(self, authorization_code: Code) -> None:
        CODES.pop(authorization_code.code, None)

    def authenticate_user(self, authorization_code: Code) -> User:
        return User()


class Request(OAuth2Request):  # type: ignore[misc]
    def __init__(
        self, uri: str, headers: dict[str, str], form: dict[str, str], method: str = "POST"
    ) -> None:
        super().__init__(method, uri, headers=headers)
        self.payload = BasicOAuth2Payload(form)
        self._form = form

    @property
    def form(self) -> dict[str, str]:
        return self._form if self.method == "POST" else {}

    @property
    def args(self) -> dict[str, str]:
        return self._form if self.method == "GET" else {}


class Tokens(JWTBearerTokenGenerator):  # type: ignore[misc]
    def __init__(self, issuer: str, tenant: str, hs256: str) -> None:
        super().__init__(issuer, alg="HS256" if tenant == "sdk" else "RS256")
        self.tenant, self.hs256 = tenant, hs256

    def get_jwks(self) -> Any:
        if self.tenant == "sdk":
            return OctKey.import_key(self.hs256.encode())
        return SIGNING

    def get_audiences(self, client: Any, user: Any, scope: str) -> str:
        form = CURRENT.get()
        if self.tenant == "otheraud":
            return "https://elsewhere.invalid/"
        if self.tenant == "sdk":  # the SDK's interop client sends audience, RFC 8707 resource
            return form.get("audience") or form.get("resource", "")
        return form.get("resource") or client.get_client_id()

    def get_extra_claims(self, client: Any, grant_type: str, user: Any, scope: str) -> Any:
        if self.tenant == "expired":
            return {"exp": int(time.time()) - 600}
        if self.tenant == "sdk":
            return {"purpose": "oauth"}
        return {}


class Payload(JsonPayload):  # type: ignore[misc]
    def __init__(self, data: dict[str, Any]) -> None:
        self._data = data

    @property
    def data(self) -> dict[str, Any]:
        return self._data


class Registration(ClientRegistrationEndpoint):  # type: ignore[misc]
    """Open dynamic registration (RFC 7591 §3): any caller gets a confidential
    client-credentials client with the ``ahp.hooks`` scope."""

    def __init__(self, clients: dict[str, Client]) -> None:
        super().__init__()
        self.clients = clients

    def authenticate_token(self, request: Any) -> bool:
        return True

    def get_server_metadata(self) -> None:
        return None

    def resolve_public_key(self, request: Any) -> None:
        return None

    def save_client(self, client_info: Any, client_metadata: Any, request: Any) -> Client:
        client = Client(client_info["client_id"], client_info["client_secret"], ["ahp.hooks"])
        with LOCK:
            self.clients[client.client_id] = client
            LOG.append({"tenant": "good", "registered": client.client_id})
        return client


class Server(AuthorizationServer):  # type: ignore[misc]
    def __init__(self, issuer: str, tenant: str, clients: dict[str, Client], hs256: str) -> None:
        super().__init__()
        self.clients = clients
        self.register_grant(ClientCredentialsGrant)
        self.register_grant(PkceGrant, [CodeChallenge(required=True)])
        self.register_token_generator("default", Tokens(issuer, tenant, hs256))

    def query_client(self, client_id: str) -> Client | None:
        return self.clients.get(client_id)

    def save_token(self, token: Any, request: Any) -> None:
        pass

    def send_signal(self, name: str, *args: Any, **kwargs: Any) -> None:
        pass

    def create_oauth2_request(self, request: Any) -> Request:
        return request  # type: ignore[no-any-return]

    def handle_response(self, status: int, body: Any, headers: Any) -> Any:
        return status, body, headers


def make_pki(folder: Path) -> dict[str, str]:
    """A test CA and a ``127.0.0.1``/``localhost`` server certificate signed by it, as PEM
    files in ``folder``: ``{"ca": CA_PEM, "server": KEY_AND_CHAIN_PEM, "dir": folder}``."""
    import datetime
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "ahp test CA")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(False, False, False, False, False, True, True, False, False), True
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), False)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    leaf = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            ),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False
        )
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), False
        )
        .sign(ca_key, hashes.SHA256())
    )
    pem = serialization.Encoding.PEM
    (folder / "ca.pem").write_bytes(ca.public_bytes(pem))
    (folder / "server.pem").write_bytes(
        key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
        + leaf.public_bytes(pem)
        + ca.public_bytes(pem)
    )
    return {"ca": str(folder / "ca.pem"), "server": str(folder / "server.pem"), "dir": str(folder)}


def main() -> None:
    config = json.loads(Path(sys.argv[1]).read_text())
    clients = {
        cid: Client(cid, c.get("secret"), list(c.get("scopes", ())))
        for cid, c in config["clients"].items()
    }
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(config["cert"], config["key"])

    class Server_(ThreadingHTTPServer):
        def handle_error(self, request: Any, client_address: Any) -> None:
            if isinstance(sys.exc_info()[1], OSError):
                return  # a client that left (a test's deadline), or refused our certificate
            super().handle_error(request, client_address)

    httpd = Server_(("127.0.0.1", 0), BaseHTTPRequestHandler)
    httpd.daemon_threads = True
    base = f"https://127.0.0.1:{httpd.server_address[1]}"
    hs256 = config.get("hs256Key", "k" * 32)
    # expired/otheraud are broken modes of the good issuer: its iss, its key.
    iss = {t: f"{base}/good" if t in ("expired", "otheraud") else f"{base}/{t}" for t in TENANTS}
    servers = {t: Server(iss[t], t, clients, hs256) for t in TENANTS}

    registration = Registration(clients)

    def metadata(tenant: str) -> dict[str, Any]:
        issuer = f"{base}/good" if tenant == "liar" else f"{base}/{tenant}"
        extra: dict[str, Any] = {}
        if tenant == "good":
            extra = {
                "registration_endpoint": f"{base}/good/register",
                "authorization_endpoint": f"{base}/good/authorize",
            }
        elif tenant == "plainauth":  # an authorization endpoint no client may be sent to
            extra = {"authorization_endpoint": "http://auth.example.invalid/authorize"}
        return {
            **extra,
            "issuer": issuer,
            "token_endpoint": f"{base}/{tenant}/token",
            "jwks_uri": f"{base}/{tenant}/jwks",
            "grant_types_supported": ["client_credentials", "authorization_code"],
            "token_endpoint_auth_methods_supported": ["client_secret_basic", "client_secret_post"],
            "response_types_supported": ["code"],
            "code_challenge_methods_supported": ["S256"],
        }

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *_: Any) -> None:
            pass

        def reply(self, status: int, body: Any, headers: Any = ()) -> None:
            data = body if isinstance(body, bytes) else json.dumps(body).encode()
            self.send_response(status)
            sent = set()
            for name, value in headers:
                self.send_header(name, value)
                sent.add(name.lower())
            if "content-type" not in sent:
                self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            path = urlsplit(self.path).path
            if path == "/log":
                with LOCK:
                    return self.reply(200, LOG)
            for prefix in (
                "/.well-known/oauth-authorization-server/",
                "/.well-known/openid-configuration/",
            ):
                if path.startswith(prefix) and path[len(prefix) :] in TENANTS:
                    tenant = path[len(prefix) :]
                    if tenant == "slow":
                        time.sleep(3)
                    if prefix.endswith("openid-configuration/"):
                        return self.reply(404, {"error": "not_found"})
                    return self.reply(200, metadata(tenant))
            parts = path.strip("/").split("/")
            if parts == ["good", "authorize"]:  # the person approves at once
                query = dict(parse_qsl(urlsplit(self.path).query))
                with LOCK:
                    LOG.append({"tenant": "good", "authorize": sorted(query)})
                request = Request(f"{base}{self.path}", dict(self.headers.items()), query, "GET")
                status, body, out = servers["good"].create_authorization_response(
                    request, grant_user=User()
                )
                return self.reply(status, body if body else b"", out)
            if len(parts) == 2 and parts[0] in TENANTS and parts[1] == "jwks":
                return self.reply(200, {"keys": [SIGNING.as_dict(private=False)]})
            self.reply(404, {"error": "not_found"})

        def do_POST(self) -> None:
            path = urlsplit(self.path).path
            size = int(self.headers.get("Content-Length", "0"))
            raw = self.rfile.read(size).decode()
            parts = path.strip("/").split("/")
            if parts == ["good", "register"]:
                request = JsonRequest("POST", f"{base}{path}", dict(self.headers.items()))
                request.payload = Payload(json.loads(raw or "{}"))
                try:
                    status, body, out = registration(request)
                except OAuth2Error as error:
                    status, body, out = error.status_code, dict(error.get_body()), []
                return self.reply(status, body, out)
            if len(parts) != 2 or parts[0] not in TENANTS or parts[1] != "token":
                return self.reply(404, {"error": "not_found"})
            tenant = parts[0]
            form = dict(parse_qsl(raw))
            basic = self.headers.get("Authorization", "")
            with LOCK:
                LOG.append(
                    {
                        "tenant": tenant,
                        "grant_type": form.get("grant_type"),
                        "resource": form.get("resource"),
                        "audience": form.get("audience"),
                        "scope": form.get("scope"),
                        "client_secret": "client_secret" in form or basic.startswith("Basic "),
                    }
                )
            if tenant == "redirect":
                return self.reply(307, {"error": "moved"}, [("Location", f"{base}/good/token")])
            CURRENT.set(form)
            headers = {k: v for k, v in self.headers.items()}
            request = Request(f"{base}{path}", headers, form)
            status, body, out = servers[tenant].create_token_response(request)
            self.reply(status, body, out)

    httpd.RequestHandlerClass = Handler
    httpd.socket = context.wrap_socket(httpd.socket, server_side=True)
    print(f"listening on {base}", flush=True)
    with contextlib.suppress(KeyboardInterrupt):
        httpd.serve_forever()


if __name__ == "__main__":
    main()

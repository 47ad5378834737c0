"""Content uploads (draft §10 "Uploads"): a subscription's selected attachments, as refs.

Owns :class:`Attachment` (the bytes of one attachment part the host holds, and the
part that stands for them in the event it builds: a ``metadata`` view with ``size`` and
``sha256``), :func:`upload` (one ``POST`` exactly as the draft says) and
:class:`Uploads` (what the dispatcher runs before an event is published: for each
route with ``upload`` whose content selection asks for an attachment's body, the
upload and then that route's view of the event, carrying only ``{ref}``).

The rules, all here:

- ``POST`` to the exact ``upload.endpoint`` (no route appended, redirects never
  followed, no proxy or netrc), ``Content-Type: application/octet-stream``, the exact
  ``Content-Length``, ``AHP-Content-SHA256: <64 lowercase hex>``, the raw bytes
  (``Content-Encoding``/``Transfer-Encoding`` never set);
- credentials: the upload's own ``auth`` (bearer ``tokenEnv``, or the ``oauth`` preset
  through :func:`ahp_protocol.client.oauth.authorization`, inside ``timeoutMs``), never
  the event's; no ``auth`` sends no ``Authorization``; a bearer ``tokenRef`` is
  ``AUTH_FAILED``. The registration's HTTP ``headers`` apply too,
  except an ``Authorization`` header (that is the event's credential);
- only ``201`` with a JSON receipt ``{ref, size, sha256}`` whose size and digest are
  those of the bytes sent confirms; ``202``/``204``, any other status, a redirect, a
  bad or oversized receipt, a refused connection or ``timeoutMs`` passing do not;
- ``maxBytes`` is checked before anything is sent;
- on failure the route's view carries a body gap for that part (reason
  :data:`UPLOAD_FAILED`, with ``size`` and ``sha256``); a route that asks for the body
  but has no ``upload`` gets the gap :data:`NO_UPLOAD`. Never inline bytes, never a
  path;
- every upload an event needs is finished before the event is published to anyone;
  each (subscription, attachment) is uploaded at most once per event: a retried
  request reuses the ref, an upload is never replayed.

Never logs or echoes a credential or a receiver's answer text. Imported only when an
event carries attachments (httpx is imported at first upload).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

import anyio

from ahp_protocol.client._failures import FailureClass, OperationalFailure

if TYPE_CHECKING:
    import httpx

    from ahp_protocol.client.engine import Route
    from ahp_protocol.wire.registration import Hook, Upload

__all__ = [
    "MAX_RECEIPT_BYTES",
    "NO_UPLOAD",
    "UPLOAD_FAILED",
    "Attachment",
    "UploadFailure",
    "Uploads",
    "is_inline_media",
    "upload",
]

MAX_RECEIPT_BYTES: Final = 64 * 1024
"""The largest receipt read; a longer answer does not confirm."""
UPLOAD_FAILED: Final = "upload failed"
NO_UPLOAD: Final = "no upload endpoint configured for this subscription"

_SHA256: Final = re.compile(r"[0-9a-f]{64}")
_TEXT_MEDIA: Final = re.compile(r"(text/.*|application/json|.*\+json)(;.*)?", re.IGNORECASE)


def is_inline_media(media_type: str) -> bool:
    """Whether ``media_type`` is text or JSON (``text/*``, ``application/json``,
    ``*+json``, any parameters): such content is sent inline, never as an attachment
    (AHP-CONTENT-001)."""
    return _TEXT_MEDIA.fullmatch(media_type) is not None


@dataclass(frozen=True, slots=True)
class Attachment:
    """The bytes of one attachment part and the part that stands for them in an event.

    ``media_type`` must not be ``text/*``, ``application/json`` or ``*+json``
    (AHP-CONTENT-001: those stay inline text); a ``ValueError`` says so.
    """

    data: bytes
    media_type: str
    category: str | None = None
    id: str = field(default_factory=lambda: f"part_{uuid.uuid4().hex}")
    sha256: str = field(init=False)

    def __post_init__(self) -> None:
        if not isinstance(self.data, bytes):
            raise TypeError("attachment data must be bytes")
        if not self.media_type or "/" not in self.media_type:
            raise ValueError("an attachment needs a media type such as image/png")
        if is_inline_media(self.media_type):
            raise ValueError(
                f"{self.media_type} is text or JSON: it is sent inline, never as an attachment"
            )
        object.__setattr__(self, "sha256", hashlib.sha256(self.data).hexdigest())

    @property
    def size(self) -> int:
        return len(self.data)

    def part(self) -> dict[str, Any]:
        """The part the host puts in its event: a metadata view (no bytes, no path)."""
        part: dict[str, Any] = {"id": self.id, "kind": "attachment", "mediaType": self.media_type}
        if self.category:
            part["category"] = self.category
        part.update(selection="metadata", size=self.size, sha256=self.sha256)
        return part

    def __repr__(self) -> str:
        return f"Attachment(id={self.id!r}, media_type={self.media_type!r}, size={self.size})"


class UploadFailure(OperationalFailure):
    """One upload did not confirm; ``detail`` is a fixed, credential-free sentence."""


def _fail(detail: str, failure: FailureClass = FailureClass.HTTP_STATUS) -> UploadFailure:
    return UploadFailure(failure, detail)


def _headers(spec: Upload, hook: Hook | None, environ: Mapping[str, str]) -> list[tuple[str, str]]:
    """The upload's headers: registration headers (not ``Authorization``), then the
    upload's own bearer credential, then the framing the draft fixes."""
    from ahp_protocol.client.transports.http import _credential_bytes, _header_bytes
    from ahp_protocol.wire.registration import BearerAuthentication, HttpTransportConfig

    out: dict[str, tuple[str, str]] = {}
    transport = hook.transport if hook is not None else None
    if isinstance(transport, HttpTransportConfig):
        for name, value in (transport.headers or {}).items():
            if name.lower() in ("authorization", "content-type", "content-length"):
                continue
            if isinstance(value, str):
                out[name.lower()] = (name, (_header_bytes(value) or b"").decode("latin-1"))
            elif value.value_env and environ.get(value.value_env):
                raw = _credential_bytes(environ[value.value_env])
                out[name.lower()] = (name, raw.decode("latin-1"))
            else:
                raise _fail("an upload header cannot be resolved", FailureClass.AUTH_FAILED)
    auth = spec.auth
    if auth is not None and auth.type != "oauth":  # oauth: upload() asks ahp_protocol.client.oauth
        if not isinstance(auth, BearerAuthentication) or not auth.token_env:
            raise _fail("this upload authentication is not supported", FailureClass.AUTH_FAILED)
        token = environ.get(auth.token_env)
        if not token:
            raise _fail("upload token environment variable is unset", FailureClass.AUTH_FAILED)
        out["authorization"] = ("Authorization", "Bearer " + _credential_bytes(token).decode())
    return list(out.values())


async def upload(
    client: httpx.AsyncClient,
    spec: Upload,
    attachment: Attachment,
    *,
    hook: Hook | None = None,
    environ: Mapping[str, str] | None = None,
) -> str:
    """Upload ``attachment`` as ``spec`` says; its confirmed ref, or :class:`UploadFailure`.

    ``client`` must not follow redirects (:meth:`Uploads.client` makes one). Bounded by
    ``spec.timeout_ms`` (connection, body and receipt) and ``spec.max_bytes``.
    """
    import httpx

    if attachment.size > spec.max_bytes:
        raise _fail(
            "attachment is larger than the upload's maxBytes", FailureClass.CONFIGURATION_FAILED
        )
    env = os.environ if environ is None else environ
    headers = _headers(spec, hook, env)
    headers += [
        ("Content-Type", "application/octet-stream"),
        ("Content-Length", str(attachment.size)),
        ("AHP-Content-SHA256", attachment.sha256),
        ("Accept", "application/json"),
        ("Accept-Encoding", "identity"),
    ]
    try:
        with anyio.fail_after(spec.timeout_ms / 1000):
            if spec.auth is not None and spec.auth.type == "oauth":
                headers.append(("Authorization", await _oauth(spec, env)))
            request = client.build_request(
                "POST", spec.endpoint, headers=headers, content=attachment.data
            )
            response = await client.send(request, stream=True)
            try:
                if response.status_code != 201:
                    raise _fail(
                        "redirect not followed"
                        if 300 <= response.status_code < 400
                        else "upload not confirmed (the receiver did not answer 201)"
                    )
                media = response.headers.get("content-type", "").split(";")[0].strip().lower()
                if media != "application/json":
                    raise _fail("upload receipt is not JSON", FailureClass.MALFORMED_OUTPUT)
                raw = bytearray()
                async for chunk in response.aiter_raw():
                    raw += chunk
                    if len(raw) > MAX_RECEIPT_BYTES:
                        raise _fail("upload receipt is too large", FailureClass.MALFORMED_OUTPUT)
            finally:
                await response.aclose()
    except TimeoutError:
        raise _fail("upload timed out", FailureClass.DEADLINE_EXCEEDED) from None
    except httpx.ConnectError:
        raise _fail("upload receiver refused the connection", FailureClass.CONNECT_FAILED) from None
    except (httpx.HTTPError, OSError):
        raise _fail("upload connection lost", FailureClass.CONNECT_FAILED) from None
    return _confirmed(bytes(raw), attachment)


async def _oauth(spec: Upload, environ: Mapping[str, str]) -> str:
    """The upload's own ``oauth`` binding as an ``Authorization`` value
    (:func:`ahp_protocol.client.oauth.authorization`; its discovery client honours
    ``AHP_CA_BUNDLE`` and follows no redirect)."""
    import httpx

    from ahp_protocol.client.oauth import authorization, verify_setting
    from ahp_protocol.wire.registration import OAuthAuthentication

    assert isinstance(spec.auth, OAuthAuthentication)
    async with httpx.AsyncClient(
        verify=verify_setting(environ), follow_redirects=False, trust_env=False
    ) as discovery:
        return await authorization(spec.auth, discovery, environ=environ)


def _confirmed(raw: bytes, attachment: Attachment) -> str:
    """The ref of a receipt that matches what was sent (AHP content-upload receipt)."""
    try:
        receipt = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        raise _fail("upload receipt is not JSON", FailureClass.MALFORMED_OUTPUT) from None
    if not isinstance(receipt, dict):
        raise _fail("upload receipt is not an object", FailureClass.MALFORMED_OUTPUT)
    ref, size, digest = receipt.get("ref"), receipt.get("size"), receipt.get("sha256")
    if not isinstance(ref, str) or not ref or len(ref) > 2048:
        raise _fail("upload receipt has no ref", FailureClass.MALFORMED_OUTPUT)
    if type(size) is not int or size != attachment.size:
        raise _fail("upload receipt size does not match", FailureClass.MALFORMED_OUTPUT)
    if not isinstance(digest, str) or not _SHA256.fullmatch(digest) or digest != attachment.sha256:
        raise _fail("upload receipt sha256 does not match", FailureClass.MALFORMED_OUTPUT)
    return ref


def _wants_body(route: Route, attachment: Attachment) -> bool:
    from ahp_protocol.wire.content import part_category

    category = part_category(attachment.part())
    mode = route.selection.get(category, route.selection.get("default"))
    return mode == "body"


class Uploads:
    """The uploads of one event, for the dispatcher (see the module docstring).

    ``await prepare(routes)`` runs every upload the routes need, concurrently, each
    bounded by its ``timeoutMs``; then :meth:`view` gives each route's event with its
    refs (or body gaps) in place of the host's metadata parts. Failures are kept as
    :attr:`failures` (route key, part id, failure class) for diagnostics.
    """

    def __init__(
        self,
        attachments: Sequence[Attachment],
        client: httpx.AsyncClient | None,
        environ: Mapping[str, str],
    ) -> None:
        self.attachments = {a.id: a for a in attachments}
        self._client = client
        self._environ = environ
        self._refs: dict[tuple[str, int, str], str | None] = {}
        self.failures: list[tuple[tuple[str, int], str, FailureClass]] = []

    @staticmethod
    def client(environ: Mapping[str, str] | None = None) -> httpx.AsyncClient:
        """An HTTP client fit for uploads: no redirects, no proxy or netrc, no cookies;
        TLS verified as the HTTP transport does (``AHP_CA_BUNDLE`` of ``environ``)."""
        from http.cookiejar import CookieJar, DefaultCookiePolicy

        import httpx

        from ahp_protocol.client.transports.http import tls_verify

        bundle = (os.environ if environ is None else environ).get("AHP_CA_BUNDLE")
        return httpx.AsyncClient(
            verify=tls_verify(bundle),
            follow_redirects=False,
            trust_env=False,
            timeout=httpx.Timeout(None),
            cookies=CookieJar(policy=DefaultCookiePolicy(allowed_domains=[])),
        )

    async def prepare(self, routes: Sequence[Route]) -> None:
        """Every upload ``routes`` need, finished (confirmed or failed) on return."""
        todo: list[tuple[Route, Attachment]] = []
        for route in routes:
            spec = route.subscription.upload
            if spec is None:
                continue
            for attachment in self.attachments.values():
                key = (route.hook.id, route.index, attachment.id)
                if key not in self._refs and _wants_body(route, attachment):
                    self._refs[key] = None
                    todo.append((route, attachment))

        async def one(route: Route, attachment: Attachment) -> None:
            spec = route.subscription.upload
            assert spec is not None
            try:
                if self._client is None:  # no client could be made (an unusable CA bundle)
                    raise _fail("no upload client (TLS settings)", FailureClass.CONNECT_FAILED)
                ref = await upload(
                    self._client, spec, attachment, hook=route.hook, environ=self._environ
                )
            except OperationalFailure as exc:
                self.failures.append(((route.hook.id, route.index), attachment.id, exc.failure))
            else:
                self._refs[(route.hook.id, route.index, attachment.id)] = ref

        async with anyio.create_task_group() as tg:
            for route, attachment in todo:
                tg.start_soon(one, route, attachment)

    def view(self, route: Route, event: Mapping[str, Any]) -> Mapping[str, Any]:
        """``route``'s view of ``event`` (:meth:`Route.view`) with this event's attachment
        parts resolved for it: ``{ref}`` when uploaded, else a body gap when the route
        asks for the body, else the host's metadata part."""
        if not self.attachments:
            return route.view(event)
        resolved = self._resolve(event, route)
        return route.view(resolved)

    def _part(self, part: Mapping[str, Any], route: Route) -> Mapping[str, Any]:
        attachment = self.attachments.get(str(part.get("id")))
        if attachment is None or part.get("selection") != "metadata":
            return part
        if not _wants_body(route, attachment):
            return part
        head = {k: part[k] for k in ("id", "kind", "mediaType", "category") if k in part}
        ref = self._refs.get((route.hook.id, route.index, attachment.id))
        if ref is not None:
            return {**head, "selection": "body", "body": {"ref": ref}}
        reason = NO_UPLOAD if route.subscription.upload is None else UPLOAD_FAILED
        return {
            **head,
            "selection": "body",
            "gap": {"reason": reason},
            "size": attachment.size,
            "sha256": attachment.sha256,
        }

    def _resolve(self, value: Any, route: Route) -> Any:
        if isinstance(value, dict):
            if value.get("kind") == "attachment" and "id" in value:
                return self._part(value, route)
            return {k: (v if k == "native" else self._resolve(v, route)) for k, v in value.items()}
        if isinstance(value, list):
            return [self._resolve(v, route) for v in value]
        return value

"""Content uploads over real loopback HTTP (issue 31, part 3): the kit's receiver, the
kit's client uploading to it and to scripted bad receivers, and one event through
``Hooks`` whose backend gets only the ref.

One backend process (``backends/upload_backend.py``) for the module: the server-kit
backend at ``/``, the kit's ``UploadReceiver`` at ``/content`` (bearer token required,
``max_bytes`` 1024) and scripted receivers at ``/fake/MODE``.
"""

from __future__ import annotations

import hashlib
import socket
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from ahp_protocol.client import Hooks
from ahp_protocol.client._failures import FailureClass
from ahp_protocol.client.uploads import NO_UPLOAD, Attachment, UploadFailure, Uploads, upload
from ahp_protocol.wire.registration import Upload

sys.path.insert(0, str(Path(__file__).parent))
from test_http_hardening import Server

BACKENDS = Path(__file__).parent / "backends"
TOKEN = "upload-token-test-value"
PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 2

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    srv = Server([str(BACKENDS / "upload_backend.py")], KIT_UPLOAD_TOKEN=TOKEN)
    try:
        yield srv
    finally:
        srv.stop()


def frame(data: bytes, **override: str) -> dict[str, str]:
    headers = {
        "Content-Type": "application/octet-stream",
        "AHP-Content-SHA256": hashlib.sha256(data).hexdigest(),
        "Authorization": f"Bearer {TOKEN}",
    }
    headers.update(override)
    return {k: v for k, v in headers.items() if v}


# -- the receiver ------------------------------------------------------------------


def test_receiver_confirms_a_well_framed_upload_with_an_opaque_ref(server: Server) -> None:
    response = httpx.post(f"{server.url}/content", content=PNG, headers=frame(PNG))
    assert response.status_code == 201
    receipt = response.json()
    assert receipt["size"] == len(PNG)
    assert receipt["sha256"] == hashlib.sha256(PNG).hexdigest()
    assert receipt["ref"].startswith("urn:uuid:")  # opaque: not a URL, no authority
    again = httpx.post(f"{server.url}/content", content=PNG, headers=frame(PNG)).json()
    assert again["ref"] != receipt["ref"]  # each upload its own immutable ref


@pytest.mark.parametrize(
    ("headers", "status"),
    [
        ({"AHP-Content-SHA256": "0" * 64}, 400),
        ({"AHP-Content-SHA256": "ABC"}, 400),
        ({"AHP-Content-SHA256": ""}, 400),
        ({"Content-Type": "application/json"}, 400),
        ({"Content-Encoding": "gzip"}, 400),
        ({"Authorization": ""}, 401),
        ({"Authorization": "Bearer wrong"}, 401),
        ({"Origin": "http://evil.example"}, 403),
    ],
)
def test_receiver_refuses_bad_framing_and_credentials(
    server: Server, headers: dict[str, str], status: int
) -> None:
    response = httpx.post(f"{server.url}/content", content=PNG, headers=frame(PNG, **headers))
    assert response.status_code == status
    assert TOKEN not in response.text


def test_receiver_refuses_chunked_oversized_and_other_methods(server: Server) -> None:
    def chunks() -> Iterator[bytes]:
        yield PNG[:10]
        yield PNG[10:]

    chunked = httpx.post(f"{server.url}/content", content=chunks(), headers=frame(PNG))
    assert chunked.status_code == 400  # no Content-Length: never chunked
    big = b"\x00" * 1025
    assert httpx.post(f"{server.url}/content", content=big, headers=frame(big)).status_code == 413
    assert httpx.get(f"{server.url}/content").status_code == 405


# -- the client, one failure class each --------------------------------------------


def spec(
    endpoint: str, *, timeout_ms: int = 2000, max_bytes: int = 4096, auth: bool = True
) -> Upload:
    wire: dict[str, Any] = {"endpoint": endpoint, "timeoutMs": timeout_ms, "maxBytes": max_bytes}
    if auth:
        wire["auth"] = {"type": "bearer", "tokenEnv": "KIT_UPLOAD_TOKEN"}
    return Upload.model_validate(wire)


async def send(endpoint: str, **options: Any) -> str:
    async with Uploads.client() as client:
        return await upload(
            client, spec(endpoint, **options), Attachment(PNG, "image/png"),
            environ={"KIT_UPLOAD_TOKEN": TOKEN},
        )  # fmt: skip


async def test_client_upload_confirmed_by_the_kit_receiver(server: Server) -> None:
    ref = await send(f"{server.url}/content")
    assert ref.startswith("urn:uuid:")


@pytest.mark.parametrize(
    ("mode", "failure"),
    [
        ("202", FailureClass.HTTP_STATUS),
        ("redirect", FailureClass.HTTP_STATUS),
        ("bad-hash", FailureClass.MALFORMED_OUTPUT),
        ("bad-size", FailureClass.MALFORMED_OUTPUT),
        ("html", FailureClass.MALFORMED_OUTPUT),
    ],
)
async def test_client_upload_not_confirmed(
    server: Server, mode: str, failure: FailureClass
) -> None:
    with pytest.raises(UploadFailure) as caught:
        await send(f"{server.url}/fake/{mode}")
    assert caught.value.failure == failure


async def test_client_upload_limits_auth_timeout_and_a_receiver_that_is_down(
    server: Server,
) -> None:
    with pytest.raises(UploadFailure) as caught:
        await send(f"{server.url}/fake/slow", timeout_ms=300)
    assert caught.value.failure == FailureClass.DEADLINE_EXCEEDED
    with pytest.raises(UploadFailure) as caught:  # maxBytes: nothing is sent
        await send(f"{server.url}/fake/toolarge", max_bytes=len(PNG) - 1)
    assert "toolarge" not in httpx.post(f"{server.url}/fake/hits").json()
    with pytest.raises(UploadFailure) as caught:  # no upload auth: the receiver says 401
        await send(f"{server.url}/content", auth=False)
    assert caught.value.failure == FailureClass.HTTP_STATUS
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(UploadFailure) as caught:
        await send(f"http://127.0.0.1:{port}/content")
    assert caught.value.failure == FailureClass.CONNECT_FAILED


# -- one event through Hooks -------------------------------------------------------


async def test_backend_gets_only_the_ref_and_the_receiver_has_the_bytes(server: Server) -> None:
    upload_wire = {
        "endpoint": f"{server.url}/content",
        "timeoutMs": 2000,
        "maxBytes": 1024,
        "auth": {"type": "bearer", "tokenEnv": "KIT_UPLOAD_TOKEN"},
    }
    registration = {
        "protocolVersion": "draft",
        "hooks": [
            {
                "id": "com.example.uploads",
                "transport": {"type": "http", "url": f"{server.url}/"},
                "subscriptions": [
                    {
                        "mode": "observe",
                        "events": ["tool.after"],
                        "content": {"default": "body"},
                        "upload": upload_wire,
                    },
                    {"mode": "observe", "events": ["tool.after"], "content": {"default": "body"}},
                    {
                        "mode": "observe",
                        "events": ["tool.after"],
                        "content": {"default": "metadata"},
                    },
                ],
            }
        ],
    }
    before = len(httpx.get(f"{server.url}/records").json())
    attachment = Attachment(PNG, "image/png")
    async with Hooks(
        registration, harness={"name": "t", "version": "1"}, capabilities={},
        environ={"KIT_UPLOAD_TOKEN": TOKEN},
    ) as hooks:  # fmt: skip
        session = hooks.session(cwd="/tmp")
        call = session.tool_call("read_file", {"path": "a.png"}, kind="file_read")
        result = await call.after("ok", "a.png: image/png", attachments=[attachment])
        assert hooks.dispatcher is not None and not hooks.dispatcher.upload_failures
    assert all(d.outcome == "delivered" for d in result.diagnostics)
    with anyio.fail_after(10):
        while len(records := httpx.get(f"{server.url}/records").json()) < before + 3:
            await anyio.sleep(0.05)
    parts = [r["items"][0]["parts"][1] for r in records[before:]]
    uploaded = next(p for p in parts if "body" in p)
    assert uploaded == {
        "id": attachment.id,
        "kind": "attachment",
        "mediaType": "image/png",
        "selection": "body",
        "body": {"ref": uploaded["body"]["ref"]},
    }
    gap = next(p for p in parts if "gap" in p)
    assert gap["gap"] == {"reason": NO_UPLOAD} and gap["sha256"] == attachment.sha256
    meta = next(p for p in parts if p["selection"] == "metadata")
    assert meta["size"] == len(PNG) and "body" not in meta
    assert not any(PNG.hex() in str(r) for r in records)
    resolved = httpx.get(f"{server.url}/resolved").json()
    assert resolved[uploaded["body"]["ref"]] == [len(PNG), attachment.sha256]


async def test_a_retried_request_reuses_the_ref_and_the_upload_is_not_replayed(
    server: Server,
) -> None:
    from ahp_protocol.testing import MemoryTransport, Misbehaving

    registration = {
        "protocolVersion": "draft",
        "hooks": [
            {
                "id": "com.example.crashing",
                "transport": {"type": "stdio", "command": "unused", "lifecycle": "persistent"},
                "subscriptions": [
                    {
                        "mode": "intercept",
                        "events": ["tool.after"],
                        "timeoutMs": 5000,
                        "failurePolicy": "fail-open",
                        "content": {"default": "body"},
                        "upload": {
                            "endpoint": f"{server.url}/fake/auth",
                            "timeoutMs": 2000,
                            "maxBytes": 1024,
                        },
                    }
                ],
            }
        ],
    }
    hits = httpx.post(f"{server.url}/fake/hits").json().get("auth", 0)
    transport = MemoryTransport(Misbehaving("crash"))
    async with Hooks(
        registration, harness={"name": "t", "version": "1"},
        capabilities={"tool.after": {"effects": []}}, transport=lambda hook: transport,
    ) as hooks:  # fmt: skip
        call = hooks.session(cwd="/tmp").tool_call("read_file", {"path": "a.png"}, kind="file_read")
        result = await call.after("ok", "a.png", attachments=[Attachment(PNG, "image/png")])
    sent = [m for m in transport.received if m.get("method") == "hooks/intercept"]
    assert len(sent) == 2  # the crash was retried once: same ids, same content
    assert sent[0] == sent[1]
    assert sent[0]["params"]["event"]["items"][0]["parts"][1]["body"] == {"ref": "urn:uuid:auth"}
    assert httpx.post(f"{server.url}/fake/hits").json()["auth"] == hits + 1  # one upload
    assert result.diagnostics[0].failure == FailureClass.ABNORMAL_EXIT

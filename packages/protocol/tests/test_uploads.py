"""Content upload rules in memory (issue 31, part 3): what an attachment part is, what a
receipt must say to confirm, and what each subscription's view carries when an upload
is not configured, not selected or fails. The transport cases over real HTTP are in
``test_uploads_http.py``.
"""

from __future__ import annotations

import hashlib
import json
import socket
from typing import Any

import pytest
from ahp_protocol.client import Hooks
from ahp_protocol.client._failures import FailureClass
from ahp_protocol.client.uploads import (
    NO_UPLOAD,
    UPLOAD_FAILED,
    Attachment,
    UploadFailure,
    _confirmed,
)
from ahp_protocol.server import Backend, InterceptRequest
from ahp_protocol.testing import MemoryTransport

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(30)]

DATA = b"\x89PNG\r\n\x1a\n\x00\x01\x02"
DIGEST = hashlib.sha256(DATA).hexdigest()


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def test_an_attachment_part_is_a_metadata_view_without_bytes_or_path() -> None:
    attachment = Attachment(DATA, "image/png")
    part = attachment.part()
    assert part == {
        "id": attachment.id,
        "kind": "attachment",
        "mediaType": "image/png",
        "selection": "metadata",
        "size": len(DATA),
        "sha256": DIGEST,
    }
    assert "PNG" not in repr(attachment)


@pytest.mark.parametrize(
    "media", ["text/plain", "TEXT/markdown", "application/json", "application/ld+json", "png"]
)
def test_text_and_json_are_never_attachments(media: str) -> None:
    with pytest.raises(ValueError):
        Attachment(DATA, media)


@pytest.mark.parametrize(
    ("receipt", "confirms"),
    [
        ({"ref": "r1", "size": len(DATA), "sha256": DIGEST}, True),
        ({"ref": "r1", "size": len(DATA), "sha256": DIGEST, "extra": 1}, True),
        ({"ref": "r1", "size": len(DATA) + 1, "sha256": DIGEST}, False),
        ({"ref": "r1", "size": float(len(DATA)), "sha256": DIGEST}, False),
        ({"ref": "r1", "size": len(DATA), "sha256": DIGEST.upper()}, False),
        ({"ref": "r1", "size": len(DATA), "sha256": "0" * 64}, False),
        ({"ref": "", "size": len(DATA), "sha256": DIGEST}, False),
        ({"size": len(DATA), "sha256": DIGEST}, False),
        ([], False),
    ],
)
def test_only_a_matching_receipt_confirms(receipt: Any, confirms: bool) -> None:
    attachment = Attachment(DATA, "image/png")
    raw = json.dumps(receipt).encode()
    if confirms:
        assert _confirmed(raw, attachment) == "r1"
    else:
        with pytest.raises(UploadFailure) as caught:
            _confirmed(raw, attachment)
        assert caught.value.failure == FailureClass.MALFORMED_OUTPUT


def _down() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{sock.getsockname()[1]}/content"


async def test_each_subscription_sees_its_own_view_and_a_failed_upload_is_a_gap() -> None:
    seen: list[dict[str, Any]] = []
    backend = Backend("com.example.uploads.memory")

    @backend.intercept("tool.after")
    def judge(request: InterceptRequest) -> list[Any]:
        seen.append(request.event)
        return []

    @backend.observe("tool.after")
    def watch(event: dict[str, Any]) -> None:
        seen.append(event)

    upload = {"endpoint": _down(), "timeoutMs": 500, "maxBytes": 1 << 20}
    registration = {
        "protocolVersion": "draft",
        "hooks": [
            {
                "id": "com.example.uploads.memory",
                "transport": {"type": "stdio", "command": "unused", "lifecycle": "persistent"},
                "subscriptions": [
                    {  # selects the body and uploads: the receiver is down, a gap
                        "mode": "intercept",
                        "events": ["tool.after"],
                        "timeoutMs": 1000,
                        "failurePolicy": "fail-open",
                        "content": {"default": "body"},
                        "upload": upload,
                    },
                    {"mode": "observe", "events": ["tool.after"], "content": {"default": "body"}},
                    {  # images omitted: no upload is attempted for it at all
                        "mode": "observe",
                        "events": ["tool.after"],
                        "content": {"default": "body", "images": "omit"},
                        "upload": {**upload, "endpoint": "http://127.0.0.1:9/never"},
                    },
                ],
            }
        ],
    }
    attachment = Attachment(DATA, "image/png")
    transport = MemoryTransport(backend)
    async with Hooks(
        registration,
        harness={"name": "t", "version": "1"},
        capabilities={"tool.after": {"effects": []}},
        transport=lambda hook: transport,
    ) as hooks:
        call = hooks.session(cwd="/w").tool_call("read_file", {"path": "a.png"}, kind="file_read")
        result = await call.after("ok", "a.png", attachments=[attachment])
        assert hooks.dispatcher is not None
        failures = hooks.dispatcher.upload_failures
    assert failures == [("com.example.uploads.memory", 0, FailureClass.CONNECT_FAILED)]
    parts = [event["items"][0]["parts"][1] for event in seen]
    assert len(parts) == 3
    gap = {"reason": UPLOAD_FAILED}
    assert parts[0] == {**attachment.part(), "selection": "body", "gap": gap}
    assert parts[1] == {**attachment.part(), "selection": "body", "gap": {"reason": NO_UPLOAD}}
    assert parts[2] == {
        "id": attachment.id,
        "kind": "attachment",
        "mediaType": "image/png",
        "selection": "omit",
    }
    # The host's own result keeps its metadata part: never bytes, never a ref it did not get.
    assert result.event["items"][0]["parts"][1] == attachment.part()


def _configured(upload: dict[str, Any] | None) -> Backend:
    subscription: dict[str, Any] = {
        "mode": "observe",
        "events": ["tool.after"],
        "content": {"default": "body"},
    }
    if upload is not None:
        subscription["upload"] = upload
    return Backend("com.example.uploads.discovered", configuration=[subscription])


DISCOVERED = {
    "protocolVersion": "draft",
    "hooks": [
        {
            "id": "com.example.uploads.discovered",
            "transport": {"type": "stdio", "command": "unused", "lifecycle": "persistent"},
        }
    ],
}


@pytest.mark.parametrize(
    ("upload", "callback", "accepted"),
    [
        (None, None, True),  # no upload: nothing to consent to
        ({"endpoint": "http://127.0.0.1:9/c", "timeoutMs": 10, "maxBytes": 1}, None, False),
        ({"endpoint": "http://127.0.0.1:9/c", "timeoutMs": 10, "maxBytes": 1}, True, True),
        ({"endpoint": "http://127.0.0.1:9/c", "timeoutMs": 10, "maxBytes": 1}, False, False),
        (None, False, False),  # with a callback, every configuration is the host's to accept
        (None, "raise", False),
    ],
)
async def test_a_discovered_upload_needs_the_hosts_consent(
    upload: dict[str, Any] | None, callback: Any, accepted: bool
) -> None:
    asked: list[Any] = []

    def consent(hook: Any, subscriptions: Any) -> bool:
        asked.append((hook.id, [s.upload is not None for s in subscriptions]))
        if callback == "raise":
            raise RuntimeError("host bug")
        return bool(callback)

    transport = MemoryTransport(_configured(upload))
    async with Hooks(
        DISCOVERED,
        harness={"name": "t", "version": "1"},
        capabilities={},
        transport=lambda hook: transport,
        authorize_configuration=None if callback is None else consent,
    ) as hooks:
        assert hooks.dispatcher is not None
        diagnostics = hooks.dispatcher.configuration_diagnostics
        assert hooks.dispatcher.observes("tool.after") is accepted
    if callback is not None:
        assert asked == [("com.example.uploads.discovered", [upload is not None])]
    if accepted:
        assert diagnostics == []
    else:
        assert [d.detail for d in diagnostics] == [
            "hooks/configuration: configuration not authorized; backend skipped"
        ]

"""``read_file`` meets binary media (issue 31, part 3): a binary file is an attachment
(whole bytes, media type by name, never declared text), text and JSON stay inline
text, and ``tool.after`` carries the attachment part under each subscription's
content selection (a subscription that does not select the body never gets it).
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pytest
from ahp_harness.manifest import manifest
from ahp_harness.sandbox import Limits, Sandbox
from ahp_harness.tools import TOOLS
from ahp_protocol.client import Hooks
from ahp_protocol.server import Backend
from ahp_protocol.testing import MemoryTransport

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(30)]

READ = TOOLS["read_file"]
PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(64))


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "logo.png").write_bytes(PNG)
    (root / "blob").write_bytes(b"\x00\x01\x02")
    (root / "data.json").write_bytes(b'{"a": 1}\n')
    (root / "fake.json").write_bytes(b"\x00binary")
    (root / "notes.txt").write_text("plain text\n")
    return root.resolve()


async def read(workspace: Path, path: str, **limits: int) -> Any:
    box = Sandbox([workspace], limits=Limits(**limits))
    return await READ.run(READ.parse_input({"path": path}), box)


async def test_a_binary_file_is_an_attachment(workspace: Path) -> None:
    result = await read(workspace, "logo.png")
    assert result.outcome == "ok"
    (attachment,) = result.attachments
    assert attachment.data == PNG
    assert attachment.media_type == "image/png"
    assert attachment.sha256 == hashlib.sha256(PNG).hexdigest()
    assert result.output == f"logo.png: binary, image/png, {len(PNG)} bytes (attached)"
    unknown = await read(workspace, "blob")
    assert unknown.attachments[0].media_type == "application/octet-stream"
    disguised = await read(workspace, "fake.json")  # binary bytes are never declared JSON
    assert disguised.attachments[0].media_type == "application/octet-stream"


async def test_text_and_json_stay_inline_and_a_large_binary_is_refused(workspace: Path) -> None:
    for path, text in (("notes.txt", "plain text\n"), ("data.json", '{"a": 1}\n')):
        result = await read(workspace, path)
        assert (result.output, result.attachments) == (text, ())
    big = await read(workspace, "logo.png", read_cap_bytes=10)
    assert (big.outcome, big.error_class, big.attachments) == ("error", "too_large", ())


async def test_tool_after_carries_the_part_under_each_selection(workspace: Path) -> None:
    seen: list[dict[str, Any]] = []
    backend = Backend("com.example.attach")

    @backend.observe("tool.after")
    def watch(event: dict[str, Any]) -> None:
        seen.append(event)

    subscriptions = [
        {"mode": "observe", "events": ["tool.after"], "content": {"default": content}}
        for content in ("metadata", "omit")
    ]
    registration = {
        "protocolVersion": "draft",
        "hooks": [
            {
                "id": "com.example.attach",
                "transport": {"type": "stdio", "command": "unused", "lifecycle": "persistent"},
                "subscriptions": subscriptions,
            }
        ],
    }
    result = await read(workspace, "logo.png")
    transport = MemoryTransport(backend)
    async with Hooks(
        registration,
        harness={"name": "t", "version": "1"},
        capabilities={},
        transport=lambda hook: transport,
    ) as hooks:
        call = hooks.session(cwd=str(workspace)).tool_call(
            "read_file", {"path": "logo.png"}, kind="file_read"
        )
        await call.after("ok", result.output, attachments=result.attachments)
    parts = {e["items"][0]["parts"][1]["selection"]: e["items"][0]["parts"][1] for e in seen}
    assert parts["metadata"]["sha256"] == result.attachments[0].sha256
    assert set(parts["omit"]) == {"id", "kind", "mediaType", "selection"}
    assert all("body" not in p and "logo.png" not in str(p) for p in parts.values())


def test_the_manifest_declares_uploads() -> None:
    served = manifest(interactive=False)
    assert not any(gap["path"] == "content.upload" for gap in served["gaps"])
    assert served["limits"]["maxUploadBytes"] == Limits().read_cap_bytes
    assert {"images", "files"} <= set(served["contentCategories"])

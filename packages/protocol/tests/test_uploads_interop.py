"""Content uploads against the official SDK (a test-only peer), both ways, on the upload
steps of the interop contract's lifecycle scenarios (``lifecycle-scenarios.json``:
every scenario with ``op: "upload"`` steps, e.g. ``intercept-content-upload-before-send``,
``upload-integrity-rejection``, ``immutable-upload-and-subscription-views``).

1. The SDK's upload client (``agenthooksprotocol._interop_content.upload``, what its
   lifecycle runner calls for each step, malformed declared framing included) against
   the kit's ``UploadReceiver``: every scenario's ``expected.uploadStatuses``, status
   for status.
2. The kit's client (``ahp_protocol.client.uploads.upload``) against the SDK's upload
   receiver (``python -m agenthooksprotocol.interop server``): each step the kit's
   client can send (it always frames the bytes it has, so the steps that declare a
   wrong size or digest are the receiver's test, not a client's) is confirmed exactly
   when the scenario expects ``201``, and the SDK receiver's receipt passes the kit's
   checks.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from ahp_protocol.client.uploads import Attachment, UploadFailure, Uploads, upload
from ahp_protocol.wire.registration import Upload

from kit_testing import fixtures_root

sys.path.insert(0, str(Path(__file__).parent))
from test_http_hardening import Server

INTEROP = fixtures_root().parent / "ahp-interop"

BACKENDS = Path(__file__).parent / "backends"
TOKEN = "kit-receiver-token"
SDK_TOKEN = "sdk-receiver-token"
UNAUTHORIZED = "AHP_INTEROP_UNAUTHORIZED_UPLOAD_TOKEN"

pytestmark = [pytest.mark.timeout(60)]


def _scenarios() -> list[dict[str, Any]]:
    path = INTEROP / "lifecycle-scenarios.json"
    scenarios = json.loads(path.read_text("utf-8"))["scenarios"]
    return [s for s in scenarios if any(step["op"] == "upload" for step in s["steps"])]


SCENARIOS = _scenarios()
NAMED = {
    "intercept-content-upload-before-send",
    "upload-integrity-rejection",
    "immutable-upload-and-subscription-views",
}


def test_the_named_upload_scenarios_are_among_them() -> None:
    assert {s["id"] for s in SCENARIOS} >= NAMED


def _steps(scenario: dict[str, Any]) -> list[tuple[dict[str, Any], bytes, int]]:
    steps = [s for s in scenario["steps"] if s["op"] == "upload"]
    statuses = scenario["expected"]["uploadStatuses"]
    assert len(steps) == len(statuses)
    return [
        (s, base64.b64decode(s["bodyBase64"]), code)
        for s, code in zip(steps, statuses, strict=True)
    ]


# -- 1. the SDK's client, the kit's receiver -------------------------------------------


@pytest.fixture(scope="module")
def kit_receiver() -> Iterator[Server]:
    srv = Server([str(BACKENDS / "upload_backend.py")], KIT_UPLOAD_TOKEN=TOKEN)
    try:
        yield srv
    finally:
        srv.stop()


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s["id"] for s in SCENARIOS])
def test_sdk_client_to_kit_receiver(
    kit_receiver: Server, scenario: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    from agenthooksprotocol._interop_content import upload as sdk_upload

    monkeypatch.setenv("KIT_UPLOAD_TOKEN", TOKEN)
    monkeypatch.setenv(UNAUTHORIZED, "not-the-receivers-token")
    endpoint = f"{kit_receiver.url}/content"
    default = {"auth": {"type": "bearer", "tokenEnv": "KIT_UPLOAD_TOKEN"}, "maxBytes": 1024}
    statuses = []
    for step, data, _ in _steps(scenario):
        config = {**dict(step.get("upload", default)), "endpoint": endpoint}
        declared = {k: step[k] for k in ("size", "sha256") if k in step}
        status, receipt = sdk_upload(config, data, loopback=True, _declared=declared)
        if status == 201:  # the SDK checked the receipt against the bytes it sent
            assert receipt["size"] == len(data)
            assert receipt["sha256"] == hashlib.sha256(data).hexdigest()
        statuses.append(status)
    assert statuses == scenario["expected"]["uploadStatuses"]


# -- 2. the kit's client, the SDK's receiver -------------------------------------------


@pytest.fixture(scope="module")
def sdk_receiver(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    tmp = tmp_path_factory.mktemp("sdk-receiver")
    ready = tmp / "ready.json"
    config = {
        "transport": "stdio",
        "scenarioFile": str(INTEROP / "scenarios.json"),
        "readinessFile": str(ready),
        "uploadSubscriptions": {"body": "SDK_RECEIVER_TOKEN"},
    }
    (tmp / "config.json").write_text(json.dumps(config), "utf-8")
    argv = ["-m", "agenthooksprotocol.interop", "server", "--config", str(tmp / "config.json")]
    proc = subprocess.Popen(
        [sys.executable, *argv],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env={**os.environ, "SDK_RECEIVER_TOKEN": SDK_TOKEN},
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 20
        while not ready.exists():  # the SDK writes the file atomically once it listens
            assert proc.poll() is None, "the SDK interop server exited"
            assert time.monotonic() < deadline, "the SDK interop server never got ready"
            time.sleep(0.02)
        yield json.loads(ready.read_text("utf-8"))["uploadEndpoint"]
    finally:
        assert proc.stdin is not None
        proc.stdin.close()  # end of stdin stops it
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s["id"] for s in SCENARIOS])
async def test_kit_client_to_sdk_receiver(sdk_receiver: str, scenario: dict[str, Any]) -> None:
    environ = {"SDK_RECEIVER_TOKEN": SDK_TOKEN, UNAUTHORIZED: "not-the-receivers-token"}
    default = {"auth": {"type": "bearer", "tokenEnv": "SDK_RECEIVER_TOKEN"}}
    sent = 0
    async with Uploads.client() as client:
        for step, data, expected in _steps(scenario):
            if (
                step.get("size", len(data)) != len(data)
                or step.get("sha256", hashlib.sha256(data).hexdigest())
                != hashlib.sha256(data).hexdigest()
            ):
                continue  # declares framing a client never sends (the receiver's case)
            wire = {"timeoutMs": 5000, "maxBytes": 1 << 20, **step.get("upload", default)}
            spec = Upload.model_validate({**wire, "endpoint": sdk_receiver})
            attachment = Attachment(data, "application/octet-stream")
            sent += 1
            if expected == 201:
                ref = await upload(client, spec, attachment, environ=environ)
                assert isinstance(ref, str) and ref
            else:
                with pytest.raises(UploadFailure):
                    await upload(client, spec, attachment, environ=environ)
    assert sent > 0

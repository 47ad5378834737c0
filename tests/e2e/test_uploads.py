"""A binary file the model reads reaches a backend as an uploaded ref, never as bytes.

``ahp-harness run`` (scripted model) reads ``logo.png`` from the workspace with
``read_file``. One HTTP backend process (``upload_backend.py``: the server kit's
backend with the kit's upload receiver beside it, bearer token required) observes
``tool.after`` twice: once with ``upload`` (its own bearer ``tokenEnv``, not the
event's credentials) and the body selected, once with only metadata. Judged from
what the backend recorded and what its receiver holds:

- the uploading subscription's ``tool.after`` carries the attachment as
  ``{selection: "body", body: {ref}}`` and nothing else of it (no bytes, no path in
  the part), and the receiver resolves that ref to the file's exact bytes;
- the metadata subscription gets ``size`` and ``sha256`` only;
- no event anywhere carries the file's bytes.
"""

from __future__ import annotations

import hashlib
import json
import sys
import urllib.request
from typing import Any

import pytest

from tests.e2e.conftest import E2E, PROTOCOL_BACKENDS, Command

UPLOAD_BACKEND = PROTOCOL_BACKENDS / "upload_backend.py"
TOKEN = "e2e-upload-token"
PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)) + b"IEND"


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=10) as response:  # loopback only
        return json.loads(response.read())


@pytest.mark.timeout(120)
def test_read_file_of_a_png_is_uploaded_and_the_backend_gets_only_the_ref(
    e2e: E2E, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KIT_UPLOAD_TOKEN", TOKEN)  # the receiver's token (its process env)
    (e2e.workspace / "logo.png").write_bytes(PNG)
    base = e2e.serve_http(Command("uploads", (sys.executable, str(UPLOAD_BACKEND)))).rstrip("/")
    upload = {
        "endpoint": f"{base}/content",
        "timeoutMs": 5000,
        "maxBytes": 1024,
        "auth": {"type": "bearer", "tokenEnv": "KIT_UPLOAD_TOKEN"},
    }
    hook = e2e.hook(
        "com.example.e2e.uploads",
        None,
        "http",
        [
            e2e.observe("tool.after", content="body", upload=upload),
            e2e.observe("tool.after", content="metadata"),
        ],
        url=f"{base}/",
    )
    run = e2e.run(
        registration=e2e.registration(hook),
        steps=[{"tool": "read_file", "input": {"path": "logo.png"}}],
        env={"KIT_UPLOAD_TOKEN": TOKEN},
    ).ok()
    assert run.call("call_1")["outcome"] == "ok"
    records = [r for r in _get(f"{base}/records") if r.get("type") == "tool.after"]
    assert len(records) == 2
    parts = [p for r in records for m in r["items"] for p in m["parts"]]
    attachments = [p for p in parts if p.get("kind") == "attachment"]
    assert len(attachments) == 2
    digest = hashlib.sha256(PNG).hexdigest()
    uploaded = next(p for p in attachments if p["selection"] == "body")
    assert uploaded == {
        "id": uploaded["id"],
        "kind": "attachment",
        "mediaType": "image/png",
        "selection": "body",
        "body": {"ref": uploaded["body"]["ref"]},
    }
    metadata = next(p for p in attachments if p["selection"] == "metadata")
    assert (metadata["size"], metadata["sha256"]) == (len(PNG), digest)
    assert "body" not in metadata
    resolved = _get(f"{base}/resolved")
    assert resolved[uploaded["body"]["ref"]] == [len(PNG), digest]
    text = json.dumps(records)
    assert PNG[16:80].hex() not in text and "IHDR" not in text

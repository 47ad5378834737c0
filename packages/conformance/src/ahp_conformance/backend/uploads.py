"""Check group ``upload.*``: a backend's upload receiver (``--upload-endpoint URL``).

For a backend that offers a content upload receiver (draft §10 "Uploads"), the judge
sends, to that exact endpoint, over loopback HTTP or https:

- a well-framed upload (``Content-Type: application/octet-stream``, the exact
  ``Content-Length``, ``AHP-Content-SHA256``, raw bytes; with ``--upload-token-env``,
  ``Authorization: Bearer`` that token): it must answer ``201`` with a JSON receipt
  ``{ref, size, sha256}`` whose size and digest are those of the bytes and whose ``ref``
  is opaque (not a URL: no scheme authority ``//``), and the same bytes again get a
  receipt too (``upload.confirmed``);
- a digest that is not the body's: ``400`` (``upload.hash-mismatch``);
- another ``Content-Type``, or a chunked body without ``Content-Length``: ``400``
  (``upload.framing``);
- with a token: no ``Authorization`` gets ``401`` (``upload.auth``; ``n/a`` without).

Then the upload steps of every lifecycle scenario of the contract
(``lifecycle-scenarios.json``: ``intercept-content-upload-before-send``,
``upload-integrity-rejection``, ``immutable-upload-and-subscription-views``, ...) are
sent as the contract's client sends them and must get each scenario's
``expected.uploadStatuses`` (``upload.scenario.ID``, :func:`lifecycle_upload_checks`).

Requirement AHP-CONTENT-002 (only immutable non-text, non-JSON media use uploads, under
the draft's upload rules). Without ``--upload-endpoint`` the group is ``not checked``.
Bodies of answers are never echoed beyond the bounded evidence; the token never is.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Mapping
from typing import Any

from ahp_conformance.backend.judge import Judge
from ahp_conformance.report import Evidence

__all__ = ["lifecycle_upload_checks", "upload_checks"]

REQUIREMENTS = ("AHP-CONTENT-002",)
DATA = b"\x89AHP\x00judge upload\x00" + bytes(range(64))
DIGEST = hashlib.sha256(DATA).hexdigest()


def _post(
    url: str, body: Any, headers: Mapping[str, str], timeout: float
) -> tuple[int | None, bytes, str]:
    import httpx

    try:
        with httpx.Client(follow_redirects=False, trust_env=False, timeout=timeout) as client:
            response = client.post(url, content=body, headers=dict(headers))
            return (
                response.status_code,
                response.content[:4096],
                response.headers.get("content-type", ""),
            )
    except httpx.HTTPError as exc:
        return None, type(exc).__name__.encode(), ""


def upload_checks(judge: Judge, endpoint: str, token: str | None) -> None:
    """The ``upload.*`` checks against the receiver at ``endpoint``."""
    timeout = max(judge.timeout_s, 2.0)
    auth = {"Authorization": f"Bearer {token}"} if token else {}
    framed = {
        "Content-Type": "application/octet-stream",
        "AHP-Content-SHA256": DIGEST,
        **auth,
    }
    receipts = []
    problems = []
    last: tuple[int | None, bytes, str] = (None, b"", "")
    for _ in range(2):
        last = status, body, media = _post(endpoint, DATA, framed, timeout)
        if status != 201:
            problems.append(f"answered {status}, not 201")
            break
        if media.split(";")[0].strip().lower() != "application/json":
            problems.append("the receipt is not application/json")
            break
        try:
            receipt = json.loads(body)
        except ValueError:
            problems.append("the receipt is not JSON")
            break
        ref = receipt.get("ref") if isinstance(receipt, dict) else None
        if not isinstance(ref, str) or not ref:
            problems.append("the receipt has no ref")
        elif "//" in ref:
            problems.append("the ref is a URL (it has an authority)")
        if not isinstance(receipt, dict) or (receipt.get("size"), receipt.get("sha256")) != (
            len(DATA),
            DIGEST,
        ):
            problems.append("the receipt's size or sha256 is not the bytes'")
        receipts.append(receipt)
        if problems:
            break
    judge.check(
        "upload.confirmed",
        "a well-framed upload gets 201 and a receipt {ref, size, sha256} matching the bytes, "
        "with an opaque ref (not a URL)",
        REQUIREMENTS,
        "fail" if problems else "pass",
        "; ".join(problems),
        Evidence.of(received=last[1]) if problems else None,
    )

    def refused(check_id: str, title: str, body: Any, headers: Mapping[str, str]) -> None:
        status, answer, _ = _post(endpoint, body, headers, timeout)
        judge.check(
            check_id,
            title,
            REQUIREMENTS,
            "pass" if status == 400 else "fail",
            "" if status == 400 else f"answered {status}, not 400",
            None if status == 400 else Evidence.of(received=answer),
        )

    refused(
        "upload.hash-mismatch",
        "an AHP-Content-SHA256 that is not the body's digest gets 400",
        DATA,
        {**framed, "AHP-Content-SHA256": "0" * 64},
    )

    def chunks() -> Iterator[bytes]:
        yield DATA[:8]
        yield DATA[8:]

    refused(
        "upload.framing",
        "a body that is not application/octet-stream gets 400",
        DATA,
        {**framed, "Content-Type": "application/json"},
    )
    refused(
        "upload.framing.chunked",
        "a chunked body (no Content-Length) gets 400",
        chunks(),
        framed,
    )
    if token is None:
        judge.check(
            "upload.auth",
            "an upload without the receiver's bearer token gets 401",
            REQUIREMENTS,
            "n/a",
            "no --upload-token-env given",
        )
        return
    status, answer, _ = _post(
        endpoint, DATA, {k: v for k, v in framed.items() if k != "Authorization"}, timeout
    )
    judge.check(
        "upload.auth",
        "an upload without the receiver's bearer token gets 401",
        REQUIREMENTS,
        "pass" if status == 401 else "fail",
        "" if status == 401 else f"answered {status}, not 401",
        None if status == 401 else Evidence.of(received=answer),
    )


# -- the contract's lifecycle scenarios: their upload steps ----------------------------

UNAUTHORIZED_TOKEN = "ahp-conformance-not-the-receivers-token"


def _raw_status(url: str, data: bytes, headers: Mapping[str, str], timeout: float) -> int | None:
    """POST ``data`` with ``headers`` as given (a declared ``Content-Length`` longer than
    the body is sent as is, then the write side is closed); the answer's status."""
    import http.client
    import socket
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    conn: http.client.HTTPConnection
    if parts.scheme == "https":
        conn = http.client.HTTPSConnection(parts.hostname or "", parts.port, timeout=timeout)
    else:
        conn = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=timeout)
    try:
        conn.putrequest("POST", (parts.path or "/") + (f"?{parts.query}" if parts.query else ""))
        for name, value in headers.items():
            conn.putheader(name, value)
        conn.endheaders()
        conn.send(data)
        if int(headers["Content-Length"]) != len(data) and conn.sock is not None:
            conn.sock.shutdown(socket.SHUT_WR)
        return conn.getresponse().status
    except (OSError, http.client.HTTPException):
        return None
    finally:
        conn.close()


def lifecycle_upload_checks(
    judge: Judge, endpoint: str, token: str | None, scenarios: list[dict[str, Any]]
) -> None:
    """Each lifecycle scenario's upload steps (``op: "upload"``), sent to ``endpoint`` as
    the contract's client sends them (the declared ``size``/``sha256`` as framing, a
    ``metadata`` step's own credential replaced by one the receiver cannot know), must get
    the scenario's ``expected.uploadStatuses`` (``upload.scenario.ID``)."""
    import base64

    timeout = max(judge.timeout_s, 2.0)
    for scenario in scenarios:
        steps = [s for s in scenario.get("steps", ()) if s.get("op") == "upload"]
        expected = scenario.get("expected", {}).get("uploadStatuses")
        if not steps or not isinstance(expected, list):
            continue
        got: list[int | None] = []
        for step in steps:
            data = base64.b64decode(step["bodyBase64"])
            headers = {
                "Content-Type": "application/octet-stream",
                "Content-Length": str(step.get("size", len(data))),
                "AHP-Content-SHA256": str(step.get("sha256", hashlib.sha256(data).hexdigest())),
            }
            if "auth" in step.get("upload", {}):
                headers["Authorization"] = f"Bearer {UNAUTHORIZED_TOKEN}"
            elif token:
                headers["Authorization"] = f"Bearer {token}"
            got.append(_raw_status(endpoint, data, headers, timeout))
        ok = got == expected
        judge.check(
            f"upload.scenario.{scenario.get('id')}",
            f"the upload steps of lifecycle scenario {scenario.get('id')} get the statuses "
            f"it expects ({', '.join(map(str, expected))})",
            REQUIREMENTS,
            "pass" if ok else "fail",
            "" if ok else f"answered {', '.join(map(str, got))}",
        )

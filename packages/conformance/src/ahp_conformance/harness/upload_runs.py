"""Content uploads, judged on a harness (AHP-CONTENT-001, AHP-CONTENT-002).

Only for an adapter with the kit's ``registration`` extension (otherwise each check is
``unsupported``). Each run writes a registration of one fake backend (persistent stdio,
or over HTTP started by this judge: per ``--transport``) whose intercept subscription
has ``upload`` pointing at this judge's own loopback receiver (:class:`Receiver`, one
per run), and one scenario of this judge's own: a
``tool.before`` whose ``items`` hold one attachment part (``application/octet-stream``)
whose bytes are the scenario's ``uploads`` entry (contract form ``{ref, bodyBase64}``).
What the receiver answers, and what must follow:

=================  ================================================================
receiver           what the harness must do
=================  ================================================================
``201`` + receipt  one ``POST`` to the exact endpoint: ``Content-Type:
                   application/octet-stream``, ``Content-Length`` the exact size,
                   ``AHP-Content-SHA256`` the bytes' digest, the raw bytes (no
                   ``Transfer-Encoding``/``Content-Encoding``); then the event the
                   backend gets carries that part as ``{selection: "body", body:
                   {ref}}`` with the receiver's ref and no ``size``/``sha256``
                   (``upload.confirmed``, ``upload.framing``); the upload carries
                   its own ``Authorization: Bearer`` (``upload.auth`` ``tokenEnv``
                   :data:`TOKEN_ENV`, set for the run in the environment the client
                   inherits), which the backend never sees (``upload.credentials``)
``201``, bad hash  the receipt does not match: no ref of it in the event, nor the
                   bytes (``upload.bad-receipt``)
``202``            not a confirmation: the same (``upload.not-confirmed``)
=================  ================================================================

In every run the tool call itself is decided as usual (no effect: allowed); an upload
failure is never a reason to publish bytes or a path. A client that uploads nothing in
all three runs and passes the scenario's attachment part through unchanged does not
implement uploads: each check is ``unsupported`` (:data:`PASSED_THROUGH`).
"""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
import threading
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from ahp_conformance import contract, scenarios
from ahp_conformance.fake_backend import read_record
from ahp_conformance.harness import FAKE, client_env, progress
from ahp_conformance.harness.registration_runs import (
    ALLOWED,
    LONG_DEADLINE_MS,
    HttpFakes,
    own_scenario,
)
from ahp_conformance.report import Check, Evidence, Status

__all__ = ["Receiver", "unsupported_upload_checks", "upload_checks"]

REQUIREMENTS = ("AHP-CONTENT-001", "AHP-CONTENT-002")
DATA = b"\x89AHP\x00conformance attachment\x00\xff" + bytes(range(32))
DIGEST = hashlib.sha256(DATA).hexdigest()
PART_ID = "conformance-attachment"
FIXTURE_REF = "conformance-blob"
HOOK_ID = "org.ahp.fake.uploads"
MAX_BODY = 1 << 20
TOKEN_ENV = "AHPC_UPLOAD_TOKEN"
"""The upload's own bearer ``tokenEnv``: set in the client's environment for the runs."""

CHECKS = {
    "upload.confirmed": "a confirmed upload: the event carries only {ref}, the receiver's ref",
    "upload.framing": "the upload is one POST to the exact endpoint: octet-stream, the exact "
    "Content-Length, AHP-Content-SHA256 of the bytes, the raw bytes, not chunked or encoded",
    "upload.bad-receipt": "a 201 whose receipt does not match the bytes confirms nothing: "
    "no ref of it and no bytes in the event",
    "upload.not-confirmed": "a 202 confirms nothing: no ref and no bytes in the event",
    "upload.credentials": "the upload carries its own bearer token (upload.auth tokenEnv), "
    "and that token is in nothing the backend receives",
}


@dataclass
class Receiver:
    """A loopback upload receiver answering in one ``mode`` (``ok``, ``bad-hash``,
    ``202``), recording every request it got (headers lowercased, body digest)."""

    mode: str
    token: str = ""
    path: str = "/uploads/content"
    received: list[dict[str, Any]] = field(default_factory=list)
    refs: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *_: Any) -> None:
                pass

            def do_POST(self) -> None:
                length = self.headers.get("Content-Length")
                size = int(length) if length and length.isdigit() else 0
                body = self.rfile.read(min(size, MAX_BODY))
                headers: dict[str, list[str]] = {}
                for name, value in self.headers.items():
                    headers.setdefault(name.lower(), []).append(value)
                receiver.received.append(
                    {
                        "path": self.path,
                        "authorized": headers.get("authorization") == [f"Bearer {receiver.token}"],
                        "headers": headers,
                        "size": len(body),
                        "sha256": hashlib.sha256(body).hexdigest(),
                    }
                )
                ref = f"urn:uuid:{uuid.uuid4()}"
                receiver.refs.append(ref)
                digest = hashlib.sha256(body).hexdigest()
                if receiver.mode == "bad-hash":
                    digest = "0" * 64
                status = 202 if receiver.mode == "202" else 201
                out = json.dumps({"ref": ref, "size": len(body), "sha256": digest}).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def endpoint(self) -> str:
        port = self._server.server_address[1]
        return f"http://127.0.0.1:{port}{self.path}"

    def __enter__(self) -> Receiver:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)


def upload_scenario(name: str) -> scenarios.Scenario:
    """The judge's own ``tool.before`` with one attachment part and its bytes."""
    base = own_scenario(name, ALLOWED)
    request = json.loads(json.dumps(base.request))
    request["params"]["event"]["items"] = [
        {
            "id": PART_ID,
            "kind": "attachment",
            "mediaType": "application/octet-stream",
            "selection": "body",
            "body": {"ref": FIXTURE_REF},
        }
    ]
    raw = {**dict(base.raw), "request": request}
    raw["uploads"] = [{"ref": FIXTURE_REF, "bodyBase64": base64.b64encode(DATA).decode()}]
    return scenarios.Scenario(name, request, base.response, dict(ALLOWED), False, (), raw)


@dataclass
class UploadRun:
    """What one run showed: the client's entry, the fake's intercepts, the receiver."""

    entry: Mapping[str, Any] | None
    intercepts: list[dict[str, Any]]
    receiver: Receiver
    error: str | None = None
    binding: str = "stdio"

    def part(self) -> Any:
        """The attachment part the backend got (``None`` if no event arrived)."""
        if not self.intercepts:
            return None
        items = self.intercepts[-1].get("params", {}).get("event", {}).get("items")
        if not isinstance(items, list):
            return None
        return next((p for p in items if isinstance(p, dict) and p.get("id") == PART_ID), None)


def run_upload(
    adapter: contract.Adapter, workdir: Path, mode: str, watchdog_s: float, binding: str = "stdio"
) -> UploadRun:
    """One run of the judge's scenario against a receiver in ``mode``, the fake backend
    over ``binding`` (``stdio``: started by the client; ``http``: by this judge)."""
    name = f"upload-{mode}"
    folder = workdir / f"{name}-{binding}"
    folder.mkdir()
    scenario = upload_scenario(name)
    record = folder / f"{HOOK_ID}.jsonl"
    token = secrets.token_urlsafe(24)
    fakes = HttpFakes(folder)
    with Receiver(mode, token) as receiver, client_env({TOKEN_ENV: token}):
        transport: dict[str, Any] = {
            "type": "stdio",
            "command": FAKE[0],
            "args": [*FAKE[1:], "--record", str(record)],
            "lifecycle": "persistent",
        }
        if binding == "http":
            try:
                transport = {"type": "http", "url": fakes.start(HOOK_ID, ["--record", str(record)])}
            except contract.ContractError as exc:
                fakes.close()
                return UploadRun(None, [], receiver, str(exc), binding)
        registration = {
            "protocolVersion": "draft",
            "hooks": [
                {
                    "id": HOOK_ID,
                    "transport": transport,
                    "subscriptions": [
                        {
                            "events": ["tool.before"],
                            "mode": "intercept",
                            "timeoutMs": LONG_DEADLINE_MS,
                            "failurePolicy": "fail-closed",
                            "content": {"default": "body"},
                            "upload": {
                                "endpoint": receiver.endpoint,
                                "timeoutMs": 5000,
                                "maxBytes": MAX_BODY,
                                "auth": {"type": "bearer", "tokenEnv": TOKEN_ENV},
                            },
                        }
                    ],
                }
            ],
        }
        (folder / "registration.json").write_text(json.dumps(registration, indent=1), "utf-8")
        config = {
            "transport": "stdio",
            contract.REGISTRATION_EXTENSION: str(folder / "registration.json"),
            "scenarioFile": str(scenarios.write([scenario], folder / "scenarios.json")),
            "reportFile": str(folder / "report.json"),
            "auth": {"mode": "none"},
        }
        try:
            run = contract.run_client(adapter, config, folder, watchdog_s=watchdog_s)
        except contract.ContractError as exc:
            return UploadRun(None, [], receiver, str(exc), binding)
        finally:
            fakes.close()
    received = read_record(record) if record.exists() else []
    intercepts = [
        m
        for m in received
        if m.get("method") == "hooks/intercept"
        and m.get("params", {}).get("event", {}).get("id") == name
    ]
    entry = None
    if run.report is not None:
        entry = next((r for r in run.report["results"] if r.get("id") == name), None)
    return UploadRun(entry, intercepts, receiver, run.error, binding)


def _credentials(outcome: UploadRun) -> Check:
    posts = outcome.receiver.received
    if not posts or not all(p["authorized"] for p in posts):
        return _check("upload.credentials", False, "the upload did not carry its own bearer token")
    if any(outcome.receiver.token in json.dumps(m) for m in outcome.intercepts):
        return _check("upload.credentials", False, "the backend received the upload token")
    return _check("upload.credentials", True, "")


def _check(check_id: str, ok: bool, detail: str, evidence: Any = None) -> Check:
    status: Status = "pass" if ok else "fail"
    return Check(
        check_id,
        CHECKS[check_id],
        REQUIREMENTS,
        status,
        "" if ok else detail,
        None if ok or evidence is None else Evidence.of(received=evidence),
        "stdio",
    )


def _framing(outcome: UploadRun) -> Check:
    posts = outcome.receiver.received
    if len(posts) != 1:
        return _check("upload.framing", False, f"the receiver got {len(posts)} uploads, not 1")
    post = posts[0]
    headers = post["headers"]

    def one(name: str) -> str | None:
        values = headers.get(name, [])
        return values[0] if len(values) == 1 else None

    problems = []
    if post["path"] != outcome.receiver.path:
        problems.append("not the exact endpoint path")
    if one("content-type") != "application/octet-stream":
        problems.append("Content-Type is not application/octet-stream")
    if one("content-length") != str(len(DATA)):
        problems.append("Content-Length is not the exact size")
    if one("ahp-content-sha256") != DIGEST:
        problems.append("AHP-Content-SHA256 is not the bytes' digest")
    if "transfer-encoding" in headers or "content-encoding" in headers:
        problems.append("the body is chunked or encoded")
    if (post["size"], post["sha256"]) != (len(DATA), DIGEST):
        problems.append("the body is not the raw bytes")
    shown = {k: v for k, v in headers.items() if k != "authorization"}  # never the token
    return _check("upload.framing", not problems, "; ".join(problems), shown)


def _confirmed(outcome: UploadRun) -> Check:
    part = outcome.part()
    refs = outcome.receiver.refs
    want = {
        "id": PART_ID,
        "kind": "attachment",
        "mediaType": "application/octet-stream",
        "selection": "body",
        "body": {"ref": refs[0] if refs else None},
    }
    if part is None:
        return _check("upload.confirmed", False, "the backend got no event with the part")
    return _check(
        "upload.confirmed",
        part == want,
        "the part is not {selection: body, body: {ref}} with the receiver's ref",
        part,
    )


def _not_confirmed(check_id: str, outcome: UploadRun) -> Check:
    part = outcome.part()
    if not outcome.intercepts:
        return _check(check_id, False, "the backend got no event (the call was not decided)")
    text = json.dumps(outcome.intercepts[-1])
    leaked = [r for r in outcome.receiver.refs if r in text]
    if leaked:
        return _check(check_id, False, "the event carries the unconfirmed ref", part)
    if base64.b64encode(DATA).decode() in text or DATA.hex() in text:
        return _check(check_id, False, "the event carries the bytes inline", part)
    body = part.get("body") if isinstance(part, dict) else None
    if body is not None:
        return _check(check_id, False, "the part still has a body", part)
    return _check(check_id, True, "")


PASSED_THROUGH = (
    "the client uploaded nothing and passed the scenario's attachment part through "
    "unchanged (the ref of its uploads entry): it does not implement content uploads "
    "(a content.upload gap)"
)


def _passed_through(outcome: UploadRun) -> bool:
    """The client ignored the scenario's ``uploads``: no upload, the fixture part as is."""
    fixture = upload_scenario("x").request["params"]["event"]["items"][0]
    return not outcome.receiver.received and outcome.part() == fixture


def upload_checks(
    adapter: contract.Adapter,
    workdir: Path,
    watchdog_s: float,
    bindings: Sequence[str] = ("stdio",),
) -> list[Check]:
    """The three upload runs per binding of the hook, judged (see the module docstring)."""
    checks: list[Check] = []
    for binding in bindings:
        checks += _binding_checks(adapter, workdir, watchdog_s, binding)
    return checks


def _binding_checks(
    adapter: contract.Adapter, workdir: Path, watchdog_s: float, binding: str
) -> list[Check]:
    progress(f"upload runs over {binding}: a confirmed upload, a bad receipt, a 202")
    ok = run_upload(adapter, workdir, "ok", watchdog_s, binding)
    bad = run_upload(adapter, workdir, "bad-hash", watchdog_s, binding)
    accepted = run_upload(adapter, workdir, "202", watchdog_s, binding)
    if all(_passed_through(o) for o in (ok, bad, accepted)):
        return [replace(c, binding=binding) for c in unsupported_upload_checks(PASSED_THROUGH)]
    checks = []
    for outcome, judged in (
        (ok, [_framing(ok), _confirmed(ok), _credentials(ok)]),
        (bad, [_not_confirmed("upload.bad-receipt", bad)]),
        (accepted, [_not_confirmed("upload.not-confirmed", accepted)]),
    ):
        if outcome.error is not None and not outcome.intercepts:
            why = f"not run: the client adapter did not run ({outcome.error})"
            judged = [Check(c.id, c.title, REQUIREMENTS, "fail", why) for c in judged]
        checks += [replace(c, binding=binding) for c in judged]
    return checks


def unsupported_upload_checks(reason: str) -> list[Check]:
    """The upload checks, each ``unsupported`` (no registration extension)."""
    return [Check(i, t, REQUIREMENTS, "unsupported", reason) for i, t in CHECKS.items()]

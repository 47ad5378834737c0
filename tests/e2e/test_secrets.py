"""Nothing secret leaks: credentials reach the HTTP headers they are for, and nothing else.

``ahp-harness run`` gets two fresh random secrets in its environment only: a bearer
token (``authentication.tokenEnv``) and a header value (``transport.headers.*.valueEnv``),
bound to every HTTP backend of the registration:

- ``misbehave.py`` over HTTP, recording every request with its headers (answers ok);
- ``misbehave.py http-500`` (every exchange fails: the failure path) and a refused port
  (connect failures), both fail-open;
- ``ahp-backend audit --content body`` over HTTP, storing every event whole in SQLite;

plus ``misbehave.py`` over stdio persistent and per_event, which record their whole
environment at start. The session reads a file and runs ``shell`` with ``env`` and an
``echo`` of both variables (approved), so the tool's output travels in ``tool.after``
to every observer and into the database.

Then every artifact is searched for the two values: each file in the test's folder
(record files with every event's body, the transcript, the audit log, the registration,
the HTTP backends' stderr, the SQLite database and its WAL), and the harness's
stdout and stderr. The values are found exactly in the ``Authorization`` (as
``Bearer <token>``) and ``X-Api-Key`` fields of the recorded request headers, one of
each per recorded request, and nowhere else; the stdio backends' environments hold
neither value nor variable. Positive controls show the search covers real traffic:
the headers did arrive, the database holds the shell output.
"""

from __future__ import annotations

import json
import secrets
from pathlib import Path
from typing import Any

TOKEN_ENV = "E2E_AHP_BEARER_TOKEN"
HEADER_ENV = "E2E_AHP_HEADER_VALUE"
ALLOWED_HEADERS = {"authorization", "x-api-key"}
SHELL = 'env; echo "token=${E2E_AHP_BEARER_TOKEN:-unset} header=${E2E_AHP_HEADER_VALUE:-unset}"'
STEPS = [
    {"tool": "read_file", "input": {"path": "notes.txt"}},
    {"tool": "shell", "input": {"command": SHELL}},
    {"say": "done"},
]


def bound(entry: dict[str, Any]) -> dict[str, Any]:
    """``entry`` (an HTTP hook) with both secrets bound: bearer tokenEnv, header valueEnv."""
    entry["authentication"] = {"type": "bearer", "tokenEnv": TOKEN_ENV}
    entry["transport"]["headers"] = {
        "X-Api-Key": {"valueEnv": HEADER_ENV},
        "X-Tenant": "engineering",
    }
    return entry


def test_secrets_appear_only_in_their_own_request_headers(e2e: Any) -> None:
    token = "tok" + secrets.token_hex(20)
    header = "hdr" + secrets.token_hex(20)
    values = [token.encode(), header.encode()]
    (e2e.workspace / "notes.txt").write_text("nothing to see here\n", "utf-8")

    everything = [e2e.observe("*", content="body")]
    guard = [e2e.intercept("tool.before", policy="fail-open", timeout_ms=e2e.KIT_TIMEOUT_MS)]
    recording = e2e.misbehave("ok", record="http-ok.jsonl")
    failing = e2e.misbehave("http-500", record="http-500.jsonl")
    http_records = [recording.record, failing.record]
    hooks = [
        bound(e2e.hook("com.example.e2e.http", recording, "http", guard + everything)),
        bound(e2e.hook("com.example.e2e.http500", failing, "http", guard)),
        bound(e2e.hook("com.example.e2e.refused", None, "http", guard, url=e2e.refused_url())),
        bound(e2e.hook("com.example.ahp.audit", e2e.audit(content="body"), "http", everything)),
        e2e.hook(
            "com.example.e2e.stdio",
            e2e.misbehave("ok", record="stdio-persistent.jsonl"),
            "persistent",
            guard + everything,
        ),
        e2e.hook(
            "com.example.e2e.once",
            e2e.misbehave("ok", record="stdio-per-event.jsonl"),
            "per_event",
            guard,
        ),
    ]
    env = {TOKEN_ENV: token, HEADER_ENV: header}
    run = e2e.run(registration=e2e.registration(*hooks), steps=STEPS, approve="always", env=env)
    run.ok()

    # The session did what the search relies on.
    assert [c["outcome"] for c in run.transcript] == ["ok", "ok"], run.explain()
    failed = {x["backend"]: x["failure"] for x in run.exchanges() if x["outcome"] == "failed"}
    assert failed.get("com.example.e2e.http500") == "http_status", run.explain()
    assert failed.get("com.example.e2e.refused") == "connect_failed", run.explain()
    shell_after = [
        e
        for e in e2e.audit_events("tool.after")
        if e.get("tool", {}).get("name") == "shell" and e.get("outcome") == "ok"
    ]
    assert len(shell_after) == 1
    stored = json.dumps(shell_after[0])
    assert "token=unset header=unset" in stored  # the tool's env was scrubbed, output stored
    reasons = {e["failure"]["reason"] for e in e2e.audit_events("hook.failure")}
    assert {"http_status", "connect_failed"} <= reasons  # failure events reached observers

    # Allowed: exactly the two credential headers of each recorded HTTP request.
    requests = 0
    for path in http_records:
        assert path is not None
        for entry in e2e.json_lines(path):
            if entry.get("event") != "message":
                assert not any(v.decode() in json.dumps(entry) for v in values), entry
                continue
            requests += 1
            headers = {name.lower(): value for name, value in entry["headers"]}
            assert headers["authorization"] == f"Bearer {token}"
            assert headers["x-api-key"] == header
            assert headers["x-tenant"] == "engineering"
            rest = dict(entry)
            rest["headers"] = [
                [k, v] for k, v in entry["headers"] if k.lower() not in ALLOWED_HEADERS
            ]
            text = json.dumps(rest)
            assert token not in text and header not in text, f"{path.name}: {text[:500]}"
        data = path.read_bytes()
        assert data.count(token.encode()) == data.count(b'"Bearer ' + token.encode())
        assert data.count(header.encode()) == data.count(b'"' + header.encode() + b'"')
    assert requests >= 4  # tool.before x2 to each, plus the observations

    # Forbidden: everywhere else.
    searched = 0
    for path in sorted(Path(e2e.tmp).rglob("*")):
        if not path.is_file() or path in http_records:
            continue
        data = path.read_bytes()
        searched += 1
        for value in values:
            assert value not in data, f"a secret leaked into {path.relative_to(e2e.tmp)}"
    assert searched >= 8
    names = {p.name for p in Path(e2e.tmp).rglob("*")}
    assert {"audit.db", "transcript.jsonl", "audit.jsonl", "stdio-persistent.jsonl"} <= names
    for stream in (run.stdout, run.stderr):
        assert token not in stream and header not in stream

    # The stdio backends never got the variables (nor anything else of the secrets).
    for record in ("stdio-persistent.jsonl", "stdio-per-event.jsonl"):
        starts = [r for r in e2e.json_lines(e2e.path(record)) if r.get("event") == "start"]
        assert starts, record
        for start in starts:
            assert TOKEN_ENV not in start["env"] and HEADER_ENV not in start["env"]
            assert token not in json.dumps(start) and header not in json.dumps(start)

"""MCP tools go through the same gate: real MCP servers, ``ahp-harness run --mcp-config``.

Two real MCP server processes written with the SDK's server side
(``mcp_servers/recording_server.py``, ``MCPServer``): one over stdio, started by the
harness from the configuration, and one over streamable HTTP on ``127.0.0.1:0``,
started by this module (once, for every test here) and stopped after. Each server
appends every ``tools/call`` it receives to its record file before the tool runs, so
"never reached the server" is read from the server's own record.

- The deny-list (``mcp_server`` + ``mcp_tool``) and the CEL policy
  (``event.tool.mcp.server.id``, ``event.tool.mcp.toolName``) each deny
  ``delete_file`` on both servers: the call is refused and never recorded by the
  server; the allowed ``echo`` runs and ``tool.after`` (seen by the audit backend)
  carries its result as text (an image as an attachment part); an input the tool's
  ``inputSchema`` refuses is never sent to a backend or the server, and an input a
  backend rewrote is checked again (the server gets the rewritten one, or nothing).
- ``tool.before`` on the wire carries ``origin: "mcp"``, ``path: "mcp"`` and the
  exact ``tool.mcp`` identity, with the URL's userinfo and query, the secret argument,
  the header and the environment value stripped (and named in ``gaps``); no secret
  appears anywhere (events, audit log, transcript, output).
- A host rule that makes an MCP tool ``ask`` sends ``tool.permission.request`` with the
  same ``origin: "mcp"`` and ``tool.mcp`` as the call's ``tool.before`` (server, tool
  name, provenance, stripped connection) and no credential; ``--approve always`` answers.
- With no AHP at all, the host's permission rule naming ``mcp__files__delete_file``
  refuses it; a server that dies mid-call is a clear error, the next call says the
  server is not connected, and no server process outlives the run (nor a SIGTERM in the
  middle of a call).
- A configuration that cannot be used (malformed, a command that does not exist, a
  refused URL) stops the run at once with exit 2, naming the JSON path and the reason.
"""

from __future__ import annotations

import hashlib
import json
import os
import queue
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent
SERVER = HERE / "mcp_servers" / "recording_server.py"
PY = sys.executable
GUARD = "com.example.e2e.guard"
AUDIT = "com.example.e2e.audit"

SECRET_ARG = "sk-e2e0123456789abcdefSECRETARG"
SECRET_ENV = "e2e-env-value-SECRETENV"
SECRET_HEADER = "e2e-header-token-SECRETHEADER"
SECRET_QUERY = "e2e-query-SECRETQUERY"
SECRET_PASSWORD = "e2e-password-SECRETPASS"
SECRETS = (SECRET_ARG, SECRET_ENV, SECRET_HEADER, SECRET_QUERY, SECRET_PASSWORD)

DENYLIST_RULES = """
[[rules]]
reason = "Deleting through MCP is not allowed here."
code = "com.example.e2e.mcp_delete"
mcp_server = ["files", "web"]
mcp_tool = "delete_file"
"""

POLICY_RULES = """
[[rule]]
name = "no-mcp-delete"
when = '''event.tool.origin == "mcp" && event.tool.mcp.server.id in ["files", "web"]
  && event.tool.mcp.toolName == "delete_file"'''
action = "deny"
reason = "Deleting through MCP is not allowed here."
code = "com.example.e2e.mcp_delete"
"""

ALLOW_MCP = """
[[rules]]
decision = "allow"
tool = "mcp__files"
reason = "the host allows the files server"

[[rules]]
decision = "allow"
tool = "mcp__web__*"
reason = "the host allows the web server"
"""


# -- the HTTP MCP server (one for the module) ---------------------------------------------


class HttpMcpServer:
    def __init__(self, record: Path, log: Path) -> None:
        self.record = record
        self.proc = subprocess.Popen(
            [PY, str(SERVER), "--transport", "http", "--record", str(record), "--name", "web-rec"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        self.lines: queue.Queue[str | None] = queue.Queue()
        self._log = log
        self._thread = threading.Thread(target=self._drain, daemon=True)
        self._thread.start()
        self.url = self._wait_for_url()

    def _drain(self) -> None:
        assert self.proc.stderr is not None
        with self._log.open("ab") as log:
            for raw in self.proc.stderr:
                log.write(raw)
                self.lines.put(raw.decode("utf-8", "replace").strip())
        self.lines.put(None)

    def _wait_for_url(self) -> str:
        deadline = time.monotonic() + 30.0
        while True:
            try:
                line = self.lines.get(timeout=max(deadline - time.monotonic(), 0.01))
            except queue.Empty:
                raise AssertionError("the HTTP MCP server printed no address in 30 s") from None
            if line is None:
                raise AssertionError(f"the HTTP MCP server exited: {self._log.read_text()[-2000:]}")
            if line.startswith("listening on "):
                return line.removeprefix("listening on ")

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=5)
        self._thread.join(timeout=5)


@pytest.fixture(scope="module")
def web(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpMcpServer]:
    folder = tmp_path_factory.mktemp("mcp-http")
    server = HttpMcpServer(folder / "web-calls.jsonl", folder / "web.log")
    try:
        yield server
    finally:
        server.stop()


def calls(record: Path, *, secret: bool = False) -> list[dict[str, Any]]:
    """The tool calls a server received (its own record), in order (``secret``: with the
    SHA-256 of the secret it was given)."""
    if not record.exists():
        return []
    lines = [json.loads(line) for line in record.read_text("utf-8").splitlines() if line]
    keep = ("tool", "arguments", "secret_sha256") if secret else ("tool", "arguments")
    return [{k: line[k] for k in keep} for line in lines if "tool" in line]


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def pids(record: Path) -> list[int]:
    if not record.exists():
        return []
    lines = [json.loads(line) for line in record.read_text("utf-8").splitlines() if line]
    return [line["pid"] for line in lines if "pid" in line]


def mcp_config(e2e: Any, web: HttpMcpServer | None, record: Path, name: str = "mcp.json") -> Path:
    servers: dict[str, Any] = {
        "files": {
            "command": PY,
            "args": [
                *(str(SERVER), "--record", str(record), "--name", "files-rec"),
                *("--api-key", SECRET_ARG, "--digest-env", "FILES_TOKEN"),
            ],
            "env": {"FILES_TOKEN": SECRET_ENV},
            "timeout": 20000,
        }
    }
    if web is not None:
        host_port = web.url.removeprefix("http://")
        servers["web"] = {
            "type": "http",
            "url": f"http://user:{SECRET_PASSWORD}@{host_port}?token={SECRET_QUERY}",
            "headers": {"X-Api-Key": "key ${E2E_MCP_TOKEN}"},
        }
    return e2e.write(name, {"mcpServers": servers})


def leaked(run: Any, *texts: str) -> list[str]:
    places = {
        "stdout": run.stdout,
        "stderr": run.stderr,
        "transcript": run.transcript_path.read_text("utf-8")
        if run.transcript_path.exists()
        else "",
        "audit log": run.audit_path.read_text("utf-8") if run.audit_path.exists() else "",
    }
    return [
        f"{secret} in {where}"
        for secret in texts
        for where, text in places.items()
        if secret in text
    ]


# -- (a), (b), (d): the deny-list and the policy match MCP calls ----------------------------


STEPS = [
    {"tool": "mcp__files__echo", "input": {"text": "hello over stdio"}},
    {"tool": "mcp__files__delete_file", "input": {"path": "precious.txt"}},
    {"tool": "mcp__web__echo", "input": {"text": "hello over http"}},
    {"tool": "mcp__web__delete_file", "input": {"path": "precious.txt"}},
    {"tool": "mcp__files__add", "input": {"a": 1, "b": "two"}},
    {"tool": "mcp__web__add", "input": {"a": 2, "b": 3}},
    {"tool": "mcp__files__picture", "input": {}},
]


@pytest.mark.parametrize("guard", ["denylist", "policy"])
def test_the_guards_deny_mcp_calls_by_server_and_tool_and_the_server_never_sees_them(
    e2e: Any, web: HttpMcpServer, guard: str
) -> None:
    files_record = e2e.path("files-calls.jsonl")
    web_before = len(calls(web.record))
    command = (
        e2e.denylist(DENYLIST_RULES)
        if guard == "denylist"
        else e2e.ahp_backend("policy", "--rules", str(e2e.write("policy.toml", POLICY_RULES)))
    )
    registration = e2e.registration(
        e2e.hook(GUARD, command, "persistent", [e2e.intercept("tool.before")]),
        e2e.hook(
            AUDIT,
            e2e.audit(content="body"),
            "persistent",
            [e2e.observe("tool.before", "tool.after", content="body")],
        ),
    )
    run = e2e.run(
        registration=registration,
        steps=STEPS,
        permissions=ALLOW_MCP,
        args=["--mcp-config", str(mcp_config(e2e, web, files_record))],
        env={"E2E_MCP_TOKEN": SECRET_HEADER},
    ).ok()

    # the denied calls never reached either server; the allowed ones did, once each
    # the env value and the header (filled from ${E2E_MCP_TOKEN}) reached their server
    env, header = sha(SECRET_ENV), sha(f"key {SECRET_HEADER}")
    assert calls(files_record, secret=True) == [
        {"tool": "echo", "arguments": {"text": "hello over stdio"}, "secret_sha256": env},
        {"tool": "picture", "arguments": {}, "secret_sha256": env},
    ]
    assert calls(web.record, secret=True)[web_before:] == [
        {"tool": "echo", "arguments": {"text": "hello over http"}, "secret_sha256": header},
        {"tool": "add", "arguments": {"a": 2, "b": 3}, "secret_sha256": header},
    ]
    for call_id in ("call_2", "call_4"):
        line = run.call(call_id)
        assert line["outcome"] == "denied" and not line["executed"], run.explain()
        assert line["denied_by"] == GUARD and line["synthetic_denial"] is False
        assert line["reason"] == "Deleting through MCP is not allowed here."
    for call_id in ("call_1", "call_3", "call_6", "call_7"):
        assert run.call(call_id)["outcome"] == "ok" and run.call(call_id)["executed"]
    invalid = run.call("call_5")
    assert invalid["outcome"] == "error" and not invalid["executed"]
    assert invalid["reason"] == "invalid input: $.b: must be of type integer"

    befores = {e["call"]["id"]: e for e in e2e.audit_events("tool.before")}
    afters = {e["call"]["id"]: e for e in e2e.audit_events("tool.after")}
    assert "call_5" not in befores and "call_5" not in afters  # refused before any event

    # (d) the identity on the wire, exactly
    stdio = befores["call_1"]
    assert stdio["path"] == "mcp"
    assert stdio["tool"]["name"] == "mcp__files__echo"
    assert stdio["tool"]["origin"] == "mcp" and stdio["tool"]["kind"] == "mcp"
    assert stdio["tool"]["input"] == {"text": "hello over stdio"}
    assert stdio["tool"]["mcp"] == {
        "server": {"id": "files", "name": "files-rec"},
        "toolName": "echo",
        "provenance": "runtime",
        "connection": {
            "transport": "stdio",
            "command": PY,
            "args": [
                *(str(SERVER), "--record", str(files_record), "--name", "files-rec"),
                *("--api-key", "[removed]", "--digest-env", "FILES_TOKEN"),
            ],
            "cwd": str(e2e.workspace.resolve()),
            "gaps": [{"path": "args[6]", "reason": "removed: may be a credential"}],
        },
    }
    http = befores["call_3"]
    assert http["path"] == "mcp"
    assert http["tool"]["mcp"] == {
        "server": {"id": "web", "name": "web-rec"},
        "toolName": "echo",
        "provenance": "runtime",
        "connection": {
            "transport": "http",
            "url": web.url,
            "gaps": [
                {"path": "url.userinfo", "reason": "removed: may carry credentials"},
                {"path": "url.query", "reason": "removed: may carry credentials"},
            ],
        },
    }
    assert befores["call_4"]["tool"]["mcp"]["toolName"] == "delete_file"

    # tool.after carries the MCP result as text; the denied calls were skipped
    assert afters["call_1"]["outcome"] == "ok"
    assert afters["call_1"]["items"][0]["parts"][0]["text"] == "echo: hello over stdio"
    assert afters["call_3"]["items"][0]["parts"][0]["text"] == "echo: hello over http"
    assert json.loads(afters["call_6"]["items"][0]["parts"][0]["text"]) == {"sum": 5}
    for call_id in ("call_2", "call_4"):
        assert afters[call_id]["outcome"] == "denied"
    # an MCP image is an attachment part (its digest and size; no upload endpoint here)
    text, attached = afters["call_7"]["items"][0]["parts"]
    assert text["text"] == "[image content (image/png, 11 bytes): attached]"
    png = b"\x89PNG\r\n\x1a\nahp"
    assert attached["kind"] == "attachment" and attached["mediaType"] == "image/png"
    assert (attached["size"], attached["sha256"]) == (len(png), hashlib.sha256(png).hexdigest())
    assert "gap" in attached and "data" not in attached

    stored = json.dumps(e2e.audit_events())
    assert [s for s in SECRETS if s in stored] == []
    assert leaked(run, *SECRETS) == []


def test_a_modified_input_is_what_the_server_gets_and_is_checked_against_the_schema_again(
    e2e: Any,
) -> None:
    record = e2e.path("files-calls.jsonl")

    def merge(value: dict[str, Any]) -> dict[str, Any]:
        return {
            "effects": [{"type": "modify", "target": "input", "operation": "merge", "value": value}]
        }

    rewriter = e2e.recorder(script=[merge({"text": "rewritten by a backend"}), merge({"text": 7})])
    registration = e2e.registration(
        e2e.hook("com.example.e2e.rewriter", rewriter, "persistent", [e2e.intercept("tool.before")])
    )
    steps = [
        {"tool": "mcp__files__echo", "input": {"text": "as the model wrote it"}},
        {"tool": "mcp__files__echo", "input": {"text": "valid, until rewritten"}},
    ]
    config = mcp_config(e2e, None, record)
    run = e2e.run(
        registration=registration,
        steps=steps,
        permissions=ALLOW_MCP,
        args=["--mcp-config", str(config)],
    ).ok()
    assert run.call("call_1")["outcome"] == "ok", run.explain()
    assert run.call("call_1")["input"] == {"text": "rewritten by a backend"}
    refused = run.call("call_2")
    assert refused["outcome"] == "denied" and not refused["executed"]
    assert refused["reason"] == "modified input is invalid: $.text: must be of type string"
    assert calls(record) == [{"tool": "echo", "arguments": {"text": "rewritten by a backend"}}]


# -- (e): the identity reaches the approval prompt's event too ---------------------------------


ASK_MCP = """
[[rules]]
decision = "ask"
tool = "mcp__files__echo"
reason = "the host asks before the files server echoes"

[[rules]]
decision = "ask"
tool = "mcp__web__echo"
reason = "the host asks before the web server echoes"
"""


def test_an_mcp_call_the_host_asks_about_carries_its_identity_in_the_permission_request(
    e2e: Any, web: HttpMcpServer
) -> None:
    """The host's ``ask`` rule sends ``tool.permission.request``: it names the same MCP
    server and tool as the call's ``tool.before`` (stripped connection included), and no
    credential of the configuration; ``--approve always`` answers, the call runs."""
    files_record = e2e.path("files-calls.jsonl")
    web_before = len(calls(web.record))
    events = ("tool.before", "tool.permission.request", "tool.after")
    registration = e2e.registration(
        e2e.hook(
            AUDIT,
            e2e.audit(content="body"),
            "persistent",
            [e2e.observe(*events, content="body")],
        )
    )
    steps = [
        {"tool": "mcp__files__echo", "input": {"text": "asked over stdio"}},
        {"tool": "mcp__web__echo", "input": {"text": "asked over http"}},
    ]
    run = e2e.run(
        registration=registration,
        steps=steps,
        permissions=ASK_MCP,
        approve="always",
        args=["--mcp-config", str(mcp_config(e2e, web, files_record))],
        env={"E2E_MCP_TOKEN": SECRET_HEADER},
    ).ok()

    # the host asked (its rule), the prompt was approved, each call reached its server once
    for call_id in ("call_1", "call_2"):
        line = run.call(call_id)
        assert line["approval"] == "approved" and line["executed"], run.explain()
        assert line["host_stage"] == "rule" and line["outcome"] == "ok"
    assert calls(files_record) == [{"tool": "echo", "arguments": {"text": "asked over stdio"}}]
    assert calls(web.record)[web_before:] == [
        {"tool": "echo", "arguments": {"text": "asked over http"}}
    ]

    befores = {e["call"]["id"]: e for e in e2e.audit_events("tool.before")}
    requests = {e["call"]["id"]: e for e in e2e.audit_events("tool.permission.request")}
    assert sorted(requests) == ["call_1", "call_2"], run.explain()
    expected = {
        "call_1": {"id": "files", "name": "files-rec"},
        "call_2": {"id": "web", "name": "web-rec"},
    }
    for call_id, server in expected.items():
        request, before = requests[call_id], befores[call_id]
        assert request["path"] == "mcp"
        assert request["tool"]["origin"] == "mcp" and request["tool"]["kind"] == "mcp"
        assert request["tool"]["name"] == before["tool"]["name"]
        mcp = request["tool"].get("mcp")
        assert mcp is not None, f"tool.permission.request of {call_id} has no tool.mcp"
        assert mcp == before["tool"]["mcp"]  # the same identity, connection and gaps
        assert mcp["server"] == server
        assert (mcp["toolName"], mcp["provenance"]) == ("echo", "runtime")
    # the stripped connections, as tool.before has them
    assert requests["call_1"]["tool"]["mcp"]["connection"]["gaps"] == [
        {"path": "args[6]", "reason": "removed: may be a credential"}
    ]
    assert requests["call_2"]["tool"]["mcp"]["connection"] == {
        "transport": "http",
        "url": web.url,
        "gaps": [
            {"path": "url.userinfo", "reason": "removed: may carry credentials"},
            {"path": "url.query", "reason": "removed: may carry credentials"},
        ],
    }

    # no credential of the configuration in any event, nor anywhere else
    stored = json.dumps(e2e.audit_events())
    assert [s for s in SECRETS if s in stored] == []
    assert leaked(run, *SECRETS) == []


# -- (c): the host's own rule, with no AHP at all; a server that dies mid-call ----------------


DENY_DELETE = """
[[rules]]
decision = "allow"
tool = "mcp__files"

[[rules]]
decision = "deny"
tool = "mcp__files__delete_*"
reason = "no deletes through MCP"
"""


def test_a_host_rule_naming_an_mcp_tool_refuses_it_without_ahp_and_a_dying_server_is_an_error(
    e2e: Any,
) -> None:
    record = e2e.path("files-calls.jsonl")
    steps = [
        {"tool": "mcp__files__delete_file", "input": {"path": "precious.txt"}},
        {"tool": "mcp__files__echo", "input": {"text": "still here"}},
        {"tool": "mcp__files__crash", "input": {}},
        {"tool": "mcp__files__echo", "input": {"text": "after the crash"}},
        {"tool": "mcp__files__nothing", "input": {}},
    ]
    started = time.monotonic()
    config = mcp_config(e2e, None, record)
    run = e2e.run(steps=steps, permissions=DENY_DELETE, args=["--mcp-config", str(config)]).ok()
    assert time.monotonic() - started < 30, run.explain()

    refused = run.call("call_1")
    assert refused["outcome"] == "denied" and refused["host_stage"] == "rule", run.explain()
    assert refused["reason"] == "refused by a permission rule"
    assert run.call("call_2")["outcome"] == "ok"
    crashed = run.call("call_3")
    assert crashed["outcome"] == "error" and crashed["executed"]
    assert run.call("call_4")["outcome"] == "error"
    assert run.call("call_5")["reason"] == "unknown tool 'mcp__files__nothing'"
    assert "MCP server files closed the connection during the call" in run.stdout
    assert "MCP server files is not connected" in run.stdout
    assert [c["tool"] for c in calls(record)] == ["echo", "crash"]  # never delete_file
    for pid in pids(record):
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
    assert leaked(run, SECRET_ARG, SECRET_ENV) == []


def test_sigterm_during_an_mcp_call_stops_the_session_and_every_server(e2e: Any) -> None:
    record = e2e.path("files-calls.jsonl")
    script = e2e.write("nap.json", [{"tool": "mcp__files__nap", "input": {"seconds": 60}}])
    argv = [PY, "-m", "ahp_harness.cli", "run", "--workspace", str(e2e.workspace)]
    argv += ["--model", f"script:{script}", "--non-interactive", "--approve", "always"]
    argv += ["--mcp-config", str(mcp_config(e2e, None, record))]
    proc = subprocess.Popen(
        argv,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        cwd=e2e.tmp,
    )
    try:
        deadline = time.monotonic() + 30
        while not calls(record):  # the server has the call: the harness waits on it
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the nap call never reached the server"
            time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate(timeout=10)
    assert proc.returncode == 128 + signal.SIGTERM, (out, err)
    assert "session ended by a signal" in out
    for pid in pids(record):
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


# -- a configuration that cannot be used stops the run at once --------------------------------


def refused_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        (
            {"mcpServers": {"files": {"command": "python", "args": "server.py"}}},
            "$.mcpServers.files.args: must be a list of strings",
        ),
        (
            {"mcpServers": {"web": {"type": "sse", "url": "http://127.0.0.1:1/sse"}}},
            "$.mcpServers.web.type: the SSE transport is not supported",
        ),
        (
            {"mcpServers": {"gone": {"command": "/nonexistent/mcp-server-e2e"}}},
            "$.mcpServers.gone: could not connect (the command was not found)",
        ),
        (
            {"mcpServers": {"web": {"url": "http://127.0.0.1:{port}/mcp"}}},
            "$.mcpServers.web: could not connect",
        ),
    ],
    ids=["malformed", "sse", "no-such-command", "refused-url"],
)
def test_an_unusable_mcp_configuration_stops_the_run_with_the_path_and_reason(
    e2e: Any, config: dict[str, Any], expected: str
) -> None:
    text = json.dumps(config).replace("{port}", str(refused_port()))
    path = e2e.write("mcp.json", text)
    steps = [{"tool": "read_file", "input": {"path": "x"}}]
    started = time.monotonic()
    run = e2e.run(steps=steps, args=["--mcp-config", str(path)])
    assert run.returncode == 2, run.explain()
    assert expected in run.stderr, run.explain()
    assert str(path) in run.stderr
    assert run.transcript == []  # nothing ran
    assert time.monotonic() - started < 20

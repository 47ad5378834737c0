"""The six tools: input validation, schemas, main arguments, and real runs
(files in a temporary workspace, search, fetch against a loopback http.server)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar

import anyio
import pytest
from ahp_harness.sandbox import Limits, Sandbox
from ahp_harness.tools import KINDS, TOOLS, ToolInputError, get_tool
from ahp_harness.tools.base import FileChange, ToolResult
from ahp_protocol.wire.kinds import TOOL_KIND_SET, TOOL_KINDS
from pydantic import BaseModel, ConfigDict

pytestmark = pytest.mark.anyio

SHELL = TOOLS["shell"]
READ = TOOLS["read_file"]
WRITE = TOOLS["write_file"]
EDIT = TOOLS["edit_file"]
SEARCH = TOOLS["search"]
FETCH = TOOLS["fetch"]
PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(32))


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "hello.txt").write_text("hello world\nsecond line\n")
    return root.resolve()


@pytest.fixture
def sandbox(workspace: Path) -> Sandbox:
    return Sandbox([workspace], fetch_hosts=lambda host: host in {"127.0.0.1", "localhost"})


# -- the registry and the inputs -------------------------------------------------------

EXPECTED = {
    "shell": ("shell", {"command"}, set()),
    "read_file": ("file_read", {"path"}, set()),
    "write_file": ("file_write", {"path", "content"}, set()),
    "edit_file": ("file_edit", {"path", "old", "new"}, set()),
    "search": ("search", {"pattern"}, {"path"}),
    "fetch": ("fetch", {"url"}, set()),
}


def test_the_six_tools() -> None:
    assert set(TOOLS) == set(EXPECTED)
    for name, (kind, _, _) in EXPECTED.items():
        tool = get_tool(name)
        assert tool is TOOLS[name]
        assert tool.name == name and tool.kind == kind
        assert kind in KINDS
        assert tool.description and "\n" not in tool.description
    assert get_tool("rm") is None


def test_the_kinds_are_the_wire_vocabulary() -> None:
    """One list: the harness's kinds are ``ahp_protocol.wire.kinds``, not a copy."""
    assert KINDS is TOOL_KIND_SET
    assert {tool.kind for tool in TOOLS.values()} <= set(TOOL_KINDS)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_json_schema_is_a_closed_object(name: str) -> None:
    _, required, optional = EXPECTED[name]
    schema = TOOLS[name].json_schema()
    assert schema["type"] == "object"
    assert schema["additionalProperties"] is False
    assert set(schema["properties"]) == required | optional
    assert set(schema.get("required", [])) == required
    for prop in schema["properties"].values():
        assert prop.get("description")


@pytest.mark.parametrize(
    ("name", "raw", "field", "rule"),
    [
        ("shell", {}, "command", "required"),
        ("shell", {"command": ""}, "command", "must not be empty"),
        ("shell", {"command": 42}, "command", "valid string"),
        ("shell", {"command": "ls", "cwd": "/"}, "cwd", "unknown field (allowed: command)"),
        ("shell", "ls", "input", "must be a JSON object"),
        ("shell", {"command": "a\x00b"}, "command", "must not contain NUL"),
        ("read_file", {"path": ["a"]}, "path", "valid string"),
        ("write_file", {"path": "a"}, "content", "required"),
        ("edit_file", {"path": "a", "old": "", "new": "x"}, "old", "must not be empty"),
        ("search", {"pattern": "(unclosed"}, "pattern", "not a valid regular expression"),
        ("search", {"pattern": "x", "path": ""}, "path", "must not be empty"),
        ("fetch", {"url": "ftp://127.0.0.1/x"}, "url", "scheme must be http or https"),
        ("fetch", {"url": "http:///x"}, "url", "URL has no host"),
        ("fetch", {"url": "http://u:hunter2@h/"}, "url", "credentials in the URL"),
    ],
)
def test_invalid_input_names_field_and_rule(name: str, raw: object, field: str, rule: str) -> None:
    with pytest.raises(ToolInputError) as caught:
        TOOLS[name].parse_input(raw)
    assert caught.value.field == field
    assert rule in caught.value.rule
    assert str(caught.value).startswith(f"{field}: ")
    assert "hunter2" not in str(caught.value)


def test_several_problems_are_counted() -> None:
    with pytest.raises(ToolInputError, match=r"\(and 2 more problems\)"):
        EDIT.parse_input({})


def test_parse_accepts_a_model_and_revalidates_it() -> None:
    class Foreign(BaseModel):
        model_config = ConfigDict(extra="allow")
        command: object

    assert SHELL.parse_input(Foreign(command="ls")).model_dump() == {"command": "ls"}
    with pytest.raises(ToolInputError, match="command"):
        SHELL.parse_input(Foreign(command=["ls"]))


MAIN = [
    ("shell", {"command": "git status"}, "git status", []),
    ("read_file", {"path": "a/b.txt"}, "a/b.txt", ["a/b.txt"]),
    ("write_file", {"path": "c.txt", "content": "x"}, "c.txt", ["c.txt"]),
    ("edit_file", {"path": "d.txt", "old": "a", "new": "b"}, "d.txt", ["d.txt"]),
    ("search", {"pattern": "TODO"}, "TODO", ["."]),
    ("search", {"pattern": "TODO", "path": "src"}, "TODO", ["src"]),
    ("fetch", {"url": "http://localhost/x"}, "http://localhost/x", []),
]


@pytest.mark.parametrize(("name", "raw", "main", "paths"), MAIN)
def test_main_argument_and_paths(name: str, raw: object, main: str, paths: list[str]) -> None:
    tool = TOOLS[name]
    inp = tool.parse_input(raw)
    assert tool.main_argument(inp) == main
    assert tool.paths(inp) == paths


# -- read_file -------------------------------------------------------------------------


async def test_read_file(sandbox: Sandbox) -> None:
    result = await READ.run(READ.parse_input({"path": "hello.txt"}), sandbox)
    assert result == ToolResult(
        outcome="ok", output="hello world\nsecond line\n", duration_ms=result.duration_ms
    )
    assert result.duration_ms > 0


async def test_read_file_failures(sandbox: Sandbox, workspace: Path) -> None:
    (workspace / "folder").mkdir()
    cases = {
        "missing.txt": ("not_found", "no such file: missing.txt"),
        "folder": ("not_a_file", "not a regular file: folder"),
        "../x": ("sandbox_violation", "path '../x' resolves outside the workspace"),
    }
    for path, (error_class, error) in cases.items():
        result = await READ.run(READ.parse_input({"path": path}), sandbox)
        assert result.outcome == "error"
        assert result.error_class == error_class
        assert (result.error or "").startswith(error)


async def test_read_file_is_capped(workspace: Path) -> None:
    (workspace / "big.txt").write_text("a" * 5000)
    box = Sandbox([workspace], limits=Limits(read_cap_bytes=100))
    result = await READ.run(READ.parse_input({"path": "big.txt"}), box)
    assert result.outcome == "ok"
    assert result.output == "a" * 100 + "\n[truncated: file is 5000 bytes; read_file shows 100]"


# -- write_file ------------------------------------------------------------------------


async def test_write_file_creates_with_parents(sandbox: Sandbox, workspace: Path) -> None:
    inp = WRITE.parse_input({"path": "new/deep/file.txt", "content": "héllo\n"})
    result = await WRITE.run(inp, sandbox)
    target = workspace / "new" / "deep" / "file.txt"
    assert result.outcome == "ok"
    assert result.output == "created new/deep/file.txt (7 bytes)"
    assert target.read_text("utf-8") == "héllo\n"
    assert result.file_changes == (FileChange(str(target), "created", None, "héllo\n"),)


async def test_write_file_replaces(sandbox: Sandbox, workspace: Path) -> None:
    result = await WRITE.run(WRITE.parse_input({"path": "hello.txt", "content": "bye"}), sandbox)
    assert result.outcome == "ok"
    assert (workspace / "hello.txt").read_text() == "bye"
    assert result.file_changes == (
        FileChange(str(workspace / "hello.txt"), "modified", "hello world\nsecond line\n", "bye"),
    )


async def test_write_file_caps_the_change_texts(workspace: Path) -> None:
    box = Sandbox([workspace], limits=Limits(change_cap_bytes=4))
    (workspace / "bin").write_bytes(b"\x00\x01")
    result = await WRITE.run(WRITE.parse_input({"path": "bin", "content": "abcdefgh"}), box)
    (change,) = result.file_changes
    assert change.before is None  # binary before
    assert change.after == "abcd\n[truncated]"
    assert (workspace / "bin").read_text() == "abcdefgh"


async def test_write_file_refuses_a_folder(sandbox: Sandbox, workspace: Path) -> None:
    (workspace / "folder").mkdir()
    result = await WRITE.run(WRITE.parse_input({"path": "folder", "content": "x"}), sandbox)
    assert (result.outcome, result.error_class) == ("error", "not_a_file")
    assert result.file_changes == ()


# -- edit_file -------------------------------------------------------------------------


async def test_edit_file_replaces_exactly_once(sandbox: Sandbox, workspace: Path) -> None:
    inp = EDIT.parse_input({"path": "hello.txt", "old": "world", "new": "there"})
    result = await EDIT.run(inp, sandbox)
    assert result.outcome == "ok"
    assert result.output == "edited hello.txt: replaced 1 occurrence"
    assert (workspace / "hello.txt").read_text() == "hello there\nsecond line\n"
    assert result.file_changes == (
        FileChange(
            str(workspace / "hello.txt"),
            "modified",
            "hello world\nsecond line\n",
            "hello there\nsecond line\n",
        ),
    )


@pytest.mark.parametrize(
    ("content", "old", "error_class", "error"),
    [
        ("hello world\n", "absent", "no_match", "`old` was not found in hello.txt"),
        ("line\nline\n", "line", "ambiguous_match", "`old` occurs 2 times in hello.txt; it must"),
        ("hello world\n", "l", "ambiguous_match", "`old` occurs 3 times in hello.txt; it must"),
    ],
)
async def test_edit_file_needs_one_occurrence(
    sandbox: Sandbox, workspace: Path, content: str, old: str, error_class: str, error: str
) -> None:
    (workspace / "hello.txt").write_text(content)
    result = await EDIT.run(
        EDIT.parse_input({"path": "hello.txt", "old": old, "new": "X"}), sandbox
    )
    assert (result.outcome, result.error_class) == ("error", error_class)
    assert (result.error or "").startswith(error)
    assert result.file_changes == ()
    assert (workspace / "hello.txt").read_text() == content


async def test_edit_file_refusals(workspace: Path) -> None:
    box = Sandbox([workspace], limits=Limits(file_cap_bytes=50))
    (workspace / "big.txt").write_text("x" * 51)
    (workspace / "latin.txt").write_bytes("café".encode("latin-1"))
    cases = {
        "missing.txt": "not_found",
        "big.txt": "too_large",
        "latin.txt": "not_text",
    }
    for path, error_class in cases.items():
        result = await EDIT.run(EDIT.parse_input({"path": path, "old": "x", "new": "y"}), box)
        assert (result.outcome, result.error_class) == ("error", error_class), path
    assert (workspace / "big.txt").read_text() == "x" * 51


# -- search ----------------------------------------------------------------------------


@pytest.fixture
def tree(workspace: Path) -> Path:
    (workspace / "src").mkdir()
    (workspace / "src" / "a.py").write_text("import os\n# TODO: one\nx = 1\n")
    (workspace / "src" / "b.py").write_text("# TODO two\n")
    (workspace / ".git").mkdir()
    (workspace / ".git" / "config").write_text("TODO in git\n")
    (workspace / "blob.bin").write_bytes(b"TODO\x00binary")
    return workspace


async def test_search_finds_lines(sandbox: Sandbox, tree: Path) -> None:
    result = await SEARCH.run(SEARCH.parse_input({"pattern": r"TODO:?\s"}), sandbox)
    assert result.outcome == "ok"
    assert result.output == "src/a.py:2: # TODO: one\nsrc/b.py:1: # TODO two"


async def test_search_under_a_path_and_a_single_file(sandbox: Sandbox, tree: Path) -> None:
    in_dir = await SEARCH.run(SEARCH.parse_input({"pattern": "^x", "path": "src"}), sandbox)
    assert in_dir.output == "src/a.py:3: x = 1"
    one = await SEARCH.run(SEARCH.parse_input({"pattern": "TODO", "path": "src/b.py"}), sandbox)
    assert one.output == "src/b.py:1: # TODO two"
    none = await SEARCH.run(SEARCH.parse_input({"pattern": "nothing here"}), sandbox)
    assert (none.outcome, none.output) == ("ok", "no matches")
    missing = await SEARCH.run(SEARCH.parse_input({"pattern": "x", "path": "nope"}), sandbox)
    assert missing.error_class == "not_found"


async def test_search_skips_huge_files_and_symlinks(tmp_path: Path, tree: Path) -> None:
    (tree / "huge.txt").write_text("TODO\n" * 100)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "leak.txt").write_text("TODO leaked\n")
    (tree / "link").symlink_to(outside)
    (tree / "leak.txt").symlink_to(outside / "leak.txt")
    box = Sandbox([tree], limits=Limits(file_cap_bytes=100))
    result = await SEARCH.run(SEARCH.parse_input({"pattern": "TODO"}), box)
    assert "huge.txt" not in result.output
    assert "leaked" not in result.output
    assert result.output.count("\n") == 1  # the two src files


async def test_search_caps_results(workspace: Path) -> None:
    (workspace / "many.txt").write_text("hit\n" * 50)
    box = Sandbox([workspace], limits=Limits(search_max_results=5))
    result = await SEARCH.run(SEARCH.parse_input({"pattern": "hit"}), box)
    lines = result.output.splitlines()
    assert lines[:5] == [f"many.txt:{n}: hit" for n in range(1, 6)]
    assert lines[5] == "[truncated: more than 5 matches]"
    capped = Sandbox([workspace], limits=Limits(output_cap_bytes=40))
    small = await SEARCH.run(SEARCH.parse_input({"pattern": "hit"}), capped)
    assert small.output.splitlines()[-1] == "[truncated: output is capped at 40 bytes]"
    assert len(small.output.splitlines()) == 3


async def test_search_path_is_confined(sandbox: Sandbox) -> None:
    result = await SEARCH.run(SEARCH.parse_input({"pattern": "x", "path": "/etc"}), sandbox)
    assert result.error_class == "sandbox_violation"


# -- fetch -----------------------------------------------------------------------------


class _Handler(BaseHTTPRequestHandler):
    release: ClassVar[threading.Event]
    paths: ClassVar[list[str]]

    def log_message(self, format: str, *args: object) -> None:
        pass

    def _send(self, status: int, body: bytes, ctype: str = "text/plain; charset=utf-8") -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        self.paths.append(self.path)
        if self.path == "/text":
            self._send(200, "héllo".encode())
        elif self.path == "/latin":
            self._send(200, "café".encode("latin-1"), "text/plain; charset=latin-1")
        elif self.path == "/big":
            self._send(200, b"z" * 10_000)
        elif self.path == "/bin":
            self._send(200, PNG, "image/png")
        elif self.path == "/pictures/logo.png":  # binary declared as text: never text
            self._send(200, PNG, "text/plain; charset=utf-8")
        elif self.path == "/blob":
            self._send(200, PNG, "application/json")
        elif self.path == "/gone.png":
            self._send(410, PNG, "image/png")
        elif self.path == "/missing":
            self._send(404, b"not here")
        elif self.path == "/redirect":
            self.send_response(302)
            self.send_header("Location", "http://evil.example/steal?token=abc")
            self.send_header("Content-Length", "0")
            self.end_headers()
        elif self.path == "/slow":
            self.release.wait(10)
            self._send(200, b"late")


@pytest.fixture
def http_server() -> Iterator[tuple[str, type[_Handler]]]:
    class Handler(_Handler):
        release = threading.Event()
        paths: ClassVar[list[str]] = []

    handler = Handler
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)  # bound (and listening) here
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", handler
    finally:
        handler.release.set()
        server.shutdown()
        server.server_close()
        thread.join(5)


async def _fetch(url: str, box: Sandbox) -> ToolResult:
    with anyio.fail_after(20):
        return await FETCH.run(FETCH.parse_input({"url": url}), box)


async def test_fetch_text(sandbox: Sandbox, http_server: tuple[str, type[_Handler]]) -> None:
    base, handler = http_server
    result = await _fetch(f"{base}/text", sandbox)
    assert (result.outcome, result.output) == ("ok", "héllo")
    latin = await _fetch(f"{base}/latin", sandbox)
    assert latin.output == "café"
    assert handler.paths == ["/text", "/latin"]


async def test_fetch_http_error_and_binary(
    sandbox: Sandbox, http_server: tuple[str, type[_Handler]]
) -> None:
    base, _ = http_server
    missing = await _fetch(f"{base}/missing", sandbox)
    assert (missing.outcome, missing.error_class) == ("error", "http_status")
    assert missing.error == "HTTP 404 from 127.0.0.1"
    assert missing.output == "not here"
    gone = await _fetch(f"{base}/gone.png", sandbox)  # an error's binary body: a note
    assert (gone.error_class, gone.attachments) == ("http_status", ())
    assert gone.output == f"[binary body, {len(PNG)} bytes: not shown]"


async def test_fetch_attaches_binary_media(
    workspace: Path, http_server: tuple[str, type[_Handler]]
) -> None:
    # The rule read_file follows: whole bytes, a media type that is never text or JSON,
    # at most Limits.read_cap_bytes (a larger or cut body is refused).
    base, _ = http_server
    box = Sandbox([workspace], fetch_hosts=lambda h: True)
    image = await _fetch(f"{base}/bin", box)
    assert image.outcome == "ok"
    (attachment,) = image.attachments
    assert (attachment.data, attachment.media_type) == (PNG, "image/png")
    assert (
        image.output
        == f"the response from 127.0.0.1: binary, image/png, {len(PNG)} bytes (attached)"
    )
    named = await _fetch(f"{base}/pictures/logo.png", box)  # declared text: by the path
    assert named.attachments[0].media_type == "image/png"
    unknown = await _fetch(f"{base}/blob", box)  # declared JSON, no name to go by
    assert unknown.attachments[0].media_type == "application/octet-stream"
    small = Sandbox([workspace], limits=Limits(read_cap_bytes=10), fetch_hosts=lambda h: True)
    big = await _fetch(f"{base}/bin", small)
    assert (big.outcome, big.error_class, big.attachments) == ("error", "too_large", ())
    cut = Sandbox([workspace], limits=Limits(fetch_cap_bytes=10), fetch_hosts=lambda h: True)
    truncated = await _fetch(f"{base}/bin", cut)
    assert (truncated.error_class, truncated.attachments) == ("too_large", ())


async def test_fetch_never_follows_redirects(
    sandbox: Sandbox, http_server: tuple[str, type[_Handler]]
) -> None:
    base, handler = http_server
    result = await _fetch(f"{base}/redirect", sandbox)
    assert (result.outcome, result.error_class) == ("error", "redirect")
    assert "redirect to http://evil.example/steal not followed" in (result.error or "")
    assert "token" not in (result.error or "")
    assert handler.paths == ["/redirect"]


async def test_fetch_is_capped(workspace: Path, http_server: tuple[str, type[_Handler]]) -> None:
    base, _ = http_server
    box = Sandbox([workspace], limits=Limits(fetch_cap_bytes=100), fetch_hosts=lambda h: True)
    result = await _fetch(f"{base}/big", box)
    assert result.outcome == "ok"
    assert result.output == "z" * 100 + "\n[truncated: response is capped at 100 bytes]"


async def test_fetch_times_out(workspace: Path, http_server: tuple[str, type[_Handler]]) -> None:
    base, _ = http_server
    box = Sandbox([workspace], limits=Limits(fetch_timeout_s=0.3), fetch_hosts=lambda h: True)
    result = await _fetch(f"{base}/slow", box)
    assert (result.outcome, result.error_class) == ("timeout", "timeout")
    assert result.error == "fetch from 127.0.0.1 timed out after 0.3s"
    assert result.duration_ms < 5000


async def test_fetch_refuses_hosts_not_allowed(
    workspace: Path, http_server: tuple[str, type[_Handler]]
) -> None:
    base, handler = http_server
    box = Sandbox([workspace], fetch_hosts=lambda host: host == "localhost")
    result = await _fetch(f"{base}/text", box)
    assert (result.outcome, result.error_class) == ("error", "sandbox_violation")
    assert result.error == "fetch to host '127.0.0.1' is not allowed by the permissions"
    assert handler.paths == []


async def test_fetch_connection_refused(sandbox: Sandbox) -> None:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # bound, not listening: connections are refused
        result = await _fetch(f"http://127.0.0.1:{port}/", sandbox)
    assert (result.outcome, result.error_class) == ("error", "network")
    assert result.error == "could not fetch from 127.0.0.1 (ConnectError)"


async def test_search_has_a_wall_clock(tree: Path) -> None:
    box = Sandbox([tree], limits=Limits(search_timeout_s=-1.0))  # a deadline already passed
    result = await SEARCH.run(SEARCH.parse_input({"pattern": "TODO"}), box)
    assert (result.outcome, result.error_class) == ("timeout", "timeout")
    assert result.error == "search stopped after -1s"
    assert result.output == "no matches"

"""``--mcp-config``: the file's rules and errors, the stripped ``tool.mcp.connection``, and
host permission rules that name MCP tools (all in memory: no server is started here)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from ahp_harness.mcp_config import (
    REMOVED,
    McpConfigError,
    McpServerConfig,
    connection,
    load_mcp_config,
    parse_mcp_config,
    split_tool_name,
    tool_name,
)
from ahp_harness.permissions import PermissionsError, load_file
from ahp_protocol.wire.events.tool import Mcp

ENV = {"TOKEN": "t0ken-value-from-env", "HOME": "/home/u"}


def parse(servers: Any, **extra: Any) -> list[McpServerConfig]:
    return parse_mcp_config({"mcpServers": servers, **extra}, file="m.json", environ=ENV)


def problem(document: Any) -> str:
    with pytest.raises(McpConfigError) as caught:
        parse_mcp_config(document, file="m.json", environ=ENV)
    return str(caught.value)


# -- the file ---------------------------------------------------------------------------------


def test_the_shared_shape_loads_stdio_and_http_servers(tmp_path: Path) -> None:
    (tmp_path / "tools").mkdir()
    path = tmp_path / "mcp.json"
    path.write_text(
        json.dumps(
            {
                "mcpServers": {
                    "files": {
                        "command": "python",
                        "args": ["server.py", "--token", "${TOKEN}"],
                        "env": {"API_TOKEN": "${TOKEN}", "MODE": "${MODE:-fast}"},
                        "cwd": "tools",
                        "timeout": 5000,
                    },
                    "web": {"type": "http", "url": "http://127.0.0.1:9/mcp", "headers": {"X": "1"}},
                    "gemini": {"httpUrl": "https://mcp.example.org/mcp"},
                    "cursor": {"type": "streamable-http", "url": "http://localhost:1/mcp"},
                }
            }
        ),
        "utf-8",
    )
    files, web, gemini, cursor = load_mcp_config(path, environ=ENV)
    assert files.transport == "stdio" and files.command == "python"
    assert files.args == ("server.py", "--token", ENV["TOKEN"])
    assert files.raw_args == ("server.py", "--token", "${TOKEN}")
    assert files.env == {"API_TOKEN": ENV["TOKEN"], "MODE": "fast"}
    assert files.cwd == str(tmp_path.resolve() / "tools")
    assert files.timeout_ms == 5000
    assert (web.transport, web.url, dict(web.headers)) == (
        "http",
        "http://127.0.0.1:9/mcp",
        {"X": "1"},
    )
    assert (gemini.transport, gemini.url) == ("http", "https://mcp.example.org/mcp")
    assert cursor.transport == "http"
    assert ENV["TOKEN"] not in repr(files)  # the repr never shows expanded values


@pytest.mark.parametrize(
    ("document", "expected"),
    [
        ([], "$: must be an object"),
        ({}, "$.mcpServers: required"),
        ({"mcpServers": {}, "other": 1}, "$.other: unknown key"),
        ({"mcpServers": {"a__b": {"command": "x"}}}, "$.mcpServers.a__b: a server id"),
        ({"mcpServers": {"-a": {"command": "x"}}}, "$.mcpServers.-a: a server id"),
        ({"mcpServers": {"a": "python"}}, '$.mcpServers.a: must be an object with "command"'),
        ({"mcpServers": {"a": {}}}, '$.mcpServers.a: needs "command" (stdio) or "url"'),
        ({"mcpServers": {"a": {"command": "x", "url": "http://h/"}}}, "$.mcpServers.a: give"),
        (
            {"mcpServers": {"a": {"command": "x", "disabled": True}}},
            "$.mcpServers.a.disabled: unknown key",
        ),
        ({"mcpServers": {"a": {"command": ""}}}, "$.mcpServers.a.command: must be a non-empty"),
        (
            {"mcpServers": {"a": {"command": "x", "args": "y"}}},
            "$.mcpServers.a.args: must be a list",
        ),
        (
            {"mcpServers": {"a": {"command": "x", "args": [1]}}},
            "$.mcpServers.a.args[0]: must be a string",
        ),
        (
            {"mcpServers": {"a": {"command": "x", "env": {"K": 1}}}},
            "$.mcpServers.a.env.K: must be a string",
        ),
        (
            {"mcpServers": {"a": {"command": "x", "cwd": "/nonexistent/x"}}},
            "$.mcpServers.a.cwd: not a directory",
        ),
        (
            {"mcpServers": {"a": {"command": "x", "headers": {}}}},
            "$.mcpServers.a.headers: is for http",
        ),
        (
            {"mcpServers": {"a": {"command": "x", "timeout": 0}}},
            "$.mcpServers.a.timeout: must be an integer",
        ),
        ({"mcpServers": {"a": {"command": "x", "timeout": True}}}, "$.mcpServers.a.timeout"),
        (
            {"mcpServers": {"a": {"command": "x", "type": "http"}}},
            '$.mcpServers.a.type: "http" needs "url"',
        ),
        (
            {"mcpServers": {"a": {"url": "http://h/", "type": "stdio"}}},
            '$.mcpServers.a.type: "stdio" needs',
        ),
        (
            {"mcpServers": {"a": {"url": "http://h/", "type": "sse"}}},
            "$.mcpServers.a.type: the SSE transport",
        ),
        (
            {"mcpServers": {"a": {"url": "http://h/", "type": "ws"}}},
            '$.mcpServers.a.type: must be "stdio" or',
        ),
        (
            {"mcpServers": {"a": {"url": "ftp://h/"}}},
            "$.mcpServers.a.url: must be an http or https URL",
        ),
        ({"mcpServers": {"a": {"url": "http://h:99999/"}}}, "$.mcpServers.a.url: not a valid URL"),
        (
            {"mcpServers": {"a": {"url": "http://h/", "args": []}}},
            "$.mcpServers.a.args: is for stdio",
        ),
        (
            {"mcpServers": {"a": {"url": "http://h/", "httpUrl": "http://h/"}}},
            "$.mcpServers.a.httpUrl: give",
        ),
        (
            {
                "mcpServers": {
                    "a": {"url": "http://u:p@h/", "headers": {"authorization": "Bearer x"}}
                }
            },
            "$.mcpServers.a.headers.Authorization: url has credentials too",
        ),
        (
            {"mcpServers": {"a": {"command": "${NOPE}"}}},
            "$.mcpServers.a.command: ${NOPE}: the environment",
        ),
        (
            {"mcpServers": {"a": {"url": "http://h/", "headers": {"A": "${NOPE}"}}}},
            "$.mcpServers.a.headers.A: ${NOPE}",
        ),
    ],
)
def test_a_malformed_config_is_refused_with_the_json_path_and_the_reason(
    document: Any, expected: str
) -> None:
    assert problem(document).startswith(f"m.json: {expected}"), problem(document)


def test_file_errors_name_the_file(tmp_path: Path) -> None:
    with pytest.raises(McpConfigError, match="cannot read the file"):
        load_mcp_config(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{", "utf-8")
    with pytest.raises(McpConfigError, match=r"bad.json: invalid JSON: .*line 1"):
        load_mcp_config(bad)


def test_a_secret_value_never_appears_in_a_config_error() -> None:
    message = problem({"mcpServers": {"a": {"command": "x", "env": {"K": ["s3cr3t-value"]}}}})
    assert "s3cr3t" not in message


def test_tool_names() -> None:
    assert tool_name("files", "read.v2") == "mcp__files__read.v2"
    assert split_tool_name("mcp__files__read__all") == ("files", "read__all")
    assert split_tool_name("mcp__files") is None
    assert split_tool_name("read_file") is None


# -- what the wire may say --------------------------------------------------------------------


def identity(connection_json: dict[str, Any]) -> dict[str, Any]:
    """A complete tool.mcp around ``connection``, checked by the wire model."""
    mcp = {"server": {"id": "s"}, "toolName": "t", "provenance": "runtime"}
    mcp["connection"] = connection_json
    Mcp.model_validate(mcp)  # the draft's shape, or it raises
    return connection_json


def stdio(*args: str, raw: tuple[str, ...] = (), **env: str) -> dict[str, Any]:
    server = McpServerConfig(
        id="s", transport="stdio", command="node", args=args, raw_args=raw, env=env
    )
    return identity(connection(server, "/work"))


def test_http_userinfo_query_fragment_and_headers_are_stripped_and_named() -> None:
    server = McpServerConfig(
        id="s",
        transport="http",
        url="https://bob:pa55@MCP.example.org:8443/v1/mcp?token=abc&x=1#s3ss",
        headers={"Authorization": "Bearer zzz", "Cookie": "c=1"},
    )
    got = identity(connection(server))
    assert got == {
        "transport": "http",
        "url": "https://mcp.example.org:8443/v1/mcp",
        "gaps": [
            {"path": "url.userinfo", "reason": "removed: may carry credentials"},
            {"path": "url.query", "reason": "removed: may carry credentials"},
            {"path": "url.fragment", "reason": "removed: may carry credentials"},
        ],
    }
    text = json.dumps(got)
    for secret in ("bob", "pa55", "abc", "Bearer", "zzz", "c=1", "s3ss"):
        assert secret not in text
    plain = McpServerConfig(id="s", transport="http", url="http://127.0.0.1:8000/mcp")
    assert identity(connection(plain)) == {"transport": "http", "url": "http://127.0.0.1:8000/mcp"}


def test_a_plain_stdio_server_is_shown_as_configured() -> None:
    assert stdio("-y", "@modelcontextprotocol/server-filesystem", "/repo", "--port", "8080") == {
        "transport": "stdio",
        "command": "node",
        "args": ["-y", "@modelcontextprotocol/server-filesystem", "/repo", "--port", "8080"],
        "cwd": "/work",
    }


@pytest.mark.parametrize(
    ("args", "shown"),
    [
        (("--api-key", "abc"), ["--api-key", REMOVED]),
        (("--token=abc",), [f"--token={REMOVED}"]),
        (("--password", "hunter2", "--verbose"), ["--password", REMOVED, "--verbose"]),
        (("--client-secret", "x", "y"), ["--client-secret", REMOVED, "y"]),
        (("-p", "hunter2"), ["-p", REMOVED]),
        (("--auth-header=Bearer x",), [f"--auth-header={REMOVED}"]),
        (("sk-live-0123456789",), [REMOVED]),
        (("ghp_abcdefghijklmnop",), [REMOVED]),
        (("eyJhbGciOiJIUzI1NiJ9.e30.x",), [REMOVED]),
        (("Bearer abc",), [REMOVED]),
        (("A1b2C3d4E5f6G7h8I9j0K1l2M3",), [REMOVED]),
        (("API_KEY=abc",), [REMOVED]),
        (("postgres://u:pw@db/x",), [REMOVED]),
        (("https://h/x?sig=abc",), [REMOVED]),
    ],
)
def test_secret_args_are_removed_and_named_in_gaps(args: tuple[str, ...], shown: list[str]) -> None:
    got = stdio(*args)
    assert got["args"] == shown
    removed = [f"args[{i}]" for i, value in enumerate(shown) if REMOVED in value]
    assert [g["path"] for g in got["gaps"]] == removed
    assert all(g["reason"] == "removed: may be a credential" for g in got["gaps"])


def test_an_arg_holding_an_env_value_is_removed_and_a_variable_is_shown_by_name() -> None:
    got = stdio("--db", "prod-db-password-1", "server.js", DB="prod-db-password-1")
    assert got["args"] == ["--db", REMOVED, "server.js"]
    raw = ("--key", "${TOKEN}", "x-${TOKEN}")
    got = stdio("--key", ENV["TOKEN"], f"x-{ENV['TOKEN']}", raw=raw)
    assert got["args"] == ["--key", "${TOKEN}", "x-${TOKEN}"]
    assert "gaps" not in got
    assert ENV["TOKEN"] not in json.dumps(got)


def test_a_command_that_looks_like_a_credential_is_a_gap_and_no_cwd_is_a_gap() -> None:
    server = McpServerConfig(id="s", transport="stdio", command="sk-0123456789abcdef0123")
    got = identity(connection(server))
    assert "command" not in got and "cwd" not in got
    assert [g["path"] for g in got["gaps"]] == ["command", "cwd"]


# -- host permission rules naming MCP tools -----------------------------------------------------


class FakeMcp:
    """Only what a rule reads: name, kind, paths, main argument."""

    kind = "mcp"

    def __init__(self, name: str) -> None:
        self.name = name

    def paths(self, inp: Any) -> list[str]:
        return []

    def main_argument(self, inp: Any) -> str:
        return json.dumps(inp, sort_keys=True, separators=(",", ":"))


def rules(tmp_path: Path, text: str) -> Any:
    path = tmp_path / "p.toml"
    path.write_text(text, "utf-8")
    return load_file(path).rules


@pytest.mark.parametrize(
    ("pattern", "matches", "misses"),
    [
        ("mcp__files__delete", ["mcp__files__delete"], ["mcp__files__delete2", "mcp__web__delete"]),
        (
            "mcp__files",
            ["mcp__files__delete", "mcp__files__read"],
            ["mcp__files2__read", "read_file"],
        ),
        ("mcp__files__*", ["mcp__files__delete", "mcp__files__a.b"], ["mcp__web__delete"]),
        ("mcp__*__delete*", ["mcp__a__delete", "mcp__b-c__delete_all"], ["mcp__a__remove"]),
        ("mcp__f?les__read", ["mcp__files__read"], ["mcp__fles__read"]),
    ],
)
def test_a_rule_names_mcp_servers_and_tools_with_globs(
    tmp_path: Path, pattern: str, matches: list[str], misses: list[str]
) -> None:
    (rule,) = rules(tmp_path, f'[[rules]]\ndecision = "deny"\ntool = "{pattern}"\n')
    for name in matches:
        assert rule.matches(FakeMcp(name), {}), name
    for name in misses:
        assert not rule.matches(FakeMcp(name), {}), name


def test_an_mcp_rule_with_a_pattern_reads_the_input_as_json(tmp_path: Path) -> None:
    text = '[[rules]]\ndecision = "deny"\ntool = "mcp__files"\npattern = \'"path":"/etc/\'\n'
    (rule,) = rules(tmp_path, text)
    assert rule.matches(FakeMcp("mcp__files__read"), {"path": "/etc/passwd"})
    assert not rule.matches(FakeMcp("mcp__files__read"), {"path": "/tmp/x"})


@pytest.mark.parametrize("bad", ["mcp__", "mcp____x", "mcp__a__", "mcp__a b__c", "mcp__a__b/c"])
def test_a_malformed_mcp_rule_is_refused_at_load_time(tmp_path: Path, bad: str) -> None:
    with pytest.raises(PermissionsError) as caught:
        rules(tmp_path, f'[[rules]]\ndecision = "deny"\ntool = "{bad}"\n')
    message = str(caught.value)
    assert "p.toml: rules[0] (line 3): tool: an MCP tool is mcp__<server>" in message, message


def test_kind_mcp_names_every_mcp_tool(tmp_path: Path) -> None:
    (rule,) = rules(tmp_path, '[[rules]]\ndecision = "ask"\nkind = "mcp"\n')
    assert rule.matches(FakeMcp("mcp__any__thing"), {})


# -- import cost ------------------------------------------------------------------------------


def test_a_session_without_mcp_config_imports_nothing_of_mcp(tmp_path: Path) -> None:
    # The mcp SDK (and jsonschema, httpx2) cost a session's start-up hundreds of ms: they
    # are imported only when --mcp-config is given; the tool names' module is all that is.
    script = tmp_path / "script.json"
    script.write_text(json.dumps([{"tool": "read_file", "input": {"path": "x"}}]), "utf-8")
    probe = textwrap.dedent(
        f"""
        import sys, anyio
        from ahp_harness.cli import build_parser
        from ahp_harness.harness import open_harness
        from ahp_harness.models import load_driver

        async def main():
            driver = load_driver({f"script:{script}"!r})
            async with open_harness({str(tmp_path)!r}, driver=driver) as harness:
                await harness.turn("go")
            assert harness.summary.calls, "the session ran no call"

        anyio.run(main)
        build_parser().parse_args(["run", "--workspace", "."])
        heavy = ("mcp", "mcp_types", "jsonschema", "httpx2", "ahp_harness.mcp_config",
                 "ahp_harness.mcp_tools")
        print([name for name in heavy if name in sys.modules])
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.strip() == "[]", done.stderr


def test_the_readme_example_loads_and_says_what_the_wire_gets() -> None:
    readme = Path(__file__).resolve().parents[1] / "README.md"
    text = readme.read_text("utf-8")
    block = text.split("## MCP servers", 1)[1].split("```json\n", 1)[1].split("```", 1)[0]
    files, web = parse_mcp_config(
        json.loads(block), file=str(readme), base=readme.parent, environ={"WEB_TOKEN": "t-1"}
    )
    assert (files.transport, web.transport) == ("stdio", "http")
    assert web.headers == {"Authorization": "Bearer t-1"}
    assert connection(web) == {"transport": "http", "url": "http://127.0.0.1:8000/mcp"}
    assert connection(files)["args"] == list(files.args)  # nothing secret in it

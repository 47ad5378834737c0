"""``ahp-backend denylist``: rules, transports, both clients, reload, bad files, duplicates.

What this file shows, with real processes (fixtures in ``conftest.py``):

- one table of tool calls -> expected verdict, run over stdio ``persistent``, stdio
  ``per_event`` and HTTP, through our client (``Dispatcher``) and the official SDK's
  (``Hooks``): both clients settle every case exactly as the table says (so they
  agree), with no failure diagnostics; the ``message`` rides along only where the
  host accepts messages;
- ``hooks/configuration``: a registration without ``subscriptions`` is served the
  defaults, and both clients then intercept (and deny) on every transport;
- the minimal rule form of the issue works as written; the example rules file is valid;
- bad rules files (TOML syntax, unknown key, bad code, bad regex, no condition, wrong
  type, bad origin, not UTF-8, missing) stop the process before it serves anything,
  with the file, line, field and reason on stderr, over stdio and HTTP;
- reload: a broken edit keeps the last good rules (one warning on stderr per bad
  version), a later good edit takes effect, two quick same-size edits are both seen;
- a duplicate delivery (same source and event id) gets the first answer even after
  the rules changed, over stdio and HTTP; a new id gets the new answer;
- unit level: globs, path resolution against ``session.cwd``, rule conditions, the
  line finder.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from ahp_backends import denylist
from ahp_backends.denylist import ConfigError, glob_to_regex, parse_rules, table_lines
from ahp_protocol.wire.kinds import TOOL_KINDS

from kit_testing import intercept_request

REPO = Path(__file__).resolve().parents[3]
EXAMPLE_RULES = REPO / "examples" / "backends" / "denylist.toml"

RULES = r"""
[[rules]]
reason = "Recursive force deletes are not allowed here."
code = "com.example.policy.rm_rf"
kind = "shell"
[rules.input]
command = "rm\\s+-rf"

[[rules]]
reason = "Force pushes rewrite shared history."
code = "com.example.policy.force_push"
tool = ["Bash", "shell"]
message = "Open a pull request instead."
[rules.input]
command = "\\bgit\\s+push\\b.*--force"

[[rules]]
reason = "Secrets are off limits."
code = "com.example.policy.secrets"
paths = ["/etc/**", "*.pem"]

[[rules]]
reason = "No deletes through the GitHub MCP server."
code = "com.example.policy.github_delete"
origin = "mcp"
mcp_server = "github"
[rules.input]
action = "^delete"

[[rules]]
reason = "Internal hosts are checked before the call only."
code = "com.example.policy.internal"
tool = "WebFetch"
events = ["tool.before"]
[rules.input]
url = "internal\\.example"
"""

RM_RF = ("Recursive force deletes are not allowed here.", "com.example.policy.rm_rf")
PUSH = ("Force pushes rewrite shared history.", "com.example.policy.force_push")
SECRETS = ("Secrets are off limits.", "com.example.policy.secrets")
GITHUB = ("No deletes through the GitHub MCP server.", "com.example.policy.github_delete")
INTERNAL = ("Internal hosts are checked before the call only.", "com.example.policy.internal")
PUSH_MESSAGE = "Open a pull request instead."


def shell(command: str, name: str = "Bash", kind: str = "shell") -> dict[str, Any]:
    return {"name": name, "kind": kind, "input": {"command": command}, "origin": "native"}


def reader(**tool_input: Any) -> dict[str, Any]:
    return {"name": "Read", "kind": "read", "input": tool_input, "origin": "native"}


def mcp(server: str, **tool_input: Any) -> dict[str, Any]:
    return {
        "name": f"mcp__{server}__repos",
        "input": tool_input,
        "origin": "mcp",
        "mcp": {
            "server": {"id": server},
            "toolName": "repos",
            "provenance": "runtime",
            "connection": {
                "transport": "stdio",
                "command": f"{server}-mcp",
                "args": [],
                "cwd": "/",
            },
        },
    }


FETCH = {"name": "WebFetch", "kind": "fetch", "input": {"url": "https://wiki.internal.example/x"}}
FETCH["origin"] = "native"

# name, tool, event type, cwd, expected (reason, code) or None, message expected when accepted
TABLE: list[tuple[str, dict[str, Any], str, str, tuple[str, str] | None, bool]] = [
    ("rm_rf", shell("rm -rf /tmp/build"), "tool.before", "/repo", RM_RF, False),
    ("rm_rf_spaces", shell("rm   -rf  ~"), "tool.before", "/repo", RM_RF, False),
    (
        "rm_rf_other_kind",
        shell("rm -rf /", name="Run", kind="exec"),
        "tool.before",
        "/repo",
        None,
        False,
    ),
    ("ls", shell("ls -la"), "tool.before", "/repo", None, False),
    ("force_push", shell("git push --force origin main"), "tool.before", "/repo", PUSH, True),
    ("plain_push", shell("git push origin main"), "tool.before", "/repo", None, False),
    ("etc_absolute", reader(path="/etc/shadow"), "tool.before", "/repo", SECRETS, False),
    (
        "etc_traversal",
        reader(file_path="../../etc/passwd"),
        "tool.before",
        "/repo/src",
        SECRETS,
        False,
    ),
    # The kernel's view of a path: '//etc' and '/tmp/../etc/./x/' are /etc (paths.py).
    ("etc_double_slash", reader(file_path="//etc/passwd"), "tool.before", "/repo", SECRETS, False),
    (
        "etc_dots_trailing_slash",
        reader(path="/tmp/../etc/./ssh/"),
        "tool.before",
        "/repo",
        SECRETS,
        False,
    ),
    ("pem_anywhere", reader(path="certs/server.pem"), "tool.before", "/repo", SECRETS, False),
    ("readme", reader(path="README.md"), "tool.before", "/repo", None, False),
    (
        "mcp_github_delete",
        mcp("github", action="delete_repo"),
        "tool.before",
        "/repo",
        GITHUB,
        False,
    ),
    ("mcp_github_list", mcp("github", action="list"), "tool.before", "/repo", None, False),
    ("mcp_gitlab_delete", mcp("gitlab", action="delete_repo"), "tool.before", "/repo", None, False),
    ("internal_fetch", FETCH, "tool.before", "/repo", INTERNAL, False),
    ("internal_fetch_permission", FETCH, "tool.permission.request", "/repo", None, False),
    ("rm_rf_permission", shell("rm -rf /"), "tool.permission.request", "/repo", RM_RF, False),
    (
        "force_push_permission",
        shell("git push -v --force"),
        "tool.permission.request",
        "/repo",
        PUSH,
        True,
    ),
]


def expected(profile: str) -> list[Any]:
    out: list[tuple[Any, ...]] = []
    for _, _, event_type, _, deny, message in TABLE:
        if deny is None:
            out.append(("none", None, None, ()))
            continue
        accepts_message = "message" in PROFILES_EFFECTS[profile][event_type]
        messages = (PUSH_MESSAGE,) if message and accepts_message else ()
        out.append(("deny", deny[0], deny[1], messages))
    return out


PROFILES_EFFECTS = {
    "full": {
        "tool.before": {"allow", "ask", "deny", "message"},
        "tool.permission.request": {"allow", "deny", "message"},
    },
    "deny_only": {"tool.before": {"deny"}, "tool.permission.request": {"deny"}},
}


@pytest.fixture
def rules_file(tmp_path: Path) -> Path:
    path = tmp_path / "rules.toml"
    path.write_text(RULES, "utf-8")
    return path


def cases(clients: Any) -> list[Any]:
    return [
        clients.Case(name, tool, event_type, cwd) for name, tool, event_type, cwd, _, _ in TABLE
    ]


def summary(verdicts: list[Any]) -> list[Any]:
    assert not [v for v in verdicts if v.failed], verdicts
    return [(v.permission, v.reason, v.code, v.messages) for v in verdicts]


TRANSPORT_PROFILES = [("persistent", "full"), ("http", "deny_only")]
"""The table through real processes, both clients: each profile once, over the two kinds
of connection (the table is the rules'; per_event serves the same code, shown by
``test_registration_without_subscriptions_uses_the_served_defaults``)."""


@pytest.mark.anyio
@pytest.mark.parametrize("profile", ["full", "deny_only"])
async def test_the_table_in_memory(profile: str, rules_file: Path, clients: Any) -> None:
    # The rules alone: the backend object answers in this process, every row, each profile.
    from ahp_backends.denylist import Denylist, build_backend

    backend = build_backend(Denylist(str(rules_file)))
    verdicts = await clients.in_memory(backend, cases(clients), profile)
    for row, got, wanted in zip(TABLE, summary(verdicts), expected(profile), strict=True):
        assert got == wanted, row[0]


@pytest.mark.anyio
@pytest.mark.timeout(240)
@pytest.mark.parametrize(("kind", "profile"), TRANSPORT_PROFILES)
async def test_both_clients_settle_the_table(
    kind: str,
    profile: str,
    rules_file: Path,
    clients: Any,
    hook: Callable[..., dict[str, Any]],
    http_backend: Callable[..., Any],
) -> None:
    args = ("--rules", str(rules_file))
    server = http_backend("denylist", *args) if kind == "http" else None
    hooks = [
        hook("denylist", *args, kind=kind, http=server, subscriptions=[clients.subscription()])
    ]
    table = cases(clients)
    ours, ours_diagnostics = await clients.ours(hooks, table, profile)
    sdk, sdk_diagnostics = await clients.sdk(hooks, table, profile)
    assert ours_diagnostics == [] and sdk_diagnostics == []
    want = expected(profile)
    for name, got_ours, got_sdk, wanted in zip(
        [row[0] for row in TABLE], summary(ours), summary(sdk), want, strict=True
    ):
        assert got_ours == wanted, name
        assert got_sdk == wanted, name


@pytest.mark.anyio
@pytest.mark.timeout(120)
@pytest.mark.parametrize("kind", ["persistent", "per_event", "http"])
async def test_registration_without_subscriptions_uses_the_served_defaults(
    kind: str,
    rules_file: Path,
    clients: Any,
    hook: Callable[..., dict[str, Any]],
    http_backend: Callable[..., Any],
) -> None:
    args = ("--rules", str(rules_file))
    server = http_backend("denylist", *args) if kind == "http" else None
    hooks = [hook("denylist", *args, kind=kind, http=server)]  # no subscriptions
    table = [clients.Case("rm_rf", shell("rm -rf /")), clients.Case("ls", shell("ls"))]
    for run in (clients.ours, clients.sdk):
        verdicts, diagnostics = await run(hooks, table, "full")
        assert diagnostics == []
        assert summary(verdicts) == [("deny", *RM_RF, ()), ("none", None, None, ())]


def configuration_request() -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": "cfg-1",
        "method": "hooks/configuration",
        "params": {"protocolVersion": "draft"},
    }


def test_configuration_defaults(
    rules_file: Path, run_backend: Callable[..., subprocess.CompletedProcess[bytes]]
) -> None:
    done = run_backend(
        "denylist",
        "--rules",
        str(rules_file),
        "--once",
        input=json.dumps(configuration_request()).encode() + b"\n",
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)["result"]
    assert result["configuration"]["subscriptions"] == [
        {
            "mode": "intercept",
            "events": ["tool.before"],
            "timeoutMs": 5000,
            "failurePolicy": "fail-closed",
            "content": {"default": "metadata"},
        }
    ]


# --------------------------------------------------------------------------- raw requests


def intercept(
    event: dict[str, Any], effects: tuple[str, ...] = ("deny", "message")
) -> dict[str, Any]:
    return intercept_request(event, effects)


def event_for(clients: Any, tool: dict[str, Any], event_id: str | None = None) -> dict[str, Any]:
    event: dict[str, Any] = clients.tool_event(
        clients.Case("raw", tool), "urn:example:raw", event_id
    )
    return event


def effects_of(response: dict[str, Any]) -> list[dict[str, Any]]:
    assert "result" in response, response
    found: list[dict[str, Any]] = response["result"]["effects"]
    return found


def deny_of(reason_code: tuple[str, str]) -> list[dict[str, Any]]:
    return [{"type": "deny", "reason": reason_code[0], "code": reason_code[1]}]


MINIMAL = """\
[[rules]]
reason = "Recursive force deletes are not allowed here."
code = "com.example.policy.rm_rf"
kind = "shell"                        # optional: tool.kind
# tool = "shell"                      # optional: tool.name, exact
[rules.input]
command = "rm\\\\s+-rf"                  # regex, searched in tool.input.command
"""


def test_the_minimal_form_works_as_written(
    tmp_path: Path, clients: Any, run_backend: Callable[..., subprocess.CompletedProcess[bytes]]
) -> None:
    # The text, unescaped once (it is quoted in the issue): rm\\s+-rf in TOML.
    path = tmp_path / "minimal.toml"
    path.write_text(MINIMAL.replace("\\\\\\\\", "\\\\"), "utf-8")
    assert 'command = "rm\\\\s+-rf"' in path.read_text("utf-8")
    for command, want in (("rm -rf /", deny_of(RM_RF)), ("rm -r /", [])):
        message = intercept(event_for(clients, shell(command)))
        done = run_backend(
            "denylist", "--rules", str(path), "--once", input=json.dumps(message).encode() + b"\n"
        )
        assert done.returncode == 0, done.stderr
        assert effects_of(json.loads(done.stdout)) == want


def test_the_example_rules_file_is_valid(
    run_backend: Callable[..., subprocess.CompletedProcess[bytes]],
) -> None:
    done = run_backend("denylist", "--rules", str(EXAMPLE_RULES), "--check")
    assert done.returncode == 0, done.stderr
    assert b"5 rules, valid" in done.stdout


# --------------------------------------------------------------------------- bad files

BAD_FILES: list[tuple[str, bytes, list[str]]] = [
    (
        "toml_syntax",
        b'[[rules]]\nreason = "unterminated\ncode = "com.example.x"\n',
        [":2:", "invalid TOML"],
    ),
    (
        "unknown_key",
        b'[[rules]]\nreason = "r"\ncode = "com.example.a"\nkind = "shell"\nkidn = "x"\n',
        [":5:", "rules[0].kidn", "unknown key 'kidn'"],
    ),
    (
        "code_not_reverse_dns",
        b'[[rules]]\nreason = "r"\ncode = "com.example.a"\nkind = "shell"\n\n'
        b'[[rules]]\nreason = "r"\nkind = "shell"\ncode = "rm_rf"\n',
        [":9:", "rules[1].code", "reverse-DNS"],
    ),
    (
        "bad_regex",
        b'[[rules]]\nreason = "r"\ncode = "com.example.a"\n[rules.input]\ncommand = "rm(["\n',
        [":5:", "rules[0].input.command", "invalid regex"],
    ),
    (
        # RE2 cannot run it: refused at load, naming the rule, the field and the construct.
        "regex_re2_cannot_run",
        b'[[rules]]\nreason = "r"\ncode = "com.example.a"\n[rules.input]\n'
        b'command = "(\\\\w+) \\\\1"\n',
        [":5:", "rules[0].input.command", "invalid regex: a backreference (\\1)"],
    ),
    (
        "no_condition",
        b'# header\n\n[[rules]]\nreason = "r"\ncode = "com.example.a"\n',
        [":3:", "rules[0]", "at least one condition"],
    ),
    (
        "missing_reason",
        b'[[rules]]\ncode = "com.example.a"\nkind = "shell"\n',
        [":1:", "rules[0]", "'reason' is required"],
    ),
    (
        "empty_reason",
        b'[[rules]]\nreason = "  "\ncode = "com.example.a"\nkind = "shell"\n',
        [":2:", "rules[0].reason", "non-empty string"],
    ),
    (
        "wrong_type",
        b'[[rules]]\nreason = "r"\ncode = "com.example.a"\ntool = 3\n',
        [":4:", "rules[0].tool", "string or a non-empty list"],
    ),
    (
        "bad_origin",
        b'[[rules]]\nreason = "r"\ncode = "com.example.a"\norigin = "remote"\n',
        [":4:", "rules[0].origin", '"native" or "mcp"'],
    ),
    (
        "bad_event",
        b'[[rules]]\nreason = "r"\ncode = "com.example.a"\nkind = "shell"\n'
        b'events = ["tool.after"]\n',
        [":5:", "rules[0].events", "must be one of tool.before, tool.permission.request"],
    ),
    (
        # A harness that says "bash" would never meet this rule: refused at load.
        "unknown_kind",
        b'[[rules]]\nreason = "r"\ncode = "com.example.a"\nkind = ["shell", "bash"]\n',
        [":4:", "rules[0].kind", "not a tool kind of the draft", ", ".join(TOOL_KINDS), "tool ="],
    ),
    (
        "kind_case",
        b'[[rules]]\nreason = "r"\ncode = "com.example.a"\n\nkind = "Shell"\n',
        [":5:", "rules[0].kind", "not a tool kind of the draft"],
    ),
    ("not_utf8", b"\xff\xfe[[rules]]\n", ["not UTF-8"]),
    ("unknown_top_level", b'[[rule]]\nreason = "r"\n', ["unknown top-level key 'rule'"]),
    ("no_rules", b"# nothing\n", ["no [[rules]] tables"]),
]


@pytest.mark.parametrize(("name", "content", "fragments"), BAD_FILES, ids=[b[0] for b in BAD_FILES])
def test_a_bad_rules_file_stops_it_before_serving(
    name: str,
    content: bytes,
    fragments: list[str],
    tmp_path: Path,
    clients: Any,
    run_backend: Callable[..., subprocess.CompletedProcess[bytes]],
) -> None:
    path = tmp_path / f"{name}.toml"
    path.write_bytes(content)
    message = json.dumps(intercept(event_for(clients, shell("rm -rf /")))).encode() + b"\n"
    for mode in ([], ["--once"]):
        done = run_backend("denylist", "--rules", str(path), *mode, input=message)
        assert done.returncode == 2
        assert done.stdout == b""  # nothing served
        err = done.stderr.decode()
        assert err.startswith(f"error: {path}")
        for fragment in fragments:
            assert fragment in err, (fragment, err)
        assert "Traceback" not in err


def test_a_missing_rules_file_is_named(
    tmp_path: Path, run_backend: Callable[..., subprocess.CompletedProcess[bytes]]
) -> None:
    path = tmp_path / "absent.toml"
    done = run_backend("denylist", "--rules", str(path))
    assert done.returncode == 2 and done.stdout == b""
    assert (
        done.stderr.decode().strip()
        == f"error: {path}: cannot read the rules file (No such file or directory)"
    )


def test_a_bad_rules_file_stops_http_before_listening(
    tmp_path: Path, run_backend: Callable[..., subprocess.CompletedProcess[bytes]]
) -> None:
    path = tmp_path / "bad.toml"
    path.write_text('[[rules]]\nreason = "r"\ncode = "nope"\nkind = "shell"\n', "utf-8")
    done = run_backend("denylist", "--rules", str(path), "--http", "127.0.0.1:0")
    assert done.returncode == 2
    err = done.stderr.decode()
    assert "listening" not in err
    assert f"{path}:3: rules[0].code: must be a reverse-DNS id" in err


def test_http_refuses_a_non_loopback_bind(
    rules_file: Path, run_backend: Callable[..., subprocess.CompletedProcess[bytes]]
) -> None:
    done = run_backend("denylist", "--rules", str(rules_file), "--http", "0.0.0.0:0")
    assert done.returncode == 2
    err = done.stderr.decode()
    assert "refusing a non-loopback address" in err and "--allow-remote" in err
    assert "TLS" in err and "listening" not in err


# --------------------------------------------------------------------------- reload


def test_a_broken_edit_keeps_the_last_good_rules(
    rules_file: Path, clients: Any, stdio_backend: Callable[..., Any]
) -> None:
    backend = stdio_backend("denylist", "--rules", str(rules_file))
    rm_rf = shell("rm -rf /")
    assert effects_of(backend.request(intercept(event_for(clients, rm_rf)))) == deny_of(RM_RF)

    # 1. A syntax error: the old rules stay in force, and stderr says so, once.
    rules_file.write_text(RULES + "\n[[rules]\nbroken = \n", "utf-8")
    assert effects_of(backend.request(intercept(event_for(clients, rm_rf)))) == deny_of(RM_RF)
    warning = backend.wait_for_stderr("keeping the last good rules")
    assert warning.startswith(f"ahp-backend denylist: warning: {rules_file}:")
    assert "invalid TOML" in warning
    assert effects_of(backend.request(intercept(event_for(clients, rm_rf)))) == deny_of(RM_RF)
    assert backend.stderr_text().count("keeping the last good rules") == 1

    # 2. Another bad version (valid TOML, bad field): a new warning, naming line and field.
    rules_file.write_text(RULES.replace('"com.example.policy.secrets"', '"secrets"'), "utf-8")
    assert effects_of(backend.request(intercept(event_for(clients, rm_rf)))) == deny_of(RM_RF)
    second = backend.wait_for_stderr("rules[2].code")
    assert "must be a reverse-DNS id" in second and "keeping the last good rules" in second

    # 3. A good edit takes effect: rm -rf is now allowed through, ls is denied.
    rules_file.write_text(
        '[[rules]]\nreason = "No listing."\ncode = "com.example.ls"\n[rules.input]\n'
        'command = "^ls"\n',
        "utf-8",
    )
    assert effects_of(backend.request(intercept(event_for(clients, rm_rf)))) == []
    ls = effects_of(backend.request(intercept(event_for(clients, shell("ls -la")))))
    assert ls == [{"type": "deny", "reason": "No listing.", "code": "com.example.ls"}]
    assert "reloaded" in backend.wait_for_stderr("reloaded")
    assert backend.close() == 0


@pytest.mark.timeout(60)
def test_a_backtracking_input_regex_answers_at_once_on_180_kb(
    tmp_path: Path, clients: Any, stdio_backend: Callable[..., Any]
) -> None:
    """Input regexes are RE2 (linear): with Python's re this request took ~36 s, and the
    persistent backend answered nothing else meanwhile (fail-open: later calls ran)."""
    path = tmp_path / "rules.toml"
    path.write_text(
        '[[rules]]\nreason = "No force push."\ncode = "com.example.force"\n'
        '[rules.input]\ncommand = "git push.*(-f|--force)"\n',
        "utf-8",
    )
    backend = stdio_backend("denylist", "--rules", str(path))
    crafted = "git push " * 20_000
    for command, want in ((crafted, []), (crafted + "-f", ["deny"])):
        backend.send(intercept(event_for(clients, shell(command))))
        got = backend.receive(timeout=10)  # RE2: milliseconds
        assert [e["type"] for e in effects_of(got)] == want
    assert backend.close() == 0


def test_two_quick_same_size_edits_are_both_seen(
    rules_file: Path, clients: Any, stdio_backend: Callable[..., Any]
) -> None:
    """File-system timestamps are coarse: an edit that keeps size and mtime is still seen."""
    template = (
        '[[rules]]\nreason = "R{n}"\ncode = "com.example.r{n}"\n[rules.input]\ncommand = "^{n}"\n'
    )
    rules_file.write_text(template.format(n="a"), "utf-8")
    stat = rules_file.stat()
    backend = stdio_backend("denylist", "--rules", str(rules_file))
    first = effects_of(backend.request(intercept(event_for(clients, shell("a")))))
    assert first == [{"type": "deny", "reason": "Ra", "code": "com.example.ra"}]
    rules_file.write_text(template.format(n="b"), "utf-8")
    os.utime(rules_file, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # same size, same mtime
    assert effects_of(backend.request(intercept(event_for(clients, shell("a"))))) == []
    second = effects_of(backend.request(intercept(event_for(clients, shell("b")))))
    assert second == [{"type": "deny", "reason": "Rb", "code": "com.example.rb"}]


def test_an_unreadable_rules_file_keeps_the_last_good_rules(
    rules_file: Path, clients: Any, stdio_backend: Callable[..., Any]
) -> None:
    backend = stdio_backend("denylist", "--rules", str(rules_file))
    rm_rf = intercept(event_for(clients, shell("rm -rf /")))
    assert effects_of(backend.request(rm_rf)) == deny_of(RM_RF)  # loaded and serving
    rules_file.unlink()
    for _ in range(2):
        got = effects_of(backend.request(intercept(event_for(clients, shell("rm -rf /")))))
        assert got == deny_of(RM_RF)
    backend.wait_for_stderr("cannot read the rules file; keeping the last good rules")
    assert backend.stderr_text().count("cannot read the rules file") == 1


# --------------------------------------------------------------------------- duplicates


def test_a_duplicate_gets_the_first_answer_after_the_rules_changed_stdio(
    rules_file: Path, clients: Any, stdio_backend: Callable[..., Any]
) -> None:
    backend = stdio_backend("denylist", "--rules", str(rules_file))
    event = event_for(clients, shell("rm -rf /"), "evt_duplicate")
    first = backend.request(intercept(event))
    assert effects_of(first) == deny_of(RM_RF)
    rules_file.write_text(
        '[[rules]]\nreason = "x"\ncode = "com.example.x"\ntool = "Nope"\n', "utf-8"
    )
    assert backend.request(intercept(event)) == first  # same source and id: same answer
    other = dict(event, id="evt_other")  # a new id is decided by the new rules
    assert effects_of(backend.request(intercept(other))) == []
    # The same id from another source is another event.
    foreign = dict(event, source="urn:example:another-harness")
    assert effects_of(backend.request(intercept(foreign))) == []


def test_a_duplicate_gets_the_first_answer_after_the_rules_changed_http(
    rules_file: Path, clients: Any, http_backend: Callable[..., Any]
) -> None:
    server = http_backend("denylist", "--rules", str(rules_file))
    event = event_for(clients, shell("git push --force"), "evt_http_duplicate")
    first = server.post(intercept(event))
    assert effects_of(first) == [*deny_of(PUSH), {"type": "message", "text": PUSH_MESSAGE}]
    rules_file.write_text(
        '[[rules]]\nreason = "x"\ncode = "com.example.x"\ntool = "Nope"\n', "utf-8"
    )
    assert server.post(intercept(event)) == first
    assert effects_of(server.post(intercept(dict(event, id="evt_http_new")))) == []


# --------------------------------------------------------------------------- unit level


@pytest.mark.parametrize(
    ("glob", "path", "matches"),
    [
        ("/etc/**", "/etc/passwd", True),
        ("/etc/**", "/etc/ssl/certs/x.pem", True),
        ("/etc/*", "/etc/ssl/certs", False),
        ("/etc/*", "/etc/hosts", True),
        ("**/.ssh/**", "/home/u/.ssh/id_rsa", True),
        ("**/.ssh/**", ".ssh/id_rsa", True),
        ("src/*.py", "src/a.py", True),
        ("src/*.py", "src/sub/a.py", False),
        ("src/**/*.py", "src/a.py", True),
        ("src/**/*.py", "src/sub/deep/a.py", True),
        ("file?.txt", "file1.txt", True),
        ("file?.txt", "file/.txt", False),
        ("[!a]*.log", "b.log", True),
        ("[!a]*.log", "a.log", False),
        ("a+b(c).txt", "a+b(c).txt", True),
    ],
)
def test_globs(glob: str, path: str, matches: bool) -> None:
    assert bool(glob_to_regex(glob).match(path)) is matches


def loaded(text: str) -> denylist.RuleSet:
    return parse_rules("rules.toml", text.encode())


def test_rule_conditions_must_all_hold() -> None:
    rules = loaded(
        '[[rules]]\nreason = "r"\ncode = "com.example.r"\nkind = "shell"\ntool = "Bash"\n'
        '[rules.input]\ncommand = "danger"\nargs = "--yes"\n'
    )

    def event(**tool: Any) -> dict[str, Any]:
        return {"tool": {"name": "Bash", "kind": "shell", "origin": "native", **tool}}

    match = rules.first_match
    assert match("tool.before", event(input={"command": "danger", "args": ["-q", "--yes"]}))
    assert not match("tool.before", event(input={"command": "danger"}))  # args missing
    assert not match("tool.before", event(input={"command": "safe", "args": "--yes"}))
    assert not match(
        "tool.before", event(kind="exec", input={"command": "danger", "args": "--yes"})
    )
    assert not match("tool.after", event(input={"command": "danger", "args": "--yes"}))


def test_paths_resolve_against_the_session_cwd() -> None:
    rules = loaded('[[rules]]\nreason = "r"\ncode = "com.example.r"\npaths = ["secrets/**"]\n')

    def event(path: str, cwd: str = "/repo") -> dict[str, Any]:
        return {
            "session": {"id": "s", "cwd": cwd},
            "tool": {"name": "Read", "origin": "native", "input": {"paths": ["ok.txt", path]}},
        }

    assert rules.first_match("tool.before", event("secrets/key"))
    assert rules.first_match("tool.before", event("/repo/secrets/key"))  # relative to cwd
    assert rules.first_match("tool.before", event("../src/secrets/key", cwd="/repo/src"))
    # A relative glob is relative to the cwd: /repo/secrets is not under /repo/src.
    assert not rules.first_match("tool.before", event("../secrets/key", cwd="/repo/src"))
    assert rules.first_match("tool.before", event("./a/../secrets/key"))
    assert not rules.first_match("tool.before", event("/elsewhere/secrets-not/key"))
    assert not rules.first_match("tool.before", event("public/key"))


def test_mcp_server_matches_id_or_name_and_needs_mcp() -> None:
    rules = loaded('[[rules]]\nreason = "r"\ncode = "com.example.r"\nmcp_server = "GitHub"\n')

    def event(server: dict[str, str], origin: str = "mcp") -> dict[str, Any]:
        return {"tool": {"name": "t", "origin": origin, "input": {}, "mcp": {"server": server}}}

    assert rules.first_match("tool.before", event({"id": "gh", "name": "GitHub"}))
    assert rules.first_match("tool.before", event({"id": "GitHub"}))
    assert not rules.first_match("tool.before", event({"id": "gitlab"}))
    native = {"tool": {"name": "t", "origin": "native", "input": {}}}
    assert not rules.first_match("tool.before", native)


def test_mcp_tool_matches_the_servers_own_tool_name_and_needs_mcp() -> None:
    rules = loaded(
        '[[rules]]\nreason = "r"\ncode = "com.example.r"\nmcp_server = "files"\n'
        'mcp_tool = ["delete", "move"]\n'
    )

    def event(server: str, tool: str) -> dict[str, Any]:
        mcp = {"server": {"id": server}, "toolName": tool}
        return {"tool": {"name": f"mcp__{server}__{tool}", "origin": "mcp", "mcp": mcp}}

    assert rules.first_match("tool.before", event("files", "delete"))
    assert rules.first_match("tool.before", event("files", "move"))
    assert not rules.first_match("tool.before", event("files", "read"))
    assert not rules.first_match("tool.before", event("other", "delete"))
    native = {"tool": {"name": "delete", "origin": "native", "input": {}}}
    assert not rules.first_match("tool.before", native)
    with pytest.raises(ConfigError, match="origin"):
        loaded(
            '[[rules]]\nreason = "r"\ncode = "com.example.r"\nmcp_tool = "x"\norigin = "native"\n'
        )


def test_every_kind_of_the_draft_loads_and_matches() -> None:
    for kind in TOOL_KINDS:
        rules = loaded(f'[[rules]]\nreason = "r"\ncode = "com.example.r"\nkind = "{kind}"\n')
        assert rules.first_match("tool.before", {"tool": {"name": "t", "kind": kind}}), kind
        assert not rules.first_match("tool.before", {"tool": {"name": "t", "kind": "bash"}})


def test_an_unknown_kind_never_echoes_the_rule() -> None:
    with pytest.raises(ConfigError) as caught:
        loaded('[[rules]]\nreason = "r"\ncode = "com.example.r"\nkind = "s3cr3t-kind"\n')
    assert "s3cr3t" not in str(caught.value)
    assert str(caught.value).startswith("rules.toml:4: rules[0].kind: is not a tool kind")


def test_first_matching_rule_wins() -> None:
    rules = loaded(
        '[[rules]]\nreason = "first"\ncode = "com.example.a"\ntool = "Bash"\n'
        '[[rules]]\nreason = "second"\ncode = "com.example.b"\nkind = "shell"\n'
    )
    found = rules.first_match("tool.before", {"tool": {"name": "Bash", "kind": "shell"}})
    assert found is not None and found.reason == "first"


def test_inline_rules_and_errors_point_at_lines() -> None:
    text = 'rules = [\n  {reason = "r", code = "bad", kind = "x"},\n]\n'
    with pytest.raises(ConfigError) as caught:
        loaded(text)
    assert (
        str(caught.value)
        == "rules.toml:1: rules[0].code: must be a reverse-DNS id like com.example.policy.rm_rf"
    )
    tables, inline = table_lines(
        '[[rules]]\nreason = "a"\n\n[rules.input]\ncommand = "x"\n[[rules]]\n"code" = 1\n', "rules"
    )
    assert inline is None
    assert [t.header for t in tables] == [1, 6]
    assert tables[0].line("reason") == 2
    assert tables[0].line("input", "command") == 5
    assert tables[0].line("input") == 4
    assert tables[1].line("code") == 7
    assert tables[1].line("absent") == 6


def test_help_names_every_path_field_and_key(
    run_backend: Callable[..., subprocess.CompletedProcess[bytes]],
) -> None:
    done = run_backend("denylist", "--help")
    assert done.returncode == 0
    text = " ".join(done.stdout.decode().split())
    for name in (*denylist.PATH_FIELDS, *denylist.RULE_KEYS):
        assert f" {name}" in text, name


def _documented_rules() -> list[tuple[str, str]]:
    """Every rules example the docs show: the README's TOML blocks with ``[[rules]]`` and
    the example at the end of ``RULES_FORMAT`` (what ``--help`` prints)."""
    found: list[tuple[str, str]] = []
    for readme in (REPO / "packages" / "backends" / "README.md", REPO / "README.md"):
        blocks = re.findall(r"```toml\n(.*?)```", readme.read_text("utf-8"), re.S)
        found += [(readme.name, block) for block in blocks if "[[rules]]" in block]
    example = denylist.RULES_FORMAT.split("\nexample:\n", 1)[1]
    found.append(("RULES_FORMAT", textwrap.dedent(example)))
    return found


def test_the_documented_rule_examples_load_and_deny() -> None:
    examples = _documented_rules()
    assert [where for where, _ in examples].count("README.md") >= 1, examples
    for where, text in examples:
        rules = loaded(text)
        shell = {"tool": {"name": "Bash", "kind": "shell", "input": {"command": "rm -rf /"}}}
        found = rules.first_match("tool.before", shell)
        assert found is not None and found.code == "com.example.policy.rm_rf", where


def test_the_rules_format_is_written_once() -> None:
    # the module docstring and the example file point to RULES_FORMAT, not restate it
    assert "RULES_FORMAT" in (denylist.__doc__ or "")
    assert "[rules.input]" not in (denylist.__doc__ or "")
    header = EXAMPLE_RULES.read_text("utf-8").split("[[rules]]", 1)[0]
    assert "denylist --help" in header and "mcp_server" not in header
    # --help prints it, with the path fields taken from PATH_FIELDS
    assert ", ".join(denylist.PATH_FIELDS) in " ".join(denylist.RULES_FORMAT.split())

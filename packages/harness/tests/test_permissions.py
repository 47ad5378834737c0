"""The host's permission layer: loading (clear errors), rule matching and precedence,
the three modes for every tool, managed rules and fetch hosts, and the example files."""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from pathlib import Path

import pytest
from ahp_harness.permissions import (
    HostDecision,
    Permissions,
    PermissionsError,
    Rule,
    load_file,
    load_rules,
    strongest,
)
from ahp_harness.sandbox import Sandbox
from ahp_harness.tools import TOOLS

EXAMPLES = Path(__file__).resolve().parents[3] / "examples" / "permissions"

SHELL = TOOLS["shell"]
READ = TOOLS["read_file"]
WRITE = TOOLS["write_file"]
EDIT = TOOLS["edit_file"]
SEARCH = TOOLS["search"]
FETCH = TOOLS["fetch"]


def write(tmp_path: Path, text: str, name: str = "perms.toml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


# -- loading ---------------------------------------------------------------------------

GOOD = """\
fetch_hosts = ["127.0.0.1", "LocalHost", "*.example.org"]

[[rules]]
decision = "deny"
tool = "shell"
pattern = 'rm\\s+-rf'
reason = "no recursive deletes"

[[rules]]
decision = "allow"
kind = "file_read"
glob = "docs/*"
"""


def test_load_a_good_file(tmp_path: Path) -> None:
    path = write(tmp_path, GOOD)
    loaded = load_file(path)
    assert loaded.fetch_hosts == ("127.0.0.1", "localhost", "*.example.org")
    first, second = loaded.rules
    assert first == Rule(
        decision="deny",
        tool="shell",
        pattern=r"rm\s+-rf",
        reason="no recursive deletes",
        source=f"{path}:rules[0]",
    )
    assert (second.decision, second.kind, second.glob) == ("allow", "file_read", "docs/*")
    assert second.source == f"{path}:rules[1]"
    assert load_rules(path) == list(loaded.rules)
    assert load_file(write(tmp_path, "", "empty.toml")).rules == ()


@pytest.mark.parametrize(
    ("text", "expected", "line", "field"),
    [
        (
            '[[rules]]\ndecision = "deny"\ntool = \n',
            "invalid TOML: Invalid value (column 8)",
            3,
            None,
        ),
        (
            '[[rules]]\ndecision = "allow"\n\n[[rules]]\ndecision = "maybe"\n',
            "rules[1] (line 5): decision: must be one of allow, ask, deny",
            5,
            "decision",
        ),
        (
            '[[rules]]\ndecision = "deny"\ncommand = "rm"\n',
            "rules[0] (line 3): command: unknown key (allowed: decision, tool, kind, pattern,"
            " glob, reason)",
            3,
            "command",
        ),
        (
            '[[rules]]\ndecision = "deny"\npattern = "(unclosed"\n',
            "rules[0] (line 3): pattern: not a valid regular expression (missing ),"
            " unterminated subpattern)",
            3,
            "pattern",
        ),
        (
            '[[rules]]\ndecision = "deny"\ntool = "bash"\n',
            "rules[0] (line 3): tool: unknown tool 'bash' (known: edit_file, fetch,",
            3,
            "tool",
        ),
        (
            '[[rules]]\ndecision = "deny"\nkind = "file_delete"\n',
            "rules[0] (line 3): kind: must be one of fetch, file_edit,",
            3,
            "kind",
        ),
        (
            '[[rules]]\ndecision = "deny"\nreason = 3\n',
            "rules[0] (line 3): reason: must be a string",
            3,
            "reason",
        ),
        ('[[rules]]\ntool = "shell"\n', "rules[0] (line 1): decision: required", 1, "decision"),
        (
            'mode = "read-only"\n',
            "mode: unknown key 'mode' (allowed: rules, fetch_hosts)",
            None,
            "mode",
        ),
        ('rules = "all"\n', "rules: must be an array of tables", None, "rules"),
        (
            'fetch_hosts = ["http://localhost:8000"]\n',
            "fetch_hosts[0]: must be a host name (no scheme, port or path)",
            None,
            "fetch_hosts[0]",
        ),
    ],
)
def test_load_errors_are_clear(
    tmp_path: Path, text: str, expected: str, line: int | None, field: str | None
) -> None:
    path = write(tmp_path, text)
    with pytest.raises(PermissionsError) as caught:
        load_rules(path)
    message = str(caught.value)
    prefix = (
        f"{path} (line {line}): " if line and not expected.startswith("rules[") else f"{path}: "
    )
    assert message.startswith(prefix + expected)
    assert caught.value.file == str(path)
    assert caught.value.line == line
    assert caught.value.field == field


def test_inline_rules_have_an_index_but_no_line(tmp_path: Path) -> None:
    path = write(tmp_path, 'rules = [{decision = "allow"}, {decision = "nope"}]\n')
    with pytest.raises(PermissionsError) as caught:
        load_rules(path)
    assert (caught.value.index, caught.value.line) == (1, None)
    assert str(caught.value) == f"{path}: rules[1]: decision: must be one of allow, ask, deny"


def test_unreadable_files(tmp_path: Path) -> None:
    with pytest.raises(PermissionsError, match="cannot read the file"):
        load_rules(tmp_path / "absent.toml")
    path = tmp_path / "latin.toml"
    path.write_bytes(b"# caf\xe9\n")
    with pytest.raises(PermissionsError, match="not UTF-8"):
        load_rules(path)


def test_rules_built_in_code_are_validated() -> None:
    with pytest.raises(ValueError, match="decision"):
        Rule(decision="perhaps")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="pattern: not a valid regular expression"):
        Rule(decision="deny", pattern="[")
    with pytest.raises(ValueError, match="kind"):
        Rule(decision="deny", kind="nope")
    with pytest.raises(ValueError, match="mode"):
        Permissions(mode="yolo")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="host names"):
        Permissions(fetch_hosts=["https://x"])


# -- matching --------------------------------------------------------------------------


def matches(rule: Rule, tool_name: str, raw: Mapping[str, object]) -> bool:
    tool = TOOLS[tool_name]
    return rule.matches(tool, tool.parse_input(raw))


def test_tool_name_versus_kind() -> None:
    by_name = Rule(decision="deny", tool="read_file")
    by_kind = Rule(decision="deny", kind="file_read")
    both = Rule(decision="deny", tool="read_file", kind="search")
    anything = Rule(decision="deny")
    read = ("read_file", {"path": "a"})
    search = ("search", {"pattern": "a"})
    assert matches(by_name, *read) and not matches(by_name, *search)
    assert matches(by_kind, *read) and not matches(by_kind, *search)
    assert not matches(both, *read) and not matches(both, *search)
    assert matches(anything, *read) and matches(anything, *search)


@pytest.mark.parametrize(
    ("tool", "raw", "pattern", "expected"),
    [
        ("shell", {"command": "git push --force"}, r"\bpush\b.*--force", True),
        ("shell", {"command": "git pull"}, r"\bpush\b", False),
        ("read_file", {"path": "config/.env"}, r"\.env$", True),
        ("read_file", {"path": "config/.env.example"}, r"\.env$", False),
        ("write_file", {"path": "src/app.py", "content": "rm -rf"}, r"rm -rf", False),
        ("write_file", {"path": "src/app.py", "content": "x"}, r"^src/", True),
        ("edit_file", {"path": "./src/../setup.py", "old": "a", "new": "b"}, r"^setup\.py$", True),
        ("search", {"pattern": "password", "path": "src"}, r"passw", True),
        ("search", {"pattern": "TODO", "path": "secrets"}, r"secrets", False),
        ("fetch", {"url": "http://localhost/admin"}, r"/admin\b", True),
    ],
)
def test_pattern_searches_the_main_argument(
    tool: str, raw: dict[str, object], pattern: str, expected: bool
) -> None:
    assert matches(Rule(decision="deny", pattern=pattern), tool, raw) is expected


@pytest.mark.parametrize(
    ("glob", "tool", "raw", "expected"),
    [
        (".env", "read_file", {"path": ".env"}, True),
        (".env", "read_file", {"path": "sub/dir/.env"}, True),
        (".env", "read_file", {"path": "/w/sub/.env"}, True),
        (".env", "read_file", {"path": "x.env"}, False),
        ("*.pem", "write_file", {"path": "keys/a.pem", "content": ""}, True),
        ("secrets/*", "search", {"pattern": "x", "path": "secrets/deep"}, True),
        ("secrets/*", "search", {"pattern": "x", "path": "./a/../secrets/b"}, True),
        ("secrets/*", "search", {"pattern": "secrets/x"}, False),  # path "." only
        ("/etc/*", "read_file", {"path": "/etc/passwd"}, True),
        ("/etc/*", "read_file", {"path": "w/etc/passwd"}, False),
        ("*", "shell", {"command": "cat .env"}, False),  # no paths: globs never match
    ],
)
def test_glob_matches_the_paths(
    glob: str, tool: str, raw: dict[str, object], expected: bool
) -> None:
    assert matches(Rule(decision="deny", glob=glob), tool, raw) is expected


def test_pattern_and_glob_must_both_match() -> None:
    rule = Rule(decision="deny", pattern="^docs/", glob="*.md")
    assert matches(rule, "read_file", {"path": "docs/a.md"})
    assert not matches(rule, "read_file", {"path": "docs/a.txt"})
    assert not matches(rule, "read_file", {"path": "src/a.md"})


# -- precedence ------------------------------------------------------------------------

ALLOW = Rule(decision="allow", kind="shell", source="f:rules[0]")
ASK = Rule(decision="ask", pattern="git", source="f:rules[1]")
DENY = Rule(decision="deny", tool="shell", pattern="push", source="f:rules[2]")
ASK_TOO = Rule(decision="ask", tool="shell", source="f:rules[3]")


@pytest.mark.parametrize("order", list(itertools.permutations([ALLOW, ASK, DENY])))
def test_deny_beats_ask_beats_allow(order: tuple[Rule, ...]) -> None:
    perms = Permissions(rules=order)
    cmd = SHELL.parse_input({"command": "git push"})
    assert perms.rule_decision(SHELL, cmd) == HostDecision(
        "deny", "rule", DENY, "deny by f:rules[2]"
    )
    status = SHELL.parse_input({"command": "git status"})
    decided = perms.rule_decision(SHELL, status)
    assert decided is not None and (decided.decision, decided.rule) == ("ask", ASK)
    ls = SHELL.parse_input({"command": "ls"})
    decided = perms.rule_decision(SHELL, ls)
    assert decided is not None and (decided.decision, decided.rule) == ("allow", ALLOW)


def test_ties_go_to_the_first_rule_and_no_match_is_none() -> None:
    inp = SHELL.parse_input({"command": "git log"})
    assert strongest([ASK, ASK_TOO], SHELL, inp) is ASK
    assert strongest([ASK_TOO, ASK], SHELL, inp) is ASK_TOO
    assert Permissions(rules=[DENY]).rule_decision(SHELL, inp) is None
    assert Permissions().rule_decision(SHELL, inp) is None


def test_rule_reason_is_used() -> None:
    rule = Rule(decision="deny", tool="shell", reason="not today")
    decided = Permissions(rules=[rule]).rule_decision(SHELL, SHELL.parse_input({"command": "x"}))
    assert decided == HostDecision("deny", "rule", rule, "not today")


# -- modes -----------------------------------------------------------------------------


@pytest.fixture
def sandbox(tmp_path: Path) -> Sandbox:
    root = tmp_path / "ws"
    root.mkdir()
    perms = Permissions(fetch_hosts=["127.0.0.1"])
    return Sandbox([root], fetch_hosts=perms.fetch_allowed)


CALLS = {
    "shell": {"command": "make"},
    "read_file": {"path": "a.txt"},
    "write_file": {"path": "a.txt", "content": "x"},
    "edit_file": {"path": "a.txt", "old": "x", "new": "y"},
    "search": {"pattern": "x"},
    "fetch": {"url": "http://127.0.0.1/x"},
}
MODE_TABLE = {
    #              default  accept-edits  read-only
    "shell": ("ask", "ask", "deny"),
    "read_file": ("allow", "allow", "allow"),
    "write_file": ("ask", "allow", "deny"),
    "edit_file": ("ask", "allow", "deny"),
    "search": ("allow", "allow", "allow"),
    "fetch": ("ask", "ask", "deny"),
}


@pytest.mark.parametrize("name", sorted(CALLS))
@pytest.mark.parametrize("mode_index", [0, 1, 2])
def test_modes_for_each_tool(sandbox: Sandbox, name: str, mode_index: int) -> None:
    mode = ("default", "accept-edits", "read-only")[mode_index]
    perms = Permissions(mode=mode)  # type: ignore[arg-type]
    tool = TOOLS[name]
    decided = perms.mode_decision(tool, tool.parse_input(CALLS[name]), sandbox)
    assert decided.decision == MODE_TABLE[name][mode_index]
    assert (decided.source, decided.rule) == ("mode", None)
    assert decided.reason.startswith(f"mode {mode}: ")


@pytest.mark.parametrize("mode", ["default", "accept-edits", "read-only"])
def test_modes_deny_what_the_sandbox_refuses(sandbox: Sandbox, mode: str) -> None:
    perms = Permissions(mode=mode)  # type: ignore[arg-type]
    outside = [
        (READ, {"path": "../x"}),
        (SEARCH, {"pattern": "x", "path": "/etc"}),
        (WRITE, {"path": "/tmp/x", "content": "x"}),
        (FETCH, {"url": "http://169.254.169.254/latest"}),
    ]
    for tool, raw in outside:
        decided = perms.mode_decision(tool, tool.parse_input(raw), sandbox)
        assert decided.decision == "deny", (mode, raw)
        assert "outside the workspace" in decided.reason or "not allowed" in decided.reason


def test_mode_decision_reasons(sandbox: Sandbox) -> None:
    perms = Permissions(mode="read-only")
    decided = perms.mode_decision(SHELL, SHELL.parse_input({"command": "ls"}), sandbox)
    assert decided == HostDecision("deny", "mode", None, "mode read-only: shell is denied")


# -- managed ---------------------------------------------------------------------------


def test_managed_rules_are_their_own_source() -> None:
    managed_deny = Rule(decision="deny", kind="shell", pattern="sudo", source="m:rules[0]")
    managed_ask = Rule(decision="ask", kind="fetch", source="m:rules[1]")
    user_allow = Rule(decision="allow", kind="shell", source="u:rules[0]")
    perms = Permissions(rules=[user_allow], managed=[managed_ask, managed_deny])
    sudo = SHELL.parse_input({"command": "sudo rm x"})
    assert perms.managed_decision(SHELL, sudo) == HostDecision(
        "deny", "managed", managed_deny, "deny by m:rules[0]"
    )
    user = perms.rule_decision(SHELL, sudo)
    assert user is not None and user.decision == "allow"  # the caller lets managed win
    fetch = FETCH.parse_input({"url": "http://localhost/"})
    decided = perms.managed_decision(FETCH, fetch)
    assert decided is not None and (decided.decision, decided.source) == ("ask", "managed")
    assert perms.managed_decision(SHELL, SHELL.parse_input({"command": "ls"})) is None


# -- fetch hosts -----------------------------------------------------------------------


def test_fetch_allowed() -> None:
    perms = Permissions(fetch_hosts=["127.0.0.1", "LOCALHOST", "*.example.org", "::1"])
    assert perms.fetch_allowed("127.0.0.1")
    assert perms.fetch_allowed("localhost") and perms.fetch_allowed("Localhost.")
    assert perms.fetch_allowed("docs.example.org") and perms.fetch_allowed("a.b.example.org")
    assert not perms.fetch_allowed("example.org")  # "*." means subdomains only
    assert not perms.fetch_allowed("evilexample.org")
    assert perms.fetch_allowed("[::1]") and perms.fetch_allowed("::1")
    assert not perms.fetch_allowed("127.0.0.2")
    assert not perms.fetch_allowed("")
    assert not Permissions().fetch_allowed("localhost")


def test_managed_fetch_hosts_bound_the_user_list(tmp_path: Path) -> None:
    user = write(tmp_path, 'fetch_hosts = ["localhost", "127.0.0.1", "*.example.org"]\n', "u.toml")
    managed = write(tmp_path, 'fetch_hosts = ["127.0.0.1", "api.example.org"]\n', "m.toml")
    perms = Permissions.from_files(user, managed)
    assert perms.fetch_allowed("127.0.0.1")
    assert perms.fetch_allowed("api.example.org")
    assert not perms.fetch_allowed("localhost")  # the user allows it, the managed file not
    assert not perms.fetch_allowed("www.example.org")
    unbounded = Permissions.from_files(user, write(tmp_path, "", "m2.toml"))
    assert unbounded.fetch_allowed("localhost")


# -- the example files -----------------------------------------------------------------


def test_every_example_loads() -> None:
    files = sorted(EXAMPLES.glob("*.toml"))
    assert {f.name for f in files} >= {"default.toml", "strict-managed.toml", "read-only-ish.toml"}
    for path in files:
        assert load_file(path).rules, path


def _decide(perms: Permissions, name: str, raw: dict[str, object]) -> str | None:
    tool = TOOLS[name]
    inp = tool.parse_input(raw)
    managed = perms.managed_decision(tool, inp)
    if managed is not None and managed.decision != "allow":
        return managed.decision
    decided = perms.rule_decision(tool, inp)
    return decided.decision if decided else None


def test_example_files_behave_as_documented() -> None:
    perms = Permissions.from_files(EXAMPLES / "default.toml", EXAMPLES / "strict-managed.toml")
    assert _decide(perms, "shell", {"command": "git status"}) == "allow"
    assert _decide(perms, "shell", {"command": "ls -la src"}) == "allow"
    for rm in ("ls; rm -rf .", "rm -fR build", "rm -r -f x", "rm x --recursive"):
        assert _decide(perms, "shell", {"command": rm}) == "deny", rm
    assert _decide(perms, "shell", {"command": "rm -f build/x.o"}) is None
    assert _decide(perms, "shell", {"command": "ls $(whoami)"}) is None  # falls to the mode
    assert _decide(perms, "shell", {"command": "git push origin main"}) == "ask"
    assert _decide(perms, "shell", {"command": "git push -f origin main"}) == "deny"
    assert _decide(perms, "shell", {"command": "sudo make install"}) == "deny"
    assert _decide(perms, "read_file", {"path": "app/.env"}) == "deny"
    assert _decide(perms, "edit_file", {"path": ".git/config", "old": "a", "new": "b"}) == "deny"
    assert _decide(perms, "fetch", {"url": "http://localhost/"}) == "ask"
    assert perms.fetch_allowed("localhost") and not perms.fetch_allowed("example.com")

    read_only = Permissions.from_files(EXAMPLES / "read-only-ish.toml")
    assert _decide(read_only, "write_file", {"path": "a", "content": ""}) == "deny"
    assert _decide(read_only, "shell", {"command": "git diff"}) == "allow"
    assert _decide(read_only, "shell", {"command": "git diff | sh"}) is None

    docs = Permissions.from_files(EXAMPLES / "docs-only.toml")
    assert _decide(docs, "edit_file", {"path": "docs/a.md", "old": "a", "new": "b"}) == "allow"
    assert _decide(docs, "write_file", {"path": "docs/../src/a.py", "content": ""}) == "deny"

"""``ahp-backend policy``: CEL rules, transports, both clients, notes, reload, bad files.

What this file shows, with real processes (fixtures in ``conftest.py``):

- one table of tool calls -> expected verdict, run over stdio ``persistent``, stdio
  ``per_event`` and HTTP, through our client (``Dispatcher``) and the official SDK's
  (``Hooks``), for a harness that accepts every effect and one that accepts only
  deny: the first matching deny wins, messages ride along where accepted, ask and
  allow are sent only where advertised;
- ``hooks/configuration``: a registration without ``subscriptions`` is served the
  defaults, and both clients then intercept on every transport;
- an unadvertised action is skipped with one note per rule; a rule that fails at run
  time does not match, with one note per rule that names no event value;
- bad policy files stop the process before it serves anything, naming the file, the
  line, the rule and what is wrong (syntax, keys, actions, CEL that does not parse or
  type-check, a bad regex literal, a multi-line expression's own line);
- reload keeps the last good policy; a duplicate delivery gets the first answer;
- ``ahp-conformance backend`` passes on it; the README's policy example and its
  calls run as written; ``policy test`` routes to the test-table runner.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kit_testing import intercept_request

REPO = Path(__file__).resolve().parents[3]
README = REPO / "packages" / "backends" / "README.md"

RULES = r"""
[[rule]]
name = "no-force-push"
when = 'event.tool.kind == "shell" && event.tool.input.command.matches(r"\bgit\s+push\b.*--force")'
action = "deny"
reason = "Force pushes rewrite shared history."
code = "com.example.policy.force-push"
message = "Open a pull request instead."

[[rule]]
name = "no-rm-rf"
when = 'event.tool.kind == "shell" && event.tool.input.command.matches(r"rm\s+-rf")'
action = "deny"
reason = "Recursive force deletes are not allowed here."
code = "com.example.policy.rm-rf"

[[rule]]
name = "sudo-is-logged"
when = 'event.tool.kind == "shell" && event.tool.input.command.startsWith("sudo ")'
action = "message"
message = "sudo calls are logged."

[[rule]]
name = "no-secrets"
when = 'has(event.tool.input.file_path) && glob(event.tool.input.file_path, "/etc/**")'
action = "deny"
reason = "Secrets are off limits."

[[rule]]
name = "downloads-need-a-look"
when = 'event.tool.kind == "shell" && event.tool.input.command.matches(r"^curl\b")'
action = "ask"
reason = "Downloads are reviewed."

[[rule]]
name = "docs-are-fine"
when = 'event.tool.kind == "file_read" && glob(event.tool.input.file_path, "docs/*.md")'
action = "allow"

[[rule]]
name = "no-deletes-at-permission"
when = 'event.tool.kind == "shell" && event.tool.input.command.startsWith("rm ")'
action = "deny"
reason = "Deletes are refused at the permission stage."
code = "com.example.policy.permission-rm"
events = ["tool.permission.request"]
"""

PUSH = ("Force pushes rewrite shared history.", "com.example.policy.force-push")
RM_RF = ("Recursive force deletes are not allowed here.", "com.example.policy.rm-rf")
SECRETS = ("Secrets are off limits.", None)
PERMISSION_RM = ("Deletes are refused at the permission stage.", "com.example.policy.permission-rm")
PUSH_MESSAGE = "Open a pull request instead."
SUDO = "sudo calls are logged."
DOWNLOADS = "Downloads are reviewed."


def shell(command: str) -> dict[str, Any]:
    return {"name": "Bash", "kind": "shell", "input": {"command": command}, "origin": "native"}


def reader(**tool_input: Any) -> dict[str, Any]:
    return {"name": "Read", "kind": "file_read", "input": tool_input, "origin": "native"}


NONE: tuple[Any, ...] = ("none", None, None, ())
BEFORE, PERMISSION = "tool.before", "tool.permission.request"

# name, tool, event type, verdict with every effect accepted, verdict with deny only
TABLE: list[tuple[str, dict[str, Any], str, tuple[Any, ...], tuple[Any, ...]]] = [
    (
        "force_push",
        shell("git push --force origin main"),
        BEFORE,
        ("deny", *PUSH, (PUSH_MESSAGE,)),
        ("deny", *PUSH, ()),
    ),
    (
        # Two denies match: the first in file order wins; both messages (in file order).
        "sudo_force_push_rm",
        shell("sudo git push --force && rm -rf /"),
        BEFORE,
        ("deny", *PUSH, (PUSH_MESSAGE, SUDO)),
        ("deny", *PUSH, ()),
    ),
    ("rm_rf", shell("rm -rf /tmp/x"), BEFORE, ("deny", *RM_RF, ()), ("deny", *RM_RF, ())),
    ("sudo_ls", shell("sudo ls"), BEFORE, ("none", None, None, (SUDO,)), NONE),
    ("curl_ask", shell("curl https://x.example"), BEFORE, ("ask", None, None, (DOWNLOADS,)), NONE),
    (
        "etc",
        reader(file_path="/etc/shadow"),
        BEFORE,
        ("deny", *SECRETS, ()),
        ("deny", *SECRETS, ()),
    ),
    (
        # The kernel's view of a path (paths.py): '//etc/./shadow/' is /etc/shadow.
        "etc_double_slash",
        reader(file_path="//etc/./shadow/"),
        BEFORE,
        ("deny", *SECRETS, ()),
        ("deny", *SECRETS, ()),
    ),
    ("docs_allow", reader(file_path="docs/a.md"), BEFORE, ("allow", None, None, ()), NONE),
    ("docs_deeper", reader(file_path="docs/x/a.md"), BEFORE, NONE, NONE),
    # No file_path: docs-are-fine fails at run time and does not match.
    ("read_no_path", reader(path="docs/a.md"), BEFORE, NONE, NONE),
    ("ls", shell("ls -la"), BEFORE, NONE, NONE),
    ("rm_before", shell("rm a.txt"), BEFORE, NONE, NONE),
    (
        "rm_permission",
        shell("rm a.txt"),
        PERMISSION,
        ("deny", *PERMISSION_RM, ()),
        ("deny", *PERMISSION_RM, ()),
    ),
    # ask is not advertised at tool.permission.request (the host profile): skipped.
    ("curl_permission", shell("curl https://x.example"), PERMISSION, NONE, NONE),
    ("docs_permission", reader(file_path="docs/a.md"), PERMISSION, ("allow", None, None, ()), NONE),
    (
        "push_permission",
        shell("git push -v --force"),
        PERMISSION,
        ("deny", *PUSH, (PUSH_MESSAGE,)),
        ("deny", *PUSH, ()),
    ),
]


@pytest.fixture
def rules_file(tmp_path: Path) -> Path:
    path = tmp_path / "policy.toml"
    path.write_text(RULES, "utf-8")
    return path


def cases(clients: Any) -> list[Any]:
    return [clients.Case(name, tool, event_type) for name, tool, event_type, _, _ in TABLE]


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
    from ahp_backends.policy import PolicyServer, build_backend

    backend = build_backend(PolicyServer(str(rules_file)))
    verdicts = await clients.in_memory(backend, cases(clients), profile)
    column = 3 if profile == "full" else 4
    for row, got in zip(TABLE, summary(verdicts), strict=True):
        assert got == row[column], row[0]


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
    server = http_backend("policy", *args) if kind == "http" else None
    hooks = [hook("policy", *args, kind=kind, http=server, subscriptions=[clients.subscription()])]
    table = cases(clients)
    ours, ours_diagnostics = await clients.ours(hooks, table, profile)
    sdk, sdk_diagnostics = await clients.sdk(hooks, table, profile)
    assert ours_diagnostics == [] and sdk_diagnostics == []
    column = 3 if profile == "full" else 4
    for row, got_ours, got_sdk in zip(TABLE, summary(ours), summary(sdk), strict=True):
        assert got_ours == row[column], row[0]
        assert got_sdk == row[column], row[0]


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
    server = http_backend("policy", *args) if kind == "http" else None
    hooks = [hook("policy", *args, kind=kind, http=server)]  # no subscriptions
    table = [clients.Case("rm_rf", shell("rm -rf /")), clients.Case("ls", shell("ls"))]
    for run in (clients.ours, clients.sdk):
        verdicts, diagnostics = await run(hooks, table, "full")
        assert diagnostics == []
        assert summary(verdicts) == [("deny", *RM_RF, ()), NONE]


def test_configuration_defaults_are_the_deny_lists(
    rules_file: Path, run_backend: Callable[..., subprocess.CompletedProcess[bytes]]
) -> None:
    request = {
        "jsonrpc": "2.0",
        "id": "cfg-1",
        "method": "hooks/configuration",
        "params": {"protocolVersion": "draft"},
    }
    done = run_backend(
        "policy", "--rules", str(rules_file), "--once", input=json.dumps(request).encode() + b"\n"
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["result"]["configuration"]["subscriptions"] == [
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
    event: dict[str, Any], effects: tuple[str, ...] = ("allow", "ask", "deny", "message")
) -> dict[str, Any]:
    return intercept_request(event, effects)


def event_for(
    clients: Any, tool: dict[str, Any], event_id: str | None = None, event_type: str = BEFORE
) -> dict[str, Any]:
    event: dict[str, Any] = clients.tool_event(
        clients.Case("raw", tool, event_type), "urn:example:raw", event_id
    )
    return event


def effects_of(response: dict[str, Any]) -> list[dict[str, Any]]:
    assert "result" in response, response
    found: list[dict[str, Any]] = response["result"]["effects"]
    return found


def deny_of(reason_code: tuple[str, str | None]) -> list[dict[str, Any]]:
    effect: dict[str, Any] = {"type": "deny", "reason": reason_code[0]}
    if reason_code[1] is not None:
        effect["code"] = reason_code[1]
    return [effect]


def test_an_unadvertised_action_is_skipped_with_one_note_per_rule(
    rules_file: Path, clients: Any, stdio_backend: Callable[..., Any]
) -> None:
    backend = stdio_backend("policy", "--rules", str(rules_file))
    curl = shell("curl https://x.example")
    for _ in range(3):
        got = backend.request(intercept(event_for(clients, curl), ("deny", "message")))
        assert effects_of(got) == []  # neither the ask nor its reason
    note = backend.wait_for_stderr("does not accept ask")
    assert "rule 'downloads-need-a-look' (rule[4])" in note
    # The same for allow, and for a message the request does not accept.
    docs = reader(file_path="docs/a.md")
    assert effects_of(backend.request(intercept(event_for(clients, docs), ("deny",)))) == []
    sudo = intercept(event_for(clients, shell("sudo ls")), ("deny",))
    assert effects_of(backend.request(sudo)) == []
    assert effects_of(backend.request(intercept(event_for(clients, docs), ("deny",)))) == []
    backend.wait_for_stderr("does not accept allow")
    backend.wait_for_stderr("does not accept message")
    text = backend.stderr_text()
    assert text.count("does not accept ask") == 1
    assert text.count("does not accept allow") == 1


def test_the_ask_reason_never_rides_without_the_ask(
    rules_file: Path, clients: Any, stdio_backend: Callable[..., Any]
) -> None:
    backend = stdio_backend("policy", "--rules", str(rules_file))
    curl = shell("curl https://x.example")
    got = effects_of(backend.request(intercept(event_for(clients, curl), ("deny", "message"))))
    assert got == []
    got = effects_of(backend.request(intercept(event_for(clients, curl), ("ask", "message"))))
    assert got == [{"type": "ask"}, {"type": "message", "text": DOWNLOADS}]


FAILING = r"""
[[rule]]
name = "shadow"
when = 'has(event.tool.input.paths) && event.tool.input.paths.exists(p, p == "/etc/shadow")'
action = "deny"
reason = "No shadow."

[[rule]]
name = "unguarded"
when = 'event.tool.kind == "shell" && event.tool.input.command.contains("DROP")'
action = "deny"
reason = "No drops."

[[rule]]
name = "typed"
when = 'event.tool.input.timeout > 10'
action = "deny"
reason = "Too long."
on_error = "skip"

[[rule]]
name = "docs"
when = 'event.tool.kind == "file_read" && glob(event.tool.input.file_path, "docs/*")'
action = "allow"

[[rule]]
name = "absolute-note"
when = 'event.tool.kind == "file_read" && event.tool.input.file_path.startsWith("/")'
action = "message"
message = "An absolute path."
"""
"""Rules that fail at run time: deny with on_error's default ("fail"), a deny that opts
out ("skip"), and an allow and a message rule, which skip by default."""

BUDGET = 10_000  # cel-cpp's comprehension budget: 10,000 iterations fail, 9,999 pass
SECRET = "s3cr3t-value-in-the-event"


def shell_with_paths(count: int, command: str = "ls") -> dict[str, Any]:
    """A shell call listing ``count`` paths, the last one /etc/shadow."""
    tool = shell(command)
    tool["input"]["paths"] = [f"/tmp/f{i}" for i in range(count - 1)] + ["/etc/shadow"]
    return tool


def test_a_deny_rule_that_cannot_be_evaluated_fails_the_request(
    tmp_path: Path, clients: Any, stdio_backend: Callable[..., Any]
) -> None:
    """A deny that cannot be evaluated is a failure, never "did not match": before, the
    10,000 paths ending in /etc/shadow got no effect, and so did a shell call without
    a command. Now a JSON-RPC error, fixed, without exception text or event values."""
    path = tmp_path / "policy.toml"
    path.write_text(FAILING, "utf-8")
    backend = stdio_backend("policy", "--rules", str(path))
    # Under the budget the rule runs and denies; at the budget it fails.
    got = backend.request(intercept(event_for(clients, shell_with_paths(BUDGET - 1))))
    assert effects_of(got) == deny_of(("No shadow.", None))
    for tool in (shell_with_paths(BUDGET), {**shell("x"), "input": {"note": SECRET}}):
        event = event_for(clients, tool)
        got = backend.request(intercept(event))
        assert got == {
            "jsonrpc": "2.0",
            "id": event["id"],
            "error": {"code": -32004, "message": "backend_internal_error"},
        }
    # A deny that matched anyway stands, whatever else failed ('shadow' here).
    got = backend.request(intercept(event_for(clients, shell_with_paths(BUDGET, "DROP x"))))
    assert effects_of(got) == deny_of(("No drops.", None))
    # on_error = "skip": 'typed' fails (timeout is a string) and does not match.
    tool = shell("psql -c 'SELECT 1'")
    tool["input"]["timeout"] = SECRET
    assert effects_of(backend.request(intercept(event_for(clients, tool)))) == []
    # allow and message rules skip by default: a read without file_path.
    assert effects_of(backend.request(intercept(event_for(clients, reader(path="x"))))) == []
    shadow = backend.wait_for_stderr("rule 'shadow'")
    assert "could not be evaluated at tool.before: its comprehensions reach CEL's budget" in shadow
    assert "the subscription's failure policy decides" in shadow
    unguarded = backend.wait_for_stderr("rule 'unguarded'")
    assert "a field it reads is absent ('command'; guard it with has())" in unguarded
    typed = backend.wait_for_stderr("rule 'typed'")
    assert "did not match at tool.before: a field it reads is absent ('timeout'" in typed
    for name in ("docs", "absolute-note"):
        assert "did not match at tool.before" in backend.wait_for_stderr(f"rule '{name}'")
    assert backend.close() == 0
    text = backend.stderr_text()
    assert text.count("rule 'shadow'") == 1 and text.count("rule 'typed'") == 1  # once each
    assert text.count("intercept handler raised RuleFailed") == 2
    assert SECRET not in text and "Traceback" not in text and "budget exceeded" not in text


@pytest.mark.anyio
@pytest.mark.timeout(60)
async def test_through_our_client_a_failing_deny_rule_is_the_failure_policy_s(
    tmp_path: Path, clients: Any, hook: Callable[..., dict[str, Any]]
) -> None:
    """End to end through ahp_protocol.client, fail-closed: the call a failing deny rule
    might have refused is denied synthetically (a failure, recorded as one), while
    on_error = "skip" and the allow/message rules let the chain settle normally."""
    from ahp_protocol.client import Dispatcher
    from ahp_protocol.wire.registration import parse_registration

    path = tmp_path / "policy.toml"
    path.write_text(FAILING, "utf-8")
    subscription = dict(clients.subscription(("tool.before",)), failurePolicy="fail-closed")
    entry = hook("policy", "--rules", str(path), kind="persistent", subscriptions=[subscription])
    registration = parse_registration({"protocolVersion": "draft", "hooks": [entry]})
    typed = shell("psql -c 'SELECT 1'")
    typed["input"]["timeout"] = SECRET
    tools = [shell_with_paths(BUDGET), typed, reader(path="x"), shell_with_paths(3)]
    results = []
    async with Dispatcher(
        registration,
        capabilities=clients.PROFILES["full"],
        environ=dict(os.environ),
        source=clients.SOURCE_OURS,
        harness=clients.HARNESS,
    ) as dispatcher:
        for tool in tools:
            event = clients.tool_event(clients.Case("e2e", tool), clients.SOURCE_OURS)
            results.append(await dispatcher.intercept(event))
    failing, skipped, allow_skipped, denied = results
    assert failing.permission == "deny" and failing.synthetic_denial
    (diagnostic,) = failing.diagnostics
    assert diagnostic.outcome == "failed" and diagnostic.policy == "fail-closed"
    assert diagnostic.failure is not None and diagnostic.failure.value == "rpc_error"
    for result in (skipped, allow_skipped):
        assert result.permission == "none" and not result.denied
        assert [d.outcome for d in result.diagnostics] == ["no_effect"]
    assert denied.permission == "deny" and not denied.synthetic_denial
    assert denied.denial is not None and denied.denial.reason == "No shadow."


SURROGATE_POLICY = r"""
[[rule]]
name = "no-rm-rf"
when = 'event.tool.kind == "shell" && event.tool.input.command.matches(r"rm\s+-rf")'
action = "deny"
reason = "No rm -rf."

[[rule]]
name = "description-seen"
when = '''
has(event.tool.input.description) && event.tool.input.description == "a\uFFFDb"
  && event.tool.input.description.matches("^a.b$") && "\uFFFDk" in event.tool.input
'''
action = "message"
message = "The description reads a, U+FFFD, b."
"""


def test_a_lone_surrogate_anywhere_leaves_every_rule_working(
    tmp_path: Path, clients: Any, stdio_backend: Callable[..., Any]
) -> None:
    """json.dumps and JSON.stringify write a lone surrogate as "\\ud800"; json.loads keeps
    it, and the CEL runtime could not take it, so every rule failed: rm -rf / got no
    effect. A rule reading such a string sees U+FFFD in its place (keys too)."""
    path = tmp_path / "policy.toml"
    path.write_text(SURROGATE_POLICY, "utf-8")
    backend = stdio_backend("policy", "--rules", str(path))
    tool = shell("rm -rf /")
    tool["input"].update({"description": "a\ud800b", "\udc00k": 1})
    line = json.dumps(intercept(event_for(clients, tool)))
    assert "\\ud800" in line and "\\udc00" in line  # the escape a harness writes
    assert effects_of(backend.request(json.loads(line))) == [
        {"type": "deny", "reason": "No rm -rf."},
        {"type": "message", "text": "The description reads a, U+FFFD, b."},
    ]
    assert backend.close() == 0
    assert "note:" not in backend.stderr_text()


# 180 KB on which a backtracking engine takes ~36 s for the template's own rule.
CATASTROPHIC = "git push " * 20_000
BACKTRACKING_POLICY = r"""
[[rule]]
name = "no-force-push"
when = 'event.tool.kind == "shell" && event.tool.input.command.matches("git push.*(-f|--force)")'
action = "deny"
reason = "Force pushes rewrite shared history"

[[rule]]
name = "not-hoisted"
when = 'event.tool.kind == "shell" && matches(event.tool.input.command, "push.*(--force|-f)")'
action = "deny"
reason = "The same, through the call form."
"""


@pytest.mark.timeout(60)
def test_a_backtracking_regex_answers_at_once_on_180_kb(
    tmp_path: Path, clients: Any, stdio_backend: Callable[..., Any]
) -> None:
    """matches() is RE2 (linear): both forms (hoisted, and the call) answer 180 KB at
    once; with Python's re the first request took ~36 s, and a persistent
    backend stayed busy, so every later call timed out (fail-open: it ran)."""
    path = tmp_path / "policy.toml"
    path.write_text(BACKTRACKING_POLICY, "utf-8")
    backend = stdio_backend("policy", "--rules", str(path))
    warm = backend.request(intercept(event_for(clients, shell("ls"))))  # started, imported
    assert effects_of(warm) == []
    for command, want in ((CATASTROPHIC, []), (CATASTROPHIC + "-f", ["deny"])):
        backend.send(intercept(event_for(clients, shell(command))))
        got = backend.receive(timeout=10)  # RE2: milliseconds; Python's re: ~36 s
        assert [e["type"] for e in effects_of(got)] == want
    after = backend.request(intercept(event_for(clients, shell("git push --force"))))
    assert effects_of(after) == deny_of(("Force pushes rewrite shared history", None))


def test_matches_is_cel_s_re2_search() -> None:
    """CEL's matches(): RE2 syntax, found anywhere (not a full match), anchors explicit;
    the hoisted form and the call agree."""
    from ahp_backends.policy_cel import Compiler

    cases = [
        ("a git push --force b", "push.*--force", True),  # anywhere, not fullmatch
        ("a git push --force b", "^push", False),
        ("push", "^push$", True),
        ("push\n", "^push$", False),  # RE2's $ is the end of the text (no (?m))
        ("push\n", r"push\n\z", True),
        ("Ärger", r"^\pL", True),  # Unicode classes
        ("x", "(?i)X", True),
    ]
    for text, pattern, want in cases:
        literal = json.dumps(pattern)
        for source in (f"event.s.matches({literal})", f"matches(event.s, {literal})"):
            compiler = Compiler()
            program = compiler.check(compiler.scan(source)).program
            data = compiler.bindings({"s": text})
            assert program.eval(data=data).plain_value() is want, (source, text)


# --------------------------------------------------------------------------- bad files

HEAD = '[[rule]]\nname = "a"\naction = "deny"\nreason = "r"\n'

BAD_FILES: list[tuple[str, bytes, list[str]]] = [
    ("toml_syntax", b'[[rule]]\nname = "a\nwhen = "true"\n', [":2:", "invalid TOML"]),
    (
        "unknown_key",
        (HEAD + "when = 'true'\nkidn = 1\n").encode(),
        [":6:", "rule[0].kidn", "unknown key 'kidn'"],
    ),
    ("no_name", b"[[rule]]\nwhen = 'true'\naction = \"deny\"\n", [":1:", "'name' is required"]),
    ("no_when", HEAD.encode(), [":1:", "rule[0]", "'when' is required"]),
    (
        "no_action",
        b"[[rule]]\nname = \"a\"\nwhen = 'true'\n",
        [":1:", "rule[0]", "'action' is required"],
    ),
    (
        "duplicate_name",
        (HEAD + "when = 'true'\n\n" + HEAD + "when = 'false'\n").encode(),
        [":8:", "rule[1].name", "already used by rule[0]"],
    ),
    (
        "bad_action",
        b'[[rule]]\nname = "a"\nwhen = \'true\'\naction = "block"\n',
        [":4:", "rule[0].action", "must be one of deny, message, ask, allow"],
    ),
    (
        "does_not_parse",
        (HEAD + "when = 'event.tool.kind == '\n").encode(),
        [":5:", "rule[0].when", "rule 'a'", "column 20", "Syntax error"],
    ),
    (
        "type_error",
        (HEAD + "when = '1 + \"x\" == 2'\n").encode(),
        [":5:", "rule[0].when", "rule 'a'", "no matching overload for '_+_'", "(int, string)"],
    ),
    (
        "not_bool",
        (HEAD + "when = 'event.tool.kind'\n").encode(),
        [":5:", "rule[0].when", "gives dyn, not bool"],
    ),
    (
        "undeclared_variable",
        (HEAD + "when = 'tool.kind == \"shell\"'\n").encode(),
        [":5:", "rule[0].when", "undeclared reference to 'tool.kind'"],
    ),
    (
        "unknown_function",
        (HEAD + "when = 'globb(event.x, \"a\")'\n").encode(),
        [":5:", "undeclared reference to 'globb'"],
    ),
    (
        "matches_wrong_argument",
        (HEAD + "when = 'event.tool.input.command.matches(1)'\n").encode(),
        [":5:", "no matching overload for 'matches'"],
    ),
    (
        "bad_regex_literal",
        (HEAD + "when = 'event.tool.input.command.matches(\"rm([\")'\n").encode(),
        [":5:", "rule[0].when", "rule 'a'", "invalid regex in matches()"],
    ),
    (
        # RE2 cannot run it (lookbehind): refused at load, naming rule, key and construct.
        "regex_re2_cannot_run",
        (HEAD + "when = 'event.tool.input.command.matches(\"(?<!--)force\")'\n").encode(),
        [":5:", "rule[0].when", "rule 'a'", "invalid regex in matches(): lookbehind"],
    ),
    (
        "regex_backreference",
        (HEAD + "when = 'matches(event.tool.input.command, r\"(\\w+) \\1\")'\n").encode(),
        [":5:", "rule[0].when", "invalid regex in matches(): a backreference (\\1)"],
    ),
    (
        "bad_on_error",
        (HEAD + "when = 'true'\non_error = \"ignore\"\n").encode(),
        [":6:", "rule[0].on_error", 'must be "fail" or "skip"'],
    ),
    (
        "multi_line_expression",
        (
            HEAD + "when = '''\n"
            'event.tool.kind == "shell"\n'
            "  && event.tool.input.command.matches(1)\n"
            "'''\n"
        ).encode(),
        [":7:", "rule[0].when", "no matching overload for 'matches'"],
    ),
    (
        "empty_when",
        (HEAD + "when = '  '\n").encode(),
        [":5:", "rule[0].when", "non-empty string"],
    ),
    (
        "code_on_a_message_rule",
        b'[[rule]]\nname = "a"\nwhen = \'true\'\naction = "message"\nmessage = "m"\n'
        b'code = "com.example.x"\n',
        [":6:", "rule[0].code", "does not apply to a message rule"],
    ),
    (
        "deny_without_reason",
        b'[[rule]]\nname = "a"\nwhen = \'true\'\naction = "deny"\n',
        [":1:", "'reason' is required for a deny rule"],
    ),
    (
        "message_without_text",
        b'[[rule]]\nname = "a"\nwhen = \'true\'\naction = "message"\n',
        [":1:", "'message' is required for a message rule"],
    ),
    (
        "bad_code",
        (HEAD + "when = 'true'\ncode = \"force_push\"\n").encode(),
        [":6:", "rule[0].code", "reverse-DNS"],
    ),
    (
        "bad_event",
        (HEAD + "when = 'true'\nevents = [\"tool.after\"]\n").encode(),
        [":6:", "rule[0].events", "must be one of tool.before, tool.permission.request"],
    ),
    (
        "reserved_name",
        (HEAD + 'when = \'ahp_rx_("a", "b")\'\n').encode(),
        [":5:", "names starting with ahp_ are reserved"],
    ),
    (
        "nested_too_deeply",
        (HEAD + "when = '" + "(" * 40 + "true" + ")" * 40 + "'\n").encode(),
        [":5:", "rule[0].when", "recursion limit", "split the expression"],
    ),
    (
        # A typo in a field name: it type-checks (event is a map), and would never match.
        "typo_in_a_field",
        (HEAD + "when = 'event.tool.knid == \"shell\"'\n").encode(),
        [":5:", "rule[0].when", "rule 'a'", "event.tool.knid", "did you mean event.tool.kind?"],
    ),
    (
        "typo_under_has",
        (HEAD + "when = 'has(event.sesion.cwd)'\n").encode(),
        ["rule 'a'", "event has no field 'sesion'", "did you mean event.session?"],
    ),
    (
        # suggestions is a field of tool.permission.request only.
        "a_field_of_another_event",
        (HEAD + "when = 'size(event.suggestions) > 0'\nevents = \"tool.before\"\n").encode(),
        [":5:", "event has no field 'suggestions' at tool.before"],
    ),
    (
        "a_field_below_a_value",
        (HEAD + "when = 'event.tool.name.first == \"B\"'\n").encode(),
        [":5:", "event.tool.name.first reads a field of event.tool.name, which has none"],
    ),
    ("not_utf8", b"\xff\xfe[[rule]]\n", ["not UTF-8"]),
    (
        # A deny-list file given to the policy backend.
        "deny_list_file",
        b'[[rules]]\nreason = "r"\ncode = "com.example.a"\nkind = "shell"\n',
        ["unknown top-level key 'rules' (only [[rule]] tables)"],
    ),
    ("no_rules", b"# nothing\n", ["no [[rule]] tables"]),
]


@pytest.mark.parametrize(("name", "content", "fragments"), BAD_FILES, ids=[b[0] for b in BAD_FILES])
def test_a_bad_policy_file_stops_it_before_serving(
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
    for mode in (["--check"], ["--once"]):
        done = run_backend("policy", "--rules", str(path), *mode, input=message)
        assert done.returncode == 2
        assert done.stdout == b""  # nothing served
        err = done.stderr.decode()
        assert err.startswith(f"error: {path}")
        for fragment in fragments:
            assert fragment in err, (fragment, err)
        assert "Traceback" not in err
        assert "\n |" not in err  # cel-cpp's snippet (the expression) is not echoed


def test_a_missing_policy_file_and_a_bad_http_bind_are_named(
    tmp_path: Path, rules_file: Path, run_backend: Callable[..., subprocess.CompletedProcess[bytes]]
) -> None:
    absent = tmp_path / "absent.toml"
    done = run_backend("policy", "--rules", str(absent))
    assert done.returncode == 2 and done.stdout == b""
    assert done.stderr.decode().strip() == (
        f"error: {absent}: cannot read the policy file (No such file or directory)"
    )
    done = run_backend("policy", "--rules", str(rules_file), "--http", "0.0.0.0:0")
    assert done.returncode == 2
    assert "--allow-remote" in done.stderr.decode()


def test_check_and_serve_and_help(
    rules_file: Path, run_backend: Callable[..., subprocess.CompletedProcess[bytes]]
) -> None:
    done = run_backend("policy", "--rules", str(rules_file), "--check")
    assert done.returncode == 0, done.stderr
    assert done.stdout.decode() == f"{rules_file}: 7 rules, valid\n"
    done = run_backend("policy", "serve", "--rules", str(rules_file), "--check")
    assert done.returncode == 0 and b"7 rules, valid" in done.stdout
    done = run_backend("policy", "--help")
    assert done.returncode == 0
    text = done.stdout.decode()
    for fragment in ("[[rule]]", "first matching deny", "has(", "glob(path, pattern)", "--once"):
        assert fragment in text, fragment


def test_policy_test_routes_to_the_test_table_runner(
    run_backend: Callable[..., subprocess.CompletedProcess[bytes]],
) -> None:
    done = run_backend("policy", "test", "--help")
    assert done.returncode == 0, done.stderr
    assert "usage: ahp-backend policy test" in done.stdout.decode()


# --------------------------------------------------------------------------- reload


def test_a_broken_edit_keeps_the_last_good_policy(
    rules_file: Path, clients: Any, stdio_backend: Callable[..., Any]
) -> None:
    backend = stdio_backend("policy", "--rules", str(rules_file))
    rm_rf = shell("rm -rf /")
    assert effects_of(backend.request(intercept(event_for(clients, rm_rf)))) == deny_of(RM_RF)

    # 1. An expression that does not type-check: the old policy stays, stderr says so once.
    rules_file.write_text(RULES + "\n" + HEAD.replace('"a"', '"b"') + "when = '1 == \"x\"'\n")
    for _ in range(2):
        got = effects_of(backend.request(intercept(event_for(clients, rm_rf))))
        assert got == deny_of(RM_RF)
    warning = backend.wait_for_stderr("keeping the last good rules")
    assert warning.startswith(f"ahp-backend policy: warning: {rules_file}:")
    assert "rule 'b'" in warning and "no matching overload" in warning
    assert backend.stderr_text().count("keeping the last good rules") == 1

    # 2. A good edit takes effect: rm -rf is let through, ls is denied.
    rules_file.write_text(
        '[[rule]]\nname = "ls"\nwhen = \'event.tool.input.command.startsWith("ls")\'\n'
        'action = "deny"\nreason = "No listing."\ncode = "com.example.ls"\n',
        "utf-8",
    )
    assert effects_of(backend.request(intercept(event_for(clients, rm_rf)))) == []
    ls = effects_of(backend.request(intercept(event_for(clients, shell("ls -la")))))
    assert ls == deny_of(("No listing.", "com.example.ls"))
    assert "(1 rules)" in backend.wait_for_stderr("reloaded")
    assert backend.close() == 0


# --------------------------------------------------------------------------- duplicates

OTHER_POLICY = '[[rule]]\nname = "x"\nwhen = \'false\'\naction = "deny"\nreason = "x"\n'


def test_a_duplicate_gets_the_first_answer_after_the_policy_changed_stdio(
    rules_file: Path, clients: Any, stdio_backend: Callable[..., Any]
) -> None:
    backend = stdio_backend("policy", "--rules", str(rules_file))
    event = event_for(clients, shell("rm -rf /"), "evt_duplicate")
    first = backend.request(intercept(event))
    assert effects_of(first) == deny_of(RM_RF)
    rules_file.write_text(OTHER_POLICY, "utf-8")
    assert backend.request(intercept(event)) == first  # same source and id: same answer
    assert effects_of(backend.request(intercept(dict(event, id="evt_other")))) == []
    foreign = dict(event, source="urn:example:another-harness")
    assert effects_of(backend.request(intercept(foreign))) == []


def test_a_duplicate_gets_the_first_answer_after_the_policy_changed_http(
    rules_file: Path, clients: Any, http_backend: Callable[..., Any]
) -> None:
    server = http_backend("policy", "--rules", str(rules_file))
    event = event_for(clients, shell("git push --force"), "evt_http_duplicate")
    first = server.post(intercept(event))
    assert effects_of(first) == [*deny_of(PUSH), {"type": "message", "text": PUSH_MESSAGE}]
    rules_file.write_text(OTHER_POLICY, "utf-8")
    assert server.post(intercept(event)) == first
    assert effects_of(server.post(intercept(dict(event, id="evt_http_new")))) == []


# --------------------------------------------------------------------------- conformance


@pytest.mark.timeout(240)
@pytest.mark.parametrize("mode", ["persistent", "per_event"])
def test_ahp_conformance_backend_passes(
    mode: str, rules_file: Path, backend_argv: Callable[..., list[str]]
) -> None:
    command = [str(Path(sys.executable).parent / "ahp-conformance"), "backend", "--json"]
    if mode == "per_event":
        command.append("--per-event")
    argv = backend_argv("policy", "--rules", str(rules_file))
    if mode == "per_event":
        argv.append("--once")
    done = subprocess.run(
        [*command, "--", *argv], capture_output=True, timeout=200, stdin=subprocess.DEVNULL
    )
    assert done.returncode == 0, done.stdout.decode()[-4000:] + done.stderr.decode()[-2000:]
    report = json.loads(done.stdout)
    assert report, report


# --------------------------------------------------------------------------- README


def readme_policy_section() -> str:
    """The README's "Policy rules (CEL)" section, up to its "Testing a policy" part
    (another section: test tables, run by test_policy_tests.py)."""
    text = README.read_text("utf-8")
    start = text.index("\n## Policy rules (CEL)\n")
    ends = [text.find(mark, start + 1) for mark in ("\n## ", "\n### Testing a policy")]
    found = [e for e in ends if e != -1]
    return text[start : min(found) if found else len(text)]


def readme_example() -> tuple[str, list[tuple[str, dict[str, Any], list[dict[str, Any]]]]]:
    """The README's example policy, and its calls with the effects it says they get."""
    section = readme_policy_section()
    block = section.split("<!-- policy-example -->\n```toml\n", 1)[1].split("\n```", 1)[0]
    table = section.split("<!-- policy-example-calls -->\n", 1)[1].split("\n\n", 1)[0]
    calls = []
    for line in table.splitlines()[2:]:
        event_type, tool, outcome = (cell.strip() for cell in line.strip("|").split(" | "))
        effects: list[dict[str, Any]] = []
        for part in outcome.split("; "):
            word, _, rest = part.partition(" ")
            if word == "deny":
                effects.append({"type": "deny", "reason": None, "code": rest.strip("`")})
            elif word == "message":
                effects.append({"type": "message", "text": json.loads(rest)})
            elif word in ("ask", "allow"):
                effects.append({"type": word})
            else:
                assert word == "none", line
        calls.append((event_type, json.loads(tool.strip("`")), effects))
    return block, calls


def test_the_readme_example_policy_runs_as_documented(
    tmp_path: Path, clients: Any, stdio_backend: Callable[..., Any]
) -> None:
    block, calls = readme_example()
    assert len(calls) >= 8
    path = tmp_path / "policy.toml"
    path.write_text(block + "\n", "utf-8")
    backend = stdio_backend("policy", "--rules", str(path))
    for event_type, tool, want in calls:
        event = event_for(clients, dict(tool, origin="native"), event_type=event_type)
        effects: tuple[str, ...] = ("allow", "ask", "deny", "message")
        if event_type == PERMISSION:
            effects = ("allow", "deny", "message")
        got = effects_of(backend.request(intercept(event, effects)))
        for effect in got:
            if effect["type"] == "deny":  # the README names the code; the reason is the file's
                assert effect["reason"]
                effect["reason"] = None
        assert got == want, (tool, got)
    # The rule without has() failed on a call without file_path once, and said so.
    assert backend.close() == 0


def test_every_toml_block_of_the_readme_policy_section_loads(
    tmp_path: Path, run_backend: Callable[..., subprocess.CompletedProcess[bytes]]
) -> None:
    blocks = re.findall(r"```toml\n(.*?)\n```", readme_policy_section(), re.S)
    assert blocks
    for i, block in enumerate(blocks):
        path = tmp_path / f"block{i}.toml"
        path.write_text(block + "\n", "utf-8")
        done = run_backend("policy", "--rules", str(path), "--check")
        assert done.returncode == 0, (block, done.stderr)


def test_the_help_example_rule_loads(
    tmp_path: Path, run_backend: Callable[..., subprocess.CompletedProcess[bytes]]
) -> None:
    from ahp_backends.policy import RULES_FORMAT

    example = RULES_FORMAT.split("example:\n", 1)[1]
    path = tmp_path / "help.toml"
    path.write_text("\n".join(line[2:] for line in example.splitlines()) + "\n", "utf-8")
    done = run_backend("policy", "--rules", str(path), "--check")
    assert done.returncode == 0, done.stderr


# --------------------------------------------------------------------------- unit level


def test_matches_inside_strings_and_comments_is_left_alone() -> None:
    from ahp_backends.policy_cel import Compiler

    compiler = Compiler()
    program = compiler.check(
        compiler.scan(
            'event.tool.input.command == "matches(x)" // a comment: .matches("[")\n'
            '|| event.tool.input.command.matches(r"^a\\d")'
        )
    ).program

    def run(command: str) -> Any:
        event = {"tool": {"input": {"command": command}}}
        return program.eval(data=compiler.bindings(event)).plain_value()

    assert run("matches(x)") is True
    assert run("a1") is True
    assert run("b1") is False


@pytest.mark.parametrize(
    ("path", "pattern", "matches"),
    [
        ("/etc/passwd", "/etc/**", True),
        ("/repo/app/.env", "**/.env", True),
        ("app/../.env", ".env", True),
        ("docs/a.md", "docs/*.md", True),
        ("docs/x/a.md", "docs/*.md", False),
        ("/repo/certs/server.pem", "*.pem", True),
        ("", "*", False),
        ("//etc/passwd", "/etc/**", True),
        ("/tmp/../etc/./passwd/", "/etc/passwd", True),
        ("../../etc/passwd", "/etc/**", False),  # relative without a cwd: stays relative
    ],
)
def test_glob_helper(path: str, pattern: str, matches: bool) -> None:
    from ahp_backends.policy_cel import compile_when

    program = compile_when(f"glob(event.p, {json.dumps(pattern)})").program
    assert program.eval(data={"event": {"p": path}}).plain_value() is matches


@pytest.mark.parametrize(
    ("path", "cwd", "matches"),
    [
        ("../../etc/passwd", "/repo/src", True),
        ("src/../.env", "/repo", False),  # joined: /repo/.env is not /etc/**
        ("/etc/passwd", "/repo", True),
        ("../../etc/passwd", "not/absolute", False),  # only an absolute cwd is joined
    ],
)
def test_glob_helper_with_cwd(path: str, cwd: str, matches: bool) -> None:
    from ahp_backends.policy_cel import compile_when

    program = compile_when('glob(event.p, "/etc/**", event.cwd)').program
    assert program.eval(data={"event": {"p": path, "cwd": cwd}}).plain_value() is matches


CALL_POLICY = """\
[[rule]]
name = "env"
when = 'event.tool.kind in ["file_read", "file_write"] && call.paths.exists(p, glob(p, ".env"))'
action = "deny"
reason = "env"

[[rule]]
name = "push"
when = 'call.command.matches(r"^git push")'
action = "deny"
reason = "push"
"""

# (harness, tool, what the policy matches): the input names each harness really sends
CALLS: list[tuple[str, dict[str, Any], list[str]]] = [
    ("ahp-harness", {"kind": "file_read", "input": {"path": "config/.env"}}, ["env"]),
    ("claude-code", {"kind": "file_read", "input": {"file_path": "/repo/.env"}}, ["env"]),
    ("copilot", {"kind": "file_write", "input": {"path": "/repo/.env", "file_text": "x"}}, ["env"]),
    ("camelCase", {"kind": "file_read", "input": {"filePath": "../repo/.env"}}, ["env"]),
    ("a list of paths", {"kind": "file_read", "input": {"paths": ["a", "b/.env"]}}, ["env"]),
    ("not .env", {"kind": "file_read", "input": {"path": "/repo/.env.example"}}, []),
    ("no input at all", {"kind": "file_read", "input": {}}, []),
    ("a shell command", {"kind": "shell", "input": {"command": "git push -f"}}, ["push"]),
    ("an argv", {"kind": "shell", "input": {"command": ["git", "push"]}}, ["push"]),
    ("no command", {"kind": "shell", "input": {}}, []),  # "", not a failure
    ("a command of another type", {"kind": "shell", "input": {"command": 3}}, []),
]


@pytest.mark.parametrize(("harness", "tool", "expected"), CALLS, ids=[c[0] for c in CALLS])
def test_call_reads_the_command_and_paths_of_every_harness(
    harness: str, tool: dict[str, Any], expected: list[str], tmp_path: Path
) -> None:
    # #29: the template read file_path (Claude Code's name), so its .env deny never
    # fired under ahp-harness, which says path. call.paths reads every harness's names.
    from ahp_backends.policy import parse_policy

    path = tmp_path / "p.toml"
    path.write_text(CALL_POLICY, "utf-8")
    event = {"session": {"id": "s", "cwd": "/repo"}, "tool": {"name": "T", **tool}}
    matched, failed = parse_policy(str(path)).evaluate("tool.before", event)
    assert failed == []
    assert [rule.name for rule in matched] == expected


def test_call_is_the_deny_lists_reading_of_a_call() -> None:
    from ahp_backends import denylist, tool_call

    assert denylist.PATH_FIELDS is tool_call.PATH_FIELDS  # one list, one implementation
    assert denylist.path_candidates is tool_call.path_candidates


def test_a_typo_in_call_is_refused(tmp_path: Path) -> None:
    from ahp_backends.policy import parse_policy
    from ahp_backends.toml_lines import ConfigError

    path = tmp_path / "p.toml"
    path.write_text(HEAD + "when = 'call.comand == \"ls\"'\n", "utf-8")
    with pytest.raises(ConfigError, match=r"did you mean call\.command\?"):
        parse_policy(str(path))


HOIST_EVENTS: list[dict[str, Any]] = [
    {"tool": {"kind": "shell", "input": {"command": "git push --force"}}},
    {"tool": {"kind": "shell", "input": {"command": "ls"}}},
    {"tool": {"kind": "shell", "input": {}}},  # absent
    {"tool": {"kind": "shell", "input": {"command": 3}}},  # not a string
    {"tool": {"kind": "shell", "input": ["command"]}},  # not a map on the way
    {"tool": {"kind": "shell"}},
    {},
]


@pytest.mark.parametrize(
    "template",
    [
        "{m}",
        "!{m}",
        'event.tool.kind == "shell" && {m}',
        '{m} || event.tool.kind == "shell"',
        "has(event.tool.input.command) && {m}",
        "!has(event.tool.input.command) || {m}",
    ],
)
def test_a_hoisted_match_means_what_the_call_means(template: str) -> None:
    """``event.a.b.matches("lit")`` computed before the program (hoisted) gives the same
    result, or the same failure, as the call itself (``matches(x, "lit")``, not hoisted)."""
    from ahp_backends.policy_cel import Compiler

    hoisted_compiler, plain_compiler = Compiler(), Compiler()
    hoisted = template.format(m='event.tool.input.command.matches(r"push.*--force")')
    plain = template.format(m='matches(event.tool.input.command, r"push.*--force")')
    h = hoisted_compiler.check(hoisted_compiler.scan(hoisted))
    p = plain_compiler.check(plain_compiler.scan(plain))
    assert len(hoisted_compiler.hoisted) == 1 and not plain_compiler.hoisted
    for event in HOIST_EVENTS:
        got = h.program.eval(data=hoisted_compiler.bindings(event)).plain_value()
        want = p.program.eval(data=plain_compiler.bindings(event)).plain_value()
        if isinstance(want, bool):
            assert got is want, (template, event)
        else:  # both fail: the rule does not match
            assert not isinstance(got, bool), (template, event, got)


def test_every_field_of_the_event_models_is_readable(tmp_path: Path) -> None:
    from ahp_backends.policy import parse_policy

    # Wire names (parentEventId, sandboxBypass), nested models (the MCP connection's
    # variants), open objects (tool.input, native, extensions: any key), an index, a
    # method on a field, a comprehension variable named event: all accepted.
    reads = [
        'has(event.tool.input.file_path) && event.tool.input["x-y"] == "y"',
        "event.tool.input.any.depth.below == 1 && event.native.foo.bar == 1",
        'event.parentEventId == "p" && event.tool.mcp.connection.url == "x"',
        'event.tool.mcp.connection.command == "x" && event.session.cwd.startsWith("/")',
        'has(event.extensions.com_example) && event.call.id == "c"',
        'event.batch.callIds[0] == "c"',
        '[{"x": 1}].exists(event, event.x == 1) && event . tool . kind == "shell"',
        "event.sandboxBypass == true && size(event.suggestions) > 0",  # at permission.request
        '"event.tool.knid" == event.tool.name // event.tool.knid in a comment',
    ]
    text = "".join(
        f'[[rule]]\nname = "r{i}"\nwhen = {json.dumps(when)}\naction = "allow"\n'
        for i, when in enumerate(reads)
    )
    path = tmp_path / "p.toml"
    path.write_text(text, "utf-8")
    assert len(parse_policy(str(path)).rules) == len(reads)


def test_the_readable_fields_come_from_the_wire_models() -> None:
    from ahp_backends.policy_fields import event_fields
    from ahp_protocol.wire.events import EVENT_MODELS

    for event_type in ("tool.before", "tool.permission.request"):
        model = EVENT_MODELS[event_type]
        names = {f.alias or n for n, f in model.model_fields.items()}
        assert set(event_fields(event_type)) == names
    assert event_fields("tool.before")["tool"]["input"] is None  # open: any key


def test_the_fields_file_is_what_the_models_derive() -> None:
    # event_fields.json is output (read so that a per_event policy start needs no
    # pydantic); the models stay the one source: any difference fails here.
    from ahp_backends.policy_fields import FIELDS_FILE, derive_event_fields

    written = json.loads(FIELDS_FILE.read_text("utf-8"))
    assert written == derive_event_fields(), (
        f"{FIELDS_FILE.name} differs from the event models: "
        "run `uv run python -m ahp_backends.policy_fields` and commit the file"
    )


def test_loading_a_policy_imports_no_pydantic(tmp_path: Path) -> None:
    # A per_event policy backend loads its rules (their fields checked) at every call.
    rules = tmp_path / "p.toml"
    rules.write_text(
        '[[rule]]\nname = "r"\nwhen = \'event.tool.kind == "shell"\'\n'
        'action = "deny"\nreason = "no"\n',
        "utf-8",
    )
    probe = (
        "import sys; from ahp_backends.policy import parse_policy; "
        "assert len(parse_policy(sys.argv[1]).rules) == 1; print('pydantic' in sys.modules)"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe, str(rules)], capture_output=True, text=True, timeout=30
    )
    assert (done.returncode, done.stdout.strip()) == (0, "False"), done.stderr


def test_a_shadowed_event_is_not_hoisted() -> None:
    from ahp_backends.policy_cel import Compiler

    compiler = Compiler()
    source = '["a push --force"].exists(event, event.matches("push"))'
    compiled = compiler.check(compiler.scan(source))
    assert not compiler.hoisted
    assert compiled.program.eval(data=compiler.bindings({})).plain_value() is True


def test_a_huge_number_elsewhere_in_the_event_does_not_switch_the_policy_off(
    rules_file: Path, clients: Any, stdio_backend: Callable[..., Any]
) -> None:
    """JSON allows any integer; CEL's are 64-bit. One beyond int64 in a field no rule
    reads made every rule fail (and so not match) before: rm -rf went through."""
    backend = stdio_backend("policy", "--rules", str(rules_file))
    tool = shell("rm -rf /")
    tool["input"]["timeout"] = 2**70
    tool["input"]["nested"] = {"big": [-(2**64), 10**400]}
    got = backend.request(intercept(event_for(clients, tool)))
    assert effects_of(got) == deny_of(RM_RF)
    assert "did not match" not in backend.stderr_text()

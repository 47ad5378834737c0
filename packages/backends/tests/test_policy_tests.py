"""``ahp-backend policy test``: test tables run against real backend processes.

Every test runs ``ahp-backend policy test`` as a process, which starts the rules file's backend
(``ahp-backend denylist --rules FILE`` or ``ahp-backend policy --rules FILE``) as a
persistent stdio process and sends each case through ahp-protocol's dispatcher.
Nothing here evaluates a rule: the outcomes are the backends' own.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

PY = sys.executable

RULES = """\
[[rules]]
reason = "Force pushes rewrite shared history"
code = "com.example.policy.force-push"
kind = "shell"
message = "Push to a branch of your own instead."
[rules.input]
command = "git push.*(-f|--force)"

[[rules]]
reason = "Secrets are off limits"
code = "com.example.policy.secrets"
paths = ["secrets/**"]
"""


def shell(command: str) -> str:
    """A partial tool.before event for a shell command, as a table line."""
    return (
        '{ type = "tool.before", tool = { name = "Bash", kind = "shell", '
        f"input = {{ command = {json.dumps(command)} }} }} }}"
    )


PASSING = f"""\
denylist = "rules.toml"

[[case]]
name = "force push is denied"
event = {shell("git push -f origin main")}
expect = "deny"
code = "com.example.policy.force-push"
reason = "Force pushes rewrite shared history"
messages = ["Push to a branch of your own instead."]

[[case]]
name = "ls is fine"
event = {shell("ls -la")}
expect = "none"

[[case]]
name = "a relative secret resolves against the session cwd"
expect = "deny"
reason_contains = "off limits"
[case.event]
type = "tool.before"
tool = {{ name = "Read", kind = "file_read", input = {{ file_path = "/repo/secrets/key.pem" }} }}
"""

FAILING = f"""\
denylist = "rules.toml"

[[case]]
name = "ls is fine"
event = {shell("ls")}
expect = "none"

[[case]]
name = "force push is allowed"
event = {shell("git push --force")}
expect = "none"

[[case]]
name = "wrong code and reason"
event = {shell("git push -f")}
expect = "deny"
code = "com.example.policy.other"
reason_contains = "forbidden"

[[case]]
name = "plain push is denied"
event = {shell("git push origin main")}
expect = "deny"
"""


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(textwrap.dedent(text), "utf-8")
    return path


@pytest.fixture
def project(tmp_path: Path) -> Path:
    write(tmp_path, "rules.toml", RULES)
    return tmp_path


Run = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture
def run(backend_argv: Callable[..., list[str]]) -> Run:
    """``ahp-backend policy test ARGS`` in folder ``cwd``, as a process."""

    def start(*args: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            backend_argv("policy", "test", *map(str, args)),
            capture_output=True,
            text=True,
            timeout=60,
            cwd=cwd,
            stdin=subprocess.DEVNULL,
        )

    return start


def processes_naming(needle: str) -> list[int]:
    """Live processes whose command line mentions ``needle`` (a unique temp path)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().decode("utf-8", "replace")
        except OSError:
            continue
        if needle in cmdline:
            found.append(int(entry.name))
    return found


# --------------------------------------------------------------------------- outcomes


def test_a_passing_table_exits_0(project: Path, run: Run) -> None:
    table = write(project, "policy_tests.toml", PASSING)
    done = run(table, cwd=project)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == f"{table}: denylist rules.toml, 3 cases"
    assert lines[1:4] == [
        "  PASS  force push is denied",
        "  PASS  ls is fine",
        "  PASS  a relative secret resolves against the session cwd",
    ]
    assert lines[-1] == "3 cases: 3 passed, 0 failed"
    assert done.stderr == ""
    assert processes_naming(str(project)) == []  # the backend process is gone


def test_a_failing_table_exits_1_with_a_readable_diff(project: Path, run: Run) -> None:
    table = write(project, "t.toml", FAILING)
    done = run("t.toml", cwd=project)
    assert done.returncode == 1, done.stdout + done.stderr
    out = done.stdout
    assert "  PASS  ls is fine\n" in out
    assert (
        "  FAIL  force push is allowed  (t.toml:8)\n"
        "        effect:    expected none\n"
        "                   got      deny\n"
        '        got: deny, code "com.example.policy.force-push", '
        'reason "Force pushes rewrite shared history"\n'
        '        got: messages ["Push to a branch of your own instead."]\n'
    ) in out
    assert (
        "  FAIL  wrong code and reason  (t.toml:13)\n"
        '        code:      expected "com.example.policy.other"\n'
        '                   got      "com.example.policy.force-push"\n'
        '        reason:    expected contains "forbidden"\n'
        '                   got      "Force pushes rewrite shared history"\n'
    ) in out
    assert (
        "  FAIL  plain push is denied  (t.toml:20)\n"
        "        effect:    expected deny\n"
        "                   got      none\n"
    ) in out
    assert out.splitlines()[-1] == "4 cases: 1 passed, 3 failed"
    assert table.read_text().splitlines()[7] == "[[case]]"  # the lines named are the cases'


def test_json_output(project: Path, run: Run) -> None:
    write(project, "t.toml", FAILING)
    done = run("t.toml", "--json", cwd=project)
    assert done.returncode == 1
    document = json.loads(done.stdout)
    assert (document["passed"], document["failed"], document["broken"]) == (1, 3, 0)
    assert document["exitCode"] == 1
    (table,) = document["tables"]
    assert table["backend"] == "denylist"
    assert table["policy"] == str(project / "rules.toml")
    by_name = {c["name"]: c for c in table["cases"]}
    allowed = by_name["force push is allowed"]
    assert allowed["status"] == "fail"
    assert allowed["line"] == 8
    assert allowed["expected"] == {"effect": "none"}
    assert allowed["got"] == {
        "effect": "deny",
        "code": "com.example.policy.force-push",
        "reason": "Force pushes rewrite shared history",
        "messages": ["Push to a branch of your own instead."],
    }
    assert allowed["differences"][0] == {"field": "effect", "expected": "none", "got": "deny"}
    wrong = by_name["wrong code and reason"]
    assert wrong["expected"] == {
        "effect": "deny",
        "code": "com.example.policy.other",
        "reasonContains": "forbidden",
    }
    assert by_name["ls is fine"]["status"] == "pass"


def test_advertised_effects_are_what_the_backend_may_use(project: Path, run: Run) -> None:
    # The deny-list's rule carries a message; a harness that advertises only deny gets
    # none, one that advertises only message gets the message and no deny. The backend
    # and the dispatcher decide that, not the runner.
    write(
        project,
        "deny_only.toml",
        f"""\
        denylist = "rules.toml"
        advertise = ["deny"]

        [[case]]
        name = "deny, no message"
        event = {shell("git push -f")}
        expect = "deny"
        messages = []
        """,
    )
    write(
        project,
        "message_only.toml",
        f"""\
        denylist = "rules.toml"
        advertise = ["message"]

        [[case]]
        name = "message, no deny"
        event = {shell("git push -f")}
        expect = "message"
        messages = ["Push to a branch of your own instead."]
        """,
    )
    done = run("deny_only.toml", "message_only.toml", cwd=project)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "  PASS  deny, no message\n" in done.stdout
    assert "  PASS  message, no deny\n" in done.stdout
    assert done.stdout.splitlines()[-1] == "2 cases: 2 passed, 0 failed"


def test_registered_events_and_the_served_configuration(project: Path, run: Run) -> None:
    permission = (
        '{ type = "tool.permission.request", suggestions = [], sandboxBypass = false, '
        'tool = { name = "Bash", kind = "shell", input = { command = "git push -f" } } }'
    )
    case = f"""
        [[case]]
        name = "denied at the permission request"
        event = {permission}
        expect = "deny"
        code = "com.example.policy.force-push"
        """
    write(
        project,
        "explicit.toml",
        'denylist = "rules.toml"\nevents = ["tool.before", "tool.permission.request"]\n'
        + textwrap.dedent(case),
    )
    write(project, "served.toml", 'denylist = "rules.toml"\n' + textwrap.dedent(case))
    done = run("explicit.toml", cwd=project)
    assert done.returncode == 0, done.stdout + done.stderr
    # As served (hooks/configuration) the deny-list intercepts tool.before only.
    done = run("served.toml", cwd=project)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "  ERROR denied at the permission request  (served.toml:3)\n" in done.stdout
    assert (
        "the backend as served does not intercept tool.permission.request "
        "(it intercepts: tool.before); list it in the table's 'events'"
    ) in done.stdout


def test_the_event_the_table_gives_wins_over_the_completion(project: Path, run: Run) -> None:
    # "secrets/**" is relative to session.cwd: the table's cwd, then a case's own session.
    read = '{{ name = "Read", kind = "file_read", input = {{ file_path = "{path}" }} }}'
    write(
        project,
        "cwd.toml",
        f"""\
        denylist = "rules.toml"
        cwd = "/work/app"

        [[case]]
        name = "under the table's cwd"
        event = {{ type = "tool.before", tool = {read.format(path="/work/app/secrets/a")} }}
        expect = "deny"

        [[case]]
        name = "elsewhere"
        event = {{ type = "tool.before", tool = {read.format(path="/repo/secrets/a")} }}
        expect = "none"

        [[case]]
        name = "a case's own session"
        expect = "deny"
        [case.event]
        type = "tool.before"
        session = {{ id = "sess_1", cwd = "/repo" }}
        tool = {read.format(path="/repo/secrets/a")}
        """,
    )
    done = run("cwd.toml", cwd=project)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.count("  PASS  ") == 3


def test_several_tables_one_summary(project: Path, run: Run) -> None:
    write(project, "good.toml", PASSING)
    write(project, "bad.toml", FAILING)
    done = run("good.toml", "bad.toml", cwd=project)
    assert done.returncode == 1
    assert done.stdout.splitlines()[-1] == "7 cases: 4 passed, 3 failed"


# --------------------------------------------------------------------------- broken input


BROKEN = [
    ("invalid TOML", 'denylist = "rules.toml"\n[[case]\n', "t.toml:2: invalid TOML"),
    ("no case", 'denylist = "rules.toml"\n', "t.toml: no [[case]] tables"),
    (
        "no rules file named",
        f'[[case]]\nname = "x"\nevent = {shell("ls")}\nexpect = "none"\n',
        "t.toml: give one of 'policy' (a CEL policy file) or 'denylist'",
    ),
    (
        "both rules files",
        'policy = "rules.toml"\ndenylist = "rules.toml"\n',
        "t.toml: give only one of 'policy'",
    ),
    ("missing rules file", 'denylist = "nope.toml"\n', "t.toml:1: denylist: no rules file at"),
    (
        "unknown top-level key",
        'denylist = "rules.toml"\ncolour = "blue"\n',
        "t.toml:2: colour: unknown top-level key 'colour'",
    ),
    (
        "bad advertise",
        'denylist = "rules.toml"\nadvertise = ["deny", "teleport"]\n'
        f'[[case]]\nname = "x"\nevent = {shell("ls")}\nexpect = "none"\n',
        "t.toml:2: advertise: ",
    ),
    (
        "bad events",
        'denylist = "rules.toml"\nevents = ["tool.progress"]\n',
        "t.toml:2: events: 'tool.progress' is not an interceptable event",
    ),
    (
        "unknown case key",
        f'denylist = "rules.toml"\n\n[[case]]\nname = "x"\nevent = {shell("ls")}\n'
        'expect = "none"\nexpected = "deny"\n',
        "t.toml:7: case[0].expected: unknown key 'expected'",
    ),
    (
        "missing expect",
        f'denylist = "rules.toml"\n\n[[case]]\nname = "x"\nevent = {shell("ls")}\n',
        "t.toml:3: case[0]: missing required key 'expect'",
    ),
    (
        "unknown expectation",
        f'denylist = "rules.toml"\n[[case]]\nname = "x"\nevent = {shell("ls")}\n'
        'expect = "denied"\n',
        "t.toml:5: case[0].expect: must be one of none, deny, ask, allow, message",
    ),
    (
        "code without deny",
        f'denylist = "rules.toml"\n[[case]]\nname = "x"\nevent = {shell("ls")}\n'
        'expect = "none"\ncode = "com.example.x"\n',
        't.toml:6: case[0].code: applies only to expect = "deny"',
    ),
    (
        "messages with none",
        f'denylist = "rules.toml"\n[[case]]\nname = "x"\nevent = {shell("ls")}\n'
        'expect = "none"\nmessages = ["hi"]\n',
        't.toml:6: case[0].messages: expect = "none" is no effect at all',
    ),
    (
        "duplicate names",
        f'denylist = "rules.toml"\n[[case]]\nname = "x"\nevent = {shell("ls")}\n'
        f'expect = "none"\n[[case]]\nname = "x"\nevent = {shell("ls")}\nexpect = "none"\n',
        "t.toml:7: case[1].name: the same name as case[0]",
    ),
    (
        "an event that stays invalid",
        'denylist = "rules.toml"\n[[case]]\nname = "x"\nexpect = "none"\n'
        '[case.event]\ntype = "tool.before"\n'
        'tool = { name = "Bash", origin = "elsewhere", input = { command = "ls" } }\n',
        "t.toml:5: case[0].event.tool.origin: not a valid event once completed",
    ),
    (
        "the same event id twice",
        'denylist = "rules.toml"\n[[case]]\nname = "x"\nexpect = "none"\n'
        'event = { id = "evt_1", type = "tool.before", tool = { name = "Bash", input = {} } }\n'
        '[[case]]\nname = "y"\nexpect = "none"\n'
        'event = { id = "evt_1", type = "tool.before", tool = { name = "Bash", input = {} } }\n',
        "t.toml:9: case[1].event: the same event id as case[0]",
    ),
    (
        "an observed-only event",
        'denylist = "rules.toml"\n[[case]]\nname = "x"\nexpect = "none"\n'
        'event = { type = "session.end", outcome = "completed", reason = "done" }\n',
        "t.toml:5: case[0].event: session.end events are only observed",
    ),
    (
        "a tool without input",
        'denylist = "rules.toml"\n[[case]]\nname = "x"\nexpect = "none"\n'
        'event = { type = "tool.before", tool = { name = "Bash" } }\n',
        "t.toml:5: case[0].event.tool.input: not a valid event once completed",
    ),
    (
        "an event without a type",
        'denylist = "rules.toml"\n[[case]]\nname = "x"\nexpect = "none"\nevent = { tool = {} }\n',
        "t.toml:5: case[0].event: needs a 'type'",
    ),
]


def test_a_broken_table_exits_2_naming_file_and_line(project: Path, run: Run) -> None:
    # One run for every broken table (each is reported on its own), to keep this file fast.
    names = []
    for i, (_, text, _) in enumerate(BROKEN):
        names.append(f"t{i}.toml")
        write(project, names[-1], text)
    done = run(*names, cwd=project)
    assert done.returncode == 2, done.stdout + done.stderr
    missing = [
        (what, message.replace("t.toml", names[i]))
        for i, (what, _, message) in enumerate(BROKEN)
        if message.replace("t.toml", names[i]) not in done.stderr
    ]
    assert missing == [], done.stderr
    assert len(done.stderr.splitlines()) == len(BROKEN)  # one error line per table
    assert "Traceback" not in done.stderr
    assert done.stdout.splitlines()[-1] == (
        f"0 cases: 0 passed, 0 failed; {len(BROKEN)} of {len(BROKEN)} tables could not run"
    )


def test_one_broken_table_does_not_stop_the_others(project: Path, run: Run) -> None:
    write(project, "good.toml", PASSING)
    write(project, "broken.toml", BROKEN[0][1])
    done = run("broken.toml", "good.toml", cwd=project)
    assert done.returncode == 2
    assert "broken.toml:2: invalid TOML" in done.stderr
    assert done.stdout.splitlines()[-1] == (
        "3 cases: 3 passed, 0 failed; 1 of 2 tables could not run"
    )


def test_a_policy_that_does_not_load_is_reported_with_its_own_error(
    project: Path, run: Run
) -> None:
    write(project, "broken_rules.toml", RULES.replace('kind = "shell"', "kind = 3"))
    write(project, "t.toml", PASSING.replace("rules.toml", "broken_rules.toml"))
    write(project, "good.toml", PASSING)
    done = run("t.toml", "good.toml", "--json", cwd=project)
    assert done.returncode == 2
    document = json.loads(done.stdout)
    assert document["broken"] == 1 and document["passed"] == 3
    error = document["tables"][0]["error"]
    assert error.startswith(
        f"t.toml:1: denylist: ahp-backend denylist --rules {project / 'broken_rules.toml'} "
        "did not start: it exited before answering hooks/configuration; its stderr:\n"
    )
    # the backend's own words: the rules file, its line, the rule and field
    assert f"{project / 'broken_rules.toml'}:4: rules[0].kind: must be a string" in error
    text = run("t.toml", cwd=project)
    assert text.returncode == 2
    assert "did not start: it exited before answering" in text.stderr
    assert "broken_rules.toml:4: rules[0].kind" in text.stderr
    assert processes_naming(str(project)) == []


def test_help_prints_the_table_format(tmp_path: Path, run: Run) -> None:
    done = run("--help", cwd=tmp_path)
    assert done.returncode == 0
    assert "usage: ahp-backend policy test" in done.stdout
    for needle in ("[[case]]", "reason_contains", "advertise", 'expect = "deny"'):
        assert needle in done.stdout


@pytest.mark.parametrize("value", ["0", "0.5", "-1", "nan", "600001"])
def test_a_bad_timeout_is_refused(project: Path, run: Run, value: str) -> None:
    write(project, "t.toml", PASSING)
    done = run("t.toml", "--timeout-ms", value, cwd=project)
    assert done.returncode == 2
    assert "--timeout-ms must be at least 1 and at most 600000" in done.stderr


def test_a_missing_table_file(project: Path, run: Run) -> None:
    done = run("absent.toml", cwd=project)
    assert done.returncode == 2
    assert "absent.toml: cannot read the file" in done.stderr


# --------------------------------------------------------------------------- the CEL policy

POLICY = """\
[[rule]]
name = "no-force-push"
when = 'event.tool.kind == "shell" && event.tool.input.command.matches("git push.*(-f|--force)")'
action = "deny"
reason = "Force pushes rewrite shared history"
code = "com.example.policy.force-push"

[[rule]]
name = "ask-before-rm"
when = 'event.tool.kind == "shell" && event.tool.input.command.startsWith("rm ")'
action = "ask"

[[rule]]
name = "ls-is-fine"
when = 'event.tool.kind == "shell" && event.tool.input.command == "ls"'
action = "allow"

[[rule]]
name = "curl-note"
when = 'event.tool.kind == "shell" && event.tool.input.command.contains("curl")'
action = "message"
message = "curl reaches the network"
"""

CEL_CASES = f"""
[[case]]
name = "force push is denied"
event = {shell("git push --force origin main")}
expect = "deny"
code = "com.example.policy.force-push"
reason = "Force pushes rewrite shared history"

[[case]]
name = "rm asks"
event = {shell("rm notes.txt")}
expect = "ask"

[[case]]
name = "ls is allowed"
event = {shell("ls")}
expect = "allow"

[[case]]
name = "curl gets a message"
event = {shell("curl https://example.com")}
expect = "message"
messages = ["curl reaches the network"]

[[case]]
name = "git status has no effect"
event = {shell("git status")}
expect = "none"
"""


def test_a_cel_policy_table(tmp_path: Path, run: Run) -> None:
    write(tmp_path, "policy.toml", POLICY)
    write(
        tmp_path,
        "full.toml",
        'policy = "policy.toml"\nadvertise = ["deny", "ask", "allow", "message"]\n' + CEL_CASES,
    )
    done = run("full.toml", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines()[0] == "full.toml: policy policy.toml, 5 cases"
    assert done.stdout.count("  PASS  ") == 5
    # A harness that advertises only deny: the policy's ask and allow are not sent.
    write(tmp_path, "deny_only.toml", 'policy = "policy.toml"\nadvertise = ["deny"]\n' + CEL_CASES)
    done = run("deny_only.toml", cwd=tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    out = done.stdout
    assert "  PASS  force push is denied\n" in out
    assert (
        "  FAIL  rm asks  (deny_only.toml:11)\n"
        "        effect:    expected ask\n"
        "                   got      none\n"
        "        why: rule 'ask-before-rm' matched, but ask is not advertised\n"
    ) in out
    assert "  FAIL  ls is allowed  (deny_only.toml:16)\n" in out
    assert (
        "  FAIL  curl gets a message  (deny_only.toml:21)\n"
        "        effect:    expected message\n"
        "                   got      none\n"
        '        messages:  expected ["curl reaches the network"]\n'
        "                   got      []\n"
    ) in out
    assert out.splitlines()[-1] == "5 cases: 2 passed, 3 failed"


def test_a_case_the_backend_fails_on_is_undecided_never_a_pass(tmp_path: Path, run: Run) -> None:
    # #26: a deny rule that cannot be evaluated for an event (a Read has no command) is
    # a failure, not a "no": the policy answers a JSON-RPC error. Even a case expecting
    # no effect is then undecided, never a pass (before: PASS, exit 0; then ERROR, exit 1).
    write(
        tmp_path,
        "policy.toml",
        """\
        [[rule]]
        name = "no-rm"
        when = 'event.tool.input.command.startsWith("rm ")'
        action = "deny"
        reason = "No rm."
        """,
    )
    read = '{ type = "tool.before", tool = { name = "Read", kind = "file_read", input = {} } }'
    write(
        tmp_path,
        "t.toml",
        f"""\
        policy = "policy.toml"

        [[case]]
        name = "rm is denied"
        event = {shell("rm -rf build")}
        expect = "deny"

        [[case]]
        name = "a read has no effect"
        event = {read}
        expect = "none"
        """,
    )
    done = run("t.toml", cwd=tmp_path)
    assert done.returncode == 3, done.stdout + done.stderr
    assert done.stdout.splitlines() == [
        "t.toml: policy policy.toml, 2 cases",
        "  PASS  rm is denied",
        "  UNDECIDED a read has no effect  (t.toml:8)",
        "        the backend failed: rpc_error (backend answered with JSON-RPC error -32004 "
        "(backend_internal_error))",
        # #29: why, in the policy's words (the rule, what failed; no value of the event)
        "        why: rule 'no-rm' could not be evaluated (a field it reads is absent "
        "('command'; guard it with has())), so it failed the request",
        "2 cases: 1 passed, 0 failed, 1 undecided (the backend failed: never a pass)",
    ]
    document = json.loads(run("t.toml", "--json", cwd=tmp_path).stdout)
    assert (document["passed"], document["failed"], document["undecided"]) == (1, 0, 1)
    assert document["exitCode"] == 3
    assert [c["status"] for c in document["tables"][0]["cases"]] == ["pass", "undecided"]


def test_a_case_that_got_none_says_why(tmp_path: Path, run: Run) -> None:
    # #29: "expected ask / got none" named no cause. A rule that could not be evaluated
    # (on_error = "skip": it does not match), a rule that matched nothing, no rule at all.
    write(
        tmp_path,
        "policy.toml",
        """\
        [[rule]]
        name = "ask-rm"
        when = 'event.tool.input.command.startsWith("rm ")'
        action = "ask"
        on_error = "skip"

        [[rule]]
        name = "only-at-permission"
        when = 'true'
        action = "deny"
        reason = "r"
        events = "tool.permission.request"
        """,
    )
    read = '{ type = "tool.before", tool = { name = "Read", kind = "file_read", input = {} } }'
    write(
        tmp_path,
        "t.toml",
        f"""\
        policy = "policy.toml"
        advertise = ["deny", "ask"]

        [[case]]
        name = "a read asks"
        event = {read}
        expect = "ask"

        [[case]]
        name = "ls asks"
        event = {shell("ls")}
        expect = "ask"
        """,
    )
    done = run("t.toml", cwd=tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert (
        "        why: rule 'ask-rm' could not be evaluated (a field it reads is absent "
        "('command'; guard it with has())), so it did not match"
    ) in lines
    assert "        why: no rule matched (1 rule applies at tool.before)" in lines


def test_a_cel_policy_that_does_not_compile(tmp_path: Path, run: Run) -> None:
    write(tmp_path, "policy.toml", POLICY.replace('command == "ls"', "command == 3 +"))
    write(tmp_path, "t.toml", 'policy = "policy.toml"\n' + CEL_CASES)
    done = run("t.toml", cwd=tmp_path)
    assert done.returncode == 2
    assert (
        f"error: t.toml:1: policy: ahp-backend policy --rules {tmp_path / 'policy.toml'} "
        "did not start: it exited before answering hooks/configuration; its stderr:\n"
    ) in done.stderr
    assert f"{tmp_path / 'policy.toml'}:15: rule[2].when: rule 'ls-is-fine'" in done.stderr
    assert processes_naming(str(tmp_path)) == []


# --------------------------------------------------------------------------- the README

README = Path(__file__).resolve().parents[1] / "README.md"


def readme_block(marker: str) -> str:
    """The fenced block right after ``<!-- marker -->`` in the backends README."""
    text = README.read_text("utf-8")
    after = text.split(f"<!-- {marker} -->\n", 1)[1]
    fence, rest = after.split("\n", 1)
    assert fence.startswith("```"), f"no fenced block after {marker}"
    return rest.split("\n```\n", 1)[0] + "\n"


def test_the_readme_table_runs_against_the_readme_policy(tmp_path: Path, run: Run) -> None:
    policy = readme_block("policy-example")
    write(tmp_path, "policy.toml", policy)
    write(tmp_path, "policy_tests.toml", readme_block("policy-test-example"))
    done = run("policy_tests.toml", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines()[-1] == "4 cases: 4 passed, 0 failed"
    # The failure the README shows, from the edit it describes, printed as it shows it.
    assert "(-f|--force)" in policy
    write(tmp_path, "policy.toml", policy.replace("(-f|--force)", "(--force)"))
    done = run("policy_tests.toml", cwd=tmp_path)
    assert done.returncode == 1
    assert done.stdout == readme_block("policy-test-failure")


def test_each_case_waits_a_bounded_time(tmp_path: Path, run: Run) -> None:
    # A policy that takes seconds on one event: within CEL's iteration budget (99 x 99
    # iterations), each searching 500 KB with RE2 (linear, ~1 ms each).
    write(
        tmp_path,
        "policy.toml",
        """\
        [[rule]]
        name = "slow"
        when = '''event.tool.input.xs.exists(x, event.tool.input.xs.exists(y,
                   event.tool.input.command.matches(event.tool.input.pattern)))'''
        action = "deny"
        reason = "never reached"
        """,
    )
    slow = (
        '{ type = "tool.before", tool = { name = "Bash", kind = "shell", input = { '
        f'command = "{"ab" * 250_000}", pattern = "(a|b)+c", xs = {list(range(99))} }} }} }}'
    )
    write(
        tmp_path,
        "t.toml",
        f"""\
        policy = "policy.toml"

        [[case]]
        name = "stuck"
        event = {slow}
        expect = "none"

        [[case]]
        name = "after it"
        event = {shell("ls")}
        expect = "none"
        """,
    )
    done = run("t.toml", "--timeout-ms", "1000", cwd=tmp_path)
    assert done.returncode == 3, done.stdout + done.stderr  # undecided: never a pass
    assert (
        "  UNDECIDED stuck  (t.toml:3)\n"
        "        no answer within 1 s\n"
        "  UNDECIDED after it  (t.toml:8)\n"
        "        not run: no answer to 'stuck' yet\n"
    ) in done.stdout
    assert processes_naming(str(tmp_path)) == []  # the stuck backend was killed

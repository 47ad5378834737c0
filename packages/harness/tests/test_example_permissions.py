"""Every claim the example permission files make, checked through the real layers.

Each example is loaded with :func:`ahp_harness.permissions.load_file` /
:meth:`Permissions.from_files` and every call is decided the way the gate decides it:
the managed, user and mode decisions of :class:`Permissions` and the sandbox check,
folded by :func:`ahp_harness.precedence.decide` (no AHP step). The tables below mirror
the comments in the files, one claim per row; ``test_every_comment_is_covered`` keeps
the two in step (a file whose comments change must change its table).

- a single-command ``allow`` rule never matches a chained or multi-line command: a
  table of tricky commands (line breaks, ``\\r``, ``;``, ``&&``, ``||``, ``|``, ``&``,
  ``$( )``, backticks, process substitution, redirections, ``--output=``, ``-o``...)
  against every command the rule allows, and a property: any argument holding a
  character outside the documented set is never allowed;
- secret files are refused to every file tool and hidden from a folder search (each
  file judged as a search of that file alone: :meth:`Permissions.hidden_from_search`);
- the tripwires catch what their comments say they catch, and their comments say
  what they miss.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from ahp_harness.permissions import Permissions, load_file
from ahp_harness.precedence import decide
from ahp_harness.sandbox import Sandbox, SandboxViolation
from ahp_harness.tools import TOOLS
from ahp_harness.tools.base import ToolInputError
from hypothesis import given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).parent))

from fake_openai import FakeOpenAI, text_response, tool_call_response

REPO = Path(__file__).resolve().parents[3]
PERMISSIONS = REPO / "examples" / "permissions"
DEMO = REPO / "packages" / "harness" / "src" / "ahp_harness" / "demo_files"
DEFAULT = PERMISSIONS / "default.toml"
READ_ONLY_ISH = PERMISSIONS / "read-only-ish.toml"
STRICT = PERMISSIONS / "strict-managed.toml"
DOCS_ONLY = PERMISSIONS / "docs-only.toml"
DEMO_USER = DEMO / "permissions.toml"
DEMO_MANAGED = DEMO / "managed.toml"
EXAMPLES = [DEFAULT, READ_ONLY_ISH, STRICT, DOCS_ONLY, DEMO_USER, DEMO_MANAGED]

#: The commands each single-command allow rule lets through without a prompt.
ALLOWED_COMMANDS = {
    DEFAULT: ["pwd", "ls", "git status", "git diff", "git log"],
    READ_ONLY_ISH: ["pwd", "ls", "git status", "git diff", "git log", "git show"],
    DEMO_USER: ["pwd", "ls", "git status", "git diff", "git log"],
}
#: Ordinary uses that match ("arguments are plain words ... a listed long option, or --").
PLAIN_ARGUMENTS = [
    "",
    " -la src",
    " -1 --oneline --stat",
    " HEAD~1..HEAD -- src/app.py",
    " --format=%H:%an --since=2.weeks",
    "  -R   docs",
    " a=b main@ +x",
]
#: Argument tails that make a call more than one command, or more than an inspection.
TRICKY_TAILS = [
    "\ntouch /outside/x",
    " src\ntouch /outside/x",
    "\n",
    " \n",
    "\rtouch x",
    " -la\r\n",
    "; rm -rf .",
    ";rm x",
    " && rm x",
    "&&rm x",
    " || rm x",
    " | sh",
    "|sh",
    " & rm x",
    " &",
    " $(rm x)",
    " `rm x`",
    " <(rm x)",
    " >(rm x)",
    " > out.txt",
    " >out.txt",
    " >> out.txt",
    " 2>/outside/x",
    " < /etc/passwd",
    " --output=/outside/x",
    " --output /outside/x",
    " --outp=/outside/x",  # git accepts abbreviated long options
    " -o /outside/x",
    " -lo",
    " -O/outside/order",
    " --no-index /etc/passwd /dev/null",
    " --ext-diff",
    " --textconv",
    " *",
    " src/*.py",
    " ?",
    " [ab]",
    " {a,b}",
    " ~",
    " ~/.ssh",
    " /etc",
    " $HOME",
    " ${HOME}",
    " 'a;b'",
    ' "a"',
    " a\\;b",
    " \\\nrm x",
    " # comment\nrm x",
    "\tx",
    " \x00",
    " \x1b[8m",
    " a\u2028b",
    " a\u00a0b",
    " a\u202eb",
    " !!",
]


@pytest.fixture
def box(tmp_path: Path) -> Path:
    """The workspace the calls are judged in."""
    workspace = tmp_path / "ws"
    workspace.mkdir()
    return workspace


def final(perms: Permissions, workspace: Path, tool_name: str, raw: dict[str, Any]) -> str:
    """The host's decision for one call, as the gate makes it with no AHP step."""
    tool = TOOLS[tool_name]
    try:
        inp = tool.parse_input(raw)
    except ToolInputError:
        return "invalid"  # refused before any rule: never runs
    sandbox = Sandbox([workspace], fetch_hosts=perms.fetch_allowed)
    try:
        sandbox.check(tool, inp)
        violation = None
    except SandboxViolation as exc:
        violation = str(exc)
    try:
        mode = perms.mode_decision(tool, inp, sandbox).decision
    finally:
        sandbox.close()
    managed = perms.managed_decision(tool, inp)
    rule = perms.rule_decision(tool, inp)
    return decide(
        hook_permission="none",
        hook_stopped=False,
        sandbox_violation=violation,
        managed=managed.decision if managed else None,
        rule=rule.decision if rule else None,
        mode=mode,
    ).decision


def user(path: Path, mode: Any = "default") -> Permissions:
    return Permissions.from_files(path, mode=mode)


def managed(path: Path, mode: Any = "default") -> Permissions:
    return Permissions.from_files(None, path, mode=mode)


def shell_rule(perms: Permissions, command: str) -> str | None:
    tool = TOOLS["shell"]
    try:
        inp = tool.parse_input({"command": command})
    except ToolInputError:
        return "invalid"
    found = perms.rule_decision(tool, inp)
    return found.decision if found else None


# -- the files and their comments ------------------------------------------------------

#: Every comment line of every example, hashed: a changed comment fails here until
#: its claims are re-checked below and the digest updated.
COMMENT_DIGESTS = {
    "default.toml": "18ae29ca45118e1b",
    "read-only-ish.toml": "91ab7e6a82c16f4a",
    "strict-managed.toml": "33fb37695448d180",
    "docs-only.toml": "d28d35b11e4ddad1",
    "permissions.toml": "a937647e81e94d2e",
    "managed.toml": "6f558a78c4c8fe5d",
}


def comments(path: Path) -> str:
    lines = path.read_text(encoding="utf-8").splitlines()
    return "\n".join(line for line in lines if line.lstrip().startswith("#"))


def test_every_comment_is_covered() -> None:
    found = set(PERMISSIONS.glob("*.toml")) | {DEMO_USER, DEMO_MANAGED}
    assert found == set(EXAMPLES), "a new example needs its claims checked in this file"
    for path in EXAMPLES:
        assert load_file(path).rules, path
        digest = hashlib.sha256(comments(path).encode()).hexdigest()[:16]
        assert digest == COMMENT_DIGESTS[path.name], (
            f"{path.name}: its comments changed; check each claim in this file's tables, "
            f"then set COMMENT_DIGESTS[{path.name!r}] = {digest!r}"
        )


# -- single-command allow rules -------------------------------------------------------


@pytest.mark.parametrize("path", sorted(ALLOWED_COMMANDS), ids=lambda p: p.name)
def test_the_allow_rule_lets_plain_inspection_commands_through(path: Path, box: Path) -> None:
    perms = user(path)
    for command in ALLOWED_COMMANDS[path]:
        for tail in PLAIN_ARGUMENTS:
            assert final(perms, box, "shell", {"command": command + tail}) == "allow", (
                command + tail
            )
    for other in ("cat README.md", "head x", "git commit -m x", "touch x", "lsof"):
        assert shell_rule(perms, other) is None, other
        assert final(perms, box, "shell", {"command": other}) == "ask", other


@pytest.mark.parametrize("path", sorted(ALLOWED_COMMANDS), ids=lambda p: p.name)
@pytest.mark.parametrize("tail", TRICKY_TAILS, ids=repr)
def test_a_chained_or_multi_line_command_never_matches_the_allow_rule(
    path: Path, tail: str, box: Path
) -> None:
    perms = user(path)
    for command in ALLOWED_COMMANDS[path]:
        full = command + tail
        assert shell_rule(perms, full) != "allow", f"{path.name} allows {full!r}"
        assert final(perms, box, "shell", {"command": full}) in ("ask", "deny", "invalid"), full


def plain(ch: str) -> bool:
    """A character the allow rules' arguments may hold (the files' "plain words")."""
    return ch.isascii() and (ch.isalnum() or ch in "_.,:@%^+/=-~")


@settings(max_examples=300, deadline=None)
@given(
    head=st.text(alphabet="abcXYZ019_./-", max_size=8),
    bad=st.characters(blacklist_categories=("Cs",)).filter(lambda c: not plain(c) and c != " "),
    rest=st.text(max_size=8),
    which=st.integers(min_value=0, max_value=4),
)
def test_any_argument_outside_the_plain_set_is_never_allowed(
    head: str, bad: str, rest: str, which: int
) -> None:
    perms = user(DEFAULT)
    command = ALLOWED_COMMANDS[DEFAULT][which]
    full = f"{command} {head}{bad}{rest}"
    assert shell_rule(perms, full) != "allow", repr(full)


def test_read_only_mode_denies_every_command_despite_the_allow_rule(box: Path) -> None:
    # read-only-ish.toml: "Run with --mode read-only to deny every shell command and fetch
    # instead (a mode's deny beats a rule's allow)."
    perms = user(READ_ONLY_ISH, "read-only")
    for command in ("ls", "git status", "touch x"):
        assert final(perms, box, "shell", {"command": command}) == "deny"
    assert final(perms, box, "fetch", {"url": "http://localhost/"}) == "deny"


def test_read_only_ish_denies_writes_edits_and_fetch_and_asks_other_commands(box: Path) -> None:
    perms = user(READ_ONLY_ISH)
    assert final(perms, box, "write_file", {"path": "a.txt", "content": ""}) == "deny"
    assert final(perms, box, "edit_file", {"path": "a.txt", "old": "a", "new": "b"}) == "deny"
    assert final(perms, box, "fetch", {"url": "http://localhost/"}) == "deny"
    assert final(perms, box, "shell", {"command": "touch a.txt"}) == "ask"
    assert final(perms, box, "shell", {"command": "git diff | sh"}) == "ask"
    assert final(perms, box, "read_file", {"path": "a.txt"}) == "allow"


# -- secrets ----------------------------------------------------------------------------

SECRETS = {
    DEFAULT: [
        ".env",
        "app/.env",
        ".env.local",
        "conf/.env.production",
        "server.pem",
        "certs/tls.key",
        ".ssh/id_rsa",
        "keys/id_ed25519",
        "id_ecdsa",
    ],
    STRICT: [".env", "app/.env", ".env.local", "server.pem", "certs/tls.key", ".git/config"],
    DEMO_MANAGED: [".env", "app/.env"],
}
NOT_SECRET = ["README.md", "src/app.py", "envelope.txt", "docs/keys.md", "id_rsa.pub"]


def secret_calls(path: str) -> list[tuple[str, dict[str, Any]]]:
    return [
        ("read_file", {"path": path}),
        ("write_file", {"path": path, "content": "x"}),
        ("edit_file", {"path": path, "old": "a", "new": "b"}),
        ("search", {"pattern": "KEY", "path": path}),
    ]


@pytest.mark.parametrize("path", sorted(SECRETS), ids=lambda p: p.name)
def test_secret_files_are_refused_to_every_file_tool(path: Path, box: Path) -> None:
    is_managed = path in (STRICT, DEMO_MANAGED)
    for mode in ("default", "accept-edits", "read-only"):
        perms = managed(path, mode) if is_managed else user(path, mode)
        for secret in SECRETS[path]:
            for tool, raw in secret_calls(secret):
                assert final(perms, box, tool, raw) == "deny", (mode, tool, secret)
        for plain in NOT_SECRET:
            assert final(perms, box, "read_file", {"path": plain}) == "allow", plain


@pytest.mark.parametrize("path", sorted(SECRETS), ids=lambda p: p.name)
def test_a_folder_search_skips_secret_files(path: Path) -> None:
    is_managed = path in (STRICT, DEMO_MANAGED)
    perms = managed(path) if is_managed else user(path)
    for secret in SECRETS[path]:
        assert perms.hidden_from_search("KEY", secret), secret
        assert perms.hidden_from_search("KEY", f"/work/ws/{secret}"), secret
    for plain in NOT_SECRET:
        assert perms.hidden_from_search("KEY", plain) is None, plain


def test_a_user_allow_cannot_show_what_a_managed_rule_hides(tmp_path: Path) -> None:
    allow_all = tmp_path / "allow.toml"
    allow_all.write_text('[[rules]]\ndecision = "allow"\ntool = "search"\nglob = "*"\n')
    perms = Permissions.from_files(allow_all, DEMO_MANAGED)
    assert perms.hidden_from_search("x", "app/.env") == (
        "environment files hold secrets (managed policy)"
    )
    assert perms.hidden_from_search("x", "app/main.py") is None
    assert Permissions().hidden_from_search("x", ".env") is None  # no rules: nothing hidden


def test_shell_commands_are_not_parsed_for_paths(box: Path) -> None:
    # "Shell commands are not parsed for paths: `cat .env` is not matched here, and asks."
    for perms in (user(DEFAULT), managed(DEMO_MANAGED), managed(STRICT)):
        assert final(perms, box, "shell", {"command": "cat .env"}) == "ask"


# -- tripwires and the rest -------------------------------------------------------------


# "rm with a recursive option anywhere among its arguments (-r, -R, a cluster such as -rf
# or -fR, --recursive or an abbreviation such as --rec), in any order, before or after the
# operands ("rm -f -r x", "rm x -rf"), after sudo, ; && | or $( ) ("ls; rm -rf .")"
RM_CAUGHT = (
    "rm -r x",
    "rm -R x",
    "rm -rf x",
    "rm -fR build",
    "rm -vrf x",
    "rm -f -r x",
    "rm -r -f x",
    "rm -v -rf x",
    "rm --recursive x",
    "rm --force --recursive x",
    "rm x --recursive",
    "rm --rec x",
    "rm x -rf",
    "sudo rm -rf /",
    "ls; rm -rf .",
    "ls && rm -rf .",
    "echo x | rm -r x",
    "echo $(rm -rf x)",
)
# "A command spelled otherwise (r''m -rf, r\\m -rf, "rm" -rf, $RM -rf, find -delete,
# python -c ...) is not caught"; nor is a delete that is not recursive.
RM_MISSED = (
    "r''m -rf .",
    "r\\m -rf .",
    '"rm" -rf .',
    "$RM -rf .",
    "find . -delete",
    "python -c 'import shutil; shutil.rmtree(\"x\")'",
    "rm -f build/x.o",
    "rm x.o; ls -R",
)
# strict-managed: "git ... push with -f (alone or in a cluster such as -fu), --force,
# --force-with-lease (or an abbreviation such as --forc) or a refspec that starts with +
# (git push origin +main), in any order"
PUSH_CAUGHT = (
    "git push -f origin main",
    "git push origin main -f",
    "git push -f",
    "git push --force",
    "git push --force-with-lease origin main",
    "git push --forc",
    "git push -fu origin main",
    "git push -uf origin main",
    "git push origin +main",
    "git -C . push -f",
)
# "git push '-f'), a git alias or --mirror is not caught"; nor is a push that does not force.
PUSH_MISSED = (
    "git push '-f'",
    "git pf",
    "git push --mirror",
    "git push origin main",
    "git push origin feature-fix",
    "git push -u origin main",
)


def test_default_tripwires_catch_plain_spellings_only(box: Path) -> None:
    perms = user(DEFAULT)
    for rm in RM_CAUGHT:
        assert final(perms, box, "shell", {"command": rm}) == "deny", rm
    for missed in RM_MISSED:
        assert shell_rule(perms, missed) is None, missed
        assert final(perms, box, "shell", {"command": missed}) == "ask", missed
    assert final(perms, box, "shell", {"command": "git push origin main"}) == "ask"
    assert shell_rule(perms, "git push origin main") == "ask"
    assert shell_rule(perms, "git -C . push") is None  # no allow rule matches: asks
    assert final(perms, box, "shell", {"command": "git -C . push"}) == "ask"
    assert final(perms, box, "fetch", {"url": "http://localhost/"}) == "ask"
    assert perms.fetch_allowed("localhost") and perms.fetch_allowed("127.0.0.1")
    assert not perms.fetch_allowed("example.com")


def test_strict_managed_tripwires_and_fetch_bound(box: Path, tmp_path: Path) -> None:
    both = Permissions.from_files(DEFAULT, STRICT)
    for caught in ("sudo make install", "curl -s http://x/", *PUSH_CAUGHT):
        assert final(both, box, "shell", {"command": caught}) == "deny", caught
    for missed in ("s''udo make install", "c''url -s http://x/", "/usr/bin/cu\\rl x", *PUSH_MISSED):
        assert final(both, box, "shell", {"command": missed}) == "ask", missed
    assert final(both, box, "shell", {"command": "git push origin main"}) == "ask"
    assert final(both, box, "fetch", {"url": "http://localhost/"}) == "ask"
    # "fetch may reach at most these hosts, whatever the user's file lists."
    wide = tmp_path / "wide.toml"
    wide.write_text('fetch_hosts = ["localhost", "example.com"]\n')
    bounded = Permissions.from_files(wide, STRICT)
    assert bounded.fetch_allowed("localhost") and not bounded.fetch_allowed("example.com")
    # "Nothing the user's file ... can relax a managed deny or ask."
    relax = tmp_path / "relax.toml"
    relax.write_text('fetch_hosts = ["localhost"]\n\n[[rules]]\ndecision = "allow"\n')
    relaxed = Permissions.from_files(relax, STRICT)
    assert final(relaxed, box, "shell", {"command": "sudo x"}) == "deny"
    assert final(relaxed, box, "fetch", {"url": "http://localhost/"}) == "ask"
    assert final(relaxed, box, "read_file", {"path": ".env"}) == "deny"


def test_docs_only_allows_edits_under_docs_only(box: Path) -> None:
    perms = user(DOCS_ONLY)
    for tool, extra in (("write_file", {"content": ""}), ("edit_file", {"old": "a", "new": "b"})):
        assert final(perms, box, tool, {"path": "docs/a.md", **extra}) == "allow"
        assert final(perms, box, tool, {"path": "docs/sub/b.md", **extra}) == "allow"
        for outside in ("src/a.py", "docs/../src/a.py", "docsx/a.md", "a/docs/b.md"):
            assert final(perms, box, tool, {"path": outside, **extra}) == "deny", outside
    assert final(perms, box, "read_file", {"path": "src/a.py"}) == "allow"


def test_docs_only_matches_paths_as_written(box: Path) -> None:
    # "a symlink under docs/ that points elsewhere in the workspace is followed"
    (box / "src").mkdir()
    (box / "docs").mkdir()
    (box / "docs" / "link").symlink_to("../src/app.py")
    raw = {"path": "docs/link", "content": ""}
    assert final(user(DOCS_ONLY), box, "write_file", raw) == "allow"
    sandbox = Sandbox([box])
    try:
        assert sandbox.resolve("docs/link") == (box / "src" / "app.py").resolve()
    finally:
        sandbox.close()


def test_demo_files(box: Path) -> None:
    both = Permissions.from_files(DEMO_USER, DEMO_MANAGED)
    assert final(both, box, "shell", {"command": "ls"}) == "allow"
    assert final(both, box, "shell", {"command": "rm -rf build"}) == "ask"  # the mode asks
    assert final(both, box, "read_file", {"path": "README.md"}) == "allow"
    assert final(both, box, "write_file", {"path": "notes/a.txt", "content": ""}) == "ask"
    # managed: "nothing a user rule, the mode or any AHP backend says can relax it"
    assert final(both, box, "read_file", {"path": ".env"}) == "deny"
    verdict = decide(
        hook_permission="allow",
        hook_stopped=False,
        sandbox_violation=None,
        managed="deny",
        rule="allow",
        mode="allow",
    )
    assert verdict.decision == "deny"


# -- a folder search through the harness --------------------------------------------------

_SCRIPT = Path(sys.executable).parent / "ahp-harness"
HARNESS = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "ahp_harness.cli"]


@pytest.mark.parametrize(("permissions", "managed_file"), [(DEFAULT, None), (None, STRICT)])
def test_a_folder_search_through_the_harness_never_returns_a_secret(
    tmp_path: Path, permissions: Path | None, managed_file: Path | None
) -> None:
    # The model (a fake chat-completions server on 127.0.0.1) searches the whole
    # workspace; the tool result it is sent next is what the search returned.
    workspace = tmp_path / "ws"
    (workspace / "src").mkdir(parents=True)
    (workspace / "certs").mkdir()
    (workspace / "src" / "app.py").write_text("KEY = 'public-value'\n")
    (workspace / ".env").write_text("KEY=env-secret-1\n")
    (workspace / "src" / ".env.local").write_text("KEY=env-secret-2\n")
    (workspace / "certs" / "tls.pem").write_text("KEY pem-secret-3\n")
    (workspace / "certs" / "tls.key").write_text("KEY key-secret-4\n")
    args = ["--permissions", str(permissions)] if permissions else []
    args += ["--managed", str(managed_file)] if managed_file else []
    with FakeOpenAI() as fake:
        fake.answer(tool_call_response(("call_1", "search", {"pattern": "KEY"})))
        fake.answer(text_response("done"))
        done = subprocess.run(
            [
                *HARNESS,
                "run",
                "--workspace",
                str(workspace),
                "--model",
                "openai",
                "--base-url",
                fake.base_url,
                "--model-name",
                "fake-model",
                "--api-key-env",
                "FAKE_OPENAI_KEY",
                "--non-interactive",
                "--approve",
                "never",
                "--transcript",
                str(tmp_path / "t.jsonl"),
                "--audit-log",
                str(tmp_path / "a.jsonl"),
                *args,
            ],
            cwd=tmp_path,
            env={**os.environ, "FAKE_OPENAI_KEY": "k", "NO_COLOR": "1", "TERM": "dumb"},
            capture_output=True,
            text=True,
            timeout=50,
            stdin=subprocess.DEVNULL,
            check=False,
        )
        requests = fake.requests
    assert done.returncode == 0, done.stderr
    assert len(requests) == 2, (done.stdout, done.stderr)
    sent = json.dumps(requests[1].body)
    assert "src/app.py:1: KEY = 'public-value'" in sent, sent
    for secret in ("env-secret-1", "env-secret-2", "pem-secret-3", "key-secret-4"):
        assert secret not in sent, f"search returned {secret}"
    assert "4 file(s) not searched: the permission rules keep them from search" in sent

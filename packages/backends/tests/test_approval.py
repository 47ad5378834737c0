"""``ahp-backend approval``: requirements, grants, transports, both clients, the store.

What this file shows, with real processes (fixtures in ``conftest.py``):

- one table of tool calls -> expected verdict, against a store whose grants were
  made with the ``grant`` command (one of them then revoked), over stdio
  ``persistent``, stdio ``per_event`` and HTTP, through our client and the official
  SDK's: both settle every case as the table says. A live grant gives ``allow``
  (none where the host takes no allow); a required call without one gives ``ask``
  plus a message where the host takes them, else a deny whose reason carries the
  exact grant command; ``tool.permission.request`` (no ask there) denies;
- the grant command in a deny reason, run as given, approves exactly that call;
- ``hooks/configuration`` defaults: registrations without subscriptions work;
- grants expire (an injected clock at unit level; one process-level test waits
  about a second), revocation takes effect, expired grants are listed as expired;
- the store survives a restart and concurrent ``grant`` processes while the server
  answers (every grant recorded once, all honoured);
- a duplicate delivery gets the first answer even after a grant was added;
- bad inputs stop the process with the file, line or field and the reason: a
  requirements file (TOML, unknown key, bad regex), ``--require``, ``--expires``, a
  store that is not one, ``list``/``revoke`` on a missing store, an unknown id.
"""

from __future__ import annotations

import json
import shlex
import sqlite3
import subprocess
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from ahp_backends.approval import (
    Approvals,
    Store,
    StoreError,
    grant_command,
    literal_regex,
    load_requirements,
    parse_duration,
    parse_requirement,
    subject_of,
)
from ahp_backends.db import shown
from ahp_backends.denylist import ConfigError
from hypothesis import given
from hypothesis import strategies as st

from kit_testing import intercept_request

REPO = Path(__file__).resolve().parents[3]
EXAMPLE_CONFIG = REPO / "examples" / "backends" / "approval.toml"
DENY_CODE = "com.example.ahp.approval.required"
PUSH = r"Bash:\bgit\s+push\b"
CONFIG = """\
[[require]]
tool = "Bash"
match = "\\\\b(npm|pip)\\\\s+install\\\\b"
reason = "New dependencies need review."
"""
INSTALL = r"Bash:\b(npm|pip)\s+install\b"
Run = Callable[..., subprocess.CompletedProcess[bytes]]


def bash(command: str) -> dict[str, Any]:
    return {"name": "Bash", "kind": "shell", "input": {"command": command}, "origin": "native"}


def fetch(url: str) -> dict[str, Any]:
    return {"name": "WebFetch", "kind": "fetch", "input": {"url": url}, "origin": "native"}


def read(path: str) -> dict[str, Any]:
    return {"name": "Read", "kind": "read", "input": {"path": path}, "origin": "native"}


def ok(done: subprocess.CompletedProcess[bytes]) -> str:
    assert done.returncode == 0, done.stderr.decode()
    return done.stdout.decode()


@pytest.fixture
def store(database: str, run_backend: Run) -> str:
    """A store with grants made by the CLI: 1 push main, 2 docs fetches, 3 Read, 4 revoked.

    On either engine (``database``: a fresh SQLite file or PostgreSQL database)."""
    path = database
    grants = [
        ["--tool", "Bash", "--match", "git push origin main"],
        ["--tool", "WebFetch", "--match", r"https://docs\.example/.*", "--expires", "1h"],
        ["--tool", "Read", "--match", ".*", "--expires", "7d"],
        ["--tool", "Bash", "--match", "git push origin old"],
    ]
    for number, args in enumerate(grants, start=1):
        assert f"granted #{number}:" in ok(run_backend("approval", "grant", "--db", path, *args))
    assert ok(run_backend("approval", "revoke", "--store", path, "4")).strip() == "revoked #4"
    return path


@pytest.fixture
def config(tmp_path: Path) -> Path:
    path = tmp_path / "approval.toml"
    path.write_text(CONFIG, "utf-8")
    return path


def serve_args(store: str, config: Path) -> tuple[str, ...]:
    return (
        "--store",
        store,
        "--require",
        PUSH,
        "--require",
        "WebFetch",
        "--config",
        str(config),
    )


def command_for(store: str, tool: str, subject: str) -> str:
    quoted = shlex.quote(literal_regex(subject))
    return (
        f"ahp-backend approval grant --db {shlex.quote(shown(store))} --tool {tool} "
        f"--match {quoted} --expires 1h"
    )


def denied(store: str, requirement: str, tool: str, subject: str, why: str = "") -> tuple[Any, ...]:
    reason = (
        f"Approval required ({requirement}){why}. No live grant covers this {tool} call; "
        f"to approve it, run: {command_for(store, tool, subject)}"
    )
    return ("deny", reason, DENY_CODE, ())


def asked(store: str, requirement: str, tool: str, subject: str, why: str = "") -> tuple[Any, ...]:
    message = (
        f"Approval required ({requirement}){why}. Approve this {tool} call when asked, or "
        f"approve it ahead of time: {command_for(store, tool, subject)}"
    )
    return ("ask", None, None, (message,))


NONE: tuple[Any, ...] = ("none", None, None, ())
ALLOW: tuple[Any, ...] = ("allow", None, None, ())
WHY = ": New dependencies need review"

Expect = Callable[[str, str], tuple[Any, ...]]


def needs(requirement: str, tool: str, subject: str, why: str = "") -> Expect:
    """A required call without a grant: ask (+ message) under "full", else a deny."""
    return lambda s, p: (asked if p == "full" else denied)(s, requirement, tool, subject, why)


def granted(s: str, p: str) -> tuple[Any, ...]:
    return ALLOW if p == "full" else NONE


# name, tool, event type, expected verdict (from the store path and the host profile)
TABLE: list[tuple[str, dict[str, Any], str, Expect]] = [
    ("push_main_granted", bash("git push origin main"), "tool.before", granted),
    ("push_dev_required", bash("git push origin dev"), "tool.before",
     needs(PUSH, "Bash", "git push origin dev")),
    ("push_old_revoked", bash("git push origin old"), "tool.before",
     needs(PUSH, "Bash", "git push origin old")),
    ("push_main_force_not_covered", bash("git push origin main -f"), "tool.before",
     needs(PUSH, "Bash", "git push origin main -f")),
    ("npm_install_config", bash("npm install left-pad"), "tool.before",
     needs(INSTALL, "Bash", "npm install left-pad", WHY)),
    ("ls_free", bash("ls -la"), "tool.before", lambda s, p: NONE),
    ("docs_fetch_granted", fetch("https://docs.example/guide?q=1"), "tool.before", granted),
    ("other_fetch_required", fetch("https://elsewhere.example/"), "tool.before",
     needs("WebFetch", "WebFetch", "https://elsewhere.example/")),
    ("read_granted_not_required", read("README.md"), "tool.before", granted),
    ("push_dev_permission_request", bash("git push origin dev"), "tool.permission.request",
     lambda s, p: denied(s, PUSH, "Bash", "git push origin dev")),
    ("push_main_permission_request", bash("git push origin main"), "tool.permission.request",
     granted),
]  # fmt: skip


def summary(verdicts: list[Any]) -> list[tuple[Any, ...]]:
    assert not [v for v in verdicts if v.failed], verdicts
    return [(v.permission, v.reason, v.code, v.messages) for v in verdicts]


@pytest.mark.anyio
@pytest.mark.timeout(240)
@pytest.mark.parametrize(
    ("engine", "kind", "profile"),
    [
        # The store's answers do not depend on the transport: each engine runs the table
        # once per profile, over a persistent and an HTTP server (per_event, the same
        # code one process per event, runs the shorter test below).
        ("sqlite", "persistent", "full"),
        ("sqlite", "http", "deny_only"),
        ("postgresql", "persistent", "full"),
        ("postgresql", "http", "deny_only"),
    ],
)
async def test_both_clients_settle_the_table(
    engine: str,
    kind: str,
    profile: str,
    store: str,
    config: Path,
    clients: Any,
    hook: Callable[..., dict[str, Any]],
    http_backend: Callable[..., Any],
) -> None:
    args = serve_args(store, config)
    server = http_backend("approval", *args) if kind == "http" else None
    hooks = [
        hook("approval", *args, kind=kind, http=server, subscriptions=[clients.subscription()])
    ]
    cases = [clients.Case(name, tool, event_type) for name, tool, event_type, _ in TABLE]
    ours, ours_diagnostics = await clients.ours(hooks, cases, profile)
    sdk, sdk_diagnostics = await clients.sdk(hooks, cases, profile)
    assert ours_diagnostics == [] and sdk_diagnostics == []
    for (name, _, _, want), got_ours, got_sdk in zip(
        TABLE, summary(ours), summary(sdk), strict=True
    ):
        assert got_ours == want(store, profile), name
        assert got_sdk == want(store, profile), name


@pytest.mark.anyio
@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    ("engine", "kind"),
    [
        ("sqlite", "persistent"),
        ("sqlite", "per_event"),
        ("sqlite", "http"),
        ("postgresql", "per_event"),  # one connection (and schema check) per process
        ("postgresql", "http"),
    ],
)
async def test_registration_without_subscriptions_uses_the_served_defaults(
    engine: str,
    kind: str,
    store: str,
    config: Path,
    clients: Any,
    hook: Callable[..., dict[str, Any]],
    http_backend: Callable[..., Any],
) -> None:
    args = serve_args(store, config)
    server = http_backend("approval", *args) if kind == "http" else None
    hooks = [hook("approval", *args, kind=kind, http=server)]
    cases = [
        clients.Case("main", bash("git push origin main")),
        clients.Case("dev", bash("git push x")),
    ]
    for run in (clients.ours, clients.sdk):
        verdicts, diagnostics = await run(hooks, cases, "deny_only")
        assert diagnostics == []
        assert summary(verdicts) == [NONE, denied(store, PUSH, "Bash", "git push x")]


# --------------------------------------------------------------------------- raw requests


def intercept(event: dict[str, Any], effects: tuple[str, ...]) -> dict[str, Any]:
    return intercept_request(event, effects)


def call(
    clients: Any,
    tool: dict[str, Any],
    effects: tuple[str, ...] = ("allow", "deny"),
    event_id: str | None = None,
) -> dict[str, Any]:
    return intercept(
        clients.tool_event(clients.Case("raw", tool), "urn:example:raw", event_id), effects
    )


def effects_of(response: dict[str, Any]) -> list[dict[str, Any]]:
    assert "result" in response, response
    found: list[dict[str, Any]] = response["result"]["effects"]
    return found


def run_the_grant_command(reason: str, backend_argv: Callable[..., list[str]]) -> str:
    """Run the ``ahp-backend approval grant ...`` a deny reason names; its stdout."""
    argv = shlex.split(reason.split("to approve it, run: ", 1)[1])
    assert argv[:2] == ["ahp-backend", "approval"]
    return ok(subprocess.run(backend_argv(*argv[1:]), capture_output=True, timeout=30))


def test_the_grant_command_in_a_deny_reason_approves_that_call(
    database: str,
    clients: Any,
    stdio_backend: Callable[..., Any],
    backend_argv: Callable[..., list[str]],
) -> None:
    path = database
    backend = stdio_backend("approval", "--store", str(path), "--require", "Bash:deploy")
    subject = "deploy --env 'prod' $(whoami) [a.b]*?"
    first = effects_of(backend.request(call(clients, bash(subject))))
    assert [e["type"] for e in first] == ["deny"] and first[0]["code"] == DENY_CODE
    assert "granted #1" in run_the_grant_command(first[0]["reason"], backend_argv)
    assert effects_of(backend.request(call(clients, bash(subject)))) == [{"type": "allow"}]
    # Exactly that call: a longer command is not covered.
    again = effects_of(backend.request(call(clients, bash(subject + " && rm -rf /"))))
    assert [e["type"] for e in again] == ["deny"]


def test_no_credential_in_the_url_reaches_a_deny_reason(
    postgres_url: str,
    clients: Any,
    stdio_backend: Callable[..., Any],
    backend_argv: Callable[..., list[str]],
) -> None:
    # libpq takes a password from the user info, from password= or a percent-encoded
    # spelling of it, and a key's passphrase from sslpassword=: none may reach the model.
    secrets = ("S3cret-user-info", "S3cret-ssl-key", "S3cret-encoded-key")
    scheme, _, rest = postgres_url.partition("://")
    user, _, host = rest.rpartition("@")
    url = (
        f"{scheme}://{user.partition(':')[0] or 'postgres'}:{secrets[0]}@{host}"
        f"{'&' if '?' in host else '?'}sslpassword={secrets[1]}&pass%77ord={secrets[2]}"
        "&application_name=ahp-test"
    )
    backend = stdio_backend("approval", "--store", url, "--require", "Bash:deploy")
    first = effects_of(backend.request(call(clients, bash("deploy"))))
    assert [e["type"] for e in first] == ["deny"]
    reason = first[0]["reason"]
    assert not [s for s in secrets if s in reason], reason
    assert "application_name=ahp-test" in reason  # the rest of the URL is kept
    # and the grant command it names still works (the server trusts loopback here)
    assert "granted #1" in run_the_grant_command(reason, backend_argv)
    assert effects_of(backend.request(call(clients, bash("deploy")))) == [{"type": "allow"}]


def test_a_duplicate_gets_the_first_answer_after_a_grant(
    database: str, clients: Any, stdio_backend: Callable[..., Any], run_backend: Run
) -> None:
    path = database
    backend = stdio_backend("approval", "--store", str(path), "--require", "Bash")
    message = call(clients, bash("make release"), event_id="evt_dup")
    first = backend.request(message)
    assert [e["type"] for e in effects_of(first)] == ["deny"]
    ok(
        run_backend(
            "approval", "grant", "--store", str(path), "--tool", "Bash", "--match", "make release"
        )
    )
    assert backend.request(message) == first  # same source and id: same answer
    fresh = call(clients, bash("make release"), event_id="evt_fresh")
    assert effects_of(backend.request(fresh)) == [{"type": "allow"}]


def test_grants_expire_and_revocation_takes_effect_in_a_running_server(
    database: str, clients: Any, stdio_backend: Callable[..., Any], run_backend: Run
) -> None:
    path = database
    backend = stdio_backend("approval", "--store", str(path), "--require", "Bash:^make")
    grant = json.loads(ok(run_backend(
        "approval", "grant", "--store", str(path), "--tool", "Bash", "--match", "make a",
        "--expires", "3s", "--json",
    )))  # fmt: skip
    assert grant["status"] == "live"
    # Asked at once, before another process starts: on a loaded machine a process
    # start alone can take longer than a short expiry.
    allowed = [{"type": "allow"}]
    assert effects_of(backend.request(call(clients, bash("make a")))) == allowed
    ok(
        run_backend(
            "approval", "grant", "--store", str(path), "--tool", "Bash", "--match", "make b"
        )
    )
    expires = datetime.fromisoformat(grant["expires"])
    while datetime.now(UTC) <= expires:  # the one wait on the clock in this file (~3 s)
        time.sleep(max(0.0, (expires - datetime.now(UTC)).total_seconds()) + 0.05)
    after = effects_of(backend.request(call(clients, bash("make a"), ("allow", "ask"))))
    assert after == [{"type": "ask"}]
    listed = json.loads(ok(run_backend("approval", "list", "--store", str(path), "--json")))
    assert [(g["id"], g["status"]) for g in listed] == [(1, "expired"), (2, "live")]
    text = ok(run_backend("approval", "list", "--store", str(path)))
    assert "expired" in text.splitlines()[1] and "live" in text.splitlines()[2]
    # Revocation: grant 2 stops applying at once.
    assert effects_of(backend.request(call(clients, bash("make b")))) == allowed
    assert ok(run_backend("approval", "revoke", "--store", str(path), "2")).strip() == "revoked #2"
    assert [e["type"] for e in effects_of(backend.request(call(clients, bash("make b"))))] == [
        "deny"
    ]
    everything = json.loads(
        ok(run_backend("approval", "list", "--store", str(path), "--json", "--all"))
    )
    assert [g["status"] for g in everything] == ["expired", "revoked"]
    assert json.loads(ok(run_backend("approval", "list", "--store", str(path), "--json"))) == [
        listed[0]
    ]


def test_the_store_survives_a_restart(
    database: str, clients: Any, stdio_backend: Callable[..., Any], run_backend: Run
) -> None:
    path = database
    ok(run_backend("approval", "grant", "--store", str(path), "--tool", "Bash", "--match", "make"))
    for _ in range(2):
        backend = stdio_backend("approval", "--store", str(path), "--require", "Bash")
        assert effects_of(backend.request(call(clients, bash("make")))) == [{"type": "allow"}]
        assert backend.close() == 0
    # A grant made while no server ran is there for the next one too.
    ok(
        run_backend(
            "approval", "grant", "--store", str(path), "--tool", "Bash", "--match", "make x"
        )
    )
    backend = stdio_backend("approval", "--store", str(path), "--require", "Bash")
    assert effects_of(backend.request(call(clients, bash("make x")))) == [{"type": "allow"}]


@pytest.mark.timeout(120)
def test_concurrent_grants_while_the_server_answers(
    database: str,
    clients: Any,
    http_backend: Callable[..., Any],
    backend_argv: Callable[..., list[str]],
) -> None:
    path = database
    server = http_backend("approval", "--store", str(path), "--require", "Bash")
    count = 8
    processes = [
        subprocess.Popen(
            backend_argv(
                "approval",
                "grant",
                "--store",
                str(path),
                "--tool",
                "Bash",
                "--match",
                f"job {i}",
                "--json",
            ),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for i in range(count)
    ]
    answers: list[list[str]] = []
    while any(p.poll() is None for p in processes):  # the server keeps answering meanwhile
        answers.append([e["type"] for e in effects_of(server.post(call(clients, bash("job 0"))))])
    results = [p.communicate(timeout=30) for p in processes]
    assert [p.returncode for p in processes] == [0] * count, [r[1] for r in results]
    ids = sorted(json.loads(out)["id"] for out, _ in results)
    assert ids == list(range(1, count + 1))
    assert answers and all(a in (["allow"], ["deny"]) for a in answers)  # never a failure
    for i in range(count):
        assert effects_of(server.post(call(clients, bash(f"job {i}")))) == [{"type": "allow"}]
    assert [e["type"] for e in effects_of(server.post(call(clients, bash("job 99"))))] == ["deny"]
    listed = subprocess.run(
        backend_argv("approval", "list", "--store", str(path), "--json"),
        capture_output=True,
        timeout=30,
    )
    assert sorted(g["match"] for g in json.loads(ok(listed))) == sorted(
        f"job {i}" for i in range(count)
    )


def test_two_servers_sharing_one_database_see_every_grant(
    database: str, clients: Any, http_backend: Callable[..., Any], run_backend: Run
) -> None:
    # Two workers behind one load balancer: a grant made with the CLI, or a revocation,
    # applies on both at once (neither caches grants; each asks the database).
    servers = [http_backend("approval", "--db", database, "--require", "Bash") for _ in "ab"]

    def kinds(command: str) -> list[list[str]]:
        answers = [server.post(call(clients, bash(command))) for server in servers]
        return [[e["type"] for e in effects_of(answer)] for answer in answers]

    assert kinds("make deploy") == [["deny"], ["deny"]]
    ok(run_backend("approval", "grant", "--db", database, "--tool", "Bash", "--match", "make .*"))
    assert kinds("make deploy") == [["allow"], ["allow"]]
    assert ok(run_backend("approval", "revoke", "--db", database, "1")).strip() == "revoked #1"
    assert kinds("make deploy") == [["deny"], ["deny"]]


# --------------------------------------------------------------------------- bad inputs


def test_the_example_config_is_valid(tmp_path: Path, run_backend: Run) -> None:
    done = run_backend(
        "approval", "--store", str(tmp_path / "s.db"), "--config", str(EXAMPLE_CONFIG), "--check"
    )
    assert "3 requirements, 0 live grants, valid" in ok(done)


def test_help_documents_the_pattern_format(run_backend: Run) -> None:
    text = ok(run_backend("approval", "--help"))
    for fragment in ("TOOL:REGEX", "[[require]]", "approval grant", "--expires", "WHOLE subject"):
        assert fragment in text


BAD_CONFIGS: list[tuple[str, str, list[str]]] = [
    ("syntax", '[[require]]\ntool = "Bash\n', [":2:", "invalid TOML"]),
    (
        "unknown_key",
        '[[require]]\ntool = "Bash"\nregex = "x"\n',
        [":3:", "require[0].regex", "unknown key"],
    ),
    (
        "bad_regex",
        '[[require]]\ntool = "A"\n\n[[require]]\ntool = "B"\nmatch = "(("\n',
        [":6:", "require[1].match", "invalid regex"],
    ),
    ("no_tool", '[[require]]\nmatch = "x"\n', [":1:", "require[0]", "'tool' is required"]),
    ("empty", "# nothing\n", ["no [[require]] tables"]),
]


@pytest.mark.parametrize(
    ("name", "content", "fragments"), BAD_CONFIGS, ids=[b[0] for b in BAD_CONFIGS]
)
def test_a_bad_config_stops_it_before_serving(
    name: str, content: str, fragments: list[str], tmp_path: Path, clients: Any, run_backend: Run
) -> None:
    path = tmp_path / f"{name}.toml"
    path.write_text(content, "utf-8")
    message = json.dumps(call(clients, bash("x"))).encode() + b"\n"
    done = run_backend(
        "approval",
        "--store",
        str(tmp_path / "s.db"),
        "--config",
        str(path),
        "--once",
        input=message,
    )
    assert done.returncode == 2 and done.stdout == b""
    err = done.stderr.decode()
    assert err.startswith(f"error: {path}")
    for fragment in fragments:
        assert fragment in err, (fragment, err)


def test_bad_arguments_and_stores_are_refused_with_reasons(
    tmp_path: Path, run_backend: Run
) -> None:
    db = str(tmp_path / "s.db")

    def refused(*args: str, code: int = 2) -> str:
        done = run_backend("approval", *args)
        assert done.returncode == code, done
        assert done.stdout == b""
        return done.stderr.decode()

    assert "--require 'Bash:((': invalid regex" in refused("--store", db, "--require", "Bash:((")
    assert "--expires '2 weeks'" in refused(
        "grant", "--store", db, "--tool", "A", "--match", "x", "--expires", "2 weeks"
    )
    assert "--match: invalid regex" in refused(
        "grant", "--store", db, "--tool", "A", "--match", "["
    )
    not_db = tmp_path / "notes.txt"
    not_db.write_text("hello, this is not a database\n" * 10)
    assert f"{not_db}: cannot use the approval store (not an SQLite database)" in refused(
        "--store", str(not_db)
    )
    other = tmp_path / "other.db"
    with sqlite3.connect(other) as connection:
        connection.execute("CREATE TABLE accounts (id INTEGER)")
    connection.close()
    assert "not an approval store" in refused("list", "--store", str(other))
    missing = tmp_path / "absent.db"
    assert "no approval store here" in refused("list", "--store", str(missing))
    assert not missing.exists()  # list never creates one
    assert "directory does not exist" in refused("--store", str(tmp_path / "no" / "s.db"))
    ok(run_backend("approval", "grant", "--store", db, "--tool", "A", "--match", "x"))
    assert "no grant #7" in refused("revoke", "--store", db, "1", "7", code=1)
    listed = json.loads(ok(run_backend("approval", "list", "--store", db, "--json")))
    assert [g["status"] for g in listed] == ["live"]  # all or nothing: #1 was not revoked
    assert "revoked 1 grants" in ok(run_backend("approval", "revoke", "--store", db, "--all"))


# --------------------------------------------------------------------------- unit level


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2026, 8, 24, 8, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now


def test_grants_expire_on_the_injected_clock(database: str) -> None:
    clock = Clock()
    store = Store(database, clock=clock)
    approvals = Approvals(store, [parse_requirement(r"Bash:^git push")], store_hint="/s.db")
    grant = store.add("Bash", "git push origin main", timedelta(minutes=30))
    assert grant.expires == clock.now + timedelta(minutes=30)
    full = frozenset({"allow", "ask", "deny"})

    def kinds(command: str, advertised: frozenset[str] = full) -> list[str]:
        return [e.type for e in approvals.effects("Bash", {"command": command}, advertised)]

    assert kinds("git push origin main") == ["allow"]
    clock.now += timedelta(minutes=29, seconds=59)
    assert kinds("git push origin main") == ["allow"]
    assert grant.status(clock.now) == "live"
    clock.now += timedelta(seconds=1)
    assert grant.status(clock.now) == "expired"
    assert kinds("git push origin main") == ["ask"]
    assert kinds("git push origin main", frozenset({"deny"})) == ["deny"]
    assert kinds("git status") == []
    assert [g.to_json(clock.now)["status"] for g in store.grants()] == ["expired"]
    assert store.grants()[0].to_json(clock.now)["expires"] == "2026-08-24T08:30:00.000Z"
    # allow not accepted: a live grant gives no effect (never a deny or ask).
    store.add("Bash", "git push origin dev", None)
    assert kinds("git push origin dev", frozenset({"deny", "ask"})) == []
    store.close()


def test_a_wildcard_grant_and_a_wildcard_requirement(database: str) -> None:
    store = Store(database, clock=Clock())
    approvals = Approvals(store, [parse_requirement("*")])
    everything = frozenset({"allow", "deny"})
    assert [e.type for e in approvals.effects("Any", {}, everything)] == ["deny"]
    store.add("*", "", None)  # any tool with an empty subject
    assert [e.type for e in approvals.effects("Any", {}, everything)] == ["allow"]
    assert [e.type for e in approvals.effects("Any", {"x": 1}, everything)] == ["deny"]


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("90", 90),
        ("30s", 30),
        ("0.5s", 0.5),
        ("30m", 1800),
        ("2h", 7200),
        ("7d", 604800),
        ("1w", 604800),
    ],
)
def test_durations(text: str, seconds: float) -> None:
    assert parse_duration(text) == timedelta(seconds=seconds)


def test_durations_refused() -> None:
    assert parse_duration("never") is None
    for text in ("", "0", "-1s", "1y", "2 weeks", "1h30m"):
        with pytest.raises(ValueError):
            parse_duration(text)


def test_requirement_patterns() -> None:
    push = parse_requirement(r"Bash:\bgit\s+push\b")
    assert push.matches("Bash", "cd x && git  push origin")
    assert not push.matches("Bash", "git pushy")
    assert not push.matches("Shell", "git push")
    every = parse_requirement("WebFetch")
    assert every.matches("WebFetch", "") and not every.matches("Bash", "")
    for bad in ("", ":x", "Bash:", "Bash:(("):
        with pytest.raises(ValueError):
            parse_requirement(bad)


def test_the_subject_is_the_main_argument() -> None:
    assert subject_of({"command": "ls", "path": "x"}) == "ls"
    assert subject_of({"timeout": 3, "file_path": "a.txt"}) == "a.txt"
    assert subject_of({"url": "https://x"}) == "https://x"
    assert subject_of({"b": 1, "a": [2]}) == '{"a":[2],"b":1}'
    assert subject_of({"command": 3, "path": "p"}) == "p"  # not a string: next field
    assert subject_of({}) == ""


@given(st.text(max_size=60))
def test_literal_regex_matches_exactly_its_text(text: str) -> None:
    import re

    assert re.fullmatch(literal_regex(text), text, re.DOTALL) is not None
    assert re.fullmatch(literal_regex(text), text + "x") is None


@given(st.text(min_size=1, max_size=40))
def test_grant_command_round_trips_through_the_shell(subject: str) -> None:
    import re

    argv = shlex.split(grant_command("/tmp/my store.db", "My Tool", subject))
    assert argv[argv.index("--db") + 1] == "/tmp/my store.db"
    assert argv[argv.index("--tool") + 1] == "My Tool"
    assert re.fullmatch(argv[argv.index("--match") + 1], subject, re.DOTALL)


def test_requirements_file_lines(tmp_path: Path) -> None:
    path = tmp_path / "r.toml"
    path.write_text('[[require]]\ntool = "A"\n\n[[require]]\ntool = "B"\nreason = ""\n', "utf-8")
    with pytest.raises(ConfigError) as caught:
        load_requirements(str(path))
    assert str(caught.value) == f"{path}:6: require[1].reason: must be a non-empty string"


def test_store_refuses_what_is_not_a_store(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="is a directory"):
        Store(str(tmp_path))
    with pytest.raises(StoreError, match="no approval store here"):
        Store(str(tmp_path / "none.db"), create=False)

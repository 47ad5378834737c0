"""The approval center (``ahp-backend approval console``) in a real browser (issue #30).

Real processes: the approval backend holding ``Bash: git push`` calls (``--hold-s``,
HTTP) and the console, on one SQLite store (and, for ``--workers 2``, on PostgreSQL);
calls are held by ``hooks/intercept`` requests whose answers are read on threads, and
decided in headless Chromium (Debian's ``chromium``, driven by Playwright's sync API:
one browser for the module; without it the tests fail saying how to install it).
Each flow asserts the backend's answer to the held call, the receipt in the database
and the page: approve once (held again next time), deny with a reason, approve for the
session (the next call passes, a changed input is held again), nobody decides (today's
answer), two calls decided out of order, markup shown literally and never run, a stale
page's decision refused, forged decisions (no CSRF token, another Origin or Host)
refused, two workers on PostgreSQL. Requests a browser would never send go through
httpx with the session cookie.

With ``AHP_SCREENSHOT=1`` the queue with a held call is saved to
``docs/images/approval-console.png`` (shown in the backends README).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from ahp_backends.approval_queue import Queue, call_digest
from ahp_protocol.testing.events import tool_before

from kit_testing import HeldCall, StderrLines, intercept_request, stop

PY = sys.executable
DEADLINE = 30.0
HOLD_S = 10  # long enough to decide in the browser, short enough never to wait long
WAIT_S = HOLD_S + DEADLINE
"""The longest a held call's answer may take."""
NAME = "Ann Operator"
ROOT = Path(__file__).resolve().parents[3]
SCREENSHOT = ROOT / "docs" / "images" / "approval-console.png"
INSTALL = (
    "the approval console's tests need Debian's chromium: "
    "apt-get update && apt-get install -y --no-install-recommends chromium"
)

pytestmark = pytest.mark.timeout(90)


# --------------------------------------------------------------------------- processes


class Process:
    def __init__(self, argv: list[str], env: dict[str, str] | None = None) -> None:
        self.process = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            env=env,
        )
        assert self.process.stderr is not None
        self.stderr = StderrLines(self.process.stderr, DEADLINE)

    def stop(self) -> None:
        stop(self.process, DEADLINE)


@dataclass
class Console:
    url: str
    secret: str
    backend_url: str
    db: str
    backend: Process


@contextlib.contextmanager
def running(db: str, hold_s: float, *extra: str) -> Iterator[Console]:
    """The approval backend holding ``Bash: git push`` calls (``--hold-s``, HTTP, ``extra``
    options) and the console, both on ``db``."""
    cli = [PY, "-m", "ahp_backends.cli", "approval"]
    backend = Process(
        [*cli, "--db", db, "--require", "Bash:git push", "--hold-s", str(hold_s),
         "--http", "127.0.0.1:0", *extra]
    )  # fmt: skip
    env = {k: v for k, v in os.environ.items() if k != "AHP_APPROVAL_CONSOLE_SECRET"}
    web = Process([*cli, "console", "--db", db], env=env)
    try:
        line = backend.stderr.wait_for("listening on http://")
        backend_url = line.split("listening on ", 1)[1].strip() + "/"
        shown = web.stderr.wait_for("approval console: ")
        found = re.search(r"(http://127\.0\.0\.1:\d+/) \(login secret: (\S+)\)", shown)
        assert found, shown
        yield Console(found.group(1), found.group(2), backend_url, db, backend)
    finally:
        web.stop()
        backend.stop()


@pytest.fixture(scope="module")
def console(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Console]:
    with running(str(tmp_path_factory.mktemp("console") / "approval.db"), HOLD_S) as started:
        yield started


@pytest.fixture(scope="module")
def queue(console: Console) -> Iterator[Queue]:
    """The store as the tests read it: held calls and receipts, straight from the DB."""
    opened = Queue(console.db)
    yield opened
    opened.close()


HARNESS = {"name": "console-tests", "version": "1.0"}


def event(command: str, session: str = "sess_console", cwd: str = "/work/project") -> Any:
    return tool_before(command, harness=HARNESS, session={"id": session, "cwd": cwd})


def send(
    console: Console, command: str, effects: tuple[str, ...] = ("allow", "deny"), **where: str
) -> HeldCall:
    """Send a ``Bash`` call whose request accepts ``effects``."""
    return HeldCall(
        console.backend_url, intercept_request(event(command, **where), effects), WAIT_S
    )


def unique(text: str) -> str:
    return f"{text}-{uuid.uuid4().hex[:8]}"


# --------------------------------------------------------------------------- the browser


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    executable = shutil.which("chromium")
    if executable is None:
        pytest.fail(INSTALL)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=executable, headless=True)
        yield launched
        launched.close()


def logged_in(browser: Any, console: Console, **options: Any) -> Any:
    from playwright.sync_api import expect

    page = browser.new_context(viewport={"width": 1100, "height": 800}, **options).new_page()
    page.set_default_timeout(DEADLINE * 1000)
    page.goto(console.url)
    assert page.url.endswith("/login")
    page.fill("input[name=name]", NAME)
    page.fill("input[name=secret]", console.secret)
    page.click("button[type=submit]")
    expect(page.locator("header .who")).to_contain_text(NAME)
    return page


@pytest.fixture(scope="module")
def page(browser: Any, console: Console) -> Any:
    return logged_in(browser, console)


def card(page: Any, text: str) -> Any:
    from playwright.sync_api import expect

    found = page.locator("article.held", has_text=text)
    expect(found).to_be_visible()  # arrives without a reload (the page's event stream)
    return found


def fresh(page: Any, console: Console) -> None:
    page.goto(console.url)
    page.wait_for_function("() => document.getElementById('live') !== null")


# --------------------------------------------------------------------------- tests


def test_a_wrong_secret_is_refused(browser: Any, console: Console) -> None:
    context = browser.new_context()
    page = context.new_page()
    page.goto(console.url + "login")
    page.fill("input[name=name]", NAME)
    page.fill("input[name=secret]", "not-the-secret")
    page.click("button[type=submit]")
    assert "not the login secret" in page.locator(".error").inner_text()
    page.goto(console.url)
    assert page.url.endswith("/login")
    context.close()


def test_approve_once(page: Any, console: Console, queue: Queue) -> None:
    fresh(page, console)
    command = unique("git push origin main")
    result = send(console, command)
    held = card(page, command)
    held_id = held.get_attribute("data-key")
    assert '"command": "' + command + '"' in held.locator("pre.input").inner_text()
    facts = held.locator(".facts").inner_text()
    assert "sess_console" in facts and "console-tests" in facts and "/work/project" in facts
    assert "git push" in facts  # the rule that asked
    assert re.search(r"\d+ s left", held.locator("[data-countdown]").inner_text())
    if os.environ.get("AHP_SCREENSHOT") == "1":
        SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SCREENSHOT), full_page=True)
    held.get_by_role("button", name="Approve once").click()
    assert [e["type"] for e in result.effects(DEADLINE)] == ["allow"]
    receipt = queue.receipt_for(held_id)  # in the database: who, what, bound to this call
    assert receipt is not None
    assert (receipt.decided_by, receipt.decision, receipt.scope) == (NAME, "approve", "once")
    assert receipt.digest == call_digest("Bash", {"command": command}, "sess_console")
    assert "Approved Bash once" in page.locator(".flash").inner_text()
    row = page.locator("#recent tr", has_text=command)
    assert NAME in row.inner_text() and "approve" in row.inner_text()
    # once: the same call is held again
    again = send(console, command)
    card(page, command).get_by_role("button", name="Deny").click()
    assert [e["type"] for e in again.effects(DEADLINE)] == ["deny"]


def test_deny_with_a_reason(page: Any, console: Console, queue: Queue) -> None:
    fresh(page, console)
    command = unique("git push --force")
    result = send(console, command)
    held = card(page, command)
    held_id = held.get_attribute("data-key")
    held.locator("input[name=reason]").fill("not on a Friday")
    held.get_by_role("button", name="Deny").click()
    effects = result.effects(DEADLINE)
    assert [e["type"] for e in effects] == ["deny"]
    assert effects[0]["reason"] == f"Denied by {NAME}: not on a Friday"
    receipt = queue.receipt_for(held_id)
    assert receipt is not None
    assert (receipt.decided_by, receipt.decision, receipt.reason) == (
        NAME,
        "deny",
        "not on a Friday",
    )
    page.goto(console.url + "decisions")
    row = page.locator("tr", has_text=command)
    assert "not on a Friday" in row.inner_text() and "deny" in row.inner_text()


def test_approve_for_the_session(page: Any, console: Console) -> None:
    fresh(page, console)
    session = unique("sess_grant")
    command = unique("git push origin release")
    result = send(console, command, session=session)
    held = card(page, command)
    held.locator("select[name=duration]").select_option("15m")
    held.get_by_role("button", name="Approve for this session").click()
    assert [e["type"] for e in result.effects(DEADLINE)] == ["allow"]
    # the next identical call of the session passes without a hold (well within HOLD_S)
    assert [e["type"] for e in send(console, command, session=session).effects(3)] == ["allow"]
    assert page.locator("article.held", has_text=command).count() == 0
    # a changed input, in the same session, is held again: the grant is for this input only
    changed = send(console, command + " --force", session=session)
    card(page, command + " --force").get_by_role("button", name="Deny").click()
    assert [e["type"] for e in changed.effects(DEADLINE)] == ["deny"]
    # the session's timeline: the held call, approved, and its receipt
    page.locator("#recent a", has_text=session).first.click()
    timeline = page.locator(".timeline")
    assert session in timeline.locator("h1").inner_text()
    entry = timeline.locator("li.event.approved", has_text=command)
    assert "approved" in entry.inner_text() and "session" in entry.locator(".receipt").inner_text()
    assert "denied" in timeline.locator("li.event.denied", has_text="--force").inner_text()


def test_nobody_decides_then_todays_answer(page: Any, console: Console, queue: Queue) -> None:
    """A second backend on the same store holding for 2 s: its calls show in the console,
    nobody decides, and each gets today's answer (ask where the request takes it, else
    the deny that gives the grant command); the held rows end ``expired``."""
    fresh(page, console)
    short = Process(
        [PY, "-m", "ahp_backends.cli", "approval", "--db", console.db, "--require",
         "Bash:git push", "--hold-s", "2", "--http", "127.0.0.1:0"]
    )  # fmt: skip
    try:
        line = short.stderr.wait_for("listening on http://")
        url = line.split("listening on ", 1)[1].strip() + "/"
        asked, denied = unique("git push asked"), unique("git push denied")
        full = ("allow", "ask", "deny", "message")
        ask = HeldCall(url, intercept_request(event(asked), full), WAIT_S)
        deny = HeldCall(url, intercept_request(event(denied), ("allow", "deny")), WAIT_S)
        ids = [card(page, text).get_attribute("data-key") for text in (asked, denied)]
        ask_effects, deny_effects = ask.effects(DEADLINE), deny.effects(DEADLINE)
    finally:
        short.stop()
    assert "ask" in [e["type"] for e in ask_effects]
    assert [e["type"] for e in deny_effects] == ["deny"]
    assert "ahp-backend approval grant" in deny_effects[0]["reason"]
    statuses = [held.status for held in (queue.get(i) for i in ids) if held is not None]
    assert statuses == ["expired", "expired"]
    assert [queue.receipt_for(i) for i in ids] == [None, None]  # nobody decided
    expect_gone = page.locator("article.held", has_text=asked)
    from playwright.sync_api import expect

    expect(expect_gone).to_have_count(0)  # the live queue drops it


def test_two_held_calls_decided_out_of_order(page: Any, console: Console) -> None:
    fresh(page, console)
    first, second = unique("git push a"), unique("git push b")
    first_result = send(console, first)
    card(page, first)
    second_result = send(console, second)
    card(page, second).get_by_role("button", name="Approve once").click()
    assert [e["type"] for e in second_result.effects(DEADLINE)] == ["allow"]
    assert not first_result.done()
    card(page, first).get_by_role("button", name="Deny").click()
    assert [e["type"] for e in first_result.effects(DEADLINE)] == ["deny"]


def test_an_input_with_markup_is_shown_literally_and_never_runs(
    page: Any, console: Console
) -> None:
    fresh(page, console)
    payload = (
        "git push '<script>window.__pwned = 1</script>"
        '<img src=x onerror="window.__pwned = 2"><b>bold</b>\' '
    ) + unique("x")
    result = send(console, payload)
    held = card(page, "window.__pwned = 1")
    shown = held.locator("pre.input").inner_text()
    assert "<script>window.__pwned = 1</script>" in shown
    assert '<img src=x onerror=\\"window.__pwned = 2\\">' in shown  # JSON-escaped quotes
    assert held.locator("pre.input script, pre.input img, pre.input b").count() == 0
    page.reload()  # rendered by the server as well as merged in live
    held = card(page, "window.__pwned = 1")
    assert page.evaluate("() => window.__pwned") is None
    held.get_by_role("button", name="Deny").click()
    assert [e["type"] for e in result.effects(DEADLINE)] == ["deny"]
    assert page.evaluate("() => window.__pwned") is None


def test_a_decision_already_made_shows_the_queue_message(
    browser: Any, page: Any, console: Console
) -> None:
    fresh(page, console)
    stale = logged_in(browser, console, java_script_enabled=False)  # a page never updated
    command = unique("git push stale")
    result = send(console, command)
    card(page, command)
    stale.goto(console.url)
    card(stale, command).get_by_role("button", name="Approve once")  # shown there too
    card(page, command).get_by_role("button", name="Approve once").click()
    assert [e["type"] for e in result.effects(DEADLINE)] == ["allow"]
    response = stale.expect_navigation
    with response() as navigation:
        stale.locator("article.held", has_text=command).get_by_role("button", name="Deny").click()
    assert navigation.value.status == 409
    assert f"already decided by {NAME}" in stale.locator(".error").inner_text()
    stale.context.close()


def _cookie_client(page: Any, console: Console) -> httpx.Client:
    cookies = {c["name"]: c["value"] for c in page.context.cookies()}
    assert [name for name in cookies if name.startswith("ahp_console_")], cookies
    return httpx.Client(base_url=console.url, cookies=cookies, timeout=DEADLINE)


def test_forged_decisions_and_foreign_hosts_are_refused(page: Any, console: Console) -> None:
    fresh(page, console)
    command = unique("git push forged")
    result = send(console, command)
    held = card(page, command)
    held_id = held.get_attribute("data-key")
    token = held.locator("input[name=csrf]").get_attribute("value")
    with _cookie_client(page, console) as client:
        url = f"decide/{held_id}"
        assert client.post(url, data={"action": "once"}).status_code == 403
        assert client.post(url, data={"action": "once", "csrf": "x" + token}).status_code == 403
        foreign = {"Origin": "http://evil.example"}
        refused = client.post(url, data={"action": "once", "csrf": token}, headers=foreign)
        assert refused.status_code == 403
        assert client.get("/", headers={"Host": "evil.example"}).status_code == 421
        assert client.get("/", headers={"Host": "evil.example:80"}).status_code == 421
        assert not result.done()
        home = client.get("/")
        assert home.status_code == 200
        assert "'self'" in home.headers["content-security-policy"]
        assert "'unsafe-inline'" not in home.headers["content-security-policy"]
        assert home.headers["x-frame-options"] == "DENY"
        # the same request with its token and the console's own Origin decides it
        own = {"Origin": console.url.rstrip("/")}
        decided = client.post(url, data={"action": "once", "csrf": token}, headers=own)
        assert decided.status_code == 303
        # the live fragment, fetched on the change before the page the decision redirects
        # to, leaves that page its confirmation
        assert client.get("/live").status_code == 200
        assert "Approved Bash once." in client.get("/").text
    assert [e["type"] for e in result.effects(DEADLINE)] == ["allow"]
    with httpx.Client(base_url=console.url, timeout=DEADLINE) as anonymous:
        assert anonymous.get("/live").status_code == 401
        assert anonymous.get("/").headers["location"] == "/login"


def test_a_remote_address_needs_allow_remote(tmp_path: Path) -> None:
    done = subprocess.run(
        [PY, "-m", "ahp_backends.cli", "approval", "console", "--db", str(tmp_path / "a.db"),
         "--listen", "0.0.0.0:0"],
        capture_output=True, text=True, timeout=DEADLINE, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert done.returncode == 2
    assert "--listen '0.0.0.0:0': refusing a non-loopback address" in done.stderr


def test_two_workers_on_postgresql(
    browser: Any,
    postgres_url: str,
    connection_owner: Callable[[list[int], int, int], int | None],
) -> None:
    """The backend with ``--workers 2`` and the console on one PostgreSQL database: calls
    held in each worker (which worker holds a connection is read from ``/proc``) are all
    released by decisions made in the browser, through the console's own process."""
    with running(postgres_url, HOLD_S, "--workers", "2") as pg:
        listed = pg.backend.stderr.wait_for(" workers: ")
        pids = [int(p) for p in listed.split("workers: ", 1)[1].split(", ")]
        page = logged_in(browser, pg)
        calls: dict[str, HeldCall] = {}
        owners: set[int] = set()
        for i in range(12):  # until a call is held in each worker
            command = unique(f"git push origin w{i}")
            call = send(pg, command)
            card(page, command)
            owner = connection_owner(pids, call.server_port, call.client_port)
            assert owner is not None
            calls[command], owners = call, owners | {owner}
            if owners == set(pids):
                break
        assert owners == set(pids), "every call reached one worker"
        queue = Queue(postgres_url)
        try:
            for command, call in calls.items():
                held = card(page, command)
                held_id = held.get_attribute("data-key")
                held.get_by_role("button", name="Approve once").click()
                assert [e["type"] for e in call.effects(DEADLINE)] == ["allow"]
                receipt = queue.receipt_for(held_id)
                assert receipt is not None and receipt.decided_by == NAME
        finally:
            queue.close()
        page.context.close()

"""A held call approved in the browser, end to end through ``ahp-harness run`` (issue #30).

Real processes: ``ahp-backend approval --hold-s 20`` over loopback HTTP requiring approval
for ``shell: touch approved``, the approval center (``ahp-backend approval console``) on
the same store, and ``ahp-harness run`` with a scripted model that makes that call
(``--non-interactive --approve never``: the harness's ordinary prompt is refused, so the
tool runs only if the hook answers ``allow``). While the harness waits on the held call,
headless Chromium (Debian's ``chromium``, through Playwright) logs in and approves it;
then the tool runs: the file exists, and the transcript says the hook allowed it.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

pytestmark = pytest.mark.timeout(120)

DEADLINE_S = 30.0
NAME = "Ann Operator"
INSTALL = (
    "the approval center's browser tests need Debian's chromium: "
    "apt-get update && apt-get install -y --no-install-recommends chromium"
)


def _console(db: str) -> tuple[subprocess.Popen[str], str, str]:
    """Start the console on ``db``; the process, its URL and its login secret."""
    env = {**os.environ, "AHP_APPROVAL_CONSOLE_SECRET": "e2e-console-secret"}
    process = subprocess.Popen(
        [sys.executable, "-m", "ahp_backends.cli", "approval", "console", "--db", db],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert process.stderr is not None
    for line in process.stderr:  # its first line says where it listens
        found = re.search(r"approval console: (http://127\.0\.0\.1:\d+/)", line)
        if found:
            return process, found.group(1), env["AHP_APPROVAL_CONSOLE_SECRET"]
    raise AssertionError(f"the console exited ({process.wait()}) without its URL")


def test_the_harness_waits_the_person_approves_in_the_browser_the_tool_runs(e2e: Any) -> None:
    executable = shutil.which("chromium")
    if executable is None:
        pytest.fail(INSTALL)
    from playwright.sync_api import expect, sync_playwright

    db = str(e2e.path("approvals.db"))
    backend = e2e.ahp_backend(
        "approval", "--db", db, "--require", "shell:touch approved", "--hold-s", "20"
    )
    # No subscriptions given: the harness asks hooks/configuration (the served deadline
    # covers the hold).
    hook = e2e.hook("com.example.e2e.approval", backend, "http")
    console, url, secret = _console(db)
    try:
        with ThreadPoolExecutor(max_workers=1) as pool:
            running = pool.submit(
                e2e.run,
                registration=e2e.registration(hook),
                steps=[{"tool": "shell", "input": {"command": "touch approved.txt"}}],
                approve="never",
            )
            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(executable_path=executable, headless=True)
                try:
                    page = browser.new_page()
                    page.set_default_timeout(DEADLINE_S * 1000)
                    page.goto(url + "login")
                    page.fill("input[name=name]", NAME)
                    page.fill("input[name=secret]", secret)
                    page.click("button[type=submit]")
                    expect(page.locator("header .who")).to_contain_text(NAME)
                    held = page.locator("article.held", has_text="touch approved.txt")
                    expect(held).to_be_visible()  # the harness is waiting on it now
                    assert not running.done()
                    held.get_by_role("button", name="Approve once").click()
                    expect(page.locator(".flash")).to_contain_text("Approved shell once")
                finally:
                    browser.close()
            run = running.result(DEADLINE_S + 30).ok()
    finally:
        console.terminate()
        console.wait(DEADLINE_S)
    (call,) = run.transcript
    assert call["hook_permission"] == "allow", run.explain()
    assert call["executed"] is True and call["outcome"] == "ok", run.explain()
    assert (e2e.workspace / "approved.txt").exists(), run.explain()

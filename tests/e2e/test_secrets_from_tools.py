"""The harness's secrets are not readable by the tools it runs (Linux ``/proc``).

A ``shell`` command is a process of the harness's user; what it could read of the
harness is in ``/proc/$PPID``. The harness here holds five secrets in its environment:
a bearer token and a header value its registration names (``authentication.tokenEnv``,
``transport.headers.*.valueEnv``, under names that do not look secret), the model's
``OPENAI_API_KEY``, a ``GITHUB_TOKEN`` and a password inside ``DATABASE_URL``. The
command runs ``backends/proc_probe.py $PPID``, which reports what it could read.

1. Whoever runs the tests (root here and in CI): ``/proc/<harness>/environ`` and
   ``cmdline`` hold none of the secrets (a privileged harness re-executes itself with a
   scrubbed environment, ``ahp_harness.lifetime.hide_environment``; the probe does read
   the file: it lists ``PATH``).
2. An unprivileged harness (as ``nobody`` when the tests run as root): ``environ``,
   ``mem``, ``maps`` and the ``fd`` listing are refused outright (the harness is not
   dumpable); ``cmdline`` is readable and holds no secret.

What remains (the README's Limits): a privileged tool can read the harness's memory,
which holds the secrets (test 1 checks that too, where the probe could read it). Both
tests fail on a harness that does neither (the secrets are in ``environ``).
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent
PROBE = HERE / "backends" / "proc_probe.py"
PATTERN = "sekrit-[a-z]+-[0-9a-f]{32}"
NOBODY = 65534
RUN_TIMEOUT_S = 60.0

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux /proc")


def secret(kind: str) -> str:
    return f"sekrit-{kind}-{secrets.token_hex(16)}"


def secret_environment() -> dict[str, str]:
    return {
        "POLICY_BEARER": secret("bearer"),
        "POLICY_HEADER_VALUE": secret("header"),
        "OPENAI_API_KEY": secret("openai"),
        "GITHUB_TOKEN": secret("github"),
        "DATABASE_URL": f"postgres://app:{secret('db')}@db.internal/app",
    }


def registration(url: str) -> dict[str, Any]:
    """An HTTP backend that is never reached (fail-open), with both credentials bound."""
    return {
        "protocolVersion": "draft",
        "hooks": [
            {
                "id": "com.example.e2e.unreached",
                "transport": {
                    "type": "http",
                    "url": url,
                    "headers": {"X-Api-Key": {"valueEnv": "POLICY_HEADER_VALUE"}},
                },
                "authentication": {"type": "bearer", "tokenEnv": "POLICY_BEARER"},
                "subscriptions": [
                    {
                        "events": ["tool.before"],
                        "mode": "intercept",
                        "timeoutMs": 5000,
                        "failurePolicy": "fail-open",
                        "content": {"default": "metadata"},
                    }
                ],
            }
        ],
    }


def privileged() -> bool:
    """Root or CAP_SYS_PTRACE: the dumpable flag does not stop such a process."""
    if os.geteuid() == 0:
        return True
    with open("/proc/self/status", encoding="ascii") as f:
        caps = next(line for line in f if line.startswith("CapEff:"))
    return bool(int(caps.split()[1], 16) >> 19 & 1)


def run_harness(
    python: str,
    folder: Path,
    env: Mapping[str, str],
    url: str,
    *,
    user: int | None = None,
) -> dict[str, Any]:
    """``ahp-harness run`` (as ``user``) with one shell call that probes ``/proc/$PPID``;
    the probe's report."""
    workspace = folder / "ws"
    (folder / "registration.json").write_text(json.dumps(registration(url)), "utf-8")
    command = f"{python} {PROBE} $PPID '{PATTERN}' probe.json"
    steps = [{"tool": "shell", "input": {"command": command}}]
    (folder / "script.json").write_text(json.dumps(steps), "utf-8")
    argv = [python, "-m", "ahp_harness.cli", "run", "--workspace", str(workspace)]
    argv += ["--registration", str(folder / "registration.json")]
    argv += ["--model", f"script:{folder / 'script.json'}", "--non-interactive"]
    argv += ["--approve", "always"]
    as_user: dict[str, Any] = {}
    if user is not None:
        as_user = {"user": user, "group": user, "extra_groups": []}
    done = subprocess.run(
        argv,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        env=dict(env),
        cwd=folder,
        timeout=RUN_TIMEOUT_S,
        **as_user,
    )
    assert done.returncode == 0, f"{argv}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    report_path = workspace / "probe.json"
    assert report_path.exists(), f"the probe did not run:\n{done.stdout[-3000:]}"
    report: dict[str, Any] = json.loads(report_path.read_text("utf-8"))
    assert "ahp_harness.cli" in report["cmdline"]["text"], report  # it probed the harness
    return report


@pytest.fixture
def folder() -> Iterator[Path]:
    """A folder any user may enter (``tmp_path`` is private to the test's user)."""
    path = Path(tempfile.mkdtemp(prefix="ahp-secrets-"))
    try:
        path.chmod(0o755)
        (path / "ws").mkdir()
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def unreached_url() -> Iterator[str]:
    import socket

    with socket.socket() as sock:  # bound, never listening: every request is refused
        sock.bind(("127.0.0.1", 0))
        yield f"http://127.0.0.1:{sock.getsockname()[1]}/"


def test_the_harness_environ_shows_a_tool_none_of_its_secrets(
    folder: Path, unreached_url: str
) -> None:
    hidden = secret_environment()
    env = {**os.environ, **hidden, "NO_COLOR": "1"}
    report = run_harness(sys.executable, folder, env, unreached_url)

    environ = report["environ"]
    if privileged():  # dumpable does not stop this tool: the file is read, and scrubbed
        assert environ["ok"], report
        assert "PATH" in environ["names"], report
        assert not set(hidden) & set(environ["names"]), report
    assert environ.get("matches", []) == [], report
    assert report["cmdline"]["matches"] == [], report
    if report["mem"]["ok"]:  # what remains (README, Limits): a privileged tool reads memory
        assert len(report["mem"]["matches"]) == len(hidden), report


def unprivileged_python(folder: Path) -> tuple[str, dict[str, str]]:
    """An interpreter ``nobody`` may run that imports the kit, and the environment for it."""
    path = os.pathsep.join(p for p in sys.path if p and Path(p).is_dir())
    env = {
        "PATH": os.environ.get("PATH", os.defpath),
        "LANG": "C.UTF-8",
        "HOME": str(folder),
        "PYTHONPATH": path,
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONNOUSERSITE": "1",
    }
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    candidates = [sys.executable, f"/usr/bin/{version}", f"/usr/local/bin/{version}"]
    for python in dict.fromkeys(c for c in candidates if c):
        try:
            ok = subprocess.run(
                [python, "-c", "import ahp_harness.cli, anyio, pydantic"],
                env=env,
                cwd=folder,
                capture_output=True,
                timeout=60,
                user=NOBODY,
                group=NOBODY,
                extra_groups=[],
            )
        except OSError:
            continue
        if ok.returncode == 0:
            return python, env
    pytest.skip(
        f"no Python that user {NOBODY} may run imports the kit (tried {candidates}); "
        "make one of them readable by that user to run this test"
    )


def test_an_unprivileged_harness_is_closed_to_its_tools(folder: Path, unreached_url: str) -> None:
    hidden = secret_environment()
    if privileged():
        if os.geteuid() != 0:
            pytest.skip("needs root (to become nobody) or an unprivileged test user")
        python, env = unprivileged_python(folder)
        os.chown(folder / "ws", NOBODY, NOBODY)
        user: int | None = NOBODY
    else:
        python, env, user = sys.executable, {**os.environ}, None
    report = run_harness(
        python, folder, {**env, **hidden, "NO_COLOR": "1"}, unreached_url, user=user
    )

    for name in ("environ", "mem", "maps", "fd"):
        assert report[name] == {"ok": False, "error": "PermissionError", "errno": 13}, report
    assert report["cmdline"]["ok"] and report["cmdline"]["matches"] == [], report

"""``ahp_harness.lifetime`` in real processes (each check runs in a fresh interpreter:
re-execution, the dumpable flag and the subreaper are process-wide)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest
from ahp_harness.lifetime import visible_environment

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux only")


def python(code: str, env: dict[str, str] | None = None) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        env=env,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr.decode("utf-8", "replace")
    result: dict[str, object] = json.loads(done.stdout)
    return result


def test_only_harmless_names_stay_visible() -> None:
    environ = {
        "PATH": "/bin",
        "LANG": "C.UTF-8",
        "HOME": "/home/u",
        "PYTHONPATH": "/src",
        "LC_ALL": "C",
        "POLICY_BEARER": "b",  # named by a registration, does not look secret
        "OPENAI_API_KEY": "k",
        "PYTHON_API_TOKEN": "t",  # a start-up prefix never lets a secret-looking name by
        "DATABASE_URL": "postgres://u:p@h/db",
    }
    assert visible_environment(environ) == {
        "PATH": "/bin",
        "LANG": "C.UTF-8",
        "HOME": "/home/u",
        "PYTHONPATH": "/src",
        "LC_ALL": "C",
    }


def test_a_reexecuted_process_keeps_its_environment_in_memory_only() -> None:
    code = """
        import json, os
        from ahp_harness import lifetime
        restored = lifetime.restore_environment()
        pid = os.getpid()
        lifetime.hide_environment()  # re-executes the first time; returns the second
        with open("/proc/self/environ", "rb") as f:
            shown = f.read()
        print(json.dumps({
            "restored": restored,
            "pid": pid,
            "secret": os.environb.get(b"POLICY_BEARER", b"").hex(),
            "shown": b"sekrit" in shown,
            "fd_env": "AHP_HARNESS_ENVIRONMENT_FD" in os.environ,
            "fds": sorted(os.listdir("/proc/self/fd")),
        }))
    """
    value = b"sekrit-\xff\xfe-not-utf8 = with=equals"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONSAFEPATH"}
    envb = {k.encode(): v.encode() for k, v in env.items()}
    envb[b"POLICY_BEARER"] = value
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, env=envb, timeout=60
    )
    assert done.returncode == 0, done.stderr.decode("utf-8", "replace")
    result = json.loads(done.stdout)
    assert result["restored"] is True  # it was re-executed (same pid: exec, not a fork)
    assert bytes.fromhex(result["secret"]) == value  # in memory, byte for byte
    assert result["shown"] is False  # ... but not in /proc/self/environ
    assert result["fd_env"] is False
    assert result["fds"] == ["0", "1", "2", "3"]  # the environment's descriptor was closed


def test_reaping_takes_adopted_orphans_only_never_a_child_someone_waits_for() -> None:
    code = """
        import json, os, subprocess, time
        from ahp_harness.lifetime import Descendants
        d = Descendants()
        # Our own child (a new session, as tools and backends are started) that exited.
        own = subprocess.Popen(["sh", "-c", "exit 7"], start_new_session=True)
        # An orphan: a grandchild in its parent's session, adopted when that parent exits.
        parent = subprocess.Popen(
            ["sh", "-c", "sleep 0.2 & echo $!"], start_new_session=True, stdout=subprocess.PIPE
        )
        orphan = int(parent.stdout.readline())
        parent.wait()
        def state(pid):
            with open(f"/proc/{pid}/stat") as f:
                return f.read().rsplit(")", 1)[1].split()[0]
        deadline = time.monotonic() + 20
        while state(own.pid) != "Z" or state(orphan) != "Z":
            assert time.monotonic() < deadline
            time.sleep(0.01)
        reaped = d.reap()
        orphan_gone = not os.path.exists(f"/proc/{orphan}")
        print(json.dumps({
            "active": d.active, "reaped": reaped, "orphan_gone": orphan_gone,
            "own_code": own.wait(timeout=10),
        }))
    """
    result = python(code)
    assert result == {"active": True, "reaped": 1, "orphan_gone": True, "own_code": 7}


def test_nothing_heavy_is_imported_before_the_harness_re_executes_itself() -> None:
    # ``ahp-harness run`` parses its arguments, then (as root) re-executes itself: every
    # module imported before that is imported twice. The tools (pydantic, httpx), the
    # protocol client and the event loop must come after; a fresh interpreter shows it.
    probe = textwrap.dedent(
        """
        import sys
        from ahp_harness import lifetime
        from ahp_harness.cli import build_parser
        lifetime.restore_environment()
        build_parser().parse_args(["run", "--workspace", ".", "--mode", "read-only"])
        heavy = ("pydantic", "httpx", "anyio", "rich", "ahp_protocol.client",
                 "ahp_harness.tools", "ahp_harness.permissions", "ahp_harness.demo")
        print([name for name in heavy if name in sys.modules])
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=30, check=True
    )
    assert done.stdout.strip() == "[]"


def test_a_session_imports_httpx_only_when_it_fetches() -> None:
    # The fetch tool imports httpx at its first fetch (and the client's HTTP transport
    # when a registration has an HTTP hook): a session of stdio hooks starts ~90 ms sooner.
    probe = "import sys, ahp_harness.harness, ahp_harness.session; print('httpx' in sys.modules)"
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=30, check=True
    )
    assert done.stdout.strip() == "False"

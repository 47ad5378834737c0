"""The sandbox: path confinement (``..``, absolute paths, symlinks), the scrubbed
shell environment, the shell's wall clock (the whole process group dies) and its
output cap, and fetch host checks."""

from __future__ import annotations

import os
import select
from pathlib import Path

import anyio
import pytest
from ahp_harness.sandbox import (
    DEFAULT_ENV_ALLOWLIST,
    Limits,
    Sandbox,
    SandboxViolation,
    open_entry,
)
from ahp_harness.tools import TOOLS

pytestmark = pytest.mark.anyio

SHELL = TOOLS["shell"]
READ = TOOLS["read_file"]
WRITE = TOOLS["write_file"]
EDIT = TOOLS["edit_file"]
SEARCH = TOOLS["search"]
FETCH = TOOLS["fetch"]


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / "sub").mkdir(parents=True)
    (root / "sub" / "inside.txt").write_text("inside\n")
    return root


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    out = tmp_path / "outside"
    out.mkdir()
    (out / "secret.txt").write_text("TOP SECRET\n")
    return out


@pytest.fixture
def sandbox(workspace: Path) -> Sandbox:
    return Sandbox([workspace])


def _exited(pid: int, timeout: float = 5.0) -> bool:
    """True once ``pid`` has exited (waits on a pidfd, no polling)."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    try:
        readable, _, _ = select.select([fd], [], [], timeout)
        return bool(readable)
    finally:
        os.close(fd)


# -- paths -----------------------------------------------------------------------------


def test_roots_are_resolved(tmp_path: Path, workspace: Path) -> None:
    link = tmp_path / "link-to-ws"
    link.symlink_to(workspace)
    box = Sandbox([link])
    assert box.roots == (workspace.resolve(),)


def test_roots_must_exist(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="not a directory"):
        Sandbox([tmp_path / "nope"])
    with pytest.raises(ValueError, match="at least one"):
        Sandbox([])


def test_relative_and_absolute_paths_inside(sandbox: Sandbox, workspace: Path) -> None:
    root = workspace.resolve()
    assert sandbox.resolve("sub/inside.txt") == root / "sub" / "inside.txt"
    assert sandbox.resolve("./sub/../sub/inside.txt") == root / "sub" / "inside.txt"
    assert sandbox.resolve(str(root / "new" / "file.txt")) == root / "new" / "file.txt"
    assert sandbox.resolve(".") == root


@pytest.mark.parametrize(
    "path", ["..", "../outside/secret.txt", "sub/../../outside", "/etc/passwd"]
)
def test_escapes_are_refused_with_a_clear_message(sandbox: Sandbox, path: str) -> None:
    with pytest.raises(SandboxViolation) as caught:
        sandbox.resolve(path)
    message = str(caught.value)
    assert message == caught.value.reason
    assert f"path {path!r} resolves outside the workspace ({sandbox.roots[0]})" == message


@pytest.mark.parametrize(
    ("path", "reason"),
    [("", "empty"), ("a\x00b", "NUL"), ("~/x", "home-relative"), ("~root/x", "home-relative")],
)
def test_odd_paths_are_refused(sandbox: Sandbox, path: str, reason: str) -> None:
    with pytest.raises(SandboxViolation, match=reason):
        sandbox.resolve(path)


def test_symlink_pointing_out_is_refused(sandbox: Sandbox, workspace: Path, outside: Path) -> None:
    (workspace / "link.txt").symlink_to(outside / "secret.txt")
    (workspace / "linkdir").symlink_to(outside)
    (workspace / "dangling").symlink_to(outside / "not-yet")
    for path in ("link.txt", "linkdir", "linkdir/secret.txt", "linkdir/new.txt", "dangling"):
        with pytest.raises(SandboxViolation, match="resolves outside the workspace"):
            sandbox.resolve(path)


def test_symlink_staying_inside_is_fine(sandbox: Sandbox, workspace: Path) -> None:
    (workspace / "alias").symlink_to(workspace / "sub")
    assert sandbox.resolve("alias/inside.txt") == workspace.resolve() / "sub" / "inside.txt"


def test_several_roots(tmp_path: Path, workspace: Path, outside: Path) -> None:
    box = Sandbox([workspace, outside])
    assert box.resolve(str(outside / "secret.txt")) == outside.resolve() / "secret.txt"
    # Relative paths are taken from the first root only.
    with pytest.raises(SandboxViolation):
        box.resolve(str(tmp_path / "elsewhere"))
    assert box.resolve("secret.txt") == workspace.resolve() / "secret.txt"


def test_check_covers_every_path_tool(sandbox: Sandbox) -> None:
    calls = [
        (READ, {"path": "../outside/secret.txt"}),
        (WRITE, {"path": "../x", "content": "x"}),
        (EDIT, {"path": "/etc/hosts", "old": "a", "new": "b"}),
        (SEARCH, {"pattern": "x", "path": ".."}),
    ]
    for tool, raw in calls:
        with pytest.raises(SandboxViolation, match="outside the workspace"):
            sandbox.check(tool, tool.parse_input(raw))
    sandbox.check(READ, READ.parse_input({"path": "sub/inside.txt"}))
    sandbox.check(SEARCH, SEARCH.parse_input({"pattern": "x"}))
    sandbox.check(SHELL, SHELL.parse_input({"command": "cat ../../etc/passwd"}))  # not parsed


async def test_read_through_symlink_out_is_refused_at_run_time(
    sandbox: Sandbox, workspace: Path, outside: Path
) -> None:
    (workspace / "link.txt").symlink_to(outside / "secret.txt")
    result = await READ.run(READ.parse_input({"path": "link.txt"}), sandbox)
    assert result.outcome == "error"
    assert result.error_class == "sandbox_violation"
    assert "TOP SECRET" not in result.output
    assert "outside the workspace" in (result.error or "")


async def test_write_through_symlink_out_is_refused(
    sandbox: Sandbox, workspace: Path, outside: Path
) -> None:
    (workspace / "link.txt").symlink_to(outside / "secret.txt")
    (workspace / "linkdir").symlink_to(outside)
    (workspace / "dangling").symlink_to(outside / "created-by-agent.txt")
    for path in ("link.txt", "linkdir/new.txt", "dangling"):
        result = await WRITE.run(WRITE.parse_input({"path": path, "content": "pwned"}), sandbox)
        assert result.outcome == "error", path
        assert result.error_class == "sandbox_violation"
    edit = await EDIT.run(
        EDIT.parse_input({"path": "link.txt", "old": "TOP", "new": "NOT"}), sandbox
    )
    assert edit.error_class == "sandbox_violation"
    assert (outside / "secret.txt").read_text() == "TOP SECRET\n"
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]


async def test_file_tools_use_symlinks_that_stay_inside(sandbox: Sandbox, workspace: Path) -> None:
    """The walk opens the resolved path, so a link inside the workspace still works."""
    (workspace / "alias").symlink_to(workspace / "sub")
    (workspace / "alias.txt").symlink_to(workspace / "sub" / "inside.txt")
    read = await READ.run(READ.parse_input({"path": "alias/inside.txt"}), sandbox)
    assert (read.outcome, read.output) == ("ok", "inside\n")
    edit = await EDIT.run(
        EDIT.parse_input({"path": "alias.txt", "old": "inside", "new": "edited"}), sandbox
    )
    assert edit.outcome == "ok"
    assert edit.file_changes[0].path == str(workspace.resolve() / "sub" / "inside.txt")
    write = await WRITE.run(
        WRITE.parse_input({"path": "alias/new/deep.txt", "content": "new\n"}), sandbox
    )
    assert write.output == "created sub/new/deep.txt (4 bytes)"
    found = await SEARCH.run(SEARCH.parse_input({"pattern": ".", "path": "alias"}), sandbox)
    assert found.output == "sub/inside.txt:1: edited\nsub/new/deep.txt:1: new"
    assert not (workspace / "alias").resolve().is_symlink()


def test_open_in_workspace_contract(sandbox: Sandbox, workspace: Path) -> None:
    real, fd = sandbox.open_in_workspace("sub/inside.txt", os.O_RDONLY)
    try:
        assert real == workspace.resolve() / "sub" / "inside.txt"
        assert os.read(fd, 100) == b"inside\n"
    finally:
        os.close(fd)
    with pytest.raises(ValueError, match="O_TRUNC"):
        sandbox.open_in_workspace("sub/inside.txt", os.O_WRONLY | os.O_TRUNC)
    with pytest.raises(FileNotFoundError):
        sandbox.open_in_workspace("sub/missing/x.txt", os.O_RDONLY)
    with pytest.raises(IsADirectoryError):
        sandbox.open_in_workspace(".", os.O_RDWR)
    with pytest.raises(SandboxViolation, match="outside the workspace"):
        sandbox.open_in_workspace("../outside", os.O_RDONLY)
    real, fd = sandbox.open_in_workspace(
        "made/on/the/way.txt", os.O_RDWR | os.O_CREAT | os.O_EXCL, make_parents=True
    )
    os.close(fd)
    assert real.is_file() and real.parent == workspace.resolve() / "made" / "on" / "the"


@pytest.mark.parametrize("name", ["", ".", "..", "a/b", "/etc"])
def test_open_entry_takes_one_component(workspace: Path, name: str) -> None:
    fd = os.open(workspace, os.O_RDONLY | os.O_DIRECTORY)
    try:
        with pytest.raises(SandboxViolation, match="not a single path component"):
            open_entry(fd, name, os.O_RDONLY)
    finally:
        os.close(fd)


# -- fetch hosts -----------------------------------------------------------------------


def test_fetch_hosts(workspace: Path) -> None:
    inp = FETCH.parse_input({"url": "http://127.0.0.1:8080/x"})
    with pytest.raises(SandboxViolation, match="no fetch hosts set"):
        Sandbox([workspace]).check(FETCH, inp)
    allowed = Sandbox([workspace], fetch_hosts=lambda host: host == "127.0.0.1")
    allowed.check(FETCH, inp)
    other = FETCH.parse_input({"url": "https://Example.COM/"})
    with pytest.raises(SandboxViolation, match=r"'example\.com' is not allowed"):
        allowed.check(FETCH, other)
    for url, reason in [
        ("ftp://127.0.0.1/x", "http and https"),
        ("file:///etc/passwd", "http and https"),
        ("http://u:p@127.0.0.1/", "credentials"),
        ("http:///nohost", "no host"),
    ]:
        with pytest.raises(SandboxViolation, match=reason):
            allowed.check_url(url)


# -- environment -----------------------------------------------------------------------


def test_shell_env_is_scrubbed(sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AHP_TEST_SECRET", "hunter2")
    monkeypatch.setenv("GITHUB_TOKEN", "ghp_hunter2")
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    env = sandbox.shell_env()
    assert "hunter2" not in repr(env)
    assert set(env) <= DEFAULT_ENV_ALLOWLIST | {"HOME", "PWD", "PATH", "LANG"}
    assert env["PATH"] == "/usr/bin:/bin"
    assert env["HOME"] != os.environ.get("HOME")
    assert Path(env["HOME"]).is_dir()
    assert list(Path(env["HOME"]).iterdir()) == []


def test_secret_names_are_dropped_even_if_allowlisted(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MY_API_KEY", "k-123")
    monkeypatch.setenv("HARMLESS", "ok")
    box = Sandbox([workspace], env_allowlist={"MY_API_KEY", "HARMLESS"})
    env = box.shell_env()
    assert env.get("HARMLESS") == "ok"
    assert "MY_API_KEY" not in env


def test_private_home_is_removed_on_close(sandbox: Sandbox) -> None:
    home = Path(sandbox.shell_env()["HOME"])
    assert home.is_dir()
    sandbox.close()
    assert not home.exists()
    assert Path(sandbox.shell_env()["HOME"]).is_dir()  # still usable: a fresh home
    sandbox.close()


async def test_shell_cannot_see_inherited_secrets(
    sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SECRET", "hunter2")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "hunter3")
    result = await SHELL.run(
        SHELL.parse_input({"command": 'echo "[$SECRET]"; env; echo "home=$HOME"'}), sandbox
    )
    assert result.outcome == "ok"
    assert result.output.startswith("[]\n")
    assert "hunter" not in result.output
    assert f"home={sandbox.home}" in result.output


async def test_shell_runs_in_the_workspace(sandbox: Sandbox, workspace: Path) -> None:
    result = await SHELL.run(SHELL.parse_input({"command": "pwd; cat sub/inside.txt"}), sandbox)
    assert result.outcome == "ok"
    assert result.output == f"{workspace.resolve()}\ninside\n"


# -- shell limits ----------------------------------------------------------------------


async def test_shell_timeout_kills_the_whole_process_group(workspace: Path) -> None:
    box = Sandbox([workspace], limits=Limits(shell_timeout_s=0.5))
    inp = SHELL.parse_input({"command": "sleep 30 & echo $!; sleep 30"})
    with anyio.fail_after(10):
        result = await SHELL.run(inp, box)
    assert result.outcome == "timeout"
    assert result.error_class == "timeout"
    assert "timed out after 0.5s" in (result.error or "")
    assert result.duration_ms < 5000
    child = int(result.output.split()[0])
    assert _exited(child), "the backgrounded child survived the timeout"


async def test_nothing_outlives_a_finished_command(sandbox: Sandbox) -> None:
    # The child lets go of stdout, so the call ends as soon as the shell does.
    inp = SHELL.parse_input({"command": "sleep 30 >/dev/null 2>&1 & echo $!"})
    with anyio.fail_after(10):
        result = await SHELL.run(inp, sandbox)
    assert result.outcome == "ok"
    assert _exited(int(result.output.strip()))


async def test_cancelling_the_call_kills_the_group(workspace: Path) -> None:
    box = Sandbox([workspace], limits=Limits(shell_timeout_s=30))
    marker = workspace / "pid"
    inp = SHELL.parse_input({"command": f"sleep 30 & echo $! > {marker}; wait"})
    with anyio.fail_after(10), anyio.move_on_after(1.0) as scope:
        await SHELL.run(inp, box)
    assert scope.cancelled_caught
    assert _exited(int(marker.read_text()))


async def test_shell_output_is_capped(workspace: Path) -> None:
    box = Sandbox([workspace], limits=Limits(output_cap_bytes=1000))
    result = await SHELL.run(
        SHELL.parse_input({"command": "yes x | head -c 100000; echo done >&2"}), box
    )
    assert result.outcome == "ok"
    body, note = result.output.split("\n[truncated:", 1)
    assert len(body.encode()) <= 1000
    assert body.startswith("x\nx\n")
    assert "99005 more bytes" in note  # 100000 + "done\n" - 1000
    assert "capped at 1000 bytes" in note


async def test_shell_nonzero_exit_is_an_error(sandbox: Sandbox) -> None:
    result = await SHELL.run(SHELL.parse_input({"command": "echo oops >&2; exit 3"}), sandbox)
    assert result.outcome == "error"
    assert result.error_class == "exit_status"
    assert result.error == "command exited with status 3"
    assert result.output == "oops\n"


async def test_shell_killed_by_signal(sandbox: Sandbox) -> None:
    result = await SHELL.run(SHELL.parse_input({"command": "kill -9 $$"}), sandbox)
    assert result.outcome == "error"
    assert result.error == "command was killed by signal 9"


async def test_shell_stdin_is_empty(sandbox: Sandbox) -> None:
    with anyio.fail_after(10):
        result = await SHELL.run(SHELL.parse_input({"command": "cat; echo end"}), sandbox)
    assert result.output == "end\n"

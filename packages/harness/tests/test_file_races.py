"""The file tools confine what they open, not only what they check.

A tool checks a path (:meth:`Sandbox.resolve`) and then opens it; anything that can
change the workspace in between (the shell tool, a backgrounded process, another
program) must not turn the open into a read or a write outside the workspace.
Three kinds of attack, each run as a real race (a thread swapping names in a loop
while the tool is called again and again) and, where a race is rare, also as a
deterministic swap at the exact moment between check and open:

* a file swapped for a symlink to an outside secret (``search`` used to ``lstat``
  and then read by name, following the link);
* a parent folder swapped for a symlink to an outside folder (every file tool used
  to open the checked path by name, following links in its parents);
* the workspace root itself replaced after the sandbox was made.

And hard links: a hard link to an outside file has no symlink to catch, so the
tools refuse to change any file with more than one name (reads are allowed and
documented; see the README's "Limits").
"""

from __future__ import annotations

import ctypes
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from ahp_harness.sandbox import Sandbox
from ahp_harness.tools import TOOLS
from ahp_harness.tools.base import ToolResult

pytestmark = pytest.mark.anyio

READ = TOOLS["read_file"]
WRITE = TOOLS["write_file"]
EDIT = TOOLS["edit_file"]
SEARCH = TOOLS["search"]

SECRET = "TOP SECRET"
TRIES = 1000


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / "sub").mkdir(parents=True)
    (root / "sub" / "inside.txt").write_text("inside\n")
    (root / "f.txt").write_text("inside\n")
    return root.resolve()


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    out = tmp_path / "outside"
    out.mkdir()
    # Same names as in the workspace: a followed link lands on these.
    (out / "inside.txt").write_text(f"{SECRET} inside\n")
    (out / "f.txt").write_text(f"{SECRET} inside\n")
    return out.resolve()


_libc = ctypes.CDLL(None, use_errno=True)
_AT_FDCWD = -100
_RENAME_EXCHANGE = 2


def _exchange(a: Path, b: Path) -> None:
    """Swap the names ``a`` and ``b`` in one step (Linux ``renameat2(RENAME_EXCHANGE)``)."""
    if _libc.renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE):
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


class Swapper:
    """Swaps ``folder/name`` between what it is and a symlink to ``target``, in a loop.

    Each swap exchanges the entry with a symlink kept under a dot-name (which
    ``search`` skips and no test reads), so the name never goes missing: half the
    time it is the real entry, half the time the symlink. ``swaps`` counts them;
    leaving the ``with`` block stops the thread with the real entry in place.
    """

    def __init__(self, folder: Path, name: str, target: Path) -> None:
        self.entry = folder / name
        self.stash = folder / f".link-{name}"
        self.stash.symlink_to(target)
        self.swaps = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            _exchange(self.entry, self.stash)
            _exchange(self.entry, self.stash)
            self.swaps += 2

    def __enter__(self) -> Swapper:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=30)
        assert not self._thread.is_alive(), "the swapper thread did not stop"
        assert not self.entry.is_symlink(), "the swapper thread died mid-swap"


def _leaked(result: ToolResult) -> bool:
    return SECRET in result.output or SECRET in (result.error or "")


def _outside_untouched(outside: Path) -> None:
    assert sorted(p.name for p in outside.iterdir()) == ["f.txt", "inside.txt"]
    for name in ("f.txt", "inside.txt"):
        assert (outside / name).read_text() == f"{SECRET} inside\n", name


async def _race(tool_name: str, raw: dict[str, str], sandbox: Sandbox, swapper: Swapper) -> int:
    """Call the tool ``TRIES`` times while ``swapper`` runs; the number of leaks."""
    tool = TOOLS[tool_name]
    inp = tool.parse_input(raw)
    leaks = 0
    with swapper:
        for _ in range(TRIES):
            with anyio.fail_after(30):
                result = await tool.run(inp, sandbox)
            leaks += _leaked(result)
    assert swapper.swaps > 0, "the swapper never ran: the race proved nothing"
    return leaks


# -- a file swapped for a symlink -------------------------------------------------------


async def test_search_never_reads_a_file_swapped_for_a_symlink(
    workspace: Path, outside: Path
) -> None:
    sandbox = Sandbox([workspace])
    swapper = Swapper(workspace, "f.txt", outside / "f.txt")
    leaks = await _race("search", {"pattern": "inside"}, sandbox, swapper)
    assert leaks == 0, f"search read the outside secret {leaks} times in {TRIES} tries"


async def test_search_does_not_follow_a_symlink_planted_after_its_look(
    workspace: Path, outside: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Deterministic: ``f.txt`` becomes a symlink right after search's last look at it.

    The last look is a ``stat`` by name (the old check-then-read) or, at the latest,
    the moment before the ``open``; either way the open must not follow the link.
    """
    target = workspace / "f.txt"
    swapped = False

    def swap(path: object) -> None:
        nonlocal swapped
        if not swapped and os.fspath(path) in (str(target), "f.txt"):  # type: ignore[call-overload]
            swapped = True
            target.unlink()
            target.symlink_to(outside / "f.txt")

    def after(real: Any) -> Any:
        def call(path: object, *args: object, **kwargs: object) -> Any:
            result = real(path, *args, **kwargs)
            swap(path)
            return result

        return call

    def before(real: Any) -> Any:
        def call(path: object, *args: object, **kwargs: object) -> Any:
            swap(path)
            return real(path, *args, **kwargs)

        return call

    monkeypatch.setattr(os, "lstat", after(os.lstat))
    monkeypatch.setattr(os, "stat", after(os.stat))
    monkeypatch.setattr(os, "open", before(os.open))
    result = await SEARCH.run(SEARCH.parse_input({"pattern": "inside"}), Sandbox([workspace]))
    monkeypatch.undo()
    assert swapped, "search never looked at f.txt"
    assert result.outcome == "ok"
    assert not _leaked(result), result.output
    assert result.output == "sub/inside.txt:1: inside"  # f.txt, now a symlink, is skipped


# -- a parent folder swapped for a symlink ----------------------------------------------

CALLS = {
    "read_file": {"path": "sub/inside.txt"},
    "write_file": {"path": "sub/inside.txt", "content": "pwned\n"},
    "edit_file": {"path": "sub/inside.txt", "old": "inside", "new": "inside!"},
    "search": {"pattern": "inside", "path": "sub"},
    "search-root": {"pattern": "inside"},
}


@pytest.mark.parametrize("call", sorted(CALLS))
async def test_no_file_tool_follows_a_parent_swapped_for_a_symlink(
    workspace: Path, outside: Path, call: str
) -> None:
    sandbox = Sandbox([workspace])
    swapper = Swapper(workspace, "sub", outside)
    leaks = await _race(call.removesuffix("-root"), CALLS[call], sandbox, swapper)
    assert leaks == 0, f"{call} read the outside secret {leaks} times in {TRIES} tries"
    _outside_untouched(outside)


class _SwapAfterCheck(Sandbox):
    """A sandbox whose check passes and then, before any open, ``sub`` becomes a symlink.

    This is the moment a racing process needs; here it comes every time.
    """

    outside: Path

    def resolve(self, path: str) -> Path:
        real = super().resolve(path)
        sub = self.roots[0] / "sub"
        if not sub.is_symlink():
            sub.rename(self.roots[0] / ".real-sub")
            sub.symlink_to(self.outside)
        return real


@pytest.mark.parametrize("call", ["edit_file", "read_file", "search", "write_file"])
async def test_a_parent_swapped_between_check_and_open_is_refused(
    workspace: Path, outside: Path, call: str
) -> None:
    sandbox = _SwapAfterCheck([workspace])
    sandbox.outside = outside
    tool = TOOLS[call]
    result = await tool.run(tool.parse_input(CALLS[call]), sandbox)
    assert not _leaked(result), result.output
    _outside_untouched(outside)
    assert (result.outcome, result.error_class) == ("error", "sandbox_violation")
    assert result.error == (
        f"path {CALLS[call]['path']!r} changed while it was opened: "
        "'sub' is now a symbolic link; nothing was read or written"
    )


# -- the workspace root replaced --------------------------------------------------------


class _ReplaceRootAfterCheck(Sandbox):
    outside: Path

    def resolve(self, path: str) -> Path:
        real = super().resolve(path)
        root = self.roots[0]
        if not root.is_symlink():
            root.rename(root.with_name("ws.old"))
            root.symlink_to(self.outside)
        return real


@pytest.mark.parametrize("call", ["read_file", "write_file", "search"])
async def test_a_workspace_root_replaced_after_the_check_is_refused(
    tmp_path: Path, outside: Path, call: str
) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "inside.txt").write_text("inside\n")
    sandbox = _ReplaceRootAfterCheck([workspace])
    sandbox.outside = outside
    raw = {"pattern": "inside"} if call == "search" else CALLS[call] | {"path": "inside.txt"}
    tool = TOOLS[call]
    result = await tool.run(tool.parse_input(raw), sandbox)
    assert not _leaked(result), result.output
    _outside_untouched(outside)
    assert (result.outcome, result.error_class) == ("error", "sandbox_violation")
    assert "workspace root" in (result.error or "")


# -- hard links --------------------------------------------------------------------------


@pytest.fixture
def hard_link(workspace: Path, outside: Path) -> Iterator[Path]:
    link = workspace / "hard.txt"
    os.link(outside / "inside.txt", link)
    yield link


async def test_writing_a_hard_linked_file_is_refused(
    workspace: Path, outside: Path, hard_link: Path
) -> None:
    sandbox = Sandbox([workspace])
    calls = [
        (WRITE, {"path": "hard.txt", "content": "pwned\n"}),
        (EDIT, {"path": "hard.txt", "old": "inside", "new": "pwned"}),
    ]
    for tool, raw in calls:
        result = await tool.run(tool.parse_input(raw), sandbox)
        assert (result.outcome, result.error_class) == ("error", "sandbox_violation"), tool
        assert result.error == (
            "hard.txt has 2 hard links; the file tools never change a file that also has "
            "a name elsewhere (it may lie outside the workspace)"
        )
        assert result.file_changes == ()
    _outside_untouched(outside)


async def test_reading_a_hard_linked_file_is_allowed(workspace: Path) -> None:
    """Reads cannot tell a hard link from any other file; they are allowed (README Limits)."""
    os.link(workspace / "f.txt", workspace / "f-again.txt")
    sandbox = Sandbox([workspace])
    result = await READ.run(READ.parse_input({"path": "f-again.txt"}), sandbox)
    assert (result.outcome, result.output) == ("ok", "inside\n")
    found = await SEARCH.run(SEARCH.parse_input({"pattern": "inside", "path": "."}), sandbox)
    assert "f-again.txt:1: inside" in found.output

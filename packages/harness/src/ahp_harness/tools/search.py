"""``search`` (kind ``search``, input ``{"pattern", "path"?}``): a regex over workspace text.

``pattern`` is a Python regular expression (an invalid one is a
:class:`ToolInputError` on ``pattern``), searched line by line in every text file
under ``path`` (default: the first workspace root; a single file is fine too).
Output lines are ``file:line: text``, files relative to the first root, in sorted
order.

Skipped: folders whose name starts with a dot (``.git``, ``.venv``...), symlinks
(files and folders: never followed), binary files (a NUL byte in the first 8 KiB),
files over ``Limits.file_cap_bytes``, and files a permission rule keeps from search
(:meth:`Sandbox.hidden_from_search`; never opened, and a note says how many).

Confinement: ``path`` is opened with :meth:`Sandbox.open_in_workspace`, and the walk
goes on from that descriptor, each folder and file opened relative to its folder's
descriptor with :func:`~ahp_harness.sandbox.open_entry` (never following a
symlink). What a file is and how large is judged on the opened descriptor
(``fstat``), and at most ``Limits.file_cap_bytes + 1`` bytes are read, so an entry
swapped for a symlink, or a file that grew, after the listing is skipped, never
followed.

Bounds: ``Limits.search_max_results`` matching lines, ``Limits.output_cap_bytes`` of
output, 300 characters per line shown, and ``Limits.search_timeout_s`` of wall
clock, checked between lines (outcome ``timeout`` with what was found). The main
argument permission rules match is the pattern; the path is sandbox-checked like
any other.
"""

from __future__ import annotations

import contextlib
import os
import re
import stat
import time
from collections.abc import Callable, Generator, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

import anyio
from pydantic import BaseModel, Field, field_validator

from ahp_harness.sandbox import open_entry
from ahp_harness.tools.base import INPUT_CONFIG, Text, Tool, ToolResult, failure, is_binary
from ahp_harness.tools.files import read_upto

if TYPE_CHECKING:
    from ahp_harness.sandbox import Sandbox

__all__ = ["SearchInput", "SearchTool"]

_LINE_CHARS = 300


class SearchInput(BaseModel):
    model_config = INPUT_CONFIG

    pattern: Text = Field(description="A Python regular expression, searched in each line.")
    path: Text | None = Field(
        default=None, description="File or folder to search (default: the workspace root)."
    )

    @field_validator("pattern")
    @classmethod
    def _compiles(cls, value: str) -> str:
        try:
            re.compile(value)
        except re.error as exc:
            raise ValueError(f"not a valid regular expression ({exc.msg})") from None
        return value


def _listing(folder_fd: int) -> tuple[list[str], list[str]]:
    """The regular files and the non-dot folders in ``folder_fd``, each sorted."""
    files: list[str] = []
    folders: list[str] = []
    with os.scandir(folder_fd) as entries:
        for entry in entries:
            try:
                if entry.is_dir(follow_symlinks=False):
                    if not entry.name.startswith("."):
                        folders.append(entry.name)
                elif entry.is_file(follow_symlinks=False):
                    files.append(entry.name)
            except OSError:
                continue
    return sorted(files), sorted(folders)


def _folders(top: Path, top_fd: int) -> Iterator[tuple[Path, int, list[str]]]:
    """``(folder, its descriptor, its files)`` for ``top`` and every folder under it.

    Depth first in sorted order (a folder's files before its sub-folders), like
    ``os.walk``; each sub-folder is opened relative to its parent's descriptor
    without following links (one swapped for a symlink since the listing is
    skipped). The descriptors are closed here; ``top_fd`` stays the caller's.
    """
    files, folders = _listing(top_fd)
    yield top, top_fd, files
    stack: list[tuple[int, Path, Iterator[str]]] = [(top_fd, top, iter(folders))]
    try:
        while stack:
            fd, path, pending = stack[-1]
            name = next(pending, None)
            if name is None:
                stack.pop()
                if fd != top_fd:
                    os.close(fd)
                continue
            try:
                child = open_entry(fd, name, os.O_RDONLY | os.O_DIRECTORY)
            except OSError:
                continue
            try:
                files, folders = _listing(child)
            except OSError:
                os.close(child)
                continue
            stack.append((child, path / name, iter(folders)))
            yield path / name, child, files
    finally:
        for fd, _, _ in stack:
            if fd != top_fd:
                os.close(fd)


def _text_of(fd: int, cap: int) -> bytes | None:
    """The content of ``fd`` if it is a regular file of at most ``cap`` bytes, else ``None``."""
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode) or info.st_size > cap:
        return None
    data = read_upto(fd, cap + 1)
    return None if len(data) > cap else data


def _texts(
    top: Path, top_fd: int, cap: int, hidden: Callable[[Path], bool]
) -> Generator[tuple[Path, bytes]]:
    """Every file to search at or under ``top`` (opened as ``top_fd``), with its content.

    A file for which ``hidden`` is true is not opened.
    """
    if not stat.S_ISDIR(os.fstat(top_fd).st_mode):
        data = None if hidden(top) else _text_of(top_fd, cap)
        if data is not None:
            yield top, data
        return
    for folder, folder_fd, names in _folders(top, top_fd):
        for name in names:
            if hidden(folder / name):
                continue
            try:
                fd = open_entry(folder_fd, name, os.O_RDONLY)
            except OSError:
                continue
            try:
                data = _text_of(fd, cap)
            except OSError:
                continue
            finally:
                os.close(fd)
            if data is not None:
                yield folder / name, data


class SearchTool(Tool):
    name: ClassVar[str] = "search"
    kind: ClassVar[str] = "search"
    input_model: ClassVar[type[BaseModel]] = SearchInput
    description: ClassVar[str] = (
        "Search workspace text files for a regular expression; returns file:line: text."
    )

    def main_argument(self, inp: BaseModel) -> str:
        return self._typed(inp, SearchInput).pattern

    def paths(self, inp: BaseModel) -> list[str]:
        return [self._typed(inp, SearchInput).path or "."]

    async def _run(self, inp: BaseModel, sandbox: Sandbox) -> ToolResult:
        args = self._typed(inp, SearchInput)
        regex = re.compile(args.pattern)
        limits = sandbox.limits

        def work() -> ToolResult:
            try:
                top, fd = sandbox.open_in_workspace(args.path or ".", os.O_RDONLY)
            except FileNotFoundError:
                return failure("not_found", f"no such file or folder: {args.path}")
            try:
                return scan(top, fd)
            finally:
                os.close(fd)

        def scan(top: Path, top_fd: int) -> ToolResult:
            deadline = time.monotonic() + limits.search_timeout_s
            lines: list[str] = []
            size = 0
            note = ""
            timed_out = False
            kept_from_search = 0

            def hidden(file: Path) -> bool:
                nonlocal kept_from_search
                if sandbox.hidden_from_search(args.pattern, file):
                    kept_from_search += 1
                    return True
                return False

            texts = contextlib.closing(_texts(top, top_fd, limits.file_cap_bytes, hidden))
            with texts as found:
                for file, data in found:
                    if note or timed_out:
                        break
                    if time.monotonic() > deadline:
                        timed_out = True
                        break
                    if is_binary(data):
                        continue
                    shown = sandbox.display(file)
                    text = data.decode("utf-8", errors="replace")
                    for number, line in enumerate(text.splitlines(), start=1):
                        if time.monotonic() > deadline:
                            timed_out = True
                            break
                        if not regex.search(line):
                            continue
                        if len(lines) >= limits.search_max_results:
                            note = f"\n[truncated: more than {limits.search_max_results} matches]"
                            break
                        entry = f"{shown}:{number}: {line[:_LINE_CHARS]}"
                        cost = len(entry.encode("utf-8")) + 1
                        if size + cost > limits.output_cap_bytes:
                            cap = limits.output_cap_bytes
                            note = f"\n[truncated: output is capped at {cap} bytes]"
                            break
                        lines.append(entry)
                        size += cost
            output = "\n".join(lines) if lines else "no matches"
            if kept_from_search:
                note += (
                    f"\n[{kept_from_search} file(s) not searched: "
                    "the permission rules keep them from search]"
                )
            if timed_out:
                return failure(
                    "timeout",
                    f"search stopped after {limits.search_timeout_s:g}s",
                    output,
                    outcome="timeout",
                )
            return ToolResult(outcome="ok", output=output + note)

        return await anyio.to_thread.run_sync(work)

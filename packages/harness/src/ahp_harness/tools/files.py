"""The file tools: ``read_file``, ``write_file``, ``edit_file``.

* ``read_file`` (kind ``file_read``, ``{"path"}``): the file's text, at most
  ``Limits.read_cap_bytes`` (a ``[truncated]`` note says so); binary files (a NUL
  byte in the first 8 KiB) are refused.
* ``write_file`` (kind ``file_write``, ``{"path", "content"}``): creates or replaces
  the file, creating missing parent folders (all inside the workspace, since the
  path resolved inside it); reports a ``created``/``modified`` :class:`FileChange`.
* ``edit_file`` (kind ``file_edit``, ``{"path", "old", "new"}``): exact-string
  replacement; ``old`` must occur exactly once (zero or several is an error that
  says which); the file must be UTF-8 text of at most ``Limits.file_cap_bytes``.

Every path goes through :meth:`Sandbox.resolve` (symlinks resolved, confined to the
roots) and the resolved path is opened with ``O_NOFOLLOW``, so writing through a
symlink that points out of the workspace is refused. Only regular files are read
or written (never a FIFO or device). Blocking I/O runs in a worker thread.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

import anyio
from pydantic import BaseModel, Field

from ahp_harness.tools.base import (
    INPUT_CONFIG,
    AnyText,
    FileChange,
    Text,
    Tool,
    ToolResult,
    failure,
)

if TYPE_CHECKING:
    from ahp_harness.sandbox import Sandbox

__all__ = [
    "EditFileInput",
    "EditFileTool",
    "ReadFileInput",
    "ReadFileTool",
    "WriteFileInput",
    "WriteFileTool",
    "is_binary",
]

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_SNIFF_BYTES = 8192
TRUNCATED = "\n[truncated]"


def is_binary(data: bytes) -> bool:
    """True if ``data`` looks binary: a NUL byte in its first 8 KiB."""
    return b"\x00" in data[:_SNIFF_BYTES]


def _snapshot(data: bytes | None, cap: int) -> str | None:
    if data is None or is_binary(data):
        return None
    text = data[:cap].decode("utf-8", errors="replace")
    return text + TRUNCATED if len(data) > cap else text


class _NotAFile(Exception):
    pass


def _read(real: Path, limit: int) -> tuple[bytes, int]:
    """Up to ``limit`` bytes of the regular file ``real``, and its size."""
    fd = os.open(real, os.O_RDONLY | _NOFOLLOW | _CLOEXEC | _NONBLOCK)
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise _NotAFile
        return handle.read(limit), info.st_size


def _write(real: Path, data: bytes, *, create: bool) -> None:
    flags = os.O_WRONLY | os.O_TRUNC | _NOFOLLOW | _CLOEXEC | _NONBLOCK
    if create:
        flags |= os.O_CREAT
    fd = os.open(real, flags, 0o666)
    with os.fdopen(fd, "wb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            raise _NotAFile
        handle.write(data)


def _kind_of(real: Path) -> str:
    """``missing``, ``file`` (regular) or ``other`` (folder, FIFO, device...)."""
    try:
        mode = os.lstat(real).st_mode
    except FileNotFoundError:
        return "missing"
    return "file" if stat.S_ISREG(mode) else "other"


class ReadFileInput(BaseModel):
    model_config = INPUT_CONFIG

    path: Text = Field(description="The file to read, relative to the workspace root.")


class WriteFileInput(BaseModel):
    model_config = INPUT_CONFIG

    path: Text = Field(description="The file to create or replace, relative to the workspace.")
    content: AnyText = Field(description="The whole new content of the file (UTF-8 text).")


class EditFileInput(BaseModel):
    model_config = INPUT_CONFIG

    path: Text = Field(description="The file to edit, relative to the workspace root.")
    old: Text = Field(description="The exact text to replace; it must occur exactly once.")
    new: AnyText = Field(description="The replacement text.")


class ReadFileTool(Tool):
    name: ClassVar[str] = "read_file"
    kind: ClassVar[str] = "file_read"
    input_model: ClassVar[type[BaseModel]] = ReadFileInput
    description: ClassVar[str] = "Read a text file in the workspace."

    def main_argument(self, inp: BaseModel) -> str:
        return self._typed(inp, ReadFileInput).path

    def paths(self, inp: BaseModel) -> list[str]:
        return [self._typed(inp, ReadFileInput).path]

    async def _run(self, inp: BaseModel, sandbox: Sandbox) -> ToolResult:
        path = self._typed(inp, ReadFileInput).path
        real = sandbox.resolve(path)
        cap = sandbox.limits.read_cap_bytes

        def work() -> ToolResult:
            kind = _kind_of(real)
            if kind == "missing":
                return failure("not_found", f"no such file: {path}")
            if kind == "other":
                return failure("not_a_file", f"not a regular file: {path}")
            try:
                data, size = _read(real, cap)
            except _NotAFile:
                return failure("not_a_file", f"not a regular file: {path}")
            if is_binary(data):
                return failure("not_text", f"{path} is a binary file; read_file shows text only")
            text = data.decode("utf-8", errors="replace")
            if size > len(data):
                text += f"\n[truncated: file is {size} bytes; read_file shows {cap}]"
            return ToolResult(outcome="ok", output=text)

        return await anyio.to_thread.run_sync(work)


class WriteFileTool(Tool):
    name: ClassVar[str] = "write_file"
    kind: ClassVar[str] = "file_write"
    input_model: ClassVar[type[BaseModel]] = WriteFileInput
    description: ClassVar[str] = "Create or replace a file in the workspace with the given text."

    def main_argument(self, inp: BaseModel) -> str:
        return self._typed(inp, WriteFileInput).path

    def paths(self, inp: BaseModel) -> list[str]:
        return [self._typed(inp, WriteFileInput).path]

    async def _run(self, inp: BaseModel, sandbox: Sandbox) -> ToolResult:
        args = self._typed(inp, WriteFileInput)
        real = sandbox.resolve(args.path)
        cap = sandbox.limits.change_cap_bytes
        data = args.content.encode("utf-8")

        def work() -> ToolResult:
            kind = _kind_of(real)
            if kind == "other":
                return failure("not_a_file", f"not a regular file: {args.path}")
            before: bytes | None = None
            try:
                if kind == "file":
                    before, _ = _read(real, cap + 1)
                real.parent.mkdir(parents=True, exist_ok=True)
                # The parents may have been created just now: confine them again.
                if sandbox.resolve(str(real)) != real:
                    return failure("sandbox_violation", f"path {args.path!r} changed while writing")
                _write(real, data, create=True)
            except _NotAFile:
                return failure("not_a_file", f"not a regular file: {args.path}")
            change = FileChange(
                path=str(real),
                change="created" if kind == "missing" else "modified",
                before=_snapshot(before, cap),
                after=_snapshot(data, cap),
            )
            verb = "created" if kind == "missing" else "replaced"
            return ToolResult(
                outcome="ok",
                output=f"{verb} {sandbox.display(real)} ({len(data)} bytes)",
                file_changes=(change,),
            )

        return await anyio.to_thread.run_sync(work)


class EditFileTool(Tool):
    name: ClassVar[str] = "edit_file"
    kind: ClassVar[str] = "file_edit"
    input_model: ClassVar[type[BaseModel]] = EditFileInput
    description: ClassVar[str] = (
        "Replace one exact occurrence of `old` with `new` in a workspace text file."
    )

    def main_argument(self, inp: BaseModel) -> str:
        return self._typed(inp, EditFileInput).path

    def paths(self, inp: BaseModel) -> list[str]:
        return [self._typed(inp, EditFileInput).path]

    async def _run(self, inp: BaseModel, sandbox: Sandbox) -> ToolResult:
        args = self._typed(inp, EditFileInput)
        real = sandbox.resolve(args.path)
        limits = sandbox.limits

        def work() -> ToolResult:
            kind = _kind_of(real)
            if kind == "missing":
                return failure("not_found", f"no such file: {args.path}")
            if kind == "other":
                return failure("not_a_file", f"not a regular file: {args.path}")
            try:
                data, size = _read(real, limits.file_cap_bytes + 1)
            except _NotAFile:
                return failure("not_a_file", f"not a regular file: {args.path}")
            if size > limits.file_cap_bytes or len(data) > limits.file_cap_bytes:
                return failure(
                    "too_large",
                    f"{args.path} is larger than {limits.file_cap_bytes} bytes; "
                    "edit_file refuses it",
                )
            if is_binary(data):
                return failure("not_text", f"{args.path} is a binary file; edit_file edits text")
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError:
                return failure("not_text", f"{args.path} is not UTF-8 text; edit_file edits text")
            count = text.count(args.old)
            if count == 0:
                return failure("no_match", f"`old` was not found in {args.path}")
            if count > 1:
                return failure(
                    "ambiguous_match",
                    f"`old` occurs {count} times in {args.path}; it must occur exactly once "
                    "(include more surrounding text)",
                )
            after = text.replace(args.old, args.new, 1).encode("utf-8")
            try:
                _write(real, after, create=False)
            except _NotAFile:
                return failure("not_a_file", f"not a regular file: {args.path}")
            change = FileChange(
                path=str(real),
                change="modified",
                before=_snapshot(data, limits.change_cap_bytes),
                after=_snapshot(after, limits.change_cap_bytes),
            )
            return ToolResult(
                outcome="ok",
                output=f"edited {sandbox.display(real)}: replaced 1 occurrence",
                file_changes=(change,),
            )

        return await anyio.to_thread.run_sync(work)

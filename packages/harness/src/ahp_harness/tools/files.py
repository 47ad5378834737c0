"""The file tools: ``read_file``, ``write_file``, ``edit_file``.

* ``read_file`` (kind ``file_read``, ``{"path"}``): the file's text, at most
  ``Limits.read_cap_bytes`` (a ``[truncated]`` note says so). A binary file (a NUL
  byte in the first 8 KiB) of at most that size is an attachment (its bytes, whole,
  with its media type from the file name, ``application/octet-stream`` when unknown
  or textual; the rule is :func:`~ahp_harness.tools.base.attached`'s, shared with
  ``fetch``): the output text names the file, media type and size, and
  ``tool.after`` carries the attachment part (AHP-CONTENT-001: text and JSON stay
  inline text); a larger binary file is refused.
* ``write_file`` (kind ``file_write``, ``{"path", "content"}``): creates or replaces
  the file, creating missing parent folders (on the confined walk, so inside the
  workspace); reports a ``created``/``modified`` :class:`FileChange`.
* ``edit_file`` (kind ``file_edit``, ``{"path", "old", "new"}``): exact-string
  replacement; ``old`` must occur exactly once (zero or several is an error that
  says which); the file must be UTF-8 text of at most ``Limits.file_cap_bytes``.

Every file is opened through :meth:`Sandbox.open_in_workspace`: the path is
resolved and confined to the roots, then walked from the root's descriptor without
following any symlink, so neither a symlink pointing out of the workspace nor one
swapped in for the file or a parent folder after the check is ever followed. What
was opened is judged on its descriptor (``fstat``): only regular files are read or
written (never a FIFO or device), sizes are those of the file actually read, and
``write_file``/``edit_file`` refuse a file with more than one hard link (its other
name may be outside). Each call reads and writes through one descriptor, so the
``before`` text is the file that was changed. New files are created with
``O_CREAT | O_EXCL``. Blocking I/O runs in a worker thread.
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
    attached,
    failure,
    is_binary,
    media_type,
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
    "read_upto",
]

_CHUNK = 1 << 20
TRUNCATED = "\n[truncated]"


def _snapshot(data: bytes | None, cap: int) -> str | None:
    if data is None or is_binary(data):
        return None
    text = data[:cap].decode("utf-8", errors="replace")
    return text + TRUNCATED if len(data) > cap else text


class _NotAFile(Exception):
    pass


def read_upto(fd: int, limit: int) -> bytes:
    """Up to ``limit`` bytes from ``fd``'s current offset (fewer only at end of file)."""
    chunks: list[bytes] = []
    left = limit
    while left > 0:
        chunk = os.read(fd, min(left, _CHUNK))
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def _regular(fd: int) -> os.stat_result:
    """``fd``'s status, or :class:`_NotAFile` unless it is a regular file."""
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        raise _NotAFile
    return info


def _rewrite(fd: int, data: bytes) -> None:
    """Make ``data`` the whole content of the (judged) file ``fd``."""
    os.ftruncate(fd, 0)
    view = memoryview(data)
    offset = 0
    while offset < len(view):
        offset += os.pwrite(fd, view[offset:], offset)


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
    description: ClassVar[str] = (
        "Read a text file in the workspace (a binary file, such as an image, is attached)."
    )

    def main_argument(self, inp: BaseModel) -> str:
        return self._typed(inp, ReadFileInput).path

    def paths(self, inp: BaseModel) -> list[str]:
        return [self._typed(inp, ReadFileInput).path]

    async def _run(self, inp: BaseModel, sandbox: Sandbox) -> ToolResult:
        path = self._typed(inp, ReadFileInput).path
        cap = sandbox.limits.read_cap_bytes

        def work() -> ToolResult:
            try:
                _, fd = sandbox.open_in_workspace(path, os.O_RDONLY)
            except FileNotFoundError:
                return failure("not_found", f"no such file: {path}")
            try:
                size = _regular(fd).st_size
                data = read_upto(fd, cap)
            except _NotAFile:
                return failure("not_a_file", f"not a regular file: {path}")
            finally:
                os.close(fd)
            if is_binary(data):
                return attached(path, data, media_type(path), whole=size <= len(data), cap=cap)
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
        cap = sandbox.limits.change_cap_bytes
        data = args.content.encode("utf-8")

        def work() -> ToolResult:
            created = False
            try:
                try:
                    real, fd = sandbox.open_in_workspace(args.path, os.O_RDWR, make_parents=True)
                except FileNotFoundError:
                    flags = os.O_RDWR | os.O_CREAT | os.O_EXCL
                    real, fd = sandbox.open_in_workspace(args.path, flags, make_parents=True)
                    created = True
            except IsADirectoryError:
                return failure("not_a_file", f"not a regular file: {args.path}")
            before: bytes | None = None
            try:
                _regular(fd)
                if not created:
                    before = read_upto(fd, cap + 1)
                _rewrite(fd, data)
            except _NotAFile:
                return failure("not_a_file", f"not a regular file: {args.path}")
            finally:
                os.close(fd)
            change = FileChange(
                path=str(real),
                change="created" if created else "modified",
                before=_snapshot(before, cap),
                after=_snapshot(data, cap),
            )
            verb = "created" if created else "replaced"
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
        limits = sandbox.limits

        def work() -> ToolResult:
            try:
                real, fd = sandbox.open_in_workspace(args.path, os.O_RDWR)
            except FileNotFoundError:
                return failure("not_found", f"no such file: {args.path}")
            except IsADirectoryError:
                return failure("not_a_file", f"not a regular file: {args.path}")
            try:
                return edit(real, fd)
            except _NotAFile:
                return failure("not_a_file", f"not a regular file: {args.path}")
            finally:
                os.close(fd)

        def edit(real: Path, fd: int) -> ToolResult:
            size = _regular(fd).st_size
            data = read_upto(fd, limits.file_cap_bytes + 1)
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
            _rewrite(fd, after)
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

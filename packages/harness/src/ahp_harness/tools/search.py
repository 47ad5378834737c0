"""``search`` (kind ``search``, input ``{"pattern", "path"?}``): a regex over workspace text.

``pattern`` is a Python regular expression (an invalid one is a
:class:`ToolInputError` on ``pattern``), searched line by line in every text file
under ``path`` (default: the first workspace root; a single file is fine too).
Output lines are ``file:line: text``, files relative to the first root, in sorted
order.

Skipped: folders whose name starts with a dot (``.git``, ``.venv``...), symlinks
(files and folders: never followed), binary files (a NUL byte in the first 8 KiB)
and files over ``Limits.file_cap_bytes``. Bounds: ``Limits.search_max_results``
matching lines, ``Limits.output_cap_bytes`` of output, 300 characters per line
shown, and ``Limits.search_timeout_s`` of wall clock, checked between lines
(outcome ``timeout`` with what was found). The main argument permission rules match
is the pattern; the path is sandbox-checked like any other.
"""

from __future__ import annotations

import os
import re
import stat
import time
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

import anyio
from pydantic import BaseModel, Field, field_validator

from ahp_harness.tools.base import INPUT_CONFIG, Text, Tool, ToolResult, failure
from ahp_harness.tools.files import is_binary

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


def _files_under(top: Path) -> list[Path]:
    """Regular files under ``top``, sorted, skipping dot-folders and all symlinks."""
    found: list[Path] = []
    for folder, dirs, files in os.walk(top, followlinks=False):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        base = Path(folder)
        for name in sorted(files):
            found.append(base / name)
    return found


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
        top = sandbox.resolve(args.path or ".")
        regex = re.compile(args.pattern)
        limits = sandbox.limits

        def work() -> ToolResult:
            if not top.exists():
                return failure("not_found", f"no such file or folder: {args.path}")
            candidates = _files_under(top) if top.is_dir() else [top]
            deadline = time.monotonic() + limits.search_timeout_s
            lines: list[str] = []
            size = 0
            note = ""
            timed_out = False
            for file in candidates:
                if note or timed_out:
                    break
                if time.monotonic() > deadline:
                    timed_out = True
                    break
                try:
                    info = os.lstat(file)
                    if not stat.S_ISREG(info.st_mode) or info.st_size > limits.file_cap_bytes:
                        continue
                    data = file.read_bytes()
                except OSError:
                    continue
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
                        note = f"\n[truncated: output is capped at {limits.output_cap_bytes} bytes]"
                        break
                    lines.append(entry)
                    size += cost
            output = "\n".join(lines) if lines else "no matches"
            if timed_out:
                return failure(
                    "timeout",
                    f"search stopped after {limits.search_timeout_s:g}s",
                    output,
                    outcome="timeout",
                )
            return ToolResult(outcome="ok", output=output + note)

        return await anyio.to_thread.run_sync(work)

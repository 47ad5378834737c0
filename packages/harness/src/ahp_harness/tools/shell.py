"""``shell`` (kind ``shell``, input ``{"command"}``): one ``/bin/sh -c`` command.

The command runs in the first workspace root, with :meth:`Sandbox.shell_env` as its
whole environment (nothing inherited beyond the allowlist), stdin from ``/dev/null``,
stdout and stderr merged, in a new session (its own process group). Bounds:

* wall clock ``Limits.shell_timeout_s``: on expiry the whole process group gets
  ``SIGKILL`` and the shell is reaped; outcome ``timeout``;
* output ``Limits.output_cap_bytes``: the rest is read and discarded, a
  ``[truncated]`` note says how much;
* nothing the command started in its process group outlives the call: the group is
  killed when the call ends, however it ends (a detached ``nohup ... &`` included). A
  process that left the group (``setsid``, a double fork) runs on until the session
  ends: on Linux the harness adopts it and kills it then (:mod:`ahp_harness.lifetime`);
  elsewhere it can outlive the harness. A background process that keeps the command's
  output open holds the call until the output closes or the timeout.

A non-zero exit is outcome ``error`` with the exit code (or signal) in ``error``.

Not confined: the command runs as the harness's user and is not parsed, so paths named
in it are not checked and it can read any file, and reach any host, that user can; the
permission layer decides only whether a command runs at all. Its environment is the
scrubbed one, and the harness's own (``/proc/$PPID/environ``, its memory) is kept from
it as far as :mod:`ahp_harness.lifetime` says.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from typing import TYPE_CHECKING, ClassVar

import anyio
from pydantic import BaseModel, Field

from ahp_harness.tools.base import INPUT_CONFIG, Text, Tool, ToolResult, failure

if TYPE_CHECKING:
    from ahp_harness.sandbox import Sandbox

__all__ = ["ShellInput", "ShellTool", "cap_note"]


class ShellInput(BaseModel):
    model_config = INPUT_CONFIG

    command: Text = Field(description="The command line, run by /bin/sh -c in the workspace.")


def cap_note(omitted: int, cap: int) -> str:
    """The note appended when output was cut at ``cap`` bytes."""
    return f"\n[truncated: {omitted} more bytes; output is capped at {cap} bytes]"


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


class ShellTool(Tool):
    name: ClassVar[str] = "shell"
    kind: ClassVar[str] = "shell"
    input_model: ClassVar[type[BaseModel]] = ShellInput
    description: ClassVar[str] = (
        "Run a shell command (/bin/sh -c) in the workspace; returns stdout and stderr merged."
    )

    def main_argument(self, inp: BaseModel) -> str:
        return self._typed(inp, ShellInput).command

    async def _run(self, inp: BaseModel, sandbox: Sandbox) -> ToolResult:
        command = self._typed(inp, ShellInput).command
        limits = sandbox.limits
        cap = limits.output_cap_bytes
        try:
            process = await anyio.open_process(
                ["/bin/sh", "-c", command],
                cwd=sandbox.roots[0],
                env=sandbox.shell_env(),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        except OSError as exc:
            return failure("spawn_failed", f"could not start /bin/sh: {exc.strerror or 'error'}")

        kept = bytearray()
        total = 0
        timed_out = False
        try:
            with anyio.move_on_after(limits.shell_timeout_s) as scope:
                if process.stdout is not None:
                    async for chunk in process.stdout:
                        total += len(chunk)
                        room = cap - len(kept)
                        if room > 0:
                            kept += chunk[:room]
                await process.wait()
            timed_out = scope.cancelled_caught
        finally:
            # The group id is the shell's pid (new session). Kill whatever is left,
            # then reap the shell, even if we are being cancelled.
            _kill_group(process.pid)
            with anyio.CancelScope(shield=True):
                await process.aclose()

        output = kept.decode("utf-8", errors="replace")
        if total > len(kept):
            output += cap_note(total - len(kept), cap)
        if timed_out:
            return failure(
                "timeout",
                f"command timed out after {limits.shell_timeout_s:g}s; "
                "its process group was killed",
                output,
                outcome="timeout",
            )
        code = process.returncode
        if code is None or code == 0:
            return ToolResult(outcome="ok", output=output)
        if code < 0:
            return failure("exit_status", f"command was killed by signal {-code}", output)
        return failure("exit_status", f"command exited with status {code}", output)

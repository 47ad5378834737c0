"""A bad harness for ``ahp-conformance promises``: it asks its backends, then ignores a deny.

It reads ``AHP_PROBE`` and ``AHP_REGISTRATION`` as the judge says, sends the probe's
``tool.before`` through ``ahp_protocol.client.Hooks``, and runs the call whenever its own
rules allow it (``host``: ``allow``), whatever the backends answered: so it keeps every
promise but the first (and fail-closed, whose synthetic denial it ignores too).
"""

import asyncio
import json
import os
import subprocess
from pathlib import Path

from ahp_protocol.client import Hooks

CAPABILITIES = {"tool.before": {"effects": ["deny", "allow"]}}


async def main() -> None:
    probe = json.loads(Path(os.environ["AHP_PROBE"]).read_text())
    call, workspace = probe["call"], Path(probe["workspace"])
    identity = {"name": "ignores-deny", "version": "0"}
    registration = Path(os.environ["AHP_REGISTRATION"])
    async with Hooks(registration, harness=identity, capabilities=CAPABILITIES) as hooks:
        session = hooks.session(cwd=str(workspace))
        tool = session.tool_call(call["tool"], call["input"], kind=call["kind"])
        await tool.before()  # the result is ignored: the bug under judgment
        if probe["host"] == "allow":
            if call["kind"] == "shell":
                subprocess.run(call["input"]["command"], shell=True, cwd=workspace, check=False)
            else:
                (workspace / call["input"]["path"]).write_text(call["input"]["content"])
            await tool.after("ok", "done")
        else:
            await tool.after_denied()


asyncio.run(main())

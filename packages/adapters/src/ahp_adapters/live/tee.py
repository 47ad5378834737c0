"""``python -m ahp_adapters.live.tee DIR -- ADAPTER hook ...``: record what a harness sends.

Installed as the hook command (``ahp-adapter install --command``) by the live tier: it
saves each native payload the harness writes to the hook's stdin as
``DIR/<n>.<event>.json`` (``{"event", "argv", "payload", "env", "adapterMs"}``: the
wall time of the adapter process, as the harness waits for it), running the real
adapter with the same bytes and hands back its stdout, stderr and exit status untouched, so the
harness sees exactly the adapter's answer.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

SECRET = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|CREDENTIAL|AUTH", re.IGNORECASE)


def main(argv: list[str]) -> int:
    if len(argv) < 3 or argv[1] != "--":
        print("usage: python -m ahp_adapters.live.tee DIR -- COMMAND ARGS...", file=sys.stderr)
        return 2
    folder, command = Path(argv[0]), argv[2:]
    data = sys.stdin.buffer.read()
    event = command[command.index("--event") + 1] if "--event" in command[:-1] else "unknown"
    try:
        payload: object = json.loads(data)
    except ValueError:
        payload = data.decode(errors="replace")
    folder.mkdir(parents=True, exist_ok=True)
    name = f"{time.time_ns()}-{os.getpid()}.{event}.json"
    # What the harness exports to its hooks (where harness.version comes from), minus
    # anything that looks like a credential (the run's provider key is a fake, but still).
    env = {k: v for k, v in os.environ.items() if not SECRET.search(k)}
    started = time.perf_counter()
    done = subprocess.run(command, input=data, capture_output=True, check=False)
    elapsed_ms = (time.perf_counter() - started) * 1000
    record = {"event": event, "argv": command, "payload": payload, "env": env}
    record["adapterMs"] = round(elapsed_ms, 1)
    (folder / name).write_text(json.dumps(record))
    sys.stdout.buffer.write(done.stdout)
    sys.stderr.buffer.write(done.stderr)
    return done.returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

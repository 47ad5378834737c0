"""A misbehaving stdio AHP *observer* for the e2e tests (standard library only).

    b_observer.py MODE [--record FILE] [--delay-ms N] [--once]

It only ever receives ``hooks/observe`` notifications (it is registered with observe
subscriptions), so nothing it does may change a decision. MODE:

- ``ok``: read every line, record it, write nothing;
- ``hang``: never read stdin (the harness's writes pile up in the pipe), never exit;
- ``slow``: sleep ``--delay-ms`` (default 1000) before reading each line;
- ``crash``: read one line, then die with SIGKILL;
- ``garbage``: for every line read, write garbage (invalid UTF-8, half JSON) on stdout
  and noise on stderr.

``--once`` (stdio ``per_event``): stop after one line (``hang`` never reads one).
``--record FILE`` appends one JSON line per line read (``pid``, ``event``: ``start`` or
``line``, ``type``: the observed event type, ``size``), each a single ``write``.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

_record_fd: int | None = None
GARBAGE = b'\xff\xfe{"jsonrpc":"2.0","id":\n' + b"not json " * 400 + b"\n"


def record(entry: dict[str, Any]) -> None:
    if _record_fd is not None:
        entry = {"pid": os.getpid(), **entry}
        os.write(_record_fd, (json.dumps(entry) + "\n").encode("ascii"))


def observed_type(raw: bytes) -> str | None:
    try:
        message = json.loads(raw)
        return str(message["params"]["event"]["type"])
    except (ValueError, KeyError, TypeError):
        return None


def main(argv: list[str]) -> None:
    global _record_fd
    mode, delay_ms, path, once = "ok", 1000, None, False
    items = iter(argv)
    for item in items:
        if item == "--record":
            path = next(items)
        elif item == "--delay-ms":
            delay_ms = int(next(items))
        elif item == "--once":
            once = True
        else:
            mode = item
    if path:
        _record_fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    record({"event": "start", "mode": mode})
    if mode == "hang":
        while True:
            time.sleep(3600)
    stdin = sys.stdin.buffer
    while True:
        if mode == "slow":
            time.sleep(delay_ms / 1000)
        raw = stdin.readline()
        if not raw:
            return
        record({"event": "line", "type": observed_type(raw), "size": len(raw)})
        if mode == "crash":
            os.kill(os.getpid(), signal.SIGKILL)
        if mode == "garbage":
            os.write(2, b"observer noise " * 100 + b"\n")
            os.write(1, GARBAGE)
        if once:
            return


if __name__ == "__main__":
    main(sys.argv[1:])

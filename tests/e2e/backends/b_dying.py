"""A persistent stdio AHP interceptor that is killed (SIGKILL) at chosen calls (stdlib only).

    b_dying.py --counter FILE [--record FILE] [--die N[,N...]] [--die-after N[,N...]]
               [--deny-path PATH]

Each ``hooks/intercept`` request gets the next call number (0-based), counted in
``--counter FILE`` (one byte appended per request) so numbering survives the
process being replaced. At a call number listed in ``--die`` the process records
``{"event": "dying"}`` and sends itself SIGKILL before answering: a ``kill -9``
mid-call, as seen by the harness. Otherwise it answers a ``deny`` when
``tool.input.path`` equals ``--deny-path``, else no effect. At a call number listed
in ``--die-after`` it answers first, then kills itself: it dies between two calls.

``--record FILE`` appends one JSON line per event: ``start`` (with ``pid``) and
``call`` (``pid``, ``call``, ``path``), so a test sees which process answered what.
"""

from __future__ import annotations

import json
import os
import signal
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

DENY_REASON = "b_dying denies this path"
DENY_CODE = "com.example.e2e.dying"
_record_fd: int | None = None


def record(entry: dict[str, Any]) -> None:
    if _record_fd is not None:
        entry = {"pid": os.getpid(), **entry}
        os.write(_record_fd, (json.dumps(entry) + "\n").encode("ascii"))


def next_call(counter: str) -> int:
    fd = os.open(counter, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, b".")
        return os.fstat(fd).st_size - 1
    finally:
        os.close(fd)


def write(obj: Any) -> None:
    sys.stdout.buffer.write(json.dumps(obj, separators=(",", ":")).encode() + b"\n")
    sys.stdout.buffer.flush()


def main(argv: list[str]) -> None:
    global _record_fd
    opts: dict[str, str] = {}
    items = iter(argv)
    for item in items:
        if item in ("--counter", "--record", "--die", "--die-after", "--deny-path"):
            opts[item[2:]] = next(items)
        else:
            sys.exit(f"unknown argument {item}")
    if "record" in opts:
        _record_fd = os.open(opts["record"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    record({"event": "start"})
    die = {int(n) for n in opts.get("die", "").split(",") if n.strip()}
    die_after = {int(n) for n in opts.get("die-after", "").split(",") if n.strip()}
    for raw in sys.stdin.buffer:
        try:
            message = json.loads(raw)
        except ValueError:
            continue
        if not isinstance(message, dict) or "id" not in message:
            continue  # notifications are never answered
        rid = message["id"]
        if message.get("method") != "hooks/intercept":
            write({"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": "no"}})
            continue
        call = next_call(opts["counter"])
        tool = message["params"]["event"].get("tool") or {}
        path = (tool.get("input") or {}).get("path")
        record({"event": "call", "call": call, "path": path})
        if call in die:
            record({"event": "dying", "call": call})
            os.kill(os.getpid(), signal.SIGKILL)
        effects = []
        if path is not None and path == opts.get("deny-path"):
            effects = [{"type": "deny", "reason": DENY_REASON, "code": DENY_CODE}]
        result = {"protocolVersion": "draft", "effects": effects}
        write({"jsonrpc": "2.0", "id": rid, "result": result})
        if call in die_after:
            record({"event": "dying", "call": call})
            os.kill(os.getpid(), signal.SIGKILL)


if __name__ == "__main__":
    main(sys.argv[1:])

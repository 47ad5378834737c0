"""A scripted, recording AHP stdio backend for dispatcher tests (standard library only).

It records every line it receives and answers each ``hooks/intercept`` with a
scripted effect list, so a test can see exactly what the harness sent (the
effective event, ``params.state``, ``params.capabilities``) and steer what comes
back. Like ``misbehave.py`` it does NOT use our server kit.

    recorder.py [--once] [--record FILE] [--effects JSON] [--script JSON]
                [--counter FILE] [--configuration JSON]

- ``--effects '[{"type":"deny","reason":"x"}]'``: the effects of every answer
  (default ``[]``).
- ``--script '[STEP, ...]'``: one step per intercept request, by call number (the
  last step repeats). A step is ``{"effects": [...]}`` (default: ``--effects``),
  optionally with ``"delayMs": N`` (sleep first), ``"crash": true`` (exit 3 without
  answering) or ``"hang": true`` (never answer).
- ``--counter FILE``: count calls in FILE (one byte appended per request) so the
  call number survives process restarts (a retried persistent backend, per_event).
- ``--configuration JSON``: the ``configuration`` answered to ``hooks/configuration``
  (without it that method gets ``-32601``).
- ``--record FILE``: one JSON line per received line, appended and flushed at once:
  ``{"pid", "time", "event": "message", "raw": <the line as text>, "message": <parsed>}``
  (plus ``"event": "start"`` at start-up).
- ``--once``: stdio ``per_event``: handle one line, then exit.

Notifications are recorded and never answered.
"""

from __future__ import annotations

import json
import os
import sys
import time

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

_record_fd: int | None = None


def record(entry: dict[str, Any]) -> None:
    if _record_fd is None:
        return
    entry = {"pid": os.getpid(), "time": time.time(), **entry}
    os.write(_record_fd, (json.dumps(entry, ensure_ascii=True) + "\n").encode("ascii"))


def next_call(counter: str | None, local: list[int]) -> int:
    """The 0-based number of this request (across processes when ``counter`` is given)."""
    if counter is None:
        local[0] += 1
        return local[0] - 1
    fd = os.open(counter, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, b".")
        return os.fstat(fd).st_size - 1
    finally:
        os.close(fd)


def write(obj: Any) -> None:
    out = sys.stdout.buffer
    out.write(json.dumps(obj, separators=(",", ":")).encode("utf-8") + b"\n")
    out.flush()


def main(argv: list[str]) -> None:
    global _record_fd
    opts: dict[str, str] = {}
    once = False
    items = iter(argv)
    for item in items:
        if item == "--once":
            once = True
        elif item in ("--record", "--effects", "--script", "--counter", "--configuration"):
            value = next(items, None)
            if value is None:
                sys.exit(f"{item} needs a value")
            opts[item[2:]] = value
        else:
            sys.exit(f"unknown argument {item}")
    if "record" in opts:
        _record_fd = os.open(opts["record"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        record({"event": "start", "argv": argv})
    effects = json.loads(opts.get("effects", "[]"))
    script: list[dict[str, Any]] = json.loads(opts.get("script", "[]"))
    configuration = json.loads(opts["configuration"]) if "configuration" in opts else None
    local = [0]
    stdin = sys.stdin.buffer
    while True:
        raw = stdin.readline()
        if not raw:
            break
        try:
            message = json.loads(raw)
        except ValueError:
            record({"event": "raw", "raw": raw.decode("utf-8", "replace")})
            continue
        record({"event": "message", "raw": raw.decode("utf-8"), "message": message})
        if isinstance(message, dict) and "id" in message:
            rid = message["id"]
            if message.get("method") == "hooks/configuration":
                if configuration is None:
                    error = {"code": -32601, "message": "method not found"}
                    write({"jsonrpc": "2.0", "id": rid, "error": error})
                else:
                    result = {"protocolVersion": "draft", "configuration": configuration}
                    write({"jsonrpc": "2.0", "id": rid, "result": result})
            else:
                call = next_call(opts.get("counter"), local)
                step = script[min(call, len(script) - 1)] if script else {}
                if step.get("delayMs"):
                    time.sleep(step["delayMs"] / 1000.0)
                if step.get("crash"):
                    os._exit(3)
                if step.get("hang"):
                    time.sleep(3600)
                answer = {"protocolVersion": "draft", "effects": step.get("effects", effects)}
                write({"jsonrpc": "2.0", "id": rid, "result": answer})
        if once:
            break


if __name__ == "__main__":
    main(sys.argv[1:])

"""A scripted, recording AHP backend built on our server kit, for the harness tests.

    scripted_kit.py --script FILE [--record FILE] [--once]

``FILE`` (``--script``) is JSON: ``{"rules": [RULE, ...]}``. For each
``hooks/intercept`` request the first matching rule answers; no match answers no
effect. A RULE is::

    {"event": "tool.before",            # a selector: exact name, "family.*" or "*"
     "tool": "write_file",              # optional: the tool name must be this
     "input": {"path": "a.txt"},        # optional: each field of tool.input must equal
     "contains": {"command": "rm -rf"}, # optional: each field of tool.input contains text
     "effects": [{"type": "allow"}],    # what to answer (plain effect objects)
     "raise": true}                     # optional: the handler raises instead (kit: -32004)

The kit checks every answer against ``params.capabilities`` (an effect the harness
did not advertise becomes a JSON-RPC error, which the harness treats as an
operational failure). ``--record FILE`` appends every line received on stdin, as
``{"raw": <the line as text>}``, before the kit parses it, so a test sees exactly
what the harness sent (intercept requests and observe notifications alike).
Observations are recorded only; they have no handler logic.
"""

from __future__ import annotations

import json
import os
import sys
from typing import IO, Any

from ahp_protocol.server import Backend, InterceptRequest
from ahp_protocol.server.stdio import serve_once, serve_persistent
from ahp_protocol.wire import catalogue


class _Tee:
    """``stdin`` whose lines are also appended to a record file as they are read."""

    def __init__(self, stream: IO[bytes], fd: int) -> None:
        self.stream = stream
        self.fd = fd

    def readline(self, limit: int = -1) -> bytes:
        line = self.stream.readline(limit)
        if line.strip():
            entry = {"raw": line.decode("utf-8", "replace").rstrip("\n")}
            os.write(self.fd, (json.dumps(entry, ensure_ascii=True) + "\n").encode("ascii"))
        return line


def _matches(rule: dict[str, Any], request: InterceptRequest) -> bool:
    if not catalogue.selector_matches(str(rule.get("event", "*")), request.event_type):
        return False
    if "tool" in rule and rule["tool"] != request.tool_name:
        return False
    tool_input = request.tool_input
    for key, value in rule.get("input", {}).items():
        if tool_input.get(key) != value:
            return False
    return all(
        str(text) in str(tool_input.get(key, "")) for key, text in rule.get("contains", {}).items()
    )


def build(rules: list[dict[str, Any]]) -> Backend:
    backend = Backend("com.example.harness.scripted")

    @backend.intercept("*")
    def answer(request: InterceptRequest) -> Any:
        for rule in rules:
            if _matches(rule, request):
                if rule.get("raise"):
                    raise RuntimeError("scripted failure")
                return list(rule.get("effects", []))
        return None

    @backend.observe("*")
    def observed(event: dict[str, Any]) -> None:
        return None

    return backend


def main(argv: list[str]) -> None:
    opts: dict[str, str] = {}
    once = False
    items = iter(argv)
    for item in items:
        if item == "--once":
            once = True
        elif item in ("--script", "--record"):
            value = next(items, None)
            if value is None:
                sys.exit(f"{item} needs a value")
            opts[item[2:]] = value
        else:
            sys.exit(f"unknown argument {item}")
    rules: list[dict[str, Any]] = []
    if "script" in opts:
        with open(opts["script"], encoding="utf-8") as handle:
            rules = list(json.load(handle).get("rules", []))
    backend = build(rules)
    stdin: IO[bytes] = sys.stdin.buffer
    if "record" in opts:
        fd = os.open(opts["record"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        stdin = _Tee(sys.stdin.buffer, fd)  # type: ignore[assignment]
    if once:
        serve_once(backend, stdin)
    else:
        serve_persistent(backend, stdin)


if __name__ == "__main__":
    main(sys.argv[1:])

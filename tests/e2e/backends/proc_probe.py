"""What a tool can learn about a process from ``/proc`` (standard library only).

    proc_probe.py PID PATTERN OUT

Tries to read ``/proc/PID/environ``, ``cmdline``, ``maps``, ``fd`` (a listing) and the
writable mappings of ``mem``, and writes one JSON object to OUT: per path either
``{"ok": true, "matches": [...]}`` (the distinct matches of the regular expression
PATTERN in what was read; ``environ`` also lists the variable names, ``cmdline`` the
text) or ``{"ok": false, "error": "PermissionError", "errno": 13}``.
"""

from __future__ import annotations

import json
import os
import re
import sys


def main(pid: int, pattern: re.Pattern[bytes], out: str) -> None:
    base = f"/proc/{pid}"

    def found(data: bytes) -> list[str]:
        return sorted({m.decode("ascii", "replace") for m in pattern.findall(data)})

    def environ() -> dict[str, object]:
        with open(f"{base}/environ", "rb") as f:
            data = f.read()
        names = sorted(
            e.split(b"=", 1)[0].decode("utf-8", "replace") for e in data.split(b"\0") if e
        )
        return {"matches": found(data), "names": names}

    def cmdline() -> dict[str, object]:
        with open(f"{base}/cmdline", "rb") as f:
            data = f.read()
        return {
            "matches": found(data),
            "text": data.replace(b"\0", b" ").decode("utf-8", "replace"),
        }

    def maps() -> dict[str, object]:
        with open(f"{base}/maps", "rb") as f:
            return {"matches": found(f.read())}

    def fd() -> dict[str, object]:
        return {"matches": [], "count": len(os.listdir(f"{base}/fd"))}

    def mem() -> dict[str, object]:
        matches: set[str] = set()
        with open(f"{base}/mem", "rb", buffering=0) as m:
            with open(f"{base}/maps", encoding="ascii", errors="replace") as f:
                regions = [line.split() for line in f]
            for region in regions:
                if not region[1].startswith("rw"):
                    continue
                start, end = (int(x, 16) for x in region[0].split("-"))
                try:
                    m.seek(start)
                    matches.update(found(m.read(end - start)))
                except (OSError, OverflowError, ValueError):
                    continue
        return {"matches": sorted(matches)}

    report: dict[str, object] = {}
    for name, probe in [
        ("environ", environ),
        ("cmdline", cmdline),
        ("maps", maps),
        ("fd", fd),
        ("mem", mem),
    ]:
        try:
            report[name] = {"ok": True, **probe()}
        except OSError as exc:
            report[name] = {"ok": False, "error": type(exc).__name__, "errno": exc.errno}
    with open(out, "w", encoding="utf-8") as f:
        json.dump(report, f)


if __name__ == "__main__":
    main(int(sys.argv[1]), re.compile(sys.argv[2].encode()), sys.argv[3])

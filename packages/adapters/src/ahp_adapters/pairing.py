"""Pairing synthesized call ids across a pre-tool and its post-tool hook (Gemini, Cursor).

When a harness sends no tool-call id, ``tool.before`` gets a synthesized one;
the later ``tool.after`` of the same call should carry the *same* id. This
module keeps, per session, a small FIFO of (tool key -> call id) in the
runtime directory: :func:`remember` after a pre-tool hook, :func:`recall`
(which removes the oldest match) in the post-tool hook.

Bounds: at most :data:`MAX_ENTRIES` entries per session, entries older than
:data:`MAX_AGE_S` dropped, the file locked with ``flock`` while read and
rewritten. Best effort: any I/O problem means "no pairing" (the post-tool
event then keeps its own synthesized id). Standard library only.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import time
from collections.abc import Iterator
from typing import Any

from ahp_adapters.rundir import runtime_dir

MAX_ENTRIES = 64
MAX_AGE_S = 3600.0


def _file(session: str) -> str:
    digest = hashlib.sha256(session.encode("utf-8", "surrogateescape")).hexdigest()[:24]
    directory = os.path.join(runtime_dir(), "pairs")
    with contextlib.suppress(FileExistsError):
        os.mkdir(directory, 0o700)
    return os.path.join(directory, f"{digest}.json")


@contextlib.contextmanager
def _locked(session: str) -> Iterator[tuple[int, list[dict[str, Any]]]]:
    fd = os.open(_file(session), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        raw = b""
        while chunk := os.read(fd, 65536):
            raw += chunk
        try:
            entries = json.loads(raw) if raw else []
        except ValueError:
            entries = []
        if not isinstance(entries, list):
            entries = []
        now = time.time()
        fresh = [
            e
            for e in entries
            if isinstance(e, dict)
            and isinstance(e.get("t"), (int, float))
            and now - e["t"] < MAX_AGE_S
        ]
        yield fd, fresh
    finally:
        os.close(fd)


def _write(fd: int, entries: list[dict[str, Any]]) -> None:
    data = json.dumps(entries[-MAX_ENTRIES:], separators=(",", ":")).encode("utf-8")
    os.lseek(fd, 0, os.SEEK_SET)
    os.ftruncate(fd, 0)
    os.write(fd, data)


def remember(session: str, key: str, call_id: str) -> None:
    """Record that the pre-tool hook of ``key`` in ``session`` used ``call_id``."""
    with contextlib.suppress(OSError), _locked(session) as (fd, entries):
        entries.append({"k": key, "id": call_id, "t": time.time()})
        _write(fd, entries)


def recall(session: str, key: str) -> str | None:
    """The oldest unpaired call id recorded for ``key`` in ``session`` (removed), or ``None``."""
    with contextlib.suppress(OSError), _locked(session) as (fd, entries):
        for i, entry in enumerate(entries):
            if entry.get("k") == key and isinstance(entry.get("id"), str):
                del entries[i]
                _write(fd, entries)
                return str(entry["id"])
    return None

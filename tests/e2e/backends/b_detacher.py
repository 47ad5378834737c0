"""A stdio AHP observer that leaves processes behind (standard library only).

    b_detacher.py --record FILE --ready FIFO --token TOKEN

On start, before reading anything, it starts three sleepers (``sleep 1000.TOKEN``)
that leave its process group, as a daemonising backend would:

- ``leader``: a child that calls ``setsid()`` and sleeps (it stays this backend's
  child until the backend dies);
- ``nested``: a child of ``leader``, in ``leader``'s new session;
- ``double-fork``: started by an intermediate child that calls ``setsid()``, forks it
  and exits at once (so it is an orphan while the backend still runs).

It appends one JSON line ``{"pid": ..., "role": ...}`` per sleeper to ``--record``, then
writes ``ready`` to the ``--ready`` FIFO (blocking until someone reads it), then reads
``hooks/observe`` notifications until EOF and writes nothing. Every sleeper has
``/dev/null`` as stdin, stdout and stderr.
"""

from __future__ import annotations

import json
import os
import sys


def quiet() -> None:
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)


def sleeper(token: str) -> None:
    quiet()
    os.execvp("sleep", ["sleep", f"1000.{token}"])


def main(argv: list[str]) -> None:
    args = dict(zip(argv[::2], argv[1::2], strict=False))
    record, ready, token = args["--record"], args["--ready"], args["--token"]
    read_end, write_end = os.pipe()

    leader = os.fork()
    if leader == 0:
        os.close(read_end)
        os.setsid()
        nested = os.fork()
        if nested == 0:
            sleeper(token)
        os.write(write_end, f"{nested} nested\n".encode())
        sleeper(token)
    intermediate = os.fork()
    if intermediate == 0:
        os.close(read_end)
        os.setsid()
        orphan = os.fork()
        if orphan == 0:
            sleeper(token)
        os.write(write_end, f"{orphan} double-fork\n".encode())
        os._exit(0)
    os.close(write_end)
    os.waitpid(intermediate, 0)
    lines = [f"{leader} leader"]
    with os.fdopen(read_end, "r") as reports:
        lines += [reports.readline().strip(), reports.readline().strip()]
    with open(record, "a", encoding="utf-8") as f:
        for line in lines:
            pid, role = line.split()
            f.write(json.dumps({"pid": int(pid), "role": role}) + "\n")
    with open(ready, "w", encoding="utf-8") as f:
        f.write("ready\n")
    for _ in sys.stdin.buffer:
        pass


if __name__ == "__main__":
    main(sys.argv[1:])

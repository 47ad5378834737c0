"""The adapter's private runtime directory: daemon sockets, locks, logs, pairing state.

Owns where that directory is and that it is safe: ``$AHP_ADAPTER_RUNTIME_DIR``
if set, else ``$XDG_RUNTIME_DIR/ahp-adapter``, else
``<tmp>/ahp-adapter-<uid>``; created with mode 0700 and refused (``UnsafeRuntimeDir``)
unless it is a real directory owned by the current user with no group or
other permissions. Also owns the daemon's per-registration key and file names.

Never follows a symlink for the directory itself and never widens permissions.
Standard library only.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import stat
import sys
from pathlib import Path

from ahp_adapters import __version__

ENV_DIR = "AHP_ADAPTER_RUNTIME_DIR"


class UnsafeRuntimeDir(OSError):
    """The runtime directory is not a private directory of this user."""


def _uid() -> int:
    getuid = getattr(os, "getuid", None)
    return int(getuid()) if getuid else 0


def runtime_dir() -> Path:
    """The private runtime directory, created (0700) if missing, checked every time."""
    configured = os.environ.get(ENV_DIR)
    if configured:
        base = Path(configured)
    else:
        xdg = os.environ.get("XDG_RUNTIME_DIR")
        if xdg and os.path.isabs(xdg) and os.path.isdir(xdg):
            base = Path(xdg) / "ahp-adapter"
        else:
            import tempfile

            base = Path(tempfile.gettempdir()) / f"ahp-adapter-{_uid()}"
    with contextlib.suppress(FileExistsError):
        os.mkdir(base, 0o700)
    info = os.lstat(base)
    if not stat.S_ISDIR(info.st_mode):
        raise UnsafeRuntimeDir(f"{base} is not a directory")
    if hasattr(os, "getuid") and info.st_uid != _uid():
        raise UnsafeRuntimeDir(f"{base} is not owned by this user")
    if info.st_mode & 0o077:
        raise UnsafeRuntimeDir(f"{base} is accessible to other users (expected mode 0700)")
    return base


def daemon_key(registration: str, cwd: str) -> str:
    """One daemon per (registration file, working directory, interpreter, adapter version).

    The working directory matters: relative paths in a registration (a stdio
    backend's command or arguments) resolve against it.
    """
    material = "\0".join((registration, cwd, sys.executable, __version__))
    return hashlib.sha256(material.encode("utf-8", "surrogateescape")).hexdigest()[:20]


def daemon_files(registration: str, cwd: str) -> tuple[Path, Path, Path]:
    """(socket, start lock, log) for the daemon of this registration and directory."""
    base = runtime_dir()
    key = daemon_key(registration, cwd)
    return base / f"d-{key}.sock", base / f"d-{key}.lock", base / f"d-{key}.log"

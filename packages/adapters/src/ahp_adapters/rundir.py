"""The adapter's private runtime directory: daemon sockets, locks, logs, pairing state.

Owns where that directory is and that it is safe: ``$AHP_ADAPTER_RUNTIME_DIR``
if set, else ``$XDG_RUNTIME_DIR/ahp-adapter``, else
``<tmp>/ahp-adapter-<uid>``; created with mode 0700 and refused (``UnsafeRuntimeDir``)
unless it is a real directory owned by the current user with no group or
other permissions. Also owns the daemon's per-registration key and file names.

Never follows a symlink for the directory itself and never widens permissions.
Imports next to nothing (``os``, ``stat``, ``sys``, the built-in SHA-256): the
thin hook client computes its daemon's socket path on every tool call, so
``pathlib``, ``hashlib`` (OpenSSL) and ``tempfile`` stay out of this module.
"""

from __future__ import annotations

import os
import stat
import sys

from ahp_adapters import __version__

ENV_DIR = "AHP_ADAPTER_RUNTIME_DIR"


class UnsafeRuntimeDir(OSError):
    """The runtime directory is not a private directory of this user."""


def _uid() -> int:
    getuid = getattr(os, "getuid", None)
    return int(getuid()) if getuid else 0


def runtime_dir() -> str:
    """The private runtime directory, created (0700) if missing, checked every time."""
    configured = os.environ.get(ENV_DIR)
    if configured:
        base = configured
    else:
        xdg = os.environ.get("XDG_RUNTIME_DIR")
        if xdg and os.path.isabs(xdg) and os.path.isdir(xdg):
            base = os.path.join(xdg, "ahp-adapter")
        else:
            import tempfile  # only here: it imports half the standard library

            base = os.path.join(tempfile.gettempdir(), f"ahp-adapter-{_uid()}")
    try:  # noqa: SIM105 (contextlib is an import the thin hook does not pay for)
        os.mkdir(base, 0o700)
    except FileExistsError:
        pass
    info = os.lstat(base)
    if not stat.S_ISDIR(info.st_mode):
        raise UnsafeRuntimeDir(f"{base} is not a directory")
    if hasattr(os, "getuid") and info.st_uid != _uid():
        raise UnsafeRuntimeDir(f"{base} is not owned by this user")
    if info.st_mode & 0o077:
        raise UnsafeRuntimeDir(f"{base} is accessible to other users (expected mode 0700)")
    return base


def registration_path(path: str) -> str:
    """The registration's absolute real path (the daemon's identity depends on it)."""
    return os.path.realpath(os.path.expanduser(path))


def sha256_hex(data: bytes) -> str:
    """SHA-256 of ``data`` in hex, from the interpreter's built-in module where it has one."""
    try:
        from _sha2 import sha256  # type: ignore[import-not-found, unused-ignore]  # 3.12+
    except ImportError:
        try:
            from _sha256 import sha256  # type: ignore[import-not-found, no-redef, unused-ignore]
        except ImportError:
            from hashlib import sha256  # type: ignore[assignment, unused-ignore]
    digest: str = sha256(data).hexdigest()
    return digest


def daemon_key(registration: str, cwd: str) -> str:
    """One daemon per (registration file, working directory, interpreter, adapter version).

    The working directory matters: relative paths in a registration (a stdio
    backend's command or arguments) resolve against it.
    """
    material = "\0".join((registration, cwd, sys.executable, __version__))
    return sha256_hex(material.encode("utf-8", "surrogateescape"))[:20]


def daemon_files(registration: str, cwd: str) -> tuple[str, str, str]:
    """(socket, start lock, log) for the daemon of this registration and directory."""
    stem = os.path.join(runtime_dir(), f"d-{daemon_key(registration, cwd)}")
    return stem + ".sock", stem + ".lock", stem + ".log"

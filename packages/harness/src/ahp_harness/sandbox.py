"""The host's sandbox: workspace confinement, a scrubbed environment, limits.

Owns three things, whatever any hook or permission rule said:

* **Paths.** :meth:`Sandbox.resolve` turns a tool's path argument into an absolute
  path with every symlink resolved (a dangling one included) and refuses it with a
  :class:`SandboxViolation` unless it lies inside one of the workspace roots.
  Relative paths are taken from ``roots[0]``; ``~`` is never expanded.
* **Environment.** :meth:`Sandbox.shell_env` builds the environment ``shell`` runs
  in from an allowlist of harmless names (``PATH``, ``LANG``, ...). Nothing else is
  inherited: no tokens, keys or credentials. ``HOME`` is a private temporary folder
  (removed when the sandbox is garbage-collected or :meth:`Sandbox.close` is called).
* **Hosts.** :meth:`Sandbox.check_url` lets ``fetch`` reach only ``http``/``https``
  URLs whose host the ``fetch_hosts`` predicate (normally
  :meth:`ahp_harness.permissions.Permissions.fetch_allowed`) accepts; with no
  predicate, no host is allowed. Likewise ``search`` skips each file the
  ``search_hides`` predicate (normally
  :meth:`ahp_harness.permissions.Permissions.hidden_from_search`) gives a reason
  for (:meth:`Sandbox.hidden_from_search`): the rules decide, the sandbox carries
  their answer to the tool.

:meth:`Sandbox.check` applies the path and host checks to one tool call before it
runs. :class:`Limits` holds every bound the tools enforce (time, output, sizes).

**Opening.** What a file tool opens is confined, not only what it checked:
:meth:`Sandbox.open_in_workspace` resolves the path again and then walks the result
from a descriptor of the workspace root (checked to be the very folder the sandbox
was made with), one component at a time through :func:`open_entry`, which never
follows a symlink (``O_NOFOLLOW``, relative to the folder's descriptor). A symlink
met on the way can only have been swapped in after the check; it is refused with a
:class:`SandboxViolation` and nothing outside is opened. A file opened for writing
that has more than one hard link is refused too: the other name may lie outside
the workspace, and nothing on this side can tell. ``read_file``, ``write_file``,
``edit_file`` and ``search`` (its walk and every file it reads) open only this way.

Never does: decide ``allow``/``ask``/``deny`` (that is :mod:`ahp_harness.permissions`),
know anything about AHP, or resolve host names (a host is matched by name; DNS is
not consulted). Bounds: reads of a hard link are allowed (it cannot be told from any
other file, and tools such as pnpm and uv fill workspaces with them); the shell tool
is not confined by any of this (see the README's "Limits").
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import shutil
import stat
import tempfile
import weakref
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

if TYPE_CHECKING:
    from pydantic import BaseModel

    from ahp_harness.tools.base import Tool

__all__ = [
    "DEFAULT_ENV_ALLOWLIST",
    "Limits",
    "Sandbox",
    "SandboxViolation",
    "looks_secret",
    "open_entry",
]

#: Environment names ``shell`` may inherit from the harness (values copied as they are).
DEFAULT_ENV_ALLOWLIST: frozenset[str] = frozenset(
    {"PATH", "LANG", "LANGUAGE", "LC_ALL", "LC_CTYPE", "LC_MESSAGES", "TERM", "TZ", "SHELL"}
)

_SECRET_NAME = re.compile(
    r"TOKEN|SECRET|PASSW|PASSPHRASE|CREDENTIAL|API_?KEY|PRIVATE|AUTH|COOKIE|SESSION",
    re.IGNORECASE,
)


def looks_secret(name: str) -> bool:
    """Whether an environment variable's name says it holds a secret: such a name is
    never given to a tool, even when a caller puts it in the allowlist, and never shown
    by the harness itself (:mod:`ahp_harness.lifetime`)."""
    return _SECRET_NAME.search(name) is not None


# Every open a file tool makes: never follow a symlink, never leak the descriptor into
# a child, never take a controlling terminal, never block on a FIFO.
_OPEN_FLAGS = os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NOCTTY | os.O_NONBLOCK
_FOLDER = os.O_RDONLY | os.O_DIRECTORY
_WRITE_ACCESS = os.O_WRONLY | os.O_RDWR


class SandboxViolation(Exception):
    """A tool call would leave the sandbox. ``reason`` is a clear, credential-free sentence."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason

    def __str__(self) -> str:
        return self.reason


@dataclass(frozen=True)
class Limits:
    """Every bound the tools enforce. Times in seconds, sizes in bytes."""

    shell_timeout_s: float = 30.0
    output_cap_bytes: int = 64_000
    fetch_cap_bytes: int = 1_000_000
    fetch_timeout_s: float = 10.0
    #: ``read_file`` returns at most this much of a file.
    read_cap_bytes: int = 256_000
    #: ``edit_file`` and ``search`` skip or refuse files larger than this.
    file_cap_bytes: int = 4_000_000
    #: ``FileChange.before``/``after`` keep at most this much text each.
    change_cap_bytes: int = 64_000
    #: ``search`` stops after this many matching lines ...
    search_max_results: int = 200
    #: ... or after this much wall-clock time (checked between lines).
    search_timeout_s: float = 10.0


_DEFAULT_LIMITS = Limits()


def _display_roots(roots: Sequence[Path]) -> str:
    return ", ".join(str(r) for r in roots)


def open_entry(folder_fd: int, name: str, flags: int, mode: int = 0o666) -> int:
    """Open ``name`` in the folder ``folder_fd`` without following a symlink.

    The single step of every walk the file tools make. ``name`` is one component
    (no ``/``, not ``.`` or ``..``; anything else is a :class:`SandboxViolation`).
    ``flags`` always gain ``O_NOFOLLOW | O_CLOEXEC | O_NOCTTY | O_NONBLOCK``, so a
    symlink fails with :class:`OSError` (``ELOOP``, or ``ENOTDIR`` with
    ``O_DIRECTORY``) instead of being followed. The caller closes the descriptor.
    """
    if name in ("", ".", "..") or "/" in name or "\x00" in name:
        raise SandboxViolation(f"{name!r} is not a single path component")
    return os.open(name, flags | _OPEN_FLAGS, mode, dir_fd=folder_fd)


def _identity(info: os.stat_result) -> tuple[int, int]:
    return info.st_dev, info.st_ino


class Sandbox:
    """Confinement to ``roots`` (resolved), a scrubbed ``shell`` environment, limits."""

    def __init__(
        self,
        roots: Sequence[Path],
        *,
        limits: Limits = _DEFAULT_LIMITS,
        env_allowlist: Collection[str] = DEFAULT_ENV_ALLOWLIST,
        fetch_hosts: Callable[[str], bool] | None = None,
        search_hides: Callable[[str, str], str | None] | None = None,
    ) -> None:
        if not roots:
            raise ValueError("a sandbox needs at least one workspace root")
        resolved: list[Path] = []
        for root in roots:
            real = Path(root).resolve()
            if not real.is_dir():
                raise ValueError(f"workspace root {str(root)!r} is not a directory")
            resolved.append(real)
        self.roots: tuple[Path, ...] = tuple(resolved)
        # Which folders the roots are: open_in_workspace refuses a root replaced since.
        self._root_ids = tuple(_identity(os.stat(root)) for root in resolved)
        self.limits = limits
        self.env_allowlist = frozenset(env_allowlist)
        self.fetch_hosts = fetch_hosts
        self.search_hides = search_hides
        self._home: Path | None = None
        self._home_cleanup: weakref.finalize[..., Sandbox] | None = None

    # -- paths ---------------------------------------------------------------------

    def resolve(self, path: str) -> Path:
        """The real absolute path for ``path``, or :class:`SandboxViolation` if outside."""
        if not isinstance(path, str) or not path:
            raise SandboxViolation("path is empty")
        if "\x00" in path:
            raise SandboxViolation("path contains a NUL character")
        if path.startswith("~"):
            raise SandboxViolation(
                f"path {path!r} is home-relative; use a path inside the workspace "
                f"({_display_roots(self.roots)})"
            )
        candidate = Path(path)
        if not candidate.is_absolute():
            candidate = self.roots[0] / candidate
        try:
            real = Path(os.path.realpath(candidate))
        except (OSError, RuntimeError, ValueError):
            raise SandboxViolation(f"path {path!r} cannot be resolved") from None
        if not any(real.is_relative_to(root) for root in self.roots):
            raise SandboxViolation(
                f"path {path!r} resolves outside the workspace ({_display_roots(self.roots)})"
            )
        return real

    def open_in_workspace(
        self, path: str, flags: int, mode: int = 0o666, *, make_parents: bool = False
    ) -> tuple[Path, int]:
        """Resolve ``path`` (:meth:`resolve`) and open it without following any link.

        Returns the real path and a descriptor the caller closes. The walk starts
        from a descriptor of the root holding the path and opens every folder on the
        way, then the last component with ``flags``, each through :func:`open_entry`.
        ``make_parents`` creates missing folders on the way (inside, by construction).

        Refused with :class:`SandboxViolation`: a symlink met on the way (it was
        swapped in after the check: nothing is opened through it), a root that is no
        longer the folder the sandbox was made with, and a descriptor opened for
        writing on a file with more than one hard link. ``O_TRUNC`` is a
        :class:`ValueError` (truncate with :func:`os.ftruncate` once the descriptor
        was judged: a hard link must be refused before it changes). Otherwise the
        :class:`OSError` of the open (``FileNotFoundError``, ``IsADirectoryError``...).
        """
        if flags & os.O_TRUNC:
            raise ValueError("open_in_workspace refuses O_TRUNC; truncate the judged descriptor")
        real = self.resolve(path)
        index = next(i for i, root in enumerate(self.roots) if real.is_relative_to(root))
        *folders, last = real.relative_to(self.roots[index]).parts or (".",)
        fd = self._open_root(index)
        try:
            for name in folders:
                parent, fd = fd, -1
                fd = self._enter(parent, name, path, make_parents)
            if last == ".":  # the root itself
                if flags & _WRITE_ACCESS:
                    raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR))
                opened, fd = fd, -1
            else:
                try:
                    opened = open_entry(fd, last, flags, mode)
                except OSError as exc:
                    raise self._explained(exc, fd, last, path) from None
        finally:
            if fd >= 0:
                os.close(fd)
        if flags & _WRITE_ACCESS:
            self._refuse_hard_link(opened, path)
        return real, opened

    def _open_root(self, index: int) -> int:
        root = self.roots[index]
        fd = os.open(root, _FOLDER | os.O_CLOEXEC)
        if _identity(os.fstat(fd)) != self._root_ids[index]:
            os.close(fd)
            raise SandboxViolation(
                f"workspace root {str(root)!r} was replaced after the sandbox was made; "
                "nothing was read or written"
            )
        return fd

    def _enter(self, fd: int, name: str, path: str, make_parents: bool) -> int:
        """The descriptor of folder ``name`` in ``fd`` (which it closes in every case)."""
        try:
            try:
                return open_entry(fd, name, _FOLDER)
            except FileNotFoundError:
                if not make_parents:
                    raise
            with contextlib.suppress(FileExistsError):  # made meanwhile: walk on, judged
                os.mkdir(name, 0o777, dir_fd=fd)
            return open_entry(fd, name, _FOLDER)
        except OSError as exc:
            raise self._explained(exc, fd, name, path) from None
        finally:
            os.close(fd)

    @staticmethod
    def _explained(exc: OSError, fd: int, name: str, path: str) -> Exception:
        """``exc`` as a :class:`SandboxViolation` if ``name`` was not what the check saw.

        ``ELOOP`` under ``O_NOFOLLOW`` means a symlink; ``ENOTDIR`` for a folder means
        a symlink or a file, so what is there now tells (a folder again: it was swapped).
        """
        try:
            mode = os.stat(name, dir_fd=fd, follow_symlinks=False).st_mode
        except OSError:
            mode = 0
        if exc.errno == errno.ELOOP or stat.S_ISLNK(mode):
            what = "is now a symbolic link"
        elif exc.errno == errno.ENOTDIR and stat.S_ISDIR(mode):
            what = "was swapped for something else and back"
        else:
            return exc
        return SandboxViolation(
            f"path {path!r} changed while it was opened: {name!r} {what}; "
            "nothing was read or written"
        )

    @staticmethod
    def _refuse_hard_link(fd: int, path: str) -> None:
        info = os.fstat(fd)
        if stat.S_ISREG(info.st_mode) and info.st_nlink > 1:
            os.close(fd)
            raise SandboxViolation(
                f"{path} has {info.st_nlink} hard links; the file tools never change a file "
                "that also has a name elsewhere (it may lie outside the workspace)"
            )

    def display(self, real: Path) -> str:
        """``real`` relative to ``roots[0]`` when inside it (``.`` for the root), else absolute."""
        if real.is_relative_to(self.roots[0]):
            return str(real.relative_to(self.roots[0]))
        return str(real)

    def hidden_from_search(self, pattern: str, real: Path) -> bool:
        """Whether a ``search`` for ``pattern`` must skip the file ``real`` (see above)."""
        judge = self.search_hides
        return judge is not None and judge(pattern, self.display(real)) is not None

    # -- hosts ---------------------------------------------------------------------

    def check_url(self, url: str) -> str:
        """The host of ``url`` if ``fetch`` may reach it, else :class:`SandboxViolation`."""
        try:
            parts = urlsplit(url)
            host = (parts.hostname or "").lower()
        except ValueError:
            raise SandboxViolation("url is not a valid URL") from None
        if parts.scheme not in ("http", "https"):
            raise SandboxViolation("fetch only supports http and https URLs")
        if parts.username is not None or parts.password is not None:
            raise SandboxViolation("fetch refuses URLs that carry credentials")
        if not host:
            raise SandboxViolation("url has no host")
        if self.fetch_hosts is None:
            raise SandboxViolation(f"fetch to host {host!r} is not allowed (no fetch hosts set)")
        if not self.fetch_hosts(host):
            raise SandboxViolation(f"fetch to host {host!r} is not allowed by the permissions")
        return host

    # -- one tool call -------------------------------------------------------------

    def check(self, tool: Tool, inp: BaseModel) -> None:
        """Refuse the call (:class:`SandboxViolation`) if any path or host is outside."""
        for path in tool.paths(inp):
            self.resolve(path)
        if tool.kind == "fetch":
            self.check_url(tool.main_argument(inp))

    # -- environment ---------------------------------------------------------------

    @property
    def home(self) -> Path:
        """A private, initially empty ``HOME`` for ``shell`` (created on first use)."""
        if self._home is None:
            home = Path(tempfile.mkdtemp(prefix="ahp-harness-home-"))
            self._home = home
            self._home_cleanup = weakref.finalize(self, shutil.rmtree, home, ignore_errors=True)
        return self._home

    def shell_env(self) -> dict[str, str]:
        """The whole environment for ``shell``: allowlisted names only, never secrets."""
        env: dict[str, str] = {}
        for name in sorted(self.env_allowlist):
            if looks_secret(name):
                continue
            value = os.environ.get(name)
            if value is not None:
                env[name] = value
        env.setdefault("PATH", os.defpath)
        env.setdefault("LANG", "C.UTF-8")
        env["HOME"] = str(self.home)
        env["PWD"] = str(self.roots[0])
        return env

    def close(self) -> None:
        """Remove the private ``HOME`` (if one was made). The sandbox stays usable."""
        if self._home_cleanup is not None:
            self._home_cleanup()
        self._home = None
        self._home_cleanup = None

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
  predicate, no host is allowed.

:meth:`Sandbox.check` applies the path and host checks to one tool call before it
runs; the tools apply them again while running (they open what ``resolve`` returned,
with ``O_NOFOLLOW`` on the last component). :class:`Limits` holds every bound the
tools enforce (time, output, sizes).

Never does: decide ``allow``/``ask``/``deny`` (that is :mod:`ahp_harness.permissions`),
know anything about AHP, or resolve host names (a host is matched by name; DNS is
not consulted). Bounds: confinement is checked at resolve time; a process racing to
swap a parent folder for a symlink between the check and the open is out of scope
(the last component is opened without following links).
"""

from __future__ import annotations

import os
import re
import shutil
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
]

#: Environment names ``shell`` may inherit from the harness (values copied as they are).
DEFAULT_ENV_ALLOWLIST: frozenset[str] = frozenset(
    {"PATH", "LANG", "LANGUAGE", "LC_ALL", "LC_CTYPE", "LC_MESSAGES", "TERM", "TZ", "SHELL"}
)

# Names that are never inherited, even when a caller puts them in the allowlist.
_SECRET_NAME = re.compile(
    r"TOKEN|SECRET|PASSW|PASSPHRASE|CREDENTIAL|API_?KEY|PRIVATE|AUTH|COOKIE|SESSION",
    re.IGNORECASE,
)


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


class Sandbox:
    """Confinement to ``roots`` (resolved), a scrubbed ``shell`` environment, limits."""

    def __init__(
        self,
        roots: Sequence[Path],
        *,
        limits: Limits = _DEFAULT_LIMITS,
        env_allowlist: Collection[str] = DEFAULT_ENV_ALLOWLIST,
        fetch_hosts: Callable[[str], bool] | None = None,
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
        self.limits = limits
        self.env_allowlist = frozenset(env_allowlist)
        self.fetch_hosts = fetch_hosts
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

    def display(self, real: Path) -> str:
        """``real`` relative to ``roots[0]`` when inside it (``.`` for the root), else absolute."""
        if real.is_relative_to(self.roots[0]):
            return str(real.relative_to(self.roots[0]))
        return str(real)

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
            if _SECRET_NAME.search(name):
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

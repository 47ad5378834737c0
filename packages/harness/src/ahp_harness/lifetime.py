"""The harness process itself: its secrets out of its tools' reach, no descendant left behind.

Owns two promises about the ``ahp-harness run`` process, on Linux:

* **The harness's secrets are not readable by the tools it runs.** A bearer token or
  header value a registration names, the model's API key and every other variable the
  tools do not get (see :meth:`ahp_harness.sandbox.Sandbox.shell_env`) live in the
  harness's environment. ``/proc/<pid>/environ`` shows the environment a process was
  *exec'd* with, so deleting a variable from ``os.environ`` hides nothing. Two measures:

  - :func:`hide_environment` re-executes the harness once, before anything else runs
    (same pid, same argv, same file descriptors), with only harmless names visible
    (:func:`visible_environment`: the tools' allowlist plus what the interpreter reads
    at start-up, never a name that looks secret). The full environment reaches the new
    image through an inherited anonymous file (``memfd``), never argv or env;
    :func:`restore_environment` reads it back into ``os.environ`` (process memory only:
    ``/proc/<pid>/environ`` keeps showing the scrubbed one) and closes it.
  - :func:`forbid_inspection` clears the process's *dumpable* flag
    (``prctl(PR_SET_DUMPABLE, 0)``): ``/proc/<pid>/environ``, ``mem``, ``maps``, ``fd``
    and ``ptrace`` then need ``CAP_SYS_PTRACE``, so a tool running as the same user (not
    root) can read none of them.

  :func:`protect_secrets` applies them: the re-execution only where the flag is not
  enough (a harness running as root or with ``CAP_SYS_PTRACE``), the flag always.

  What remains: a tool running as **root** can still read the harness's memory
  (``/proc/<pid>/mem``), where the secrets are; any tool can read ``/proc/<pid>/cmdline``
  (no secret is ever put on the command line), the environment of every other process of
  the same user (the shell that started the harness, the backends: they get their
  registration's ``env`` and dumpable is reset by ``exec``), and every file the user can
  read.

* **No descendant of the harness outlives it.** :class:`Descendants`
  (:mod:`ahp_protocol.descendants`, shared with ``ahp-conformance backend``) makes the
  harness a *child subreaper*: a process that any tool or backend started and that lost
  its parent, ``setsid`` or double fork included, becomes the harness's child instead of
  ``init``'s. It reaps such orphans on every ``SIGCHLD`` while the session runs, and its
  ``aclose`` (the session's last step, after every transport and tool is closed) kills
  until none is left: ``SIGTERM``, then ``SIGKILL`` at every sweep to each child and its
  whole process group (so a pid-hopping process that ignores ``SIGTERM`` dies with all
  its pids), within ``bound`` seconds; what is left then is named on stderr.

Elsewhere (macOS, ...), nothing here does anything: tools and stdio backends run in
their own process groups, which are killed when the call or the transport ends; a
descendant that leaves its group (``setsid``) can outlive the harness. A harness killed
with ``SIGKILL`` cannot clean up on any system.

Never does: read or log a variable's value beyond moving it between the two images;
kill a process that is not the harness's child (see :mod:`ahp_protocol.descendants`).
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Mapping
from typing import Final

from ahp_protocol.descendants import Descendants, prctl

from ahp_harness.sandbox import DEFAULT_ENV_ALLOWLIST, looks_secret

__all__ = [
    "Descendants",
    "forbid_inspection",
    "hide_environment",
    "privileged",
    "protect_secrets",
    "restore_environment",
    "visible_environment",
]

#: Names the re-executed harness still shows in ``/proc/<pid>/environ``, beyond the
#: tools' allowlist: what the interpreter and the dynamic loader read at start-up.
STARTUP_NAMES: Final = frozenset({"HOME", "USER", "LOGNAME", "TMPDIR", "VIRTUAL_ENV"})
STARTUP_PREFIXES: Final = ("PYTHON", "LC_", "LD_")

#: Set in the re-executed image only: the descriptor holding the full environment.
ENVIRONMENT_FD: Final = "AHP_HARNESS_ENVIRONMENT_FD"

_PR_SET_DUMPABLE: Final = 4
_CAP_SYS_PTRACE: Final = 19

_restored = False


def _linux() -> bool:
    return sys.platform.startswith("linux")


# -- secrets ----------------------------------------------------------------------------


def visible_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """The part of ``environ`` the harness may show: harmless names, never a secret one."""
    return {
        name: value
        for name, value in environ.items()
        if (
            name in DEFAULT_ENV_ALLOWLIST
            or name in STARTUP_NAMES
            or name.startswith(STARTUP_PREFIXES)
        )
        and not looks_secret(name)
    }


def hide_environment() -> None:
    """Re-execute this process once with :func:`visible_environment` as its environment.

    Call it first thing in the process that will be the harness. Returns (doing nothing)
    when there is nothing to hide, when this image was already re-executed, off Linux,
    or when re-execution is impossible; otherwise it does not return.
    """
    if _restored or ENVIRONMENT_FD in os.environ or not _linux():
        return
    visible = visible_environment(os.environ)
    if visible == dict(os.environ) or not sys.executable or not hasattr(os, "memfd_create"):
        return
    payload = b"".join(k + b"=" + v + b"\0" for k, v in os.environb.items())
    try:
        fd = os.memfd_create("ahp-harness-environment", 0)  # inherited across exec
    except OSError:
        return
    try:
        view = memoryview(payload)
        while view:
            view = view[os.write(fd, view) :]
        os.lseek(fd, 0, os.SEEK_SET)
        visible[ENVIRONMENT_FD] = str(fd)
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        os.execve(sys.executable, [sys.executable, *sys.orig_argv[1:]], visible)
    except OSError:
        os.close(fd)


def restore_environment() -> bool:
    """In a re-executed image: put the full environment back into ``os.environ``.

    True when this image was re-executed by :func:`hide_environment` (the descriptor is
    read and closed); False otherwise.
    """
    global _restored
    mark = os.environ.pop(ENVIRONMENT_FD, None)
    if mark is None:
        return _restored
    _restored = True
    with contextlib.suppress(ValueError, OSError), open(int(mark), "rb", closefd=True) as f:
        payload = f.read()
        for entry in payload.split(b"\0"):
            name, sep, value = entry.partition(b"=")
            if sep and name and os.environb.get(name) != value:
                os.environb[name] = value
    return True


def forbid_inspection() -> bool:
    """Clear the dumpable flag (Linux): same-user, non-root processes cannot inspect us."""
    return prctl(_PR_SET_DUMPABLE, 0)


def privileged() -> bool:
    """True when this process (and so every tool it starts) may inspect any process:
    root, or ``CAP_SYS_PTRACE`` in its effective set. The dumpable flag stops neither."""
    if os.geteuid() == 0:
        return True
    try:
        with open("/proc/self/status", encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("CapEff:"):
                    return bool(int(line.split()[1], 16) >> _CAP_SYS_PTRACE & 1)
    except (OSError, ValueError, IndexError):
        pass
    return False


def protect_secrets() -> None:
    """Both measures, as each is needed: first thing in the process that is the harness.

    A privileged harness (:func:`privileged`) is re-executed with its environment hidden
    (:func:`hide_environment`; it costs one more interpreter start), since the dumpable
    flag does not stop a privileged tool; then the dumpable flag is cleared (it does not
    survive ``exec``), which is enough against an unprivileged one.
    """
    if _linux() and privileged():
        hide_environment()
    forbid_inspection()

"""Ctrl-C in an interactive session: the first stops the running tool, the next ends it.

Owns :class:`Interrupts`. ``ahp-harness run`` makes one for an interactive session and
installs it (:meth:`Interrupts.installed`) around the session; every tool run of this
harness happens inside :func:`stoppable` (:class:`ahp_harness.host.HostTool`). On
SIGINT the command asks :meth:`Interrupts.interrupt`: it cancels the tool runs in
progress and says so (the call then ends as ``cancelled``, and the shell tool kills its
process group on the way out), or says there was nothing left to stop (no tool running,
or the one running was stopped by an earlier Ctrl-C and has not ended yet): then the
session ends, as on SIGTERM. At a prompt Ctrl-C is a key, not a signal: the prompts ask
:func:`ends_session`, which says yes when the last Ctrl-C stopped a tool and no tool has
started since (the second Ctrl-C), else the prompt asks again.

Never stops anything but tool runs, and nothing outside :func:`stoppable`; without an
installed :class:`Interrupts` (a non-interactive run, a library caller) a tool runs as
before and SIGINT is wholly the caller's.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

import anyio

__all__ = ["Interrupts", "ends_session", "stoppable"]

_current: ContextVar[Interrupts | None] = ContextVar("ahp_harness_interrupts", default=None)


class Interrupts:
    """The tool runs a Ctrl-C may stop: those inside :func:`stoppable` while installed."""

    def __init__(self) -> None:
        self._running: list[anyio.CancelScope] = []
        self.stopped_a_tool = False
        """Whether the last Ctrl-C stopped a tool (none has started since)."""

    @contextmanager
    def installed(self) -> Iterator[Interrupts]:
        """Make the tool runs of this context (and the tasks it starts) stoppable here."""
        token = _current.set(self)
        try:
            yield self
        finally:
            _current.reset(token)

    def interrupt(self) -> bool:
        """Stop every running tool not stopped yet; whether there was one."""
        fresh = [scope for scope in self._running if not scope.cancel_called]
        for scope in fresh:
            scope.cancel()
        self.stopped_a_tool = self.stopped_a_tool or bool(fresh)
        return bool(fresh)

    @contextmanager
    def _run(self) -> Iterator[anyio.CancelScope]:
        self.stopped_a_tool = False
        with anyio.CancelScope() as scope:
            self._running.append(scope)
            try:
                yield scope
            finally:
                self._running.remove(scope)


@contextmanager
def stoppable() -> Iterator[anyio.CancelScope]:
    """A cancel scope for one tool run: :meth:`Interrupts.interrupt` cancels it (its
    ``cancelled_caught`` then says the run was stopped). Without installed interrupts,
    a scope nothing cancels."""
    interrupts = _current.get()
    if interrupts is None:
        with anyio.CancelScope() as scope:
            yield scope
        return
    with interrupts._run() as scope:
        yield scope


def ends_session() -> bool:
    """Ctrl-C was pressed at a prompt: whether it ends the session (the Ctrl-C before it
    stopped a tool); ``False`` without installed interrupts."""
    interrupts = _current.get()
    return interrupts is not None and interrupts.stopped_a_tool

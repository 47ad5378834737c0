"""A thin synchronous facade over :class:`~ahp_protocol.client.Dispatcher`.

For harnesses that are not async: the dispatcher runs on an event loop in one
background thread (an anyio blocking portal) owned by this object; each call
blocks until the event is settled and observed. ``close()`` (or leaving the
``with`` block) closes every transport and stops the thread.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from contextlib import ExitStack
from typing import Any

from anyio.from_thread import start_blocking_portal

from ahp_protocol.client._dispatcher import Dispatcher
from ahp_protocol.client._result import Diagnostic, HookResult
from ahp_protocol.wire.state import Permission


class SyncDispatcher:
    """``Dispatcher`` with blocking methods. Arguments are those of ``Dispatcher``."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.dispatcher = Dispatcher(*args, **kwargs)
        self._stack = ExitStack()  # what close() undoes, last first
        self._portal = self._stack.enter_context(start_blocking_portal())
        try:
            self._portal.call(self.dispatcher.start)
        except BaseException:
            self._stack.close()
            raise
        self._stack.callback(self._portal.call, self.dispatcher.aclose)

    def intercept(
        self, event: Mapping[str, Any], *, initial_permission: Permission = "none"
    ) -> HookResult:
        call = functools.partial(
            self.dispatcher.intercept, event, initial_permission=initial_permission
        )
        return self._portal.call(call)

    def observe(self, event: Mapping[str, Any]) -> list[Diagnostic]:
        return self._portal.call(self.dispatcher.observe, event)

    def close(self) -> None:
        """Close every transport, then stop the thread (even if closing failed); idempotent."""
        self._stack.close()

    def __enter__(self) -> SyncDispatcher:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

"""An in-memory transport: a backend object answers in the harness's own process.

Owns :class:`MemoryTransport`, a :class:`~ahp_protocol.client.transports.Transport` that
hands each encoded message to a server-kit :class:`~ahp_protocol.server.Backend` or a
scripted :class:`~ahp_protocol.testing.Misbehaving` backend and reads what it answers
with the client's own frame rules: each line decoded as the stdio transport decodes it
(:func:`~ahp_protocol.client.transports.stdio.correlate`), so a fault fails here with
the class it has over a real transport. Two shapes of answer:

- ``persistent`` (the default), as a persistent stdio backend: output is a stream of
  lines; a response with another id is discarded (counted in the exchange) and the
  request keeps waiting, within the caller's deadline; what a notification was answered
  with is read before the next request's answer; a crash is ``ABNORMAL_EXIT`` (the next
  request finds the backend restarted);
- ``single``, as HTTP or a ``per_event`` process: the first line is the one answer (another
  id is ``ID_MISMATCH``; none is ``ABNORMAL_EXIT``).

No process, socket or thread: a chain test runs in microseconds. What it cannot show is
what only real I/O shows (spawning, pipes, process groups, HTTP status and headers):
the transports' own tests do that once, with real processes and loopback HTTP.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Literal, Protocol

import anyio

from ahp_protocol.client._failures import FailureClass, OperationalFailure
from ahp_protocol.client.transports._framing import decode_answer, request_key
from ahp_protocol.client.transports.exchange import Exchange
from ahp_protocol.client.transports.stdio import correlate
from ahp_protocol.testing.faults import Answer, is_notification
from ahp_protocol.wire import jsonrpc

if TYPE_CHECKING:
    from ahp_protocol.client.transports import Transport
    from ahp_protocol.server.backend import Backend
    from ahp_protocol.wire.registration import Hook

Shape = Literal["persistent", "single"]


class Scripted(Protocol):
    """A backend that answers one received frame with an :class:`Answer`."""

    def answer(self, raw: bytes) -> Answer: ...


class MemoryTransport:
    """One in-memory backend connection (see the module docstring).

    ``received`` holds every message the backend was sent, decoded, in order.
    """

    def __init__(
        self,
        backend: Backend | Scripted,
        *,
        shape: Shape = "persistent",
        max_frame_bytes: int = jsonrpc.MAX_FRAME_BYTES,
    ) -> None:
        if shape not in ("persistent", "single"):
            raise ValueError("shape must be 'persistent' or 'single'")
        self.backend = backend
        self.shape: Shape = shape
        self.max_frame_bytes = max_frame_bytes
        self.received: list[dict[str, Any]] = []
        self._unread: list[bytes] = []  # persistent: what was written and not read yet
        self._closed = False

    def __repr__(self) -> str:
        return f"MemoryTransport({type(self.backend).__name__}, shape={self.shape!r})"

    # -- the Transport contract ---------------------------------------------------

    async def request(
        self, message: dict[str, Any], exchange: Exchange | None = None
    ) -> dict[str, Any]:
        key = request_key(message)
        record = Exchange() if exchange is None else exchange
        answer = await self._send(message, record)
        if self.shape == "single":
            if not answer.frames:
                raise OperationalFailure(
                    FailureClass.ABNORMAL_EXIT, "backend exited without a response"
                )
            frame = answer.frames[0]
            record.received(len(frame))
            return decode_answer(frame.rstrip(b"\r\n"), self.max_frame_bytes, key)
        self._unread += answer.frames
        lines, self._unread = b"".join(self._unread).split(b"\n"), []
        for raw in lines:
            if raw.strip():
                response = correlate(raw, key, record, self.max_frame_bytes)
                if response is not None:
                    return response
        await anyio.sleep_forever()  # as a backend that said all it will say: the deadline's
        raise AssertionError("unreachable")

    async def notify(self, message: dict[str, Any]) -> None:
        answer = await self._send(message, None)
        if answer.frames and self.shape == "single":
            raise OperationalFailure(
                FailureClass.MALFORMED_OUTPUT, "notification acknowledgment has a body"
            )
        self._unread += answer.frames  # a persistent backend's stray output, read later

    async def prepare(self) -> None:
        return None

    async def aclose(self) -> None:
        self._closed = True

    # -- internals -----------------------------------------------------------------

    async def _send(self, message: dict[str, Any], exchange: Exchange | None) -> Answer:
        if self._closed:
            raise OperationalFailure(FailureClass.SPAWN_FAILED, "transport is closed")
        data = jsonrpc.encode(message)
        if exchange is not None:
            exchange.sent(len(data))
        self.received.append(json.loads(data))
        answer = await self._answer(data)
        if answer.delay_s > 0:
            await anyio.sleep(answer.delay_s)
        if answer.hang:
            await anyio.sleep_forever()
        if answer.crash:
            self._unread = []  # the backend is gone, and what it had not said with it
            if is_notification(message):
                return Answer(notification=True)
            raise OperationalFailure(
                FailureClass.ABNORMAL_EXIT, "backend process exited or closed stdout"
            )
        return answer

    async def _answer(self, data: bytes) -> Answer:
        from ahp_protocol.server.backend import Backend

        if isinstance(self.backend, Backend):
            body = await self.backend.handle(data.rstrip(b"\n"))
            return Answer([body] if body is not None else [])
        return self.backend.answer(data)


def memory_transports(
    backends: dict[str, Backend | Scripted], *, shape: Shape = "persistent"
) -> Callable[[Hook], Transport]:
    """``Dispatcher(..., transport=memory_transports({"org.example.policy": backend}))``:
    each registered backend id answered by its object, in memory. A backend id with no
    object is a ``SPAWN_FAILED`` at its first use (as a missing command would be)."""

    def open_memory(hook: Hook) -> Transport:
        backend = backends.get(hook.id)
        if backend is None:
            return _Missing(hook.id)
        return MemoryTransport(backend, shape=shape)

    return open_memory


class _Missing:
    def __init__(self, backend_id: str) -> None:
        self.backend_id = backend_id

    async def request(
        self, message: dict[str, Any], exchange: Exchange | None = None
    ) -> dict[str, Any]:
        raise OperationalFailure(FailureClass.SPAWN_FAILED, "no in-memory backend has this id")

    async def notify(self, message: dict[str, Any]) -> None:
        raise OperationalFailure(FailureClass.SPAWN_FAILED, "no in-memory backend has this id")

    async def prepare(self) -> None:
        return None

    async def aclose(self) -> None:
        return None


__all__: Sequence[str] = ("MemoryTransport", "Scripted", "memory_transports")

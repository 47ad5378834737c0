"""What a model driver is: something that proposes the next steps of a turn.

A driver sees the conversation (canonical AHP messages: system, user,
assistant and tool turns, injections included; every turn of the session so far)
and answers with steps: tool calls to resolve, or text to say. Drivers never
run tools and never see the host's permissions; the session sends every tool
call through the gate.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable


@dataclass(frozen=True, slots=True)
class ToolCall:
    """The model proposes one tool call. ``id`` is the call id (stable for this call)."""

    tool: str
    input: Mapping[str, Any]
    id: str = ""


@dataclass(frozen=True, slots=True)
class Say:
    """The model says something to the user."""

    text: str


Step = ToolCall | Say


@dataclass(frozen=True, slots=True)
class Reply:
    """One model response: what it says and the tool calls it proposes (in order).

    ``done`` ends the turn (no more model requests after this reply's tool calls);
    ``end_session`` also asks for the session to end after this turn (the user quit).
    """

    steps: Sequence[Step] = field(default_factory=tuple)
    done: bool = False
    finish_reason: str = "stop"
    end_session: bool = False


class ModelDriver(Protocol):
    """One model. ``model_id``/``provider`` identify it in ``model.*`` events."""

    model_id: str
    provider: str

    async def respond(self, conversation: Sequence[Mapping[str, Any]]) -> Reply:
        """The next reply, given every message so far (tool results included)."""
        ...

    async def aclose(self) -> None:
        """Release what the driver holds (HTTP clients, terminals)."""
        ...


@runtime_checkable
class TurnAware(Protocol):
    """A driver that wants to know when a turn starts (the scripted one: its turns)."""

    def start_turn(self) -> None:
        """A new turn starts; the next :meth:`ModelDriver.respond` belongs to it."""
        ...

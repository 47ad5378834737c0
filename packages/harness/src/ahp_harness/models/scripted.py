"""``script:FILE``: a model that plays a fixed list of steps, in order.

The file is either a JSON list of steps (one turn), or an object with several turns::

    {"turns": [{"prompt": "tidy up", "steps": [...]}, {"prompt": "now push", "steps": [...]}]}

(``prompt`` a string, optional: the turn's user prompt, which ``ahp-harness run`` sends
when no ``--prompt`` is given; no other keys). Each step is exactly one of

* ``{"tool": NAME, "input": {...}}`` - propose one tool call (``NAME`` a non-empty
  string, ``input`` an object; the tool and its input are checked later, by the gate,
  like any model's proposal), or
* ``{"say": TEXT}`` - say ``TEXT`` (a string).

Steps are numbered from 1 through the whole file (turns included). The whole file is
validated at load time; the first problem is a :class:`ScriptError` naming the step (and
turn) and the rule broken, e.g. ``step 3: "input" must be an object``. Unknown keys are
rejected.

Each :meth:`ScriptedDriver.respond` returns the next step of the current turn as one
:class:`Reply` (``done=False``); tool call ids are ``call_<step number>``, stable per
step. After the turn's last step the reply is ``Reply(done=True)`` with no steps.
:meth:`ScriptedDriver.start_turn` (the session calls it as each turn starts) moves to
the next turn's steps, so a turn a policy stopped early leaves its remaining steps
unplayed; with no turns left every reply is ``Reply(done=True)``. The conversation is
ignored: the play is deterministic. Bounds: the file is read whole and must be at most
:data:`MAX_SCRIPT_BYTES`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ahp_harness.models.base import Reply, Say, Step, ToolCall

__all__ = [
    "MAX_SCRIPT_BYTES",
    "ScriptError",
    "ScriptTurn",
    "ScriptedDriver",
    "parse_script",
    "parse_turns",
]

#: The largest script file accepted.
MAX_SCRIPT_BYTES = 4 * 1024 * 1024


class ScriptError(ValueError):
    """A script file is unreadable or breaks a rule. ``str(e)`` says where and which."""


@dataclass(frozen=True, slots=True)
class ScriptTurn:
    """One turn of a script: its prompt (``None``: none given) and its steps."""

    prompt: str | None
    steps: tuple[Step, ...]


def _step(number: int, raw: object, turn: int | None = None) -> Step:
    where = f"step {number}" + (f" (turn {turn})" if turn is not None else "")
    if not isinstance(raw, dict):
        raise ScriptError(f'{where}: must be an object with "tool" and "input", or "say"')
    keys = set(raw)
    if "say" in keys and "tool" in keys:
        raise ScriptError(f'{where}: has both "say" and "tool"; use exactly one')
    if "say" in keys:
        extra = sorted(keys - {"say"})
        if extra:
            raise ScriptError(f'{where}: unknown key(s) {", ".join(map(repr, extra))} ("say" step)')
        text = raw["say"]
        if not isinstance(text, str):
            raise ScriptError(f'{where}: "say" must be a string')
        return Say(text)
    if "tool" in keys:
        extra = sorted(keys - {"tool", "input"})
        if extra:
            raise ScriptError(
                f'{where}: unknown key(s) {", ".join(map(repr, extra))} ("tool" step)'
            )
        tool = raw["tool"]
        if not isinstance(tool, str) or not tool:
            raise ScriptError(f'{where}: "tool" must be a non-empty string')
        if "input" not in keys:
            raise ScriptError(f'{where}: "input" is required with "tool"')
        inp = raw["input"]
        if not isinstance(inp, dict):
            raise ScriptError(f'{where}: "input" must be an object')
        return ToolCall(tool=tool, input=inp, id=f"call_{number}")
    raise ScriptError(f'{where}: needs "tool" (with "input") or "say"')


def parse_turns(data: object) -> tuple[ScriptTurn, ...]:
    """The turns of a decoded script (a list of steps is one turn without a prompt).

    :class:`ScriptError` for the first problem.
    """
    if isinstance(data, list):
        return (ScriptTurn(None, tuple(_step(n, raw) for n, raw in enumerate(data, start=1))),)
    if not isinstance(data, dict) or set(data) != {"turns"}:
        raise ScriptError('script: must be a JSON list of steps, or an object {"turns": [...]}')
    raw_turns = data["turns"]
    if not isinstance(raw_turns, list) or not raw_turns:
        raise ScriptError('script: "turns" must be a non-empty list')
    turns: list[ScriptTurn] = []
    number = 0
    for index, raw in enumerate(raw_turns, start=1):
        where = f"turn {index}"
        if not isinstance(raw, dict):
            raise ScriptError(f'{where}: must be an object with "steps" (and "prompt")')
        extra = sorted(set(raw) - {"prompt", "steps"})
        if extra:
            raise ScriptError(f"{where}: unknown key(s) {', '.join(map(repr, extra))}")
        prompt = raw.get("prompt")
        if prompt is not None and not isinstance(prompt, str):
            raise ScriptError(f'{where}: "prompt" must be a string')
        raw_steps = raw.get("steps")
        if not isinstance(raw_steps, list):
            raise ScriptError(f'{where}: "steps" must be a list of steps')
        steps = []
        for raw_step in raw_steps:
            number += 1
            steps.append(_step(number, raw_step, index))
        turns.append(ScriptTurn(prompt, tuple(steps)))
    return tuple(turns)


def parse_script(data: object) -> tuple[Step, ...]:
    """Every step of a decoded script, in order, or :class:`ScriptError` for the first problem."""
    return tuple(step for turn in parse_turns(data) for step in turn.steps)


class ScriptedDriver:
    """Plays each turn's steps in order, one per reply, then ``Reply(done=True)``.

    Built from ``steps`` (one turn) or ``turns``.
    """

    provider = "script"

    def __init__(
        self,
        steps: Sequence[Step] = (),
        *,
        model_id: str = "script",
        turns: Sequence[ScriptTurn] | None = None,
    ) -> None:
        self.turns: tuple[ScriptTurn, ...] = (
            tuple(turns) if turns is not None else (ScriptTurn(None, tuple(steps)),)
        )
        self.steps: tuple[Step, ...] = tuple(s for t in self.turns for s in t.steps)
        self.model_id = model_id
        self._turn = 0  # index of the current turn; len(turns) when none is left
        self._next = 0  # index of the next step in the current turn
        self._started = 0

    @property
    def prompts(self) -> tuple[str | None, ...]:
        """The prompt of each turn (``None`` where the script gives none)."""
        return tuple(t.prompt for t in self.turns)

    def start_turn(self) -> None:
        """A new turn starts: the first plays turn 1, each later one the next turn."""
        self._started += 1
        self._turn = min(self._started - 1, len(self.turns))
        self._next = 0

    @classmethod
    def from_file(cls, path: Path | str) -> ScriptedDriver:
        """Load and validate a script file (:class:`ScriptError` on any problem)."""
        path = Path(path)
        try:
            with path.open("rb") as handle:
                raw = handle.read(MAX_SCRIPT_BYTES + 1)
        except FileNotFoundError:
            raise ScriptError(f"script {path}: no such file") from None
        except IsADirectoryError:
            raise ScriptError(f"script {path}: is a folder, not a file") from None
        except OSError as exc:
            raise ScriptError(
                f"script {path}: cannot read ({exc.strerror or 'OS error'})"
            ) from None
        if len(raw) > MAX_SCRIPT_BYTES:
            raise ScriptError(f"script {path}: larger than {MAX_SCRIPT_BYTES} bytes")
        try:
            data = json.loads(raw.decode("utf-8"))
        except UnicodeDecodeError:
            raise ScriptError(f"script {path}: not UTF-8 text") from None
        except json.JSONDecodeError as exc:
            raise ScriptError(
                f"script {path}: invalid JSON at line {exc.lineno}, column {exc.colno}"
            ) from None
        try:
            turns = parse_turns(data)
        except ScriptError as exc:
            raise ScriptError(f"script {path}: {exc}") from None
        return cls(model_id=f"script:{path.name}", turns=turns)

    @property
    def remaining(self) -> int:
        """How many steps are left to play (in this turn and the later ones)."""
        if self._turn >= len(self.turns):
            return 0
        left = len(self.turns[self._turn].steps) - self._next
        return left + sum(len(t.steps) for t in self.turns[self._turn + 1 :])

    async def respond(self, conversation: Sequence[Mapping[str, Any]]) -> Reply:
        if self._turn >= len(self.turns) or self._next >= len(self.turns[self._turn].steps):
            return Reply(done=True)
        step = self.turns[self._turn].steps[self._next]
        self._next += 1
        return Reply(
            steps=(step,),
            done=False,
            finish_reason="tool_calls" if isinstance(step, ToolCall) else "stop",
        )

    async def aclose(self) -> None:
        return None

    def __repr__(self) -> str:
        played = len(self.steps) - self.remaining
        return f"<ScriptedDriver {self.model_id} step {played}/{len(self.steps)}>"

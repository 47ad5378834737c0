"""``script:FILE``: a model that plays a fixed list of steps, in order.

The file is a JSON list; each step is exactly one of

* ``{"tool": NAME, "input": {...}}`` - propose one tool call (``NAME`` a non-empty
  string, ``input`` an object; the tool and its input are checked later, by the gate,
  like any model's proposal), or
* ``{"say": TEXT}`` - say ``TEXT`` (a string).

Steps are numbered from 1. The whole file is validated at load time; the first problem
is a :class:`ScriptError` naming the step and the rule broken, e.g.
``step 3: "input" must be an object``. Unknown keys are rejected.

Each :meth:`ScriptedDriver.respond` returns the next step as one :class:`Reply`
(``done=False``); tool call ids are ``call_<step number>``, stable per step. After the
last step every reply is ``Reply(done=True)`` with no steps. The conversation is
ignored: the play is deterministic. Bounds: the file is read whole and must be at most
:data:`MAX_SCRIPT_BYTES`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ahp_harness.models.base import Reply, Say, Step, ToolCall

__all__ = ["MAX_SCRIPT_BYTES", "ScriptError", "ScriptedDriver", "parse_script"]

#: The largest script file accepted.
MAX_SCRIPT_BYTES = 4 * 1024 * 1024


class ScriptError(ValueError):
    """A script file is unreadable or breaks a rule. ``str(e)`` says where and which."""


def _step(number: int, raw: object) -> Step:
    where = f"step {number}"
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


def parse_script(data: object) -> tuple[Step, ...]:
    """The steps of a decoded script, or :class:`ScriptError` for the first problem."""
    if not isinstance(data, list):
        raise ScriptError("script: must be a JSON list of steps")
    return tuple(_step(number, raw) for number, raw in enumerate(data, start=1))


class ScriptedDriver:
    """Plays ``steps`` in order, one per reply, then ``Reply(done=True)`` forever."""

    provider = "script"

    def __init__(self, steps: Sequence[Step], *, model_id: str = "script") -> None:
        self.steps: tuple[Step, ...] = tuple(steps)
        self.model_id = model_id
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
            steps = parse_script(data)
        except ScriptError as exc:
            raise ScriptError(f"script {path}: {exc}") from None
        return cls(steps, model_id=f"script:{path.name}")

    @property
    def remaining(self) -> int:
        """How many steps are left to play."""
        return len(self.steps) - self._next

    async def respond(self, conversation: Sequence[Mapping[str, Any]]) -> Reply:
        if self._next >= len(self.steps):
            return Reply(done=True)
        step = self.steps[self._next]
        self._next += 1
        return Reply(
            steps=(step,),
            done=False,
            finish_reason="tool_calls" if isinstance(step, ToolCall) else "stop",
        )

    async def aclose(self) -> None:
        return None

    def __repr__(self) -> str:
        return f"<ScriptedDriver {self.model_id} step {self._next}/{len(self.steps)}>"

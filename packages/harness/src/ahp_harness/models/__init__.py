"""Model drivers, chosen by a spec string, and the conversation conventions they share.

:func:`load_driver` builds a driver from a spec:

* ``script:FILE`` - :class:`~ahp_harness.models.scripted.ScriptedDriver`, a JSON list of
  steps played in order (deterministic; tests and demos);
* ``manual`` - :class:`~ahp_harness.models.manual.ManualDriver`, a prompt-toolkit REPL in
  which the user plays the model;
* ``openai`` or ``openai:MODEL`` - :class:`~ahp_harness.models.openai.OpenAIDriver`, any
  OpenAI-compatible chat-completions endpoint with tool calling.

A bad spec or option is a :class:`ValueError` with a fixed message naming what is wrong.
Driver modules are imported only when chosen, so importing this package stays cheap.

The conversation conventions the drivers share (what they read from the canonical AHP
messages) live in :mod:`ahp_harness.models.conversation`, re-exported here.

Never does: run tools, decide permissions, or touch the network (the OpenAI driver does,
only when chosen).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ahp_harness.models.base import ModelDriver, Reply, Say, Step, ToolCall
from ahp_harness.models.conversation import (
    RESULT_ID_PREFIX,
    TOOL_CALL_CATEGORY,
    call_id_of,
    message_text,
    result_message_id,
    tool_call_part_text,
    tool_calls_of,
)

__all__ = [
    "DEFAULT_OPENAI_BASE_URL",
    "RESULT_ID_PREFIX",
    "TOOL_CALL_CATEGORY",
    "ModelDriver",
    "Reply",
    "Say",
    "Step",
    "ToolCall",
    "call_id_of",
    "load_driver",
    "message_text",
    "result_message_id",
    "tool_call_part_text",
    "tool_calls_of",
]

#: The base URL ``openai`` uses when none is given.
DEFAULT_OPENAI_BASE_URL = "https://api.openai.com/v1"

_SPECS = "script:FILE, manual, openai or openai:MODEL"


def _check_options(kind: str, options: Mapping[str, Any], allowed: set[str]) -> None:
    unknown = sorted(set(options) - allowed)
    if unknown:
        names = ", ".join(unknown)
        accepted = ", ".join(sorted(allowed)) or "none"
        raise ValueError(f"{kind} driver: unknown option(s) {names} (accepted: {accepted})")


def load_driver(spec: str, **options: Any) -> ModelDriver:
    """The driver ``spec`` names, built with ``options`` (unknown options are an error).

    * ``script:FILE`` - no options;
    * ``manual`` - ``input``, ``output``, ``history_file``, ``model_id``;
    * ``openai[:MODEL]`` - ``base_url`` (default :data:`DEFAULT_OPENAI_BASE_URL`),
      ``model`` (or in the spec), ``api_key_env``, ``system_prompt``, ``timeout``.

    ``None`` values are treated as absent, so CLI flags can be passed straight through.
    """
    if not isinstance(spec, str) or not spec.strip():
        raise ValueError(f"empty model spec (expected {_SPECS})")
    opts = {key: value for key, value in options.items() if value is not None}
    kind, sep, arg = spec.strip().partition(":")
    if kind == "script":
        if not sep or not arg:
            raise ValueError("model spec 'script:FILE' needs a file, e.g. script:session.json")
        _check_options("script", opts, set())
        # Each driver is imported only when chosen (start-up speed: prompt-toolkit, httpx).
        from ahp_harness.models.scripted import ScriptedDriver

        return ScriptedDriver.from_file(Path(arg))
    if kind == "manual":
        if sep:
            raise ValueError("model spec 'manual' takes no argument")
        _check_options("manual", opts, {"input", "output", "history_file", "model_id"})
        from ahp_harness.models.manual import ManualDriver

        return ManualDriver(**opts)
    if kind == "openai":
        _check_options(
            "openai", opts, {"base_url", "model", "api_key_env", "system_prompt", "timeout"}
        )
        if sep:
            if not arg:
                raise ValueError("model spec 'openai:MODEL' needs a model name")
            if "model" in opts and opts["model"] != arg:
                raise ValueError("openai driver: the model is given twice, differently")
            opts["model"] = arg
        if "model" not in opts:
            raise ValueError("openai driver needs a model (openai:MODEL or the model option)")
        opts.setdefault("base_url", DEFAULT_OPENAI_BASE_URL)
        from ahp_harness.models.openai import OpenAIDriver

        return OpenAIDriver(**opts)
    raise ValueError(f"unknown model spec {kind[:40]!r} (expected {_SPECS})")

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

Conversation conventions (what drivers read from the canonical AHP messages):

* a tool result is a ``role: "tool"`` message whose ``id`` is
  :func:`result_message_id` of the call id (``result_<call id>``); failing that, a
  first text line ``call_id: <call id>`` names the call (that line is not content);
* an assistant message may record the calls it proposed as text parts with
  ``category: "tool_call"`` whose text is the JSON ``{"id", "tool", "input"}``
  (:func:`tool_call_part_text`); drivers that need the pairing (OpenAI) also remember
  the calls they proposed themselves;
* only text parts with ``selection: "body"`` carry text; withheld parts are skipped.

Never does: run tools, decide permissions, or touch the network (the OpenAI driver does,
only when chosen).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ahp_harness.models.base import ModelDriver, Reply, Say, Step, ToolCall

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

#: Tool result messages carry ``id = RESULT_ID_PREFIX + call id``.
RESULT_ID_PREFIX = "result_"
#: The part category of an assistant text part that records one proposed tool call.
TOOL_CALL_CATEGORY = "tool_call"
_CALL_LINE = "call_id:"

#: The base URL ``openai`` uses when none is given.
DEFAULT_OPENAI_BASE_URL = "https://api.openai.com/v1"

_SPECS = "script:FILE, manual, openai or openai:MODEL"


def result_message_id(call_id: str) -> str:
    """The ``id`` a tool result message for ``call_id`` should carry."""
    return RESULT_ID_PREFIX + call_id


def tool_call_part_text(call: ToolCall) -> str:
    """The text of a ``tool_call`` part recording ``call`` (JSON ``{"id","tool","input"}``)."""
    return json.dumps(
        {"id": call.id, "tool": call.tool, "input": dict(call.input)}, ensure_ascii=False
    )


def _body_texts(message: Mapping[str, Any], *, calls: bool) -> list[str]:
    parts = message.get("parts")
    texts: list[str] = []
    if not isinstance(parts, list | tuple):
        return texts
    for part in parts:
        if not isinstance(part, Mapping) or part.get("selection", "body") != "body":
            continue
        text = part.get("text")
        if not isinstance(text, str):
            continue
        if (part.get("category") == TOOL_CALL_CATEGORY) == calls:
            texts.append(text)
    return texts


def message_text(message: Mapping[str, Any]) -> str:
    """The visible text of one canonical message (body text parts joined by newlines).

    ``tool_call`` parts are not text; a leading ``call_id:`` line of a tool message is
    dropped (see :func:`call_id_of`).
    """
    text = "\n".join(_body_texts(message, calls=False))
    if message.get("role") == "tool" and text.startswith(_CALL_LINE):
        _, _, text = text.partition("\n")
    return text


def call_id_of(message: Mapping[str, Any]) -> str | None:
    """The call id a ``tool`` message answers, or ``None`` when it names none."""
    if message.get("role") != "tool":
        return None
    mid = message.get("id")
    if (
        isinstance(mid, str)
        and mid.startswith(RESULT_ID_PREFIX)
        and len(mid) > len(RESULT_ID_PREFIX)
    ):
        return mid[len(RESULT_ID_PREFIX) :]
    texts = _body_texts(message, calls=False)
    if texts and texts[0].startswith(_CALL_LINE):
        first = texts[0].partition("\n")[0][len(_CALL_LINE) :].strip()
        return first or None
    return None


def tool_calls_of(message: Mapping[str, Any]) -> list[ToolCall]:
    """The calls an assistant message records in ``tool_call`` parts (malformed ones skipped)."""
    if message.get("role") != "assistant":
        return []
    calls: list[ToolCall] = []
    for text in _body_texts(message, calls=True):
        try:
            data = json.loads(text)
        except ValueError:
            continue
        if not isinstance(data, dict):
            continue
        cid, tool, inp = data.get("id"), data.get("tool"), data.get("input", {})
        if isinstance(cid, str) and cid and isinstance(tool, str) and isinstance(inp, dict):
            calls.append(ToolCall(tool=tool, input=inp, id=cid))
    return calls


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

"""The conversation conventions the drivers and the session share.

What drivers read from the canonical AHP messages, and what the session writes so
they can:

* a tool result is a ``role: "tool"`` message whose ``id`` is
  :func:`result_message_id` of the call id (``result_<call id>``); failing that, a
  first text line ``call_id: <call id>`` names the call (that line is not content);
* an assistant message may record the calls it proposed as text parts with
  ``category: "tool_call"`` whose text is the JSON ``{"id", "tool", "input"}``
  (:func:`tool_call_part_text`); drivers that need the pairing (OpenAI) also remember
  the calls they proposed themselves;
* only text parts with ``selection: "body"`` carry text; withheld parts are skipped.

Pure functions over messages: no I/O, no driver.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ahp_harness.models.base import ToolCall

__all__ = [
    "RESULT_ID_PREFIX",
    "TOOL_CALL_CATEGORY",
    "call_id_of",
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

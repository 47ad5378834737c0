"""A tool call's command and paths, read the same way for every harness the kit knows.

Owns which inputs are path-like (:data:`PATH_FIELDS`: the kit's harness says ``path``,
Claude Code and Cursor ``file_path``, Copilot ``path``, others ``filePath``,
``notebook_path``, ...), the candidates a path rule is matched against
(:func:`path_candidates`: each in canonical form, :func:`ahp_backends.paths.canonical_path`,
also resolved against ``session.cwd`` and relative to it), and a call's command
(:func:`command_text`). Used by the deny-list's ``paths`` condition and by the CEL
policy's ``call`` variable (:func:`call_view`), so both read a call alike.

Pure: never touches the file system (symlinks are not resolved), never fails on any
JSON value (a field of another type is skipped).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from ahp_backends.paths import canonical_path

__all__ = ["PATH_FIELDS", "call_view", "command_text", "path_candidates", "session_cwd"]

PATH_FIELDS: Final = (
    "path",
    "paths",
    "file",
    "files",
    "file_path",
    "filePath",
    "filename",
    "notebook_path",
    "directory",
    "dir",
    "cwd",
    "source",
    "destination",
    "target",
    "old_path",
    "new_path",
)
"""Input fields whose string values (or lists of strings) are a call's paths."""


def session_cwd(event: Mapping[str, Any]) -> str | None:
    """``session.cwd`` when it is an absolute path, else ``None``."""
    session = event.get("session")
    cwd = session.get("cwd") if isinstance(session, Mapping) else None
    return cwd if isinstance(cwd, str) and cwd.startswith("/") else None


def path_candidates(values: Mapping[str, Any], cwd: str | None) -> list[str]:
    """Each path-like input in canonical form, resolved against cwd, and relative to it."""
    raw: list[str] = []
    for name in PATH_FIELDS:
        value = values.get(name)
        if isinstance(value, str):
            raw.append(value)
        elif isinstance(value, list):
            raw.extend(v for v in value if isinstance(v, str))
    out: list[str] = []
    for value in raw:
        if not value:
            continue
        out.append(canonical_path(value))
        if cwd is None:
            continue
        absolute, base = canonical_path(value, cwd), canonical_path(cwd)
        out.append(absolute)
        if absolute.startswith(base.rstrip("/") + "/"):
            out.append(absolute[len(base.rstrip("/")) + 1 :])
    return out


def command_text(values: Mapping[str, Any]) -> str:
    """``input.command`` as one string: itself, a list of strings joined by spaces (an
    argv, as some harnesses send it), or ``""`` when there is none."""
    command = values.get("command")
    if isinstance(command, str):
        return command
    if isinstance(command, list) and all(isinstance(part, str) for part in command):
        return " ".join(command)
    return ""


def call_view(event: Mapping[str, Any]) -> dict[str, Any]:
    """``{"command": str, "paths": [str]}`` for an event's ``tool`` (empty without one)."""
    tool = event.get("tool")
    tool_input = tool.get("input") if isinstance(tool, Mapping) else None
    values: Mapping[str, Any] = tool_input if isinstance(tool_input, Mapping) else {}
    return {"command": command_text(values), "paths": path_candidates(values, session_cwd(event))}

"""The native hook dialects the adapter speaks, by name.

Owns the table of dialect names (and their aliases) and :func:`get`, which
imports only the codec asked for. Every codec is standard library only.
"""

from __future__ import annotations

import importlib

from ahp_adapters.dialects.base import Dialect, NativeAnswer, Parsed, PayloadError

DIALECTS: dict[str, tuple[str, str]] = {
    "claude-code": ("ahp_adapters.dialects.claude", "ClaudeCode"),
    "codex": ("ahp_adapters.dialects.codex", "Codex"),
    "gemini": ("ahp_adapters.dialects.gemini", "Gemini"),
    "cursor": ("ahp_adapters.dialects.cursor", "Cursor"),
    "kimi": ("ahp_adapters.dialects.kimi", "Kimi"),
    "copilot": ("ahp_adapters.dialects.copilot", "Copilot"),
    "qwen-code": ("ahp_adapters.dialects.qwen", "QwenCode"),
}
"""Dialects ``ahp-adapter hook`` and ``install`` accept (VS Code is detected by ``claude-code``)."""

ALIASES = {
    "claude": "claude-code",
    "gemini-cli": "gemini",
    "codex-cli": "codex",
    "kimi-cli": "kimi",
    "kimi-code": "kimi",
    "copilot-cli": "copilot",
    "github-copilot": "copilot",
    "github-copilot-cli": "copilot",
    "qwen": "qwen-code",
    "qwen-cli": "qwen-code",
}


class UnknownDialect(ValueError):
    """A dialect name this adapter does not speak."""


def canonical_name(name: str) -> str:
    name = ALIASES.get(name, name)
    if name not in DIALECTS:
        raise UnknownDialect(f"unknown dialect {name!r} (known: {', '.join(sorted(DIALECTS))})")
    return name


def get(name: str) -> Dialect:
    """The codec for ``name`` (an alias such as ``claude`` or ``gemini-cli`` works too)."""
    module, cls = DIALECTS[canonical_name(name)]
    dialect: Dialect = getattr(importlib.import_module(module), cls)()
    return dialect


__all__ = [
    "ALIASES",
    "DIALECTS",
    "Dialect",
    "NativeAnswer",
    "Parsed",
    "PayloadError",
    "UnknownDialect",
    "canonical_name",
    "get",
]

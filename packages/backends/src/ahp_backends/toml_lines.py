"""The configuration files of the sample backends: TOML, with errors that name a line.

Owns reading a TOML configuration file (:func:`read_toml`: at most
:data:`MAX_FILE_BYTES`, UTF-8, a syntax error with its line), finding where each
``[[name]]`` table and its keys start (:func:`table_lines`), and the checks every
such table shares (:class:`Locator`: a table, no unknown key, a non-empty string, a
regex that compiles), each failing as one :class:`ConfigError`
(``FILE:LINE: name[i].key: reason``). The deny-list's rules and the approval
backend's requirements are read with it.

Never decides what a file means (each backend does), and never echoes a value from
the file in an error: a reason names the place and what is wrong, not what was
written there.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from ahp_backends.patterns import Pattern, PatternError, compile_pattern

__all__ = [
    "MAX_FILE_BYTES",
    "ConfigError",
    "Locator",
    "TableLines",
    "only_key",
    "read_toml",
    "table_lines",
]

MAX_FILE_BYTES: Final = 1024 * 1024
"""A configuration file is read whole; a larger one is refused."""


class ConfigError(Exception):
    """A configuration file that cannot be used: ``FILE:LINE: where: reason``."""

    def __init__(self, path: str, reason: str, *, line: int | None = None, where: str = "") -> None:
        super().__init__(reason)
        self.path = path
        self.line = line
        self.where = where
        self.reason = reason

    def __str__(self) -> str:
        location = self.path if self.line is None else f"{self.path}:{self.line}"
        return (
            f"{location}: {self.where}: {self.reason}"
            if self.where
            else f"{location}: {self.reason}"
        )


_TOML_POSITION = re.compile(r"\s*\(at line (\d+), column (\d+)\)\s*$")


def read_toml(path: str, data: bytes | None = None) -> tuple[str, dict[str, Any]]:
    """The text and the parsed document of a TOML file; :class:`ConfigError` if unusable."""
    import tomllib

    if data is None:
        try:
            with open(path, "rb") as file:
                data = file.read(MAX_FILE_BYTES + 1)
        except OSError as exc:
            raise ConfigError(
                path, f"cannot read the file ({exc.strerror or 'I/O error'})"
            ) from None
    if len(data) > MAX_FILE_BYTES:
        raise ConfigError(path, f"the file is larger than {MAX_FILE_BYTES} bytes")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise ConfigError(path, "the file is not UTF-8 text") from None
    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        message = str(exc)
        found = _TOML_POSITION.search(message)
        if found is None:
            raise ConfigError(path, f"invalid TOML: {message}") from None
        reason = f"invalid TOML: {message[: found.start()]} (column {found.group(2)})"
        raise ConfigError(path, reason, line=int(found.group(1))) from None
    return text, document


def only_key(path: str, document: Mapping[str, Any], name: str) -> None:
    """A file holds ``[[name]]`` tables and nothing else at its top level."""
    for key in document:
        if key != name:
            raise ConfigError(path, f"unknown top-level key {key!r} (only [[{name}]] tables)")


@dataclass
class TableLines:
    """Where one ``[[name]]`` table and its keys start in the file (1-based lines)."""

    header: int
    keys: dict[str, int] = field(default_factory=dict)
    subtables: dict[str, TableLines] = field(default_factory=dict)

    def line(self, key: str | None = None, subkey: str | None = None) -> int:
        if key is None:
            return self.header
        sub = self.subtables.get(key)
        if sub is not None:
            return sub.keys.get(subkey, sub.header) if subkey is not None else sub.header
        return self.keys.get(key, self.header)


_HEADER = re.compile(r"^\s*(\[\[?)\s*([^\]]+?)\s*\]\]?\s*(?:#.*)?$")
_KEY = re.compile(r"""^\s*(?:"([^"]*)"|'([^']*)'|([A-Za-z0-9_-]+))\s*=""")


def table_lines(text: str, name: str) -> tuple[list[TableLines], int | None]:
    """Lines of each ``[[name]]`` table (with its ``[name.sub]`` tables), best effort.

    Returns the tables in order and the line of an inline ``name = [...]`` array if
    there is one. TOML gives no positions, so this scans the text: good enough to
    point a reader at the right place, never used to decide anything.
    """
    tables: list[TableLines] = []
    inline: int | None = None
    current: TableLines | None = None
    target: TableLines | None = None  # where bare keys go now
    top = True
    for number, raw in enumerate(text.splitlines(), start=1):
        header = _HEADER.match(raw)
        if header is not None:
            top = False
            brackets, table = header.group(1), re.sub(r"\s*\.\s*", ".", header.group(2))
            if brackets == "[[" and table == name:
                current = TableLines(number)
                tables.append(current)
                target = current
            elif brackets == "[" and current is not None and table.startswith(name + "."):
                sub = TableLines(number)
                current.subtables[table[len(name) + 1 :]] = sub
                target = sub
            else:
                current = target = None
            continue
        key = _KEY.match(raw)
        if key is None:
            continue
        key_name = next(g for g in key.groups() if g is not None)
        if target is not None:
            target.keys.setdefault(key_name, number)
        elif top and key_name == name and inline is None:
            inline = number
    return tables, inline


class Locator:
    """Builds :class:`ConfigError` for ``name[i].key`` with the best line known, and
    runs the checks every ``[[name]]`` table shares."""

    def __init__(self, path: str, text: str, name: str) -> None:
        self.path = path
        self.name = name
        self.tables, self.inline = table_lines(text, name)

    def error(
        self, index: int, reason: str, key: str | None = None, subkey: str | None = None
    ) -> ConfigError:
        where = f"{self.name}[{index}]"
        if key is not None:
            where += f".{key}"
        if subkey is not None:
            where += f".{subkey}"
        if index < len(self.tables):
            line: int | None = self.tables[index].line(key, subkey)
        else:
            line = self.inline
        return ConfigError(self.path, reason, line=line, where=where)

    def table(self, index: int, value: Any, known: Iterable[str]) -> dict[str, Any]:
        """``name[index]``, which must be a table whose keys are all ``known``."""
        if not isinstance(value, dict):
            raise self.error(index, f"must be a table ([[{self.name}]])")
        keys = tuple(known)
        for key in value:
            if key not in keys:
                raise self.error(index, f"unknown key {key!r} (known: {', '.join(keys)})", key)
        return value

    def text(self, index: int, key: str, value: Any) -> str:
        """A non-empty (not only blank) string."""
        if not isinstance(value, str) or not value.strip():
            raise self.error(index, "must be a non-empty string", key)
        return value

    def regex(self, index: int, value: Any, key: str, subkey: str | None = None) -> Pattern:
        """A non-empty regex that RE2 can run (:mod:`ahp_backends.patterns`)."""
        if not isinstance(value, str) or not value:
            raise self.error(index, "must be a non-empty regex string", key, subkey)
        try:
            return compile_pattern(value)
        except PatternError as exc:
            raise self.error(index, f"invalid regex: {exc.reason}", key, subkey) from None

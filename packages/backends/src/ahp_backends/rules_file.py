"""What the rules-driven sample backends share: path globs and the reload of a rules file.

Owns :func:`glob_to_regex` (the one path-glob dialect: the deny-list's ``paths``
condition and the CEL policy's ``glob()`` helper both use it) and
:class:`RulesFile`, the rules in force for a file that may change while serving: it
is re-read when its stat changes (or while it is too fresh for a coarse timestamp to
be trusted); a version that cannot be read or does not parse keeps the last good
rules, and says so once on stderr per bad version; a good version replaces them and
says so. What a version means is the backend's parse function, never decided here.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final, Generic, TypeVar

from ahp_backends.toml_lines import MAX_FILE_BYTES, ConfigError

__all__ = ["SETTLE_NS", "RulesFile", "glob_to_regex"]

T = TypeVar("T")

SETTLE_NS: Final = 2_000_000_000
"""A file modified less than this long ago is re-read even if its stat looks unchanged
(file-system timestamps are coarse: two quick edits of the same size can share one)."""


def glob_to_regex(glob: str) -> re.Pattern[str]:
    """A path glob as a regex over the whole path.

    ``*`` and ``?`` never cross ``/``; ``**`` does (``**/`` also matches no
    directory at all); ``[abc]`` and ``[!abc]`` are character classes.
    """
    out: list[str] = []
    i, n = 0, len(glob)
    while i < n:
        c = glob[i]
        if c == "*":
            if glob.startswith("**/", i):
                out.append("(?:.*/)?")
                i += 3
                continue
            if glob.startswith("**", i):
                out.append(".*")
                i += 2
                continue
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "[":
            end = glob.find("]", i + 2 if glob.startswith(("[!", "[^"), i) else i + 1)
            if end == -1 or end == i + 1:
                out.append(re.escape(c))
            else:
                body = glob[i + 1 : end]
                if body[0] in "!^":
                    body = "^" + body[1:]
                out.append("[" + body.replace("\\", "\\\\") + "]")
                i = end + 1
                continue
        else:
            out.append(re.escape(c))
        i += 1
    return re.compile("(?s:" + "".join(out) + r")\Z")


@dataclass(frozen=True, slots=True)
class _Version:
    stat: tuple[int, int, int, int]
    data: bytes


class RulesFile(Generic[T]):
    """The rules parsed from ``path`` (``current``), reloaded by :meth:`refresh`.

    ``parse(path, data)`` turns a version's bytes into rules or raises
    :class:`ConfigError`; ``count`` says how many rules a version has (for the
    ``reloaded`` line); ``say`` prints one diagnostic line. Not thread-safe: the
    backend holds its own lock around :meth:`refresh` and its decision.
    """

    def __init__(
        self,
        path: str,
        parse: Callable[[str, bytes], T],
        *,
        count: Callable[[T], int],
        say: Callable[[str], None],
        clock_ns: Callable[[], int] = time.time_ns,
    ) -> None:
        self.path = path
        self._parse = parse
        self._count = count
        self._say = say
        self._clock_ns = clock_ns
        stat = self._stat()  # before reading: a later change then always shows
        with open(path, "rb") as file:
            data = file.read(MAX_FILE_BYTES + 1)
        self.current: T = parse(path, data)
        self._version = _Version(stat or (0, 0, 0, 0), data)
        self._warned: bytes | None = None  # the bad version last warned about
        self._unreadable = False

    def _stat(self) -> tuple[int, int, int, int] | None:
        try:
            st = os.stat(self.path)
        except OSError:
            return None
        return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)

    def refresh(self) -> T:
        """Re-read the file if it changed; keep the last good rules if the new text is bad."""
        stat = self._stat()
        settled = stat is not None and self._clock_ns() - stat[3] > SETTLE_NS
        if stat == self._version.stat and settled:
            return self.current
        data: bytes | None = None
        if stat is not None:
            try:
                with open(self.path, "rb") as file:
                    data = file.read(MAX_FILE_BYTES + 1)
            except OSError:
                data = None
        if data is None:
            if not self._unreadable:
                self._unreadable = True
                self._say(
                    f"warning: {self.path}: cannot read the rules file; keeping the last good rules"
                )
            return self.current
        self._unreadable = False
        if data == self._version.data:
            self._version = _Version(stat or self._version.stat, data)
            self._warned = None
            return self.current
        if data == self._warned:
            return self.current
        try:
            rules = self._parse(self.path, data)
        except ConfigError as exc:
            self._warned = data
            self._say(f"warning: {exc}; keeping the last good rules")
            return self.current
        self.current = rules
        self._version = _Version(stat or self._version.stat, data)
        self._warned = None
        self._say(f"reloaded {self.path} ({self._count(rules)} rules)")
        return rules

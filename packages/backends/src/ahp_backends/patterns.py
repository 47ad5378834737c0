"""The regular expressions the sample backends run on an event: RE2, linear in the input.

Owns compiling a pattern written in a rules file (:func:`compile_pattern`, RE2 syntax,
the dialect CEL specifies for ``matches()``), searching it (:meth:`Pattern.search`:
found anywhere in the text, as CEL's ``matches()`` and the deny-list's input regexes
mean; :meth:`Pattern.fullmatch` for an approval grant, which covers a whole subject),
and making any Python string searchable (:func:`valid_text`: a lone surrogate,
which JSON's ``\\ud800`` escape can write and ``json.loads`` keeps, reads as U+FFFD).
The CEL policy's ``matches()``, the deny-list's ``[rules.input]`` and the approval
backend's requirement and grant patterns all run here (rules files get theirs through
:meth:`ahp_backends.toml_lines.Locator.regex`).

A pattern RE2 cannot run (a backreference, lookaround, an atomic group or possessive
repetition, ``\\Z``, a repetition count above 1000, a compiled program beyond RE2's
memory budget) raises :class:`PatternError` whose ``reason`` names the construct in our
own words, never the pattern text. RE2's own error log is switched off (it would print
the pattern on stderr). Never uses Python's ``re`` on event text: a backtracking engine
takes seconds to minutes on a crafted input (``git push.*(-f|--force)`` over 180 KB of
``git push `` took 36 s), which holds a persistent backend and times out every call
after it. Bounds: RE2 runs in time linear in the text; a compiled pattern is kept in
an LRU cache of :data:`CACHE_SIZE`.
"""

from __future__ import annotations

import functools
import re
from typing import Any, Final

import re2  # type: ignore[import-untyped]  # google-re2: no type information
from re2 import _re2  # the pybind module under re2's wrapper: a bool search, no Match object

__all__ = ["CACHE_SIZE", "Pattern", "PatternError", "PatternSet", "compile_pattern", "valid_text"]

CACHE_SIZE: Final = 1024

_SURROGATE: Final = re.compile("[\ud800-\udfff]")  # our own fixed pattern, linear
_UNANCHORED: Final = _re2.RE2.Anchor.UNANCHORED
_WHOLE: Final = _re2.RE2.Anchor.ANCHOR_BOTH
_NO_MATCH: Final = (-1, -1)


class PatternError(ValueError):
    """A pattern RE2 refuses: ``reason`` says what to change, without the pattern."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _options() -> Any:
    options = re2.Options()
    options.log_errors = False  # RE2 would log the pattern itself on stderr
    options.never_capture = True  # only "is it found anywhere": no groups to track
    return options


_OPTIONS: Final = _options()


def valid_text(text: str) -> str:
    """``text`` with each lone surrogate (not valid Unicode, so not UTF-8) as U+FFFD."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return _SURROGATE.sub("\ufffd", text)
    return text


class Pattern:
    """One compiled RE2 pattern; :meth:`search` says whether it is found in a text."""

    __slots__ = ("_re2", "pattern")

    def __init__(self, pattern: str, compiled: Any) -> None:
        self.pattern = pattern
        self._re2 = compiled

    def search(self, text: str) -> bool:
        """Whether the pattern is found anywhere in ``text`` (any str: see :func:`valid_text`)."""
        try:
            encoded = text.encode("utf-8")
        except UnicodeEncodeError:
            encoded = valid_text(text).encode("utf-8")
        return self.search_utf8(encoded)

    def search_utf8(self, encoded: bytes) -> bool:
        """:meth:`search` on text already encoded (one encoding for several patterns)."""
        spans = self._re2.Match(_UNANCHORED, encoded, 0, len(encoded))
        return bool(spans[0] != _NO_MATCH)

    def fullmatch(self, text: str) -> bool:
        """Whether the pattern matches the whole of ``text`` (an approval grant's sense)."""
        encoded = valid_text(text).encode("utf-8")
        spans = self._re2.Match(_WHOLE, encoded, 0, len(encoded))
        return bool(spans[0] != _NO_MATCH)

    def __repr__(self) -> str:
        return f"Pattern({self.pattern!r})"


class PatternSet:
    """Several patterns searched in one pass (RE2's ``Set``): :meth:`found_utf8` gives
    the indices of those found, exactly what each pattern's :meth:`Pattern.search` would
    say, in time linear in the text for all of them together. Where RE2 cannot build the
    combined program (its memory budget), each pattern is searched in turn instead."""

    __slots__ = ("_patterns", "_set")

    def __init__(self, patterns: list[Pattern]) -> None:
        self._patterns = patterns
        combined: Any = _re2.Set(_UNANCHORED, _OPTIONS)
        for pattern in patterns:
            if combined.Add(pattern.pattern.encode("utf-8")) < 0:
                combined = None
                break
        self._set = combined if combined is not None and combined.Compile() else None

    def found_utf8(self, encoded: bytes) -> frozenset[int]:
        """The indices (into the patterns given) of the patterns found in ``encoded``."""
        if self._set is not None:
            return frozenset(self._set.Match(encoded))
        return frozenset(i for i, p in enumerate(self._patterns) if p.search_utf8(encoded))


@functools.lru_cache(maxsize=CACHE_SIZE)
def compile_pattern(pattern: str) -> Pattern:
    """``pattern`` (RE2 syntax) compiled, or :class:`PatternError` saying why RE2 refuses it."""
    try:
        encoded = pattern.encode("utf-8")
    except UnicodeEncodeError:
        raise PatternError("the pattern is not valid Unicode (a lone surrogate)") from None
    compiled = _re2.RE2(encoded, _OPTIONS)
    if not compiled.ok():
        raise PatternError(_reason(_text(compiled.error())))
    return Pattern(pattern, compiled)


def _text(error: Any) -> str:
    return error.decode("utf-8", "replace") if isinstance(error, bytes) else str(error)


_UNSUPPORTED: Final = "is not supported by RE2, which runs in time linear in the input"
_BY_OPERATOR: Final = (
    # RE2's "invalid perl operator: ARG" and "bad repetition operator: ARG", by ARG.
    (("(?=", "(?!"), f"lookahead ((?=...), (?!...)) {_UNSUPPORTED}"),
    (("(?<=", "(?<!"), f"lookbehind ((?<=...), (?<!...)) {_UNSUPPORTED}"),
    (("(?>",), f"an atomic group ((?>...)) {_UNSUPPORTED}"),
    # RE2 reports (?P=name) as "(?P": a named group (?P<name>...) is fine.
    (("(?P",), f"a named backreference ((?P=name)) {_UNSUPPORTED}"),
    (("(?#",), f"a comment group ((?#...)) {_UNSUPPORTED}"),
    (("++", "*+", "?+", "}+"), f"possessive repetition (a++, a*+) {_UNSUPPORTED}"),
)
_CODES: Final = {
    # RE2's error code texts (re2/re2.cc CodeText), as our reasons.
    "invalid escape sequence": "an escape sequence RE2 does not know",
    "invalid character class": "an invalid character class",
    "invalid character class range": "an invalid range or Unicode class (\\p{...})",
    "missing ]": "a missing ] (an unclosed character class)",
    "missing )": "a missing ) (an unclosed group)",
    "unexpected )": "an unexpected ) (a group closed but not opened)",
    "trailing \\": "a trailing backslash",
    "no argument for repetition operator": "a repetition operator with nothing to repeat",
    "invalid repetition size": "a repetition count above 1000 (RE2's limit) or not a count",
    "bad repetition operator": "a repetition operator RE2 does not know",
    "invalid perl operator": "a (?...) group RE2 does not know",
    "invalid UTF-8": "text that is not valid UTF-8",
    "invalid named capture group": "an invalid named group",
    "pattern too large - compile failed": (
        "a pattern too large for RE2 (its compiled program exceeds RE2's memory budget)"
    ),
}


def _reason(error: str) -> str:
    """RE2's error as our reason: the construct named, never the pattern's own text."""
    code, _, arg = error.partition(": ")
    if code in ("invalid perl operator", "bad repetition operator"):
        for prefixes, reason in _BY_OPERATOR:
            if arg.startswith(prefixes):
                return reason
    if code == "invalid escape sequence":
        if arg[1:2].isdigit():
            return f"a backreference (\\1) {_UNSUPPORTED}"
        if arg == "\\Z":
            return "\\Z is not RE2 syntax: write \\z for the end of the text"
    found = _CODES.get(code)
    return f"{found} (RE2 syntax)" if found else "a pattern RE2 cannot compile (RE2 syntax)"

"""The CEL side of the policy backend: the environment, the helpers, and compiling a rule.

Owns the CEL environment the rules are checked in (``event``, the event as
delivered, typed ``map(string, dyn)``; ``call``, its command and paths as every harness
sends them, :mod:`ahp_backends.tool_call`), the helper functions beside CEL's standard
library (``glob``, and ``matches`` served by RE2, :mod:`ahp_backends.patterns`, with
compiled patterns kept: see :data:`MATCHES_NOTE`), compiling and type-checking the ``when``
expressions of one policy (:class:`Compiler`: a :class:`CelError` names the column
and says what is wrong, never echoing the expression; ``event.a.b.matches("...")``
hoisted out of the program and computed once per request; a literal pattern RE2
cannot run is refused at load), compiling the rules of one event type into a single
program (:meth:`Compiler.compile_all`), converting an event to what the runtime takes
(:func:`cel_value`: never fails on valid JSON; a lone surrogate reads as U+FFFD, an
int beyond int64 as a float), and turning a run-time error into a note that names no
value of the event (:func:`describe_error`, :func:`describe_exception`).

The implementation is ``cel-expr-python`` (Google's cel-cpp with its type checker);
the README's policy section says why. Never decides what a match means (that is
:mod:`ahp_backends.policy`).
"""

from __future__ import annotations

import functools
import posixpath
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from ahp_backends.paths import canonical_path
from ahp_backends.patterns import Pattern, PatternError, PatternSet, compile_pattern, valid_text
from ahp_backends.rules_file import glob_to_regex
from ahp_backends.tool_call import call_view

__all__ = [
    "ITERATION_BUDGET",
    "MATCHES_NOTE",
    "CelError",
    "Compiled",
    "Compiler",
    "Hoisted",
    "cel_value",
    "compile_when",
    "describe_error",
    "describe_exception",
    "environment",
]

_RX: Final = "ahp_rx_"
"""What ``matches`` is compiled as: the same length, so error columns stay right."""

MATCHES_NOTE: Final = """\
s.matches(re)        CEL's own: RE2 syntax (the deny-list's input regexes too),
                       found anywhere in s (anchor with ^ and $), in time linear in s;
                       a pattern RE2 cannot run (a backreference, lookaround, \\Z:
                       write \\z) is an error, a string literal one at load"""

ITERATION_BUDGET: Final = 10_000
"""cel-cpp's comprehension budget: a run whose ``exists``/``all``/``map``/``filter``
reach this many iterations, all together, fails (cel-cpp raises; 9,999 pass)."""


class CelError(Exception):
    """A ``when`` expression that does not compile or check: ``reason`` says why."""

    def __init__(self, reason: str, line: int = 1) -> None:
        super().__init__(reason)
        self.reason = reason
        self.line = line


class HelperError(ValueError):
    """A helper refusing its arguments; the text is ours and names no event value."""


def _matches(text: str, pattern: str) -> bool:
    try:
        compiled = compile_pattern(pattern)
    except PatternError as exc:
        raise HelperError(f"ahp: invalid regex in matches(): {exc.reason}") from None
    return compiled.search(text)


@functools.lru_cache(maxsize=1024)
def _glob(pattern: str) -> tuple[re.Pattern[str], bool]:
    return glob_to_regex(pattern), "/" not in pattern


def _glob_match(path: str, pattern: str, cwd: str | None = None) -> bool:
    if not path or not pattern:
        return False
    regex, basename_only = _glob(pattern)
    normal = canonical_path(path, cwd)
    return regex.match(posixpath.basename(normal) if basename_only else normal) is not None


def _functions() -> list[Any]:
    from cel_expr_python import cel  # type: ignore[import-untyped]  # stubs, no py.typed

    string, boolean = cel.Type.STRING, cel.Type.BOOL
    return [
        cel.FunctionDecl(
            _RX,
            [
                cel.Overload(
                    "ahp_rx_member", boolean, [string, string], is_member=True, impl=_matches
                ),
                cel.Overload("ahp_rx_global", boolean, [string, string], impl=_matches),
            ],
        ),
        cel.FunctionDecl(
            "glob",
            [
                cel.Overload("ahp_glob_string_string", boolean, [string, string], impl=_glob_match),
                cel.Overload(
                    "ahp_glob_string_string_string",
                    boolean,
                    [string, string, string],
                    impl=_glob_match,
                ),
            ],
        ),
    ]


def environment(hoisted: Sequence[str] = ()) -> Any:
    """The CEL environment rules are checked and run in: ``event`` (``map(string, dyn)``),
    ``call`` (the call's command and paths, :func:`ahp_backends.tool_call.call_view`), the
    helpers, and one bool variable per hoisted ``matches`` (see :class:`Compiler`)."""
    from cel_expr_python import cel

    variables: dict[str, Any] = {
        "event": cel.Type.Map(cel.Type.STRING, cel.Type.DYN),
        "call": cel.Type.Map(cel.Type.STRING, cel.Type.DYN),
    }
    variables.update((name, cel.Type.BOOL) for name in hoisted)
    return cel.NewEnv(variables=variables, functions=_functions())


@functools.cache
def _literals() -> Any:
    """An environment for decoding string literals (CEL's own escapes)."""
    return environment()


# --------------------------------------------------------------------------- source

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_STRING_START = re.compile(r"(?:[rR][bB]?|[bB][rR]?)?(\"\"\"|'''|\"|')")


def _string_end(source: str, start: int) -> int | None:
    """The index after the string literal at ``start`` (a prefix allowed), or ``None``."""
    found = _STRING_START.match(source, start)
    if found is None:
        return None
    quote = found.group(1)
    raw = "r" in source[start : found.start(1)].lower()
    i = found.end()
    while i < len(source):
        if source.startswith(quote, i):
            return i + len(quote)
        if source[i] == "\\" and not raw:
            i += 2
            continue
        if source[i] == "\n" and len(quote) == 1:
            return None
        i += 1
    return None


_CALL_SUBJECT = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*\s*,\s*")
_HOISTABLE = re.compile(r"event((?:\.[A-Za-z_][A-Za-z0-9_]*)+)\.matches\(")
_SHADOWED = re.compile(r"\(\s*event\s*,")


@functools.lru_cache(maxsize=4096)
def _literal(text: str) -> str | None:
    """A CEL string literal's value, or ``None`` (bytes, or not a literal)."""
    try:
        value = _literals().compile(text).eval().plain_value()
    except RuntimeError:
        return None
    return value if isinstance(value, str) else None


@dataclass(frozen=True, slots=True)
class Hoisted:
    """One ``event.a.b.matches("literal")``, computed in Python before the program runs."""

    name: str
    path: tuple[str, ...]
    regex: Pattern


class Compiler:
    """Compiles the ``when`` expressions of one policy file.

    Every ``matches(`` call is served by RE2 through :mod:`ahp_backends.patterns`, with
    compiled patterns kept (cel-cpp's own is RE2 too, but compiles the pattern on every
    call). The common form ``event.a.b.matches("literal")`` (a field
    path and a literal pattern, on one line) is hoisted further: the policy computes it
    once per request, before the program runs, and the program reads it as a bool
    variable of the same width (so error columns stay right). A path that does not
    lead to a string leaves the variable unset, which is a run-time error exactly where
    the original call would have failed: ``&&`` and ``||`` absorb it the same way.
    Two passes: :meth:`scan` every rule (which fixes the variables), then :meth:`check`
    each, in file order.
    """

    def __init__(self) -> None:
        self.hoisted: dict[tuple[tuple[str, ...], str], Hoisted] = {}
        self._env: Any = None
        self._by_path: dict[tuple[str, ...], tuple[PatternSet, list[str]]] = {}

    def scan(self, expression: str) -> tuple[str, list[str], str | None]:
        """The expression rewritten, its literal ``matches`` patterns, and the first
        problem found (a reserved name), reported by :meth:`check` in file order."""
        out: list[str] = []
        literals: list[str] = []
        problem: str | None = None
        hoist = _SHADOWED.search(expression) is None
        source, i, n = expression, 0, len(expression)
        while i < n:
            c = source[i]
            end = _string_end(source, i) if c in "\"'rRbB" else None
            if end is not None:
                out.append(source[i:end])
                i = end
                continue
            if source.startswith("//", i):
                newline = source.find("\n", i)
                end = n if newline == -1 else newline
                out.append(source[i:end])
                i = end
                continue
            ident = _IDENT.match(source, i) if c.isalpha() or c == "_" else None
            if ident is None:
                out.append(c)
                i += 1
                continue
            word, start, i = ident.group(), i, ident.end()
            if word.startswith("ahp_") and problem is None:
                problem = "names starting with ahp_ are reserved"
            if word == "event" and hoist and not source[:start].rstrip().endswith("."):
                found = self._hoist(source, start)
                if found is not None:
                    name, span_end, literal = found
                    literals.append(literal)
                    out.append(name.ljust(span_end - start))
                    i = span_end
                    continue
            after = n - len(source[i:].lstrip())
            if word == "matches" and source.startswith("(", after):
                out.append(_RX)
                arg = n - len(source[after + 1 :].lstrip())
                subject = _CALL_SUBJECT.match(source, arg)  # matches(event.a.b, "literal")
                if subject is not None:
                    arg = subject.end()
                arg_end = _string_end(source, arg)
                if arg_end is not None and source[arg_end:].lstrip().startswith(")"):
                    literals.append(source[arg:arg_end])
            else:
                out.append(word)
        return "".join(out), literals, problem

    def _hoist(self, source: str, start: int) -> tuple[str, int, str] | None:
        found = _HOISTABLE.match(source, start)
        if found is None:
            return None
        arg = found.end()
        arg_end = _string_end(source, arg)
        if arg_end is None or not source.startswith(")", arg_end):
            return None
        span_end = arg_end + 1
        literal = source[arg:arg_end]
        pattern = _literal(literal)
        if pattern is None or "\n" in source[start:span_end]:
            return None
        try:
            regex = compile_pattern(pattern)
        except PatternError:
            return None  # left to the helper, and reported by check()
        path = tuple(found.group(1).split(".")[1:])
        key = (path, pattern)
        if key not in self.hoisted:
            name = f"ahp_m{len(self.hoisted)}"
            if len(name) > span_end - start:
                return None
            self.hoisted[key] = Hoisted(name, path, regex)
        name = self.hoisted[key].name
        return (name, span_end, literal) if len(name) <= span_end - start else None

    @property
    def env(self) -> Any:
        if self._env is None:
            self._env = environment([h.name for h in self.hoisted.values()])
        return self._env

    def check(self, scanned: tuple[str, list[str], str | None]) -> Compiled:
        """Compile and type-check one scanned ``when`` (a boolean expression over ``event``)."""
        from cel_expr_python import cel

        source, literals, problem = scanned
        if problem is not None:
            raise CelError(problem)
        try:
            program = self.env.compile(source)
        except RuntimeError as exc:
            raise _compile_error(str(exc)) from None
        result = program.return_type()
        if result != cel.Type.BOOL:
            name = str(result.name()).lower()
            raise CelError(
                f"the expression gives {name}, not bool (compare it explicitly, "
                'e.g. event.tool.name == "Bash")'
            )
        for literal in literals:
            pattern = _literal(literal)
            if pattern is not None:
                try:
                    compile_pattern(pattern)
                except PatternError as exc:
                    raise CelError(f"invalid regex in matches(): {exc.reason}") from None
        return Compiled(source, program)

    def compile_all(self, rules: Sequence[Compiled]) -> Any:
        """One program giving every rule's result as a list (``[r0, r1, ...]``), or
        ``None`` when there is nothing to run. One call per request converts the event
        once; an error in any rule makes the whole list an error, and the caller then
        runs the rules one by one (:attr:`Compiled.program`) to keep the others'."""
        if not rules:
            return None
        return self.env.compile("[" + ",\n".join(f"({r.source})" for r in rules) + "]")

    def bindings(self, event: dict[str, Any]) -> dict[str, Any]:
        """The program's variables for ``event``: itself, its ``call``, and each hoisted match (the
        patterns on one path searched together, in one pass over the field's text)."""
        data: dict[str, Any] = {"event": event, "call": call_view(event)}
        for path, (patterns, names) in self._patterns_by_path().items():
            value: Any = event
            for segment in path:
                value = value.get(segment) if isinstance(value, dict) else None
            if isinstance(value, str):  # else unset: an error where the call would fail
                found = patterns.found_utf8(valid_text(value).encode("utf-8"))
                for i, name in enumerate(names):
                    data[name] = i in found
        return data

    def _patterns_by_path(self) -> dict[tuple[str, ...], tuple[PatternSet, list[str]]]:
        if sum(len(names) for _, names in self._by_path.values()) != len(self.hoisted):
            grouped: dict[tuple[str, ...], list[Hoisted]] = {}
            for (path, _), hoisted in self.hoisted.items():
                grouped.setdefault(path, []).append(hoisted)
            self._by_path = {
                path: (PatternSet([h.regex for h in group]), [h.name for h in group])
                for path, group in grouped.items()
            }
        return self._by_path


def compile_when(expression: str) -> Compiled:
    """Compile and type-check one ``when`` on its own (its own :class:`Compiler`)."""
    compiler = Compiler()
    return compiler.check(compiler.scan(expression))


_POSITION = re.compile(r"ERROR: <input>:(\d+):(\d+): ")


def _compile_error(message: str) -> CelError:
    """A cel-cpp compile error as our reason: the first error, its column, no snippet."""
    text = message.split("\n", 1)[0]
    text = re.sub(r"^[A-Z_]+: ", "", text)
    text = re.sub(r"\s*\[[A-Z_]+\]\s*$", "", text)
    found = _POSITION.search(text)
    line = 1
    if found is not None:
        line = int(found.group(1))
        text = f"column {found.group(2)}: " + text[found.end() :]
    text = text.replace(_RX, "matches").replace(" (in container '')", "")
    if "recursion limit" in text:
        text += " (nest less deeply, or split the expression into rules)"
    return CelError(text, line)


class Compiled:
    """One checked ``when`` expression, ready to run."""

    __slots__ = ("program", "source")

    def __init__(self, source: str, program: Any) -> None:
        self.source = source  # the rewritten text, for the combined program
        self.program = program


_INT64: Final = (-(2**63), 2**63)


def cel_value(value: Any) -> Any:
    """``value`` (JSON as Python decodes it) made takeable by the CEL runtime, for any
    valid JSON: a string holding a lone surrogate (JSON's ``"\\ud800"`` escape, which
    ``json.loads`` keeps but UTF-8 cannot carry) has U+FFFD in its place, in values and
    keys alike; an int outside int64 (JSON allows any) becomes a float, as JSON numbers
    are. Without this one such string or number anywhere in the event, even in a field
    no rule reads, would make every rule fail."""
    if isinstance(value, str):
        return valid_text(value)
    if isinstance(value, bool) or value is None or isinstance(value, float):
        return value
    if isinstance(value, int):
        if _INT64[0] <= value < _INT64[1]:
            return value
        try:
            return float(value)
        except OverflowError:
            return float("inf") if value > 0 else float("-inf")
    if isinstance(value, dict):
        return {valid_text(str(k)): cel_value(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [cel_value(v) for v in value]
    return str(value)


_KEY_NOT_FOUND = re.compile(r'Key not found in map : "([^"\n]{1,80})"')
_OVERLOAD = re.compile(r"No matching overloads found : ([\w.()<>, ]{1,120})$")


def describe_error(message: Any) -> str:
    """A run-time error value's text as a note that never carries an event value."""
    text = str(message).split("\n", 1)[0].replace(_RX, "matches")
    if "ahp: " in text:
        return text.split("ahp: ", 1)[1]
    if re.search(r'No value with name "ahp_m\d+"', text):
        return "a field it reads with matches() is absent or not a string"
    found = _KEY_NOT_FOUND.search(text)
    if found is not None:
        return f"a field it reads is absent ({found.group(1)!r}; guard it with has())"
    found = _OVERLOAD.search(text)
    if found is not None:
        return f"a value has another type than the expression expects: {found.group(1)}"
    code = re.match(r"[A-Z_]+", text)
    return f"the event could not be evaluated ({code.group() if code else 'error'})"


def describe_exception(exc: BaseException) -> str:
    """The runtime refusing a run (an exception, not an error value) as a note that never
    carries its text: cel-cpp's comprehension budget is named, anything else by type."""
    if "Iteration budget exceeded" in str(exc):
        return (
            f"its comprehensions reach CEL's budget of {ITERATION_BUDGET:,} iterations "
            "(exists, all, map, filter over a long list)"
        )
    return f"the event could not be evaluated ({type(exc).__name__})"

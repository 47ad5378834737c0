"""The regular expressions the sample backends run on event text (ahp_backends.patterns).

What this file shows, in memory (the backends' own tests show the same through their
processes): a pattern RE2 cannot run is refused with a reason naming the construct and
never the pattern; ``search`` is found-anywhere, ``fullmatch`` the whole text; any
Python string is searchable (a lone surrogate reads as U+FFFD); a ``PatternSet`` says
exactly what each of its patterns' ``search`` says.
"""

from __future__ import annotations

import pytest
from ahp_backends.patterns import PatternError, PatternSet, compile_pattern, valid_text
from hypothesis import given
from hypothesis import strategies as st

REFUSED = [
    (r"(\w+) \1", "a backreference (\\1)"),
    ("(?=x)y", "lookahead"),
    ("(?<!-)force", "lookbehind"),
    ("(?>a+)b", "an atomic group"),
    ("xy*+", "possessive repetition"),
    (r"end\Z", "write \\z"),
    ("a{1001}", "a repetition count above 1000"),
    ("(ab", "a missing )"),
    ("ab)", "an unexpected )"),
    ("[ab", "a missing ]"),
    ("*a", "a repetition operator with nothing to repeat"),
]


@pytest.mark.parametrize(("pattern", "reason"), REFUSED, ids=[r for _, r in REFUSED])
def test_a_pattern_re2_cannot_run_is_refused_by_construct(pattern: str, reason: str) -> None:
    with pytest.raises(PatternError) as caught:
        compile_pattern(pattern)
    assert reason in caught.value.reason
    assert pattern not in caught.value.reason  # ours, never the rule's own text


def test_search_is_anywhere_and_fullmatch_is_the_whole_text() -> None:
    push = compile_pattern(r"git\s+push")
    assert push.search("cd x && git  push origin") and not push.search("git pull")
    assert not push.fullmatch("git push origin") and push.fullmatch("git push")
    assert compile_pattern("^a$").search("a") and not compile_pattern("^a$").search("a\n")


def test_a_lone_surrogate_reads_as_the_replacement_character() -> None:
    assert valid_text("a\ud800b\udfff") == "a\ufffdb\ufffd"
    assert compile_pattern("^a.b$").search("a\ud800b")
    assert compile_pattern("a\ufffdb").fullmatch("a\udc00b")


PATTERNS = ["push", "^rm ", r"-(f|-force)\b", "a.*b", r"\d{3}", "(?i)DROP", "x$", "^$"]


@given(st.text(alphabet="abrmpushfx-DROPdrop 0123\n\ud800", max_size=40))
def test_a_set_says_what_each_pattern_says(text: str) -> None:
    patterns = [compile_pattern(p) for p in PATTERNS]
    encoded = valid_text(text).encode("utf-8")
    expected = frozenset(i for i, p in enumerate(patterns) if p.search(text))
    assert PatternSet(patterns).found_utf8(encoded) == expected

"""The one canonical path form (ahp_backends.paths) against the kernel's view of a path.

What this file shows: for paths built from the segments ``""``, ``.``, ``..``, ``a``,
``b``, ``f`` joined by one to three slashes, absolute (starting with ``/``, ``//`` or
``///``, with ``..`` above the root) or relative to a working folder, over a tree of
real directories and files (no symlinks), :func:`canonical_path` names the file the
kernel opens: wherever ``os.stat`` resolves the original path, it resolves the
canonical one to the same ``(st_dev, st_ino)``. Where the kernel fails the original
and the path has no ``..``, no ``.`` and no trailing ``/``, the canonical path fails
with the same errno. The one documented difference: the lexical form drops ``x/..``,
``x/.`` and a trailing ``/`` even where ``x`` is missing or a file, which the kernel refuses
(``ENOENT``/``ENOTDIR``); a rule then sees the path the call would reach if it
existed, never a different existing file. The backends' tests show the same form
through their processes (``//etc/...`` matched by ``/etc/**``).
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest
from ahp_backends.paths import canonical_path
from hypothesis import assume, given
from hypothesis import strategies as st

EXAMPLES = [
    ("//etc/passwd", None, "/etc/passwd"),
    ("///etc//passwd/", None, "/etc/passwd"),
    ("/etc/./passwd", None, "/etc/passwd"),
    ("/tmp/../etc/passwd", None, "/etc/passwd"),
    ("/../../etc/passwd", None, "/etc/passwd"),
    ("//..//etc", None, "/etc"),
    ("/", None, "/"),
    ("//", None, "/"),
    ("/..", None, "/"),
    ("a/../b", None, "b"),
    ("a/../../b", None, "../b"),
    ("./a//b/", None, "a/b"),
    (".", None, "."),
    ("a/..", None, "."),
    ("../../etc/passwd", "/repo/src", "/etc/passwd"),
    ("x", "/repo/src", "/repo/src/x"),
    ("x", "//repo/./src/", "/repo/src/x"),
    ("/abs", "/repo", "/abs"),
    ("rel", "relative/cwd", "rel"),  # only an absolute cwd is joined
    ("", "/repo", "/repo"),
]


@pytest.mark.parametrize(("path", "cwd", "canonical"), EXAMPLES)
def test_examples(path: str, cwd: str | None, canonical: str) -> None:
    assert canonical_path(path, cwd) == canonical


SEGMENTS = st.sampled_from(["", ".", "..", "a", "b", "f"])
SLASHES = st.sampled_from(["/", "//", "///"])


@st.composite
def joined(draw: st.DrawFn) -> tuple[list[str], str]:
    """Segments, and the path joining them with one to three slashes each."""
    segments = draw(st.lists(SEGMENTS, min_size=1, max_size=6))
    text = segments[0]
    for segment in segments[1:]:
        text += draw(SLASHES) + segment
    if draw(st.booleans()):
        text += draw(SLASHES)
    return segments, text


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A real tree (no symlinks on the way, ancestors resolved): a/ a/b/ a/f b/ f."""
    root = Path(os.path.realpath(tmp_path_factory.mktemp("tree")))
    (root / "a" / "b").mkdir(parents=True)
    (root / "b").mkdir()
    (root / "a" / "f").write_text("x")
    (root / "f").write_text("x")
    return str(root)


def kernel(path: str, cwd: str) -> tuple[int, int] | int:
    """What ``os.stat`` says of ``path`` (relative to ``cwd``): the file, or the errno."""
    fd = os.open(cwd, os.O_RDONLY | os.O_DIRECTORY)
    try:
        st = os.stat(path, dir_fd=fd)
    except OSError as exc:
        return exc.errno if exc.errno is not None else -1
    finally:
        os.close(fd)
    return (st.st_dev, st.st_ino)


@given(
    spelled=joined(),
    anchor=st.sampled_from(["relative", "absolute", "above-root"]),
    lead=SLASHES,
)
def test_the_canonical_path_is_the_file_the_kernel_opens(
    tree: str, spelled: tuple[list[str], str], anchor: str, lead: str
) -> None:
    segments, text = spelled
    if anchor == "relative":
        path = text
    elif anchor == "absolute":
        path = tree + lead + text
    else:  # from the root, with '..' above it, then the tree's own components
        path = lead + "../" + lead + ".." + tree + lead + text
    assume(path)  # an empty name opens nothing; the backends never match one
    canonical = canonical_path(path, tree)
    assert "//" not in canonical and "/./" not in canonical
    assert canonical == "/" or not canonical.endswith("/")
    assert canonical_path(canonical, tree) == canonical  # a fixed point
    original, seen = kernel(path, tree), kernel(canonical, tree)
    lexical_only = ".." in segments or "." in segments or path.endswith("/")
    if isinstance(original, tuple) or not lexical_only:
        assert seen == original, (path, canonical)
    else:  # the documented difference: x/.., x/. or a trailing / over a missing or file x
        assert original in (errno.ENOENT, errno.ENOTDIR), (path, canonical)

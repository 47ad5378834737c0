"""The one canonical form of a path that path rules match: the kernel's lexical view.

Owns :func:`canonical_path`, used by every path rule of the sample backends (the
deny-list's ``paths`` condition and the CEL policy's ``glob()`` helper), so that a
spelling the kernel opens as ``/etc/passwd`` (``//etc/passwd``, ``/etc/./passwd``,
``/tmp/../etc/passwd``, ``/../etc//passwd/``) is matched as ``/etc/passwd``.

The rules, as the kernel resolves a path name segment by segment: any run of ``/`` is
one separator, including a leading ``//`` (which POSIX leaves implementation-defined
and :func:`posixpath.normpath` keeps, but Linux and macOS treat as ``/``); ``.`` is
dropped; ``..`` drops the segment before it, and ``..`` at the root stays at the root;
a trailing ``/`` is dropped. A relative path is joined to ``cwd`` first when ``cwd`` is
absolute (``session.cwd``); without one it stays relative (a leading ``..`` is kept).

Bounds, by design a lexical form: it never touches the file system. Symlinks are not
resolved (a link to ``/etc`` is matched by its own name, not its target), and ``a/..``
and ``a/.`` are dropped even where ``a`` does not exist or is not a directory, where
the kernel would fail the original path (``ENOENT``/``ENOTDIR``); a trailing ``/`` on
a file is dropped though the kernel refuses it. Where the kernel resolves the original path and
no symlink is on the way, it resolves the canonical one to the same file (the tests
check this against ``os.stat``). No other form is produced (no case folding, no
Unicode normalisation, no ``~`` expansion).
"""

from __future__ import annotations

__all__ = ["canonical_path"]


def canonical_path(path: str, cwd: str | None = None) -> str:
    """``path`` in canonical form (see the module docstring); relative to ``cwd`` if absolute.

    >>> canonical_path("//etc/./ssh/../passwd/")
    '/etc/passwd'
    >>> canonical_path("../../etc/passwd", "/repo/src")
    '/etc/passwd'
    >>> canonical_path("a/../../b")
    '../b'
    """
    if not path.startswith("/") and cwd is not None and cwd.startswith("/"):
        path = cwd + "/" + path
    absolute = path.startswith("/")
    out: list[str] = []
    for segment in path.split("/"):
        if segment in ("", "."):
            continue
        if segment == "..":
            if out and out[-1] != "..":
                out.pop()
            elif not absolute:
                out.append(segment)
            continue
        out.append(segment)
    if absolute:
        return "/" + "/".join(out)
    return "/".join(out) or "."

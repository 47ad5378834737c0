"""``ahp-backend new NAME --dir DIR [--kind backend|policy]``: create a ready-to-run project.

``--kind backend`` (the default; the files under ``ahp_backends/templates/backend``): a
``pyproject.toml`` depending on ``ahp-protocol``, one handler module
(``src/<module>/backend.py``, a commented ``tool.before`` example that denies force
pushes), a README (run, register, test), a sample ``registration.json`` and tests
that run the backend as a process through ahp-protocol's client and pass as
generated (``uv run pytest`` inside it).

``--kind policy`` (``templates/policy``): a policy with no Python code of its own: a
``policy.toml`` of CEL rules served by ``ahp-backend policy --rules policy.toml``, a
``policy_tests.toml`` test table, a ``registration.json`` running it, a README, and a
project test that runs ``ahp-backend policy test policy_tests.toml``; its
``pyproject.toml`` depends on ``ahp-backends`` (a virtual project: nothing is built).

``ahp-protocol`` and ``ahp-backends`` are not on a package index yet, so the project
gets ``[tool.uv.sources]`` entries pointing at the source trees this command runs
from (found from the packages' ``__file__``, or ``--protocol PATH`` and
``--backends PATH``); the README says how to drop them once they are published.

Never overwrites anything: the target folder must be missing or empty. Writes only
inside it. Names are checked first (a project name such as ``my-policy`` gives the
module ``my_policy`` and the backend id ``com.example.my-policy`` unless ``--id``
says otherwise).
"""

from __future__ import annotations

import argparse
import keyword
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Final

from ahp_protocol.wire.names import is_reverse_dns

from ahp_backends.serving import fail

__all__ = [
    "KINDS",
    "Project",
    "find_backends_source",
    "find_protocol_source",
    "main",
    "plan",
    "render",
    "write_project",
]

_NAME: Final = re.compile(r"^[a-z][a-z0-9]*(?:[-_][a-z0-9]+)*$")
_RESERVED: Final = frozenset({"ahp_protocol", "ahp_backends", "ahp_harness", "tests", "test"})
KINDS: Final = ("backend", "policy")

_PUBLISHED_NOTE: Final = """\
`ahp-protocol` is not on a package index yet, so `pyproject.toml` takes it from a
local source tree:

```toml
[tool.uv.sources]
ahp-protocol = {{ path = "{path}", editable = true }}
```

Change the path if that tree moves. Once `ahp-protocol` is published, delete the
`[tool.uv.sources]` table (and pin a version in `dependencies`, e.g.
`"ahp-protocol>=0.1"`); `uv lock` then takes it from the index."""

_INDEX_NOTE: Final = """\
`pyproject.toml` depends on `ahp-protocol` by name, and no local source tree was
found when this project was generated, so uv looks for it on your package index.
If it is not published there yet, point uv at a checkout of the AHP reference kit:

```toml
[tool.uv.sources]
ahp-protocol = { path = "/path/to/ahp-reference-kit/packages/protocol", editable = true }
```"""


_POLICY_PUBLISHED_NOTE: Final = """\
`ahp-backends` and `ahp-protocol` are not on a package index yet, so
`pyproject.toml` takes them from local source trees:

```toml
[tool.uv.sources]
{entries}
```

Change the paths if those trees move. Once both are published, delete the
`[tool.uv.sources]` table (and pin a version in `dependencies`, e.g.
`"ahp-backends>=0.1"`); `uv lock` then takes them from the index."""

_POLICY_INDEX_NOTE: Final = """\
`pyproject.toml` depends on `ahp-backends` by name, and no local source trees were
found when this project was generated, so uv looks for it (and `ahp-protocol`) on your
package index. If they are not published there yet, point uv at a checkout of the AHP
reference kit:

```toml
[tool.uv.sources]
ahp-backends = { path = "/path/to/ahp-reference-kit/packages/backends", editable = true }
ahp-protocol = { path = "/path/to/ahp-reference-kit/packages/protocol", editable = true }
```"""


@dataclass(frozen=True, slots=True)
class Project:
    """The names of one generated project."""

    name: str
    module: str
    backend_id: str
    directory: Path
    protocol: Path | None
    kind: str = "backend"  # one of KINDS: the template folder
    backends: Path | None = None  # the ahp-backends source tree (kind policy)

    @property
    def code_prefix(self) -> str:
        """The prefix of the backend's deny codes (reverse-DNS)."""
        return self.backend_id


def find_protocol_source() -> Path | None:
    """The ``ahp-protocol`` project folder this code runs from, if it is a source tree."""
    try:
        import ahp_protocol
    except ImportError:  # pragma: no cover - ahp-backends depends on it
        return None
    return _source_of(ahp_protocol.__file__, "ahp-protocol")


def find_backends_source() -> Path | None:
    """The ``ahp-backends`` project folder this code runs from, if it is a source tree."""
    import ahp_backends

    return _source_of(ahp_backends.__file__, "ahp-backends")


def _source_of(module_file: str | None, name: str) -> Path | None:
    if module_file is None:  # pragma: no cover - a namespace package
        return None
    package = Path(module_file).resolve().parent  # .../src/<package>
    for candidate in (package.parent.parent, package.parent):
        if _is_project(candidate, name):
            return candidate
    return None


def _is_protocol_project(folder: Path) -> bool:
    return _is_project(folder, "ahp-protocol")


def _is_project(folder: Path, name: str) -> bool:
    pyproject = folder / "pyproject.toml"
    if not pyproject.is_file():
        return False
    import tomllib

    try:
        data = tomllib.loads(pyproject.read_text("utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return False
    project = data.get("project")
    return isinstance(project, dict) and project.get("name") == name


def _toml_string(text: str) -> str:
    """``text`` as a TOML basic string body (backslashes and quotes escaped)."""
    return text.replace("\\", "\\\\").replace('"', '\\"')


def _json_string(text: str) -> str:
    import json

    return json.dumps(text)[1:-1]


def _template_files(kind: str = "backend") -> list[tuple[str, Traversable]]:
    """Every template file of ``kind`` as (relative path with ``/``, resource), sorted."""
    root = resources.files("ahp_backends").joinpath("templates", kind)
    found: list[tuple[str, Traversable]] = []

    def walk(node: Traversable, prefix: str) -> None:
        for child in node.iterdir():
            if child.name == "__pycache__":
                continue
            rel = f"{prefix}{child.name}"
            if child.is_dir():
                walk(child, rel + "/")
            elif child.name.endswith(".tmpl"):
                found.append((rel, child))

    walk(root, "")
    return sorted(found, key=lambda item: item[0])


def _target(rel: str, project: Project) -> str:
    """Where a template file goes: ``.tmpl`` dropped, ``module`` renamed, dotfiles."""
    parts = rel[: -len(".tmpl")].split("/")
    parts = [project.module if p == "module" else p for p in parts]
    if parts[-1] == "gitignore":
        parts[-1] = ".gitignore"
    return "/".join(parts)


def render(text: str, values: Mapping[str, str]) -> str:
    """Replace each ``{{key}}``; an unknown placeholder is a bug and raises ``KeyError``."""

    def substitute(match: re.Match[str]) -> str:
        return values[match.group(1)]

    return re.sub(r"\{\{([a-z_]+)\}\}", substitute, text)


def _policy_values(project: Project) -> dict[str, str]:
    trees = [("ahp-backends", project.backends), ("ahp-protocol", project.protocol)]
    entries = "\n".join(
        f'{name} = {{ path = "{_toml_string(path.as_posix())}", editable = true }}'
        for name, path in trees
        if path is not None
    )
    if entries:
        sources = (
            "\n[tool.uv.sources]\n"
            "# ahp-backends and ahp-protocol are not on a package index yet: these are the\n"
            "# source trees the project was generated from. Delete this table once they are\n"
            "# published.\n"
            f"{entries}\n"
        )
        note = _POLICY_PUBLISHED_NOTE.format(entries=entries)
    else:
        sources, note = "", _POLICY_INDEX_NOTE
    return {
        "project": project.name,
        "backend_id": project.backend_id,
        "code_prefix": project.code_prefix,
        "command": _json_string(str(project.directory / ".venv" / "bin" / "ahp-backend")),
        "rules": _json_string(str(project.directory / "policy.toml")),
        "sources": sources,
        "source_note": note,
    }


def _values(project: Project) -> dict[str, str]:
    if project.kind == "policy":
        return _policy_values(project)
    command = str(project.directory / ".venv" / "bin" / project.name)
    if project.protocol is not None:
        path = project.protocol.as_posix()
        sources = (
            "\n[tool.uv.sources]\n"
            "# ahp-protocol is not on a package index yet: this is the source tree the\n"
            "# project was generated from. Delete this table once it is published.\n"
            f'ahp-protocol = {{ path = "{_toml_string(path)}", editable = true }}\n'
        )
        note = _PUBLISHED_NOTE.format(path=_toml_string(path))
    else:
        sources = ""
        note = _INDEX_NOTE
    return {
        "project": project.name,
        "module": project.module,
        "backend_id": project.backend_id,
        "code_prefix": project.code_prefix,
        "command": _json_string(command),
        "sources": sources,
        "source_note": note,
    }


def plan(project: Project) -> dict[str, str]:
    """Every file of the project: relative path -> text."""
    values = _values(project)
    return {
        _target(rel, project): render(resource.read_text("utf-8"), values)
        for rel, resource in _template_files(project.kind)
    }


def write_project(project: Project) -> list[str]:
    """Create the project's files (the folder must be missing or empty); their paths."""
    directory = project.directory
    if directory.exists():
        if not directory.is_dir():
            raise FileExistsError(f"{directory} exists and is not a folder")
        if any(directory.iterdir()):
            raise FileExistsError(f"{directory} is not empty; choose a new or empty folder")
    files = plan(project)
    directory.mkdir(parents=True, exist_ok=True)
    for rel, text in files.items():
        target = directory / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        with target.open("x", encoding="utf-8", newline="\n") as out:  # never overwrite
            out.write(text)
    return sorted(files)


def _check_name(name: str, kind: str = "backend") -> str | None:
    if not _NAME.match(name):
        return (
            f"NAME {name!r}: use lower-case letters, digits and single '-' or '_' between "
            "them, starting with a letter (e.g. my-policy)"
        )
    if kind == "policy":  # no module of its own: only the name's shape matters
        return None
    module = name.replace("-", "_")
    if keyword.iskeyword(module) or module in _RESERVED or module in sys.stdlib_module_names:
        return f"NAME {name!r}: its module {module!r} would clash with an existing module"
    return None


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ahp-backend new",
        description=(
            "Create a ready-to-run AHP backend project: pyproject.toml (depends on "
            "ahp-protocol), src/<module>/backend.py with a commented tool.before example, "
            "a README, a sample registration.json and tests that pass as generated "
            "(run 'uv run pytest' inside it). With --kind policy: a CEL policy project "
            "instead (policy.toml served by 'ahp-backend policy', a policy_tests.toml test "
            "table, registration.json, README, and a test that runs the table)."
        ),
    )
    parser.add_argument("name", metavar="NAME", help="the project name, e.g. my-policy")
    parser.add_argument(
        "--kind",
        choices=KINDS,
        default="backend",
        help="backend: Python handler code (default); policy: CEL rules and a test table, no code",
    )
    parser.add_argument(
        "--dir",
        metavar="DIR",
        help="the project folder, created if missing, must be empty (default: ./NAME)",
    )
    parser.add_argument(
        "--id",
        metavar="ID",
        help="the backend's reverse-DNS id (default: com.example.NAME)",
    )
    parser.add_argument(
        "--protocol",
        metavar="PATH",
        help="the ahp-protocol source folder to depend on (default: the one running this)",
    )
    parser.add_argument(
        "--backends",
        metavar="PATH",
        help="with --kind policy: the ahp-backends source folder to depend on (default: the "
        "one running this)",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(list(sys.argv[1:] if argv is None else argv))
    name: str = args.name
    kind: str = args.kind
    problem = _check_name(name, kind)
    if problem is not None:
        return fail(problem)
    backend_id: str = args.id or f"com.example.{name}"
    if not is_reverse_dns(backend_id):
        return fail(f"--id {backend_id!r}: use a reverse-DNS id such as com.example.{name}")
    protocol: Path | None
    if args.protocol:
        protocol = Path(args.protocol).resolve()
        if not _is_protocol_project(protocol):
            return fail(f"--protocol {args.protocol}: not an ahp-protocol project folder")
    else:
        protocol = find_protocol_source()
    backends: Path | None = None
    if args.backends and kind != "policy":
        return fail("--backends applies to --kind policy only")
    if args.backends:
        backends = Path(args.backends).resolve()
        if not _is_project(backends, "ahp-backends"):
            return fail(f"--backends {args.backends}: not an ahp-backends project folder")
    elif kind == "policy":
        backends = find_backends_source()
    directory = Path(args.dir if args.dir else name).resolve()
    module = name.replace("-", "_")
    project = Project(name, module, backend_id, directory, protocol, kind, backends)
    try:
        files = write_project(project)
    except FileExistsError as exc:
        return fail(str(exc))
    except OSError as exc:
        return fail(f"{directory}: cannot write the project ({exc.strerror or 'I/O error'})")
    print(f"created {name} ({backend_id}) in {directory}:")
    for rel in files:
        print(f"  {rel}")
    if kind == "policy" and (protocol is None or backends is None):
        print(
            "note: no ahp-backends or ahp-protocol source tree found; see the README on where "
            "they come from"
        )
    elif protocol is None:
        print("note: no ahp-protocol source tree found; see the README on where it comes from")
    print("\nnext:")
    print(f"  cd {directory}")
    if kind == "policy":
        print("  uv run pytest    # runs the test table against the policy, served as a process")
        print("  uv run ahp-backend policy test policy_tests.toml    # the table alone")
        print("  uv run ahp-backend policy --rules policy.toml       # serve over stdio")
        return 0
    print("  uv run pytest    # the backend's own tests: it runs as a process")
    print(f"  uv run {name}    # serve over stdio (or --once, --http HOST:PORT)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""``ahp-adapter install|uninstall <dialect>``: our hook entries in a harness's config file.

Owns where each dialect keeps its hooks (project ``--project DIR`` or user
scope, or an explicit ``--config FILE``), the entries we add (one per native
event the dialect has, each running ``ahp-adapter hook <dialect> --registration
FILE --event EVENT --budget S`` with a native timeout well above the budget),
and the merge: existing hooks are kept as they are, in order; our earlier
entries are replaced, never duplicated; ``uninstall`` removes only entries
whose command runs ``ahp-adapter hook`` (or ``python [-P] -m ahp_adapters hook``)
and the groups and event lists that become empty because of it.

Never writes a file it cannot parse (an invalid config is an error, untouched),
never writes partially (a temporary file, then an atomic rename, keeping the
file's mode). ``--print`` shows the resulting file and writes nothing.

Per dialect (docs/native-dialects): Claude Code ``.claude/settings.json``,
Codex ``.codex/hooks.json`` (root keys ``hooks`` and ``description`` only;
Codex asks you to review and trust new hooks in ``/hooks``), Gemini CLI
``.gemini/settings.json`` (timeouts in milliseconds), Cursor
``.cursor/hooks.json`` (``version: 1``; ``failClosed: true`` on the pre-tool
entries when the registration has a fail-closed interceptor, so even a hook
that cannot start blocks). Cursor's double firing is avoided by wiring one
surface per tool family (``--surface pretool``, the default, or ``split``).
Kimi CLI keeps ``[[hooks]]`` tables in ``~/.kimi/config.toml`` (user scope
only): ours go in one block between marker comments, and the result is parsed
as TOML before anything is written. GitHub Copilot CLI loads every
``.github/hooks/*.json`` of the working directory (and ``~/.copilot/hooks/``):
ours is a file of its own, ``ahp-adapter.json`` (``version: 1``, flat entries
``{type: "command", bash, timeoutSec}`` under camelCase event keys), which
``uninstall`` deletes again once none but our entries were in it (and the
``hooks`` folder with it, if that leaves it empty); ``install copilot`` prints
what a deny can and cannot guarantee there (:data:`ahp_adapters.dialects.copilot.DENY_LIMITS`).

A JSON file that existed is written back in its own layout when it is one
``json.dumps`` can reproduce (indent 2, 4, tab or none; ASCII-escaped or not;
final newline or not), so install then uninstall gives back its very bytes;
any other layout comes back as the same document, indented by 2.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import shlex
import shutil
import sys
import tempfile
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from ahp_adapters import dialects
from ahp_adapters.decision import read_policy, registration_path

Surface = Literal["pretool", "split"]
Layout = tuple[int | str | None, tuple[str, str], bool, bool]

EVENTS: dict[str, tuple[str, ...]] = {
    "claude-code": ("PreToolUse", "PostToolUse", "SessionStart", "SessionEnd"),
    "codex": ("PreToolUse", "PostToolUse", "SessionStart"),
    "gemini": ("BeforeTool", "AfterTool", "SessionStart", "SessionEnd"),
    "cursor": ("preToolUse", "postToolUse", "sessionStart", "sessionEnd"),
    "kimi": ("PreToolUse", "PostToolUse", "SessionStart", "SessionEnd"),
    "copilot": ("preToolUse", "postToolUse", "sessionStart", "sessionEnd"),
    # Qwen Code fires SessionStart/SessionEnd only in interactive and ACP sessions, not in
    # headless `qwen -p` runs (live, 0.15.10); wired anyway, as for Claude, so the sessions
    # that have them deliver session.start (with the manifest) and session.end.
    # UserPromptSubmit only prepares the chain (QwenCode.prepare_events): -p has no SessionStart
    "qwen-code": ("PreToolUse", "PostToolUse", "SessionStart", "SessionEnd", "UserPromptSubmit"),
}
"""The native events we wire per dialect. Copilot's keys are camelCase on purpose: that is
Copilot CLI's own payload format (documented first, and the one our fixtures pin), while a
PascalCase key asks for the "VS Code compatible" variant, which VS Code's agent hooks also
read from ``.github/hooks/`` and answer in another form. The codec reads both variants."""
CURSOR_SPLIT_EXTRA = ("beforeShellExecution", "beforeMCPExecution")
TOOL_EVENTS = frozenset(
    {"PreToolUse", "PostToolUse", "BeforeTool", "AfterTool", "preToolUse", "postToolUse"}
)
DIRS = {
    "claude-code": ".claude",
    "codex": ".codex",
    "gemini": ".gemini",
    "cursor": ".cursor",
    "kimi": ".kimi",
    "copilot": ".copilot/hooks",
    "qwen-code": ".qwen",
}
PROJECT_DIRS = {"copilot": ".github/hooks"}
"""Where a project's hooks live when that differs from the user scope's folder."""
FLAT = {"cursor": "command", "copilot": "bash"}
"""Dialects whose event lists hold handlers directly (no matcher groups): the command's key."""
FILES = {
    "claude-code": "settings.json",
    "codex": "hooks.json",
    "gemini": "settings.json",
    "cursor": "hooks.json",
    "kimi": "config.toml",
    "copilot": "ahp-adapter.json",
    "qwen-code": "settings.json",  # timeouts in milliseconds: QwenCode.native_timeout_unit
}
OWN_FILE = {"copilot"}
"""Dialects whose hooks we keep in a file of our own (removed by ``uninstall`` when emptied)."""
Transport = Literal["command", "http"]
DEFAULT_HTTP = "127.0.0.1:8765"
HTTP_TRANSPORT_REFUSED = (
    "--transport http needs every tool.before interceptor of the registration to be "
    "fail-open, and this one's strictest policy is {policy}: Claude Code treats an http hook "
    "it cannot reach, a non-2xx answer and a timeout as non-blocking, so while the server is "
    "down every call would go through. Use the command hook (the default, --transport "
    "command): it applies fail-closed itself, and through its warm daemon it costs little more"
)

KIMI_BEGIN = "# >>> ahp-adapter hooks (managed: `ahp-adapter uninstall kimi` removes this block)"
KIMI_END = "# <<< ahp-adapter hooks"


class InstallError(Exception):
    """A config file or registration this command will not touch (fixed message)."""


@dataclass
class Plan:
    """What ``install`` (or ``uninstall``) would write, and what it should say."""

    path: Path
    document: dict[str, Any]
    added: int = 0
    removed: int = 0
    notes: list[str] = field(default_factory=list)
    raw: str | None = None
    """The whole file as text, for formats kept as text (Kimi's TOML)."""
    layout: Layout = (2, (",", ": "), False, True)
    """How the JSON is written: (indent, separators, ASCII-escaped, final newline)."""
    remove: bool = False
    """Delete the file instead of writing it (our own file, nothing else left in it)."""
    prune: list[Path] = field(default_factory=list)
    """Folders to remove after deleting the file, if that leaves them empty (innermost first)."""
    secret_file: str | None = None
    """Claude Code http hooks: the per-install secret's file, created (or kept) by :func:`write`."""
    also: list[Plan] = field(default_factory=list)
    """Other files written with this one: our entries taken out of a Claude Code project's
    other settings file (the command hooks live in ``settings.json``, the http hooks, which
    hold a secret, in ``settings.local.json``), so one install never runs both."""

    @property
    def removed_total(self) -> int:
        return self.removed + sum(other.removed for other in self.also)

    def text(self) -> str:
        if self.raw is not None:
            return self.raw
        if self.remove:
            return ""
        indent, separators, ascii_only, newline = self.layout
        body = json.dumps(
            self.document, indent=indent, ensure_ascii=ascii_only, separators=separators
        )
        return body + ("\n" if newline else "")


def config_path(dialect: str, project: str | None) -> Path:
    if project is not None and dialect == "kimi":
        raise InstallError("Kimi CLI has no project hooks; use the user scope or --config FILE")
    if project is not None:
        folder = PROJECT_DIRS.get(dialect, DIRS[dialect])
        return Path(project).resolve() / folder / FILES[dialect]
    if dialect == "codex" and os.environ.get("CODEX_HOME"):
        return Path(os.environ["CODEX_HOME"]) / FILES[dialect]
    if dialect == "copilot" and os.environ.get("COPILOT_HOME"):
        return Path(os.environ["COPILOT_HOME"]) / "hooks" / FILES[dialect]
    return Path.home() / DIRS[dialect] / FILES[dialect]


def default_command() -> list[str]:
    """How the harness should start the adapter: the installed entry point, by absolute path.

    Else this Python with ``-P -m ahp_adapters``: the harness runs the command in the
    agent's project, and plain ``-m`` would import a planted ``ahp_adapters/`` from it
    (the entry point is safe: its ``sys.path[0]`` is its own bin folder). ``-P``, not
    ``-I``, so the hook finds the package wherever this Python found it (user site,
    ``PYTHONPATH``): the same environment as the entry point would have.
    """
    found = shutil.which("ahp-adapter")
    if found:
        return [os.path.abspath(found)]
    return [sys.executable, "-P", "-m", "ahp_adapters"]


def is_ours(command: object) -> bool:
    """True for a command that runs ``ahp-adapter hook`` (any path, or ``-m ahp_adapters``)."""
    if not isinstance(command, str):
        return False
    try:
        argv = shlex.split(command)
    except ValueError:
        return False
    if "hook" not in argv:
        return False
    runs_us = any(os.path.basename(a) == "ahp-adapter" for a in argv[: argv.index("hook")])
    as_module = any(argv[i] == "-m" and argv[i + 1] == "ahp_adapters" for i in range(len(argv) - 1))
    return runs_us or as_module


def is_our_handler(handler: object) -> bool:
    """A Claude-style handler we wrote: a command running the hook, or our http hook."""
    if not isinstance(handler, dict):
        return False
    if handler.get("type") == "http":
        from ahp_adapters.http_hook import SECRET_HEADER

        headers = handler.get("headers")
        return isinstance(headers, dict) and SECRET_HEADER in headers
    return is_ours(handler.get("command"))


def native_timeout(dialect: str, budget: float) -> int:
    """The native timeout to write: at least 30 s and twice the budget plus 5 s."""
    seconds = max(30, math.ceil(budget) * 2 + 5)
    return seconds * 1000 if dialects.get(dialect).native_timeout_unit == "ms" else seconds


def _load(path: Path) -> dict[str, Any]:
    return _load_with_layout(path)[0]


LAYOUTS: tuple[Layout, ...] = tuple(
    (indent, separators, ascii_only, newline)
    for indent, separators in (
        (2, (",", ": ")),
        (4, (",", ": ")),
        ("\t", (",", ": ")),
        (None, (", ", ": ")),
        (None, (",", ":")),
    )
    for ascii_only in (False, True)
    for newline in (True, False)
)
"""The layouts ``json.dumps`` can reproduce, tried in turn on a file that exists."""


def _load_with_layout(path: Path) -> tuple[dict[str, Any], Layout]:
    """The document in ``path`` ({} if absent or blank) and the layout to write it back in."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return {}, Plan.layout
    except OSError as exc:
        raise InstallError(f"{path}: cannot be read ({type(exc).__name__})") from None
    if not raw.strip():
        return {}, Plan.layout
    try:
        text = raw.decode("utf-8")
        doc = json.loads(text.removeprefix("\ufeff"))
    except (UnicodeDecodeError, ValueError):
        raise InstallError(f"{path}: not valid JSON; fix it first (left untouched)") from None
    if not isinstance(doc, dict):
        raise InstallError(f"{path}: not a JSON object (left untouched)")
    for layout in LAYOUTS:
        if Plan(path, doc, layout=layout).text() == text:
            return doc, layout
    return doc, Plan.layout


def _hooks_table(doc: dict[str, Any], path: Path) -> dict[str, Any]:
    hooks = doc.setdefault("hooks", {})
    if not isinstance(hooks, dict):
        raise InstallError(f"{path}: 'hooks' is not an object (left untouched)")
    return hooks


def remove_ours(dialect: str, doc: dict[str, Any], path: Path) -> int:
    """Remove our entries from ``doc`` in place; the number removed."""
    hooks = doc.get("hooks")
    if not isinstance(hooks, dict):
        return 0
    removed = 0
    for event in list(hooks):
        entries = hooks[event]
        if not isinstance(entries, list):
            continue
        kept: list[Any] = []
        touched = False
        for entry in entries:
            if dialect in FLAT:
                if isinstance(entry, dict) and is_ours(entry.get(FLAT[dialect])):
                    removed += 1
                    touched = True
                    continue
                kept.append(entry)
                continue
            handlers = entry.get("hooks") if isinstance(entry, dict) else None
            if not isinstance(handlers, list):
                kept.append(entry)
                continue
            rest = [h for h in handlers if not is_our_handler(h)]
            if len(rest) != len(handlers):
                removed += len(handlers) - len(rest)
                touched = True
                if not rest:
                    continue
                entry = {**entry, "hooks": rest}
            kept.append(entry)
        if touched and not kept:
            del hooks[event]
        elif touched:
            hooks[event] = kept
    return removed


def _entry(
    dialect: str, event: str, command: str, timeout: int, fail_closed: bool
) -> dict[str, Any]:
    if dialect == "cursor":
        entry: dict[str, Any] = {"command": command, "timeout": timeout}
        if fail_closed and event in dialects.get("cursor").pre_tool_events:
            entry["failClosed"] = True
        return entry
    if dialect == "copilot":  # Unix only, like the adapter: no "powershell" command
        return {"type": "command", "bash": command, "timeoutSec": timeout}
    handler: dict[str, Any] = {"type": "command", "command": command, "timeout": timeout}
    if dialect == "gemini":
        handler["name"] = f"ahp-adapter-{event}"
    group: dict[str, Any] = {}
    if event in TOOL_EVENTS:
        group["matcher"] = "*"
    group["hooks"] = [handler]
    return group


def plan_install(
    dialect: str,
    registration: str,
    *,
    project: str | None = None,
    config: str | None = None,
    budget: float = 10.0,
    surface: Surface = "pretool",
    command: Sequence[str] | None = None,
    pre_tool_only: bool = False,
    transport: Transport = "command",
    http: str = DEFAULT_HTTP,
) -> Plan:
    """The config file with our entries merged in (nothing written)."""
    dialect = dialects.canonical_name(dialect)
    registration = registration_path(registration)
    path = Path(config).resolve() if config else config_path(dialect, project)
    if transport == "http":
        return _plan_http(dialect, path, registration, project, config, budget, pre_tool_only, http)
    if dialect == "kimi":
        return _plan_kimi(path, registration, budget, command, pre_tool_only)
    doc, layout = _load_with_layout(path)
    removed = remove_ours(dialect, doc, path)
    hooks = _hooks_table(doc, path)
    if dialect in ("cursor", "copilot"):
        doc.setdefault("version", 1)
    events = list(EVENTS[dialect])
    if dialect == "cursor" and surface == "split":
        events[1:1] = CURSOR_SPLIT_EXTRA
    codec = dialects.get(dialect)
    if pre_tool_only:
        events = [e for e in events if codec.is_pre_tool(e)]
    prefix = list(command) if command else default_command()
    timeout = native_timeout(dialect, budget)
    fail_closed = read_policy(registration) == "fail-closed"
    plan = Plan(path, doc, removed=removed, layout=layout)
    plan.also = _sibling(dialect, path, project, config)
    for event in events:
        argv = [
            *prefix,
            "hook",
            dialect,
            "--registration",
            registration,
            "--event",
            event,
            "--budget",
            f"{budget:g}",
        ]
        if dialect == "cursor" and surface == "split" and event == "preToolUse":
            argv.append("--skip-shell-mcp")
        entries = hooks.setdefault(event, [])
        if not isinstance(entries, list):
            raise InstallError(f"{path}: hooks.{event} is not a list (left untouched)")
        entries.append(_entry(dialect, event, shlex.join(argv), timeout, fail_closed))
        plan.added += 1
    if dialect == "codex":
        unknown = [k for k in doc if k not in ("hooks", "description")]
        if unknown:
            plan.notes.append(
                f"Codex rejects a hooks.json with other root keys: {', '.join(sorted(unknown))}"
            )
    if dialect == "cursor" and fail_closed:
        plan.notes.append("pre-tool entries set failClosed: a hook that cannot start blocks")
    if dialect == "gemini":
        plan.notes.append("Gemini fingerprints project hooks: a changed command is re-reviewed")
    if dialect == "copilot":
        from ahp_adapters.dialects.copilot import DENY_LIMITS

        plan.notes.extend(DENY_LIMITS)
        if project is not None:
            plan.notes.append(
                f"{path.name} holds this machine's paths: keep it out of the repository (the "
                "Copilot coding agent reads .github/hooks from the default branch, where it "
                "would fail, and a failing hook is skipped)"
            )
    return plan


def _plan_http(
    dialect: str,
    path: Path,
    registration: str,
    project: str | None,
    config: str | None,
    budget: float,
    pre_tool_only: bool,
    http: str,
) -> Plan:
    """Claude Code ``http`` hooks posting to ``ahp-adapter serve`` (:mod:`~ahp_adapters.http_hook`).

    Refused unless every ``tool.before`` interceptor is fail-open: an http hook that cannot
    reach the server lets the call through, so it cannot keep a fail-closed promise. The
    per-install secret goes into the settings file's ``headers``; in project scope that file
    is ``.claude/settings.local.json`` (git-ignored by Claude Code), never the committable one.
    """
    from ahp_adapters import http_hook

    if dialect not in http_hook.DIALECTS:
        raise InstallError(f"--transport http: {dialect} has no http hooks (only claude-code)")
    policy = read_policy(registration)
    if policy == "fail-closed":
        raise InstallError(HTTP_TRANSPORT_REFUSED.format(policy=policy))
    try:
        host, port = http_hook.loopback_address(http)
    except http_hook.ServeError as exc:
        raise InstallError(str(exc)) from None
    if port == 0:
        raise InstallError("--http: give a fixed port (the settings file names it)")
    if config is None and project is not None:
        path = path.with_name(LOCAL_SETTINGS)
    secret_file = http_hook.secret_path(port)
    doc, layout = _load_with_layout(path)
    removed = remove_ours(dialect, doc, path)
    hooks = _hooks_table(doc, path)
    codec = dialects.get(dialect)
    events = [e for e in EVENTS[dialect] if codec.is_pre_tool(e) or not pre_tool_only]
    shown = f"[{host}]" if ":" in host else host
    plan = Plan(path, doc, removed=removed, layout=layout)
    plan.secret_file = secret_file
    plan.also = _sibling(dialect, path, project, config)
    for event in events:
        handler: dict[str, Any]
        if event in HTTP_UNSUPPORTED:
            argv = [*default_command(), "hook", dialect, "--registration", registration]
            argv += ["--event", event, "--budget", f"{budget:g}"]
            handler = {
                "type": "command",
                "command": shlex.join(argv),
                "timeout": native_timeout(dialect, budget),
            }
        else:
            handler = {
                "type": "http",
                "url": f"http://{shown}:{port}/{dialect}/{event}",
                "headers": {http_hook.SECRET_HEADER: SECRET_PLACEHOLDER},
                "timeout": native_timeout(dialect, budget),
            }
        group: dict[str, Any] = {"matcher": "*"} if event in TOOL_EVENTS else {}
        group["hooks"] = [handler]
        entries = hooks.setdefault(event, [])
        if not isinstance(entries, list):
            raise InstallError(f"{path}: hooks.{event} is not a list (left untouched)")
        entries.append(group)
        plan.added += 1
    serve = shlex.join(
        [*default_command(), "serve", dialect, "--registration", registration, "--http", http]
    )
    plan.notes += [
        f"start the server that answers these hooks, and keep it running: {serve}",
        "while it is not running (or answers late), Claude Code lets every tool call through: "
        "http hooks are non-blocking on failure, which is why this needs fail-open interceptors",
        f"the secret header's value is in {path.name} and {secret_file} (0600): keep both private",
    ]
    return plan


SECRET_PLACEHOLDER = "<written at install>"
HTTP_UNSUPPORTED = frozenset({"SessionStart"})
"""Claude Code events that take no http hook ("HTTP hooks are not supported for
SessionStart", Claude Code 2.1, seen live): the http install gives them a command hook,
so backends still get ``session.start``."""


def _kimi_text(path: Path) -> str:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return ""
    except (OSError, UnicodeDecodeError) as exc:
        raise InstallError(f"{path}: cannot be read ({type(exc).__name__})") from None
    try:
        tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        raise InstallError(f"{path}: not valid TOML; fix it first (left untouched)") from None
    return text


def _kimi_strip(text: str) -> tuple[str, int]:
    """``text`` without our marked block(s); the number of hook tables removed."""
    out: list[str] = []
    removed = 0
    inside = False
    for line in text.splitlines(keepends=True):
        if line.rstrip("\n") == KIMI_BEGIN:
            inside = True
            continue
        if inside:
            if line.rstrip("\n") == KIMI_END:
                inside = False
            elif line.strip() == "[[hooks]]":
                removed += 1
            continue
        out.append(line)
    return "".join(out).rstrip("\n") + ("\n" if out else ""), removed


def _toml_string(value: str) -> str:
    return json.dumps(value, ensure_ascii=False)  # a JSON string is a valid TOML basic string


def _plan_kimi(
    path: Path,
    registration: str,
    budget: float,
    command: Sequence[str] | None,
    pre_tool_only: bool,
) -> Plan:
    """Kimi keeps hooks as ``[[hooks]]`` tables in TOML: ours go in one marked block."""
    text, removed = _kimi_strip(_kimi_text(path))
    prefix = list(command) if command else default_command()
    codec = dialects.get("kimi")
    events = [e for e in EVENTS["kimi"] if codec.is_pre_tool(e) or not pre_tool_only]
    timeout = min(native_timeout("kimi", budget), 600)  # Kimi accepts 1-600 s
    lines = [KIMI_BEGIN]
    for event in events:
        argv = [
            *prefix,
            "hook",
            "kimi",
            "--registration",
            registration,
            "--event",
            event,
            "--budget",
            f"{budget:g}",
        ]
        lines += [
            "[[hooks]]",
            f"event = {_toml_string(event)}",
            'matcher = ""',
            f"command = {_toml_string(shlex.join(argv))}",
            f"timeout = {timeout}",
        ]
    lines.append(KIMI_END)
    raw = (text + "\n" if text else "") + "\n".join(lines) + "\n"
    tomllib.loads(raw)  # never write what Kimi could not read
    plan = Plan(path, {}, added=len(events), removed=removed, raw=raw)
    plan.notes.append("Kimi fails open by design: a hook that cannot start lets the call through")
    return plan


def _sibling(dialect: str, path: Path, project: str | None, config: str | None) -> list[Plan]:
    """Our entries taken out of a Claude Code project's other settings file, if it has any."""
    if dialect != "claude-code" or project is None or config is not None:
        return []
    other = path.with_name("settings.json" if path.name == LOCAL_SETTINGS else LOCAL_SETTINGS)
    if not other.exists():
        return []
    doc, layout = _load_with_layout(other)
    removed = remove_ours(dialect, doc, other)
    return [Plan(other, doc, removed=removed, layout=layout)] if removed else []


LOCAL_SETTINGS = "settings.local.json"


def plan_uninstall(dialect: str, *, project: str | None = None, config: str | None = None) -> Plan:
    dialect = dialects.canonical_name(dialect)
    path = Path(config).resolve() if config else config_path(dialect, project)
    if dialect == "kimi":
        text, removed = _kimi_strip(_kimi_text(path))
        return Plan(path, {}, removed=removed, raw=text)
    doc, layout = _load_with_layout(path)
    plan = Plan(path, doc, removed=remove_ours(dialect, doc, path), layout=layout)
    plan.also = _sibling(dialect, path, project, config)
    # Our own file with only ours in it: gone again, as if never installed, and with it
    # the folders install may have made (hooks/, and a project's .github/) if left empty.
    only_ours = doc == {"version": 1, "hooks": {}}
    if dialect in OWN_FILE and plan.removed and path.name == FILES[dialect] and only_ours:
        plan.remove = True
        if not config:
            plan.prune = [path.parent, *([path.parent.parent] if project else [])]
    return plan


def write(plan: Plan) -> None:
    """Write the plan's document atomically (same directory, then rename), keeping the mode;
    or delete the file (and the plan's emptied folders) when the plan says ``remove``."""
    for other in plan.also:
        write(other)
    path = plan.path
    if plan.remove:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        for folder in plan.prune:
            with contextlib.suppress(OSError):
                folder.rmdir()  # only if empty
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        mode: int | None = path.stat().st_mode & 0o7777
    except FileNotFoundError:
        mode = None
    if plan.secret_file is not None:
        _fill_secret(plan)
        if mode is not None:
            mode &= ~0o077  # it holds the secret now: this user's only
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(plan.text())
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _fill_secret(plan: Plan) -> None:
    """Put the install's secret (kept from an earlier install, else new) in our http hooks."""
    from ahp_adapters import http_hook

    assert plan.secret_file is not None
    secret = http_hook.load_or_create_secret(plan.secret_file)
    for entries in plan.document.get("hooks", {}).values():
        for group in entries if isinstance(entries, list) else []:
            for handler in group.get("hooks", []) if isinstance(group, dict) else []:
                headers = handler.get("headers") if isinstance(handler, dict) else None
                if isinstance(headers, dict) and headers.get(http_hook.SECRET_HEADER) == (
                    SECRET_PLACEHOLDER
                ):
                    headers[http_hook.SECRET_HEADER] = secret


def check_registration(path: str, budget: float) -> list[str]:
    """Load and check the registration as the hook will; warnings (raises on errors)."""
    from ahp_adapters.engine import Engine, EngineError

    try:
        engine = Engine(registration_path(path))
        engine.dispatcher({"effects": ["deny"]})
    except EngineError as exc:
        raise InstallError(f"registration {path}: {exc}") from None
    warnings = []
    total = 0
    for hook in engine.registration.hooks:
        for _, sub in hook.matching("tool.before", "intercept"):
            total += int(getattr(sub, "timeout_ms", 0) or 0)
    if total > budget * 1000:
        warnings.append(
            f"the tool.before interceptors' timeouts add up to {total} ms, more than the "
            f"--budget of {budget:g} s: a slow chain will be cut by the budget (failure policy)"
        )
    return warnings

"""``ahp-adapter doctor <harness>``: would a deny hold, seen from the harness's side?

Checks what the harness will find and run, in order, one line each (``ok`` or
``FAIL``, and on a failure what to do about it):

1. **hooks present**: the dialect's hook file (the one ``install`` writes: ``--project
   DIR``, ``--config FILE`` or the user scope) exists, parses and holds our pre-tool
   entry, an ``ahp-adapter hook`` command; it names the registration.
2. **registration**: that file exists and loads as the hook will load it.
3. **hooks trusted**: Codex's own ``hooks/list`` (through ``codex app-server``) lists our
   entries as trusted; Copilot trusts the project folder (``--project``); for the other
   harnesses, what is not checked is said.
4. **commands resolve**: the hook command's executable, and every stdio backend's
   ``transport.command`` (placed as the adapter places it: relative paths in the
   registration's folder, a bare name on the ``PATH`` the harness gives its hooks, the
   current ``PATH`` unless ``--hook-path``), exist and are executable.
5. **probe**: the installed command run as the harness runs it (``/bin/sh -c`` in the
   project or current folder, that ``PATH``), fed a native pre-tool payload for a
   harmless shell call (:data:`PROBES`). A no-effect answer or a policy's own answer is
   fine; the synthetic denial of a fail-closed failure ("Required policy backend ID
   unavailable (CLASS)."), a failed chain, a crash or a timeout is not: the adapter's
   stderr is shown.

Exit 0 only when every check is ok, 1 otherwise, 2 on usage errors. ``--json`` prints
the same as one JSON object. Writes nothing of its own; the probe may start the
registration's warm daemon, which is left running (see :func:`_probe`).
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import subprocess
import time
import tomllib
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ahp_adapters import dialects, install
from ahp_adapters.decision import GENERIC_DENIAL_REASON, registration_path

if TYPE_CHECKING:
    import argparse

PROBE_COMMAND = "true"
"""The shell command the probe asks about: harmless under any policy."""
PROBE_SESSION = "ahp-adapter-doctor"
PROBE_TIMEOUT_S = 30.0
"""The probe's time limit when the entry names no native timeout."""
STDERR_SHOWN = 4000
"""At most this many characters of the adapter's stderr (and daemon log) are shown."""
LOG_LINES = 8
"""The last lines of the daemon's log shown with a failed probe."""

# A native pre-tool payload per dialect and event, for one harmless shell call, in the
# shapes of tests/fixtures/<dialect>/pre_tool_use.shell.json; "{cwd}" is filled in.
PROBES: dict[str, dict[str, dict[str, Any]]] = {
    "claude-code": {
        "PreToolUse": {
            "session_id": PROBE_SESSION,
            "transcript_path": "",
            "cwd": "{cwd}",
            "permission_mode": "default",
            "hook_event_name": "PreToolUse",
            "tool_name": "Bash",
            "tool_input": {"command": PROBE_COMMAND, "description": "ahp-adapter doctor probe"},
            "tool_use_id": "toolu_ahp_adapter_doctor",
        }
    },
    "qwen-code": {
        "PreToolUse": {
            "session_id": PROBE_SESSION,
            "transcript_path": "",
            "cwd": "{cwd}",
            "hook_event_name": "PreToolUse",
            "permission_mode": "default",
            "tool_name": "run_shell_command",
            "tool_input": {"command": PROBE_COMMAND},
            "tool_use_id": "toolu_ahp_adapter_doctor",
        }
    },
    "codex": {
        "PreToolUse": {
            "session_id": PROBE_SESSION,
            "turn_id": "1",
            "transcript_path": None,
            "cwd": "{cwd}",
            "model": "unknown",
            "permission_mode": "default",
            "hook_event_name": "PreToolUse",
            "tool_name": "Bash",
            "tool_input": {"command": PROBE_COMMAND},
            "tool_use_id": "call_ahp_adapter_doctor",
        }
    },
    "gemini": {
        "BeforeTool": {
            "session_id": PROBE_SESSION,
            "transcript_path": "",
            "cwd": "{cwd}",
            "hook_event_name": "BeforeTool",
            "timestamp": "2026-01-01T00:00:00.000Z",
            "tool_name": "run_shell_command",
            "tool_input": {"command": PROBE_COMMAND, "description": "ahp-adapter doctor probe"},
        }
    },
    "cursor": {
        "preToolUse": {
            "conversation_id": PROBE_SESSION,
            "generation_id": "ahp-adapter-doctor-1",
            "model": "unknown",
            "workspace_roots": ["{cwd}"],
            "transcript_path": None,
            "hook_event_name": "preToolUse",
            "tool_name": "Shell",
            "tool_input": {"command": PROBE_COMMAND, "working_directory": "{cwd}"},
            "tool_use_id": "toolu_ahp_adapter_doctor",
            "cwd": "{cwd}",
        },
        "beforeShellExecution": {  # --surface split: preToolUse skips shell calls
            "conversation_id": PROBE_SESSION,
            "generation_id": "ahp-adapter-doctor-1",
            "model": "unknown",
            "workspace_roots": ["{cwd}"],
            "transcript_path": None,
            "hook_event_name": "beforeShellExecution",
            "command": PROBE_COMMAND,
            "cwd": "{cwd}",
            "sandbox": False,
        },
    },
    "kimi": {
        "PreToolUse": {
            "session_id": PROBE_SESSION,
            "cwd": "{cwd}",
            "hook_event_name": "PreToolUse",
            "tool_name": "Shell",
            "tool_input": {"command": PROBE_COMMAND},
            "tool_call_id": "call_ahp_adapter_doctor",
        }
    },
    "copilot": {
        "preToolUse": {
            "sessionId": PROBE_SESSION,
            "timestamp": 1767225600000,
            "cwd": "{cwd}",
            "toolName": "bash",
            "toolArgs": json.dumps({"command": PROBE_COMMAND}),
        }
    },
}

NOT_CHECKED = {
    "claude-code": "Claude Code has no hook trust step; not checked: managed settings "
    "(allowManagedHooksOnly) or another settings file with disableAllHooks",
    "gemini": "not checked: Gemini's folder trust and its review of project hooks (it "
    "fingerprints them: a changed command is reviewed again); see /hooks in Gemini",
    "cursor": "Cursor has no hook trust step the adapter knows of; not checked: that Cursor "
    "has loaded this file (its hooks view lists what it loaded)",
    "qwen-code": "not checked: Qwen Code reads a project's hooks only in a folder it "
    "trusts, and none in --bare mode",
    "kimi": "Kimi has no hook trust step; note it fails open by design: a hook that cannot "
    "start, crashes or times out lets the call through",
}


@dataclass
class Check:
    """One line of the report."""

    check: str
    ok: bool
    what: str
    fix: str = ""
    notes: list[str] = field(default_factory=list)
    output: str = ""
    """What the hook (or its daemon) wrote, shown with a failed probe."""


@dataclass
class Entry:
    """One of our pre-tool entries, as the hook file holds it."""

    event: str
    command: str
    timeout_s: float | None
    argv: list[str]

    def option(self, name: str) -> str | None:
        """The value of ``--name`` after ``hook`` in the command (``--name=V`` too)."""
        for i, arg in enumerate(self.argv):
            if arg == name and i + 1 < len(self.argv):
                return self.argv[i + 1]
            if arg.startswith(name + "="):
                return arg.split("=", 1)[1]
        return None

    @property
    def dialect(self) -> str | None:
        """The dialect the command runs the hook for (``hook <dialect>``), canonical."""
        i = self.argv.index("hook") if "hook" in self.argv else -1
        name = self.argv[i + 1] if 0 <= i < len(self.argv) - 1 else None
        try:
            return dialects.canonical_name(name) if name else None
        except dialects.UnknownDialect:
            return name

    def registration(self, cwd: Path) -> str:
        """The registration the hook reads (a relative one from the folder it runs in)."""
        return registration_path(os.path.join(cwd, self.option("--registration") or ""))


@dataclass
class Target:
    """What the checks look at: the hook file, where and with what ``PATH`` it runs."""

    dialect: str
    path: Path
    cwd: Path
    hook_path: str
    project: Path | None
    config: str | None
    harness_bin: str | None


class DoctorError(Exception):
    """A usage error (exit 2)."""


# --- 1. hooks present ---------------------------------------------------------------------


def _timeout_s(dialect: str, value: object) -> float | None:
    if not isinstance(value, int | float) or isinstance(value, bool) or value <= 0:
        return None
    return value / 1000 if dialects.get(dialect).native_timeout_unit == "ms" else float(value)


def _entry(dialect: str, event: str, command: object, timeout: object) -> Entry | None:
    if not install.is_ours(command):
        return None
    assert isinstance(command, str)  # is_ours holds only for a string
    return Entry(event, command, _timeout_s(dialect, timeout), shlex.split(command))


def find_entries(dialect: str, path: Path) -> tuple[list[Entry], dict[str, Any]]:
    """Our pre-tool entries in ``path`` and the parsed document (raises InstallError)."""
    codec = dialects.get(dialect)
    found: list[Entry] = []
    if dialect == "kimi":
        doc = tomllib.loads(install._kimi_text(path))
        for table in doc.get("hooks", []) if isinstance(doc.get("hooks"), list) else []:
            if isinstance(table, dict) and codec.is_pre_tool(table.get("event")):
                entry = _entry(
                    dialect, str(table["event"]), table.get("command"), table.get("timeout")
                )
                found += [entry] if entry else []
        return found, doc
    doc = install._load(path)
    hooks = doc.get("hooks")
    if not isinstance(hooks, dict):
        return [], doc
    for event, entries in hooks.items():
        if not codec.is_pre_tool(event) or not isinstance(entries, list):
            continue
        for item in entries:
            if not isinstance(item, dict):
                continue
            if dialect in install.FLAT:
                key = install.FLAT[dialect]
                timeout = item.get("timeoutSec" if dialect == "copilot" else "timeout")
                entry = _entry(dialect, event, item.get(key), timeout)
                found += [entry] if entry else []
                continue
            for handler in item.get("hooks", []) if isinstance(item.get("hooks"), list) else []:
                if isinstance(handler, dict) and handler.get("type", "command") == "command":
                    entry = _entry(dialect, event, handler.get("command"), handler.get("timeout"))
                    found += [entry] if entry else []
    return found, doc


def _install_hint(target: Target) -> str:
    scope = f" --project {shlex.quote(str(target.project))}" if target.project else ""
    if target.config:
        scope += f" --config {shlex.quote(target.config)}"
    return f"ahp-adapter install {target.dialect} --registration FILE{scope}"


def check_present(target: Target) -> tuple[Check, Entry | None]:
    name = "hooks present"
    path = target.path
    if not path.exists():
        return Check(
            name, False, f"no hook file {path}", fix=f"install the hooks: {_install_hint(target)}"
        ), None
    try:
        entries, doc = find_entries(target.dialect, path)
    except (install.InstallError, tomllib.TOMLDecodeError) as exc:
        return Check(name, False, str(exc), fix="fix the file (or remove it), then install"), None
    pre = sorted(dialects.get(target.dialect).pre_tool_events & set(install.EVENTS[target.dialect]))
    if not entries:
        fix = f"install the hooks: {_install_hint(target)}"
        if target.dialect == "claude-code" and path.with_name(install.LOCAL_SETTINGS).exists():
            fix += (
                f" (doctor checks command hooks; http hooks in {install.LOCAL_SETTINGS} "
                "answer only while `ahp-adapter serve` runs)"
            )
        return Check(
            name, False, f"{path} has no ahp-adapter hook entry for {'/'.join(pre)}", fix=fix
        ), None
    wrong = [e for e in entries if e.dialect and e.dialect != target.dialect]
    usable = [e for e in entries if e.dialect == target.dialect and e.option("--registration")]
    if not usable:
        spoken = ", ".join(sorted({str(e.dialect) for e in wrong})) or "no dialect"
        return Check(
            name,
            False,
            f"{path}: our entry speaks {spoken}, not {target.dialect}",
            fix=f"re-install: {_install_hint(target)}",
        ), None
    entry = _probe_entry(target.dialect, usable)
    registration = entry.option("--registration")
    check = Check(
        name, True, f"{path} runs ahp-adapter on {entry.event} (registration {registration})"
    )
    if target.dialect == "claude-code" and doc.get("disableAllHooks") is True:
        check.ok = False
        check.what = f"{path} sets disableAllHooks: Claude Code runs no hook at all"
        check.fix = f'remove "disableAllHooks": true from {path}'
    if len({e.option("--registration") for e in usable}) > 1:
        check.notes.append("the pre-tool entries name different registrations; checking the first")
    return check, entry


def _probe_entry(dialect: str, entries: list[Entry]) -> Entry:
    """The entry a shell call reaches: one whose event has a probe payload and that does
    not skip shell calls (Cursor's split surface), else the first."""
    for event in PROBES[dialect]:
        for entry in entries:
            if entry.event == event and "--skip-shell-mcp" not in entry.argv:
                return entry
    return entries[0]


# --- 2. registration ----------------------------------------------------------------------


def check_registration(target: Target, entry: Entry) -> Check:
    name = "registration"
    registration = entry.registration(target.cwd)
    if not os.path.isfile(registration):
        return Check(
            name,
            False,
            f"{registration} (named by the hook) does not exist",
            fix="restore that file, or re-install with --registration FILE",
        )
    budget = _budget(entry)
    try:
        warnings = install.check_registration(registration, budget)
    except install.InstallError as exc:
        return Check(name, False, str(exc), fix="fix the registration (the hook cannot run it)")
    return Check(name, True, f"{registration} loads", notes=warnings)


def _budget(entry: Entry) -> float:
    try:
        return float(entry.option("--budget") or 10.0)
    except ValueError:
        return 10.0


# --- 3. hooks trusted ---------------------------------------------------------------------


def check_trusted(target: Target) -> Check:
    name = "hooks trusted"
    if target.dialect == "codex":
        return _codex_trusted(target)
    if target.dialect == "copilot":
        from ahp_adapters import trust

        if target.project is None:
            return Check(name, True, "Copilot loads user-scope hooks without folder trust")
        try:
            trusted = trust.copilot_trusts(target.project)
        except trust.TrustError as exc:
            return Check(name, False, str(exc), fix="fix Copilot's config.json")
        if trusted:
            return Check(name, True, f"Copilot trusts {target.project}")
        return Check(
            name,
            False,
            f"Copilot skips .github/hooks of {target.project}: it is not in trustedFolders "
            f"of {trust.copilot_config_path()}",
            fix="trust the folder in Copilot (or `ahp-adapter install copilot --project DIR "
            "--trust`), or install in user scope",
        )
    return Check(name, True, "nothing to check", notes=[NOT_CHECKED[target.dialect]])


def _codex_trusted(target: Target) -> Check:
    from ahp_adapters import trust

    name = "hooks trusted"
    codex = target.harness_bin or shutil.which("codex")
    if not codex:
        return Check(
            name,
            False,
            "codex is not on PATH: cannot ask Codex which hooks it trusts",
            fix="pass --harness-bin PATH (the codex binary)",
        )
    try:
        status = trust.codex_hook_status(target.path, target.cwd, codex)
    except trust.TrustError as exc:
        return Check(name, False, str(exc), fix="check --harness-bin (a working codex binary)")
    if not status:
        if target.project is not None:
            return Check(
                name,
                False,
                f"Codex does not list the hooks of {target.path}: it reads a project's "
                ".codex/ only when the project is trusted",
                fix=f"trust {target.project} in Codex (run codex there and accept), or "
                "re-install with --trust, or install in user scope",
            )
        return Check(
            name,
            False,
            f"Codex does not list our hooks of {target.path}",
            fix="Codex reads $CODEX_HOME/hooks.json (user scope) and a trusted project's "
            ".codex/hooks.json: install there",
        )
    untrusted = {key: value for key, value in status.items() if value != "trusted"}
    if not any(":pre_tool_use:" in key for key in status):
        return Check(
            name,
            False,
            "Codex lists no PreToolUse entry of ours",
            fix=f"re-install: {_install_hint(target)}",
        )
    if untrusted:
        shown = ", ".join(f"{key} ({value})" for key, value in sorted(untrusted.items()))
        return Check(
            name,
            False,
            f"Codex skips these hooks: {shown}",
            fix=f"re-install to trust them through codex app-server ({_install_hint(target)}"
            f"{' --harness-bin ' + shlex.quote(codex) if target.harness_bin else ''}), or "
            "trust them in Codex's /hooks",
        )
    return Check(name, True, f"Codex lists {len(status)} entries of ours, all trusted")


# --- 4. commands resolve ------------------------------------------------------------------


def _executable(command: str, search_path: str, cwd: Path) -> str | None:
    """Where ``command`` is found as an executable file, as exec would find it."""
    from ahp_protocol.client.transports.stdio import is_path_command

    if is_path_command(command):
        full = command if os.path.isabs(command) else str(cwd / command)
        return full if os.path.isfile(full) and os.access(full, os.X_OK) else None
    return shutil.which(command, path=search_path)


def check_commands(target: Target, entry: Entry, registration_ok: bool) -> Check:
    from ahp_protocol.client.transports.stdio import child_environment, is_path_command
    from ahp_protocol.wire.registration import StdioTransportConfig

    from ahp_adapters.engine import EngineError, load

    name = "commands resolve"
    problems: list[str] = []
    fixes: list[str] = []
    found: list[str] = []
    adapter = entry.argv[0]
    where = _executable(adapter, target.hook_path, target.cwd)
    if where is None:
        problems.append(f"the hook command {adapter!r} is not an executable on the hook PATH")
        fixes.append(f"re-install (it writes the adapter's absolute path): {_install_hint(target)}")
    else:
        found.append(where)
    if registration_ok:
        registration = entry.registration(target.cwd)
        try:
            loaded = load(registration)  # the adapter's own placing of stdio commands
        except EngineError as exc:
            return Check(name, False, str(exc), fix="fix the registration")
        hook_env = {**os.environ, "PATH": target.hook_path}
        for hook in loaded.hooks:
            spec = hook.transport
            if not isinstance(spec, StdioTransportConfig):
                continue
            child_path = child_environment(hook_env, spec.env).get("PATH", "")
            where = _executable(spec.command, child_path, Path(spec.cwd or "."))
            if where is not None:
                found.append(where)
                continue
            if is_path_command(spec.command):
                problems.append(f"backend {hook.id}: {spec.command} is not an executable file")
                fixes.append(f"fix transport.command of {hook.id} in {registration}")
                continue
            problems.append(
                f"backend {hook.id}: {spec.command!r} is not on the PATH the harness gives "
                f"its hooks ({child_path or 'empty'})"
            )
            here = shutil.which(spec.command)
            example = f" such as {here}" if here else ""
            fixes.append(
                f"give transport.command of {hook.id} in {registration} as an absolute "
                f"path{example} (or put its folder on the harness's PATH)"
            )
    if problems:
        return Check(name, False, "; ".join(problems), fix="; ".join(fixes))
    return Check(name, True, ", ".join(found))


# --- 5. probe -----------------------------------------------------------------------------


def probe_payload(dialect: str, event: str, cwd: Path) -> dict[str, Any]:
    """The probe's native payload for ``event`` (a pre-tool event with an entry in PROBES)."""

    def fill(value: Any) -> Any:
        if value == "{cwd}":
            return str(cwd)
        if isinstance(value, dict):
            return {k: fill(v) for k, v in value.items()}
        if isinstance(value, list):
            return [fill(v) for v in value]
        return value

    payload: dict[str, Any] = fill(PROBES[dialect][event])
    return payload


def _run(
    command: str, payload: bytes, cwd: Path, env: dict[str, str], timeout: float
) -> tuple[int, str, str] | None:
    """``/bin/sh -c command`` as a harness runs it; ``None`` on a timeout (all killed)."""
    proc = subprocess.Popen(
        ["/bin/sh", "-c", command],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=cwd,
        env=env,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(payload, timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        return None
    return proc.returncode, out.decode("utf-8", "replace"), err.decode("utf-8", "replace")


def check_probe(target: Target, entry: Entry) -> Check:
    name = "probe"
    dialect = dialects.get(target.dialect)
    event = (
        entry.event if entry.event in PROBES[target.dialect] else next(iter(PROBES[target.dialect]))
    )
    payload = json.dumps(probe_payload(target.dialect, event, target.cwd)).encode("utf-8")
    env = {**os.environ, "PATH": target.hook_path}
    timeout = entry.timeout_s or PROBE_TIMEOUT_S
    started = time.monotonic()
    # The hook may start the registration's warm daemon (--daemon auto). It is left
    # running: it is the one the harness's own hook calls will use (same registration,
    # folder, interpreter), and it exits by itself after its idle timeout.
    done = _run(entry.command, payload, target.cwd, env, timeout)
    took = time.monotonic() - started
    if done is None:
        return Check(
            name,
            False,
            f"the hook did not answer within its native timeout ({timeout:g} s): the harness "
            "kills it and lets the call through",
            fix="find what blocks (a backend that hangs at start?); AHP_ADAPTER_DEBUG=1 shows more",
        )
    code, out, err = done
    nothing = dialect.render_nothing(event)
    deny = dialect.render_deny(GENERIC_DENIAL_REASON, event)
    shown = _shown(err, entry, target.cwd)
    from ahp_protocol.client import SYNTHETIC_DENIAL_PATTERN

    synthetic = SYNTHETIC_DENIAL_PATTERN.search(out) or SYNTHETIC_DENIAL_PATTERN.search(err)
    if synthetic is not None:
        return Check(
            name,
            False,
            "a fail-closed backend failure: the hook denied a harmless call with "
            f'"{synthetic.group(0)}", so no policy answered',
            fix="make the backend start and answer (its command, arguments, rules); the "
            "adapter's stderr and the daemon's log below say what failed",
            output=shown,
        )
    if code not in (nothing.exit_code, deny.exit_code):
        return Check(
            name,
            False,
            f"the hook exited {code}: the harness reads that as a hook error and lets the "
            "call through",
            fix="run the hook command yourself with this PATH to see why",
            output=shown,
        )
    failed = [
        line
        for line in err.splitlines()
        if line.startswith(("ahp-adapter: no decision (", "ahp-adapter: backend "))
    ]
    if failed:
        return Check(
            name,
            False,
            "the chain did not answer and its fail-open policy let the call through "
            f"({failed[0].removeprefix('ahp-adapter: ')})",
            fix="make the backend start and answer; see the adapter's stderr",
            output=shown,
        )
    if out.strip() == nothing.stdout.strip() and code == nothing.exit_code:
        return Check(name, True, f"no effect on `{PROBE_COMMAND}` ({took:.2f} s)")
    answer = " ".join(out.split())[:200] or f"exit {code}"
    return Check(name, True, f"the policy answered `{PROBE_COMMAND}`: {answer} ({took:.2f} s)")


def _shown(stderr: str, entry: Entry, cwd: Path) -> str:
    """The adapter's stderr, and the tail of its daemon's log when there is one."""
    text = stderr.strip()[-STDERR_SHOWN:]
    try:
        from ahp_adapters.rundir import daemon_files

        log = Path(daemon_files(entry.registration(cwd), str(cwd))[2])
        lines = log.read_text(encoding="utf-8", errors="replace").strip().splitlines()
        tail = "\n".join(lines[-LOG_LINES:])[-STDERR_SHOWN:]
    except OSError:
        return text
    if tail:
        text += f"\n--- daemon log {log} (tail) ---\n{tail}"
    return text


# --- the command --------------------------------------------------------------------------


def target_of(
    dialect: str,
    *,
    project: str | None = None,
    config: str | None = None,
    harness_bin: str | None = None,
    hook_path: str | None = None,
) -> Target:
    """Which hook file and how it runs (raises DoctorError on a usage error)."""
    try:
        dialect = dialects.canonical_name(dialect)
        path = Path(config).resolve() if config else install.config_path(dialect, project)
    except (dialects.UnknownDialect, install.InstallError) as exc:
        raise DoctorError(str(exc)) from None
    folder = Path(project).resolve() if project else None
    if folder is not None and not folder.is_dir():
        raise DoctorError(f"--project {project}: not a folder")
    return Target(
        dialect,
        path,
        folder or Path.cwd(),
        os.environ.get("PATH", os.defpath) if hook_path is None else hook_path,
        folder,
        config,
        harness_bin,
    )


def run_checks(target: Target) -> list[Check]:
    """Every check that can run, in order (the later ones need our entry)."""
    present, entry = check_present(target)
    checks = [present]
    if entry is None:
        return checks
    registration = check_registration(target, entry)
    checks += [
        registration,
        check_trusted(target),
        check_commands(target, entry, registration.ok),
    ]
    if target.dialect in PROBES:
        checks.append(check_probe(target, entry))
    return checks


def render(checks: list[Check]) -> str:
    lines = []
    for check in checks:
        lines.append(f"{'ok' if check.ok else 'FAIL'} {check.check}: {check.what}")
        if not check.ok and check.fix:
            lines.append(f"  fix: {check.fix}")
        lines += [f"  note: {note}" for note in check.notes]
        if not check.ok and check.output:
            lines += [f"  | {line}" for line in check.output.splitlines()]
    return "\n".join(lines) + "\n"


def main(args: argparse.Namespace) -> int:
    """``ahp-adapter doctor`` (arguments parsed by :mod:`ahp_adapters.cli`)."""
    import sys

    try:
        target = target_of(
            args.dialect,
            project=args.project,
            config=args.config,
            harness_bin=args.harness_bin,
            hook_path=args.hook_path,
        )
    except DoctorError as exc:
        print(f"ahp-adapter doctor: error: {exc}", file=sys.stderr)
        return 2
    checks = run_checks(target)
    ok = all(check.ok for check in checks)
    if args.json:
        doc = {
            "harness": target.dialect,
            "hooks_file": str(target.path),
            "ok": ok,
            "checks": [asdict(check) for check in checks],
        }
        sys.stdout.write(json.dumps(doc, indent=2) + "\n")
    else:
        sys.stdout.write(render(checks))
        verdict = "a deny would hold" if ok else "a deny would NOT hold"
        sys.stdout.write(f"{verdict} ({target.dialect}, {target.path})\n")
    return 0 if ok else 1

"""Making installed hooks enforced: the harnesses that skip hooks they do not trust.

Found by driving the real binaries (``ahp_adapters.live``), not documented by them:

- **Codex** runs a hook from ``hooks.json`` only once its hash is trusted in
  ``config.toml`` (``[hooks.state."<file>:<event>:<group>:<handler>"] trusted_hash``),
  and reads a project's ``.codex/`` at all only when the project is trusted
  (``[projects."<dir>"] trust_level = "trusted"``). An untrusted hook is skipped without
  a word. We trust *our own* entries as Codex's ``/hooks`` review does, through Codex's
  own ``codex app-server`` (``hooks/list`` for the hashes, ``config/batchWrite`` to record
  them), so the hash rule stays Codex's; the project's trust, which covers all of its
  configuration, is written only when the user asks (``install --trust``).
- **GitHub Copilot CLI** loads a project's ``.github/hooks`` only in a folder listed in
  ``trustedFolders`` of ``$COPILOT_HOME/config.json`` (user-scope hooks need no trust).
  That setting grants more than hooks, so it too is written only on ``install --trust``.

Where trust is missing and not asked for, :class:`TrustError` says what the user must do,
and ``install`` writes nothing.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import threading
from pathlib import Path
from typing import Any

APP_SERVER_TIMEOUT_S = 30.0


class TrustError(Exception):
    """The hooks would not be enforced; the message says what to do."""


# --- Codex -------------------------------------------------------------------------------


class _AppServer:
    """A short ``codex app-server`` session (JSONL over stdio; it exits on end of input
    before answering, so requests are sent one at a time and answered in turn)."""

    def __init__(self, codex: str, env: dict[str, str]) -> None:
        try:
            self._proc = subprocess.Popen(
                [codex, "app-server"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                env=env,
                text=True,
            )
        except OSError as exc:
            raise TrustError(f"cannot run {codex} app-server ({exc.strerror})") from exc
        self._lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        self._next = 0
        self.call("initialize", {"clientInfo": {"name": "ahp-adapter", "version": "0"}})
        self._send({"jsonrpc": "2.0", "method": "initialized"})

    def _read(self) -> None:
        assert self._proc.stdout is not None
        for line in self._proc.stdout:
            self._lines.put(line)
        self._lines.put(None)

    def _send(self, message: dict[str, Any]) -> None:
        assert self._proc.stdin is not None
        self._proc.stdin.write(json.dumps(message) + "\n")
        self._proc.stdin.flush()

    def call(self, method: str, params: dict[str, Any]) -> Any:
        self._next += 1
        self._send({"jsonrpc": "2.0", "id": self._next, "method": method, "params": params})
        while True:
            try:
                line = self._lines.get(timeout=APP_SERVER_TIMEOUT_S)
            except queue.Empty:
                raise TrustError(f"codex app-server did not answer {method}") from None
            if line is None:
                raise TrustError(f"codex app-server exited before answering {method}")
            try:
                message = json.loads(line)
            except ValueError:
                continue
            if message.get("id") != self._next:
                continue
            if "error" in message:
                raise TrustError(f"codex app-server refused {method}: {message['error']}")
            return message.get("result")

    def close(self) -> None:
        assert self._proc.stdin is not None
        self._proc.stdin.close()
        try:
            self._proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()


def _codex_hooks(server: _AppServer, cwd: Path) -> list[dict[str, Any]]:
    result = server.call("hooks/list", {"cwds": [str(cwd)]})
    return [hook for entry in result.get("data", []) for hook in entry.get("hooks", [])]


def codex_hook_status(hooks_file: Path, cwd: Path, codex: str) -> dict[str, str]:
    """What Codex itself reports, run in ``cwd``, for our entries of ``hooks_file``.

    Each listed entry's key (``<file>:<event>:<group>:<handler>``) and its ``trustStatus``
    (``"trusted"`` is the one Codex runs), or ``"disabled"`` for one Codex lists as not
    enabled. Empty when Codex lists none of them: a project's hooks are not listed at all
    while the project is untrusted. Read through ``codex app-server``'s ``hooks/list``;
    writes nothing. Raises :class:`TrustError` when the app-server cannot be run or asked.
    """
    from ahp_adapters.install import is_ours

    server = _AppServer(codex, dict(os.environ))
    try:
        hooks = _codex_hooks(server, cwd)
    finally:
        server.close()
    wanted = hooks_file.resolve()
    return {
        str(h.get("key")): "disabled" if h.get("enabled") is False else str(h.get("trustStatus"))
        for h in hooks
        if Path(str(h.get("sourcePath", ""))).resolve() == wanted and is_ours(h.get("command"))
    }


def trust_codex(
    hooks_file: Path, cwd: Path, codex: str, *, project: Path | None, trust_project: bool
) -> list[str]:
    """Trust our entries of ``hooks_file`` in Codex's own config; return their keys.

    ``cwd`` is where Codex will run (the project for project scope). Raises
    :class:`TrustError` when Codex does not see the hooks (an untrusted project without
    ``trust_project``) or still reports one of ours untrusted afterwards.
    """
    from ahp_adapters.install import is_ours

    server = _AppServer(codex, dict(os.environ))
    try:
        if project is not None and trust_project:
            server.call(
                "config/batchWrite",
                {
                    "edits": [
                        {
                            "keyPath": "projects",
                            "mergeStrategy": "upsert",
                            "value": {str(project): {"trust_level": "trusted"}},
                        }
                    ]
                },
            )
        ours = [
            h
            for h in _codex_hooks(server, cwd)
            if Path(str(h.get("sourcePath", ""))) == hooks_file and is_ours(h.get("command"))
        ]
        if not ours:
            if project is not None:
                raise TrustError(
                    f"Codex does not load {hooks_file}: it reads a project's .codex/ only "
                    f"when the project is trusted. Trust {project} in Codex (run codex there "
                    "and accept), or re-run install with --trust, or install in user scope "
                    "(without --project)"
                )
            raise TrustError(f"Codex does not list the hooks in {hooks_file}")
        state = {h["key"]: {"trusted_hash": h["currentHash"]} for h in ours}
        server.call(
            "config/batchWrite",
            {"edits": [{"keyPath": "hooks.state", "mergeStrategy": "upsert", "value": state}]},
        )
        after = {h["key"]: h.get("trustStatus") for h in _codex_hooks(server, cwd)}
    finally:
        server.close()
    untrusted = [key for key in state if after.get(key) != "trusted"]
    if untrusted:
        raise TrustError(f"Codex still reports these hooks untrusted: {', '.join(untrusted)}")
    return sorted(state)


def forget_codex_trust(keys: list[str], codex: str) -> None:
    """Remove the ``[hooks.state]`` trust of ``keys`` from Codex's config, through its
    app-server (``config/batchWrite``, each key replaced by nothing): after uninstall,
    no trust is left behind for hooks that are gone."""
    if not keys:
        return
    edits = [
        {"keyPath": f"hooks.state.{json.dumps(key)}", "mergeStrategy": "replace", "value": None}
        for key in keys
    ]
    server = _AppServer(codex, dict(os.environ))
    try:
        server.call("config/batchWrite", {"edits": edits})
    finally:
        server.close()


# --- GitHub Copilot CLI -------------------------------------------------------------------


def copilot_config_path() -> Path:
    home = os.environ.get("COPILOT_HOME")
    return (Path(home) if home else Path.home() / ".copilot") / "config.json"


def _copilot_config(path: Path) -> tuple[list[str], dict[str, Any]]:
    """Copilot's config.json: ``//`` comment lines (kept), then one JSON object."""
    if not path.exists():
        return [
            "// User settings belong in settings.json.",
            "// This file is managed automatically.",
        ], {}
    lines = path.read_text().splitlines()
    head = [line for line in lines if line.lstrip().startswith("//")]
    body = "\n".join(line for line in lines if not line.lstrip().startswith("//"))
    try:
        doc = json.loads(body) if body.strip() else {}
    except ValueError as exc:
        raise TrustError(f"{path} is not the JSON Copilot writes ({exc}); left untouched") from exc
    if not isinstance(doc, dict):
        raise TrustError(f"{path} is not a JSON object; left untouched")
    return head, doc


def copilot_trusts(folder: Path) -> bool:
    """Whether Copilot loads ``folder``'s ``.github/hooks``: it, or a folder above it, is
    in ``trustedFolders``."""
    _, doc = _copilot_config(copilot_config_path())
    trusted = doc.get("trustedFolders", [])
    folder = folder.resolve()
    return isinstance(trusted, list) and any(
        isinstance(t, str) and (folder == Path(t) or Path(t) in folder.parents) for t in trusted
    )


def trust_copilot_folder(folder: Path) -> Path:
    """Add ``folder`` to Copilot's ``trustedFolders``; return the file written."""
    path = copilot_config_path()
    head, doc = _copilot_config(path)
    trusted = doc.get("trustedFolders")
    if not isinstance(trusted, list):
        trusted = []
    if str(folder.resolve()) not in trusted:
        trusted.append(str(folder.resolve()))
    doc["trustedFolders"] = trusted
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".ahp-tmp")
    tmp.write_text("\n".join([*head, json.dumps(doc, indent=2)]) + "\n")
    os.replace(tmp, path)
    return path

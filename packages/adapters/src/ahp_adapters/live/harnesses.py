"""How to run each real harness binary headless against the fake model, in a scratch home.

One class per harness: where its binary is found, which model API it speaks, the
settings that point it at the fake model (written into a scratch ``HOME``, never the
user's own), the one-shot command line, and its version. What each needed was found
by running the real binaries (native-dialects.md §14); a new version that needs
something else is an edit here and a failing ``ahp-adapter verify``.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import threading
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

PROMPT = "Run the shell commands you are asked for."


@dataclass(frozen=True)
class Scratch:
    """The folders one harness run uses: a home of its own and a workspace."""

    home: Path
    workspace: Path


class Harness(ABC):
    """A real harness, driven once per scenario."""

    name: ClassVar[str]
    """The ``ahp-adapter`` dialect its hooks speak."""
    binary: ClassVar[str]
    api: ClassVar[str]
    """The fake model API it calls (``ahp_adapters.live.fake_model.APIS``)."""
    install_args: ClassVar[tuple[str, ...]] = ("--project", "{workspace}")
    """``ahp-adapter install`` arguments ({workspace}, {binary} and {port} filled in)."""
    transport: ClassVar[str] = "command"
    """How the hooks reach the adapter: ``command`` (a process per hook) or ``http``."""
    hook_names: ClassVar[Mapping[str, str] | None] = None
    """Tool name as offered to the model -> as the hooks see it, where they differ (a name
    missing from the mapping: the harness runs no hook for that tool); ``None``: the same."""

    def hook_name(self, offered: str) -> str | None:
        """The name the hooks see for a tool offered to the model (``None``: not hooked)."""
        return offered if self.hook_names is None else self.hook_names.get(offered)

    @property
    def key(self) -> str:
        """The driver's name: the dialect, with the transport unless it is ``command``."""
        return self.name if self.transport == "command" else f"{self.name}-{self.transport}"

    @contextlib.contextmanager
    def serving(self, registration: Path, env: dict[str, str], port: int) -> Iterator[None]:
        """What must run beside the harness for its hooks to be answered (nothing for
        command hooks), started after install and stopped after the run."""
        yield

    def find(self, bin_dir: str | None = None) -> str | None:
        if bin_dir:
            path = Path(bin_dir) / self.binary
            return str(path) if path.exists() else None
        return shutil.which(self.binary)

    def version(self, binary: str) -> str:
        try:
            out = subprocess.run(
                [binary, "--version"], capture_output=True, text=True, timeout=30, check=False
            ).stdout
        except (OSError, subprocess.TimeoutExpired):
            return "unknown"
        found = re.search(r"\d+\.\d+\.\d+", out)
        return found.group(0) if found else "unknown"

    @abstractmethod
    def env(self, scratch: Scratch, model_url: str) -> dict[str, str]:
        """Settings files written, and the environment the run gets on top of the base."""

    @abstractmethod
    def argv(
        self, binary: str, scratch: Scratch, *, own_permissions_refuse: bool = False
    ) -> list[str] | None:
        """The one-shot command line; with ``own_permissions_refuse``, one under which the
        harness's own permissions refuse a shell call (``None``: it has no such mode)."""


def _write_json(path: Path, doc: object) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=2) + "\n")


class ClaudeCode(Harness):
    name = "claude-code"
    binary = "claude"
    api = "anthropic"

    def env(self, scratch: Scratch, model_url: str) -> dict[str, str]:
        return {
            "ANTHROPIC_BASE_URL": model_url,
            "ANTHROPIC_API_KEY": "sk-ant-fake-live-tier",
            "DISABLE_TELEMETRY": "1",
            "DISABLE_ERROR_REPORTING": "1",
            "DISABLE_AUTOUPDATER": "1",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        }

    def argv(
        self, binary: str, scratch: Scratch, *, own_permissions_refuse: bool = False
    ) -> list[str] | None:
        # Without --allowedTools, print mode refuses a Bash call that needs a permission
        # prompt: the harness's own refusal, which a no-effect answer must not widen.
        rule = [] if own_permissions_refuse else ["--allowedTools", "Bash"]
        return [binary, "-p", PROMPT, "--output-format", "stream-json", "--verbose", *rule]


class ClaudeCodeHttp(ClaudeCode):
    """Claude Code with ``install --transport http``: its pre- and post-tool hooks POST to
    ``ahp-adapter serve`` on loopback (the session start stays a command hook)."""

    transport = "http"
    install_args = ("--project", "{workspace}", "--transport", "http", "--http", "127.0.0.1:{port}")

    @contextlib.contextmanager
    def serving(self, registration: Path, env: dict[str, str], port: int) -> Iterator[None]:
        argv = [sys.executable, "-P", "-m", "ahp_adapters", "serve", self.name]
        argv += ["--registration", str(registration), "--http", f"127.0.0.1:{port}"]
        proc = subprocess.Popen(
            argv, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE, start_new_session=True,
        )  # fmt: skip
        try:
            assert proc.stderr is not None
            for line in iter(proc.stderr.readline, b""):
                if b"listening on http://" in line:
                    break
            else:
                raise RuntimeError(f"ahp-adapter serve exited ({proc.wait()}) before listening")
            threading.Thread(target=proc.stderr.read, daemon=True).start()  # keep it drained
            yield
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


class Codex(Harness):
    # Codex hooks see shell tools as "Bash" and run only for them, apply_patch and MCP
    # tools (native-dialects.md: "a guardrail rather than a complete enforcement boundary").
    hook_names: ClassVar[Mapping[str, str] | None] = {
        "exec_command": "Bash",
        "shell": "Bash",
        "local_shell": "Bash",
        "apply_patch": "apply_patch",
    }
    name = "codex"
    binary = "codex"
    api = "responses"
    # User scope ($CODEX_HOME/hooks.json); install trusts our entries through this binary.
    install_args = ("--harness-bin", "{binary}")

    def env(self, scratch: Scratch, model_url: str) -> dict[str, str]:
        home = scratch.home / ".codex"
        home.mkdir(parents=True, exist_ok=True)
        config = home / "config.toml"
        existing = config.read_text() if config.exists() else ""
        if "[model_providers.fake]" not in existing:
            config.write_text(
                'model_provider = "fake"\nmodel = "fake"\n'
                "[model_providers.fake]\n"
                f'name = "fake"\nbase_url = "{model_url}/v1"\nwire_api = "responses"\n'
                'env_key = "AHP_LIVE_FAKE_KEY"\n' + existing
            )
        else:
            config.write_text(
                re.sub(r'base_url = "[^"]*"', f'base_url = "{model_url}/v1"', existing)
            )
        return {"CODEX_HOME": str(home), "AHP_LIVE_FAKE_KEY": "fake"}

    def argv(
        self, binary: str, scratch: Scratch, *, own_permissions_refuse: bool = False
    ) -> list[str] | None:
        sandbox = "read-only" if own_permissions_refuse else "danger-full-access"
        return [
            binary,
            "exec",
            "--json",
            "--skip-git-repo-check",
            "-C",
            str(scratch.workspace),
            "-s",
            sandbox,
            "-c",
            'approval_policy="never"',
            PROMPT,
        ]


class Gemini(Harness):
    name = "gemini"
    binary = "gemini"
    api = "gemini"

    def env(self, scratch: Scratch, model_url: str) -> dict[str, str]:
        gemini = scratch.home / ".gemini"
        _write_json(
            gemini / "settings.json", {"security": {"auth": {"selectedType": "gemini-api-key"}}}
        )
        # Headless Gemini refuses to start in a folder that is not trusted.
        _write_json(gemini / "trustedFolders.json", {str(scratch.workspace): "TRUST_FOLDER"})
        return {"GOOGLE_GEMINI_BASE_URL": model_url, "GEMINI_API_KEY": "fake-live-tier"}

    def argv(
        self, binary: str, scratch: Scratch, *, own_permissions_refuse: bool = False
    ) -> list[str] | None:
        if own_permissions_refuse:
            # Without --yolo, headless Gemini does not even offer its shell tool; a deny
            # rule of its own policy engine refuses the call the model makes.
            policies = scratch.home / ".gemini" / "policies"
            policies.mkdir(parents=True, exist_ok=True)
            (policies / "ahp-live.toml").write_text(
                '[[rule]]\ntoolName = "run_shell_command"\ncommandPrefix = "echo"\n'
                'decision = "deny"\npriority = 900\n'
            )
        return [binary, "-p", PROMPT, "--yolo"]


class Copilot(Harness):
    name = "copilot"
    binary = "copilot"
    api = "chat"
    # Copilot loads a project's .github/hooks only in a trusted folder: the one step.
    install_args = ("--project", "{workspace}", "--trust")

    def env(self, scratch: Scratch, model_url: str) -> dict[str, str]:
        return {
            "COPILOT_PROVIDER_BASE_URL": f"{model_url}/v1",
            "COPILOT_PROVIDER_API_KEY": "fake-live-tier",
            "COPILOT_OFFLINE": "1",
            "COPILOT_MODEL": "fake",
        }

    def argv(
        self, binary: str, scratch: Scratch, *, own_permissions_refuse: bool = False
    ) -> list[str] | None:
        allow = ["--deny-tool", "shell"] if own_permissions_refuse else ["--allow-all-tools"]
        return [binary, "-p", PROMPT, *allow]


class QwenCode(Harness):
    name = "qwen-code"
    binary = "qwen"
    api = "chat"

    def env(self, scratch: Scratch, model_url: str) -> dict[str, str]:
        settings = scratch.home / ".qwen" / "settings.json"
        _write_json(
            settings,
            {"security": {"auth": {"selectedType": "openai"}}, "model": {"name": "fake"}},
        )
        return {
            "OPENAI_BASE_URL": f"{model_url}/v1",
            "OPENAI_API_KEY": "fake-live-tier",
            "OPENAI_MODEL": "fake",
        }

    def argv(
        self, binary: str, scratch: Scratch, *, own_permissions_refuse: bool = False
    ) -> list[str] | None:
        if own_permissions_refuse:
            return None  # headless, only yolo offers the shell tool: no own refusal to keep
        return [binary, "-p", PROMPT, "-o", "stream-json", "--approval-mode", "yolo"]


class Kimi(Harness):
    name = "kimi"
    binary = "kimi"
    api = "chat"
    install_args = ()  # Kimi's hooks live in the user's ~/.kimi/config.toml only

    def env(self, scratch: Scratch, model_url: str) -> dict[str, str]:
        config = scratch.home / ".kimi" / "config.toml"
        config.parent.mkdir(parents=True, exist_ok=True)
        existing = config.read_text() if config.exists() else ""
        head = (
            'default_model = "fake"\n\n'
            '[models.fake]\nprovider = "fake"\nmodel = "fake"\nmax_context_size = 100000\n\n'
            f'[providers.fake]\ntype = "openai_legacy"\nbase_url = "{model_url}/v1"\n'
            'api_key = "fake-live-tier"\n\n'
        )
        body = existing.split("# --- ahp-live:end ---\n", 1)[-1]
        config.write_text(head + "# --- ahp-live:end ---\n" + body)
        return {}

    def argv(
        self, binary: str, scratch: Scratch, *, own_permissions_refuse: bool = False
    ) -> list[str] | None:
        if own_permissions_refuse:
            return None  # print mode approves every call: no own refusal to keep
        return [binary, "--print", "-p", PROMPT, "-w", str(scratch.workspace)]


HARNESSES: dict[str, Harness] = {
    h.name: h for h in (ClaudeCode(), Codex(), Gemini(), Copilot(), QwenCode(), Kimi())
}
"""One driver per dialect, its hooks installed as commands."""
DRIVERS: dict[str, Harness] = {h.key: h for h in (*HARNESSES.values(), ClaudeCodeHttp())}
"""Every driver, by :attr:`Harness.key`: each harness over each transport its adapter offers."""


def base_env(scratch: Scratch) -> dict[str, str]:
    """The environment of a run: the caller's ``PATH`` and locale, a scratch home."""
    keep = ("PATH", "LANG", "LC_ALL", "TERM", "TMPDIR", "SYSTEMROOT")
    env = {k: v for k, v in os.environ.items() if k in keep}
    env.update(
        HOME=str(scratch.home),
        XDG_CONFIG_HOME=str(scratch.home / ".config"),
        XDG_CACHE_HOME=str(scratch.home / ".cache"),
        XDG_DATA_HOME=str(scratch.home / ".local" / "share"),
        XDG_STATE_HOME=str(scratch.home / ".local" / "state"),
        NO_COLOR="1",
        CI="1",
    )
    return env

"""Fixtures for the harness tests that run real backends: the ``kit`` helper.

``kit`` (a :class:`HarnessKit`) builds, inside ``tmp_path``: a workspace (``ws``)
and a folder outside it (``outside``, holding ``secret.txt``); registration
entries for real backend processes (``backends/scripted_kit.py``, our server kit
answering scripted effects and recording every line it receives, and the
protocol package's ``misbehave.py``); host permissions from real TOML files; and
a real :class:`~ahp_harness.hooks.Gate` (:func:`ahp_harness.host.build_gate`) over a real
:class:`~ahp_protocol.client.Hooks` (:meth:`HarnessKit.open_gate`), with an approver and a
reporter that record what they were asked and shown.
"""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from ahp_harness.hooks import CallRecord, Gate
from ahp_harness.host import HARNESS, build_gate
from ahp_harness.manifest import capabilities
from ahp_harness.permissions import Permissions
from ahp_harness.sandbox import Sandbox
from ahp_protocol.client import Hooks

HERE = Path(__file__).resolve().parent
SCRIPTED_KIT = HERE / "backends" / "scripted_kit.py"
PROTOCOL_BACKENDS = HERE.parents[1] / "protocol" / "tests" / "backends"
MISBEHAVE = PROTOCOL_BACKENDS / "misbehave.py"
PY = sys.executable
SECRET_TEXT = "top-secret-outside-the-workspace"
KIT_TIMEOUT_MS = 15000  # covers a kit backend's start-up on a loaded machine


def toml_file(path: Path, rules: Sequence[Mapping[str, str]], **top: Any) -> Path:
    """A permissions TOML file: top-level keys, then one ``[[rules]]`` table per rule."""
    lines = [f"{key} = {json.dumps(value)}" for key, value in top.items()]
    for rule in rules:
        lines.append("")
        lines.append("[[rules]]")
        lines += [f"{key} = {json.dumps(value)}" for key, value in rule.items()]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


class RecordingApprover:
    """Answers every prompt with ``answer`` and keeps what it was asked."""

    def __init__(self, answer: bool) -> None:
        self.answer = answer
        self.calls: list[tuple[str, dict[str, Any], str]] = []

    async def __call__(self, tool: str, tool_input: Mapping[str, Any], reason: str) -> bool:
        self.calls.append((tool, dict(tool_input), reason))
        return self.answer


class RecordingReporter:
    """Keeps every call report and every backend message the user would see."""

    def __init__(self) -> None:
        self.records: list[CallRecord] = []
        self.messages: list[str] = []

    def call(self, record: CallRecord) -> None:
        self.records.append(record)

    def backend_messages(self, texts: Sequence[str]) -> None:
        self.messages += list(texts)


@dataclass
class GateRun:
    """An open gate and what it talks to (close ``sandbox`` after use)."""

    gate: Gate
    approver: RecordingApprover
    reporter: RecordingReporter
    hooks: Hooks
    sandbox: Sandbox
    audit: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    async def barrier(self) -> None:
        """Wait until every interceptor has read everything sent so far (each answers in
        order): one more ``tool.before``, about a call of its own, answered by all."""
        assert self.hooks.dispatcher is not None
        call = self.gate.session.tool_call("read_file", {"path": "-"}, kind="file_read")
        await call.before()


class HarnessKit:
    """Builds workspaces, registrations, permissions and gates inside one ``tmp_path``."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.workspace = root / "ws"
        self.workspace.mkdir()
        self.outside = root / "outside"
        self.outside.mkdir()
        (self.outside / "secret.txt").write_text(SECRET_TEXT + "\n", encoding="utf-8")
        self.record_files: dict[str, Path] = {}
        self.secret_text = SECRET_TEXT

    # -- backends ----------------------------------------------------------------------

    def scripted(
        self,
        hook_id: str,
        rules: Sequence[Mapping[str, Any]] = (),
        *,
        intercept: Sequence[str] = ("tool.before",),
        observe: Sequence[str] = (),
        policy: str = "fail-closed",
        timeout_ms: int = KIT_TIMEOUT_MS,
    ) -> dict[str, Any]:
        """A ``scripted_kit.py`` backend (persistent stdio) recording into ``<id>.jsonl``."""
        script = self.root / f"{hook_id}.script.json"
        script.write_text(json.dumps({"rules": list(rules)}), encoding="utf-8")
        record = self.root / f"{hook_id}.jsonl"
        self.record_files[hook_id] = record
        subs: list[dict[str, Any]] = []
        if intercept:
            subs.append(
                {
                    "mode": "intercept",
                    "events": list(intercept),
                    "timeoutMs": timeout_ms,
                    "failurePolicy": policy,
                    "content": {"default": "body"},
                }
            )
        if observe:
            subs.append(
                {"mode": "observe", "events": list(observe), "content": {"default": "body"}}
            )
        return {
            "id": hook_id,
            "transport": {
                "type": "stdio",
                "command": PY,
                "args": [str(SCRIPTED_KIT), "--script", str(script), "--record", str(record)],
                "lifecycle": "persistent",
            },
            "subscriptions": subs,
        }

    def misbehave(
        self,
        hook_id: str,
        mode: str,
        *,
        policy: str = "fail-closed",
        timeout_ms: int = 400,
        events: Sequence[str] = ("tool.before",),
    ) -> dict[str, Any]:
        """``misbehave.py MODE`` (stdlib only, persistent stdio) intercepting ``events``."""
        return {
            "id": hook_id,
            "transport": {
                "type": "stdio",
                "command": PY,
                "args": ["-I", "-S", str(MISBEHAVE), mode],
                "lifecycle": "persistent",
            },
            "subscriptions": [
                {
                    "mode": "intercept",
                    "events": list(events),
                    "timeoutMs": timeout_ms,
                    "failurePolicy": policy,
                    "content": {"default": "body"},
                }
            ],
        }

    def registration(self, hooks: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        return {"protocolVersion": "draft", "hooks": [dict(h) for h in hooks]}

    def registration_file(self, hooks: Sequence[Mapping[str, Any]], name: str = "reg.json") -> Path:
        path = self.root / name
        path.write_text(json.dumps(self.registration(hooks), indent=2), encoding="utf-8")
        return path

    def recorded(self, hook_id: str) -> list[dict[str, Any]]:
        """Every message the backend ``hook_id`` received, parsed, in order."""
        path = self.record_files[hook_id]
        if not path.exists():
            return []
        lines = path.read_text(encoding="utf-8").splitlines()
        return [json.loads(json.loads(line)["raw"]) for line in lines if line.strip()]

    # -- host layers -------------------------------------------------------------------

    def permissions(
        self,
        rules: Sequence[Mapping[str, str]] | None = None,
        managed: Sequence[Mapping[str, str]] | None = None,
        mode: str = "default",
        where: Path | None = None,
    ) -> Permissions:
        """Real :class:`Permissions` loaded from TOML files written in ``where`` (or root)."""
        folder = where or self.root
        user = toml_file(folder / "user.toml", rules) if rules is not None else None
        admin = toml_file(folder / "managed.toml", managed) if managed is not None else None
        return Permissions.from_files(user, admin, mode=mode)  # type: ignore[arg-type]

    def new_workspace(self, name: str) -> Path:
        """Another workspace folder (``<root>/<name>/ws``)."""
        workspace = self.root / name / "ws"
        workspace.mkdir(parents=True)
        return workspace

    def hooks(self, hooks: Sequence[Mapping[str, Any]] = (), *, interactive: bool = True) -> Hooks:
        """This harness's :class:`Hooks` over ``hooks`` (none: no backend at all), not started."""
        return Hooks(
            self.registration(hooks) if hooks else None,
            harness=HARNESS,
            capabilities=capabilities(interactive=interactive),
        )

    @asynccontextmanager
    async def open_hooks(
        self, hooks: Sequence[Mapping[str, Any]], *, interactive: bool = True
    ) -> AsyncIterator[Hooks]:
        """Started :class:`Hooks` over ``hooks``; closed (backends ended) on exit."""
        async with self.hooks(hooks, interactive=interactive) as opened:
            yield opened

    def gate(
        self,
        hooks: Hooks | None,
        permissions: Permissions | None = None,
        *,
        approve: bool = True,
        workspace: Path | None = None,
    ) -> GateRun:
        """A gate (a new session of ``hooks``) over ``workspace`` (default: the kit's);
        close its ``sandbox`` after use."""
        hooks = hooks or self.hooks()
        permissions = permissions or self.permissions()
        workspace = workspace or self.workspace
        sandbox = Sandbox([workspace], fetch_hosts=permissions.fetch_allowed)
        session = hooks.session(cwd=str(sandbox.roots[0]), roots=[str(r) for r in sandbox.roots])
        approver = RecordingApprover(approve)
        reporter = RecordingReporter()
        audit: list[tuple[str, dict[str, Any]]] = []
        gate = build_gate(
            session,
            permissions=permissions,
            sandbox=sandbox,
            approve=approver,
            audit=lambda kind, record: audit.append((kind, dict(record))),
            reporter=reporter,
        )
        return GateRun(gate, approver, reporter, hooks, sandbox, audit)

    @asynccontextmanager
    async def open_gate(
        self,
        hooks: Sequence[Mapping[str, Any]] = (),
        permissions: Permissions | None = None,
        *,
        approve: bool = True,
        interactive: bool = True,
    ) -> AsyncIterator[GateRun]:
        """A gate with its own :class:`Hooks` over ``hooks`` (none: no AHP step at all)."""
        async with self.open_hooks(hooks, interactive=interactive) as opened:
            run = self.gate(opened, permissions, approve=approve)
            try:
                yield run
            finally:
                run.sandbox.close()


@pytest.fixture
def kit(tmp_path: Path) -> HarnessKit:
    return HarnessKit(tmp_path)


@pytest.fixture(scope="session")
def kit_class() -> type[HarnessKit]:
    """:class:`HarnessKit` itself, for module-scoped kits (``kit_class(tmp_dir)``)."""
    return HarnessKit

"""This harness's side of :mod:`ahp_harness.hooks`: its tools, permissions and sandbox.

:mod:`ahp_harness.hooks` is the file another harness copies; it declares the host pieces
it calls as small ``Protocol``\\ s and imports nothing of ``ahp_harness``. This module is
the other half, the part a copier replaces with their own:

- :class:`HostTools` adapts :mod:`ahp_harness.tools` (each run inside the session's
  :class:`~ahp_harness.sandbox.Sandbox`, and stoppable by Ctrl-C:
  :mod:`ahp_harness.interrupt`) to ``hooks.ToolTable``;
- :class:`HostLayers` adapts :class:`~ahp_harness.permissions.Permissions` and the
  sandbox to ``hooks.HostPolicy`` (the layers in the order
  :func:`ahp_harness.precedence.host_decision` gives them);
- :func:`build_gate` puts a gate together for one :class:`~ahp_protocol.client.SessionHooks`.

:data:`HARNESS` is the identity every event of this harness carries.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ahp_protocol.client import FileChange

from ahp_harness import __version__
from ahp_harness.hooks import CallDecision, Gate, ToolOutcome
from ahp_harness.interrupt import stoppable
from ahp_harness.precedence import host_decision
from ahp_harness.sandbox import SandboxViolation
from ahp_harness.tools import TOOLS
from ahp_harness.tools import Tool as HarnessTool

if TYPE_CHECKING:
    from ahp_protocol.client import SessionHooks

    from ahp_harness.hooks import Approver, Reporter, Tool
    from ahp_harness.permissions import Permissions
    from ahp_harness.sandbox import Sandbox

__all__ = ["HARNESS", "HostLayers", "HostTool", "HostTools", "build_gate"]

HARNESS = {"name": "ahp-harness", "version": __version__}
"""``harness`` of every event (draft §3.1)."""


@dataclass(frozen=True, slots=True)
class HostTool:
    """One of this harness's tools as ``hooks.Tool``: parsed by its model, run in ``sandbox``."""

    tool: HarnessTool
    sandbox: Sandbox

    @property
    def name(self) -> str:
        return self.tool.name

    @property
    def kind(self) -> str | None:
        return self.tool.kind

    @property
    def mcp(self) -> Mapping[str, Any] | None:
        """The ``tool.mcp`` identity of an MCP server's tool (``None``: a native tool)."""
        identity: Mapping[str, Any] | None = getattr(self.tool, "identity", None)
        return identity

    def parse(self, raw: Any) -> Any:
        return self.tool.parse_input(raw)  # ToolInputError is a ValueError

    async def run(self, parsed: Any) -> ToolOutcome:
        started = time.monotonic()
        result = None
        with stoppable() as scope:  # Ctrl-C stops it (ahp_harness.interrupt)
            result = await self.tool.run(parsed, self.sandbox)
        if result is None or scope.cancelled_caught:
            return ToolOutcome(
                outcome="cancelled",
                error="stopped by the user (Ctrl-C)",
                error_class="cancelled",
                duration_ms=(time.monotonic() - started) * 1000.0,
            )
        return ToolOutcome(
            outcome=result.outcome,
            output=result.output,
            error=result.error,
            error_class=result.error_class,
            duration_ms=result.duration_ms,
            attachments=result.attachments,
            file_changes=tuple(
                FileChange(c.path, c.change, c.before, c.after) for c in result.file_changes
            ),
        )


class HostTools:
    """``hooks.ToolTable`` over :data:`ahp_harness.tools.TOOLS` and ``extra`` (the MCP
    servers' tools, :mod:`ahp_harness.mcp_tools`), each run in ``sandbox``."""

    def __init__(self, sandbox: Sandbox, extra: Mapping[str, HarnessTool] | None = None) -> None:
        tools = {**TOOLS, **(extra or {})}
        self._tools = {name: HostTool(tool, sandbox) for name, tool in tools.items()}

    def get(self, name: str, /) -> HostTool | None:
        return self._tools.get(name)


@dataclass(frozen=True, slots=True)
class HostLayers:
    """``hooks.HostPolicy``: the sandbox, managed rules, user rules and the mode."""

    permissions: Permissions
    sandbox: Sandbox

    def decide(self, tool: Tool, parsed: Any) -> CallDecision:
        inner = tool.tool if isinstance(tool, HostTool) else TOOLS[tool.name]
        try:
            self.sandbox.check(inner, parsed)
            violation = None
        except SandboxViolation as exc:
            violation = str(exc)
        managed = self.permissions.managed_decision(inner, parsed)
        rule = self.permissions.rule_decision(inner, parsed)
        mode = self.permissions.mode_decision(inner, parsed, self.sandbox)
        return host_decision(
            sandbox_violation=violation,
            managed=managed.decision if managed else None,
            rule=rule.decision if rule else None,
            mode=mode.decision,
        )


def _no_audit(kind: str, record: Mapping[str, Any]) -> None:
    pass


def build_gate(
    session: SessionHooks,
    *,
    permissions: Permissions,
    sandbox: Sandbox,
    approve: Approver,
    reporter: Reporter | None = None,
    audit: Callable[[str, Mapping[str, Any]], None] = _no_audit,
    extra_tools: Mapping[str, HarnessTool] | None = None,
) -> Gate:
    """The gate of one session: this harness's tools, ``permissions`` and ``sandbox``.

    ``session`` carries the envelope and the backends (``session.hooks``); ``approve``
    answers prompts; ``reporter`` shows the user each resolved call and every backend
    message; ``audit(kind, record)`` receives the ``hook``/``call``/``exchange`` records.
    ``extra_tools`` are offered beside the harness's own (the MCP servers' tools).
    The caller closes ``sandbox`` (and the ``Hooks``) when the session is over.
    """
    return Gate(
        session=session,
        tools=HostTools(sandbox, extra_tools),
        policy=HostLayers(permissions, sandbox),
        approve=approve,
        audit=audit,
        reporter=reporter,
    )

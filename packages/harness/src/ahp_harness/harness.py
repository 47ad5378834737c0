"""The harness as a library: open one session, play its turns, close it.

``ahp-harness run`` and ``ahp-harness demo`` both drive the harness through this API::

    from ahp_harness.harness import open_harness
    from ahp_harness.models import load_driver

    async with open_harness(
        "workspace", driver=load_driver("script:session.json"), registration="reg.json"
    ) as harness:
        await harness.turn("tidy up")      # turn.start ... turn.end
        await harness.turn("now push")     # the same session, the conversation kept
    print(harness.summary.calls)

What :func:`open_harness` does, in order: checks the configuration (the workspace, the
permission files, the registration: a :class:`ConfigError` saying which file or value
and why, before anything starts), builds the host's sandbox and permissions, builds the
gate (:func:`ahp_harness.host.build_gate`, the one place a gate is made, over the
session's :class:`ahp_protocol.client.SessionHooks`), starts the backends and sends
``session.start``. Each :meth:`Harness.turn` is one turn
(:meth:`ahp_harness.session.Session.turn`). Leaving the block sends ``session.end``
(``completed``; ``error`` when the block raised; ``cancelled`` when it was cancelled;
bounded by :data:`END_TIMEOUT_S` and shielded, so a cancelled session still says it
ended), then closes every backend process, the driver, the records and the sandbox.

Files: it writes only the ``transcript`` and ``audit_log`` it is given (appended; none by
default) and what the tools do inside the workspace; never anything relative to the
current folder. The host pieces keep their own contracts: :mod:`ahp_harness.permissions`,
:mod:`ahp_harness.sandbox`, :mod:`ahp_harness.hooks`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Collection, Mapping, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import anyio

from ahp_harness.audit import AuditLog, Transcript
from ahp_harness.host import build_gate
from ahp_harness.session import UI, Session, SessionOutcome, SessionSummary, TurnSummary

if TYPE_CHECKING:
    from ahp_protocol.client import Dispatcher, Hooks
    from ahp_protocol.wire.registration import Hook, Subscription

    from ahp_harness.hooks import Approver, CallRecord, Gate, Reporter
    from ahp_harness.mcp_config import McpServerConfig
    from ahp_harness.models.base import ModelDriver
    from ahp_harness.permissions import Permissions
    from ahp_harness.sandbox import Sandbox

__all__ = ["END_TIMEOUT_S", "ConfigError", "Harness", "open_harness"]

#: How long ``session.end`` may take when the session is closed (also when cancelled).
END_TIMEOUT_S: Final = 10.0

PathLike = str | Path


class ConfigError(Exception):
    """The configuration is unusable; the message names the file or value and the reason.

    ``option`` names the setting (``"workspace"``) when the message does not name a file.
    """

    def __init__(self, message: str, *, option: str | None = None) -> None:
        super().__init__(message)
        self.option = option


class _Silent:
    """The default reporter of a library session: shows nothing."""

    def call(self, record: CallRecord) -> None:
        pass

    def backend_messages(self, texts: Sequence[str]) -> None:
        pass


class _Refuse:
    """The default approver: nobody can be asked, so every prompt is refused."""

    async def __call__(self, tool: str, tool_input: Mapping[str, Any], reason: str) -> bool:
        return False


def _hooks(
    registration: PathLike | None, *, interactive: bool, trust_uploads: Collection[str] = ()
) -> Hooks:
    """The AHP side of the session: the registration's backends (``None``: none at all).

    A registration file's folder is its backends' home (:mod:`ahp_protocol.client.hooks`).
    ``trust_uploads`` names the backends whose discovered configuration may upload content
    to endpoints of their choosing (the host's consent, draft §2.4); each must be a backend
    of the registration.
    """
    from ahp_protocol.client import DeclarationError, Hooks, RegistrationError
    from ahp_protocol.wire.errors import WireError, WireErrors

    from ahp_harness.host import HARNESS
    from ahp_harness.manifest import capabilities

    trusted = frozenset(trust_uploads)
    try:
        hooks = Hooks(
            registration,
            harness=HARNESS,
            capabilities=capabilities(interactive=interactive),
            interaction=_show_sign_in if interactive else None,
            authorize_configuration=_upload_consent(trusted) if trusted else None,
        )
    except WireErrors as exc:
        raise ConfigError(f"{registration}: {exc.first}") from None
    except (WireError, RegistrationError, DeclarationError) as exc:
        raise ConfigError(f"{registration}: {exc}") from None
    known = {hook.id for hook in hooks.dispatcher.registration.hooks} if hooks.dispatcher else set()
    for name in sorted(trusted - known):
        where = f"no backend {name} in {registration}" if registration else "no --registration"
        raise ConfigError(f"{name}: {where}", option="trust-uploads")
    return hooks


def _upload_consent(trusted: frozenset[str]) -> Callable[[Hook, Sequence[Subscription]], bool]:
    """The host's consent to a discovered configuration: one that uploads content only
    from a backend the operator trusts for that (``--trust-uploads``); any other as the
    client would accept it without a callback."""

    def consent(hook: Hook, subscriptions: Sequence[Subscription]) -> bool:
        return hook.id in trusted or all(sub.upload is None for sub in subscriptions)

    return consent


def _show_sign_in(url: str) -> None:
    """An interactive session's OAuth sign-in (``authorization_code_pkce``): the person
    opens the URL; the browser comes back to the client's loopback listener."""
    import sys

    print(f"ahp-harness: sign in for an AHP backend: open {url}", file=sys.stderr, flush=True)


@dataclass
class Harness:
    """One open session: play turns with :meth:`turn`; see :func:`open_harness`."""

    session: Session
    sandbox: Sandbox

    @property
    def gate(self) -> Gate:
        return self.session.gate

    @property
    def dispatcher(self) -> Dispatcher | None:
        return self.session.hooks.hooks.dispatcher

    @property
    def summary(self) -> SessionSummary:
        """Every turn and every call so far."""
        return self.session.summary

    async def turn(self, prompt: str | None = None) -> TurnSummary:
        """One turn for ``prompt`` (``None``: the driver plays it without one)."""
        return await self.session.turn(prompt)

    def failures(self, turn: TurnSummary) -> list[str]:
        """Why backends failed during ``turn``, for the operator (never for the model).

        One line per failed backend (:func:`ahp_protocol.client.failure_line`): the failure
        class, its policy, the fixed detail (e.g. ``'ahp-backend' not found on PATH``) and,
        where the kit knows it, the fix; then the last line of its stderr when it wrote
        any (a stdio backend's own words: a missing rules file, a traceback).
        """
        from ahp_protocol.client import failure_line

        hooks = self.session.hooks.hooks
        lines: list[str] = []
        seen: set[str] = set()
        for record in turn.calls:
            for d in record.diagnostics:
                if d.failure is None or d.mode != "intercept" or d.backend in seen:
                    continue
                seen.add(d.backend)
                lines.append(failure_line(d.backend, d.failure, d.policy, d.detail))
                stderr = hooks.stderr(d.backend).strip()
                if stderr:
                    lines.append(f"backend {d.backend} stderr: {stderr.splitlines()[-1]}")
        return lines


def _permissions(permissions: PathLike | None, managed: PathLike | None, mode: str) -> Permissions:
    from ahp_harness.permissions import MODES, Permissions, PermissionsError

    if mode not in MODES:
        raise ConfigError(f"{mode[:40]!r} is not a mode ({', '.join(MODES)})", option="mode")
    try:
        return Permissions.from_files(permissions, managed, mode=mode)
    except PermissionsError as exc:
        raise ConfigError(str(exc)) from None


def _mcp_config(path: PathLike | None) -> list[McpServerConfig]:
    """The ``--mcp-config`` servers (``None``: none); nothing of the ``mcp`` SDK is imported."""
    if path is None:
        return []
    from ahp_harness.mcp_config import McpConfigError, load_mcp_config

    try:
        return load_mcp_config(path)
    except McpConfigError as exc:
        raise ConfigError(str(exc)) from None


async def _open_mcp(
    stack: AsyncExitStack, path: PathLike | None, configs: list[McpServerConfig], cwd: str
) -> tuple[dict[str, Any], list[str]]:
    """Start and connect the MCP servers (closed by ``stack``): their tools by name, and
    notes on tools that could not be offered."""
    if not configs:
        return {}, []
    from ahp_harness.mcp_tools import McpConnectError, open_mcp

    try:
        servers = await stack.enter_async_context(open_mcp(configs, cwd=cwd))
    except McpConnectError as exc:
        raise ConfigError(f"{path}: {exc}") from None
    return dict(servers.tools), servers.notes


@asynccontextmanager
async def open_harness(
    workspace: PathLike,
    *,
    driver: ModelDriver,
    registration: PathLike | None = None,
    permissions: PathLike | None = None,
    managed: PathLike | None = None,
    mode: str = "default",
    interactive: bool = False,
    approver: Approver | None = None,
    ui: UI | None = None,
    reporter: Reporter | None = None,
    transcript: PathLike | None = None,
    audit_log: PathLike | None = None,
    mcp_config: PathLike | None = None,
    trust_uploads: Collection[str] = (),
) -> AsyncIterator[Harness]:
    """One session of the harness in ``workspace`` (see the module docstring).

    ``driver`` is the model (it is closed on exit, also when opening fails);
    ``registration`` the AHP registration file (``None``: no AHP step at all);
    ``permissions``/``managed`` the host's TOML rule files; ``mode`` one of
    :data:`MODES`; ``interactive`` whether someone can be asked (it sets the manifest
    and the capabilities: ``ask`` only when interactive); ``approver`` answers the
    host's prompts (default: refuse); ``ui`` shows what the model says and notes,
    ``reporter`` each resolved call (default: nothing); ``transcript`` and
    ``audit_log`` are JSON-lines files appended to (default: none kept); ``mcp_config``
    an ``mcpServers`` JSON file (:mod:`ahp_harness.mcp_config`): its servers are started
    and connected before ``session.start`` and closed after ``session.end``, and their
    tools are offered beside the harness's own (default: none); ``trust_uploads`` the
    backend ids whose discovered configuration may upload content to an endpoint it
    chose (default: none; such a configuration is refused and its backend skipped).
    """
    from ahp_harness.sandbox import Sandbox

    try:
        root = Path(workspace)
        if not root.is_dir():
            raise ConfigError(f"{workspace}: not a directory", option="workspace")
        host = _permissions(permissions, managed, mode)
        mcp_servers = _mcp_config(mcp_config)
        sandbox = Sandbox(
            [root], fetch_hosts=host.fetch_allowed, search_hides=host.hidden_from_search
        )
    except BaseException:
        with anyio.CancelScope(shield=True):
            await driver.aclose()
        raise
    audit = AuditLog(audit_log)
    records = Transcript(transcript)
    hooks: Hooks | None = None
    shown = ui or UI()
    stack = AsyncExitStack()
    try:
        hooks = _hooks(registration, interactive=interactive, trust_uploads=trust_uploads)
        root_text = str(sandbox.roots[0])
        mcp_tools, mcp_notes = await _open_mcp(stack, mcp_config, mcp_servers, root_text)
        for note in mcp_notes:
            shown.note(f"warning: {note}")
        offer = getattr(driver, "offer_tools", None)
        if mcp_tools and callable(offer):
            offer(mcp_tools)  # a driver that lists tools to its model lists these too
        gate = build_gate(
            hooks.session(cwd=root_text, roots=[str(r) for r in sandbox.roots]),
            permissions=host,
            sandbox=sandbox,
            approve=approver or _Refuse(),
            reporter=reporter or _Silent(),
            audit=audit.record,
            extra_tools=mcp_tools,
        )
        session = Session(
            gate=gate,
            driver=driver,
            transcript=records,
            interactive=interactive,
            permission_mode=mode,
            ui=shown,
        )
        await hooks.start()
        for d in hooks.configuration_diagnostics:
            hint = ""
            if d.detail and "configuration not authorized" in d.detail:
                hint = (
                    " (its configuration uploads content to an endpoint it chose; "
                    f"--trust-uploads {d.backend} accepts it)"
                )
            shown.note(f"warning: backend {d.backend}: {d.detail}{hint}")
        await session.start()
        outcome: SessionOutcome = "completed"
        try:
            yield Harness(session=session, sandbox=sandbox)
        except anyio.get_cancelled_exc_class():
            outcome = "cancelled"
            raise
        except BaseException:
            outcome = "error"
            raise
        finally:
            reason = None if outcome == "completed" else f"the session ended: {outcome}"
            with anyio.move_on_after(END_TIMEOUT_S, shield=True):
                await session.end(outcome, reason)
    finally:
        try:
            # Not inside the shield below: the MCP servers' task group was entered before
            # it; their close is shielded and bounded by its own (ahp_harness.mcp_tools).
            await stack.aclose()
        finally:
            with anyio.CancelScope(shield=True):
                if hooks is not None:
                    await hooks.aclose()
                await driver.aclose()
        audit.close()
        records.close()
        sandbox.close()

"""The harness-facing API: AHP for a harness in a few calls that read like the protocol.

:class:`Hooks` is built from a registration (a file, a document or a model), the
harness's identity and what it enforces at each event, all checked at construction.
It owns the envelope (event ids, ``time``, ``source``, ``harness``, the session and
the turn), checks every event a backend will receive against the wire models (an
invalid one is the harness's bug: :class:`InvalidEvent`, raised before anything is
sent) and runs it through :class:`~ahp_protocol.client.Dispatcher`, the low-level
layer. Every call returns the settled :class:`~ahp_protocol.client.HookResult`, also
for an event nobody intercepts (permission ``none``, the event unchanged)::

    async with Hooks("hooks.json", harness={"name": "my-agent", "version": "1.0"},
                     capabilities={"tool.before": {"effects": ["deny"]}}) as hooks:
        session = hooks.session(cwd="/repo")
        call = session.tool_call("Bash", {"command": "ls"}, kind="shell")
        result = await call.before()
        if result.stopped: ...  # refused: deny, flow stop or fail-closed failure

A result never grants anything: ``none`` and ``allow`` still go through the host's
own permissions and sandbox; this module knows no tool, rule or prompt.
"""

from __future__ import annotations

import copy
import os
import uuid
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from ahp_protocol.client._checks import check_declaration
from ahp_protocol.client._dispatcher import Dispatcher, envelope, new_id, now
from ahp_protocol.client._placement import anchored, load_anchored, registration_of
from ahp_protocol.client._result import Diagnostic, HookResult
from ahp_protocol.client.chain import ChainState
from ahp_protocol.wire.state import Candidate, Permission

if TYPE_CHECKING:
    from ahp_protocol.client.transports import Transport
    from ahp_protocol.client.uploads import Attachment
    from ahp_protocol.wire.registration import Hook, Registration

__all__ = [
    "FileChange",
    "Hooks",
    "InvalidEvent",
    "SessionHooks",
    "ToolCall",
    "UnknownToolKind",
    "anchored",
    "load_anchored",
    "message",
    "message_text",
    "new_id",
    "now",
    "text_part",
]

Change = Literal["created", "modified", "deleted"]
_OPERATIONS: dict[str, str] = {"created": "create", "modified": "update", "deleted": "remove"}


class InvalidEvent(ValueError):
    """An event this harness built breaks the wire contract (a bug in the harness); raised
    before anything is sent, the message names each JSON path and the rule."""


class UnknownToolKind(UserWarning):
    """A tool ``kind`` the draft does not define: accepted, but kind rules cannot match it."""


def text_part(text: str) -> dict[str, Any]:
    """A canonical text part (draft content model)."""
    return {
        "id": new_id("part"),
        "kind": "text",
        "mediaType": "text/plain",
        "selection": "body",
        "text": text,
    }


def message(role: str, text: str) -> dict[str, Any]:
    """A canonical message with one text part."""
    return {"id": new_id("msg"), "role": role, "parts": [text_part(text)]}


def message_text(messages: Sequence[Mapping[str, Any]]) -> str:
    """The text of canonical messages, parts joined (withheld parts are skipped)."""
    texts = []
    for msg in messages:
        for part in msg.get("parts", ()):
            if isinstance(part, Mapping) and isinstance(part.get("text"), str):
                texts.append(part["text"])
    return "\n".join(texts)


@dataclass(frozen=True, slots=True)
class FileChange:
    """One file a tool changed, with its text before and after when the host has it."""

    path: str
    change: Change
    before: str | None = None
    after: str | None = None

    def in_tool_after(self) -> dict[str, Any]:
        return self._texts({"path": self.path, "change": self.change})

    def in_file_changed(self) -> dict[str, Any]:
        operation = _OPERATIONS[self.change]
        return self._texts({"path": self.path, "operation": operation, "agentCaused": True})

    def _texts(self, out: dict[str, Any]) -> dict[str, Any]:
        """``out`` with the text before (unless created) and after (unless deleted), if known."""
        if self.change != "created" and self.before is not None:
            out["before"] = text_part(self.before)
        if self.change != "deleted" and self.after is not None:
            out["after"] = text_part(self.after)
        return out


def _identity(harness: Mapping[str, str]) -> dict[str, str]:
    if not isinstance(harness, Mapping) or not all(
        isinstance(harness.get(k), str) and harness.get(k) for k in ("name", "version")
    ):
        raise ValueError(
            'harness must be {"name": ..., "version": ...} with two non-empty strings '
            "(every event carries it)"
        )
    return {"name": harness["name"], "version": harness["version"]}


class Hooks:
    """AHP for one harness process: the registration's backends, the envelope, validation.

    ``registration``: a file path (its stdio backends run in its folder and a relative
    ``command`` is resolved there: :func:`load_anchored`), a registration document or a
    validated model; ``None`` runs no backend (every event settles with no effect).
    ``harness``: ``{"name", "version"}``. ``capabilities``: what the harness enforces,
    per interceptable event (wire form, e.g. ``{"tool.before": {"effects": ["deny"]}}``);
    declare only what your code honours. ``validate=False`` skips checking outgoing
    events: a malformed one then reaches backends, which fail it as invalid params.
    ``transport``: how each backend is reached (default: as the registration says); for
    tests, :func:`ahp_protocol.testing.memory_transports` answers in memory.
    ``authorize_configuration(hook, subscriptions)``: the host's consent to a
    configuration a backend answers to ``hooks/configuration`` (needed for one with an
    ``upload``; see :class:`~ahp_protocol.client.Dispatcher`). ``interaction(url)``: how
    this host shows a person an OAuth sign-in URL (``authorization_code_pkce``); without
    it such a registration is refused (a non-interactive host).

    Raises at construction: ``WireErrors`` (the registration, with JSON paths),
    :class:`~ahp_protocol.client.DeclarationError` (``capabilities``),
    :class:`~ahp_protocol.client.RegistrationError` (a credential that is not set, an
    event this harness does not intercept) or ``ValueError`` (``harness``).
    """

    def __init__(
        self,
        registration: Registration | Mapping[str, Any] | str | os.PathLike[str] | None,
        *,
        harness: Mapping[str, str],
        capabilities: Mapping[str, Mapping[str, Any]],
        source: str | None = None,
        environ: Mapping[str, str] | None = None,
        validate: bool = True,
        base_dir: str | os.PathLike[str] | None = None,
        transport: Callable[[Hook], Transport] | None = None,
        authorize_configuration: Callable[[Hook, Sequence[Any]], bool] | None = None,
        interaction: Callable[[str], Any] | None = None,
    ) -> None:
        self.harness = _identity(harness)
        self.source = source or f"urn:uuid:{uuid.uuid4()}"
        self.validate = validate
        self.dispatcher: Dispatcher | None = None
        if registration is None:
            self._declared = check_declaration(capabilities)
        else:  # the dispatcher checks the declaration (once)
            self.dispatcher = Dispatcher(
                registration_of(registration, base_dir),
                capabilities=capabilities,
                environ=environ,
                source=self.source,
                harness=self.harness,
                transport=transport,
                authorize_configuration=authorize_configuration,
                interaction=interaction,
            )
            self._declared = self.dispatcher.capabilities
        self._unknown_kinds: set[str] = set()

    async def __aenter__(self) -> Hooks:
        await self.start()
        return self

    async def __aexit__(self, *_exc: object) -> None:
        await self.aclose()

    async def start(self) -> None:
        """Discover subscriptions where the registration has none (nothing is spawned yet)."""
        if self.dispatcher is not None:
            await self.dispatcher.start()

    async def aclose(self) -> None:
        """Close every backend; no child process outlives this call."""
        if self.dispatcher is not None:
            await self.dispatcher.aclose()

    @property
    def configuration_diagnostics(self) -> list[Diagnostic]:
        """Backends skipped at start because ``hooks/configuration`` gave nothing usable."""
        return self.dispatcher.configuration_diagnostics if self.dispatcher else []

    def stderr(self, backend_id: str) -> str:
        """The tail of a stdio backend's stderr, for the operator (never for the model)."""
        return self.dispatcher.stderr_tail(backend_id) if self.dispatcher else ""

    def manifest(
        self, *, observed: Sequence[str] = (), gaps: Sequence[Mapping[str, str]] = ()
    ) -> dict[str, Any]:
        """The manifest ``session.start`` carries (and ``hooks/capabilities`` may answer):
        interception as declared, observation of ``observed``, what the dispatcher does
        (stdio and HTTP, bearer credentials from the environment, managed subscriptions
        fail-closed), and every standard event not emitted as a gap, then ``gaps``."""
        from ahp_protocol.wire import catalogue

        declared = self._declared
        events, missing = [], []
        for event in catalogue.EVENT_TYPES:
            modes = (["intercept"] if event in declared else []) + (
                ["observe"] if event in observed else []
            )
            if not modes:
                missing.append({"path": f"events.{event}", "reason": "not emitted"})
                continue
            entry: dict[str, Any] = {"event": event, "modes": modes}
            if event in declared:
                entry["capabilities"] = declared[event]
            events.append(entry)
        return {
            "events": events,
            "gaps": missing + [dict(g) for g in gaps],
            "transports": ["stdio", "http"],
            "authentication": ["bearer"],
            "toolPaths": ["native"],
            "contentCategories": ["text"],
            "limits": {"minTimeoutMs": 1, "maxTimeoutMs": 600000},
            "managedPolicy": {"scopes": ["user", "project", "managed"], "disableable": False},
            "correlationIdentityFields": ["event.id", "call.id", "session.id"],
        }

    def session(
        self,
        *,
        cwd: str,
        roots: Sequence[str] = (),
        session_id: str | None = None,
    ) -> SessionHooks:
        """The events of one session (``session.id``, ``cwd``, ``workspaceRoots``)."""
        return SessionHooks(self, session_id or new_id("sess"), cwd, list(roots or [cwd]))

    # -- sending -------------------------------------------------------------------

    def check(self, event: Mapping[str, Any]) -> None:
        """Raise :class:`InvalidEvent` unless ``event`` is a valid standard event."""
        from ahp_protocol.wire.errors import WireError, WireErrors
        from ahp_protocol.wire.events import parse_event

        try:
            parse_event(event)
        except (WireError, WireErrors) as exc:
            raise InvalidEvent(f"{event.get('type')} event is invalid: {exc}") from None

    def note_kind(self, kind: str | None) -> None:
        """Warn once per kind that the draft does not define (it can never match a rule)."""
        from ahp_protocol.wire.kinds import TOOL_KINDS, is_known_kind

        if kind is None or is_known_kind(kind) or kind in self._unknown_kinds:
            return
        self._unknown_kinds.add(kind)
        warnings.warn(
            f"tool kind {kind!r} is not one the draft defines ({', '.join(TOOL_KINDS)}): "
            "it is sent as is, but no backend rule written for a standard kind matches it",
            UnknownToolKind,
            stacklevel=3,
        )

    async def send(
        self,
        event: Mapping[str, Any],
        *,
        initial_permission: Permission = "none",
        attachments: Sequence[Attachment] = (),
    ) -> HookResult:
        """Run one complete event: intercepted where subscribed, else observed.

        ``attachments`` are the bytes of the event's attachment parts (each
        :meth:`~ahp_protocol.client.uploads.Attachment.part` is in the event): uploaded
        for each subscription that selects them and has ``upload``, before it is sent.

        Always a settled result (for an event nobody intercepts: ``initial_permission``,
        the event unchanged, observation diagnostics only). With ``validate`` on, an event
        some backend will receive is checked first (:class:`InvalidEvent`, nothing sent);
        one nobody receives is not checked (:meth:`check` checks it anyway).
        """
        event_type = str(event.get("type"))
        dispatcher = self.dispatcher
        diagnostics: list[Diagnostic] = []
        if dispatcher is not None:
            await dispatcher.start()
            intercepted = dispatcher.intercepts(event_type)
            if intercepted or dispatcher.observes(event_type):
                if self.validate:
                    self.check(event)
                if intercepted:
                    return await dispatcher.intercept(
                        event, initial_permission=initial_permission, attachments=attachments
                    )
                diagnostics = await dispatcher.observe(event, attachments=attachments)
        state = ChainState(event=dict(event), permission=initial_permission)
        return HookResult.settle(event_type, state, diagnostics)


@dataclass(eq=False, repr=False)
class SessionHooks:
    """One session's envelope and events; turns are opened and closed here."""

    hooks: Hooks
    id: str
    cwd: str
    roots: list[str]
    turn_id: str | None = None

    def event(self, event_type: str, **fields: Any) -> dict[str, Any]:
        """A complete event of this session (and of the open turn, if any); not sent."""
        event = envelope(event_type, self.hooks.source, dict(self.hooks.harness))
        event["session"] = {"id": self.id, "cwd": self.cwd, "workspaceRoots": list(self.roots)}
        if self.turn_id is not None:
            event["turn"] = {"id": self.turn_id}
        event.update(fields)
        return event

    async def send(self, event_type: str, **fields: Any) -> HookResult:
        """Build and send one event of this session (any standard event type)."""
        return await self.hooks.send(self.event(event_type, **fields))

    async def start(
        self,
        *,
        permission_mode: str,
        trigger: str = "startup",
        manifest: Mapping[str, Any] | None = None,
        items: Sequence[Mapping[str, Any]] = (),
    ) -> HookResult:
        """``session.start`` (``manifest``: default :meth:`Hooks.manifest`); its ``inject``
        effects are context for the model."""
        return await self.send(
            "session.start",
            trigger=trigger,
            permissionMode=permission_mode,
            manifest=dict(manifest if manifest is not None else self.hooks.manifest()),
            items=list(items),
        )

    async def end(
        self,
        *,
        outcome: Literal["completed", "cancelled", "error", "unknown"] = "completed",
        reason: str = "finished",
    ) -> HookResult:
        """``session.end`` (an open turn is closed first: session events carry no turn)."""
        self.turn_id = None
        return await self.send("session.end", outcome=outcome, reason=reason)

    async def turn_start(
        self, items: Sequence[Mapping[str, Any]], *, trigger: str = "user"
    ) -> HookResult:
        """Open a turn (a new ``turn.id`` for every event until :meth:`turn_end`), then
        send ``turn.start``; a stopped result means the turn must not run."""
        self.turn_id = new_id("turn")
        return await self.send("turn.start", trigger=trigger, items=list(items))

    async def turn_end(
        self,
        *,
        outcome: str = "completed",
        items: Sequence[Mapping[str, Any]] = (),
        continuation_count: int = 0,
    ) -> HookResult:
        """Send ``turn.end`` and close the turn."""
        try:
            return await self.send(
                "turn.end",
                outcome=outcome,
                continuationCount=continuation_count,
                items=[dict(m) for m in items],
            )
        finally:
            self.turn_id = None

    def tool_call(
        self,
        name: str,
        input: Any,
        *,
        kind: str | None,
        call_id: str | None = None,
        origin: str = "native",
        path: str = "native",
        mcp: Mapping[str, Any] | None = None,
    ) -> ToolCall:
        """One tool call's events, all with the same ``call.id``; ``kind`` is one of
        :data:`ahp_protocol.wire.kinds.TOOL_KINDS` (any other is sent, with a warning).
        An MCP server's tool: ``origin`` ``"mcp"``, the ``path`` it runs through, and
        ``mcp`` its identity (``tool.mcp``: server, toolName, provenance, connection with
        credentials already stripped), carried by every event of the call."""
        self.hooks.note_kind(kind)
        call_id = call_id or new_id("call")
        return ToolCall(self, call_id, name, kind, input, origin, path, mcp=mcp)


_SAME: Any = object()


@dataclass(eq=False, repr=False)
class ToolCall:
    """``tool.before`` → ``tool.permission.request``/``resolved`` → ``tool.after`` of one call.

    ``input`` is the effective input so far (accepted ``modify`` effects applied);
    ``permission`` what the last ``tool.before`` settled; ``candidate`` its supplied
    result (AHP ``return``), dropped when the input changes.
    """

    session: SessionHooks
    id: str
    name: str
    kind: str | None
    input: Any
    origin: str
    path: str
    mcp: Mapping[str, Any] | None = None
    permission: Permission = "none"
    candidate: Candidate | None = None
    file_changed: HookResult | None = None
    _judged: bool = field(default=False, init=False)

    def event(self, event_type: str, **fields: Any) -> dict[str, Any]:
        """A complete event of this call (``tool`` with the current input, ``call``,
        ``path``, the session's envelope) with ``fields`` added; built, not sent."""
        tool: dict[str, Any] = {"name": self.name, "input": self.input, "origin": self.origin}
        if self.kind is not None:
            tool["kind"] = self.kind
        if self.mcp is not None:
            tool["mcp"] = copy.deepcopy(dict(self.mcp))
        call = {"id": self.id}
        return self.session.event(event_type, tool=tool, call=call, path=self.path, **fields)

    async def _send(
        self,
        event_type: str,
        *,
        initial_permission: Permission = "none",
        attachments: Sequence[Attachment] = (),
        **fields: Any,
    ) -> HookResult:
        event = self.event(event_type, **fields)
        return await self.session.hooks.send(
            event, initial_permission=initial_permission, attachments=attachments
        )

    async def before(self, input: Any = _SAME) -> HookResult:
        """``tool.before`` for ``input`` (default: the call's current input).

        Run it again when a backend changed the input at ``tool.permission.request``: a
        changed input is a new operation, seeded with what the first run settled (draft
        §5.4): its ``ask`` persists, its ``allow`` does not (approval is bound to the
        arguments it saw), its supplied result is dropped. ``input``, ``permission`` and
        ``candidate`` become what this run settled.
        """
        if input is not _SAME:
            self.input = input
        seed: Permission = "none"
        if self._judged:
            seed = "none" if self.permission == "allow" else self.permission
        self._judged = True
        result = await self._send("tool.before", initial_permission=seed)
        self.permission = result.permission
        self.candidate = result.candidate
        if not result.stopped:
            self.input = result.tool_input
        return result

    async def permission_request(
        self, *, suggestions: Sequence[Mapping[str, Any]] = (), sandbox_bypass: bool = False
    ) -> HookResult:
        """``tool.permission.request``, before the host asks anyone. A backend may deny,
        stop, ``allow`` (answering only an ordinary prompt) or change the input:
        ``result.tool_input != call.input`` means :meth:`before` must judge it again."""
        return await self._send(
            "tool.permission.request", suggestions=list(suggestions), sandboxBypass=sandbox_bypass
        )

    async def permission_resolved(
        self, decision: Literal["allow", "deny"], decided_by: str
    ) -> HookResult:
        """``tool.permission.resolved``: who answered the prompt (observed)."""
        return await self._send("tool.permission.resolved", decision=decision, decidedBy=decided_by)

    async def after_denied(self) -> HookResult:
        """``tool.after`` of a call that did not run (``outcome: denied``, skipped/policy)."""
        return await self._send(
            "tool.after",
            outcome="denied",
            execution={"status": "skipped", "reason": "policy"},
            items=[],
        )

    async def after(
        self,
        outcome: Literal["ok", "error", "cancelled", "timeout"],
        output: str | None = None,
        *,
        supplied: bool = False,
        duration_ms: float | None = None,
        error: str | None = None,
        error_class: str = "tool_error",
        file_changes: Sequence[FileChange] = (),
        attachments: Sequence[Attachment] = (),
    ) -> HookResult:
        """``tool.after`` of a call that ran (or whose result a backend supplied), then
        ``file.changed`` (observed; its result kept as :attr:`file_changed`) for
        ``file_changes`` of an executed call.

        ``output`` is the text the model would see; a backend may ``modify`` it:
        read ``message_text(result.event["items"])`` when ``result.event_changed``.
        ``attachments`` (binary media the tool produced) follow the text as parts of the
        same tool message, uploaded where a subscription selects them.
        """
        fields: dict[str, Any] = {"outcome": outcome}
        items = [message("tool", output)] if output is not None else []
        if attachments:
            if not items:
                items = [{"id": new_id("msg"), "role": "tool", "parts": []}]
            items[0]["parts"] += [a.part() for a in attachments]
        fields["items"] = items
        if supplied:
            fields["execution"] = {"status": "skipped", "reason": "supplied_result"}
        else:
            fields["execution"] = {"status": "executed"}
            if duration_ms is not None:
                fields["durationMs"] = round(duration_ms, 3)
            if file_changes:
                fields["fileChanges"] = [c.in_tool_after() for c in file_changes]
        if outcome == "error":
            fields["error"] = {"message": error or "tool failed", "class": error_class}
        result = await self._send("tool.after", attachments=attachments, **fields)
        if file_changes and not supplied:
            self.file_changed = await self.session.send(
                "file.changed",
                changes=[c.in_file_changed() for c in file_changes],
                parentEventId=result.event["id"],
            )
        return result

"""The event envelope and the draft's 32 standard events, as strict wire models.

Owns the shape of every event (draft §3, ``event.schema.json`` and the
schemas it composes): the envelope (``id, source, type, time, harness`` plus
the optional common fields), one model per standard event with its required
fields, closed nested objects and the conditional rules the schemas state
(tool outcome/execution/error consistency, ``resumedFrom`` for ``clear`` and
``fork``, fields an event forbids, ...), the tool detail of §3.3, and
:func:`parse_event`, which picks the model by ``type``.

Envelopes are open: unknown top-level fields are kept and written back by
:meth:`Event.to_wire` unchanged. Nested protocol objects the schemas close
(``harness``, ``call``, ``tool``, ``execution``, ...) are closed, and so is
``turn`` on the 15 execution events (turn, model, permission, progress,
batch, compact), as their schema says. ``session.start.manifest`` is checked
by :func:`ahp_protocol.wire.capabilities.parse_manifest`. Parsing is
strict and never coerces. A missing, unknown or removed ``type`` raises
:class:`UnsupportedEvent` (JSON-RPC -32002 at the server); every other
problem raises :class:`~ahp_protocol.wire.errors.WireErrors` with paths
relative to the event (``tool.input``, ``call.id``). Reasons are fixed texts;
they never quote input values.

No I/O, and no work at import beyond creating the classes: models build on
first use (``defer_build``). Content shapes live in
:mod:`ahp_protocol.wire.content`; which events exist and which can be
intercepted, in :mod:`ahp_protocol.wire.catalogue`.
"""

import datetime as _dt
import re
from collections.abc import Mapping
from functools import cache
from typing import Annotated, Any, ClassVar, Final, Literal, Self, TypeAlias

from pydantic import (
    AfterValidator,
    ConfigDict,
    Discriminator,
    Field,
    PlainValidator,
    ValidationError,
    field_validator,
    model_validator,
)

from ahp_protocol.wire.catalogue import REMOVED
from ahp_protocol.wire.content import (
    WIRE_CONTEXT,
    AssistantMessage,
    ClosedModel,
    ContentItem,
    Message,
    NonEmptyStr,
    NonNegativeInt,
    NonNegativeNumber,
    Omittable,
    OpenModel,
    PositiveInt,
    TextPart,
    UserMessage,
    WireConstants,
    native_pattern,
    rule,
    to_wire_errors,
    union_tag,
    unknown_stay_unknown,
)
from ahp_protocol.wire.errors import WireError, WireErrors

__all__ = [
    "EVENT_MODELS",
    "TIME_PATTERN",
    "URI_PATTERN",
    "Agent",
    "AppliedConfigChange",
    "Attempt",
    "AttemptUsage",
    "Attention",
    "Batch",
    "BatchCall",
    "ChangedFile",
    "ClosedTurn",
    "ConfigChange",
    "ConfigChangeAfter",
    "ConfigChangeBefore",
    "Connection",
    "ConnectionGap",
    "ContextCompactAfter",
    "ContextCompactBefore",
    "Cost",
    "Currency",
    "ElicitationRequest",
    "ElicitationResult",
    "ErrorInfo",
    "Event",
    "Executed",
    "Execution",
    "ExtensionConnection",
    "Extensions",
    "Failure",
    "FileChange",
    "FileChanged",
    "Gap",
    "Harness",
    "HookFailure",
    "HttpConnection",
    "HttpUrl",
    "IdOnly",
    "InboundMessage",
    "JsonObject",
    "Mcp",
    "McpServer",
    "ModelError",
    "ModelRef",
    "ModelRequestBefore",
    "ModelResponseAfter",
    "ModelSwitchAfter",
    "ModelSwitchBefore",
    "OutboundMessage",
    "Pricing",
    "Ref",
    "Session",
    "SessionEnd",
    "SessionStart",
    "Skipped",
    "Source",
    "SseConnection",
    "StdioConnection",
    "SuppliedResult",
    "Task",
    "TaskChangeAfter",
    "TaskChangeBefore",
    "Time",
    "TokenCounts",
    "Tool",
    "ToolAfter",
    "ToolBatchAfter",
    "ToolBefore",
    "ToolPermissionRequest",
    "ToolPermissionResolved",
    "ToolProgress",
    "Turn",
    "TurnEnd",
    "TurnFinishBefore",
    "TurnOutcome",
    "TurnProgress",
    "TurnStart",
    "TurnUsage",
    "UnsupportedEvent",
    "Usage",
    "UserAttention",
    "UserElicitationRequest",
    "UserElicitationResult",
    "UserMessageInbound",
    "UserMessageOutbound",
    "Workspace",
    "WorkspaceChange",
    "WorkspaceChangeAfter",
    "WorkspaceChangeBefore",
    "is_uri",
    "parse_event",
]

# --------------------------------------------------------------------------- scalars

_TIME_SHAPE: Final = (
    r"([0-9]{4})-([0-9]{2})-([0-9]{2})[Tt]([0-9]{2}):([0-9]{2}):([0-9]{2})(\.[0-9]+)?"
    r"(?:[Zz]|[+-]([0-9]{2}):([0-9]{2}))"
)
_LEAP_YEAR = r"(?:[0-9]{2}(?:0[48]|[2468][048]|[13579][26])|(?:0[48]|[2468][048]|[13579][26])00)"
_DATE = (
    r"(?:(?:[1-9][0-9]{3}|0[1-9][0-9]{2}|00[1-9][0-9]|000[1-9])-"  # years 0001-9999
    r"(?:(?:0[1-9]|1[0-2])-(?:0[1-9]|1[0-9]|2[0-8])"
    r"|(?:0[13-9]|1[0-2])-(?:29|30)"
    r"|(?:0[13578]|1[02])-31)"
    rf"|{_LEAP_YEAR}-02-29)"
)
_HOURS, _SIXTY = r"(?:[01][0-9]|2[0-3])", r"[0-5][0-9]"
TIME_PATTERN: Final = (
    rf"^{_DATE}[Tt]{_HOURS}:{_SIXTY}:{_SIXTY}(?:\.[0-9]+)?(?:[Zz]|[+-]{_HOURS}:{_SIXTY})$"
)
"""RFC 3339 ``date-time``, strictly, as one anchored pattern: a real calendar date
(proleptic Gregorian, years 0001-9999), a real time of day (no leap second) and a
UTC offset of at most 23:59. Checked by pydantic-core."""


def _time_reason(value: object) -> str:
    """Why ``value`` is not a :data:`TIME_PATTERN` date-time (a fixed text)."""
    match = _compiled(_TIME_SHAPE).fullmatch(value) if isinstance(value, str) else None
    if match is None:
        return "must be an RFC 3339 date-time (YYYY-MM-DDTHH:MM:SS[.frac](Z|+HH:MM))"
    year, month, day, hour, minute, second = (int(g) for g in match.groups()[:6])
    try:
        _dt.datetime(year, month, day, hour, minute, second)
    except ValueError:
        return "must be a real calendar date and time of day"
    return "has an invalid UTC offset"


_PCHAR = r"(?:[A-Za-z0-9\-._~!$&'()*+,;=:@]|%[0-9A-Fa-f]{2})"
_URI: Final = (
    rf"[A-Za-z][A-Za-z0-9+.\-]*:"  # scheme
    rf"(?://(?:{_PCHAR}|[\[\]])*)?"  # authority (brackets for IP literals)
    rf"(?:/|{_PCHAR})*"  # path
    rf"(?:\?(?:{_PCHAR}|[/?])*)?"  # query
    rf"(?:#(?:{_PCHAR}|[/?])*)?"  # fragment
)


@cache
def _compiled(pattern: str) -> re.Pattern[str]:
    """A Python regex compiled on first use (import stays cheap)."""
    return re.compile(pattern)


def is_uri(value: str) -> bool:
    """An RFC 3986 URI with a scheme (``urn:uuid:…``, ``https://host/path``)."""
    return _compiled(_URI).fullmatch(value) is not None


URI_PATTERN: Final = f"^(?:{_URI})$"
""":func:`is_uri` as one anchored pattern, checked by pydantic-core."""


def _source_reason(value: object) -> str:
    return "must be an absolute URI (scheme:rest, RFC 3986)"


def _http_url(value: str) -> str:
    if not (is_uri(value) and value.startswith(("http://", "https://"))):
        raise rule("must be an http:// or https:// URL")
    return value


_EXTENSION_KEY = re.compile(r"(?:[A-Za-z][A-Za-z0-9_-]*\.)+[A-Za-z][A-Za-z0-9_-]*")


def _extensions(value: dict[str, Any]) -> dict[str, Any]:
    for key in value:
        if not _EXTENSION_KEY.fullmatch(key):
            raise rule("keys must be reverse-DNS names (for example com.example.flag)")
    return value


def _string_or_int(value: object) -> str | int:
    if isinstance(value, str) and value:
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    raise rule("must be a non-empty string or an integer")


def _currency(value: str) -> str:
    if not re.fullmatch(r"[A-Z]{3}", value):
        raise rule("must be an ISO 4217 code: three uppercase letters")
    return value


Time: TypeAlias = Annotated[str, native_pattern(TIME_PATTERN, _time_reason)]
Source: TypeAlias = Annotated[str, native_pattern(URI_PATTERN, _source_reason)]
HttpUrl: TypeAlias = Annotated[str, AfterValidator(_http_url)]
Extensions: TypeAlias = Annotated[dict[str, Any], AfterValidator(_extensions)]
Currency: TypeAlias = Annotated[str, AfterValidator(_currency)]
JsonObject: TypeAlias = dict[str, Any]

# --------------------------------------------------------------------------- common objects


class Harness(ClosedModel):
    """``{name, version}`` of the harness that emitted the event."""

    name: NonEmptyStr
    version: NonEmptyStr


class Agent(OpenModel):
    id: NonEmptyStr
    type: Omittable[str] = None


class Session(OpenModel):
    """``session``: open; ``counters`` omitted means unknown, not zero."""

    id: NonEmptyStr
    cwd: Omittable[str] = None
    workspace_roots: Omittable[list[str]] = None
    model: Omittable[str] = None
    agent: Omittable[Agent] = None
    synthesized: Omittable[bool] = None
    counters: Omittable[dict[str, NonNegativeInt]] = None


class Turn(OpenModel):
    id: NonEmptyStr
    synthesized: Omittable[bool] = None


class ClosedTurn(Turn):
    """``turn`` on the execution events (turn, model, permission, progress, batch, compact).

    Closed, unlike the envelope's ``turn`` elsewhere: so the schemas say.
    """

    model_config = ConfigDict(extra="forbid")


class Gap(OpenModel):
    """An honest marker for a field the harness cannot fill: ``{path, reason}``."""

    path: NonEmptyStr
    reason: NonEmptyStr


class Ref(ClosedModel):
    """A closed identity reference ``{id, synthesized?}`` (``call``, ``resumedFrom``, ...)."""

    id: NonEmptyStr
    synthesized: Omittable[bool] = None


class IdOnly(ClosedModel):
    id: NonEmptyStr


# --------------------------------------------------------------------------- tool detail


class McpServer(ClosedModel):
    id: NonEmptyStr
    name: Omittable[NonEmptyStr] = None


class ConnectionGap(ClosedModel):
    path: NonEmptyStr
    reason: NonEmptyStr


class _Connection(WireConstants):
    """A connection names where the server is, or says in ``gaps`` what it cannot tell."""

    _always = frozenset({"transport"})
    _located: ClassVar[tuple[str, ...]] = ()

    gaps: Omittable[Annotated[list[ConnectionGap], Field(min_length=1)]] = None

    @model_validator(mode="after")
    def _located_or_gap(self) -> Self:
        gapped = {g.path for g in self.gaps or ()}
        for name in self._located:
            field = type(self).model_fields[name]
            wire = field.alias or name
            if name not in self.model_fields_set and wire not in gapped:
                raise rule(f'{wire} is required, or a gaps entry whose path is "{wire}"')
        return self


class HttpConnection(_Connection):
    _located = ("url",)
    transport: Literal["http"] = "http"
    url: Omittable[HttpUrl] = None


class SseConnection(_Connection):
    _located = ("url",)
    transport: Literal["sse"] = "sse"
    url: Omittable[HttpUrl] = None


class StdioConnection(_Connection):
    _located = ("command", "args", "cwd")
    transport: Literal["stdio"] = "stdio"
    command: Omittable[NonEmptyStr] = None
    args: Omittable[list[str]] = None
    cwd: Omittable[NonEmptyStr] = None


def _extension_transport(value: str) -> str:
    if not re.match(r"_.", value):
        raise rule('an extension transport starts with "_"')
    return value


class ExtensionConnection(_Connection):
    """An extension transport (``_unix``, ...): ``addressForm`` and ``address``."""

    _located = ("address_form", "address")
    transport: Annotated[str, AfterValidator(_extension_transport)]
    address_form: Omittable[NonEmptyStr] = None
    address: Omittable[NonEmptyStr] = None


def _connection_tag(value: Any) -> str | None:
    transport = (
        value.get("transport") if isinstance(value, Mapping) else getattr(value, "transport", None)
    )
    if transport in ("http", "sse", "stdio"):
        return f"connection:{transport}"
    if isinstance(transport, str) and transport.startswith("_"):
        return "connection:extension"
    return None


Connection: TypeAlias = Annotated[
    Annotated[HttpConnection, union_tag("connection:http")]
    | Annotated[SseConnection, union_tag("connection:sse")]
    | Annotated[StdioConnection, union_tag("connection:stdio")]
    | Annotated[ExtensionConnection, union_tag("connection:extension")],
    Discriminator(
        _connection_tag,
        custom_error_type="invalid_connection",
        custom_error_message='transport must be "http", "sse", "stdio" or an extension "_name"',
    ),
]


class Mcp(ClosedModel):
    """Where an MCP tool lives; credentials, userinfo, headers and secret args are stripped."""

    server: McpServer
    tool_name: NonEmptyStr
    provenance: Literal["runtime", "inferred"]
    connection: Connection


class Tool(ClosedModel):
    """``tool``: the name verbatim, the parsed input object (never a string), the origin."""

    name: NonEmptyStr
    kind: Omittable[NonEmptyStr] = None
    input: JsonObject
    origin: Literal["native", "mcp"]
    mcp: Omittable[Mcp] = None

    def model_post_init(self, context: Any, /) -> None:
        # A rule checked here rather than in an after-validator: pydantic-core calls
        # this directly (much cheaper) and reports what it raises like a validator's
        # error. Being a hook, it also runs for ``model_construct``.
        if self.origin == "mcp" and self.mcp is None:
            raise rule('mcp is required when origin is "mcp"')
        if self.origin != "mcp" and self.mcp is not None:
            raise rule('is allowed only when origin is "mcp"', "mcp")


class Batch(ClosedModel):
    """``batch`` on a tool call: ``{id, callIds[≥1, unique]}``."""

    id: NonEmptyStr
    call_ids: Annotated[list[NonEmptyStr], Field(min_length=1)]
    synthesized: Omittable[bool] = None

    @field_validator("call_ids")
    @classmethod
    def _unique(cls, value: list[str]) -> list[str]:
        if len(set(value)) != len(value):
            raise rule("call ids must be unique")
        return value


class Executed(WireConstants):
    _always = frozenset({"status"})
    status: Literal["executed"] = "executed"


class SuppliedResult(WireConstants):
    """Original execution skipped because a candidate result was supplied."""

    _always = frozenset({"status", "reason"})
    status: Literal["skipped"] = "skipped"
    reason: Literal["supplied_result"] = "supplied_result"


class Skipped(WireConstants):
    _always = frozenset({"status"})
    status: Literal["skipped"] = "skipped"
    reason: Literal["policy", "cancelled", "timeout", "other"]
    detail: Omittable[NonEmptyStr] = None


def _execution_tag(value: Any) -> str | None:
    if isinstance(value, Mapping):
        status, reason = value.get("status"), value.get("reason")
    else:
        status, reason = getattr(value, "status", None), getattr(value, "reason", None)
    if status == "executed":
        return "execution:executed"
    if status == "skipped":
        return "execution:supplied" if reason == "supplied_result" else "execution:skipped"
    return None


Execution: TypeAlias = Annotated[
    Annotated[Executed, union_tag("execution:executed")]
    | Annotated[SuppliedResult, union_tag("execution:supplied")]
    | Annotated[Skipped, union_tag("execution:skipped")],
    Discriminator(
        _execution_tag,
        custom_error_type="invalid_execution",
        custom_error_message='status must be "executed" or "skipped"',
    ),
]


def _is_skipped(execution: Executed | SuppliedResult | Skipped) -> bool:
    return execution.status == "skipped"


class ErrorInfo(ClosedModel):
    """``error``: ``{message, class, code?, status?, native?}``."""

    message: NonEmptyStr
    class_: NonEmptyStr = Field(alias="class")
    code: Omittable[NonEmptyStr] = None
    status: Omittable[Annotated[str | int, PlainValidator(_string_or_int)]] = None
    native: Any = None


class Cost(ClosedModel):
    amount: NonNegativeNumber
    currency: Currency
    basis: Literal["billed", "reported", "estimated"]


class Usage(ClosedModel):
    """Token usage; never fabricated for supplied or skipped work."""

    kind: Literal["amount", "total"]
    scope: Literal["attempt", "turn"]
    completeness: Literal["complete", "partial", "unknown"]
    provenance: Literal["provider", "estimate", "mixed"]
    input_tokens: Omittable[NonNegativeInt] = None
    output_tokens: Omittable[NonNegativeInt] = None
    cache_read_tokens: Omittable[NonNegativeInt] = None
    cache_write_tokens: Omittable[NonNegativeInt] = None
    cost: Omittable[Cost] = None


class AttemptUsage(Usage):
    """Usage of one model attempt: an amount, from the provider or an estimate."""

    @model_validator(mode="after")
    def _attempt(self) -> Self:
        if self.kind != "amount":
            raise rule('must be "amount" for an attempt', "kind")
        if self.scope != "attempt":
            raise rule('must be "attempt" for an attempt', "scope")
        if self.provenance == "mixed":
            raise rule('must be "provider" or "estimate" for an attempt', "provenance")
        return self


class TurnUsage(Usage):
    """Usage of a whole turn: a total."""

    @model_validator(mode="after")
    def _turn(self) -> Self:
        if self.kind != "total":
            raise rule('must be "total" for a turn', "kind")
        if self.scope != "turn":
            raise rule('must be "turn" for a turn', "scope")
        return self


class FileChange(ClosedModel):
    """One file a tool changed: ``moved`` needs ``previousPath``; no ``before`` when created."""

    path: NonEmptyStr
    change: Literal["created", "modified", "deleted", "moved"]
    previous_path: Omittable[NonEmptyStr] = None
    before: Omittable[ContentItem] = None
    after: Omittable[ContentItem] = None

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        if self.change == "moved" and self.previous_path is None:
            raise rule('previousPath is required when change is "moved"')
        if self.change == "created" and self.before is not None:
            raise rule('is not allowed when change is "created"', "before")
        if self.change == "deleted" and self.after is not None:
            raise rule('is not allowed when change is "deleted"', "after")
        return self


# --------------------------------------------------------------------------- other payloads


class ModelRef(ClosedModel):
    id: NonEmptyStr
    provider: NonEmptyStr


class Attempt(ClosedModel):
    id: NonEmptyStr
    number: PositiveInt
    synthesized: Omittable[bool] = None


class Pricing(ClosedModel):
    currency: Currency
    input_per_million_tokens: Omittable[NonNegativeNumber] = None
    output_per_million_tokens: Omittable[NonNegativeNumber] = None


class TokenCounts(ClosedModel):
    before: Omittable[NonNegativeInt] = None
    after: Omittable[NonNegativeInt] = None


class BatchCall(ClosedModel):
    """One resolved call in ``tool.batch.after.calls``."""

    call: Ref
    tool: Tool
    path: NonEmptyStr
    batch: Omittable[Batch] = None
    outcome: Literal["ok", "error", "denied", "cancelled", "timeout"]
    execution: Execution

    @model_validator(mode="after")
    def _denied(self) -> Self:
        _check_denied(self.outcome, self.execution)
        return self


def _check_denied(outcome: str, execution: Executed | SuppliedResult | Skipped) -> None:
    if outcome == "denied" and not (
        isinstance(execution, Skipped) and execution.reason == "policy"
    ):
        raise rule(
            'must be {"status": "skipped", "reason": "policy"} when outcome is "denied"',
            "execution",
        )


class ConfigChange(ClosedModel):
    source: NonEmptyStr
    scope: NonEmptyStr
    settings: list[NonEmptyStr]
    summary: NonEmptyStr
    path: Omittable[NonEmptyStr] = None


class AppliedConfigChange(ConfigChange):
    mcp_servers: Omittable[list[JsonObject]] = None


class Task(ClosedModel):
    """``task``: ``change``/``prior`` stay open objects."""

    id: NonEmptyStr
    operation: Literal["create", "update", "remove"]
    change: JsonObject
    prior: Omittable[JsonObject] = None
    synthesized: Omittable[bool] = None


class WorkspaceChange(ClosedModel):
    """``{cwd?, workspaceRoots?}`` with at least one of them."""

    cwd: Omittable[NonEmptyStr] = None
    workspace_roots: Omittable[list[NonEmptyStr]] = None

    @model_validator(mode="after")
    def _not_empty(self) -> Self:
        if not self.model_fields_set:
            raise rule("must have cwd or workspaceRoots")
        roots = self.workspace_roots or []
        if len(set(roots)) != len(roots):
            raise rule("must not repeat a root", "workspaceRoots")
        return self


class Workspace(ClosedModel):
    kind: Literal["cwd", "roots", "switch"]
    change: WorkspaceChange
    prior: Omittable[WorkspaceChange] = None
    reason: Omittable[str] = None


class ChangedFile(ClosedModel):
    """One entry of ``file.changed.changes``; snapshots are content parts."""

    path: NonEmptyStr
    operation: Literal["create", "update", "remove"]
    agent_caused: bool
    before: Omittable[ContentItem] = None
    after: Omittable[ContentItem] = None


class Attention(ClosedModel):
    kind: NonEmptyStr
    message: list[TextPart]
    title: list[TextPart]


class ElicitationRequest(ClosedModel):
    """``request`` is one text part holding the serialized MCP ``elicitation/create`` params."""

    server: NonEmptyStr
    mode: Literal["form", "url"]
    request: Omittable[TextPart] = None


class ElicitationResult(ClosedModel):
    """``result`` is one text part holding the serialized MCP ``ElicitResult``."""

    server: NonEmptyStr
    mode: Literal["form", "url"]
    action: Literal["accept", "decline", "cancel"]
    result: Omittable[TextPart] = None


class InboundMessage(ClosedModel):
    channel: NonEmptyStr
    sender: NonEmptyStr
    messages: list[UserMessage]


class OutboundMessage(ClosedModel):
    channel: NonEmptyStr
    messages: list[AssistantMessage]


class Failure(ClosedModel):
    backend_id: NonEmptyStr
    reason: NonEmptyStr
    policy: Literal["fail-open", "fail-closed"]


# --------------------------------------------------------------------------- envelope


class Event(OpenModel):
    """The envelope every event shares. Open: unknown fields are kept and round-trip.

    Subclasses pin ``type`` and add the event's own fields; ``_forbidden``
    lists fields the event must not carry even as unknown fields. ``type`` has
    its event's default in Python, is required in wire JSON (:func:`parse_event`
    checks it first) and is always written by :meth:`to_wire`.
    """

    _always = frozenset({"type"})
    _forbidden: ClassVar[tuple[str, ...]] = ()

    id: NonEmptyStr
    source: Source
    type: str
    time: Time
    harness: Harness
    session: Omittable[Session] = None
    turn: Omittable[Turn] = None
    parent_event_id: Omittable[NonEmptyStr] = None
    gaps: Omittable[list[Gap]] = None
    native: Any = None
    extensions: Omittable[Extensions] = None
    synthesized: Omittable[bool] = None

    def model_post_init(self, context: Any, /) -> None:
        # ``type`` is always written; the forbidden-field rule is checked here rather
        # than in an after-validator (see ``Tool.model_post_init``).
        self.__pydantic_fields_set__.add("type")
        extra = self.__pydantic_extra__
        if extra:
            for name in self._forbidden:
                if name in extra:
                    raise rule(f"is not allowed on {self.type}", name)


class _ToolEvent(Event):
    call: Ref
    tool: Tool
    path: NonEmptyStr
    batch: Omittable[Batch] = None


# ----- tool


class ToolBefore(_ToolEvent):
    """``tool.before``: before side effects and the host permission stage."""

    _forbidden = ("outcome", "execution", "durationMs", "fileChanges")
    type: Literal["tool.before"] = "tool.before"
    items: Omittable[list[ContentItem]] = None


class ToolAfter(_ToolEvent):
    """``tool.after``: exactly one per resolved call (executed, denied or supplied)."""

    type: Literal["tool.after"] = "tool.after"
    outcome: Literal["ok", "error", "denied", "cancelled", "timeout"]
    execution: Execution
    items: list[Message]
    error: Omittable[ErrorInfo] = None
    duration_ms: Omittable[NonNegativeNumber] = None
    file_changes: Omittable[list[FileChange]] = None

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        if self.outcome == "error" and self.error is None:
            raise rule('error is required when outcome is "error"')
        if self.outcome != "error" and self.error is not None:
            raise rule('is allowed only when outcome is "error"', "error")
        _check_denied(self.outcome, self.execution)
        if _is_skipped(self.execution):
            if self.duration_ms is not None:
                raise rule("is not allowed when execution is skipped", "durationMs")
            if self.file_changes is not None:
                raise rule("is not allowed when execution is skipped", "fileChanges")
        return self


class ToolPermissionRequest(_ToolEvent):
    """``tool.permission.request``: the host is about to prompt for this call."""

    _forbidden = ("decision", "decidedBy", "outcome", "execution")
    type: Literal["tool.permission.request"] = "tool.permission.request"
    turn: Omittable[ClosedTurn] = None
    suggestions: list[JsonObject]
    sandbox_bypass: bool
    items: Omittable[list[ContentItem]] = None


class ToolPermissionResolved(_ToolEvent):
    type: Literal["tool.permission.resolved"] = "tool.permission.resolved"
    turn: Omittable[ClosedTurn] = None
    decision: Literal["allow", "deny"]
    decided_by: Literal["user", "policy", "hook", "auto", "classifier"]
    items: Omittable[list[ContentItem]] = None


class ToolProgress(_ToolEvent):
    _forbidden = ("outcome", "execution")
    type: Literal["tool.progress"] = "tool.progress"
    turn: Omittable[ClosedTurn] = None
    partial_output: Message
    backgrounded: bool
    items: Omittable[list[ContentItem]] = None


class ToolBatchAfter(Event):
    type: Literal["tool.batch.after"] = "tool.batch.after"
    turn: Omittable[ClosedTurn] = None
    batch: Ref
    calls: Annotated[list[BatchCall], Field(min_length=1)]
    items: Omittable[list[ContentItem]] = None


# ----- session


class SessionStart(Event):
    _forbidden = ("tool", "outcome")
    type: Literal["session.start"] = "session.start"
    session: Session
    trigger: Literal["startup", "resume", "clear", "compact", "fork"]
    resumed_from: Omittable[Ref] = None
    permission_mode: NonEmptyStr
    manifest: JsonObject
    items: list[Message]

    @field_validator("manifest")
    @classmethod
    def _manifest(cls, value: JsonObject) -> JsonObject:
        from ahp_protocol.wire import capabilities

        try:
            capabilities.parse_manifest(value)
        except (WireError, WireErrors) as exc:
            first = exc.first if isinstance(exc, WireErrors) else exc
            raise rule(first.reason, *(() if first.path == "$" else (first.path,))) from None
        return value

    @model_validator(mode="after")
    def _resumed(self) -> Self:
        if self.trigger in ("clear", "fork") and self.resumed_from is None:
            raise rule(f'resumedFrom is required when trigger is "{self.trigger}"')
        return self


class SessionEnd(Event):
    _forbidden = ("tool",)
    type: Literal["session.end"] = "session.end"
    session: Session
    outcome: Literal["completed", "cancelled", "error", "unknown"]
    reason: NonEmptyStr
    counters: Omittable[dict[str, NonNegativeInt]] = None
    items: Omittable[list[ContentItem]] = None


# ----- turn

TurnOutcome: TypeAlias = Literal["completed", "failed", "cancelled", "max_iterations"]


class TurnStart(Event):
    type: Literal["turn.start"] = "turn.start"
    turn: ClosedTurn
    trigger: Literal["user", "continuation", "hook", "external"]
    expanded_from: Omittable[NonEmptyStr] = None
    items: list[Message]


class TurnFinishBefore(Event):
    type: Literal["turn.finish.before"] = "turn.finish.before"
    turn: ClosedTurn
    outcome: TurnOutcome
    continuation_count: NonNegativeInt
    last_assistant_item: Omittable[Ref] = None
    usage: Omittable[TurnUsage] = None
    items: list[Message]


class TurnEnd(Event):
    type: Literal["turn.end"] = "turn.end"
    turn: ClosedTurn
    outcome: TurnOutcome
    continuation_count: NonNegativeInt
    last_assistant_item: Omittable[Ref] = None
    usage: Omittable[TurnUsage] = None
    error: Omittable[ErrorInfo] = None
    items: list[Message]

    @model_validator(mode="after")
    def _no_error_when_completed(self) -> Self:
        if self.outcome == "completed" and self.error is not None:
            raise rule('is not allowed when outcome is "completed"', "error")
        return self


class TurnProgress(Event):
    type: Literal["turn.progress"] = "turn.progress"
    turn: ClosedTurn
    item: Ref
    delta: Message
    final: bool
    items: Omittable[list[ContentItem]] = None


# ----- model


class ModelRequestBefore(Event):
    _forbidden = ("usage", "execution", "finishReason", "latencyMs", "error")
    type: Literal["model.request.before"] = "model.request.before"
    turn: Omittable[ClosedTurn] = None
    model: ModelRef
    attempt: Attempt
    params: JsonObject
    items: list[Message]


class ModelResponseAfter(Event):
    _forbidden = ("error",)
    type: Literal["model.response.after"] = "model.response.after"
    turn: Omittable[ClosedTurn] = None
    model: ModelRef
    attempt: Attempt
    execution: Execution
    finish_reason: NonEmptyStr
    usage: Omittable[AttemptUsage] = None
    latency_ms: Omittable[NonNegativeNumber] = None
    items: list[Message]

    @model_validator(mode="after")
    def _supplied(self) -> Self:
        if _is_skipped(self.execution):
            if not isinstance(self.execution, SuppliedResult):
                raise rule(
                    'must be "supplied_result" when a model response is skipped',
                    "execution",
                    "reason",
                )
            if self.usage is not None:
                raise rule("is not allowed on a supplied response", "usage")
            if self.latency_ms is not None:
                raise rule("is not allowed on a supplied response", "latencyMs")
        return self


class ModelError(Event):
    _forbidden = ("finishReason",)
    type: Literal["model.error"] = "model.error"
    turn: Omittable[ClosedTurn] = None
    model: ModelRef
    attempt: Attempt
    execution: Execution
    error: ErrorInfo
    usage: Omittable[AttemptUsage] = None
    latency_ms: Omittable[NonNegativeNumber] = None
    recovery: Omittable[NonEmptyStr] = None
    items: Omittable[list[ContentItem]] = None

    @model_validator(mode="after")
    def _executed(self) -> Self:
        if not isinstance(self.execution, Executed):
            raise rule('must be "executed" at model.error', "execution", "status")
        return self


class ModelSwitchBefore(Event):
    _forbidden = ("previous",)
    type: Literal["model.switch.before"] = "model.switch.before"
    turn: Omittable[ClosedTurn] = None
    current: ModelRef
    proposed: ModelRef
    reason: NonEmptyStr
    pricing: Omittable[Pricing] = None
    items: Omittable[list[ContentItem]] = None


class ModelSwitchAfter(Event):
    _forbidden = ("proposed",)
    type: Literal["model.switch.after"] = "model.switch.after"
    turn: Omittable[ClosedTurn] = None
    previous: ModelRef
    current: ModelRef
    reason: NonEmptyStr
    items: Omittable[list[ContentItem]] = None


# ----- context


class ContextCompactBefore(Event):
    _forbidden = ("summary", "removed", "execution")
    type: Literal["context.compact.before"] = "context.compact.before"
    turn: Omittable[ClosedTurn] = None
    trigger: Literal["auto", "manual", "hook"]
    instructions: Omittable[list[TextPart]] = None
    token_counts: Omittable[TokenCounts] = None
    items: list[Message]

    @model_validator(mode="after")
    def _no_after_count(self) -> Self:
        if self.token_counts is not None and self.token_counts.after is not None:
            raise rule("is not known before compaction", "tokenCounts", "after")
        return self


class ContextCompactAfter(Event):
    type: Literal["context.compact.after"] = "context.compact.after"
    turn: Omittable[ClosedTurn] = None
    summary: list[TextPart]
    removed: list[IdOnly]
    execution: Execution
    token_counts: Omittable[TokenCounts] = None
    items: Omittable[list[Message]] = None

    @model_validator(mode="after")
    def _supplied(self) -> Self:
        if _is_skipped(self.execution) and not isinstance(self.execution, SuppliedResult):
            raise rule(
                'must be "supplied_result" when compaction is skipped', "execution", "reason"
            )
        return self


# ----- config, task, workspace, files


class ConfigChangeBefore(Event):
    type: Literal["config.change.before"] = "config.change.before"
    change: ConfigChange
    items: Omittable[list[ContentItem]] = None


class ConfigChangeAfter(Event):
    type: Literal["config.change.after"] = "config.change.after"
    change: AppliedConfigChange
    items: Omittable[list[ContentItem]] = None


class TaskChangeBefore(Event):
    type: Literal["task.change.before"] = "task.change.before"
    task: Task
    items: Omittable[list[ContentItem]] = None


class TaskChangeAfter(Event):
    type: Literal["task.change.after"] = "task.change.after"
    task: Task
    items: Omittable[list[ContentItem]] = None


class WorkspaceChangeBefore(Event):
    type: Literal["workspace.change.before"] = "workspace.change.before"
    workspace: Workspace
    items: Omittable[list[ContentItem]] = None


class WorkspaceChangeAfter(Event):
    type: Literal["workspace.change.after"] = "workspace.change.after"
    workspace: Workspace
    items: Omittable[list[ContentItem]] = None


class FileChanged(Event):
    type: Literal["file.changed"] = "file.changed"
    changes: Annotated[list[ChangedFile], Field(min_length=1)]
    items: Omittable[list[ContentItem]] = None


# ----- user


class UserAttention(Event):
    type: Literal["user.attention"] = "user.attention"
    attention: Attention
    items: Omittable[list[ContentItem]] = None


class UserElicitationRequest(Event):
    type: Literal["user.elicitation.request"] = "user.elicitation.request"
    elicitation: ElicitationRequest
    items: Omittable[list[ContentItem]] = None


class UserElicitationResult(Event):
    type: Literal["user.elicitation.result"] = "user.elicitation.result"
    elicitation: ElicitationResult
    items: Omittable[list[ContentItem]] = None


class UserMessageInbound(Event):
    type: Literal["user.message.inbound"] = "user.message.inbound"
    message: InboundMessage
    items: Omittable[list[ContentItem]] = None


class UserMessageOutbound(Event):
    type: Literal["user.message.outbound"] = "user.message.outbound"
    message: OutboundMessage
    items: Omittable[list[ContentItem]] = None


# ----- hooks


class HookFailure(Event):
    """The harness reports a failed backend; ``parentEventId`` names the event it failed on."""

    type: Literal["hook.failure"] = "hook.failure"
    parent_event_id: NonEmptyStr
    failure: Failure
    items: Omittable[list[ContentItem]] = None


# --------------------------------------------------------------------------- catalogue

EVENT_MODELS: Final[Mapping[str, type[Event]]] = {
    "tool.before": ToolBefore,
    "tool.after": ToolAfter,
    "session.start": SessionStart,
    "session.end": SessionEnd,
    "config.change.before": ConfigChangeBefore,
    "config.change.after": ConfigChangeAfter,
    "turn.start": TurnStart,
    "turn.finish.before": TurnFinishBefore,
    "turn.end": TurnEnd,
    "turn.progress": TurnProgress,
    "model.request.before": ModelRequestBefore,
    "model.response.after": ModelResponseAfter,
    "model.error": ModelError,
    "model.switch.before": ModelSwitchBefore,
    "model.switch.after": ModelSwitchAfter,
    "tool.permission.request": ToolPermissionRequest,
    "tool.permission.resolved": ToolPermissionResolved,
    "tool.progress": ToolProgress,
    "tool.batch.after": ToolBatchAfter,
    "context.compact.before": ContextCompactBefore,
    "context.compact.after": ContextCompactAfter,
    "task.change.before": TaskChangeBefore,
    "task.change.after": TaskChangeAfter,
    "user.attention": UserAttention,
    "user.elicitation.request": UserElicitationRequest,
    "user.elicitation.result": UserElicitationResult,
    "user.message.inbound": UserMessageInbound,
    "user.message.outbound": UserMessageOutbound,
    "workspace.change.before": WorkspaceChangeBefore,
    "workspace.change.after": WorkspaceChangeAfter,
    "file.changed": FileChanged,
    "hook.failure": HookFailure,
}
"""One model per standard event, by wire name (all 32 of the catalogue)."""


class UnsupportedEvent(WireError):
    """The event's ``type`` is missing, unknown or a removed name (JSON-RPC -32002).

    Distinct from a shape error: the event may be well formed for a type this
    draft does not define.
    """


def parse_event(obj: object) -> Event:
    """The event model for ``obj``, validated strictly.

    Raises :class:`UnsupportedEvent` when ``type`` names no standard event,
    and :class:`WireErrors` (paths relative to the event) for anything else.
    """
    if not isinstance(obj, Mapping):
        raise WireErrors([WireError("$", "an event must be a JSON object")])
    if "type" not in obj:
        raise UnsupportedEvent("$", "type is required")
    name = obj["type"]
    if not isinstance(name, str):
        raise UnsupportedEvent("type", "must be a string naming a standard event")
    if name in REMOVED:
        raise UnsupportedEvent(
            "type", f'"{name}" was removed from the draft; it is not a standard event'
        )
    model = EVENT_MODELS.get(name)
    if model is None:
        raise UnsupportedEvent("type", "is not a standard event type")
    data = obj if type(obj) is dict else dict(obj)
    try:
        # ``model_validate`` without its Python wrapper (the same call).
        event: Event = model.__pydantic_validator__.validate_python(
            data, strict=True, by_alias=True, by_name=False, context=WIRE_CONTEXT
        )
    except ValidationError as exc:
        raise to_wire_errors(exc) from None
    # The open objects with renamed fields: the envelope and ``session`` (a test
    # checks that no other open object has any).
    if event.__pydantic_extra__:
        unknown_stay_unknown(event, data)
    session = event.session
    if session is not None and session.__pydantic_extra__:
        unknown_stay_unknown(session, data["session"])
    return event

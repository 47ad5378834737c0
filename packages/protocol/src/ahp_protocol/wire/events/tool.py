"""``tool.before`` and the tool detail every tool event carries (draft §3.3: ``tool`` with
its MCP origin and server ``connection``, ``batch``). The rest of a call's life is
:mod:`.tool_lifecycle`, so a backend that receives ``tool.before`` does not create those
models."""

import re
from typing import Annotated, Any, ClassVar, Literal, Self, TypeAlias

from pydantic import AfterValidator, Discriminator, Field, field_validator, model_validator

from ahp_protocol.wire.content import ContentItem
from ahp_protocol.wire.events.envelope import Event, HttpUrl, JsonObject, Ref
from ahp_protocol.wire.model import (
    ClosedModel,
    NonEmptyStr,
    Omittable,
    WireConstants,
    member,
    rule,
    union_tag,
)

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
    transport = member(value, "transport")
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


class _ToolEvent(Event):
    call: Ref
    tool: Tool
    path: NonEmptyStr
    batch: Omittable[Batch] = None


class ToolBefore(_ToolEvent):
    """``tool.before``: before side effects and the host permission stage."""

    _forbidden = ("outcome", "execution", "durationMs", "fileChanges")
    type: Literal["tool.before"] = "tool.before"
    items: Omittable[list[ContentItem]] = None

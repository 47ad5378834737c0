"""The user events: ``user.attention``, ``user.elicitation.request``,
``user.elicitation.result``, ``user.message.inbound`` and ``user.message.outbound``."""

from typing import Literal

from ahp_protocol.wire.content import AssistantMessage, ContentItem, TextPart, UserMessage
from ahp_protocol.wire.events.envelope import Event
from ahp_protocol.wire.model import ClosedModel, NonEmptyStr, Omittable


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

"""What every native dialect shares: the codec interface and the small helpers behind it.

Owns :class:`Dialect` (parse one native payload into a :class:`Parsed`, render
a deny, "nothing" or, where the harness enforces it, an input rewrite as a
:class:`NativeAnswer`; advertise exactly that in :meth:`Dialect.capabilities`),
:class:`PayloadError` (a payload we cannot read, with a fixed reason), and the
helpers the codecs use: tool input parsing, stable synthesized ids, MCP
descriptors, canonical tool output messages, URL and argument scrubbing.

Never: imports anything outside the standard library (the hook process that
talks to the warm daemon must start fast), emits a native "allow" (no effect
is never permission), or puts payload values into an error message.

Tool kinds: each codec's ``*_KINDS`` table (native tool name -> ``tool.kind``)
maps only into :data:`ahp_protocol.wire.kinds.TOOL_KINDS`; a name it does not
list is ``other``. The adapter tests check every value. They do so at test time,
not at import: a hook that fails to import fails open in most harnesses.
"""

from __future__ import annotations

import hashlib
import json
import re
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal
from urllib.parse import urlsplit, urlunsplit

HookKind = Literal["tool.before", "tool.after", "session.start", "session.end", "ignore"]

TOOL_PATH_NATIVE = "native"
TOOL_PATH_MCP = "mcp"
MAX_DENY_REASON_CHARS = 2000
"""Deny reasons are cut here: several harnesses inject hook output into the model's context."""
MAX_OUTPUT_TEXT_BYTES = 1024 * 1024
"""A tool output longer than this is sent as a gap in ``tool.after`` (frames stay small)."""
SECRET_FLAG = re.compile(r"(?i)(token|secret|password|passwd|api[-_]?key|auth|credential)")


class PayloadError(ValueError):
    """A native payload this dialect cannot read. The message is fixed: no payload values."""


class ModifyNotCarried(RuntimeError):
    """An input rewrite reached a dialect that does not advertise ``modify`` (an internal
    error: the dispatcher refuses unadvertised effects before this could happen)."""


@dataclass(frozen=True, slots=True)
class NativeAnswer:
    """What the hook process writes and how it exits."""

    stdout: str = ""
    stderr: str = ""
    exit_code: int = 0


@dataclass(frozen=True, slots=True)
class Quirks:
    """What one native harness does with a hook's answers: the facts its codec is built on.

    Data, not prose: the adapters README's per-dialect table is generated from
    these (``python -m ahp_adapters.dialects.quirks``) and the tests check the codec
    against them, so a harness version that drifts is one edit here and a failing test.
    Each field is one short sentence, as it should read in the README.
    """

    no_effect: str
    """Exactly what the codec writes for "no effect" (``render_nothing``) and why."""
    empty_output: str
    """What the harness does with exit 0 and empty stdout."""
    failure_default: str
    """What the harness does when the hook crashes, times out or writes invalid JSON."""
    failure_switch: str
    """A native switch that makes those failures block, or "none"."""
    exit_codes: str
    """What exit 2 (and other non-zero exits) mean to the harness."""
    allow: str
    """What the native "allow" does (and so why the codec never writes it)."""
    ask: str
    """What the native "ask" does, if the dialect has one."""
    modify: str
    """Whether an input rewrite is enforced (and how), or why ``modify`` is not advertised."""
    call_ids: str
    """Whether the payload carries a real tool-call id, or the codec synthesizes one."""
    double_fire: str
    """Whether one tool call can fire more than one pre-tool hook, and what the codec does."""
    source: str
    """Where these facts come from (``native-dialects.md`` section, issue threads)."""
    no_effect_stdout: str = ""
    """The exact stdout of "no effect" (exit 0, nothing on stderr): ``""`` or a JSON object
    with no decision, such as ``"{}\\n"``. :meth:`Dialect.render_nothing` writes this."""
    title: str = ""
    """The harness as the README names it (``""``: the codec's ``name``)."""


@dataclass(frozen=True, slots=True)
class Parsed:
    """One native payload, read.

    ``kind`` is the canonical event it maps to (``ignore``: not one we handle).
    ``fields`` are the event's own fields (``session``, ``call``, ``tool``,
    ``path``, ``trigger``, ...); the envelope (``id``, ``source``, ``time``,
    ``harness``, ``native``) is added by :mod:`ahp_adapters.events`.
    """

    kind: HookKind
    native_event: str
    fields: dict[str, Any] = field(default_factory=dict)
    harness_version: str | None = None
    pairing: tuple[str, str] | None = None
    """(session id, tool key) when ``call.id`` was synthesized: pairs a later ``tool.after``."""


def canonical_json(value: Any) -> str:
    """The one serialization used for hashing (sorted keys, no spaces, ASCII)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def stable_id(prefix: str, *parts: Any) -> str:
    """``prefix_`` + 32 hex digits of SHA-256 over ``parts``: the same parts give the same id."""
    digest = hashlib.sha256(canonical_json(list(parts)).encode("ascii")).hexdigest()
    return f"{prefix}_{digest[:32]}"


def text(payload: Mapping[str, Any], key: str, *, required: bool = False) -> str | None:
    """A non-empty string field, or ``None``; a wrong type is a :class:`PayloadError`."""
    value = payload.get(key)
    if value is None or value == "":
        if required:
            raise PayloadError(f"missing field {key}")
        return None
    if not isinstance(value, str):
        raise PayloadError(f"field {key} is not a string")
    return value


def tool_input(value: Any, key: str = "tool_input") -> dict[str, Any]:
    """The tool input as a JSON object: an object as is, or a string holding one."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            raise PayloadError(f"field {key} is a string that is not JSON") from None
    if not isinstance(value, dict):
        raise PayloadError(f"field {key} is not an object")
    return value


def scrub_url(url: str) -> str:
    """A URL without userinfo, query or fragment (they may carry credentials)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return ""
    host = parts.hostname or ""
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path, "", ""))


def scrub_args(args: list[Any]) -> list[str]:
    """Command arguments with the value after a secret-looking flag (or in ``K=V``) masked."""
    out: list[str] = []
    mask_next = False
    for arg in args:
        value = str(arg)
        if mask_next:
            out.append("[redacted]")
            mask_next = False
            continue
        name, eq, _ = value.partition("=")
        if SECRET_FLAG.search(name):
            if eq:
                out.append(f"{name}=[redacted]")
                continue
            mask_next = value.startswith("-")
        out.append(value)
    return out


def unknown_connection(reason: str) -> dict[str, Any]:
    """An MCP connection the harness does not disclose: a private transport with gaps."""
    return {
        "transport": "_undisclosed",
        "gaps": [{"path": "addressForm", "reason": reason}, {"path": "address", "reason": reason}],
    }


def mcp_tool(
    server: str, tool_name: str, *, provenance: str, connection: dict[str, Any]
) -> dict[str, Any]:
    return {
        "server": {"id": server},
        "toolName": tool_name,
        "provenance": provenance,
        "connection": connection,
    }


def output_text(value: Any) -> str:
    """A tool's output as text: strings as they are, anything else serialized as JSON."""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def output_items(call_id: str, value: Any) -> list[dict[str, Any]]:
    """``tool.after`` items: one ``tool`` message holding the output as one text part."""
    message_id = stable_id("msg", call_id, "output")
    part: dict[str, Any] = {
        "id": stable_id("part", call_id, "output"),
        "kind": "text",
        "mediaType": "text/plain",
        "selection": "body",
    }
    if value is None:
        return [{"id": message_id, "role": "tool", "parts": []}]
    body = output_text(value)
    if len(body.encode("utf-8")) > MAX_OUTPUT_TEXT_BYTES:
        part["gap"] = {"reason": "tool output larger than the adapter's 1 MiB limit"}
    else:
        part["text"] = body
    return [{"id": message_id, "role": "tool", "parts": [part]}]


def clip(reason: str) -> str:
    reason = reason.strip() or "Denied by policy."
    if len(reason) <= MAX_DENY_REASON_CHARS:
        return reason
    return reason[: MAX_DENY_REASON_CHARS - 1] + "…"


class Dialect(ABC):
    """One native hook dialect. Subclasses fill the class attributes and the three methods.

    - :meth:`parse`: native payload -> :class:`Parsed` (or :class:`PayloadError`);
    - :meth:`render_deny`: the dialect's own blocking answer for a pre-tool event
      (``native_event`` ``None`` when the event could not be told: the most
      portable blocking form, exit 2 with the reason on stderr);
    - :meth:`render_nothing`: what "no decision" looks like (never native allow);
    - :meth:`render_modify`: only where :attr:`input_rewrite` is set, an accepted
      input rewrite in the harness's own form (never with the native allow).
    """

    name: ClassVar[str] = ""
    harness_name: ClassVar[str] = ""
    provider: ClassVar[str] = ""
    pre_tool_events: ClassVar[frozenset[str]] = frozenset()
    all_events: ClassVar[frozenset[str]] = frozenset()
    """Native events this codec reads (the installer wires these)."""
    kinds: ClassVar[Mapping[str, str]] = {}
    """Native tool name -> ``tool.kind``; a name not listed is ``other``. Every tool the
    harness was seen offering its model in the live tier is listed (``other`` where no
    kind fits), so a tool a new version adds fails the live tier until it is judged."""
    prepare_events: ClassVar[frozenset[str]] = frozenset()
    """Native events that carry no AHP event here but come before a session's first tool
    call where the harness sends no session start (Qwen's ``UserPromptSubmit`` in ``-p``):
    their hook has the daemon prepare the chain, as a session start does, and answers
    nothing. The installer wires these too."""
    stderr_ok: ClassVar[bool] = True
    """Whether diagnostics on stderr are harmless when the hook exits 0."""
    quirks: ClassVar[Quirks]
    """The harness's behaviour this codec relies on (see :class:`Quirks`)."""
    native_timeout_unit: ClassVar[Literal["s", "ms"]] = "s"
    documented_timeout_s: ClassVar[float] = 600.0
    input_rewrite: ClassVar[Mapping[str, bool] | None] = None
    """``{"replace": bool, "merge": bool}``: the ``modify`` operations on ``tool.input`` the
    harness enforces at its pre-tool events (``None``: ``modify`` is not advertised).

    Never inherited: a codec that reads another harness's format (Codex and VS Code
    read Claude's) advertises a rewrite only if it sets this itself, since what a
    harness enforces is that harness's fact, not its payload format's."""

    version_env: ClassVar[tuple[str, str] | None] = None
    """``(VARIABLE, REGEX)``: the environment variable the harness exports to its hooks that
    tells its version, and a regex whose groups, joined by ``.``, are the version (found
    live, ``tests/live``). Never inherited, like ``input_rewrite``: a harness that runs
    inside another (Codex in a Claude Code shell) inherits the outer one's variables."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for name in ("input_rewrite", "version_env"):
            if name not in cls.__dict__:
                setattr(cls, name, None)

    def version_from_env(self, environ: Mapping[str, str]) -> str | None:
        """``harness.version`` from what the harness exports to its hooks, or ``None``."""
        if self.version_env is None:
            return None
        variable, pattern = self.version_env
        found = re.fullmatch(pattern, environ.get(variable, ""))
        return ".".join(found.groups()) if found else None

    def resolve(self, payload: Mapping[str, Any]) -> Dialect:
        """The dialect that really sent ``payload`` (a harness may load another's hook file)."""
        return self

    def event_name(self, payload: Mapping[str, Any]) -> str | None:
        value = payload.get("hook_event_name")
        return value if isinstance(value, str) and value else None

    @abstractmethod
    def parse(self, payload: Mapping[str, Any], *, options: Mapping[str, Any]) -> Parsed:
        """What one native payload is: which hook, and the canonical event fields."""

    @abstractmethod
    def render_deny(self, reason: str, native_event: str | None) -> NativeAnswer:
        """The dialect's own blocking answer for ``native_event``."""

    def render_nothing(self, native_event: str | None) -> NativeAnswer:
        """No decision, as this harness reads it: ``quirks.no_effect_stdout``, exit 0."""
        return NativeAnswer(stdout=self.quirks.no_effect_stdout)

    def is_pre_tool(self, native_event: str | None) -> bool:
        return native_event in self.pre_tool_events

    def exit2_deny(self, reason: str) -> NativeAnswer:
        """The blocking form every supported dialect shares: exit 2, reason on stderr."""
        return NativeAnswer(stderr=clip(reason) + "\n", exit_code=2)

    def capabilities(self, native_event: str) -> dict[str, Any]:
        """What the adapter can enforce at this pre-tool event: ``deny``, and ``modify``
        on ``input`` with exactly the operations of :attr:`input_rewrite` (if any).

        ``allow`` is never advertised: encoding it would mean emitting the
        native allow, which skips the harness's own permission prompt.
        """
        rewrite = self.input_rewrite
        if rewrite is None or native_event not in self.pre_tool_events:
            return {"effects": ["deny"]}
        return {"effects": ["deny", "modify"], "modify": {"input": dict(rewrite)}}

    def pre_tool_capabilities(self) -> list[dict[str, Any]]:
        """Each distinct :meth:`capabilities` of this dialect's pre-tool events: the chains a
        daemon prepares at session start."""
        found: list[dict[str, Any]] = []
        for native_event in sorted(self.pre_tool_events):
            declaration = self.capabilities(native_event)
            if declaration not in found:
                found.append(declaration)
        return found

    def carries_modify(self, native_event: str | None) -> bool:
        """Whether :meth:`capabilities` advertises ``modify`` at ``native_event``."""
        if native_event is None or not self.is_pre_tool(native_event):
            return False
        return "modify" in self.capabilities(native_event)["effects"]

    def render_modify(
        self, updated_input: Mapping[str, Any], native_event: str | None
    ) -> NativeAnswer:
        """The native answer carrying an accepted input rewrite: ``updated_input`` is the
        whole effective ``tool.input`` (every modification already applied).

        Only for a dialect that advertises ``modify`` at ``native_event``; the default
        raises :class:`ModifyNotCarried` (the hook treats that as an internal error,
        so the failure policy decides: an accepted rewrite is never silently dropped).
        """
        raise ModifyNotCarried("this dialect does not carry input rewrites")

    def manifest_gaps(self) -> list[dict[str, str]]:
        return []

    def tool_paths(self) -> list[str]:
        return [TOOL_PATH_NATIVE, TOOL_PATH_MCP]

    def observed_events(self) -> list[str]:
        return ["tool.before", "tool.after", "session.start", "session.end", "hook.failure"]


def session_of(payload: Mapping[str, Any], *, id_key: str = "session_id") -> dict[str, Any] | None:
    """The AHP ``session`` from a native payload's id, cwd, model and agent (``None``: no id)."""
    sid = text(payload, id_key)
    if sid is None:
        return None
    session: dict[str, Any] = {"id": sid}
    cwd = text(payload, "cwd")
    if cwd:
        session["cwd"] = cwd
    model = payload.get("model")
    if isinstance(model, str) and model:
        session["model"] = model
    agent_id = text(payload, "agent_id")
    if agent_id:
        agent: dict[str, Any] = {"id": agent_id}
        agent_type = text(payload, "agent_type")
        if agent_type:
            agent["type"] = agent_type
        session["agent"] = agent
    return session

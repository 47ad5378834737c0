"""What a tool is: a typed input model, the argument rules match on, and a run.

Owns the :class:`Tool` contract, its results (:class:`ToolResult`,
:class:`FileChange`) and :class:`ToolInputError`. Input models are pydantic, strict
and closed (``extra="forbid"``): the input a model proposed, and the effective input
after any hook rewrote it, go through :meth:`Tool.parse_input` before use.

:meth:`Tool.run` never raises for tool-level failures (missing file, non-zero exit,
HTTP error, sandbox refusal at run time): it returns a :class:`ToolResult` with
``outcome`` ``"error"`` (or ``"timeout"``) and a fixed ``error_class``:
``invalid_input``, ``sandbox_violation``, ``not_found``, ``not_a_file``,
``not_text``, ``too_large``, ``no_match``, ``ambiguous_match``, ``exit_status``,
``spawn_failed``, ``timeout``, ``http_status``, ``redirect``, ``network``,
``os_error``, ``internal``. Messages are
fixed sentences plus paths, counts and codes; they never carry exception text or
environment values. Cancellation is never swallowed.

Binary media (:func:`is_binary`: a NUL byte in the first 8 KiB) is one rule for every
tool that meets it (``read_file``, ``fetch``): :func:`attached` makes it an attachment,
whole and at most the cap (``Limits.read_cap_bytes``, the manifest's
``maxUploadBytes``), with a media type from :func:`media_type` that is never text or
JSON (AHP-CONTENT-001); a larger or cut body is refused (``too_large``).

Never does: permission decisions (:mod:`ahp_harness.permissions`) or anything AHP.
"""

from __future__ import annotations

import dataclasses
import time
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Literal, TypeVar

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError

from ahp_harness.sandbox import SandboxViolation

if TYPE_CHECKING:
    from ahp_protocol.client.uploads import Attachment

    from ahp_harness.sandbox import Sandbox

__all__ = [
    "INPUT_CONFIG",
    "AnyText",
    "FileChange",
    "Text",
    "Tool",
    "ToolInputError",
    "ToolResult",
    "attached",
    "failure",
    "is_binary",
    "media_type",
]

M = TypeVar("M", bound=BaseModel)

#: The configuration every tool input model uses: strict, closed, cheap to import.
INPUT_CONFIG = ConfigDict(extra="forbid", strict=True, defer_build=True)


def _no_nul(value: str) -> str:
    if "\x00" in value:
        raise ValueError("must not contain NUL characters")
    return value


#: A non-empty string without NUL characters (commands, paths, URLs, patterns).
Text = Annotated[str, Field(min_length=1), AfterValidator(_no_nul)]
#: A string without NUL characters, possibly empty (file contents, replacements).
AnyText = Annotated[str, AfterValidator(_no_nul)]


class ToolInputError(ValueError):
    """A tool input failed validation. ``field`` names the field, ``rule`` the rule broken."""

    def __init__(self, field: str, rule: str) -> None:
        super().__init__(f"{field}: {rule}")
        self.field = field
        self.rule = rule


@dataclass(frozen=True)
class FileChange:
    """One file a call changed. ``path`` is the real absolute path.

    ``before``/``after`` are the text (capped at ``Limits.change_cap_bytes``, with a
    ``[truncated]`` note), ``None`` where the file did not exist or is not text.
    """

    path: str
    change: Literal["created", "modified", "deleted"]
    before: str | None
    after: str | None


@dataclass(frozen=True)
class ToolResult:
    """What one run produced. ``error`` is a fixed, credential-free sentence;
    ``attachments`` the binary media it produced (``tool.after`` carries them as
    attachment parts, uploaded where a subscription selects them)."""

    outcome: Literal["ok", "error", "timeout"]
    output: str
    error: str | None = None
    error_class: str | None = None
    file_changes: tuple[FileChange, ...] = ()
    duration_ms: float = 0.0
    attachments: tuple[Attachment, ...] = ()


def failure(
    error_class: str,
    error: str,
    output: str = "",
    *,
    outcome: Literal["error", "timeout"] = "error",
) -> ToolResult:
    """A failed :class:`ToolResult` (helper for the tools)."""
    return ToolResult(outcome=outcome, output=output, error=error, error_class=error_class)


_SNIFF_BYTES = 8192


def is_binary(data: bytes) -> bool:
    """True if ``data`` looks binary: a NUL byte in its first 8 KiB."""
    return b"\x00" in data[:_SNIFF_BYTES]


def media_type(name: str, declared: str | None = None) -> str:
    """The media type of binary bytes: ``declared`` (an HTTP ``Content-Type``, parameters
    dropped) when it is a usable type, else a guess from ``name`` (a file name or URL
    path); ``application/octet-stream`` when unknown, textual or JSON (binary bytes are
    never declared text)."""
    from ahp_protocol.client.uploads import is_inline_media

    if declared:
        media = declared.split(";", 1)[0].strip()
        if "/" in media and len(media) <= 100 and " " not in media and not is_inline_media(media):
            return media
    import mimetypes

    guessed, _ = mimetypes.guess_type(name, strict=False)
    if not guessed or is_inline_media(guessed):
        return "application/octet-stream"
    return guessed


def attached(what: str, data: bytes, media: str, *, whole: bool, cap: int) -> ToolResult:
    """Binary ``data`` (all of it, if ``whole``) from ``what`` as an attachment, or
    ``too_large`` if it is cut or larger than ``cap`` bytes."""
    if not whole or len(data) > cap:
        return failure("too_large", f"{what} is binary and larger than {cap} bytes")
    from ahp_protocol.client.uploads import Attachment

    attachment = Attachment(data, media)
    text = f"{what}: binary, {attachment.media_type}, {len(data)} bytes (attached)"
    return ToolResult(outcome="ok", output=text, attachments=(attachment,))


def _input_error(exc: ValidationError, model: type[BaseModel]) -> ToolInputError:
    errors = exc.errors(include_url=False, include_input=False, include_context=False)
    first = errors[0]
    field = ".".join(str(part) for part in first["loc"]) or "input"
    kind = first["type"]
    if kind == "extra_forbidden":
        allowed = ", ".join(model.model_fields)
        rule = f"unknown field (allowed: {allowed})"
    elif kind == "missing":
        rule = "required"
    elif kind == "string_too_short":
        rule = "must not be empty"
    elif kind == "value_error":
        rule = first["msg"].removeprefix("Value error, ")
    else:
        rule = first["msg"][:1].lower() + first["msg"][1:]
    if len(errors) > 1:
        rule += f" (and {len(errors) - 1} more problem{'s' if len(errors) > 2 else ''})"
    return ToolInputError(field, rule)


class Tool(ABC):
    """A host tool. Subclasses set the class variables and implement :meth:`_run`."""

    name: ClassVar[str]
    kind: ClassVar[str]
    input_model: ClassVar[type[BaseModel]]
    description: ClassVar[str]

    def parse_input(self, raw: object) -> BaseModel:
        """Validate ``raw`` (a JSON object) into :attr:`input_model`, or :class:`ToolInputError`."""
        if isinstance(raw, BaseModel):
            raw = raw.model_dump()
        if not isinstance(raw, Mapping):
            raise ToolInputError("input", "must be a JSON object")
        try:
            return self.input_model.model_validate(dict(raw))
        except ValidationError as exc:
            raise _input_error(exc, self.input_model) from None

    @abstractmethod
    def main_argument(self, inp: BaseModel) -> str:
        """The argument permission patterns match: command, path, url or pattern."""

    def paths(self, inp: BaseModel) -> list[str]:
        """The paths the call touches, as given (the sandbox confines each); ``[]`` if none."""
        return []

    def json_schema(self) -> dict[str, Any]:
        """The input JSON Schema (an object schema with ``additionalProperties: false``)."""
        return self.input_model.model_json_schema()

    async def run(self, inp: BaseModel, sandbox: Sandbox) -> ToolResult:
        """Run the call inside ``sandbox``. Tool-level failures come back as results."""
        started = time.monotonic()
        try:
            result = await self._run(inp, sandbox)
        except SandboxViolation as exc:
            result = failure("sandbox_violation", exc.reason)
        except ToolInputError as exc:
            result = failure("invalid_input", str(exc))
        except OSError as exc:
            result = failure("os_error", f"{self.name} failed: {exc.strerror or 'OS error'}")
        except Exception:
            result = failure("internal", f"{self.name} failed with an internal error")
        elapsed = (time.monotonic() - started) * 1000.0
        return dataclasses.replace(result, duration_ms=elapsed)

    @abstractmethod
    async def _run(self, inp: BaseModel, sandbox: Sandbox) -> ToolResult:
        """The tool's work; may raise :class:`SandboxViolation` or :class:`OSError`."""

    def _typed(self, inp: BaseModel, model: type[M]) -> M:
        """``inp`` as ``model`` (re-validated if it is some other model)."""
        if isinstance(inp, model):
            return inp
        parsed = self.parse_input(inp)
        if not isinstance(parsed, model):  # pragma: no cover - input_model is model
            raise ToolInputError("input", f"expected {model.__name__}")
        return parsed

    def __repr__(self) -> str:
        return f"<tool {self.name} ({self.kind})>"

"""The ``ahp-protocol`` command: check AHP documents and try backends from the shell.

``validate`` reads files only (it never starts a backend) and adds notes, which never
change a file's validity, for a tool kind outside :data:`~ahp_protocol.wire.kinds.TOOL_KINDS`:
the wire accepts any kind, but a rule keyed on ``kind = "shell"`` never meets a harness
that says ``"bash"``. ``send`` is a one-shot harness: it starts the backends the
registration names. What each command prints and its exit codes are written once, in
its ``--help`` text (:func:`build_parser`).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from ahp_protocol import __version__
from ahp_protocol.cli_kit import add_version
from ahp_protocol.wire.errors import WireError, WireErrors
from ahp_protocol.wire.kinds import TOOL_KINDS, is_known_kind
from ahp_protocol.wire.registration_rules import show

if TYPE_CHECKING:
    from ahp_protocol.client._result import HookResult

Kind = Literal["auto", "registration", "message", "stdio"]


@dataclass(frozen=True, slots=True)
class Note:
    """Something valid that is probably a mistake, at a wire path; never makes it invalid."""

    path: str
    note: str

    def __str__(self) -> str:
        return f"{self.path}: {self.note}"


@dataclass(frozen=True, slots=True)
class FileValidation:
    """What validating one file found: its kind, its errors (none: valid), its notes."""

    file: str
    kind: str
    errors: tuple[WireError, ...]
    notes: tuple[Note, ...] = ()

    @property
    def valid(self) -> bool:
        return not self.errors

    def line(self) -> str:
        if self.valid:
            return f"{self.file}: valid"
        return f"{self.file}: invalid: {self.errors[0]}"

    def note_lines(self) -> list[str]:
        return [f"{self.file}: note: {note}" for note in self.notes]

    def to_json(self) -> dict[str, object]:
        return {
            "file": self.file,
            "kind": self.kind,
            "valid": self.valid,
            "errors": [{"path": e.path, "reason": e.reason} for e in self.errors],
            "notes": [{"path": n.path, "note": n.note} for n in self.notes],
        }


_KNOWN_KINDS = ", ".join(TOOL_KINDS)


def _kind_notes(kinds: Sequence[tuple[str, object]], *, in_filter: bool) -> list[Note]:
    """A note for each ``(path, kind)`` outside the draft's vocabulary."""
    consequence = (
        "accepted (filters are hints and never justify dropping a call), but no harness "
        "following the draft sends it"
        if in_filter
        else "accepted (kind is descriptive only), but a rule or filter on kind never matches it"
    )
    return [
        Note(path, f"unknown tool kind {show(kind)} (known: {_KNOWN_KINDS}); {consequence}")
        for path, kind in kinds
        if not is_known_kind(kind)
    ]


def _event_notes(event: object, where: str) -> list[Note]:
    if not isinstance(event, Mapping):
        return []
    tools: list[tuple[str, object]] = [(f"{where}.tool", event.get("tool"))]
    calls = event.get("calls")
    if isinstance(calls, list):
        tools += [
            (f"{where}.calls[{i}].tool", call.get("tool"))
            for i, call in enumerate(calls)
            if isinstance(call, Mapping)
        ]
    kinds = [
        (f"{path}.kind", tool["kind"])
        for path, tool in tools
        if isinstance(tool, Mapping) and "kind" in tool
    ]
    return _kind_notes(kinds, in_filter=False)


def _filter_notes(subscriptions: object, where: str) -> list[Note]:
    if not isinstance(subscriptions, list):
        return []
    kinds: list[tuple[str, object]] = []
    for i, sub in enumerate(subscriptions):
        filters = sub.get("filters") if isinstance(sub, Mapping) else None
        listed = filters.get("toolKinds") if isinstance(filters, Mapping) else None
        if isinstance(listed, list):
            kinds += [(f"{where}[{i}].filters.toolKinds[{j}]", k) for j, k in enumerate(listed)]
    return _kind_notes(kinds, in_filter=True)


def _document_notes(document: object, kind: Kind) -> list[Note]:
    """The notes on one decoded registration or JSON-RPC message."""
    if not isinstance(document, Mapping):
        return []
    if kind == "registration":
        hooks = document.get("hooks")
        if not isinstance(hooks, list):
            return []
        return [
            note
            for i, hook in enumerate(hooks)
            if isinstance(hook, Mapping)
            for note in _filter_notes(hook.get("subscriptions"), f"hooks[{i}].subscriptions")
        ]
    notes: list[Note] = []
    params = document.get("params")
    if isinstance(params, Mapping):
        notes += _event_notes(params.get("event"), "params.event")
    result = document.get("result")
    configuration = result.get("configuration") if isinstance(result, Mapping) else None
    if isinstance(configuration, Mapping):
        notes += _filter_notes(
            configuration.get("subscriptions"), "result.configuration.subscriptions"
        )
    return notes


def _stdio_notes(data: bytes) -> list[Note]:
    notes: list[Note] = []
    for number, line in enumerate(data.split(b"\n"), start=1):
        try:
            message = json.loads(line)
        except ValueError:
            continue
        notes += [
            Note(f"line {number}: {n.path}", n.note) for n in _document_notes(message, "message")
        ]
    return notes


def _detect(path: Path, data: bytes) -> Kind:
    if path.suffix == ".jsonl":
        return "stdio"
    try:
        document = json.loads(data)
    except ValueError:
        return "message"
    return "registration" if isinstance(document, dict) and "hooks" in document else "message"


def _decode_json(data: bytes) -> Any:
    """One JSON document from a file's bytes, or a ``WireError`` saying what is wrong."""
    try:
        return json.loads(data.decode("utf-8"))
    except UnicodeDecodeError:
        raise WireError("$", "not valid UTF-8") from None
    except json.JSONDecodeError as exc:
        reason = f"not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
        raise WireError("$", reason) from None


def validate_file(name: str, kind: Kind = "auto") -> FileValidation:
    """Validate one file as ``kind`` and say what was found."""
    from ahp_protocol.wire import messages, registration

    path = Path(name)
    try:
        data = path.read_bytes()
    except OSError as exc:
        reason = exc.strerror or "cannot be read"
        return FileValidation(name, kind, (WireError("$", f"cannot read file: {reason}"),))
    if kind == "auto":
        kind = _detect(path, data)
    notes: list[Note] = []
    try:
        if kind == "stdio":
            notes = _stdio_notes(data)
            messages.validate_stdio(data)
            return FileValidation(name, kind, (), tuple(notes))
        document = _decode_json(data)
        notes = _document_notes(document, kind)
        if kind == "registration":
            registration.parse_registration(document)
        else:
            messages.validate_message(document)
    except WireErrors as exc:
        return FileValidation(name, kind, tuple(exc.errors), tuple(notes))
    except WireError as exc:
        return FileValidation(name, kind, (exc,), tuple(notes))
    return FileValidation(name, kind, (), tuple(notes))


def _validate(args: argparse.Namespace) -> int:
    checked = [validate_file(f, args.kind) for f in args.files]
    if args.json:
        print(json.dumps([v.to_json() for v in checked], indent=2))
    else:
        for validation in checked:
            print(validation.line())
            for line in validation.note_lines():
                print(line)
    return 0 if all(v.valid for v in checked) else 1


_HARNESS: Mapping[str, str] = {"name": "ahp-protocol-send", "version": __version__}
"""Who ``send`` says it is, where a partial event does not say."""


def complete_event(partial: Mapping[str, Any], *, source: str) -> dict[str, Any]:
    """Fill ``id``, ``time``, ``source`` and ``harness`` where a partial event lacks them."""
    from ahp_protocol.client._dispatcher import new_id, now

    event = dict(partial)
    event.setdefault("id", new_id("evt"))
    event.setdefault("time", now())
    event.setdefault("source", source)
    event.setdefault("harness", dict(_HARNESS))
    return event


def _usage_error(message: str) -> int:
    print(f"ahp-protocol send: error: {message}", file=sys.stderr)
    return 2


def _read_json(name: str, what: str) -> Any:
    try:
        data = Path(name).read_bytes()
    except OSError as exc:
        raise WireError("$", f"cannot read {what} {name}: {exc.strerror}") from None
    try:
        return _decode_json(data)
    except WireError as exc:
        raise WireError(name, str(exc)) from None


def _grant(event_type: str, effects: str | None) -> dict[str, Any]:
    from ahp_protocol.wire.messages import full_grant

    grant = full_grant(event_type)
    if effects is None:
        return grant
    wanted = [e.strip() for e in effects.split(",") if e.strip()]
    unknown = [e for e in wanted if e not in grant["effects"]]
    if unknown:
        allowed = ", ".join(grant["effects"]) or "none"
        raise WireError(
            "--effects", f"{unknown[0]!r} cannot be granted at {event_type} ({allowed})"
        )
    grant["effects"] = wanted
    for block in ("modify", "flow", "inject"):
        if block not in wanted:
            grant.pop(block, None)
    return grant


def _print_result(result: HookResult) -> None:
    print(f"{result.event_type} {result.event.get('id')}")
    for d in result.diagnostics:
        line = f"  {d.backend}[{d.subscription}] {d.mode:<13} {d.outcome:<9} {d.latency_ms:8.2f} ms"
        if d.failure is not None:
            policy = f" -> {d.policy}" if d.policy else ""
            line += f"  {d.failure.value}{policy}"
        print(line)
    if result.denial is not None:
        who = "synthetic denial after" if result.denial.synthetic else "denied by"
        code = f" [{result.denial.code}]" if result.denial.code else ""
        print(f"settled: deny ({who} {result.denial.backend}): {result.denial.reason}{code}")
    else:
        print(f"settled: permission {result.permission}, flow {result.flow}")
    for text in result.messages:
        print(f"message: {text}")
    if result.candidate is not None:
        print(f"candidate: {json.dumps(result.candidate.value)}")


async def _send(args: argparse.Namespace) -> int:
    import statistics

    from ahp_protocol.client import Hooks, RegistrationError
    from ahp_protocol.client.hooks import load_anchored
    from ahp_protocol.wire import catalogue, events

    if args.repeat < 1:
        return _usage_error("--repeat must be at least 1")
    try:
        registration = load_anchored(args.registration)  # its backends run in its folder
        partial = _read_json(args.event, "event file")
        if not isinstance(partial, dict) or not catalogue.is_event_type(partial.get("type")):
            raise WireError("type", "the event needs a standard event type")
        event_type = str(partial["type"])
        source = f"urn:uuid:{uuid.uuid4()}"
        capabilities: dict[str, dict[str, Any]] = {}
        if catalogue.is_interceptable(event_type):
            capabilities[event_type] = _grant(event_type, args.effects)
        events.parse_event(complete_event(partial, source=source))
        hooks = Hooks(  # the event was checked once, above: --repeat measures the chain only
            registration, harness=_HARNESS, capabilities=capabilities, source=source, validate=False
        )
    except (WireError, WireErrors, RegistrationError) as exc:
        return _usage_error(str(exc))
    results: list[HookResult] = []
    latencies: list[float] = []
    async with hooks:
        for diagnostic in hooks.configuration_diagnostics:
            print(f"warning: {diagnostic.backend}: {diagnostic.detail}", file=sys.stderr)
        for _ in range(args.repeat):
            # With --repeat every event is distinct: a fixed id is only kept for a single send.
            fresh = {k: v for k, v in partial.items() if k != "id"}
            event = complete_event(fresh if args.repeat > 1 else partial, source=source)
            started = time.perf_counter()
            results.append(await hooks.send(event))
            latencies.append((time.perf_counter() - started) * 1000)
    denied = sum(1 for r in results if r.denied)
    summary = None
    if args.repeat > 1:
        ordered = sorted(latencies)
        summary = {
            "events": len(results),
            "denied": denied,
            "medianMs": round(statistics.median(ordered), 3),
            "p90Ms": round(ordered[math.ceil(0.9 * len(ordered)) - 1], 3),
        }
    if args.json:
        print(json.dumps({"result": results[-1].to_json(), "latency": summary}, indent=2))
    else:
        _print_result(results[-1])
        if summary:
            print(
                f"{summary['events']} events, {denied} denied; latency median "
                f"{summary['medianMs']} ms, p90 {summary['p90Ms']} ms"
            )
    return 1 if denied else 0


def _run_send(args: argparse.Namespace) -> int:
    import anyio

    code: int = anyio.run(_send, args)
    return code


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ahp-protocol",
        description='Tools for the Agent Hooks Protocol (wire version "draft").',
    )
    add_version(parser, "ahp-protocol")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    validate = commands.add_parser(
        "validate",
        help="check registration documents and JSON-RPC messages",
        description=(
            "Check each FILE and print 'FILE: valid' or 'FILE: invalid: <JSON path>: <reason>', "
            "then 'FILE: note: <JSON path>: <note>' for anything valid that is likely a mistake "
            "(a tool kind outside the draft's vocabulary). Exit 0 only when all files are "
            "valid; notes never change it."
        ),
    )
    validate.add_argument(
        "--kind",
        choices=["auto", "registration", "message", "stdio"],
        default="auto",
        help=(
            "what each file holds (default auto: a document with 'hooks' is a registration, "
            "a .jsonl file is stdio framing with one message per line, anything else is one "
            "JSON-RPC message)"
        ),
    )
    validate.add_argument("--json", action="store_true", help="print the results as JSON")
    validate.add_argument("files", nargs="+", metavar="FILE")
    validate.set_defaults(func=_validate)

    send = commands.add_parser(
        "send",
        help="run one event through a registration's backends and print the result",
        description=(
            "A one-shot harness for trying and debugging backends. Completes a partial event "
            "(id, time, source and harness are filled where missing), runs it through the chain "
            "and prints the settled result with every diagnostic. Exit 0 without a denial, "
            "1 on a denial, 2 on a usage or registration error."
        ),
    )
    send.add_argument("--registration", required=True, metavar="FILE", help="registration document")
    send.add_argument("--event", required=True, metavar="FILE", help="a (partial) event, as JSON")
    send.add_argument(
        "--effects",
        metavar="LIST",
        help="comma-separated effects to advertise, e.g. deny,allow,ask (default: all the "
        "draft allows at the event)",
    )
    send.add_argument(
        "--repeat",
        type=int,
        default=1,
        metavar="N",
        help="send N distinct events and print latency median/p90",
    )
    send.add_argument("--json", action="store_true", help="print the result as JSON")
    send.set_defaults(func=_run_send)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    code: int = args.func(args)
    return code


if __name__ == "__main__":
    sys.exit(main())

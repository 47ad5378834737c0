"""The ``ahp-protocol`` command: check AHP documents and messages from the shell.

``ahp-protocol validate [--kind auto|registration|message|stdio] [--json] FILE...``
prints ``FILE: valid`` or ``FILE: invalid: <JSON path>: <reason>`` per file
and exits 0 only when every file is valid (1 when one is not, 2 on a usage
error). Reads files only; never starts a backend.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from ahp_protocol.wire.errors import WireError, WireErrors

Kind = Literal["auto", "registration", "message", "stdio"]


@dataclass(frozen=True, slots=True)
class Verdict:
    file: str
    kind: str
    errors: tuple[WireError, ...]

    @property
    def valid(self) -> bool:
        return not self.errors

    def line(self) -> str:
        if self.valid:
            return f"{self.file}: valid"
        return f"{self.file}: invalid: {self.errors[0]}"

    def to_json(self) -> dict[str, object]:
        return {
            "file": self.file,
            "kind": self.kind,
            "valid": self.valid,
            "errors": [{"path": e.path, "reason": e.reason} for e in self.errors],
        }


def _detect(path: Path, data: bytes) -> Kind:
    if path.suffix == ".jsonl":
        return "stdio"
    try:
        document = json.loads(data)
    except ValueError:
        return "message"
    return "registration" if isinstance(document, dict) and "hooks" in document else "message"


def _json_error(exc: json.JSONDecodeError) -> WireError:
    return WireError("$", f"not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}")


def validate_file(name: str, kind: Kind = "auto") -> Verdict:
    """Validate one file as ``kind`` and say what was found."""
    from ahp_protocol.wire import messages, registration

    path = Path(name)
    try:
        data = path.read_bytes()
    except OSError as exc:
        reason = exc.strerror or "cannot be read"
        return Verdict(name, kind, (WireError("$", f"cannot read file: {reason}"),))
    if kind == "auto":
        kind = _detect(path, data)
    try:
        if kind == "stdio":
            messages.validate_stdio(data)
            return Verdict(name, kind, ())
        try:
            document = json.loads(data.decode("utf-8"))
        except UnicodeDecodeError:
            raise WireError("$", "not valid UTF-8") from None
        except json.JSONDecodeError as exc:
            raise _json_error(exc) from None
        if kind == "registration":
            registration.parse_registration(document)
        else:
            messages.validate_message(document)
    except WireErrors as exc:
        return Verdict(name, kind, tuple(exc.errors))
    except WireError as exc:
        return Verdict(name, kind, (exc,))
    return Verdict(name, kind, ())


def _validate(args: argparse.Namespace) -> int:
    verdicts = [validate_file(f, args.kind) for f in args.files]
    if args.json:
        print(json.dumps([v.to_json() for v in verdicts], indent=2))
    else:
        for verdict in verdicts:
            print(verdict.line())
    return 0 if all(v.valid for v in verdicts) else 1


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ahp-protocol",
        description="Tools for the Agent Hooks Protocol (wire version \"draft\").",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    validate = commands.add_parser(
        "validate",
        help="check registration documents and JSON-RPC messages",
        description=(
            "Check each FILE and print 'FILE: valid' or 'FILE: invalid: <JSON path>: <reason>'. "
            "Exit 0 only when all files are valid."
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
    validate.add_argument("--json", action="store_true", help="print the verdicts as JSON")
    validate.add_argument("files", nargs="+", metavar="FILE")
    validate.set_defaults(func=_validate)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    code: int = args.func(args)
    return code


if __name__ == "__main__":
    sys.exit(main())

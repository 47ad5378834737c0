"""The five commands, built one way (``ahp_protocol.cli_kit``): every flag of every parser
has help text, and each command prints the kit's one version.

In process: each command's ``main(argv)`` runs until it parses, where the parser is
caught (``ArgumentParser.parse_known_args`` raises it back) and walked, subcommands
included. Nothing is served or started.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterator, Sequence
from typing import Any, NoReturn

import pytest
from ahp_protocol._version import __version__


class Caught(Exception):
    def __init__(self, parser: argparse.ArgumentParser) -> None:
        super().__init__(parser.prog)
        self.parser = parser


def _catch(self: argparse.ArgumentParser, *args: Any, **kwargs: Any) -> NoReturn:
    raise Caught(self)


def _mains() -> Iterator[tuple[str, Callable[[Sequence[str]], Any], list[str]]]:
    from ahp_adapters.cli import main as adapter
    from ahp_backends.cli import COMMANDS
    from ahp_backends.cli import main as backend
    from ahp_conformance.cli import main as conformance
    from ahp_harness.cli import main as harness
    from ahp_protocol.cli import main as protocol
    from ahp_protocol.server import Backend

    yield "ahp-protocol", protocol, []
    yield "ahp-harness", harness, []
    yield "ahp-adapter", adapter, ["doctor"]
    yield "ahp-conformance", conformance, []
    for name in COMMANDS:
        yield f"ahp-backend {name}", backend, [name]
    for argv in (["approval", "grant"], ["approval", "list"], ["approval", "revoke"]):
        yield "ahp-backend " + " ".join(argv), backend, argv
    for argv in (["audit", "show"], ["audit", "replay"], ["policy", "test"]):
        yield "ahp-backend " + " ".join(argv), backend, argv
    yield "Backend.run", Backend("com.example.help").run, ["--http", "127.0.0.1:0"]


def _parsers(parser: argparse.ArgumentParser) -> Iterator[argparse.ArgumentParser]:
    yield parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in dict.fromkeys(action.choices.values()):  # aliases: once
                yield from _parsers(sub)


def _flags(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, argparse.Action]]:
    """``(parser prog, action)`` of every flag of every parser of the five commands."""
    monkeypatch.setattr(argparse.ArgumentParser, "parse_known_args", _catch)
    flags: list[tuple[str, argparse.Action]] = []
    walked = 0
    for _, main, argv in _mains():
        with pytest.raises(Caught) as caught:
            main(argv)
        for parser in _parsers(caught.value.parser):
            walked += 1
            flags += [(parser.prog, a) for a in parser._actions if a.option_strings]
    assert walked > 20
    return flags


def test_every_flag_of_every_command_has_help(monkeypatch: pytest.MonkeyPatch) -> None:
    flags = _flags(monkeypatch)
    missing = [f"{prog} {'/'.join(a.option_strings)}" for prog, a in flags if not a.help]
    assert missing == [], "flags without help:\n" + "\n".join(missing)


def test_one_spelling_per_flag_whatever_its_unit(monkeypatch: pytest.MonkeyPatch) -> None:
    """``--watchdog`` and ``--watchdog-s`` are one idea: one name (unit suffix or none)."""
    spellings: dict[str, set[str]] = {}
    for _, action in _flags(monkeypatch):
        for flag in action.option_strings:
            base = flag.removesuffix("-ms").removesuffix("-s")
            spellings.setdefault(base, set()).add(flag)
    twice = {b: s for b, s in spellings.items() if len(s) > 1}
    assert twice == {}


@pytest.mark.parametrize(
    "module", ["ahp_protocol", "ahp_harness", "ahp_adapters", "ahp_conformance", "ahp_backends"]
)
def test_each_command_prints_the_one_version(
    module: str, capsys: pytest.CaptureFixture[str]
) -> None:
    import importlib

    main = importlib.import_module(f"{module}.cli").main
    prog = {"ahp_adapters": "ahp-adapter", "ahp_backends": "ahp-backend"}.get(
        module, module.replace("_", "-")
    )
    try:
        code = main(["--version"])
    except SystemExit as exit_:  # argparse's version action
        code = exit_.code
    assert code == 0
    assert capsys.readouterr().out == f"{prog} {__version__}\n"


def test_ahp_conformance_imports_only_the_chosen_subcommand() -> None:
    # As ahp-backend does: `ahp-conformance promises ...` never imports the backend judge,
    # the harness judge, the matrix or the fake backend (a fresh interpreter shows it).
    import subprocess
    import sys

    probe = (
        "import sys\n"
        "from ahp_conformance.cli import COMMANDS, main\n"
        "try:\n"
        "    main(['promises', '--help'])\n"
        "except SystemExit:\n"
        "    pass\n"
        "print(sorted(m for m, _ in COMMANDS.values() if m in sys.modules))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=30, check=True
    )
    assert done.stdout.splitlines()[-1] == "['ahp_conformance.promises']", done.stdout

"""``ahp_protocol.cli_kit.run_command``: only the chosen module is imported; help, version
and an unknown command are answered without importing any (in process)."""

from __future__ import annotations

import sys

import pytest
from ahp_protocol._version import __version__
from ahp_protocol.cli_kit import run_command

COMMANDS = {
    "json": ("json.tool", "pretty-print JSON"),
    "never": ("ahp_protocol_no_such_module", "never imported unless chosen"),
}


def test_help_version_and_an_unknown_command_import_nothing(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert run_command("kit", "A test command.", COMMANDS, ["--help"]) == 0
    out = capsys.readouterr().out
    assert "A test command." in out and "never imported unless chosen" in out
    assert run_command("kit", "A test command.", COMMANDS, ["--version"]) == 0
    assert capsys.readouterr().out == f"kit {__version__}\n"
    assert run_command("kit", "A test command.", COMMANDS, ["jsno"]) == 2
    assert capsys.readouterr().err == "kit: error: unknown command 'jsno' (did you mean 'json'?)\n"
    assert run_command("kit", "A test command.", COMMANDS, []) == 2
    assert "ahp_protocol_no_such_module" not in sys.modules


def test_the_chosen_module_runs_with_the_rest_of_argv() -> None:
    with pytest.raises(ModuleNotFoundError):
        run_command("kit", "A test command.", COMMANDS, ["never", "x"])

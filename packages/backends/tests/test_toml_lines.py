"""``ahp_backends.toml_lines``: the one home of the configuration-file helpers.

What this file shows:

- the deny-list and the approval backend share one :class:`ConfigError` and one
  :class:`Locator` (the approval backend no longer imports the deny-list to get them),
  and the deny-list still re-exports them where users imported them;
- the checks every ``[[name]]`` table shares (a table, known keys, a non-empty string,
  a regex that compiles) say the same words with the line of the key, in both files;
- no backend module writes its own reverse-DNS regex: the rule is
  ``ahp_protocol.wire.names``'s.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from ahp_backends import approval, denylist, toml_lines
from ahp_backends.toml_lines import ConfigError, Locator, only_key, read_toml

SOURCES = Path(denylist.__file__).resolve().parent


def test_both_backends_use_the_one_module() -> None:
    assert approval.ConfigError is toml_lines.ConfigError
    assert approval.Locator is toml_lines.Locator
    # the deny-list's import paths keep working
    assert denylist.ConfigError is toml_lines.ConfigError
    assert denylist.Locator is toml_lines.Locator
    assert denylist.read_toml is toml_lines.read_toml
    assert denylist.table_lines is toml_lines.table_lines
    assert denylist.MAX_FILE_BYTES == toml_lines.MAX_FILE_BYTES == 1024 * 1024


def test_the_approval_backend_does_not_import_the_denylist() -> None:
    code = "import sys, ahp_backends.approval; print('ahp_backends.denylist' in sys.modules)"
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.strip() == "False", done.stderr


def locator(text: str, name: str = "things") -> Locator:
    return Locator("conf.toml", text, name)


TEXT = '[[things]]\nname = "a"\npattern = "("\n\n[[things]]\nname = " "\nother = 1\n'


def test_locator_checks_name_the_table_key_and_line() -> None:
    loc = locator(TEXT)
    with pytest.raises(ConfigError) as caught:
        loc.table(1, {"name": " ", "other": 1}, ("name", "pattern"))
    assert str(caught.value) == (
        "conf.toml:7: things[1].other: unknown key 'other' (known: name, pattern)"
    )
    with pytest.raises(ConfigError) as caught:
        loc.table(0, ["not", "a", "table"], ("name",))
    assert str(caught.value) == "conf.toml:1: things[0]: must be a table ([[things]])"
    with pytest.raises(ConfigError) as caught:
        loc.text(1, "name", " ")
    assert str(caught.value) == "conf.toml:6: things[1].name: must be a non-empty string"
    with pytest.raises(ConfigError) as caught:
        loc.regex(0, "(", "pattern")
    assert str(caught.value).startswith("conf.toml:3: things[0].pattern: invalid regex: ")
    with pytest.raises(ConfigError) as caught:
        loc.regex(0, "", "pattern")
    assert str(caught.value) == ("conf.toml:3: things[0].pattern: must be a non-empty regex string")
    assert loc.text(0, "name", "a") == "a"
    assert loc.regex(0, "a+", "pattern").pattern == "a+"
    assert loc.table(0, {"name": "a"}, ("name",)) == {"name": "a"}


def test_a_syntax_error_names_its_line_and_a_foreign_key_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "conf.toml"
    path.write_text('[[things]]\nname = "a"\nname = "b"\n', encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        read_toml(str(path))
    assert caught.value.line == 3 and str(caught.value).startswith(f"{path}:3: invalid TOML: ")
    _, document = read_toml(str(path), b'other = 1\n[[things]]\nname = "a"\n')
    with pytest.raises(ConfigError) as caught:
        only_key(str(path), document, "things")
    assert str(caught.value) == f"{path}: unknown top-level key 'other' (only [[things]] tables)"


@pytest.mark.parametrize(
    ("rules", "rules_at", "require", "require_at"),
    [
        (
            '[[rules]]\nreason = "r"\ncode = "com.example.r"\nkind = "shell"\n'
            '[rules.input]\ncommand = "("\n',
            (6, "rules[0].input.command"),
            '[[require]]\ntool = "Bash"\n\nmatch = "("\n',
            (4, "require[0].match"),
        ),
        (
            '[[rules]]\nreason = " "\ncode = "com.example.r"\nkind = "shell"\n',
            (2, "rules[0].reason"),
            '[[require]]\ntool = "Bash"\nreason = " "\n',
            (3, "require[0].reason"),
        ),
    ],
    ids=["bad_regex", "blank_reason"],
)
def test_both_files_say_the_same_words(
    tmp_path: Path,
    rules: str,
    rules_at: tuple[int, str],
    require: str,
    require_at: tuple[int, str],
) -> None:
    rules_file = tmp_path / "rules.toml"
    rules_file.write_text(rules, encoding="utf-8")
    with pytest.raises(ConfigError) as from_rules:
        denylist.parse_rules(str(rules_file))
    require_file = tmp_path / "require.toml"
    require_file.write_text(require, encoding="utf-8")
    with pytest.raises(ConfigError) as from_require:
        approval.load_requirements(str(require_file))
    assert (from_rules.value.line, from_rules.value.where) == rules_at
    assert (from_require.value.line, from_require.value.where) == require_at
    assert from_rules.value.reason == from_require.value.reason


def test_no_backend_module_writes_its_own_reverse_dns_regex() -> None:
    label = re.escape(r"[A-Za-z][A-Za-z0-9_-]*")
    own = [
        path.name
        for path in sorted(SOURCES.rglob("*.py"))
        if re.search(label + r"\\\\?\.", path.read_text("utf-8"))
    ]
    assert own == [], f"use ahp_protocol.wire.names.is_reverse_dns instead, in {own}"

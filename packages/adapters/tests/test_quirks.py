"""Each harness's quirks as data: the README is generated from them, the codecs follow them.

- the README's per-harness block is exactly :func:`quirks.markdown` (it cannot drift);
- every codec (each dialect of ``DIALECTS``, and every sub-codec a payload resolves
  to, such as VS Code or Cursor running Claude's hook files) has its own ``quirks``,
  with every sentence filled in;
- the codecs are checked against the data where the data is checkable:
  ``render_nothing`` writes ``no_effect_stdout`` for every event (and the
  ``no_effect`` sentence names those bytes), the ``call_ids`` sentence says
  "synthesized" exactly when the fixtures' events carry synthesized ids, and an
  advertised ``modify`` is stated as enforced;
- ``python -m ahp_adapters.dialects.quirks`` prints the block, ``--check`` exits 1
  with a diff on a stale README (2 without markers), ``--write`` regenerates it;
- a dialect added to ``DIALECTS`` appears in the block with no other edit.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from ahp_adapters import dialects
from ahp_adapters.dialects import quirks
from ahp_adapters.dialects.base import Dialect, NativeAnswer, Quirks
from ahp_adapters.dialects.claude import VSCode
from ahp_adapters.dialects.cursor import CursorViaClaude

README = Path(__file__).resolve().parents[1] / "README.md"
FIXTURES = Path(__file__).parent / "fixtures"
CODECS = quirks.codecs()
IDS = [cls.__name__ for cls in CODECS]


def fixtures(dialect: str) -> list[dict[str, Any]]:
    return [
        json.loads(path.read_text())["payload"]
        for path in sorted((FIXTURES / dialect).glob("*.json"))
    ]


def run_quirks(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ahp_adapters.dialects.quirks", *args],
        capture_output=True,
        text=True,
        timeout=30,
    )


# -- the README ------------------------------------------------------------------------


def test_readme_block_is_the_generated_one() -> None:
    _, block, _ = quirks.split(README.read_text("utf-8"))
    assert block == quirks.markdown(), (
        "packages/adapters/README.md is out of date: "
        "run python -m ahp_adapters.dialects.quirks --write packages/adapters/README.md"
    )


def test_quirks_is_a_frozen_table_of_strings() -> None:
    params = Quirks.__dataclass_params__  # type: ignore[attr-defined]
    assert params.frozen and hasattr(Quirks, "__slots__")
    assert all(f.type in ("str", str) for f in dataclasses.fields(Quirks))
    assert set(quirks.LABELS) == set(quirks.sentence_fields())


# -- every codec has its own, complete quirks ------------------------------------------


def test_every_dialect_and_sub_codec_is_listed() -> None:
    listed = set(CODECS)
    mains = {type(dialects.get(name)) for name in dialects.DIALECTS}
    assert mains | {VSCode, CursorViaClaude} <= listed
    cursor_via_claude = {**fixtures("cursor")[0], "hook_event_name": "PreToolUse"}
    vscode = {"hookEventName": "PreToolUse", "sessionId": "s", "tool_name": "x"}
    for name in dialects.DIALECTS:
        for payload in [*fixtures(name), cursor_via_claude, vscode]:
            resolved = type(dialects.get(name).resolve(payload))
            assert resolved in listed, f"{resolved.__name__} has no quirks of its own"


@pytest.mark.parametrize("cls", CODECS, ids=IDS)
def test_each_codec_states_every_quirk(cls: type[Dialect]) -> None:
    assert "quirks" in vars(cls), f"{cls.__name__} inherits its parent's quirks: give it its own"
    data = cls.quirks
    assert isinstance(data, Quirks)
    for name in quirks.sentence_fields():
        value = getattr(data, name)
        assert isinstance(value, str) and value.strip(), f"{cls.__name__}.quirks.{name} is empty"
        assert "\n" not in value, f"{cls.__name__}.quirks.{name}: one sentence, one line"


# -- the codecs follow the data --------------------------------------------------------


@pytest.mark.parametrize("cls", CODECS, ids=IDS)
def test_render_nothing_writes_the_no_effect_stdout(cls: type[Dialect]) -> None:
    codec = cls()
    stdout = cls.quirks.no_effect_stdout
    events = [*sorted(codec.all_events), *sorted(codec.pre_tool_events), "NotAnEvent", None]
    for event in events:
        assert codec.render_nothing(event) == NativeAnswer(stdout, "", 0), event
    if stdout:  # a JSON object without any decision in it, on one line
        assert stdout.endswith("\n") and stdout.count("\n") == 1
        assert json.loads(stdout) == {}
        assert f"`{stdout.strip()}`" in cls.quirks.no_effect
    else:
        assert "empty stdout" in cls.quirks.no_effect


def test_cursor_no_effect_is_an_empty_object() -> None:
    """Cursor blocks on empty output under failClosed: the data must not say nothing."""
    from ahp_adapters.dialects.cursor import Cursor

    assert Cursor.quirks.no_effect_stdout == CursorViaClaude.quirks.no_effect_stdout == "{}\n"


@pytest.mark.parametrize("name", sorted(dialects.DIALECTS))
def test_call_ids_sentence_matches_the_fixtures(name: str) -> None:
    synthesized = real = False
    for payload in fixtures(name):
        codec = dialects.get(name).resolve(payload)
        call = codec.parse(payload, options={}).fields.get("call")
        if call:
            synthesized |= bool(call.get("synthesized"))
            real |= not call.get("synthesized")
    sentence = type(dialects.get(name)).quirks.call_ids
    assert ("synthesized" in sentence) is synthesized, sentence
    assert sentence.lower().startswith(("none", "no ")) is not real, sentence


@pytest.mark.parametrize("cls", CODECS, ids=IDS)
def test_modify_sentence_matches_what_is_advertised(cls: type[Dialect]) -> None:
    codec = cls()
    advertised = any(
        "modify" in codec.capabilities(event).get("effects", []) for event in codec.pre_tool_events
    )
    sentence = cls.quirks.modify
    enforced = sentence.lower().startswith("enforced")
    unadvertised = "not advertised" in sentence.lower()
    assert enforced != unadvertised, f"say 'Enforced: ...' or '... not advertised': {sentence}"
    assert enforced is advertised, sentence  # "Enforced" exactly where modify is advertised


# -- the command line ------------------------------------------------------------------


def test_module_prints_the_block_and_checks_the_readme() -> None:
    printed = run_quirks()
    assert (printed.returncode, printed.stdout) == (0, quirks.markdown())
    checked = run_quirks("--check", str(README))
    assert (checked.returncode, checked.stdout, checked.stderr) == (0, "", "")


def test_check_fails_with_a_diff_and_write_regenerates(tmp_path: Path) -> None:
    text = README.read_text("utf-8")
    stale_line = "| Source | stale |"
    stale = text.replace(quirks.END, stale_line + "\n" + quirks.END)
    copy = tmp_path / "README.md"
    copy.write_text(stale, "utf-8")
    checked = run_quirks("--check", str(copy))
    assert checked.returncode == 1
    assert f"-{stale_line}\n" in checked.stdout
    assert "--write" in checked.stderr
    written = run_quirks("--write", str(copy))
    assert written.returncode == 0, written.stderr
    assert copy.read_text("utf-8") == text
    bare = tmp_path / "bare.md"
    bare.write_text("# no markers\n", "utf-8")
    missing = run_quirks("--check", str(bare))
    assert missing.returncode == 2 and "quirks:begin" in missing.stderr


def test_a_new_dialect_appears_with_no_other_edit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "c15_fake_dialect.py").write_text(
        "from typing import ClassVar\n"
        "from ahp_adapters.dialects.base import Dialect, Quirks\n"
        "class Fake(Dialect):\n"
        "    name: ClassVar[str] = 'fake'\n"
        "    quirks: ClassVar[Quirks] = Quirks(*(['Fake fact.'] * 11), title='Fake Harness')\n"
        "    def parse(self, payload, *, options): raise NotImplementedError\n"
        "    def render_deny(self, reason, native_event): raise NotImplementedError\n",
        "utf-8",
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(dialects.DIALECTS, "fake", ("c15_fake_dialect", "Fake"))
    block = quirks.markdown()
    assert "### Fake Harness" in block
    assert "| Fake Harness | `Fake` | nothing |" in block

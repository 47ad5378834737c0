"""Where the official data lives, and the requirement list and profiles read from it.

The official golden fixtures, requirement list and interop scenarios are data that stays
outside this package (``../shared/fixtures`` beside a checkout of the kit). They are found,
in this order, from ``--fixtures DIR``, from the environment variable ``AHP_FIXTURES_DIR``
(both name the ``ahp-draft`` folder), or beside the kit's checkout. Their siblings
``ahp-conformance`` (requirements and profiles) and ``ahp-interop`` (scenario files) are
found next to it.

A missing folder is a :class:`FixturesMissing` that says what to set; nothing here falls
back to a copy, because there is none.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

CHECKOUT_DEFAULT = Path(__file__).resolve().parents[4].parent / "shared" / "fixtures" / "ahp-draft"
"""``../shared/fixtures/ahp-draft`` beside the kit's checkout (absent in an installed wheel)."""


class FixturesMissing(Exception):
    """The official data folder is not where it was looked for; the message says what to set."""


def draft_dir(explicit: str | Path | None = None) -> Path:
    """The ``ahp-draft`` fixtures folder (golden request/response messages)."""
    if explicit:
        where, how = Path(explicit), "--fixtures"
    elif os.environ.get("AHP_FIXTURES_DIR"):
        where, how = Path(os.environ["AHP_FIXTURES_DIR"]), "AHP_FIXTURES_DIR"
    else:
        where, how = CHECKOUT_DEFAULT, "the default beside the kit's checkout"
    if not (where / "manifest.json").is_file():
        raise FixturesMissing(
            f"no official fixtures at {where} (from {how}): pass --fixtures DIR or set "
            "AHP_FIXTURES_DIR to the 'ahp-draft' folder of the official fixtures "
            "(the one holding manifest.json; 'ahp-conformance' and 'ahp-interop' sit beside it)"
        )
    return where.resolve()


def conformance_dir(explicit: str | Path | None = None) -> Path:
    """The ``ahp-conformance`` folder (``requirements.json``, ``manifest.json``)."""
    return _sibling(draft_dir(explicit), "ahp-conformance", "requirements.json")


def interop_dir(explicit: str | Path | None = None) -> Path:
    """The ``ahp-interop`` folder (the contract's scenario files)."""
    return _sibling(draft_dir(explicit), "ahp-interop", "scenarios.json")


def _sibling(draft: Path, name: str, marker: str) -> Path:
    where = draft.parent / name
    if not (where / marker).is_file():
        raise FixturesMissing(f"no {name}/{marker} beside the fixtures folder {draft}")
    return where


def load_json(path: Path) -> Any:
    """Read one JSON data file; a broken one is a :class:`FixturesMissing` naming it."""
    try:
        return json.loads(path.read_text("utf-8"))
    except (OSError, ValueError) as exc:
        raise FixturesMissing(f"cannot read {path}: {exc}") from None


@dataclass(frozen=True, slots=True)
class Requirement:
    """One normative requirement of the draft (``requirements.json``)."""

    id: str
    level: str
    text: str
    profile: str
    section: str


@dataclass(frozen=True, slots=True)
class Profile:
    """One conformance profile (``manifest.json``): the requirements a claim of it covers."""

    id: str
    requirements: tuple[str, ...]
    roles: tuple[str, ...]


CAPABILITY_PROFILES = ("tool-interception", "lifecycle-observation")
"""AHP-CORE-002: a conforming implementation has ``base`` and at least one of these."""
BINDING_PROFILES = {"stdio": "stdio", "http": "http"}
"""The transport binding each binding profile is about."""


@dataclass(frozen=True, slots=True)
class Catalogue:
    """The requirement list and the profiles, as the official data states them."""

    requirements: dict[str, Requirement]
    profiles: tuple[Profile, ...]

    def profile(self, profile_id: str) -> Profile:
        for profile in self.profiles:
            if profile.id == profile_id:
                return profile
        raise KeyError(profile_id)


def load_catalogue(explicit: str | Path | None = None) -> Catalogue:
    """Read ``requirements.json`` and ``manifest.json`` of the ``ahp-conformance`` folder."""
    folder = conformance_dir(explicit)
    listed = load_json(folder / "requirements.json")
    manifest = load_json(folder / "manifest.json")
    try:
        requirements = {
            r["id"]: Requirement(r["id"], r["level"], r["text"], r["profile"], r["section"])
            for r in listed["requirements"]
        }
        profiles = tuple(
            Profile(p["id"], tuple(p["requirements"]), tuple(p["roles"]))
            for p in manifest["profiles"]
        )
    except (KeyError, TypeError) as exc:
        raise FixturesMissing(f"unexpected shape in {folder}: missing {exc}") from None
    return Catalogue(requirements, profiles)

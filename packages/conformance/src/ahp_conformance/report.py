"""Checks, their verdicts by requirement and by profile, and the three outputs.

A judge (backend, harness, matrix) produces :class:`Check` results: one judged
behaviour each, tagged with the draft's requirement ids, with the :class:`Evidence` of a
failure (what was sent, what came back). A :class:`Report` gathers them and answers:

- per requirement: ``fail`` if any check of it failed, else ``pass`` if any passed, else
  ``unsupported`` (the implementation said it does not do this) or ``n/a`` (the check does
  not apply to it); ``not checked`` when no check of this tool covers the requirement;
- per profile: the same, over the profile's requirements;
- the conformance claim (AHP-CORE-001: role, bindings, profiles) for what passed, and
  AHP-CORE-002 (``base`` plus at least one capability profile) for whether one can be made.

Outputs: :meth:`Report.render` (for a person: a short summary and "fix this first",
the failures grouped by cause (:func:`cause`: one missing field is one line, not one
per check), then the requirement and profile verdicts in a line each and the claim;
``verbose``: the tables and every check, failures with their evidence),
:meth:`Report.to_json` (always complete), :meth:`Report.write_junit`. Every string
that leaves a report goes through :meth:`Report.redact`: secrets given to the report (a
bearer token) never appear, and evidence is bounded and printable.
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from ahp_conformance import __version__
from ahp_conformance.fixtures import CAPABILITY_PROFILES, Catalogue

Status = Literal["pass", "fail", "n/a", "unsupported"]
Verdict = Literal["pass", "fail", "n/a", "unsupported", "not checked"]
EVIDENCE_LIMIT = 600
"""Characters kept of each piece of evidence (the rest is elided, marked)."""
REDACTED = "[redacted]"


@dataclass(frozen=True, slots=True)
class Evidence:
    """What was sent and what came back, as text (already bounded by the report)."""

    sent: str | None = None
    received: str | None = None

    @staticmethod
    def of(sent: object = None, received: object = None) -> Evidence:
        """Evidence from raw values: bytes are shown escaped, objects as compact JSON."""
        return Evidence(_text(sent), _text(received))


def _text(value: object) -> str | None:
    if value is None:
        return None
    if isinstance(value, bytes | bytearray):
        return repr(bytes(value))[2:-1]
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    except (TypeError, ValueError):
        return repr(value)


@dataclass(frozen=True, slots=True)
class Check:
    """One judged behaviour.

    ``id`` is stable (``rpc.parse-error``); ``title`` says in words what must hold;
    ``detail`` says what was seen when it did not (or why it does not apply);
    ``binding`` names the transport the check ran over, when it ran over one.
    """

    id: str
    title: str
    requirements: tuple[str, ...]
    status: Status
    detail: str = ""
    evidence: Evidence | None = None
    binding: str | None = None


_ORDER: dict[str, int] = {"fail": 0, "pass": 1, "unsupported": 2, "n/a": 3, "not checked": 4}
_LABEL = re.compile(r"^[\w.+-]+: (?=\S)")
"""A probe's or scenario's own label before a detail (``benign: ...``, ``deny.http: ...``)."""
_CONSEQUENCE = ("not run: ", "not judged: ")
_MORE = re.compile(r" \(and \d+ more\)$")
FIX_FIRST = 8
"""Causes shown under "fix this first" (the rest are counted; ``--verbose`` shows all)."""


def cause(detail: str) -> str:
    """What a failure's detail says went wrong at the root: without a probe's label, and
    for a check that could not run because of an earlier failure (``not run: ... (WHY)``,
    ``not judged: ... (WHY)``), that WHY. Failures with one cause are one line of a report."""
    text = detail.strip()
    while True:
        label = _LABEL.match(text)
        if label and not text.startswith(_CONSEQUENCE):
            text = text[label.end() :]
            continue
        if text.startswith(_CONSEQUENCE) and text.endswith(")") and "(" in text:
            text = text[text.index("(") + 1 : -1].strip()
            continue
        break
    return _MORE.sub("", text) or "(no detail)"


@dataclass(frozen=True, slots=True)
class Cause:
    """Failed checks that share one root cause (:func:`cause`)."""

    text: str
    checks: tuple[Check, ...]

    @property
    def requirements(self) -> list[str]:
        return list(dict.fromkeys(r for c in self.checks for r in c.requirements))


def combine(statuses: Iterable[str]) -> Verdict:
    """One verdict from many: any failure fails; otherwise any pass passes."""
    seen = set(statuses)
    verdicts: tuple[Verdict, ...] = ("fail", "pass", "unsupported", "n/a")
    for verdict in verdicts:
        if verdict in seen:
            return verdict
    return "not checked"


@dataclass
class Report:
    """All checks of one run about one implementation (``role``: backend or harness)."""

    role: str
    subject: str
    catalogue: Catalogue
    bindings: tuple[str, ...] = ()
    checks: list[Check] = field(default_factory=list)
    secrets: Sequence[str] = ()
    implements: frozenset[str] | None = None
    """The capability profiles the implementation was seen to implement (a backend: what its
    discovery declares and what it answered; a harness: what the judge exercised). A
    capability profile outside it is not claimed even when none of its checks failed: the
    lifecycle-observation profile, for one, holds only AHP-RPC-002, which every backend
    that stays silent after a notification passes. ``None``: not known, not filtered."""

    def add(self, check: Check) -> Check:
        self.checks.append(check)
        return check

    def extend(self, checks: Iterable[Check]) -> None:
        self.checks.extend(checks)

    # -- verdicts ---------------------------------------------------------------

    @property
    def failed(self) -> bool:
        """True when any applicable check failed (the exit status is then 1)."""
        return any(c.status == "fail" for c in self.checks)

    def requirement(self, requirement_id: str) -> Verdict:
        return combine(c.status for c in self.checks if requirement_id in c.requirements)

    def profile(self, profile_id: str) -> Verdict:
        profile = self.catalogue.profile(profile_id)
        verdicts = [self.requirement(r) for r in profile.requirements]
        return combine(v for v in verdicts if v != "not checked")

    def claimed_profiles(self) -> list[str]:
        """Profiles with a pass and no failure (binding profiles only for bindings judged)."""
        claimed = []
        for profile in self.catalogue.profiles:
            if self.role not in profile.roles or self.profile(profile.id) != "pass":
                continue
            if profile.id in ("stdio", "http") and profile.id not in self.bindings:
                continue
            if (
                profile.id in CAPABILITY_PROFILES
                and self.implements is not None
                and profile.id not in self.implements
            ):
                continue
            claimed.append(profile.id)
        return claimed

    def profile_label(self, profile_id: str) -> str:
        """A profile as the summary shows it: its verdict, or why it is not judged here (a
        binding this run did not use, a capability profile the subject did not show)."""
        if profile_id in ("stdio", "http") and profile_id not in self.bindings:
            return "not run"
        if (
            profile_id in CAPABILITY_PROFILES
            and self.implements is not None
            and profile_id not in self.implements
        ):
            return "not seen"
        return self.profile(profile_id)

    def claim(self) -> str:
        """The conformance claim for what passed (AHP-CORE-001), or why none can be made."""
        profiles = self.claimed_profiles()
        capability = [p for p in profiles if p in CAPABILITY_PROFILES]
        if "base" not in profiles or not capability:
            missing = "the base profile" if "base" not in profiles else "a capability profile"
            return (
                f"No conformance claim: {missing} did not pass (AHP-CORE-002 needs base and "
                f"at least one of {', '.join(CAPABILITY_PROFILES)})."
            )
        unchecked = sorted(
            r
            for p in profiles
            for r in self.catalogue.profile(p).requirements
            if self.requirement(r) == "not checked"
        )
        text = (
            f"Conformance claim (AHP-CORE-001): role {self.role}; "
            f"bindings {', '.join(self.bindings) or 'none'}; profiles {', '.join(profiles)}; "
            f"protocol draft; judged by ahp-conformance {__version__}."
        )
        if unchecked:
            text += f" Not checked by this tool: {', '.join(dict.fromkeys(unchecked))}."
        if self.implements is not None:
            unseen = [p for p in CAPABILITY_PROFILES if p not in self.implements]
            if unseen:
                text += f" Capability profiles not seen in this run: {', '.join(unseen)}."
        return text

    # -- output -----------------------------------------------------------------

    def redact(self, text: str | None) -> str:
        """``text`` without secrets, with control characters escaped, bounded."""
        if text is None:
            return ""
        for secret in self.secrets:
            if secret:
                text = text.replace(secret, REDACTED)
        text = "".join(ch if ch.isprintable() or ch == " " else repr(ch)[1:-1] for ch in text)
        if len(text) > EVIDENCE_LIMIT:
            text = f"{text[:EVIDENCE_LIMIT]}… [{len(text) - EVIDENCE_LIMIT} more characters]"
        return text

    def to_json(self) -> dict[str, Any]:
        """The whole report as JSON (``--json``)."""

        def check(c: Check) -> dict[str, Any]:
            out: dict[str, Any] = {
                "id": c.id,
                "title": c.title,
                "requirements": list(c.requirements),
                "status": c.status,
            }
            if c.binding:
                out["binding"] = c.binding
            if c.detail:
                out["detail"] = self.redact(c.detail)
            if c.evidence is not None:
                out["evidence"] = {
                    "sent": self.redact(c.evidence.sent),
                    "received": self.redact(c.evidence.received),
                }
            return out

        return {
            "tool": f"ahp-conformance {__version__}",
            "protocolVersion": "draft",
            "role": self.role,
            "subject": self.redact(self.subject),
            "bindings": list(self.bindings),
            "passed": not self.failed,
            "requirements": {
                rid: {"status": self.requirement(rid), "level": r.level, "text": r.text}
                for rid, r in self.catalogue.requirements.items()
            },
            "profiles": {p.id: self.profile(p.id) for p in self.catalogue.profiles},
            "claim": self.claim(),
            "checks": [check(c) for c in self.checks],
        }

    def write_junit(self, path: Path) -> None:
        """One JUnit ``testcase`` per check (``--junit FILE``), for CI systems."""
        suite = ET.Element(
            "testsuite",
            name=f"ahp-conformance {self.role}",
            tests=str(len(self.checks)),
            failures=str(sum(c.status == "fail" for c in self.checks)),
            skipped=str(sum(c.status in ("n/a", "unsupported") for c in self.checks)),
        )
        for c in self.checks:
            case = ET.SubElement(
                suite,
                "testcase",
                classname=" ".join(c.requirements) or "ahp",
                name=f"{c.id}{f' [{c.binding}]' if c.binding else ''}: {c.title}",
            )
            if c.status == "fail":
                failure = ET.SubElement(case, "failure", message=self.redact(c.detail))
                if c.evidence is not None:
                    failure.text = (
                        f"sent: {self.redact(c.evidence.sent)}\n"
                        f"received: {self.redact(c.evidence.received)}"
                    )
            elif c.status in ("n/a", "unsupported"):
                ET.SubElement(case, "skipped", message=f"{c.status}: {self.redact(c.detail)}")
        ET.ElementTree(suite).write(path, encoding="utf-8", xml_declaration=True)

    def causes(self) -> list[Cause]:
        """The failures grouped by root cause, the most checks first (then first seen)."""
        groups: dict[str, list[Check]] = {}
        for c in self.checks:
            if c.status == "fail":
                groups.setdefault(cause(self.redact(c.detail) if c.detail else c.title), []).append(
                    c
                )
        ordered = sorted(groups.items(), key=lambda item: -len(item[1]))
        return [Cause(text, tuple(checks)) for text, checks in ordered]

    def render(self, console: Any = None, *, verbose: bool = False) -> None:
        """For a person: the summary and "fix this first", the verdicts in brief, the claim;
        ``verbose``: also the tables and every check (failures with their evidence)."""
        from rich.console import Console
        from rich.markup import escape

        console = console or Console(soft_wrap=True)  # a command or path stays on one line
        console.print(f"[bold]ahp-conformance {self.role}[/] — {escape(self.redact(self.subject))}")
        failed = [c for c in self.checks if c.status == "fail"]
        counts = {s: sum(c.status == s for c in self.checks) for s in _ORDER if s != "not checked"}
        tally = ", ".join(f"{n} {s}" for s, n in counts.items() if n)
        if not failed:
            console.print(f"[green]PASSED[/]: no check failed ({len(self.checks)} checks: {tally})")
        else:
            causes = self.causes()
            console.print(
                f"[bold red]FAILED[/]: {len(failed)} of {len(self.checks)} checks failed, "
                f"{len(causes)} cause{'s' if len(causes) != 1 else ''} ({tally})"
            )
            console.print("[bold]Fix this first:[/]")
            shown = causes if verbose else causes[:FIX_FIRST]
            for group in shown:
                console.print(self._cause_line(group, escape))
            if len(shown) < len(causes):
                rest = causes[len(shown) :]
                more = sum(len(g.checks) for g in rest)
                console.print(
                    f"  … {len(rest)} more causes ({more} checks): --verbose shows every one"
                )
        by: dict[str, list[str]] = {}
        for rid in self.catalogue.requirements:
            by.setdefault(self.requirement(rid), []).append(rid)
        parts = [f"{verdict} {' '.join(by[verdict])}" for verdict in ("fail",) if verdict in by]
        parts += [
            f"{len(by[v])} {v}" for v in ("pass", "unsupported", "n/a", "not checked") if v in by
        ]
        console.print("Requirements: " + "; ".join(parts))
        console.print(
            "Profiles: "
            + ", ".join(f"{p.id} {self.profile_label(p.id)}" for p in self.catalogue.profiles)
        )
        console.print(escape(self.claim()))
        if verbose:
            self._render_tables(console)
        else:
            console.print(
                "[dim]--verbose: the tables and every check with its evidence; "
                "--json: the whole report[/]"
            )

    def _cause_line(self, group: Cause, escape: Any) -> str:
        reqs = group.requirements
        shown_reqs = ", ".join(reqs[:5]) + (f", +{len(reqs) - 5}" if len(reqs) > 5 else "")
        if len(group.checks) == 1:
            (c,) = group.checks
            where = f" [{c.binding}]" if c.binding else ""
            return (
                f"  [bold red]FAIL[/] {escape(c.id)}{escape(where)} ({shown_reqs}): "
                f"{escape(group.text)}"
            )
        ids = [c.id for c in group.checks]
        example = ", ".join(ids[:2]) + (f", +{len(ids) - 2} more" if len(ids) > 2 else "")
        return (
            f"  [bold red]FAIL[/] {len(ids)} checks: {escape(group.text)} ({shown_reqs}; "
            f"{escape(example)})"
        )

    def _render_tables(self, console: Any) -> None:
        """The verbose part: by requirement, by profile, every check (failures' evidence)."""
        from rich.markup import escape
        from rich.table import Table

        style = {
            "pass": "green",
            "fail": "bold red",
            "n/a": "dim",
            "unsupported": "yellow",
            "not checked": "dim",
        }
        table = Table(title="By requirement", title_justify="left")
        widths = {"requirement": 15, "level": 8, "verdict": 11, "checks": 7}
        for column, width in widths.items():
            table.add_column(column, no_wrap=True, min_width=width)
        rest = max(20, console.width - sum(widths.values()) - 3 * len(widths) - 4)
        table.add_column("text", no_wrap=True, max_width=rest)
        for rid, requirement in self.catalogue.requirements.items():
            mine = [c for c in self.checks if rid in c.requirements]
            verdict = self.requirement(rid)
            passed = sum(c.status == "pass" for c in mine)
            table.add_row(
                rid,
                requirement.level,
                f"[{style[verdict]}]{verdict}[/]",
                f"{passed}/{len(mine)}" if mine else "",
                escape(requirement.text),
            )
        console.print(table)
        profiles = Table(title="By profile", title_justify="left")
        for column in ("profile", "verdict", "requirements"):
            profiles.add_column(column)
        for profile in self.catalogue.profiles:
            verdict = self.profile(profile.id)
            profiles.add_row(
                profile.id, f"[{style[verdict]}]{verdict}[/]", " ".join(profile.requirements)
            )
        console.print(profiles)
        failures = [c for c in self.checks if c.status == "fail"]
        for c in failures:
            where = f" [{c.binding}]" if c.binding else ""
            console.print(
                f"[bold red]FAIL[/] {escape(c.id)}{escape(where)} "
                f"({', '.join(c.requirements)}): {escape(c.title)}"
            )
            if c.detail:
                console.print(f"  seen: {escape(self.redact(c.detail))}")
            if c.evidence is not None:
                console.print(f"  sent: {escape(self.redact(c.evidence.sent))}")
                console.print(f"  received: {escape(self.redact(c.evidence.received))}")
        for c in self.checks:
            if c.status == "fail":
                continue
            where = f" [{c.binding}]" if c.binding else ""
            detail = f": {escape(self.redact(c.detail))}" if c.detail else ""
            console.print(
                f"{c.status.upper()} {escape(c.id)}{escape(where)} "
                f"({', '.join(c.requirements)}){detail}"
            )


# -- the command line's output options (shared by every judge) ---------------------------


def add_output_arguments(parser: Any) -> None:
    """``--json``, ``--junit FILE`` and ``--fixtures DIR`` for an ``argparse`` subcommand."""
    parser.add_argument(
        "--json", action="store_true", help="print the report as JSON instead of tables"
    )
    parser.add_argument("--junit", metavar="FILE", help="also write a JUnit XML report to FILE")
    parser.add_argument(
        "--verbose",
        "-v",
        action="store_true",
        help="the human report in full: the tables and every check, failures with evidence",
    )
    parser.add_argument(
        "--fixtures",
        metavar="DIR",
        help="the official 'ahp-draft' fixtures folder (default: $AHP_FIXTURES_DIR, "
        "else ../shared/fixtures/ahp-draft beside the kit's checkout)",
    )


def emit(report: Report, args: Any) -> int:
    """Print ``report`` as the options ask and return the exit status (1 on any failure)."""
    if getattr(args, "junit", None):
        report.write_junit(Path(args.junit))
    if getattr(args, "json", False):
        print(json.dumps(report.to_json(), indent=2, ensure_ascii=False))
    else:
        report.render(verbose=bool(getattr(args, "verbose", False)))
    return 1 if report.failed else 0

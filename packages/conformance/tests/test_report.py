"""Reports: verdicts by requirement and profile, the claim, redaction, JSON and JUnit output."""

from __future__ import annotations

import io
import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from ahp_conformance.fixtures import FixturesMissing, draft_dir, load_catalogue
from ahp_conformance.report import Check, Evidence, Report, combine
from rich.console import Console

import kit_testing

SECRET = "s3cr3t-token-value"


@pytest.fixture(scope="module")
def catalogue():  # type: ignore[no-untyped-def]
    return load_catalogue(kit_testing.fixtures_root())


def check(status: str, *requirements: str, id: str = "c") -> Check:
    return Check(id, "a check", requirements, status)  # type: ignore[arg-type]


def test_the_catalogue_is_the_official_list(catalogue) -> None:  # type: ignore[no-untyped-def]
    assert len(catalogue.requirements) == 26
    assert {p.id for p in catalogue.profiles} >= {"base", "tool-interception", "stdio", "http"}
    assert "AHP-STDIO-001" in catalogue.profile("stdio").requirements


def test_a_missing_fixtures_folder_says_what_to_set(tmp_path: Path) -> None:
    with pytest.raises(FixturesMissing, match="AHP_FIXTURES_DIR") as caught:
        draft_dir(tmp_path / "nowhere")
    assert str(tmp_path / "nowhere") in str(caught.value)


def test_a_failure_outweighs_passes_and_nothing_checked_is_said() -> None:
    assert combine(["pass", "fail", "n/a"]) == "fail"
    assert combine(["n/a", "pass", "unsupported"]) == "pass"
    assert combine(["n/a", "unsupported"]) == "unsupported"
    assert combine(["n/a"]) == "n/a"
    assert combine([]) == "not checked"


def test_verdicts_by_requirement_and_profile(catalogue) -> None:  # type: ignore[no-untyped-def]
    report = Report("backend", "x", catalogue, ("stdio",))
    report.add(check("pass", "AHP-RPC-001"))
    report.add(check("fail", "AHP-RPC-001", "AHP-STDIO-001"))
    report.add(check("pass", "AHP-CAP-001"))
    assert report.requirement("AHP-RPC-001") == "fail"
    assert report.requirement("AHP-CAP-001") == "pass"
    assert report.requirement("AHP-DEC-002") == "not checked"
    assert report.profile("base") == "fail"
    assert report.profile("stdio") == "fail"
    assert report.profile("tool-interception") == "pass"
    assert report.failed


def test_the_claim_names_role_bindings_and_profiles_only_for_what_passed(catalogue) -> None:  # type: ignore[no-untyped-def]
    report = Report("backend", "x", catalogue, ("stdio",))
    report.add(check("pass", "AHP-RPC-001", "AHP-STDIO-001", "AHP-CAP-001", "AHP-HTTP-001"))
    claim = report.claim()
    assert claim.startswith("Conformance claim (AHP-CORE-001): role backend; bindings stdio;")
    assert "profiles base, tool-interception, stdio;" in claim
    assert "http" not in claim.split("profiles")[1].split(";")[0]  # not a binding judged
    assert "Not checked by this tool:" in claim and "AHP-DEC-002" in claim

    without_capability = Report("backend", "x", catalogue, ("stdio",))
    without_capability.add(check("pass", "AHP-RPC-001"))
    assert without_capability.claim().startswith("No conformance claim: a capability profile")
    failed_base = Report("backend", "x", catalogue, ("stdio",))
    failed_base.extend([check("fail", "AHP-RPC-001"), check("pass", "AHP-CAP-001")])
    assert failed_base.claim().startswith("No conformance claim: the base profile")


def failing_report(catalogue) -> Report:  # type: ignore[no-untyped-def]
    report = Report("backend", f"--url http://127.0.0.1:1 token {SECRET}", catalogue, ("http",),
                    secrets=(SECRET,))  # fmt: skip
    report.add(
        Check(
            "rpc.parse-error",
            "malformed JSON gets -32700",
            ("AHP-RPC-001",),
            "fail",
            detail=f"the backend echoed Authorization: Bearer {SECRET}",
            evidence=Evidence.of(b"{not json\x00", {"error": {"message": SECRET + "\n" * 3}}),
            binding="http",
        )
    )
    report.add(Check("rpc.notify", "no answer", ("AHP-RPC-002",), "n/a", detail="stdio only"))
    return report


def test_no_output_holds_a_secret_and_evidence_is_printable(catalogue, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    report = failing_report(catalogue)
    as_json = json.dumps(report.to_json())
    junit = tmp_path / "r.xml"
    report.write_junit(junit)
    screen = io.StringIO()
    report.render(Console(file=screen, width=200))
    for text in (as_json, junit.read_text("utf-8"), screen.getvalue()):
        assert SECRET not in text
        assert "[redacted]" in text
    evidence = report.to_json()["checks"][0]["evidence"]
    assert evidence["sent"] == "{not json\\x00"
    assert "\n" not in evidence["received"]
    assert "FAIL rpc.parse-error [http] (AHP-RPC-001)" in screen.getvalue()


def test_long_evidence_is_bounded(catalogue) -> None:  # type: ignore[no-untyped-def]
    report = Report("backend", "x", catalogue)
    text = report.redact("x" * 10_000)
    assert len(text) < 700 and text.endswith("[9400 more characters]")


def test_junit_has_one_case_per_check_with_failures_and_skips(catalogue, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "r.xml"
    failing_report(catalogue).write_junit(path)
    suite = ET.parse(path).getroot()
    assert suite.tag == "testsuite"
    assert (suite.get("tests"), suite.get("failures"), suite.get("skipped")) == ("2", "1", "1")
    cases = suite.findall("testcase")
    assert cases[0].get("classname") == "AHP-RPC-001"
    assert cases[0].find("failure") is not None and cases[1].find("skipped") is not None


def test_json_has_every_requirement_and_profile(catalogue) -> None:  # type: ignore[no-untyped-def]
    data = failing_report(catalogue).to_json()
    assert len(data["requirements"]) == 26
    assert data["requirements"]["AHP-RPC-001"]["status"] == "fail"
    assert data["profiles"]["base"] == "fail"
    assert data["profiles"]["http"] == "not checked"
    assert data["passed"] is False and data["claim"].startswith("No conformance claim")


def test_a_capability_profile_not_implemented_is_not_claimed(catalogue) -> None:  # type: ignore[no-untyped-def]
    checks = [check("pass", "AHP-RPC-001", "AHP-RPC-002", "AHP-STDIO-001", "AHP-CAP-001")]
    unknown = Report("backend", "x", catalogue, ("stdio",), list(checks))
    assert "lifecycle-observation" in unknown.claimed_profiles()
    seen = Report("backend", "x", catalogue, ("stdio",), list(checks),
                  implements=frozenset({"tool-interception"}))  # fmt: skip
    assert seen.claimed_profiles() == ["base", "tool-interception", "stdio"]
    assert seen.claim().endswith("Capability profiles not seen in this run: lifecycle-observation.")
    # #29: the summary said "lifecycle-observation pass" beside "not seen in this run".
    assert seen.profile_label("lifecycle-observation") == "not seen"
    assert seen.profile_label("http") == "not run" and seen.profile_label("stdio") == "pass"
    nothing = Report("backend", "x", catalogue, ("stdio",), list(checks), implements=frozenset())
    assert nothing.claim().startswith("No conformance claim: a capability profile")

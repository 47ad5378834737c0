"""``ahp-protocol send``: a one-shot harness from the shell, against real backend processes.

Shows the exit codes (0 without a denial, 1 on a denial, explicit or synthetic, 2 on a
usage or registration error with a message that says where), partial event
completion (``id``, ``time``, ``source``, ``harness`` filled, given fields kept),
``--repeat N`` (N distinct event ids on the wire, latency median and p90), ``--json``
output, discovery warnings, and that a bearer token never appears in the output.
Most runs call :func:`ahp_protocol.cli.main` in-process (output captured); one runs the
installed ``ahp-protocol`` command end to end.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from ahp_protocol import __version__
from ahp_protocol.cli import main

BACKENDS = Path(__file__).resolve().parent / "backends"
RECORDER = BACKENDS / "recorder.py"
MISBEHAVE = BACKENDS / "misbehave.py"
PY = sys.executable
COMMAND = Path(sys.executable).parent / "ahp-protocol"

PARTIAL_EVENT: dict[str, Any] = {
    "type": "tool.before",
    "session": {"id": "sess_cli", "cwd": "/repo"},
    "tool": {"name": "Bash", "input": {"command": "git status"}, "origin": "native"},
    "call": {"id": "call_cli"},
    "path": "native",
}
DENY = {"type": "deny", "reason": "Not from the shell.", "code": "com.example.cli.no"}


def intercept(policy: str = "fail-open", timeout_ms: int = 5000) -> dict[str, Any]:
    return {
        "mode": "intercept",
        "events": ["tool.before"],
        "timeoutMs": timeout_ms,
        "failurePolicy": policy,
        "content": {"default": "body"},
    }


def recorder_hook(
    record: Path,
    effects: list[dict[str, Any]] | None = None,
    *,
    hook_id: str = "com.example.cli",
    subs: list[dict[str, Any]] | None = None,
    lifecycle: str = "persistent",
) -> dict[str, Any]:
    args = ["-I", "-S", str(RECORDER), "--record", str(record)]
    args += ["--effects", json.dumps(effects or [])]
    if lifecycle == "per_event":
        args.append("--once")
    hook: dict[str, Any] = {
        "id": hook_id,
        "transport": {"type": "stdio", "command": PY, "args": args, "lifecycle": lifecycle},
    }
    if subs is not None:
        hook["subscriptions"] = subs
    return hook


def write(path: Path, document: Any) -> str:
    path.write_text(json.dumps(document), "utf-8")
    return str(path)


def registration_file(tmp_path: Path, *hooks: dict[str, Any]) -> str:
    return write(tmp_path / "registration.json", {"protocolVersion": "draft", "hooks": list(hooks)})


def event_file(tmp_path: Path, event: dict[str, Any] | None = None) -> str:
    return write(tmp_path / "event.json", PARTIAL_EVENT if event is None else event)


def intercepts(record: Path) -> list[dict[str, Any]]:
    lines = record.read_text("ascii").splitlines() if record.exists() else []
    entries = [json.loads(line) for line in lines if line]
    return [
        e["message"]
        for e in entries
        if e["event"] == "message" and e["message"].get("method") == "hooks/intercept"
    ]


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["send", *argv])
    out, err = capsys.readouterr()
    return code, out, err


# -- exit codes ------------------------------------------------------------------------


def test_exit_0_without_a_denial(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rec = tmp_path / "rec.jsonl"
    reg = registration_file(tmp_path, recorder_hook(rec, subs=[intercept()]))
    code, out, err = run(capsys, "--registration", reg, "--event", event_file(tmp_path))
    assert code == 0, err
    assert "settled: permission none, flow none" in out
    assert re.search(r"com\.example\.cli\[0\] intercept\s+no_effect", out)
    assert len(intercepts(rec)) == 1


def test_exit_1_on_a_denial(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    reg = registration_file(
        tmp_path, recorder_hook(tmp_path / "r.jsonl", [DENY], subs=[intercept()])
    )
    code, out, _ = run(capsys, "--registration", reg, "--event", event_file(tmp_path))
    assert code == 1
    assert (
        "settled: deny (denied by com.example.cli): Not from the shell. [com.example.cli.no]" in out
    )


def test_exit_1_on_a_synthetic_denial(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    hook = {
        "id": "com.example.broken",
        "transport": {
            "type": "stdio",
            "command": PY,
            "args": ["-I", "-S", str(MISBEHAVE), "garbage"],
            "lifecycle": "persistent",
        },
        "subscriptions": [intercept("fail-closed")],
    }
    reg = registration_file(tmp_path, hook)
    code, out, _ = run(capsys, "--registration", reg, "--event", event_file(tmp_path))
    assert code == 1
    assert "malformed_output -> fail-closed" in out
    assert "settled: deny (synthetic denial after com.example.broken)" in out
    assert "not json" not in out  # no backend output in what is shown


def test_exit_0_for_an_observed_event(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rec = tmp_path / "obs.jsonl"
    observer = {"mode": "observe", "events": ["session.*"], "content": {"default": "body"}}
    reg = registration_file(tmp_path, recorder_hook(rec, subs=[observer]))
    event = {"type": "session.end", "session": {"id": "s"}, "outcome": "completed", "reason": "r"}
    code, out, err = run(capsys, "--registration", reg, "--event", event_file(tmp_path, event))
    assert code == 0, err
    assert re.search(r"com\.example\.cli\[0\] observe\s+delivered", out)
    lines = [json.loads(x) for x in rec.read_text("ascii").splitlines()]
    (note,) = [x["message"] for x in lines if x["event"] == "message"]
    assert note["method"] == "hooks/observe" and note["params"]["event"]["type"] == "session.end"


USAGE_ERRORS = [
    # (case id, how to build the arguments, what the message must say)
    ("missing-registration", "no-registration", "file not found"),
    ("missing-event", "no-event", "cannot read event file"),
    ("invalid-registration", "bad-registration", "hooks[0].subscriptions[0]: "),
    ("invalid-registration-json", "bad-json", "invalid JSON at line 1"),
    ("unresolvable-token", "token", "hooks[0].authentication.tokenEnv"),
    ("unknown-effect", "effects=teleport", "--effects: 'teleport'"),
    ("effect-illegal-here", "effects=deny,continue", "--effects: 'continue'"),
    ("event-without-type", "event-no-type", "type: "),
    ("event-removed-type", "event-removed-type", "type: "),
    ("event-invalid", "event-invalid", "tool"),
    ("event-not-json", "event-bad-json", "event.json: $: not valid JSON: "),
    ("event-not-utf8", "event-not-utf8", "event.json: $: not valid UTF-8"),
    ("repeat-zero", "repeat=0", "--repeat"),
]


@pytest.mark.parametrize(("case", "how", "says"), USAGE_ERRORS, ids=[c[0] for c in USAGE_ERRORS])
def test_exit_2_on_usage_and_registration_errors(
    case: str,
    how: str,
    says: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    rec = tmp_path / "rec.jsonl"
    hook = recorder_hook(rec, subs=[intercept()])
    reg = registration_file(tmp_path, hook)
    event = event_file(tmp_path)
    extra: list[str] = []
    if how == "no-registration":
        reg = str(tmp_path / "absent.json")
    elif how == "no-event":
        event = str(tmp_path / "absent-event.json")
    elif how == "bad-registration":
        del hook["subscriptions"][0]["failurePolicy"]
        reg = registration_file(tmp_path, hook)
    elif how == "bad-json":
        reg = str(tmp_path / "bad.json")
        Path(reg).write_text("{not json", "utf-8")
    elif how == "token":
        monkeypatch.delenv("AHP_CLI_UNSET_TOKEN", raising=False)
        http = {
            "id": "com.example.http",
            "transport": {"type": "http", "url": "http://127.0.0.1:9/"},
            "authentication": {"type": "bearer", "tokenEnv": "AHP_CLI_UNSET_TOKEN"},
            "subscriptions": [intercept()],
        }
        reg = registration_file(tmp_path, http)
    elif how.startswith("effects="):
        extra = ["--effects", how.split("=", 1)[1]]
    elif how == "event-no-type":
        event = event_file(tmp_path, {k: v for k, v in PARTIAL_EVENT.items() if k != "type"})
    elif how == "event-removed-type":
        event = event_file(tmp_path, {**PARTIAL_EVENT, "type": "tool.error"})
    elif how == "event-invalid":
        event = event_file(tmp_path, {k: v for k, v in PARTIAL_EVENT.items() if k != "tool"})
    elif how == "event-bad-json":
        Path(event).write_text("{not json", "utf-8")
    elif how == "event-not-utf8":
        Path(event).write_bytes(b'{"type": "tool.before\xff"}')
    elif how.startswith("repeat="):
        extra = ["--repeat", how.split("=", 1)[1]]
    code, out, err = run(capsys, "--registration", reg, "--event", event, *extra)
    assert code == 2, (out, err)
    assert err.startswith("ahp-protocol send: error: ")
    assert says in err, err
    assert out == ""
    assert intercepts(rec) == []  # nothing was sent


def test_exit_2_on_missing_arguments(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["send", "--event", "x.json"])
    assert info.value.code == 2
    assert "--registration" in capsys.readouterr().err


# -- the event sent --------------------------------------------------------------------


def test_a_partial_event_is_completed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rec = tmp_path / "rec.jsonl"
    reg = registration_file(tmp_path, recorder_hook(rec, subs=[intercept()]))
    code, _, err = run(capsys, "--registration", reg, "--event", event_file(tmp_path))
    assert code == 0, err
    (message,) = intercepts(rec)
    event = message["params"]["event"]
    assert re.fullmatch(r"evt_[0-9a-f]{32}", event["id"]) and message["id"] == event["id"]
    assert re.fullmatch(r"urn:uuid:[0-9a-f-]{36}", event["source"])
    assert event["time"].endswith("Z")
    assert datetime.fromisoformat(event["time"].replace("Z", "+00:00")).tzinfo is not None
    assert event["harness"] == {"name": "ahp-protocol-send", "version": __version__}
    for key, value in PARTIAL_EVENT.items():  # what was given is sent as given
        assert event[key] == value
    assert message["params"]["capabilities"]["effects"]  # the full grant at tool.before


def test_given_envelope_fields_are_kept(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rec = tmp_path / "rec.jsonl"
    given = {
        **PARTIAL_EVENT,
        "id": "evt_given",
        "source": "urn:example:given",
        "time": "2026-01-02T03:04:05Z",
        "harness": {"name": "mine", "version": "9"},
    }
    reg = registration_file(tmp_path, recorder_hook(rec, subs=[intercept()]))
    code, _, err = run(capsys, "--registration", reg, "--event", event_file(tmp_path, given))
    assert code == 0, err
    (message,) = intercepts(rec)
    assert message["params"]["event"] == given


def test_effects_option_narrows_the_grant(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rec = tmp_path / "rec.jsonl"
    reg = registration_file(tmp_path, recorder_hook(rec, subs=[intercept()]))
    args = ("--registration", reg, "--event", event_file(tmp_path), "--effects", "deny, allow")
    code, _, err = run(capsys, *args)
    assert code == 0, err
    (message,) = intercepts(rec)
    assert message["params"]["capabilities"] == {"effects": ["deny", "allow"]}


# -- --repeat and --json ---------------------------------------------------------------


def test_repeat_sends_distinct_events_and_reports_latency(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rec = tmp_path / "rec.jsonl"
    reg = registration_file(tmp_path, recorder_hook(rec, subs=[intercept()]))
    fixed = event_file(tmp_path, {**PARTIAL_EVENT, "id": "evt_fixed"})
    code, out, err = run(capsys, "--registration", reg, "--event", fixed, "--repeat", "7")
    assert code == 0, err
    sent = intercepts(rec)
    assert len(sent) == 7
    assert len({m["id"] for m in sent}) == 7  # distinct ids, even from a fixed one
    assert all(m["id"] == m["params"]["event"]["id"] for m in sent)
    found = re.search(r"7 events, 0 denied; latency median ([\d.]+) ms, p90 ([\d.]+) ms", out)
    assert found, out
    assert float(found[2]) >= float(found[1])


def test_json_output_parses(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    reg = registration_file(
        tmp_path, recorder_hook(tmp_path / "r.jsonl", [DENY], subs=[intercept()])
    )
    args = ["--registration", reg, "--event", event_file(tmp_path), "--json"]
    code, out, _ = run(capsys, *args)
    assert code == 1
    single = json.loads(out)
    assert single["latency"] is None
    result = single["result"]
    assert result["eventType"] == "tool.before" and result["permission"] == "deny"
    assert result["denial"] == {
        "reason": "Not from the shell.",
        "code": "com.example.cli.no",
        "backend": "com.example.cli",
        "subscription": 0,
        "synthetic": False,
    }
    assert [d["outcome"] for d in result["diagnostics"]] == ["denied"]
    code, out, _ = run(capsys, *args, "--repeat", "4")
    assert code == 1
    latency = json.loads(out)["latency"]
    assert (latency["events"], latency["denied"]) == (4, 4)
    assert 0 < latency["medianMs"] <= latency["p90Ms"]


def test_p90_is_never_below_the_median(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """With two events the first (which spawns the backend) is the slow one: p90 must be
    the slower of the two, never below the median."""
    reg = registration_file(tmp_path, recorder_hook(tmp_path / "r.jsonl", subs=[intercept()]))
    args = ["--registration", reg, "--event", event_file(tmp_path), "--json", "--repeat", "2"]
    code, out, _ = run(capsys, *args)
    assert code == 0
    latency = json.loads(out)["latency"]
    assert latency["p90Ms"] >= latency["medianMs"], latency


def test_failed_discovery_is_a_warning(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # No subscriptions and no hooks/configuration answer (-32601): skipped, with a warning.
    reg = registration_file(tmp_path, recorder_hook(tmp_path / "r.jsonl"))
    code, out, err = run(capsys, "--registration", reg, "--event", event_file(tmp_path))
    assert code == 0
    assert "warning: com.example.cli: hooks/configuration: " in err
    assert "settled: permission none" in out


# -- credentials -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def http_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    rec = tmp_path_factory.mktemp("cli-http") / "rec.jsonl"
    process = subprocess.Popen(
        [PY, "-I", "-S", str(MISBEHAVE), "--http", "127.0.0.1:0", "--record", str(rec)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    assert process.stderr is not None
    port = int(process.stderr.readline())  # readiness: the first stderr line is the port
    threading.Thread(target=process.stderr.read, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{port}", rec
    finally:
        process.kill()
        process.wait(timeout=10)


@pytest.mark.parametrize("as_json", [False, True], ids=["text", "json"])
def test_bearer_token_never_in_cli_output(
    as_json: bool,
    http_server: tuple[str, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    base, rec = http_server
    token = "tok-" + uuid.uuid4().hex
    monkeypatch.setenv("AHP_CLI_TOKEN", token)
    bearer = {"type": "bearer", "tokenEnv": "AHP_CLI_TOKEN"}
    hooks = [
        {
            "id": "com.example.ok",
            "transport": {"type": "http", "url": f"{base}/ok"},
            "authentication": bearer,
            "subscriptions": [intercept()],
        },
        {
            "id": "com.example.e500",
            "transport": {"type": "http", "url": f"{base}/http-500"},
            "authentication": bearer,
            "subscriptions": [intercept("fail-closed")],
        },
    ]
    reg = registration_file(tmp_path, *hooks)
    args = ["--registration", reg, "--event", event_file(tmp_path), "--repeat", "2"]
    code, out, err = run(capsys, *args, *(["--json"] if as_json else []))
    assert code == 1  # the 500 is fail-closed
    assert "http_status" in out
    assert token not in out and token not in err
    entries = [json.loads(x) for x in rec.read_text("ascii").splitlines()]
    mine = [
        e
        for e in entries
        if e["event"] == "message"
        and any(k.lower() == "authorization" and v == f"Bearer {token}" for k, v in e["headers"])
    ]
    assert len(mine) == 4  # two events x two backends, each carrying the token only there
    for entry in mine:
        rest = {
            **entry,
            "headers": [h for h in entry["headers"] if h[0].lower() != "authorization"],
        }
        assert token not in json.dumps(rest)


# -- the installed command -------------------------------------------------------------


def test_the_installed_command_end_to_end(tmp_path: Path) -> None:
    rec = tmp_path / "rec.jsonl"
    reg = registration_file(
        tmp_path, recorder_hook(rec, [DENY], subs=[intercept()], lifecycle="per_event")
    )
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    done = subprocess.run(
        [str(COMMAND), "send", "--registration", reg, "--event", event_file(tmp_path), "--json"],
        capture_output=True,
        timeout=60,
        env=env,
        check=False,
    )
    assert done.returncode == 1, done.stderr
    result = json.loads(done.stdout)["result"]
    assert result["denial"]["reason"] == "Not from the shell."
    assert len(intercepts(rec)) == 1


EXAMPLES = Path(__file__).resolve().parents[3] / "examples" / "registrations"


@pytest.mark.parametrize("example", ["stdio-persistent.json", "stdio-per-event.json"])
def test_an_example_registration_runs_from_any_folder(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    example: str,
) -> None:
    # Its backend's script is named relative to the registration file ("../backends/…"):
    # the backend runs in that file's folder, whatever folder the harness runs in.
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PATH", f"{Path(PY).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    push = {**PARTIAL_EVENT, "tool": {**PARTIAL_EVENT["tool"], "input": {"command": "git push -f"}}}
    code, out, _ = run(
        capsys, "--registration", str(EXAMPLES / example), "--event", event_file(tmp_path, push)
    )
    assert code == 1 and "Force pushes are not allowed." in out
    assert os.listdir(tmp_path) == ["event.json"]

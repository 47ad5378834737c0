"""Per-request cost of the CEL policy backend over persistent stdio, beside the deny-list.

Two sample backends hold the same 50 rules, each "a shell command matching a regex is
denied" (the regexes differ per rule), and answer the same realistic
``hooks/intercept`` requests for ``tool.before``:

- ``denylist``: ``ahp-backend denylist --rules FILE`` with 50 ``[[rules]]`` tables
  (``kind = "shell"``, ``[rules.input] command = REGEX``);
- ``policy``: ``ahp-backend policy --rules FILE`` with 50 ``[[rule]]`` tables
  (``when = 'event.tool.kind == "shell" && event.tool.input.command.matches(r"REGEX")'``);
- ``raw``: a tiny stdlib script answering no effect (the floor), for context.

Half the requests pass every rule (no effect); the other half match one rule, a
different one each time (rule ``7 * i mod 50``), and are denied. A bare NDJSON client
writes one line and reads one line (round trip), ``--requests`` per backend in
``--rounds`` interleaved rounds (the order rotating each round), after a warm-up.
Every reply is checked (id, effects, the deny code) outside the timed region.

Target (issue 17): policy/denylist <= 1.5 per request (medians). ``--check`` exits 1
when it is missed; ``--json`` prints the figures as JSON. Stdlib only, plus the two
backends it runs (and ``kit_stdio.py``'s timing loop, placement and summary helpers).

    uv run python bench/policy_stdio.py [--requests N] [--rounds N] [--check] [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from kit_stdio import (  # this folder is on sys.path
    PLACEMENTS,
    RAW_SOURCE,
    measure_requests,
    placement,
    summary,
)

RULES = 50
TARGET = 1.5
TIMEOUT_S = 60.0
NAMES = ("raw", "denylist", "policy")
SOURCE = "urn:uuid:5b7de29e-a9e0-41a8-bf26-d94b05f0656d"
VERBS = ("push", "reset", "clean", "drop", "purge", "wipe", "prune", "nuke", "zap", "erase")


def regex(i: int) -> str:
    """Rule ``i``'s regex: a tool name, a verb and a force flag (distinct per rule)."""
    return rf"\btool{i}\s+{VERBS[i % len(VERBS)]}\b.*(-f|--force)\b"


def matching_command(i: int) -> str:
    return f"tool{i} {VERBS[i % len(VERBS)]} origin --force"


def write_rules(folder: Path) -> dict[str, Path]:
    deny = folder / "denylist.toml"
    policy = folder / "policy.toml"
    deny.write_text(
        "\n".join(
            f'[[rules]]\nreason = "Rule {i} denies this."\ncode = "com.example.bench.r{i}"\n'
            f"kind = \"shell\"\n[rules.input]\ncommand = '{regex(i)}'\n"
            for i in range(RULES)
        ),
        "utf-8",
    )
    policy.write_text(
        "\n".join(
            f'[[rule]]\nname = "r{i}"\naction = "deny"\nreason = "Rule {i} denies this."\n'
            f'code = "com.example.bench.r{i}"\n'
            f'when = \'event.tool.kind == "shell" && '
            f'event.tool.input.command.matches(r"{regex(i)}")\'\n'
            for i in range(RULES)
        ),
        "utf-8",
    )
    return {"denylist": deny, "policy": policy}


def commands(files: dict[str, Path]) -> dict[str, list[str]]:
    cli = [sys.executable, "-m", "ahp_backends.cli"]
    return {
        "raw": [sys.executable, "-c", RAW_SOURCE],
        "denylist": [*cli, "denylist", "--rules", str(files["denylist"])],
        "policy": [*cli, "policy", "--rules", str(files["policy"])],
    }


def denied_rule(index: int) -> int | None:
    """The rule request ``index`` matches (odd requests), or ``None`` (even: passes)."""
    return (7 * index) % RULES if index % 2 else None


def request_line(index: int) -> bytes:
    rule = denied_rule(index)
    command = "ls -la /repo" if rule is None else matching_command(rule)
    event_id = f"evt_{index:06d}"
    message = {
        "jsonrpc": "2.0",
        "id": event_id,
        "method": "hooks/intercept",
        "params": {
            "protocolVersion": "draft",
            "event": {
                "id": event_id,
                "source": SOURCE,
                "type": "tool.before",
                "time": "2026-08-24T08:51:14Z",
                "harness": {"name": "bench-harness", "version": "1.0"},
                "session": {"id": "sess_123", "cwd": "/repo", "workspaceRoots": ["/repo"]},
                "tool": {
                    "name": "Bash",
                    "kind": "shell",
                    "input": {"command": command, "timeout": 120000},
                    "origin": "native",
                },
                "call": {"id": f"call_{index:06d}"},
                "path": "native",
            },
            "capabilities": {"effects": ["allow", "ask", "deny", "message"]},
            "state": {"candidate": None, "permission": "none"},
        },
    }
    return json.dumps(message, separators=(",", ":")).encode() + b"\n"


def check_reply(name: str, index: int, reply: bytes) -> None:
    """Fail loudly unless ``reply`` answers request ``index`` as ``name`` should."""
    try:
        message = json.loads(reply)
        effects = message["result"]["effects"]
        ok = message["id"] == f"evt_{index:06d}"
    except (ValueError, KeyError, TypeError):
        raise SystemExit(f"{name}: bad reply to request {index}: {reply[:200]!r}") from None
    rule = None if name == "raw" else denied_rule(index)
    want = [] if rule is None else [("deny", f"com.example.bench.r{rule}")]
    got = [(e.get("type"), e.get("code")) for e in effects]
    if not ok or got != want:
        raise SystemExit(f"{name}: unexpected reply to request {index}: {reply[:300]!r}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=1000, help="per backend (default 1000)")
    parser.add_argument("--rounds", type=int, default=50, help="interleaved rounds (default 50)")
    parser.add_argument("--warmup", type=int, default=100, help="untimed requests first")
    parser.add_argument("--check", action="store_true", help="exit 1 when the target is missed")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument(
        "--cpus",
        choices=PLACEMENTS,
        default="any",
        help="where the processes run: any (the scheduler decides), same (one CPU), "
        "split (client on one, backends on another); see kit_stdio.py",
    )
    args = parser.parse_args(argv)
    if min(args.requests, args.rounds, args.warmup) < 1:
        parser.error("counts must be positive")
    requests = max(1, args.requests // args.rounds) * args.rounds
    with tempfile.TemporaryDirectory(prefix="ahp-policy-bench-") as folder:
        files = write_rules(Path(folder))
        with placement(args.cpus) as (where, cpus):
            measured, by_kind = measure_requests(
                requests,
                args.rounds,
                args.warmup,
                cpus,
                commands=commands(files),
                line=request_line,
                check=check_reply,
            )
    per_request = {name: summary(values) for name, values in measured.items()}
    per_kind = {n: {k: summary(v) for k, v in kinds.items()} for n, kinds in by_kind.items()}
    ratio = per_request["policy"]["median"] / per_request["denylist"]["median"]
    report: dict[str, Any] = {
        "settings": {
            "rules": RULES,
            "requests": requests,
            "rounds": args.rounds,
            "warmup": args.warmup,
            "cpus": {"mode": args.cpus, "where": where},
            "units": "us",
        },
        "per_request": per_request,
        "per_request_by_kind": per_kind,
        "targets": [
            {
                "target": "per request policy/denylist",
                "ratio": ratio,
                "at_most": TARGET,
                "pass": ratio <= TARGET,
            }
        ],
    }
    report["pass"] = ratio <= TARGET
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print(f"python {sys.version.split()[0]} on {sys.platform}")
        print(
            f"\nPer request, persistent stdio, {RULES} rules (round trip, us; {requests} "
            f"requests x backend, {args.rounds} interleaved rounds, --cpus {args.cpus}: {where})"
        )
        print(f"  {'backend':<12}{'median':>10}{'p90':>10}{'passed':>10}{'denied':>10}")
        for name in NAMES:
            stats, kinds = per_request[name], per_kind[name]
            print(
                f"  {name:<12}{stats['median']:>10.1f}{stats['p90']:>10.1f}"
                f"{kinds['passed']['median']:>10.1f}{kinds['denied']['median']:>10.1f}"
            )
        verdict = "PASS" if report["pass"] else "MISS"
        print(f"\n  policy/denylist (medians) {ratio:.3f}  target <= {TARGET}  {verdict}")
    return 1 if args.check and not report["pass"] else 0


if __name__ == "__main__":
    sys.exit(main())

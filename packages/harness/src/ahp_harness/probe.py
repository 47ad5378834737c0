"""``python -m ahp_harness.probe``: ``ahp-harness run`` on an ``ahp-conformance promises`` probe.

The judge (``ahp-conformance promises -- python -m ahp_harness.probe``) runs this once per
scenario with two environment variables: ``AHP_REGISTRATION`` (the registration of its
backends) and ``AHP_PROBE`` (a JSON file: ``workspace``, ``call`` ``{tool, kind, input}``
and ``host``, ``"allow"`` or ``"refuse"``; the format is
:mod:`ahp_conformance.promises`'s). This module only translates the probe into an
ordinary run: a one-step script of ``call``, a user permissions file with one rule for
the call's tool (``allow`` or ``deny``, as ``host`` says: the harness's own rules then
allow or refuse it), and ``ahp-harness run --non-interactive`` in ``workspace``, which
it becomes (``exec``: same process, the run's own secret and process protections). The
two files are written beside the probe file (``<probe>.script.json``,
``<probe>.permissions.toml``), never into the workspace. A probe that cannot be read is
exit status 2 with the reason on stderr.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any, NoReturn


def _fail(text: str) -> NoReturn:
    print(f"ahp-harness probe: {text}", file=sys.stderr)
    raise SystemExit(2)


def command(environ: dict[str, str]) -> list[str]:
    """The ``ahp-harness run`` command line for the probe ``environ`` names (files written)."""
    probe_path = environ.get("AHP_PROBE")
    registration = environ.get("AHP_REGISTRATION")
    if not probe_path or not registration:
        _fail("AHP_PROBE and AHP_REGISTRATION must both name files (ahp-conformance promises)")
    try:
        probe: Any = json.loads(Path(probe_path).read_text("utf-8"))
        call, workspace, host = probe["call"], probe["workspace"], probe["host"]
        tool, tool_input = call["tool"], call["input"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        _fail(f"AHP_PROBE {probe_path}: not a probe ({type(exc).__name__}: {exc})")
    if host not in ("allow", "refuse") or not isinstance(tool, str):
        _fail(f'AHP_PROBE {probe_path}: "host" must be "allow" or "refuse", "tool" a name')
    script = Path(f"{probe_path}.script.json")
    script.write_text(json.dumps([{"tool": tool, "input": tool_input}]), "utf-8")
    permissions = Path(f"{probe_path}.permissions.toml")
    decision = "allow" if host == "allow" else "deny"
    permissions.write_text(
        f"[[rules]]\ndecision = {json.dumps(decision)}\ntool = {json.dumps(tool)}\n"
        f'reason = "the probe says the host\'s own rules {host} this call"\n',
        "utf-8",
    )
    return [
        sys.executable,
        "-m",
        "ahp_harness.cli",
        "run",
        "--workspace",
        str(workspace),
        "--registration",
        registration,
        "--permissions",
        str(permissions),
        "--model",
        f"script:{script}",
        "--non-interactive",
    ]


def main() -> NoReturn:
    argv = command(dict(os.environ))
    os.execv(argv[0], argv)


if __name__ == "__main__":
    main()

"""The harness judge's two halves (``ahp-conformance harness``; :mod:`ahp_conformance.harness_judge`
is the command and says what is judged).

- :mod:`.contract_runs`: the contract's scenarios, the fake backend as the contract's server;
  the client's report, what the server received, how it was framed.
- :mod:`.registration_runs`: beyond the contract (the kit's ``registration`` extension):
  failure classes under both policies, deadlines, short-circuit after deny.
"""

from __future__ import annotations

import sys

FAKE = (sys.executable, "-m", "ahp_conformance.fake_backend")
"""The fake backend's command (:mod:`ahp_conformance.fake_backend`)."""


def progress(text: str) -> None:
    print(f"ahp-conformance harness: {text}", file=sys.stderr, flush=True)

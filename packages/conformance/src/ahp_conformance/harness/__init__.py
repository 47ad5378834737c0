"""The harness judge's two halves (``ahp-conformance harness``; :mod:`ahp_conformance.harness_judge`
is the command and says what is judged).

- :mod:`.contract_runs`: the contract's scenarios, the fake backend as the contract's server;
  the client's report, what the server received, how it was framed.
- :mod:`.registration_runs`: beyond the contract (the kit's ``registration`` extension):
  failure classes under both policies, deadlines, short-circuit after deny.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator, Mapping

FAKE = (sys.executable, "-P", "-m", "ahp_conformance.fake_backend")
"""The fake backend's command (:mod:`ahp_conformance.fake_backend`).

``-P``: the harness under judgment starts it in a folder of its choosing (often the
folder the judge runs in, or its workspace), and plain ``-m`` would import a planted
``ahp_conformance/`` from there. Not ``-I``: the fake must import this judge's own
installation, wherever this Python finds it."""


def progress(text: str) -> None:
    print(f"ahp-conformance harness: {text}", file=sys.stderr, flush=True)


@contextlib.contextmanager
def client_env(values: Mapping[str, str]) -> Iterator[None]:
    """``values`` in this process's environment while client adapters run (they inherit
    it); the old values come back after."""
    old = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, value in old.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value

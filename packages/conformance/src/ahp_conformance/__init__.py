"""ahp-conformance: judge an AHP backend or harness against the draft, requirement by requirement.

- :mod:`ahp_conformance.backend_judge` (and :mod:`ahp_conformance.backend`, one module per
  check group) — ``ahp-conformance backend``: probes any backend (stdio persistent, stdio
  per event, HTTP) with what the draft allows and forbids.
- :mod:`ahp_conformance.harness_judge` (and :mod:`ahp_conformance.harness`) —
  ``ahp-conformance harness``: drives any harness through the upstream interop contract's
  client role and judges what it sent and settled.
- :mod:`ahp_conformance.fake_backend` — ``ahp-conformance fake-backend``: the scripted
  backend those checks use (scenario replay or a named fault mode), usable on its own.
- :mod:`ahp_conformance.matrix` — ``ahp-conformance matrix``: every client x server pairing
  of interop adapters over stdio and HTTP; :mod:`ahp_conformance.kit_client` and
  :mod:`ahp_conformance.kit_server` are the kit's own adapters (``interop/adapter.json``).
- :mod:`ahp_conformance.fixtures` (the official requirement list, profiles, fixture folders),
  :mod:`ahp_conformance.scenarios` (the contract's scenario files),
  :mod:`ahp_conformance.contract` (the contract's adapters, configs, control endpoint),
  :mod:`ahp_conformance.report` (checks, verdicts by requirement and profile, output).
"""

from ahp_protocol import __version__  # the kit's one version

__all__ = ["__version__"]

"""ahp-harness: a small agent harness that implements AHP natively.

The model proposes tool calls; each goes through the gate in
:mod:`ahp_harness.hooks` (AHP ``tool.before`` folded with the host's own
permissions and sandbox), runs or is refused, and ``tool.after`` reports it.
"""

from ahp_protocol import __version__  # the kit's one version

__all__ = ["__version__"]

"""This harness's side of :mod:`ahp_harness.hooks`: its tools, permissions and sandbox.

:mod:`ahp_harness.hooks` is the file another harness copies; it declares the host pieces
it calls as small ``Protocol``\\ s and imports nothing of ``ahp_harness``. This module is
the other half, the part a copier replaces with their own: it adapts

- :mod:`ahp_harness.tools` (and the :class:`~ahp_harness.sandbox.Sandbox` each run
  needs) to the gate's ``ToolTable``;
- :class:`~ahp_harness.permissions.Permissions` and the sandbox to the gate's
  ``HostPolicy`` (the host's own layers, folded by :mod:`ahp_harness.precedence`);

and :func:`build_gate` puts a gate together for one :class:`~ahp_protocol.client.SessionHooks`.
:data:`HARNESS` is the identity every event of this harness carries.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from ahp_harness import __version__

if TYPE_CHECKING:
    from ahp_protocol.client import SessionHooks

    from ahp_harness.hooks import Approver, Gate, Reporter
    from ahp_harness.permissions import Permissions
    from ahp_harness.sandbox import Sandbox

__all__ = ["HARNESS", "build_gate"]

HARNESS = {"name": "ahp-harness", "version": __version__}
"""``harness`` of every event (draft §3.1)."""


def _no_audit(kind: str, record: Mapping[str, Any]) -> None:
    pass


def build_gate(
    session: SessionHooks,
    *,
    permissions: Permissions,
    sandbox: Sandbox,
    approve: Approver,
    reporter: Reporter | None = None,
    audit: Callable[[str, Mapping[str, Any]], None] = _no_audit,
) -> Gate:
    """The gate of one session: this harness's tools, ``permissions`` and ``sandbox``.

    ``session`` carries the envelope and the backends (``session.hooks``); ``approve``
    answers prompts; ``reporter`` shows the user each resolved call and every backend
    message; ``audit(kind, record)`` receives the ``hook``/``call``/``exchange`` records.
    The caller closes ``sandbox`` (and the ``Hooks``) when the session is over.
    """
    from ahp_harness.hooks import Envelope, Gate

    envelope = Envelope(
        source=session.hooks.source,
        session_id=session.id,
        cwd=session.cwd,
        roots=list(session.roots),
    )
    return Gate(
        envelope=envelope,
        permissions=permissions,
        sandbox=sandbox,
        approve=approve,
        dispatcher=session.hooks.dispatcher,
        audit=audit,
        reporter=reporter,
    )

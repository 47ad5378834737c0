"""Test doubles for AHP, for the kit's tests and yours.

- :class:`MemoryTransport` and :func:`memory_transports`: a backend object (a server-kit
  :class:`~ahp_protocol.server.Backend`, or :class:`Misbehaving`) answers in your
  process, read with the client's own frame rules; give
  ``Dispatcher(..., transport=memory_transports({...}))`` and a whole chain runs with no
  process or socket;
- :class:`Misbehaving` and :data:`FAULTS`: one scripted backend that fails in every way
  a harness must survive (hang, crash, late, garbage, wrong ids, stray frames, errors,
  effects it was not granted, ...), by name, in process;
- :func:`tool_before`: a valid ``tool.before`` event with fresh ids, to send;
- the same backend as a process: ``python -m ahp_protocol.testing --fault MODE``
  (stdio, persistent or per_event) or ``--http 127.0.0.1:0`` (:mod:`.serve`).

For example, that a fail-closed subscription turns a hanging backend into a denial::

    hooks = Dispatcher(registration, capabilities=caps,
                       transport=memory_transports({"org.example.dlp": Misbehaving("hang")}))
    result = await hooks.intercept(tool_before("rm -rf /"))
    assert result.synthetic_denial
"""

from ahp_protocol.testing.events import tool_before
from ahp_protocol.testing.faults import FAULTS, Answer, Misbehaving
from ahp_protocol.testing.memory import MemoryTransport, Scripted, memory_transports

__all__ = [
    "FAULTS",
    "Answer",
    "MemoryTransport",
    "Misbehaving",
    "Scripted",
    "memory_transports",
    "tool_before",
]

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
- a real OAuth authorization server (Authlib; HTTPS on loopback with a test CA from
  :func:`~ahp_protocol.testing.oauth_server.make_pki`), as a process:
  ``python -m ahp_protocol.testing.oauth_server CONFIG`` (:mod:`.oauth_server`; the
  ``oauth`` extra).

For example, that a fail-closed subscription turns a hanging backend into a denial::

    hooks = Dispatcher(registration, capabilities=caps,
                       transport=memory_transports({"org.example.dlp": Misbehaving("hang")}))
    result = await hooks.intercept(tool_before("rm -rf /"))
    assert result.synthetic_denial
"""

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ahp_protocol.testing.events import tool_before
    from ahp_protocol.testing.faults import FAULTS, Answer, Misbehaving
    from ahp_protocol.testing.memory import MemoryTransport, Scripted, memory_transports
else:
    _HOMES = {
        "tool_before": "events",
        "FAULTS": "faults",
        "Answer": "faults",
        "Misbehaving": "faults",
        "MemoryTransport": "memory",
        "Scripted": "memory",
        "memory_transports": "memory",
    }

    def __getattr__(name: str) -> object:
        # Lazy: the scripted backend's process (``python -m ahp_protocol.testing``, spawned
        # once per event over per_event stdio) needs neither the client nor pydantic,
        # which the in-memory transport brings (about 100 ms at each start).
        home = _HOMES.get(name)
        if home is None:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        import importlib

        return getattr(importlib.import_module(f"{__name__}.{home}"), name)


__all__ = [
    "FAULTS",
    "Answer",
    "MemoryTransport",
    "Misbehaving",
    "Scripted",
    "memory_transports",
    "tool_before",
]

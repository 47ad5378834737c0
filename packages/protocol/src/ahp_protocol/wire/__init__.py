"""The wire layer: everything that travels, with no I/O.

Submodules are imported on demand (``from ahp_protocol.wire import effects``);
:mod:`~ahp_protocol.wire.jsonrpc`, :mod:`~ahp_protocol.wire.catalogue`,
:mod:`~ahp_protocol.wire.kinds` (the tool-kind vocabulary) and
:mod:`~ahp_protocol.wire.routing` (subscription matching and failure policy) use the
standard library only, the rest are pydantic models and pure functions.
"""

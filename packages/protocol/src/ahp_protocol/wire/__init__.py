"""The wire layer: everything that travels, with no I/O.

Submodules are imported on demand (``from ahp_protocol.wire import effects``);
:mod:`~ahp_protocol.wire.jsonrpc` and :mod:`~ahp_protocol.wire.catalogue` use the
standard library only, the rest are pydantic models and pure functions.
"""

"""The backend side of AHP: write a handler per event, serve it over stdio or HTTP.

```python
from ahp_protocol.server import Backend, InterceptRequest
from ahp_protocol.wire.effects import DenyEffect

backend = Backend("com.example.guard")

@backend.intercept("tool.before")
def guard(request: InterceptRequest):
    if "rm -rf" in str(request.tool_input.get("command", "")):
        return DenyEffect(reason="No recursive deletes.", code="com.example.rm_rf")
    return None

if __name__ == "__main__":
    backend.run()  # stdio persistent | --once (per_event) | --http HOST:PORT
```

This package exports the authoring API only (:class:`Backend`,
:class:`InterceptRequest`, and :class:`Reply`, what a transport gets from
:meth:`Backend.respond`). Transports live in :mod:`ahp_protocol.server.stdio`
and :mod:`ahp_protocol.server.asgi` and are imported on demand: importing this
package never imports uvicorn, httpx or anyio.
"""

from ahp_protocol.server.backend import (
    Backend,
    InterceptHandler,
    InterceptRequest,
    InterceptResult,
    ObserveHandler,
    Reply,
)

__all__ = [
    "Backend",
    "InterceptHandler",
    "InterceptRequest",
    "InterceptResult",
    "ObserveHandler",
    "Reply",
]

"""``kit_denylist``'s backend served by ``serve_http`` with the limits given in the
environment (short deadlines and few connections, so tests run fast); a test backend
for ``test_http_hardening.py``, not a test module.

``KIT_HEADER_TIMEOUT``, ``KIT_BODY_TIMEOUT`` (seconds), ``KIT_MAX_CONNECTIONS``,
``KIT_MAX_FRAME_BYTES``; ``KIT_TOKEN_ENV`` names the variable holding a bearer token.
Only the limits this ``serve_http`` takes are passed, so the tests can be run against
an older kit (without them) to see them fail on what it does, not on a TypeError.
"""

from __future__ import annotations

import inspect
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from ahp_protocol.server.asgi import serve_http
from kit_denylist import backend

if __name__ == "__main__":
    env = os.environ
    token_env = env.get("KIT_TOKEN_ENV")
    limits = {
        "max_frame_bytes": int(env.get("KIT_MAX_FRAME_BYTES", str(backend.max_frame_bytes))),
        "bearer_token": None if token_env is None else os.environ[token_env],
        "header_timeout": float(env.get("KIT_HEADER_TIMEOUT", "10")),
        "body_timeout": float(env.get("KIT_BODY_TIMEOUT", "10")),
        "max_connections": int(env.get("KIT_MAX_CONNECTIONS", "64")),
    }
    taken = inspect.signature(serve_http).parameters
    serve_http(backend, "127.0.0.1", 0, **{k: v for k, v in limits.items() if k in taken})

"""A test backend for ``--workers``: every intercept answer names the process that made it."""

from __future__ import annotations

import os

from ahp_protocol.server import Backend, InterceptRequest

backend = Backend("com.example.kit.pid")


@backend.intercept("tool.*")
def whoami(request: InterceptRequest) -> object:
    return [{"type": "message", "text": f"pid {os.getpid()}"}]


if __name__ == "__main__":
    backend.run()

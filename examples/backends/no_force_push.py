"""A complete AHP backend in a dozen lines: deny force pushes, allow everything else.

The pattern is kept short to read: it catches `git push --force` and `-f`, not `-fu`
or `+main`. For a guard-rail to copy, see the force-push rule of
examples/backends/denylist.toml, which says what it catches and what it does not.

Run it the way a harness would:
    python examples/backends/no_force_push.py               # stdio, persistent
    python examples/backends/no_force_push.py --once        # stdio, one event per process
    python examples/backends/no_force_push.py --http 127.0.0.1:8765
"""

import re

from ahp_protocol.server import Backend, InterceptRequest
from ahp_protocol.wire.effects import DenyEffect

backend = Backend("com.example.no-force-push")
FORCE_PUSH = re.compile(r"\bgit\s+push\b.*(--force\b|-f\b)")


@backend.intercept("tool.before")
def no_force_push(request: InterceptRequest) -> DenyEffect | None:
    if FORCE_PUSH.search(str(request.tool_input.get("command", ""))):
        return DenyEffect(reason="Force pushes are not allowed.", code="com.example.force_push")
    return None  # no effect: the harness's own permissions still decide


if __name__ == "__main__":
    backend.run()

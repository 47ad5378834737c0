"""``kit_denylist``'s backend served by ``serve_http`` as an OAuth resource server (a test
backend for ``test_oauth_http.py``, not a test module).

``KIT_PORT``: the loopback port; ``KIT_RESOURCE``, ``KIT_ISSUER``, ``KIT_SCOPES``
(space-separated) and ``AHP_CA_BUNDLE`` (the CA the issuer's certificate comes from)
configure :class:`~ahp_protocol.server.oauth.ResourceServer`.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from ahp_protocol.server.asgi import serve_http
from ahp_protocol.server.oauth import ResourceServer
from kit_denylist import backend

if __name__ == "__main__":
    env = os.environ
    oauth = ResourceServer(
        resource=env["KIT_RESOURCE"],
        issuer=env["KIT_ISSUER"],
        scopes=env.get("KIT_SCOPES", "").split(),
        ca_bundle=env.get("AHP_CA_BUNDLE"),
    )
    serve_http(backend, "127.0.0.1", int(env["KIT_PORT"]), oauth=oauth)

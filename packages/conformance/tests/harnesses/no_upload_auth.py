"""A bad client adapter for the upload checks: the kit's client, uploading without the
upload's own credentials (its ``auth`` is ignored: no ``Authorization`` is sent)."""

import sys
from typing import Any

from ahp_conformance import kit_client
from ahp_protocol.client import uploads

_headers = uploads._headers


def anonymous(*args: Any) -> list[tuple[str, str]]:
    return [(k, v) for k, v in _headers(*args) if k.lower() != "authorization"]  # the bug


uploads._headers = anonymous

if __name__ == "__main__":
    sys.exit(kit_client.main())

"""A bad client adapter for the upload checks: the kit's client, trusting any receipt.

It runs :mod:`ahp_conformance.kit_client` with the receipt check of
:mod:`ahp_protocol.client.uploads` replaced by one that takes the receipt's ``ref``
without comparing its ``size`` and ``sha256`` with the bytes sent: a harness that
publishes a ref its receiver never confirmed for those bytes.
"""

import json
import sys

from ahp_conformance import kit_client
from ahp_protocol.client import uploads


def trusting(raw: bytes, attachment: object) -> str:
    return str(json.loads(raw)["ref"])  # the bug under judgment: no size/sha256 check


uploads._confirmed = trusting

if __name__ == "__main__":
    sys.exit(kit_client.main())

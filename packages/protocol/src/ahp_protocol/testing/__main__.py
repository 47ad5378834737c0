"""``python -m ahp_protocol.testing``: the scripted misbehaving backend as a process."""

import sys

from ahp_protocol.testing.serve import main

sys.exit(main())

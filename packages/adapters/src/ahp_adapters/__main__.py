"""``python -m ahp_adapters``: the same as the ``ahp-adapter`` command."""

import sys

from ahp_adapters.cli import main

sys.exit(main())

"""``python -m bayesdp.cli``: the same as the ``bayesdp`` command."""

import sys

from . import console_main

sys.exit(console_main())

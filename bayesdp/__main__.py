"""``python -m bayesdp``: the same as the ``bayesdp`` command."""

import sys

from .cli import console_main

sys.exit(console_main())

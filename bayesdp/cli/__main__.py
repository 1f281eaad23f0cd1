"""``python -m bayesdp.cli``: the same as the ``bayesdp`` command."""

import sys

from . import main

sys.exit(main())

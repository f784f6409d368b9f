"""``python -m gluon.layouts``: see ``gluon.layouts.cli``."""

import sys

from .cli import main

sys.exit(main())

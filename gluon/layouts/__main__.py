"""``python -m gluon.layouts``: see ``gluon.layouts.cli``."""

import sys

from gluon.layouts.cli import main

sys.exit(main())

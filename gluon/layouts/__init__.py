"""Layouts over GF(2), as Gluon users see them: every layout family, ``LinearLayout`` and
``to_linear_layout``, plus the tools built on them (``gluon-layouts`` CLI in ``cli.py``,
drawings in ``render.py``).

The layouts themselves are IR vocabulary and live in the core, ``shared_codegen.layouts``
(families, GF(2) algebra, the conversion planner, bank conflicts, layout relations); this
package re-exports them so users' names do not change.
"""

from shared_codegen.layouts import *  # noqa: F401,F403
from shared_codegen.layouts import __all__  # noqa: F401

"""proton.record: the start or end of a named timeline region (gluon.timeline).

Importing this package registers the op (`definition`) and its lowering rule."""

from shared_codegen.ops.profile import definition, lowering  # noqa: F401
